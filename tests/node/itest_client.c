/*
 * The client side of the node integration tests (itest_*.sh), through
 * libhasp and raw UDP:
 *
 *   itest_client single <cluster>          acquire, check, renew, release,
 *                                          expiry, wait-queue handoff by a
 *                                          pushed LOCK_GRANTED event, KV,
 *                                          the async loop, a WAIT cancelled
 *                                          from another thread
 *   itest_client malformed <ip> <port>     sends a corpus of malformed
 *                                          datagrams; prints how many got
 *                                          an answer (must be only the
 *                                          answerable ones)
 *   itest_client hold <cluster> <count> <file>
 *                                          acquires <count> locks on one
 *                                          session, writes "name token
 *                                          session" lines to <file>, then
 *                                          renews them until SIGTERM
 *   itest_client verify <cluster> <file>   every lock in <file> is held by
 *                                          the same session with the same
 *                                          token; prints the largest token
 *   itest_client next <cluster> <name> <min>  a grant of <name> has a token > min
 *
 * Each prints what it checks and exits 0 when everything held, 1 otherwise.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "hasp/client.h"
#include "hasp/wire.h"

static int failures;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			failures++;                                        \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);        \
			printf(__VA_ARGS__);                               \
			printf("\n");                                      \
		}                                                          \
	} while (0)

static struct hasp_client *open_client(const char *cluster)
{
	struct hasp_client_config cfg;
	struct hasp_client *c;
	hasp_client_config_default(&cfg);
	cfg.cluster = cluster;
	cfg.deadline_ms = 10000;
	cfg.wait_recheck_ms = 5000; /* the pushed event must win the race */
	if (hasp_client_open(&c, &cfg) != 0) {
		printf("FAIL: cannot open a client for %s\n", cluster);
		exit(1);
	}
	return c;
}

struct waiter {
	struct hasp_client *c;
	struct hasp_lock lock;
	int rc;
};

static void *wait_acquire(void *arg)
{
	struct waiter *w = arg;
	struct hasp_acquire_opts o = { .ttl_ms = 5000, .wait = true, .wait_timeout_ms = 8000 };
	w->rc = hasp_client_acquire(w->c, "itest/queue", &o, &w->lock);
	return NULL;
}

/* ---- the asynchronous core ---- */

struct async_cycle {
	int acquired_rc;
	int released_rc;
	uint64_t token;
	bool done;
};

static void async_released(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct async_cycle *a = arg;

	(void)c;
	a->released_rc = res->rc;
	a->done = true;
}

static void async_acquired(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct async_cycle *a = arg;

	a->acquired_rc = res->rc;
	a->token = res->lock.token;
	if (res->rc != 0 ||
	    hasp_client_release_async(c, res->lock.name, res->lock.token, async_released, a, NULL) != 0)
		a->done = true;
}

static void *wait_cancelled(void *arg)
{
	struct waiter *w = arg;
	struct hasp_acquire_opts o = { .ttl_ms = 5000, .wait = true }; /* no time limit */
	w->rc = hasp_client_acquire(w->c, "itest/cancel", &o, &w->lock);
	return NULL;
}

/* An acquire and its release through the application's loop; then a
 * blocking WAIT cancelled from another thread leaves no queue entry. */
