/*
 * Deterministic simulation of a hasp Raft group (docs/STYLE.md §9, TigerBeetle's
 * VOPR): 3 or 5 nodes run the real raft core in one thread under one seeded
 * PRNG, over a simulated network (delay, loss, duplication, reordering,
 * symmetric and asymmetric partitions) and simulated disks (entries and hard
 * state durable only when synced; a crash drops or tears the rest), with
 * crashes, restarts, clock drift, membership changes and leadership
 * transfers. Simulated clients retry with the same session and sequence
 * number. A checker judges every step (see sim_check.c).
 *
 * A seed replays a run exactly: sim_run() depends on nothing but its
 * options.
 */
#ifndef HASP_TESTS_SIM_SIM_H
#define HASP_TESTS_SIM_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "tests/sim/sim_sm.h"

struct sim_options {
	uint64_t seed;
	uint32_t nodes;            /* 3 or 5 */
	bool verbose;              /* trace lines and fault events on stderr */
	const struct sim_sm_ops *sm;
	uint32_t fault_ms;         /* length of the fault phase */
	uint32_t liveness_ms;      /* bound for recovery after healing */
};

struct sim_stats {
	uint64_t steps;
	uint64_t commits;          /* highest committed index */
	uint64_t acked;            /* client commands acknowledged */
	uint64_t crashes;
	uint64_t elections;
	uint64_t snapshots;
	uint64_t conf_changes;
	uint64_t reads;
	uint64_t granted;          /* acknowledged grants */
	uint64_t expired;          /* committed expiries that released a lock */
	uint64_t sim_ms;
};

/* Runs one seed. Returns true when every check held; on failure prints the
 * reason to stderr. */
bool sim_run(const struct sim_options *opt, struct sim_stats *stats);

#endif
