/*
 * The inside of the hasp-bench engine, shared by tools/bench_session.c
 * (client sessions: requests, replies, events, timers) and
 * tools/bench_engine.c (admission, release bursts, the phases of a run and
 * the public step API). Not for other users: tools/bench_engine.h is the
 * contract.
 */
#ifndef HASP_TOOLS_BENCH_ENGINE_IMPL_H
#define HASP_TOOLS_BENCH_ENGINE_IMPL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "common/prng.h"
#include "tools/bench_arrival.h"
#include "tools/bench_engine.h"
#include "tools/bench_rounds.h"

#define NODES_MAX 16u                /* configured + learned node addresses */
#define SCAN_NS 2000000ull           /* timer scan period: 2 ms */
#define BACKOFF_NS 20000000ull       /* after UNAVAILABLE/OVERLOADED/unknown leader */
#define OPENS_INFLIGHT_MAX 256u      /* session opens at once during start-up */
#define OPEN_PHASE_NS 10000000000ull /* start-up gives up on sessions after 10 s */
#define REACQUIRE_MAX 8u             /* fresh ACQUIREs after a wait found the lock free */
#define CLOSE_PHASE_NS 2000000000ull /* SESSION_CLOSE answers waited for: at least this */
#define CLOSES_INFLIGHT_MAX 256u      /* SESSION_CLOSEs at once (each a committed command) */

enum client_state {
	C_NEW,      /* no session */
	C_OPENING,  /* SESSION_OPEN in flight */
	C_IDLE,     /* session open, no operation */
	C_ACQUIRE,  /* ACQUIRE in flight */
	C_WAITING,  /* QUEUED: waiting for LOCK_GRANTED */
	C_HOLDING,  /* burst holder: granted, told to keep it */
	C_RELEASE,  /* RELEASE in flight */
	C_OP,       /* single-request operation (keepalive, KV) in flight */
	C_WATCHING, /* burst watcher: WATCH registered */
	C_CLOSING,  /* SESSION_CLOSE in flight, or (opcode 0) still to send */
	C_DONE,     /* closed, or failed to open */
};

struct client {
	struct auth_key session_key; /* cfg->auth: derived when the open is answered */
	uint64_t session_id;
	uint64_t nonce;
	uint64_t seq;           /* of the request in flight, or the last one */
	uint64_t token;
	uint64_t op_start_ns;   /* intended start of the current operation */
	uint64_t req_first_ns;  /* first send of the request in flight */
	uint64_t req_due_ns;    /* retransmit when now >= this */
	uint64_t acq_first_ns;  /* first send of the (last) ACQUIRE */
	uint64_t renewed_ns;    /* last answer to a command: it renewed the session */
	uint64_t wait_since_ns; /* queued, or last re-read */
	uint32_t key;
	uint16_t node;
	uint8_t state;
	uint8_t opcode;         /* request in flight; 0: none */
	uint32_t watch_epoch;   /* burst watcher: leader epoch of its WATCH */
	uint8_t reacquires;
	uint8_t redirects;      /* NOT_LEADER answers to the request in flight */
	bool measured;          /* the current operation counts */
	bool in_send_queue;
	bool put;               /* KV: this operation is a put */
	bool hold;              /* burst holder: do not release on grant */
	bool told;              /* burst: told in this round */
	bool background;        /* the request in flight is a background keepalive */
	/* storm: waiter granted / watcher's last event (type, gap marker), when */
	bool gap;
	uint8_t event_type;
	uint64_t told_ns;
	/* storm watcher: the identity of the last event received (what the
	 * leader's WATCH_STATUS is compared with) and, once that showed a
	 * lost event, the holder's token its re-read saw (0: none), when */
	uint64_t event_index;
	uint32_t event_sub;
	uint64_t read_token;
	uint64_t read_ns;
};

enum phase { PHASE_OPEN, PHASE_RUN, PHASE_CLOSE, PHASE_DONE };

struct bench_engine {
	const struct bench_config *cfg;
	struct bench_result *res;
	enum phase phase;
	uint64_t phase_start_ns, next_scan_ns, drain_end_ns;
	uint32_t open_next; /* sessions opened or being opened */
	bool failed;        /* no session could be opened */
	struct sockaddr_in nodes[NODES_MAX];
	uint32_t node_count;
	uint16_t leader_hint;
	uint32_t leader_epoch; /* changes of leader_hint seen */
	struct client *clients;
	uint32_t client_count;
	/* session id -> client index + 1, open addressing, 2x oversized */
	uint64_t *hash_keys;
	uint32_t *hash_vals;
	uint32_t hash_mask;
	uint32_t *send_queue;
	uint32_t send_head, send_len;
	uint32_t *idle;
	uint32_t idle_len;
	struct bench_backlog backlog; /* open loop (slots NULL in the closed loop) */
	struct prng prng;
	struct prng nonce_prng; /* session nonces: never from cfg->seed (bench_engine_create) */
	struct bench_zipf zipf;
	struct bench_arrival arrival;
	uint64_t arrivals;
	uint64_t now;
	uint64_t measure_start_ns, run_end_ns, last_done_ns;
	bool admitting;
	uint8_t value[HASP_VALUE_SIZE_MAX];
	uint8_t tx_buf[BENCH_BATCH_MAX][HASP_DATAGRAM_SIZE_MAX]; /* one flush batch */
	/* burst */
	uint64_t round;
	uint64_t round_start_ns, round_release_ns, round_last_told_ns;
	uint32_t round_told;
	uint8_t round_phase;
	/* storm (tools/bench_storm.c): locks, and the round's schedule */
	uint32_t storm_locks;
	struct bench_storm_round storm;
};

