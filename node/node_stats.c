/*
 * The node's counters as one JSON line (haspd prints it at exit and on
 * SIGUSR1; the control-plane issue will serve the same names). Each name
 * is the field of struct node_stats, documented in node.h and in
 * docs/OPERATIONS.md ("Counters").
 */
#include <stdio.h>

#include "node/node.h"
#include "node/node_hist.h"
#include "hasp/errors.h"

const uint64_t node_hist_bounds_ns[NODE_HIST_BOUNDS] = {
	10000,    25000,    50000,     100000,    250000,    500000,    1000000,   2500000,
	5000000,  10000000, 25000000,  50000000,  100000000, 250000000, 500000000, 1000000000,
};

#define NODE_STATS_FIELDS(X) \
	X(client_rx) \
	X(client_bad) \
	X(client_unanswered) \
	X(client_auth_version) \
	X(client_auth_unknown) \
	X(client_auth_bad) \
	X(client_forbidden) \
	X(identities_reloaded) \
	X(identities_reload_failed) \
	X(client_no_session) \
	X(client_replies_from_cache) \
	X(client_retransmits_in_flight) \
	X(client_not_leader) \
	X(client_overloaded) \
	X(client_unavailable) \
	X(client_replies) \
	X(proposals) \
	X(batches) \
	X(batch_full_flushes) \
	X(reads) \
	X(reads_dropped) \
	X(applied_commands) \
	X(apply_decode_errors) \
	X(pending_lost) \
	X(ticks_proposed) \
	X(expiries_proposed) \
	X(peer_rx) \
	X(peer_auth_bad) \
	X(peer_auth_replayed) \
	X(peer_keys_revoked) \
	X(peer_bad) \
	X(peer_dropped_cluster) \
	X(peer_dropped_node) \
	X(peer_tx) \
	X(peer_tx_errors) \
	X(events_pushed) \
	X(events_lane_overflow) \
	X(events_no_address) \
	X(events_deduplicated) \
	X(leader_stalls) \
	X(events_unconfirmed) \
	X(watch_rate_limited) \
	X(watch_coalesced) \
	X(watch_full) \
	X(watch_events_sent) \
	X(watch_dropped) \
	X(session_table_full) \
	X(session_address_kept) \
	X(sessions_pruned) \
	X(snapshots_taken) \
	X(snapshot_paced_pieces) \
	X(snapshot_hurried) \
	X(snapshot_hurried_pieces) \
	X(snapshots_installed) \
	X(snapshot_too_big) \
	X(snap_chunk_dropped) \
	X(wal_full_waits) \
	X(hardstate_saves) \
	X(storage_failures) \
	X(ticks_dropped)

static int put(char *buf, size_t size, size_t *off, const char *name, unsigned long long v)
{
	int k = snprintf(buf + *off, size - *off, "%s\"%s\":%llu", *off > 1 ? "," : "", name, v);
	if (k < 0 || (size_t)k >= size - *off)
		return -1;
	*off += (size_t)k;
	return 0;
}

