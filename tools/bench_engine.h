/*
 * The hasp-bench load engine: many hasp sessions, each a struct
 * hasp_client of libhasp's asynchronous core, all in one client group (one
 * socket, batched sendmmsg/recvmmsg), driven by one thread
 * (tools/bench_libhasp.c). libhasp is the one implementation of the wire
 * exchange, retransmission, leader finding and lease validity; hasp-bench
 * had its own until session 23 (docs/PERFORMANCE.md "Engines").
 *
 * Load is closed loop (every client starts its next operation when the
 * previous ends) or open loop (Poisson arrivals at cfg->rate, handed to idle
 * clients, queued in a bounded backlog otherwise). Every operation's latency
 * runs from its INTENDED start: in open loop the scheduled arrival time, so
 * a stalled server inflates latency instead of silently lowering the offered
 * load (coordinated omission).
 *
 * Every run is bounded: cfg->count_max operations AND cfg->duration_ms of
 * measurement after cfg->warmup_ms, then at most BENCH_DRAIN_MS to finish
 * operations in flight, then every session closed
 * (hasp_client_close_async), its answer waited for.
 */
#ifndef HASP_TOOLS_BENCH_ENGINE_H
#define HASP_TOOLS_BENCH_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/auth.h"
#include "hasp/types.h"
#include "hasp/wire.h"
#include "tools/bench_hist.h"

#define BENCH_CLIENTS_MAX 65536u
#define BENCH_BACKLOG_MAX 65536u /* open-loop arrivals waiting for a client */
#define BENCH_DRAIN_MS 3000u     /* after the run: finish what is in flight */
#define BENCH_DURATION_MS_MAX 3600000u
#define BENCH_OPCODE_LIMIT 64u
#define BENCH_STORM_LOCKS_MAX (BENCH_CLIENTS_MAX / 3u)
#define BENCH_WINDOW_MS_MAX 600000u

enum bench_workload {
	BENCH_WL_CYCLE,     /* acquire (TRY or WAIT) then release */
	BENCH_WL_KEEPALIVE, /* SESSION_KEEPALIVE storm over many sessions */
	BENCH_WL_KV,        /* KV put/get mix */
	BENCH_WL_BURST,     /* one lock, W waiters or watchers, time to tell the last */
	BENCH_WL_STORM,     /* L held locks, a waiter and a watcher each, all released in a window */
};

enum bench_lat {
	BENCH_LAT_OP,        /* whole operation, from its intended start */
	BENCH_LAT_ACQUIRE,   /* ACQUIRE first send to grant (reply or event) */
	BENCH_LAT_RELEASE,   /* RELEASE first send to OK */
	BENCH_LAT_KEEPALIVE, /* SESSION_KEEPALIVE round trip */
	BENCH_LAT_PUT,       /* KV_PUT round trip */
	BENCH_LAT_GET,       /* KV_GET round trip */
	BENCH_LAT_NOTIFY,    /* burst: release sent to the last waiter/watcher told;
			      * storm: release window start to the last watcher told */
	BENCH_LAT_GRANT_LAST, /* storm: release window start to the last waiter granted */
	BENCH_LAT_COUNT
};

