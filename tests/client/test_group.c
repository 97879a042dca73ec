/*
 * Client groups (client/group.c) against the scripted responder: several
 * clients on one socket complete lock cycles and KV operations at once
 * through one loop; each reply reaches the client whose session it names
 * (a reply naming another session does not complete this client's
 * request, one naming no session of the group is dropped and counted);
 * events reach the session they name; blocking calls on a grouped client
 * are refused; closing one client leaves the others working; an async
 * call from another thread wakes the loop through the group's fd; a new
 * leader one member learns of is followed by the others (watches
 * registered there at once, requests sent there).
 *
 * The responder here keeps one session per nonce, and its answers carry
 * the session they were asked in (tokens, revisions and values encode the
 * session id), so a reply handed to the wrong client would show. Loops end
 * when every operation has completed, each by its deadline (3 s); a count
 * bound stops them anyway.
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/client_impl.h"
#include "common/clock.h"
#include "hasp/client.h"
#include "tests/client/client_test.h"
#include "tests/client/responder.h"
#include "tests/test_util.h"

#define CLIENTS 4
#define CYCLES 25
#define SESSIONS_MAX 128
#define PORTS_MAX 8
#define LOOP_TURNS_MAX 100000
#define SESSION_BASE 100

struct gscript {
	uint64_t nonces[SESSIONS_MAX];
	uint32_t sessions;
	uint16_t ports[PORTS_MAX]; /* distinct client source ports seen */
	uint32_t port_count;
	/* Lose the first KV_GET of this session (0: none). */
	uint64_t drop_get_session;
	bool dropped;
	/* KV_GET of "mis/key": first answered with this session id (another
	 * client's) and the value "wrong"; the retransmission gets the right
	 * answer. */
	uint64_t misroute_session;
	bool misrouted;
	/* Session ids that share their slot in the group's session index at
	 * every table size up to 2^12 slots: they differ only from bit 44 up,
	 * and a multiplicative hash carries no bit of a product upwards into
	 * bits 32-43, the slot. Every lookup then probes. */
	bool colliding_ids;
	/* KV_PUTs of "burst/..." are held until hold_count have come, then
	 * answered together (burst_sent): a burst of replies that waits, all
	 * of it, on the group's socket. */
	uint32_t hold_count;
	uint32_t held_count;
	bool burst_sent;
	bool hold_once; /* after the first burst, answer them at once */
	/* The "burst/" KV_PUTs seen, each (session, seq) once: retransmissions
	 * are neither counted nor held twice. */
	uint32_t puts_seen;
	struct put_seen {
		uint64_t session, seq;
	} puts[SESSIONS_MAX];
	struct held_reply {
		uint64_t session, seq;
		int node;
		struct sockaddr_in to;
		size_t size;
		uint8_t data[HASP_DATAGRAM_SIZE_MAX];
	} held[SESSIONS_MAX];
};

#define COLLIDE_SHIFT 44

/* What an answer encodes of its session: SESSION_BASE + the session's
 * number, whichever way its id was made. */
static uint64_t session_tag(uint64_t session)
{
	return session >> COLLIDE_SHIFT != 0 ? SESSION_BASE + (session >> COLLIDE_SHIFT) - 1 : session;
}

static void note_port(struct gscript *s, const struct sockaddr_in *from)
{
	for (uint32_t i = 0; i < s->port_count; i++)
		if (s->ports[i] == from->sin_port)
			return;
	if (s->port_count < PORTS_MAX)
		s->ports[s->port_count++] = from->sin_port;
}

/* A session per nonce (a retried open gets the same one), ids from 100. */
static uint64_t session_for_nonce(struct gscript *s, uint64_t nonce)
{
	uint32_t i = 0;

	while (i < s->sessions && s->nonces[i] != nonce)
		i++;
	if (i == s->sessions) {
		assert_true(s->sessions < SESSIONS_MAX);
		s->nonces[s->sessions++] = nonce;
	}
	return s->colliding_ids ? SESSION_BASE + ((uint64_t)(i + 1) << COLLIDE_SHIFT) : SESSION_BASE + i;
}

/* True the first time this (session, seq) comes (under the lock). */
static bool put_first_seen(struct gscript *s, const struct hasp_wire_msg *req)
{
	for (uint32_t i = 0; i < s->puts_seen; i++)
		if (s->puts[i].session == req->hdr.session_id && s->puts[i].seq == req->hdr.seq)
			return false;
	assert_true(s->puts_seen < SESSIONS_MAX);
	s->puts[s->puts_seen++] = (struct put_seen){ req->hdr.session_id, req->hdr.seq };
	return true;
}

static uint32_t puts_seen(struct responder *r, struct gscript *s)
{
	responder_lock(r);
	uint32_t n = s->puts_seen;
	responder_unlock(r);
	return n;
}

/* Keeps the reply; the one that completes the burst sends them all. A
 * retransmission of a held request is dropped (its reply is held). */
static void hold_reply(struct responder *r, struct gscript *s, int node, const struct sockaddr_in *to,
		       const struct hasp_wire_msg *rep)
{
	responder_lock(r);
	for (uint32_t i = 0; i < s->held_count; i++) {
		if (s->held[i].session == rep->hdr.session_id && s->held[i].seq == rep->hdr.seq) {
			responder_unlock(r);
			return;
		}
	}
	assert_true(s->held_count < s->hold_count);
	struct held_reply *h = &s->held[s->held_count++];
	h->session = rep->hdr.session_id;
	h->seq = rep->hdr.seq;
	int size = hasp_wire_encode(rep, h->data, sizeof(h->data));
	assert_true(size > 0);
	h->size = (size_t)size;
	h->node = node;
	h->to = *to;
	bool full = s->held_count == s->hold_count;
	responder_unlock(r);
	if (!full)
		return;
	for (uint32_t i = 0; i < s->hold_count; i++)
		responder_send_raw(r, s->held[i].node, &s->held[i].to, s->held[i].data, s->held[i].size);
	responder_lock(r);
	s->held_count = 0;
	s->burst_sent = true;
	responder_unlock(r);
}

static void script_group(struct responder *r, int node, const struct hasp_wire_msg *req,
			 const struct sockaddr_in *from, void *arg)
{
	struct gscript *s = arg;
	struct hasp_wire_msg rep;
	char value[32];
	bool drop = false;
	bool misroute = false;

	if (req == NULL)
		return;
	responder_lock(r);
	note_port(s, from);
	uint64_t session = req->hdr.opcode == HASP_OP_SESSION_OPEN
				   ? session_for_nonce(s, req->body.session_open.client_nonce)
				   : req->hdr.session_id;
	if (req->hdr.opcode == HASP_OP_KV_GET && session == s->drop_get_session && !s->dropped) {
		s->dropped = true;
		drop = true;
	}
	if (req->hdr.opcode == HASP_OP_KV_GET && s->misroute_session != 0 && !s->misrouted &&
	    req->body.kv_get.name.size == 7 && memcmp(req->body.kv_get.name.data, "mis/key", 7) == 0) {
		s->misrouted = true;
		misroute = true;
	}
	uint64_t other = s->misroute_session;
	responder_unlock(r);
	uint64_t tag = session_tag(session);
	if (drop)
		return; /* lost: the group's timer retransmits it */
	if (req->hdr.opcode == HASP_OP_KV_GET && req->body.kv_get.name.size == 7 &&
	    memcmp(req->body.kv_get.name.data, "exp/key", 7) == 0) {
		/* The session is gone: the client's next call opens another. */
		reply_status(r, node, req, from, HASP_STATUS_SESSION_EXPIRED);
		return;
	}
	if (req->hdr.opcode == HASP_OP_KV_GET && req->body.kv_get.name.size == 7 &&
	    memcmp(req->body.kv_get.name.data, "unk/key", 7) == 0) {
		responder_reply_init(&rep, req, HASP_STATUS_NOT_FOUND);
		rep.hdr.session_id = 0xdead; /* nobody's */
		responder_send(r, node, from, &rep);
	}

	switch (req->hdr.opcode) {
	case HASP_OP_SESSION_OPEN:
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		rep.body.session_opened.session_id = session;
		rep.body.session_opened.ttl_ms = req->body.session_open.ttl_ms;
		break;
	case HASP_OP_SESSION_KEEPALIVE:
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		rep.body.session_alive.ttl_ms = 10000;
		break;
	case HASP_OP_ACQUIRE: /* the token names the session it was granted to */
		reply_granted(r, node, req, from, req->hdr.seq * 1000 + tag);
		return;
	case HASP_OP_KV_PUT:
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		rep.body.kv_revision.revision = req->hdr.seq * 1000 + tag;
		break;
	case HASP_OP_KV_GET:
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		snprintf(value, sizeof(value), misroute ? "wrong" : "s%llu",
			 (unsigned long long)tag);
		if (misroute)
			rep.hdr.session_id = other; /* another client's session */
		rep.body.kv_value.revision = tag;
		rep.body.kv_value.value.data = (const uint8_t *)value;
		rep.body.kv_value.value.size = strlen(value);
		break;
	case HASP_OP_WATCH: {
		/* OK, then an event in the watching session, its revision that
		 * session's id: the first of the session's chain. */
		struct hasp_wire_msg ev;
		reply_status(r, node, req, from, HASP_STATUS_OK);
		memset(&ev, 0, sizeof(ev));
		ev.hdr.opcode = HASP_OP_EVENT;
		ev.hdr.flags = HASP_WIRE_F_REPLY;
		ev.hdr.status = HASP_STATUS_OK;
		ev.hdr.session_id = session;
		ev.hdr.seq = 1;
		ev.body.event.type = HASP_EVENT_KV_PUT;
		ev.body.event.name = req->body.watch.name;
		ev.body.event.revision = tag;
		responder_send(r, node, from, &ev);
		return;
	}
	default: /* RELEASE, SESSION_CLOSE, ... */
		responder_reply_init(&rep, req, HASP_STATUS_OK);
	}
	if (req->hdr.opcode == HASP_OP_KV_PUT && req->body.kv_put.key.size > 6 &&
	    memcmp(req->body.kv_put.key.data, "burst/", 6) == 0) {
		responder_lock(r);
		(void)put_first_seen(s, req);
		bool hold = !(s->hold_once && s->burst_sent);
		responder_unlock(r);
		if (hold) {
			hold_reply(r, s, node, from, &rep);
			return;
		}
	}
	responder_send(r, node, from, &rep);
}

