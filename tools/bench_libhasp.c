/*
 * hasp-bench on libhasp's asynchronous core (tools/bench_engine.h,
 * bench_run_libhasp): every simulated client is one struct hasp_client
 * (its own session, sequence numbers, retransmission, leader finding and
 * keepalives, all libhasp's), all of them in ONE client group (one UDP
 * socket, libhasp 1.2): one thread polls the group's fd for the group's
 * timeout and calls hasp_client_group_process, which reads a recvmmsg
 * batch for every client, moves them on and sends in one sendmmsg (what
 * hasp-bench's own wire engine did by hand until session 23). Over DPDK
 * (tools/bench_dpdk.c) the group is one on the port's datagrams (libhasp
 * 1.6) and the lcore's work hook runs the engine a step at a time
 * (bench_libhasp_step, tools/bench_engine.h).
 *
 * Workloads: cycle and contended (ACQUIRE TRY or WAIT, then RELEASE), kv
 * (KV_PUT/KV_GET mix) and keepalive (SESSION_KEEPALIVE,
 * hasp_client_session_keepalive_async), closed loop or open loop (--rate: Poisson
 * arrivals handed to idle clients or a bounded backlog); burst and storm
 * rounds, whose coordinator starts every operation
 * (tools/bench_libhasp_rounds.c). Each client has one operation in flight,
 * as the retired wire engine had, so the figures compare with the
 * recorded ones. An operation's latency runs from its start (the async call)
 * in the closed loop and from its intended arrival time in the open one
 * (coordinated omission, tools/bench_arrival.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <time.h>

#include "common/assert.h"
#include "common/clock.h"
#include "hasp/errors.h"
#include "tools/bench_libhasp_impl.h"

static void op_start(struct lh_client *s, uint64_t now);
static void op_start_at(struct lh_client *s, uint64_t intended_ns, uint64_t now);
static void connect_more(struct lh_engine *e);

static void record(struct lh_engine *e, bool measured, enum bench_lat l, uint64_t start_ns,
		   uint64_t now)
{
	if (measured)
		bench_record(e->cfg, e->res, l, start_ns, now);
}

void lh_count_status(struct lh_engine *e, uint8_t opcode, int rc)
{
	uint16_t st;

	switch (rc) {
	case 0: st = opcode == HASP_OP_ACQUIRE ? HASP_STATUS_GRANTED : HASP_STATUS_OK; break;
	case -HASP_EBUSY: st = HASP_STATUS_BUSY; break;
	case -HASP_ENOENT: st = HASP_STATUS_NOT_FOUND; break;
	case -HASP_ENOTHOLDER: st = HASP_STATUS_NOT_HOLDER; break;
	default: return; /* no reply (timeout) or a local error */
	}
	e->res->statuses[st]++;
	e->res->op_statuses[opcode % BENCH_OPCODE_LIMIT][st]++;
}

/* `now`: the clock as the completion's callback read it. One reading
 * serves the callback's latency, this op's end and the next op's start,
 * as the retired wire engine's one `now` per loop turn did (a clock read per use
 * was five per cycle: docs/PERFORMANCE.md, "fewer instructions per
 * request"). */
static void op_done(struct lh_client *s, bool ok, uint64_t now)
{
	struct lh_engine *e = s->e;

	if (s->measured) {
		e->res->ops++;
		record(e, true, BENCH_LAT_OP, s->op_start_ns, now);
		if (now > e->last_done_ns)
			e->last_done_ns = now;
		if (!ok)
			e->res->err.failed_ops++;
	}
	s->in_flight = false;
	e->busy--;
	if (e->cfg->rate <= 0.0) {
		op_start(s, now);
	} else if (e->backlog.len > 0 && e->admitting) {
		op_start_at(s, bench_backlog_pop(&e->backlog), now); /* the oldest waiting arrival */
	} else {
		e->idle[e->idle_len++] = s->index;
	}
}

