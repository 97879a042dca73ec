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
#include "control/node_metrics.h"
#include "tests/test_util.h"

/* ---- the exposition parser ---- */

#define FAM_MAX 64
#define SAMPLES_MAX 512

struct sample {
	char family[64];
	char name[80];
	char labels[160]; /* canonical: k=v;k=v (unescaped) */
	char le[32];
	double value;
};

struct parsed {
	char fam[FAM_MAX][64];
	char type[FAM_MAX][16];
	char help[FAM_MAX][160];
	int fam_count;
	struct sample s[SAMPLES_MAX];
	int count;
};

static bool is_name(const char *s, size_t n, bool label)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool ok = isalpha((unsigned char)c) || c == '_' || (!label && c == ':') ||
			  (i > 0 && isdigit((unsigned char)c));
		if (!ok)
			return false;
	}
	return true;
}

static int fam_index(struct parsed *p, const char *name)
{
	for (int i = 0; i < p->fam_count; i++)
		if (strcmp(p->fam[i], name) == 0)
			return i;
	return -1;
}

/* The family a sample name belongs to (histograms add suffixes). */
static int sample_family(struct parsed *p, const char *name, char *suffix)
{
	int f = fam_index(p, name);
	suffix[0] = '\0';
	if (f >= 0)
		return f;
	static const char *const sfx[] = { "_bucket", "_sum", "_count" };
	for (int k = 0; k < 3; k++) {
		size_t n = strlen(name), m = strlen(sfx[k]);
		if (n > m && strcmp(name + n - m, sfx[k]) == 0) {
			char base[80];
			memcpy(base, name, n - m);
			base[n - m] = '\0';
			f = fam_index(p, base);
			if (f >= 0 && strcmp(p->type[f], "histogram") == 0) {
				strcpy(suffix, sfx[k]);
				return f;
			}
		}
	}
	return -1;
}

