/*
 * bench_json: the cost of reading one admin reply the way haspctl does
 * (parse, then look up a few members) with control/json.c's tokenizer
 * against jansson and json-c, the Debian-packaged alternatives weighed in
 * docs/DEPENDENCIES.md. Two replies: `status` (a flat object of 20
 * members, about 450 bytes) and a `locks list` page (100 locks, about
 * 7 KB). Reports the median ns per read over several rounds and, for
 * jansson (whose allocator can be replaced), allocations per read. Not a
 * test (docs/STYLE.md §9: timing stays out of pass/fail).
 *
 *   ninja -C build perf/bench_json && ./build/perf/bench_json [reads]
 *
 * The jansson and json-c readers are in bench_json_jansson.c and
 * bench_json_jsonc.c.
 *
 * Built only when both libjansson-dev and libjson-c-dev are installed
 * (neither is a dependency of hasp).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "control/json.h"

#define ROUNDS 7
#define TOKENS_MAX 65536u

/* In their own files: jansson, json-c and control/json.h all name things
 * json_object_get, json_string, enum json_type (none has a prefix of its
 * own), so no two of them compile in one translation unit. */
uint64_t bench_json_read_jansson(const char *text, size_t len, bool list);
void bench_json_jansson_count_allocs(uint64_t *counter);
uint64_t bench_json_read_jsonc(const char *text, size_t len, bool list);

static uint64_t jansson_allocs;

static size_t make_status(char *buf, size_t size)
{
	struct json_writer w;
	json_init(&w, buf, size);
	json_object_begin(&w);
	json_kv_bool(&w, "ok", true);
	json_kv_str(&w, "command", "status");
	json_key(&w, "result");
	json_object_begin(&w);
	json_kv_u64(&w, "node_id", 2);
	json_kv_str(&w, "role", "leader");
	json_kv_u64(&w, "term", 7);
	json_kv_u64(&w, "leader_id", 2);
	json_kv_u64(&w, "commit_index", 1234567);
	json_kv_u64(&w, "applied_index", 1234567);
	json_kv_u64(&w, "last_index", 1234570);
	json_kv_u64(&w, "snapshot_index", 1200000);
	json_kv_u64(&w, "locks", 4096);
	json_kv_u64(&w, "sessions", 512);
	json_kv_u64(&w, "leases", 300);
	json_kv_u64(&w, "watches", 17);
	json_kv_u64(&w, "uptime_s", 86400);
	json_kv_bool(&w, "storage_ok", true);
	json_kv_str(&w, "data_dir", "/var/lib/hasp/n2");
	json_kv_u64(&w, "wal_segments", 3);
	json_kv_u64(&w, "revision", 99887766);
	json_kv_str(&w, "version", "0.1.0");
	json_kv_u64(&w, "members", 3);
	json_kv_bool(&w, "healthy", true);
	json_object_end(&w);
	json_object_end(&w);
	if (w.overflow)
		abort();
	return w.len;
}

static size_t make_locks(char *buf, size_t size)
{
	struct json_writer w;
	char name[64];
	json_init(&w, buf, size);
	json_object_begin(&w);
	json_kv_bool(&w, "ok", true);
	json_kv_str(&w, "command", "locks.list");
	json_key(&w, "result");
	json_object_begin(&w);
	json_kv_u64(&w, "applied_index", 1234567);
	json_key(&w, "locks");
	json_array_begin(&w);
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "service/db/shard-%03d", i);
		json_object_begin(&w);
		json_kv_str(&w, "name", name);
		json_kv_u64(&w, "holder", 1000 + (uint64_t)i);
		json_kv_u64(&w, "token", 5000000 + (uint64_t)i);
		json_kv_u64(&w, "waiters", (uint64_t)(i % 3));
		json_object_end(&w);
	}
	json_array_end(&w);
	json_kv_bool(&w, "truncated", false);
	json_object_end(&w);
	json_object_end(&w);
	if (w.overflow)
		abort();
	return w.len;
}

/* Each reader returns a value derived from what it read, so nothing is
 * optimized away and all three can be checked against each other. */
static uint64_t read_hasp(const char *text, size_t len, struct json_token *toks, bool list)
{
	uint64_t v = 0, x;
	if (json_parse(text, len, toks, TOKENS_MAX) <= 0)
		abort();
	int result = json_get(text, toks, 0, "result");
	if (!list) {
		if (!json_tok_u64(text, toks, json_get(text, toks, result, "term"), &x))
			abort();
		return x;
	}
	int arr = json_get(text, toks, result, "locks");
	for (uint32_t i = 0; i < (uint32_t)toks[arr].size; i++) {
		if (!json_tok_u64(text, toks, json_get(text, toks, json_at(toks, arr, i), "token"), &x))
			abort();
		v += x;
	}
	return v;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

enum reader { HASP, JANSSON, JSONC };

static uint64_t median_ns(enum reader r, const char *text, size_t len, bool list, int reads,
			  struct json_token *toks, uint64_t *check)
{
	uint64_t per[ROUNDS];
	for (int k = 0; k < ROUNDS; k++) {
		uint64_t sum = 0;
		uint64_t t = clock_monotonic_ns();
		for (int i = 0; i < reads; i++)
			sum += r == HASP      ? read_hasp(text, len, toks, list)
			       : r == JANSSON ? bench_json_read_jansson(text, len, list)
					      : bench_json_read_jsonc(text, len, list);
		per[k] = (clock_monotonic_ns() - t) / (uint64_t)reads;
		*check = sum / (uint64_t)reads;
	}
	qsort(per, ROUNDS, sizeof(per[0]), cmp);
	return per[ROUNDS / 2];
}

int main(int argc, char **argv)
{
	int reads = argc > 1 ? atoi(argv[1]) : 20000;
	static char status[4096], locks[65536];
	struct json_token *toks = calloc(TOKENS_MAX, sizeof(*toks));
	size_t status_len = make_status(status, sizeof(status));
	size_t locks_len = make_locks(locks, sizeof(locks));
	if (reads <= 0 || toks == NULL)
		return 2;
	bench_json_jansson_count_allocs(&jansson_allocs);

	printf("reply        bytes  hasp_ns  jansson_ns  json-c_ns  jansson_allocs/read\n");
	for (int l = 0; l < 2; l++) {
		bool list = l == 1;
		const char *text = list ? locks : status;
		size_t len = list ? locks_len : status_len;
		int n = list ? reads / 20 + 1 : reads;
		uint64_t c1, c2, c3;
		uint64_t h = median_ns(HASP, text, len, list, n, toks, &c1);
		jansson_allocs = 0;
		uint64_t j = median_ns(JANSSON, text, len, list, n, toks, &c2);
		uint64_t allocs = jansson_allocs / ((uint64_t)n * ROUNDS);
		uint64_t c = median_ns(JSONC, text, len, list, n, toks, &c3);
		if (c1 != c2 || c1 != c3) {
			fprintf(stderr, "bench_json: the readers disagree\n");
			return 1;
		}
		printf("%-11s %6zu %8" PRIu64 " %11" PRIu64 " %10" PRIu64 " %20" PRIu64 "\n",
		       list ? "locks.list" : "status", len, h, j, c, allocs);
	}
	free(toks);
	return 0;
}
