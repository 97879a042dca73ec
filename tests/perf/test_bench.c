/*
 * hasp-bench's engine (libhasp's asynchronous core, one client group:
 * tools/bench_libhasp.c) against the scripted UDP responder on 127.0.0.1
 * (tests/client/responder.h), before any node exists: request counts,
 * histogram math, the Poisson schedule, coordinated-omission correction,
 * redirects, retransmission with the same bytes, the close phase, and
 * JSON validity.
 *
 * The script is a toy lock table (grant, release, FIFO waiters with pushed
 * LOCK_GRANTED events, watchers): enough protocol for every workload, not a
 * lock service.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "hasp/errors.h"
#include "tests/client/responder.h"
#include "tests/test_util.h"
#include "tools/bench_arrival.h"
#include "tools/bench_engine.h"
#include "tools/bench_hist.h"
#include "tools/bench_libhasp_impl.h"
#include "tools/bench_report.h"

static const char *bench_exe;
static struct responder R;

/* ---- a toy lock table for the script ---- */

#define TOY_LOCKS 4096 /* hashed by name; the tests use fewer keys */
#define TOY_WAITERS 64
#define TOY_SESSIONS 256

struct toy_lock {
	char name[HASP_NAME_SIZE_MAX + 1];
	uint64_t holder; /* session id, 0 free */
	uint64_t token;
	uint64_t waiters[TOY_WAITERS];
	uint32_t waiter_count;
	uint64_t watchers[TOY_WAITERS];
	uint32_t watcher_count;
};

struct toy {
	pthread_mutex_t mu;
	struct toy_lock locks[TOY_LOCKS];
	uint32_t lock_count;
	uint64_t revision;
	uint64_t event_seq[TOY_SESSIONS];
	uint32_t by_op[64];  /* requests seen, by opcode */
	uint32_t drop_every; /* drop the first transmission of every n-th ACQUIRE */
	uint32_t acquires;
	uint32_t stall_at;   /* sleep stall_ms before answering this ACQUIRE */
	uint32_t stall_ms;
	int not_leader_node; /* answers NOT_LEADER naming the other node; -1 none */
	bool silent_acquire; /* never answers ACQUIRE */
	bool hide_handoff;   /* watchers are not told of a hand-off grant (none sent) */
	bool lose_handoff;   /* the hand-off grant to watchers is sent and lost on the way */
	bool foreign_holder; /* every lock is held by a session of no client: WAIT queues */
	uint64_t first_nonce; /* of the first SESSION_OPEN seen */
	bool silent_open;     /* never answers SESSION_OPEN */
	uint64_t open_nonces[512]; /* the distinct SESSION_OPEN nonces seen */
	uint32_t open_nonce_count;
	/* SESSION_CLOSE: unanswered for close_silent_ns after the first one
	 * (UINT64_MAX: never answered); the sessions whose close was answered */
	uint64_t close_silent_ns;
	uint64_t first_close_ns;
	uint64_t closed[TOY_SESSIONS];
	uint32_t closed_count;
	uint64_t dropped_seq[4096];
	uint32_t dropped_count;
	struct sockaddr_in client;
};

static struct toy T;

static void toy_reset(void)
{
	memset(&T, 0, sizeof(T));
	pthread_mutex_init(&T.mu, NULL);
	T.not_leader_node = -1;
}

static struct toy_lock *toy_find(const struct hasp_wire_bytes *name)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < name->size; i++)
		h = (h ^ name->data[i]) * 16777619u;
	for (uint32_t probe = 0; probe < TOY_LOCKS; probe++) {
		struct toy_lock *l = &T.locks[(h + probe) % TOY_LOCKS];
		if (l->name[0] == '\0') {
			memcpy(l->name, name->data, name->size);
			l->name[name->size] = '\0';
			T.lock_count++;
			return l;
		}
		if (strlen(l->name) == name->size && memcmp(l->name, name->data, name->size) == 0)
			return l;
	}
	fail_msg("toy lock table full");
	return NULL;
}

static void toy_event_sent(struct responder *r, int node, uint64_t session, uint8_t type,
			   const char *name, uint64_t revision, bool lost)
{
	struct hasp_wire_msg ev;

	memset(&ev, 0, sizeof(ev));
	ev.hdr.opcode = HASP_OP_EVENT;
	ev.hdr.flags = HASP_WIRE_F_REPLY;
	ev.hdr.session_id = session;
	ev.hdr.seq = ++T.event_seq[session % TOY_SESSIONS];
	/* The session's event chain, as a node keeps it (libhasp checks it:
	 * a break is a RESYNC). */
	ev.body.event.prev_index = ev.hdr.seq - 1u;
	ev.body.event.type = type;
	ev.body.event.name.data = (const uint8_t *)name;
	ev.body.event.name.size = strlen(name);
	ev.body.event.revision = revision;
	if (!lost)
		responder_send(r, node, &T.client, &ev);
}

static void toy_event(struct responder *r, int node, uint64_t session, uint8_t type,
		      const char *name, uint64_t revision)
{
	toy_event_sent(r, node, session, type, name, revision, false);
}

static void toy_notify_watchers(struct responder *r, int node, struct toy_lock *l, uint8_t type,
				uint64_t revision, bool lost)
{
	for (uint32_t i = 0; i < l->watcher_count; i++)
		toy_event_sent(r, node, l->watchers[i], type, l->name, revision, lost);
}

/* WATCH_STATUS: the session's watches and the last event "sent" to it. */
static void toy_watch_status(struct responder *r, int node, const struct hasp_wire_msg *req,
			     const struct sockaddr_in *from)
{
	struct hasp_wire_msg rep;
	uint64_t session = req->hdr.session_id;

	responder_reply_init(&rep, req, HASP_STATUS_OK);
	for (uint32_t i = 0; i < TOY_LOCKS; i++)
		for (uint32_t k = 0; k < T.locks[i].watcher_count; k++)
			rep.body.watch_status.count += T.locks[i].watchers[k] == session;
	rep.body.watch_status.last_event_index = T.event_seq[session % TOY_SESSIONS];
	responder_send(r, node, from, &rep);
}

