/*
 * Release-burst and release-storm rounds, engine-independent
 * (tools/bench_rounds.h).
 */
#include "tools/bench_rounds.h"

#include "hasp/types.h"
#include "tools/bench_hist.h"

uint64_t bench_burst_round_ns(const struct bench_config *cfg)
{
	if (cfg->watchers)
		return BURST_ROUND_NS;
	return BURST_ROUND_NS + (uint64_t)cfg->waiters * 100000000ull;
}

void bench_burst_round_end(const struct bench_config *cfg, struct bench_result *res,
			   const struct bench_burst_round *round, uint64_t measure_start_ns,
			   uint64_t now_ns)
{
	res->err.notify_missing += cfg->waiters - round->told;
	if (round->start_ns < measure_start_ns)
		return;
	res->ops++;
	bench_record(cfg, res, BENCH_LAT_OP, round->start_ns, now_ns);
	if (round->told > 0)
		bench_record(cfg, res, BENCH_LAT_NOTIFY, round->release_ns, round->last_told_ns);
}

uint64_t bench_storm_verdict_ns(const struct bench_config *cfg)
{
	uint64_t deadline_ns = (uint64_t)cfg->request_deadline_ms * 1000000ull;
	return deadline_ns > STORM_VERDICT_NS ? deadline_ns : STORM_VERDICT_NS;
}

/* The round's tally, lock by lock. */
struct bench_storm_tally {
	uint32_t locks, granted, told, coalesced, resynced;
	uint64_t grant_last_ns, told_last_ns;
};

/* The holders release evenly over the window: how many of `locks` are due
 * `since_ns` after the window opened (at least 1, the first at once). */
static uint32_t storm_due(const struct bench_config *cfg, uint32_t locks, uint64_t since_ns)
{
	uint64_t window_ns = (uint64_t)cfg->window_ms * 1000000ull;
	if (since_ns >= window_ns)
		return locks;
	uint32_t due = (uint32_t)((unsigned __int128)since_ns * locks / window_ns) + 1u;
	return due > locks ? locks : due;
}

uint64_t bench_storm_wake(const struct bench_storm_round *r)
{
	if (r->phase != S_RELEASING)
		return UINT64_MAX;
	uint64_t window_ns = (uint64_t)r->cfg->window_ms * 1000000ull;
	return r->release_ns + (uint64_t)((unsigned __int128)window_ns * r->next / r->locks);
}

bool bench_storm_listening(const struct bench_storm_round *r)
{
	return r->phase == S_RELEASING || r->phase == S_RELEASED;
}

/* The verdict of one lock: its waiter was granted with a token greater
 * than its holder's, and its watcher's last event is that grant (a
 * release hands off to the head waiter in the same command, so the grant
 * is the lock's last state: see tools/bench_libhasp_storm.c). */
static void tally_add(struct bench_storm_tally *t, const struct bench_storm_lock *lock)
{
	t->locks++;
	bool granted = lock->waiter_granted && lock->holder_released &&
		       lock->waiter_token > lock->holder_token;
	if (!granted)
		return;
	t->granted++;
	if (lock->waiter_ns > t->grant_last_ns)
		t->grant_last_ns = lock->waiter_ns;
	uint64_t told_ns;
	if (lock->watcher_type == HASP_EVENT_LOCK_GRANTED && lock->watcher_token == lock->waiter_token) {
		t->coalesced += lock->watcher_gap;
		told_ns = lock->watcher_ns;
	} else if (lock->watcher_read_token == lock->waiter_token) {
		/* Told that it lost events, then read the last state: the
		 * loss was not silent, which is what the storm checks. A read
		 * without that warning is never made (it would hide a loss). */
		t->resynced++;
		told_ns = lock->watcher_read_ns;
	} else {
		return;
	}
	t->told++;
	if (told_ns > t->told_last_ns)
		t->told_last_ns = told_ns;
}

/* Watchers of granted locks not told yet: each asks the leader which event
 * it sent last, once per STORM_PROGRESS_NS from that long after the window
 * on. The answer turns a lost last event into a RESYNC, and the watcher
 * re-reads (tally_add). */
static void progress_due(struct bench_storm_round *r, uint64_t now)
{
	uint64_t window_ns = (uint64_t)r->cfg->window_ms * 1000000ull;

	if (r->ops->progress == NULL || now - r->release_ns < window_ns + STORM_PROGRESS_NS ||
	    now < r->progress_ns)
		return;
	r->progress_ns = now + STORM_PROGRESS_NS;
	for (uint32_t i = 0; i < r->locks; i++) {
		struct bench_storm_tally one = { 0 };
		struct bench_storm_lock v;
		r->ops->view(r->engine, i, &v);
		tally_add(&one, &v);
		if (one.granted == 1 && one.told == 0)
			r->ops->progress(r->engine, i);
	}
}

