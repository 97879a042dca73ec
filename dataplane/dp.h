/*
 * The dataplane as the node sees it: everything between the NIC and "here
 * is a UDP datagram for port P from ip:port; send this reply".
 *
 * Life cycle (all on the process's main thread unless noted):
 *
 *   dp_init(&dp, &cfg)          EAL init from the operator's EAL arguments,
 *                               port, pool, per-lcore state. Allocates.
 *   dp_udp_register(&dp, ...)   one handler per local UDP port (client port,
 *                               raft peer port, admin, shard ports).
 *   dp_set_work(&dp, fn, arg)   the per-iteration hook (raft ticks, io_uring
 *                               reaping, batching deadlines).
 *   dp_add_wake_fd(&dp, fd)     optional: an fd (io_uring eventfd) whose
 *                               readability must wake an idle lcore 0; the
 *                               work hook must consume it (read it), or
 *                               lcore 0 never sleeps.
 *   dp_run(&dp)                 runs the lcore loops: the calling thread
 *                               becomes lcore 0; returns after dp_stop().
 *   dp_stop(&dp)                from any thread or a signal handler.
 *   dp_deinit(&dp)              after dp_run() returned.
 *
 * On the lcores, from a handler or the work hook only (never another
 * thread): dp_udp_reply(), dp_udp_send(). Both copy the payload into an
 * mbuf, so the caller keeps its buffer. A datagram handed to a handler is
 * valid only during the call (it lives in the RX mbuf).
 *
 * With cfg.rx_forward and several lcores, handlers run on lcore 0 only
 * (the work hook still runs on every lcore): lcores 1.. copy their
 * datagrams to lcore 0 through rte_rings (rx_forward.h); the datagram a
 * handler then sees lives in a hand-off message, equally valid only during
 * the call.
 *
 * After dp_run() starts, lcores never allocate: each marks its thread with
 * hasp_alloc_forbid_thread(true) and the integration test checks the
 * forbidden counter stays zero. Everything is sized in dp_init().
 */
#ifndef HASP_DATAPLANE_DP_H
#define HASP_DATAPLANE_DP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dataplane/arp_cache.h"
#include "dataplane/classify.h"
#include "dataplane/dp_stats.h"
#include "dataplane/eth.h"
#include "dataplane/idle.h"
#include "dataplane/port.h"
#include "dataplane/rx_forward.h"
#include "dataplane/tx_post.h"

#define DP_LCORES_MAX PORT_QUEUES_MAX
#define DP_RX_BURST 32u
#define DP_TX_BUFFER 64u
/* Gratuitous ARPs at start, 1 s apart and then doubling (0, 1, 3, 7, 15 s):
 * the port is often attached to a bridge or brought up only after the
 * process is ready, and a lone announcement at start would be lost. */
#define DP_ANNOUNCE_COUNT 5u

struct dp_lcore;

/* One received datagram for a registered port. Pointers are valid only
 * during the handler call. Addresses and ports in host order. */
struct dp_datagram {
	uint32_t src_ip;
	uint16_t src_port;
	uint32_t dst_ip;
	uint16_t dst_port;
	struct eth_addr src_mac; /* next hop for the reply */
	const uint8_t *payload;
	uint16_t payload_size;
};

/* Called on the lcore that received the datagram. May call dp_udp_reply()
 * and dp_udp_send() any number of times. */
typedef void dp_udp_handler_fn(struct dp_lcore *lc, const struct dp_datagram *dg, void *arg);

/* Called once per loop iteration on every lcore, after the RX burst was
 * handled. Returns true if it did work (keeps the lcore from idling) and
 * lowers *deadline_ns (CLOCK_MONOTONIC ns, initialised to UINT64_MAX) to the
 * next time it must run; an idle lcore sleeps until then at the latest. */
typedef bool dp_work_fn(struct dp_lcore *lc, uint64_t now_ns, uint64_t *deadline_ns, void *arg);

/* Called on lcore `lc` (index >= 1) for each datagram lcore 0 posted to it
 * with dp_post(): the handler finishes the message (it may rewrite the
 * payload in place) and sends it with dp_udp_send(lc, ...), or drops it. */
