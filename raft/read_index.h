/*
 * Linearizable reads without log writes: ReadIndex (§6.4). The leader
 * records its commit index (at least its no-op's index), confirms with a
 * heartbeat round that it is still the leader (a majority echoes the read
 * sequence number), and then hands the read back with that index; the loop
 * serves it once its state machine has applied the index.
 */
#ifndef HASP_RAFT_READ_INDEX_H
#define HASP_RAFT_READ_INDEX_H

#include <stdint.h>

#include "raft/raft.h"

/* RAFT_EVENT_READ_INDEX. Must be the leader (else RAFT_NOT_LEADER). */
void read_index_request(struct raft *r, uint64_t ctx);

/* Releases the pending reads a majority has confirmed into the update. */
void read_index_check(struct raft *r);

/* Stepping down loses pending reads; the update counts them. */
void read_index_drop(struct raft *r);

#endif