static void check_async(struct hasp_client *a, struct hasp_client *b)
{
	struct async_cycle cyc = { 0 };
	struct hasp_acquire_opts o = { .ttl_ms = 5000 };

	CHECK(hasp_client_acquire_async(a, "itest/async", &o, async_acquired, &cyc, NULL) == 0,
	      "acquire_async starts");
	/* Each request ends by its 10 s deadline: the loop is bounded. */
	for (int turn = 0; turn < 100000 && !cyc.done; turn++) {
		struct pollfd p = { .fd = hasp_client_fd(a), .events = POLLIN };
		if (poll(&p, 1, hasp_client_timeout_ms(a)) < 0 || hasp_client_process(a, NULL) != 0)
			break;
	}
	CHECK(cyc.done && cyc.acquired_rc == 0 && cyc.released_rc == 0 && cyc.token > 0,
	      "async acquire %d release %d token %" PRIu64, cyc.acquired_rc, cyc.released_rc,
	      cyc.token);
	printf("async loop ok\n");

	struct hasp_lock held;
	struct hasp_lock_info info;
	struct waiter w = { .c = b };
	pthread_t t;
	CHECK(hasp_client_acquire(a, "itest/cancel", &o, &held) == 0, "acquire to cancel behind");
	CHECK(pthread_create(&t, NULL, wait_cancelled, &w) == 0, "waiter thread");
	for (int i = 0; i < 500; i++) {
		if (hasp_client_lock_read(a, "itest/cancel", &info) == 0 && info.waiter_count == 1)
			break;
		usleep(10000);
	}
	CHECK(info.waiter_count == 1, "queued: %u waiters", info.waiter_count);
	CHECK(hasp_client_cancel_wait(b, "itest/cancel") == 0, "cancel_wait");
	pthread_join(t, NULL);
	CHECK(w.rc == -HASP_ECANCELED, "cancelled wait returned %d", w.rc);
	CHECK(hasp_client_lock_read(a, "itest/cancel", &info) == 0 && info.waiter_count == 0,
	      "the queue entry is gone: %u waiters", info.waiter_count);
	CHECK(hasp_client_release(a, "itest/cancel", held.token) == 0, "release after cancel");
	printf("cancel ok\n");
}