/* Parses the whole text; fails the test with the line on any violation. */
static void expo_parse(const char *text, struct parsed *p)
{
	memset(p, 0, sizeof(*p));
	const char *line = text;
	int current = -1; /* family whose samples may follow */
	assert_true(text[0] != '\0');
	assert_true(text[strlen(text) - 1] == '\n');
	while (*line != '\0') {
		const char *nl = strchr(line, '\n');
		assert_non_null(nl);
		char l[512];
		size_t n = (size_t)(nl - line);
		assert_true(n < sizeof(l));
		memcpy(l, line, n);
		l[n] = '\0';
		line = nl + 1;
		if (strncmp(l, "# HELP ", 7) == 0) {
			char *name = l + 7, *sp = strchr(name, ' ');
			assert_non_null(sp);
			*sp = '\0';
			assert_true(is_name(name, strlen(name), false));
			if (fam_index(p, name) >= 0)
				fail_msg("HELP repeated for %s", name);
			assert_true(p->fam_count < FAM_MAX);
			strcpy(p->fam[p->fam_count], name);
			snprintf(p->help[p->fam_count], sizeof(p->help[0]), "%s", sp + 1);
			p->fam_count++;
			current = -1;
			continue;
		}
		if (strncmp(l, "# TYPE ", 7) == 0) {
			char name[80], type[32];
			assert_int_equal(sscanf(l + 7, "%79s %31s", name, type), 2);
			int f = fam_index(p, name);
			if (f < 0 || p->type[f][0] != '\0')
				fail_msg("TYPE without HELP or repeated: %s", l);
			if (strcmp(type, "counter") && strcmp(type, "gauge") && strcmp(type, "histogram"))
				fail_msg("unknown type: %s", l);
			strcpy(p->type[f], type);
			current = f;
			continue;
		}
		assert_true(l[0] != '#');
		/* A sample: name[{labels}] value */
		struct sample *s = &p->s[p->count];
		assert_true(p->count < SAMPLES_MAX);
		size_t k = 0;
		while (l[k] != '\0' && l[k] != '{' && l[k] != ' ')
			k++;
		assert_true(is_name(l, k, false));
		memcpy(s->name, l, k);
		s->name[k] = '\0';
		char suffix[16];
		int f = sample_family(p, s->name, suffix);
		if (f < 0 || f != current)
			fail_msg("sample outside its family's block: %s", l);
		strcpy(s->family, p->fam[f]);
		size_t lo = 0;
		if (l[k] == '{') {
			k++;
			while (l[k] != '}') {
				size_t ks = k;
				while (l[k] != '=' && l[k] != '\0')
					k++;
				assert_true(is_name(l + ks, k - ks, true));
				char lname[40];
				memcpy(lname, l + ks, k - ks);
				lname[k - ks] = '\0';
				assert_true(l[k] == '=' && l[k + 1] == '"');
				k += 2;
				char val[96];
				size_t vn = 0;
				while (l[k] != '"') {
					assert_true(l[k] != '\0');
					if (l[k] == '\\') {
						k++;
						assert_true(l[k] == '\\' || l[k] == '"' || l[k] == 'n');
						val[vn++] = l[k] == 'n' ? '\n' : l[k];
					} else {
						val[vn++] = l[k];
					}
					k++;
				}
				val[vn] = '\0';
				k++;
				if (strcmp(lname, "le") == 0) {
					assert_string_equal(suffix, "_bucket");
					strcpy(s->le, val);
				} else {
					lo += (size_t)snprintf(s->labels + lo, sizeof(s->labels) - lo, "%s%s=%s",
							       lo ? ";" : "", lname, val);
				}
				if (l[k] == ',')
					k++;
				else
					assert_true(l[k] == '}');
			}
			k++;
		}
		if (strcmp(suffix, "_bucket") == 0)
			assert_true(s->le[0] != '\0');
		assert_true(l[k] == ' ');
		const char *v = l + k + 1;
		char *end;
		if (strcmp(v, "+Inf") == 0)
			s->value = INFINITY;
		else {
			s->value = strtod(v, &end);
			if (end == v || *end != '\0')
				fail_msg("bad value: %s", l);
		}
		p->count++;
	}
	for (int f = 0; f < p->fam_count; f++)
		if (p->type[f][0] == '\0')
			fail_msg("family without TYPE: %s", p->fam[f]);
}

/* Checks every histogram series: cumulative buckets, +Inf last, == _count. */
static void expo_check_histograms(const struct parsed *p)
{
	for (int i = 0; i < p->count; i++) {
		const struct sample *s = &p->s[i];
		size_t n = strlen(s->name);
		if (n < 7 || strcmp(s->name + n - 7, "_bucket") != 0 || strcmp(s->le, "+Inf") != 0)
			continue;
		/* Walk back over this series' buckets. */
		double prev = s->value, prev_le = INFINITY;
		int j = i - 1;
		for (; j >= 0 && strcmp(p->s[j].name, s->name) == 0 && strcmp(p->s[j].labels, s->labels) == 0;
		     j--) {
			double le = strtod(p->s[j].le, NULL);
			assert_true(p->s[j].value <= prev);
			assert_true(le < prev_le);
			prev = p->s[j].value;
			prev_le = le;
		}
		assert_true(i - j >= 2); /* at least one finite bucket */
		assert_string_equal(p->s[i + 1].name + strlen(p->s[i + 1].family), "_sum");
		assert_string_equal(p->s[i + 2].name + strlen(p->s[i + 2].family), "_count");
		assert_string_equal(p->s[i + 2].labels, s->labels);
		assert_true(p->s[i + 2].value == s->value);
	}
}

static const struct sample *find(const struct parsed *p, const char *name, const char *labels,
				 const char *le)
{
	for (int i = 0; i < p->count; i++)
		if (strcmp(p->s[i].name, name) == 0 && strcmp(p->s[i].labels, labels) == 0 &&
		    strcmp(p->s[i].le, le) == 0)
			return &p->s[i];
	return NULL;
}

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

