/*
 * The node driver: owns raft, the lock state machine and storage, and is
 * the only place that orders their side effects (node_update()).
 *
 * Shape: every input (a client datagram, a raft message, a tick, a storage
 * completion) becomes one raft_step() and one node_update(). Nothing is
 * queued between them except what raft itself asks to wait for (entries
 * durable before an ack, handled by raft through RAFT_EVENT_PERSISTED), so
 * the loop has no hidden state: what raft said in an update is done before
 * the next step. Snapshots are taken from node_work(), outside any update,
 * because taking one steps raft again.
 *
 * Blocking calls on the lcore, all rare and written down in
 * docs/OPERATIONS.md: saving the hard state (term/vote) waits for its
 * fdatasync (elections only), a WAL write-slot shortage waits for one
 * completion (back-pressure), snapshot save and WAL compaction, and the
 * start-up recovery.
 */
#include "node/node.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/clock.h"
#include "common/log.h"
#include "node/dispatch.h"
#include "node/node_latency.h"
#include "node/notify.h"
#include "hasp/errors.h"
#include "locks/snapshot.h"
#include "raft/msg_codec.h"
#include "storage/uring.h"

LOG_TOPIC_DEFINE(node);

#define NS_PER_MS 1000000ull
#define NODE_IO_POLL_NS 20000ull /* re-poll storage every 20 us while I/O is in flight */
#define NODE_SNAP_POLL_NS 1000000ull /* look for the snapshot writer's exit every 1 ms */
/* Snapshot save failures: retry after 100 ms, doubling up to 30 s; one log
 * line per 10 s at most after the first. */
#define NODE_SNAP_BACKOFF_MIN_NS (100ull * NS_PER_MS)
#define NODE_SNAP_BACKOFF_MAX_NS (30000ull * NS_PER_MS)
#define NODE_SNAP_LOG_NS (10000ull * NS_PER_MS)
/* A paced snapshot's piece (snapshot_write_rate): what a WAL fdatasync may
 * find ahead of it in the device's cache at most. */
#define NODE_SNAPSHOT_PIECE (256u << 10)
/* A paced wait looks for the lcore's hurry this often. */
#define NODE_SNAP_HURRY_CHECK_NS (2ull * NS_PER_MS)

static void node_send(struct node *n, uint32_t ip, uint16_t dst_port, uint16_t src_port,
		      const void *payload, size_t size)
{
	HASP_ASSERT(payload != NULL && size > 0);
	n->net.send(n->net.ctx, ip, dst_port, src_port, payload, size);
}

/* struct node_loop: how dispatch.c and notify.c send a client datagram. */
static void loop_client_send(struct node *n, uint32_t ip, uint16_t port, const void *payload,
			     size_t size)
{
	HASP_ASSERT(n->self != NULL);
	node_send(n, ip, port, n->self->client_port, payload, size);
}

/* ---- membership blob of snapshot files: count u8, count x (id u32, role u8) ---- */

static uint32_t conf_encode(const struct raft_conf *c, uint8_t *buf)
{
	uint32_t off = 0;
	buf[off++] = (uint8_t)c->count;
	for (uint32_t i = 0; i < c->count; i++) {
		uint32_t id = c->members[i].id;
		memcpy(buf + off, &id, 4); /* little-endian host (x86, arm64) */
		off += 4;
		buf[off++] = c->members[i].role;
	}
	return off;
}

static bool conf_decode(const uint8_t *buf, uint32_t size, struct raft_conf *c)
{
	if (size < 1 || buf[0] > RAFT_CONF_MEMBERS_MAX || size != 1u + buf[0] * 5u)
		return false;
	c->count = buf[0];
	for (uint32_t i = 0; i < c->count; i++) {
		memcpy(&c->members[i].id, buf + 1 + i * 5, 4);
		c->members[i].role = buf[1 + i * 5 + 4];
	}
	return true;
}

/* ---- persist: hard state ---- */

/* Raft §3.8 / Figure 2: term and vote are on stable storage before any
 * message of the same update leaves (a restarted node must not vote twice).
 * The save is one small write + fdatasync; we wait for it here. It happens
 * on elections only, never per request. */
static void persist_hard_state(struct node *n, uint64_t term, uint32_t vote)
{
	struct hard_state hs = { .term = term, .vote = vote };
	int64_t seq = hardstate_save(&n->st.hs, &hs);

	n->stats.hardstate_saves++;
	while (seq > 0 && hardstate_durable_seq(&n->st.hs) < (uint64_t)seq && !storage_failed(&n->st))
		(void)storage_poll(&n->st, true);
	if (seq <= 0 || storage_failed(&n->st)) {
		n->failed = true;
		n->stats.storage_failures++;
		LOG_ERROR(node, "hard state save failed dir=%s: no more acknowledgements",
			  n->cfg.data_dir);
	}
}

/* ---- persist: entries ---- */

static void persist_entries(struct node *n, const struct raft_entry *e, uint32_t count)
{
	HASP_ASSERT(count > 0);
	/* A write that starts at or below the end of the log replaces the tail
	 * (raft: "drop every logged entry with index >= entries[0].index"). */
	if (e[0].index <= wal_last_index(&n->st.wal)) {
		int rc = wal_truncate_suffix(&n->st.wal, e[0].index - 1);
		while (rc == -HASP_EFULL) {
			n->stats.wal_full_waits++;
			(void)storage_poll(&n->st, true);
			rc = wal_truncate_suffix(&n->st.wal, e[0].index - 1);
		}
		if (rc != 0)
			goto failed;
		if (n->durable_reported >= e[0].index)
			n->durable_reported = e[0].index - 1;
	}
	for (uint32_t i = 0; i < count; i++) {
		struct wal_entry we = {
			.index = e[i].index, .term = e[i].term, .type = e[i].type,
			.size = e[i].size, .data = e[i].data,
		};
		int rc = wal_append(&n->st.wal, &we);
		/* Every write slot busy: a designed back-pressure state; wait
		 * for one completion rather than lose the entry. */
		while (rc == -HASP_EFULL) {
			n->stats.wal_full_waits++;
			(void)storage_poll(&n->st, true);
			rc = wal_append(&n->st.wal, &we);
		}
		if (rc != 0)
			goto failed;
	}
	if (wal_submit(&n->st.wal) != 0)
		goto failed;
	return;
failed:
	if (!n->failed)
		LOG_ERROR(node, "WAL append failed dir=%s: no more acknowledgements", n->cfg.data_dir);
	n->failed = true;
	n->stats.storage_failures++;
}

/* ---- persist: InstallSnapshot ---- */

static void persist_snap_chunk(struct node *n, const struct raft_update *up)
{
	if (up->snap_chunk_offset > n->snap_buf_size ||
	    up->snap_chunk_size > n->snap_buf_size - up->snap_chunk_offset) {
		n->stats.snap_chunk_dropped++;
		return;
	}
	memcpy(n->snap_recv + up->snap_chunk_offset, up->snap_chunk, up->snap_chunk_size);
}

static int save_snapshot(struct node *n, uint64_t index, uint64_t term, const struct raft_conf *conf,
			 const uint8_t *data, uint64_t size, const struct snapshot_pace *pace)
{
	uint8_t membership[1 + RAFT_CONF_MEMBERS_MAX * 5];
	struct snapshot_meta meta = {
		.last_index = index, .last_term = term,
		.membership_size = conf_encode(conf, membership), .data_size = size,
	};
	return snapshot_save(n->st.io, &meta, membership, data, n->cfg.snapshots_kept, pace);
}

static void snapshot_settle(struct node *n);

