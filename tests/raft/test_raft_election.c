/*
 * Paper tests for leader election (thesis §3.4, §3.6.1, §4.2.3, §6.2,
 * §9.6, §3.10): each test quotes the rule it checks.
 */
#include "tests/raft/raft_harness.h"

static struct th TH;

static void test_election_follower_times_out_and_campaigns(void **state)
{
	/* §3.4: "If a follower receives no communication over a period of
	 * time called the election timeout, then it assumes there is no viable
	 * leader and begins an election to choose a new leader." */
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	for (uint32_t t = 0; t + 1 < th->r[0].cfg.election_ticks; t++)
		th_tick(th, 0);
	assert_int_equal(th->r[0].role, RAFT_FOLLOWER);
	for (uint32_t t = 0; t <= th->r[0].cfg.election_ticks; t++)
		th_tick(th, 0);
	assert_int_equal(th->r[0].role, RAFT_CANDIDATE);
	assert_int_equal(th->r[0].term, 1);
	assert_int_equal(th->r[0].vote, 1);
	th_deinit(th);
}

static void test_election_majority_makes_leader(void **state)
{
	/* §3.4: "A candidate wins an election if it receives votes from a
	 * majority of the servers in the full cluster for the same term." */
	struct th *th = &TH;
	(void)state;
	th_init(th, 5);
	th->down[3] = th->down[4] = true; /* two of five are enough to lose */
	th_campaign(th, 0);
	assert_int_equal(th->r[0].role, RAFT_LEADER);
	assert_int_equal(th->r[1].leader_id, 1);
	assert_int_equal(th->r[2].leader_id, 1);
	th_deinit(th);
}

static void test_election_minority_does_not_make_leader(void **state)
{
	struct th *th = &TH;
	(void)state;
	th_init(th, 5);
	th->down[2] = th->down[3] = th->down[4] = true;
	th_campaign(th, 0);
	assert_int_equal(th->r[0].role, RAFT_CANDIDATE);
	th_deinit(th);
}

static void test_election_vote_is_persisted_before_reply(void **state)
{
	/* §3.4: "Each server will vote for at most one candidate in a given
	 * term, on a first-come-first-served basis"; §3.8: the vote is
	 * persistent state, so the update carries it for the loop to write
	 * before it sends the reply in the same update. */
	struct th *th = &TH;
	struct raft_msg m, resp;
	struct raft_update up;
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
	(void)state;
	th_init(th, 3);
	memset(&m, 0, sizeof(m));
	m.type = RAFT_MSG_VOTE;
	m.cluster_id = TH_CLUSTER;
	m.from = 1;
	m.to = 2;
	m.term = 1;
	raft_step(&th->r[1], &ev, &up);
	assert_true(up.hard_state_changed);
	assert_int_equal(up.term, 1);
	assert_int_equal(up.vote, 1);
	assert_int_equal(up.msg_count, 1);
	resp = up.msgs[0];
	assert_int_equal(resp.type, RAFT_MSG_VOTE_RESP);
	assert_false(resp.reject);
	/* A second candidate of the same term is refused. */
	m.from = 3;
	raft_step(&th->r[1], &ev, &up);
	assert_int_equal(up.msg_count, 1);
	assert_true(up.msgs[0].reject);
	assert_false(up.hard_state_changed);
	th_deinit(th);
}

static void test_election_restarted_server_does_not_vote_twice(void **state)
{
	/* §3.8: a server that crashes after voting must remember its vote, or
	 * it could vote twice in one term and elect two leaders. */
	struct raft r;
	struct prng p;
	struct raft_config cfg;
	struct raft_persisted_state ps;
	struct raft_msg m;
	struct raft_update up;
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
	(void)state;
	th_config(&TH, &cfg, 2);
	prng_seed(&p, 7);
	assert_int_equal(raft_init(&r, &cfg, &p), 0);
	memset(&ps, 0, sizeof(ps));
	ps.term = 5;
	ps.vote = 1;
	ps.snap_conf.count = 3;
	for (uint32_t i = 0; i < 3; i++) {
		ps.snap_conf.members[i].id = i + 1;
		ps.snap_conf.members[i].role = RAFT_VOTER;
	}
	assert_int_equal(raft_restore(&r, &ps), 0);
	memset(&m, 0, sizeof(m));
	m.type = RAFT_MSG_VOTE;
	m.cluster_id = TH_CLUSTER;
	m.from = 3;
	m.to = 2;
	m.term = 5;
	raft_step(&r, &ev, &up);
	assert_int_equal(up.msg_count, 1);
	assert_true(up.msgs[0].reject);
	assert_int_equal(r.vote, 1);
	raft_deinit(&r);
}

