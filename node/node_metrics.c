/*
 * The standard metric set of a node (see node_metrics.h).
 * Every latency uses one bucket layout (node_hist.h: 10 us to 1 s), so a
 * request, a commit, an apply, a WAL fsync and a peer round trip read on
 * one scale; batches run from 1 to 1024 commands in powers of two.
 */
#include "node/node_metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/log.h"
#include "hasp/errors.h"
#include "node/build_info.h"

LOG_TOPIC_DECLARE(node);

#define LEADER_FILE "leader_changes"

static const char *const op_names[NODE_OPS] = {
	[HASP_OP_SESSION_OPEN] = "SESSION_OPEN",       [HASP_OP_SESSION_KEEPALIVE] = "SESSION_KEEPALIVE",
	[HASP_OP_SESSION_CLOSE] = "SESSION_CLOSE",     [HASP_OP_LEASE_GRANT] = "LEASE_GRANT",
	[HASP_OP_LEASE_KEEPALIVE] = "LEASE_KEEPALIVE", [HASP_OP_LEASE_REVOKE] = "LEASE_REVOKE",
	[HASP_OP_ACQUIRE] = "ACQUIRE",                 [HASP_OP_RELEASE] = "RELEASE",
	[HASP_OP_RENEW] = "RENEW",                     [HASP_OP_CHECK] = "CHECK",
	[HASP_OP_LOCK_READ] = "LOCK_READ",             [HASP_OP_CANCEL] = "CANCEL",
	[HASP_OP_WATCH] = "WATCH",                     [HASP_OP_UNWATCH] = "UNWATCH",
	[HASP_OP_WATCH_COUNT] = "WATCH_COUNT",         [HASP_OP_WATCH_STATUS] = "WATCH_STATUS",
	[HASP_OP_KV_PUT] = "KV_PUT",                   [HASP_OP_KV_GET] = "KV_GET",
	[HASP_OP_KV_DELETE] = "KV_DELETE",             [HASP_OP_KV_CAS] = "KV_CAS",
	[HASP_OP_KV_RANGE] = "KV_RANGE",
};

const char *node_metrics_op_name(uint32_t op)
{
	return op < NODE_OPS && op_names[op] != NULL ? op_names[op] : "unknown";
}

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
	C(leader_changes_metric, "hasp_leader_changes_total",
	  "Times the known leader changed to another node (kept across restarts).");
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
	/* The copy of the state machine is the one part of a snapshot that
	 * stops the lcore (node/snap_writer.h). */
	ok &= (nm->snapshot_copy_last = metrics_gauge_scaled(
		       m, "hasp_snapshot_copy_seconds_last",
		       "How long the last snapshot's copy of the state machine stopped the node's lcore.",
		       NULL, 0, 1e-9)) != NULL;
	ok &= (nm->snapshot_copy_max = metrics_gauge_scaled(
		       m, "hasp_snapshot_copy_seconds_max",
		       "The longest a snapshot's copy of the state machine stopped the node's lcore since start.",
		       NULL, 0, 1e-9)) != NULL;
	G(snapshot_copy_replies_last, "hasp_snapshot_copy_replies_last",
	  "Cached reply records the last snapshot's copy carried: those written since the copy before, or every live session's.");

	/* A failover's middle part: the new leader's no-op, committed
	 * (perf/failover, docs/PERFORMANCE.md "Failover as a client sees it"). */
	ok &= (nm->leader_ready_last = metrics_gauge_scaled(
		       m, "hasp_leader_ready_seconds_last",
		       "From this node's last election win to its applying that term's first entry "
		       "(clients' commands can commit from then on); 0 if it never led.",
		       NULL, 0, 1e-9)) != NULL;

	static const uint64_t batch[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024 };
	nm->wal_fsync = metrics_histogram(m, "hasp_wal_fsync_duration_seconds",
					  "Time from WAL write submission to durable (fdatasync done).",
					  NULL, 0, node_hist_bounds_ns, NODE_HIST_BOUNDS, 1e-9);
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

/* Writes "<count> <leader id>\n" to a temporary file and renames it over
 * the old one: a crash leaves the old or the new count, never a torn one.
 * No fsync: a power cut may lose the last changes (or, on a file system
 * without rename ordering, leave the file empty: refused at the next start,
 * counted, the count starts again from 0), which is not worth a disk flush
 * on the node's thread. Runs once per leader change (elections are at
 * least an election timeout apart). */
