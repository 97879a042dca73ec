/*
 * The hasp-bench engine (tools/bench_engine.h): a table of client
 * sessions, their state machines, a send queue and the phases of a run
 * (open every session, run the load, close every session), as step
 * functions that a transport drives (tools/bench_kernel.c: one UDP socket
 * with sendmmsg/recvmmsg).
 *
 * Shape of one step, the order that keeps latency honest:
 *   1. the transport reads the clock and passes it in;
 *   2. admit work: closed loop, idle clients start their next operation;
 *      open loop, every arrival whose intended time has come goes to an
 *      idle client or the backlog;
 *   3. every SCAN_NS, scan for retransmits, wait re-reads and keepalives
 *      (timers are coarse on purpose: a scan over 64k sessions per
 *      datagram would be the benchmark);
 *   4. the transport flushes the send queue in batches and hands every
 *      received datagram to bench_engine_receive, which completes
 *      operations (and may queue follow-up requests for the next flush);
 *   5. it sleeps until the wake time the step returned when nothing is
 *      queued.
 *
 * Each client has at most one request in flight (c->opcode != 0), so its
 * sequence numbers advance one at a time and a reply is matched by
 * (session id, seq, opcode). SESSION_OPEN replies are matched by their seq,
 * which is the client's index + 1 (a per-client number, as libhasp does).
 */
#include "tools/bench_engine.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/prng.h"
#include "hasp/errors.h"
#include "hasp/wire.h"
#include "tools/bench_arrival.h"

#define NODES_MAX 16u
#define SCAN_NS 2000000ull       /* timer scan period: 2 ms */
#define BACKOFF_NS 20000000ull   /* after UNAVAILABLE/OVERLOADED/unknown leader */
#define OPENS_INFLIGHT_MAX 256u  /* session opens at once during start-up */
#define OPEN_PHASE_NS 10000000000ull
#define REACQUIRE_MAX 8u         /* fresh ACQUIREs after a wait found the lock free */
#define BURST_ROUND_NS 2000000000ull
#define CLOSE_PHASE_NS 1000000000ull
#define RX_CALLS_PER_ITER 16u

enum client_state {
	C_NEW,      /* no session */
	C_OPENING,  /* SESSION_OPEN in flight */
	C_IDLE,     /* session open, no operation */
	C_ACQUIRE,  /* ACQUIRE in flight */
	C_WAITING,  /* QUEUED: waiting for LOCK_GRANTED */
	C_HOLDING,  /* burst holder: granted, told to keep it */
	C_RELEASE,  /* RELEASE in flight */
	C_OP,       /* single-request operation (keepalive, KV) in flight */
	C_WATCHING, /* burst watcher: WATCH registered */
	C_CLOSING,
	C_DONE,     /* closed, or failed to open */
};

struct client {
	uint64_t session_id;
	uint64_t nonce;
	uint64_t seq;           /* of the request in flight, or the last one */
	uint64_t token;
	uint64_t op_start_ns;   /* intended start of the current operation */
	uint64_t req_first_ns;  /* first send of the request in flight */
	uint64_t req_due_ns;    /* retransmit when now >= this */
	uint64_t acq_first_ns;  /* first send of the (last) ACQUIRE */
	uint64_t last_answer_ns;
	uint64_t wait_since_ns; /* queued, or last re-read */
	uint32_t key;
	uint16_t node;
	uint8_t state;
	uint8_t opcode;         /* request in flight; 0: none */
	uint8_t reacquires;
	uint8_t redirects;      /* NOT_LEADER answers to the request in flight */
	bool measured;          /* the current operation counts */
	bool in_send_queue;
	bool put;               /* KV: this operation is a put */
	bool hold;              /* burst holder: do not release on grant */
	bool told;              /* burst: told in this round */
	bool background;        /* the request in flight is a background keepalive */
};

enum phase { PHASE_OPEN, PHASE_RUN, PHASE_CLOSE, PHASE_DONE };

struct bench_engine {
	const struct bench_config *cfg;
	struct bench_result *res;
	enum phase phase;
	uint64_t phase_start_ns, next_scan_ns, drain_end_ns;
	uint32_t open_next; /* sessions opened or being opened */
	bool failed;        /* no session could be opened */
	struct sockaddr_in nodes[NODES_MAX];
	uint32_t node_count;
	uint16_t leader_hint;
	struct client *clients;
	uint32_t client_count;
	/* session id -> client index + 1, open addressing, 2x oversized */
	uint64_t *hash_keys;
	uint32_t *hash_vals;
	uint32_t hash_mask;
	uint32_t *send_queue;
	uint32_t send_head, send_len;
	uint32_t *idle;
	uint32_t idle_len;
	uint64_t *backlog;
	uint32_t backlog_head, backlog_len;
	struct prng prng;
	struct bench_zipf zipf;
	struct bench_arrival arrival;
	uint64_t arrivals;
	uint64_t now;
	uint64_t measure_start_ns, run_end_ns, last_done_ns;
	bool admitting;
	uint8_t value[HASP_VALUE_SIZE_MAX];
	uint8_t tx_buf[BENCH_BATCH_MAX][HASP_DATAGRAM_SIZE_MAX]; /* one flush batch */
	/* burst */
	uint64_t round;
	uint64_t round_start_ns, round_release_ns, round_last_told_ns;
	uint32_t round_told;
	uint8_t round_phase;
};

enum { R_IDLE, R_HOLDER_ACQUIRE, R_QUEUEING, R_RELEASED };

static const char *const lat_names[BENCH_LAT_COUNT] = {
	"op", "acquire", "release", "keepalive", "put", "get", "notify",
};

const char *bench_lat_name(enum bench_lat l)
{
	HASP_ASSERT(l < BENCH_LAT_COUNT);
	return lat_names[l];
}

