/*
 * The lock table: named locks, each held under one lease with a fencing
 * token, and a FIFO queue of waiters.
 *
 * A lock record exists exactly while the lock is held: acquiring a free name
 * creates it, the last release (with no waiter left) deletes it. The token of
 * a grant is the state machine's revision at the grant; the revision moves
 * with every state-changing command and is replicated and snapshotted, so a
 * lock's tokens strictly increase across grants, leader changes and restarts
 * (what hasp_fence_admit() relies on).
 *
 * Ownership is by token and lease, not by session (docs/STATE_MACHINE.md,
 * "Ownership"): RELEASE and RENEW succeed for whoever presents the current
 * token, and a lock outlives the session that acquired it until it is
 * released or its lease ends. The lock remembers that session's id (for
 * reads, events and SELF_HELD), not its slot, because the slot is reused
 * once the session ends; ids are unique forever, so session_find() on it
 * tells whether the holder session still lives.
 *
 * Names live in a compacting arena (arena.h); a hash index (hindex.h) finds
 * them.
 */
#ifndef HASP_LOCKS_LOCK_TABLE_H
#define HASP_LOCKS_LOCK_TABLE_H

#include <stdint.h>

#include "locks/locks.h"

/* 56 bytes. There is no per-session list of locks: a live holder session
 * only counts its locks (locks_session.lock_count, for the
 * locks_per_session_max quota), and a session's end has nothing to unlink. */
struct locks_lock {
	uint64_t token;             /* revision at the current grant */
	uint64_t holder_session_id; /* session that acquired it (it may have ended) */
	uint64_t holder_owner;      /* that session's owner (identity), 0: none */
	uint32_t hash;              /* of the name, with cfg.hash_seed */
	uint32_t name_off;          /* name bytes in sm->lock_names */
	uint32_t lease;             /* lease slot (private or shared) */
	uint32_t lease_next, lease_prev;   /* the lease's locks */
	uint32_t waiter_head, waiter_tail; /* FIFO queue */
	uint32_t waiter_count;
	uint8_t name_len;
};

/* The slot holding lock `name`, or LOCKS_NONE. */
uint32_t lock_table_find(const struct locks *sm, const uint8_t *name, uint32_t name_len);

/* Releases lock `lk`: emits LOCK_RELEASED, ends a private lease, and hands
 * the lock to its head waiter in this same command (one LOCK_GRANTED event,
 * a fresh token) or deletes it when nobody waits. Revision already bumped. */
void lock_table_release(struct locks *sm, uint32_t lk, uint8_t cause);

/* Command handlers (the caller's session is live and its seq checked).
 * Release and renew check only the token: any session may present it. */
void lock_table_cmd_acquire(struct locks *sm, uint32_t s, const struct locks_cmd *cmd);

/* CANCEL: drops session `s`'s WAIT entry on the named lock (the client gave
 * up waiting), so that the lock is never handed to a session that no
 * longer waits. OK, or NOT_FOUND when there is no such entry (none was
 * queued, or it was granted already: the client then reads the lock). */
void lock_table_cmd_cancel(struct locks *sm, uint32_t s, const struct locks_cmd *cmd);
void lock_table_cmd_release(struct locks *sm, uint32_t s, const struct locks_cmd *cmd);
void lock_table_cmd_renew(struct locks *sm, uint32_t s, const struct locks_cmd *cmd);
void lock_table_cmd_force_release(struct locks *sm, const struct locks_cmd *cmd);

/* Arena and index callbacks. */
void lock_table_name_moved(void *ctx, uint32_t owner, uint32_t offset);
uint32_t lock_table_hash_of(const void *ctx, uint32_t slot);

#endif
