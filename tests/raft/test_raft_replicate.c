/*
 * Paper tests for log replication and commitment (thesis §3.5, §3.6.2,
 * §3.8, §10.2.1), proposals, pipelining, and the message filters.
 */
#include "common/alloc.h"
#include "tests/raft/raft_harness.h"

static struct th TH;

static void append_msg(struct raft_msg *m, uint32_t from, uint32_t to, uint64_t term,
		       uint64_t prev_index, uint64_t prev_term)
{
	memset(m, 0, sizeof(*m));
	m->type = RAFT_MSG_APPEND;
	m->cluster_id = TH_CLUSTER;
	m->from = from;
	m->to = to;
	m->term = term;
	m->prev_index = prev_index;
	m->prev_term = prev_term;
}

static void test_proposal_on_follower_is_refused_with_leader_id(void **state)
{
	struct th *th = &TH;
	struct raft_buf buf = { .data = "x", .size = 1 };
	struct raft_event ev = { .type = RAFT_EVENT_PROPOSE };
	struct raft_update up;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	ev.propose.bufs = &buf;
	ev.propose.count = 1;
	raft_step(&th->r[1], &ev, &up);
	assert_int_equal(up.reject, RAFT_NOT_LEADER);
	assert_int_equal(up.leader_id, 1);
	assert_int_equal(up.entry_count, 0);
	th_deinit(th);
}

static void test_proposal_batch_gets_consecutive_indexes(void **state)
{
	struct th *th = &TH;
	struct raft_buf bufs[3] = { { "a", 1 }, { "bb", 2 }, { "ccc", 3 } };
	struct raft_event ev = { .type = RAFT_EVENT_PROPOSE };
	struct raft_update up;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th->auto_persist[0] = false;
	ev.propose.bufs = bufs;
	ev.propose.count = 3;
	raft_step(&th->r[0], &ev, &up);
	assert_int_equal(up.reject, RAFT_OK);
	assert_int_equal(up.propose_index, 2); /* after the no-op */
	assert_int_equal(up.propose_count, 3);
	assert_int_equal(up.entry_count, 3);
	assert_int_equal(up.entries[2].index, 4);
	assert_memory_equal(up.entries[2].data, "ccc", 3);
	/* One AppendEntries per follower carries the whole batch. */
	uint32_t appends = 0;
	for (uint32_t i = 0; i < up.msg_count; i++)
		if (up.msgs[i].type == RAFT_MSG_APPEND && up.msgs[i].entry_count == 3)
			appends++;
	assert_int_equal(appends, 2);
	th_deinit(th);
}

static void test_committed_entries_apply_in_order_everywhere(void **state)
{
	struct th *th = &TH;
	(void)state;
	th_init(th, 5);
	th_elect(th, 0);
	for (int i = 0; i < 20; i++)
		th_propose(th, 0, "cmd");
	th_deliver_all(th);
	th_tick(th, 0);
	th_deliver_all(th);
	for (uint32_t i = 0; i < 5; i++) {
		assert_int_equal(th->r[i].commit, 21);
		assert_int_equal(th->applied[i], 21);
	}
	th_deinit(th);
}

static void test_follower_refuses_append_without_matching_prev(void **state)
{
	/* §3.5: "If the follower does not find an entry in its log with the
	 * same index and term, then it refuses the new entries." */
	struct th *th = &TH;
	struct raft_msg m;
	struct raft_update up;
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
	static const uint64_t terms[] = { 1, 1, 1 };
	(void)state;
	th_init(th, 3);
	th_restart(th, 1, 2, 0, terms, 3);
	append_msg(&m, 1, 2, 2, 3, 2); /* prev (3, t2) but we have (3, t1) */
	raft_step(&th->r[1], &ev, &up);
	assert_int_equal(up.msg_count, 1);
	assert_true(up.msgs[0].reject);
	assert_int_equal(up.msgs[0].index, 3);
	assert_int_equal(up.entry_count, 0);
	th_deinit(th);
}

