/*
 * The peer drivers' harness (perf/peers/peer_driver.h): argument parsing,
 * threads, bounds, histograms (tools/bench_hist.h) and the JSON report.
 */
#include "perf/peers/peer_driver.h"

#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "tools/bench_hist.h"
#include "tools/bench_report.h"

#define THREADS_MAX 1024u
#define WOKE_LATE_NS 1000000ull

struct worker {
	const struct peer_args *args;
	const struct peer_ops *ops;
	uint32_t index;
	struct bench_hist *acquire, *release, *cycle;
	uint64_t cycles, busy, errors, reconnects;
	/* Open loop, measured: arrivals; those that waited for a thread
	 * (`behind`: --arrivals thread, its own thread was still in its
	 * previous cycle; shared, every thread was busy); and those whose
	 * thread woke from its sleep more than WOKE_LATE_NS after the arrival
	 * (the client machine's delay). The latency, counted from the
	 * arrival, includes both waits. */
	uint64_t arrivals, behind, woke_late;
	uint64_t last_done_ns;
	pthread_t thread;
};

static uint64_t started_count; /* atomic: cycles started by all threads */

/* Open loop: an exponential gap with mean `mean_s` seconds. */
static uint64_t next_gap_ns(double mean_s, uint64_t *rng)
{
	*rng ^= *rng << 13; /* xorshift64 */
	*rng ^= *rng >> 7;
	*rng ^= *rng << 17;
	double u = ((double)(*rng >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
	return (uint64_t)(-log(u) * 1e9 * mean_s);
}

/* --arrivals shared: the one stream, taken in order by whichever thread is
 * free (struct peer_args). */
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t shared_arrival_ns, shared_rng = 0x9e3779b97f4a7c15ull;

/* This thread's next arrival: of its own stream, or the oldest of the
 * shared one not taken yet. */
static uint64_t next_arrival_ns(const struct peer_args *a, uint64_t own_ns, uint64_t *rng)
{
	if (a->per_thread_arrivals)
		return own_ns + next_gap_ns((double)a->clients / a->rate, rng);
	pthread_mutex_lock(&shared_mu);
	shared_arrival_ns += next_gap_ns(1.0 / a->rate, &shared_rng);
	uint64_t t = shared_arrival_ns;
	pthread_mutex_unlock(&shared_mu);
	return t;
}
static uint64_t measure_start_ns, run_end_ns;

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct peer_args *a = w->args;
	uint32_t n = a->clients;
	uint32_t owned = a->keys / n ? a->keys / n : 1u;
	char **keys = calloc(owned, sizeof(*keys));

	for (uint32_t j = 0; j < owned; j++) {
		keys[j] = malloc(160);
		snprintf(keys[j], 160, "%s/k%u", a->prefix, (w->index + n * j) % a->keys);
	}
	void *conn = w->ops->connect(a, w->index, keys, owned);
	uint64_t j = 0;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (w->index + 1u);
	uint64_t arrival = clock_monotonic_ns();
	while (conn != NULL) {
		uint64_t now = clock_monotonic_ns();
		if (a->rate > 0) {
			/* Latency runs from the intended arrival, so a server
			 * stall shows as queueing (no coordinated omission). */
			arrival = next_arrival_ns(a, arrival, &rng);
			if (arrival >= run_end_ns)
				break;
			bool slept = arrival > now;
			if (slept)
				clock_sleep_until_ns(arrival);
			if (arrival >= measure_start_ns) {
				w->arrivals++;
				w->behind += !slept;
				w->woke_late += slept && clock_monotonic_ns() - arrival > WOKE_LATE_NS;
			}
			now = arrival;
		}
		if (now >= run_end_ns ||
		    __atomic_fetch_add(&started_count, 1, __ATOMIC_RELAXED) >= a->count_max)
			break;
		const char *key = keys[j++ % owned];
		bool measured = now >= measure_start_ns;
		enum peer_outcome o = w->ops->acquire(conn, key, a->ttl_ms);
		uint64_t granted = clock_monotonic_ns();
		if (o == PEER_GRANTED) {
			enum peer_outcome r = w->ops->release(conn, key);
			uint64_t done = clock_monotonic_ns();
			if (measured) {
				bench_hist_record(w->acquire, granted - now);
				bench_hist_record(w->release, done - granted);
				bench_hist_record(w->cycle, done - now);
				if (r == PEER_GRANTED) {
					w->cycles++;
					w->last_done_ns = done;
				} else {
					w->errors++;
				}
			}
		} else if (measured) {
			if (o == PEER_BUSY)
				w->busy++;
			else
				w->errors++;
		}
		if (o == PEER_ERROR) {
			/* Reconnect after a failed call, with a pause so a dead
			 * server does not spin us. */
			w->ops->close(conn);
			w->reconnects++;
			struct timespec ts = { 0, 50000000 };
			nanosleep(&ts, NULL);
			conn = clock_monotonic_ns() < run_end_ns
				       ? w->ops->connect(a, w->index, keys, owned)
				       : NULL;
		}
	}
	if (conn != NULL)
		w->ops->close(conn);
	else if (w->cycles == 0)
		w->errors++;
	for (uint32_t k = 0; k < owned; k++)
		free(keys[k]);
	free(keys);
	return NULL;
}

static void usage(const char *system)
{
	fprintf(stderr,
		"usage: peer-%s --endpoints LIST [--clients N] [--keys K] [--ttl MS]\n"
		"       [--count N] [--duration S] [--warmup S] [--durability LABEL]\n"
		"       [--prefix P] [--rate CYCLES_PER_S] [--arrivals thread|shared]\n"
		"       [--out FILE]\n",
		system);
}

int peer_main(int argc, char **argv, const struct peer_ops *ops)
{
	static const struct option options[] = {
		{ "endpoints", required_argument, NULL, 'e' },
		{ "clients", required_argument, NULL, 'n' },
		{ "keys", required_argument, NULL, 'k' },
		{ "ttl", required_argument, NULL, 't' },
		{ "count", required_argument, NULL, 'c' },
		{ "duration", required_argument, NULL, 'd' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "durability", required_argument, NULL, 'D' },
		{ "prefix", required_argument, NULL, 'p' },
		{ "out", required_argument, NULL, 'o' },
		{ "rate", required_argument, NULL, 'r' },
		{ "arrivals", required_argument, NULL, 'a' },
		{ NULL, 0, NULL, 0 },
	};
	struct peer_args a = { .clients = 16, .keys = 1024, .ttl_ms = 5000, .count_max = 1000000,
			       .duration_ms = 10000, .durability = "default", .prefix = "hp",
			       .per_thread_arrivals = true };
	int opt;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'e': a.endpoints = optarg; break;
		case 'n': a.clients = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'k': a.keys = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 't': a.ttl_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'c': a.count_max = strtoull(optarg, NULL, 10); break;
		case 'd': a.duration_ms = (uint32_t)(atof(optarg) * 1000.0); break;
		case 'w': a.warmup_ms = (uint32_t)(atof(optarg) * 1000.0); break;
		case 'D': a.durability = optarg; break;
		case 'p': a.prefix = optarg; break;
		case 'o': a.out_path = optarg; break;
		case 'r': a.rate = atof(optarg); break;
		case 'a':
			if (strcmp(optarg, "thread") != 0 && strcmp(optarg, "shared") != 0) {
				usage(ops->system);
				return 2;
			}
			a.per_thread_arrivals = strcmp(optarg, "thread") == 0;
			break;
		default: usage(ops->system); return 2;
		}
	}
	/* Every run is bounded in count and time. */
	if (a.endpoints == NULL || a.clients < 1 || a.clients > THREADS_MAX || a.keys < 1 ||
	    a.count_max < 1 || a.duration_ms < 1 || a.duration_ms > 3600000u || !(a.rate >= 0) ||
	    a.rate > 1e7) {
		usage(ops->system);
		return 2;
	}
	struct worker *w = calloc(a.clients, sizeof(*w));
	uint64_t start = clock_monotonic_ns();
	shared_arrival_ns = start;
	measure_start_ns = start + (uint64_t)a.warmup_ms * 1000000u;
	run_end_ns = measure_start_ns + (uint64_t)a.duration_ms * 1000000u;
	for (uint32_t i = 0; i < a.clients; i++) {
		w[i] = (struct worker){ .args = &a, .ops = ops, .index = i };
		w[i].acquire = malloc(sizeof(struct bench_hist));
		w[i].release = malloc(sizeof(struct bench_hist));
		w[i].cycle = malloc(sizeof(struct bench_hist));
		bench_hist_reset(w[i].acquire);
		bench_hist_reset(w[i].release);
		bench_hist_reset(w[i].cycle);
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0) {
			fprintf(stderr, "peer-%s: pthread_create failed\n", ops->system);
			return 1;
		}
	}
	uint64_t cycles = 0, busy = 0, errors = 0, reconnects = 0, last = 0;
	uint64_t arrivals = 0, behind = 0, woke_late = 0;
	for (uint32_t i = 0; i < a.clients; i++) {
		pthread_join(w[i].thread, NULL);
		if (i > 0) {
			bench_hist_merge(w[0].acquire, w[i].acquire);
			bench_hist_merge(w[0].release, w[i].release);
			bench_hist_merge(w[0].cycle, w[i].cycle);
		}
		cycles += w[i].cycles;
		busy += w[i].busy;
		errors += w[i].errors;
		reconnects += w[i].reconnects;
		arrivals += w[i].arrivals;
		behind += w[i].behind;
		woke_late += w[i].woke_late;
		if (w[i].last_done_ns > last)
			last = w[i].last_done_ns;
	}
	uint64_t end = last > measure_start_ns ? last : run_end_ns;
	double elapsed_s = (double)(end - measure_start_ns) / 1e9;
	struct bench_machine m;
	bench_machine_get(&m);

	FILE *outs[2] = { stdout, a.out_path ? fopen(a.out_path, "w") : NULL };
	for (int k = 0; k < 2; k++) {
		FILE *out = outs[k];
		if (out == NULL)
			continue;
		fprintf(out, "{\"tool\":\"peer-%s\",\"format\":1,\"system\":\"%s\",\"durability\":",
			ops->system, ops->system);
		bench_json_string(out, a.durability);
		fprintf(out, ",\"machine\":{\"nproc\":%ld,\"kernel\":", m.nproc);
		bench_json_string(out, m.kernel);
		fprintf(out, ",\"cpu\":");
		bench_json_string(out, m.cpu);
		fprintf(out, "},\"config\":{\"workload\":\"cycle\",\"clients\":%u,\"keys\":%u,"
			     "\"contended\":false,\"mode\":\"try\",\"loop\":\"%s\",\"rate\":%.1f,"
			     "\"arrivals\":\"%s\","
			     "\"count_max\":%llu,\"duration_ms\":%u,\"warmup_ms\":%u,\"lock_ttl_ms\":%u,"
			     "\"endpoints\":",
			a.clients, a.keys, a.rate > 0 ? "open" : "closed", a.rate,
			a.per_thread_arrivals ? "thread" : "shared",
			(unsigned long long)a.count_max, a.duration_ms, a.warmup_ms,
			a.ttl_ms);
		bench_json_string(out, a.endpoints);
		fprintf(out, "},\"results\":{\"ops\":%llu,\"ops_per_s\":%.1f,\"cycles\":%llu,"
			     "\"cycles_per_s\":%.1f,\"busy\":%llu,\"elapsed_s\":%.6f,\"latency_us\":{"
			     "\"op\":",
			(unsigned long long)cycles, elapsed_s > 0 ? (double)cycles / elapsed_s : 0.0,
			(unsigned long long)cycles,
			elapsed_s > 0 ? (double)cycles / elapsed_s : 0.0, (unsigned long long)busy,
			elapsed_s);
		bench_json_hist(out, w[0].cycle);
		fprintf(out, ",\"acquire\":");
		bench_json_hist(out, w[0].acquire);
		fprintf(out, ",\"release\":");
		bench_json_hist(out, w[0].release);
		fprintf(out, "},\"errors\":{\"failed_ops\":%llu,\"reconnects\":%llu},"
			     "\"driver\":{\"arrivals\":%llu,\"behind\":%llu,\"woke_late_1ms\":%llu}}}\n",
			(unsigned long long)errors, (unsigned long long)reconnects,
			(unsigned long long)arrivals, (unsigned long long)behind,
			(unsigned long long)woke_late);
		if (k == 1)
			fclose(out);
	}
	for (uint32_t i = 0; i < a.clients; i++) {
		free(w[i].acquire);
		free(w[i].release);
		free(w[i].cycle);
	}
	free(w);
	return cycles > 0 ? 0 : 1;
}
