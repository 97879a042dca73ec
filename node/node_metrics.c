/*
 * The standard metric set of a node (see node_metrics.h). Bucket bounds
 * are chosen for what this machine measures (docs/ENVIRONMENT.md): a
 * durable group commit takes 0.1-1 ms on NVMe and a few ms on virtio, so
 * the fsync buckets run from 50 us to 1 s; batches run from 1 to 1024
 * commands in powers of two.
 */
#include "node/node_metrics.h"

#include <stdio.h>
#include <string.h>

#include "common/assert.h"
#include "hasp/errors.h"

static const char *const drop_names[NODE_DROP_COUNT] = {
#define NODE_DROP_NAME(name, text) text,
	NODE_DROP_TABLE(NODE_DROP_NAME)
#undef NODE_DROP_NAME
};

const char *control_drop_reason_name(enum control_drop_reason reason)
{
	HASP_ASSERT(reason < NODE_DROP_COUNT);
	return drop_names[reason];
}

static const char *const watch_outcome_names[NODE_WATCH_OUTCOMES] = {
#define NODE_WATCH_NAME(name, text) text,
	NODE_WATCH_OUTCOME_TABLE(NODE_WATCH_NAME)
#undef NODE_WATCH_NAME
};

#define G(field, name, help) ok &= (nm->field = metrics_gauge(m, name, help, NULL, 0)) != NULL
#define C(field, name, help) ok &= (nm->field = metrics_counter(m, name, help, NULL, 0)) != NULL

int node_metrics_register(struct node_metrics *nm, struct control *c,
				  uint32_t lcore_count)
{
	if (lcore_count == 0 || lcore_count > NODE_METRICS_LCORES_MAX)
		return -HASP_EINVAL;
	memset(nm, 0, sizeof(*nm));
	struct metrics *m = control_metrics(c);
	nm->m = m;
	nm->lcore_count = lcore_count;
	bool ok = true;
	G(has_leader, "hasp_has_leader", "1 when this node knows a leader, else 0.");
	G(is_leader, "hasp_is_leader", "1 when this node is the leader.");
	G(storage_failed, "hasp_storage_failed", "1 once the disk failed and the node stopped acknowledging.");
	G(term, "hasp_term", "Current Raft term.");
	G(commit_index, "hasp_commit_index", "Highest log index known committed.");
	G(applied_index, "hasp_applied_index", "Highest log index applied to the state machine.");
	G(proposals_pending, "hasp_proposals_pending", "Commands proposed and not yet committed.");
	G(locks_held, "hasp_locks_held", "Locks currently held.");
	G(leases, "hasp_leases", "Live leases (shared and per-lock).");
	G(waiters, "hasp_waiters", "Sessions queued for a lock.");
	G(watchers, "hasp_watchers", "Active watches on this node.");
	G(sessions, "hasp_sessions", "Open client sessions.");
	C(leader_changes, "hasp_leader_changes_total", "Times the known leader changed to another node.");
	C(proposals_committed, "hasp_proposals_committed_total", "Commands proposed here and committed.");
	C(proposals_failed, "hasp_proposals_failed_total",
	  "Commands refused or lost before commit (full, not leader, step-down).");
	C(expirations, "hasp_expirations_total", "Leases and sessions expired by the state machine.");
	C(notifications_sent, "hasp_notifications_sent_total", "Events pushed to waiters and watchers.");
	C(notifications_rate_limited, "hasp_notifications_rate_limited_total",
	  "Watch events held back or coalesced by the rate limit.");
	G(watch_capacity, "hasp_watch_capacity", "Watches this node can hold (watches_max, reserved at start).");
	G(watch_bytes_per_watch, "hasp_watch_bytes_per_watch",
	  "Bytes reserved per watch of capacity (registry entry and index share).");
	C(snapshots, "hasp_snapshots_total", "Snapshots taken or installed.");
	C(snapshot_failures, "hasp_snapshot_failures_total", "Snapshot saves that failed (ENOSPC, EIO).");
	G(snapshot_failing, "hasp_snapshot_failing", "Snapshot saves failed in a row (0: the last one worked).");
	G(snapshot_last_error, "hasp_snapshot_last_error",
	  "hasp error code of the last failed snapshot save while failing (4 ENOSPC, 3 EIO), else 0.");

	static const uint64_t fsync_ns[] = { 50000,    100000,   250000,    500000,    1000000,
					     2500000,  5000000,  10000000,  25000000,  50000000,
					     100000000, 250000000, 1000000000 };
	static const uint64_t batch[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024 };
	nm->wal_fsync = metrics_histogram(m, "hasp_wal_fsync_duration_seconds",
					  "Time from WAL write submission to durable (fdatasync done).",
					  NULL, 0, fsync_ns, sizeof(fsync_ns) / sizeof(fsync_ns[0]), 1e-9);
	nm->batch_size = metrics_histogram(m, "hasp_batch_size", "Commands per proposed Raft batch.",
					   NULL, 0, batch, sizeof(batch) / sizeof(batch[0]), 1.0);
	ok &= nm->wal_fsync != NULL && nm->batch_size != NULL;

	for (uint32_t l = 0; l < lcore_count && ok; l++) {
		char lc[12];
		snprintf(lc, sizeof(lc), "%u", l);
		struct metrics_label one[] = { { "lcore", lc } };
		nm->requests[l] = metrics_counter(m, "hasp_requests_total",
						  "Client datagrams received, per lcore.", one, 1);
		ok &= nm->requests[l] != NULL;
		for (uint32_t r = 0; r < NODE_DROP_COUNT && ok; r++) {
			struct metrics_label two[] = { { "lcore", lc }, { "reason", drop_names[r] } };
			nm->dropped[l][r] = metrics_counter(m, "hasp_packets_dropped_total",
							    "Packets dropped, per lcore and reason.", two, 2);
			ok &= nm->dropped[l][r] != NULL;
		}
		for (uint32_t o = 0; o < NODE_WATCH_OUTCOMES && ok; o++) {
			struct metrics_label two[] = { { "lcore", lc }, { "outcome", watch_outcome_names[o] } };
			nm->watch_events[l][o] = metrics_counter(m, "hasp_watch_events_total",
								 "Watch events by outcome, per lcore (sent, deferred "
								 "by the rate limit, coalesced, dropped while held).",
								 two, 2);
			ok &= nm->watch_events[l][o] != NULL;
		}
	}
	return ok ? 0 : -HASP_EFULL;
}

