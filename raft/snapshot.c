/*
 * Snapshot compaction and transfer (see snapshot.h). The transfer is
 * stop-and-wait: snapshots are rare and a chunk per round trip keeps the
 * follower's receive state to one offset, which a lost or reordered chunk
 * cannot confuse (the follower answers with the offset it wants).
 */
#include "raft/snapshot.h"

#include "common/assert.h"
#include "raft/core.h"
#include "raft/log.h"
#include "raft/membership.h"
#include "raft/msg_codec.h"
#include "raft/progress.h"
#include "raft/replicate.h"

/* First index to keep after compacting at `index`: snapshot_trailing
 * entries, and more for a follower that is catching up through the log (it
 * would otherwise need the snapshot it may have just installed), but never
 * more than the window can spare (window / 2 - threshold, see config_ok). */
static uint64_t keep_from_for(const struct raft *r, uint64_t index)
{
	uint64_t spare = r->cfg.log_window / 2 - r->cfg.snapshot_threshold;
	uint64_t keep_from = index + 1 > r->cfg.snapshot_trailing ? index + 1 - r->cfg.snapshot_trailing : 1;
	uint64_t floor = index + 1 > spare ? index + 1 - spare : 1;

	if (r->role == RAFT_LEADER) {
		for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
			const struct raft_progress *pr = &r->progress[i];
			if (pr->id == 0 || pr->id == r->cfg.id || pr->state == RAFT_SNAPSHOTTING)
				continue;
			/* Its next probe needs the term at match too. */
			uint64_t need = pr->match > 0 ? pr->match : 1;
			if (need < keep_from)
				keep_from = need;
		}
	}
	if (keep_from < floor)
		keep_from = floor;
	if (keep_from < r->log.first)
		keep_from = r->log.first;
	HASP_ASSERT(keep_from <= index + 1);
	return keep_from;
}

void snapshot_taken(struct raft *r, const struct raft_event *ev)
{
	uint64_t index = ev->snapshot.index;

	/* The state at index must exist (applied) and be newer than ours; the
	 * snapshot just installed (index == snap_index) is accepted so that a
	 * follower that installed one can send it on as leader. */
	if (index > r->applied || index < r->log.snap_index || ev->snapshot.size == 0 ||
	    ev->snapshot.data == NULL || !log_has_term(&r->log, index)) {
		r->up->reject = RAFT_SNAPSHOT_INVALID;
		return;
	}
	if (index > r->log.snap_index) {
		struct raft_conf conf;
		membership_conf_at(r, index, &conf);
		r->snap_conf = conf;
		uint64_t keep_from = keep_from_for(r, index);
		log_compact(&r->log, index, log_term(&r->log, index), keep_from);
	}
	r->snap_data = ev->snapshot.data;
	r->snap_data_size = ev->snapshot.size;
	r->snap_data_index = index;
	/* The loop reports a snapshot once it is durable: the log through
	 * index survives a crash in it. */
	if (r->persisted < index)
		r->persisted = index;
	/* Transfers of an older snapshot restart with this one. */
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		struct raft_progress *pr = &r->progress[i];
		if (pr->id != 0 && pr->state == RAFT_SNAPSHOTTING && pr->snap_index != index)
			progress_become_probe(pr);
	}
	core_trace(r, "snapshot %llu", (unsigned long long)index);
}

static void send_chunk(struct raft *r, struct raft_progress *pr)
{
	size_t budget = r->cfg.mtu - RAFT_DATAGRAM_OVERHEAD - MSG_CODEC_HEADER_SIZE -
			MSG_CODEC_SNAPSHOT_FIXED_SIZE;
	uint64_t left = r->snap_data_size - pr->snap_offset;
	uint64_t chunk = left < budget ? left : budget;

	HASP_ASSERT(pr->snap_index == r->snap_data_index);
	HASP_ASSERT(pr->snap_offset <= r->snap_data_size);
	if (r->cfg.snapshot_chunk_max != 0 && chunk > r->cfg.snapshot_chunk_max)
		chunk = r->cfg.snapshot_chunk_max;
	struct raft_msg *m = core_msg(r, RAFT_MSG_SNAPSHOT, pr->id);
	if (m == NULL)
		return;
	m->snap_index = r->snap_data_index;
	m->snap_term = log_term(&r->log, r->snap_data_index);
	m->snap_size = r->snap_data_size;
	m->snap_conf = r->snap_conf;
	m->offset = pr->snap_offset;
	m->chunk = r->snap_data + pr->snap_offset;
	m->chunk_size = (uint32_t)chunk;
	m->done = pr->snap_offset + chunk == r->snap_data_size;
	pr->snap_ticks = 0;
	HASP_ASSERT(msg_codec_size(m) <= r->cfg.mtu - RAFT_DATAGRAM_OVERHEAD);
}

void snapshot_start(struct raft *r, struct raft_progress *pr)
{
	HASP_ASSERT(r->role == RAFT_LEADER);
	/* Without the bytes (a follower that installed one has not passed it
	 * back yet) the follower waits; the next heartbeat retries. */
	if (r->snap_data == NULL || r->snap_data_index != r->log.snap_index)
		return;
	progress_become_snapshot(pr, r->snap_data_index);
	r->counters.snapshots_sent++;
	core_trace(r, "send snapshot %llu to n%u", (unsigned long long)pr->snap_index, pr->id);
	send_chunk(r, pr);
}

void snapshot_tick(struct raft *r, struct raft_progress *pr)
{
	HASP_ASSERT(pr->state == RAFT_SNAPSHOTTING);
	if (++pr->snap_ticks >= 2 * r->cfg.heartbeat_ticks) {
		if (pr->snap_index != r->snap_data_index || r->snap_data == NULL)
			progress_become_probe(pr);
		else
			send_chunk(r, pr);
	}
}