struct bench_config {
	const char *cluster; /* "ip:port,..." */
	enum bench_workload workload;
	uint32_t clients;   /* sessions (burst: waiters + 1; storm: 3 x storm_locks) */
	uint32_t keys;      /* key space */
	bool contended;     /* keys by Zipf(zipf_s) over all clients; else partitioned */
	double zipf_s;
	bool wait;          /* ACQUIRE mode WAIT, else TRY */
	uint32_t lock_ttl_ms;
	uint32_t session_ttl_ms;
	double rate;        /* operations per second; 0: closed loop */
	uint64_t count_max; /* operations started (burst: rounds) */
	uint32_t duration_ms;
	uint32_t warmup_ms;
	uint32_t put_percent; /* KV */
	uint32_t value_size;  /* KV */
	uint32_t waiters;     /* burst: W */
	bool watchers;        /* burst: WATCH instead of WAIT */
	uint32_t storm_locks; /* storm: L (3L sessions: holders, waiters, watchers) */
	uint32_t window_ms;   /* storm: the L releases spread evenly over this */
	uint32_t request_timeout_ms; /* silence before a retransmit */
	uint32_t request_deadline_ms; /* give a request up (and reopen the session) */
	uint32_t wait_recheck_ms;    /* queued: LOCK_READ after this much silence */
	uint64_t seed;
	char prefix[64];      /* lock and key names are prefix/k<n> */
	uint32_t threads;     /* engines run side by side (hasp-bench --threads); reported */
	FILE *progress;       /* non-NULL: a progress line a second there */
	/* non-NULL: every measured latency sample is also written there, one
	 * line "<kind> <start_ns> <latency_ns>" (kind as in the JSON's
	 * latency_us, start on CLOCK_MONOTONIC, which every process on the
	 * machine shares): hasp-bench --latency-log, read by perf/storm_during
	 * to place another run's samples against a storm's windows */
	FILE *latency_log;
	/* Wire v2 (docs/PROTOCOL.md "Authentication"): every session opens as
	 * this identity; bench_config_auth() fills them from HASP_ID and
	 * HASP_KEY_FILE. auth false: wire v1 (client_auth = off). */
	bool auth;
	uint8_t identity_size;
	uint8_t identity[HASP_IDENTITY_SIZE_MAX];
	struct auth_key identity_key;
};

/* Reads the identity from HASP_ID and its key from HASP_KEY_FILE (unset or
 * empty HASP_ID: no authentication). 0, or -HASP_E* with a message. */
int bench_config_auth(struct bench_config *cfg, char *err, size_t err_size)
	__attribute__((warn_unused_result));

struct bench_errors {
	uint64_t timeouts;       /* requests given up at their deadline */
	uint64_t retransmits;
	uint64_t redirects;      /* NOT_LEADER answers */
	uint64_t malformed;      /* refused by hasp_wire_decode_reply */
	uint64_t stray;          /* unknown session, or not the request in flight */
	uint64_t wait_rereads;   /* LOCK_READ while queued */
	uint64_t wait_timeouts;  /* queued too long: given up */
	uint64_t notify_missing; /* burst: waiters/watchers not told in time */
	uint64_t arrivals_dropped; /* open loop: backlog full */
	uint64_t send_errors;
	uint64_t session_reopens;
	uint64_t sessions_failed; /* never opened */
	uint64_t unfinished;      /* operations still in flight at the drain deadline */
	uint64_t failed_ops;      /* operations ended by an unexpected status */
	uint64_t rewatches;       /* burst: WATCH sent again after a leader change */
	uint64_t storm_waiters_missing;  /* storm: locks whose waiter was not granted */
	uint64_t storm_watchers_missing; /* storm: locks whose watcher's last event is not that grant */
	uint64_t closes_unanswered; /* SESSION_CLOSEs given up: those sessions stay open until their TTL */
};

struct bench_result {
	struct bench_hist *lat[BENCH_LAT_COUNT]; /* owned: bench_result_deinit */
	uint64_t ops;          /* measured operations completed */
	uint64_t cycles;       /* measured lock cycles that were granted and released */
	uint64_t busy;         /* measured TRY acquires answered BUSY */
	uint64_t ops_started;  /* all, warm-up included */
	uint64_t elapsed_ns;   /* the measured window */
	uint64_t statuses[HASP_STATUS_COUNT]; /* every reply, by status */
	/* Replies by request opcode and status (opcodes are < 64). */
	uint64_t op_statuses[BENCH_OPCODE_LIMIT][HASP_STATUS_COUNT];
	struct bench_errors err;
	uint64_t backlog_max;
	uint64_t tx_datagrams, rx_datagrams, tx_calls, rx_calls, events;
	uint32_t sessions;     /* opened at start */
	/* storm, every round (warm-up included): per lock, the waiter's grant
	 * and the watcher's last event reporting it; "coalesced" is the part
	 * of told whose event carried the gap marker (the node replaced a
	 * held event with it, docs/PROTOCOL.md "The watch event set"). */
	uint64_t storm_granted, storm_told, storm_coalesced;
	/* storm: watchers told by a RESYNC and a re-read (their last event was
	 * lost, and the leader's WATCH_STATUS said so), counted in told too */
	uint64_t storm_resynced;
};