typedef void dp_post_fn(struct dp_lcore *lc, struct tx_post_msg *m, void *arg);

struct dp_config {
	int eal_argc;            /* EAL arguments as given by the operator */
	char **eal_argv;         /* (argv[0] is the program name) */
	const char *port_name;   /* NULL: the only port */
	struct eth_addr mac;     /* our MAC, e.g. 02:77:00:00:00:NN */
	uint32_t ip;             /* our IPv4 address, host order */
	uint8_t prefix_len;      /* on-link subnet, e.g. 24 */
	uint32_t gateway;        /* next hop for off-link; 0: none */
	uint16_t mtu;            /* 0: HASP_MTU_DEFAULT */
	enum idle_mode idle;     /* IDLE_POLL on real hardware */
	uint32_t idle_spin;      /* 0: IDLE_SPIN_DEFAULT */
	uint16_t rxd_count;      /* 0: 512 */
	uint16_t txd_count;      /* 0: 512 */
	uint32_t arp_entries;    /* 0: 256 (a power of two) */
	uint32_t arp_pending;    /* 0: 4 datagrams parked per unresolved entry */
	/* With more than one lcore: lcores 1.. receive only and hand every
	 * datagram for a registered port to lcore 0 through rx_forward.h, so
	 * handlers run on lcore 0 alone (a single-threaded node). false: each
	 * lcore calls the handlers itself (hasp-dp-echo). No effect on one
	 * lcore, which always handles its datagrams zero-copy. */
	bool rx_forward;
};

/* Per-lcore state, cache-line aligned; owned by its lcore. */
struct dp_lcore {
	struct dp *dp;
	uint32_t index;          /* 0 .. lcore_count-1; also the queue id */
	uint32_t lcore_id;       /* DPDK lcore id */
	pid_t tid;
	uint64_t now_ns;         /* time of this iteration */
	struct rte_mbuf *tx[DP_TX_BUFFER];
	uint16_t tx_count;
	uint64_t tx_first_ns;    /* when the oldest buffered frame was queued */
	struct arp_cache arp;
	struct rte_ring *arp_inbox; /* (ip, mac) learned on other lcores */
	struct idle idle;
	uint64_t announce_ns;    /* lcore 0: next gratuitous ARP */
	uint32_t announce_count; /* lcore 0: gratuitous ARPs sent so far */
	bool fwd_pushed;         /* RX lcore: this burst forwarded a datagram */
	uint64_t post_targets;   /* lcore 0: bit i, it posted to lcore i since the last wake check */
	struct dp_stats stats;
	/* An lcore others hand messages to (lcore 0 with rx_forward, lcores
	 * 1.. with dp_post()): set just before it sleeps, cleared when it
	 * wakes; producers write its wake eventfd only while it is set (the
	 * race analysis is at lcore_loop.c's lcore_sleep()). Own cache line:
	 * producers read it after every burst they hand over. */
	atomic_bool asleep __attribute__((aligned(64)));
} __attribute__((aligned(64)));

struct dp_port_handler {
	dp_udp_handler_fn *fn;
	void *arg;
};

struct dp {
	struct dp_config cfg;
	struct port port;
	struct classify_config classify;
	struct dp_port_handler handlers[CLASSIFY_PORTS_MAX];
	dp_work_fn *work;
	void *work_arg;
	uint32_t subnet_mask;
	uint32_t lcore_count;
	struct dp_lcore *lcores;  /* lcore_count entries */
	struct rx_forward fwd;    /* rx_forward and more than one lcore */
	bool fwd_on;
	struct tx_post post;      /* dp_set_post_handler() and more than one lcore */
	bool post_on;
	dp_post_fn *post_fn;
	void *post_arg;
	int wake_fds[IDLE_FDS_MAX];
	uint32_t wake_fd_count;
	atomic_bool stopping;
	bool eal_up;
	bool running;
};

/* Brings up EAL and the port. Dataplane lcores are the EAL's lcores (-l):
 * the main one plus every worker, one queue pair each. Returns 0 or
 * -HASP_EINVAL (config), -HASP_ESYS (EAL), or a port_open() error. On error
 * everything acquired is released; EAL cannot be re-initialised. */
