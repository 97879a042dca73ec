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
	metric_set(node_metrics_peer(&nm, 2), 125000);
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
	assert_true(fabs(find(p, "hasp_peer_rtt_seconds", "peer=2", "")->value - 0.000125) < 1e-12);
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
		metric_set(node_metrics_peer(l->nm, id), id * 1000);
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
	assert_true(find(p, "hasp_peer_rtt_seconds", "peer=9", "") != NULL);
	free(p);
	control_deinit(&c);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_node_metric_set_exposes_every_named_metric),
		cmocka_unit_test(test_node_metrics_peers_register_while_scraped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
