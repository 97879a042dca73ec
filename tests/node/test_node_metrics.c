/*
 * The node's standard metric set (node/node_metrics.c): every named family
 * is exposed with the values the node sets, and per-peer series registered
 * while a scraper reads appear whole or not at all.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "control/control.h"
#include "control/metrics.h"
#include "node/node_metrics.h"
#include "tests/control/expo_parse.h"
#include "tests/test_util.h"

static void test_node_metric_set_exposes_every_named_metric(void **state)
{
	(void)state;
	struct control c;
	struct control_config cfg = { 0 };
	struct node_metrics nm;
	assert_int_equal(control_init(&c, &cfg), 0);
	assert_int_equal(node_metrics_register(&nm, &c, 2), 0);
	struct control_node_state st = { .has_leader = true, .term = 3, .commit_index = 10,
					 .applied_index = 9, .locks_held = 4, .sessions = 2 };
	node_metrics_sync(&nm, &st, 1);  /* the first leader seen (after a restart too): a change */
	node_metrics_sync(&nm, &st, 0);  /* leader lost: not a change */
	node_metrics_sync(&nm, &st, 2);  /* a new leader: one change */
	node_metrics_sync(&nm, &st, 2);
	node_metrics_fsync(&nm, 300000);
	node_metrics_batch(&nm, 17);
	node_metrics_dropped_set(&nm, 1, NODE_DROP_BAD_CHECKSUM, 5);
	metric_set(nm.watch_events[0][NODE_WATCH_COALESCED], 7);
	metric_observe(node_metrics_peer(&nm, 2), 125000);
	assert_ptr_equal(node_metrics_peer(&nm, 2), node_metrics_peer(&nm, 2));

	static char buf[65536];
	assert_true(metrics_expose(control_metrics(&c), buf, sizeof(buf)) > 0);
	struct parsed *p = calloc(1, sizeof(*p));
	expo_parse(buf, p);
	expo_check_histograms(p);
	static const char *const names[] = {
		"hasp_has_leader", "hasp_leader_changes_total", "hasp_term", "hasp_commit_index",
		"hasp_applied_index", "hasp_proposals_committed_total", "hasp_proposals_pending",
		"hasp_proposals_failed_total", "hasp_wal_fsync_duration_seconds", "hasp_batch_size",
		"hasp_peer_rtt_seconds", "hasp_locks_held", "hasp_leases", "hasp_waiters",
		"hasp_watchers", "hasp_sessions", "hasp_expirations_total",
		"hasp_notifications_sent_total", "hasp_notifications_rate_limited_total",
		"hasp_packets_dropped_total", "hasp_requests_total", "hasp_admin_requests_total",
		"hasp_watch_events_total", "hasp_watch_capacity", "hasp_watch_bytes_per_watch",
		"hasp_leader_ready_seconds_last",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (fam_index(p, names[i]) < 0)
			fail_msg("missing metric %s", names[i]);
	assert_true(find(p, "hasp_leader_changes_total", "", "")->value == 2);
	assert_true(find(p, "hasp_term", "", "")->value == 3);
	assert_true(find(p, "hasp_locks_held", "", "")->value == 4);
	assert_true(find(p, "hasp_packets_dropped_total", "lcore=1;reason=bad_checksum", "")->value == 5);
	assert_true(find(p, "hasp_packets_dropped_total", "lcore=0;reason=malformed", "")->value == 0);
	assert_true(find(p, "hasp_watch_events_total", "lcore=0;outcome=coalesced", "")->value == 7);
	assert_true(find(p, "hasp_watch_events_total", "lcore=1;outcome=dropped", "")->value == 0);
	assert_true(find(p, "hasp_wal_fsync_duration_seconds_bucket", "", "0.0005")->value == 1);
	assert_true(find(p, "hasp_wal_fsync_duration_seconds_bucket", "", "0.00025")->value == 0);
	assert_true(find(p, "hasp_batch_size_bucket", "", "32")->value == 1);
	assert_true(find(p, "hasp_peer_rtt_seconds_bucket", "peer=2", "0.00025")->value == 1);
	assert_true(find(p, "hasp_peer_rtt_seconds_bucket", "peer=2", "0.0001")->value == 0);
	assert_true(fabs(find(p, "hasp_peer_rtt_seconds_sum", "peer=2", "")->value - 0.000125) < 1e-12);
	free(p);
	control_deinit(&c);
}

/* A peer series registered while a scraper runs appears whole or not at all. */
struct late {
	struct node_metrics *nm;
	volatile bool done;
};

