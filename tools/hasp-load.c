/*
 * hasp-load: a small closed-loop load through libhasp, for the main job
 * (scripts/run-local). A proper load generator is hasp-bench (later issue).
 *
 *   hasp-load --cluster host:port,... [--threads 4] [--seconds 3] [--locks 64]
 *
 * Each thread owns a client (its own session) and loops: acquire a lock
 * (TRY, own TTL) from its own slice of names, release it with the token.
 * Prints one line: operations (acquire + release) per second and latency
 * percentiles of single operations, measured with CLOCK_MONOTONIC around
 * each call. Exit 0, or 1 when an operation failed (anything but GRANTED
 * then OK) or nothing completed, 2 on bad usage (nothing is sent then;
 * --help anywhere on the line prints the usage and sends nothing).
 *
 * On a terminal a run also prints a progress line every second (ops/s of
 * that second, p99 so far, errors so far); not when stdout is a pipe or a
 * file, so scripts see the one summary line only.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/resolve.h"
#include "common/version.h"
#include "hasp/client.h"

#define SAMPLES_MAX (1u << 20)

/* Live progress: a log-scale latency histogram (4 buckets per power of two
 * of nanoseconds) that the threads add to and the main thread reads. */
#define PROGRESS_BUCKETS 256u

static _Atomic uint64_t progress_ops, progress_failures;
static _Atomic uint64_t progress_hist[PROGRESS_BUCKETS];

static unsigned progress_bucket(uint64_t ns)
{
	if (ns < 4)
		return (unsigned)ns;
	unsigned log2 = 63u - (unsigned)__builtin_clzll(ns);
	unsigned b = log2 * 4u + (unsigned)((ns >> (log2 - 2)) & 3u);
	return b < PROGRESS_BUCKETS ? b : PROGRESS_BUCKETS - 1;
}

/* The upper bound in ns of bucket b. */
static uint64_t progress_bucket_top(unsigned b)
{
	if (b < 4)
		return b;
	unsigned log2 = b / 4u;
	return (1ull << log2) + ((uint64_t)(b % 4u + 1) << (log2 - 2));
}

static void progress_add(uint64_t ns, bool ok)
{
	atomic_fetch_add_explicit(&progress_hist[progress_bucket(ns)], 1, memory_order_relaxed);
	if (ok)
		atomic_fetch_add_explicit(&progress_ops, 1, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&progress_failures, 1, memory_order_relaxed);
}

static uint64_t progress_p99_ns(void)
{
	uint64_t total = 0, seen = 0;
	for (unsigned b = 0; b < PROGRESS_BUCKETS; b++)
		total += atomic_load_explicit(&progress_hist[b], memory_order_relaxed);
	for (unsigned b = 0; b < PROGRESS_BUCKETS && total > 0; b++) {
		seen += atomic_load_explicit(&progress_hist[b], memory_order_relaxed);
		if (seen * 100 >= total * 99)
			return progress_bucket_top(b);
	}
	return 0;
}

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
			progress_add(t1 - t0, false);
			continue;
		}
		progress_add(t1 - t0, true);
		rc = hasp_client_release(c, name, lock.token);
		uint64_t t2 = clock_monotonic_ns();
		progress_add(t2 - t1, rc == 0);
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

static const char usage_text[] =
	"usage: hasp-load [--cluster host:port,...] [--threads N] [--seconds S] [--locks N]\n"
	"  --cluster   the cluster (default $HASP_CLUSTER)\n"
	"  --threads   clients, each its own session and thread (1..64, default 4)\n"
	"  --seconds   how long (1..86400, default 3)\n"
	"  --locks     lock names per thread (1..1000000, default 64)\n"
	"Closed loop of acquire (TRY) and release; prints ops/s and latency percentiles.\n"
	"On a terminal, a progress line every second. Exit 0, 1 on failures, 2 usage.\n";

static bool parse_count(const char *s, unsigned min, unsigned max, unsigned *out)
{
	char *end;
	if (s == NULL || *s < '0' || *s > '9')
		return false;
	unsigned long v = strtoul(s, &end, 10);
	if (*end != '\0' || v < min || v > max)
		return false;
	*out = (unsigned)v;
	return true;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	const char *cluster = getenv("HASP_CLUSTER");
	unsigned threads = 4, seconds = 3, locks = 64;

	if (version_requested(argc, argv, "hasp-load"))
		return 0;
	/* --help anywhere, even where a value is expected: help, no traffic. */
	if (help_requested(argc, argv)) {
		fputs(usage_text, stdout);
		return 0;
	}
	for (int i = 1; i < argc; i += 2) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool ok = v != NULL;
		if (ok && strcmp(o, "--cluster") == 0)
			cluster = v;
		else if (ok && strcmp(o, "--threads") == 0)
			ok = parse_count(v, 1, 64, &threads);
		else if (ok && strcmp(o, "--seconds") == 0)
			ok = parse_count(v, 1, 86400, &seconds);
		else if (ok && strcmp(o, "--locks") == 0)
			ok = parse_count(v, 1, 1000000, &locks);
		else
			ok = false;
		if (!ok) {
			fprintf(stderr, "hasp-load: bad option or value: %.40s%s%.40s (hasp-load --help)\n", o,
				v != NULL ? " " : "", v != NULL ? v : "");
			return 2;
		}
	}
	if (cluster == NULL || cluster[0] == '\0') {
		fprintf(stderr, "hasp-load: no cluster: use --cluster or set HASP_CLUSTER\n");
		return 2;
	}
	/* Host names become IPv4 addresses once, before any traffic. */
	static char resolved[4096];
	char err[512];
	int rrc = resolve_cluster(cluster, resolved, sizeof(resolved), err, sizeof(err));
	if (rrc != RESOLVE_OK) {
		fprintf(stderr, "hasp-load: %s\n", err);
		return rrc == RESOLVE_UNAVAILABLE ? 1 : 2;
	}
	cluster = resolved;
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
	/* A line per second on a terminal: that second's rate, p99 and
	 * errors so far. */
	if (isatty(STDOUT_FILENO)) {
		uint64_t last_ops = 0, end_ns = start + (uint64_t)seconds * 1000000000ull;
		for (unsigned tick = 1; clock_monotonic_ns() + 1000000000ull <= end_ns; tick++) {
			sleep_ms(1000);
			uint64_t now_ops = atomic_load_explicit(&progress_ops, memory_order_relaxed);
			printf("hasp-load: %us ops/s=%" PRIu64 " p99_us<=%.0f errors=%" PRIu64 "\n", tick,
			       now_ops - last_ops, (double)progress_p99_ns() / 1000.0,
			       atomic_load_explicit(&progress_failures, memory_order_relaxed));
			fflush(stdout);
			last_ops = now_ops;
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