static void on_released(struct hasp_client *c, const struct hasp_result *r, void *arg)
{
	struct lh_client *s = arg;
	struct lh_engine *e = s->e;
	uint64_t now = clock_monotonic_ns();

	(void)c;
	lh_count_status(e, HASP_OP_RELEASE, r->rc);
	if (r->rc == -HASP_ETIMEDOUT)
		e->res->err.timeouts++;
	record(e, s->measured, BENCH_LAT_RELEASE, s->req_start_ns, now);
	if (r->rc == 0 && s->measured)
		e->res->cycles++;
	op_done(s, r->rc == 0, now);
}

/* How long a cycle's WAIT may stay queued: twice --deadline, as
 * hasp-bench's waits were always bounded (wait_timeouts counts those given
 * up). */
static uint64_t wait_bound_ns(const struct bench_config *cfg)
{
	return 2u * (uint64_t)cfg->request_deadline_ms * 1000000u;
}

static void on_acquired(struct hasp_client *c, const struct hasp_result *r, void *arg)
{
	struct lh_client *s = arg;
	struct lh_engine *e = s->e;
	uint64_t now = clock_monotonic_ns();

	lh_count_status(e, HASP_OP_ACQUIRE, r->rc);
	if (r->rc == -HASP_EBUSY) {
		if (s->measured)
			e->res->busy++;
		op_done(s, true, now);
		return;
	}
	if (r->rc != 0) {
		/* A WAIT queued past its bound (wait_bound_ns) was given up
		 * and cancelled; any other -HASP_ETIMEDOUT is a request's. */
		if (r->rc == -HASP_ETIMEDOUT && e->cfg->wait &&
		    now - s->req_start_ns >= wait_bound_ns(e->cfg))
			e->res->err.wait_timeouts++;
		else if (r->rc == -HASP_ETIMEDOUT)
			e->res->err.timeouts++;
		op_done(s, false, now);
		return;
	}
	record(e, s->measured, BENCH_LAT_ACQUIRE, s->req_start_ns, now);
	s->req_start_ns = now;
	int rc = hasp_client_release_async(c, s->name, r->lock.token, on_released, s, NULL);
	if (rc != 0)
		op_done(s, false, clock_monotonic_ns());
}

/* A one-request operation ended: KV_PUT, KV_GET (a missing key is an
 * answer) or SESSION_KEEPALIVE. */
static void on_single(struct hasp_client *c, const struct hasp_result *r, void *arg)
{
	struct lh_client *s = arg;
	struct lh_engine *e = s->e;
	enum bench_lat lat = r->op == HASP_OP_KV_PUT	       ? BENCH_LAT_PUT
			     : r->op == HASP_OP_KV_GET	       ? BENCH_LAT_GET
							       : BENCH_LAT_KEEPALIVE;

	uint64_t now = clock_monotonic_ns();

	(void)c;
	lh_count_status(e, r->op, r->rc);
	if (r->rc == -HASP_ETIMEDOUT)
		e->res->err.timeouts++;
	record(e, s->measured, lat, s->req_start_ns, now);
	op_done(s, r->rc == 0 || r->rc == -HASP_ENOENT, now);
}

/* snprintf's "%u" was about 800 instructions of every cycle (callgrind,
 * docs/PERFORMANCE.md); the prefix is written once, at open. The name's
 * length was checked against the largest key by bench_config. */
void lh_name_set(struct lh_client *s, uint32_t key)
{
	char digits[10];
	size_t n = 0;

	s->key = key;
	do {
		digits[n++] = (char)('0' + key % 10);
		key /= 10;
	} while (key != 0);
	char *p = s->name + s->name_key_at;
	HASP_ASSERT(s->name_key_at + n < sizeof(s->name));
	while (n > 0)
		*p++ = digits[--n];
	*p = '\0';
}

/* Closed loop: starts client s's next operation now, unless the run's
 * time or count is up. */
static void op_start(struct lh_client *s, uint64_t now)
{
	struct lh_engine *e = s->e;

	if (now >= e->run_end_ns || e->res->ops_started >= e->cfg->count_max)
		return;
	op_start_at(s, now, now);
}

