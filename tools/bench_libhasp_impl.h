/*
 * The inside of hasp-bench's libhasp engine, shared by tools/bench_libhasp.c
 * (clients, the group's loop, cycle/kv/keepalive) and
 * tools/bench_libhasp_rounds.c (burst and storm rounds). Not for other
 * users: tools/bench_engine.h is the contract. Only libhasp's public API
 * (include/hasp/client.h) is used, as a service would.
 */
#ifndef HASP_TOOLS_BENCH_LIBHASP_IMPL_H
#define HASP_TOOLS_BENCH_LIBHASP_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/limits.h"
#include "common/prng.h"
#include "hasp/client.h"
#include "tools/bench_arrival.h"
#include "tools/bench_engine.h"
#include "tools/bench_rounds.h"

#define POLL_MAX_MS 2 /* looks at the run's end and progress at least this often */
#define OPEN_PHASE_NS 10000000000ull /* start-up gives up on sessions after 10 s */
#define OPENS_INFLIGHT_MAX 256u      /* session opens at once */
#define CLOSES_AT_ONCE 256u          /* hasp_client_close_async in flight at once */
#define CLOSE_PHASE_MIN_NS 2000000000ull /* the close phase's bound: at least this */

struct lh_client;

/* A client's part in a burst or storm round (tools/bench_libhasp_rounds.c). */
enum lh_round_state {
	LR_IDLE,     /* nothing of the round */
	LR_ACQUIRE,  /* ACQUIRE in progress (a waiter: until its grant) */
	LR_HOLDING,  /* granted, kept until the coordinator releases */
	LR_RELEASE,  /* RELEASE in progress */
};

/* Where a run driven step by step (bench_libhasp_step) is. */
enum lh_phase {
	LH_PHASE_NEW,     /* nothing opened yet */
	LH_PHASE_OPENING, /* sessions opening, until all are or OPEN_PHASE_NS */
	LH_PHASE_RUNNING, /* the measured run and its drain */
	LH_PHASE_CLOSING, /* sessions closed, their answers waited for */
	LH_PHASE_DONE,
};

struct lh_engine {
	const struct bench_config *cfg;
	struct bench_result *res;
	struct lh_client *clients;
	uint32_t client_count;
	struct hasp_client_group *group;
	struct prng prng;
	struct bench_zipf zipf;
	bool zipf_ready;
	uint64_t measure_start_ns, run_end_ns, last_done_ns;
	uint32_t busy; /* operations in flight */
	uint32_t open_next, opening; /* start-up: the next client to open, opens in flight */
	uint32_t close_next, closing; /* the end: the next client to close, closes in flight */
	uint64_t progress_ns, progress_ops;
	uint32_t progress_tick;
	/* Open loop (cfg->rate > 0): the arrival schedule, the arrivals that
	 * found no idle client (intended times, oldest first), the idle
	 * clients, and whether arrivals are still admitted. */
	struct bench_arrival arrival;
	uint64_t arrivals;
	struct bench_backlog backlog;
	uint32_t *idle;
	uint32_t idle_len;
	bool admitting;
	uint8_t value[HASP_VALUE_SIZE_MAX];
	/* burst and storm rounds (tools/bench_libhasp_rounds.c) */
	uint64_t round;
	uint8_t round_phase;
	uint64_t round_start_ns, round_release_ns, round_last_told_ns;
	uint32_t round_told;
	uint32_t round_queued;  /* burst: waiters the holder's LOCK_READ saw queued */
	uint32_t storm_locks;
	struct bench_storm_round storm; /* storm: the round's schedule (tools/bench_rounds.c) */
	uint64_t rx_seen;       /* the group's datagrams when events were last drained */
	bool waits_cancelled;   /* the run's end: queued waits were cancelled */
	/* driven step by step (a DPDK lcore: bench_libhasp_step) */
	uint8_t phase;          /* enum lh_phase */
	uint64_t phase_until_ns;
	uint64_t wake_ns;       /* when the engine needs its next step */
	bool input_pending;     /* a datagram came since the last step */
	bool last_worked;       /* the last step completed or sent something */
	int rc;                 /* the run's outcome, once done */
};

