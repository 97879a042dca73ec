/*
 * The node's side of the control plane (docs/CONTROL.md): binds a struct
 * node to control/ — the admin commands that run on the node's lcore, the
 * status it publishes, and the standard metric set fed from its counters.
 *
 * Threads: node_admin_init/start/stop/deinit on haspd's main thread;
 * node_admin_work() on the node's lcore, from its work hook, after
 * node_work(). Nothing here blocks the lcore except `snapshot.save`, which
 * takes the node's own (blocking, rare) snapshot.
 */
#ifndef HASP_NODE_NODE_ADMIN_H
#define HASP_NODE_NODE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/control.h"
#include "node/node_metrics.h"
#include "dataplane/dp_stats.h"
#include "node/node.h"

#define NODE_ADMIN_DEFERRED_MAX 8u

enum node_admin_wait {
	NODE_ADMIN_WAIT_NONE = 0,
	NODE_ADMIN_WAIT_CONF,     /* a configuration change: applied >= index */
	NODE_ADMIN_WAIT_TRANSFER, /* leader_id == target */
	NODE_ADMIN_WAIT_FORCE,    /* the lock's token changed or it is free */
	NODE_ADMIN_WAIT_SNAPSHOT, /* snapshots_taken moved */
};

struct node_admin_deferred {
	struct control_request *req;
	uint8_t wait;
	uint64_t index;
	uint32_t target;
	uint64_t token;
	uint64_t before;
	uint64_t deadline_ns;
	uint8_t name_len;
	uint8_t name[HASP_NAME_SIZE_MAX];
};

struct node_admin {
	struct node *n;
	struct control ctl;
	struct node_metrics nm;
	uint64_t next_publish_ns;
	/* Metric sampling. */
	uint64_t seen_batches, seen_proposals;
	uint64_t probe_index, probe_start_ns; /* WAL durability probe */
	/* Peer round trips taken into the histograms, by cfg.members slot
	 * (and the member that slot held then). */
	uint64_t seen_rtt_samples[NODE_MEMBERS_MAX];
	uint64_t seen_rtt_member[NODE_MEMBERS_MAX];
	struct dp_stats dp;                   /* summed by the caller, or zero */
	struct dp_port_stats port;            /* read by the caller (haspd: every second), or zero */
	struct node_admin_deferred deferred[NODE_ADMIN_DEFERRED_MAX];
};

/* Sets up control/ for node `n`: Unix socket `unix_path` (e.g.
 * <data_dir>/admin.sock), TCP `tcp_addr` ("" for none). Returns 0,
 * -HASP_ENOMEM, -HASP_ECONFIG. */
int node_admin_init(struct node_admin *na, struct node *n, const char *unix_path,
		    const char *tcp_addr) __attribute__((warn_unused_result));
/* Binds and starts the admin thread: after dp_init (no thread before EAL). */
int node_admin_start(struct node_admin *na) __attribute__((warn_unused_result));
void node_admin_stop(struct node_admin *na);
/* The eventfd a queued admin request makes readable: add it to the idle
 * lcore's wake fds (dp_add_wake_fd) before dp_run. */
int node_admin_wake_fd(const struct node_admin *na);
void node_admin_deinit(struct node_admin *na);

/* Reads the client identities file again (on the node's lcore: haspd on
 * SIGHUP; the `identities.reload` command). All or nothing: a bad file is
 * refused whole (the old set stays, identities_reload_failed++, the reason
 * in err); otherwise the new set serves the next datagram and
 * identities_reloaded++. Returns the identity count or -HASP_ECONFIG,
 * -HASP_ENOTSUP (client_auth = off). Allocates nothing. */
int node_admin_identities_reload(struct node_admin *na, char *err, size_t err_size)
	__attribute__((warn_unused_result));

/* On the node's lcore, after node_work(): runs queued admin commands,
 * completes deferred ones, publishes status and metrics. `dps` is the sum
 * of the dataplane's counters (NULL: none). Returns true if it did work. */
bool node_admin_work(struct node_admin *na, uint64_t now_ns, const struct dp_stats *dps,
		     uint64_t *deadline_ns);

#endif
