/*
 * Per-member replication progress kept by the leader (§3.5): a member is
 * probed one AppendEntries at a time until its match is found, then fed a
 * pipeline of AppendEntries bounded by count and bytes (REPLICATE), or sent
 * a snapshot when the entries it needs are compacted (SNAPSHOTTING).
 *
 * The slots follow the latest configuration: progress_sync() adds new
 * members (probing from the end of the log) and drops removed ones.
 */
#ifndef HASP_RAFT_PROGRESS_H
#define HASP_RAFT_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "raft/raft.h"

/* Allocates the slots and their in-flight rings. 0 or -HASP_ENOMEM. */
int progress_init(struct raft *r) __attribute__((warn_unused_result));
void progress_deinit(struct raft *r);

/* Makes the slots match r->conf, keeping the state of remaining members. */
void progress_sync(struct raft *r);

/* A new leader starts every follower probing at last + 1 (§3.5). */
void progress_reset_all(struct raft *r);

/* A response arrived from the member: it is alive (CheckQuorum, and
 * whether its snapshot transfer may hold compaction back). */
void progress_heard_from(struct raft_progress *pr);

void progress_become_probe(struct raft_progress *pr);
void progress_become_replicate(struct raft_progress *pr);
void progress_become_snapshot(struct raft_progress *pr, uint64_t snap_index);

/* The pipeline is full: no more AppendEntries until acks arrive. */
bool progress_inflight_full(const struct raft *r, const struct raft_progress *pr);
void progress_inflight_add(struct raft_progress *pr, uint32_t inflight_max, uint64_t last_index,
			   uint32_t size);
/* Frees the in-flight messages acknowledged by a match of `index`. */
void progress_inflight_free_to(struct raft_progress *pr, uint32_t inflight_max, uint64_t index);

#endif
