/*
 * hasp-bench's release storm (--workload storm, docs/PERFORMANCE.md
 * "Release storm"): L locks, each with a holder, a waiter and a watcher
 * (3L sessions: client i holds lock i, L + i waits for it, 2L + i watches
 * it). A round:
 *
 *   S_HOLDERS   every holder ACQUIREs (TRY) its lock and keeps it;
 *   S_WAITERS   every waiter ACQUIREs (WAIT) the same lock: QUEUED;
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
 * The verdict, per lock: the waiter was granted (a reply, its
 * LOCK_GRANTED event, or a LOCK_READ after silence) with a token greater
 * than the holder's, and the watcher's last event of the round is that
 * grant: LOCK_GRANTED with the waiter's token. A release and the hand-off
 * to the head waiter are one command (docs/STATE_MACHINE.md), so with a
 * waiter queued the grant is always the lock's last state: a watcher whose
 * last event is the LOCK_RELEASED was not told the end. An event that
 * carries the gap marker (prev (0, 1)) still reports the newest state of
 * the one lock this watcher watches, since the node replaces a held event
 * with the newer one (docs/PROTOCOL.md "The watch event set"): it counts
 * as told and, separately, as coalesced.
 *
 * Events are not acknowledged, and the last event of the round, lost, is
 * followed by none whose prev would show the gap. So a watcher not told a
 * second after the window (STORM_PROGRESS_NS, and every second after) asks
 * the leader which event it sent it last (WATCH_STATUS, what libhasp's
 * hasp_client_watch_progress asks); when that is not the last event it
 * received, it lost one, and it re-reads the lock (LOCK_READ), as an
 * application does on libhasp's RESYNC. A re-read that shows the waiter's
 * token counts as told and, separately, as resynced. A watcher is never
 * "resolved" by a read without that warning: the read would show the state
 * but hide that an event was lost, which is what the storm is to find out.
 * A round with any lock missing ends the run (the engine then drains and
 * closes), and hasp-bench exits 4.
 */
#include "tools/bench_engine_impl.h"

#include "common/assert.h"
#include "hasp/wire.h"

static uint32_t storm_inflight(const struct bench_engine *e, uint32_t first, uint8_t state)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < e->storm.next; i++)
		n += e->clients[first + i].state == state;
	return n;
}

static bool storm_round_start(void *engine)
{
	struct bench_engine *e = engine;
	uint32_t L = e->storm_locks;

	for (uint32_t i = 0; i < 2u * L; i++) {
		uint8_t s = e->clients[i].state;
		if (s == C_ACQUIRE || s == C_WAITING || s == C_HOLDING || s == C_RELEASE)
			return false; /* the last round's releases are still answering */
	}
	/* A session that did not open within start-up (C_NEW, C_OPENING)
	 * takes no part: its lock counts as missing. */
	if (!bench_engine_watchers_current(e, 2u * L, 3u * L))
		return false;
	e->round++;
	for (uint32_t i = 0; i < e->client_count; i++) {
		struct client *c = &e->clients[i];
		c->told = false;
		c->gap = false;
		c->event_type = 0;
		c->told_ns = 0;
		c->read_token = 0;
		c->read_ns = 0;
	}
	return true;
}

/* Starts holders (first 0) or waiters (first L) up to the in-flight bound;
 * true when all were started and none is still being answered. */
static bool storm_start_some(struct bench_engine *e, uint32_t first)
{
	uint32_t inflight = storm_inflight(e, first, C_ACQUIRE);

	while (e->storm.next < e->storm_locks && inflight < OPENS_INFLIGHT_MAX) {
		uint32_t i = e->storm.next++;
		struct client *c = &e->clients[first + i];
		if (c->state != C_IDLE)
			continue; /* never opened: its lock counts as missing */
		/* A waiter queues only behind a holder that holds. */
		if (first > 0 && e->clients[i].state != C_HOLDING)
			continue;
		c->hold = true;
		bench_session_start_op(e, first + i, e->now);
		inflight++;
	}
	return e->storm.next == e->storm_locks && inflight == 0;
}

static bool storm_holders(void *engine)
{
	return storm_start_some(engine, 0);
}

/* Watchers register with the leader before the release they are to be
 * told of (the holders' requests may have found a new one). */
static bool storm_waiters(void *engine)
{
	struct bench_engine *e = engine;
	uint32_t L = e->storm_locks;
	bool queued = storm_start_some(e, L);
	return bench_engine_watchers_current(e, 2u * L, 3u * L) && queued;
}

static void storm_release(void *engine, uint32_t i)
{
	struct bench_engine *e = engine;
	struct client *c = &e->clients[i];

	if (c->state != C_HOLDING)
		return;
	c->state = C_RELEASE;
	/* With a background keepalive in flight the RELEASE follows its
	 * answer (start_pending_request). */
	if (c->opcode == 0)
		bench_session_request(e, i, HASP_OP_RELEASE);
}