/* Starts client s's next operation, at `now`, for an arrival intended at
 * `intended_ns` (now, in the closed loop). */
static void op_start_at(struct lh_client *s, uint64_t intended_ns, uint64_t now)
{
	struct lh_engine *e = s->e;
	const struct bench_config *cfg = e->cfg;
	int rc;

	e->res->ops_started++;
	s->op_start_ns = intended_ns;
	s->req_start_ns = now;
	s->measured = intended_ns >= e->measure_start_ns;
	lh_name_set(s, bench_key_pick(cfg, &e->zipf, &e->prng, s->index, e->client_count));
	s->in_flight = true; /* sent by the group's next process */
	e->busy++;
	if (cfg->workload == BENCH_WL_KEEPALIVE) {
		rc = hasp_client_session_keepalive_async(s->c, on_single, s, NULL);
	} else if (cfg->workload == BENCH_WL_KV) {
		if (prng_below(&e->prng, 100) < cfg->put_percent)
			rc = hasp_client_kv_put_async(s->c, s->name, e->value, cfg->value_size, 0,
						      on_single, s, NULL);
		else
			rc = hasp_client_kv_get_async(s->c, s->name, on_single, s, NULL);
	} else {
		struct hasp_acquire_opts opts = {
			.ttl_ms = cfg->lock_ttl_ms,
			.wait = cfg->wait,
			.wait_timeout_ms = cfg->wait ? (uint32_t)(wait_bound_ns(cfg) / 1000000u) : 0,
		};
		rc = hasp_client_acquire_async(s->c, s->name, &opts, on_acquired, s, NULL);
	}
	if (rc != 0) {
		/* Refused before anything was sent: counted, and this client
		 * stops (a retry at once would spin). */
		e->res->err.failed_ops += s->measured;
		s->in_flight = false;
		e->busy--;
	}
}

static void on_opened(struct hasp_client *c, const struct hasp_result *r, void *arg)
{
	struct lh_client *s = arg;

	(void)c;
	s->in_flight = false;
	s->e->busy--;
	s->e->opening--;
	connect_more(s->e);
	if (r->rc != 0) {
		s->e->res->err.sessions_failed++;
		return;
	}
	s->e->res->sessions++;
	if (lh_round_is_watcher(s->e, s->index) && lh_round_opened(s) != 0)
		s->e->res->err.sessions_failed++; /* a watcher that cannot watch */
}

/* Opens sessions in parallel (hasp_client_connect_async), at most
 * OPENS_INFLIGHT_MAX at once, as the wire engine does: all of them at
 * once overflowed the leader's queues, and every client then probed
 * every node (3,000 sessions: about 17 retransmissions each, against
 * none on the wire engine, and a leader change on a loaded cluster). */
static void connect_more(struct lh_engine *e)
{
	while (e->open_next < e->client_count && e->opening < OPENS_INFLIGHT_MAX) {
		struct lh_client *s = &e->clients[e->open_next++];
		if (hasp_client_connect_async(s->c, on_opened, s, NULL) != 0) {
			e->res->err.sessions_failed++;
			continue;
		}
		s->in_flight = true;
		e->busy++;
		e->opening++;
	}
}

