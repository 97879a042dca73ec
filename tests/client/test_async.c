/*
 * libhasp's asynchronous core against the scripted responder: one thread
 * drives hundreds of requests through hasp_client_fd / _timeout_ms /
 * _process, a lost datagram is retransmitted on the loop's timer, a WAIT
 * completes through its pushed grant, a WAIT is cancelled by id and, from
 * another thread, a blocking WAIT by name (CANCEL reaches the cluster),
 * and blocking threads share a client with the loop.
 *
 * Loops end when every operation has completed: each one completes by its
 * own deadline (3 s), so no loop here can run unbounded; a count bound
 * stops them anyway.
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "hasp/client.h"
#include "tests/client/client_test.h"
#include "tests/client/responder.h"
#include "tests/test_util.h"

#define OPS_MAX 512
#define LOOP_TURNS_MAX 100000

struct script {
	uint64_t drop_seq;      /* this seq's first transmission is lost (0: none) */
	bool dropped;
	uint64_t grant_at_ns;   /* push LOCK_GRANTED for "job" then (0: never) */
	bool grant_sent;
	uint32_t acquires_seen;
	uint64_t expired_session; /* requests in it answer SESSION_EXPIRED (0: none) */
};

static void script_async(struct responder *r, int node, const struct hasp_wire_msg *req,
			 const struct sockaddr_in *from, void *arg)
{
	struct script *s = arg;
	struct hasp_wire_msg rep;

	if (req == NULL) {
		responder_lock(r);
		bool due = s->grant_at_ns != 0 && !s->grant_sent &&
			   clock_monotonic_ns() >= s->grant_at_ns;
		if (due)
			s->grant_sent = true;
		responder_unlock(r);
		if (due)
			responder_push_grant(r, 0, "job", 77, 5000);
		return;
	}
	responder_lock(r);
	bool expired = s->expired_session != 0 && req->hdr.session_id == s->expired_session;
	responder_unlock(r);
	if (expired) {
		reply_status(r, node, req, from, HASP_STATUS_SESSION_EXPIRED);
		return;
	}
	if (responder_answer_session(r, node, req, from))
		return;
	if (s->drop_seq != 0 && req->hdr.seq == s->drop_seq && !s->dropped) {
		s->dropped = true;
		return; /* lost */
	}
	switch (req->hdr.opcode) {
	case HASP_OP_ACQUIRE:
		responder_lock(r);
		s->acquires_seen++;
		responder_unlock(r);
		if (req->body.acquire.mode == HASP_ACQUIRE_WAIT) {
			responder_reply_init(&rep, req, HASP_STATUS_QUEUED);
			rep.body.queued.position = 1;
			responder_send(r, node, from, &rep);
		} else if (req->body.acquire.name.size == 4 &&
			   memcmp(req->body.acquire.name.data, "busy", 4) == 0) {
			responder_reply_init(&rep, req, HASP_STATUS_BUSY);
			rep.body.busy.holder_token = 5;
			responder_send(r, node, from, &rep);
		} else {
			reply_granted(r, node, req, from, 1000 + req->hdr.seq);
		}
		return;
	case HASP_OP_LOCK_READ: /* another session holds it */
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		rep.body.lock_info.holder_session_id = 999;
		rep.body.lock_info.token = 5;
		rep.body.lock_info.ttl_remaining_ms = 1000;
		rep.body.lock_info.waiter_count = 1;
		responder_send(r, node, from, &rep);
		return;
	case HASP_OP_KV_GET:
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		rep.body.kv_value.revision = req->hdr.seq;
		rep.body.kv_value.value.data = (const uint8_t *)"val";
		rep.body.kv_value.value.size = 3;
		responder_send(r, node, from, &rep);
		return;
	default:
		reply_status(r, node, req, from, HASP_STATUS_OK);
	}
}

struct results {
	uint32_t count;
	uint64_t ids[OPS_MAX];
	int rcs[OPS_MAX];
	uint8_t ops[OPS_MAX];
	uint64_t tokens[OPS_MAX];
	uint64_t revisions[OPS_MAX];
	char values[OPS_MAX][4];
};

static void on_done(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct results *out = arg;
	uint32_t i = out->count++;

	assert_non_null(c);
	assert_true(i < OPS_MAX);
	out->ids[i] = res->id;
	out->rcs[i] = res->rc;
	out->ops[i] = res->op;
	out->tokens[i] = res->lock.token;
	out->revisions[i] = res->value.revision;
	memcpy(out->values[i], res->value.value, 3);
	out->values[i][3] = '\0';
}

/* The application's loop: wait on the fd for the client's timeout, then
 * process, until `want` operations completed. */
static void loop_turn(struct hasp_client *c)
{
	struct pollfd pfd = { .fd = hasp_client_fd(c), .events = POLLIN };
	int timeout = hasp_client_timeout_ms(c);
	uint32_t completed = 0;

	assert_true(pfd.fd >= 0);
	/* Something is in progress until every op completed. */
	assert_true(timeout >= 0);
	assert_true(poll(&pfd, 1, timeout) >= 0);
	assert_int_equal(hasp_client_process(c, &completed), 0);
}

static void run_loop(struct hasp_client *c, const struct results *out, uint32_t want)
{
	for (int turn = 0; turn < LOOP_TURNS_MAX && out->count < want; turn++)
		loop_turn(c);
	assert_int_equal(out->count, want);
}