static void persist_snap_install(struct node *n, const struct raft_update *up)
{
	uint32_t next = n->snap_cur ^ 1u;
	int rc;

	snapshot_settle(n); /* a save in flight fills snap_buf[next] */
	if (up->snap_size > n->snap_buf_size) {
		n->stats.snap_chunk_dropped++;
		return;
	}
	rc = locks_snapshot_restore(&n->sm, n->snap_recv, up->snap_size);
	if (rc != 0) {
		/* raft validated the transfer; a snapshot our state machine
		 * refuses means a configuration mismatch between nodes. */
		LOG_ERROR(node, "snapshot install refused index=%llu rc=%s",
			  (unsigned long long)up->snap_index, hasp_strerror_name(rc));
		n->failed = true;
		return;
	}
	memcpy(n->snap_buf[next], n->snap_recv, up->snap_size);
	n->snap_size[next] = up->snap_size;
	rc = save_snapshot(n, up->snap_index, up->snap_term, &up->snap_conf, n->snap_buf[next],
			   up->snap_size, NULL);
	if (rc == 0)
		rc = up->snap_log_reset || wal_last_index(&n->st.wal) < up->snap_index
			     ? wal_reset(&n->st.wal, up->snap_index)
			     : wal_compact(&n->st.wal, up->snap_index);
	if (rc < 0) {
		LOG_ERROR(node, "snapshot install save failed dir=%s rc=%s", n->cfg.data_dir,
			  hasp_strerror_name(rc));
		n->failed = true;
		n->stats.storage_failures++;
		return;
	}
	n->snap_cur = next;
	n->applied = up->snap_index;
	if (n->durable_reported > up->snap_index || up->snap_log_reset)
		n->durable_reported = up->snap_index;
	n->snap_report = true;
	n->snap_report_index = up->snap_index;
	n->stats.snapshots_installed++;
	notify_sessions_prune(n); /* sessions that ended inside the snapshot */
	dispatch_step_down(n); /* any pending index may now mean something else */
}

/* ---- a stalled leader (docs/PROTOCOL.md "Events from a stalled leader") ---- */

static void node_update(struct node *n);

static uint64_t election_timeout_ns(const struct node *n)
{
	return (uint64_t)n->cfg.election_ticks * n->cfg.tick_ms * NS_PER_MS;
}

/* One quorum round (a ReadIndex, Raft §6.4) that can only complete with
 * answers to messages sent after now: if it does, this node still led
 * after its stall. Refused (window or read queue full): asked again from
 * node_work(). */
static void lead_confirm(struct node *n)
{
	uint64_t ctx = ++n->read_ctx;
	struct raft_event ev = { .type = RAFT_EVENT_READ_INDEX, .read = { .ctx = ctx } };
	n->confirm_ns = n->now_ns;
	raft_step(&n->raft, &ev, &n->up);
	if (n->up.reject == RAFT_OK)
		n->confirm_ctx = ctx;
	node_update(n);
}

static void lead_confirmed(struct node *n, const struct raft_read *reads, uint32_t count)
{
	for (uint32_t k = 0; k < count && n->confirm_ctx != 0; k++) {
		if (reads[k].ctx != n->confirm_ctx)
			continue;
		n->confirm_ctx = 0;
		if (n->lead_unconfirmed && n->role == RAFT_LEADER) {
			n->lead_unconfirmed = false;
			LOG_INFO(node, "leadership confirmed after a stall node=%u term=%llu: events resume",
				 n->cfg.node_id, (unsigned long long)n->raft.term);
		}
	}
}

/* Every input carries the time; a leader whose previous input is more
 * than an election timeout old was not running (SIGSTOP, a paused VM, a
 * starved process): another node may lead by now, and what it queued
 * (held watch events) or is about to apply from the datagrams that waited
 * for it (acknowledgements of its own proposals) would reach clients
 * after the new leader's events. It holds them until a quorum confirms it. */
static void node_clock(struct node *n, uint64_t now_ns)
{
	if (now_ns <= n->now_ns)
		return;
	uint64_t gap = now_ns - n->now_ns;
	n->now_ns = now_ns;
	if (n->role != RAFT_LEADER || gap <= election_timeout_ns(n) || n->stopping || n->failed)
		return;
	n->stats.leader_stalls++;
	if (!n->lead_unconfirmed)
		LOG_WARN(node, "leader did not run for %llu ms (election timeout %llu ms) node=%u term=%llu: "
			 "events held until a quorum confirms it still leads",
			 (unsigned long long)(gap / NS_PER_MS),
			 (unsigned long long)(election_timeout_ns(n) / NS_PER_MS), n->cfg.node_id,
			 (unsigned long long)n->raft.term);
	n->lead_unconfirmed = true;
	lead_confirm(n);
}

/* ---- send ---- */

static void send_msgs(struct node *n, const struct raft_msg *msgs, uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		const struct node_member *m = node_config_member(&n->cfg, msgs[i].to);
		if (m == NULL)
			continue;
		int size = msg_codec_encode(&msgs[i], n->tx, sizeof(n->tx) - PEER_AUTH_TRAILER_SIZE);
		if (size <= 0) {
			n->stats.peer_tx_errors++;
			continue;
		}
		uint32_t k = (uint32_t)(m - n->cfg.members);
		size_t sealed = (size_t)size;
		if (n->cfg.peer_auth) {
			/* A removed member gets nothing but the news of its
			 * removal (raft's answer to its vote request). */
			const struct peer_keys *pk = &n->peer_keys[k];
			if (!pk->keyed && !(pk->removed && msgs[i].not_member))
				continue;
			sealed = peer_auth_seal(&n->peer_keys[k].tx, &n->peer_auth_tx, n->tx, (size_t)size,
						sizeof(n->tx));
		}
		HASP_ASSERT(sealed >= (size_t)size);
		node_send(n, m->ip, m->peer_port, n->self->peer_port, n->tx, sealed);
		n->stats.peer_tx++;
		if (msgs[i].type == RAFT_MSG_APPEND && msgs[i].entry_count == 0 && n->peer_probe_ns[k] == 0)
			n->peer_probe_ns[k] = n->now_ns;
	}
}

/* ---- apply ---- */

static void apply_entries(struct node *n, const struct raft_entry *e, uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		HASP_ASSERT(e[i].index == n->applied + 1);
		n->applied = e[i].index;
		if (e[i].type != RAFT_ENTRY_COMMAND)
			continue; /* raft's no-op and configuration entries */
		struct locks_cmd cmd;
		if (locks_cmd_decode(e[i].data, e[i].size, &cmd) != 0) {
			/* Only the leader encodes commands; a bad one is a bug
			 * or a foreign log. Count it and keep indexes moving. */
			n->stats.apply_decode_errors++;
			continue;
		}
		struct locks_result res = { .events = n->events, .event_count_max = n->events_max };
		locks_apply(&n->sm, e[i].index, &cmd, &res);
		n->stats.applied_commands++;
		dispatch_applied(n, e[i].index, &cmd, &res);
		notify_events(n, e[i].index, res.events, res.event_count);
		if ((cmd.op == LOCKS_OP_SESSION_CLOSE || cmd.op == LOCKS_OP_SESSION_EXPIRE) &&
		    res.reply.status == HASP_STATUS_OK && res.reply.reason != LOCKS_REASON_NOT_DUE)
			notify_session_end(n, cmd.session_id);
	}
}

/* A committed configuration that no longer lists a member revokes its pair
 * keys (docs/SECURITY.md 3.5): from here on its datagrams, whatever address
 * they come from, fail their MAC. Only committed ones: an uncommitted
 * configuration may still be replaced. Raft appends a configuration only
 * after the previous one committed, so the latest one is the one to follow
 * once it commits. */
static void follow_peer_keys(struct node *n)
{
	const struct raft *r = &n->raft;
	if (r->conf_index == 0 || r->conf_index > r->commit || r->conf_index == n->peer_keys_conf_index)
		return;
	n->peer_keys_conf_index = r->conf_index;
	uint32_t ids[RAFT_CONF_MEMBERS_MAX];
	for (uint32_t i = 0; i < r->conf.count; i++)
		ids[i] = r->conf.members[i].id;
	uint32_t before = n->cfg.member_count;
	uint32_t revoked = peer_keys_follow(n->peer_keys, &n->cfg, ids, r->conf.count);
	HASP_ASSERT(before == n->cfg.member_count);
	if (revoked == 0)
		return;
	n->stats.peer_keys_revoked += revoked;
	for (uint32_t k = 0; k < n->cfg.member_count; k++)
		if (n->peer_keys[k].seen && !n->peer_keys[k].keyed && n->cfg.members[k].id != n->cfg.node_id)
			LOG_INFO(node, "peer keys revoked node=%u index=%llu (no longer a member)",
				 n->cfg.members[k].id, (unsigned long long)r->conf_index);
}

