/*
 * One client process of the real-cluster fault suite (docs/TESTING.md).
 * It drives libhasp as a service would and records every operation as a
 * history record (tests/fault/checker.py) in its own JSON-lines file, with
 * CLOCK_MONOTONIC time stamps: an `invoke` record before the call and an
 * `ok`, `fail` or `info` record after it. What counts as a hold is what
 * libhasp said: the token and hasp_client_lock_valid_until().
 *
 *   fault_client worker  <cluster> <history> <resource-sock> <seed> <seconds> <lock,...>
 *       random TRY and WAIT acquires with random TTLs on a few hot locks;
 *       while libhasp says the lock is safe, writes to the fenced resource;
 *       renews (growing and shrinking), releases, or overstays (lets the
 *       lease run out); lock reads; KV put and get on a few keys.
 *   fault_client cycler  <cluster> <history> <resource-sock> <seed> <seconds> <lock>
 *       WAIT acquires of one lock in a loop, a short use while safe, then
 *       release: with several cyclers the lock always has waiters, so
 *       nearly every grant is a hand-off pushed to the new holder.
 *   fault_client watcher <cluster> <history> <seconds> <lock,...>
 *       watches each lock and records every event it is told of.
 *   fault_client reader  <cluster> <history> <lock,...>
 *       after the faults healed: reads every lock and every KV key once.
 *   fault_client hold    <cluster> <history> <resource-sock> <lock> <ttl-ms>
 *       acquires (retrying while busy), prints "granted TOKEN", waits for a
 *       line on stdin, releases.
 *   fault_client rewait  <cluster> <history> <resource-sock> <lock> <ttl1> <wait1> <ttl2> <wait2>
 *       a WAIT acquire with ttl1 that it gives up after wait1 ms, then a
 *       second WAIT with ttl2 (issue: a re-issued WAIT must not be believed
 *       safe past the lease it was really granted); once granted, writes
 *       to the resource while libhasp says the lock is safe, then releases.
 *   fault_client pause   <cluster> <history> <resource-sock> <lock> <ttl-ms>
 *       the GC-pause story: acquires, writes once, prints "granted TOKEN"
 *       and waits for a line on stdin (the runner stops it with SIGSTOP
 *       past its TTL, lets another client take the lock, resumes it and
 *       writes the line); then writes again WITHOUT re-checking, marked
 *       late. The resource must refuse it.
 *
 * Loops also end early when the file named by $FAULT_STOP_FILE exists (the
 * runner's way to end a run when its nemeses are done).
 *
 * Exit: 0 when the run completed (whatever the cluster answered: judging
 * is the checker's job), 1 on a local failure (bad arguments, no history
 * file, no resource). Every loop is bounded by <seconds>.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/prng.h"
#include "hasp/client.h"

#define LOCKS_MAX 16
#define KEYS 4

static FILE *history;
static const char *proc_name;
static const char *stop_file;

/* True while the run goes on: before `end` and no stop file. */
static bool running(uint64_t end)
{
	return clock_monotonic_ns() < end && (stop_file == NULL || access(stop_file, F_OK) != 0);
}

