/*
 * AppendEntries on the follower (see recv_append.h). The acknowledged index
 * is min(durable, verified): `verified` is the end of the longest prefix
 * this term's leader has shown to match its own log, so entries left over
 * from an older leader past it are never acknowledged by accident.
 *
 * Messages are validated in full before anything changes: a message whose
 * entries go back in term, exceed the entry size, carry a bad configuration,
 * or would overwrite a committed entry is dropped and counted.
 */
#include "raft/recv_append.h"

#include "common/assert.h"
#include "raft/core.h"
#include "raft/log.h"
#include "raft/membership.h"
#include "raft/replicate.h"

static void send_resp(struct raft *r, uint32_t to, uint64_t read_seq)
{
	struct raft_msg *resp = core_msg(r, RAFT_MSG_APPEND_RESP, to);
	if (resp == NULL)
		return;
	resp->index = r->persisted < r->verified ? r->persisted : r->verified;
	resp->read_seq = read_seq;
}

static bool entries_valid(const struct raft *r, const struct raft_msg *m)
{
	uint64_t term = m->prev_term;

	if (m->prev_term > m->term || m->prev_index + m->entry_count < m->prev_index)
		return false;
	for (uint32_t i = 0; i < m->entry_count; i++) {
		const struct raft_entry *e = &m->entries[i];
		struct raft_conf conf;
		if (e->term < term || e->term > m->term || e->size > r->cfg.entry_bytes_max ||
		    e->index != m->prev_index + 1 + i)
			return false;
		if (e->type == RAFT_ENTRY_CONF &&
		    (membership_conf_decode(&conf, e->data, e->size) != 0 ||
		     !membership_conf_valid(&conf, r->cfg.peers_max)))
			return false;
		term = e->term;
	}
	return true;
}

static void reject(struct raft *r, const struct raft_msg *m)
{
	/* Fast back-off: name the last index, at or before the probed one,
	 * whose term is <= the probed term; the leader skips to it. */
	uint64_t hint = m->prev_index < r->log.last ? m->prev_index : r->log.last;
	hint = log_find_conflict_by_term(&r->log, hint, m->prev_term);
	struct raft_msg *resp = core_msg(r, RAFT_MSG_APPEND_RESP, m->from);
	r->counters.append_rejected++;
	if (resp == NULL)
		return;
	resp->reject = true;
	resp->index = m->prev_index;
	resp->hint_index = hint;
	resp->hint_term = log_term(&r->log, hint);
	resp->read_seq = m->read_seq;
}

void recv_append(struct raft *r, const struct raft_msg *m)
{
	const struct raft_entry *entries = m->entries;
	uint32_t count = m->entry_count;
	uint64_t prev = m->prev_index, prev_term = m->prev_term;

	if (!entries_valid(r, m)) {
		r->counters.msg_dropped_invalid++;
		return;
	}
	if (r->role != RAFT_FOLLOWER || r->leader_id != m->from)
		core_become_follower(r, m->term, m->from);
	r->election_elapsed = 0;
	if (m->read_seq > r->leader_read_seq)
		r->leader_read_seq = m->read_seq;

	/* Entries up to the snapshot are committed, hence match the leader's:
	 * skip them. */
	if (prev < r->log.snap_index) {
		uint64_t skip = r->log.snap_index - prev;
		if (skip >= count) {
			send_resp(r, m->from, m->read_seq);
			return;
		}
		if (entries[skip - 1].term != r->log.snap_term) {
			r->counters.msg_dropped_invalid++;
			return;
		}
		entries += skip;
		count -= (uint32_t)skip;
		prev = r->log.snap_index;
		prev_term = r->log.snap_term;
	}
	/* §3.5: "If the follower does not find an entry in its log with the
	 * same index and term, then it refuses the new entries." */
	if (prev > r->log.last || log_term(&r->log, prev) != prev_term) {
		if (prev <= r->commit && log_has_term(&r->log, prev)) {
			r->counters.msg_dropped_invalid++; /* contradicts a committed entry */
			return;
		}
		reject(r, m);
		return;
	}
	/* Find the first new or conflicting entry. */
	uint32_t i = 0;
	while (i < count && entries[i].index <= r->log.last &&
	       log_term(&r->log, entries[i].index) == entries[i].term)
		i++;
	if (i < count && entries[i].index <= r->log.last) {
		uint64_t from = entries[i].index;
		if (from <= r->commit) {
			r->counters.msg_dropped_invalid++;
			return;
		}
		/* §3.5: "If an existing entry conflicts with a new one (same index
		 * but different terms), delete the existing entry and all that
		 * follow it." */
		log_truncate(&r->log, from);
		if (r->persisted >= from)
			r->persisted = from - 1;
		if (r->verified >= from)
			r->verified = from - 1;
		membership_on_truncate(r, from);
	}
	for (; i < count && log_room(&r->log) > 0; i++) {
		const struct raft_entry *e = log_append(&r->log, entries[i].term, entries[i].type,
							entries[i].data, entries[i].size);
		if (e->index < r->dirty_from)
			r->dirty_from = e->index;
		if (e->type == RAFT_ENTRY_CONF)
			membership_on_append(r, e);
	}
	/* What we now hold of this message matches the leader (log matching,
	 * §3.5); a full window keeps the rest for a later retry. */
	uint64_t last_new = prev + i;
	if (last_new > r->verified)
		r->verified = last_new;
	uint64_t commit = m->commit < last_new ? m->commit : last_new;
	if (commit > r->commit) {
		r->commit = commit;
		core_trace(r, "commit %llu", (unsigned long long)commit);
	}
	if (r->persisted >= r->verified || r->dirty_from == UINT64_MAX) {
		send_resp(r, m->from, m->read_seq);
		r->ack_pending = r->persisted < r->verified;
	} else {
		r->ack_pending = true;
	}
}

void recv_append_persisted(struct raft *r, uint64_t index, uint64_t term)
{
	/* Writes complete in order, so (index, term) of the last entry written
	 * proves the whole prefix durable, unless a later truncation replaced
	 * that entry (its term then differs, or it is gone). */
	if (index <= r->persisted || index > r->log.last || !log_has_term(&r->log, index) ||
	    log_term(&r->log, index) != term)
		return;
	r->persisted = index;
	if (r->role == RAFT_LEADER) {
		replicate_maybe_commit(r);
		return;
	}
	if (r->role == RAFT_FOLLOWER && r->ack_pending && r->leader_id != 0) {
		send_resp(r, r->leader_id, r->leader_read_seq);
		r->ack_pending = r->persisted < r->verified;
	}
}