/* One client's chain of work: ACQUIRE, RELEASE, KV_PUT, KV_GET, again,
 * each started by the previous one's callback. */
struct worker {
	struct hasp_client *c;
	char name[32];
	uint32_t cycles;
	uint32_t wanted;
	uint32_t errors;
	uint32_t wrong_session; /* answers that carried another session */
	bool done;
};

/* The client's session as the answers encode it. */
static uint64_t session_of(struct hasp_client *c)
{
	uint64_t id = session_tag(hasp_client_session_id(c));

	assert_true(id >= SESSION_BASE && id < SESSION_BASE + SESSIONS_MAX);
	return id;
}

static void step(struct worker *w, int rc);

/* An operation ended with rc, or an async call returned it: an error
 * ends the chain. */
static void check(struct worker *w, int rc)
{
	if (rc != 0) {
		w->errors++;
		w->done = true;
	}
}

static void on_get(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct worker *w = arg;
	char want[32];

	snprintf(want, sizeof(want), "s%llu", (unsigned long long)session_of(c));
	if (res->rc == 0 && (res->value.revision != session_of(c) ||
			     res->value.value_size != strlen(want) ||
			     memcmp(res->value.value, want, strlen(want)) != 0))
		w->wrong_session++;
	w->cycles++;
	step(w, res->rc);
}

static void on_put(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct worker *w = arg;

	if (res->rc == 0 && res->revision % 1000 != session_of(c))
		w->wrong_session++;
	check(w, res->rc);
	if (res->rc == 0)
		check(w, hasp_client_kv_get_async(c, w->name, on_get, w, NULL));
}

static void on_release(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct worker *w = arg;

	check(w, res->rc);
	if (res->rc == 0)
		check(w, hasp_client_kv_put_async(c, w->name, "v", 1, 0, on_put, w, NULL));
}

static void on_acquire(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct worker *w = arg;

	if (res->rc == 0 && res->lock.token % 1000 != session_of(c))
		w->wrong_session++;
	check(w, res->rc);
	if (res->rc == 0)
		check(w, hasp_client_release_async(c, w->name, res->lock.token, on_release, w,
						   NULL));
}

/* Starts the next cycle, or ends the chain on an error or when done. A
 * non-zero rc from an async call (nothing started) ends it too. */
static void step(struct worker *w, int rc)
{
	struct hasp_acquire_opts opts = { .ttl_ms = 5000 };

	if (rc != 0) {
		w->errors++;
		w->done = true;
		return;
	}
	if (w->cycles == w->wanted) {
		w->done = true;
		return;
	}
	rc = hasp_client_acquire_async(w->c, w->name, &opts, on_acquire, w, NULL);
	if (rc != 0) {
		w->errors++;
		w->done = true;
	}
}

static void group_turn(struct hasp_client_group *g)
{
	struct pollfd pfd = { .fd = hasp_client_group_fd(g), .events = POLLIN };
	int timeout = hasp_client_group_timeout_ms(g);

	assert_true(pfd.fd >= 0);
	/* -1 (nothing in progress) waits on the fd alone: bounded here. */
	assert_true(poll(&pfd, 1, timeout < 0 || timeout > 100 ? 100 : timeout) >= 0);
	assert_int_equal(hasp_client_group_process(g, NULL), 0);
}

static bool all_done(const struct worker *w, int n)
{
	for (int i = 0; i < n; i++)
		if (w[i].c != NULL && !w[i].done)
			return false;
	return true;
}

static void run_group(struct hasp_client_group *g, const struct worker *w, int n)
{
	for (int turn = 0; turn < LOOP_TURNS_MAX && !all_done(w, n); turn++)
		group_turn(g);
	assert_true(all_done(w, n));
}

static struct hasp_client *open_grouped(struct responder *r, struct hasp_client_group *g,
				       char *cluster, size_t size, uint64_t seed)
{
	struct hasp_client_config cfg;
	struct hasp_client *c = NULL;

	test_config(&cfg, NULL);
	responder_cluster(r, cluster, size);
	cfg.cluster = cluster;
	/* Each client its own nonces: one nonce is one session. */
	cfg.nonce_seed = test_util_seed(0x9e0u) + seed;
	assert_int_equal(hasp_client_open_in_group(&c, &cfg, g), 0);
	return c;
}