static void test_follower_truncates_conflicting_suffix(void **state)
{
	/* §3.5: "If an existing entry conflicts with a new one (same index but
	 * different terms), delete the existing entry and all that follow
	 * it." */
	struct th *th = &TH;
	struct raft_msg m;
	struct raft_update up;
	struct raft_entry e = { .term = 2, .index = 2, .data = (const uint8_t *)"new", .size = 3,
				.type = RAFT_ENTRY_COMMAND };
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
	static const uint64_t terms[] = { 1, 1, 1 };
	(void)state;
	th_init(th, 3);
	th_restart(th, 1, 1, 0, terms, 3);
	append_msg(&m, 1, 2, 2, 1, 1);
	m.entries = &e;
	m.entry_count = 1;
	raft_step(&th->r[1], &ev, &up);
	assert_int_equal(raft_last_index(&th->r[1]), 2);
	assert_int_equal(raft_term_at(&th->r[1], 2), 2);
	/* The loop is told to drop index >= 2 and write the new entry; the
	 * ack waits until it is durable. */
	assert_int_equal(up.entry_count, 1);
	assert_int_equal(up.entries[0].index, 2);
	assert_int_equal(up.msg_count, 0);
	th_deinit(th);
}

static void test_reject_hint_skips_a_whole_conflicting_term(void **state)
{
	/* Fast back-off (§3.5, "the follower can include the term of the
	 * conflicting entry and the first index it stores for that term"):
	 * the hint names the last index whose term is <= the probed term. */
	struct th *th = &TH;
	struct raft_msg m;
	struct raft_update up;
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
	static const uint64_t terms[] = { 1, 1, 1, 2, 2, 2 };
	(void)state;
	th_init(th, 3);
	th_restart(th, 1, 3, 0, terms, 6);
	append_msg(&m, 1, 2, 4, 6, 3);
	raft_step(&th->r[1], &ev, &up);
	assert_true(up.msgs[0].reject);
	assert_int_equal(up.msgs[0].hint_index, 6);
	assert_int_equal(up.msgs[0].hint_term, 2);
	append_msg(&m, 1, 2, 4, 5, 1);
	raft_step(&th->r[1], &ev, &up);
	assert_true(up.msgs[0].reject);
	assert_int_equal(up.msgs[0].hint_index, 3);
	assert_int_equal(up.msgs[0].hint_term, 1);
	th_deinit(th);
}

static void test_leader_repairs_diverged_follower(void **state)
{
	/* §3.5: "the leader must find the latest log entry where the two logs
	 * agree, delete any entries in the follower's log after that point,
	 * and send the follower all of the leader's entries after that
	 * point." */
	struct th *th = &TH;
	static const uint64_t leader_terms[] = { 1, 1, 1, 4, 4, 4, 4 };
	static const uint64_t follower_terms[] = { 1, 1, 1, 2, 2, 2, 3, 3, 3 };
	(void)state;
	th_init(th, 3);
	th_restart(th, 0, 4, 0, leader_terms, 7);
	th_restart(th, 1, 3, 0, follower_terms, 9);
	th_restart(th, 2, 4, 0, leader_terms, 7);
	th_elect(th, 0);
	th_tick(th, 0);
	th_deliver_all(th);
	assert_int_equal(raft_last_index(&th->r[1]), 8);
	for (uint64_t i = 1; i <= 8; i++)
		assert_int_equal(raft_term_at(&th->r[1], i), raft_term_at(&th->r[0], i));
	assert_int_equal(th->r[1].commit, 8);
	th_deinit(th);
}

static void test_commit_only_counts_replicas_of_current_term_figure8(void **state)
{
	/* §3.6.2: "Raft never commits log entries from previous terms by
	 * counting replicas. Only log entries from the leader's current term
	 * are committed by counting replicas." Figure 3.7's S1 in term 4 holds
	 * index 2 of term 2 on a majority (S1, S2, S3), yet may not commit it
	 * until its own term-4 entry is on a majority too. */
	struct th *th = &TH;
	static const uint64_t s1[] = { 1, 2 };
	static const uint64_t s3[] = { 1 };
	(void)state;
	th_init(th, 5);
	th_restart(th, 0, 3, 0, s1, 2);
	th_restart(th, 1, 3, 0, s1, 2);
	th_restart(th, 2, 3, 0, s3, 1);
	th_restart(th, 3, 3, 0, s3, 1);
	th_restart(th, 4, 3, 0, s3, 1);
	th->down[3] = th->down[4] = true;
	th->auto_persist[1] = th->auto_persist[2] = false;
	th_campaign(th, 0);
	assert_int_equal(th->r[0].role, RAFT_LEADER);
	assert_int_equal(th->r[0].term, 4);
	th_tick(th, 0);
	th_deliver_all(th);
	/* S3 now holds index 2 (term 2) and the no-op (index 3, term 4), but
	 * only index 2 is durable on S2 and S3. */
	for (uint32_t i = 1; i <= 2; i++) {
		struct raft_event ev = { .type = RAFT_EVENT_PERSISTED };
		ev.persisted.index = 2;
		ev.persisted.term = 2;
		th_step(th, i, &ev, NULL);
	}
	th_deliver_all(th);
	assert_int_equal(th->r[0].progress[2].match, 2);
	assert_int_equal(th->r[0].commit, 0);
	th_persist(th, 1);
	th_persist(th, 2);
	th_deliver_all(th);
	assert_int_equal(th->r[0].commit, 3);
	th_deinit(th);
}

