/*
 * hasp-load: a small closed-loop load through libhasp, for the main job
 * (scripts/run-local). A proper load generator is hasp-bench (later issue).
 *
 *   hasp-load --cluster ip:port,... [--threads 4] [--seconds 3] [--locks 64]
 *
 * Each thread owns a client (its own session) and loops: acquire a lock
 * (TRY, own TTL) from its own slice of names, release it with the token.
 * Prints one line: operations (acquire + release) per second and latency
 * percentiles of single operations, measured with CLOCK_MONOTONIC around
 * each call. Exit 0, or 1 when an operation failed (anything but GRANTED
 * then OK) or nothing completed.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "hasp/client.h"

#define SAMPLES_MAX (1u << 20)

struct load_thread {
	pthread_t tid;
	unsigned index;
	const char *cluster;
	unsigned locks;
	uint64_t end_ns;
	uint64_t ops;
	uint64_t failures;
	uint64_t *samples; /* ns per operation */
	uint64_t sample_count;
};

static void *load_run(void *arg)
{
	struct load_thread *t = arg;
	struct hasp_client_config cfg;
	struct hasp_client *c;

	hasp_client_config_default(&cfg);
	cfg.cluster = t->cluster;
	if (hasp_client_open(&c, &cfg) != 0) {
		t->failures++;
		return NULL;
	}
	for (uint64_t i = 0; clock_monotonic_ns() < t->end_ns; i++) {
		char name[64];
		struct hasp_lock lock;
		struct hasp_acquire_opts opts = { .ttl_ms = 5000 };
		snprintf(name, sizeof(name), "load/%u/%" PRIu64, t->index, i % t->locks);
		uint64_t t0 = clock_monotonic_ns();
		int rc = hasp_client_acquire(c, name, &opts, &lock);
		uint64_t t1 = clock_monotonic_ns();
		if (rc != 0) {
			t->failures++;
			continue;
		}
		rc = hasp_client_release(c, name, lock.token);
		uint64_t t2 = clock_monotonic_ns();
		if (rc != 0)
			t->failures++;
		t->ops += 2;
		if (t->sample_count + 2 <= SAMPLES_MAX) {
			t->samples[t->sample_count++] = t1 - t0;
			t->samples[t->sample_count++] = t2 - t1;
		}
	}
	hasp_client_close(c);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *cluster = getenv("HASP_CLUSTER");
	unsigned threads = 4, seconds = 3, locks = 64;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--cluster") == 0)
			cluster = argv[i + 1];
		else if (strcmp(argv[i], "--threads") == 0)
			threads = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--seconds") == 0)
			seconds = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--locks") == 0)
			locks = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else {
			fprintf(stderr, "usage: hasp-load --cluster ip:port,... [--threads n] [--seconds s] [--locks n]\n");
			return 2;
		}
	}
	if (cluster == NULL || threads == 0 || threads > 64 || seconds == 0 || locks == 0) {
		fprintf(stderr, "hasp-load: need --cluster (or HASP_CLUSTER), 1..64 threads, seconds, locks\n");
		return 2;
	}
	struct load_thread *t = hasp_calloc(threads, sizeof(*t));
	uint64_t start = clock_monotonic_ns();
	for (unsigned i = 0; i < threads; i++) {
		t[i] = (struct load_thread){ .index = i, .cluster = cluster, .locks = locks,
					     .end_ns = start + (uint64_t)seconds * 1000000000ull };
		t[i].samples = hasp_calloc(SAMPLES_MAX, sizeof(uint64_t));
		if (t[i].samples == NULL || pthread_create(&t[i].tid, NULL, load_run, &t[i]) != 0) {
			fprintf(stderr, "hasp-load: cannot start thread %u\n", i);
			return 1;
		}
	}
	uint64_t ops = 0, failures = 0, n = 0;
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(t[i].tid, NULL);
		ops += t[i].ops;
		failures += t[i].failures;
		n += t[i].sample_count;
	}
	double elapsed = (double)(clock_monotonic_ns() - start) / 1e9;
	uint64_t *all = hasp_calloc(n ? n : 1, sizeof(uint64_t));
	for (unsigned i = 0, k = 0; i < threads; i++) {
		memcpy(all + k, t[i].samples, t[i].sample_count * sizeof(uint64_t));
		k += (unsigned)t[i].sample_count;
		hasp_free(t[i].samples);
	}
	qsort(all, n, sizeof(uint64_t), cmp_u64);
#define PCT(p) (n ? (double)all[(uint64_t)((double)(n - 1) * (p))] / 1000.0 : 0.0)
	printf("hasp-load: threads=%u seconds=%.1f ops=%" PRIu64 " (acquire+release) throughput=%.0f ops/s "
	       "latency_us p50=%.0f p99=%.0f p99.9=%.0f max=%.0f failures=%" PRIu64 "\n",
	       threads, elapsed, ops, (double)ops / elapsed, PCT(0.50), PCT(0.99), PCT(0.999), PCT(1.0),
	       failures);
	hasp_free(all);
	hasp_free(t);
	return failures == 0 && ops > 0 ? 0 : 1;
}
