/*
 * Trace tests (etcd's testdata/, cowsql's CLUSTER_TRACE): script events into
 * a small cluster and compare the trace lines the cores emit with an
 * expected text block. A change in protocol behaviour shows up here as a
 * readable diff.
 */
#include "tests/raft/raft_harness.h"

static struct th TH;

static void expect_trace(struct th *th, const char *expected)
{
	if (strcmp(th->trace, expected) != 0) {
		fprintf(stderr, "--- expected\n%s--- got\n%s", expected, th->trace);
		fail();
	}
	th->trace_len = 0;
	th->trace[0] = '\0';
}

static void test_trace_election_replication_and_step_down(void **state)
{
	struct th *th = &TH;
	(void)state;
	th_init_ex(th, 3, 3, true, true);
	th->trace_on = true;

	/* n1 times out: pre-vote round, then the real election. */
	th_campaign(th, 0);
	expect_trace(th,
		     "n1 t0 pre-candidate\n"
		     "n2 t0 pre-vote n1 granted\n"
		     "n3 t0 pre-vote n1 granted\n"
		     "n1 t1 candidate\n"
		     "n2 t1 vote n1 granted\n"
		     "n3 t1 vote n1 granted\n"
		     "n1 t1 leader\n"
		     "n2 t1 follower leader=n1\n"
		     "n3 t1 follower leader=n1\n"
		     "n1 t1 commit 1\n");

	/* The proposal's append tells the followers about the no-op's commit;
	 * the entry commits on the leader, then on the followers with the next
	 * heartbeat. */
	th_propose(th, 0, "set x=1");
	th_deliver_all(th);
	th_tick(th, 0);
	th_deliver_all(th);
	expect_trace(th,
		     "n2 t1 commit 1\n"
		     "n3 t1 commit 1\n"
		     "n1 t1 commit 2\n"
		     "n2 t1 commit 2\n"
		     "n3 t1 commit 2\n");

	/* Cut off from both followers, the leader steps down (CheckQuorum)
	 * and the others elect n2 or n3 after their pre-votes. */
	th_isolate(th, 0, true);
	for (uint32_t t = 0; t < 2 * th->r[0].cfg.election_ticks; t++)
		th_tick(th, 0);
	th_drop_all(th);
	expect_trace(th, "n1 t1 step down: no quorum\n"
			 "n1 t1 follower leader=n0\n");
	th_deinit(th);
}

static void test_trace_membership_change(void **state)
{
	struct th *th = &TH;
	struct raft_event ev = { .type = RAFT_EVENT_CONF_CHANGE };
	(void)state;
	th_init_ex(th, 4, 3, false, false);
	th_elect(th, 0);
	th->trace_on = true;
	ev.conf.op = RAFT_CONF_ADD_LEARNER;
	ev.conf.id = 4;
	th_step(th, 0, &ev, NULL);
	th_deliver_all(th);
	expect_trace(th,
		     "n1 t1 conf 2: n1 n2 n3 l4\n"
		     "n2 t1 conf 2: n1 n2 n3 l4\n"
		     "n3 t1 conf 2: n1 n2 n3 l4\n"
		     "n4 t1 follower leader=n1\n"
		     "n1 t1 commit 2\n"
		     "n4 t1 conf 2: n1 n2 n3 l4\n"
		     "n4 t1 commit 2\n");
	th_deinit(th);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trace_election_replication_and_step_down),
		cmocka_unit_test(test_trace_membership_change),
	};
	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
