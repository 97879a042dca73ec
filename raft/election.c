/*
 * Leader election. A follower that hears nothing for a randomized election
 * timeout first asks, without changing its term, whether a majority would
 * vote for it (PreVote, §9.6), so that a node rejoining from a partition
 * does not depose a working leader; only then does it start a real election
 * (§3.4). Voters that heard from a leader recently ignore vote requests
 * (§4.2.3) unless the candidate was told to campaign by TimeoutNow (§3.10).
 */
#include "raft/election.h"

#include "common/assert.h"
#include "raft/core.h"
#include "raft/log.h"
#include "raft/membership.h"
#include "raft/progress.h"
#include "raft/replicate.h"

void election_tick(struct raft *r)
{
	HASP_ASSERT(r->role != RAFT_LEADER);
	r->election_elapsed++;
	if (r->election_elapsed < r->election_timeout)
		return;
	core_reset_election_timer(r);
	if (!election_may_campaign(r))
		return; /* learners and removed servers never campaign */
	election_campaign(r, r->cfg.pre_vote, false);
}

bool election_may_campaign(const struct raft *r)
{
	struct raft_conf committed;

	if (r->removal_notice_index > r->conf_index)
		return false; /* a member of a newer configuration said we are out */
	if (core_is_voter(r, r->cfg.id))
		return true;
	/* A server whose removal is logged but not committed may still be
	 * needed: it may hold the only log a majority of the new
	 * configuration would vote for (simulator seed 253412). It campaigns
	 * as a voter of the last committed configuration and, if elected,
	 * leads without counting itself until the removal commits (§4.2.2). */
	membership_conf_at(r, r->commit, &committed);
	for (uint32_t i = 0; i < committed.count; i++)
		if (committed.members[i].id == r->cfg.id && committed.members[i].role == RAFT_VOTER)
			return true;
	return false;
}

static void become_leader(struct raft *r);

/* Counts the votes of the latest configuration's voters; wins or loses
 * once a majority decided. */
static void tally(struct raft *r, bool pre, bool transfer)
{
	uint32_t granted = 0, rejected = 0, voters = core_voter_count(r);

	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		const struct raft_progress *p = &r->progress[i];
		if (p->id == 0 || p->role != RAFT_VOTER || !p->vote_responded)
			continue;
		granted += p->vote_granted;
		rejected += !p->vote_granted;
	}
	if (granted >= voters / 2 + 1) {
		if (pre)
			election_campaign(r, false, transfer);
		else
			become_leader(r);
	} else if (rejected >= voters / 2 + 1) {
		core_become_follower(r, r->term, 0);
	}
}

bool election_log_ok(const struct raft *r, uint64_t last_index, uint64_t last_term)
{
	/* §3.6.1: "If the logs have last entries with different terms, then
	 * the log with the later term is more up-to-date. If the logs end with
	 * the same term, then whichever log is longer is more up-to-date." */
	uint64_t my_term = core_last_term(r);
	return last_term > my_term || (last_term == my_term && last_index >= r->log.last);
}

bool election_in_lease(const struct raft *r)
{
	return r->cfg.check_quorum && r->leader_id != 0 &&
	       r->election_elapsed < r->cfg.election_ticks;
}

static void become_leader(struct raft *r)
{
	HASP_ASSERT(r->role == RAFT_CANDIDATE);
	HASP_ASSERT(r->vote == r->cfg.id);
	/* A new leader needs one slot for its no-op; without it the window is
	 * full of uncommitted entries that only a current-term entry could
	 * commit. Proposals keep half the window free, so this is reached only
	 * after many leaders in a row failed to commit anything. */
	if (log_room(&r->log) == 0) {
		core_become_follower(r, r->term, 0);
		return;
	}
	r->role = RAFT_LEADER;
	r->leader_id = r->cfg.id;
	r->transfer_target = 0;
	r->heartbeat_elapsed = 0;
	r->election_elapsed = 0;
	r->counters.leader_elected++;
	progress_reset_all(r);
	core_trace(r, "leader");
	/* §3.6.2 and §6.4: commit an entry of the new term at once, which
	 * commits everything before it and gives ReadIndex a safe start. */
	replicate_append_local(r, RAFT_ENTRY_NOOP, NULL, 0);
	r->term_start = r->log.last;
	replicate_broadcast(r);
	replicate_maybe_commit(r);
}