/* Creates the clients and starts opening their sessions (connect_more). */
static int open_clients(struct lh_engine *e)
{
	const struct bench_config *cfg = e->cfg;

	for (uint32_t i = 0; i < e->client_count; i++) {
		struct lh_client *s = &e->clients[i];
		struct hasp_client_config hc;
		hasp_client_config_default(&hc);
		hc.cluster = cfg->cluster;
		hc.session_ttl_ms = cfg->session_ttl_ms;
		hc.request_timeout_ms = cfg->request_timeout_ms;
		hc.deadline_ms = cfg->request_deadline_ms; /* --deadline: give a request up */
		hc.wait_recheck_ms = cfg->wait_recheck_ms;
		/* Probe rounds (every node at once, after a silence of
		 * request_timeout_ms) at the wire engine's retransmission pace,
		 * not libhasp's default 20..100 ms: on a CPU-starved cluster a
		 * slow leader otherwise drew about 11 datagrams per client per
		 * stall against the wire engine's 1 (docs/PERFORMANCE.md). */
		hc.backoff_ms = cfg->request_timeout_ms;
		hc.backoff_max_ms = cfg->request_timeout_ms;
		/* bench_config_auth read HASP_ID and HASP_KEY_FILE; libhasp reads
		 * the same variables (NULL), and "" means wire v1. */
		if (!cfg->auth)
			hc.identity = "";
		s->e = e;
		s->index = i;
		int n = snprintf(s->name, sizeof(s->name), "%s/k", cfg->prefix);
		HASP_ASSERT(n > 0 && (size_t)n < sizeof(s->name));
		s->name_key_at = (uint8_t)n;
		int rc = hasp_client_open_in_group(&s->c, &hc, e->group);
		if (rc != 0)
			return rc;
	}
	connect_more(e);
	return 0;
}

static void collect(struct lh_engine *e)
{
	struct hasp_client_group_stats gs;

	/* The group's socket calls: what one socket for every session saves
	 * shows as fewer calls than datagrams. */
	hasp_client_group_stats_get(e->group, &gs);
	e->res->tx_calls += gs.tx_batches;
	e->res->rx_calls += gs.rx_batches;
	e->res->err.stray += gs.rx_unrouted;
	for (uint32_t i = 0; i < e->client_count; i++) {
		struct lh_client *s = &e->clients[i];
		struct hasp_client_stats st;
		if (s->c == NULL)
			continue;
		hasp_client_stats_get(s->c, &st);
		e->res->err.retransmits += st.tx_retransmits;
		e->res->err.redirects += st.redirects;
		e->res->err.wait_rereads += st.wait_rechecks; /* LOCK_READs while queued */
		e->res->err.malformed += st.rx_malformed + st.rx_auth_bad;
		e->res->err.stray += st.rx_stray + st.rx_late + st.rx_duplicates;
		e->res->err.session_reopens += st.session_opens > 0 ? st.session_opens - 1 : 0;
		e->res->tx_datagrams += st.tx_requests + st.tx_retransmits;
		e->res->rx_datagrams += st.rx_replies + st.rx_duplicates + st.rx_late + st.events;
		e->res->events += st.events;
		e->res->err.unfinished += s->in_flight;
	}
}

/* Waits for what is in flight (busy) or until the run's time and count
 * are up: the group's loop (poll on its fd for its timeout, process). */
/* Open loop: every arrival whose intended time has come goes to an idle
 * client, or waits in the backlog (bounded; overflow is counted). */
static void admit(struct lh_engine *e, uint64_t now)
{
	const struct bench_config *cfg = e->cfg;

	if (!e->admitting)
		return;
	if (now >= e->run_end_ns) {
		e->admitting = false;
		return;
	}
	while (bench_arrival_peek(&e->arrival) <= now && e->arrivals < cfg->count_max) {
		uint64_t intended = bench_arrival_next(&e->arrival);
		e->arrivals++;
		if (e->idle_len > 0) {
			op_start_at(&e->clients[e->idle[--e->idle_len]], intended, now);
		} else if (!bench_backlog_push(&e->backlog, intended, &e->res->backlog_max)) {
			e->res->err.arrivals_dropped++;
		}
	}
	if (e->arrivals >= cfg->count_max && e->backlog.len == 0)
		e->admitting = false;
}

static bool rounds(const struct bench_config *cfg)
{
	return cfg->workload == BENCH_WL_BURST || cfg->workload == BENCH_WL_STORM;
}

/* Whether the run still starts operations: closed loop until its time or
 * count is up, open loop while arrivals are admitted. */
static bool starting(const struct lh_engine *e, uint64_t now)
{
	if (rounds(e->cfg))
		return e->admitting || lh_round_busy(e);
	if (e->cfg->rate > 0.0)
		return e->admitting;
	return now < e->run_end_ns && e->res->ops_started < e->cfg->count_max;
}

