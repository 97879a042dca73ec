/*
 * ReadIndex (§6.4). Pending reads sit in a ring in request order; their
 * sequence numbers and indexes only grow, so they are released from the
 * head. The leader's own ack is its current read sequence.
 */
#include "raft/read_index.h"

#include "common/assert.h"
#include "raft/core.h"
#include "raft/replicate.h"

void read_index_request(struct raft *r, uint64_t ctx)
{
	struct raft_update *up = r->up;

	if (r->role != RAFT_LEADER) {
		up->reject = RAFT_NOT_LEADER;
		return;
	}
	if (r->reads_count >= r->cfg.reads_max) {
		up->reject = RAFT_FULL;
		return;
	}
	/* §6.4 step 1: until the no-op of this term commits, the leader may not
	 * know the latest commit index; wait for at least the no-op. */
	uint64_t index = r->commit > r->term_start ? r->commit : r->term_start;
	struct raft_pending_read *rd =
		&r->reads[(r->reads_head + r->reads_count) % r->cfg.reads_max];
	rd->ctx = ctx;
	rd->index = index;
	rd->seq = ++r->read_seq;
	r->reads_count++;
	/* §6.4 step 3: one heartbeat round proves we were still the leader
	 * when the read arrived. */
	replicate_heartbeat_all(r);
	read_index_check(r);
}

static uint64_t read_acked_of(const struct raft *r, const struct raft_progress *pr)
{
	return pr->id == r->cfg.id ? r->read_seq : pr->read_acked;
}

void read_index_check(struct raft *r)
{
	struct raft_update *up = r->up;

	if (r->role != RAFT_LEADER || r->reads_count == 0)
		return;
	uint64_t acked = core_quorum_value(r, read_acked_of);
	while (r->reads_count > 0) {
		struct raft_pending_read *rd = &r->reads[r->reads_head];
		if (rd->seq > acked || rd->index > r->commit)
			break;
		HASP_ASSERT(up->read_count < r->cfg.reads_max);
		r->up_reads[up->read_count].ctx = rd->ctx;
		r->up_reads[up->read_count].index = rd->index;
		up->read_count++;
		r->reads_head = (r->reads_head + 1) % r->cfg.reads_max;
		r->reads_count--;
	}
}

void read_index_drop(struct raft *r)
{
	if (r->up != NULL)
		r->up->reads_dropped += r->reads_count;
	r->reads_head = 0;
	r->reads_count = 0;
}
