/*
 * Log replication on the leader. Throughput comes from three things: a
 * batch of proposals becomes consecutive entries in one step, AppendEntries
 * carry as many entries as fit one datagram, and several of them are in
 * flight per follower (bounded by count and bytes, progress.c). Losses are
 * repaired by the follower's reject with a (term, index) hint, which skips a
 * whole conflicting term per round trip, or by going back to the last
 * acknowledged index when a pipeline stalls (a UDP transport loses
 * messages without telling anyone).
 */
#include "raft/replicate.h"

#include "common/assert.h"
#include "raft/core.h"
#include "raft/election.h"
#include "raft/log.h"
#include "raft/membership.h"
#include "raft/msg_codec.h"
#include "raft/progress.h"
#include "raft/read_index.h"
#include "raft/snapshot.h"

void replicate_append_local(struct raft *r, uint8_t type, const void *data, uint32_t size)
{
	HASP_ASSERT(r->role == RAFT_LEADER);
	HASP_ASSERT(log_room(&r->log) > 0);
	const struct raft_entry *e = log_append(&r->log, r->term, type, data, size);
	if (e->index < r->dirty_from)
		r->dirty_from = e->index;
	if (type == RAFT_ENTRY_CONF)
		membership_on_append(r, e);
}

/* Entries past commit a leader accepts; the rest of the window is reserve
 * for no-ops of later leaders and for the entries the snapshot still
 * covers (see election.c become_leader). */
static uint64_t uncommitted_max(const struct raft *r)
{
	return r->log.window / 2;
}

void replicate_propose(struct raft *r, const struct raft_event *ev)
{
	struct raft_update *up = r->up;
	uint32_t count = ev->propose.count;

	if (r->role != RAFT_LEADER) {
		up->reject = RAFT_NOT_LEADER;
	} else if (r->transfer_target != 0) {
		up->reject = RAFT_TRANSFERRING;
	} else if (count == 0 || r->log.last - r->commit + count > uncommitted_max(r) ||
		   count > log_room(&r->log)) {
		up->reject = count == 0 ? RAFT_TOO_BIG : RAFT_FULL;
	} else {
		for (uint32_t i = 0; i < count; i++)
			if (ev->propose.bufs[i].size == 0 ||
			    ev->propose.bufs[i].size > r->cfg.entry_bytes_max)
				up->reject = RAFT_TOO_BIG;
	}
	if (up->reject != RAFT_OK) {
		r->counters.proposals_rejected++;
		return;
	}
	up->propose_index = r->log.last + 1;
	up->propose_count = count;
	for (uint32_t i = 0; i < count; i++)
		replicate_append_local(r, RAFT_ENTRY_COMMAND, ev->propose.bufs[i].data,
				       ev->propose.bufs[i].size);
	r->counters.proposals += count;
	replicate_broadcast(r);
	replicate_maybe_commit(r); /* a single voter commits on persistence */
}

/* Builds one AppendEntries at pr->next: as many entries as fit the
 * datagram, never wrapping the ring (so the entries are one array). */
static struct raft_msg *build_append(struct raft *r, struct raft_progress *pr, uint32_t *size_out)
{
	uint64_t prev = pr->next - 1;
	size_t budget = r->cfg.mtu - RAFT_DATAGRAM_OVERHEAD;
	size_t size = MSG_CODEC_HEADER_SIZE + MSG_CODEC_APPEND_FIXED_SIZE;
	uint32_t count = 0;

	HASP_ASSERT(log_has_term(&r->log, prev));
	struct raft_msg *m = core_msg(r, RAFT_MSG_APPEND, pr->id);
	if (m == NULL)
		return NULL;
	m->prev_index = prev;
	m->prev_term = log_term(&r->log, prev);
	m->commit = r->commit;
	m->read_seq = r->read_seq;
	if (pr->next <= r->log.last)
		m->entries = log_get(&r->log, pr->next);
	for (uint64_t i = pr->next; i <= r->log.last && count < UINT16_MAX; i++) {
		const struct raft_entry *e = log_get(&r->log, i);
		if (size + MSG_CODEC_ENTRY_HEADER_SIZE + e->size > budget)
			break;
		if (count > 0 && e != m->entries + count)
			break; /* the ring wraps here */
		size += MSG_CODEC_ENTRY_HEADER_SIZE + e->size;
		count++;
	}
	m->entry_count = count;
	HASP_ASSERT(msg_codec_size(m) == size);
	HASP_ASSERT(size <= budget);
	*size_out = (uint32_t)size;
	return m;
}

