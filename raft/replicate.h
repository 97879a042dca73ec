/*
 * The leader's side of log replication (§3.5): proposals appended as
 * entries in batches, AppendEntries pipelined to each follower within the
 * MTU and the in-flight budget, acknowledgements counted towards commitment
 * of current-term entries only (§3.6.2), with the leader itself counted
 * once its own write is durable (parallel leader write, §10.2.1).
 */
#ifndef HASP_RAFT_REPLICATE_H
#define HASP_RAFT_REPLICATE_H

#include <stdint.h>

#include "raft/raft.h"

/* Appends one entry at the end of the leader's log for this term and marks
 * it for the update's persist list. There must be room. */
void replicate_append_local(struct raft *r, uint8_t type, const void *data, uint32_t size);

/* RAFT_EVENT_PROPOSE: appends the batch, one entry per command, and
 * returns the first index in the update; refusals in up->reject. */
void replicate_propose(struct raft *r, const struct raft_event *ev);

/* Sends what the follower's state allows: one probe, a pipeline of
 * appends, or a snapshot chunk. */
void replicate_send_append(struct raft *r, struct raft_progress *pr);
void replicate_broadcast(struct raft *r);

/* An empty AppendEntries at the follower's match: carries commit and the
 * read sequence, and proves leadership (§6.2, §6.4). */
void replicate_heartbeat(struct raft *r, struct raft_progress *pr);
void replicate_heartbeat_all(struct raft *r);

/* One tick of the leader: heartbeats, stalled pipelines, CheckQuorum,
 * transfer timeout. */
void replicate_tick(struct raft *r);

void replicate_recv_append_resp(struct raft *r, const struct raft_msg *m);

/* Advances commit to the highest current-term index held by a majority. */
void replicate_maybe_commit(struct raft *r);

/* Leadership transfer (§3.10): RAFT_EVENT_TRANSFER. */
void replicate_transfer(struct raft *r, uint32_t target);

#endif