static void toy_script(struct responder *r, int node, const struct hasp_wire_msg *req,
		       const struct sockaddr_in *from, void *arg)
{
	struct hasp_wire_msg rep;
	(void)arg;

	if (req == NULL)
		return;
	pthread_mutex_lock(&T.mu);
	T.client = *from;
	if (T.not_leader_node == node) {
		pthread_mutex_unlock(&T.mu);
		responder_reply_init(&rep, req, HASP_STATUS_NOT_LEADER);
		rep.body.not_leader.known = 1;
		rep.body.not_leader.leader_id = 2;
		memcpy(rep.body.not_leader.ipv4, (uint8_t[]){ 127, 0, 0, 1 }, 4);
		rep.body.not_leader.port = r->ports[1 - node];
		responder_send(r, node, from, &rep);
		return;
	}
	T.by_op[req->hdr.opcode % 64]++;
	if (req->hdr.opcode == HASP_OP_SESSION_OPEN && T.first_nonce == 0)
		T.first_nonce = req->body.session_open.client_nonce;
	if (req->hdr.opcode == HASP_OP_SESSION_OPEN) {
		bool known = false;
		for (uint32_t i = 0; i < T.open_nonce_count; i++)
			known |= T.open_nonces[i] == req->body.session_open.client_nonce;
		if (!known && T.open_nonce_count < 512)
			T.open_nonces[T.open_nonce_count++] = req->body.session_open.client_nonce;
		if (T.silent_open) {
			pthread_mutex_unlock(&T.mu);
			return;
		}
	}
	if (req->hdr.opcode == HASP_OP_SESSION_CLOSE) {
		uint64_t now = clock_monotonic_ns();
		if (T.first_close_ns == 0)
			T.first_close_ns = now;
		if (T.close_silent_ns == UINT64_MAX || now - T.first_close_ns < T.close_silent_ns) {
			pthread_mutex_unlock(&T.mu);
			return;
		}
		bool known = false;
		for (uint32_t i = 0; i < T.closed_count; i++)
			known |= T.closed[i] == req->hdr.session_id;
		if (!known && T.closed_count < TOY_SESSIONS)
			T.closed[T.closed_count++] = req->hdr.session_id;
	}
	if (req->hdr.opcode == HASP_OP_ACQUIRE && T.silent_acquire) {
		pthread_mutex_unlock(&T.mu);
		return;
	}
	if (req->hdr.opcode == HASP_OP_ACQUIRE) {
		T.acquires++;
		if (T.drop_every && T.acquires % T.drop_every == 0 && T.dropped_count < 4096) {
			bool seen = false;
			for (uint32_t i = 0; i < T.dropped_count; i++)
				seen |= T.dropped_seq[i] == (req->hdr.session_id ^ req->hdr.seq);
			if (!seen) {
				T.dropped_seq[T.dropped_count++] = req->hdr.session_id ^ req->hdr.seq;
				pthread_mutex_unlock(&T.mu);
				return; /* lost: the client must resend the same bytes */
			}
		}
		if (T.stall_at && T.acquires == T.stall_at) {
			struct timespec ts = { .tv_sec = T.stall_ms / 1000,
					       .tv_nsec = (long)(T.stall_ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	pthread_mutex_unlock(&T.mu);
	if (responder_answer_session(r, node, req, from))
		return;
	pthread_mutex_lock(&T.mu);
	switch (req->hdr.opcode) {
	case HASP_OP_ACQUIRE: {
		struct toy_lock *l = toy_find(&req->body.acquire.name);
		if (T.foreign_holder && l->holder == 0) {
			l->holder = UINT64_MAX;
			l->token = ++T.revision;
		}
		if (l->holder == 0 || l->holder == req->hdr.session_id) {
			/* A retransmitted ACQUIRE of the holder gets the same token
			 * (the cluster answers it from its reply cache). */
			if (l->holder == 0)
				l->token = ++T.revision;
			l->holder = req->hdr.session_id;
			responder_reply_init(&rep, req, HASP_STATUS_GRANTED);
			rep.body.granted.token = l->token;
			rep.body.granted.ttl_ms = req->body.acquire.ttl_ms;
			responder_send(r, node, from, &rep);
			toy_notify_watchers(r, node, l, HASP_EVENT_LOCK_GRANTED, l->token, false);
		} else if (req->body.acquire.mode == HASP_ACQUIRE_WAIT) {
			assert_true(l->waiter_count < TOY_WAITERS);
			l->waiters[l->waiter_count++] = req->hdr.session_id;
			responder_reply_init(&rep, req, HASP_STATUS_QUEUED);
			rep.body.queued.position = l->waiter_count;
			responder_send(r, node, from, &rep);
		} else {
			responder_reply_init(&rep, req, HASP_STATUS_BUSY);
			rep.body.busy.holder_token = l->token;
			responder_send(r, node, from, &rep);
		}
		break;
	}
	case HASP_OP_RELEASE: {
		struct toy_lock *l = toy_find(&req->body.release.name);
		if (l->holder == 0 || l->token != req->body.release.token) {
			responder_reply_init(&rep, req, HASP_STATUS_NOT_HOLDER);
			responder_send(r, node, from, &rep);
			break;
		}
		uint64_t released = l->token;
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		responder_send(r, node, from, &rep);
		l->holder = 0;
		toy_notify_watchers(r, node, l, HASP_EVENT_LOCK_RELEASED, released, false);
		if (l->waiter_count > 0) {
			/* FIFO handoff in the same step, as the state machine does. */
			l->holder = l->waiters[0];
			memmove(l->waiters, l->waiters + 1, --l->waiter_count * sizeof(l->waiters[0]));
			l->token = ++T.revision;
			toy_event(r, node, l->holder, HASP_EVENT_LOCK_GRANTED, l->name, l->token);
			if (!T.hide_handoff)
				toy_notify_watchers(r, node, l, HASP_EVENT_LOCK_GRANTED, l->token,
						    T.lose_handoff);
		}
		break;
	}
	case HASP_OP_LOCK_READ: {
		struct toy_lock *l = toy_find(&req->body.lock_read.name);
		responder_reply_init(&rep, req, l->holder ? HASP_STATUS_OK : HASP_STATUS_NOT_FOUND);
		rep.body.lock_info.holder_session_id = l->holder;
		rep.body.lock_info.token = l->token;
		rep.body.lock_info.waiter_count = l->waiter_count;
		responder_send(r, node, from, &rep);
		break;
	}
	case HASP_OP_WATCH: {
		struct toy_lock *l = toy_find(&req->body.watch.name);
		assert_true(l->watcher_count < TOY_WAITERS);
		l->watchers[l->watcher_count++] = req->hdr.session_id;
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		responder_send(r, node, from, &rep);
		break;
	}
	case HASP_OP_WATCH_STATUS:
		toy_watch_status(r, node, req, from);
		break;
	case HASP_OP_KV_PUT:
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		rep.body.kv_revision.revision = ++T.revision;
		responder_send(r, node, from, &rep);
		break;
	case HASP_OP_KV_GET:
		responder_reply_init(&rep, req, HASP_STATUS_NOT_FOUND);
		responder_send(r, node, from, &rep);
		break;
	default:
		responder_reply_init(&rep, req, HASP_STATUS_BAD_OPCODE);
		responder_send(r, node, from, &rep);
		break;
	}
	pthread_mutex_unlock(&T.mu);
}

static char cluster[256];

static void start(int nodes)
{
	toy_reset();
	assert_int_equal(responder_start(&R, nodes, toy_script, NULL), 0);
	responder_cluster(&R, cluster, sizeof(cluster));
}

static void config(struct bench_config *cfg)
{
	bench_config_default(cfg);
	cfg->cluster = cluster;
	cfg->duration_ms = 10000; /* the count ends these runs long before */
	/* Exact request counts must not depend on the machine's load: no
	 * retransmission unless a test asks for one with a shorter timeout. */
	cfg->request_timeout_ms = 2000;
	cfg->seed = test_util_seed(7);
}

static uint32_t seen(uint8_t opcode)
{
	pthread_mutex_lock(&T.mu);
	uint32_t n = T.by_op[opcode];
	pthread_mutex_unlock(&T.mu);
	return n;
}

/* ---- histogram ---- */

static void test_hist_small_values_are_exact(void **state)
{
	(void)state;
	for (uint64_t v = 0; v < BENCH_HIST_SUB_COUNT; v++) {
		assert_int_equal(bench_hist_bucket_index(v), v);
		assert_int_equal(bench_hist_bucket_high((uint32_t)v), v);
	}
}

static void test_hist_bucket_error_is_below_one_percent(void **state)
{
	struct prng p;
	(void)state;
	prng_seed(&p, test_util_seed(3));
	for (int i = 0; i < 100000; i++) {
		uint64_t v = prng_next(&p) >> prng_below(&p, 64);
		uint32_t b = bench_hist_bucket_index(v);
		uint64_t high = bench_hist_bucket_high(b);
		assert_true(high >= v);
		assert_true((double)(high - v) <= (double)v / BENCH_HIST_SUB_COUNT + 1.0);
		if (b > 0)
			assert_true(bench_hist_bucket_high(b - 1) < v);
	}
}

static void test_hist_quantiles_of_uniform_values(void **state)
{
	struct bench_hist *h = malloc(sizeof(*h));
	(void)state;
	bench_hist_reset(h);
	for (uint64_t v = 1; v <= 1000000; v++)
		bench_hist_record(h, v);
	assert_int_equal(h->count, 1000000);
	assert_int_equal(h->min, 1);
	assert_int_equal(h->max, 1000000);
	double q[] = { 0.5, 0.9, 0.99, 0.999 };
	for (int i = 0; i < 4; i++) {
		double want = q[i] * 1e6;
		double got = (double)bench_hist_quantile(h, q[i]);
		assert_true(got >= want);             /* never optimistic */
		assert_true(got <= want * 1.008 + 1); /* within the bucket width */
	}
	assert_int_equal(bench_hist_quantile(h, 1.0), 1000000);
	assert_true(fabs(bench_hist_mean(h) - 500000.5) < 1e-6);
	free(h);
}

static void test_hist_merge_equals_recording_both(void **state)
{
	struct bench_hist *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b)), *both = malloc(sizeof(*both));
	(void)state;
	bench_hist_reset(a);
	bench_hist_reset(b);
	bench_hist_reset(both);
	for (uint64_t v = 0; v < 5000; v++) {
		bench_hist_record(v % 2 ? a : b, v * 977);
		bench_hist_record(both, v * 977);
	}
	bench_hist_merge(a, b);
	assert_memory_equal(a->counts, both->counts, sizeof(a->counts));
	assert_int_equal(a->count, both->count);
	assert_int_equal(a->min, both->min);
	assert_int_equal(a->max, both->max);
	assert_int_equal(bench_hist_quantile(a, 0.99), bench_hist_quantile(both, 0.99));
	free(a);
	free(b);
	free(both);
}

static void test_hist_empty_reports_zero(void **state)
{
	struct bench_hist *h = malloc(sizeof(*h));
	(void)state;
	bench_hist_reset(h);
	assert_int_equal(bench_hist_quantile(h, 0.5), 0);
	assert_true(bench_hist_mean(h) == 0.0);
	free(h);
}

/* ---- arrivals ---- */

static void test_poisson_gaps_have_the_rate_and_unit_cv(void **state)
{
	struct bench_arrival a, b;
	const int n = 200000;
	double sum = 0, sum2 = 0;
	uint64_t prev = 1000;
	(void)state;

	bench_arrival_init(&a, 10000.0, test_util_seed(11), 1000);
	bench_arrival_init(&b, 10000.0, test_util_seed(11), 1000);
	for (int i = 0; i < n; i++) {
		uint64_t at = bench_arrival_next(&a);
		assert_int_equal(at, bench_arrival_next(&b)); /* a seed replays the schedule */
		assert_true(at >= prev);
		double gap = (double)(at - prev);
		sum += gap;
		sum2 += gap * gap;
		prev = at;
	}
	double mean = sum / n;
	double sd = sqrt(sum2 / n - mean * mean);
	assert_true(fabs(mean - 100000.0) < 2000.0); /* 100 us +- 2 % */
	assert_true(fabs(sd / mean - 1.0) < 0.03);    /* exponential: CV 1 */
}

static void test_zipf_prefers_low_ranks(void **state)
{
	struct bench_zipf z, u;
	struct prng p;
	uint32_t hits[100] = { 0 }, flat[100] = { 0 };
	(void)state;

	prng_seed(&p, test_util_seed(5));
	assert_int_equal(bench_zipf_init(&z, 100, 0.99), 0);
	assert_int_equal(bench_zipf_init(&u, 100, 0.0), 0);
	for (int i = 0; i < 100000; i++) {
		hits[bench_zipf_next(&z, &p)]++;
		flat[bench_zipf_next(&u, &p)]++;
	}
	assert_true(hits[0] > hits[1] && hits[1] > hits[9] && hits[9] > hits[99]);
	/* Zipf(0.99) over 100 keys: rank 0 has about 19 % of the draws. */
	assert_true(hits[0] > 15000 && hits[0] < 23000);
	for (int k = 0; k < 100; k++)
		assert_true(flat[k] > 700 && flat[k] < 1300);
	bench_zipf_deinit(&z);
	bench_zipf_deinit(&u);
}

/* ---- the engine against the responder ---- */

static void test_closed_loop_sends_one_acquire_and_release_per_cycle(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(1);
	config(&cfg);
	cfg.clients = 4;
	cfg.count_max = 500;
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	responder_stop(&R);
	assert_int_equal(res.sessions, 4);
	assert_int_equal(res.ops_started, 500);
	assert_int_equal(res.ops, 500);
	assert_int_equal(res.cycles, 500);
	assert_int_equal(seen(HASP_OP_ACQUIRE), 500);
	assert_int_equal(seen(HASP_OP_RELEASE), 500);
	assert_int_equal(seen(HASP_OP_SESSION_OPEN), 4);
	assert_int_equal(seen(HASP_OP_SESSION_CLOSE), 4);
	assert_int_equal(res.lat[BENCH_LAT_ACQUIRE]->count, 500);
	assert_int_equal(res.lat[BENCH_LAT_OP]->count, 500);
	assert_int_equal(res.statuses[HASP_STATUS_GRANTED], 500);
	assert_int_equal(res.err.retransmits + res.err.timeouts + res.err.stray, 0);
	/* Batched syscalls: never more sendmmsg calls than datagrams. */
	assert_true(res.tx_calls <= res.tx_datagrams);
	bench_result_deinit(&res);
}

static void test_uncontended_clients_never_share_a_key(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(1);
	config(&cfg);
	cfg.clients = 8;
	cfg.keys = 64;
	cfg.count_max = 400;
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	responder_stop(&R);
	assert_int_equal(res.busy, 0);
	assert_int_equal(res.cycles, 400);
	bench_result_deinit(&res);
}

static void test_contended_try_counts_busy(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(1);
	config(&cfg);
	cfg.clients = 16;
	cfg.keys = 2;
	cfg.contended = true;
	cfg.count_max = 2000;
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	responder_stop(&R);
	assert_int_equal(res.ops, 2000);
	assert_int_equal(res.cycles + res.busy, 2000);
	assert_int_equal(res.statuses[HASP_STATUS_BUSY], res.busy);
	assert_int_equal(seen(HASP_OP_RELEASE), res.cycles);
	bench_result_deinit(&res);
}

static void test_not_leader_redirects_to_the_named_node(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(2);
	T.not_leader_node = 0;
	config(&cfg);
	cfg.clients = 3;
	cfg.count_max = 100;
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	assert_int_equal(res.cycles, 100);
	assert_true(res.err.redirects >= 3); /* at least each session's open */
	assert_int_equal(responder_count(&R, HASP_OP_ACQUIRE, 0), 0);
	assert_int_equal(seen(HASP_OP_ACQUIRE), 100);
	responder_stop(&R);
	bench_result_deinit(&res);
}

static void test_lost_requests_are_resent_with_the_same_bytes(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(1);
	T.drop_every = 7;
	config(&cfg);
	cfg.clients = 2;
	cfg.count_max = 60;
	cfg.request_timeout_ms = 20;
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	assert_int_equal(res.cycles, 60);
	assert_true(res.err.retransmits >= 60 / 7);
	/* Every (session, seq) that arrived twice arrived with the same bytes. */
	uint32_t pairs = 0;
	struct responder_rx *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	for (uint32_t i = 0; responder_find(&R, HASP_OP_ACQUIRE, i, a); i++)
		for (uint32_t j = i + 1; responder_find(&R, HASP_OP_ACQUIRE, j, b); j++)
			if (a->hdr.session_id == b->hdr.session_id && a->hdr.seq == b->hdr.seq) {
				assert_int_equal(a->size, b->size);
				assert_memory_equal(a->data, b->data, a->size);
				pairs++;
			}
	assert_true(pairs >= 60 / 7);
	responder_stop(&R);
	free(a);
	free(b);
	bench_result_deinit(&res);
}

/* Coordinated omission: one 300 ms stall of the responder. In the open
 * loop every arrival scheduled during the stall waits for it, and the
 * latency measured from the intended send time shows that; in the closed
 * loop the single client simply stops sending, so only one operation sees
 * the stall. */
static void test_open_loop_latency_includes_a_stall(void **state)
{
	struct bench_config cfg;
	struct bench_result open_res, closed_res;
	(void)state;

	start(1);
	T.stall_at = 100;
	T.stall_ms = 300;
	config(&cfg);
	cfg.clients = 1;
	cfg.rate = 500;
	cfg.duration_ms = 1200;
	cfg.count_max = 100000;
	cfg.request_timeout_ms = 1000;
	assert_int_equal(bench_result_init(&open_res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &open_res), 0);
	responder_stop(&R);

	start(1);
	T.stall_at = 100;
	T.stall_ms = 300;
	cfg.rate = 0;
	cfg.count_max = 600;
	assert_int_equal(bench_result_init(&closed_res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &closed_res), 0);
	responder_stop(&R);

	const struct bench_hist *o = open_res.lat[BENCH_LAT_OP];
	const struct bench_hist *c = closed_res.lat[BENCH_LAT_OP];
	printf("open: n=%llu p50=%llu p90=%llu max=%llu backlog_max=%llu; closed: n=%llu p90=%llu max=%llu\n",
	       (unsigned long long)o->count, (unsigned long long)bench_hist_quantile(o, 0.5),
	       (unsigned long long)bench_hist_quantile(o, 0.9), (unsigned long long)o->max,
	       (unsigned long long)open_res.backlog_max, (unsigned long long)c->count,
	       (unsigned long long)bench_hist_quantile(c, 0.9), (unsigned long long)c->max);
	assert_true(o->count > 300);
	assert_true(open_res.backlog_max >= 50);
	assert_true(bench_hist_quantile(o, 0.9) >= 100000000ull); /* >= 100 ms */
	assert_true(c->max >= 250000000ull);                       /* the stall itself */
	assert_true(bench_hist_quantile(c, 0.9) < 50000000ull);    /* hidden from p90 */
	assert_int_equal(open_res.err.failed_ops, 0);
	assert_int_equal(open_res.err.arrivals_dropped, 0);
	bench_result_deinit(&open_res);
	bench_result_deinit(&closed_res);
}

/* Runs cfg and stops the responder. */
static void run_on_engine(const struct bench_config *cfg, struct bench_result *res)
{
	assert_int_equal(bench_result_init(res), 0);
	assert_int_equal(bench_run_libhasp(cfg, res), 0);
	responder_stop(&R);
}

/* Release bursts, on either engine: every waiter is granted and gives the
 * lock back with the token it was granted (the toy answers a wrong token
 * NOT_HOLDER), every round. */
static void burst_tells_every_waiter(void)
{
	struct bench_config cfg;
	struct bench_result res;

	start(1);
	config(&cfg);
	cfg.workload = BENCH_WL_BURST;
	cfg.waiters = 8;
	cfg.count_max = 20;
	run_on_engine(&cfg, &res);
	assert_int_equal(res.sessions, 9);
	assert_int_equal(res.ops, 20);
	assert_int_equal(res.lat[BENCH_LAT_NOTIFY]->count, 20);
	assert_int_equal(res.err.notify_missing, 0);
	assert_int_equal(res.err.unfinished, 0);
	assert_int_equal(seen(HASP_OP_RELEASE), 20 * 9);
	assert_int_equal(res.op_statuses[HASP_OP_RELEASE][HASP_STATUS_OK], 20 * 9);
	assert_int_equal(res.op_statuses[HASP_OP_ACQUIRE][HASP_STATUS_GRANTED], 20); /* the holder's */
	/* No QUEUED through libhasp's completions: the holder reads its queue. */
	assert_true(seen(HASP_OP_LOCK_READ) >= 20);
	bench_result_deinit(&res);
}

/* The same rounds on libhasp's async core (tools/bench_libhasp_rounds.c). */
static void test_burst_tells_every_waiter(void **state)
{
	(void)state;
	burst_tells_every_waiter();
}

static void burst_tells_every_watcher(void)
{
	struct bench_config cfg;
	struct bench_result res;

	start(1);
	config(&cfg);
	cfg.workload = BENCH_WL_BURST;
	cfg.watchers = true;
	cfg.waiters = 10;
	cfg.count_max = 20;
	run_on_engine(&cfg, &res);
	assert_int_equal(res.ops, 20);
	assert_int_equal(seen(HASP_OP_WATCH), 10);
	assert_int_equal(res.lat[BENCH_LAT_NOTIFY]->count, 20);
	assert_int_equal(res.err.notify_missing, 0);
	assert_int_equal(res.op_statuses[HASP_OP_RELEASE][HASP_STATUS_OK], 20);
	bench_result_deinit(&res);
}

static void test_burst_tells_every_watcher(void **state)
{
	(void)state;
	burst_tells_every_watcher();
}

/* A storm of `locks` locks released over `window_ms`, `rounds` rounds. */
static void storm_config(struct bench_config *cfg, uint32_t locks,
			 uint32_t window_ms, uint32_t rounds)
{
	config(cfg);
	cfg->workload = BENCH_WL_STORM;
	cfg->storm_locks = locks;
	cfg->window_ms = window_ms;
	cfg->count_max = rounds;
}

/* The release storm: 8 locks, each held, waited for and watched; every
 * round every waiter is granted with a token above its holder's and every
 * watcher's last event is that grant (on libhasp: from its completions and
 * events, judged by the same tools/bench_rounds.c). */
static void storm_grants_every_waiter_and_tells_every_watcher(void)
{
	struct bench_config cfg;
	struct bench_result res;

	start(1);
	storm_config(&cfg, 8, 40, 3);
	run_on_engine(&cfg, &res);
	assert_int_equal(res.sessions, 24);
	assert_int_equal(res.ops, 3);
	assert_int_equal(seen(HASP_OP_WATCH), 8); /* once, kept across rounds */
	assert_int_equal(seen(HASP_OP_RELEASE), 3 * 16); /* holders, then waiters */
	assert_int_equal(res.op_statuses[HASP_OP_RELEASE][HASP_STATUS_OK], 3 * 16);
	assert_int_equal(res.err.unfinished, 0);
	assert_int_equal(res.storm_granted, 3 * 8);
	assert_int_equal(res.storm_told, 3 * 8);
	assert_int_equal(res.storm_coalesced, 0); /* the toy never holds an event back */
	assert_int_equal(res.err.storm_waiters_missing, 0);
	assert_int_equal(res.err.storm_watchers_missing, 0);
	assert_int_equal(res.lat[BENCH_LAT_NOTIFY]->count, 3);
	assert_int_equal(res.lat[BENCH_LAT_GRANT_LAST]->count, 3);
	bench_result_deinit(&res);
}

static void test_storm_grants_every_waiter_and_tells_every_watcher(void **state)
{
	(void)state;
	storm_grants_every_waiter_and_tells_every_watcher();
}

/* The samples of a latency log, by kind: how many, and whether every one
 * lies inside [from_ns, to_ns] (the run's own clock span). */
struct logged {
	uint32_t count[BENCH_LAT_COUNT];
	bool inside;
	uint64_t release_start[4]; /* storm: the notify samples' starts */
	uint64_t grant_start[4];   /* storm: the grant_last samples' starts */
	uint64_t notify_ns[4];
};

static void read_latency_log(FILE *f, uint64_t from_ns, uint64_t to_ns, struct logged *out)
{
	char kind[32];
	unsigned long long start, lat;

	memset(out, 0, sizeof(*out));
	out->inside = true;
	rewind(f);
	while (fscanf(f, "%31s %llu %llu", kind, &start, &lat) == 3) {
		int l = 0;
		while (l < BENCH_LAT_COUNT && strcmp(kind, bench_lat_name((enum bench_lat)l)) != 0)
			l++;
		assert_true(l < BENCH_LAT_COUNT); /* a kind of the JSON's latency_us */
		uint32_t i = out->count[l]++;
		out->inside &= start >= from_ns && start + lat <= to_ns;
		if (l == BENCH_LAT_NOTIFY && i < 4) {
			out->release_start[i] = start;
			out->notify_ns[i] = lat;
		}
		if (l == BENCH_LAT_GRANT_LAST && i < 4)
			out->grant_start[i] = start;
	}
	assert_true(feof(f));
}

/* hasp-bench --latency-log: every measured sample, a line each, with its
 * start on the clock of the process (CLOCK_MONOTONIC), so that another
 * run's samples can be placed against it (perf/storm_during). Cycles: one
 * op, acquire and release line per cycle; a storm: per round one op, and a
 * notify and grant_last line that both start at the round's first release
 * and last at least the window. */
static void latency_log_holds_every_sample(void)
{
	struct bench_config cfg;
	struct bench_result res;
	struct logged got;

	start(1);
	config(&cfg);
	cfg.clients = 4;
	cfg.count_max = 200;
	cfg.latency_log = tmpfile();
	assert_non_null(cfg.latency_log);
	uint64_t from = clock_monotonic_ns();
	run_on_engine(&cfg, &res);
	uint64_t to = clock_monotonic_ns();
	read_latency_log(cfg.latency_log, from, to, &got);
	assert_true(got.inside);
	assert_int_equal(res.cycles, 200);
	assert_int_equal(got.count[BENCH_LAT_OP], 200);
	assert_int_equal(got.count[BENCH_LAT_ACQUIRE], 200);
	assert_int_equal(got.count[BENCH_LAT_RELEASE], 200);
	assert_int_equal(got.count[BENCH_LAT_NOTIFY], 0);
	fclose(cfg.latency_log);
	bench_result_deinit(&res);

	start(1);
	storm_config(&cfg, 4, 40, 2);
	cfg.latency_log = tmpfile();
	assert_non_null(cfg.latency_log);
	from = clock_monotonic_ns();
	run_on_engine(&cfg, &res);
	to = clock_monotonic_ns();
	read_latency_log(cfg.latency_log, from, to, &got);
	assert_true(got.inside);
	assert_int_equal(res.storm_granted, 2 * 4);
	assert_int_equal(got.count[BENCH_LAT_OP], 2);
	assert_int_equal(got.count[BENCH_LAT_NOTIFY], 2);
	assert_int_equal(got.count[BENCH_LAT_GRANT_LAST], 2);
	for (int i = 0; i < 2; i++) {
		assert_true(got.release_start[i] == got.grant_start[i]);
		assert_true(got.notify_ns[i] >= 40u * 1000000u * 3 / 4); /* the last release's event */
	}
	assert_true(got.release_start[1] > got.release_start[0] + got.notify_ns[0]);
	fclose(cfg.latency_log);
	bench_result_deinit(&res);
}

static void test_latency_log_holds_every_sample(void **state)
{
	(void)state;
	latency_log_holds_every_sample();
}

/* A watcher whose last event is the release, not the hand-off grant, was
 * not told the end: every lock counts missing and the first such round
 * ends the run. */
static void storm_counts_a_watcher_not_told_as_missing(void)
{
	struct bench_config cfg;
	struct bench_result res;

	start(1);
	T.hide_handoff = true;
	storm_config(&cfg, 4, 20, 3);
	run_on_engine(&cfg, &res);
	assert_int_equal(res.ops, 1);
	assert_int_equal(res.storm_granted, 4);
	assert_int_equal(res.storm_told, 0);
	assert_int_equal(res.err.storm_waiters_missing, 0);
	assert_int_equal(res.err.storm_watchers_missing, 4);
	bench_result_deinit(&res);
}

/* The hand-off grant to every watcher is sent and lost on the way (UDP
 * overflow lost 1-3 % of them in the 20,000-lock storm): no later event
 * shows the gap, so before WATCH_STATUS such a watcher stayed missing and
 * never knew. A second after the window each asks the leader which event
 * it sent last, learns of the loss (libhasp: a RESYNC), re-reads its lock
 * and so learns the last state: told, as "resynced", and nothing missing. */
static void storm_tells_a_watcher_its_lost_last_event(void)
{
	struct bench_config cfg;
	struct bench_result res;

	start(1);
	T.lose_handoff = true;
	storm_config(&cfg, 4, 20, 2);
	run_on_engine(&cfg, &res);
	assert_int_equal(res.ops, 2);
	assert_int_equal(res.storm_granted, 2 * 4);
	assert_int_equal(res.storm_told, 2 * 4);
	assert_int_equal(res.storm_resynced, 2 * 4);
	assert_int_equal(res.err.storm_watchers_missing, 0);
	assert_true(seen(HASP_OP_WATCH_STATUS) >= 2 * 4);
	bench_result_deinit(&res);
}

static void test_storm_tells_a_watcher_its_lost_last_event(void **state)
{
	(void)state;
	storm_tells_a_watcher_its_lost_last_event();
}

static void test_storm_counts_a_watcher_not_told_as_missing(void **state)
{
	(void)state;
	storm_counts_a_watcher_not_told_as_missing();
}

/* Only a committed command renews a session on the node: a waiter that
 * re-reads its lock (LOCK_READ, a read) more often than its keepalive is
 * due must still send the keepalive. hasp-bench counted every answer as a
 * renewal, so such a waiter, or a storm watcher asking WATCH_STATUS round
 * after round, sent none and lost its session. */
static void test_reads_do_not_put_the_keepalive_off(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(1);
	T.foreign_holder = true; /* every WAIT queues and is never granted */
	config(&cfg);
	cfg.clients = 1;
	cfg.wait = true;
	cfg.count_max = 1;
	cfg.wait_recheck_ms = 20;     /* a re-read every 20 ms... */
	cfg.session_ttl_ms = 300;     /* ... a keepalive due every 100 ms */
	cfg.request_timeout_ms = 200;
	cfg.request_deadline_ms = 500; /* the wait is given up after 1 s */
	run_on_engine(&cfg, &res);
	assert_true(res.err.wait_rereads >= 2);
	assert_int_equal(res.err.wait_timeouts, 1);
	assert_true(seen(HASP_OP_SESSION_KEEPALIVE) >= 1);
	bench_result_deinit(&res);
}

/* hasp-bench opens at most 256 sessions at once, as the wire engine
 * did: with every open unanswered (and --deadline beyond the start-up's
 * 10 s), 300 clients send 256 distinct opens, not 300. All at once had
 * overflowed a leader's queues (3,000 sessions: about 17 retransmissions
 * each, and a leader change on a loaded cluster). */
static void test_libhasp_opens_at_most_256_sessions_at_once(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(1);
	T.silent_open = true;
	config(&cfg);
	cfg.clients = 300;
	cfg.keys = 300;
	cfg.count_max = 1;
	cfg.request_deadline_ms = 60000;
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), -HASP_ETIMEDOUT); /* no session opened */
	responder_stop(&R);
	assert_int_equal(T.open_nonce_count, 256);
	bench_result_deinit(&res);
}