/* The leader has applied its term's first entry (the no-op): the commands
 * clients send from now on can commit. Logged with the time since it won,
 * so that a failover's wait can be split into the election, this, and the
 * client's own part (perf/failover). */
static void lead_ready(struct node *n)
{
	n->lead_ready = true;
	n->lead_ready_ns_last = n->now_ns - n->lead_won_ns;
	LOG_INFO(node, "leader ready node=%u term=%llu after_ms=%.3f", n->cfg.node_id,
		 (unsigned long long)n->raft.term, (double)n->lead_ready_ns_last / 1e6);
}

/*
 * Handles the update of the last raft_step(), in the one order that keeps
 * Raft safe (docs/RAFT.md, Figure 2; docs/STYLE.md §1):
 *
 *   1. persist: term and vote durably (waited for) BEFORE any message of
 *      this update leaves; received snapshot chunks and installs stored
 *      before the reply that acknowledges them; log entries handed to the
 *      WAL (io_uring, asynchronous) -- on the leader in parallel with
 *      sending them (§10.2.1). Raft acknowledges entries only after we
 *      report them durable (RAFT_EVENT_PERSISTED from node_work()).
 *   2. send: the messages.
 *   3. apply: committed entries to the lock state machine, in order.
 *   4. reply: clients whose commands applied (inside apply), reads whose
 *      index is applied, refusals, role changes.
 *
 * A node whose disk failed stops here: it must not acknowledge anything.
 */
static void node_update(struct node *n)
{
	const struct raft_update *up = &n->up;

	HASP_ASSERT(n->applied <= n->raft.applied);

	/* 1. persist */
	if (up->hard_state_changed)
		persist_hard_state(n, up->term, up->vote);
	if (up->snap_chunk_size > 0)
		persist_snap_chunk(n, up);
	if (up->snap_install)
		persist_snap_install(n, up);
	if (up->entry_count > 0)
		persist_entries(n, up->entries, up->entry_count);
	if (n->failed)
		return;

	/* 2. send */
	send_msgs(n, up->msgs, up->msg_count);

	/* 3. apply (replies to clients whose commands applied go out here) */
	node_latency_committed(n);
	if (up->apply_count > 0) {
		uint64_t t0 = clock_monotonic_ns();
		apply_entries(n, up->apply, up->apply_count);
		node_latency_applied(n, clock_monotonic_ns() - t0);
	}
	if (up->snapshot_wanted)
		n->snapshot_wanted = true;

	/* 4. reply */
	uint8_t old_role = n->role;
	n->role = up->role;
	n->leader_id = up->leader_id;
	n->term = n->raft.term;
	if (up->reads_dropped > 0 || (old_role == RAFT_LEADER && up->role != RAFT_LEADER))
		dispatch_step_down(n);
	if (up->read_count > 0) {
		dispatch_reads_ready(n, up->reads, up->read_count);
		lead_confirmed(n, up->reads, up->read_count);
	}
	if (up->role != old_role || up->reads_dropped > 0)
		n->confirm_ctx = 0; /* a new term decides afresh; a lost round is asked again */
	if (up->role != RAFT_LEADER)
		n->lead_unconfirmed = false; /* a follower pushes nothing anyway */
	if (up->role_changed && up->role == RAFT_LEADER && old_role != RAFT_LEADER) {
		/* docs/STATE_MACHINE.md: a TICK is the first command of a
		 * term, so log time is rebased onto this leader's clock. */
		n->tick_due = true;
		n->expiry_fence = 0;
		n->lead_won_ns = n->now_ns;
		n->lead_ready = false;
		LOG_INFO(node, "leader node=%u term=%llu", n->cfg.node_id,
			 (unsigned long long)n->raft.term);
	}
	if (n->role == RAFT_LEADER && !n->lead_ready && n->applied >= n->raft.term_start)
		lead_ready(n);
	if (n->applied > 0)
		(void)dispatch_serve_reads(n);
	if (n->cfg.peer_auth)
		follow_peer_keys(n);
	if (raft_removed(&n->raft) != n->removed) {
		n->removed = !n->removed;
		if (n->removed && n->raft.removal_notice_index > n->raft.conf_index)
			LOG_WARN(node, "removed from the configuration node=%u index=%llu (told by a member; "
				 "ours is %llu): no longer campaigns; stop it, or add it back (members add)",
				 n->cfg.node_id, (unsigned long long)n->raft.removal_notice_index,
				 (unsigned long long)n->raft.conf_index);
		else if (n->removed)
			LOG_WARN(node, "removed from the configuration node=%u index=%llu: no longer campaigns "
				 "or votes; stop it, or add it back (members add)", n->cfg.node_id,
				 (unsigned long long)n->raft.conf_index);
		else
			LOG_INFO(node, "member again node=%u", n->cfg.node_id);
	}
}

void node_step(struct node *n, const struct raft_event *ev)
{
	raft_step(&n->raft, ev, &n->up);
	node_update(n);
}

/* ---- start: recovery ---- */

struct replay_ctx {
	struct node *n;
	uint64_t after;           /* snapshot index: skip entries <= it */
	struct raft_entry *entries;
	uint8_t *data;
	uint64_t data_used, data_size;
	uint32_t count, max;
};

static int replay_visit(void *arg, const struct wal_entry *e)
{
	struct replay_ctx *rc = arg;
	if (e->index <= rc->after)
		return 0;
	if (rc->count == rc->max || rc->data_used + e->size > rc->data_size)
		return -HASP_ETOOBIG;
	if (rc->count > 0 && e->index != rc->entries[rc->count - 1].index + 1)
		return -HASP_ECORRUPT;
	memcpy(rc->data + rc->data_used, e->data, e->size);
	rc->entries[rc->count] = (struct raft_entry){
		.term = e->term, .index = e->index, .data = rc->data + rc->data_used,
		.size = e->size, .type = (uint8_t)e->type,
	};
	rc->data_used += e->size;
	rc->count++;
	return 0;
}

static int recover(struct node *n, const struct hard_state *hs, char *err, size_t err_size)
{
	struct raft_persisted_state ps = { .term = hs->term, .vote = (uint32_t)hs->vote };
	struct snapshot snap;
	int rc;

	rc = snapshot_load(n->st.io, &snap);
	if (rc == 0) {
		if (snap.meta.data_size > n->snap_buf_size ||
		    !conf_decode(snap.membership, snap.meta.membership_size, &ps.snap_conf)) {
			snapshot_release(&snap);
			snprintf(err, err_size, "data_dir %s: snapshot at index %llu does not fit this configuration",
				 n->cfg.data_dir, (unsigned long long)snap.meta.last_index);
			return -HASP_ECORRUPT;
		}
		rc = locks_snapshot_restore(&n->sm, snap.data, snap.meta.data_size);
		if (rc != 0) {
			snprintf(err, err_size, "data_dir %s: snapshot at index %llu refused by the state machine: %s",
				 n->cfg.data_dir, (unsigned long long)snap.meta.last_index, hasp_strerror(rc));
			snapshot_release(&snap);
			return rc;
		}
		memcpy(n->snap_buf[0], snap.data, snap.meta.data_size);
		n->snap_size[0] = snap.meta.data_size;
		ps.snap_index = snap.meta.last_index;
		ps.snap_term = snap.meta.last_term;
		ps.snap_data = n->snap_buf[0];
		ps.snap_size = snap.meta.data_size;
		snapshot_release(&snap);
	} else if (rc == -HASP_ENOENT && n->cfg.join) {
		/* Joining an existing cluster: no configuration of our own; the
		 * leader's log (or snapshot) brings it (raft.h, raft_restore). */
		ps.snap_conf.count = 0;
	} else if (rc == -HASP_ENOENT) {
		/* A new cluster: every configured member is an initial voter. */
		ps.snap_conf.count = n->cfg.member_count;
		for (uint32_t i = 0; i < n->cfg.member_count; i++)
			ps.snap_conf.members[i] = (struct raft_member){ n->cfg.members[i].id, RAFT_VOTER };
	} else {
		snprintf(err, err_size, "data_dir %s: cannot read snapshots: %s", n->cfg.data_dir,
			 hasp_strerror(rc));
		return rc;
	}

	struct replay_ctx rctx = { .n = n, .after = ps.snap_index, .max = n->cfg.log_window };
	rctx.data_size = (uint64_t)n->cfg.log_window * n->raft.cfg.entry_bytes_max;
	rctx.entries = hasp_calloc(rctx.max, sizeof(*rctx.entries));
	rctx.data = hasp_alloc(rctx.data_size);
	if (rctx.entries == NULL || rctx.data == NULL) {
		hasp_free(rctx.entries);
		hasp_free(rctx.data);
		snprintf(err, err_size, "out of memory replaying the WAL");
		return -HASP_ENOMEM;
	}
	rc = wal_replay(&n->st.wal, replay_visit, &rctx);
	if (rc == 0) {
		/* Term and vote are durable before any entry or snapshot of their
		 * term: a hard state older than those lost its newest vote. */
		uint64_t last_term = rctx.count > 0 ? rctx.entries[rctx.count - 1].term : 0;
		int bad = storage_check_hard_state(&n->st, hs, ps.snap_index, ps.snap_term, last_term,
						   err, err_size);
		if (bad != 0) {
			LOG_ERROR(node, "data_dir=%s: %s", n->cfg.data_dir, err);
			hasp_free(rctx.entries);
			hasp_free(rctx.data);
			return bad;
		}
	}
	if (rc == 0 && rctx.count > 0 && rctx.entries[0].index != ps.snap_index + 1)
		rc = -HASP_ECORRUPT; /* a gap between the snapshot and the log */
	if (rc == 0 && wal_last_index(&n->st.wal) < ps.snap_index)
		rc = wal_reset(&n->st.wal, ps.snap_index); /* log behind the snapshot */
	if (rc == 0) {
		ps.entries = rctx.entries;
		ps.entry_count = rctx.count;
		rc = raft_restore(&n->raft, &ps);
	}
	hasp_free(rctx.entries);
	hasp_free(rctx.data);
	if (rc != 0) {
		snprintf(err, err_size, "data_dir %s: WAL does not continue the snapshot at %llu: %s",
			 n->cfg.data_dir, (unsigned long long)ps.snap_index, hasp_strerror(rc));
		return rc == -HASP_ECONFIG ? -HASP_ECORRUPT : rc;
	}
	n->applied = ps.snap_index;
	n->durable_reported = wal_last_index(&n->st.wal);
	n->term = n->raft.term;
	return 0;
}

