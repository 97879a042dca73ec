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
	bench_hist_record(res->lat[BENCH_LAT_OP], now_ns - round->start_ns);
	if (round->told > 0)
		bench_hist_record(res->lat[BENCH_LAT_NOTIFY], round->last_told_ns - round->release_ns);
}

uint64_t bench_storm_verdict_ns(const struct bench_config *cfg)
{
	uint64_t deadline_ns = (uint64_t)cfg->request_deadline_ms * 1000000ull;
	return deadline_ns > STORM_VERDICT_NS ? deadline_ns : STORM_VERDICT_NS;
}

uint32_t bench_storm_due(const struct bench_config *cfg, uint32_t locks, uint64_t since_ns)
{
	uint64_t window_ns = (uint64_t)cfg->window_ms * 1000000ull;
	if (since_ns >= window_ns)
		return locks;
	uint32_t due = (uint32_t)((unsigned __int128)since_ns * locks / window_ns) + 1u;
	return due > locks ? locks : due;
}

uint64_t bench_storm_due_at(const struct bench_config *cfg, uint32_t locks, uint64_t release_ns,
			    uint32_t next)
{
	uint64_t window_ns = (uint64_t)cfg->window_ms * 1000000ull;
	return release_ns + (uint64_t)((unsigned __int128)window_ns * next / locks);
}

void bench_storm_tally_add(struct bench_storm_tally *t, const struct bench_storm_lock *lock)
{
	t->locks++;
	bool granted = lock->waiter_granted && lock->holder_released &&
		       lock->waiter_token > lock->holder_token;
	if (!granted)
		return;
	t->granted++;
	if (lock->waiter_ns > t->grant_last_ns)
		t->grant_last_ns = lock->waiter_ns;
	if (lock->watcher_type != HASP_EVENT_LOCK_GRANTED || lock->watcher_token != lock->waiter_token)
		return;
	t->told++;
	t->coalesced += lock->watcher_gap;
	if (lock->watcher_ns > t->told_last_ns)
		t->told_last_ns = lock->watcher_ns;
}

bool bench_storm_verdict_due(const struct bench_config *cfg, const struct bench_storm_tally *t,
			     uint64_t release_ns, uint64_t now_ns)
{
	if (t->granted == t->locks && t->told == t->locks)
		return true;
	uint64_t window_ns = (uint64_t)cfg->window_ms * 1000000ull;
	return now_ns - release_ns >= window_ns + bench_storm_verdict_ns(cfg);
}

bool bench_storm_verdict(struct bench_result *res, const struct bench_storm_tally *t,
			 bool measured, uint64_t round_start_ns, uint64_t release_ns,
			 uint64_t now_ns)
{
	res->storm_granted += t->granted;
	res->storm_told += t->told;
	res->storm_coalesced += t->coalesced;
	res->err.storm_waiters_missing += t->locks - t->granted;
	res->err.storm_watchers_missing += t->locks - t->told;
	if (measured) {
		res->ops++;
		bench_hist_record(res->lat[BENCH_LAT_OP], now_ns - round_start_ns);
		if (t->granted > 0)
			bench_hist_record(res->lat[BENCH_LAT_GRANT_LAST], t->grant_last_ns - release_ns);
		if (t->told > 0)
			bench_hist_record(res->lat[BENCH_LAT_NOTIFY], t->told_last_ns - release_ns);
	}
	return t->granted < t->locks || t->told < t->locks;
}