static void leader_save(struct node_metrics *nm)
{
	if (nm->leader_file[0] == '\0')
		return;
	char tmp[sizeof(nm->leader_file) + 4], text[48];
	snprintf(tmp, sizeof(tmp), "%s.new", nm->leader_file);
	int len = snprintf(text, sizeof(text), "%llu %llu\n", (unsigned long long)nm->leader_changes,
			   (unsigned long long)nm->last_leader);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	bool ok = fd >= 0 && write(fd, text, (size_t)len) == len;
	if (fd >= 0 && close(fd) != 0)
		ok = false;
	if (ok && rename(tmp, nm->leader_file) != 0)
		ok = false;
	if (!ok) {
		metric_inc(nm->leader_file_errors);
		LOG_WARN(node, "cannot save %s: %s (hasp_leader_changes_total restarts from the saved "
			 "count)", nm->leader_file, strerror(errno));
	}
}

/* Reads the kept count. A missing file is a node that never saw a leader;
 * anything but two decimal numbers and a newline is refused whole (logged,
 * counted, counting starts from 0). */
static void leader_load(struct node_metrics *nm)
{
	FILE *f = fopen(nm->leader_file, "re");
	if (f == NULL) {
		if (errno != ENOENT) {
			metric_inc(nm->leader_file_errors);
			LOG_WARN(node, "cannot read %s: %s", nm->leader_file, strerror(errno));
		}
		return;
	}
	char text[64] = "";
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	unsigned long long count, leader;
	char end = 0;
	int got = sscanf(text, "%llu %llu%c", &count, &leader, &end);
	if (n == sizeof(text) - 1 || got != 3 || end != '\n' || text[0] < '0' || text[0] > '9' ||
	    leader > UINT32_MAX || count > INT64_MAX) {
		metric_inc(nm->leader_file_errors);
		LOG_WARN(node, "%s is not \"<count> <leader id>\": ignored, counting from 0",
			 nm->leader_file);
		return;
	}
	nm->leader_changes = count;
	nm->last_leader = leader;
	metric_set(nm->leader_changes_metric, (int64_t)count);
}

int node_metrics_register_node(struct node_metrics *nm, const struct node *n)
{
	struct metrics *m = nm->m;
	const struct node_stats *st = &n->stats;
	bool ok = true;
	for (uint32_t op = 0; op < NODE_OPS && ok; op++) {
		if (op != 0 && (op_names[op] == NULL || op == HASP_OP_EVENT))
			continue;
		struct metrics_label l[] = { { "opcode", node_metrics_op_name(op) } };
		ok = metrics_histogram_ref(m, "hasp_request_duration_seconds",
					   "Client request arrival to reply, by opcode.", l, 1,
					   node_hist_bounds_ns, NODE_HIST_BOUNDS, 1e-9,
					   st->request_latency[op].counts,
					   &st->request_latency[op].sum_ns) != NULL;
	}
	ok &= metrics_histogram_ref(m, "hasp_raft_commit_duration_seconds",
				    "Leader: a proposed batch to its commit (quorum durable).", NULL, 0,
				    node_hist_bounds_ns, NODE_HIST_BOUNDS, 1e-9, st->commit_latency.counts,
				    &st->commit_latency.sum_ns) != NULL;
	ok &= metrics_histogram_ref(m, "hasp_apply_duration_seconds",
				    "One run of committed entries applied to the state machine.", NULL, 0,
				    node_hist_bounds_ns, NODE_HIST_BOUNDS, 1e-9, st->apply_latency.counts,
				    &st->apply_latency.sum_ns) != NULL;
	/* Datagrams dropped for failing authentication, never answered
	 * (docs/SECURITY.md): a client with a wrong or old key, a forgery, a
	 * flood. One family for both ports, so that one alert covers them. */
	static const char auth_help[] = "Datagrams that failed authentication and were dropped, by port and reason.";
	const struct {
		const char *port, *reason;
		const uint64_t *v;
	} auth[] = {
		{ "client", "not_v2", &st->client_auth_version },
		{ "client", "unknown_sender", &st->client_auth_unknown },
		{ "client", "bad_tag", &st->client_auth_bad },
		{ "peer", "bad_tag", &st->peer_auth_bad },
		{ "peer", "replayed", &st->peer_auth_replayed },
	};
	for (size_t i = 0; i < sizeof(auth) / sizeof(auth[0]) && ok; i++) {
		struct metrics_label l[] = { { "port", auth[i].port }, { "reason", auth[i].reason } };
		ok = metrics_counter_ref(m, "hasp_auth_failures_total", auth_help, l, 2, auth[i].v) != NULL;
	}
	ok &= metrics_counter_ref(m, "hasp_client_replies_from_cache_total",
				  "Retransmissions of applied commands answered from the reply cache "
				  "without a Raft entry (leader).",
				  NULL, 0, &st->client_replies_from_cache) != NULL;
	ok &= metrics_counter_ref(m, "hasp_client_retransmits_in_flight_total",
				  "Copies of commands still in flight, dropped instead of proposed again "
				  "(leader).",
				  NULL, 0, &st->client_retransmits_in_flight) != NULL;
	ok &= metrics_counter_ref(m, "hasp_peer_keys_revoked_total",
				  "Members whose peer keys a committed configuration revoked.", NULL, 0,
				  &st->peer_keys_revoked) != NULL;
	ok &= metrics_counter_ref(m, "hasp_latency_samples_skipped_total",
				  "Proposed batches not timed for commit latency (timing ring full).", NULL,
				  0, &st->latency_ring_full) != NULL;
	struct metrics_label bl[] = { { "version", HASP_BUILD_VERSION }, { "commit", HASP_BUILD_COMMIT } };
	ok &= (nm->build_info = metrics_gauge(m, "hasp_build_info",
					      "Always 1; the labels name the build (version, git commit).",
					      bl, 2)) != NULL;
	ok &= (nm->leader_file_errors = metrics_counter(
		       m, "hasp_leader_changes_file_errors_total",
		       "Reads or writes of the data directory's leader_changes file that failed.", NULL,
		       0)) != NULL;
	if (!ok)
		return -HASP_EFULL;
	metric_set(nm->build_info, 1);
	if (n->cfg.data_dir[0] != '\0') {
		snprintf(nm->leader_file, sizeof(nm->leader_file), "%s/%s", n->cfg.data_dir, LEADER_FILE);
		leader_load(nm);
	}
	return 0;
}