static int cmd_single(const char *cluster)
{
	struct hasp_client *a = open_client(cluster), *b = open_client(cluster);
	struct hasp_acquire_opts o = { .ttl_ms = 5000 };
	struct hasp_lock la, lb;
	struct hasp_lock_info info;
	int rc;

	rc = hasp_client_acquire(a, "itest/a", &o, &la);
	CHECK(rc == 0, "acquire: %d", rc);
	printf("acquire itest/a token=%" PRIu64 "\n", la.token);
	rc = hasp_client_acquire(b, "itest/a", &o, &lb);
	CHECK(rc == -HASP_EBUSY && lb.token == la.token, "second acquire: %d token %" PRIu64, rc,
	      lb.token);
	CHECK(hasp_client_check(b, "itest/a", la.token) == 0, "check current token");
	CHECK(hasp_client_check(b, "itest/a", la.token + 1000) == -HASP_ENOTHOLDER, "check stale");
	rc = hasp_client_renew(a, "itest/a", la.token, 8000, &la);
	CHECK(rc == 0, "renew: %d", rc);
	/* Ownership is the token (STATE_MACHINE.md): a stale token is refused,
	 * the current one works from any session. */
	rc = hasp_client_renew(b, "itest/a", la.token + 1000, 8000, NULL);
	CHECK(rc == -HASP_ENOTHOLDER, "renew with a stale token: %d", rc);
	rc = hasp_client_renew(b, "itest/a", la.token, 8000, NULL);
	CHECK(rc == 0, "renew with the token from another session: %d", rc);
	rc = hasp_client_lock_read(b, "itest/a", &info);
	CHECK(rc == 0 && info.token == la.token && info.ttl_remaining_ms > 5000,
	      "read after renew: %d token %" PRIu64 " ttl %u", rc, info.token, info.ttl_remaining_ms);
	CHECK(hasp_client_release(b, "itest/a", la.token + 1000) == -HASP_ENOTHOLDER,
	      "release with a stale token");
	CHECK(hasp_client_release(a, "itest/a", la.token) == 0, "release");
	CHECK(hasp_client_release(a, "itest/a", la.token) == -HASP_ENOTHOLDER, "release twice");
	CHECK(hasp_client_lock_read(b, "itest/a", &info) == -HASP_ENOENT, "free after release");
	printf("check/renew/release ok\n");

	/* Expiry: the leader's timer proposes the lease's expiry. */
	struct hasp_acquire_opts shortttl = { .ttl_ms = 200 };
	rc = hasp_client_acquire(a, "itest/expire", &shortttl, &la);
	CHECK(rc == 0, "acquire short: %d", rc);
	uint64_t t0 = clock_monotonic_ns();
	while (hasp_client_lock_read(b, "itest/expire", &info) == 0 &&
	       clock_monotonic_ns() - t0 < 5000000000ull)
		usleep(20000);
	uint64_t ms = (clock_monotonic_ns() - t0) / 1000000;
	CHECK(hasp_client_lock_read(b, "itest/expire", &info) == -HASP_ENOENT,
	      "expired lock still held after %" PRIu64 " ms", ms);
	CHECK(ms >= 150, "expired early: %" PRIu64 " ms", ms);
	printf("expiry after %" PRIu64 " ms (ttl 200)\n", ms);

	/* Wait-queue handoff: B waits, A releases, B is told by an EVENT. */
	rc = hasp_client_acquire(a, "itest/queue", &o, &la);
	CHECK(rc == 0, "acquire queue lock: %d", rc);
	struct waiter w = { .c = b };
	pthread_t tid;
	if (pthread_create(&tid, NULL, wait_acquire, &w) != 0) {
		printf("FAIL: cannot start the waiter thread\n");
		exit(1);
	}
	info.waiter_count = 0; /* read below even if no read answered OK */
	for (int i = 0; i < 100; i++) {
		if (hasp_client_lock_read(a, "itest/queue", &info) == 0 && info.waiter_count == 1)
			break;
		usleep(20000);
	}
	CHECK(info.waiter_count == 1, "waiter not queued (%u)", info.waiter_count);
	t0 = clock_monotonic_ns();
	CHECK(hasp_client_release(a, "itest/queue", la.token) == 0, "release to waiter");
	pthread_join(tid, NULL);
	ms = (clock_monotonic_ns() - t0) / 1000000;
	struct hasp_client_stats st;
	hasp_client_stats_get(b, &st);
	CHECK(w.rc == 0 && w.lock.token > la.token, "handoff: %d token %" PRIu64, w.rc,
	      w.lock.token);
	CHECK(st.events >= 1, "no pushed event reached the waiter (rechecks %" PRIu64 ")", st.wait_rechecks);
	CHECK(ms < 4000, "handoff took %" PRIu64 " ms (event lost?)", ms);
	printf("handoff token=%" PRIu64 " after %" PRIu64 " ms, events=%" PRIu64 "\n", w.lock.token, ms,
	       st.events);

	/* KV round trip. */
	uint64_t rev = 0;
	struct hasp_kv_value v;
	CHECK(hasp_client_kv_put(a, "itest/k", "v1", 2, 0, &rev) == 0, "kv put");
	CHECK(hasp_client_kv_get(b, "itest/k", &v) == 0 && v.value_size == 2 &&
		      memcmp(v.value, "v1", 2) == 0 && v.revision == rev,
	      "kv get");

	/* KV CAS against the real state machine through a real node: by
	 * revision and by value, a failed CAS changes nothing (read back by
	 * the other client), a missing key is created only by revision 0. */
	uint64_t rev2 = 0;
	struct hasp_kv_cas cas = { .expected_revision = rev + 1000, .value = "v2", .value_size = 2 };
	CHECK(hasp_client_kv_cas(a, "itest/k", &cas, &rev2) == -HASP_ECOMPARE,
	      "cas with a wrong revision");
	CHECK(hasp_client_kv_get(b, "itest/k", &v) == 0 && v.revision == rev &&
		      v.value_size == 2 && memcmp(v.value, "v1", 2) == 0,
	      "a failed cas changed the key");
	cas.expected_revision = rev;
	CHECK(hasp_client_kv_cas(a, "itest/k", &cas, &rev2) == 0 && rev2 > rev,
	      "cas with the current revision");
	CHECK(hasp_client_kv_get(b, "itest/k", &v) == 0 && v.revision == rev2 &&
		      v.value_size == 2 && memcmp(v.value, "v2", 2) == 0,
	      "cas by revision not applied");
	struct hasp_kv_cas byval = { .compare_value = true, .expected_value = "v1",
				     .expected_value_size = 2, .value = "v3", .value_size = 2 };
	CHECK(hasp_client_kv_cas(a, "itest/k", &byval, NULL) == -HASP_ECOMPARE,
	      "cas with a stale value");
	CHECK(hasp_client_kv_get(b, "itest/k", &v) == 0 && v.revision == rev2 &&
		      memcmp(v.value, "v2", 2) == 0,
	      "a failed value cas changed the key");
	byval.expected_value = "v2";
	uint64_t rev3 = 0;
	CHECK(hasp_client_kv_cas(a, "itest/k", &byval, &rev3) == 0 && rev3 > rev2,
	      "cas with the current value");
	CHECK(hasp_client_kv_get(b, "itest/k", &v) == 0 && v.revision == rev3 &&
		      memcmp(v.value, "v3", 2) == 0,
	      "cas by value not applied");
	CHECK(hasp_client_kv_cas(a, "itest/none", &byval, NULL) == -HASP_ECOMPARE,
	      "value cas on a missing key");
	CHECK(hasp_client_kv_get(b, "itest/none", &v) == -HASP_ENOENT,
	      "value cas created a missing key");
	struct hasp_kv_cas create = { .expected_revision = 0, .value = "n", .value_size = 1 };
	CHECK(hasp_client_kv_cas(a, "itest/new", &create, NULL) == 0,
	      "cas revision 0 creates");
	CHECK(hasp_client_kv_cas(a, "itest/new", &create, NULL) == -HASP_ECOMPARE,
	      "cas revision 0 on an existing key");
	printf("kv cas ok\n");
	check_async(a, b);
	hasp_client_close(a);
	hasp_client_close(b);
	printf("single: %s\n", failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}

/* ---- malformed datagrams ---- */

struct bad_case {
	const char *what;
	uint8_t buf[64];
	size_t size;
	bool answerable;
};

static void header(uint8_t *b, uint8_t version, uint8_t op, uint16_t flags, uint16_t body)
{
	memset(b, 0, 44);
	uint32_t magic = HASP_WIRE_MAGIC;
	memcpy(b, &magic, 4);
	b[4] = version;
	b[5] = op;
	memcpy(b + 6, &flags, 2);
	uint64_t seq = 7;
	memcpy(b + 16, &seq, 8);
	memcpy(b + 24, &body, 2);
}

static int cmd_malformed(const char *ip, int port)
{
	static struct bad_case cases[12];
	int n = 0;

	cases[n] = (struct bad_case){ .what = "truncated", .size = 10 };
	n++;
	header(cases[n].buf, 1, HASP_OP_LOCK_READ, 0, 2);
	cases[n].buf[0] = 'X';
	cases[n].buf[44] = 1;
	cases[n].buf[45] = 'a';
	cases[n].size = 46;
	cases[n++].what = "bad magic";
	header(cases[n].buf, 9, HASP_OP_LOCK_READ, 0, 0);
	cases[n].size = 44;
	cases[n].answerable = true;
	cases[n++].what = "bad version";
	header(cases[n].buf, 1, 99, 0, 0);
	cases[n].size = 44;
	cases[n].answerable = true;
	cases[n++].what = "bad opcode";
	header(cases[n].buf, 1, HASP_OP_LOCK_READ, HASP_WIRE_F_REPLY, 0);
	cases[n].size = 44;
	cases[n++].what = "reply flag (never answered)";
	header(cases[n].buf, 1, HASP_OP_LOCK_READ, 0, 9);
	cases[n].size = 46;
	cases[n].answerable = true;
	cases[n++].what = "length mismatch";
	header(cases[n].buf, 1, HASP_OP_LOCK_READ, 0, 2);
	cases[n].buf[30] = 1; /* auth tag */
	cases[n].buf[44] = 1;
	cases[n].buf[45] = 'a';
	cases[n].size = 46;
	cases[n].answerable = true;
	cases[n++].what = "auth tag set";
	header(cases[n].buf, 1, HASP_OP_LOCK_READ, 0, 2);
	cases[n].buf[44] = 1;
	cases[n].buf[45] = ' ';
	cases[n].size = 46;
	cases[n].answerable = true;
	cases[n++].what = "bad name byte";
	header(cases[n].buf, 1, HASP_OP_ACQUIRE, 0, 15);
	cases[n].buf[44 + 8] = 1; /* ttl 1 ms: out of range */
	cases[n].buf[44 + 13] = 1;
	cases[n].buf[44 + 14] = 'x';
	cases[n].size = 59;
	cases[n].answerable = true;
	cases[n++].what = "ttl out of range";
	/* EVENT is never a request: answered BAD_OPCODE (PROTOCOL.md; it
	 * was dropped unanswered before, against the doc). */
	header(cases[n].buf, 1, HASP_OP_EVENT, 0, 0);
	cases[n].size = 44;
	cases[n].answerable = true;
	cases[n++].what = "EVENT as request";

	/* A node with client_auth = on (the clients here have HASP_ID) answers
	 * nothing that is not authenticated: every case is dropped there. */
	const char *id = getenv("HASP_ID");
	if (id != NULL && id[0] != '\0')
		for (int i = 0; i < n; i++)
			cases[i].answerable = false;

	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, ip, &to.sin_addr);
	struct timeval tv = { 0, 300000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	int answered = 0, expected = 0;
	for (int i = 0; i < n; i++) {
		uint8_t reply[2048];
		sendto(fd, cases[i].buf, cases[i].size, 0, (struct sockaddr *)&to, sizeof(to));
		ssize_t got = recv(fd, reply, sizeof(reply), 0);
		struct hasp_wire_msg m;
		bool ok = got > 0 && hasp_wire_decode_reply(reply, (size_t)got, &m) == 0;
		printf("%-28s %s%s\n", cases[i].what, got > 0 ? "answered " : "dropped",
		       got > 0 ? (ok ? hasp_status_name(m.hdr.status) : "(undecodable)") : "");
		CHECK((got > 0) == cases[i].answerable, "%s: answered=%d", cases[i].what, got > 0);
		answered += got > 0;
		expected += cases[i].answerable;
	}
	close(fd);
	printf("malformed: %d sent, %d answered (expected %d): %s\n", n, answered, expected,
	       failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}

/* ---- holding locks across failures ---- */

static volatile sig_atomic_t hold_stop;
static void on_term(int sig)
{
	(void)sig;
	hold_stop = 1;
}

static int cmd_hold(const char *cluster, int count, const char *path)
{
	struct hasp_client *c = open_client(cluster);
	struct hasp_lock *locks = calloc((size_t)count, sizeof(*locks));
	struct hasp_acquire_opts o = { .ttl_ms = 20000 };

	signal(SIGTERM, on_term);
	if (hasp_client_keepalive_start(c) != 0)
		return 1;
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		printf("FAIL: cannot write %s\n", path);
		return 1;
	}
	for (int i = 0; i < count; i++) {
		char name[64];
		snprintf(name, sizeof(name), "itest/held/%d", i);
		int rc = hasp_client_acquire(c, name, &o, &locks[i]);
		if (rc != 0) {
			printf("FAIL: hold %s: %d\n", name, rc);
			return 1;
		}
		fprintf(f, "%s %" PRIu64 " %" PRIu64 "\n", name, locks[i].token, hasp_client_session_id(c));
	}
	if (fclose(f) != 0) {
		printf("FAIL: cannot write %s\n", path);
		return 1;
	}
	printf("holding %d locks\n", count);
	fflush(stdout);
	/* Renew every few seconds to the full TTL. A renew that finds no
	 * answer during a failover is retried in the next round, well inside
	 * the 20 s TTL; a refusal (NOT_HOLDER) means the lock was lost: the
	 * holder reports it and exits 1, and itest_cluster.sh fails. */
	int lost = 0;
	while (!hold_stop) {
		for (int s = 0; s < 30 && !hold_stop; s++)
			usleep(100000);
		for (int i = 0; i < count && !hold_stop; i++) {
			int rc = hasp_client_renew(c, locks[i].name, locks[i].token, o.ttl_ms, &locks[i]);
			if (rc == 0 || rc == -HASP_ETIMEDOUT)
				continue;
			printf("FAIL: renew %s token %" PRIu64 ": %s\n", locks[i].name, locks[i].token,
			       rc < 0 ? hasp_strerror(rc) : hasp_status_name((uint32_t)rc));
			fflush(stdout);
			lost++;
		}
	}
	hasp_client_keepalive_stop(c);
	/* Exit without closing the session: the verifier may still run. */
	return lost == 0 ? 0 : 1;
}

static int cmd_verify(const char *cluster, const char *path)
{
	struct hasp_client *c = open_client(cluster);
	FILE *f = fopen(path, "r");
	char name[160];
	uint64_t token, session, max_token = 0;
	int count = 0;

	if (f == NULL) {
		printf("FAIL: no %s\n", path);
		return 1;
	}
	while (fscanf(f, "%159s %" SCNu64 " %" SCNu64, name, &token, &session) == 3) {
		struct hasp_lock_info info;
		int rc = hasp_client_lock_read(c, name, &info);
		CHECK(rc == 0 && info.token == token && info.holder_session_id == session,
		      "%s: rc %d token %" PRIu64 " (want %" PRIu64 ") session %" PRIu64 " (want %" PRIu64 ")",
		      name, rc, info.token, token, info.holder_session_id, session);
		if (token > max_token)
			max_token = token;
		count++;
	}
	fclose(f);
	CHECK(count > 0, "no locks in %s", path);
	hasp_client_close(c);
	printf("verify: %d locks held with their tokens, max_token=%" PRIu64 ": %s\n", count, max_token,
	       failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}

static int cmd_next(const char *cluster, const char *name, uint64_t min)
{
	struct hasp_client *c = open_client(cluster);
	struct hasp_acquire_opts o = { .ttl_ms = 1000 };
	struct hasp_lock l;
	int rc = hasp_client_acquire(c, name, &o, &l);
	CHECK(rc == 0 && l.token > min, "next grant: %d token %" PRIu64 " (min %" PRIu64 ")",
	      rc, l.token, min);
	printf("next: token=%" PRIu64 " > %" PRIu64 ": %s\n", l.token, min, failures ? "FAIL" : "PASS");
	hasp_client_close(c);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "single") == 0)
		return cmd_single(argv[2]);
	if (argc == 4 && strcmp(argv[1], "malformed") == 0)
		return cmd_malformed(argv[2], atoi(argv[3]));
	if (argc == 5 && strcmp(argv[1], "hold") == 0)
		return cmd_hold(argv[2], atoi(argv[3]), argv[4]);
	if (argc == 4 && strcmp(argv[1], "verify") == 0)
		return cmd_verify(argv[2], argv[3]);
	if (argc == 5 && strcmp(argv[1], "next") == 0)
		return cmd_next(argv[2], argv[3], strtoull(argv[4], NULL, 10));
	fprintf(stderr, "usage: itest_client single|malformed|hold|verify|next ...\n");
	return 2;
}
