/*
 * hasp-bench's release storm (--workload storm, docs/PERFORMANCE.md
 * "Release storm"): L locks, each with a holder, a waiter and a watcher
 * (3L sessions: client i holds lock i, L + i waits for it, 2L + i watches
 * it). A round (enum bench_storm_phase, tools/bench_rounds.h):
 *
 *   S_HOLDERS   every holder ACQUIREs (TRY) its lock and keeps it;
 *   S_WAITERS   every waiter ACQUIREs (WAIT) the same lock: queued;
 *   S_RELEASING the holders RELEASE, spread evenly over cfg->window_ms;
 *   S_RELEASED  until every waiter is granted and every watcher told, or
 *               bench_storm_verdict_ns() after the window: the verdict;
 *   S_CLEANUP   the waiters release what they were granted (after the
 *               last round too, so the run ends with nothing held).
 *
 * The set-up phases keep at most OPENS_INFLIGHT_MAX requests in flight, as
 * the session opens do, so the node is not flooded before the storm; the
 * storm itself is the window. Watchers registered their WATCH when their
 * session opened and keep it across rounds.
 *
 * The verdict (tools/bench_rounds.c), per lock: the waiter was granted
 * with a token greater than the holder's, and the watcher's last event of
 * the round is that grant: LOCK_GRANTED with the waiter's token. A release
 * and the hand-off to the head waiter are one command
 * (docs/STATE_MACHINE.md), so with a waiter queued the grant is always the
 * lock's last state: a watcher whose last event is the LOCK_RELEASED was
 * not told the end. An event after a RESYNC (the node's gap marker: it
 * replaced a held event with the newer one, docs/PROTOCOL.md "The watch
 * event set") still reports the newest state of the one lock this watcher
 * watches: it counts as told and, separately, as coalesced.
 *
 * Events are not acknowledged, and the last event of the round, lost, is
 * followed by none whose chain would show the gap. So a watcher not told a
 * second after the window (STORM_PROGRESS_NS, and every second after)
 * asks the leader (hasp_client_watch_progress_async); a RESYNC then says
 * it lost one, and it re-reads the lock, as an application does on
 * libhasp's RESYNC. A re-read that shows the waiter's token counts as told
 * and, separately, as resynced. A watcher is never "resolved" by a read
 * without that warning: the read would show the state but hide that an
 * event was lost, which is what the storm is to find out. A round with any
 * lock missing ends the run (the engine then drains and closes), and
 * hasp-bench exits 4.
 *
 * These are the steps the round asks of the engine, through libhasp's
 * public API (tools/bench_libhasp_rounds.c has the rest).
 */
#include "tools/bench_libhasp_impl.h"
#include "tools/bench_rounds.h"

static struct lh_client *holder_of(struct lh_engine *e, uint32_t i)
{
	return &e->clients[i];
}

static struct lh_client *waiter_of(struct lh_engine *e, uint32_t i)
{
	return &e->clients[e->storm_locks + i];
}

static struct lh_client *watcher_of(struct lh_engine *e, uint32_t i)
{
	return &e->clients[2u * e->storm_locks + i];
}

static bool storm_round_start(void *engine)
{
	struct lh_engine *e = engine;
	uint32_t L = e->storm_locks;

	for (uint32_t i = 0; i < 2u * L; i++)
		if (e->clients[i].round_state != LR_IDLE || e->clients[i].in_flight > 0)
			return false; /* the last round's releases are still answering */
	for (uint32_t i = 2u * L; i < 3u * L; i++)
		if (e->clients[i].in_flight > 0)
			return false; /* a WATCH not answered yet */
	e->round++;
	for (uint32_t i = 0; i < e->client_count; i++) {
		struct lh_client *s = &e->clients[i];
		s->told = false;
		s->gap = false;
		s->gap_pending = false;
		s->event_type = 0;
		s->told_ns = 0;
		s->queued = false;
		s->reread_due = false;
		s->read_token = 0;
		s->read_ns = 0;
	}
	return true;
}

/* Holders take their locks, up to OPENS_INFLIGHT_MAX at once; true when all
 * were started and answered. A session that did not open takes no part:
 * its lock counts as missing. */