void node_metrics_replies(struct node_metrics *nm, const struct node *n)
{
	for (uint32_t op = 0; op < NODE_OPS; op++)
		for (uint32_t st = 0; st < HASP_STATUS_COUNT; st++) {
			const uint64_t *v = &n->stats.replies_by[op][st];
			if (*v == 0 || nm->replies[op][st] != NULL)
				continue;
			struct metrics_label l[] = { { "opcode", node_metrics_op_name(op) },
						     { "status", hasp_status_name(st) } };
			nm->replies[op][st] = metrics_counter_ref(nm->m, "hasp_client_replies_total",
								  "Replies sent to clients, by opcode and status.",
								  l, 2, v);
			if (nm->replies[op][st] == NULL)
				return; /* registry full: tried again next time */
		}
	for (uint32_t r = 1; r < LOCKS_REASON_COUNT; r++) {
		const uint64_t *v = &n->sm.stats.by_reason[r];
		if (*v == 0 || nm->reasons[r] != NULL)
			continue;
		struct metrics_label l[] = { { "reason", locks_reason_name(r) } };
		nm->reasons[r] = metrics_counter_ref(nm->m, "hasp_reply_reasons_total",
						     "State-machine replies that carry a reason (refusals, "
						     "CAS mismatches), by reason, on each replica as it applies.",
						     l, 1, v);
		if (nm->reasons[r] == NULL)
			return;
	}
}

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
	/* A change is a new non-zero leader, the first one a node ever sees
	 * included (as etcd's leader_changes_seen counts it); losing the
	 * leader (0) is not a change, has_leader shows that. The count and
	 * the last leader are kept in the data directory, so a restarted node
	 * goes on from its count and does not count the leader it had before
	 * as a change. */
	if (leader_id != 0 && leader_id != nm->last_leader) {
		nm->leader_changes++;
		metric_set(nm->leader_changes_metric, (int64_t)nm->leader_changes);
		nm->last_leader = leader_id;
		leader_save(nm);
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
	struct metric *s = metrics_histogram(nm->m, "hasp_peer_rtt_seconds",
					     "Heartbeat round trips to a peer (measured by the leader).", l, 1,
					     node_hist_bounds_ns, NODE_HIST_BOUNDS, 1e-9);
	if (s == NULL)
		return NULL;
	nm->peer_ids[nm->peer_count] = peer_id;
	nm->peer_rtt[nm->peer_count++] = s;
	return s;
}
