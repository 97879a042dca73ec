/*
 * Waiters: the FIFO queue of sessions waiting for a held lock.
 *
 * A waiter sits on three intrusive lists at once: its lock's queue (FIFO,
 * head = next to be granted), its session's waiters (dropped when the session
 * ends) and its lease's waiters (dropped when the lease is revoked or
 * expires). A waiter that asked for its own TTL owns a pending private lease
 * from the moment it queues, so handing it the lock later never needs a
 * table slot that might be full: the handoff cannot fail.
 */
#ifndef HASP_LOCKS_WAITERS_H
#define HASP_LOCKS_WAITERS_H

#include <stdint.h>

struct locks;

struct locks_waiter {
	uint32_t lock;    /* lock slot waited for */
	uint32_t session; /* session slot */
	uint32_t lease;   /* shared lease, or this waiter's pending private lease */
	uint32_t next, prev;                 /* the lock's queue */
	uint32_t session_next, session_prev; /* the session's waiters */
	uint32_t lease_next, lease_prev;     /* the lease's waiters */
};

/* Appends a waiter to the tail of `lock`'s queue; the caller checked the
 * capacities (a free waiter slot, the session and lease quotas). */
uint32_t waiters_enqueue(struct locks *sm, uint32_t lock, uint32_t session, uint32_t lease);

/* Unlinks waiter `w` from every list and frees it. Its lease is untouched
 * (the caller destroys a pending private lease or hands it to the lock). */
void waiters_unlink(struct locks *sm, uint32_t w);

/* Drops waiter `w` for good: unlinks it and destroys its pending private
 * lease, if it had one. */
void waiters_drop(struct locks *sm, uint32_t w);

/* The waiter of `session` in `lock`'s queue and its 1-based position, or
 * LOCKS_NONE. O(queue length). */
uint32_t waiters_find(const struct locks *sm, uint32_t lock, uint32_t session, uint32_t *position);

#endif