/* When the group must be run again: its timeout, at most POLL_MAX_MS away
 * (the run's end and the progress line are looked at that often). */
static uint64_t group_wake(const struct lh_engine *e, uint64_t now)
{
	int timeout_ms = hasp_client_group_timeout_ms(e->group);
	uint64_t wake = now + (uint64_t)POLL_MAX_MS * 1000000u;

	if (timeout_ms >= 0 && now + (uint64_t)timeout_ms * 1000000u < wake)
		wake = now + (uint64_t)timeout_ms * 1000000u;
	return wake;
}

/* The run's own work at `now` (arrivals admitted, the rounds stepped).
 * False when the phase is over: nothing in flight and (running) nothing
 * more to start. Else *wake_ns: when the engine needs its next turn (the
 * group's timeout, the next arrival or round step, POLL_MAX_MS at most). */
static bool turn(struct lh_engine *e, uint64_t now, bool running, uint64_t *wake_ns)
{
	const struct bench_config *cfg = e->cfg;

	if (running && cfg->rate > 0.0)
		admit(e, now);
	if (running && rounds(cfg))
		lh_round_step(e, now);
	if (e->busy == 0 && (!running || !starting(e, now)))
		return false;
	uint64_t wake = group_wake(e, now);
	if (running && cfg->rate > 0.0 && e->admitting && bench_arrival_peek(&e->arrival) < wake)
		wake = bench_arrival_peek(&e->arrival); /* to the nanosecond: ppoll */
	if (running && rounds(cfg) && lh_round_wake(e) < wake)
		wake = lh_round_wake(e);
	*wake_ns = wake;
	return true;
}

/* Runs the group (callbacks, sends); prints the progress line when due.
 * Returns the operations completed. */
static uint32_t process(struct lh_engine *e)
{
	uint32_t completed = 0;

	(void)!hasp_client_group_process(e->group, &completed);
	if (e->cfg->progress != NULL) {
		uint64_t now = clock_monotonic_ns();
		if (now >= e->progress_ns) {
			bench_progress_line(e->cfg->progress, e->res, ++e->progress_tick,
					    e->res->ops - e->progress_ops);
			e->progress_ops = e->res->ops;
			e->progress_ns += 1000000000ull;
		}
	}
	return completed;
}

/* Waits for what is in flight (busy) or until the run's time and count
 * are up: the group's loop on its own socket (poll on its fd for the
 * group's timeout, or the next arrival, process). */
static void drive(struct lh_engine *e, uint64_t until_ns, bool running)
{
	struct pollfd pfd = { .fd = hasp_client_group_fd(e->group), .events = POLLIN };
	uint32_t completed = 0;

	for (;;) {
		uint64_t now = clock_monotonic_ns();
		uint64_t wake;
		if (now >= until_ns || !turn(e, now, running, &wake))
			return;
		/* Skipped when work is due now, and after a call that completed
		 * operations: the process reads the socket anyway, and while
		 * replies stream in (a busy run), the next ones have most likely
		 * arrived by then; a poll(2) that returns at once is a syscall,
		 * and one that sleeps a context switch. As the wire engine does,
		 * the loop sleeps only when a call found nothing to finish. */
		if (wake > now && completed == 0) {
			struct timespec ts = { .tv_sec = (time_t)((wake - now) / 1000000000u),
					       .tv_nsec = (long)((wake - now) % 1000000000u) };
			(void)ppoll(&pfd, 1, &ts, NULL);
		}
		completed = process(e);
	}
}

/* After the start-up: the measured run begins at `start` (its clock, its
 * arrivals, every client's first operation). The caller's step goes on
 * with the same instant, so a round it starts at once is measured.
 * *until_ns: when the run ends, drained. */
