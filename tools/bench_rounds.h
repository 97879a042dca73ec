/*
 * What the release-burst and release-storm rounds are
 * (tools/bench_libhasp_rounds.c and tools/bench_libhasp_storm.c run them
 * on libhasp's async core): their time limits, the storm's release
 * schedule, and how a round is judged and measured. The retired wire
 * engine ran the same rounds from the same code, so today's runs compare
 * with the recorded ones: same rounds, same latency definitions, same
 * counters.
 */
#ifndef HASP_TOOLS_BENCH_ROUNDS_H
#define HASP_TOOLS_BENCH_ROUNDS_H

#include <stdbool.h>
#include <stdint.h>

#include "tools/bench_engine.h"

#define BURST_ROUND_NS 2000000000ull   /* a burst round's base time limit */
#define STORM_SETUP_NS 30000000000ull  /* storm: holders acquire, waiters queue, at most */
#define STORM_VERDICT_NS 5000000000ull /* storm: after the window, every lock told (at least) */
#define STORM_SCAN_NS 1000000ull       /* storm: the O(L) set-up and verdict scans, at most this often */
/* storm: a watcher not told this long after the window, and every such
 * period after, asks the leader which event it sent last (WATCH_STATUS):
 * the last event of the round, lost, is followed by none that would show
 * the gap */
#define STORM_PROGRESS_NS 1000000000ull

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
	/* The watcher was told it lost events (libhasp's RESYNC, or the
	 * leader's WATCH_STATUS naming an event it did not get) and re-read
	 * the lock: the holder's token it read (0: no such re-read), when. */
	uint64_t watcher_read_token;
	uint64_t watcher_read_ns;
};

/* The phases of a storm round (tools/bench_libhasp_storm.c has the story):
 *   S_HOLDERS   every holder ACQUIREs (TRY) its lock and keeps it;
 *   S_WAITERS   every waiter ACQUIREs (WAIT) the same lock: queued;
 *   S_RELEASING the holders RELEASE, spread evenly over cfg->window_ms;
 *   S_RELEASED  until every lock is complete, or the verdict's time: judged;
 *   S_CLEANUP   the waiters release what they were granted. */
enum bench_storm_phase { S_IDLE, S_HOLDERS, S_WAITERS, S_RELEASING, S_RELEASED, S_CLEANUP };

/* What an engine does at each step of a storm round; `engine` is its own. */
struct bench_storm_ops {
	/* Every client ready for a new round (no request of the last one
	 * still answering, watchers registered): reset them, true. */
	bool (*start)(void *engine);
	/* Start holders (or waiters) from the round's `next` on, at most
	 * OPENS_INFLIGHT_MAX at once; true when all were started and hold
	 * (are queued, their watchers registered with the current leader). */
	bool (*holders)(void *engine);
	bool (*waiters)(void *engine);
	/* The holder of lock `lock` releases it, if it holds it. */
	void (*release)(void *engine, uint32_t lock);
	/* What lock `lock`'s three clients saw this round. */
	void (*view)(void *engine, uint32_t lock, struct bench_storm_lock *v);
	/* The waiters give back what they hold; true when none holds or asks. */
	bool (*cleanup)(void *engine);
	/* A round lost a lock: the run ends (the engine stops admitting). */
	void (*lost)(void *engine);
	/* Lock `lock`'s watcher asks the leader what it sent it last (the
	 * application's hasp_client_watch_progress), unless it is busy: the
	 * round asks again a period later (STORM_PROGRESS_NS). NULL: never. */
	void (*progress)(void *engine, uint32_t lock);
};

/* A storm round's schedule, the same for every engine. */
struct bench_storm_round {
	const struct bench_config *cfg;
	struct bench_result *res;
	const struct bench_storm_ops *ops;
	void *engine;
	uint32_t locks;
	uint8_t phase;     /* enum bench_storm_phase */
	uint32_t next;     /* the next holder or waiter to start or release */
	uint64_t start_ns, release_ns;
	uint64_t scan_ns;  /* the engine's O(L) scans run again from this */
	uint64_t progress_ns; /* untold watchers ask (ops->progress) again from this */
};

/* Advances the round at now_ns: a new round starts only while
 * `admitting`; one in progress always goes on. Returns true when it
 * judged a round that started at or after measure_start_ns (the engine's
 * last completion). */
bool bench_storm_advance(struct bench_storm_round *r, bool admitting, uint64_t measure_start_ns,
			 uint64_t now_ns);
/* When the next holder's release is due (the window), else UINT64_MAX. */
uint64_t bench_storm_wake(const struct bench_storm_round *r);
/* The round is releasing or judging: a waiter's grant and a watcher's
 * event count now. */
bool bench_storm_listening(const struct bench_storm_round *r);

#endif