/* True when path is a directory with no entries (haspd creates a missing
 * data dir itself, so an empty one was made, or emptied, by someone else). */
static bool dir_exists_empty(const char *path)
{
	DIR *d = opendir(path);
	bool empty = d != NULL;
	struct dirent *e;

	while (d != NULL && empty && (e = readdir(d)) != NULL)
		empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
	if (d != NULL)
		closedir(d);
	return empty;
}

/* The largest snapshot the state machine can write for its capacities: the
 * tables' memory plus slack for headers. */
static uint64_t snapshot_buf_size(const struct locks_config *lc)
{
	return locks_memory_size(lc) + (1u << 20);
}

/* On a real disk (io.ops NULL: io_uring) snapshots are written by a
 * thread from a copy of the state machine (node/snap_writer.h): the copy's
 * tables are made here, once, with the live ones' configuration, and the
 * thread's CPUs are taken now, while the process's affinity is still whole
 * (before EAL init pins this thread). The simulated disk saves inline and
 * needs neither. */
static int snapshot_writer_init(struct node *n, struct storage_io io)
{
	cpu_set_t cpus;

	if (io.ops != NULL)
		return 0;
	int rc = locks_init(&n->snap_copy, &n->sm.cfg);
	if (rc != 0)
		return rc;
	/* Both state machines' pages now, not on the lcore: a first touch
	 * there cost 25-45 us a page on this VM (the first copy into fresh
	 * memory stopped the lcore 184 ms at 100,000 locks). */
	locks_prefault(&n->snap_copy);
	locks_prefault(&n->sm);
	bool known = sched_getaffinity(0, sizeof(cpus), &cpus) == 0;
	rc = snap_writer_init(&n->snap_writer, known ? &cpus : NULL);
	n->snap_writer_ready = rc == 0;
	return rc;
}

int node_init(struct node *n, const struct node_config *cfg, struct storage_io io,
	      const struct node_net *net, uint64_t now_ns, char *err, size_t err_size)
{
	struct raft_config rcfg;
	struct hard_state hs;
	int rc;

	memset(n, 0, sizeof(*n));
	n->cfg = *cfg;
	n->net = *net;
	n->loop = (struct node_loop){ .client_send = loop_client_send, .raft_updated = node_update };
	n->now_ns = now_ns;
	rc = node_config_check(&n->cfg, err, err_size);
	if (rc != 0)
		return rc;
	n->self = node_config_self(&n->cfg);
	if (n->cfg.peer_auth) {
		if (auth_init() != 0) {
			snprintf(err, err_size, "node_key_file: libsodium failed to initialise");
			return -HASP_ESYS;
		}
		/* The epoch orders this process's datagrams after those of every
		 * earlier start of this node (docs/SECURITY.md: restarts). */
		n->peer_auth_tx.epoch = clock_realtime_ns();
		HASP_ASSERT(n->peer_auth_tx.epoch != 0);
		n->peer_auth_tx.counter = 0;
		/* Pair keys, once per member (docs/SECURITY.md 3.5); the member
		 * lines are the members this node knows at start. */
		for (uint32_t k = 0; k < n->cfg.member_count; k++) {
			const struct node_member *m = &n->cfg.members[k];
			if (m->id == n->cfg.node_id)
				continue;
			if (peer_keys_derive(&n->peer_keys[k], &n->cfg, m) != 0) {
				snprintf(err, err_size, "member: node %u's public key is not usable (a low-order point)",
					 m->id);
				return -HASP_ECONFIG;
			}
			n->peer_keys[k].seen = true;
		}
	}

	raft_config_default(&rcfg, cfg->cluster_id, cfg->node_id);
	rcfg.peers_max = NODE_MEMBERS_MAX;
	rcfg.election_ticks = cfg->election_ticks;
	rcfg.heartbeat_ticks = cfg->heartbeat_ticks;
	rcfg.log_window = cfg->log_window;
	rcfg.snapshot_threshold = cfg->snapshot_threshold;
	rcfg.snapshot_trailing = cfg->snapshot_trailing;
	/* Raft fills datagrams up to its MTU; the peer trailer (MAC, epoch,
	 * counter) must fit in the same frame, so raft gets the rest. Taken
	 * off with peer_auth = off too, so both modes send the same sizes. */
	rcfg.mtu -= PEER_AUTH_TRAILER_SIZE;
	prng_seed(&n->prng, now_ns ^ ((uint64_t)cfg->node_id << 32));
	rc = raft_init(&n->raft, &rcfg, &n->prng);
	if (rc != 0) {
		snprintf(err, err_size, "log_window: raft refused the configuration: %s", hasp_strerror(rc));
		return rc;
	}
	struct locks_config lcfg = cfg->locks;
	lcfg.hash_seed = prng_next(&n->prng);
	rc = locks_init(&n->sm, &lcfg);
	if (rc != 0) {
		snprintf(err, err_size, "locks_max: state machine init failed: %s", hasp_strerror(rc));
		goto fail_raft;
	}
	n->events_max = locks_events_max(&lcfg);
	n->events = hasp_calloc(n->events_max, sizeof(*n->events));
	n->range = hasp_calloc(NODE_RANGE_MAX + 1, sizeof(*n->range));
	n->snap_buf_size = snapshot_buf_size(&lcfg);
	n->snap_buf[0] = snap_buf_alloc(n->snap_buf_size);
	n->snap_buf[1] = snap_buf_alloc(n->snap_buf_size);
	n->snap_recv = hasp_alloc(n->snap_buf_size);
	n->rx_entries_max = msg_codec_entries_max(HASP_MTU_JUMBO);
	n->rx_entries = hasp_calloc(n->rx_entries_max, sizeof(*n->rx_entries));
	if (n->events == NULL || n->range == NULL || n->snap_buf[0] == NULL || n->snap_buf[1] == NULL ||
	    n->snap_recv == NULL || n->rx_entries == NULL || snapshot_writer_init(n, io) != 0) {
		snprintf(err, err_size, "out of memory (snapshot buffers of %llu bytes)",
			 (unsigned long long)n->snap_buf_size);
		rc = -HASP_ENOMEM;
		goto fail_mem;
	}
	if ((rc = dispatch_init(n)) != 0 || (rc = notify_init(n)) != 0 ||
	    (rc = client_auth_init(&n->client_auth, lcfg.sessions_max)) != 0) {
		snprintf(err, err_size, "out of memory (batches, pending replies, sessions)");
		goto fail_mem;
	}
	if (cfg->client_auth) {
		if (auth_init() != 0) {
			snprintf(err, err_size, "client_identities_file: libsodium failed to initialise");
			rc = -HASP_ESYS;
			goto fail_mem;
		}
		rc = client_auth_load(&n->client_auth, cfg->client_identities_file,
				      cfg->identity_sessions_max, err, err_size);
		if (rc != 0)
			goto fail_mem;
	}

	if (io.ops == NULL && !cfg->join && !cfg->bootstrap && dir_exists_empty(cfg->data_dir)) {
		/* A first start in a directory made beforehand looks like this,
		 * and so does a member whose directory was wiped, which would
		 * come back as a voter that forgot its vote. */
		snprintf(err, err_size, "data_dir %s exists but is empty: a member whose data was lost "
			 "must be replaced, not restarted (docs/STORAGE.md, \"Replacing a lost data "
			 "dir\"); to bootstrap a new cluster here set bootstrap = 1, to join one set "
			 "join = 1", cfg->data_dir);
		rc = -HASP_ECONFIG;
		goto fail_mem;
	}
	struct storage_config scfg = { .dir = cfg->data_dir, .io = io, .segment_size = cfg->segment_size,
				       .writes_inflight_max = cfg->wal_writes_inflight,
				       .sync_mode = (enum wal_sync_mode)cfg->wal_sync,
				       .segment_fill = (enum wal_segment_fill)cfg->segment_fill };
	rc = storage_open(&n->st, &scfg, &hs);
	if (rc != 0) {
		if (rc == -HASP_ESYS) {
			int e = errno;
			snprintf(err, err_size, "data_dir %s: cannot create, open or write the directory: "
				 "%s (%s)", cfg->data_dir, strerror(e),
				 strerrorname_np(e) ? strerrorname_np(e) : "?");
		}
		else if (n->st.open_failed != NULL && strcmp(n->st.open_failed, "WAL") != 0)
			snprintf(err, err_size, "data_dir %s: %s refused: %s (see the log above and "
				 "docs/STORAGE.md)", cfg->data_dir, n->st.open_failed, hasp_strerror(rc));
		else
			snprintf(err, err_size, "data_dir %s: storage recovery failed: %s (see hasp-waldump)",
				 cfg->data_dir, hasp_strerror(rc));
		goto fail_mem;
	}
	n->storage_open = true;
	if (io.ops == NULL && access(cfg->data_dir, W_OK) != 0) {
		snprintf(err, err_size, "data_dir %s: not writable", cfg->data_dir);
		rc = -HASP_ESYS;
		goto fail_mem;
	}
	rc = recover(n, &hs, err, err_size);
	if (rc != 0)
		goto fail_mem;
	n->role = n->raft.role;
	n->next_tick_ns = now_ns + (uint64_t)cfg->tick_ms * NS_PER_MS;
	n->watch_tokens = cfg->watch_burst;
	n->watch_refill_ns = now_ns;
	HASP_ASSERT(n->self != NULL);
	return 0;

fail_mem:
	node_deinit(n);
	return rc;
fail_raft:
	raft_deinit(&n->raft);
	return rc;
}