static void test_one_thread_drives_many_requests(void **state)
{
	static struct script s = { .drop_seq = 7 };
	static struct responder r;
	static struct results out;
	struct hasp_client_config cfg;
	struct hasp_client_stats st;
	char cluster[128];
	enum { N = 300 };
	uint64_t started[N];
	(void)state;

	memset(&out, 0, sizeof(out));
	assert_int_equal(responder_start(&r, 1, script_async, &s), 0);
	test_config(&cfg, NULL);
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	/* Nothing in progress: wait on the fd alone. */
	assert_int_equal(hasp_client_timeout_ms(c), -1);
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "a/%d", i);
		struct hasp_acquire_opts opts = { .ttl_ms = 5000 };
		switch (i % 3) {
		case 0:
			assert_int_equal(hasp_client_acquire_async(c, name, &opts, on_done, &out,
								   &started[i]), 0);
			break;
		case 1:
			assert_int_equal(hasp_client_check_async(c, name, 1, on_done, &out, &started[i]), 0);
			break;
		default:
			assert_int_equal(hasp_client_kv_get_async(c, name, on_done, &out, &started[i]), 0);
		}
	}
	/* Arguments are checked before anything starts. */
	struct hasp_acquire_opts bad = { .ttl_ms = 1 };
	assert_int_equal(hasp_client_acquire_async(c, "x", &bad, on_done, &out, NULL), -HASP_ERANGE);
	assert_int_equal(hasp_client_check_async(c, "has space", 1, on_done, &out, NULL), -HASP_ENAME);
	assert_int_equal(hasp_client_timeout_ms(c), 0); /* work to do now */
	run_loop(c, &out, N);

	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(out.rcs[i], 0);
		/* Ids are unique and each is one that was handed out. */
		assert_true(out.ids[i] >= 1 && out.ids[i] <= N);
		for (uint32_t j = 0; j < i; j++)
			assert_true(out.ids[j] != out.ids[i]);
		uint64_t k = out.ids[i] - 1;
		assert_int_equal(started[k], out.ids[i]);
		assert_int_equal(out.ops[i], k % 3 == 0 ? HASP_OP_ACQUIRE
					     : k % 3 == 1 ? HASP_OP_CHECK : HASP_OP_KV_GET);
		if (k % 3 == 0)
			assert_true(out.tokens[i] > 1000); /* 1000 + its seq */
		if (k % 3 == 2)
			assert_string_equal(out.values[i], "val");
	}
	hasp_client_stats_get(c, &st);
	assert_int_equal(st.tx_requests, N + 1);  /* each once, and the session open */
	assert_true(st.tx_retransmits >= 1);       /* seq 7 was lost: the loop's timer resent it */
	assert_int_equal(st.rx_replies, N + 1);
	assert_int_equal(st.timeouts, 0);
	/* Nothing left but the session's next keepalive, which the loop sends. */
	assert_true(hasp_client_timeout_ms(c) > 0);
	hasp_client_close(c);
	responder_stop(&r);
}

/* A request a callback starts is sent before hasp_client_process returns
 * (hasp-bench's RELEASE after a grant), not by the next call. */
struct chain {
	struct results out;
	int release_rc;
};

static void on_granted_release(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct chain *ch = arg;

	on_done(c, res, &ch->out);
	if (res->rc == 0)
		ch->release_rc = hasp_client_release_async(c, "chain", res->lock.token, on_done,
							   &ch->out, NULL);
}