static void test_election_rejects_candidate_with_stale_log(void **state)
{
	/* §3.6.1: "The voter denies its vote if its own log is more
	 * up-to-date than that of the candidate." */
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th->cut[0][2] = true;
	th_propose(th, 0, "x");
	th_deliver_all(th);
	assert_int_equal(raft_last_index(&th->r[1]), 2);
	assert_int_equal(raft_last_index(&th->r[2]), 1);
	th->down[0] = true;
	th_campaign(th, 2);
	assert_int_not_equal(th->r[2].role, RAFT_LEADER);
	th_campaign(th, 1);
	assert_int_equal(th->r[1].role, RAFT_LEADER);
	th_deinit(th);
}

static void test_stale_vote_request_is_answered_with_our_term(void **state)
{
	/* Figure 3.1, RequestVote: "Reply false if term < currentTerm" (with
	 * currentTerm, "for candidate to update itself"). */
	struct th *th = &TH;
	struct raft_msg m;
	struct raft_update up;
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
	static const uint64_t terms[] = { 1 };
	(void)state;
	th_init(th, 3);
	th_restart(th, 1, 5, 0, terms, 1);
	memset(&m, 0, sizeof(m));
	m.type = RAFT_MSG_VOTE;
	m.cluster_id = TH_CLUSTER;
	m.from = 3;
	m.to = 2;
	m.term = 3;
	m.last_index = 9;
	m.last_term = 3;
	raft_step(&th->r[1], &ev, &up);
	assert_int_equal(up.msg_count, 1);
	assert_int_equal(up.msgs[0].type, RAFT_MSG_VOTE_RESP);
	assert_true(up.msgs[0].reject);
	assert_int_equal(up.msgs[0].term, 5);
	assert_int_equal(th->r[1].vote, 0);
	th_deinit(th);
}

static void test_prevote_partitioned_node_keeps_its_term(void **state)
{
	/* §9.6: "a candidate would only increment its term if it first learns
	 * from a majority of the cluster that they would be willing to grant
	 * the candidate their votes". */
	struct th *th = &TH;
	(void)state;
	th_init_ex(th, 3, 3, true, false);
	th_elect(th, 0);
	uint64_t term = th->r[2].term;
	th_isolate(th, 2, true);
	for (int t = 0; t < 100; t++) {
		th_tick(th, 2);
		th_deliver_all(th);
	}
	assert_int_equal(th->r[2].role, RAFT_PRE_CANDIDATE);
	assert_int_equal(th->r[2].term, term);
	assert_true(th->r[2].counters.pre_votes > 1);
	assert_int_equal(th->r[2].counters.elections, 0);
	th_deinit(th);
}

static void test_prevote_rejoining_node_does_not_depose_leader(void **state)
{
	/* §9.6: the point of PreVote: a server rejoining the cluster after a
	 * partition does not disrupt the leader. */
	struct th *th = &TH;
	(void)state;
	th_init_ex(th, 3, 3, true, false);
	th_elect(th, 0);
	th_isolate(th, 2, true);
	for (int t = 0; t < 50; t++)
		th_tick(th, 2);
	th_drop_all(th);
	th_isolate(th, 2, false);
	th_tick(th, 2); /* its pre-vote reaches the others now */
	th_deliver_all(th);
	th_tick(th, 0);
	th_deliver_all(th);
	assert_int_equal(th->r[0].role, RAFT_LEADER);
	assert_int_equal(th->r[0].term, 1);
	assert_int_equal(th->r[2].role, RAFT_FOLLOWER);
	assert_int_equal(th->r[2].leader_id, 1);
	th_deinit(th);
}

static void test_check_quorum_leader_steps_down_without_majority(void **state)
{
	/* §6.2: "a leader steps down if an election timeout elapses without a
	 * successful round of heartbeats to a majority of its cluster". */
	struct th *th = &TH;
	(void)state;
	th_init_ex(th, 3, 3, false, true);
	th_elect(th, 0);
	th_isolate(th, 0, true);
	for (uint32_t t = 0; t < 2 * th->r[0].cfg.election_ticks + 1; t++) {
		th_tick(th, 0);
		th_deliver_all(th);
	}
	assert_int_equal(th->r[0].role, RAFT_FOLLOWER);
	assert_int_equal(th->r[0].counters.check_quorum_step_downs, 1);
	th_deinit(th);
}

