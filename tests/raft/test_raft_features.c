/*
 * Paper tests for ReadIndex (§6.4), membership changes and learners (§4.1,
 * §4.2.1, §4.2.2) and snapshots (§5).
 */
#include "raft/core.h"
#include "raft/election.h"
#include "raft/log.h"
#include "raft/snapshot.h"
#include "tests/raft/raft_harness.h"

static struct th TH;

static void read_index(struct th *th, uint32_t i, uint64_t ctx)
{
	struct raft_event ev = { .type = RAFT_EVENT_READ_INDEX };
	ev.read.ctx = ctx;
	th->last_read_count = 0;
	th_step(th, i, &ev, NULL);
}

static void conf_change(struct th *th, uint32_t i, uint8_t op, uint32_t id)
{
	struct raft_event ev = { .type = RAFT_EVENT_CONF_CHANGE };
	ev.conf.op = op;
	ev.conf.id = id;
	th_step(th, i, &ev, NULL);
}

static void settle(struct th *th, uint32_t leader, int rounds)
{
	for (int k = 0; k < rounds; k++) {
		th_tick(th, leader);
		th_deliver_all(th);
	}
}

static void test_read_index_waits_for_a_heartbeat_quorum(void **state)
{
	/* §6.4: the leader "records its current commit index in a local
	 * variable readIndex", then "sends a new round of heartbeats and waits
	 * for their acknowledgments from a majority of the cluster" before the
	 * read may be served at readIndex. */
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th_propose(th, 0, "x");
	th_deliver_all(th);
	settle(th, 0, 1);
	read_index(th, 0, 77);
	assert_int_equal(th->last_reject, RAFT_OK);
	assert_int_equal(th->last_read_count, 0);
	th_deliver_all(th);
	assert_int_equal(th->last_read_count, 1);
	assert_int_equal(th->last_reads[0].ctx, 77);
	assert_int_equal(th->last_reads[0].index, 2);
	th_deinit(th);
}

static void test_read_index_is_not_served_by_an_isolated_leader(void **state)
{
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th_isolate(th, 0, true);
	read_index(th, 0, 1);
	th_deliver_all(th);
	assert_int_equal(th->last_read_count, 0);
	assert_int_equal(th->r[0].reads_count, 1);
	th_deinit(th);
}

static void test_read_index_waits_for_the_new_leaders_noop(void **state)
{
	/* §6.4: "If the leader has not yet marked an entry from its current
	 * term committed, it waits until it has done so." */
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	th->auto_persist[1] = th->auto_persist[2] = false;
	th_campaign(th, 0);
	assert_int_equal(th->r[0].role, RAFT_LEADER);
	assert_int_equal(th->r[0].commit, 0);
	read_index(th, 0, 5);
	th_deliver_all(th);
	assert_int_equal(th->last_read_count, 0);
	th_persist(th, 1);
	th_deliver_all(th);
	assert_int_equal(th->last_read_count, 1);
	assert_int_equal(th->last_reads[0].index, 1);
	th_deinit(th);
}

static void test_read_index_on_follower_is_refused(void **state)
{
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	read_index(th, 1, 1);
	assert_int_equal(th->last_reject, RAFT_NOT_LEADER);
	th_deinit(th);
}

static void test_learner_replicates_but_neither_votes_nor_counts(void **state)
{
	/* §4.2.1: "the new servers join the cluster as non-voting members
	 * (the leader replicates log entries to them, but they are not
	 * considered for majorities)". */
	struct th *th = &TH;
	(void)state;
	th_init_ex(th, 4, 3, false, false);
	th_elect(th, 0);
	conf_change(th, 0, RAFT_CONF_ADD_LEARNER, 4);
	assert_int_equal(th->last_reject, RAFT_OK);
	settle(th, 0, 3);
	assert_int_equal(th->r[3].conf.count, 4);
	assert_int_equal(th->applied[3], th->r[0].commit);
	/* With two voters cut off, the learner cannot make a majority. */
	th_isolate(th, 1, true);
	th_isolate(th, 2, true);
	th_propose(th, 0, "x");
	settle(th, 0, 3);
	assert_int_equal(raft_last_index(&th->r[3]), raft_last_index(&th->r[0]));
	assert_true(th->r[0].commit < raft_last_index(&th->r[0]));
	/* And a learner never campaigns. */
	for (int t = 0; t < 100; t++)
		th_tick(th, 3);
	assert_int_equal(th->r[3].role, RAFT_FOLLOWER);
	assert_int_equal(th->r[3].counters.elections + th->r[3].counters.pre_votes, 0);
	th_deinit(th);
}

