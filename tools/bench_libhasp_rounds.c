/*
 * hasp-bench's burst and storm rounds on libhasp's async core, judged and
 * measured by tools/bench_rounds.c (the code that also judged the retired
 * wire engine's rounds, so runs compare with recorded ones), learnt
 * through libhasp's public API only:
 *
 *   a waiter's grant    its WAIT acquire completes (hasp_client_acquire_async
 *                       with wait; libhasp takes the LOCK_GRANTED event, or
 *                       its own LOCK_READ after wait_recheck_ms of silence);
 *   a watcher's event   hasp_client_next_event on the watcher, drained after
 *                       every group process that read datagrams; a RESYNC
 *                       (libhasp: events may have been lost, which includes
 *                       the node's gap marker) marks the next event as one
 *                       after a gap, the storm's "coalesced";
 *   "queued"            libhasp does not report a WAIT acquire's QUEUED
 *                       answer, so the holder reads the lock
 *                       (hasp_client_lock_read_async, waiter_count) until
 *                       the waiters are in its queue (the wire engine saw
 *                       the QUEUED replies). Those reads are set-up:
 *                       they come before the release, which starts the
 *                       measured notify and grant clocks.
 *
 * Burst: client 0 holds the lock k0 (TRY, or WAIT with --wait), clients
 * 1..W wait for it (or watch it, --watchers); the holder releases once all
 * are queued (or registered), and the round ends when every waiter was
 * granted and gave the lock back, or every watcher was told of the release,
 * or bench_burst_round_ns after the release.
 *
 * Storm: clients i < L hold lock i, L + i wait for it, 2L + i watch it;
 * the phases and the verdict in tools/bench_libhasp_storm.c.
 *
 * Every wait is bounded by its own wait_timeout_ms (the round's longest
 * time), so nothing outlives the run; a storm that lost a lock cancels
 * the waits still queued.
 */
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "hasp/errors.h"
#include "tools/bench_libhasp_impl.h"
#include "tools/bench_rounds.h"


/* Burst round phases, as tools/bench_engine_impl.h (the storm's: enum
 * bench_storm_phase, tools/bench_rounds.h). */
enum { R_IDLE, R_HOLDER_ACQUIRE, R_QUEUEING, R_RELEASED };

static bool storm(const struct lh_engine *e)
{
	return e->cfg->workload == BENCH_WL_STORM;
}

bool lh_round_is_watcher(const struct lh_engine *e, uint32_t index)
{
	if (storm(e))
		return index >= 2u * e->storm_locks;
	return e->cfg->workload == BENCH_WL_BURST && e->cfg->watchers && index > 0;
}

static void op_begin(struct lh_client *s)
{
	s->in_flight++;
	s->e->busy++;
}

static void op_end(struct lh_client *s)
{
	s->in_flight--;
	s->e->busy--;
}

static void on_watched(struct hasp_client *c, const struct hasp_result *r, void *arg)
{
	struct lh_client *s = arg;

	(void)c;
	op_end(s);
	lh_count_status(s->e, HASP_OP_WATCH, r->rc);
	s->watching = r->rc == 0;
}

int lh_round_opened(struct lh_client *s)
{
	struct lh_engine *e = s->e;

	lh_name_set(s, bench_key_pick(e->cfg, NULL, NULL, s->index, e->client_count));
	int rc = hasp_client_watch_async(s->c, s->name, false, on_watched, s, NULL);
	if (rc == 0)
		op_begin(s);
	return rc;
}

/* ---- acquire, hold, release ---- */

/* The longest a waiter of this workload waits: its round's whole time. */
static uint32_t wait_bound_ms(const struct bench_config *cfg)
{
	uint64_t ns = cfg->workload == BENCH_WL_STORM
			      ? STORM_SETUP_NS + (uint64_t)cfg->window_ms * 1000000ull +
					bench_storm_verdict_ns(cfg)
			      : 2u * bench_burst_round_ns(cfg);
	return (uint32_t)(ns / 1000000ull);
}