static int run_start(struct lh_engine *e, uint64_t start, uint64_t *until_ns)
{
	const struct bench_config *cfg = e->cfg;

	if (e->res->sessions == 0)
		return -HASP_ETIMEDOUT;
	e->measure_start_ns = start + (uint64_t)cfg->warmup_ms * 1000000u;
	e->run_end_ns = e->measure_start_ns + (uint64_t)cfg->duration_ms * 1000000u;
	if (cfg->rate > 0.0) {
		bench_arrival_init(&e->arrival, cfg->rate, cfg->seed ^ 0xa5a5u, start);
		e->admitting = true;
	}
	if (rounds(cfg))
		e->admitting = true; /* the coordinator starts every operation */
	for (uint32_t i = 0; i < e->client_count && !rounds(cfg); i++) {
		if (e->clients[i].in_flight || hasp_client_session_id(e->clients[i].c) == 0)
			continue; /* no session: not a client of the run */
		if (cfg->rate > 0.0)
			e->idle[e->idle_len++] = i;
		else
			op_start(&e->clients[i], clock_monotonic_ns());
	}
	uint64_t drain_ns = (uint64_t)BENCH_DRAIN_MS * 1000000u;
	if (rounds(cfg))
		drain_ns += lh_round_drain_extra_ns(cfg);
	*until_ns = e->run_end_ns + drain_ns;
	return 0;
}

static void run_finish(struct lh_engine *e)
{
	if (rounds(e->cfg))
		lh_round_finish(e);
	e->res->err.unfinished += e->backlog.len; /* arrivals that never got a client */
	/* What is still in flight at the drain's end is counted, not measured
	 * (as the wire engine did): its callback may still come during the
	 * close phase, and starts nothing then (the run's time is over). */
	for (uint32_t i = 0; i < e->client_count; i++) {
		struct lh_client *s = &e->clients[i];
		if (!rounds(e->cfg) && s->in_flight)
			e->res->err.unfinished++;
		s->measured = false;
	}
	uint64_t end = e->run_end_ns;
	if (e->res->ops > 0 && e->last_done_ns > e->measure_start_ns)
		end = e->last_done_ns; /* as the wire engine measured */
	e->res->elapsed_ns = end > e->measure_start_ns ? end - e->measure_start_ns : 1;
	collect(e);
}

/* How long the close phase may take, as the wire engine bounded its own: a
 * close's --deadline plus 1 ms per session (each close is a committed
 * command, CLOSES_AT_ONCE at a time), at least CLOSE_PHASE_MIN_NS. */
static uint64_t close_phase_ns(const struct lh_engine *e)
{
	uint64_t scaled = (uint64_t)e->cfg->request_deadline_ms * 1000000ull +
			  (uint64_t)e->client_count * 1000000ull;
	return scaled > CLOSE_PHASE_MIN_NS ? scaled : CLOSE_PHASE_MIN_NS;
}

static void close_more(struct lh_engine *e);

/* A session's close ended: 0 closed, -HASP_ESESSION it had ended already;
 * anything else leaves it open on the cluster until its TTL. */
static void on_closed(struct hasp_client *c, const struct hasp_result *r, void *arg)
{
	struct lh_client *s = arg;

	(void)c;
	s->e->closing--;
	if (r->rc != 0 && r->rc != -HASP_ESESSION)
		s->e->res->err.closes_unanswered++;
	close_more(s->e);
}

/* Closes sessions with hasp_client_close_async, CLOSES_AT_ONCE at a time
 * (all of them at once would overflow the node's queues, as opens do). A
 * client whose session never opened has nothing to close. */
static void close_more(struct lh_engine *e)
{
	while (e->close_next < e->client_count && e->closing < CLOSES_AT_ONCE) {
		struct lh_client *s = &e->clients[e->close_next++];
		if (s->c == NULL || hasp_client_session_id(s->c) == 0)
			continue;
		if (hasp_client_close_async(s->c, on_closed, s, NULL) == 0)
			e->closing++;
		else
			e->res->err.closes_unanswered++;
	}
}

static bool closes_pending(const struct lh_engine *e)
{
	return e->closing > 0 || e->close_next < e->client_count;
}

/* The close phase's end: what is still unanswered stays open until its
 * TTL, and is counted. */