static bool entries_available(const struct raft *r, const struct raft_progress *pr)
{
	/* The previous entry's term is needed, and the entries from next. */
	return log_has_term(&r->log, pr->next - 1) &&
	       (pr->next > r->log.last || pr->next >= r->log.first);
}

void replicate_send_append(struct raft *r, struct raft_progress *pr)
{
	uint32_t size;

	HASP_ASSERT(r->role == RAFT_LEADER);
	if (pr->id == r->cfg.id)
		return;
	if (pr->state == RAFT_SNAPSHOTTING)
		return;
	if (!entries_available(r, pr)) {
		snapshot_start(r, pr);
		return;
	}
	if (pr->state == RAFT_PROBE) {
		if (pr->probe_sent)
			return;
		if (build_append(r, pr, &size) != NULL)
			pr->probe_sent = true;
		return;
	}
	while (pr->next <= r->log.last && !progress_inflight_full(r, pr)) {
		struct raft_msg *m = build_append(r, pr, &size);
		if (m == NULL)
			return;
		HASP_ASSERT(m->entry_count > 0);
		pr->next += m->entry_count;
		progress_inflight_add(pr, r->cfg.inflight_max, pr->next - 1, size);
	}
}

void replicate_broadcast(struct raft *r)
{
	for (uint32_t i = 0; i < r->cfg.peers_max; i++)
		if (r->progress[i].id != 0)
			replicate_send_append(r, &r->progress[i]);
}

void replicate_heartbeat(struct raft *r, struct raft_progress *pr)
{
	HASP_ASSERT(r->role == RAFT_LEADER);
	if (pr->id == r->cfg.id || pr->state == RAFT_SNAPSHOTTING)
		return;
	if (pr->state == RAFT_PROBE) {
		/* A probe doubles as the heartbeat and is resent if lost. */
		pr->probe_sent = false;
		replicate_send_append(r, pr);
		return;
	}
	if (!log_has_term(&r->log, pr->match))
		return;
	struct raft_msg *m = core_msg(r, RAFT_MSG_APPEND, pr->id);
	if (m == NULL)
		return;
	/* At match the follower surely has the entry (it acknowledged it
	 * durably), so a heartbeat never causes a spurious reject. */
	m->prev_index = pr->match;
	m->prev_term = log_term(&r->log, pr->match);
	m->commit = r->commit;
	m->read_seq = r->read_seq;
}

void replicate_heartbeat_all(struct raft *r)
{
	for (uint32_t i = 0; i < r->cfg.peers_max; i++)
		if (r->progress[i].id != 0)
			replicate_heartbeat(r, &r->progress[i]);
}

void replicate_tick(struct raft *r)
{
	HASP_ASSERT(r->role == RAFT_LEADER);
	r->heartbeat_elapsed++;
	r->election_elapsed++;
	if (r->transfer_target != 0 && ++r->transfer_elapsed >= r->cfg.election_ticks) {
		core_trace(r, "transfer to n%u aborted", r->transfer_target);
		r->transfer_target = 0;
	}
	if (r->election_elapsed >= r->cfg.election_ticks) {
		r->election_elapsed = 0;
		if (r->cfg.check_quorum) {
			election_check_quorum(r);
			if (r->role != RAFT_LEADER)
				return;
		}
	}
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		struct raft_progress *pr = &r->progress[i];
		if (pr->id == 0 || pr->id == r->cfg.id)
			continue;
		if (pr->silent_ticks < UINT32_MAX)
			pr->silent_ticks++;
		if (pr->state == RAFT_REPLICATE && pr->inflight_count > 0 &&
		    ++pr->stall_ticks >= 2 * r->cfg.heartbeat_ticks) {
			/* Nothing acknowledged for two heartbeats: the pipeline
			 * lost messages. Go back to the last acknowledged index. */
			r->counters.append_retransmits++;
			progress_become_probe(pr);
			replicate_send_append(r, pr);
		}
		if (pr->state == RAFT_SNAPSHOTTING)
			snapshot_tick(r, pr);
	}
	if (r->heartbeat_elapsed >= r->cfg.heartbeat_ticks) {
		r->heartbeat_elapsed = 0;
		replicate_heartbeat_all(r);
	}
}