static void on_released(struct hasp_client *c, const struct hasp_result *r, void *arg)
{
	struct lh_client *s = arg;
	struct lh_engine *e = s->e;

	(void)c;
	op_end(s);
	lh_count_status(e, HASP_OP_RELEASE, r->rc);
	if (r->rc == -HASP_ETIMEDOUT)
		e->res->err.timeouts++;
	s->round_state = LR_IDLE;
	/* A storm holder's release in the window was accepted. */
	if (storm(e) && s->index < e->storm_locks)
		s->told = r->rc == 0;
}

void lh_release(struct lh_client *s)
{
	s->round_state = LR_RELEASE;
	if (hasp_client_release_async(s->c, s->name, s->token, on_released, s, NULL) == 0) {
		op_begin(s);
		return;
	}
	s->round_state = LR_IDLE; /* refused before sending: counted, not retried */
	s->e->res->err.failed_ops++;
}

/* The grant of a listener (burst waiter, storm waiter) or a holder. */
static void on_acquired(struct hasp_client *c, const struct hasp_result *r, void *arg)
{
	struct lh_client *s = arg;
	struct lh_engine *e = s->e;
	uint64_t now = clock_monotonic_ns();
	bool holder = s->index == 0 || (storm(e) && s->index < e->storm_locks);

	(void)c;
	op_end(s);
	/* A listener's grant comes as an event (its ACQUIRE was answered
	 * QUEUED, which libhasp does not report): only the holders' answers
	 * are replies to count, as the wire engine counted them. */
	if (holder)
		lh_count_status(e, HASP_OP_ACQUIRE, r->rc);
	if (r->rc == -HASP_ETIMEDOUT)
		e->res->err.timeouts++;
	if (r->rc != 0) {
		if (!holder && r->rc == -HASP_ETIMEDOUT)
			e->res->err.wait_timeouts++;
		s->round_state = LR_IDLE;
		return;
	}
	s->token = r->lock.token;
	s->round_state = LR_HOLDING;
	if (holder)
		return;
	if (storm(e)) {
		/* Granted before any release: the holder lost its lock. */
		if (!s->told && bench_storm_listening(&e->storm)) {
			s->told = true;
			s->told_ns = now;
		}
		return; /* kept until the clean-up */
	}
	if (!s->told) {
		s->told = true;
		e->round_told++;
		e->round_last_told_ns = now;
	}
	lh_release(s); /* the hand-off chain goes on */
}

void lh_acquire(struct lh_client *s, bool wait)
{
	struct lh_engine *e = s->e;
	const struct bench_config *cfg = e->cfg;
	struct hasp_acquire_opts opts = { .ttl_ms = cfg->lock_ttl_ms, .wait = wait };

	if (wait)
		opts.wait_timeout_ms = wait_bound_ms(cfg);
	lh_name_set(s, bench_key_pick(cfg, NULL, NULL, s->index, e->client_count));
	e->res->ops_started++;
	s->round_state = LR_ACQUIRE;
	s->queued = false;
	if (hasp_client_acquire_async(s->c, s->name, &opts, on_acquired, s, &s->op_id) == 0) {
		op_begin(s);
		return;
	}
	s->round_state = LR_IDLE;
	e->res->err.failed_ops++;
}

bool lh_has_session(const struct lh_client *s)
{
	return hasp_client_session_id(s->c) != 0;
}

/* ---- reads: the holder's view of its queue, a storm watcher's re-read ---- */

static void watcher_reread(struct lh_client *s);

static void on_read(struct hasp_client *c, const struct hasp_result *r, void *arg)
{
	struct lh_client *s = arg;
	struct lh_engine *e = s->e;

	(void)c;
	op_end(s);
	s->reading = false;
	lh_count_status(e, HASP_OP_LOCK_READ, r->rc);
	if (lh_round_is_watcher(e, s->index)) {
		if (s->reread_due) {
			/* A RESYNC came after this read began: it may predate
			 * what was lost. */
			watcher_reread(s);
			return;
		}
		if (r->rc != 0 || !bench_storm_listening(&e->storm))
			return;
		s->read_token = r->info.token;
		s->read_ns = clock_monotonic_ns();
		return;
	}
	if (r->rc != 0 || r->info.token != s->token)
		return;
	if (storm(e))
		e->clients[e->storm_locks + s->index].queued |= r->info.waiter_count >= 1;
	else
		e->round_queued = r->info.waiter_count;
}