/* Burst round phases (the storm's: enum bench_storm_phase). */
enum { R_IDLE, R_HOLDER_ACQUIRE, R_QUEUEING, R_RELEASED };

/* Storm roles: client i < L holds lock i, L + i waits for it, 2L + i watches it. */
enum storm_role { STORM_HOLDER, STORM_WAITER, STORM_WATCHER };

static inline enum storm_role storm_role(const struct bench_engine *e, uint32_t index)
{
	return index < e->storm_locks ? STORM_HOLDER
	       : index < 2u * e->storm_locks ? STORM_WAITER
					       : STORM_WATCHER;
}

/* A client that watches instead of acquiring: burst --watchers' listeners,
 * storm's third L. */
static inline bool bench_is_watcher(const struct bench_engine *e, uint32_t index)
{
	if (e->cfg->workload == BENCH_WL_STORM)
		return storm_role(e, index) == STORM_WATCHER;
	return e->cfg->workload == BENCH_WL_BURST && e->cfg->watchers && index > 0;
}

/* ---- tools/bench_session.c ---- */

/* Parses "ip:port,..." into e->nodes; 0 or -HASP_ECONFIG. */
int bench_session_parse_cluster(struct bench_engine *e, const char *list);
/* Encodes client `index`'s request in flight into buf (one datagram);
 * deterministic, so a retransmission sends the same bytes. */
int bench_session_encode(struct bench_engine *e, uint32_t index, uint8_t *buf);
/* Starts a new request (the next sequence number) on client `index`. */
void bench_session_request(struct bench_engine *e, uint32_t index, uint8_t opcode);
/* (Re)opens client `index`'s session with a new nonce. */
void bench_session_open(struct bench_engine *e, uint32_t index);
/* Starts an operation of the configured workload, intended at intended_ns. */
void bench_session_start_op(struct bench_engine *e, uint32_t index, uint64_t intended_ns);
/* Makes client `index` idle; in open loop it takes a waiting arrival. */
void bench_session_make_idle(struct bench_engine *e, uint32_t index);
void bench_session_record(struct bench_engine *e, bool measured, enum bench_lat l, uint64_t start_ns);
/* Decodes, matches and handles one received datagram. */
void bench_session_receive(struct bench_engine *e, const uint8_t *data, size_t size);
/* Retransmits, wait re-reads, background keepalives, given-up requests. */
void bench_session_scan_timers(struct bench_engine *e);

/* ---- tools/bench_engine.c ---- */

/* The next idle client, or -1. */
int64_t bench_engine_pop_idle(struct bench_engine *e);
/* True when every watcher in [first, end) has its WATCH answered under the
 * current leader; otherwise re-sends WATCH from those registered under an
 * older one. */
bool bench_engine_watchers_current(struct bench_engine *e, uint32_t first, uint32_t end);

/* ---- tools/bench_storm.c ---- */

/* Sets up the storm's round schedule (tools/bench_rounds.c). */
void bench_storm_init(struct bench_engine *e);
/* Advances the storm round (admission while admitting, then the drain). */
void bench_storm_step(struct bench_engine *e);
/* A waiter was granted (reply, event or re-read). */
void bench_storm_granted(struct bench_engine *e, uint32_t index);
/* A storm watcher's WATCH_STATUS answer: an event sent that it did not
 * receive starts its re-read of the lock (LOCK_READ), whose answer
 * bench_storm_watch_read keeps. */
void bench_storm_watch_status(struct bench_engine *e, uint32_t index, uint16_t status,
			      const struct hasp_wire_watch_status *st);
void bench_storm_watch_read(struct bench_engine *e, uint32_t index, uint16_t status,
			    const struct hasp_wire_lock_info *info);
/* An event for a watcher. */
void bench_storm_watch_event(struct bench_engine *e, uint32_t index,
			     const struct hasp_wire_event *ev);
/* The holder of waiter `index`. */
static inline const struct client *storm_holder_of(const struct bench_engine *e, uint32_t index)
{
	return &e->clients[index % e->storm_locks];
}

#endif