/* Every lock complete, or the verdict's time after the window is up. */
static bool verdict_due(const struct bench_config *cfg, const struct bench_storm_tally *t,
			uint64_t release_ns, uint64_t now_ns)
{
	if (t->granted == t->locks && t->told == t->locks)
		return true;
	uint64_t window_ns = (uint64_t)cfg->window_ms * 1000000ull;
	return now_ns - release_ns >= window_ns + bench_storm_verdict_ns(cfg);
}

/* Counts the round into res and, when measured, one operation (round
 * start to now), the last grant and the last watcher told (from the
 * window's start). True when a lock was missing. */
static bool verdict(const struct bench_config *cfg, struct bench_result *res,
		    const struct bench_storm_tally *t, bool measured, uint64_t round_start_ns,
		    uint64_t release_ns, uint64_t now_ns)
{
	res->storm_granted += t->granted;
	res->storm_told += t->told;
	res->storm_coalesced += t->coalesced;
	res->storm_resynced += t->resynced;
	res->err.storm_waiters_missing += t->locks - t->granted;
	res->err.storm_watchers_missing += t->locks - t->told;
	if (measured) {
		res->ops++;
		bench_record(cfg, res, BENCH_LAT_OP, round_start_ns, now_ns);
		if (t->granted > 0)
			bench_record(cfg, res, BENCH_LAT_GRANT_LAST, release_ns, t->grant_last_ns);
		if (t->told > 0)
			bench_record(cfg, res, BENCH_LAT_NOTIFY, release_ns, t->told_last_ns);
	}
	return t->granted < t->locks || t->told < t->locks;
}

static void release_due(struct bench_storm_round *r, uint64_t now)
{
	uint32_t due = storm_due(r->cfg, r->locks, now - r->release_ns);

	while (r->next < due)
		r->ops->release(r->engine, r->next++);
	if (r->next == r->locks)
		r->phase = S_RELEASED;
}

/* The verdict once due; returns false while it is worth waiting. */
static bool judge(struct bench_storm_round *r, uint64_t measure_start_ns, uint64_t now,
		  bool *measured, bool *lost)
{
	struct bench_storm_tally t = { 0 };

	for (uint32_t i = 0; i < r->locks; i++) {
		struct bench_storm_lock v;
		r->ops->view(r->engine, i, &v);
		tally_add(&t, &v);
	}
	if (!verdict_due(r->cfg, &t, r->release_ns, now)) {
		progress_due(r, now);
		return false;
	}
	*measured = r->start_ns >= measure_start_ns;
	*lost = verdict(r->cfg, r->res, &t, *measured, r->start_ns, r->release_ns, now);
	return true;
}

bool bench_storm_advance(struct bench_storm_round *r, bool admitting, uint64_t measure_start_ns,
			 uint64_t now)
{
	bool measured = false, lost = false;
	bool late = now - r->start_ns >= STORM_SETUP_NS; /* set-up: holders, then waiters */

	if (r->phase == S_RELEASING) {
		release_due(r, now); /* to the nanosecond (bench_storm_wake) */
		return false;
	}
	if (now < r->scan_ns)
		return false;
	r->scan_ns = now + STORM_SCAN_NS;
	switch (r->phase) {
	case S_IDLE:
		if (!admitting || !r->ops->start(r->engine))
			return false;
		r->start_ns = now;
		r->next = 0;
		r->phase = S_HOLDERS;
		return false;
	case S_HOLDERS:
		if (r->ops->holders(r->engine) || late) {
			r->next = 0;
			r->phase = S_WAITERS;
		}
		return false;
	case S_WAITERS:
		if (r->ops->waiters(r->engine) || late) {
			r->next = 0;
			r->release_ns = now;
			r->progress_ns = 0;
			r->phase = S_RELEASING;
			release_due(r, now);
		}
		return false;
	case S_RELEASED:
		if (!judge(r, measure_start_ns, now, &measured, &lost))
			return false;
		/* A storm that lost a lock ends the run; the engine drains and
		 * closes every session, queued waiters with them. Otherwise
		 * the waiters give back their grants, after the last round
		 * too, so the run ends with nothing held. */
		r->phase = lost ? S_IDLE : S_CLEANUP;
		if (lost)
			r->ops->lost(r->engine);
		return measured;
	case S_CLEANUP:
		if (r->ops->cleanup(r->engine))
			r->phase = S_IDLE;
		return false;
	}
	return false;
}