static bool storm_holders(void *engine)
{
	struct lh_engine *e = engine;
	uint32_t inflight = lh_count_round_state(e, 0, LR_ACQUIRE); /* only holders acquire now */

	while (e->storm.next < e->storm_locks && inflight < OPENS_INFLIGHT_MAX) {
		struct lh_client *s = holder_of(e, e->storm.next++);
		if (!lh_has_session(s))
			continue;
		lh_acquire(s, false);
		inflight += s->round_state == LR_ACQUIRE;
	}
	return e->storm.next == e->storm_locks && inflight == 0;
}

/* Waiters join their holder's queue, up to OPENS_INFLIGHT_MAX not yet seen
 * queued at once; each holder reads its lock until its waiter is there.
 * True when all were started and seen queued. (libhasp registers its
 * watches again after a leader change itself.) */
static bool storm_waiters(void *engine)
{
	struct lh_engine *e = engine;
	uint32_t unconfirmed = 0;

	for (uint32_t i = 0; i < e->storm.next; i++) {
		struct lh_client *w = waiter_of(e, i);
		if (w->round_state != LR_ACQUIRE || w->queued)
			continue;
		unconfirmed++;
		lh_read_queue(holder_of(e, i));
	}
	while (e->storm.next < e->storm_locks && unconfirmed < OPENS_INFLIGHT_MAX) {
		uint32_t i = e->storm.next++;
		struct lh_client *w = waiter_of(e, i);
		/* A waiter queues only behind a holder that holds. */
		if (!lh_has_session(w) || holder_of(e, i)->round_state != LR_HOLDING)
			continue;
		lh_acquire(w, true);
		if (w->round_state != LR_ACQUIRE)
			continue;
		unconfirmed++;
		lh_read_queue(holder_of(e, i));
	}
	return e->storm.next == e->storm_locks && unconfirmed == 0;
}

static void storm_release(void *engine, uint32_t i)
{
	struct lh_client *h = holder_of(engine, i);

	if (h->round_state == LR_HOLDING)
		lh_release(h);
}

static void storm_lock_view(void *engine, uint32_t i, struct bench_storm_lock *v)
{
	struct lh_engine *e = engine;
	const struct lh_client *h = holder_of(e, i), *w = waiter_of(e, i), *x = watcher_of(e, i);

	*v = (struct bench_storm_lock){ .holder_released = h->told,
					.holder_token = h->token,
					.waiter_granted = w->told,
					.waiter_token = w->token,
					.waiter_ns = w->told_ns,
					.watcher_type = x->event_type,
					.watcher_token = x->token,
					.watcher_gap = x->gap,
					.watcher_ns = x->told_ns,
					.watcher_read_token = x->read_token,
					.watcher_read_ns = x->read_ns };
}

/* The waiters give back what they were granted, OPENS_INFLIGHT_MAX at once;
 * true when none is left. */
static bool storm_cleanup(void *engine)
{
	struct lh_engine *e = engine;
	uint32_t L = e->storm_locks;
	uint32_t inflight = lh_count_round_state(e, L, LR_RELEASE);
	bool done = true;

	for (uint32_t i = 0; i < L; i++) {
		struct lh_client *w = waiter_of(e, i);
		if (w->round_state != LR_IDLE)
			done = false;
		if (w->round_state != LR_HOLDING || inflight >= OPENS_INFLIGHT_MAX)
			continue;
		lh_release(w);
		inflight++;
	}
	return done;
}

/* A round lost a lock: the run ends, the queued waits are cancelled, then
 * every session closed. */
static void storm_lost(void *engine)
{
	struct lh_engine *e = engine;

	e->admitting = false;
	lh_cancel_waits(e);
}

static void storm_progress(void *engine, uint32_t i)
{
	lh_watch_progress(watcher_of(engine, i));
}

static const struct bench_storm_ops storm_ops = {
	.start = storm_round_start,
	.holders = storm_holders,
	.waiters = storm_waiters,
	.release = storm_release,
	.view = storm_lock_view,
	.cleanup = storm_cleanup,
	.lost = storm_lost,
	.progress = storm_progress,
};

void lh_storm_init(struct lh_engine *e)
{
	e->storm = (struct bench_storm_round){ .cfg = e->cfg, .res = e->res, .ops = &storm_ops,
					       .engine = e, .locks = e->storm_locks };
}

void lh_storm_step(struct lh_engine *e, uint64_t now)
{
	if (bench_storm_advance(&e->storm, e->admitting, e->measure_start_ns, now))
		e->last_done_ns = now;
}