/* Two runs with the same --seed open sessions with different nonces. A
 * node answers an open whose (identity, nonce) names a live session with
 * that session (a retransmitted open must not make a second one), so two
 * hasp-bench processes with the default seed, side by side, shared their
 * first sessions and each refused the other's sequence numbers
 * (BAD_REQUEST, reason request_mismatch and seq_too_old). */
static void test_same_seed_runs_open_different_sessions(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	uint64_t nonce[2];
	(void)state;

	for (int run = 0; run < 2; run++) {
		start(1);
		config(&cfg);
		cfg.clients = 1;
		cfg.count_max = 1;
		assert_int_equal(bench_result_init(&res), 0);
		assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
		responder_stop(&R);
		nonce[run] = T.first_nonce;
		assert_int_not_equal(nonce[run], 0);
		bench_result_deinit(&res);
	}
	assert_int_not_equal(nonce[0], nonce[1]);
}

static void test_kv_mix_and_keepalive_storm(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(1);
	config(&cfg);
	cfg.workload = BENCH_WL_KV;
	cfg.put_percent = 30;
	cfg.count_max = 1000;
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	assert_int_equal(res.ops, 1000);
	assert_int_equal(seen(HASP_OP_KV_PUT) + seen(HASP_OP_KV_GET), 1000);
	assert_true(seen(HASP_OP_KV_PUT) > 200 && seen(HASP_OP_KV_PUT) < 400);
	bench_result_deinit(&res);
	responder_stop(&R);

	start(1);
	config(&cfg);
	cfg.workload = BENCH_WL_KEEPALIVE;
	cfg.clients = 200;
	cfg.count_max = 2000;
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	responder_stop(&R);
	assert_int_equal(res.sessions, 200);
	assert_int_equal(res.lat[BENCH_LAT_KEEPALIVE]->count, 2000);
	bench_result_deinit(&res);

	/* The same storm on libhasp's async core
	 * (hasp_client_session_keepalive_async): 2000 keepalives, no other
	 * request but the opens and closes. */
	start(1);
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	responder_stop(&R);
	assert_int_equal(res.sessions, 200);
	assert_int_equal(res.ops, 2000);
	assert_int_equal(res.lat[BENCH_LAT_KEEPALIVE]->count, 2000);
	assert_int_equal(seen(HASP_OP_SESSION_KEEPALIVE), 2000);
	assert_int_equal(seen(HASP_OP_ACQUIRE) + seen(HASP_OP_KV_GET) + seen(HASP_OP_KV_PUT), 0);
	bench_result_deinit(&res);
}