static void test_node_metric_set_exposes_every_named_metric(void **state)
{
	(void)state;
	struct control c;
	struct control_config cfg = { 0 };
	struct control_node_metrics nm;
	assert_int_equal(control_init(&c, &cfg), 0);
	assert_int_equal(control_node_metrics_register(&nm, &c, 2), 0);
	struct control_node_state st = { .has_leader = true, .term = 3, .commit_index = 10,
					 .applied_index = 9, .locks_held = 4, .sessions = 2 };
	control_node_metrics_sync(&nm, &st, 1);
	control_node_metrics_sync(&nm, &st, 0);  /* leader lost: not a change */
	control_node_metrics_sync(&nm, &st, 2);  /* a new leader: one change */
	control_node_metrics_sync(&nm, &st, 2);
	control_node_metrics_fsync(&nm, 300000);
	control_node_metrics_batch(&nm, 17);
	control_node_metrics_dropped_set(&nm, 1, CONTROL_DROP_BAD_CHECKSUM, 5);
	metric_set(control_node_metrics_peer(&nm, 2), 125000);
	assert_ptr_equal(control_node_metrics_peer(&nm, 2), control_node_metrics_peer(&nm, 2));

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
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (fam_index(p, names[i]) < 0)
			fail_msg("missing metric %s", names[i]);
	assert_true(find(p, "hasp_leader_changes_total", "", "")->value == 1);
	assert_true(find(p, "hasp_term", "", "")->value == 3);
	assert_true(find(p, "hasp_locks_held", "", "")->value == 4);
	assert_true(find(p, "hasp_packets_dropped_total", "lcore=1;reason=bad_checksum", "")->value == 5);
	assert_true(find(p, "hasp_packets_dropped_total", "lcore=0;reason=malformed", "")->value == 0);
	assert_true(find(p, "hasp_wal_fsync_duration_seconds_bucket", "", "0.0005")->value == 1);
	assert_true(find(p, "hasp_wal_fsync_duration_seconds_bucket", "", "0.00025")->value == 0);
	assert_true(find(p, "hasp_batch_size_bucket", "", "32")->value == 1);
	assert_true(fabs(find(p, "hasp_peer_rtt_seconds", "peer=2", "")->value - 0.000125) < 1e-12);
	free(p);
	control_deinit(&c);
}

/* A peer series registered while a scraper runs appears whole or not at all. */
struct late {
	struct control_node_metrics *nm;
	volatile bool done;
};

static void *late_register(void *arg)
{
	struct late *l = arg;
	for (uint32_t id = 1; id <= CONTROL_MEMBERS_MAX; id++) {
		metric_set(control_node_metrics_peer(l->nm, id), id * 1000);
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
	assert_null(control_node_metrics_peer(l->nm, 99)); /* table full */
	l->done = true;
	return NULL;
}

static void test_node_metrics_peers_register_while_scraped(void **state)
{
	(void)state;
	struct control c;
	struct control_config cfg = { 0 };
	struct control_node_metrics nm;
	assert_int_equal(control_init(&c, &cfg), 0);
	assert_int_equal(control_node_metrics_register(&nm, &c, 1), 0);
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
		cmocka_unit_test(test_metrics_exposition_parses_back_with_the_values),
		cmocka_unit_test(test_metrics_families_group_even_when_registered_apart),
		cmocka_unit_test(test_metrics_label_values_are_escaped),
		cmocka_unit_test(test_metrics_registration_refuses_bad_names_duplicates_and_full),
		cmocka_unit_test(test_metrics_expose_reports_a_buffer_too_small),
		cmocka_unit_test(test_metrics_json_lists_every_series),
		cmocka_unit_test(test_metrics_scrape_during_updates_stays_consistent),
		cmocka_unit_test(test_node_metric_set_exposes_every_named_metric),
		cmocka_unit_test(test_node_metrics_peers_register_while_scraped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
