/*
 * Leader election (§3.4) with PreVote (§9.6), leader stickiness (§4.2.3),
 * CheckQuorum (§6.2) and TimeoutNow for leadership transfer (§3.10).
 */
#ifndef HASP_RAFT_ELECTION_H
#define HASP_RAFT_ELECTION_H

#include <stdbool.h>

#include "raft/raft.h"

/* One tick of a follower or candidate: campaigns when the randomized
 * election timeout passes. */
void election_tick(struct raft *r);

/* Starts a pre-vote round (pre) or a real election; `transfer` marks a
 * campaign ordered by TimeoutNow. Only voters campaign. */
void election_campaign(struct raft *r, bool pre, bool transfer);

/* We are a voter of the latest configuration, or of the last committed
 * one while our removal is pending. */
bool election_may_campaign(const struct raft *r);

/* The candidate's log is at least as up-to-date as ours (§3.6.1). */
bool election_log_ok(const struct raft *r, uint64_t last_index, uint64_t last_term);

/* We heard from a leader within the election timeout (§4.2.3): ignore
 * disruptive vote requests. */
bool election_in_lease(const struct raft *r);

void election_recv_vote(struct raft *r, const struct raft_msg *m);
void election_recv_vote_resp(struct raft *r, const struct raft_msg *m);
void election_recv_timeout_now(struct raft *r, const struct raft_msg *m);

/* CheckQuorum on the leader's tick: steps down when a majority has not been
 * heard from within an election timeout. */
void election_check_quorum(struct raft *r);

#endif