static void test_every_run_is_bounded_by_duration(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(1);
	config(&cfg);
	cfg.count_max = UINT64_MAX;
	cfg.duration_ms = 300;
	cfg.clients = 2;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	responder_stop(&R);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(secs < 5.0);
	assert_true(res.ops > 0);
	bench_result_deinit(&res);
}

/* hasp-bench probes at the retired wire engine's pace: while the leader
 * (node 1) is silent to an ACQUIRE and node 0 names it, rounds to every
 * node come at most every request_timeout_ms / 2 (the jittered backoff),
 * not every 10..100 ms (libhasp's defaults, which drew about 11 datagrams
 * per client per leader stall on a starved cluster; docs/PERFORMANCE.md).
 * An upper bound only: a slow machine makes fewer rounds, never more. */
static void test_libhasp_engine_probes_at_the_retransmission_pace(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(2);
	T.not_leader_node = 0;
	T.silent_acquire = true;
	config(&cfg);
	cfg.clients = 2;
	cfg.count_max = 2;
	cfg.duration_ms = 100;
	cfg.request_timeout_ms = 1000;
	assert_int_equal(bench_result_init(&res), 0);
	uint64_t t0 = clock_monotonic_ns();
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	uint64_t elapsed_ms = (clock_monotonic_ns() - t0) / 1000000u;
	uint32_t sent = responder_count(&R, HASP_OP_ACQUIRE, -1);
	responder_stop(&R);
	assert_int_equal(res.sessions, 2);
	assert_int_equal(res.cycles, 0);
	/* The leader fell silent: each client probed (node 0 heard it). */
	assert_true(res.err.redirects >= 2);
	/* Per client: the first send, then rounds of 2 at least 500 ms apart
	 * from the first silence on (the defaults: about 30 in this time). */
	uint64_t rounds = elapsed_ms / (cfg.request_timeout_ms / 2) + 1;
	print_message("ACQUIRE datagrams %u in %llu ms (at most %llu)\n", sent,
		      (unsigned long long)elapsed_ms, (unsigned long long)(2 * (1 + 2 * rounds)));
	assert_true(sent >= 2 * 3);
	assert_true(sent <= 2 * (1 + 2 * rounds));
	bench_result_deinit(&res);
}