void snapshot_recv_resp(struct raft *r, const struct raft_msg *m)
{
	struct raft_progress *pr = core_progress(r, m->from);

	if (r->role != RAFT_LEADER || pr == NULL || pr->id == r->cfg.id)
		return;
	progress_heard_from(pr);
	if (pr->state != RAFT_SNAPSHOTTING || m->snap_index != pr->snap_index)
		return;
	if (m->done) {
		if (pr->match < pr->snap_index)
			pr->match = pr->snap_index;
		progress_become_probe(pr);
		replicate_send_append(r, pr);
		return;
	}
	if (m->offset > r->snap_data_size)
		return; /* invalid */
	pr->snap_offset = m->offset;
	if (pr->snap_offset < r->snap_data_size)
		send_chunk(r, pr);
}

bool snapshot_sending(const struct raft *r)
{
	if (r->role != RAFT_LEADER)
		return false;
	/* Only a transfer to a follower heard from within an election timeout
	 * holds compaction back. A dead follower in SNAPSHOTTING would
	 * otherwise stop every later snapshot, the log window would fill and
	 * the group would refuse all proposals (RAFT_FULL) for as long as that
	 * node stays down; its transfer restarts with the newer snapshot. The
	 * silence is counted per member and continuously (not the quorum
	 * check's recent_active, which is cleared every election timeout): a
	 * live follower that answers slowly keeps its transfer, otherwise each
	 * new snapshot would restart it and it could never finish. */
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		const struct raft_progress *pr = &r->progress[i];
		if (pr->id != 0 && pr->state == RAFT_SNAPSHOTTING &&
		    pr->silent_ticks < r->cfg.election_ticks)
			return true;
	}
	return false;
}

static void reply(struct raft *r, const struct raft_msg *m, uint64_t offset, bool done)
{
	struct raft_msg *resp = core_msg(r, RAFT_MSG_SNAPSHOT_RESP, m->from);
	if (resp == NULL)
		return;
	resp->snap_index = m->snap_index;
	resp->offset = offset;
	resp->done = done;
}

static void install(struct raft *r, const struct raft_msg *m)
{
	struct raft_update *up = r->up;
	bool keep = log_has_term(&r->log, m->snap_index) &&
		    log_term(&r->log, m->snap_index) == m->snap_term;

	/* §5.3: "If existing log entry has same index and term as snapshot's
	 * last included entry, retain log entries following it and reply";
	 * otherwise discard the entire log. Keeping them matters: we may have
	 * acknowledged them. */
	r->snap_conf = m->snap_conf;
	if (keep) {
		log_compact(&r->log, m->snap_index, m->snap_term, m->snap_index + 1);
		struct raft_conf conf;
		membership_conf_at(r, r->log.last, &conf);
		uint64_t conf_index = r->conf_index > m->snap_index ? r->conf_index : m->snap_index;
		membership_set(r, &conf, conf_index);
	} else {
		log_reset(&r->log, m->snap_index, m->snap_term);
		membership_set(r, &m->snap_conf, m->snap_index);
		r->persisted = m->snap_index;
		r->verified = m->snap_index;
	}
	if (r->persisted < m->snap_index)
		r->persisted = m->snap_index;
	if (r->commit < m->snap_index)
		r->commit = m->snap_index;
	r->applied = m->snap_index; /* the loop restores the state machine */
	r->snap_data = NULL;
	r->snap_data_index = 0;
	r->snap_data_size = 0;
	up->snap_install = true;
	up->snap_log_reset = !keep;
	up->snap_index = m->snap_index;
	up->snap_term = m->snap_term;
	up->snap_size = m->snap_size;
	up->snap_conf = m->snap_conf;
	r->counters.snapshots_installed++;
	core_trace(r, "install snapshot %llu", (unsigned long long)m->snap_index);
}

void snapshot_recv(struct raft *r, const struct raft_msg *m)
{
	struct raft_update *up = r->up;

	if (m->snap_size == 0 || m->snap_index == 0 || m->snap_term == 0 ||
	    m->snap_term > m->term || m->offset > m->snap_size ||
	    m->chunk_size > m->snap_size - m->offset ||
	    m->done != (m->offset + m->chunk_size == m->snap_size) ||
	    !membership_conf_valid(&m->snap_conf, r->cfg.peers_max)) {
		r->counters.msg_dropped_invalid++;
		return;
	}
	if (r->role != RAFT_FOLLOWER || r->leader_id != m->from)
		core_become_follower(r, m->term, m->from);
	r->election_elapsed = 0;
	if (m->snap_index <= r->commit) {
		/* We already have everything it holds, committed. */
		reply(r, m, m->snap_size, true);
		return;
	}
	if (m->offset == 0) {
		r->recv_snap_index = m->snap_index;
		r->recv_snap_term = m->snap_term;
		r->recv_snap_offset = 0;
	}
	if (m->snap_index != r->recv_snap_index || m->snap_term != r->recv_snap_term ||
	    m->offset != r->recv_snap_offset) {
		bool same = m->snap_index == r->recv_snap_index && m->snap_term == r->recv_snap_term;
		reply(r, m, same ? r->recv_snap_offset : 0, false);
		return;
	}
	up->snap_chunk = m->chunk;
	up->snap_chunk_size = m->chunk_size;
	up->snap_chunk_offset = m->offset;
	r->recv_snap_offset += m->chunk_size;
	if (!m->done) {
		reply(r, m, r->recv_snap_offset, false);
		return;
	}
	install(r, m);
	r->recv_snap_index = 0;
	r->recv_snap_term = 0;
	r->recv_snap_offset = 0;
	reply(r, m, m->snap_size, true);
}