/* One read at a time per client. */
static void read_start(struct lh_client *s)
{
	if (hasp_client_lock_read_async(s->c, s->name, on_read, s, NULL) == 0) {
		s->reading = true;
		op_begin(s);
	}
}

/* Holder s reads its lock. */
void lh_read_queue(struct lh_client *s)
{
	if (!s->reading && s->round_state == LR_HOLDING)
		read_start(s);
}

/* ---- watchers' events ---- */

/* What an application does on RESYNC: read what it watches. */
static void watcher_reread(struct lh_client *s)
{
	if (s->reading) {
		s->reread_due = true;
		return;
	}
	s->reread_due = false;
	read_start(s);
}

static void on_progress(struct hasp_client *c, const struct hasp_result *r, void *arg)
{
	struct lh_client *s = arg;

	(void)c;
	op_end(s);
	s->asking = false;
	lh_count_status(s->e, HASP_OP_WATCH_STATUS, r->rc);
}

void lh_watch_progress(struct lh_client *s)
{
	if (s->asking || !lh_has_session(s))
		return;
	if (hasp_client_watch_progress_async(s->c, on_progress, s, NULL) == 0) {
		s->asking = true;
		op_begin(s);
	}
}

static void watcher_event(struct lh_engine *e, struct lh_client *s, const struct hasp_event *ev)
{
	if (ev->type == HASP_EVENT_RESYNC) {
		s->gap_pending = true;
		if (storm(e) && bench_storm_listening(&e->storm))
			watcher_reread(s);
		return;
	}
	bool gap = s->gap_pending;
	s->gap_pending = false;
	if (!storm(e)) {
		if (ev->type == HASP_EVENT_LOCK_RELEASED && e->round_phase == R_RELEASED && !s->told &&
		    ev->revision >= e->clients[0].token) {
			s->told = true;
			e->round_told++;
			e->round_last_told_ns = clock_monotonic_ns();
		}
		return;
	}
	if (!bench_storm_listening(&e->storm))
		return;
	/* Older than this round's grant to the holder: a late copy. */
	if (ev->revision < e->clients[s->index % e->storm_locks].token)
		return;
	s->event_type = ev->type;
	s->token = ev->revision;
	s->gap = gap;
	s->told_ns = clock_monotonic_ns();
}

/* Takes every watcher's buffered events, when the group read anything
 * since the last time. */
static void drain_events(struct lh_engine *e)
{
	struct hasp_client_group_stats gs;
	struct hasp_event ev;

	hasp_client_group_stats_get(e->group, &gs);
	if (gs.rx_datagrams == e->rx_seen)
		return;
	e->rx_seen = gs.rx_datagrams;
	if (!storm(e) && !e->cfg->watchers)
		return; /* burst waiters watch nothing */
	uint32_t first = storm(e) ? 2u * e->storm_locks : 1u;
	for (uint32_t i = first; i < e->client_count; i++) {
		struct lh_client *s = &e->clients[i];
		if (s->c == NULL)
			continue;
		while (hasp_client_next_event(s->c, &ev, 0) == 0)
			watcher_event(e, s, &ev);
	}
}

/* ---- burst ---- */

uint32_t lh_count_round_state(const struct lh_engine *e, uint32_t first, uint8_t state)
{
	uint32_t n = 0;
	for (uint32_t i = first; i < e->client_count; i++)
		n += e->clients[i].round_state == state;
	return n;
}

static bool watchers_ready(const struct lh_engine *e)
{
	for (uint32_t i = 1; i < e->client_count; i++)
		if (e->clients[i].in_flight > 0) /* WATCH not answered yet */
			return false;
	return true;
}