/* Appends one record: {"t":..,"proc":..,"f":..,"type":.., <fields>}. */
static void record(const char *f, const char *type, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void record(const char *f, const char *type, const char *fmt, ...)
{
	fprintf(history, "{\"t\":%" PRIu64 ",\"proc\":\"%s\",\"f\":\"%s\",\"type\":\"%s\"",
		clock_monotonic_ns(), proc_name, f, type);
	if (fmt != NULL && fmt[0] != '\0') {
		va_list ap;
		va_start(ap, fmt);
		fputc(',', history);
		vfprintf(history, fmt, ap);
		va_end(ap);
	}
	fputs("}\n", history);
	fflush(history);
}

/* The completion type of a call: a status the cluster answered is known to
 * have happened (`ok_status`) or not (any other status: fail); a timeout
 * may have applied (info); any other local error was never sent (fail). */
static const char *outcome(int rc, int ok_status)
{
	if (rc == ok_status)
		return "ok";
	if (rc == -HASP_ETIMEDOUT)
		return "info";
	return "fail";
}

/* ---- the fenced resource ---- */

static int resource_fd = -1;
static struct sockaddr_un resource_addr;

static int resource_open(const char *path, const char *self_dir)
{
	resource_fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (resource_fd < 0)
		return -1;
	struct sockaddr_un self = { .sun_family = AF_UNIX };
	int n = snprintf(self.sun_path, sizeof(self.sun_path), "%s/c-%s.sock", self_dir, proc_name);
	if (n < 0 || (size_t)n >= sizeof(self.sun_path))
		return -1;
	unlink(self.sun_path);
	if (bind(resource_fd, (struct sockaddr *)&self, sizeof(self)) != 0)
		return -1;
	resource_addr.sun_family = AF_UNIX;
	n = snprintf(resource_addr.sun_path, sizeof(resource_addr.sun_path), "%s", path);
	if (n < 0 || (size_t)n >= sizeof(resource_addr.sun_path))
		return -1;
	struct timeval tv = { .tv_sec = 5 };
	return setsockopt(resource_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* One write; the resource logs its decision. Returns 1 accepted, 0 refused,
 * -1 when the resource did not answer (a suite failure, not the cluster's). */
static int resource_write(const char *lock, uint64_t token, bool late)
{
	char req[256], rep[256];
	int n = snprintf(req, sizeof(req), "{\"lock\":\"%s\",\"token\":%" PRIu64
			 ",\"client\":\"%s\",\"late\":%s}", lock, token, proc_name,
			 late ? "true" : "false");
	if (sendto(resource_fd, req, (size_t)n, 0, (struct sockaddr *)&resource_addr,
		   sizeof(resource_addr)) != n)
		return -1;
	ssize_t got = recv(resource_fd, rep, sizeof(rep) - 1, 0);
	if (got <= 0)
		return -1;
	rep[got] = '\0';
	return strstr(rep, "\"accepted\": true") != NULL || strstr(rep, "\"accepted\":true") != NULL;
}

/* ---- operations, each recorded ---- */

static int do_acquire(struct hasp_client *c, const char *lock, uint32_t ttl_ms, bool wait,
		      uint32_t wait_ms, struct hasp_lock *out)
{
	record("acquire", "invoke", "\"lock\":\"%s\",\"ttl_ms\":%u,\"mode\":\"%s\"", lock, ttl_ms,
	       wait ? "wait" : "try");
	struct hasp_acquire_opts o = { .ttl_ms = ttl_ms, .wait = wait, .wait_timeout_ms = wait_ms };
	int rc = hasp_client_acquire(c, lock, &o, out);
	if (rc == 0)
		record("acquire", "ok", "\"lock\":\"%s\",\"token\":%" PRIu64 ",\"valid_until\":%" PRIu64,
		       lock, out->token, hasp_client_lock_valid_until(c, out));
	else
		record("acquire", outcome(rc, 0), "\"lock\":\"%s\",\"rc\":%d", lock, rc);
	return rc;
}

/* Any outcome is recorded: judging it is the checker's job. */
static void do_release(struct hasp_client *c, const struct hasp_lock *l)
{
	record("release", "invoke", "\"lock\":\"%s\",\"token\":%" PRIu64, l->name, l->token);
	int rc = hasp_client_release(c, l->name, l->token);
	record("release", outcome(rc, 0), "\"lock\":\"%s\",\"token\":%" PRIu64 ",\"rc\":%d",
	       l->name, l->token, rc);
}

static int do_renew(struct hasp_client *c, struct hasp_lock *l, uint32_t ttl_ms)
{
	record("renew", "invoke", "\"lock\":\"%s\",\"token\":%" PRIu64 ",\"ttl_ms\":%u", l->name,
	       l->token, ttl_ms);
	int rc = hasp_client_renew(c, l->name, l->token, ttl_ms, l);
	if (rc == 0)
		record("renew", "ok", "\"lock\":\"%s\",\"token\":%" PRIu64 ",\"valid_until\":%" PRIu64,
		       l->name, l->token, hasp_client_lock_valid_until(c, l));
	else
		/* Unanswered, it may have shortened the lease: the library's
		 * validity after it is what the hold may last (checker.py). */
		record("renew", outcome(rc, 0), "\"lock\":\"%s\",\"token\":%" PRIu64
		       ",\"rc\":%d,\"valid_until\":%" PRIu64, l->name, l->token, rc,
		       hasp_client_lock_valid_until(c, l));
	return rc;
}

static void do_read(struct hasp_client *c, const char *lock)
{
	record("read", "invoke", "\"lock\":\"%s\"", lock);
	struct hasp_lock_info info;
	int rc = hasp_client_lock_read(c, lock, &info);
	if (rc == 0)
		record("read", "ok", "\"lock\":\"%s\",\"holder_token\":%" PRIu64, lock, info.token);
	else if (rc == -HASP_ENOENT)
		record("read", "ok", "\"lock\":\"%s\",\"holder_token\":0", lock);
	else
		record("read", outcome(rc, 0), "\"lock\":\"%s\",\"rc\":%d", lock, rc);
}

static void do_kv_read(struct hasp_client *c, const char *key)
{
	record("kv_read", "invoke", "\"key\":\"%s\"", key);
	static struct hasp_kv_value v;
	int rc = hasp_client_kv_get(c, key, &v);
	if (rc == 0)
		record("kv_read", "ok", "\"key\":\"%s\",\"value\":\"%.*s\"", key, (int)v.value_size,
		       (const char *)v.value);
	else if (rc == -HASP_ENOENT)
		record("kv_read", "ok", "\"key\":\"%s\",\"value\":null", key);
	else
		record("kv_read", outcome(rc, 0), "\"key\":\"%s\",\"rc\":%d", key, rc);
}

static void do_kv(struct hasp_client *c, struct prng *rng, uint64_t n)
{
	char key[32], value[48];
	snprintf(key, sizeof(key), "fault/k%u", (unsigned)prng_below(rng, KEYS));
	if (prng_below(rng, 2) == 0) {
		snprintf(value, sizeof(value), "%s-%" PRIu64, proc_name, n);
		record("kv_put", "invoke", "\"key\":\"%s\",\"value\":\"%s\"", key, value);
		uint64_t rev = 0;
		int rc = hasp_client_kv_put(c, key, value, strlen(value), 0, &rev);
		record("kv_put", outcome(rc, 0), "\"key\":\"%s\",\"value\":\"%s\",\"rc\":%d",
		       key, value, rc);
		return;
	}
	do_kv_read(c, key);
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

static struct hasp_client *client_open(const char *cluster, uint32_t wait_recheck_ms)
{
	struct hasp_client_config cfg;
	struct hasp_client *c;
	hasp_client_config_default(&cfg);
	cfg.cluster = cluster;
	cfg.deadline_ms = 3000;
	if (wait_recheck_ms != 0)
		cfg.wait_recheck_ms = wait_recheck_ms;
	if (hasp_client_open(&c, &cfg) != 0) {
		fprintf(stderr, "fault_client: cannot open a client for %s\n", cluster);
		return NULL;
	}
	/* As a service runs it: the keepalive thread keeps the session (and
	 * with it the watches, re-registered on a new leader) alive. */
	if (hasp_client_keepalive_start(c) != 0) {
		fprintf(stderr, "fault_client: cannot start the keepalive thread\n");
		hasp_client_close(c);
		return NULL;
	}
	return c;
}

static int split_locks(char *list, char **locks)
{
	int n = 0;
	char *save = NULL;
	for (char *t = strtok_r(list, ",", &save); t != NULL && n < LOCKS_MAX; t = strtok_r(NULL, ",", &save))
		locks[n++] = t;
	return n;
}

/* ---- roles ---- */

static int run_worker(struct hasp_client *c, uint64_t seed, uint64_t seconds, char **locks, int lock_count)
{
	struct prng rng;
	prng_seed(&rng, seed);
	uint64_t end = clock_monotonic_ns() + seconds * 1000000000ull;
	for (uint64_t n = 0; running(end); n++) {
		const char *lock = locks[prng_below(&rng, (uint64_t)lock_count)];
		uint32_t choice = (uint32_t)prng_below(&rng, 10);
		if (choice == 0) {
			do_read(c, lock);
			continue;
		}
		if (choice == 1) {
			do_kv(c, &rng, n);
			continue;
		}
		struct hasp_lock l;
		uint32_t ttl = 300 + (uint32_t)prng_below(&rng, 1700);
		bool wait = prng_below(&rng, 3) == 0;
		if (do_acquire(c, lock, ttl, wait, 1500, &l) != 0)
			continue;
		/* Use the lock while libhasp says it is safe. */
		for (int w = 0; w < 3 && hasp_client_lock_safe(c, &l, 20); w++) {
			if (resource_write(lock, l.token, false) < 0)
				return 1;
			sleep_ms(prng_below(&rng, 30));
			if (prng_below(&rng, 4) == 0 && hasp_client_lock_safe(c, &l, 0)) {
				uint32_t renew_ttl = 200 + (uint32_t)prng_below(&rng, 2500); /* grow or shrink */
				if (do_renew(c, &l, renew_ttl) != 0)
					break;
			}
		}
		if (prng_below(&rng, 8) == 0) {
			/* Overstay: let the lease run out without releasing. */
			uint64_t until = hasp_client_lock_valid_until(c, &l);
			uint64_t now = clock_monotonic_ns();
			if (until > now)
				sleep_ms((until - now) / 1000000 + 50);
			continue;
		}
		do_release(c, &l);
	}
	return 0;
}

static int run_cycler(struct hasp_client *c, uint64_t seed, uint64_t seconds, const char *lock)
{
	struct prng rng;
	prng_seed(&rng, seed);
	uint64_t end = clock_monotonic_ns() + seconds * 1000000000ull;
	while (running(end)) {
		struct hasp_lock l;
		if (do_acquire(c, lock, 2000, true, 3000, &l) != 0)
			continue;
		if (hasp_client_lock_safe(c, &l, 20) && resource_write(lock, l.token, false) < 0)
			return 1;
		sleep_ms(5 + prng_below(&rng, 20));
		do_release(c, &l);
	}
	return 0;
}

static int run_watcher(struct hasp_client *c, uint64_t seconds, char **locks, int lock_count)
{
	for (int i = 0; i < lock_count; i++) {
		record("watch", "invoke", "\"lock\":\"%s\"", locks[i]);
		int rc = hasp_client_watch(c, locks[i], false);
		record("watch", outcome(rc, 0), "\"lock\":\"%s\",\"rc\":%d", locks[i], rc);
	}
	uint64_t end = clock_monotonic_ns() + seconds * 1000000000ull;
	struct hasp_client_stats st;
	hasp_client_stats_get(c, &st);
	uint64_t gaps = st.events_gaps;
	static struct hasp_event ev;
	while (running(end)) {
		int rc = hasp_client_next_event(c, &ev, 200);
		hasp_client_stats_get(c, &st);
		if (st.events_gaps != gaps) {
			gaps = st.events_gaps;
			fprintf(history, "{\"t\":%" PRIu64 ",\"proc\":\"%s\",\"f\":\"event\",\"kind\":\"resync\","
				"\"id\":\"gap-%" PRIu64 "\"}\n", clock_monotonic_ns(), proc_name, gaps);
		}
		if (rc != 0)
			continue;
		if (ev.type == HASP_EVENT_RESYNC) {
			fprintf(history, "{\"t\":%" PRIu64 ",\"proc\":\"%s\",\"f\":\"event\",\"kind\":\"resync\","
				"\"id\":\"resync-%" PRIu64 "\"}\n", clock_monotonic_ns(), proc_name, gaps);
			fflush(history);
			continue;
		}
		const char *kind = ev.type == HASP_EVENT_LOCK_GRANTED ? "granted" :
				   ev.type == HASP_EVENT_LOCK_RELEASED ? "released" :
				   ev.type == HASP_EVENT_KV_PUT ? "put" : "delete";
		/* The identity of an event is what changed: type, name and the
		 * revision of the change, whatever the transport numbered it. */
		fprintf(history, "{\"t\":%" PRIu64 ",\"proc\":\"%s\",\"f\":\"event\",\"kind\":\"%s\","
			"\"lock\":\"%s\",\"token\":%" PRIu64 ",\"id\":\"%s:%s:%" PRIu64 "\"}\n",
			clock_monotonic_ns(), proc_name, kind, ev.name, ev.revision, kind, ev.name,
			ev.revision);
		fflush(history);
	}
	fprintf(history, "{\"t\":%" PRIu64 ",\"proc\":\"%s\",\"f\":\"watch_end\"}\n", clock_monotonic_ns(),
		proc_name);
	return 0;
}

static int run_reader(struct hasp_client *c, char **locks, int lock_count)
{
	for (int i = 0; i < lock_count; i++)
		do_read(c, locks[i]);
	for (unsigned k = 0; k < KEYS; k++) {
		char key[32];
		snprintf(key, sizeof(key), "fault/k%u", k);
		do_kv_read(c, key);
	}
	return 0;
}

static int run_pause(struct hasp_client *c, const char *lock, uint32_t ttl_ms)
{
	struct hasp_lock l;
	for (int tries = 0; tries < 50; tries++) {
		if (do_acquire(c, lock, ttl_ms, false, 0, &l) == 0)
			break;
		sleep_ms(100);
		l.token = 0;
	}
	if (l.token == 0 || !hasp_client_lock_safe(c, &l, 0) || resource_write(lock, l.token, false) != 1) {
		fprintf(stderr, "fault_client pause: no usable grant of %s\n", lock);
		return 1;
	}
	printf("granted %" PRIu64 "\n", l.token);
	fflush(stdout);
	char line[16];
	if (fgets(line, sizeof(line), stdin) == NULL)
		return 1;
	/* The bug this story is about: a write after a pause without checking
	 * hasp_client_lock_safe(). Only the fence can stop it. */
	int accepted = resource_write(lock, l.token, true);
	printf("late write %s\n", accepted == 1 ? "ACCEPTED" : accepted == 0 ? "refused" : "unanswered");
	return accepted < 0 ? 1 : 0;
}

static int run_hold(struct hasp_client *c, const char *lock, uint32_t ttl_ms)
{
	struct hasp_lock l = { .token = 0 };
	for (int tries = 0; tries < 50 && l.token == 0; tries++) {
		if (do_acquire(c, lock, ttl_ms, false, 0, &l) != 0) {
			l.token = 0;
			sleep_ms(100);
		}
	}
	if (l.token == 0)
		return 1;
	printf("granted %" PRIu64 "\n", l.token);
	fflush(stdout);
	char line[16];
	if (fgets(line, sizeof(line), stdin) == NULL)
		return 1;
	do_release(c, &l);
	return 0;
}

static int run_rewait(struct hasp_client *c, const char *lock, uint32_t ttl1, uint32_t wait1,
		      uint32_t ttl2, uint32_t wait2)
{
	struct hasp_lock l;
	if (do_acquire(c, lock, ttl1, true, wait1, &l) == 0) {
		fprintf(stderr, "fault_client rewait: the first wait was granted; the lock was free\n");
		return 1;
	}
	printf("gave up\n");
	fflush(stdout);
	if (do_acquire(c, lock, ttl2, true, wait2, &l) != 0)
		return 0; /* refused: a clear status is an allowed contract */
	while (hasp_client_lock_safe(c, &l, 20)) {
		if (resource_write(lock, l.token, false) < 0)
			return 1;
		sleep_ms(50);
	}
	do_release(c, &l);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: fault_client worker <cluster> <history> <resource-sock> <seed> <seconds> <locks>\n"
			"       fault_client cycler <cluster> <history> <resource-sock> <seed> <seconds> <lock>\n"
			"       fault_client watcher <cluster> <history> <seconds> <locks>\n"
			"       fault_client reader <cluster> <history> <locks>\n"
			"       fault_client hold <cluster> <history> <resource-sock> <lock> <ttl-ms>\n"
			"       fault_client rewait <cluster> <history> <resource-sock> <lock> <ttl1> <wait1> <ttl2> <wait2>\n"
			"       fault_client pause <cluster> <history> <resource-sock> <lock> <ttl-ms>\n");
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return usage();
	const char *role = argv[1], *cluster = argv[2], *path = argv[3];
	bool worker = strcmp(role, "worker") == 0 && argc == 8;
	bool watcher = strcmp(role, "watcher") == 0 && argc == 6;
	bool cycler = strcmp(role, "cycler") == 0 && argc == 8;
	bool reader = strcmp(role, "reader") == 0 && argc == 5;
	bool pause = strcmp(role, "pause") == 0 && argc == 7;
	bool hold = strcmp(role, "hold") == 0 && argc == 7;
	bool rewait = strcmp(role, "rewait") == 0 && argc == 10;
	if (!worker && !cycler && !watcher && !reader && !pause && !hold && !rewait)
		return usage();
	stop_file = getenv("FAULT_STOP_FILE");
	history = fopen(path, "a");
	if (history == NULL) {
		perror(path);
		return 1;
	}
	/* The process is named after its history file: "<dir>/<name>.jsonl". */
	static char name[64];
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(base, "."), base);
	proc_name = name;
	if (worker || cycler || pause || hold || rewait) {
		char dir[256];
		snprintf(dir, sizeof(dir), "%.*s", (int)(base - path > 1 ? base - path - 1 : 1),
			 base == path ? "." : path);
		if (resource_open(argv[4], dir) != 0) {
			perror("fault_client: resource socket");
			return 1;
		}
	}
	/* rewait: the pushed LOCK_GRANTED event, not the periodic re-read,
	 * must deliver the grant, as it does on a quiet network. */
	struct hasp_client *c = client_open(cluster, rewait ? 5000 : 0);
	if (c == NULL)
		return 1;
	char *locks[LOCKS_MAX];
	int rc;
	if (worker) {
		int n = split_locks(argv[7], locks);
		rc = n > 0 ? run_worker(c, strtoull(argv[5], NULL, 10), strtoull(argv[6], NULL, 10), locks, n)
			   : usage();
	} else if (cycler) {
		rc = run_cycler(c, strtoull(argv[5], NULL, 10), strtoull(argv[6], NULL, 10), argv[7]);
	} else if (reader) {
		int n = split_locks(argv[4], locks);
		rc = n > 0 ? run_reader(c, locks, n) : usage();
	} else if (watcher) {
		int n = split_locks(argv[5], locks);
		rc = n > 0 ? run_watcher(c, strtoull(argv[4], NULL, 10), locks, n) : usage();
	} else if (hold) {
		rc = run_hold(c, argv[5], (uint32_t)strtoul(argv[6], NULL, 10));
	} else if (rewait) {
		rc = run_rewait(c, argv[5], (uint32_t)strtoul(argv[6], NULL, 10),
				(uint32_t)strtoul(argv[7], NULL, 10), (uint32_t)strtoul(argv[8], NULL, 10),
				(uint32_t)strtoul(argv[9], NULL, 10));
	} else {
		rc = run_pause(c, argv[5], (uint32_t)strtoul(argv[6], NULL, 10));
	}
	hasp_client_close(c);
	fclose(history);
	return rc;
}
