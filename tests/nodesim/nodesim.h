/*
 * nodesim: the deterministic simulation of whole nodes and libhasp clients
 * (docs/TESTING.md "Node simulation").
 *
 * Three or five nodes (node.h: dispatch, notify, sessions, raft, locks,
 * the WAL and snapshots on storage/simdisk) and a few libhasp clients
 * (their real exchange, WAIT machine and validity arithmetic, through the
 * client_io seam of client/client_impl.h) share one simulated clock and one
 * simulated network that delays, reorders, drops, duplicates and
 * partitions datagrams; nodes crash (the disk loses or tears what was not
 * synced) and restart from their disks. One seed drives every choice, so
 * a seed replays exactly. The clients' operations and the fenced
 * resource's decisions are written as a history in the real-cluster
 * suite's format (tests/fault/checker.py) and checked in C on the way
 * (nodesim_check.c).
 */
#ifndef HASP_TESTS_NODESIM_NODESIM_H
#define HASP_TESTS_NODESIM_NODESIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NODESIM_NODES_MAX 5u
#define NODESIM_CLIENTS_MAX 8u
#define NODESIM_LOCKS 2u

struct nodesim_options {
	uint64_t seed;
	uint32_t nodes;      /* 3 or 5 */
	uint32_t clients;    /* workers, 1 .. NODESIM_CLIENTS_MAX - 1 (and a watcher) */
	uint32_t run_ms;     /* simulated time of the workload */
	bool verbose;
	/* Renewals and re-acquires by the holder may shorten the TTL (the
	 * workload avoids it by default: see nodesim_clients.c). */
	bool shrink;
	/* One more client watches both locks and records its events (the
	 * events property); off in nodesim_short (docs/TESTING.md). */
	bool watch;
	const char *history; /* write the history (JSON lines) here, or NULL */
};

/* What one run saw. */
struct nodesim_result {
	uint64_t digest;     /* FNV-1a of the whole history: same seed, same digest */
	uint64_t records;
	uint64_t grants, releases, renews, reads, writes, writes_refused;
	uint64_t crashes, partitions, restarts;
	uint64_t datagrams, dropped, duplicated;
	uint32_t violations; /* nodesim_check.c */
	char first_violation[512];
};

/* Runs one seed. Returns 0, or -1 when the run itself broke (a node that
 * does not restart from its disk); violations are in `res`. */
int nodesim_run(const struct nodesim_options *opt, struct nodesim_result *res);

/* An array of `count` elements of `elem` bytes at *items, full at *size:
 * doubled (at least `first`) when count == *size (nodesim_history.c). */
void nodesim_grow(void **items, uint32_t count, uint32_t *size, size_t elem, uint32_t first);

/* ---- the history (nodesim_history.c) ---- */

struct nodesim_history;

struct nodesim_history *nodesim_history_new(void);
void nodesim_history_free(struct nodesim_history *h);
/* Appends one record: a JSON object's members without braces, after
 * "t" and "proc" (printf format). */
void nodesim_history_add(struct nodesim_history *h, uint64_t t, const char *proc, const char *fmt,
			 ...) __attribute__((format(printf, 4, 5)));
uint64_t nodesim_history_digest(const struct nodesim_history *h);
uint64_t nodesim_history_records(const struct nodesim_history *h);
int nodesim_history_write(const struct nodesim_history *h, const char *path)
	__attribute__((warn_unused_result));

/* ---- the checks (nodesim_check.c): a C port of checker.py's mutual
 * exclusion and fencing over the operations as the run records them ---- */

struct nodesim_hold {
	uint32_t lock, proc;
	uint64_t token;
	uint64_t invoke_ns, ack_ns; /* of the first acknowledgement */
	uint64_t last_ack_ns;       /* of the latest (a re-acquire by the holder) */
	uint64_t start, end;
};

/* Zeroed is empty; nodesim_check_deinit frees. */
struct nodesim_check {
	struct nodesim_hold *holds;
	uint32_t count, size;
	uint32_t fence_violations; /* found as grants arrive */
	char fence_msg[256];
};

void nodesim_check_deinit(struct nodesim_check *k);
/* An acknowledged grant: from `ack_ns` to `valid_until` (client's view). */
void nodesim_check_grant(struct nodesim_check *k, uint32_t lock, uint64_t token, uint32_t proc,
			 uint64_t invoke_ns, uint64_t ack_ns, uint64_t valid_until);
/* An unanswered RENEW or holder's ACQUIRE: the hold lasts at most the
 * validity the library reported after it. */
void nodesim_check_validity_cap(struct nodesim_check *k, uint32_t lock, uint64_t token,
				uint64_t valid_until);
void nodesim_check_renew_ok(struct nodesim_check *k, uint32_t lock, uint64_t token,
			    uint64_t valid_until);
void nodesim_check_renew_refused(struct nodesim_check *k, uint32_t lock, uint64_t token,
				 uint64_t at_ns);
void nodesim_check_release_start(struct nodesim_check *k, uint32_t lock, uint64_t token,
				 uint64_t at_ns);
/* Every property over what was recorded: the count of violations, the
 * first one described in `msg`. */
uint32_t nodesim_check_run(struct nodesim_check *k, char *msg, size_t size);

#endif