const char *bench_op_name(uint8_t opcode)
{
	switch (opcode) {
	case HASP_OP_SESSION_OPEN: return "SESSION_OPEN";
	case HASP_OP_SESSION_KEEPALIVE: return "SESSION_KEEPALIVE";
	case HASP_OP_SESSION_CLOSE: return "SESSION_CLOSE";
	case HASP_OP_ACQUIRE: return "ACQUIRE";
	case HASP_OP_RELEASE: return "RELEASE";
	case HASP_OP_LOCK_READ: return "LOCK_READ";
	case HASP_OP_WATCH: return "WATCH";
	case HASP_OP_KV_PUT: return "KV_PUT";
	case HASP_OP_KV_GET: return "KV_GET";
	default: return NULL;
	}
}

const char *bench_workload_name(enum bench_workload w)
{
	switch (w) {
	case BENCH_WL_CYCLE: return "cycle";
	case BENCH_WL_KEEPALIVE: return "keepalive";
	case BENCH_WL_KV: return "kv";
	case BENCH_WL_BURST: return "burst";
	}
	return "?";
}

void bench_config_default(struct bench_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->workload = BENCH_WL_CYCLE;
	cfg->clients = 16;
	cfg->keys = 1024;
	cfg->zipf_s = 0.99;
	cfg->lock_ttl_ms = 5000;
	cfg->session_ttl_ms = 10000;
	cfg->count_max = 1000000;
	cfg->duration_ms = 10000;
	cfg->put_percent = 10;
	cfg->value_size = 64;
	cfg->waiters = 16;
	cfg->request_timeout_ms = 200;
	cfg->request_deadline_ms = 5000;
	cfg->wait_recheck_ms = 500;
	cfg->batch = 32;
	cfg->seed = 1;
	snprintf(cfg->prefix, sizeof(cfg->prefix), "hb");
}

int bench_config_check(const struct bench_config *cfg, char *err, size_t err_size)
{
#define REFUSE(...)                                    \
	do {                                           \
		snprintf(err, err_size, __VA_ARGS__); \
		return -HASP_ECONFIG;                  \
	} while (0)
	if (cfg->cluster == NULL || cfg->cluster[0] == '\0')
		REFUSE("no cluster address (--cluster or HASP_CLUSTER)");
	if (cfg->clients < 1 || cfg->clients > BENCH_CLIENTS_MAX)
		REFUSE("clients must be 1..%u", BENCH_CLIENTS_MAX);
	if (cfg->keys < 1 || cfg->keys > 100000000u)
		REFUSE("keys must be 1..100000000");
	if (cfg->count_max < 1)
		REFUSE("count must be at least 1 (every run is bounded)");
	if (cfg->duration_ms < 1 || cfg->duration_ms > BENCH_DURATION_MS_MAX ||
	    cfg->warmup_ms > BENCH_DURATION_MS_MAX)
		REFUSE("duration must be 1 ms .. 1 h (every run is bounded)");
	if (cfg->rate < 0.0 || cfg->rate > 1e8)
		REFUSE("rate must be 0 (closed loop) .. 1e8 per second");
	if (cfg->lock_ttl_ms < HASP_TTL_MS_MIN || cfg->lock_ttl_ms > HASP_TTL_MS_MAX ||
	    cfg->session_ttl_ms < HASP_TTL_MS_MIN || cfg->session_ttl_ms > HASP_TTL_MS_MAX)
		REFUSE("TTLs must be %u .. %u ms", HASP_TTL_MS_MIN, HASP_TTL_MS_MAX);
	if (cfg->put_percent > 100 || cfg->value_size > HASP_VALUE_SIZE_MAX)
		REFUSE("put percent must be 0..100 and value size 0..%u", HASP_VALUE_SIZE_MAX);
	if (cfg->batch < 1 || cfg->batch > BENCH_BATCH_MAX)
		REFUSE("batch must be 1..%u", BENCH_BATCH_MAX);
	if (cfg->request_timeout_ms < 1 || cfg->request_deadline_ms < cfg->request_timeout_ms)
		REFUSE("request timeout must be >= 1 ms and <= the deadline");
	if (cfg->zipf_s < 0.0 || cfg->zipf_s > 10.0)
		REFUSE("zipf exponent must be 0..10");
	if (cfg->workload == BENCH_WL_BURST &&
	    (cfg->waiters < 1 || cfg->waiters + 1u > BENCH_CLIENTS_MAX))
		REFUSE("burst needs 1..%u waiters", BENCH_CLIENTS_MAX - 1u);
	if (cfg->workload == BENCH_WL_BURST && cfg->rate > 0.0)
		REFUSE("burst runs rounds back to back (closed loop only)");
	char probe[HASP_NAME_SIZE_MAX + 1];
	int n = snprintf(probe, sizeof(probe), "%s/k%u", cfg->prefix, cfg->keys);
	if (n < 0 || (size_t)n > HASP_NAME_SIZE_MAX || !hasp_name_valid(probe, (size_t)n))
		REFUSE("prefix makes invalid names (1..128 bytes of 0x21..0x7e)");
	return 0;
#undef REFUSE
}

int bench_result_init(struct bench_result *res)
{
	memset(res, 0, sizeof(*res));
	for (int i = 0; i < BENCH_LAT_COUNT; i++) {
		res->lat[i] = hasp_alloc(sizeof(*res->lat[i]));
		if (res->lat[i] == NULL) {
			bench_result_deinit(res);
			return -HASP_ENOMEM;
		}
		bench_hist_reset(res->lat[i]);
	}
	return 0;
}

void bench_result_deinit(struct bench_result *res)
{
	for (int i = 0; i < BENCH_LAT_COUNT; i++) {
		hasp_free(res->lat[i]);
		res->lat[i] = NULL;
	}
}

/* ---- addresses ---- */