static void test_promotion_waits_until_the_learner_caught_up(void **state)
{
	/* §4.2.1: promote only once the new server's log has caught up, or
	 * availability suffers while it catches up as a voter. */
	struct th *th = &TH;
	(void)state;
	th_init_ex(th, 4, 3, false, false);
	th_elect(th, 0);
	th_isolate(th, 3, true);
	conf_change(th, 0, RAFT_CONF_ADD_LEARNER, 4);
	settle(th, 0, 2);
	conf_change(th, 0, RAFT_CONF_PROMOTE, 4);
	assert_int_equal(th->last_reject, RAFT_NOT_CAUGHT_UP);
	th_isolate(th, 3, false);
	settle(th, 0, 3);
	conf_change(th, 0, RAFT_CONF_PROMOTE, 4);
	assert_int_equal(th->last_reject, RAFT_OK);
	settle(th, 0, 2);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(th->r[i].conf.members[3].role, RAFT_VOTER);
	th_deinit(th);
}

static void test_one_configuration_change_at_a_time(void **state)
{
	/* §4.1: "The leader ... must wait for the previous change to be
	 * committed before it begins the next one" (one server at a time). */
	struct th *th = &TH;
	(void)state;
	th_init_ex(th, 5, 3, false, false);
	th_elect(th, 0);
	th_isolate(th, 0, true);
	conf_change(th, 0, RAFT_CONF_ADD_LEARNER, 4);
	assert_int_equal(th->last_reject, RAFT_OK);
	/* The new configuration is used at once, committed or not. */
	assert_int_equal(th->r[0].conf.count, 4);
	conf_change(th, 0, RAFT_CONF_ADD_LEARNER, 5);
	assert_int_equal(th->last_reject, RAFT_CONF_PENDING);
	th_isolate(th, 0, false);
	settle(th, 0, 2);
	conf_change(th, 0, RAFT_CONF_ADD_LEARNER, 5);
	assert_int_equal(th->last_reject, RAFT_OK);
	th_deinit(th);
}

static void test_removed_leader_steps_down_once_removal_commits(void **state)
{
	/* §4.2.2: the leader "steps down (returns to follower state) once the
	 * Cnew entry is committed", managing the cluster without counting
	 * itself until then. */
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th_isolate(th, 0, true);
	conf_change(th, 0, RAFT_CONF_REMOVE, 1);
	assert_int_equal(th->last_reject, RAFT_OK);
	settle(th, 0, 1);
	assert_int_equal(th->r[0].role, RAFT_LEADER);
	th_isolate(th, 0, false);
	settle(th, 0, 1);
	assert_int_equal(th->r[0].role, RAFT_FOLLOWER);
	/* It handed over with TimeoutNow: a remaining voter leads. */
	th_deliver_all(th);
	assert_true(th->r[1].role == RAFT_LEADER || th->r[2].role == RAFT_LEADER);
	uint32_t l = th->r[1].role == RAFT_LEADER ? 1 : 2;
	assert_int_equal(th->r[l].conf.count, 2);
	th_propose(th, l, "after");
	settle(th, l, 2);
	assert_int_equal(th->r[l].commit, raft_last_index(&th->r[l]));
	th_deinit(th);
}

static void test_server_with_pending_removal_may_still_campaign(void **state)
{
	/* A server whose removal is logged but uncommitted may hold the only
	 * log the new majority would elect, so it keeps campaigning (as a
	 * voter of the committed configuration); once the removal commits it
	 * stops. Here the leader removes itself while cut off. */
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th_isolate(th, 0, true);
	conf_change(th, 0, RAFT_CONF_REMOVE, 1);
	assert_int_equal(th->last_reject, RAFT_OK);
	assert_int_equal(th->r[0].conf.count, 2);
	assert_true(th->r[0].conf_index > th->r[0].commit);
	assert_true(election_may_campaign(&th->r[0]));
	th_isolate(th, 0, false);
	settle(th, 0, 2);
	assert_int_equal(th->r[0].role, RAFT_FOLLOWER);
	assert_false(election_may_campaign(&th->r[0]));
	th_deinit(th);
}