static void *late_register(void *arg)
{
	struct late *l = arg;
	for (uint32_t id = 1; id <= CONTROL_MEMBERS_MAX; id++) {
		metric_observe(node_metrics_peer(l->nm, id), id * 1000);
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
	assert_null(node_metrics_peer(l->nm, 99)); /* table full */
	l->done = true;
	return NULL;
}

static void test_node_metrics_peers_register_while_scraped(void **state)
{
	(void)state;
	struct control c;
	struct control_config cfg = { 0 };
	struct node_metrics nm;
	assert_int_equal(control_init(&c, &cfg), 0);
	assert_int_equal(node_metrics_register(&nm, &c, 1), 0);
	struct late l = { .nm = &nm };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, late_register, &l), 0);
	static char buf[65536];
	struct parsed *p = calloc(1, sizeof(*p));
	while (!l.done) {
		assert_true(metrics_expose(control_metrics(&c), buf, sizeof(buf)) > 0);
		expo_parse(buf, p);
	}
	pthread_join(t, NULL);
	assert_true(metrics_expose(control_metrics(&c), buf, sizeof(buf)) > 0);
	expo_parse(buf, p);
	assert_true(find(p, "hasp_peer_rtt_seconds_count", "peer=9", "")->value == 1);
	free(p);
	control_deinit(&c);
}

/* One node's registry over `dir`, as a start of haspd builds it. */
struct booted {
	struct control c;
	struct node_metrics nm;
};

static void boot(struct booted *b, struct node *n)
{
	struct control_config cfg = { 0 };
	assert_int_equal(control_init(&b->c, &cfg), 0);
	assert_int_equal(node_metrics_register(&b->nm, &b->c, 1), 0);
	assert_int_equal(node_metrics_register_node(&b->nm, n), 0);
}

static double value(struct booted *b, const char *name)
{
	const struct metric *s = metrics_find(control_metrics(&b->c), name, "");
	assert_non_null(s);
	return metric_value(s);
}

static void sync_leader(struct booted *b, uint64_t leader)
{
	struct control_node_state st = { .has_leader = leader != 0 };
	node_metrics_sync(&b->nm, &st, leader);
}

/* Regression: hasp_leader_changes_total started from 0 at every start, so
 * a restarted node showed fewer changes than it had seen and counted the
 * leader it had before the restart as a new one. */
static void test_node_metrics_leader_changes_survive_restart(void **state)
{
	(void)state;
	struct node *n = calloc(1, sizeof(*n));
	char dir[] = "/tmp/hasp-test-leader-XXXXXX";
	assert_non_null(mkdtemp(dir));
	snprintf(n->cfg.data_dir, sizeof(n->cfg.data_dir), "%s", dir);
	struct booted *b = calloc(1, sizeof(*b));

	boot(b, n);
	assert_true(value(b, "hasp_leader_changes_total") == 0);
	sync_leader(b, 1);
	sync_leader(b, 0);
	sync_leader(b, 2);
	assert_true(value(b, "hasp_leader_changes_total") == 2);
	control_deinit(&b->c);

	/* Restarted: the count goes on, and leader 2 again is no change. */
	boot(b, n);
	assert_true(value(b, "hasp_leader_changes_total") == 2);
	sync_leader(b, 2);
	assert_true(value(b, "hasp_leader_changes_total") == 2);
	sync_leader(b, 3);
	assert_true(value(b, "hasp_leader_changes_total") == 3);
	assert_true(value(b, "hasp_leader_changes_file_errors_total") == 0);
	control_deinit(&b->c);

	/* A damaged file is refused whole: counted, logged, from 0. */
	char path[sizeof(n->cfg.data_dir) + 32];
	snprintf(path, sizeof(path), "%s/leader_changes", dir);
	static const char *const bad[] = { "", "7\n", "-1 2\n", "5 2", "5 2 9\n", "99999999999999999999 1\n",
					   "5 4294967296\n", "x5 2\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fputs(bad[i], f);
		assert_int_equal(fclose(f), 0);
		boot(b, n);
		if (value(b, "hasp_leader_changes_total") != 0 ||
		    value(b, "hasp_leader_changes_file_errors_total") != 1)
			fail_msg("leader_changes file \"%s\" was not refused", bad[i]);
		sync_leader(b, 2);
		assert_true(value(b, "hasp_leader_changes_total") == 1);
		control_deinit(&b->c);
	}
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
	free(b);
	free(n);
}

/* The node keeps its histograms in place (node_hist.h); the registry
 * exposes them cumulated, on the 10 us .. 1 s bounds. */