struct lh_client {
	struct lh_engine *e;
	struct hasp_client *c;
	uint32_t index;
	uint32_t key;
	uint64_t op_start_ns, req_start_ns;
	bool measured;
	uint8_t in_flight; /* operations in flight (rounds: a read and a release may overlap) */
	char name[HASP_CLIENT_NAME_BUF]; /* "<prefix>/k<key>": see lh_name_set */
	uint8_t name_key_at;  /* where the key's digits start in name */
	/* rounds */
	uint8_t round_state;  /* enum lh_round_state */
	bool watching;        /* a watcher whose WATCH was answered */
	bool reading;         /* a holder's LOCK_READ is in flight */
	bool queued;          /* storm: the waiter was seen queued */
	bool told;            /* waiter granted / watcher told / holder released (storm) */
	bool gap_pending;     /* a RESYNC came: the next event followed lost ones */
	bool gap;             /* storm watcher: its last event followed a RESYNC */
	uint8_t event_type;   /* storm watcher: its last event of the round */
	uint64_t token;
	uint64_t told_ns;
	uint64_t op_id;       /* the WAIT acquire in progress, for a cancel */
	/* storm watcher: told it lost events (RESYNC), it re-reads its lock */
	bool reread_due;      /* another RESYNC came while a re-read was in flight */
	bool asking;          /* a hasp_client_watch_progress_async in flight */
	uint64_t read_token;  /* the holder's token the last re-read saw (0: none) */
	uint64_t read_ns;
};

/* ---- tools/bench_libhasp.c ---- */

/* The reply's status, counted by status and by opcode (JSON statuses). */
void lh_count_status(struct lh_engine *e, uint8_t opcode, int rc);

/* Sets s->key and s->name to key's name, "<prefix>/k<key>". */
void lh_name_set(struct lh_client *s, uint32_t key);

/* ---- tools/bench_libhasp_rounds.c ---- */

/* A round's client steps: an ACQUIRE (TRY, or WAIT bounded by the round's
 * longest time), a RELEASE of what it holds, a holder's LOCK_READ of its
 * queue (one at a time), and the count of clients from `first` on in
 * `state` (enum lh_round_state). */
void lh_acquire(struct lh_client *s, bool wait);
void lh_release(struct lh_client *s);
void lh_read_queue(struct lh_client *s);
bool lh_has_session(const struct lh_client *s);
/* A storm watcher asks the leader for the last event it sent it (one
 * question at a time): a lost one comes back as a RESYNC, and the watcher
 * re-reads its lock. */
void lh_watch_progress(struct lh_client *s);
uint32_t lh_count_round_state(const struct lh_engine *e, uint32_t first, uint8_t state);
/* Cancels the waits still queued, once (a lost storm, the run's end). */
void lh_cancel_waits(struct lh_engine *e);

/* Whether client `index` watches instead of acquiring. */
bool lh_round_is_watcher(const struct lh_engine *e, uint32_t index);
/* Its session opened: a watcher registers its WATCH (in flight until
 * answered). 0, or what libhasp refused. */
int lh_round_opened(struct lh_client *s) __attribute__((warn_unused_result));
/* Advances the round at now_ns: starts rounds while admitting, then
 * finishes the one in progress; takes the watchers' events. */
void lh_round_step(struct lh_engine *e, uint64_t now_ns);
/* A round is in progress (the run's drain waits for it). */
bool lh_round_busy(const struct lh_engine *e);
/* How much longer than BENCH_DRAIN_MS the drain may take (a storm round
 * begun in time finishes: set-up, window and verdict). */
uint64_t lh_round_drain_extra_ns(const struct bench_config *cfg);
/* When the round must run next (the storm's next release), or UINT64_MAX. */
uint64_t lh_round_wake(const struct lh_engine *e);
/* At the end: the locks still held are counted unfinished (what is in
 * flight is counted with the clients). */
void lh_round_finish(struct lh_engine *e);

/* ---- tools/bench_libhasp_storm.c ---- */

/* Sets up the storm's round schedule (tools/bench_rounds.c). */
void lh_storm_init(struct lh_engine *e);
void lh_storm_step(struct lh_engine *e, uint64_t now);

#endif