int dp_init(struct dp *dp, const struct dp_config *cfg) __attribute__((warn_unused_result));

/* Registers `fn` for datagrams to local UDP port `udp_port`. Before dp_run().
 * -HASP_EEXIST (already registered), -HASP_EFULL (CLASSIFY_PORTS_MAX). */
int dp_udp_register(struct dp *dp, uint16_t udp_port, dp_udp_handler_fn *fn, void *arg)
	__attribute__((warn_unused_result));

/* Sets the per-iteration hook. Before dp_run(). */
void dp_set_work(struct dp *dp, dp_work_fn *fn, void *arg);

/* Lets lcore 0 hand datagrams to send to the other lcores (dp_post(),
 * tx_post.h); `fn` finishes and sends each on the lcore it was posted to.
 * After dp_init(), before dp_run(). Returns 0, -HASP_EINVAL (one lcore, or
 * more than 64) or -HASP_ENOMEM. */
int dp_set_post_handler(struct dp *dp, dp_post_fn *fn, void *arg) __attribute__((warn_unused_result));

/* Lcore 0: copies a datagram for lcore `target` (1..lcore_count-1) to send
 * (its post handler runs there). Returns true when queued, false when not
 * (counted: post_ring_full, post_no_msg; the caller may send it itself). A
 * target that sleeps is woken before lcore 0 next sleeps or polls. */
bool dp_post(struct dp_lcore *lc, uint32_t target, const struct tx_post_msg *hdr,
	     const void *payload) __attribute__((warn_unused_result));

/* Adds an fd that wakes idle lcore 0 while readable (level-triggered: the
 * work hook must read it). Before dp_run(). -HASP_EFULL past IDLE_FDS_MAX. */
int dp_add_wake_fd(struct dp *dp, int fd) __attribute__((warn_unused_result));

/* Runs every lcore loop until dp_stop(). Returns 0 or -HASP_ESYS. */
int dp_run(struct dp *dp) __attribute__((warn_unused_result));

/* Asks every lcore to return and wakes idle ones. Async-signal-safe. */
void dp_stop(struct dp *dp);

/* Releases the port, pool and lcore state, and cleans up the EAL. */
void dp_deinit(struct dp *dp);

/* Sums the per-lcore counters (readers tolerate a slightly stale view). */
void dp_stats_sum(const struct dp *dp, struct dp_stats *total);

/* Sums the per-lcore ARP cache counters. */
void dp_arp_stats_sum(const struct dp *dp, struct arp_cache_stats *total);

/* Sends `payload` back to the sender of `dg`, from dg's local port, to its
 * Ethernet source (no ARP needed). Lcore context only. Returns 0,
 * -HASP_ETOOBIG (over HASP_DATAGRAM_SIZE_MAX) or -HASP_ENOMEM (pool empty);
 * every failure is also counted. */
int dp_udp_reply(struct dp_lcore *lc, const struct dp_datagram *dg, const void *payload,
		 size_t payload_size);

/* Sends a datagram to dst_ip:dst_port from local port src_port, resolving
 * the next hop through this lcore's ARP cache (the datagram is parked if the
 * MAC is not known yet). Lcore context only. Returns 0 (sent or parked),
 * -HASP_ETOOBIG, -HASP_ENOMEM, -HASP_ENOENT (no route), -HASP_EFULL (ARP
 * queue full: dropped). */
int dp_udp_send(struct dp_lcore *lc, uint32_t dst_ip, uint16_t dst_port, uint16_t src_port,
		const void *payload, size_t payload_size);

/* The calling lcore's index (0..lcore_count-1). */
static inline uint32_t dp_lcore_index(const struct dp_lcore *lc)
{
	return lc->index;
}

/* CLOCK_MONOTONIC ns read at the start of this loop iteration: handlers and
 * the work hook use it instead of reading the clock again. */
static inline uint64_t dp_lcore_now_ns(const struct dp_lcore *lc)
{
	return lc->now_ns;
}

/* Dataplane lcores (valid after dp_init()). */
static inline uint32_t dp_lcore_count(const struct dp *dp)
{
	return dp->lcore_count;
}

#endif