static void test_node_metrics_latency_histograms_exposed(void **state)
{
	(void)state;
	struct node *n = calloc(1, sizeof(*n));
	struct booted *b = calloc(1, sizeof(*b));
	boot(b, n);
	node_hist_observe(&n->stats.request_latency[HASP_OP_ACQUIRE], 10000);   /* on a bound */
	node_hist_observe(&n->stats.request_latency[HASP_OP_ACQUIRE], 10001);
	node_hist_observe(&n->stats.request_latency[HASP_OP_ACQUIRE], 2000000000); /* +Inf */
	node_hist_observe(&n->stats.request_latency[0], 0);
	node_hist_observe(&n->stats.commit_latency, 3000000);
	n->stats.replies_by[HASP_OP_ACQUIRE][HASP_STATUS_BUSY] = 4;
	n->stats.replies_by[99 % NODE_OPS][HASP_STATUS_OK] = 0; /* nothing: no series */
	n->sm.stats.by_reason[LOCKS_REASON_SEQ_JUMP] = 2;
	node_metrics_replies(&b->nm, n);
	node_metrics_replies(&b->nm, n); /* registered once */

	static char buf[262144];
	assert_true(metrics_expose(control_metrics(&b->c), buf, sizeof(buf)) > 0);
	struct parsed *p = calloc(1, sizeof(*p));
	expo_parse(buf, p);
	expo_check_histograms(p);
	const char *h = "hasp_request_duration_seconds_bucket";
	assert_true(find(p, h, "opcode=ACQUIRE", "1e-05")->value == 1);
	assert_true(find(p, h, "opcode=ACQUIRE", "2.5e-05")->value == 2);
	assert_true(find(p, h, "opcode=ACQUIRE", "1")->value == 2);
	assert_true(find(p, h, "opcode=ACQUIRE", "+Inf")->value == 3);
	assert_true(find(p, h, "opcode=unknown", "1e-05")->value == 1);
	assert_true(find(p, h, "opcode=KV_PUT", "+Inf")->value == 0);
	assert_null(find(p, h, "opcode=EVENT", "+Inf"));
	assert_true(fabs(find(p, "hasp_request_duration_seconds_sum", "opcode=ACQUIRE", "")->value -
			 2.000020001) < 1e-9);
	assert_true(find(p, "hasp_raft_commit_duration_seconds_bucket", "", "0.0025")->value == 0);
	assert_true(find(p, "hasp_raft_commit_duration_seconds_bucket", "", "0.005")->value == 1);
	assert_true(find(p, "hasp_apply_duration_seconds_count", "", "")->value == 0);
	assert_true(find(p, "hasp_client_replies_total", "opcode=ACQUIRE;status=BUSY", "")->value == 4);
	assert_true(find(p, "hasp_reply_reasons_total", "reason=seq_jump", "")->value == 2);
	assert_null(find(p, "hasp_reply_reasons_total", "reason=not_owner", ""));
	n->stats.replies_by[HASP_OP_ACQUIRE][HASP_STATUS_BUSY] = 5; /* read in place */
	assert_true(metrics_expose(control_metrics(&b->c), buf, sizeof(buf)) > 0);
	expo_parse(buf, p);
	assert_true(find(p, "hasp_client_replies_total", "opcode=ACQUIRE;status=BUSY", "")->value == 5);
	free(p);
	control_deinit(&b->c);
	free(b);
	free(n);
}

/* Authentication failures of both ports are one family, read in place
 * from the node's counters (an alert in deploy/ watches their rate). */
static void test_node_metrics_auth_failures_exposed(void **state)
{
	(void)state;
	struct node *n = calloc(1, sizeof(*n));
	struct booted *b = calloc(1, sizeof(*b));
	boot(b, n);
	n->stats.client_auth_bad = 3;
	n->stats.client_auth_unknown = 7;
	n->stats.peer_auth_replayed = 2;
	n->stats.peer_keys_revoked = 1;

	static char buf[262144];
	assert_true(metrics_expose(control_metrics(&b->c), buf, sizeof(buf)) > 0);
	struct parsed *p = calloc(1, sizeof(*p));
	expo_parse(buf, p);
	const char *f = "hasp_auth_failures_total";
	assert_true(find(p, f, "port=client;reason=bad_tag", "")->value == 3);
	assert_true(find(p, f, "port=client;reason=unknown_sender", "")->value == 7);
	assert_true(find(p, f, "port=client;reason=not_v2", "")->value == 0);
	assert_true(find(p, f, "port=peer;reason=replayed", "")->value == 2);
	assert_true(find(p, f, "port=peer;reason=bad_tag", "")->value == 0);
	assert_true(find(p, "hasp_peer_keys_revoked_total", "", "")->value == 1);
	n->stats.peer_auth_bad = 9; /* read in place */
	assert_true(metrics_expose(control_metrics(&b->c), buf, sizeof(buf)) > 0);
	expo_parse(buf, p);
	assert_true(find(p, f, "port=peer;reason=bad_tag", "")->value == 9);
	free(p);
	control_deinit(&b->c);
	free(b);
	free(n);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_node_metric_set_exposes_every_named_metric),
		cmocka_unit_test(test_node_metrics_peers_register_while_scraped),
		cmocka_unit_test(test_node_metrics_leader_changes_survive_restart),
		cmocka_unit_test(test_node_metrics_latency_histograms_exposed),
		cmocka_unit_test(test_node_metrics_auth_failures_exposed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