static int parse_cluster(struct bench_engine *e, const char *list)
{
	const char *p = list;

	while (*p != '\0') {
		char one[64];
		size_t len = strcspn(p, ",");
		if (len == 0 || len >= sizeof(one) || e->node_count == NODES_MAX)
			return -HASP_ECONFIG;
		memcpy(one, p, len);
		one[len] = '\0';
		char *colon = strrchr(one, ':');
		if (colon == NULL)
			return -HASP_ECONFIG;
		*colon = '\0';
		char *end;
		unsigned long port = strtoul(colon + 1, &end, 10);
		struct sockaddr_in *a = &e->nodes[e->node_count];
		memset(a, 0, sizeof(*a));
		a->sin_family = AF_INET;
		if (*end != '\0' || port == 0 || port > 65535 || inet_pton(AF_INET, one, &a->sin_addr) != 1)
			return -HASP_ECONFIG;
		a->sin_port = htons((uint16_t)port);
		e->node_count++;
		p += len;
		if (*p == ',')
			p++;
	}
	return e->node_count > 0 ? 0 : -HASP_ECONFIG;
}

static uint16_t node_find_or_add(struct bench_engine *e, const uint8_t ipv4[4], uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	memcpy(&a.sin_addr.s_addr, ipv4, 4); /* dotted order is network order */
	for (uint32_t i = 0; i < e->node_count; i++)
		if (e->nodes[i].sin_addr.s_addr == a.sin_addr.s_addr && e->nodes[i].sin_port == a.sin_port)
			return (uint16_t)i;
	if (e->node_count == NODES_MAX)
		return e->leader_hint;
	e->nodes[e->node_count] = a;
	return (uint16_t)e->node_count++;
}

/* ---- session table ---- */

static void hash_put(struct bench_engine *e, uint64_t session_id, uint32_t index)
{
	uint32_t h = (uint32_t)(session_id * 0x9e3779b97f4a7c15ull >> 32) & e->hash_mask;
	while (e->hash_keys[h] != 0 && e->hash_keys[h] != session_id)
		h = (h + 1u) & e->hash_mask;
	e->hash_keys[h] = session_id;
	e->hash_vals[h] = index + 1u;
}

/* Returns the client index or -1. A reopened client leaves its old id in
 * the table pointing at it; a late reply to the old id is then not the
 * request in flight and counts as stray. */
static int64_t hash_get(const struct bench_engine *e, uint64_t session_id)
{
	if (session_id == 0)
		return -1;
	uint32_t h = (uint32_t)(session_id * 0x9e3779b97f4a7c15ull >> 32) & e->hash_mask;
	while (e->hash_keys[h] != 0) {
		if (e->hash_keys[h] == session_id)
			return (int64_t)e->hash_vals[h] - 1;
		h = (h + 1u) & e->hash_mask;
	}
	return -1;
}

/* ---- names and requests ---- */

static size_t key_name(const struct bench_engine *e, uint32_t key, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/k%u", e->cfg->prefix, key);
	HASP_ASSERT(n > 0 && (size_t)n < size);
	return (size_t)n;
}

/* Encodes client c's request in flight. Deterministic: a retransmission
 * produces the same bytes. */
static int encode_request(struct bench_engine *e, uint32_t index, uint8_t *buf)
{
	struct client *c = &e->clients[index];
	struct hasp_wire_msg m;
	char name[HASP_NAME_SIZE_MAX + 1];
	size_t name_size = key_name(e, c->key, name, sizeof(name));
	struct hasp_wire_bytes nb = { (const uint8_t *)name, name_size };

	memset(&m, 0, sizeof(m));
	m.hdr.opcode = c->opcode;
	m.hdr.session_id = c->session_id;
	m.hdr.seq = c->seq;
	switch (c->opcode) {
	case HASP_OP_SESSION_OPEN:
		m.hdr.session_id = 0;
		m.body.session_open.client_nonce = c->nonce;
		m.body.session_open.ttl_ms = e->cfg->session_ttl_ms;
		break;
	case HASP_OP_SESSION_KEEPALIVE:
	case HASP_OP_SESSION_CLOSE:
		break;
	case HASP_OP_ACQUIRE:
		m.body.acquire.name = nb;
		m.body.acquire.ttl_ms = e->cfg->lock_ttl_ms;
		m.body.acquire.mode = (e->cfg->wait || (e->cfg->workload == BENCH_WL_BURST && !c->hold))
					      ? HASP_ACQUIRE_WAIT
					      : HASP_ACQUIRE_TRY;
		break;
	case HASP_OP_RELEASE:
		m.body.release.name = nb;
		m.body.release.token = c->token;
		break;
	case HASP_OP_LOCK_READ:
		m.body.lock_read.name = nb;
		break;
	case HASP_OP_WATCH:
		m.body.watch.name = nb;
		break;
	case HASP_OP_KV_PUT:
		m.body.kv_put.key = nb;
		m.body.kv_put.value.data = e->value;
		m.body.kv_put.value.size = e->cfg->value_size;
		break;
	case HASP_OP_KV_GET:
		m.body.kv_get.name = nb;
		break;
	default:
		HASP_UNREACHABLE();
	}
	return hasp_wire_encode(&m, buf, HASP_DATAGRAM_SIZE_MAX);
}

static void queue_send(struct bench_engine *e, uint32_t index)
{
	struct client *c = &e->clients[index];

	if (c->in_send_queue)
		return;
	HASP_ASSERT(e->send_len < e->client_count);
	e->send_queue[(e->send_head + e->send_len) % e->client_count] = index;
	e->send_len++;
	c->in_send_queue = true;
}

/* Starts a new request (next sequence number) on client `index`. */
static void request(struct bench_engine *e, uint32_t index, uint8_t opcode)
{
	struct client *c = &e->clients[index];

	HASP_ASSERT(c->opcode == 0);
	c->opcode = opcode;
	if (opcode == HASP_OP_SESSION_OPEN)
		c->seq = (uint64_t)index + 1u;
	else
		c->seq++;
	c->req_first_ns = 0; /* set by the first send */
	c->redirects = 0;
	c->req_due_ns = e->now;
	c->background = false;
	queue_send(e, index);
}

static void open_session(struct bench_engine *e, uint32_t index)
{
	struct client *c = &e->clients[index];

	c->session_id = 0;
	c->nonce = prng_next(&e->prng) | 1u;
	c->state = C_OPENING;
	c->opcode = 0;
	request(e, index, HASP_OP_SESSION_OPEN);
}

