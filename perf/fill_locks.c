/*
 * fill_locks: fills a cluster's state with held locks and open sessions,
 * the large state of perf/snapshot_stall (docs/PERFORMANCE.md, "Snapshots
 * off the lcore"). A tool of a benchmark, not a test.
 *
 *   fill_locks --cluster LIST [--locks 100000] [--sessions 1000]
 *              [--ttl-ms 600000] [--session-ttl-ms 60000] [--prefix sf]
 *              [--window 256] [--deadline-s 300] [--hold-s 0]
 *
 * One libhasp client group on one thread, as a service with many sessions
 * would run it: --sessions clients; lock PREFIX/<i> is acquired (TRY, the
 * lock's own TTL, so every lock has its own lease in the state machine) by
 * session i % sessions, in the order of i, with at most --window acquires
 * in flight in the whole group. A session opens with its first acquire, so
 * the window also bounds the opens in flight: a burst of thousands of
 * opens at once overflows the node's receive ring and the group's socket,
 * and the retransmissions then outnumber the requests (docs/PERFORMANCE.md,
 * "A fill of 100,000 sessions"). libhasp's group window (1,024 by default)
 * bounds what the group sends as well; --window above it leaves the pace
 * to the library. Every lock must be granted: a BUSY (the
 * prefix is not fresh), an error or the deadline ends the run with exit 1.
 *
 * When every lock is held it prints one JSON line to stdout ({"locks",
 * "sessions", "seconds", "retransmits"}) and, with --hold-s, keeps the
 * sessions open (the group's loop sends their keepalives) until that many
 * seconds have passed or SIGTERM/SIGINT comes, then closes them. The
 * locks outlive the sessions until their TTL (docs/STATE_MACHINE.md: a
 * session does not own locks).
 *
 * Identity and key come from HASP_ID and HASP_KEY_FILE (scripts/cluster
 * exec sets both), as for every libhasp program.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hasp/client.h"

struct member;

struct fill {
	uint32_t locks, sessions, ttl_ms, window;
	const char *prefix;
	struct member *members;
	uint32_t next;     /* the next lock number to acquire */
	uint32_t inflight; /* acquires started and not completed */
	uint64_t granted, failed;
	int first_error;
};

struct member {
	struct fill *f;
	struct hasp_client *client;
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int start_more(struct fill *f);

static void note_failure(struct fill *f, int rc)
{
	if (f->failed++ == 0)
		f->first_error = rc;
}

static void on_acquired(struct hasp_client *client, const struct hasp_result *res, void *arg)
{
	struct member *m = arg;
	struct fill *f = m->f;
	(void)client;
	f->inflight--;
	if (res->rc != 0) {
		note_failure(f, res->rc);
		return;
	}
	f->granted++;
	int rc = start_more(f);
	if (rc != 0)
		note_failure(f, rc);
}

/* Starts the next acquires, in lock order, until the window is full or
 * every lock has been started. */
static int start_more(struct fill *f)
{
	const struct hasp_acquire_opts opts = { .ttl_ms = f->ttl_ms };
	char name[HASP_CLIENT_NAME_BUF];
	uint64_t id;

	while (f->inflight < f->window && f->next < f->locks) {
		struct member *m = &f->members[f->next % f->sessions];
		snprintf(name, sizeof(name), "%s/%u", f->prefix, f->next);
		int rc = hasp_client_acquire_async(m->client, name, &opts, on_acquired, m, &id);
		if (rc != 0)
			return rc;
		f->next++;
		f->inflight++;
	}
	return 0;
}

/* Drives the group once: waits up to timeout_ms for the socket (or the
 * group's own timer, if sooner) and processes what arrived. */
static int drive(struct hasp_client_group *g, int timeout_ms)
{
	int t = hasp_client_group_timeout_ms(g);
	if (t < 0 || t > timeout_ms)
		t = timeout_ms;
	struct pollfd p = { .fd = hasp_client_group_fd(g), .events = POLLIN };
	if (p.fd < 0)
		return -1;
	if (poll(&p, 1, t) < 0 && errno != EINTR)
		return -1;
	return hasp_client_group_process(g, NULL);
}

static int usage(void)
{
	fprintf(stderr, "usage: fill_locks --cluster LIST [--locks N] [--sessions S] [--ttl-ms T]\n"
			"                  [--session-ttl-ms T] [--prefix P] [--window W]\n"
			"                  [--deadline-s D] [--hold-s H]\n");
	return 2;
}

static int parse_u32(const char *text, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = text != NULL ? strtoul(text, &end, 10) : 0;
	if (text == NULL || *text == '\0' || *end != '\0' || errno != 0 || v < min || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	struct fill f = { .locks = 100000, .sessions = 1000, .ttl_ms = 600000,
			  .window = 256, .prefix = "sf" };
	const char *cluster = getenv("HASP_CLUSTER");
	uint32_t deadline_s = 300, hold_s = 0, session_ttl_ms = 60000;

	/* Every option takes a value: they come in pairs. */
	for (int i = 1; i < argc; i += 2) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;
		if (strcmp(o, "--cluster") == 0 && v != NULL)
			cluster = v;
		else if (strcmp(o, "--prefix") == 0 && v != NULL)
			f.prefix = v;
		else if (strcmp(o, "--locks") == 0)
			bad = parse_u32(v, 1, 1u << 26, &f.locks);
		else if (strcmp(o, "--sessions") == 0)
			bad = parse_u32(v, 1, 65535, &f.sessions);
		else if (strcmp(o, "--ttl-ms") == 0)
			bad = parse_u32(v, 10, 86400000, &f.ttl_ms);
		else if (strcmp(o, "--session-ttl-ms") == 0)
			bad = parse_u32(v, 1000, 86400000, &session_ttl_ms);
		else if (strcmp(o, "--window") == 0)
			bad = parse_u32(v, 1, 65536, &f.window);
		else if (strcmp(o, "--deadline-s") == 0)
			bad = parse_u32(v, 1, 86400, &deadline_s);
		else if (strcmp(o, "--hold-s") == 0)
			bad = parse_u32(v, 0, 86400, &hold_s);
		else
			return usage();
		if (bad != 0)
			return usage();
	}
	if (cluster == NULL || f.sessions > f.locks)
		return usage();

	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);

