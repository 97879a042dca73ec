/*
 * Snapshots (§5): the caller serializes its state machine at an applied
 * index and tells raft (RAFT_EVENT_SNAPSHOT), which compacts the log window
 * behind it, keeping snapshot_trailing entries for slow followers. A
 * follower that needs compacted entries gets the snapshot in chunks that fit
 * a datagram (InstallSnapshot, §5.3), one chunk in flight, each acknowledged
 * with the next offset wanted. raft only moves the bytes: it slices the
 * caller's buffer on the leader and hands each chunk to the loop on the
 * follower.
 */
#ifndef HASP_RAFT_SNAPSHOT_H
#define HASP_RAFT_SNAPSHOT_H

#include <stdbool.h>

#include "raft/raft.h"

/* RAFT_EVENT_SNAPSHOT. */
void snapshot_taken(struct raft *r, const struct raft_event *ev);

/* The follower needs entries we compacted: switch it to snapshotting. */
void snapshot_start(struct raft *r, struct raft_progress *pr);

/* Resends the current chunk when unacknowledged for two heartbeats. */
void snapshot_tick(struct raft *r, struct raft_progress *pr);

/* Some follower is being sent a snapshot. */
bool snapshot_sending(const struct raft *r);

void snapshot_recv(struct raft *r, const struct raft_msg *m);
void snapshot_recv_resp(struct raft *r, const struct raft_msg *m);

#endif
