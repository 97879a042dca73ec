/*
 * An in-memory 3-node raft group for the benchmarks (bench_raft) and the
 * instruction counts (perf_micro): one thread, messages through the real
 * codec into a queue, every write durable at once, committed entries
 * "applied" by counting them. What remains is the core and its codec.
 *
 * One group per process (static state): raft_group_init() sets it up and
 * elects node 1; raft_group_step() feeds one event to a node and handles
 * its update; raft_group_drain() delivers queued messages until none is
 * left. Any failure (init, election, encode, decode, full queue) prints
 * and exits with status 1: a benchmark has no error path to report.
 */
#ifndef HASP_PERF_RAFT_GROUP_H
#define HASP_PERF_RAFT_GROUP_H

#include <stdint.h>

#include "raft/raft.h"

#define RAFT_GROUP_NODES 3

struct raft_group_stats {
	uint64_t applied[RAFT_GROUP_NODES]; /* committed entries applied per node */
	uint64_t messages;                  /* messages sent by all nodes */
};

extern struct raft raft_group_nodes[RAFT_GROUP_NODES];
extern struct raft_group_stats raft_group_stats;

/* Node i's PRNG is seeded with seed + i; node 1 (index 0) is elected. */
void raft_group_init(uint64_t seed);
void raft_group_deinit(void);

void raft_group_step(uint32_t i, const struct raft_event *ev);
void raft_group_drain(void);

#endif