void replicate_recv_append_resp(struct raft *r, const struct raft_msg *m)
{
	struct raft_progress *pr = core_progress(r, m->from);

	if (r->role != RAFT_LEADER || pr == NULL || pr->id == r->cfg.id)
		return;
	progress_heard_from(pr);
	if (m->read_seq > pr->read_acked && m->read_seq <= r->read_seq) {
		pr->read_acked = m->read_seq;
		read_index_check(r);
	}
	if (pr->state == RAFT_SNAPSHOTTING)
		return;
	if (m->reject) {
		if (m->index == pr->match && m->hint_index < pr->match) {
			/* A reject at the acknowledged index itself, with a hint
			 * below it: the follower no longer holds entries it
			 * acknowledged (a truncated WAL, a wiped data dir). Forget
			 * what it acked and probe from its hint; from the log or
			 * by snapshot it catches up under this leader. If the
			 * reply was only a late duplicate, the probe's ack puts
			 * match back at once; a lower match only delays commit,
			 * the leader's commit never goes back. */
			r->counters.follower_log_lost++;
			core_trace(r, "n%u lost entries up to %llu it acknowledged; probing from %llu",
				   pr->id, (unsigned long long)pr->match,
				   (unsigned long long)m->hint_index);
			pr->match = 0;
			progress_become_probe(pr);
		} else if (pr->state == RAFT_REPLICATE) {
			if (m->index <= pr->match)
				return; /* stale */
			progress_become_probe(pr);
		} else if (m->index != pr->next - 1) {
			return; /* stale: not the probe we are waiting for */
		}
		/* Fast back-off: the follower's hint names the last index whose
		 * term is <= the term we probed; skip our entries of later terms
		 * too. */
		uint64_t hint = m->hint_index;
		if (m->hint_term > 0)
			hint = log_find_conflict_by_term(&r->log, hint, m->hint_term);
		uint64_t next = m->index < hint + 1 ? m->index : hint + 1;
		if (next < pr->match + 1)
			next = pr->match + 1;
		if (next > r->log.last + 1)
			next = r->log.last + 1;
		pr->next = next;
		pr->probe_sent = false;
		replicate_send_append(r, pr);
		return;
	}
	if (m->index > r->log.last)
		return; /* invalid: acknowledges what we never sent */
	if (m->index > pr->match) {
		pr->probe_sent = false;
		pr->match = m->index;
		if (pr->state == RAFT_PROBE)
			progress_become_replicate(pr);
		else
			progress_inflight_free_to(pr, r->cfg.inflight_max, pr->match);
		if (pr->next <= pr->match)
			pr->next = pr->match + 1;
		replicate_maybe_commit(r);
		if (r->role != RAFT_LEADER)
			return;
		/* §3.10: the transfer target caught up: tell it to campaign. */
		if (r->transfer_target == pr->id && pr->match == r->log.last)
			(void)core_msg(r, RAFT_MSG_TIMEOUT_NOW, pr->id);
	} else if (pr->state == RAFT_PROBE && m->index == pr->match && pr->next == pr->match + 1) {
		progress_become_replicate(pr);
	} else {
		/* A stale ack, or one the follower's disk has not caught up with:
		 * the ack after its write (or the next heartbeat) moves on.
		 * Resending here would ping-pong probes at network speed. */
		return;
	}
	replicate_send_append(r, pr);
}

static uint64_t match_of(const struct raft *r, const struct raft_progress *pr)
{
	/* The leader counts itself only once its own write is durable. */
	return pr->id == r->cfg.id ? r->persisted : pr->match;
}

void replicate_maybe_commit(struct raft *r)
{
	HASP_ASSERT(r->role == RAFT_LEADER);
	uint64_t n = core_quorum_value(r, match_of);
	if (n <= r->commit)
		return;
	/* §3.6.2: "Raft never commits log entries from previous terms by
	 * counting replicas. Only log entries from the leader's current term
	 * are committed by counting replicas." */
	if (log_term(&r->log, n) != r->term)
		return;
	r->commit = n;
	core_trace(r, "commit %llu", (unsigned long long)n);
	read_index_check(r);
	membership_on_commit(r);
}

void replicate_transfer(struct raft *r, uint32_t target)
{
	struct raft_update *up = r->up;

	if (r->role != RAFT_LEADER) {
		up->reject = RAFT_NOT_LEADER;
		return;
	}
	struct raft_progress *pr = core_progress(r, target);
	if (target == r->cfg.id || pr == NULL || pr->role != RAFT_VOTER) {
		up->reject = RAFT_CONF_INVALID;
		return;
	}
	r->transfer_target = target;
	r->transfer_elapsed = 0;
	r->counters.transfers++;
	core_trace(r, "transfer to n%u", target);
	/* §3.10: stop accepting proposals, bring the target up to date, then
	 * tell it to campaign at once. */
	if (pr->match == r->log.last)
		(void)core_msg(r, RAFT_MSG_TIMEOUT_NOW, target);
	else
		replicate_send_append(r, pr);
}