int node_start_threads(struct node *n)
{
	return n->snap_writer_ready ? snap_writer_spawn(&n->snap_writer) : 0;
}

int node_wake_fd(struct node *n)
{
	return n->st.uring == NULL ? -1 : uring_io_ring_fd(n->st.uring);
}

static void drain_storage(struct node *n)
{
	if (!n->storage_open)
		return;
	if (!storage_failed(&n->st))
		(void)!wal_drain(&n->st.wal);
	while ((wal_inflight(&n->st.wal) > 0 || hardstate_busy(&n->st.hs)) && !storage_failed(&n->st))
		(void)storage_poll(&n->st, true);
}

void node_stop(struct node *n)
{
	n->stopping = true;
	dispatch_step_down(n);
	snapshot_settle(n);
	drain_storage(n);
}

void node_deinit(struct node *n)
{
	if (n->storage_open) {
		drain_storage(n);
		/* After a disk failure ops may still be outstanding; reap what
		 * completes so the ring can close. */
		for (int i = 0; i < 1000 && (wal_inflight(&n->st.wal) > 0 || n->st.hs.inflight); i++)
			(void)storage_poll(&n->st, true);
		storage_close(&n->st);
		n->storage_open = false;
	}
	notify_deinit(n);
	dispatch_deinit(n);
	client_auth_deinit(&n->client_auth);
	hasp_free(n->events);
	hasp_free(n->range);
	if (n->snap_writer_ready)
		snap_writer_deinit(&n->snap_writer); /* waits for a save in flight */
	n->snap_writer_ready = false;
	locks_deinit(&n->snap_copy);
	snap_buf_free(n->snap_buf[0], n->snap_buf_size);
	snap_buf_free(n->snap_buf[1], n->snap_buf_size);
	hasp_free(n->snap_recv);
	hasp_free(n->rx_entries);
	n->events = NULL;
	n->range = NULL;
	n->snap_buf[0] = n->snap_buf[1] = n->snap_recv = NULL;
	n->rx_entries = NULL;
	if (n->sm.locks != NULL || n->sm.sessions != NULL)
		locks_deinit(&n->sm);
	raft_deinit(&n->raft);
	auth_key_wipe(&n->cfg.node_key);
	for (uint32_t k = 0; k < NODE_MEMBERS_MAX; k++)
		peer_keys_revoke(&n->peer_keys[k]);
}

/* ---- datagrams ---- */

void node_client_rx(struct node *n, uint64_t now_ns, uint32_t src_ip, uint16_t src_port,
		    const uint8_t *payload, size_t size)
{
	HASP_ASSERT(n != NULL && n->self != NULL);
	HASP_ASSERT(payload != NULL || size == 0);
	node_clock(n, now_ns);
	n->stats.client_rx++;
	dispatch_request(n, src_ip, src_port, payload, size);
}

/* A datagram authentic under the revoked keys of a removed member: a vote
 * request (with a valid window) goes to raft, which does not count the
 * sender as a member and answers with a not_member notice (docs/RAFT.md,
 * issue 11 item 6), so that a member removed while it was down learns it
 * and stops campaigning. Nothing else of it reaches raft; the notice is no
 * larger than the request. */
static void removed_vote_request(struct node *n, const struct node_member *from,
				 const struct peer_auth_tag *tag, const uint8_t *payload, size_t size)
{
	struct raft_msg m;
	if (msg_codec_decode(&m, n->rx_entries, n->rx_entries_max, payload, size) != 0 ||
	    (m.type != RAFT_MSG_VOTE && m.type != RAFT_MSG_PRE_VOTE) || m.from != from->id ||
	    m.to != n->cfg.node_id || m.cluster_id != n->cfg.cluster_id)
		return;
	for (uint32_t i = 0; i < n->raft.conf.count; i++)
		if (n->raft.conf.members[i].id == m.from)
			return; /* a member again (by an entry we hold): not with old keys */
	uint32_t k = (uint32_t)(from - n->cfg.members);
	if (!peer_auth_window_accept(&n->peer_auth_rx[k], m.from, tag)) {
		n->stats.peer_auth_replayed++;
		return;
	}
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
	node_step(n, &ev);
}

