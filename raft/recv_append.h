/*
 * The follower's side of log replication (§3.5): AppendEntries are checked
 * against the previous entry, conflicting suffixes are truncated, new
 * entries appended; a mismatch is refused with a (term, index) hint for the
 * leader's fast back-off. A success is acknowledged only for entries that
 * are durable (persist before acknowledging, §3.8): when the write is
 * still in progress the ack waits for RAFT_EVENT_PERSISTED.
 */
#ifndef HASP_RAFT_RECV_APPEND_H
#define HASP_RAFT_RECV_APPEND_H

#include "raft/raft.h"

void recv_append(struct raft *r, const struct raft_msg *m);

/* RAFT_EVENT_PERSISTED on any role: advances the durable index; the leader
 * counts itself, a follower sends the acknowledgement it held back. */
void recv_append_persisted(struct raft *r, uint64_t index, uint64_t term);

#endif