/* A request nobody answers is given up at its deadline, counted, and the
 * client goes on: every 10 ms resent until 100 ms, three times. Its
 * unanswered slot ends the session only when the 32-request window comes
 * round to it (libhasp, PROTOCOL.md "Exactly once"; tests/client). */
static void test_unanswered_request_is_given_up_at_its_deadline(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(1);
	T.silent_acquire = true;
	config(&cfg);
	cfg.clients = 1;
	cfg.count_max = 3;
	cfg.duration_ms = 2000;
	cfg.request_timeout_ms = 10;
	cfg.request_deadline_ms = 100;
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	responder_stop(&R);
	assert_true(seen(HASP_OP_ACQUIRE) >= 3 * 5); /* every 10 ms for 100 ms */
	assert_int_equal(res.err.timeouts, 3);
	assert_int_equal(res.err.failed_ops, 3);
	assert_true(res.err.retransmits >= 3 * 4);
	assert_int_equal(res.cycles, 0);
	assert_int_equal(res.err.unfinished, 0);
	bench_result_deinit(&res);
}

/* The close phase waits for every SESSION_CLOSE to be answered, resending
 * them, for as long as a close's --deadline: here the cluster stays silent
 * to closes for 1.5 s (it had given up after 1 s, leaving every session
 * open on the cluster until its TTL). */