static void test_group_clients_cycle_concurrently(void **state)
{
	static struct gscript s;
	static struct responder r;
	static struct worker w[CLIENTS];
	struct hasp_client_group *g = NULL;
	struct hasp_client_group_stats gs;
	char cluster[128];
	(void)state;

	memset(&s, 0, sizeof(s));
	memset(w, 0, sizeof(w));
	s.drop_get_session = SESSION_BASE + 1; /* one loss: the group's timer resends */
	assert_int_equal(responder_start(&r, 1, script_group, &s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	assert_int_equal(hasp_client_group_timeout_ms(g), -1); /* nothing in progress */
	for (int i = 0; i < CLIENTS; i++) {
		w[i].c = open_grouped(&r, g, cluster, sizeof(cluster), (uint64_t)i);
		w[i].wanted = CYCLES;
		snprintf(w[i].name, sizeof(w[i].name), "g/%d", i);
	}
	/* All four start at once: their sessions open in parallel. */
	for (int i = 0; i < CLIENTS; i++)
		step(&w[i], 0);
	assert_int_equal(hasp_client_group_timeout_ms(g), 0);
	/* Started outside the loop: the group's fd says so (its eventfd). */
	struct pollfd pfd = { .fd = hasp_client_group_fd(g), .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 0), 1);
	run_group(g, w, CLIENTS);

	uint64_t sessions[CLIENTS];
	for (int i = 0; i < CLIENTS; i++) {
		struct hasp_client_stats st;
		assert_int_equal(w[i].errors, 0);
		assert_int_equal(w[i].wrong_session, 0);
		assert_int_equal(w[i].cycles, CYCLES);
		sessions[i] = hasp_client_session_id(w[i].c);
		for (int j = 0; j < i; j++)
			assert_true(sessions[j] != sessions[i]); /* a session each */
		hasp_client_stats_get(w[i].c, &st);
		assert_int_equal(st.session_opens, 1);
		assert_int_equal(st.tx_requests, 1 + 4 * CYCLES);
		assert_int_equal(st.rx_stray + st.rx_malformed + st.rx_unknown_source, 0);
	}
	hasp_client_group_stats_get(g, &gs);
	assert_int_equal(gs.rx_unrouted, 0);
	assert_true(gs.tx_datagrams >= CLIENTS * (1 + 4 * CYCLES) + 1); /* + the resent one */
	/* The sends of one process leave together: fewer calls than datagrams. */
	assert_true(gs.tx_batches < gs.tx_datagrams);
	responder_lock(&r);
	assert_int_equal(s.port_count, 1); /* one socket for all four */
	assert_true(s.dropped);
	responder_unlock(&r);

	for (int i = 0; i < CLIENTS; i++)
		hasp_client_close(w[i].c);
	hasp_client_group_free(g);
	responder_stop(&r);
}

#define BURST_CLIENTS 40 /* more replies than one recvmmsg(2) of the group reads (32) */
#define BURST_ATTEMPTS 5

static bool burst_sent(struct responder *r, struct gscript *s)
{
	responder_lock(r);
	bool sent = s->burst_sent;
	responder_unlock(r);
	return sent;
}

/* Every client's session open, one KV_GET each, before the test's burst. */
static void open_workers(struct responder *r, struct hasp_client_group *g, struct worker *w, int n,
			 char *cluster, size_t size)
{
	for (int i = 0; i < n; i++) {
		w[i].c = open_grouped(r, g, cluster, size, (uint64_t)i);
		w[i].wanted = 1;
		snprintf(w[i].name, sizeof(w[i].name), "burst/%d", i);
		check(&w[i], hasp_client_kv_get_async(w[i].c, w[i].name, on_get, &w[i], NULL));
	}
	run_group(g, w, n);
}

/* Each worker starts a KV_PUT of its "burst/" key (then its KV_GET). */
static void put_all(struct worker *w, int n)
{
	for (int i = 0; i < n; i++) {
		w[i].done = false;
		w[i].wanted = w[i].cycles + 1; /* the KV_PUT, then its KV_GET */
		check(&w[i], hasp_client_kv_put_async(w[i].c, w[i].name, "v", 1, 0, on_put, &w[i], NULL));
	}
}

/* Waits (not reading) until the responder answered the held burst. */
static void wait_burst_sent(struct responder *r, struct gscript *s)
{
	for (int i = 0; i < 10000 && !burst_sent(r, s); i++) {
		struct timespec ms = { .tv_nsec = 1000000 };
		nanosleep(&ms, NULL);
	}
	assert_true(burst_sent(r, s));
}

/* A process call that finds more replies waiting than one receive batch
 * holds sends the follow-up requests of the first batch (each reply's
 * callback starts a KV_GET) before it reads the next: those requests do
 * not wait while the rest is read and processed. Before, one call read
 * everything and then sent everything in one sendmmsg. */
static void test_group_sends_a_batch_s_follow_ups_before_reading_the_next(void **state)
{
	static struct gscript s;
	static struct responder r;
	static struct worker w[BURST_CLIENTS];
	struct hasp_client_group *g = NULL;
	char cluster[128];
	bool burst_read_whole = false;
	(void)state;

	memset(&s, 0, sizeof(s));
	memset(w, 0, sizeof(w));
	assert_int_equal(responder_start(&r, 1, script_group, &s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	/* Every session open first (a KV_GET each), so that the burst's
	 * requests leave in one process call. */
	open_workers(&r, g, w, BURST_CLIENTS, cluster, sizeof(cluster));
	for (int attempt = 0; attempt < BURST_ATTEMPTS && !burst_read_whole; attempt++) {
		struct hasp_client_group_stats before, after;
		responder_lock(&r);
		s.hold_count = BURST_CLIENTS;
		s.burst_sent = false;
		responder_unlock(&r);
		put_all(w, BURST_CLIENTS);
		/* One call sends the 40 KV_PUTs; the loop then waits (not
		 * reading) until the responder has answered them all at once. */
		assert_int_equal(hasp_client_group_process(g, NULL), 0);
		wait_burst_sent(&r, &s);
		hasp_client_group_stats_get(g, &before);
		assert_int_equal(hasp_client_group_process(g, NULL), 0);
		hasp_client_group_stats_get(g, &after);
		/* A burst the kernel delivered in two parts is read by two calls
		 * of one batch each, which says nothing: the burst again. */
		if (after.rx_batches - before.rx_batches >= 2 &&
		    after.rx_datagrams - before.rx_datagrams > 32) {
			burst_read_whole = true;
			/* The first batch's follow-ups left before the second
			 * batch was read: a send per batch read. */
			assert_true(after.tx_batches - before.tx_batches >= 2);
		}
		run_group(g, w, BURST_CLIENTS);
		for (int i = 0; i < BURST_CLIENTS; i++) {
			assert_int_equal(w[i].errors, 0);
			assert_int_equal(w[i].wrong_session, 0);
		}
	}
	assert_true(burst_read_whole);
	for (int i = 0; i < BURST_CLIENTS; i++)
		hasp_client_close(w[i].c);
	hasp_client_group_free(g);
	responder_stop(&r);
}

/* The window tests' set-up: n clients open in a group whose window is
 * `window`, and a responder that holds the "burst/" PUTs until hold_count
 * have come (then answers later ones at once if hold_once). */
static struct hasp_client_group *window_group(struct responder *r, struct gscript *s, struct worker *w,
					      int n, uint32_t window, uint32_t hold_count, bool hold_once,
					      char *cluster, size_t cluster_size)
{
	struct hasp_client_group *g = NULL;

	memset(s, 0, sizeof(*s));
	memset(w, 0, (size_t)n * sizeof(*w));
	assert_int_equal(responder_start(r, 1, script_group, s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	open_workers(r, g, w, n, cluster, cluster_size);
	assert_int_equal(hasp_client_group_set_window(g, window), 0);
	responder_lock(r);
	s->hold_count = hold_count;
	s->hold_once = hold_once;
	responder_unlock(r);
	return g;
}

#define WINDOW 8

/* A group's window bounds the requests its clients have in flight
 * together: 40 clients that each start a KV_PUT at once send 8 of them,
 * the others as places free; every one completes. Without it, one process
 * call sent all 40 (a burst that thousands of clients make into a storm of
 * dropped answers and retransmissions: docs/CLIENT.md "Client groups"). */
static void test_group_window_bounds_the_requests_in_flight(void **state)
{
	static struct gscript s;
	static struct responder r;
	static struct worker w[BURST_CLIENTS];
	char cluster[128];
	(void)state;

	/* The first 8 PUTs are answered together. */
	struct hasp_client_group *g = window_group(&r, &s, w, BURST_CLIENTS, WINDOW, WINDOW, true,
						   cluster, sizeof(cluster));
	uint64_t waits = client_group_credit_waits(g);
	put_all(w, BURST_CLIENTS);
	assert_int_equal(hasp_client_group_process(g, NULL), 0);
	wait_burst_sent(&r, &s);
	/* One call sent the window's worth, not every client's PUT. */
	assert_int_equal(puts_seen(&r, &s), WINDOW);
	assert_true(client_group_credit_waits(g) - waits >= BURST_CLIENTS - WINDOW);
	run_group(g, w, BURST_CLIENTS);
	for (int i = 0; i < BURST_CLIENTS; i++) {
		assert_int_equal(w[i].errors, 0);
		assert_int_equal(w[i].wrong_session, 0);
	}
	assert_int_equal(puts_seen(&r, &s), BURST_CLIENTS);
	for (int i = 0; i < BURST_CLIENTS; i++)
		hasp_client_close(w[i].c);
	hasp_client_group_free(g);
	responder_stop(&r);
}

/* A client that leaves the group gives back the places of what it still
 * had in flight: with a window of one, B's request waits behind A's,
 * unanswered, and goes out when A is closed. */
static void test_group_window_places_come_back_when_a_client_closes(void **state)
{
	static struct gscript s;
	static struct responder r;
	static struct worker w[2];
	char cluster[128];
	(void)state;

	/* A's PUT waits for a second one. */
	struct hasp_client_group *g = window_group(&r, &s, w, 2, 1, 2, false, cluster, sizeof(cluster));
	put_all(w, 2);
	for (int turn = 0; turn < 20; turn++)
		group_turn(g);
	assert_int_equal(puts_seen(&r, &s), 1); /* A's (retransmitted, held) */
	assert_false(w[1].done);
	hasp_client_close(w[0].c);
	w[0].c = NULL;
	run_group(g, w, 2);
	assert_int_equal(w[1].errors, 0);
	assert_int_equal(w[1].wrong_session, 0);
	hasp_client_close(w[1].c);
	hasp_client_group_free(g);
	responder_stop(&r);
}

/* Completions of one client's many PUTs. */
struct put_count {
	uint32_t ok, failed;
};

static void on_put_counted(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct put_count *k = arg;

	(void)c;
	if (res->rc == 0)
		k->ok++;
	else
		k->failed++;
}

/* A request that waits for a number of its own session (32 of them in
 * flight) holds no place of the group's window. With a window of 33, A
 * starts 33 PUTs: 32 go out and are held, the 33rd waits for A's session;
 * B's PUT takes the last place, the 33rd held PUT, which answers the
 * lot. Before, A's 33rd took that place and then waited for its number
 * with it, and B's PUT waited for a place that only deadlines gave back. */
static void test_group_window_place_not_held_by_a_request_waiting_for_its_session(void **state)
{
	enum { A_PUTS = HASP_SESSION_INFLIGHT_MAX + 1 };
	static struct gscript s;
	static struct responder r;
	static struct worker w[2];
	struct put_count a_puts = { 0, 0 };
	char cluster[128];
	(void)state;

	struct hasp_client_group *g = window_group(&r, &s, w, 2, A_PUTS, A_PUTS, true, cluster,
						   sizeof(cluster));
	for (int i = 0; i < A_PUTS; i++)
		assert_int_equal(hasp_client_kv_put_async(w[0].c, w[0].name, "v", 1, 0, on_put_counted,
							  &a_puts, NULL),
				 0);
	assert_int_equal(hasp_client_group_process(g, NULL), 0);
	put_all(&w[1], 1);
	for (int turn = 0; turn < LOOP_TURNS_MAX && !(w[1].done && a_puts.ok + a_puts.failed == A_PUTS);
	     turn++)
		group_turn(g);
	assert_true(w[1].done);
	assert_int_equal(w[1].errors, 0);
	assert_int_equal(w[1].wrong_session, 0);
	assert_int_equal(a_puts.failed, 0);
	assert_int_equal(a_puts.ok, A_PUTS);
	for (int i = 0; i < 2; i++)
		hasp_client_close(w[i].c);
	hasp_client_group_free(g);
	responder_stop(&r);
}

static void on_one(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct hasp_result *out = arg;

	(void)c;
	*out = *res;
	out->id = out->id == 0 ? 1 : out->id; /* completed */
}

/* A reply that names another client's session never completes this
 * client's request; one naming no session of the group is dropped and
 * counted by the group. */
static void test_group_routes_by_session(void **state)
{
	static struct gscript s;
	static struct responder r;
	static struct hasp_result res_a, res_b;
	struct hasp_client_group *g = NULL;
	struct hasp_client_group_stats gs;
	struct hasp_client_stats st_a, st_b;
	char cluster[128];
	(void)state;

	memset(&s, 0, sizeof(s));
	memset(&res_a, 0, sizeof(res_a));
	memset(&res_b, 0, sizeof(res_b));
	assert_int_equal(responder_start(&r, 1, script_group, &s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	struct hasp_client *a = open_grouped(&r, g, cluster, sizeof(cluster), 1);
	struct hasp_client *b = open_grouped(&r, g, cluster, sizeof(cluster), 2);
	assert_int_equal(hasp_client_connect_async(a, on_one, &res_a, NULL), 0);
	assert_int_equal(hasp_client_connect_async(b, on_one, &res_b, NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && (res_a.id == 0 || res_b.id == 0); turn++)
		group_turn(g);
	assert_int_equal(res_a.rc, 0);
	assert_int_equal(res_b.rc, 0);
	uint64_t sa = hasp_client_session_id(a);
	uint64_t sb = hasp_client_session_id(b);
	assert_true(sa != sb && sa != 0 && sb != 0);

	/* A's KV_GET of mis/key is answered first in B's session ("wrong"),
	 * then, on A's retransmission, in its own. */
	responder_lock(&r);
	s.misroute_session = sb;
	responder_unlock(&r);
	memset(&res_a, 0, sizeof(res_a));
	assert_int_equal(hasp_client_kv_get_async(a, "mis/key", on_one, &res_a, NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res_a.id == 0; turn++)
		group_turn(g);
	char want[32];
	snprintf(want, sizeof(want), "s%llu", (unsigned long long)sa);
	assert_int_equal(res_a.rc, 0);
	assert_int_equal(res_a.value.revision, sa);
	assert_int_equal(res_a.value.value_size, strlen(want));
	assert_memory_equal(res_a.value.value, want, strlen(want));
	responder_lock(&r);
	assert_true(s.misrouted);
	responder_unlock(&r);
	hasp_client_stats_get(a, &st_a);
	hasp_client_stats_get(b, &st_b);
	assert_true(st_a.tx_retransmits >= 1); /* the misrouted answer did not count */
	/* B got it and dropped it: not its request (its seq was answered
	 * already, or never sent). */
	assert_int_equal(st_b.rx_stray + st_b.rx_duplicates, 1);
	assert_int_equal(st_b.rx_replies, 1); /* its open */

	hasp_client_group_stats_get(g, &gs);
	assert_int_equal(gs.rx_unrouted, 0);
	/* A datagram naming a session no client of the group has comes
	 * before the answer of unk/key: dropped by the group, counted. */
	memset(&res_b, 0, sizeof(res_b));
	assert_int_equal(hasp_client_kv_get_async(b, "unk/key", on_one, &res_b, NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res_b.id == 0; turn++)
		group_turn(g);
	assert_int_equal(res_b.rc, 0);
	hasp_client_group_stats_get(g, &gs);
	assert_int_equal(gs.rx_unrouted, 1);
	hasp_client_stats_get(a, &st_a);
	hasp_client_stats_get(b, &st_b);
	assert_int_equal(st_a.rx_stray + st_a.rx_duplicates, 0);
	assert_int_equal(st_b.rx_stray + st_b.rx_duplicates, 1); /* the one above */

	hasp_client_close(a);
	hasp_client_close(b);
	hasp_client_group_free(g);
	responder_stop(&r);
}

/* Everything that would wait on the shared socket is refused, and
 * nothing is sent for it. */
static void test_group_blocking_calls_refused(void **state)
{
	static struct gscript s;
	static struct responder r;
	struct hasp_client_group *g = NULL;
	struct hasp_lock lock;
	struct hasp_kv_value v;
	struct hasp_event ev;
	uint64_t rev;
	uint32_t completed;
	char cluster[128];
	(void)state;

	memset(&s, 0, sizeof(s));
	assert_int_equal(responder_start(&r, 1, script_group, &s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	struct hasp_client *c = open_grouped(&r, g, cluster, sizeof(cluster), 3);
	struct hasp_acquire_opts opts = { .ttl_ms = 5000 };
	assert_int_equal(hasp_client_connect(c), -HASP_EINVAL);
	assert_int_equal(hasp_client_acquire(c, "x", &opts, &lock), -HASP_EINVAL);
	assert_int_equal(hasp_client_release(c, "x", 1), -HASP_EINVAL);
	assert_int_equal(hasp_client_kv_get(c, "x", &v), -HASP_EINVAL);
	assert_int_equal(hasp_client_kv_put(c, "x", "v", 1, 0, &rev), -HASP_EINVAL);
	assert_int_equal(hasp_client_kv_range(c, "x", 0, range_collect, NULL), -HASP_EINVAL);
	assert_int_equal(hasp_client_fd(c), -HASP_EINVAL);
	assert_int_equal(hasp_client_process(c, &completed), -HASP_EINVAL);
	assert_int_equal(hasp_client_keepalive_start(c), -HASP_ESTATE);
	assert_int_equal(hasp_client_next_event(c, &ev, 10), -HASP_EINVAL);
	assert_int_equal(hasp_client_next_event(c, &ev, 0), -HASP_ETIMEDOUT); /* none buffered */
	struct hasp_client *none = c;
	assert_int_equal(hasp_client_open_in_group(&none, NULL, NULL), -HASP_EINVAL);
	assert_null(none);
	hasp_client_close(NULL);
	/* The refused calls sent nothing. */
	assert_int_equal(hasp_client_group_process(g, &completed), 0);
	assert_int_equal(completed, 0);
	assert_int_equal(responder_count(&r, 0, -1), 0);
	hasp_client_close(c);
	responder_stop(&r);
	hasp_client_group_free(g);
}

/* Closing one grouped client sends its SESSION_CLOSE at once (no
 * waiting) and the others keep working on the shared socket. */
static void test_group_close_one_others_work(void **state)
{
	static struct gscript s;
	static struct responder r;
	static struct worker w[3];
	struct hasp_client_group *g = NULL;
	char cluster[128];
	(void)state;

	memset(&s, 0, sizeof(s));
	memset(w, 0, sizeof(w));
	assert_int_equal(responder_start(&r, 1, script_group, &s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	for (int i = 0; i < 3; i++) {
		w[i].c = open_grouped(&r, g, cluster, sizeof(cluster), 10 + (uint64_t)i);
		w[i].wanted = 2;
		snprintf(w[i].name, sizeof(w[i].name), "c/%d", i);
		step(&w[i], 0);
	}
	run_group(g, w, 3);
	uint64_t closed_session = hasp_client_session_id(w[1].c);
	hasp_client_close(w[1].c); /* returns without the loop */
	w[1].c = NULL;
	/* Its SESSION_CLOSE went out at once, in its session. */
	struct responder_rx rx;
	bool seen = false;
	uint64_t until = clock_monotonic_ns() + 3000 * MS;
	while (!seen && clock_monotonic_ns() < until) {
		seen = responder_find(&r, HASP_OP_SESSION_CLOSE, 0, &rx);
		if (!seen)
			(void)poll(NULL, 0, 2);
	}
	assert_true(seen);
	assert_int_equal(rx.hdr.session_id, closed_session);
	/* The others go on; its late answer is nobody's. */
	for (int i = 0; i < 3; i += 2) {
		w[i].wanted += 3;
		w[i].done = false;
		step(&w[i], 0);
	}
	run_group(g, w, 3);
	struct hasp_client_group_stats gs;
	hasp_client_group_stats_get(g, &gs);
	for (int turn = 0; turn < 300 && gs.rx_unrouted == 0; turn++) {
		group_turn(g); /* the answer to SESSION_CLOSE may still come */
		hasp_client_group_stats_get(g, &gs);
	}
	assert_int_equal(gs.rx_unrouted, 1); /* that answer: nobody's now */
	for (int i = 0; i < 3; i += 2) {
		assert_int_equal(w[i].errors, 0);
		assert_int_equal(w[i].wrong_session, 0);
		assert_int_equal(w[i].cycles, 5);
	}
	hasp_client_close(w[0].c);
	hasp_client_close(w[2].c);
	hasp_client_group_free(g);
	responder_stop(&r);
}

struct starter {
	struct hasp_client *c;
	struct hasp_result res;
	int rc;
};

static void *start_get_main(void *arg)
{
	struct starter *st = arg;

	st->rc = hasp_client_kv_get_async(st->c, "t/key", on_one, &st->res, NULL);
	return NULL;
}

/* An *_async call from another thread wakes the loop waiting on the
 * group's fd (nothing else would: no client has anything in progress),
 * and the loop completes it. */
static void test_group_async_from_another_thread_wakes_loop(void **state)
{
	static struct gscript s;
	static struct responder r;
	static struct starter st;
	struct hasp_client_group *g = NULL;
	pthread_t t;
	char cluster[128];
	(void)state;

	memset(&s, 0, sizeof(s));
	memset(&st, 0, sizeof(st));
	assert_int_equal(responder_start(&r, 1, script_group, &s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	st.c = open_grouped(&r, g, cluster, sizeof(cluster), 20);
	assert_int_equal(hasp_client_group_timeout_ms(g), -1);
	assert_int_equal(pthread_create(&t, NULL, start_get_main, &st), 0);
	/* Bounded (10 s) only so that a broken wake-up fails instead of
	 * hanging; the eventfd ends the wait as soon as the call returns. */
	struct pollfd pfd = { .fd = hasp_client_group_fd(g), .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(st.rc, 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && st.res.id == 0; turn++)
		group_turn(g);
	assert_int_equal(st.res.rc, 0);
	assert_int_equal(st.res.value.revision, hasp_client_session_id(st.c));
	hasp_client_close(st.c);
	hasp_client_group_free(g);
	responder_stop(&r);
}

/* Events reach the client whose session they name, through the group's
 * socket, into that client's buffer (hasp_client_next_event, timeout 0). */
static void test_group_events_to_their_session(void **state)
{
	static struct gscript s;
	static struct responder r;
	static struct hasp_result res[2];
	struct hasp_client_group *g = NULL;
	struct hasp_client *c[2];
	uint32_t got[2] = { 0, 0 };
	struct hasp_event ev;
	char cluster[128];
	(void)state;

	memset(&s, 0, sizeof(s));
	memset(res, 0, sizeof(res));
	assert_int_equal(responder_start(&r, 1, script_group, &s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	for (int i = 0; i < 2; i++) {
		c[i] = open_grouped(&r, g, cluster, sizeof(cluster), 30 + (uint64_t)i);
		assert_int_equal(hasp_client_connect_async(c[i], on_one, &res[i], NULL), 0);
	}
	for (int turn = 0; turn < LOOP_TURNS_MAX && (res[0].id == 0 || res[1].id == 0); turn++)
		group_turn(g);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(res[i].rc, 0);
		memset(&res[i], 0, sizeof(res[i]));
		assert_int_equal(hasp_client_watch_async(c[i], "w/k", false, on_one, &res[i], NULL), 0);
	}
	/* Bounded by time only so that a lost event fails instead of hanging. */
	uint64_t until = clock_monotonic_ns() + 5000 * MS;
	while ((got[0] == 0 || got[1] == 0 || res[0].id == 0 || res[1].id == 0) &&
	       clock_monotonic_ns() < until) {
		group_turn(g);
		for (int i = 0; i < 2; i++) {
			while (hasp_client_next_event(c[i], &ev, 0) == 0) {
				if (ev.type == HASP_EVENT_RESYNC)
					continue;
				assert_int_equal(ev.type, HASP_EVENT_KV_PUT);
				assert_string_equal(ev.name, "w/k");
				assert_int_equal(ev.revision, hasp_client_session_id(c[i]));
				got[i]++;
			}
		}
	}
	assert_int_equal(res[0].rc, 0);
	assert_int_equal(res[1].rc, 0);
	assert_int_equal(got[0], 1);
	assert_int_equal(got[1], 1);
	struct hasp_client_group_stats gs;
	hasp_client_group_stats_get(g, &gs);
	assert_int_equal(gs.rx_unrouted, 0);
	for (int i = 0; i < 2; i++)
		hasp_client_close(c[i]);
	hasp_client_group_free(g);
	responder_stop(&r);
}

/* Two nodes whose leadership moves: a request to the node that does not
 * lead is answered NOT_LEADER naming the other one. Sessions open on
 * either node (the responder's own, one per nonce). */
struct lscript {
	int leader; /* guarded by the responder's lock, as the rest */
	uint64_t silent_session; /* node 0 lets its requests go unanswered (0: none) */
	uint32_t closes_lost; /* SESSION_CLOSEs still to lose (any node) */
};

static void script_leader_moves(struct responder *r, int node, const struct hasp_wire_msg *req,
				const struct sockaddr_in *from, void *arg)
{
	struct lscript *s = arg;
	struct hasp_wire_msg rep;

	if (req == NULL)
		return;
	responder_lock(r);
	bool lose = req->hdr.opcode == HASP_OP_SESSION_CLOSE && s->closes_lost > 0;
	s->closes_lost -= lose;
	responder_unlock(r);
	if (lose || responder_answer_session(r, node, req, from))
		return;
	responder_lock(r);
	int leader = s->leader;
	bool silent = node == 0 && req->hdr.session_id == s->silent_session;
	responder_unlock(r);
	if (silent)
		return;
	if (node != leader) {
		responder_reply_init(&rep, req, HASP_STATUS_NOT_LEADER);
		rep.body.not_leader.known = 1;
		rep.body.not_leader.leader_id = (uint32_t)leader + 1;
		memcpy(rep.body.not_leader.ipv4, (uint8_t[]){ 127, 0, 0, 1 }, 4);
		rep.body.not_leader.port = r->ports[leader];
		responder_send(r, node, from, &rep);
		return;
	}
	if (req->hdr.opcode == HASP_OP_KV_GET) {
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		rep.body.kv_value.value.data = (const uint8_t *)"v";
		rep.body.kv_value.value.size = 1;
		responder_send(r, node, from, &rep);
		return;
	}
	reply_status(r, node, req, from, HASP_STATUS_OK); /* WATCH, ... */
}

/* How many requests of `opcode` from `session` reached `node`. */
static uint32_t count_from(struct responder *r, uint8_t opcode, int node, uint64_t session)
{
	struct responder_rx rx;
	uint32_t n = 0;

	for (uint32_t i = 0; responder_find(r, opcode, i, &rx); i++)
		n += rx.node == node && rx.hdr.session_id == session;
	return n;
}

/* Opens a client of the responder's cluster into g and connects it (one
 * at a time: the responder's sessions go by the last nonce), with session
 * keepalives 20 s apart (none within a test) and, if request_timeout_ms is
 * non-zero, that silence before every node is asked. */
static struct hasp_client *open_connected(struct hasp_client_group *g, struct responder *r,
					  uint64_t nonce_seed, uint32_t request_timeout_ms)
{
	struct hasp_client_config cfg;
	struct hasp_client *c = NULL;
	struct hasp_result res = { 0 };
	char cluster[128];

	test_config(&cfg, NULL);
	responder_cluster(r, cluster, sizeof(cluster));
	cfg.cluster = cluster;
	cfg.nonce_seed = nonce_seed;
	cfg.session_ttl_ms = 60000;
	if (request_timeout_ms != 0) {
		cfg.request_timeout_ms = request_timeout_ms;
		cfg.deadline_ms = 3 * request_timeout_ms;
	}
	assert_int_equal(hasp_client_open_in_group(&c, &cfg, g), 0);
	assert_int_equal(hasp_client_connect_async(c, on_one, &res, NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res.id == 0; turn++)
		group_turn(g);
	assert_int_equal(res.rc, 0);
	return c;
}

/* One member's answer from a new leader is the whole group's news: a
 * member that only watches (nothing in flight, its keepalive far off)
 * registers its watch with the new leader at once, tells a RESYNC, and
 * sends its next request there first. Before, it went on waiting for
 * events from the old node until its own keepalive (a third of its
 * session TTL) was redirected: the events in between were lost. */
static void test_group_members_follow_a_leader_one_of_them_learned(void **state)
{
	static struct lscript s;
	static struct responder r;
	static struct hasp_result res[2];
	struct hasp_client_group *g = NULL;
	struct hasp_client *c[2] = { NULL, NULL }; /* c[0] watches, c[1] works */
	struct hasp_event ev;
	(void)state;

	memset(&s, 0, sizeof(s));
	memset(res, 0, sizeof(res));
	assert_int_equal(responder_start(&r, 2, script_leader_moves, &s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	for (int i = 0; i < 2; i++)
		c[i] = open_connected(g, &r, test_util_seed(0x1ead) + (uint64_t)i, 0);
	uint64_t watcher = hasp_client_session_id(c[0]);
	memset(res, 0, sizeof(res));
	assert_int_equal(hasp_client_watch_async(c[0], "w/k", false, on_one, &res[0], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res[0].id == 0; turn++)
		group_turn(g);
	assert_int_equal(res[0].rc, 0);
	assert_int_equal(count_from(&r, HASP_OP_WATCH, 0, watcher), 1);
	while (hasp_client_next_event(c[0], &ev, 0) == 0)
		assert_int_not_equal(ev.type, HASP_EVENT_RESYNC); /* none yet */

	/* Node 1 leads now; only the working member hears of it. */
	responder_lock(&r);
	s.leader = 1;
	responder_unlock(&r);
	assert_int_equal(hasp_client_kv_get_async(c[1], "k", on_one, &res[1], NULL), 0);
	bool resync = false;
	for (int turn = 0; turn < 2000 && (res[1].id == 0 || !resync); turn++) {
		group_turn(g);
		while (hasp_client_next_event(c[0], &ev, 0) == 0)
			resync |= ev.type == HASP_EVENT_RESYNC;
	}
	assert_int_equal(res[1].rc, 0);
	assert_true(resync);
	/* Registered with the new leader without a keepalive of its own
	 * (none went: each would have been counted). */
	assert_int_equal(count_from(&r, HASP_OP_WATCH, 1, watcher), 1);
	assert_int_equal(responder_count(&r, HASP_OP_SESSION_KEEPALIVE, -1), 0);

	/* The watcher's next request goes to the new leader first. */
	memset(&res[0], 0, sizeof(res[0]));
	assert_int_equal(hasp_client_kv_get_async(c[0], "k", on_one, &res[0], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res[0].id == 0; turn++)
		group_turn(g);
	assert_int_equal(res[0].rc, 0);
	assert_int_equal(count_from(&r, HASP_OP_KV_GET, 1, watcher), 1);
	assert_int_equal(count_from(&r, HASP_OP_KV_GET, 0, watcher), 0);
	for (int i = 0; i < 2; i++)
		hasp_client_close(c[i]);
	hasp_client_group_free(g);
	responder_stop(&r);
}

/* A member's request waiting for the old leader's answer goes to the new
 * leader at the member's next pass, once another member learned of it:
 * not after its own request_timeout_ms of silence and then to every node. */
static void test_group_member_resends_to_a_leader_another_learned(void **state)
{
	static struct lscript s;
	static struct responder r;
	static struct hasp_result res[3];
	struct hasp_client_group *g = NULL;
	struct hasp_client *c[2] = { NULL, NULL }; /* c[0] waits on node 0, c[1] learns */
	struct responder_rx rx;
	(void)state;

	memset(&s, 0, sizeof(s));
	memset(res, 0, sizeof(res));
	assert_int_equal(responder_start(&r, 2, script_leader_moves, &s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	/* Silence is noticed after 20 s: never within this test. */
	for (int i = 0; i < 2; i++)
		c[i] = open_connected(g, &r, test_util_seed(0x2ead) + (uint64_t)i, 20000);
	uint64_t waiting = hasp_client_session_id(c[0]);
	memset(res, 0, sizeof(res));
	responder_lock(&r);
	s.leader = 1;
	s.silent_session = waiting; /* node 0 is gone, as c[0] sees it */
	responder_unlock(&r);
	assert_int_equal(hasp_client_kv_get_async(c[0], "a", on_one, &res[0], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && count_from(&r, HASP_OP_KV_GET, 0, waiting) == 0;
	     turn++)
		group_turn(g);
	assert_int_equal(count_from(&r, HASP_OP_KV_GET, 0, waiting), 1);
	/* The other member is told NOT_LEADER by node 0, answered by node 1. */
	assert_int_equal(hasp_client_kv_get_async(c[1], "b", on_one, &res[1], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res[1].id == 0; turn++)
		group_turn(g);
	assert_int_equal(res[1].rc, 0);
	/* The waiting member's next pass (another call of its wakes it). */
	assert_int_equal(hasp_client_kv_get_async(c[0], "c", on_one, &res[2], NULL), 0);
	for (int turn = 0; turn < 2000 && (res[0].id == 0 || res[2].id == 0); turn++)
		group_turn(g);
	assert_int_equal(res[0].rc, 0);
	assert_int_equal(res[2].rc, 0);
	/* Its first request: once to node 0, then the same seq to node 1. */
	assert_true(responder_find(&r, HASP_OP_KV_GET, 0, &rx));
	assert_int_equal(rx.hdr.session_id, waiting);
	uint64_t first_seq = rx.hdr.seq;
	assert_int_equal(count_from(&r, HASP_OP_KV_GET, 0, waiting), 1);
	assert_int_equal(count_from(&r, HASP_OP_KV_GET, 1, waiting), 2);
	bool resent = false;
	for (uint32_t i = 1; responder_find(&r, HASP_OP_KV_GET, i, &rx); i++)
		resent |= rx.node == 1 && rx.hdr.session_id == waiting && rx.hdr.seq == first_seq;
	assert_true(resent);
	for (int i = 0; i < 2; i++)
		hasp_client_close(c[i]);
	hasp_client_group_free(g);
	responder_stop(&r);
}

/* The group's timeout is its earliest member's timer, and a process call
 * with nothing due leaves that timer as it was: the group keeps the least
 * due time (process calls and the timeout read no member while it lies
 * ahead), so a member whose timer comes before the others' must lower it.
 * Here a member that waits 20 s is followed by one that waits 400 ms: its
 * request is resent within a few loop turns, each of which sleeps for the
 * group's timeout (at most 100 ms: group_turn). */
static void test_group_timeout_is_the_earliest_member_timer(void **state)
{
	enum { TURNS = 60 }; /* 400 ms resend: ~5 turns of 100 ms */
	static struct lscript s;
	static struct responder r;
	static struct hasp_result res[2];
	struct hasp_client_group *g = NULL;
	struct hasp_client *c[2] = { NULL, NULL }; /* c[0] waits 20 s, c[1] 400 ms */
	(void)state;

	memset(&s, 0, sizeof(s));
	memset(res, 0, sizeof(res));
	assert_int_equal(responder_start(&r, 1, script_leader_moves, &s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	c[0] = open_connected(g, &r, test_util_seed(0x3ead), 20000);
	c[1] = open_connected(g, &r, test_util_seed(0x3ead) + 1, 400);
	uint64_t slow = hasp_client_session_id(c[0]), quick = hasp_client_session_id(c[1]);

	responder_lock(&r);
	s.silent_session = slow;
	responder_unlock(&r);
	assert_int_equal(hasp_client_kv_get_async(c[0], "a", on_one, &res[0], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && count_from(&r, HASP_OP_KV_GET, 0, slow) == 0;
	     turn++)
		group_turn(g);
	int timeout = hasp_client_group_timeout_ms(g);
	assert_true(timeout > 400 && timeout <= 20000);

	responder_lock(&r);
	s.silent_session = quick;
	responder_unlock(&r);
	assert_int_equal(hasp_client_kv_get_async(c[1], "b", on_one, &res[1], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && count_from(&r, HASP_OP_KV_GET, 0, quick) == 0;
	     turn++)
		group_turn(g);
	timeout = hasp_client_group_timeout_ms(g);
	assert_true(timeout >= 0 && timeout <= 400);
	/* A process call with nothing come keeps the earlier timer. */
	assert_int_equal(hasp_client_group_process(g, NULL), 0);
	assert_true(hasp_client_group_timeout_ms(g) <= 400);

	/* Resent within the turns (how often after the first resend depends
	 * on the machine's speed: libhasp then probes at its backoff pace). */
	for (int turn = 0; turn < TURNS && count_from(&r, HASP_OP_KV_GET, 0, quick) < 2; turn++)
		group_turn(g);
	assert_true(count_from(&r, HASP_OP_KV_GET, 0, quick) >= 2);
	assert_int_equal(count_from(&r, HASP_OP_KV_GET, 0, slow), 1); /* its timer is far */
	assert_int_equal(res[0].id, 0);
	for (int i = 0; i < 2; i++)
		hasp_client_close(c[i]);
	hasp_client_group_free(g);
	responder_stop(&r);
}

/* hasp_client_close_async: a grouped client's close that waits for its
 * answer through the loop (hasp_client_close cannot wait). A lost close
 * is resent; from the call on the client starts nothing and opens no
 * session (not even for its watch); hasp_client_close then sends nothing
 * more. A client without a session opens none to close it, and a close
 * never answered ends with -HASP_ETIMEDOUT at the deadline. */
static void test_group_close_async_waits_for_the_answer(void **state)
{
	static struct lscript s;
	static struct responder r;
	static struct hasp_result res[4];
	struct hasp_client_group *g = NULL;
	struct hasp_client *c[3] = { NULL, NULL, NULL };
	struct hasp_client_config cfg;
	char cluster[128];
	(void)state;

	memset(&s, 0, sizeof(s));
	memset(res, 0, sizeof(res));
	assert_int_equal(responder_start(&r, 1, script_leader_moves, &s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	for (int i = 0; i < 2; i++)
		c[i] = open_connected(g, &r, test_util_seed(0x4ead) + (uint64_t)i, 300);
	uint64_t closed = hasp_client_session_id(c[0]);
	assert_int_equal(hasp_client_watch_async(c[0], "w/k", false, on_one, &res[0], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res[0].id == 0; turn++)
		group_turn(g);
	assert_int_equal(res[0].rc, 0);

	/* The first close is lost: the loop resends it. */
	responder_lock(&r);
	s.closes_lost = 1;
	responder_unlock(&r);
	memset(&res[0], 0, sizeof(res[0]));
	assert_int_equal(hasp_client_close_async(c[0], on_one, &res[0], NULL), 0);
	assert_int_equal(hasp_client_kv_get_async(c[0], "k", on_one, &res[1], NULL), -HASP_ESTATE);
	assert_int_equal(hasp_client_close_async(c[0], on_one, &res[1], NULL), -HASP_ESTATE);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res[0].id == 0; turn++)
		group_turn(g);
	assert_int_equal(res[0].rc, 0);
	assert_int_equal(res[0].op, HASP_OP_SESSION_CLOSE);
	assert_int_equal(hasp_client_session_id(c[0]), 0);
	/* A watcher whose session ended reopens one at once: not a closed one. */
	uint32_t opens = responder_count(&r, HASP_OP_SESSION_OPEN, -1);
	for (int turn = 0; turn < 5; turn++)
		group_turn(g);
	assert_int_equal(responder_count(&r, HASP_OP_SESSION_OPEN, -1), opens);
	/* ... nor tries to, turn after turn: the other member's keepalive
	 * (20 s off) is the group's next timer. */
	assert_true(hasp_client_group_timeout_ms(g) > 1000);
	/* Resent (more than once on a slow machine: libhasp probes at its
	 * backoff pace after the first silence), and nothing more by close. */
	uint32_t closes = count_from(&r, HASP_OP_SESSION_CLOSE, 0, closed);
	assert_true(closes >= 2);
	hasp_client_close(c[0]);
	for (int turn = 0; turn < 2; turn++) /* time for a datagram to arrive */
		group_turn(g);
	assert_int_equal(count_from(&r, HASP_OP_SESSION_CLOSE, 0, closed), closes);

	/* No session: none is opened to be closed. */
	test_config(&cfg, NULL);
	responder_cluster(&r, cluster, sizeof(cluster));
	cfg.cluster = cluster;
	cfg.nonce_seed = test_util_seed(0x4ead) + 2;
	assert_int_equal(hasp_client_open_in_group(&c[2], &cfg, g), 0);
	assert_int_equal(hasp_client_close_async(c[2], on_one, &res[2], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res[2].id == 0; turn++)
		group_turn(g);
	assert_int_equal(res[2].rc, -HASP_ESESSION);
	assert_int_equal(responder_count(&r, HASP_OP_SESSION_OPEN, -1), opens);
	hasp_client_close(c[2]);

	/* Never answered: given up at the deadline (3 x 300 ms), not waited for. */
	uint64_t unanswered = hasp_client_session_id(c[1]);
	responder_lock(&r);
	s.closes_lost = UINT32_MAX;
	responder_unlock(&r);
	assert_int_equal(hasp_client_close_async(c[1], on_one, &res[3], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res[3].id == 0; turn++)
		group_turn(g);
	assert_int_equal(res[3].rc, -HASP_ETIMEDOUT);
	assert_true(count_from(&r, HASP_OP_SESSION_CLOSE, 0, unanswered) >= 2);
	hasp_client_close(c[1]);
	hasp_client_group_free(g);
	responder_stop(&r);
}

/* Members of two clusters in one group: a new leader of one cluster moves
 * nothing of the other's members, which never send to a node they were
 * not given. */
static void test_group_leader_of_another_cluster_is_not_followed(void **state)
{
	static struct lscript s[2];
	static struct responder r[2];
	static struct hasp_result res[2];
	struct hasp_client_group *g = NULL;
	struct hasp_client *c[2] = { NULL, NULL }; /* c[0] on cluster 0 works, c[1] on 1 watches */
	struct hasp_event ev;
	(void)state;

	memset(s, 0, sizeof(s));
	memset(res, 0, sizeof(res));
	assert_int_equal(responder_start(&r[0], 2, script_leader_moves, &s[0]), 0);
	assert_int_equal(responder_start(&r[1], 1, script_leader_moves, &s[1]), 0);
	responder_lock(&r[1]);
	r[1].next_session_id += 5000; /* a group routes by session id */
	responder_unlock(&r[1]);
	assert_int_equal(hasp_client_group_new(&g), 0);
	for (int i = 0; i < 2; i++)
		c[i] = open_connected(g, &r[i], test_util_seed(0x3ead) + (uint64_t)i, 0);
	/* Cluster 0's node 0 answers first: the group's leader. Then the
	 * watch, answered by cluster 1's node. */
	memset(res, 0, sizeof(res));
	assert_int_equal(hasp_client_kv_get_async(c[0], "a", on_one, &res[0], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res[0].id == 0; turn++)
		group_turn(g);
	assert_int_equal(res[0].rc, 0);
	assert_int_equal(hasp_client_watch_async(c[1], "w/k", false, on_one, &res[1], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res[1].id == 0; turn++)
		group_turn(g);
	assert_int_equal(res[1].rc, 0);
	/* Cluster 0's leader moves; its member follows. */
	responder_lock(&r[0]);
	s[0].leader = 1;
	responder_unlock(&r[0]);
	memset(res, 0, sizeof(res));
	assert_int_equal(hasp_client_kv_get_async(c[0], "b", on_one, &res[0], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res[0].id == 0; turn++)
		group_turn(g);
	assert_int_equal(res[0].rc, 0);
	assert_int_equal(hasp_client_kv_get_async(c[1], "c", on_one, &res[1], NULL), 0);
	for (int turn = 0; turn < LOOP_TURNS_MAX && res[1].id == 0; turn++)
		group_turn(g);
	assert_int_equal(res[1].rc, 0);
	/* The watcher stayed with its own cluster: one WATCH, no RESYNC. */
	assert_int_equal(responder_count(&r[0], HASP_OP_WATCH, -1), 0);
	assert_int_equal(responder_count(&r[1], HASP_OP_WATCH, -1), 1);
	assert_int_equal(responder_count(&r[0], HASP_OP_KV_GET, -1), 3); /* a; b redirected */
	assert_int_equal(responder_count(&r[1], HASP_OP_KV_GET, -1), 1);
	while (hasp_client_next_event(c[1], &ev, 0) == 0)
		assert_int_not_equal(ev.type, HASP_EVENT_RESYNC);
	for (int i = 0; i < 2; i++)
		hasp_client_close(c[i]);
	hasp_client_group_free(g);
	responder_stop(&r[1]);
	responder_stop(&r[0]);
}

/* Two clusters hand out the same session ids (each counts its own): the
 * group gives each reply to the member of the cluster that sent it, not to
 * whichever member the session index meets first (which dropped it as
 * coming from a node it does not know, every time, so that member's calls
 * ran into their deadline). */
static void test_group_routes_equal_session_ids_of_two_clusters_by_sender(void **state)
{
	static struct lscript s[2];
	static struct responder r[2];
	static struct hasp_result res[2];
	struct hasp_client_group *g = NULL;
	struct hasp_client *c[2] = { NULL, NULL };
	struct hasp_client_stats st;
	(void)state;

	memset(s, 0, sizeof(s));
	assert_int_equal(responder_start(&r[0], 1, script_leader_moves, &s[0]), 0);
	assert_int_equal(responder_start(&r[1], 1, script_leader_moves, &s[1]), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	for (int i = 0; i < 2; i++)
		c[i] = open_connected(g, &r[i], test_util_seed(0x4ead) + (uint64_t)i, 0);
	/* The case this test is about. */
	assert_int_equal(hasp_client_session_id(c[0]), hasp_client_session_id(c[1]));
	for (int round = 0; round < 3; round++) {
		memset(res, 0, sizeof(res));
		for (int i = 0; i < 2; i++)
			assert_int_equal(hasp_client_kv_get_async(c[i], "k", on_one, &res[i], NULL), 0);
		for (int turn = 0; turn < LOOP_TURNS_MAX && (res[0].id == 0 || res[1].id == 0); turn++)
			group_turn(g);
		for (int i = 0; i < 2; i++)
			assert_int_equal(res[i].rc, 0);
	}
	for (int i = 0; i < 2; i++) {
		hasp_client_stats_get(c[i], &st);
		assert_int_equal(st.rx_unknown_source, 0);
		assert_int_equal(st.tx_retransmits, 0);
		assert_int_equal(responder_count(&r[i], HASP_OP_KV_GET, -1), 3);
	}
	for (int i = 0; i < 2; i++)
		hasp_client_close(c[i]);
	hasp_client_group_free(g);
	responder_stop(&r[1]);
	responder_stop(&r[0]);
}

/* Many members (the group's tables grow twice) whose session ids all
 * share one slot of the group's session index, a third of them closed
 * from the middle, every other one's session replaced: each reply still
 * reaches the client whose session it names. */
static void test_group_routes_many_sessions_through_closes_and_reopens(void **state)
{
	enum { MANY = 40 };
	static struct gscript s;
	static struct responder r;
	static struct worker w[MANY];
	static struct hasp_result res[MANY];
	uint64_t first_session[MANY];
	struct hasp_client_group *g = NULL;
	char cluster[128];
	(void)state;

	memset(&s, 0, sizeof(s));
	memset(w, 0, sizeof(w));
	s.colliding_ids = true;
	assert_int_equal(responder_start(&r, 1, script_group, &s), 0);
	assert_int_equal(hasp_client_group_new(&g), 0);
	for (int i = 0; i < MANY; i++) {
		w[i].c = open_grouped(&r, g, cluster, sizeof(cluster), 40 + (uint64_t)i);
		w[i].wanted = 2;
		snprintf(w[i].name, sizeof(w[i].name), "m/%d", i);
		step(&w[i], 0);
	}
	run_group(g, w, MANY);
	for (int i = 0; i < MANY; i++)
		first_session[i] = hasp_client_session_id(w[i].c);
	/* Closed from the middle of the tables: the members after them move. */
	for (int i = 1; i < MANY; i += 3) {
		hasp_client_close(w[i].c);
		w[i].c = NULL;
	}
	/* Every other open client's session expires: its next call opens
	 * another, which the group must find by its new id. */
	memset(res, 0, sizeof(res));
	uint32_t expiring = 0;
	for (int i = 0; i < MANY; i += 2) {
		if (w[i].c == NULL)
			continue;
		assert_int_equal(hasp_client_kv_get_async(w[i].c, "exp/key", on_one, &res[i], NULL), 0);
		expiring++;
	}
	for (int turn = 0; turn < LOOP_TURNS_MAX; turn++) {
		uint32_t answered = 0;
		for (int i = 0; i < MANY; i += 2)
			answered += w[i].c != NULL && res[i].id != 0;
		if (answered == expiring)
			break;
		group_turn(g);
	}
	for (int i = 0; i < MANY; i += 2)
		if (w[i].c != NULL)
			assert_int_equal(res[i].rc, -HASP_ESESSION);
	for (int i = 0; i < MANY; i++) {
		if (w[i].c == NULL)
			continue;
		w[i].wanted += 3;
		w[i].done = false;
		step(&w[i], 0);
	}
	run_group(g, w, MANY);
	for (int i = 0; i < MANY; i++) {
		if (w[i].c == NULL)
			continue;
		assert_int_equal(w[i].errors, 0);
		assert_int_equal(w[i].wrong_session, 0);
		assert_int_equal(w[i].cycles, 5);
		bool replaced = hasp_client_session_id(w[i].c) != first_session[i];
		assert_true(replaced == (i % 2 == 0));
	}
	for (int i = 0; i < MANY; i++)
		if (w[i].c != NULL)
			hasp_client_close(w[i].c);
	hasp_client_group_free(g);
	responder_stop(&r);
}

/* ---- a group on the application's own datagrams (libhasp 1.6) ---- */

/* The application's transport: its own UDP socket, standing in for a
 * DPDK port. The first `refuse` sends are refused (a full ring). */
struct app_io {
	int fd;
	uint16_t port; /* its bound port, network order */
	uint32_t sends, refuse, refused, inputs;
};

static int app_send(void *arg, const struct sockaddr_in *to, const void *data, size_t size)
{
	struct app_io *a = arg;

	a->sends++;
	if (a->refused < a->refuse) {
		a->refused++;
		return -1;
	}
	return sendto(a->fd, data, size, 0, (const struct sockaddr *)to, sizeof(*to)) ==
			       (ssize_t)size
		       ? 0
		       : -1;
}

/* One turn of the application's loop: wait on its socket and the group's
 * fd for the group's timeout (bounded), hand the group what came, run it. */
static void app_turn(struct hasp_client_group *g, struct app_io *a)
{
	struct pollfd pfd[2] = { { .fd = a->fd, .events = POLLIN },
				 { .fd = hasp_client_group_fd(g), .events = POLLIN } };
	int timeout = hasp_client_group_timeout_ms(g);
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX + 1];
	struct sockaddr_in from;
	socklen_t len = sizeof(from);
	ssize_t n;

	assert_true(pfd[1].fd >= 0);
	assert_true(poll(pfd, 2, timeout < 0 || timeout > 100 ? 100 : timeout) >= 0);
	while ((n = recvfrom(a->fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &len)) >=
	       0) {
		assert_int_equal(hasp_client_group_input(g, buf, (size_t)n, &from), 0);
		a->inputs++;
		len = sizeof(from);
	}
	assert_int_equal(hasp_client_group_process(g, NULL), 0);
}

static void test_group_on_the_application_s_datagrams(void **state)
{
	static struct gscript s;
	static struct responder r;
	static struct worker w[CLIENTS];
	struct hasp_client_group *g = NULL, *own = NULL;
	struct hasp_client_group_stats gs;
	struct app_io a = { .refuse = 1 }; /* the first SESSION_OPEN is lost */
	struct hasp_client_group_io io = { .send = app_send, .arg = &a };
	struct hasp_client_group_io no_send = { .send = NULL };
	struct sockaddr_in local = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(local);
	char cluster[128];
	(void)state;

	assert_int_equal(hasp_client_group_new_io(&g, NULL), -HASP_EINVAL);
	assert_int_equal(hasp_client_group_new_io(&g, &no_send), -HASP_EINVAL);
	assert_null(g);
	a.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(a.fd >= 0);
	assert_int_equal(bind(a.fd, (struct sockaddr *)&local, sizeof(local)), 0);
	assert_int_equal(getsockname(a.fd, (struct sockaddr *)&local, &len), 0);
	a.port = local.sin_port;

	memset(&s, 0, sizeof(s));
	memset(w, 0, sizeof(w));
	s.drop_get_session = SESSION_BASE + 1; /* and one reply lost: a timer resends */
	assert_int_equal(responder_start(&r, 1, script_group, &s), 0);
	assert_int_equal(hasp_client_group_new_io(&g, &io), 0);
	for (int i = 0; i < CLIENTS; i++) {
		w[i].c = open_grouped(&r, g, cluster, sizeof(cluster), (uint64_t)i);
		w[i].wanted = CYCLES;
		snprintf(w[i].name, sizeof(w[i].name), "io/%d", i);
	}
	for (int i = 0; i < CLIENTS; i++)
		step(&w[i], 0);
	/* Started outside the loop: the group's fd (its eventfd) says so. */
	struct pollfd pfd = { .fd = hasp_client_group_fd(g), .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 0), 1);
	for (int turn = 0; turn < LOOP_TURNS_MAX && !all_done(w, CLIENTS); turn++)
		app_turn(g, &a);
	assert_true(all_done(w, CLIENTS));

	for (int i = 0; i < CLIENTS; i++) {
		struct hasp_client_stats st;
		assert_int_equal(w[i].errors, 0);
		assert_int_equal(w[i].wrong_session, 0);
		assert_int_equal(w[i].cycles, CYCLES);
		hasp_client_stats_get(w[i].c, &st);
		assert_int_equal(st.rx_stray + st.rx_malformed + st.rx_unknown_source, 0);
	}
	hasp_client_group_stats_get(g, &gs);
	assert_int_equal(gs.rx_datagrams, a.inputs);
	assert_int_equal(gs.rx_unrouted, 0);
	assert_int_equal(gs.tx_batches, a.sends);
	assert_int_equal(a.refused, 1);
	assert_int_equal(gs.tx_datagrams, a.sends - 1);
	assert_true(gs.tx_datagrams >= CLIENTS * (1 + 4 * CYCLES) + 1); /* + the resent ones */
	responder_lock(&r);
	assert_int_equal(s.port_count, 1); /* everything went out of the application's socket */
	assert_int_equal(s.ports[0], a.port);
	assert_true(s.dropped);
	responder_unlock(&r);

	/* What names no client is dropped and counted; bad arguments and a
	 * group with its own socket are refused, nothing counted. */
	struct sockaddr_in node = { .sin_family = AF_INET, .sin_port = htons(r.ports[0]),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_int_equal(hasp_client_group_input(g, "junk", 4, &node), 0);
	assert_int_equal(hasp_client_group_input(g, NULL, 4, &node), -HASP_EINVAL);
	assert_int_equal(hasp_client_group_input(g, "junk", 4, NULL), -HASP_EINVAL);
	hasp_client_group_stats_get(g, &gs);
	assert_int_equal(gs.rx_unrouted, 1);
	assert_int_equal(gs.rx_datagrams, a.inputs + 1);
	assert_int_equal(hasp_client_group_new(&own), 0);
	assert_int_equal(hasp_client_group_input(own, "junk", 4, &node), -HASP_ESTATE);
	hasp_client_group_free(own);

	/* A close sends SESSION_CLOSE through the application, at once. */
	uint32_t before = a.sends;
	for (int i = 0; i < CLIENTS; i++)
		hasp_client_close(w[i].c);
	assert_int_equal(a.sends, before + CLIENTS);
	hasp_client_group_free(g);
	responder_stop(&r);
	close(a.fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_group_clients_cycle_concurrently, responder_teardown),
		cmocka_unit_test_teardown(test_group_routes_by_session, responder_teardown),
		cmocka_unit_test_teardown(test_group_on_the_application_s_datagrams, responder_teardown),
		cmocka_unit_test_teardown(test_group_blocking_calls_refused, responder_teardown),
		cmocka_unit_test_teardown(test_group_close_one_others_work, responder_teardown),
		cmocka_unit_test_teardown(test_group_async_from_another_thread_wakes_loop,
					  responder_teardown),
		cmocka_unit_test_teardown(test_group_events_to_their_session, responder_teardown),
		cmocka_unit_test_teardown(test_group_members_follow_a_leader_one_of_them_learned,
					  responder_teardown),
		cmocka_unit_test_teardown(test_group_member_resends_to_a_leader_another_learned,
					  responder_teardown),
		cmocka_unit_test_teardown(test_group_timeout_is_the_earliest_member_timer,
					  responder_teardown),
		cmocka_unit_test_teardown(test_group_close_async_waits_for_the_answer,
					  responder_teardown),
		cmocka_unit_test_teardown(test_group_leader_of_another_cluster_is_not_followed,
					  responder_teardown),
		cmocka_unit_test_teardown(test_group_routes_equal_session_ids_of_two_clusters_by_sender,
					  responder_teardown),
		cmocka_unit_test_teardown(test_group_routes_many_sessions_through_closes_and_reopens,
					  responder_teardown),
		cmocka_unit_test_teardown(test_group_window_bounds_the_requests_in_flight,
					  responder_teardown),
		cmocka_unit_test_teardown(test_group_window_places_come_back_when_a_client_closes,
					  responder_teardown),
		cmocka_unit_test_teardown(test_group_window_place_not_held_by_a_request_waiting_for_its_session,
					  responder_teardown),
		cmocka_unit_test_teardown(test_group_sends_a_batch_s_follow_ups_before_reading_the_next,
					  responder_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