#undef G
#undef C

void node_metrics_sync(struct node_metrics *nm, const struct control_node_state *st,
			       uint64_t leader_id)
{
	metric_set(nm->has_leader, st->has_leader);
	metric_set(nm->is_leader, st->is_leader);
	metric_set(nm->storage_failed, st->storage_failed);
	metric_set(nm->term, (int64_t)st->term);
	metric_set(nm->commit_index, (int64_t)st->commit_index);
	metric_set(nm->applied_index, (int64_t)st->applied_index);
	metric_set(nm->proposals_pending, (int64_t)st->proposals_pending);
	metric_set(nm->locks_held, (int64_t)st->locks_held);
	metric_set(nm->leases, (int64_t)st->leases);
	metric_set(nm->waiters, (int64_t)st->waiters);
	metric_set(nm->watchers, (int64_t)st->watchers);
	metric_set(nm->sessions, (int64_t)st->sessions);
	/* A change is a new non-zero leader, the first one this process sees
	 * included (as etcd's leader_changes_seen counts it), so a restarted
	 * node that finds a leader counts it; losing the leader (0) is not a
	 * change, has_leader shows that. */
	if (leader_id != 0 && leader_id != nm->last_leader) {
		metric_inc(nm->leader_changes);
		nm->last_leader = leader_id;
	}
}

struct metric *node_metrics_peer(struct node_metrics *nm, uint32_t peer_id)
{
	HASP_ASSERT(peer_id != 0);
	for (uint32_t i = 0; i < nm->peer_count; i++)
		if (nm->peer_ids[i] == peer_id)
			return nm->peer_rtt[i];
	if (nm->peer_count == CONTROL_MEMBERS_MAX)
		return NULL;
	char id[12];
	snprintf(id, sizeof(id), "%u", peer_id);
	struct metrics_label l[] = { { "peer", id } };
	struct metric *s = metrics_gauge_scaled(nm->m, "hasp_peer_rtt_seconds",
						"Last heartbeat round trip to a peer (leader only).", l, 1,
						1e-9);
	if (s == NULL)
		return NULL;
	nm->peer_ids[nm->peer_count] = peer_id;
	nm->peer_rtt[nm->peer_count++] = s;
	return s;
}