size_t node_stats_json(const struct node *n, char *buf, size_t size)
{
	const struct node_stats *s = &n->stats;
	size_t off = 0;

	if (size < 4)
		return 0;
	buf[off++] = '{';
	buf[off] = '\0';
#define NODE_STATS_PUT(f) \
	if (put(buf, size, &off, #f, (unsigned long long)s->f) != 0) \
		return 0;
	NODE_STATS_FIELDS(NODE_STATS_PUT)
#undef NODE_STATS_PUT
	/* Refused client datagrams by decoder reason (hasp_strerror_name). */
	for (unsigned i = 1; i < 32; i++) {
		if (s->client_bad_reason[i] == 0)
			continue;
		char name[48];
		snprintf(name, sizeof(name), "client_bad_%s", hasp_strerror_name((int)i));
		if (put(buf, size, &off, name, (unsigned long long)s->client_bad_reason[i]) != 0)
			return 0;
	}
	const struct raft_counters *r = &n->raft.counters;
#define RAFT_PUT(f) \
	if (put(buf, size, &off, "raft_" #f, (unsigned long long)r->f) != 0) \
		return 0;
	RAFT_PUT(msg_received) RAFT_PUT(msg_dropped_cluster) RAFT_PUT(msg_dropped_to)
	RAFT_PUT(msg_dropped_nonmember) RAFT_PUT(msg_dropped_stale) RAFT_PUT(msg_dropped_invalid)
	RAFT_PUT(msg_sent) RAFT_PUT(msg_dropped_full) RAFT_PUT(elections) RAFT_PUT(leader_elected)
	RAFT_PUT(proposals_rejected) RAFT_PUT(snapshots_sent) RAFT_PUT(snapshots_installed)
	RAFT_PUT(removal_notices_sent) RAFT_PUT(removal_notices)
#undef RAFT_PUT
	const struct locks_stats *l = &n->sm.stats;
#define LOCKS_PUT(f) \
	if (put(buf, size, &off, "locks_" #f, (unsigned long long)l->f) != 0) \
		return 0;
	LOCKS_PUT(applied) LOCKS_PUT(duplicates) LOCKS_PUT(seq_too_old) LOCKS_PUT(bad_requests)
	LOCKS_PUT(full) LOCKS_PUT(expire_noop) LOCKS_PUT(stale_term) LOCKS_PUT(grants) LOCKS_PUT(handoffs)
#undef LOCKS_PUT
	/* Replies with a reason, by reason (locks_reason_name), when any. */
	for (uint32_t i = 1; i < LOCKS_REASON_COUNT; i++) {
		if (l->by_reason[i] == 0)
			continue;
		char name[48];
		snprintf(name, sizeof(name), "locks_reason_%s", locks_reason_name(i));
		if (put(buf, size, &off, name, (unsigned long long)l->by_reason[i]) != 0)
			return 0;
	}
	const struct wal_stats *w = &n->st.wal.stats;
	if (put(buf, size, &off, "wal_writes", w->writes) != 0 ||
	    put(buf, size, &off, "wal_appends", w->appends) != 0 ||
	    put(buf, size, &off, "wal_full", w->full) != 0 ||
	    put(buf, size, &off, "wal_rollovers", w->rollovers) != 0 ||
	    put(buf, size, &off, "wal_spare_waits", w->spare_waits) != 0 ||
	    put(buf, size, &off, "wal_fill_bytes", w->fill_bytes) != 0 ||
	    put(buf, size, &off, "wal_retire_steps", w->retire_steps) != 0 ||
	    put(buf, size, &off, "wal_records_bytes", w->records_bytes) != 0 ||
	    put(buf, size, &off, "wal_log_bytes", w->records_bytes + w->padding_bytes) != 0 ||
	    put(buf, size, &off, "wal_device_bytes", w->device_bytes) != 0 ||
	    put(buf, size, &off, "wal_packed_writes", w->packed_writes) != 0 ||
	    put(buf, size, &off, "snapshot_copies", n->snap_copies) != 0 ||
	    put(buf, size, &off, "snapshot_thread_failures", n->snap_writer.thread_failures) != 0 ||
	    put(buf, size, &off, "snapshot_copy_us_last", n->snap_copy_ns_last / 1000) != 0 ||
	    put(buf, size, &off, "snapshot_copy_us_max", n->snap_copy_ns_max / 1000) != 0 ||
	    put(buf, size, &off, "snapshot_copy_replies_last", n->snap_copy_replies_last) != 0 ||
	    put(buf, size, &off, "leader_ready_us_last", n->lead_ready_ns_last / 1000) != 0 ||
	    put(buf, size, &off, "term", n->raft.term) != 0 ||
	    put(buf, size, &off, "commit", n->raft.commit) != 0 ||
	    put(buf, size, &off, "applied", n->applied) != 0 ||
	    put(buf, size, &off, "leader_id", n->leader_id) != 0 ||
	    put(buf, size, &off, "is_leader", n->role == RAFT_LEADER) != 0)
		return 0;
	int k = snprintf(buf + off, size - off, "}\n");
	if (k < 0 || (size_t)k >= size - off)
		return 0;
	return off + (size_t)k;
}