/* ---- operations ---- */

static uint32_t pick_key(struct bench_engine *e, uint32_t index)
{
	const struct bench_config *cfg = e->cfg;

	if (cfg->workload == BENCH_WL_BURST)
		return 0;
	if (cfg->contended || cfg->workload == BENCH_WL_KV)
		return bench_zipf_next(&e->zipf, &e->prng);
	/* Uncontended: client i owns the keys congruent to i modulo the client
	 * count, so no two clients ever ask for the same lock (when keys >=
	 * clients). */
	uint32_t per_client = cfg->keys / e->client_count;
	if (per_client == 0)
		return index % cfg->keys;
	return index + e->client_count * (uint32_t)prng_below(&e->prng, per_client);
}

static void start_op(struct bench_engine *e, uint32_t index, uint64_t intended_ns)
{
	struct client *c = &e->clients[index];
	const struct bench_config *cfg = e->cfg;

	HASP_ASSERT(c->state == C_IDLE || c->state == C_WATCHING);
	c->op_start_ns = intended_ns;
	/* Burst rounds are measured by the round coordinator, not per client. */
	c->measured = intended_ns >= e->measure_start_ns && cfg->workload != BENCH_WL_BURST;
	c->reacquires = 0;
	e->res->ops_started++;
	switch (cfg->workload) {
	case BENCH_WL_CYCLE:
	case BENCH_WL_BURST:
		c->key = pick_key(e, index);
		c->state = C_ACQUIRE;
		c->acq_first_ns = 0;
		break;
	case BENCH_WL_KEEPALIVE:
		c->state = C_OP;
		break;
	case BENCH_WL_KV:
		c->key = pick_key(e, index);
		c->put = prng_below(&e->prng, 100) < cfg->put_percent;
		c->state = C_OP;
		break;
	}
	if (c->opcode != 0) {
		/* A background keepalive is in flight: the operation's first
		 * request goes out when it completes (see complete_request). */
		return;
	}
	switch (cfg->workload) {
	case BENCH_WL_CYCLE:
	case BENCH_WL_BURST:
		request(e, index, HASP_OP_ACQUIRE);
		break;
	case BENCH_WL_KEEPALIVE:
		request(e, index, HASP_OP_SESSION_KEEPALIVE);
		break;
	case BENCH_WL_KV:
		request(e, index, c->put ? HASP_OP_KV_PUT : HASP_OP_KV_GET);
		break;
	}
}

/* The operation's first request, when start_op found the client busy. */
static void start_pending_request(struct bench_engine *e, uint32_t index)
{
	struct client *c = &e->clients[index];

	if (c->state == C_ACQUIRE)
		request(e, index, HASP_OP_ACQUIRE);
	else if (c->state == C_RELEASE)
		request(e, index, HASP_OP_RELEASE);
	else if (c->state == C_OP && e->cfg->workload == BENCH_WL_KEEPALIVE)
		request(e, index, HASP_OP_SESSION_KEEPALIVE);
	else if (c->state == C_OP)
		request(e, index, c->put ? HASP_OP_KV_PUT : HASP_OP_KV_GET);
}

static void record(struct bench_engine *e, bool measured, enum bench_lat l, uint64_t ns)
{
	if (measured)
		bench_hist_record(e->res->lat[l], ns);
}

static void make_idle(struct bench_engine *e, uint32_t index)
{
	struct client *c = &e->clients[index];

	c->state = (e->cfg->workload == BENCH_WL_BURST && e->cfg->watchers && index > 0)
			   ? C_WATCHING
			   : C_IDLE;
	if (e->cfg->workload == BENCH_WL_BURST)
		return; /* the round coordinator starts burst operations */
	/* Open loop: a waiting arrival takes this client at once. */
	if (e->cfg->rate > 0.0 && e->backlog_len > 0 && e->admitting) {
		uint64_t intended = e->backlog[e->backlog_head];
		e->backlog_head = (e->backlog_head + 1u) % BENCH_BACKLOG_MAX;
		e->backlog_len--;
		start_op(e, index, intended);
		return;
	}
	e->idle[e->idle_len++] = index;
	HASP_ASSERT(e->idle_len <= e->client_count);
}

static void op_done(struct bench_engine *e, uint32_t index, bool ok)
{
	struct client *c = &e->clients[index];

	if (c->measured) {
		e->res->ops++;
		record(e, true, BENCH_LAT_OP, e->now - c->op_start_ns);
		if (e->now > e->last_done_ns)
			e->last_done_ns = e->now;
		if (!ok)
			e->res->err.failed_ops++;
	}
	c->hold = false;
	make_idle(e, index);
}

static void granted(struct bench_engine *e, uint32_t index, uint64_t token)
{
	struct client *c = &e->clients[index];

	c->token = token;
	record(e, c->measured, BENCH_LAT_ACQUIRE, e->now - c->acq_first_ns);
	if (c->hold) {
		c->state = C_HOLDING;
		return;
	}
	if (e->cfg->workload == BENCH_WL_BURST && !c->told) {
		c->told = true;
		e->round_told++;
		e->round_last_told_ns = e->now;
	}
	c->state = C_RELEASE;
	if (c->opcode == 0)
		request(e, index, HASP_OP_RELEASE);
}

/* ---- replies ---- */

