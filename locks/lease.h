/*
 * Leases: a TTL in log time that keeps locks (and KV entries) alive.
 *
 * A shared lease is etcd's: granted on its own, renewed by one keepalive for
 * all of its locks, revoked at once. A lock acquired with its own TTL gets a
 * private lease that only that lock (or, while it waits, that waiter) uses;
 * RENEW and RELEASE manage it, lease commands refuse it. Treating both the
 * same way gives one expiry path: the leader proposes LEASE_EXPIRE for a
 * lease id whatever its kind.
 *
 * A lease's deadline is in log time (locks.h); LOCKS_DEADLINE_NONE marks the
 * pending private lease of a waiter, whose countdown starts at the grant.
 */
#ifndef HASP_LOCKS_LEASE_H
#define HASP_LOCKS_LEASE_H

#include <stdint.h>

#include "locks/locks.h"

#define LEASE_FLAG_PRIVATE 1u

struct locks_lease {
	uint64_t id;
	uint64_t deadline_ms;  /* log time; LOCKS_DEADLINE_NONE while pending */
	uint32_t ttl_ms;
	uint32_t heap_pos;     /* in sm->lease_heap while armed */
	uint32_t lock_head;    /* locks (via locks_lock.lease_next) */
	uint32_t waiter_head;  /* waiters (via locks_waiter.lease_next) */
	uint32_t kv_head;      /* KV entries (via locks_kv.lease_next) */
	uint32_t lock_count;
	uint32_t waiter_count;
	uint32_t kv_count;
	uint32_t flags;        /* LEASE_FLAG_* */
};

/* The slot of live lease `id`, or LOCKS_NONE. */
uint32_t lease_find(const struct locks *sm, uint64_t id);

/* Creates a lease (the caller checked for a free slot). Shared leases start
 * their countdown now; private ones stay pending until lease_arm(). */
uint32_t lease_create(struct locks *sm, uint32_t ttl_ms, uint32_t flags);

/* Sets deadline = log time + TTL (a grant, keepalive or renew). */
void lease_arm(struct locks *sm, uint32_t ls);

/* Frees a lease with nothing attached any more. */
void lease_destroy(struct locks *sm, uint32_t ls);

/* Ends a lease (revoke or expiry), atomically: drops its waiters, releases
 * each of its locks to that lock's next waiter, deletes its KV entries, and
 * destroys it. The revision must already be bumped. */
void lease_end(struct locks *sm, uint32_t ls, uint8_t cause);

/* Command handlers. */
void lease_cmd_grant(struct locks *sm, const struct locks_cmd *cmd);
void lease_cmd_keepalive(struct locks *sm, const struct locks_cmd *cmd);
void lease_cmd_revoke(struct locks *sm, const struct locks_cmd *cmd);
void lease_cmd_expire(struct locks *sm, const struct locks_cmd *cmd);

uint64_t lease_heap_key(const void *ctx, uint32_t slot);
void lease_heap_set_pos(void *ctx, uint32_t slot, uint32_t pos);

#endif