void node_peer_rx(struct node *n, uint64_t now_ns, uint32_t src_ip, uint16_t src_port,
		  const uint8_t *payload, size_t size)
{
	struct raft_msg m;

	(void)src_port;
	HASP_ASSERT(n != NULL && n->self != NULL);
	HASP_ASSERT(payload != NULL || size == 0);
	node_clock(n, now_ns);
	n->stats.peer_rx++;
	if (n->stopping || n->failed)
		return;
	/* The MAC first (docs/SECURITY.md 3.2): the source address and the
	 * cluster id are no proof of anything, and nothing unauthenticated
	 * may reach the decoder, the RTT probe or raft. The source address
	 * only picks the key to try: the pair key of the member it names
	 * (members' addresses are distinct), so a datagram sealed by any
	 * other node, or by a revoked member, fails here. */
	struct peer_auth_tag tag = { 0 };
	const struct node_member *claimed = NULL;
	if (n->cfg.peer_auth) {
		claimed = node_config_member_by_ip(&n->cfg, src_ip);
		const struct peer_keys *pk =
			claimed != NULL ? &n->peer_keys[claimed - n->cfg.members] : NULL;
		long msg_size = pk != NULL && (pk->keyed || pk->removed) ? peer_auth_open(&pk->rx, payload, size, &tag)
									  : -1;
		if (msg_size < 0 || !pk->keyed) {
			/* No MAC of the address's member; or a member removed
			 * by a committed configuration, whose datagrams count
			 * as bad too: only its vote requests go on, for raft
			 * to tell it that it was removed (removed_vote_request). */
			n->stats.peer_auth_bad++;
			if (msg_size >= 0)
				removed_vote_request(n, claimed, &tag, payload, (size_t)msg_size);
			return;
		}
		size = (size_t)msg_size;
	}
	if (msg_codec_decode(&m, n->rx_entries, n->rx_entries_max, payload, size) != 0) {
		n->stats.peer_bad++;
		return;
	}
	/* Every message names its cluster and both nodes; anything else is
	 * dropped here and counted (raft checks the same again). */
	if (m.cluster_id != n->cfg.cluster_id) {
		n->stats.peer_dropped_cluster++;
		return;
	}
	const struct node_member *from = node_config_member(&n->cfg, m.from);
	if (m.to != n->cfg.node_id || from == NULL || from->ip != src_ip || m.from == n->cfg.node_id ||
	    (claimed != NULL && from != claimed)) {
		n->stats.peer_dropped_node++;
		return;
	}
	uint32_t k = (uint32_t)(from - n->cfg.members);
	/* Replays last: only a datagram that is authentic and from a member
	 * may move that member's window. */
	if (n->cfg.peer_auth && !peer_auth_window_accept(&n->peer_auth_rx[k], m.from, &tag)) {
		n->stats.peer_auth_replayed++;
		return;
	}
	if (m.type == RAFT_MSG_APPEND_RESP && n->peer_probe_ns[k] != 0) {
		n->peer_rtt_ns[k] = now_ns - n->peer_probe_ns[k];
		n->peer_rtt_samples[k]++;
		n->peer_probe_ns[k] = 0;
	}
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
	node_step(n, &ev);
}

/* ---- work ---- */

static bool report_durable(struct node *n)
{
	uint64_t d = wal_durable_index(&n->st.wal);
	if (d <= n->durable_reported)
		return false;
	uint64_t term = raft_term_at(&n->raft, d);
	n->durable_reported = d;
	if (term == 0)
		return false; /* compacted or replaced: nothing to report */
	struct raft_event ev = { .type = RAFT_EVENT_PERSISTED, .persisted = { .index = d, .term = term } };
	node_step(n, &ev);
	return true;
}

/* A failed snapshot save (a full disk: the WAL and the hard state are
 * preallocated and still take writes, a new snapshot file does not): count
 * it, try again after a bounded exponential backoff instead of on every
 * loop iteration, and log the first failure and then at most one summary
 * line per NODE_SNAP_LOG_NS. Health says "degraded" meanwhile. */
static void snapshot_failed(struct node *n, uint64_t index, int rc)
{
	n->stats.snapshot_failures++;
	n->snap_fail_error = rc;
	if (n->snap_fail_streak < UINT32_MAX)
		n->snap_fail_streak++;
	uint32_t shift = n->snap_fail_streak - 1 < 16 ? n->snap_fail_streak - 1 : 16;
	uint64_t backoff = NODE_SNAP_BACKOFF_MIN_NS << shift;
	if (backoff > NODE_SNAP_BACKOFF_MAX_NS)
		backoff = NODE_SNAP_BACKOFF_MAX_NS;
	n->snap_retry_ns = n->now_ns + backoff;
	if (n->snap_fail_streak == 1 || n->now_ns >= n->snap_log_ns) {
		LOG_ERROR(node, "snapshot save failed dir=%s index=%llu rc=%s (%u in a row, %llu "
				"not logged); next try in %llu ms; the log cannot be compacted "
				"(docs/STORAGE.md, \"Snapshot save failures\")",
			  n->cfg.data_dir, (unsigned long long)index, hasp_strerror_name(rc),
			  n->snap_fail_streak, (unsigned long long)n->snap_log_suppressed,
			  (unsigned long long)(backoff / NS_PER_MS));
		n->snap_log_ns = n->now_ns + NODE_SNAP_LOG_NS;
		n->snap_log_suppressed = 0;
	} else {
		n->snap_log_suppressed++;
	}
}

/* While snapshots fail the log cannot be compacted, and a leader whose log
 * window fills can take no more commands: hand leadership to a voter that
 * has every entry (once per election timeout), so the cluster goes on
 * committing on a node whose disk works. */
static void snapshot_failing_handoff(struct node *n)
{
	const struct raft *r = &n->raft;
	uint64_t last = raft_last_index(r);

	if (n->snap_fail_streak == 0 || r->role != RAFT_LEADER || r->transfer_target != 0 ||
	    n->now_ns < n->snap_transfer_ns || last + 1 - r->log.first < (uint64_t)r->log.window * 3 / 4)
		return;
	n->snap_transfer_ns = n->now_ns + (uint64_t)n->cfg.election_ticks * n->cfg.tick_ms * NS_PER_MS;
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		const struct raft_progress *pr = &r->progress[i];
		if (pr->id == 0 || pr->id == r->cfg.id || pr->role != RAFT_VOTER ||
		    pr->silent_ticks >= r->cfg.election_ticks || pr->match + 8 < last)
			continue;
		LOG_WARN(node, "snapshots failing (%s, %u in a row) and the log window is %llu/%u full: "
			       "handing leadership to node %u",
			 hasp_strerror_name(n->snap_fail_error), n->snap_fail_streak,
			 (unsigned long long)(last + 1 - r->log.first), r->log.window, pr->id);
		n->stats.snapshot_transfers++;
		struct raft_event ev = { .type = RAFT_EVENT_TRANSFER, .transfer = { .target = pr->id } };
		node_step(n, &ev);
		return;
	}
	LOG_WARN(node, "snapshots failing and the log window is filling, but no caught-up voter "
		       "can take over");
}

const char *node_degraded(const struct node *n, char *buf, size_t size)
{
	const struct raft *r = &n->raft;

	if (n->snap_fail_streak > 0) {
		snprintf(buf, size, "snapshot saves failing: %s, %u in a row",
			 hasp_strerror_name(n->snap_fail_error), n->snap_fail_streak);
		return buf;
	}
	if (r->role != RAFT_LEADER)
		return NULL;
	/* Replication lag, as the leader sees it: a member not heard from
	 * within the election timeout, or a voter more than a snapshot
	 * interval of committed entries behind (a learner lags until it has
	 * caught up: that is what promotion waits for). */
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		const struct raft_progress *pr = &r->progress[i];
		if (pr->id == 0 || pr->id == r->cfg.id)
			continue;
		if (pr->silent_ticks >= r->cfg.election_ticks) {
			snprintf(buf, size, "member %u not heard from", pr->id);
			return buf;
		}
		if (pr->role == RAFT_VOTER && r->commit > pr->match &&
		    r->commit - pr->match > r->cfg.snapshot_threshold) {
			snprintf(buf, size, "member %u lags %llu entries", pr->id,
				 (unsigned long long)(r->commit - pr->match));
			return buf;
		}
	}
	return NULL;
}

/* struct snapshot_pace's wait, on the writer thread: holds the file's data
 * to cfg.snapshot_write_rate MB/s from the job's first piece on (bytes *
 * 1000 / MB-per-s is nanoseconds). */