static void close_finish(struct lh_engine *e)
{
	e->res->err.closes_unanswered += e->closing;
	for (; e->close_next < e->client_count; e->close_next++) {
		const struct lh_client *s = &e->clients[e->close_next];
		e->res->err.closes_unanswered += s->c != NULL && hasp_client_session_id(s->c) != 0;
	}
	e->closing = 0;
}

/* Every session closed and its answer waited for, on the group's own
 * socket: bounded by close_phase_ns. */
static void close_sessions(struct lh_engine *e)
{
	struct pollfd pfd = { .fd = hasp_client_group_fd(e->group), .events = POLLIN };
	uint64_t until = clock_monotonic_ns() + close_phase_ns(e);

	close_more(e);
	for (;;) {
		uint64_t now = clock_monotonic_ns();
		if (!closes_pending(e) || now >= until)
			break;
		uint64_t wake = group_wake(e, now);
		if (wake > now) {
			struct timespec ts = { .tv_sec = (time_t)((wake - now) / 1000000000u),
					       .tv_nsec = (long)((wake - now) % 1000000000u) };
			(void)ppoll(&pfd, 1, &ts, NULL);
		}
		(void)!hasp_client_group_process(e->group, NULL);
	}
	close_finish(e);
}

/* The whole run on the group's own socket, on this thread. */
static int run(struct lh_engine *e)
{
	uint64_t until;

	e->progress_ns = clock_monotonic_ns() + 1000000000ull;
	int rc = open_clients(e);
	if (rc != 0)
		return rc;
	/* Start-up: every session opened, or given up (libhasp's call
	 * deadline, 5 s), bounded by OPEN_PHASE_NS. */
	drive(e, clock_monotonic_ns() + OPEN_PHASE_NS, false);
	rc = run_start(e, clock_monotonic_ns(), &until);
	if (rc != 0)
		return rc;
	drive(e, until, true);
	run_finish(e);
	close_sessions(e);
	return 0;
}

void bench_libhasp_destroy(struct lh_engine *e)
{
	if (e == NULL)
		return;
	bench_libhasp_close(e);
	hasp_client_group_free(e->group);
	if (e->zipf_ready)
		bench_zipf_deinit(&e->zipf);
	free(e->clients);
	free(e->idle);
	bench_backlog_deinit(&e->backlog);
	free(e);
}

void bench_libhasp_close(struct lh_engine *e)
{
	for (uint32_t i = 0; i < e->client_count; i++) {
		if (e->clients[i].c != NULL)
			hasp_client_close(e->clients[i].c);
		e->clients[i].c = NULL;
	}
}

int bench_libhasp_create(struct lh_engine **engine, const struct bench_config *cfg,
			 struct bench_result *res, const struct hasp_client_group_io *io)
{
	char why[128];

	*engine = NULL;
	if (bench_config_check(cfg, why, sizeof(why)) != 0)
		return -HASP_ECONFIG;
	struct lh_engine *e = calloc(1, sizeof(*e));
	if (e == NULL)
		return -HASP_ENOMEM;
	e->cfg = cfg;
	e->res = res;
	e->client_count = cfg->clients;
	/* As the wire engine counts them (bench_engine_create). */
	if (cfg->workload == BENCH_WL_BURST)
		e->client_count = cfg->waiters + 1u;
	if (cfg->workload == BENCH_WL_STORM) {
		e->client_count = 3u * cfg->storm_locks;
		e->storm_locks = cfg->storm_locks;
		lh_storm_init(e);
	}
	e->clients = calloc(e->client_count, sizeof(*e->clients));
	if (cfg->rate > 0.0)
		e->idle = calloc(cfg->clients, sizeof(*e->idle));
	int rc = 0;
	if (e->clients == NULL ||
	    (cfg->rate > 0.0 && (e->idle == NULL ||
				 bench_backlog_init(&e->backlog, BENCH_BACKLOG_MAX) != 0)))
		rc = -HASP_ENOMEM;
	prng_seed(&e->prng, cfg->seed);
	for (uint32_t i = 0; i < sizeof(e->value); i++)
		e->value[i] = (uint8_t)('a' + i % 26);
	if (rc == 0)
		rc = io != NULL ? hasp_client_group_new_io(&e->group, io) : hasp_client_group_new(&e->group);
	if (rc == 0 && (cfg->contended || cfg->workload == BENCH_WL_KV)) {
		rc = bench_zipf_init(&e->zipf, cfg->keys, cfg->zipf_s);
		e->zipf_ready = rc == 0;
	}
	if (rc != 0) {
		bench_libhasp_destroy(e);
		return rc;
	}
	*engine = e;
	return 0;
}