static void handle_reply(struct bench_engine *e, uint32_t index, const struct hasp_wire_msg *m)
{
	struct client *c = &e->clients[index];
	const struct bench_config *cfg = e->cfg;
	uint8_t opcode = c->opcode;
	uint16_t status = m->hdr.status;
	uint64_t rtt = e->now - c->req_first_ns;
	bool background = c->background;

	/* Statuses that mean "send the same request again". */
	if (status == HASP_STATUS_NOT_LEADER) {
		e->res->err.redirects++;
		if (c->redirects < 255)
			c->redirects++;
		if (m->body.not_leader.known) {
			c->node = node_find_or_add(e, m->body.not_leader.ipv4, m->body.not_leader.port);
			e->leader_hint = c->node;
			/* At once the first times; then back off, so stale hints
			 * during an election cannot bounce a request in a loop. */
			c->req_due_ns = c->redirects <= 2 ? e->now : e->now + BACKOFF_NS;
		} else {
			c->node = (uint16_t)((c->node + 1u) % e->node_count);
			c->req_due_ns = e->now + BACKOFF_NS;
		}
		if (c->req_due_ns <= e->now)
			queue_send(e, index);
		return;
	}
	if (status == HASP_STATUS_UNAVAILABLE || status == HASP_STATUS_OVERLOADED) {
		if (status == HASP_STATUS_UNAVAILABLE)
			c->node = (uint16_t)((c->node + 1u) % e->node_count);
		c->req_due_ns = e->now + BACKOFF_NS;
		return;
	}

	c->opcode = 0;
	c->last_answer_ns = e->now;
	e->leader_hint = c->node;
	if (status == HASP_STATUS_SESSION_EXPIRED) {
		/* Everything this session held is gone; its operation failed. */
		e->res->err.session_reopens++;
		if (c->state != C_OPENING && c->state != C_CLOSING) {
			if (c->measured)
				e->res->err.failed_ops++;
			open_session(e, index);
		}
		return;
	}

	switch (opcode) {
	case HASP_OP_SESSION_OPEN:
		if (status != HASP_STATUS_OK) {
			c->state = C_DONE;
			e->res->err.sessions_failed++;
			return;
		}
		c->session_id = m->body.session_opened.session_id;
		c->seq = 0;
		hash_put(e, c->session_id, index);
		if (cfg->workload == BENCH_WL_BURST && cfg->watchers && index > 0) {
			c->state = C_IDLE;
			request(e, index, HASP_OP_WATCH);
			return;
		}
		make_idle(e, index);
		return;
	case HASP_OP_WATCH:
		c->state = C_WATCHING;
		return;
	case HASP_OP_SESSION_CLOSE:
		c->state = C_DONE;
		return;
	case HASP_OP_SESSION_KEEPALIVE:
		if (background) {
			start_pending_request(e, index);
			return;
		}
		record(e, c->measured, BENCH_LAT_KEEPALIVE, rtt);
		op_done(e, index, status == HASP_STATUS_OK);
		return;
	case HASP_OP_KV_PUT:
	case HASP_OP_KV_GET:
		record(e, c->measured, opcode == HASP_OP_KV_PUT ? BENCH_LAT_PUT : BENCH_LAT_GET, rtt);
		op_done(e, index, status == HASP_STATUS_OK || status == HASP_STATUS_NOT_FOUND);
		return;
	case HASP_OP_ACQUIRE:
		if (status == HASP_STATUS_GRANTED) {
			granted(e, index, m->body.granted.token);
		} else if (status == HASP_STATUS_QUEUED) {
			c->state = C_WAITING;
			c->wait_since_ns = e->now;
		} else if (status == HASP_STATUS_BUSY) {
			if (c->measured)
				e->res->busy++;
			op_done(e, index, true);
		} else {
			op_done(e, index, false);
		}
		return;
	case HASP_OP_LOCK_READ:
		if (c->state != C_WAITING) {
			/* The grant event won the race: send what it left pending. */
			start_pending_request(e, index);
			return;
		}
		if (status == HASP_STATUS_OK && m->body.lock_info.holder_session_id == c->session_id) {
			granted(e, index, m->body.lock_info.token);
		} else if (status == HASP_STATUS_NOT_FOUND && c->reacquires < REACQUIRE_MAX) {
			/* Free with us still waiting: our entry is gone; ask again. */
			c->reacquires++;
			c->state = C_ACQUIRE;
			request(e, index, HASP_OP_ACQUIRE);
		}
		return;
	case HASP_OP_RELEASE:
		record(e, c->measured, BENCH_LAT_RELEASE, rtt);
		if (status == HASP_STATUS_OK && c->measured)
			e->res->cycles++;
		if (cfg->workload == BENCH_WL_BURST && index == 0) {
			/* The holder's release: start of the notify clock. */
			c->state = C_IDLE;
			return;
		}
		op_done(e, index, status == HASP_STATUS_OK);
		return;
	default:
		HASP_UNREACHABLE();
	}
}

static void handle_event(struct bench_engine *e, uint32_t index, const struct hasp_wire_msg *m)
{
	struct client *c = &e->clients[index];
	char name[HASP_NAME_SIZE_MAX + 1];
	size_t size = key_name(e, c->key, name, sizeof(name));
	const struct hasp_wire_event *ev = &m->body.event;

	e->res->events++;
	if (ev->name.size != size || memcmp(ev->name.data, name, size) != 0)
		return;
	if (ev->type == HASP_EVENT_LOCK_GRANTED && c->state == C_WAITING) {
		granted(e, index, ev->revision);
		return;
	}
	if (ev->type == HASP_EVENT_LOCK_RELEASED && c->state == C_WATCHING &&
	    e->round_phase == R_RELEASED && !c->told && ev->revision >= e->clients[0].token) {
		c->told = true;
		e->round_told++;
		e->round_last_told_ns = e->now;
	}
}

static void receive(struct bench_engine *e, const uint8_t *data, size_t size)
{
	struct hasp_wire_msg m;
	int64_t index;

	if (hasp_wire_decode_reply(data, size, &m) != 0) {
		e->res->err.malformed++;
		return;
	}
	if (m.hdr.opcode == HASP_OP_SESSION_OPEN) {
		index = (int64_t)m.hdr.seq - 1;
		if (index < 0 || index >= (int64_t)e->client_count ||
		    e->clients[index].opcode != HASP_OP_SESSION_OPEN) {
			e->res->err.stray++;
			return;
		}
	} else {
		index = hash_get(e, m.hdr.session_id);
		if (index < 0 || e->clients[index].session_id != m.hdr.session_id) {
			e->res->err.stray++;
			return;
		}
	}
	struct client *c = &e->clients[index];
	if (m.hdr.opcode == HASP_OP_EVENT) {
		handle_event(e, (uint32_t)index, &m);
		return;
	}
	if (c->opcode == 0 || m.hdr.opcode != c->opcode || m.hdr.seq != c->seq) {
		e->res->err.stray++; /* a duplicate, or a reply to a request given up */
		return;
	}
	if (m.hdr.status < HASP_STATUS_COUNT) {
		e->res->statuses[m.hdr.status]++;
		e->res->op_statuses[m.hdr.opcode % BENCH_OPCODE_LIMIT][m.hdr.status]++;
	}
	handle_reply(e, (uint32_t)index, &m);
}