static void test_close_phase_waits_for_every_close(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(1);
	T.close_silent_ns = 1500000000ull;
	config(&cfg);
	cfg.clients = 64;
	cfg.keys = 64;
	cfg.count_max = 200;
	cfg.request_timeout_ms = 50;
	cfg.request_deadline_ms = 10000;
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	responder_stop(&R);
	assert_int_equal(res.sessions, 64);
	assert_int_equal(T.closed_count, 64);
	assert_int_equal(res.err.closes_unanswered, 0);
	assert_true(seen(HASP_OP_SESSION_CLOSE) > 64); /* the closes were resent */
	bench_result_deinit(&res);
}

/* Closes never answered are given up at their deadline and counted. */
static void test_unanswered_closes_are_counted(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	(void)state;

	start(1);
	T.close_silent_ns = UINT64_MAX;
	config(&cfg);
	cfg.clients = 8;
	cfg.count_max = 50;
	cfg.request_timeout_ms = 20;
	cfg.request_deadline_ms = 200;
	assert_int_equal(bench_result_init(&res), 0);
	assert_int_equal(bench_run_libhasp(&cfg, &res), 0);
	responder_stop(&R);
	assert_int_equal(res.sessions, 8);
	assert_int_equal(T.closed_count, 0);
	assert_int_equal(res.err.closes_unanswered, 8);
	bench_result_deinit(&res);
}