static void test_removed_server_is_ignored_and_knows_it_once_told(void **state)
{
	/* A follower removed while cut off never receives the removal
	 * (the leader stops replicating to it at once), so it campaigns at
	 * a higher term. Without PreVote and CheckQuorum nothing else keeps
	 * it from deposing the leader: the others ignore vote requests from
	 * a server outside their configuration (issue 11 item 6). A server
	 * that does learn its removal (here the leader removing itself) says
	 * so (raft_removed) and never campaigns again. Deterministic: the
	 * harness seeds each node's PRNG (1000 + i). */
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th_isolate(th, 2, true);
	conf_change(th, 0, RAFT_CONF_REMOVE, 3);
	assert_int_equal(th->last_reject, RAFT_OK);
	settle(th, 0, 2);
	assert_int_equal(th->r[0].commit, th->r[0].conf_index);
	assert_int_equal(th->r[1].conf.count, 2);
	assert_false(raft_removed(&th->r[0]));
	assert_false(raft_removed(&th->r[2])); /* it was never told */
	th_isolate(th, 2, false);
	uint64_t term = th->r[0].term, dropped = th->r[0].counters.msg_dropped_nonmember;
	th_campaign(th, 2);
	assert_true(th->r[2].term > term);
	assert_int_equal(th->r[0].role, RAFT_LEADER);
	assert_int_equal(th->r[0].term, term);
	assert_int_equal(th->r[1].term, term);
	assert_true(th->r[0].counters.msg_dropped_nonmember > dropped);
	/* ...and tell it so: their committed configuration, newer than the
	 * one it holds, leaves it out. It says it was removed and stops
	 * campaigning (before, it campaigned at every timeout). */
	assert_true(th->r[0].counters.removal_notices_sent + th->r[1].counters.removal_notices_sent >
		    0);
	assert_true(raft_removed(&th->r[2]));
	assert_int_equal(th->r[2].counters.removal_notices, 1);
	assert_int_equal(th->r[2].removal_notice_index, th->r[0].conf_index);
	assert_int_equal(th->r[2].role, RAFT_FOLLOWER);
	uint64_t tries = th->r[2].counters.elections + th->r[2].counters.pre_votes;
	for (int t = 0; t < 10 * (int)th->r[2].cfg.election_ticks; t++)
		th_tick(th, 2);
	th_deliver_all(th);
	assert_int_equal(th->r[2].counters.elections + th->r[2].counters.pre_votes, tries);
	th_propose(th, 0, "still leading");
	settle(th, 0, 2);
	assert_int_equal(th->r[1].commit, raft_last_index(&th->r[0]));

	/* The leader removes itself: once that commits it knows. */
	conf_change(th, 0, RAFT_CONF_REMOVE, 1);
	assert_int_equal(th->last_reject, RAFT_OK);
	assert_false(raft_removed(&th->r[0])); /* not committed yet */
	settle(th, 0, 2);
	th_deliver_all(th);
	assert_true(raft_removed(&th->r[0]));
	assert_false(raft_removed(&th->r[1]));
	uint64_t campaigns = th->r[0].counters.elections + th->r[0].counters.pre_votes;
	for (int t = 0; t < 10 * (int)th->r[0].cfg.election_ticks; t++)
		th_tick(th, 0);
	th_deliver_all(th);
	assert_int_equal(th->r[0].counters.elections + th->r[0].counters.pre_votes, campaigns);
	assert_int_equal(th->r[1].role, RAFT_LEADER);
	th_deinit(th);
}

static void test_removal_notice_older_than_our_configuration_is_ignored(void **state)
{
	/* A member lagging behind our configuration (it lacks the entry that
	 * added us) names an older committed configuration: no proof that we
	 * are out, so nothing changes. One at our own index is no proof
	 * either; only a newer one is. */
	struct th *th = &TH;
	struct raft_msg m;
	struct raft_update up;
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	uint64_t conf_index = th->r[1].conf_index;
	memset(&m, 0, sizeof(m));
	m.type = RAFT_MSG_PRE_VOTE_RESP;
	m.cluster_id = TH_CLUSTER;
	m.from = 3;
	m.to = 2;
	m.term = th->r[1].term;
	m.reject = true;
	m.not_member = true;
	m.index = conf_index;
	raft_step(&th->r[1], &ev, &up);
	assert_false(raft_removed(&th->r[1]));
	assert_int_equal(th->r[1].counters.removal_notices, 0);
	assert_true(election_may_campaign(&th->r[1]));
	m.index = conf_index + 1;
	raft_step(&th->r[1], &ev, &up);
	assert_true(raft_removed(&th->r[1]));
	assert_int_equal(th->r[1].counters.removal_notices, 1);
	assert_false(election_may_campaign(&th->r[1]));
	th_deinit(th);
}