static void snapshot_pace_wait(void *arg, uint64_t written)
{
	struct node *n = arg;
	uint64_t until = n->snap_pace_start_ns + written * 1000u / n->cfg.snapshot_write_rate;

	n->snap_pace_pieces++;
	/* In slices, so that a hurry (node_snapshot_should_hurry) set during
	 * a long wait (a piece is 262 ms at 1 MB/s) is seen within one. */
	for (;;) {
		if (atomic_load_explicit(&n->snap_hurry, memory_order_relaxed)) {
			n->snap_hurry_pieces++;
			return;
		}
		uint64_t now = clock_monotonic_ns();
		if (now >= until)
			return;
		clock_sleep_until_ns(until - now > NODE_SNAP_HURRY_CHECK_NS ? now + NODE_SNAP_HURRY_CHECK_NS
									    : until);
	}
}

/* A paced snapshot must hurry once the raft log window is half full: the
 * log is compacted only when the file is done, and a full window refuses
 * every command (OVERLOADED). Half leaves the other half for the commands
 * that arrive while the rest is written at the disk's speed; config_ok
 * keeps threshold + trailing within that half, so a snapshot started on
 * time never hurries unless writing it takes longer than the next
 * window/2 - threshold commands. */
static bool node_snapshot_should_hurry(uint64_t log_first, uint64_t log_last, uint64_t window)
{
	uint64_t held = log_last + 1 >= log_first ? log_last + 1 - log_first : 0;
	return held >= window / 2;
}

/* The snapshot job: serializes snap_job_sm (the copy on a real disk, the
 * live state machine inline) into the job's buffer and saves it (temp file,
 * fsync, rename, directory fsync, trim), paced on the writer thread when
 * snapshot_write_rate is set (docs/STORAGE.md, "Snapshot write rate").
 * Runs on the writer thread on a real disk, reading only what the lcore
 * leaves alone while it runs (the copy, the job's fields and buffer, the
 * storage's directory), inline on the simulated disk. Allocates nothing. */
static int snapshot_job(void *arg, uint64_t *written)
{
	struct node *n = arg;
	uint8_t *buf = n->snap_buf[n->snap_job_buf];
	size_t out = 0;
	const struct snapshot_pace pace = {
		.piece = NODE_SNAPSHOT_PIECE, .after_piece = snapshot_pace_wait, .arg = n,
	};

	*written = 0;
	n->snap_pace_pieces = 0;
	n->snap_hurry_pieces = 0;
	/* One walk of the state (every session's replies since version 4);
	 * a buffer too small is refused. */
	if (locks_snapshot_write(n->snap_job_sm, buf, n->snap_buf_size, &out) != 0)
		return -HASP_ETOOBIG;
	*written = out;
	n->snap_pace_start_ns = clock_monotonic_ns();
	return save_snapshot(n, n->snap_job_index, n->snap_job_term, &n->snap_job_conf, buf, out,
			     n->snap_job_paced ? &pace : NULL);
}

/* The job ended: on success the buffer becomes the one raft sends, raft
 * compacts its log and the WAL drops the segments the snapshot covers.
 * `report` false: an InstallSnapshot supersedes it (counted, not reported). */
static void snapshot_finish(struct node *n, int rc, uint64_t written, bool report)
{
	uint32_t next = n->snap_job_buf;
	uint64_t index = n->snap_job_index;

	/* The job's own count (0 unpaced), read after the thread handed it back. */
	n->stats.snapshot_paced_pieces += n->snap_pace_pieces;
	n->stats.snapshot_hurried_pieces += n->snap_hurry_pieces;

	if (rc == -HASP_ETOOBIG) {
		n->stats.snapshot_too_big++;
		return;
	}
	if (rc != 0) {
		snapshot_failed(n, index, rc);
		return;
	}
	if (n->snap_fail_streak > 0)
		LOG_INFO(node, "snapshot save works again dir=%s index=%llu after %u failures",
			 n->cfg.data_dir, (unsigned long long)index, n->snap_fail_streak);
	n->snap_fail_streak = 0;
	n->snap_fail_error = 0;
	n->snap_retry_ns = 0;
	n->stats.snapshots_taken++;
	if (!report)
		return;
	n->snap_size[next] = written;
	n->snap_cur = next;
	struct raft_event ev = { .type = RAFT_EVENT_SNAPSHOT,
				 .snapshot = { .index = index, .data = n->snap_buf[next], .size = written } };
	node_step(n, &ev);
	if (wal_compact(&n->st.wal, index) < 0)
		LOG_WARN(node, "WAL compaction failed dir=%s index=%llu", n->cfg.data_dir,
			 (unsigned long long)index);
}

/* Waits for a save in flight (blocking) and records its result without
 * reporting it to raft: before an InstallSnapshot reuses its buffer, and
 * at a stop. */
static void snapshot_settle(struct node *n)
{
	int rc;
	uint64_t written;

	if (snap_writer_done(&n->snap_writer, true, &rc, &written))
		snapshot_finish(n, rc, written, false);
}

/* Takes a snapshot of the state at the applied index, makes it durable,
 * reports it to raft (which compacts its log) and drops WAL segments it
 * covers. On a real disk the work runs on the writer thread
 * (node/snap_writer.h) from a copy of the state machine, and the loop
 * finishes it in node_work once the thread is done; the lcore stops only
 * for the copy. On the simulated disk, or when no thread could be made, it
 * runs here, blocking. */
static void take_snapshot(struct node *n)
{
	uint64_t written = 0;

	n->snapshot_wanted = false;
	n->snap_job_index = n->applied;
	n->snap_job_term = raft_term_at(&n->raft, n->applied);
	n->snap_job_buf = n->snap_cur ^ 1u;
	if (n->snap_job_term == 0)
		return;
	n->snap_job_conf = n->raft.conf;
	if (n->snap_writer_ready && n->st.uring != NULL) {
		uint64_t t0 = clock_monotonic_ns();
		uint64_t replies = locks_copy(&n->snap_copy, &n->sm);
		uint64_t took = clock_monotonic_ns() - t0;
		n->snap_job_sm = &n->snap_copy;
		n->snap_job_paced = n->cfg.snapshot_write_rate > 0;
		atomic_store_explicit(&n->snap_hurry, false, memory_order_relaxed);
		if (snap_writer_start(&n->snap_writer, snapshot_job, n) == 0) {
			n->snap_copies++;
			n->snap_copy_ns_last = took;
			n->snap_copy_replies_last = replies;
			if (took > n->snap_copy_ns_max)
				n->snap_copy_ns_max = took;
			return;
		}
	}
	n->snap_job_sm = &n->sm;
	n->snap_job_paced = false; /* on the lcore: never wait */
	int rc = snapshot_job(n, &written);
	snapshot_finish(n, rc, written, true);
}

static bool leader_timers(struct node *n, uint64_t *deadline_ns)
{
	bool did = false;
	uint64_t now_ms = n->now_ns / NS_PER_MS;

	if (!node_is_leader(n))
		return false;
	/* The first command of a term is a TICK; afterwards one whenever
	 * nothing was proposed for time_tick_ms (bounds the lease extension
	 * of a failover: docs/STATE_MACHINE.md "Lease time"). */
	uint64_t tick_at = n->last_propose_ns + (uint64_t)n->cfg.time_tick_ms * NS_PER_MS;
	if (n->tick_due || n->now_ns >= tick_at) {
		struct locks_cmd tick = { .op = LOCKS_OP_TICK };
		dispatch_add_leader_cmd(n, &tick);
		n->tick_due = false;
		n->stats.ticks_proposed++;
		did = true;
	} else if (tick_at < *deadline_ns) {
		*deadline_ns = tick_at;
	}

	/* Expiry: what is due at our log time, batched without a cap per
	 * second; one round in flight at a time so a due lease is proposed
	 * once, not on every iteration until it applies. */
	if (n->applied < n->expiry_fence)
		return did;
	/* Nothing can have become due before the deadline we computed, unless
	 * a command applied since (it may have moved deadlines). */
	if (n->now_ns < n->expiry_check_ns && n->applied == n->expiry_checked_applied) {
		if (n->expiry_check_ns < *deadline_ns)
			*deadline_ns = n->expiry_check_ns;
		return did;
	}
	n->expiry_checked_applied = n->applied;
	n->expiry_check_ns = UINT64_MAX;
	uint64_t t = locks_log_time(&n->sm, n->term, now_ms);
	uint64_t ids[NODE_EXPIRE_IDS_MAX];
	uint32_t k = locks_leases_due(&n->sm, t, ids, NODE_EXPIRE_IDS_MAX);
	for (uint32_t i = 0; i < k; i++) {
		struct locks_cmd c = { .op = LOCKS_OP_LEASE_EXPIRE, .lease_id = ids[i] };
		dispatch_add_leader_cmd(n, &c);
	}
	uint32_t s = locks_sessions_due(&n->sm, t, ids, NODE_EXPIRE_IDS_MAX);
	for (uint32_t i = 0; i < s; i++) {
		struct locks_cmd c = { .op = LOCKS_OP_SESSION_EXPIRE, .session_id = ids[i] };
		dispatch_add_leader_cmd(n, &c);
	}
	if (k + s > 0) {
		n->stats.expiries_proposed += k + s;
		dispatch_flush(n);
		n->expiry_fence = raft_last_index(&n->raft);
		return true;
	}
	uint64_t dmin = locks_deadline_min(&n->sm);
	if (dmin != LOCKS_DEADLINE_NONE) {
		uint64_t at = n->now_ns + (dmin > t ? dmin - t : 0) * NS_PER_MS;
		n->expiry_check_ns = at;
		if (at < *deadline_ns)
			*deadline_ns = at;
	}
	return did;
}

