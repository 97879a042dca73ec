/*
 * Leases (see lease.h). Expiry is a command: the leader proposes
 * LEASE_EXPIRE, and apply re-checks the deadline against log time, so a
 * keepalive committed in between wins and the EXPIRE changes nothing.
 */
#include "locks/lease.h"

#include "locks/internal.h"
#include "locks/kv.h"
#include "locks/lock_table.h"
#include "locks/waiters.h"

uint64_t lease_heap_key(const void *ctx, uint32_t slot)
{
	const struct locks *sm = ctx;
	return sm->leases[slot].deadline_ms;
}

void lease_heap_set_pos(void *ctx, uint32_t slot, uint32_t pos)
{
	struct locks *sm = ctx;
	sm->leases[slot].heap_pos = pos;
}

uint32_t lease_find(const struct locks *sm, uint64_t id)
{
	uint32_t ls = locks_id_slot(id);

	if (id == 0 || ls >= sm->cfg.leases_max || !slots_used(&sm->lease_slots, ls))
		return LOCKS_NONE;
	return sm->leases[ls].id == id ? ls : LOCKS_NONE;
}

uint32_t lease_create(struct locks *sm, uint32_t ttl_ms, uint32_t flags)
{
	uint32_t ls = slots_alloc(&sm->lease_slots);

	HASP_ASSERT(ls != SLOTS_NONE);
	HASP_ASSERT(sm->bumped);
	sm->leases[ls] = (struct locks_lease){
		.id = locks_id_make(sm, ls),
		.deadline_ms = LOCKS_DEADLINE_NONE,
		.ttl_ms = ttl_ms,
		.heap_pos = LOCKS_NONE,
		.lock_head = LOCKS_NONE,
		.waiter_head = LOCKS_NONE,
		.kv_head = LOCKS_NONE,
		.flags = flags,
	};
	if (!(flags & LEASE_FLAG_PRIVATE))
		lease_arm(sm, ls);
	return ls;
}

void lease_arm(struct locks *sm, uint32_t ls)
{
	struct locks_lease *l = &sm->leases[ls];

	l->deadline_ms = sm->log_time_ms + l->ttl_ms;
	if (l->heap_pos == LOCKS_NONE)
		dheap_insert(&sm->lease_heap, ls);
	else
		dheap_update(&sm->lease_heap, l->heap_pos);
}

void lease_destroy(struct locks *sm, uint32_t ls)
{
	struct locks_lease *l = &sm->leases[ls];

	HASP_ASSERT(l->lock_count == 0 && l->waiter_count == 0);
	HASP_ASSERT(l->kv_count == 0);
	if (l->heap_pos != LOCKS_NONE)
		dheap_remove(&sm->lease_heap, l->heap_pos);
	memset(l, 0, sizeof(*l)); /* free records are all-zero, padding too */
	slots_free(&sm->lease_slots, ls);
}

void lease_end(struct locks *sm, uint32_t ls, uint8_t cause)
{
	struct locks_lease *l = &sm->leases[ls];

	HASP_ASSERT(sm->bumped);
	if (l->flags & LEASE_FLAG_PRIVATE) {
		/* A private lease has one lock (an armed one is never a waiter's);
		 * releasing that lock destroys the lease. */
		HASP_ASSERT(l->lock_count == 1 && l->waiter_count == 0);
		lock_table_release(sm, l->lock_head, cause);
		return;
	}
	/* Waiters first, so that no lock of this lease is handed to a waiter
	 * of this same lease that is about to go. */
	while (l->waiter_head != LOCKS_NONE)
		waiters_drop(sm, l->waiter_head);
	while (l->lock_head != LOCKS_NONE)
		lock_table_release(sm, l->lock_head, cause);
	while (l->kv_head != LOCKS_NONE)
		kv_delete_entry(sm, l->kv_head);
	lease_destroy(sm, ls);
}

/* The shared lease a lease command names, or LOCKS_NONE after replying. */
static uint32_t lease_lookup_shared(struct locks *sm, uint64_t id)
{
	uint32_t ls = lease_find(sm, id);

	if (ls == LOCKS_NONE) {
		locks_reply_set(sm, HASP_STATUS_LEASE_EXPIRED, LOCKS_REASON_NONE);
		return LOCKS_NONE;
	}
	if (sm->leases[ls].flags & LEASE_FLAG_PRIVATE) {
		locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_PRIVATE_LEASE);
		return LOCKS_NONE;
	}
	return ls;
}

static void lease_reply_fill(struct locks *sm, uint32_t ls)
{
	struct locks_reply *r = &sm->res->reply;

	r->id = sm->leases[ls].id;
	r->ttl_ms = sm->leases[ls].ttl_ms;
	r->deadline_ms = sm->leases[ls].deadline_ms;
}

void lease_cmd_grant(struct locks *sm, const struct locks_cmd *cmd)
{
	if (!locks_ttl_valid(cmd->ttl_ms)) {
		locks_reply_set(sm, HASP_STATUS_BAD_TTL, LOCKS_REASON_NONE);
		return;
	}
	if (sm->lease_slots.used_count == sm->lease_slots.capacity) {
		locks_reply_set(sm, HASP_STATUS_FULL, LOCKS_REASON_LEASES_FULL);
		return;
	}
	locks_bump(sm);
	uint32_t ls = lease_create(sm, cmd->ttl_ms, 0);
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
	lease_reply_fill(sm, ls);
}

void lease_cmd_keepalive(struct locks *sm, const struct locks_cmd *cmd)
{
	uint32_t ls = lease_lookup_shared(sm, cmd->lease_id);

	if (ls == LOCKS_NONE)
		return;
	locks_bump(sm);
	lease_arm(sm, ls);
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
	lease_reply_fill(sm, ls);
}

void lease_cmd_revoke(struct locks *sm, const struct locks_cmd *cmd)
{
	uint32_t ls = lease_lookup_shared(sm, cmd->lease_id);

	if (ls == LOCKS_NONE)
		return;
	locks_bump(sm);
	sm->res->reply.id = cmd->lease_id;
	lease_end(sm, ls, LOCKS_CAUSE_REVOKE);
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
}

void lease_cmd_expire(struct locks *sm, const struct locks_cmd *cmd)
{
	uint32_t ls = lease_find(sm, cmd->lease_id);

	if (ls == LOCKS_NONE) {
		locks_reply_set(sm, HASP_STATUS_NOT_FOUND, LOCKS_REASON_NONE);
		return;
	}
	sm->res->reply.id = cmd->lease_id;
	sm->res->reply.deadline_ms = sm->leases[ls].deadline_ms;
	/* Re-check in log time: a keepalive that committed after the leader
	 * decided moved the deadline, and wins (the EXPIRE is a no-op). */
	if (sm->leases[ls].deadline_ms > sm->log_time_ms) {
		sm->stats.expire_noop++;
		locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NOT_DUE);
		return;
	}
	locks_bump(sm);
	lease_end(sm, ls, LOCKS_CAUSE_EXPIRE);
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
}