static void take_snapshot(struct th *th, uint32_t i, const uint8_t *data, uint64_t size)
{
	struct raft_event ev = { .type = RAFT_EVENT_SNAPSHOT };
	ev.snapshot.index = th->r[i].applied;
	ev.snapshot.data = data;
	ev.snapshot.size = size;
	th_step(th, i, &ev, NULL);
}

static void test_snapshot_compacts_the_log(void **state)
{
	/* §5.1: "the entire current system state is written to a snapshot on
	 * stable storage, then the entire log up to that point is discarded"
	 * (here: all but snapshot_trailing entries). */
	struct th *th = &TH;
	static uint8_t image[100];
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	for (int i = 0; i < 40; i++)
		th_propose(th, 0, "x");
	settle(th, 0, 2);
	assert_int_equal(th->r[0].applied, 41);
	take_snapshot(th, 0, image, sizeof(image));
	assert_int_equal(th->last_reject, RAFT_OK);
	assert_int_equal(th->r[0].log.snap_index, 41);
	assert_int_equal(th->r[0].log.first, 41 + 1 - th->r[0].cfg.snapshot_trailing);
	assert_null(raft_entry_at(&th->r[0], 20));
	/* A snapshot of an unapplied index is refused. */
	struct raft_event ev = { .type = RAFT_EVENT_SNAPSHOT };
	ev.snapshot.index = 50;
	ev.snapshot.data = image;
	ev.snapshot.size = 1;
	th_step(th, 0, &ev, NULL);
	assert_int_equal(th->last_reject, RAFT_SNAPSHOT_INVALID);
	th_deinit(th);
}

/* Restarts follower f with the first `keep` entries of the leader's log
 * (keep 0 and term 0: a wiped data directory), as after
 * `hasp-waldump --truncate-at` or a lost disk. */
static void restart_with_prefix(struct th *th, uint32_t leader, uint32_t f, uint32_t keep, bool wipe)
{
	uint64_t terms[64];

	assert_true(keep <= 64);
	for (uint32_t k = 0; k < keep; k++)
		terms[k] = raft_term_at(&th->r[leader], k + 1);
	if (wipe)
		th_restart(th, f, 0, 0, terms, 0);
	else
		th_restart(th, f, th->r[f].term, th->r[f].vote, terms, keep);
}

static void test_follower_that_lost_acknowledged_entries_catches_up_without_election(void **state)
{
	/* A follower whose log lost entries it had acknowledged (a truncated
	 * WAL, a wiped data dir) rejects the leader's heartbeats at its old
	 * match index. The leader must take that as "the follower lost its
	 * log", not as a stale reply, and repair it while it stays leader:
	 * from the log or, once compacted, by snapshot. Seeded cases. */
	struct th *th = &TH;
	static uint8_t image[300];
	(void)state;
	for (uint64_t seed = 1; seed <= 40; seed++) {
		struct prng p;
		prng_seed(&p, seed);
		th_init(th, 3);
		th_elect(th, 0);
		uint32_t f = 1 + (uint32_t)prng_below(&p, 2);
		uint32_t n = 5 + (uint32_t)prng_below(&p, 40);
		for (uint32_t i = 0; i < n; i++)
			th_propose(th, 0, "x");
		settle(th, 0, 3);
		uint64_t last = raft_last_index(&th->r[0]);
		assert_int_equal(th->r[f].commit, last);
		assert_int_equal(core_progress(&th->r[0], f + 1)->match, last);
		bool wipe = prng_below(&p, 3) == 0;
		bool snap = prng_below(&p, 2) == 0;
		if (snap) {
			take_snapshot(th, 0, image, sizeof(image));
			assert_int_equal(th->last_reject, RAFT_OK);
		}
		uint32_t keep = wipe ? 0 : (uint32_t)prng_below(&p, last < 64 ? last : 64);
		uint64_t term = th->r[0].term;
		restart_with_prefix(th, 0, f, keep, wipe);
		assert_int_equal(raft_last_index(&th->r[f]), keep);
		for (uint32_t i = 0; i < 3; i++)
			th_propose(th, 0, "y");
		settle(th, 0, 12);
		/* Same leader, same term: no election was needed. */
		assert_int_equal(th->r[0].role, RAFT_LEADER);
		assert_int_equal(th->r[0].term, term);
		last = raft_last_index(&th->r[0]);
		assert_int_equal(raft_last_index(&th->r[f]), last);
		assert_int_equal(th->r[f].commit, last);
		assert_int_equal(core_progress(&th->r[0], f + 1)->match, last);
		assert_int_equal(th->r[f].term, term);
		if (snap && keep < th->r[0].log.first - 1)
			assert_true(th->snap_installed[f] > 0);
		assert_true(th->r[0].counters.follower_log_lost >= 1);
		th_deinit(th);
	}
}

