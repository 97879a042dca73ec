/*
 * The hasp-bench engine (tools/bench_engine.h): the send queue, admission
 * of work (closed and open loop), release-burst rounds and the phases of a
 * run (open every session, run the load, close every session), as step
 * functions that a transport drives (tools/bench_kernel.c: one UDP socket
 * with sendmmsg/recvmmsg; tools/bench_dpdk.c: a DPDK lcore). The client
 * sessions themselves are tools/bench_session.c.
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
#include "tools/bench_engine_impl.h"

#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "hasp/errors.h"

/* ---- I/O ---- */

void bench_engine_flush(struct bench_engine *e, bench_send_fn *send, void *arg)
{
	while (e->send_len > 0) {
		uint32_t n = 0;
		uint32_t picked[BENCH_BATCH_MAX];
		struct bench_tx tx[BENCH_BATCH_MAX];

		/* A client whose request was answered while its retransmission
		 * waited here, and that started no other, has nothing to send:
		 * it leaves the queue. A batch stops before such a client, so
		 * the next turn finds it at the head. */
		uint32_t head = e->send_queue[e->send_head];
		if (e->clients[head].opcode == 0) {
			e->clients[head].in_send_queue = false;
			e->send_head = (e->send_head + 1u) % e->client_count;
			e->send_len--;
			continue;
		}
		while (n < e->cfg->batch && n < e->send_len) {
			uint32_t index = e->send_queue[(e->send_head + n) % e->client_count];
			struct client *c = &e->clients[index];
			if (c->opcode == 0)
				break;
			int size = bench_session_encode(e, index, e->tx_buf[n]);
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
	bench_session_receive(e, data, size);
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

/* A new leader dropped the watches registered on the old one: see
 * bench_engine_impl.h. */
bool bench_engine_watchers_current(struct bench_engine *e, uint32_t first, uint32_t end)
{
	bool current = true;

	for (uint32_t i = first; i < end; i++) {
		struct client *c = &e->clients[i];
		if (c->state != C_WATCHING || c->watch_epoch == e->leader_epoch)
			continue;
		current = false;
		if (c->opcode == 0) {
			e->res->err.rewatches++;
			bench_session_request(e, i, HASP_OP_WATCH);
		}
	}
	return current;
}

static void burst_round(struct bench_engine *e)
{
	struct client *holder = &e->clients[0];
	const struct bench_config *cfg = e->cfg;

	switch (e->round_phase) {
	case R_IDLE:
		if (!e->admitting || holder->state != C_IDLE || holder->opcode != 0)
			return;
		if (cfg->watchers && !bench_engine_watchers_current(e, 1, e->client_count))
			return; /* re-registering after a leader change */
		e->round++;
		e->round_start_ns = e->now;
		e->round_told = 0;
		for (uint32_t i = 1; i < e->client_count; i++)
			e->clients[i].told = false;
		holder->hold = true;
		bench_session_start_op(e, 0, e->now);
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
					bench_session_start_op(e, i, e->now);
		e->round_phase = R_QUEUEING;
		return;
	case R_QUEUEING:
		if (!cfg->watchers && count_state(e, C_WAITING) + count_state(e, C_DONE) <
					      e->client_count - 1u) {
			if (e->now - e->round_start_ns < bench_burst_round_ns(cfg))
				return;
		}
		/* The holder's acquire may have found a new leader: watchers
		 * register there before the release they are to be told of. */
		if (cfg->watchers && !bench_engine_watchers_current(e, 1, e->client_count) &&
		    e->now - e->round_start_ns < bench_burst_round_ns(cfg))
			return;
		if (holder->opcode != 0)
			return;
		holder->state = C_RELEASE;
		bench_session_request(e, 0, HASP_OP_RELEASE);
		e->round_release_ns = e->now;
		e->round_phase = R_RELEASED;
		return;
	case R_RELEASED: {
		uint32_t listeners = e->client_count - 1u;
		bool timed_out = e->now - e->round_release_ns >= bench_burst_round_ns(cfg);
		bool all_back = cfg->watchers || count_state(e, C_IDLE) == e->client_count;
		if ((e->round_told < listeners || !all_back) && !timed_out)
			return;
		if (holder->state != C_IDLE && !timed_out)
			return;
		struct bench_burst_round round = { .start_ns = e->round_start_ns,
						   .release_ns = e->round_release_ns,
						   .last_told_ns = e->round_last_told_ns,
						   .told = e->round_told };
		bench_burst_round_end(cfg, e->res, &round, e->measure_start_ns, e->now);
		if (e->round_start_ns >= e->measure_start_ns)
			e->last_done_ns = e->now;
		e->round_phase = R_IDLE;
		return;
	}
	}
}

/* The next idle client, or -1. A client reopened while idle (its session
 * expired) is still listed; skip it: make_idle lists it again when open. */
int64_t bench_engine_pop_idle(struct bench_engine *e)
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
	bool rounds = cfg->workload == BENCH_WL_BURST || cfg->workload == BENCH_WL_STORM;
	uint64_t started = rounds ? e->round : e->res->ops_started;
	if (e->now >= e->run_end_ns || started >= cfg->count_max) {
		e->admitting = false;
		return;
	}
	if (cfg->workload == BENCH_WL_BURST) {
		burst_round(e);
		return;
	}
	if (cfg->workload == BENCH_WL_STORM) {
		bench_storm_step(e);
		return;
	}
	if (cfg->rate <= 0.0) {
		while (e->res->ops_started < cfg->count_max) {
			int64_t index = bench_engine_pop_idle(e);
			if (index < 0)
				break;
			bench_session_start_op(e, (uint32_t)index, e->now);
		}
		return;
	}
	while (bench_arrival_peek(&e->arrival) <= e->now && e->arrivals < cfg->count_max) {
		uint64_t intended = bench_arrival_next(&e->arrival);
		e->arrivals++;
		int64_t index = bench_engine_pop_idle(e);
		if (index >= 0) {
			bench_session_start_op(e, (uint32_t)index, intended);
		} else if (!bench_backlog_push(&e->backlog, intended, &e->res->backlog_max)) {
			e->res->err.arrivals_dropped++;
		}
	}
	if (e->arrivals >= cfg->count_max && e->backlog.len == 0)
		e->admitting = false;
}

static bool busy(const struct bench_engine *e)
{
	if (e->cfg->workload == BENCH_WL_BURST && e->round_phase != R_IDLE)
		return true;
	/* Between storm rounds nothing is pending: a waiter still queued
	 * after a failed round is counted unfinished at once. */
	if (e->cfg->workload == BENCH_WL_STORM)
		return e->storm.phase != S_IDLE;
	for (uint32_t i = 0; i < e->client_count; i++) {
		uint8_t s = e->clients[i].state;
		if (s == C_ACQUIRE || s == C_WAITING || s == C_RELEASE || s == C_OP ||
		    s == C_HOLDING)
			return true;
	}
	return false;
}

/* ---- phases: open every session, run the load, close every session ---- */

/* How long start-up may take: 10 s, or 1 ms per session for more than
 * 10,000 (a storm of 20,000 locks opens 60,000 sessions, each a committed
 * command, OPENS_INFLIGHT_MAX at a time). */
static uint64_t open_phase_ns(const struct bench_engine *e)
{
	uint64_t scaled = (uint64_t)e->client_count * 1000000ull;
	return scaled > OPEN_PHASE_NS ? scaled : OPEN_PHASE_NS;
}

static void phase_open_step(struct bench_engine *e)
{
	uint32_t inflight = 0, opened = 0;

	for (uint32_t i = 0; i < e->open_next; i++) {
		const struct client *c = &e->clients[i];
		inflight += c->state == C_OPENING || c->opcode == HASP_OP_WATCH;
		opened += c->state == C_IDLE || c->state == C_WATCHING;
	}
	while (e->open_next < e->client_count && inflight < OPENS_INFLIGHT_MAX) {
		bench_session_open(e, e->open_next++);
		inflight++;
	}
	if ((e->open_next < e->client_count || inflight > 0) &&
	    e->now - e->phase_start_ns < open_phase_ns(e))
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
	if (e->drain_end_ns == 0) {
		e->drain_end_ns = e->now + BENCH_DRAIN_MS * 1000000ull;
		/* A storm round begun in time finishes: its set-up, window and
		 * verdict are bounded (tools/bench_storm.c). */
		if (e->cfg->workload == BENCH_WL_STORM)
			e->drain_end_ns += STORM_SETUP_NS + bench_storm_verdict_ns(e->cfg) +
					   (uint64_t)e->cfg->window_ms * 1000000ull;
	}
	if (busy(e) && e->now < e->drain_end_ns) {
		if (e->cfg->workload == BENCH_WL_BURST && e->round_phase != R_IDLE)
			burst_round(e);
		if (e->cfg->workload == BENCH_WL_STORM && e->storm.phase != S_IDLE)
			bench_storm_step(e);
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
	e->res->err.unfinished += e->backlog.len; /* arrivals that never got a client */
	uint64_t end = e->run_end_ns;
	if (e->res->ops > 0 && e->last_done_ns > e->measure_start_ns)
		end = e->last_done_ns;
	e->res->elapsed_ns = end > e->measure_start_ns ? end - e->measure_start_ns : 1;
	phase_close_start(e);
}

/* How long the close phase may take: a close's own --deadline (it is
 * resent every --request-timeout until then) plus 1 ms per session (each
 * close is a committed command, CLOSES_INFLIGHT_MAX at a time, as in
 * open_phase_ns), at least 2 s. A session whose close is given up stays
 * open on the cluster until its TTL and is counted in closes_unanswered.
 * It had been 1 s whatever the count: after a run of 60,000 sessions,
 * nearly 20,000 were left open. */
static uint64_t close_phase_ns(const struct bench_engine *e)
{
	uint64_t scaled = (uint64_t)e->cfg->request_deadline_ms * 1000000ull +
			  (uint64_t)e->client_count * 1000000ull;
	return scaled > CLOSE_PHASE_NS ? scaled : CLOSE_PHASE_NS;
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
		c->opcode = 0; /* C_CLOSING without a request: to send */
		c->in_send_queue = false;
		c->state = C_CLOSING;
	}
	e->send_len = 0;
}

/* Keeps CLOSES_INFLIGHT_MAX closes in flight (all of them at once would
 * overflow the node's queues and be answered OVERLOADED or lost); true when
 * every close is answered or given up, or the phase's time is over, when
 * the closes still unanswered are counted. */
static bool phase_close_step(struct bench_engine *e)
{
	uint32_t inflight = 0, pending = 0;
	for (uint32_t i = 0; i < e->client_count; i++) {
		const struct client *c = &e->clients[i];
		if (c->state == C_CLOSING) {
			inflight += c->opcode != 0;
			pending += c->opcode == 0;
		}
	}
	if (e->now - e->phase_start_ns >= close_phase_ns(e)) {
		e->res->err.closes_unanswered += inflight + pending;
		return true;
	}
	for (uint32_t i = 0; i < e->client_count && pending > 0 && inflight < CLOSES_INFLIGHT_MAX; i++) {
		struct client *c = &e->clients[i];
		if (c->state != C_CLOSING || c->opcode != 0)
			continue;
		bench_session_request(e, i, HASP_OP_SESSION_CLOSE);
		inflight++;
		pending--;
	}
	return inflight == 0 && pending == 0;
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
		if (phase_close_step(e))
			e->phase = PHASE_DONE;
		break;
	case PHASE_DONE:
		break;
	}
	if (e->phase == PHASE_DONE)
		return true;
	if (e->now >= e->next_scan_ns) {
		bench_session_scan_timers(e);
		e->next_scan_ns = e->now + SCAN_NS;
	}
	uint64_t wake = e->next_scan_ns;
	if (e->phase == PHASE_RUN && e->admitting && e->cfg->rate > 0.0 &&
	    bench_arrival_peek(&e->arrival) < wake)
		wake = bench_arrival_peek(&e->arrival);
	if (e->phase == PHASE_RUN && e->admitting && e->cfg->rate <= 0.0 && e->idle_len > 0)
		wake = e->now;
	if (e->phase == PHASE_RUN && e->cfg->workload == BENCH_WL_STORM &&
	    bench_storm_wake(&e->storm) < wake)
		wake = bench_storm_wake(&e->storm);
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
	bench_backlog_deinit(&e->backlog);
	bench_zipf_deinit(&e->zipf);
	hasp_free(e);
}

bool bench_engine_failed(const struct bench_engine *e)
{
	return e->failed;
}

static uint64_t nonce_seed(uint64_t now_ns)
{
	uint64_t seed = 0;
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
		seed = now_ns ^ ((uint64_t)getpid() << 32); /* no entropy yet: still per process */
	return seed;
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
	rc = bench_session_parse_cluster(e, cfg->cluster);
	if (rc != 0)
		goto fail;
	e->client_count = cfg->workload == BENCH_WL_BURST   ? cfg->waiters + 1u
			  : cfg->workload == BENCH_WL_STORM ? 3u * cfg->storm_locks
							    : cfg->clients;
	e->storm_locks = cfg->workload == BENCH_WL_STORM ? cfg->storm_locks : 0;
	if (cfg->workload == BENCH_WL_STORM)
		bench_storm_init(e);
	uint32_t hash_size = 1;
	while (hash_size < 4u * e->client_count)
		hash_size <<= 1;
	e->hash_mask = hash_size - 1u;
	e->clients = hasp_calloc(e->client_count, sizeof(*e->clients));
	e->hash_keys = hasp_calloc(hash_size, sizeof(*e->hash_keys));
	e->hash_vals = hasp_calloc(hash_size, sizeof(*e->hash_vals));
	e->send_queue = hasp_calloc(e->client_count, sizeof(*e->send_queue));
	e->idle = hasp_calloc(e->client_count, sizeof(*e->idle));
	rc = -HASP_ENOMEM;
	if (e->clients == NULL || e->hash_keys == NULL || e->hash_vals == NULL ||
	    e->send_queue == NULL || e->idle == NULL ||
	    (cfg->rate > 0.0 && bench_backlog_init(&e->backlog, BENCH_BACKLOG_MAX) != 0))
		goto fail;
	rc = bench_zipf_init(&e->zipf, cfg->keys, cfg->zipf_s);
	if (rc != 0)
		goto fail;
	prng_seed(&e->prng, cfg->seed);
	/* Session nonces are not reproducible on purpose: a node answers an
	 * open whose (identity, nonce) names a live session with that session
	 * (a retransmitted open makes no second one), so two runs with the
	 * same --seed side by side, or one run after another whose sessions
	 * are still alive, would share sessions and refuse each other's
	 * sequence numbers (BAD_REQUEST). --seed keeps choosing the work. */
	prng_seed(&e->nonce_prng, nonce_seed(now_ns));
	if (cfg->workload == BENCH_WL_STORM) /* watchers never start an operation */
		for (uint32_t i = 0; i < e->client_count; i++)
			e->clients[i].key = i % e->storm_locks;
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