static void burst_step(struct lh_engine *e, uint64_t now)
{
	const struct bench_config *cfg = e->cfg;
	struct lh_client *holder = &e->clients[0];
	uint64_t limit = bench_burst_round_ns(cfg);

	switch (e->round_phase) {
	case R_IDLE:
		if (!e->admitting || holder->round_state != LR_IDLE || holder->in_flight > 0 ||
		    !lh_has_session(holder))
			return;
		if (cfg->watchers && !watchers_ready(e))
			return;
		e->round++;
		e->round_start_ns = now;
		e->round_told = 0;
		e->round_queued = 0;
		for (uint32_t i = 1; i < e->client_count; i++)
			e->clients[i].told = false;
		lh_acquire(holder, cfg->wait);
		e->round_phase = R_HOLDER_ACQUIRE;
		return;
	case R_HOLDER_ACQUIRE:
		if (holder->round_state == LR_IDLE) { /* not granted: the round failed */
			e->round_phase = R_IDLE;
			return;
		}
		if (holder->round_state != LR_HOLDING)
			return;
		if (!cfg->watchers)
			for (uint32_t i = 1; i < e->client_count; i++) {
				struct lh_client *s = &e->clients[i];
				if (s->round_state == LR_IDLE && s->in_flight == 0 && lh_has_session(s))
					lh_acquire(s, true);
			}
		e->round_phase = R_QUEUEING;
		return;
	case R_QUEUEING:
		if (!cfg->watchers && e->round_queued < lh_count_round_state(e, 1, LR_ACQUIRE) &&
		    now - e->round_start_ns < limit) {
			lh_read_queue(holder);
			return;
		}
		if (holder->reading)
			return; /* the release follows the read's answer */
		e->round_release_ns = now;
		lh_release(holder);
		e->round_phase = R_RELEASED;
		return;
	case R_RELEASED: {
		bool timed_out = now - e->round_release_ns >= limit;
		bool all_back = cfg->watchers || lh_count_round_state(e, 0, LR_IDLE) == e->client_count;
		if ((e->round_told < cfg->waiters || !all_back) && !timed_out)
			return;
		if (holder->round_state != LR_IDLE && !timed_out)
			return;
		struct bench_burst_round round = { .start_ns = e->round_start_ns,
						   .release_ns = e->round_release_ns,
						   .last_told_ns = e->round_last_told_ns,
						   .told = e->round_told };
		bench_burst_round_end(cfg, e->res, &round, e->measure_start_ns, now);
		if (e->round_start_ns >= e->measure_start_ns)
			e->last_done_ns = now;
		e->round_phase = R_IDLE;
		return;
	}
	}
}

/* Cancels the waits still queued (a storm that lost a lock, the run's
 * end), once: each completes with -HASP_ECANCELED (or its grant, which is
 * then held until the lock's TTL) through the group's loop. */
void lh_cancel_waits(struct lh_engine *e)
{
	if (e->waits_cancelled)
		return;
	e->waits_cancelled = true;
	for (uint32_t i = 0; i < e->client_count; i++) {
		struct lh_client *s = &e->clients[i];
		if (s->round_state == LR_ACQUIRE && s->in_flight > 0)
			(void)!hasp_client_cancel(s->c, s->op_id); /* -HASP_ENOENT: it just ended */
	}
}

/* ---- the coordinator ---- */

void lh_round_step(struct lh_engine *e, uint64_t now)
{
	drain_events(e);
	if (e->admitting && (now >= e->run_end_ns || e->round >= e->cfg->count_max))
		e->admitting = false;
	if (!e->admitting && !lh_round_busy(e)) {
		lh_cancel_waits(e); /* a timed-out burst round's waiters */
		return;
	}
	if (storm(e))
		lh_storm_step(e, now);
	else
		burst_step(e, now);
}

bool lh_round_busy(const struct lh_engine *e)
{
	return storm(e) ? e->storm.phase != S_IDLE : e->round_phase != R_IDLE;
}

uint64_t lh_round_drain_extra_ns(const struct bench_config *cfg)
{
	if (cfg->workload != BENCH_WL_STORM)
		return 0;
	return STORM_SETUP_NS + bench_storm_verdict_ns(cfg) + (uint64_t)cfg->window_ms * 1000000ull;
}

uint64_t lh_round_wake(const struct lh_engine *e)
{
	return storm(e) ? bench_storm_wake(&e->storm) : UINT64_MAX;
}

void lh_round_finish(struct lh_engine *e)
{
	for (uint32_t i = 0; i < e->client_count; i++)
		e->res->err.unfinished += e->clients[i].round_state == LR_HOLDING;
}