static void test_check_quorum_leader_with_majority_stays(void **state)
{
	struct th *th = &TH;
	(void)state;
	th_init_ex(th, 3, 3, false, true);
	th_elect(th, 0);
	for (uint32_t t = 0; t < 5 * th->r[0].cfg.election_ticks; t++) {
		th_tick(th, 0);
		th_deliver_all(th);
	}
	assert_int_equal(th->r[0].role, RAFT_LEADER);
	th_deinit(th);
}

static void test_vote_request_within_leader_lease_is_ignored(void **state)
{
	/* §4.2.3: "if a server receives a RequestVote request within the
	 * minimum election timeout of hearing from a current leader, it does
	 * not update its term or grant its vote." */
	struct th *th = &TH;
	struct raft_msg m;
	struct raft_update up;
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
	(void)state;
	th_init_ex(th, 3, 3, false, true);
	th_elect(th, 0);
	memset(&m, 0, sizeof(m));
	m.type = RAFT_MSG_VOTE;
	m.cluster_id = TH_CLUSTER;
	m.from = 3;
	m.to = 2;
	m.term = 9;
	m.last_index = 100;
	m.last_term = 8;
	uint64_t dropped = th->r[1].counters.msg_dropped_stale;
	raft_step(&th->r[1], &ev, &up);
	assert_int_equal(th->r[1].term, 1);
	assert_int_equal(up.msg_count, 0);
	assert_int_equal(th->r[1].counters.msg_dropped_stale, dropped + 1);
	/* A transfer campaign is not disruptive: it is honoured. */
	m.transfer = true;
	raft_step(&th->r[1], &ev, &up);
	assert_int_equal(th->r[1].term, 9);
	assert_false(up.msgs[0].reject);
	th_deinit(th);
}

static void test_transfer_target_wins_election_at_once(void **state)
{
	/* §3.10: "the prior leader sends a TimeoutNow request to the target
	 * server. This request has the same effect as the target server's
	 * election timer firing: the target server starts a new election". */
	struct th *th = &TH;
	struct raft_event ev = { .type = RAFT_EVENT_TRANSFER };
	(void)state;
	th_init_ex(th, 3, 3, true, true);
	th_elect(th, 0);
	ev.transfer.target = 3;
	th_step(th, 0, &ev, NULL);
	assert_int_equal(th->last_reject, RAFT_OK);
	th_deliver_all(th);
	assert_int_equal(th->r[2].role, RAFT_LEADER);
	assert_int_equal(th->r[2].term, 2);
	assert_int_equal(th->r[0].role, RAFT_FOLLOWER);
	assert_int_equal(th->r[0].leader_id, 3);
	th_deinit(th);
}

static void test_transfer_refuses_proposals_until_done_or_timed_out(void **state)
{
	/* §3.10: "the prior leader stops accepting new client requests" during
	 * the transfer, and aborts it after an election timeout. */
	struct th *th = &TH;
	struct raft_event ev = { .type = RAFT_EVENT_TRANSFER };
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th->cut[0][2] = true;
	ev.transfer.target = 3;
	th_step(th, 0, &ev, NULL);
	th_propose(th, 0, "x");
	assert_int_equal(th->last_reject, RAFT_TRANSFERRING);
	for (uint32_t t = 0; t < th->r[0].cfg.election_ticks; t++)
		th_tick(th, 0);
	th_propose(th, 0, "x");
	assert_int_equal(th->last_reject, RAFT_OK);
	th_deinit(th);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_election_follower_times_out_and_campaigns),
		cmocka_unit_test(test_election_majority_makes_leader),
		cmocka_unit_test(test_election_minority_does_not_make_leader),
		cmocka_unit_test(test_election_vote_is_persisted_before_reply),
		cmocka_unit_test(test_election_restarted_server_does_not_vote_twice),
		cmocka_unit_test(test_election_rejects_candidate_with_stale_log),
		cmocka_unit_test(test_stale_vote_request_is_answered_with_our_term),
		cmocka_unit_test(test_prevote_partitioned_node_keeps_its_term),
		cmocka_unit_test(test_prevote_rejoining_node_does_not_depose_leader),
		cmocka_unit_test(test_check_quorum_leader_steps_down_without_majority),
		cmocka_unit_test(test_check_quorum_leader_with_majority_stays),
		cmocka_unit_test(test_vote_request_within_leader_lease_is_ignored),
		cmocka_unit_test(test_transfer_target_wins_election_at_once),
		cmocka_unit_test(test_transfer_refuses_proposals_until_done_or_timed_out),
	};
	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