/* What lock i's three clients saw this round. */
static void storm_lock_view(void *engine, uint32_t i, struct bench_storm_lock *v)
{
	const struct bench_engine *e = engine;
	const struct client *holder = &e->clients[i];
	const struct client *waiter = &e->clients[e->storm_locks + i];
	const struct client *watcher = &e->clients[2u * e->storm_locks + i];

	*v = (struct bench_storm_lock){ .holder_released = holder->told,
					.holder_token = holder->token,
					.waiter_granted = waiter->told,
					.waiter_token = waiter->token,
					.waiter_ns = waiter->told_ns,
					.watcher_type = watcher->event_type,
					.watcher_token = watcher->token,
					.watcher_gap = watcher->gap,
					.watcher_ns = watcher->told_ns,
					.watcher_read_token = watcher->read_token,
					.watcher_read_ns = watcher->read_ns };
}

/* Lock i's watcher asks the leader which event it sent it last, when it has
 * no request in flight (a keepalive: asked again a period later). */
static void storm_progress(void *engine, uint32_t i)
{
	struct bench_engine *e = engine;
	uint32_t index = 2u * e->storm_locks + i;
	const struct client *c = &e->clients[index];

	if (c->state == C_WATCHING && c->opcode == 0)
		bench_session_request(e, index, HASP_OP_WATCH_STATUS);
}

/* The waiters give back what they were granted; true when none is left. */
static bool storm_cleanup(void *engine)
{
	struct bench_engine *e = engine;
	uint32_t L = e->storm_locks;
	uint32_t inflight = 0;
	bool done = true;

	for (uint32_t i = L; i < 2u * L; i++)
		inflight += e->clients[i].state == C_RELEASE;
	for (uint32_t i = L; i < 2u * L; i++) {
		struct client *c = &e->clients[i];
		if (c->state == C_RELEASE || c->state == C_WAITING || c->state == C_ACQUIRE)
			done = false;
		if (c->state != C_HOLDING)
			continue;
		done = false;
		if (inflight >= OPENS_INFLIGHT_MAX)
			continue;
		c->state = C_RELEASE;
		if (c->opcode == 0)
			bench_session_request(e, i, HASP_OP_RELEASE);
		inflight++;
	}
	return done;
}

static void storm_lost(void *engine)
{
	struct bench_engine *e = engine;
	e->admitting = false;
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

void bench_storm_init(struct bench_engine *e)
{
	e->storm = (struct bench_storm_round){ .cfg = e->cfg, .res = e->res, .ops = &storm_ops,
					       .engine = e, .locks = e->storm_locks };
}

void bench_storm_step(struct bench_engine *e)
{
	if (bench_storm_advance(&e->storm, e->admitting, e->measure_start_ns, e->now))
		e->last_done_ns = e->now;
}

void bench_storm_granted(struct bench_engine *e, uint32_t index)
{
	struct client *c = &e->clients[index];

	if (storm_role(e, index) != STORM_WAITER || c->told)
		return;
	if (!bench_storm_listening(&e->storm))
		return; /* granted before any release: the holder lost its lock */
	c->told = true;
	c->told_ns = e->now;
}

void bench_storm_watch_status(struct bench_engine *e, uint32_t index, uint16_t status,
			      const struct hasp_wire_watch_status *st)
{
	struct client *c = &e->clients[index];

	/* (0, 0): this leader sent it nothing (a new one: the watch was
	 * registered again, and its chain starts over). Else the last event
	 * sent must be the last received: the libhasp engine's rule, which
	 * also knows older events it received (client/exchange.c), stricter
	 * here and never laxer: a mismatch only costs a read. */
	if (status != HASP_STATUS_OK || (st->last_event_index == 0 && st->last_event_sub == 0) ||
	    (st->last_event_index == c->event_index && st->last_event_sub == c->event_sub))
		return;
	bench_session_request(e, index, HASP_OP_LOCK_READ);
}

void bench_storm_watch_read(struct bench_engine *e, uint32_t index, uint16_t status,
			    const struct hasp_wire_lock_info *info)
{
	struct client *c = &e->clients[index];

	if (status != HASP_STATUS_OK || !bench_storm_listening(&e->storm))
		return;
	c->read_token = info->token;
	c->read_ns = e->now;
}

void bench_storm_watch_event(struct bench_engine *e, uint32_t index,
			     const struct hasp_wire_event *ev)
{
	struct client *c = &e->clients[index];

	if (!bench_storm_listening(&e->storm))
		return;
	/* Older than this round's grant to the holder: a late copy. */
	if (ev->revision < storm_holder_of(e, index)->token)
		return;
	c->event_type = ev->type;
	c->token = ev->revision;
	c->gap = ev->prev_index == 0 && ev->prev_sub == HASP_WIRE_EVENT_PREV_GAP;
	c->told_ns = e->now;
}