void election_campaign(struct raft *r, bool pre, bool transfer)
{
	uint64_t msg_term;

	if (!election_may_campaign(r))
		return;
	if (pre) {
		r->role = RAFT_PRE_CANDIDATE;
		r->counters.pre_votes++;
		msg_term = r->term + 1;
		core_trace(r, "pre-candidate");
	} else {
		r->term++;
		r->vote = r->cfg.id;
		r->role = RAFT_CANDIDATE;
		r->counters.elections++;
		msg_term = r->term;
		core_trace(r, "candidate%s", transfer ? " transfer" : "");
	}
	r->leader_id = 0;
	r->verified = r->commit; /* committed entries match every leader */
	r->ack_pending = false;
	core_reset_election_timer(r);
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		r->progress[i].vote_responded = false;
		r->progress[i].vote_granted = false;
	}
	/* Our own vote counts if we are a voter of the latest configuration
	 * (not if we are campaigning while our removal is pending). */
	struct raft_progress *self = core_progress(r, r->cfg.id);
	if (self != NULL) {
		self->vote_responded = true;
		self->vote_granted = true;
	}
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		const struct raft_progress *pr = &r->progress[i];
		if (pr->id == 0 || pr->id == r->cfg.id || pr->role != RAFT_VOTER)
			continue;
		struct raft_msg *m = core_msg(r, pre ? RAFT_MSG_PRE_VOTE : RAFT_MSG_VOTE, pr->id);
		if (m == NULL)
			continue;
		m->term = msg_term;
		m->last_index = r->log.last;
		m->last_term = core_last_term(r);
		m->transfer = transfer;
	}
	tally(r, pre, transfer); /* a single voter wins at once */
}

void election_recv_vote(struct raft *r, const struct raft_msg *m)
{
	bool pre = m->type == RAFT_MSG_PRE_VOTE;
	/* §3.4: one vote per term, first come first served; a pre-vote for a
	 * later term promises nothing and binds nothing. */
	bool can_vote = r->vote == m->from || (r->vote == 0 && r->leader_id == 0) ||
			(pre && m->term > r->term);
	bool grant = can_vote && election_log_ok(r, m->last_index, m->last_term);
	struct raft_msg *resp;

	if (grant && !pre) {
		HASP_ASSERT(m->term == r->term);
		r->vote = m->from;
		core_reset_election_timer(r);
	}
	core_trace(r, "%s n%u %s", pre ? "pre-vote" : "vote", m->from,
		   grant ? "granted" : "rejected");
	resp = core_msg(r, pre ? RAFT_MSG_PRE_VOTE_RESP : RAFT_MSG_VOTE_RESP, m->from);
	if (resp == NULL)
		return;
	/* A granted pre-vote answers in the candidate's future term so that
	 * the candidate counts it; a refusal carries our term. */
	resp->term = grant ? m->term : r->term;
	resp->reject = !grant;
}

void election_recv_vote_resp(struct raft *r, const struct raft_msg *m)
{
	bool pre = m->type == RAFT_MSG_PRE_VOTE_RESP;
	if (pre ? r->role != RAFT_PRE_CANDIDATE : r->role != RAFT_CANDIDATE)
		return;
	if (pre && !m->reject && m->term != r->term + 1)
		return;
	if (!pre && m->term != r->term)
		return;
	struct raft_progress *pr = core_progress(r, m->from);
	if (pr == NULL || pr->role != RAFT_VOTER || pr->vote_responded)
		return;
	pr->vote_responded = true;
	pr->vote_granted = !m->reject;
	tally(r, pre, false);
}

void election_recv_timeout_now(struct raft *r, const struct raft_msg *m)
{
	/* §3.10: the leader tells its chosen successor to start an election
	 * at once, skipping PreVote (the leader agreed to step aside). */
	if (r->role != RAFT_FOLLOWER || m->from != r->leader_id)
		return;
	if (!core_is_voter(r, r->cfg.id))
		return;
	election_campaign(r, false, true);
}

void election_check_quorum(struct raft *r)
{
	uint32_t active = 0;

	HASP_ASSERT(r->role == RAFT_LEADER);
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		struct raft_progress *pr = &r->progress[i];
		if (pr->id == 0)
			continue;
		if (pr->role == RAFT_VOTER && (pr->recent_active || pr->id == r->cfg.id))
			active++;
		pr->recent_active = pr->id == r->cfg.id;
	}
	/* §6.2: "a leader steps down if an election timeout elapses without a
	 * successful round of heartbeats to a majority of its cluster". */
	if (active < core_voter_count(r) / 2 + 1) {
		r->counters.check_quorum_step_downs++;
		core_trace(r, "step down: no quorum");
		core_become_follower(r, r->term, 0);
	}
}