/* After a stall (the process not scheduled on a starved machine, a paused
 * VM, a debugger), the ticks missed beyond NODE_TICKS_CATCH_UP are dropped
 * instead of replayed in one burst. Replayed, they would run out an
 * election timeout or a CheckQuorum window before the loop has read the
 * heartbeats and responses that queued meanwhile, so a node that was only
 * slow would start an election or step down, and a loaded cluster churns
 * through leaders (seen in the fault suite: 21 elections in 30 s at load
 * 15). Go's time.Ticker, which drives etcd's raft, drops ticks the same
 * way. Safe: nothing in hasp relies on ticks measuring real time, only
 * liveness does (no lease reads, RAFT.md; lock and session expiry follow
 * the clock, STATE_MACHINE.md). */
#define NODE_TICKS_CATCH_UP 2u /* ticks replayed at most after a stall */

static void node_drop_missed_ticks(struct node *n, uint64_t now_ns)
{
	uint64_t tick_ns = (uint64_t)n->cfg.tick_ms * NS_PER_MS;
	uint64_t late_ns = now_ns > n->next_tick_ns ? now_ns - n->next_tick_ns : 0;

	if (late_ns < NODE_TICKS_CATCH_UP * tick_ns)
		return;
	uint64_t missed = late_ns / tick_ns + 1;
	n->stats.ticks_dropped += missed - NODE_TICKS_CATCH_UP;
	n->next_tick_ns += (missed - NODE_TICKS_CATCH_UP) * tick_ns;
}

bool node_work(struct node *n, uint64_t now_ns, uint64_t *deadline_ns)
{
	bool did = false;
	int fd = node_wake_fd(n);

	HASP_ASSERT(deadline_ns != NULL);
	HASP_ASSERT(now_ns >= n->now_ns); /* CLOCK_MONOTONIC */
	node_clock(n, now_ns);
	if (n->failed)
		return false;
	/* The ring fd stays readable while completions wait, so the idle
	 * wait (ppoll) wakes for them and reaping here resets it. */
	if (storage_poll(&n->st, false) > 0)
		did = true;
	if (storage_failed(&n->st) && !n->failed) {
		n->failed = true;
		n->stats.storage_failures++;
		LOG_ERROR(node, "storage failed dir=%s: no more acknowledgements", n->cfg.data_dir);
		return true;
	}
	did |= report_durable(n);

	node_drop_missed_ticks(n, now_ns);
	while (now_ns >= n->next_tick_ns) {
		struct raft_event ev = { .type = RAFT_EVENT_TICK };
		node_step(n, &ev);
		n->next_tick_ns += (uint64_t)n->cfg.tick_ms * NS_PER_MS;
		did = true;
	}
	if (n->next_tick_ns < *deadline_ns)
		*deadline_ns = n->next_tick_ns;

	/* A confirmation round refused (asked again a tick later, not in a
	 * spin), or lost without a step-down (again after an election
	 * timeout). */
	if (n->lead_unconfirmed && n->role == RAFT_LEADER && !n->stopping &&
	    now_ns - n->confirm_ns >= (n->confirm_ctx == 0 ? (uint64_t)n->cfg.tick_ms * NS_PER_MS
							   : election_timeout_ns(n))) {
		lead_confirm(n);
		did = true;
	}
	if (!n->stopping) {
		did |= leader_timers(n, deadline_ns);
		if (n->batch_count > 0 || n->reads_collected > 0) {
			uint64_t close_at = n->batch_open_ns + (uint64_t)n->cfg.batch_delay_us * 1000u;
			if (now_ns >= close_at) {
				dispatch_flush(n);
				did = true;
			} else if (close_at < *deadline_ns) {
				*deadline_ns = close_at;
			}
		}
	}
	if (dispatch_serve_reads(n) > 0)
		did = true;
	did |= notify_flush(n, deadline_ns);
	if (n->snap_report) {
		n->snap_report = false;
		struct raft_event ev = { .type = RAFT_EVENT_SNAPSHOT,
					 .snapshot = { .index = n->snap_report_index,
						       .data = n->snap_buf[n->snap_cur],
						       .size = n->snap_size[n->snap_cur] } };
		node_step(n, &ev);
		did = true;
	}
	if (snap_writer_running(&n->snap_writer)) {
		int rc;
		uint64_t written;
		if (n->snap_job_paced && !atomic_load_explicit(&n->snap_hurry, memory_order_relaxed) &&
		    node_snapshot_should_hurry(n->raft.log.first, raft_last_index(&n->raft),
					       n->raft.log.window)) {
			atomic_store_explicit(&n->snap_hurry, true, memory_order_relaxed);
			n->stats.snapshot_hurried++;
			did = true;
		}
		if (snap_writer_done(&n->snap_writer, false, &rc, &written)) {
			snapshot_finish(n, rc, written, !n->failed);
			did = true;
		} else if (now_ns + NODE_SNAP_POLL_NS < *deadline_ns) {
			*deadline_ns = now_ns + NODE_SNAP_POLL_NS;
		}
	}
	if (n->snapshot_wanted && !n->failed && !snap_writer_running(&n->snap_writer)) {
		if (now_ns >= n->snap_retry_ns) {
			take_snapshot(n);
			did = true;
		} else if (n->snap_retry_ns < *deadline_ns) {
			*deadline_ns = n->snap_retry_ns;
		}
	}
	if (!n->stopping && !n->failed)
		snapshot_failing_handoff(n);
	/* Compacted segments' blocks, a step at a time (storage/wal.h). */
	did |= wal_retire_step(&n->st.wal, now_ns, deadline_ns);
	/* Without a ring fd (the simulated disk) look again soon while I/O
	 * is in flight; with one, the dataplane's idle wait (ppoll) wakes on
	 * the ring's completions. */
	if (fd < 0 && (wal_inflight(&n->st.wal) > 0 || hardstate_busy(&n->st.hs)) &&
	    now_ns + NODE_IO_POLL_NS < *deadline_ns)
		*deadline_ns = now_ns + NODE_IO_POLL_NS;
	/* About to sleep: let the WAL write its idle watermark if durable
	 * entries are not vouched for by a later write (docs/STORAGE.md), at
	 * most once per idle_watermark_ms; one held back wakes the node when
	 * its time comes. */
	if (!did && !n->failed && wal_idle_due(&n->st.wal)) {
		if (now_ns < n->watermark_next_ns) {
			if (n->watermark_next_ns < *deadline_ns)
				*deadline_ns = n->watermark_next_ns;
		} else if (wal_idle(&n->st.wal) != 0) {
			n->failed = true;
			n->stats.storage_failures++;
			LOG_ERROR(node, "WAL idle watermark failed dir=%s", n->cfg.data_dir);
		} else {
			n->watermark_next_ns = now_ns + (uint64_t)n->cfg.idle_watermark_ms * NS_PER_MS;
		}
	}
	return did;
}