static void test_leader_counts_itself_only_once_durable(void **state)
{
	/* §10.2.1: the leader writes its log in parallel with replication; it
	 * is part of the majority for an entry only once that write is
	 * durable. */
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th->auto_persist[0] = false;
	th->cut[0][2] = true;
	th_propose(th, 0, "x");
	th_deliver_all(th);
	assert_int_equal(th->r[0].progress[1].match, 2);
	assert_int_equal(th->r[0].commit, 1);
	th_persist(th, 0);
	assert_int_equal(th->r[0].commit, 2);
	th_deinit(th);
}

static void test_majority_of_followers_commits_before_leader_write(void **state)
{
	/* §10.2.1: "The leader may even commit an entry before it has been
	 * written to its own disk, if a majority of followers have written it
	 * to their disks." */
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th->auto_persist[0] = false;
	th_propose(th, 0, "x");
	th_deliver_all(th);
	assert_int_equal(th->r[0].commit, 2);
	assert_int_equal(th->r[0].persisted, 1);
	th_deinit(th);
}

static void test_follower_acks_only_durable_entries(void **state)
{
	/* §3.8 and docs/RAFT.md: a follower acknowledges an entry only once
	 * it is durable; the ack then follows RAFT_EVENT_PERSISTED. */
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th->auto_persist[1] = false;
	th->cut[0][2] = true;
	th_propose(th, 0, "x");
	th_deliver_all(th);
	assert_int_equal(raft_last_index(&th->r[1]), 2);
	assert_int_equal(th->r[0].progress[1].match, 1);
	assert_int_equal(th->r[0].commit, 1);
	th_persist(th, 1);
	th_deliver_all(th);
	assert_int_equal(th->r[0].progress[1].match, 2);
	assert_int_equal(th->r[0].commit, 2);
	th_deinit(th);
}

static void test_appends_are_pipelined_within_mtu_and_budget(void **state)
{
	struct th *th = &TH;
	struct raft_buf bufs[40];
	static uint8_t payload[150];
	struct raft_event ev = { .type = RAFT_EVENT_PROPOSE };
	struct raft_update up;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	for (int i = 0; i < 40; i++) {
		bufs[i].data = payload;
		bufs[i].size = sizeof(payload);
	}
	ev.propose.bufs = bufs;
	ev.propose.count = 40;
	th->auto_persist[0] = false;
	raft_step(&th->r[0], &ev, &up);
	uint32_t to2 = 0, entries = 0;
	for (uint32_t i = 0; i < up.msg_count; i++) {
		const struct raft_msg *m = &up.msgs[i];
		assert_true(msg_codec_size(m) <= th->r[0].cfg.mtu - RAFT_DATAGRAM_OVERHEAD);
		if (m->to == 2) {
			to2++;
			entries += m->entry_count;
		}
	}
	/* Four appends in flight (inflight_max), several entries each. */
	assert_int_equal(to2, th->r[0].cfg.inflight_max);
	assert_true(entries > to2 && entries < 40);
	th_deinit(th);
}

static void test_lost_appends_are_resent_after_a_stall(void **state)
{
	struct th *th = &TH;
	(void)state;
	th_init(th, 3);
	th_elect(th, 0);
	th_propose(th, 0, "x");
	th_propose(th, 0, "y");
	th_drop_all(th); /* the network loses every append */
	for (uint32_t t = 0; t < 4 * th->r[0].cfg.heartbeat_ticks + 2; t++) {
		th_tick(th, 0);
		th_deliver_all(th);
	}
	assert_true(th->r[0].counters.append_retransmits > 0);
	assert_int_equal(th->r[0].commit, 3);
	assert_int_equal(raft_last_index(&th->r[2]), 3);
	th_deinit(th);
}