static void test_lagging_follower_receives_snapshot_in_chunks(void **state)
{
	/* §5.3: "the leader must occasionally send snapshots to followers that
	 * lag behind ... when it has already discarded the next log entry that
	 * it needs to send to a follower", in chunks (InstallSnapshot). */
	struct th *th = &TH;
	static uint8_t image[4000];
	(void)state;
	for (size_t i = 0; i < sizeof(image); i++)
		image[i] = (uint8_t)(i * 7);
	th_init(th, 3);
	th_elect(th, 0);
	th_isolate(th, 2, true);
	/* More than the window keeps for a lagging follower (window / 2 -
	 * threshold entries). */
	for (int i = 0; i < 120; i++)
		th_propose(th, 0, "x");
	settle(th, 0, 2);
	take_snapshot(th, 0, image, sizeof(image));
	assert_true(th->r[0].log.first > 2);
	th_isolate(th, 2, false);
	settle(th, 0, 10);
	assert_int_equal(th->snap_installed[2], 121);
	assert_int_equal(th->snap_size[2], sizeof(image));
	assert_memory_equal(th->snap[2], image, sizeof(image));
	assert_int_equal(th->r[0].counters.snapshots_sent, 1);
	/* The follower then continues from the log. */
	th_propose(th, 0, "y");
	settle(th, 0, 2);
	assert_int_equal(th->applied[2], 122);
	assert_int_equal(th->r[0].progress[2].match, 122);
	th_deinit(th);
}

static void test_silent_followers_transfer_stops_holding_compaction(void **state)
{
	/* A transfer in progress holds compaction back (so that it can finish
	 * with the snapshot it started), but only while the follower answers:
	 * a dead follower must not stop every later snapshot, or the log window
	 * fills and the group refuses all proposals while it is down. */
	struct th *th = &TH;
	static uint8_t image[4000];
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th_isolate(th, 2, true);
	for (int i = 0; i < 120; i++)
		th_propose(th, 0, "x");
	settle(th, 0, 2);
	take_snapshot(th, 0, image, sizeof(image));
	/* The next heartbeat starts the transfer to the silent follower. */
	settle(th, 0, (int)th->r[0].cfg.heartbeat_ticks + 1);
	assert_int_equal(th->r[0].progress[2].state, RAFT_SNAPSHOTTING);
	assert_true(snapshot_sending(&th->r[0]));
	/* An election timeout of silence later it no longer does; node 1
	 * keeps answering, so the leader stays leader. */
	settle(th, 0, (int)th->r[0].cfg.election_ticks);
	assert_int_equal(th->r[0].role, RAFT_LEADER);
	assert_false(snapshot_sending(&th->r[0]));
	/* Once the follower is back, its transfer completes. */
	th_isolate(th, 2, false);
	settle(th, 0, 20);
	assert_int_equal(th->snap_installed[2], 121);
	th_deinit(th);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_index_waits_for_a_heartbeat_quorum),
		cmocka_unit_test(test_read_index_is_not_served_by_an_isolated_leader),
		cmocka_unit_test(test_read_index_waits_for_the_new_leaders_noop),
		cmocka_unit_test(test_read_index_on_follower_is_refused),
		cmocka_unit_test(test_learner_replicates_but_neither_votes_nor_counts),
		cmocka_unit_test(test_promotion_waits_until_the_learner_caught_up),
		cmocka_unit_test(test_one_configuration_change_at_a_time),
		cmocka_unit_test(test_removed_leader_steps_down_once_removal_commits),
		cmocka_unit_test(test_server_with_pending_removal_may_still_campaign),
		cmocka_unit_test(test_removed_server_is_ignored_and_knows_it_once_told),
		cmocka_unit_test(test_removal_notice_older_than_our_configuration_is_ignored),
		cmocka_unit_test(test_snapshot_compacts_the_log),
		cmocka_unit_test(test_lagging_follower_receives_snapshot_in_chunks),
		cmocka_unit_test(test_follower_that_lost_acknowledged_entries_catches_up_without_election),
		cmocka_unit_test(test_silent_followers_transfer_stops_holding_compaction),
	};
	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
