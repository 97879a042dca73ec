/*
 * bench_async: the cycle workload of hasp-bench (TRY acquire of the
 * session's own lock, then release) on libhasp's asynchronous core: N
 * clients, each its own session, driven by ONE thread through
 * hasp_client_fd / hasp_client_timeout_ms / hasp_client_process and one
 * epoll set. A measurement, not a test (docs/PERFORMANCE.md, "libhasp's
 * async core"):
 *
 *   HASP_CLUSTER=... HASP_ID=... HASP_KEY_FILE=... bench_async CLIENTS SECONDS
 *
 * Prints two lines: clients, cycles, cycles/s, p50 and p99 cycle latency
 * in microseconds, errors and the last error's name; then the clients'
 * summed counters. Each cycle is two requests (hasp-bench counts it as one
 * op).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/clock.h"
#include "hasp/client.h"

#define CLIENTS_MAX 4096
#define SAMPLES_MAX (1u << 20)

struct session {
	struct hasp_client *c;
	char name[64];
	uint64_t t0;
	bool idle; /* between cycles (the measured time ended) */
};

static uint64_t samples[SAMPLES_MAX];
static uint32_t sample_count;
static uint64_t cycles, errors, end_ns;
static int last_error;

static void on_acquired(struct hasp_client *c, const struct hasp_result *res, void *arg);

static void cycle_start(struct session *s)
{
	struct hasp_acquire_opts opts = { .ttl_ms = 5000 };

	if (clock_monotonic_ns() >= end_ns) {
		s->idle = true;
		return;
	}
	s->t0 = clock_monotonic_ns();
	if (hasp_client_acquire_async(s->c, s->name, &opts, on_acquired, s, NULL) != 0) {
		errors++;
		s->idle = true;
	}
}

static void on_released(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct session *s = arg;

	(void)c;
	if (res->rc != 0) {
		errors++;
		last_error = res->rc;
	}
	cycles++;
	if (sample_count < SAMPLES_MAX)
		samples[sample_count++] = clock_monotonic_ns() - s->t0;
	cycle_start(s);
}

static void on_acquired(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct session *s = arg;

	if (res->rc != 0 || hasp_client_release_async(c, s->name, res->lock.token, on_released, s,
						      NULL) != 0) {
		errors++;
		last_error = res->rc;
		cycle_start(s);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static struct session sessions[CLIENTS_MAX];
	const char *cluster = getenv("HASP_CLUSTER");
	int n = argc == 3 ? atoi(argv[1]) : 0;
	int seconds = argc == 3 ? atoi(argv[2]) : 0;

	if (cluster == NULL || n <= 0 || n > (int)CLIENTS_MAX || seconds <= 0) {
		fprintf(stderr, "usage: HASP_CLUSTER=ip:port,... bench_async CLIENTS SECONDS\n");
		return 2;
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return 1;
	for (int i = 0; i < n; i++) {
		struct hasp_client_config cfg;
		hasp_client_config_default(&cfg);
		cfg.cluster = cluster;
		struct session *s = &sessions[i];
		int rc = hasp_client_open(&s->c, &cfg);
		if (rc == 0)
			rc = hasp_client_connect(s->c);
		if (rc != 0) {
			fprintf(stderr, "bench_async: client %d: %s\n", i, hasp_strerror(rc));
			return 3;
		}
		snprintf(s->name, sizeof(s->name), "ba%d/%d", (int)getpid(), i);
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };
		int fd = hasp_client_fd(s->c);
		if (fd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
			return 1;
	}
	uint64_t start_ns = clock_monotonic_ns();
	end_ns = start_ns + (uint64_t)seconds * 1000000000ull;
	for (int i = 0; i < n; i++)
		cycle_start(&sessions[i]);
	/* One thread: wait for any client's fd and process the ready ones;
	 * every 10 ms process all (their timers: retransmissions, keepalives,
	 * at 200 ms and more, need no finer look). */
	uint64_t sweep_ns = 0;
	for (;;) {
		uint64_t now = clock_monotonic_ns();
		if (now >= end_ns) {
			int busy = 0;
			for (int i = 0; i < n; i++)
				busy += !sessions[i].idle;
			if (busy == 0 || now >= end_ns + 5000000000ull)
				break; /* done, or a stuck request */
		}
		struct epoll_event evs[256];
		int got = epoll_wait(ep, evs, 256, 10);
		for (int i = 0; i < got; i++) {
			struct session *s = evs[i].data.ptr;
			(void)!hasp_client_process(s->c, NULL);
		}
		if (clock_monotonic_ns() >= sweep_ns) {
			for (int i = 0; i < n; i++)
				(void)!hasp_client_process(sessions[i].c, NULL);
			sweep_ns = clock_monotonic_ns() + 10000000ull;
		}
	}
	double elapsed = (double)(clock_monotonic_ns() - start_ns) / 1e9;
	qsort(samples, sample_count, sizeof(samples[0]), cmp_u64);
	uint64_t p50 = sample_count ? samples[sample_count / 2] : 0;
	uint64_t p99 = sample_count ? samples[sample_count * 99 / 100] : 0;
	printf("clients=%d cycles=%" PRIu64 " cycles_per_s=%.0f ops_per_s=%.0f p50_us=%.0f p99_us=%.0f "
	       "errors=%" PRIu64 " last_error=%s\n",
	       n, cycles, (double)cycles / elapsed, 2.0 * (double)cycles / elapsed, (double)p50 / 1e3,
	       (double)p99 / 1e3, errors, hasp_strerror_name(last_error));
	struct hasp_client_stats sum = { 0 };
	for (int i = 0; i < n; i++) {
		struct hasp_client_stats st;
		hasp_client_stats_get(sessions[i].c, &st);
		sum.tx_requests += st.tx_requests;
		sum.tx_retransmits += st.tx_retransmits;
		sum.redirects += st.redirects;
		sum.timeouts += st.timeouts;
		sum.rx_duplicates += st.rx_duplicates;
		hasp_client_close(sessions[i].c);
	}
	printf("requests=%" PRIu64 " retransmits=%" PRIu64 " redirects=%" PRIu64 " timeouts=%" PRIu64
	       " duplicates=%" PRIu64 "\n",
	       sum.tx_requests, sum.tx_retransmits, sum.redirects, sum.timeouts, sum.rx_duplicates);
	close(ep);
	return errors == 0 ? 0 : 1;
}