	struct hasp_client_group *g;
	struct member *members = calloc(f.sessions, sizeof(*members));
	f.members = members;
	if (members == NULL || hasp_client_group_new(&g) != 0) {
		fprintf(stderr, "fill_locks: out of memory or no socket\n");
		return 1;
	}
	struct hasp_client_config cfg;
	hasp_client_config_default(&cfg);
	cfg.cluster = cluster;
	cfg.request_timeout_ms = 1000; /* a busy cluster: no early resends */
	cfg.deadline_ms = 30000;
	/* Long enough that a keepalive late under the fill load does not end
	 * it; a large state's filler raises it to keep the keepalives few. */
	cfg.session_ttl_ms = session_ttl_ms;
	int rc = 0;
	uint32_t opened = 0;
	for (; opened < f.sessions && rc == 0; opened++) {
		members[opened] = (struct member){ .f = &f };
		rc = hasp_client_open_in_group(&members[opened].client, &cfg, g);
	}
	if (rc != 0) {
		opened--;
		fprintf(stderr, "fill_locks: client %u: %s\n", opened, hasp_strerror(rc));
	}

	const uint64_t start = now_ns(), deadline = start + (uint64_t)deadline_s * 1000000000ull;
	/* A completion starts the next lock, so the window stays full. */
	if (rc == 0)
		rc = start_more(&f);
	while (rc == 0 && f.granted + f.failed < f.locks && f.failed == 0 && !stop_requested &&
	       now_ns() < deadline)
		rc = drive(g, 100);
	const double seconds = (double)(now_ns() - start) / 1e9;

	uint64_t retransmits = 0;
	for (uint32_t s = 0; s < opened; s++) {
		struct hasp_client_stats st;
		hasp_client_stats_get(members[s].client, &st);
		retransmits += st.tx_retransmits;
	}
	int exit_code = 0;
	if (rc != 0 || f.granted != f.locks) {
		fprintf(stderr,
			"fill_locks: %" PRIu64 " of %u locks granted in %.1f s, %" PRIu64
			" failed (first: %s)%s\n",
			f.granted, f.locks, seconds, f.failed,
			hasp_strerror(f.first_error != 0 ? f.first_error : rc),
			now_ns() >= deadline ? ", deadline passed" : "");
		exit_code = 1;
	} else {
		printf("{\"locks\": %u, \"sessions\": %u, \"seconds\": %.3f, \"retransmits\": %" PRIu64
		       "}\n",
		       f.locks, f.sessions, seconds, retransmits);
		fflush(stdout);
		const uint64_t hold_end = now_ns() + (uint64_t)hold_s * 1000000000ull;
		while (!stop_requested && now_ns() < hold_end && drive(g, 100) == 0)
			;
	}
	for (uint32_t s = 0; s < opened; s++)
		hasp_client_close(members[s].client);
	hasp_client_group_free(g);
	free(members);
	return exit_code;
}
