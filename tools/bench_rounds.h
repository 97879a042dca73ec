/*
 * What the release-burst and release-storm rounds are, whichever engine
 * runs them (tools/bench_engine.c and tools/bench_storm.c on the own wire
 * engine, tools/bench_libhasp_rounds.c on libhasp's async core): their time
 * limits, the storm's release schedule, and how a round is judged and
 * measured. The engines only differ in how they learn what happened (a
 * reply or event decoded by hand, or a libhasp completion or event), so a
 * run compares across engines: same rounds, same latency definitions,
 * same counters.
 */
#ifndef HASP_TOOLS_BENCH_ROUNDS_H
#define HASP_TOOLS_BENCH_ROUNDS_H

#include <stdbool.h>
#include <stdint.h>

#include "tools/bench_engine.h"

#define BURST_ROUND_NS 2000000000ull   /* a burst round's base time limit */
#define STORM_SETUP_NS 30000000000ull  /* storm: holders acquire, waiters queue, at most */
#define STORM_VERDICT_NS 5000000000ull /* storm: after the window, every lock told (at least) */

/* How long a burst round may take: 2 s, plus 100 ms per waiter, because a
 * FIFO hand-off chain costs one committed command per waiter (watchers are
 * told in parallel: 2 s). */
uint64_t bench_burst_round_ns(const struct bench_config *cfg);

/* One burst round as its coordinator saw it. */
struct bench_burst_round {
	uint64_t start_ns;     /* the holder's ACQUIRE started */
	uint64_t release_ns;   /* the holder's RELEASE started */
	uint64_t last_told_ns; /* the last waiter granted / watcher told */
	uint32_t told;         /* listeners told in this round */
};

/* The round ended at now_ns (all told, or its time is up): counts the
 * listeners not told and, when the round started in the measured window,
 * one operation (round start to now) and its notify latency (release to
 * the last listener told). */
void bench_burst_round_end(const struct bench_config *cfg, struct bench_result *res,
			   const struct bench_burst_round *round, uint64_t measure_start_ns,
			   uint64_t now_ns);

/* How long after the window the storm verdict waits for the last lock: 5 s,
 * or the request deadline (--deadline) when longer, since a request is only
 * lost once given up. */
uint64_t bench_storm_verdict_ns(const struct bench_config *cfg);

/* The storm's holders release evenly over the window: how many of `locks`
 * are due `since_ns` after the window opened (at least 1, the first at
 * once), and when release number `next` is due. */
uint32_t bench_storm_due(const struct bench_config *cfg, uint32_t locks, uint64_t since_ns);
uint64_t bench_storm_due_at(const struct bench_config *cfg, uint32_t locks, uint64_t release_ns,
			    uint32_t next);

/* One lock of a storm round: what its holder, waiter and watcher saw. */
struct bench_storm_lock {
	bool holder_released;  /* the holder's RELEASE was answered OK */
	uint64_t holder_token; /* the holder's grant */
	bool waiter_granted;   /* after the window opened */
	uint64_t waiter_token;
	uint64_t waiter_ns;    /* when the grant reached the waiter */
	uint8_t watcher_type;  /* the watcher's last event of the round (0: none) */
	uint64_t watcher_token;
	bool watcher_gap;      /* that event followed lost or held-back events */
	uint64_t watcher_ns;
};

/* The round's tally, lock by lock (bench_storm_tally_add). */
struct bench_storm_tally {
	uint32_t locks, granted, told, coalesced;
	uint64_t grant_last_ns, told_last_ns;
};

/* The verdict of one lock: its waiter was granted with a token greater
 * than its holder's, and its watcher's last event is that grant (a
 * release hands off to the head waiter in the same command, so the grant
 * is the lock's last state: see tools/bench_storm.c). */
void bench_storm_tally_add(struct bench_storm_tally *t, const struct bench_storm_lock *lock);

/* Whether the verdict is due at now_ns: every lock complete, or the
 * verdict's time after the window is up. */
bool bench_storm_verdict_due(const struct bench_config *cfg, const struct bench_storm_tally *t,
			     uint64_t release_ns, uint64_t now_ns);

/* Counts the round into res and, when it started in the measured window,
 * one operation (round start to now), the last grant and the last watcher
 * told (from the window's start). Returns true when a lock was missing:
 * the run ends (hasp-bench exits 4). */
bool bench_storm_verdict(struct bench_result *res, const struct bench_storm_tally *t,
			 bool measured, uint64_t round_start_ns, uint64_t release_ns,
			 uint64_t now_ns);

#endif