/* Defaults: closed loop, 16 clients, 1024 keys, TRY, 10 s, 1000000 ops. */
void bench_config_default(struct bench_config *cfg);
/* Checks ranges; returns 0 or -HASP_ECONFIG with a message in err. */
int bench_config_check(const struct bench_config *cfg, char *err, size_t err_size)
	__attribute__((warn_unused_result));

int bench_result_init(struct bench_result *res) __attribute__((warn_unused_result));
void bench_result_deinit(struct bench_result *res);
/* Adds `source` (another thread's run at the same time) into `target`:
 * counts and histograms add up, the measured window is the longer one. */
void bench_result_merge(struct bench_result *target, const struct bench_result *source);

/* The key of client `index`'s next operation (of `clients`): key 0 for
 * burst, Zipf-chosen from `zipf` for contended and kv; otherwise client i
 * owns the keys congruent to i modulo the client count, so no two clients
 * ever ask for the same lock (when keys >= clients). */
struct bench_zipf;
struct prng;
uint32_t bench_key_pick(const struct bench_config *cfg, const struct bench_zipf *zipf,
			struct prng *prng, uint32_t index, uint32_t clients);

/* One progress line of a run on a terminal: second `tick`, its `ops`, the
 * p99 of every operation so far and the errors so far (tools/bench_report.c). */
void bench_progress_line(FILE *f, const struct bench_result *res, uint32_t tick, uint64_t ops);

/* Runs one bounded load on libhasp's asynchronous core over the group's
 * kernel UDP socket (tools/bench_libhasp.c): one struct hasp_client per
 * session, all in one client group, one thread; every workload (burst and
 * storm: tools/bench_libhasp_rounds.c), closed or open loop. Returns 0
 * (the result says what happened), -HASP_ECONFIG, -HASP_ENOMEM,
 * -HASP_ESYS, or -HASP_ETIMEDOUT when no session could be opened. */
int bench_run_libhasp(const struct bench_config *cfg, struct bench_result *res)
	__attribute__((warn_unused_result));

/*
 * The libhasp engine driven by a loop of the caller's, on the caller's
 * datagrams (a DPDK lcore's work hook, tools/bench_dpdk.c): its group is
 * a libhasp group on the application's datagrams (io, libhasp 1.6; NULL:
 * the group's own socket). One thread:
 *
 *   bench_libhasp_create(&e, cfg, res, io)
 *   loop: bench_libhasp_input(e, ...) for every datagram received;
 *         if (bench_libhasp_step(e, now, &rc, &worked)) break;
 *         wait until bench_libhasp_wake_ns(e) or a datagram comes
 *   bench_libhasp_close(e)    (frees the clients while io can still send)
 *   bench_libhasp_destroy(e)
 *
 * A step runs the start-up (sessions opened), then the measured run and
 * its drain, then the close phase (every session closed with
 * hasp_client_close_async, its answer waited for, the unanswered counted
 * in closes_unanswered), as bench_run_libhasp does; it returns true once
 * all that is over, with its outcome in *rc (0 or as bench_run_libhasp).
 * *worked: operations completed or datagrams went out in this step.
 */
struct lh_engine;
struct hasp_client_group_io;
struct sockaddr_in;
int bench_libhasp_create(struct lh_engine **e, const struct bench_config *cfg,
			 struct bench_result *res, const struct hasp_client_group_io *io)
	__attribute__((warn_unused_result));
bool bench_libhasp_step(struct lh_engine *e, uint64_t now_ns, int *rc, bool *worked);
uint64_t bench_libhasp_wake_ns(const struct lh_engine *e);
int bench_libhasp_input(struct lh_engine *e, const void *data, size_t size,
			const struct sockaddr_in *from) __attribute__((warn_unused_result));
void bench_libhasp_close(struct lh_engine *e);
void bench_libhasp_destroy(struct lh_engine *e);

const char *bench_workload_name(enum bench_workload w);
const char *bench_lat_name(enum bench_lat l);
/* One measured sample of kind l that started at start_ns and ended at
 * end_ns (CLOCK_MONOTONIC): into res's histogram and cfg's latency log. */
void bench_record(const struct bench_config *cfg, struct bench_result *res, enum bench_lat l,
		  uint64_t start_ns, uint64_t end_ns);
/* "ACQUIRE", ...; NULL for opcodes hasp-bench never sends. */
const char *bench_op_name(uint8_t opcode);

#endif