/* ---- I/O ---- */

void bench_engine_flush(struct bench_engine *e, bench_send_fn *send, void *arg)
{
	while (e->send_len > 0) {
		uint32_t n = 0;
		uint32_t picked[BENCH_BATCH_MAX];
		struct bench_tx tx[BENCH_BATCH_MAX];

		while (n < e->cfg->batch && n < e->send_len) {
			uint32_t index = e->send_queue[(e->send_head + n) % e->client_count];
			struct client *c = &e->clients[index];
			int size = encode_request(e, index, e->tx_buf[n]);
			HASP_ASSERT(size > 0); /* every request built here is valid */
			tx[n].to = &e->nodes[c->node];
			tx[n].data = e->tx_buf[n];
			tx[n].size = (size_t)size;
			picked[n] = index;
			n++;
		}
		int sent = send(arg, tx, n);
		e->res->tx_calls++;
		if (sent < 0) {
			/* A hard error on the first datagram: skip it; its
			 * retransmit timer resends it. */
			e->res->err.send_errors++;
			sent = 1;
		} else if (sent == 0) {
			return; /* the transport is full: try again next iteration */
		}
		HASP_ASSERT((uint32_t)sent <= n);
		for (int i = 0; i < sent; i++) {
			struct client *c = &e->clients[picked[i]];
			c->in_send_queue = false;
			if (c->req_first_ns == 0)
				c->req_first_ns = e->now;
			if (c->opcode == HASP_OP_ACQUIRE && c->acq_first_ns == 0)
				c->acq_first_ns = e->now;
			c->req_due_ns = e->now + (uint64_t)e->cfg->request_timeout_ms * 1000000u;
		}
		e->res->tx_datagrams += (uint64_t)sent;
		e->send_head = (e->send_head + (uint32_t)sent) % e->client_count;
		e->send_len -= (uint32_t)sent;
	}
}

bool bench_engine_sends_pending(const struct bench_engine *e)
{
	return e->send_len > 0;
}

void bench_engine_receive(struct bench_engine *e, uint64_t now_ns, const uint8_t *data, size_t size)
{
	e->now = now_ns;
	e->res->rx_datagrams++;
	receive(e, data, size);
}

/* Retransmits, wait re-reads, background keepalives, given-up requests. */
static void scan_timers(struct bench_engine *e)
{
	const struct bench_config *cfg = e->cfg;
	uint64_t deadline_ns = (uint64_t)cfg->request_deadline_ms * 1000000u;
	uint64_t recheck_ns = (uint64_t)cfg->wait_recheck_ms * 1000000u;
	uint64_t keepalive_ns = (uint64_t)cfg->session_ttl_ms * 1000000u / 3u;

	for (uint32_t i = 0; i < e->client_count; i++) {
		struct client *c = &e->clients[i];
		if (c->opcode != 0) {
			if (c->in_send_queue || e->now < c->req_due_ns)
				continue;
			if (c->req_first_ns != 0 && e->now - c->req_first_ns >= deadline_ns) {
				/* Given up: the outcome is unknown and the slot in the
				 * window stays unanswered, so start a new session. */
				e->res->err.timeouts++;
				uint8_t state = c->state;
				bool measured = c->measured && state != C_OPENING && state != C_CLOSING;
				c->opcode = 0;
				if (state == C_CLOSING) {
					c->state = C_DONE;
					continue;
				}
				if (state == C_OPENING) {
					c->state = C_DONE;
					e->res->err.sessions_failed++;
					continue;
				}
				if (measured)
					e->res->err.failed_ops++;
				e->res->err.session_reopens++;
				open_session(e, i);
				continue;
			}
			if (c->req_first_ns != 0) {
				e->res->err.retransmits++;
				if (e->node_count > 1 && e->now - c->req_first_ns >= 2u *
				    (uint64_t)cfg->request_timeout_ms * 1000000u)
					c->node = (uint16_t)((c->node + 1u) % e->node_count);
			}
			queue_send(e, i);
			continue;
		}
		if (c->state == C_WAITING && e->now - c->wait_since_ns >= recheck_ns) {
			uint64_t waited = e->now - c->acq_first_ns;
			if (cfg->request_deadline_ms > 0 && waited >= 2u * deadline_ns) {
				e->res->err.wait_timeouts++;
				op_done(e, i, false);
				continue;
			}
			e->res->err.wait_rereads++;
			c->wait_since_ns = e->now;
			request(e, i, HASP_OP_LOCK_READ);
			continue;
		}
		if ((c->state == C_IDLE || c->state == C_WAITING || c->state == C_WATCHING ||
		     c->state == C_HOLDING) &&
		    e->now - c->last_answer_ns >= keepalive_ns) {
			request(e, i, HASP_OP_SESSION_KEEPALIVE);
			c->background = true;
		}
	}
}

/* ---- phases ---- */

static uint32_t count_state(const struct bench_engine *e, uint8_t state)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < e->client_count; i++)
		n += e->clients[i].state == state;
	return n;
}

static void phase_close_start(struct bench_engine *e);