/* The group's turn in a step: sets e->wake_ns; *worked when operations
 * completed or datagrams went out. */
static void step_process(struct lh_engine *e, uint64_t wake, bool *worked)
{
	struct hasp_client_group_stats before, after;

	e->wake_ns = wake;
	hasp_client_group_stats_get(e->group, &before);
	uint32_t completed = process(e);
	hasp_client_group_stats_get(e->group, &after);
	*worked = completed > 0 || after.tx_batches != before.tx_batches;
	e->last_worked = *worked;
}

bool bench_libhasp_step(struct lh_engine *e, uint64_t now, int *rc, bool *worked)
{
	uint64_t wake;

	*worked = false;
	*rc = 0;
	if (e->phase == LH_PHASE_OPENING || e->phase == LH_PHASE_RUNNING ||
	    e->phase == LH_PHASE_CLOSING) {
		/* Nothing came, nothing is due and the last step did nothing:
		 * an lcore that polls calls this millions of times a second,
		 * and a turn reads every member's due time (the group's
		 * timeout). */
		if (!e->input_pending && !e->last_worked && now < e->wake_ns &&
		    now < e->phase_until_ns)
			return false;
		e->input_pending = false;
	}
	switch (e->phase) {
	case LH_PHASE_NEW:
		e->progress_ns = now + 1000000000ull;
		e->phase_until_ns = now + OPEN_PHASE_NS;
		e->phase = LH_PHASE_OPENING;
		*rc = open_clients(e);
		if (*rc != 0)
			break;
		/* fall through */
	case LH_PHASE_OPENING:
		/* Start-up: every session opened, or given up, as in run(). */
		if (now < e->phase_until_ns && turn(e, now, false, &wake)) {
			step_process(e, wake, worked);
			return false;
		}
		*rc = run_start(e, now, &e->phase_until_ns);
		if (*rc != 0)
			break;
		e->phase = LH_PHASE_RUNNING;
		/* fall through */
	case LH_PHASE_RUNNING:
		if (now < e->phase_until_ns && turn(e, now, true, &wake)) {
			step_process(e, wake, worked);
			return false;
		}
		run_finish(e);
		e->phase = LH_PHASE_CLOSING;
		e->phase_until_ns = now + close_phase_ns(e);
		close_more(e);
		/* fall through */
	case LH_PHASE_CLOSING:
		if (now < e->phase_until_ns && closes_pending(e)) {
			step_process(e, group_wake(e, now), worked);
			return false;
		}
		close_finish(e);
		break;
	case LH_PHASE_DONE:
		*rc = e->rc;
		return true;
	}
	e->rc = *rc;
	e->phase = LH_PHASE_DONE;
	return true;
}

uint64_t bench_libhasp_wake_ns(const struct lh_engine *e)
{
	return e->wake_ns;
}

int bench_libhasp_input(struct lh_engine *e, const void *data, size_t size,
			const struct sockaddr_in *from)
{
	e->input_pending = true; /* the next step runs the group */
	return hasp_client_group_input(e->group, data, size, from);
}

int bench_run_libhasp(const struct bench_config *cfg, struct bench_result *res)
{
	struct lh_engine *e;

	int rc = bench_libhasp_create(&e, cfg, res, NULL);
	if (rc == 0)
		rc = run(e);
	bench_libhasp_destroy(e);
	return rc;
}