static void test_messages_of_other_clusters_and_nonmembers_are_dropped(void **state)
{
	struct th *th = &TH;
	struct raft_msg m;
	struct raft_update up;
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
	(void)state;
	th_init(th, 3);
	append_msg(&m, 1, 2, 5, 0, 0);
	m.cluster_id = 42;
	raft_step(&th->r[1], &ev, &up);
	assert_int_equal(th->r[1].counters.msg_dropped_cluster, 1);
	assert_int_equal(th->r[1].term, 0);
	m.cluster_id = TH_CLUSTER;
	m.to = 3;
	raft_step(&th->r[1], &ev, &up);
	assert_int_equal(th->r[1].counters.msg_dropped_to, 1);
	memset(&m, 0, sizeof(m));
	m.type = RAFT_MSG_APPEND_RESP;
	m.cluster_id = TH_CLUSTER;
	m.from = 9;
	m.to = 2;
	m.term = 5;
	raft_step(&th->r[1], &ev, &up);
	assert_int_equal(th->r[1].counters.msg_dropped_nonmember, 1);
	assert_int_equal(th->r[1].term, 0);
	assert_int_equal(up.msg_count, 0);
	th_deinit(th);
}

static void test_follower_acks_its_snapshot_to_a_probe_below_it(void **state)
{
	/* A follower restarted from a snapshot at 10 is probed at 5: entries
	 * up to its snapshot are committed, so it acknowledges 10 at once (an
	 * ack of 0 once made the leader probe again forever). */
	struct raft r;
	struct prng p;
	struct raft_config cfg;
	struct raft_persisted_state ps;
	struct raft_msg m;
	struct raft_entry e[3];
	struct raft_update up;
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
	(void)state;
	th_config(&TH, &cfg, 2);
	prng_seed(&p, 3);
	assert_int_equal(raft_init(&r, &cfg, &p), 0);
	memset(&ps, 0, sizeof(ps));
	ps.term = 1;
	ps.snap_index = 10;
	ps.snap_term = 1;
	ps.snap_conf.count = 3;
	for (uint32_t i = 0; i < 3; i++) {
		ps.snap_conf.members[i].id = i + 1;
		ps.snap_conf.members[i].role = RAFT_VOTER;
	}
	assert_int_equal(raft_restore(&r, &ps), 0);
	append_msg(&m, 1, 2, 1, 5, 1);
	for (uint32_t i = 0; i < 3; i++)
		e[i] = (struct raft_entry){ .term = 1, .index = 6 + i, .type = RAFT_ENTRY_NOOP };
	m.entries = e;
	m.entry_count = 3;
	raft_step(&r, &ev, &up);
	assert_int_equal(up.msg_count, 1);
	assert_false(up.msgs[0].reject);
	assert_int_equal(up.msgs[0].index, 10);
	raft_deinit(&r);
}

static void test_steps_never_allocate(void **state)
{
	struct th *th = &TH;
	struct hasp_alloc_stats before, after;
	(void)state;
	th_init(th, 3);
	hasp_alloc_stats_get(&before);
	th_elect(th, 0);
	for (int i = 0; i < 300; i++) {
		th_propose(th, 0, "command");
		th_deliver_all(th);
		th_tick(th, i % 3 == 0 ? 0 : 1);
	}
	th_deliver_all(th);
	hasp_alloc_stats_get(&after);
	assert_int_equal(after.alloc_count, before.alloc_count);
	th_deinit(th);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_proposal_on_follower_is_refused_with_leader_id),
		cmocka_unit_test(test_proposal_batch_gets_consecutive_indexes),
		cmocka_unit_test(test_committed_entries_apply_in_order_everywhere),
		cmocka_unit_test(test_follower_refuses_append_without_matching_prev),
		cmocka_unit_test(test_follower_truncates_conflicting_suffix),
		cmocka_unit_test(test_reject_hint_skips_a_whole_conflicting_term),
		cmocka_unit_test(test_leader_repairs_diverged_follower),
		cmocka_unit_test(test_commit_only_counts_replicas_of_current_term_figure8),
		cmocka_unit_test(test_leader_counts_itself_only_once_durable),
		cmocka_unit_test(test_majority_of_followers_commits_before_leader_write),
		cmocka_unit_test(test_follower_acks_only_durable_entries),
		cmocka_unit_test(test_appends_are_pipelined_within_mtu_and_budget),
		cmocka_unit_test(test_lost_appends_are_resent_after_a_stall),
		cmocka_unit_test(test_messages_of_other_clusters_and_nonmembers_are_dropped),
		cmocka_unit_test(test_follower_acks_its_snapshot_to_a_probe_below_it),
		cmocka_unit_test(test_steps_never_allocate),
	};
	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