static void burst_round(struct bench_engine *e)
{
	struct client *holder = &e->clients[0];
	const struct bench_config *cfg = e->cfg;

	switch (e->round_phase) {
	case R_IDLE:
		if (!e->admitting || holder->state != C_IDLE || holder->opcode != 0)
			return;
		e->round++;
		e->round_start_ns = e->now;
		e->round_told = 0;
		for (uint32_t i = 1; i < e->client_count; i++)
			e->clients[i].told = false;
		holder->hold = true;
		start_op(e, 0, e->now);
		e->round_phase = R_HOLDER_ACQUIRE;
		return;
	case R_HOLDER_ACQUIRE:
		if (holder->state == C_IDLE) { /* not granted: the round failed */
			e->round_phase = R_IDLE;
			return;
		}
		if (holder->state != C_HOLDING)
			return;
		if (!cfg->watchers)
			for (uint32_t i = 1; i < e->client_count; i++)
				if (e->clients[i].state == C_IDLE && e->clients[i].opcode == 0)
					start_op(e, i, e->now);
		e->round_phase = R_QUEUEING;
		return;
	case R_QUEUEING:
		if (!cfg->watchers && count_state(e, C_WAITING) + count_state(e, C_DONE) <
					      e->client_count - 1u) {
			if (e->now - e->round_start_ns < BURST_ROUND_NS)
				return;
		}
		if (holder->opcode != 0)
			return;
		holder->state = C_RELEASE;
		request(e, 0, HASP_OP_RELEASE);
		e->round_release_ns = e->now;
		e->round_phase = R_RELEASED;
		return;
	case R_RELEASED: {
		uint32_t listeners = e->client_count - 1u;
		bool timed_out = e->now - e->round_release_ns >= BURST_ROUND_NS;
		bool all_back = cfg->watchers || count_state(e, C_IDLE) == e->client_count;
		if ((e->round_told < listeners || !all_back) && !timed_out)
			return;
		if (holder->state != C_IDLE && !timed_out)
			return;
		bool measured = e->round_start_ns >= e->measure_start_ns;
		e->res->err.notify_missing += listeners - e->round_told;
		if (measured) {
			e->res->ops++;
			record(e, true, BENCH_LAT_OP, e->now - e->round_start_ns);
			if (e->round_told > 0)
				record(e, true, BENCH_LAT_NOTIFY,
				       e->round_last_told_ns - e->round_release_ns);
			e->last_done_ns = e->now;
		}
		e->round_phase = R_IDLE;
		return;
	}
	}
}

/* The next idle client, or -1. A client reopened while idle (its session
 * expired) is still listed; skip it: make_idle lists it again when open. */
static int64_t pop_idle(struct bench_engine *e)
{
	while (e->idle_len > 0) {
		uint32_t index = e->idle[--e->idle_len];
		/* With a background keepalive in flight start_op defers the
		 * operation's first request until it is answered. */
		if (e->clients[index].state == C_IDLE)
			return index;
	}
	return -1;
}

static void admit(struct bench_engine *e)
{
	const struct bench_config *cfg = e->cfg;

	if (!e->admitting)
		return;
	uint64_t started = cfg->workload == BENCH_WL_BURST ? e->round : e->res->ops_started;
	if (e->now >= e->run_end_ns || started >= cfg->count_max) {
		e->admitting = false;
		return;
	}
	if (cfg->workload == BENCH_WL_BURST) {
		burst_round(e);
		return;
	}
	if (cfg->rate <= 0.0) {
		while (e->res->ops_started < cfg->count_max) {
			int64_t index = pop_idle(e);
			if (index < 0)
				break;
			start_op(e, (uint32_t)index, e->now);
		}
		return;
	}
	while (bench_arrival_peek(&e->arrival) <= e->now && e->arrivals < cfg->count_max) {
		uint64_t intended = bench_arrival_next(&e->arrival);
		e->arrivals++;
		int64_t index = pop_idle(e);
		if (index >= 0) {
			start_op(e, (uint32_t)index, intended);
		} else if (e->backlog_len < BENCH_BACKLOG_MAX) {
			e->backlog[(e->backlog_head + e->backlog_len) % BENCH_BACKLOG_MAX] = intended;
			e->backlog_len++;
			if (e->backlog_len > e->res->backlog_max)
				e->res->backlog_max = e->backlog_len;
		} else {
			e->res->err.arrivals_dropped++;
		}
	}
	if (e->arrivals >= cfg->count_max && e->backlog_len == 0)
		e->admitting = false;
}

static bool busy(const struct bench_engine *e)
{
	if (e->cfg->workload == BENCH_WL_BURST && e->round_phase != R_IDLE)
		return true;
	for (uint32_t i = 0; i < e->client_count; i++) {
		uint8_t s = e->clients[i].state;
		if (s == C_ACQUIRE || s == C_WAITING || s == C_RELEASE || s == C_OP ||
		    s == C_HOLDING)
			return true;
	}
	return false;
}

/* ---- phases: open every session, run the load, close every session ---- */

static void phase_open_step(struct bench_engine *e)
{
	uint32_t inflight = 0, opened = 0;

	for (uint32_t i = 0; i < e->open_next; i++) {
		const struct client *c = &e->clients[i];
		inflight += c->state == C_OPENING || c->opcode == HASP_OP_WATCH;
		opened += c->state == C_IDLE || c->state == C_WATCHING;
	}
	while (e->open_next < e->client_count && inflight < OPENS_INFLIGHT_MAX) {
		open_session(e, e->open_next++);
		inflight++;
	}
	if ((e->open_next < e->client_count || inflight > 0) &&
	    e->now - e->phase_start_ns < OPEN_PHASE_NS)
		return;
	e->res->sessions = opened;
	if (opened == 0) {
		e->failed = true;
		phase_close_start(e);
		return;
	}
	const struct bench_config *cfg = e->cfg;
	e->phase = PHASE_RUN;
	e->phase_start_ns = e->now;
	e->measure_start_ns = e->now + (uint64_t)cfg->warmup_ms * 1000000u;
	e->run_end_ns = e->measure_start_ns + (uint64_t)cfg->duration_ms * 1000000u;
	e->admitting = true;
	if (cfg->rate > 0.0)
		bench_arrival_init(&e->arrival, cfg->rate, cfg->seed ^ 0xa5a5u, e->now);
}

