/*
 * The metrics registry and its Prometheus exposition, checked by parsing
 * the text back with a small parser that enforces the format's rules
 * (text format 0.0.4): HELP and TYPE once per family and before its
 * samples, metric and label name syntax, quoted and escaped label values,
 * float values, and for histograms cumulative _bucket series ending in
 * le="+Inf" whose count equals _count, plus _sum.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

#include "control/json.h"
#include "control/control.h"
#include "control/metrics.h"
#include "tests/test_util.h"

#include "tests/control/expo_parse.h"

/* ---- tests ---- */

static void test_metrics_exposition_parses_back_with_the_values(void **state)
{
	(void)state;
	struct metrics m;
	assert_int_equal(metrics_init(&m, 32), 0);
	struct metric *leader = metrics_gauge(&m, "hasp_has_leader", "1 when a leader is known.", NULL, 0);
	struct metric *term = metrics_gauge(&m, "hasp_term", "Current Raft term.", NULL, 0);
	struct metrics_label l1[] = { { "reason", "malformed" }, { "lcore", "0" } };
	struct metrics_label l2[] = { { "reason", "bad_checksum" }, { "lcore", "0" } };
	struct metric *d1 = metrics_counter(&m, "hasp_packets_dropped_total", "Datagrams dropped, by reason.", l1, 2);
	struct metric *d2 = metrics_counter(&m, "hasp_packets_dropped_total", "Datagrams dropped, by reason.", l2, 2);
	uint64_t bounds[] = { 100000, 1000000, 10000000 }; /* ns: 0.1, 1, 10 ms */
	struct metric *fsync = metrics_histogram(&m, "hasp_wal_fsync_duration_seconds",
						 "WAL fsync latency.", NULL, 0, bounds, 3, 1e-9);
	uint64_t ext = 42;
	struct metrics_label peer[] = { { "peer", "2" } };
	assert_non_null(metrics_counter_ref(&m, "hasp_proposals_committed_total", "Committed.", NULL, 0, &ext));
	struct metric *rtt = metrics_gauge_scaled(&m, "hasp_peer_rtt_seconds", "Heartbeat round trip.", peer, 1, 1e-9);
	assert_non_null(leader);
	assert_non_null(term);
	assert_non_null(d1);
	assert_non_null(d2);
	assert_non_null(fsync);
	assert_non_null(rtt);

	metric_set(leader, 1);
	metric_set(term, 7);
	metric_add(d1, 3);
	metric_inc(d2);
	metric_observe(fsync, 50000);    /* 0.05 ms */
	metric_observe(fsync, 100000);   /* exactly on the bound: le is inclusive */
	metric_observe(fsync, 5000000);  /* 5 ms */
	metric_observe(fsync, 90000000); /* 90 ms: only +Inf */
	metric_set(rtt, 250000);

	char buf[8192];
	size_t n = metrics_expose(&m, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(n, strlen(buf));
	struct parsed *p = calloc(1, sizeof(*p));
	expo_parse(buf, p);
	expo_check_histograms(p);

	assert_int_equal(p->fam_count, 6);
	assert_true(find(p, "hasp_has_leader", "", "")->value == 1);
	assert_true(find(p, "hasp_term", "", "")->value == 7);
	assert_true(find(p, "hasp_packets_dropped_total", "reason=malformed;lcore=0", "")->value == 3);
	assert_true(find(p, "hasp_packets_dropped_total", "reason=bad_checksum;lcore=0", "")->value == 1);
	assert_true(find(p, "hasp_proposals_committed_total", "", "")->value == 42);
	assert_true(fabs(find(p, "hasp_peer_rtt_seconds", "peer=2", "")->value - 0.00025) < 1e-12);
	assert_true(find(p, "hasp_wal_fsync_duration_seconds_bucket", "", "0.0001")->value == 2);
	assert_true(find(p, "hasp_wal_fsync_duration_seconds_bucket", "", "0.001")->value == 2);
	assert_true(find(p, "hasp_wal_fsync_duration_seconds_bucket", "", "0.01")->value == 3);
	assert_true(find(p, "hasp_wal_fsync_duration_seconds_bucket", "", "+Inf")->value == 4);
	assert_true(find(p, "hasp_wal_fsync_duration_seconds_count", "", "")->value == 4);
	assert_true(fabs(find(p, "hasp_wal_fsync_duration_seconds_sum", "", "")->value - 0.09515) < 1e-9);
	/* The type lines say what each family is. */
	assert_string_equal(p->type[fam_index(p, "hasp_wal_fsync_duration_seconds")], "histogram");
	assert_string_equal(p->type[fam_index(p, "hasp_packets_dropped_total")], "counter");
	/* A referenced counter follows its source without any update call. */
	ext = 43;
	assert_true(metric_value(metrics_find(&m, "hasp_proposals_committed_total", "")) == 43);
	free(p);
	metrics_deinit(&m);
}

static void test_metrics_families_group_even_when_registered_apart(void **state)
{
	(void)state;
	struct metrics m;
	assert_int_equal(metrics_init(&m, 8), 0);
	struct metrics_label a[] = { { "lcore", "0" } }, b[] = { { "lcore", "1" } };
	assert_non_null(metrics_counter(&m, "hasp_x_total", "X.", a, 1));
	assert_non_null(metrics_gauge(&m, "hasp_y", "Y.", NULL, 0));
	assert_non_null(metrics_counter(&m, "hasp_x_total", "X.", b, 1));
	char buf[1024];
	assert_true(metrics_expose(&m, buf, sizeof(buf)) > 0);
	struct parsed *p = calloc(1, sizeof(*p));
	expo_parse(buf, p); /* fails if a sample is outside its family block */
	assert_int_equal(p->fam_count, 2);
	assert_int_equal(p->count, 3);
	free(p);
	metrics_deinit(&m);
}

static void test_metrics_label_values_are_escaped(void **state)
{
	(void)state;
	struct metrics m;
	assert_int_equal(metrics_init(&m, 4), 0);
	struct metrics_label l[] = { { "path", "a\"b\\c\nd" } };
	assert_non_null(metrics_gauge(&m, "hasp_odd", "Help with a \\ backslash\nand newline.", l, 1));
	char buf[512];
	assert_true(metrics_expose(&m, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "hasp_odd{path=\"a\\\"b\\\\c\\nd\"} 0\n"));
	assert_non_null(strstr(buf, "# HELP hasp_odd Help with a \\\\ backslash\\nand newline.\n"));
	struct parsed *p = calloc(1, sizeof(*p));
	expo_parse(buf, p);
	assert_string_equal(p->s[0].labels, "path=a\"b\\c\nd");
	free(p);
	metrics_deinit(&m);
}

static void test_metrics_registration_refuses_bad_names_duplicates_and_full(void **state)
{
	(void)state;
	struct metrics m;
	assert_int_equal(metrics_init(&m, 3), 0);
	struct metrics_label le[] = { { "le", "1" } }, bad[] = { { "1x", "v" } };
	uint64_t b2[] = { 2, 1 };
	assert_null(metrics_counter(&m, "1bad", "h", NULL, 0));
	assert_null(metrics_counter(&m, "has space", "h", NULL, 0));
	assert_null(metrics_counter(&m, "hasp_a", "h", le, 1));
	assert_null(metrics_counter(&m, "hasp_a", "h", bad, 1));
	assert_null(metrics_histogram(&m, "hasp_h", "h", NULL, 0, b2, 2, 1.0));
	assert_non_null(metrics_counter(&m, "hasp_a", "h", NULL, 0));
	assert_null(metrics_counter(&m, "hasp_a", "h", NULL, 0));  /* duplicate series */
	assert_null(metrics_gauge(&m, "hasp_a", "h", le, 0));       /* one family, two types */
	assert_non_null(metrics_gauge(&m, "hasp_b", "h", NULL, 0));
	assert_non_null(metrics_gauge(&m, "hasp_c", "h", NULL, 0));
	assert_null(metrics_gauge(&m, "hasp_d", "h", NULL, 0));     /* full */
	metrics_deinit(&m);
}

static void test_metrics_expose_reports_a_buffer_too_small(void **state)
{
	(void)state;
	struct metrics m;
	assert_int_equal(metrics_init(&m, 2), 0);
	assert_non_null(metrics_gauge(&m, "hasp_term", "Current Raft term.", NULL, 0));
	char buf[20];
	assert_int_equal(metrics_expose(&m, buf, sizeof(buf)), 0);
	metrics_deinit(&m);
}

static void test_metrics_json_lists_every_series(void **state)
{
	(void)state;
	struct metrics m;
	assert_int_equal(metrics_init(&m, 4), 0);
	struct metrics_label l[] = { { "reason", "malformed" } };
	metric_add(metrics_counter(&m, "hasp_drops_total", "Drops.", l, 1), 5);
	uint64_t bounds[] = { 1, 10 };
	struct metric *h = metrics_histogram(&m, "hasp_batch_size", "Commands per batch.", NULL, 0, bounds, 2, 1.0);
	metric_observe(h, 4);
	metric_observe(h, 40);
	char buf[2048];
	struct json_writer w;
	json_init(&w, buf, sizeof(buf));
	metrics_json(&m, &w);
	size_t n = json_finish(&w);
	assert_true(n > 0);
	struct json_token t[128];
	assert_true(json_parse(buf, n, t, 128) > 0);
	assert_int_equal(t[0].size, 2);
	double v;
	uint64_t u;
	char s[32];
	int c = json_at(t, 0, 0);
	assert_true(json_tok_double(buf, t, json_get(buf, t, c, "value"), &v) && v == 5);
	assert_true(json_tok_str(buf, t, json_get(buf, t, json_get(buf, t, c, "labels"), "reason"), s, sizeof(s)));
	assert_string_equal(s, "malformed");
	int hh = json_at(t, 0, 1);
	assert_true(json_tok_u64(buf, t, json_get(buf, t, hh, "count"), &u) && u == 2);
	assert_int_equal(t[json_get(buf, t, hh, "buckets")].size, 3);
	metrics_deinit(&m);
}

/* One writer, one scraper: a histogram's count never disagrees with its
 * +Inf bucket and counters never go backwards. */
struct race {
	struct metric *c, *h;
	volatile bool stop;
};

static void *writer(void *arg)
{
	struct race *r = arg;
	for (uint64_t i = 0; !r->stop; i++) {
		metric_inc(r->c);
		metric_observe(r->h, i % 20);
	}
	return NULL;
}

static void test_metrics_scrape_during_updates_stays_consistent(void **state)
{
	(void)state;
	struct metrics m;
	assert_int_equal(metrics_init(&m, 4), 0);
	uint64_t bounds[] = { 5, 10 };
	struct race r = {
		.c = metrics_counter(&m, "hasp_n_total", "N.", NULL, 0),
		.h = metrics_histogram(&m, "hasp_h", "H.", NULL, 0, bounds, 2, 1.0),
	};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, writer, &r), 0);
	static char buf[4096];
	struct parsed *p = calloc(1, sizeof(*p));
	double last = 0;
	for (int i = 0; i < 300; i++) {
		assert_true(metrics_expose(&m, buf, sizeof(buf)) > 0);
		expo_parse(buf, p);
		expo_check_histograms(p);
		double v = find(p, "hasp_n_total", "", "")->value;
		assert_true(v >= last);
		last = v;
	}
	r.stop = true;
	pthread_join(t, NULL);
	free(p);
	metrics_deinit(&m);
}


int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metrics_exposition_parses_back_with_the_values),
		cmocka_unit_test(test_metrics_families_group_even_when_registered_apart),
		cmocka_unit_test(test_metrics_label_values_are_escaped),
		cmocka_unit_test(test_metrics_registration_refuses_bad_names_duplicates_and_full),
		cmocka_unit_test(test_metrics_expose_reports_a_buffer_too_small),
		cmocka_unit_test(test_metrics_json_lists_every_series),
		cmocka_unit_test(test_metrics_scrape_during_updates_stays_consistent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
