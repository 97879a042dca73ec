/*
 * failover_client: one round of the client-side failover measurement
 * (perf/failover, docs/PERFORMANCE.md). Not a test: it reports times.
 *
 *   failover_client <cluster> <leader pid> [warmup cycles]
 *
 * Runs lock cycles (TRY acquire, release) until the client talks to the
 * leader, then kills the leader with SIGKILL and at once starts the next
 * cycle. Prints one line:
 *
 *   kill_ns=<CLOCK_MONOTONIC ns> answer_ms=<kill -> first successful
 *   reply> cycle_ms=<kill -> that cycle released> retransmits=<n>
 *   redirects=<n>
 *
 * CLOCK_MONOTONIC is the clock of haspd's log lines, so the driver can
 * compare kill_ns with the new leader's "leader node=" line. Exit 0 on a
 * measured round, 1 when no answer came within the deadline.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/clock.h"
#include "hasp/client.h"

#define NS_PER_MS 1000000ull

static int cycle(struct hasp_client *c, const char *name, uint64_t *answer_ns)
{
	struct hasp_acquire_opts o = { .ttl_ms = 5000 };
	struct hasp_lock l;
	int rc = hasp_client_acquire(c, name, &o, &l);

	if (rc != 0)
		return rc;
	if (answer_ns != NULL)
		*answer_ns = clock_monotonic_ns();
	rc = hasp_client_release(c, name, l.token);
	return rc;
}

int main(int argc, char **argv)
{
	struct hasp_client_config cfg;
	struct hasp_client_stats before, after;
	struct hasp_client *c;
	char name[64];

	if (argc < 3) {
		fprintf(stderr, "usage: failover_client <cluster> <leader pid> [warmup cycles]\n");
		return 2;
	}
	pid_t leader = (pid_t)strtol(argv[2], NULL, 10);
	int warmup = argc > 3 ? atoi(argv[3]) : 20;
	if (leader <= 1 || warmup < 1) {
		fprintf(stderr, "failover_client: bad leader pid or warmup\n");
		return 2;
	}
	hasp_client_config_default(&cfg);
	cfg.cluster = argv[1];
	cfg.deadline_ms = 30000;
	if (hasp_client_open(&c, &cfg) != 0) {
		fprintf(stderr, "failover_client: cannot open a client for %s\n", argv[1]);
		return 2;
	}
	snprintf(name, sizeof(name), "perf/failover/%d", (int)getpid());
	/* Warm up: the session is open and the client's target is the
	 * leader (each cycle's replies come from it). */
	for (int i = 0; i < warmup; i++) {
		int rc = cycle(c, name, NULL);
		if (rc != 0) {
			fprintf(stderr, "failover_client: warm-up cycle %d failed: %d\n", i, rc);
			hasp_client_close(c);
			return 1;
		}
	}
	hasp_client_stats_get(c, &before);
	uint64_t kill_ns = clock_monotonic_ns();
	if (kill(leader, SIGKILL) != 0) {
		fprintf(stderr, "failover_client: kill %d: %s\n", (int)leader, strerror(errno));
		hasp_client_close(c);
		return 2;
	}
	uint64_t answer_ns = 0;
	int rc = cycle(c, name, &answer_ns);
	uint64_t done_ns = clock_monotonic_ns();
	hasp_client_stats_get(c, &after);
	if (rc != 0 || answer_ns == 0) {
		printf("kill_ns=%" PRIu64 " failed rc=%d after_ms=%.1f\n", kill_ns, rc,
		       (double)(done_ns - kill_ns) / 1e6);
		hasp_client_close(c);
		return 1;
	}
	printf("kill_ns=%" PRIu64 " answer_ms=%.1f cycle_ms=%.1f retransmits=%" PRIu64
	       " redirects=%" PRIu64 "\n",
	       kill_ns, (double)(answer_ns - kill_ns) / 1e6, (double)(done_ns - kill_ns) / 1e6,
	       after.tx_retransmits - before.tx_retransmits, after.redirects - before.redirects);
	hasp_client_close(c);
	return 0;
}