static void test_callback_request_sent_in_the_same_process(void **state)
{
	static struct script s;
	static struct responder r;
	static struct chain ch;
	struct hasp_client_config cfg;
	struct hasp_client_stats st;
	char cluster[128];
	(void)state;

	memset(&ch, 0, sizeof(ch));
	ch.release_rc = 1;
	assert_int_equal(responder_start(&r, 1, script_async, &s), 0);
	test_config(&cfg, NULL);
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	struct hasp_acquire_opts opts = { .ttl_ms = 5000 };
	assert_int_equal(hasp_client_acquire_async(c, "chain", &opts, on_granted_release, &ch, NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && ch.out.count == 0; turn++)
		loop_turn(c);
	assert_int_equal(ch.out.count, 1);
	assert_int_equal(ch.out.rcs[0], 0);
	assert_int_equal(ch.release_rc, 0);
	/* The call that ran the grant's callback also sent the RELEASE:
	 * session open, ACQUIRE, RELEASE. */
	hasp_client_stats_get(c, &st);
	assert_int_equal(st.tx_requests, 3);
	run_loop(c, &ch.out, 2);
	assert_int_equal(ch.out.ops[1], HASP_OP_RELEASE);
	assert_int_equal(ch.out.rcs[1], 0);
	hasp_client_close(c);
	responder_stop(&r);
}

static void test_wait_granted_by_event_and_cancelled_by_id(void **state)
{
	static struct script s;
	static struct responder r;
	static struct results out;
	struct hasp_client_config cfg;
	struct hasp_client_stats st;
	char cluster[128];
	uint64_t id1 = 0, id2 = 0, id3 = 0;
	(void)state;

	memset(&out, 0, sizeof(out));
	assert_int_equal(responder_start(&r, 1, script_async, &s), 0);
	test_config(&cfg, NULL);
	cfg.wait_recheck_ms = 100;
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	struct hasp_acquire_opts opts = { .ttl_ms = 5000, .wait = true };
	responder_lock(&r);
	s.grant_at_ns = clock_monotonic_ns() + 100 * MS;
	responder_unlock(&r);
	assert_int_equal(hasp_client_acquire_async(c, "job", &opts, on_done, &out, &id1), 0);
	run_loop(c, &out, 1);
	assert_int_equal(out.ids[0], id1);
	assert_int_equal(out.rcs[0], 0);
	assert_int_equal(out.tokens[0], 77); /* from the pushed LOCK_GRANTED */

	/* Never granted: cancelled by id once it is queued (its rechecks
	 * keep seeing another holder). */
	assert_int_equal(hasp_client_acquire_async(c, "other", &opts, on_done, &out, &id2), 0);
	assert_int_equal(hasp_client_check_async(c, "job", 77, on_done, &out, &id3), 0);
	run_loop(c, &out, 2); /* the CHECK completes; the WAIT stays queued */
	assert_int_equal(out.ids[1], id3);
	for (int i = 0; i < 100 && responder_count(&r, HASP_OP_LOCK_READ, -1) == 0; i++)
		loop_turn(c); /* until a recheck went out */
	assert_true(responder_count(&r, HASP_OP_LOCK_READ, -1) >= 1);
	assert_int_equal(hasp_client_cancel(c, id2), 0);
	run_loop(c, &out, 3);
	assert_int_equal(out.ids[2], id2);
	assert_int_equal(out.rcs[2], -HASP_ECANCELED);
	assert_int_equal(responder_count(&r, HASP_OP_CANCEL, -1), 1); /* the queue entry went */
	assert_int_equal(hasp_client_cancel(c, id2), -HASP_ENOENT);   /* over already */
	hasp_client_stats_get(c, &st);
	assert_int_equal(st.wait_cancels, 1);
	hasp_client_close(c);
	responder_stop(&r);
}

/* A cancel that comes after the request's final answer was received (read
 * off the socket by a blocking call on another path, not yet seen by the
 * loop) is too late: the operation happened on the cluster, so it
 * completes with that answer (a TRY acquire's grant is the caller's, not a
 * lock nobody owns), and its window slot is free again. Issue 17: the slot
 * was kept as if a late reply were still to come, none ever came, and
 * every such cancel leaked one of the 32 slots until the session had to
 * be replaced. */
static void test_cancel_after_the_reply_came_completes_with_it(void **state)
{
	static struct script s;
	static struct responder r;
	static struct results out;
	struct hasp_client_config cfg;
	struct hasp_client_stats st;
	struct hasp_lock_info info;
	char cluster[128];
	enum { N = 40 }; /* more than a window: each race took one slot */
	(void)state;

	memset(&out, 0, sizeof(out));
	memset(&s, 0, sizeof(s));
	assert_int_equal(responder_start(&r, 1, script_async, &s), 0);
	test_config(&cfg, NULL);
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	assert_int_equal(hasp_client_connect(c), 0);
	uint64_t session = hasp_client_session_id(c);
	assert_true(session != 0);
	for (uint32_t i = 0; i < N; i++) {
		struct hasp_acquire_opts opts = { .ttl_ms = 5000 };
		uint32_t completed = 0;
		uint64_t id = 0;
		char name[32];

		snprintf(name, sizeof(name), "race/%u", i);
		if (i % 2 == 0)
			assert_int_equal(hasp_client_acquire_async(c, name, &opts, on_done, &out, &id), 0);
		else
			assert_int_equal(hasp_client_kv_get_async(c, name, on_done, &out, &id), 0);
		assert_int_equal(hasp_client_process(c, &completed), 0); /* sends it */
		assert_int_equal(completed, 0);
		/* The responder answers in order, so this call, which reads
		 * the socket until its own answer, dispatches the async one's
		 * first. */
		assert_int_equal(hasp_client_lock_read(c, "other", &info), 0);
		assert_int_equal(hasp_client_cancel(c, id), 0);
		assert_int_equal(hasp_client_process(c, &completed), 0);
		assert_int_equal(completed, 1);
		assert_int_equal(out.count, i + 1);
		assert_int_equal(out.ids[i], id);
		assert_int_equal(out.rcs[i], 0); /* what the cluster did */
		if (i % 2 == 0)
			assert_true(out.tokens[i] > 1000); /* granted: the caller's lock */
		else
			assert_string_equal(out.values[i], "val");
	}
	hasp_client_stats_get(c, &st);
	assert_int_equal(st.session_opens, 1); /* the window never filled */
	assert_int_equal(hasp_client_session_id(c), session);
	assert_int_equal(st.timeouts, 0);
	hasp_client_close(c);
	responder_stop(&r);
}

struct blocking_wait {
	struct hasp_client *c;
	int rc;
};

static void *blocking_wait_main(void *arg)
{
	struct blocking_wait *b = arg;
	struct hasp_acquire_opts opts = { .ttl_ms = 5000, .wait = true }; /* no time limit */
	struct hasp_lock lock;

	b->rc = hasp_client_acquire(b->c, "other", &opts, &lock);
	return NULL;
}

/* A blocking WAIT without a time limit ends when another thread cancels
 * it, and its queue entry is removed on the cluster. */
static void test_blocking_wait_cancelled_from_another_thread(void **state)
{
	static struct script s;
	static struct responder r;
	struct hasp_client_config cfg;
	struct hasp_client_stats st;
	struct blocking_wait b = { 0 };
	pthread_t t;
	char cluster[128];
	(void)state;

	assert_int_equal(responder_start(&r, 1, script_async, &s), 0);
	test_config(&cfg, NULL);
	cfg.wait_recheck_ms = 60000; /* the waiter sits in one long wait */
	b.c = client_on(&r, &cfg, cluster, sizeof(cluster));
	assert_int_equal(hasp_client_cancel_wait(b.c, "other"), -HASP_ENOENT); /* nobody waits */
	assert_int_equal(pthread_create(&t, NULL, blocking_wait_main, &b), 0);
	/* Until the ACQUIRE was answered QUEUED (bounded: 3000 x 1 ms). */
	for (int i = 0; i < 3000 && responder_count(&r, HASP_OP_ACQUIRE, -1) == 0; i++)
		usleep(1000);
	assert_int_equal(responder_count(&r, HASP_OP_ACQUIRE, -1), 1);
	assert_int_equal(hasp_client_cancel_wait(b.c, "other"), 0);
	pthread_join(t, NULL);
	assert_int_equal(b.rc, -HASP_ECANCELED);
	assert_int_equal(responder_count(&r, HASP_OP_CANCEL, -1), 1);
	hasp_client_stats_get(b.c, &st);
	assert_int_equal(st.wait_cancels, 1);
	hasp_client_close(b.c);
	responder_stop(&r);
}

struct checker {
	struct hasp_client *c;
	int failures;
	int last_rc;
};

static void *checker_main(void *arg)
{
	struct checker *k = arg;

	for (int i = 0; i < 50; i++) {
		int rc = hasp_client_check(k->c, "job", 1);
		if (rc != 0) {
			k->failures++;
			k->last_rc = rc;
		}
	}
	return NULL;
}

/* Blocking calls on other threads and the loop share one client: every
 * request completes once (a TSan target: docs/CLIENT.md "Threads"). */
static void test_blocking_threads_and_the_loop_share_a_client(void **state)
{
	static struct script s;
	static struct responder r;
	static struct results out;
	struct hasp_client_config cfg;
	struct hasp_client_stats st;
	struct checker k[2];
	pthread_t t[2];
	char cluster[128];
	enum { N = 100 };
	(void)state;

	memset(&out, 0, sizeof(out));
	assert_int_equal(responder_start(&r, 1, script_async, &s), 0);
	test_config(&cfg, NULL);
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	for (int i = 0; i < 2; i++) {
		k[i] = (struct checker){ .c = c };
		assert_int_equal(pthread_create(&t[i], NULL, checker_main, &k[i]), 0);
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(hasp_client_kv_get_async(c, "key", on_done, &out, NULL), 0);
	run_loop(c, &out, N);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(k[i].last_rc, 0); /* names the error */
		assert_int_equal(k[i].failures, 0);
	}
	for (uint32_t i = 0; i < N; i++)
		assert_int_equal(out.rcs[i], 0);
	hasp_client_stats_get(c, &st);
	assert_int_equal(st.tx_requests, N + 100 + 1);
	assert_int_equal(st.timeouts, 0);
	hasp_client_close(c);
	responder_stop(&r);
}

/* ---- connect, watch, unwatch, kv_range in their asynchronous forms ---- */

struct watch_script {
	uint32_t checks; /* the 1st and 3rd CHECK answer SESSION_EXPIRED */
	uint64_t last_index; /* WATCH_STATUS: the last event sent, (index, 0) */
};

static void script_watches(struct responder *r, int node, const struct hasp_wire_msg *req,
			   const struct sockaddr_in *from, void *arg)
{
	struct watch_script *s = arg;

	if (req == NULL || responder_answer_session(r, node, req, from))
		return;
	if (req->hdr.opcode == HASP_OP_WATCH && req->body.watch.name.size == 4 &&
	    memcmp(req->body.watch.name.data, "deny", 4) == 0) {
		reply_status(r, node, req, from, HASP_STATUS_FORBIDDEN);
		return;
	}
	if (req->hdr.opcode == HASP_OP_WATCH_STATUS) {
		struct hasp_wire_msg rep;
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		responder_lock(r);
		rep.body.watch_status.count = 1;
		rep.body.watch_status.last_event_index = s->last_index;
		responder_unlock(r);
		responder_send(r, node, from, &rep);
		return;
	}
	if (req->hdr.opcode == HASP_OP_CHECK) {
		responder_lock(r);
		uint32_t n = s->checks++;
		responder_unlock(r);
		if (n == 0 || n == 2) {
			reply_status(r, node, req, from, HASP_STATUS_SESSION_EXPIRED);
			return;
		}
	}
	reply_status(r, node, req, from, HASP_STATUS_OK);
}

/* Requests with this opcode the responder received, each counted once
 * however often it was retransmitted (same session and seq), and, when
 * `name` is set, only WATCH/UNWATCH of that name. A loaded machine may
 * delay a reply past the test's 50 ms request timeout. */
static uint32_t requests_distinct(struct responder *r, uint8_t opcode, const char *name)
{
	uint64_t seen_session[64], seen_seq[64];
	uint32_t count = 0;
	struct responder_rx x;

	for (uint32_t i = 0; responder_find(r, opcode, i, &x); i++) {
		struct hasp_wire_msg m;
		bool dup = false;
		if (name != NULL) {
			assert_int_equal(hasp_wire_decode_request(x.data, x.size, &m), 0);
			if (m.body.watch.name.size != strlen(name) ||
			    memcmp(m.body.watch.name.data, name, strlen(name)) != 0)
				continue;
		}
		for (uint32_t j = 0; j < count; j++)
			dup |= seen_session[j] == x.hdr.session_id && seen_seq[j] == x.hdr.seq;
		if (dup)
			continue;
		assert_true(count < 64);
		seen_session[count] = x.hdr.session_id;
		seen_seq[count] = x.hdr.seq;
		count++;
	}
	return count;
}

/* hasp_client_session_keepalive_async: opens the session first if it has
 * none, then sends one SESSION_KEEPALIVE, which the loop completes; an
 * expired session answers -HASP_ESESSION, and the next call opens
 * another. */
static void test_session_keepalive_async(void **state)
{
	static struct script s;
	static struct responder r;
	static struct results out;
	struct hasp_client_config cfg;
	char cluster[128];
	uint64_t id = 0;
	(void)state;

	memset(&out, 0, sizeof(out));
	memset(&s, 0, sizeof(s));
	assert_int_equal(responder_start(&r, 1, script_async, &s), 0);
	test_config(&cfg, NULL);
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	assert_int_equal(hasp_client_session_keepalive_async(c, NULL, NULL, NULL), -HASP_EINVAL);
	assert_int_equal(hasp_client_session_keepalive_async(NULL, on_done, &out, NULL), -HASP_EINVAL);
	assert_int_equal(hasp_client_session_keepalive_async(c, on_done, &out, &id), 0);
	run_loop(c, &out, 1);
	assert_int_equal(out.rcs[0], 0);
	assert_int_equal(out.ops[0], HASP_OP_SESSION_KEEPALIVE);
	assert_int_equal(out.ids[0], id);
	uint64_t session = hasp_client_session_id(c);
	assert_int_not_equal(session, 0);
	assert_int_equal(responder_count(&r, HASP_OP_SESSION_OPEN, -1), 1);
	assert_int_equal(responder_count(&r, HASP_OP_SESSION_KEEPALIVE, -1), 1);

	/* The cluster forgot the session: the keepalive says so. */
	responder_lock(&r);
	s.expired_session = session;
	responder_unlock(&r);
	assert_int_equal(hasp_client_session_keepalive_async(c, on_done, &out, NULL), 0);
	run_loop(c, &out, 2);
	assert_int_equal(out.rcs[1], -HASP_ESESSION);
	assert_int_equal(out.ops[1], HASP_OP_SESSION_KEEPALIVE);
	/* The next one opens another session and is answered in it. */
	assert_int_equal(hasp_client_session_keepalive_async(c, on_done, &out, NULL), 0);
	run_loop(c, &out, 3);
	assert_int_equal(out.rcs[2], 0);
	assert_int_not_equal(hasp_client_session_id(c), 0);
	assert_int_not_equal(hasp_client_session_id(c), session);
	hasp_client_close(c);
	responder_stop(&r);
}

static void test_connect_watch_unwatch_async(void **state)
{
	static struct watch_script s;
	static struct responder r;
	static struct results out;
	struct hasp_client_config cfg;
	struct hasp_event ev;
	char cluster[128];
	uint64_t id = 0;
	(void)state;

	memset(&out, 0, sizeof(out));
	memset(&s, 0, sizeof(s));
	assert_int_equal(responder_start(&r, 1, script_watches, &s), 0);
	test_config(&cfg, NULL);
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	/* Arguments are checked before anything starts. */
	assert_int_equal(hasp_client_connect_async(c, NULL, NULL, NULL), -HASP_EINVAL);
	assert_int_equal(hasp_client_watch_async(c, "svc/", true, NULL, NULL, NULL), -HASP_EINVAL);
	assert_int_equal(hasp_client_watch_async(c, "has space", false, on_done, &out, NULL),
			 -HASP_ENAME);
	assert_int_equal(hasp_client_unwatch_async(c, "", false, on_done, &out, NULL), -HASP_ENAME);
	assert_int_equal(hasp_client_timeout_ms(c), -1); /* nothing started */

	/* connect: the session opens in the loop, nothing else is sent. */
	assert_int_equal(hasp_client_connect_async(c, on_done, &out, &id), 0);
	assert_int_equal(hasp_client_session_id(c), 0);
	run_loop(c, &out, 1);
	assert_int_equal(out.rcs[0], 0);
	assert_int_equal(out.ops[0], HASP_OP_SESSION_OPEN);
	assert_int_equal(out.ids[0], id);
	assert_int_not_equal(hasp_client_session_id(c), 0);
	/* The SESSION_OPEN alone was sent. */
	assert_int_equal(responder_count(&r, 0, -1), responder_count(&r, HASP_OP_SESSION_OPEN, -1));

	/* watch: registered; a refused one reports the cluster's word. */
	uint64_t svc_id = 0, deny_id = 0;
	assert_int_equal(hasp_client_watch_async(c, "svc/", true, on_done, &out, &svc_id), 0);
	assert_int_equal(hasp_client_watch_async(c, "deny", false, on_done, &out, &deny_id), 0);
	run_loop(c, &out, 3);
	for (uint32_t i = 1; i < 3; i++) {
		assert_int_equal(out.ops[i], HASP_OP_WATCH);
		assert_true(out.ids[i] == svc_id || out.ids[i] == deny_id);
		assert_int_equal(out.rcs[i], out.ids[i] == svc_id ? 0 : -HASP_EFORBIDDEN);
	}
	assert_int_not_equal(out.ids[1], out.ids[2]);
	assert_int_equal(requests_distinct(&r, HASP_OP_WATCH, NULL), 2);
	/* The watch delivers. */
	responder_push_event(&r, 0, HASP_EVENT_KV_PUT, "svc/b", 11, "hi", 2);
	assert_int_equal(hasp_client_next_event(c, &ev, 3000), 0);
	assert_int_equal(ev.type, HASP_EVENT_KV_PUT);
	assert_string_equal(ev.name, "svc/b");

	/* watch progress: the loop completes the WATCH_STATUS; an event the
	 * leader names as sent but that never came is a RESYNC, queued before
	 * the callback runs (the blocking form: test_client.c). */
	assert_int_equal(hasp_client_watch_progress_async(c, NULL, NULL, NULL), -HASP_EINVAL);
	responder_lock(&r);
	s.last_index = 1; /* the KV_PUT above: received */
	responder_unlock(&r);
	assert_int_equal(hasp_client_watch_progress_async(c, on_done, &out, &id), 0);
	run_loop(c, &out, 4);
	assert_int_equal(out.ops[3], HASP_OP_WATCH_STATUS);
	assert_int_equal(out.rcs[3], 0);
	assert_int_equal(out.ids[3], id);
	assert_int_equal(hasp_client_next_event(c, &ev, 0), -HASP_ETIMEDOUT);
	responder_lock(&r);
	s.last_index = 2; /* sent, lost */
	responder_unlock(&r);
	assert_int_equal(hasp_client_watch_progress_async(c, on_done, &out, NULL), 0);
	run_loop(c, &out, 5);
	assert_int_equal(out.rcs[4], 0);
	assert_int_equal(hasp_client_next_event(c, &ev, 0), 0);
	assert_int_equal(ev.type, HASP_EVENT_RESYNC);

	/* A new session registers the accepted watch again, not the refused
	 * one: the table followed both completions. */
	assert_int_equal(hasp_client_check(c, "job", 1), -HASP_ESESSION);
	assert_int_equal(hasp_client_check(c, "job", 1), 0);
	assert_int_equal(requests_distinct(&r, HASP_OP_WATCH, "svc/"), 2);
	assert_int_equal(requests_distinct(&r, HASP_OP_WATCH, "deny"), 1);

	/* unwatch: sent, and forgotten (the next session does not restore it). */
	assert_int_equal(hasp_client_unwatch_async(c, "svc/", true, on_done, &out, NULL), 0);
	run_loop(c, &out, 6);
	assert_int_equal(out.ops[5], HASP_OP_UNWATCH);
	assert_int_equal(out.rcs[5], 0);
	assert_int_equal(requests_distinct(&r, HASP_OP_UNWATCH, "svc/"), 1);
	assert_int_equal(hasp_client_check(c, "job", 1), -HASP_ESESSION);
	assert_int_equal(hasp_client_check(c, "job", 1), 0);
	assert_int_equal(requests_distinct(&r, HASP_OP_CHECK, NULL), 4); /* 2 expired: 3 sessions */
	assert_int_equal(requests_distinct(&r, HASP_OP_WATCH, NULL), 3);
	hasp_client_close(c);
	responder_stop(&r);
}

/* The first session ended on the cluster: its keepalives are answered
 * SESSION_EXPIRED, as a node answers for a session it does not know. */
struct expiry_script {
	uint64_t gone; /* that session's id, 0 until the test names it */
};

static void script_session_gone(struct responder *r, int node, const struct hasp_wire_msg *req,
				const struct sockaddr_in *from, void *arg)
{
	struct expiry_script *s = arg;

	if (req == NULL)
		return;
	responder_lock(r);
	bool gone = s->gone != 0 && req->hdr.session_id == s->gone;
	responder_unlock(r);
	if (gone && req->hdr.opcode != HASP_OP_SESSION_OPEN) {
		reply_status(r, node, req, from, HASP_STATUS_SESSION_EXPIRED);
		return;
	}
	if (responder_answer_session(r, node, req, from))
		return;
	reply_status(r, node, req, from, HASP_STATUS_OK);
}

/* A client that only watches makes no call after its WATCH: when the
 * loop's keepalive finds the session gone, the loop itself opens the next
 * one, registers the watch there and reports the gap with a RESYNC.
 * Before, it stayed without a session, heard nothing and reported nothing
 * (nodesim --seed 11 --watch: a restarted leader that had not applied its
 * log yet answered SESSION_EXPIRED). */
static void test_loop_reopens_a_lost_session_for_its_watches(void **state)
{
	static struct expiry_script s;
	static struct responder r;
	struct hasp_client_config cfg;
	struct hasp_event ev;
	char cluster[128];
	bool resync = false;
	(void)state;

	memset(&s, 0, sizeof(s));
	assert_int_equal(responder_start(&r, 1, script_session_gone, &s), 0);
	test_config(&cfg, NULL);
	cfg.session_ttl_ms = 90; /* a keepalive every 30 ms */
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	assert_int_equal(hasp_client_watch(c, "svc/", true), 0);
	uint64_t first = hasp_client_session_id(c);
	assert_int_not_equal(first, 0);
	responder_lock(&r);
	s.gone = first;
	responder_unlock(&r);

	/* The application's loop, and nothing else; it ends early when the
	 * client has nothing left to do (no timeout: it would wait forever). */
	for (int turn = 0; turn < LOOP_TURNS_MAX && !resync; turn++) {
		struct pollfd pfd = { .fd = hasp_client_fd(c), .events = POLLIN };
		int timeout = hasp_client_timeout_ms(c);
		if (timeout < 0)
			break;
		assert_true(poll(&pfd, 1, timeout) >= 0);
		assert_int_equal(hasp_client_process(c, NULL), 0);
		while (hasp_client_next_event(c, &ev, 0) == 0)
			resync |= ev.type == HASP_EVENT_RESYNC;
	}
	assert_true(resync);
	uint64_t second = hasp_client_session_id(c);
	assert_int_not_equal(second, 0);
	assert_int_not_equal(second, first);
	/* Registered in both sessions, and the new one delivers. */
	assert_int_equal(requests_distinct(&r, HASP_OP_WATCH, "svc/"), 2);
	responder_push_event(&r, 0, HASP_EVENT_KV_PUT, "svc/b", 11, "hi", 2);
	assert_int_equal(hasp_client_next_event(c, &ev, 3000), 0);
	assert_int_equal(ev.type, HASP_EVENT_KV_PUT);
	assert_string_equal(ev.name, "svc/b");
	hasp_client_close(c);
	responder_stop(&r);
}

static void script_lease(struct responder *r, int node, const struct hasp_wire_msg *req,
			 const struct sockaddr_in *from, void *arg)
{
	struct hasp_wire_msg rep;
	(void)arg;

	if (req == NULL || responder_answer_session(r, node, req, from))
		return;
	if (req->hdr.opcode == HASP_OP_LEASE_GRANT || req->hdr.opcode == HASP_OP_LEASE_KEEPALIVE) {
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		rep.body.lease_ok.lease_id = 7;
		rep.body.lease_ok.ttl_ms = 90;
		responder_send(r, node, from, &rep);
		return;
	}
	reply_status(r, node, req, from, HASP_STATUS_OK);
}

/* Turns the loop until the responder has seen `want` requests of `opcode`
 * (bounded in turns and in time). */
static void loop_until_seen(struct hasp_client *c, struct responder *r, uint8_t opcode,
			    uint32_t want)
{
	uint64_t give_up = clock_monotonic_ns() + 20000000000ull;

	for (int turn = 0; turn < LOOP_TURNS_MAX && responder_count(r, opcode, -1) < want &&
			   clock_monotonic_ns() < give_up;
	     turn++) {
		struct pollfd pfd = { .fd = hasp_client_fd(c), .events = POLLIN };
		int timeout = hasp_client_timeout_ms(c);
		assert_true(timeout >= 0); /* the session's keepalive is always due */
		assert_true(poll(&pfd, 1, timeout) >= 0);
		assert_int_equal(hasp_client_process(c, NULL), 0);
	}
	assert_true(responder_count(r, opcode, -1) >= want);
}

/* Without a keepalive thread the application's loop keeps the client's
 * leases (a third of the TTL), and stops at once for a revoked one. */
static void test_loop_keeps_a_lease_alive_until_revoked(void **state)
{
	static struct responder r;
	struct hasp_client_config cfg;
	struct hasp_lease lease;
	char cluster[128];
	(void)state;

	assert_int_equal(responder_start(&r, 1, script_lease, NULL), 0);
	test_config(&cfg, NULL);
	cfg.session_ttl_ms = 90;
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	assert_int_equal(hasp_client_lease_grant(c, 90, &lease), 0);
	assert_int_equal(lease.lease_id, 7);
	loop_until_seen(c, &r, HASP_OP_LEASE_KEEPALIVE, 3);

	assert_int_equal(hasp_client_lease_revoke(c, 7), 0);
	uint32_t renewed = responder_count(&r, HASP_OP_LEASE_KEEPALIVE, -1);
	uint32_t sessions = responder_count(&r, HASP_OP_SESSION_KEEPALIVE, -1);
	/* Three more session keepalives: the loop ran for a whole lease
	 * period (at least) after the revoke, and renewed nothing. */
	loop_until_seen(c, &r, HASP_OP_SESSION_KEEPALIVE, sessions + 3);
	assert_int_equal(responder_count(&r, HASP_OP_LEASE_KEEPALIVE, -1), renewed);
	hasp_client_close(c);
	responder_stop(&r);
}

/* A keepalive of a lease answered after the lease was revoked must not put
 * the lease back on the loop's list: it was, and the loop renewed a revoked
 * lease from then on (a lease lock's validity read from it too). The
 * keepalive is started, then the revoke runs; the keepalive's answer is
 * handed to its op by the next process call, after the revoke. */
static void test_a_keepalive_answered_after_a_revoke_does_not_bring_the_lease_back(void **state)
{
	static struct responder r;
	static struct results out;
	struct hasp_client_config cfg;
	struct hasp_lease lease;
	char cluster[128];
	(void)state;

	memset(&out, 0, sizeof(out));
	assert_int_equal(responder_start(&r, 1, script_lease, NULL), 0);
	test_config(&cfg, NULL);
	cfg.session_ttl_ms = 90;
	cfg.request_timeout_ms = 2000; /* no resends: every datagram counted is a request */
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	assert_int_equal(hasp_client_lease_grant(c, 90, &lease), 0);
	assert_int_equal(hasp_client_lease_keepalive_async(c, 7, on_done, &out, NULL), 0);
	assert_int_equal(hasp_client_lease_revoke(c, 7), 0);
	run_loop(c, &out, 1);
	assert_int_equal(out.rcs[0], 0); /* the cluster did renew it, before the revoke */
	uint32_t renewed = responder_count(&r, HASP_OP_LEASE_KEEPALIVE, -1);
	uint32_t sessions = responder_count(&r, HASP_OP_SESSION_KEEPALIVE, -1);
	/* Three session keepalives (30 ms apart): a lease kept at 90 ms would
	 * have been renewed meanwhile. */
	loop_until_seen(c, &r, HASP_OP_SESSION_KEEPALIVE, sessions + 3);
	assert_int_equal(responder_count(&r, HASP_OP_LEASE_KEEPALIVE, -1), renewed);
	hasp_client_close(c);
	responder_stop(&r);
}

/* range_fn runs without the client's lock: it may call the client. */
struct range_async {
	struct hasp_client *c;
	struct range_seen seen;
	int stop_after; /* return 1 after this many entries (0: never) */
	int locked_calls;
};

static int range_async_collect(const struct hasp_kv_entry *e, void *arg)
{
	struct range_async *ra = arg;

	range_collect(e, &ra->seen);
	ra->locked_calls += hasp_client_session_id(ra->c) != 0; /* takes the lock */
	return ra->stop_after != 0 && ra->seen.count >= ra->stop_after;
}

static void test_kv_range_async_follows_more(void **state)
{
	static struct responder r;
	static struct results out;
	struct hasp_client_config cfg;
	struct range_async ra;
	char cluster[128];
	(void)state;

	memset(&out, 0, sizeof(out));
	assert_int_equal(responder_start(&r, 1, script_kv_range_two_per_datagram, NULL), 0);
	test_config(&cfg, NULL);
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	memset(&ra, 0, sizeof(ra));
	ra.c = c;
	assert_int_equal(hasp_client_kv_range_async(c, "k", 0, NULL, NULL, on_done, &out, NULL),
			 -HASP_EINVAL);
	assert_int_equal(hasp_client_kv_range_async(c, "bad key", 0, range_async_collect, &ra,
						    on_done, &out, NULL),
			 -HASP_ENAME);
	assert_int_equal(hasp_client_kv_range_async(c, "k", 0, range_async_collect, &ra, on_done,
						    &out, NULL),
			 0);
	run_loop(c, &out, 1);
	assert_int_equal(out.rcs[0], 0);
	assert_int_equal(out.ops[0], HASP_OP_KV_RANGE);
	/* Every key once, in order, across three datagrams (MORE followed). */
	assert_int_equal(ra.seen.count, 5);
	for (int i = 0; i < 5; i++) {
		assert_string_equal(ra.seen.keys[i], range_keys[i]);
		assert_int_equal(ra.seen.revisions[i], 100 + i);
	}
	assert_int_equal(ra.locked_calls, 5);
	assert_int_equal(requests_distinct(&r, HASP_OP_KV_RANGE, NULL), 3);

	/* A limit, and a range_fn that stops, end the walk early. */
	memset(&ra.seen, 0, sizeof(ra.seen));
	assert_int_equal(hasp_client_kv_range_async(c, NULL, 3, range_async_collect, &ra, on_done,
						    &out, NULL),
			 0);
	run_loop(c, &out, 2);
	assert_int_equal(out.rcs[1], 0);
	assert_int_equal(ra.seen.count, 3);
	assert_int_equal(requests_distinct(&r, HASP_OP_KV_RANGE, NULL), 5);
	memset(&ra.seen, 0, sizeof(ra.seen));
	ra.stop_after = 1;
	assert_int_equal(hasp_client_kv_range_async(c, "k", 0, range_async_collect, &ra, on_done,
						    &out, NULL),
			 0);
	run_loop(c, &out, 3);
	assert_int_equal(out.rcs[2], 0);
	assert_int_equal(ra.seen.count, 1);
	assert_int_equal(requests_distinct(&r, HASP_OP_KV_RANGE, NULL), 6);
	hasp_client_close(c);
	responder_stop(&r);
}

/* ---- a blocking caller waiting for a window slot the loop frees ---- */

struct held_gets {
	int release; /* atomic: answer KV_GET seq 1 (before: every send of it is lost) */
};

static void script_held_gets(struct responder *r, int node, const struct hasp_wire_msg *req,
			     const struct sockaddr_in *from, void *arg)
{
	struct held_gets *h = arg;

	if (req == NULL || responder_answer_session(r, node, req, from))
		return;
	if (req->hdr.opcode == HASP_OP_KV_GET && req->hdr.seq == 1 &&
	    !__atomic_load_n(&h->release, __ATOMIC_ACQUIRE))
		return;
	reply_status(r, node, req, from, HASP_STATUS_OK);
}

static void *one_check_main(void *arg)
{
	struct checker *k = arg;

	k->last_rc = hasp_client_check(k->c, "job", 1);
	return NULL;
}

/* A blocking call finds the window full (its seq 33 needs the slot of seq
 * 1, a request of the loop's that goes unanswered) and waits in poll(2) on
 * the socket for everyone. When seq 1's reply comes, the blocking thread
 * reads it, and the loop frees the slot when it consumes it; no datagram
 * follows, so only a wake-up of that poll lets the call go on: without it
 * the call slept to its deadline and returned -HASP_ETIMEDOUT (seen under
 * TSan's timing first). */
static void test_blocking_caller_woken_when_the_loop_frees_a_slot(void **state)
{
	static struct held_gets h;
	static struct responder r;
	static struct results out;
	struct hasp_client_config cfg;
	struct checker k = { 0 };
	pthread_t t;
	char cluster[128];
	enum { N = 32 }; /* the whole window */
	(void)state;

	memset(&out, 0, sizeof(out));
	__atomic_store_n(&h.release, 0, __ATOMIC_RELEASE);
	assert_int_equal(responder_start(&r, 1, script_held_gets, &h), 0);
	test_config(&cfg, NULL);
	k.c = client_on(&r, &cfg, cluster, sizeof(cluster));
	assert_int_equal(hasp_client_connect(k.c), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(hasp_client_kv_get_async(k.c, "key", on_done, &out, NULL), 0);
	/* Every one answered but seq 1. */
	run_loop(k.c, &out, N - 1);
	assert_int_equal(pthread_create(&t, NULL, one_check_main, &k), 0);
	usleep(100 * 1000); /* it takes the receiver's poll (later: the same end) */
	__atomic_store_n(&h.release, 1, __ATOMIC_RELEASE);
	run_loop(k.c, &out, N);
	pthread_join(t, NULL);
	assert_int_equal(k.last_rc, 0);
	assert_int_equal(requests_distinct(&r, HASP_OP_CHECK, NULL), 1);
	hasp_client_close(k.c);
	responder_stop(&r);
}

/* More requests than the window: slots go to the oldest waiting ones and
 * callbacks run in the order the calls were made (a newest-first list
 * gave freed slots to the newest, which could starve the oldest). */
static void test_window_slots_and_callbacks_in_start_order(void **state)
{
	static struct script s;
	static struct responder r;
	static struct results out;
	struct hasp_client_config cfg;
	char cluster[128];
	enum { N = 80 }; /* two and a half windows */
	uint64_t ids[N];
	(void)state;

	memset(&out, 0, sizeof(out));
	memset(&s, 0, sizeof(s));
	assert_int_equal(responder_start(&r, 1, script_async, &s), 0);
	test_config(&cfg, NULL);
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	assert_int_equal(hasp_client_connect(c), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(hasp_client_kv_get_async(c, "key", on_done, &out, &ids[i]), 0);
	run_loop(c, &out, N);
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(out.rcs[i], 0);
		assert_int_equal(out.ids[i], ids[i]);
		/* The i-th call took the i-th number: seq = revision here. */
		assert_int_equal(out.revisions[i], i + 1);
	}
	hasp_client_close(c);
	responder_stop(&r);
}

/* The op records the loop reuses (the spare op of client_op_new). */
struct reuse {
	struct results out;
	const struct hasp_result *res_seen[8]; /* the records the callbacks got */
	uint64_t next_id;                       /* the op a callback started */
	int next_rc;
};

/* Records the outcome; a grant starts its RELEASE, the RELEASE's end a
 * KV_GET: each from inside the callback of the op before it. */
static void on_reuse(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct reuse *u = arg;
	uint32_t i = u->out.count;

	assert_true(i < 8);
	u->res_seen[i] = res;
	on_done(c, res, &u->out);
	if (res->op == HASP_OP_ACQUIRE && res->rc == 0)
		u->next_rc = hasp_client_release_async(c, res->lock.name, res->lock.token, on_reuse,
						       u, &u->next_id);
	else if (res->op == HASP_OP_RELEASE)
		u->next_rc = hasp_client_kv_get_async(c, "key", on_reuse, u, &u->next_id);
}

/* A finished op's record serves the next op (docs/PERFORMANCE.md, "fewer
 * instructions per request"), also one started from a callback while
 * other ops are in flight: each op still completes once with its own
 * outcome and id, and a cancel of a finished op's id does not reach the
 * op that took over its record. */
static void test_reused_op_records_keep_ids_and_outcomes_apart(void **state)
{
	static struct script s;
	static struct responder r;
	static struct reuse u;
	static struct results waits;
	struct hasp_client_config cfg;
	char cluster[128];
	uint64_t wait_id = 0, get_id = 0, acquire_id = 0;
	(void)state;

	memset(&u, 0, sizeof(u));
	memset(&waits, 0, sizeof(waits));
	memset(&s, 0, sizeof(s));
	assert_int_equal(responder_start(&r, 1, script_async, &s), 0);
	test_config(&cfg, NULL);
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	assert_int_equal(hasp_client_connect(c), 0);
	/* In flight throughout: a WAIT that is never granted. */
	struct hasp_acquire_opts wait = { .ttl_ms = 5000, .wait = true };
	assert_int_equal(hasp_client_acquire_async(c, "other", &wait, on_done, &waits, &wait_id), 0);

	assert_int_equal(hasp_client_kv_get_async(c, "key", on_reuse, &u, &get_id), 0);
	run_loop(c, &u.out, 1);
	assert_int_equal(u.out.ids[0], get_id);
	/* The next op takes the finished one's record; the finished op's id
	 * names nothing now, and cancelling it leaves the new op alone. */
	struct hasp_acquire_opts try = { .ttl_ms = 5000 };
	assert_int_equal(hasp_client_acquire_async(c, "mine", &try, on_reuse, &u, &acquire_id), 0);
	assert_int_equal(hasp_client_cancel(c, get_id), -HASP_ENOENT);
	/* The grant's callback starts the RELEASE, the RELEASE's the KV_GET
	 * (which gets the record the grant's callback had). */
	run_loop(c, &u.out, 4);
	assert_int_equal(u.next_rc, 0);
	assert_int_equal(u.out.ids[1], acquire_id);
	assert_int_equal(u.out.ops[1], HASP_OP_ACQUIRE);
	assert_int_equal(u.out.rcs[1], 0);
	assert_true(u.out.tokens[1] > 1000);
	assert_int_equal(u.out.ops[2], HASP_OP_RELEASE);
	assert_int_equal(u.out.rcs[2], 0);
	assert_int_equal(u.out.tokens[2], u.out.tokens[1]);
	assert_int_equal(u.out.ops[3], HASP_OP_KV_GET);
	assert_int_equal(u.out.rcs[3], 0);
	assert_int_equal(u.out.ids[3], u.next_id);
	assert_string_equal(u.out.values[3], "val");
	assert_int_equal(u.out.tokens[3], 0); /* nothing of the grant left in it */
	/* Every id once, rising. */
	assert_true(get_id < acquire_id && acquire_id < u.out.ids[2] && u.out.ids[2] < u.next_id);
	/* The records were reused indeed (what this test is about). */
	assert_ptr_equal(u.res_seen[1], u.res_seen[0]);
	assert_ptr_equal(u.res_seen[3], u.res_seen[1]);
	/* The WAIT went on meanwhile, and its own id still reaches it. */
	assert_int_equal(waits.count, 0);
	assert_int_equal(hasp_client_cancel(c, acquire_id), -HASP_ENOENT);
	assert_int_equal(hasp_client_cancel(c, wait_id), 0);
	run_loop(c, &waits, 1);
	assert_int_equal(waits.ids[0], wait_id);
	assert_int_equal(waits.rcs[0], -HASP_ECANCELED);
	assert_int_equal(u.out.count, 4);
	hasp_client_close(c);
	responder_stop(&r);
}

/* A request says that its session sends no lower number again
 * (HASP_WIRE_F_SEQ_FLOOR) only when no lower number still waits for its
 * reply: the node then drops the replies it keeps for them. */
static void test_seq_floor_only_when_nothing_lower_waits(void **state)
{
	static struct script s;
	static struct responder r;
	static struct results out;
	struct hasp_client_config cfg;
	struct responder_rx rx;
	char cluster[128];
	uint16_t flags[4] = { 0 };
	bool seen[4] = { false };
	(void)state;

	memset(&out, 0, sizeof(out));
	memset(&s, 0, sizeof(s));
	assert_int_equal(responder_start(&r, 1, script_async, &s), 0);
	test_config(&cfg, NULL);
	struct hasp_client *c = client_on(&r, &cfg, cluster, sizeof(cluster));
	assert_int_equal(hasp_client_connect(c), 0);
	/* Two at once: the second is sent while the first waits. */
	assert_int_equal(hasp_client_kv_get_async(c, "key", on_done, &out, NULL), 0);
	assert_int_equal(hasp_client_kv_get_async(c, "key", on_done, &out, NULL), 0);
	run_loop(c, &out, 2);
	/* Then one alone. */
	assert_int_equal(hasp_client_kv_get_async(c, "key", on_done, &out, NULL), 0);
	run_loop(c, &out, 3);
	for (uint32_t i = 0; i < out.count; i++)
		assert_int_equal(out.rcs[i], 0);
	/* Retransmissions (a loaded machine) carry the same bytes. */
	for (uint32_t i = 0; responder_find(&r, HASP_OP_KV_GET, i, &rx); i++) {
		assert_true(rx.hdr.seq >= 1 && rx.hdr.seq <= 3);
		assert_true(!seen[rx.hdr.seq] || flags[rx.hdr.seq] == rx.hdr.flags);
		seen[rx.hdr.seq] = true;
		flags[rx.hdr.seq] = rx.hdr.flags;
	}
	assert_true(seen[1] && seen[2] && seen[3]);
	assert_int_equal(flags[1], HASP_WIRE_F_SEQ_FLOOR);
	assert_int_equal(flags[2], 0);
	assert_int_equal(flags[3], HASP_WIRE_F_SEQ_FLOOR);
	hasp_client_close(c);
	responder_stop(&r);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_one_thread_drives_many_requests, responder_teardown),
		cmocka_unit_test_teardown(test_seq_floor_only_when_nothing_lower_waits, responder_teardown),
		cmocka_unit_test_teardown(test_callback_request_sent_in_the_same_process,
					  responder_teardown),
		cmocka_unit_test_teardown(test_wait_granted_by_event_and_cancelled_by_id,
					  responder_teardown),
		cmocka_unit_test_teardown(test_cancel_after_the_reply_came_completes_with_it,
					  responder_teardown),
		cmocka_unit_test_teardown(test_blocking_wait_cancelled_from_another_thread,
					  responder_teardown),
		cmocka_unit_test_teardown(test_blocking_threads_and_the_loop_share_a_client,
					  responder_teardown),
		cmocka_unit_test_teardown(test_session_keepalive_async, responder_teardown),
		cmocka_unit_test_teardown(test_connect_watch_unwatch_async, responder_teardown),
		cmocka_unit_test_teardown(test_loop_reopens_a_lost_session_for_its_watches,
					  responder_teardown),
		cmocka_unit_test_teardown(test_kv_range_async_follows_more, responder_teardown),
		cmocka_unit_test_teardown(test_loop_keeps_a_lease_alive_until_revoked,
					  responder_teardown),
		cmocka_unit_test_teardown(
			test_a_keepalive_answered_after_a_revoke_does_not_bring_the_lease_back,
			responder_teardown),
		cmocka_unit_test_teardown(test_blocking_caller_woken_when_the_loop_frees_a_slot,
					  responder_teardown),
		cmocka_unit_test_teardown(test_window_slots_and_callbacks_in_start_order,
					  responder_teardown),
		cmocka_unit_test_teardown(test_reused_op_records_keep_ids_and_outcomes_apart,
					  responder_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