static void test_config_refuses_unbounded_and_bad_names(void **state)
{
	struct bench_config cfg;
	char why[160];
	(void)state;

	config(&cfg);
	cfg.count_max = 0;
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), -HASP_ECONFIG);
	config(&cfg);
	cfg.duration_ms = 0;
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), -HASP_ECONFIG);
	config(&cfg);
	cfg.request_deadline_ms = cfg.request_timeout_ms - 1u; /* --deadline below --timeout */
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), -HASP_ECONFIG);
	config(&cfg);
	snprintf(cfg.prefix, sizeof(cfg.prefix), "has space");
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), -HASP_ECONFIG);
	config(&cfg);
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), 0);
}

static void test_config_refuses_bad_storms(void **state)
{
	struct bench_config cfg;
	char why[160];
	(void)state;

	config(&cfg);
	cfg.workload = BENCH_WL_STORM;
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), 0); /* the defaults */
	cfg.storm_locks = 0;
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), -HASP_ECONFIG);
	cfg.storm_locks = BENCH_STORM_LOCKS_MAX + 1u; /* 3L sessions would not fit */
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), -HASP_ECONFIG);
	cfg.storm_locks = BENCH_STORM_LOCKS_MAX;
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), 0);
	cfg.window_ms = 0;
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), -HASP_ECONFIG);
	cfg.window_ms = BENCH_WINDOW_MS_MAX + 1u;
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), -HASP_ECONFIG);
	cfg.window_ms = 1000;
	cfg.lock_ttl_ms = 1000; /* would expire inside the window */
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), -HASP_ECONFIG);
	cfg.lock_ttl_ms = 5000;
	cfg.rate = 100.0;
	assert_int_equal(bench_config_check(&cfg, why, sizeof(why)), -HASP_ECONFIG);
}

/* ---- JSON ---- */

/* A strict recursive-descent JSON checker (RFC 8259 grammar, no
 * extensions): returns the end of the value or NULL. */
static const char *json_value(const char *p, int depth);

static const char *json_ws(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
		p++;
	return p;
}

static const char *json_string(const char *p)
{
	if (*p++ != '"')
		return NULL;
	while (*p != '"') {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			p++;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!strchr("0123456789abcdefABCDEF", p[i]) || p[i] == '\0')
						return NULL;
				p += 4;
			} else if (!strchr("\"\\/bfnrt", *p) || *p == '\0') {
				return NULL;
			}
		}
		p++;
	}
	return p + 1;
}

static const char *json_number(const char *p)
{
	const char *start;
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return NULL;
	if (*p == '.') {
		start = ++p;
		while (*p >= '0' && *p <= '9')
			p++;
		if (p == start)
			return NULL;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		start = p;
		while (*p >= '0' && *p <= '9')
			p++;
		if (p == start)
			return NULL;
	}
	return p;
}

static const char *json_value(const char *p, int depth)
{
	if (depth > 32)
		return NULL;
	p = json_ws(p);
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		bool object = *p == '{';
		p = json_ws(p + 1);
		if (*p == close)
			return p + 1;
		while (true) {
			if (object) {
				p = json_string(json_ws(p));
				if (p == NULL || *(p = json_ws(p)) != ':')
					return NULL;
				p++;
			}
			p = json_value(p, depth + 1);
			if (p == NULL)
				return NULL;
			p = json_ws(p);
			if (*p == close)
				return p + 1;
			if (*p++ != ',')
				return NULL;
		}
	}
	if (*p == '"')
		return json_string(p);
	if (strncmp(p, "true", 4) == 0)
		return p + 4;
	if (strncmp(p, "false", 5) == 0)
		return p + 5;
	if (strncmp(p, "null", 4) == 0)
		return p + 4;
	return json_number(p);
}

static bool json_valid(const char *text)
{
	const char *end = json_value(text, 0);
	return end != NULL && *json_ws(end) == '\0';
}

static void test_json_checker_refuses_broken_json(void **state)
{
	(void)state;
	assert_true(json_valid("{\"a\":[1,2.5,-3e2,true,null,\"x\\u0041\"]}"));
	assert_false(json_valid("{\"a\":1,}"));
	assert_false(json_valid("{\"a\":nan}"));
	assert_false(json_valid("{\"a\":1"));
	assert_false(json_valid("{\"a\":01}"));
}

static void test_report_json_is_valid_with_the_facts(void **state)
{
	struct bench_config cfg;
	struct bench_result res;
	char *text = NULL;
	size_t size = 0;
	(void)state;

	config(&cfg);
	snprintf(cfg.prefix, sizeof(cfg.prefix), "q\"uote");
	assert_int_equal(bench_result_init(&res), 0);
	res.ops = 3;
	res.elapsed_ns = 1000000;
	res.statuses[HASP_STATUS_BUSY] = 2;
	bench_hist_record(res.lat[BENCH_LAT_OP], 1500);
	FILE *f = open_memstream(&text, &size);
	bench_report_json(f, "abc123", &cfg, &res);
	fclose(f);
	assert_true(json_valid(text));
	assert_non_null(strstr(text, "\"commit\":\"abc123\""));
	assert_non_null(strstr(text, "\"nproc\":"));
	assert_non_null(strstr(text, "\"kernel\":"));
	assert_non_null(strstr(text, "\"cpu\":"));
	assert_non_null(strstr(text, "\"p999\":"));
	assert_non_null(strstr(text, "\"BUSY\":2"));
	assert_non_null(strstr(text, "\"ops_per_s\":3000.0"));
	free(text);
	bench_result_deinit(&res);
}

/* Runs hasp-bench's command line `cmd` against the responder (then
 * stopped): its standard output into `out`, exit status 0 required. */