static void phase_run_step(struct bench_engine *e)
{
	admit(e);
	if (e->admitting)
		return;
	if (e->drain_end_ns == 0)
		e->drain_end_ns = e->now + BENCH_DRAIN_MS * 1000000ull;
	if (busy(e) && e->now < e->drain_end_ns) {
		if (e->cfg->workload == BENCH_WL_BURST && e->round_phase != R_IDLE)
			burst_round(e);
		return;
	}
	/* What is still in flight at the drain deadline is counted, not
	 * measured. */
	for (uint32_t i = 0; i < e->client_count; i++) {
		uint8_t st = e->clients[i].state;
		if (st == C_ACQUIRE || st == C_WAITING || st == C_RELEASE || st == C_OP ||
		    st == C_HOLDING)
			e->res->err.unfinished++;
	}
	e->res->err.unfinished += e->backlog_len; /* arrivals that never got a client */
	uint64_t end = e->run_end_ns;
	if (e->res->ops > 0 && e->last_done_ns > e->measure_start_ns)
		end = e->last_done_ns;
	e->res->elapsed_ns = end > e->measure_start_ns ? end - e->measure_start_ns : 1;
	phase_close_start(e);
}

static void phase_close_start(struct bench_engine *e)
{
	e->phase = PHASE_CLOSE;
	e->phase_start_ns = e->now;
	e->admitting = false;
	for (uint32_t i = 0; i < e->client_count; i++) {
		struct client *c = &e->clients[i];
		if (c->session_id == 0 || c->state == C_DONE)
			continue;
		c->opcode = 0;
		c->in_send_queue = false;
		c->state = C_CLOSING;
	}
	e->send_len = 0;
	for (uint32_t i = 0; i < e->client_count; i++)
		if (e->clients[i].state == C_CLOSING)
			request(e, i, HASP_OP_SESSION_CLOSE);
}

bool bench_engine_step(struct bench_engine *e, uint64_t now_ns, uint64_t *wake_ns)
{
	e->now = now_ns;
	switch (e->phase) {
	case PHASE_OPEN:
		phase_open_step(e);
		break;
	case PHASE_RUN:
		phase_run_step(e);
		break;
	case PHASE_CLOSE:
		if (count_state(e, C_CLOSING) == 0 || e->now - e->phase_start_ns >= CLOSE_PHASE_NS)
			e->phase = PHASE_DONE;
		break;
	case PHASE_DONE:
		break;
	}
	if (e->phase == PHASE_DONE)
		return true;
	if (e->now >= e->next_scan_ns) {
		scan_timers(e);
		e->next_scan_ns = e->now + SCAN_NS;
	}
	uint64_t wake = e->next_scan_ns;
	if (e->phase == PHASE_RUN && e->admitting && e->cfg->rate > 0.0 &&
	    bench_arrival_peek(&e->arrival) < wake)
		wake = bench_arrival_peek(&e->arrival);
	if (e->phase == PHASE_RUN && e->admitting && e->cfg->rate <= 0.0 && e->idle_len > 0)
		wake = e->now;
	if (wake < *wake_ns)
		*wake_ns = wake;
	return false;
}

void bench_engine_destroy(struct bench_engine *e)
{
	if (e == NULL)
		return;
	hasp_free(e->clients);
	hasp_free(e->hash_keys);
	hasp_free(e->hash_vals);
	hasp_free(e->send_queue);
	hasp_free(e->idle);
	hasp_free(e->backlog);
	bench_zipf_deinit(&e->zipf);
	hasp_free(e);
}

bool bench_engine_failed(const struct bench_engine *e)
{
	return e->failed;
}

int bench_engine_create(struct bench_engine **engine, const struct bench_config *cfg,
			struct bench_result *res, uint64_t now_ns)
{
	char why[128];
	int rc = bench_config_check(cfg, why, sizeof(why));
	if (rc != 0)
		return rc;
	struct bench_engine *e = hasp_calloc(1, sizeof(*e));
	if (e == NULL)
		return -HASP_ENOMEM;
	e->cfg = cfg;
	e->res = res;
	rc = parse_cluster(e, cfg->cluster);
	if (rc != 0)
		goto fail;
	e->client_count = cfg->workload == BENCH_WL_BURST ? cfg->waiters + 1u : cfg->clients;
	uint32_t hash_size = 1;
	while (hash_size < 4u * e->client_count)
		hash_size <<= 1;
	e->hash_mask = hash_size - 1u;
	e->clients = hasp_calloc(e->client_count, sizeof(*e->clients));
	e->hash_keys = hasp_calloc(hash_size, sizeof(*e->hash_keys));
	e->hash_vals = hasp_calloc(hash_size, sizeof(*e->hash_vals));
	e->send_queue = hasp_calloc(e->client_count, sizeof(*e->send_queue));
	e->idle = hasp_calloc(e->client_count, sizeof(*e->idle));
	e->backlog = cfg->rate > 0.0 ? hasp_calloc(BENCH_BACKLOG_MAX, sizeof(*e->backlog)) : NULL;
	rc = -HASP_ENOMEM;
	if (e->clients == NULL || e->hash_keys == NULL || e->hash_vals == NULL ||
	    e->send_queue == NULL || e->idle == NULL || (cfg->rate > 0.0 && e->backlog == NULL))
		goto fail;
	rc = bench_zipf_init(&e->zipf, cfg->keys, cfg->zipf_s);
	if (rc != 0)
		goto fail;
	prng_seed(&e->prng, cfg->seed);
	for (uint32_t i = 0; i < HASP_VALUE_SIZE_MAX; i++)
		e->value[i] = (uint8_t)('a' + i % 26u);
	e->now = now_ns;
	e->phase = PHASE_OPEN;
	e->phase_start_ns = now_ns;
	e->next_scan_ns = now_ns;
	*engine = e;
	return 0;
fail:
	bench_engine_destroy(e);
	return rc;
}

/* Peers of the engine: the address list (for transports that need it). */
uint32_t bench_engine_node_count(const struct bench_engine *e)
{
	return e->node_count;
}
