/*
 * The standard metric set of a hasp node (docs/CONTROL.md "Metrics"), so
 * the names, types, help lines, units and buckets live in one place and the
 * node only updates fields.
 *
 * Who writes what: every series below is written by the node's lcore (v1
 * has one; per-lcore series carry lcore="N"), with the metric_* functions
 * of metrics.h, which never block. Gauges that mirror state (term, indexes,
 * counts of the state machine) are refreshed by node_metrics_sync()
 * from a plain struct the node fills in its work hook, at most every few
 * milliseconds; counters are bumped where the event happens.
 */
#ifndef HASP_NODE_NODE_METRICS_H
#define HASP_NODE_NODE_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "control/control.h"
#include "control/metrics.h"
#include "node/node.h"

#define NODE_METRICS_LCORES_MAX 8u

/* Reasons of hasp_packets_dropped_total (one label value each). */
#define NODE_DROP_TABLE(X)                                                       \
	X(MALFORMED, "malformed")             /* truncated, bad lengths, bad fields */ \
	X(BAD_CHECKSUM, "bad_checksum")       /* IPv4/UDP/ICMP or message CRC */      \
	X(UNKNOWN_CLUSTER, "unknown_cluster") /* another cluster id */                \
	X(NOT_FOR_US, "not_for_us")           /* other MAC/IP/node id or non-member */ \
	X(UNKNOWN_PORT, "unknown_port")       /* UDP port without a handler */        \
	X(BAD_VERSION, "bad_version")         /* unsupported protocol version */      \
	X(STALE, "stale")                     /* raft message from an older term */   \
	X(NO_BUFFER, "no_buffer")             /* mbuf pool or TX queue exhausted */   \
	X(UNSUPPORTED, "unsupported")         /* IP options, fragments, other protocols */

enum control_drop_reason {
#define NODE_DROP_ENUM(name, text) NODE_DROP_##name,
	NODE_DROP_TABLE(NODE_DROP_ENUM)
#undef NODE_DROP_ENUM
	NODE_DROP_COUNT
};

const char *control_drop_reason_name(enum control_drop_reason reason);

/* Mirrored state, filled by the node and applied by _sync. */
struct control_node_state {
	bool has_leader;
	bool is_leader;
	bool storage_failed;
	uint64_t term;
	uint64_t commit_index;
	uint64_t applied_index;
	uint64_t proposals_pending; /* proposed, not yet committed */
	uint64_t locks_held;
	uint64_t leases;
	uint64_t waiters;
	uint64_t watchers;
	uint64_t sessions;
};

struct node_metrics {
	struct metrics *m;
	uint32_t lcore_count;
	uint64_t last_leader;  /* for leader_changes_total */
	/* leader_changes_total survives restarts: kept in this file of the
	 * data directory (empty: not kept), rewritten on every change. */
	char leader_file[NODE_PATH_SIZE + 32];
	uint64_t leader_changes;
	/* gauges */
	struct metric *has_leader, *is_leader, *storage_failed, *term, *commit_index, *applied_index;
	struct metric *proposals_pending, *locks_held, *leases, *waiters, *watchers, *sessions;
	/* counters */
	struct metric *leader_changes_metric, *proposals_committed, *proposals_failed, *expirations;
	struct metric *notifications_sent, *notifications_rate_limited, *snapshots;
	struct metric *snapshot_failures, *snapshot_failing, *snapshot_last_error;
	struct metric *snapshot_copy_last, *snapshot_copy_max, *snapshot_copy_replies_last;
	struct metric *leader_ready_last;
	struct metric *leader_file_errors, *build_info;
	struct metric *watch_capacity, *watch_bytes_per_watch;
	/* histograms */
	struct metric *wal_fsync, *batch_size;
	/* per lcore */
	struct metric *requests[NODE_METRICS_LCORES_MAX];
	struct metric *dropped[NODE_METRICS_LCORES_MAX][NODE_DROP_COUNT];
	struct metric *watch_events[NODE_METRICS_LCORES_MAX][NODE_WATCH_OUTCOMES];
	/* per peer (registered on first use) */
	uint32_t peer_ids[CONTROL_MEMBERS_MAX];
	struct metric *peer_rtt[CONTROL_MEMBERS_MAX];
	uint32_t peer_count;
	/* per opcode and status, registered when first non-zero */
	struct metric *replies[NODE_OPS][HASP_STATUS_COUNT];
	/* per reply reason, registered when first non-zero */
	struct metric *reasons[LOCKS_REASON_COUNT];
};

/* Registers the whole set into c's registry. Returns 0 or -HASP_EFULL
 * (metrics_max too small) / -HASP_EINVAL (lcore_count 0 or too many). */
int node_metrics_register(struct node_metrics *nm, struct control *c,
				  uint32_t lcore_count) __attribute__((warn_unused_result));

/* Registers the series the node core keeps in place (struct node_stats):
 * request latency per opcode, commit and apply latency; the build info;
 * and loads the leader-change count kept in data_dir (a missing file is
 * 0; a damaged one is logged, counted and starts from 0). 0 or
 * -HASP_EFULL. */
int node_metrics_register_node(struct node_metrics *nm, const struct node *n)
	__attribute__((warn_unused_result));

/* Registers hasp_client_replies_total{opcode,status} for every pair that
 * has replies and no series yet, and hasp_reply_reasons_total{reason} for
 * every reason (the lcore, at publish time). */
void node_metrics_replies(struct node_metrics *nm, const struct node *n);

/* The name of an opcode ("ACQUIRE"), "unknown" outside the protocol. */
const char *node_metrics_op_name(uint32_t op);

/* Mirrors the state into the gauges; counts a leader change whenever the
 * known leader id changes to another non-zero id. */
void node_metrics_sync(struct node_metrics *nm, const struct control_node_state *st,
			       uint64_t leader_id);

/* The round-trip histogram of a peer (hasp_peer_rtt_seconds{peer="id"},
 * nanoseconds in, seconds out), registered on first use; NULL when the
 * table is full. */
struct metric *node_metrics_peer(struct node_metrics *nm, uint32_t peer_id);

/* Observations: WAL fsync duration (ns), commands per proposed batch. */
static inline void node_metrics_fsync(struct node_metrics *nm, uint64_t ns)
{
	metric_observe(nm->wal_fsync, ns);
}

static inline void node_metrics_batch(struct node_metrics *nm, uint64_t commands)
{
	metric_observe(nm->batch_size, commands);
}

/* Sets a drop counter to an absolute value (the node keeps its own
 * per-lcore counters and copies their sum per reason). */
static inline void node_metrics_dropped_set(struct node_metrics *nm, uint32_t lcore,
						    enum control_drop_reason reason, uint64_t total)
{
	metric_set(nm->dropped[lcore][reason], (int64_t)total);
}

#endif