static void run_binary(const char *cmd, char *out, size_t size)
{
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, size - 1, p);
	out[n] = '\0';
	int status = pclose(p);
	responder_stop(&R);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_hasp_bench_binary_prints_valid_json(void **state)
{
	char cmd[512];
	static char out[65536];
	(void)state;

	start(1);
	snprintf(cmd, sizeof(cmd), "%s --cluster %s --clients 2 --count 50 --duration 5 --json",
		 bench_exe, cluster);
	run_binary(cmd, out, sizeof(out));
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "\"cycles\":50,"));
	assert_non_null(strstr(out, "\"tool\":\"hasp-bench\""));

	/* --threads: two engines, each with its own socket and half the
	 * sessions and count; the results add up. */
	start(1);
	snprintf(cmd, sizeof(cmd),
		 "%s --cluster %s --clients 4 --threads 2 --count 101 --duration 5 --json", bench_exe,
		 cluster);
	run_binary(cmd, out, sizeof(out));
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "\"cycles\":101,"));
	assert_non_null(strstr(out, "\"sessions\":4,"));
	assert_non_null(strstr(out, "\"threads\":2,"));
	assert_int_equal(seen(HASP_OP_SESSION_OPEN), 4);

	/* --engine libhasp --threads 2: a client group per thread, the
	 * same split and sums. */
	start(1);
	snprintf(cmd, sizeof(cmd),
		 "%s --cluster %s --engine libhasp --clients 4 --threads 2 --count 101 --duration 5 "
		 "--json", bench_exe, cluster);
	run_binary(cmd, out, sizeof(out));
	assert_true(json_valid(out));
	assert_non_null(strstr(out, "\"cycles\":101,"));
	assert_non_null(strstr(out, "\"sessions\":4,"));
	assert_non_null(strstr(out, "\"engine\":\"libhasp\""));
	assert_int_equal(seen(HASP_OP_SESSION_OPEN), 4);

	/* --threads with --rate: the rate is the run's, split over the
	 * engines (each offered all of it before: twice the load). About 200
	 * arrivals in 1 s (Poisson); 2 x 200 is far outside the bounds. */
	start(1);
	snprintf(cmd, sizeof(cmd),
		 "%s --cluster %s --clients 4 --threads 2 --rate 200 --warmup 0 --count 100000 "
		 "--duration 1 --json", bench_exe, cluster);
	run_binary(cmd, out, sizeof(out));
	const char *ops = strstr(out, "\"ops\":");
	assert_non_null(ops);
	unsigned long long op_count = strtoull(ops + 6, NULL, 10);
	print_message("--threads 2 --rate 200 for 1 s: %llu ops\n", op_count);
	assert_true(op_count >= 100 && op_count <= 300);

	/* A storm that lost a lock fails the run (exit 4); one that lost none passes. */
	start(1);
	snprintf(cmd, sizeof(cmd),
		 "%s --cluster %s --workload storm --locks 4 --window-ms 20 --count 2 --duration 5 "
		 "--json >/dev/null", bench_exe, cluster);
	int status = system(cmd);
	responder_stop(&R);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	start(1);
	T.hide_handoff = true;
	snprintf(cmd, sizeof(cmd),
		 "%s --cluster %s --workload storm --locks 4 --window-ms 20 --count 2 --duration 5 "
		 "--json >/dev/null", bench_exe, cluster); /* the new responder's ports */
	status = system(cmd);
	responder_stop(&R);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 4);

	snprintf(cmd, sizeof(cmd), "%s --cluster 127.0.0.1:1 --count 0 >/dev/null 2>&1", bench_exe);
	status = system(cmd);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 2); /* unbounded: refused */

	/* DPDK mode needs its own address and MAC; refused before any EAL work. */
	snprintf(cmd, sizeof(cmd), "%s --cluster 127.0.0.1:1 --dpdk --ip 10.0.0.5/24 -- -l 0 >/dev/null 2>&1",
		 bench_exe);
	status = system(cmd);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 2);
}

/* The libhasp engine's key names: the prefix written once, the key's
 * digits after it, as snprintf("%s/k%u") would write them. */
static void test_libhasp_names_match_snprintf(void **state)
{
	static const uint32_t keys[] = { 0, 7, 9, 10, 99, 4095, 123456, 4294967295u, 1 };
	struct lh_client s;
	char want[HASP_CLIENT_NAME_BUF];

	(void)state;
	memset(&s, 0, sizeof(s));
	int n = snprintf(s.name, sizeof(s.name), "%s/k", "svc/jobs");
	s.name_key_at = (uint8_t)n;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		lh_name_set(&s, keys[i]);
		snprintf(want, sizeof(want), "svc/jobs/k%u", keys[i]);
		assert_string_equal(s.name, want);
		assert_int_equal(s.key, keys[i]);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_libhasp_names_match_snprintf),
		cmocka_unit_test(test_hist_small_values_are_exact),
		cmocka_unit_test(test_hist_bucket_error_is_below_one_percent),
		cmocka_unit_test(test_hist_quantiles_of_uniform_values),
		cmocka_unit_test(test_hist_merge_equals_recording_both),
		cmocka_unit_test(test_hist_empty_reports_zero),
		cmocka_unit_test(test_poisson_gaps_have_the_rate_and_unit_cv),
		cmocka_unit_test(test_zipf_prefers_low_ranks),
		cmocka_unit_test_teardown(test_closed_loop_sends_one_acquire_and_release_per_cycle,
					  responder_teardown),
		cmocka_unit_test_teardown(test_uncontended_clients_never_share_a_key,
					  responder_teardown),
		cmocka_unit_test_teardown(test_contended_try_counts_busy, responder_teardown),
		cmocka_unit_test_teardown(test_not_leader_redirects_to_the_named_node,
					  responder_teardown),
		cmocka_unit_test_teardown(test_lost_requests_are_resent_with_the_same_bytes,
					  responder_teardown),
		cmocka_unit_test_teardown(test_open_loop_latency_includes_a_stall, responder_teardown),
		cmocka_unit_test_teardown(test_libhasp_opens_at_most_256_sessions_at_once,
					  responder_teardown),
		cmocka_unit_test_teardown(test_latency_log_holds_every_sample,
					  responder_teardown),
		cmocka_unit_test_teardown(test_burst_tells_every_waiter, responder_teardown),
		cmocka_unit_test_teardown(test_burst_tells_every_watcher, responder_teardown),
		cmocka_unit_test_teardown(test_storm_grants_every_waiter_and_tells_every_watcher,
					  responder_teardown),
		cmocka_unit_test_teardown(test_storm_counts_a_watcher_not_told_as_missing,
					  responder_teardown),
		cmocka_unit_test_teardown(test_storm_tells_a_watcher_its_lost_last_event,
					  responder_teardown),
		cmocka_unit_test_teardown(test_same_seed_runs_open_different_sessions,
					  responder_teardown),
		cmocka_unit_test_teardown(test_kv_mix_and_keepalive_storm, responder_teardown),
		cmocka_unit_test_teardown(test_every_run_is_bounded_by_duration, responder_teardown),
		cmocka_unit_test_teardown(test_libhasp_engine_probes_at_the_retransmission_pace,
					  responder_teardown),
		cmocka_unit_test_teardown(test_unanswered_request_is_given_up_at_its_deadline,
					  responder_teardown),
		cmocka_unit_test_teardown(test_close_phase_waits_for_every_close, responder_teardown),
		cmocka_unit_test_teardown(test_unanswered_closes_are_counted, responder_teardown),
		cmocka_unit_test(test_config_refuses_unbounded_and_bad_names),
		cmocka_unit_test(test_config_refuses_bad_storms),
		cmocka_unit_test_teardown(test_reads_do_not_put_the_keepalive_off, responder_teardown),
		cmocka_unit_test(test_json_checker_refuses_broken_json),
		cmocka_unit_test(test_report_json_is_valid_with_the_facts),
		cmocka_unit_test_teardown(test_hasp_bench_binary_prints_valid_json, responder_teardown),
	};
	test_util_install_assert_handler();
	if (argc < 2) {
		fprintf(stderr, "usage: test_bench <hasp-bench>\n");
		return 2;
	}
	bench_exe = argv[1];
	printf("seed=%llu\n", (unsigned long long)test_util_seed(7));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
