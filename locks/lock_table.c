/*
 * Locks: acquire, release, renew, force-release, and the handoff to the
 * head waiter (see lock_table.h).
 */
#include "locks/lock_table.h"

#include "locks/internal.h"
#include "locks/lease.h"
#include "locks/session.h"
#include "locks/waiters.h"

struct lock_key {
	const struct locks *sm;
	const uint8_t *name;
	uint32_t name_len;
	uint32_t hash;
};

static bool lock_table_eq(const void *ctx, uint32_t slot)
{
	const struct lock_key *k = ctx;
	const struct locks_lock *lk = &k->sm->locks[slot];

	return lk->hash == k->hash && lk->name_len == k->name_len &&
	       memcmp(arena_data(&k->sm->lock_names, lk->name_off), k->name, k->name_len) == 0;
}

uint32_t lock_table_hash_of(const void *ctx, uint32_t slot)
{
	const struct locks *sm = ctx;
	return sm->locks[slot].hash;
}

void lock_table_name_moved(void *ctx, uint32_t owner, uint32_t offset)
{
	struct locks *sm = ctx;
	sm->locks[owner].name_off = offset;
}

static uint32_t lock_table_lookup(const struct locks *sm, const uint8_t *name, uint32_t name_len,
				  uint32_t hash)
{
	struct lock_key k = { .sm = sm, .name = name, .name_len = name_len, .hash = hash };
	uint32_t slot = hindex_find(&sm->lock_index, hash, lock_table_eq, &k);

	return slot == HINDEX_NONE ? LOCKS_NONE : slot;
}

uint32_t lock_table_find(const struct locks *sm, const uint8_t *name, uint32_t name_len)
{
	if (!locks_name_valid(name, name_len))
		return LOCKS_NONE;
	return lock_table_lookup(sm, name, name_len,
				 hindex_hash_bytes(sm->cfg.hash_seed, name, name_len));
}

/* The memory budget per lease (perf/bench_locks) counts on this size. */
_Static_assert(sizeof(struct locks_lock) == 64, "struct locks_lock grew: re-measure bytes per lease");

/* Makes live session `s` the holder of `lk` under lease `ls`, with the
 * current revision as token. */
static void lock_table_grant(struct locks *sm, uint32_t lk, uint32_t s, uint32_t ls)
{
	struct locks_lock *l = &sm->locks[lk];

	HASP_ASSERT(sm->bumped);
	HASP_ASSERT(sm->revision > l->token);
	HASP_ASSERT(slots_used(&sm->session_slots, s));
	l->token = sm->revision;
	l->holder_session_id = sm->sessions[s].id;
	l->holder_owner = sm->sessions[s].owner;
	l->lease = ls;
	sm->sessions[s].lock_count++;
	LIST_PUSH_FRONT(sm->leases[ls].lock_head, sm->locks, lk, lease_next, lease_prev);
	sm->leases[ls].lock_count++;
	/* A private lease's countdown starts at the grant, also for a waiter
	 * that queued long ago; a shared lease keeps its own deadline. */
	if (sm->leases[ls].flags & LEASE_FLAG_PRIVATE)
		lease_arm(sm, ls);
	sm->stats.grants++;
}

/* Detaches the holder and the lease from `lk` (the lock stays indexed). The
 * holder session's quota gets the lock back if that session still lives;
 * an ended session took its count with it (its id never comes back). */
static void lock_table_detach(struct locks *sm, uint32_t lk)
{
	struct locks_lock *l = &sm->locks[lk];
	uint32_t ls = l->lease;
	uint32_t s = session_find(sm, l->holder_session_id);

	if (s != LOCKS_NONE) {
		HASP_ASSERT(sm->sessions[s].lock_count > 0);
		sm->sessions[s].lock_count--;
	}
	LIST_UNLINK(sm->leases[ls].lock_head, sm->locks, lk, lease_next, lease_prev);
	sm->leases[ls].lock_count--;
	if (sm->leases[ls].flags & LEASE_FLAG_PRIVATE)
		lease_destroy(sm, ls);
	l->holder_session_id = 0;
	l->lease = LOCKS_NONE;
}

static void lock_table_delete(struct locks *sm, uint32_t lk)
{
	struct locks_lock *l = &sm->locks[lk];

	HASP_ASSERT(l->waiter_count == 0);
	hindex_remove(&sm->lock_index, l->hash, lk, lock_table_hash_of, sm);
	arena_free(&sm->lock_names, l->name_off);
	sm->lock_name_bytes -= l->name_len;
	memset(l, 0, sizeof(*l)); /* free records are all-zero, padding too */
	slots_free(&sm->lock_slots, lk);
}

void lock_table_release(struct locks *sm, uint32_t lk, uint8_t cause)
{
	struct locks_lock *l = &sm->locks[lk];
	const uint8_t *name = arena_data(&sm->lock_names, l->name_off);

	HASP_ASSERT(sm->bumped);
	struct locks_event *ev = locks_event_push(sm, HASP_EVENT_LOCK_RELEASED, name, l->name_len);
	ev->cause = cause;
	ev->session_id = l->holder_session_id;
	ev->token = l->token;
	ev->lease_id = sm->leases[l->lease].id;
	lock_table_detach(sm, lk);

	uint32_t w = l->waiter_head;
	if (w == LOCKS_NONE) {
		lock_table_delete(sm, lk);
		return;
	}
	/* Hand the lock to the head waiter now, in this command: exactly one
	 * wakeup and no extra round trip (no herd). */
	uint32_t s = sm->waiters[w].session;
	uint32_t ls = sm->waiters[w].lease;
	waiters_unlink(sm, w);
	lock_table_grant(sm, lk, s, ls);
	sm->stats.handoffs++;
	ev = locks_event_push(sm, HASP_EVENT_LOCK_GRANTED, name, l->name_len);
	ev->cause = LOCKS_GRANT_HANDOFF;
	ev->session_id = sm->sessions[s].id;
	ev->token = l->token;
	/* As the GRANTED reply: the shared lease the lock lives on, 0 for a
	 * lock's own TTL. */
	ev->lease_id = (sm->leases[ls].flags & LEASE_FLAG_PRIVATE) ? 0 : sm->leases[ls].id;
	ev->ttl_ms = sm->leases[ls].ttl_ms;
	ev->deadline_ms = sm->leases[ls].deadline_ms;
}

/* Validates the name of a lock command; replies BAD_NAME otherwise. */
static bool lock_table_name_ok(struct locks *sm, const struct locks_cmd *cmd)
{
	if (locks_name_valid(cmd->name, cmd->name_len))
		return true;
	locks_reply_set(sm, HASP_STATUS_BAD_NAME, LOCKS_REASON_NONE);
	return false;
}

/* Capacity checks of an acquire or a wait; replies FULL and returns false
 * when one fails. `shared` is the shared lease slot or LOCKS_NONE. */
static bool lock_table_room(struct locks *sm, uint32_t s, uint32_t shared, bool new_lock,
			    uint32_t name_len)
{
	const struct locks_session *ss = &sm->sessions[s];
	uint8_t reason = LOCKS_REASON_NONE;

	if (ss->lock_count + ss->waiter_count >= sm->cfg.locks_per_session_max)
		reason = LOCKS_REASON_SESSION_LOCKS_FULL;
	else if (shared == LOCKS_NONE && sm->lease_slots.used_count == sm->lease_slots.capacity)
		reason = LOCKS_REASON_LEASES_FULL;
	else if (shared != LOCKS_NONE &&
		 sm->leases[shared].lock_count + sm->leases[shared].waiter_count >=
			 sm->cfg.locks_per_lease_max)
		reason = LOCKS_REASON_LEASE_ITEMS_FULL;
	else if (new_lock && sm->lock_slots.used_count == sm->lock_slots.capacity)
		reason = LOCKS_REASON_LOCKS_FULL;
	else if (new_lock && sm->lock_name_bytes + name_len > sm->cfg.lock_name_bytes_max)
		reason = LOCKS_REASON_NAMES_FULL;
	else if (!new_lock && sm->waiter_slots.used_count == sm->waiter_slots.capacity)
		reason = LOCKS_REASON_WAITERS_FULL;
	if (reason == LOCKS_REASON_NONE)
		return true;
	locks_reply_set(sm, HASP_STATUS_FULL, reason);
	return false;
}

/* The reply fields of the holder's grant of `lk`: token and lease. */
static void lock_table_reply_holder(struct locks *sm, uint32_t lk)
{
	struct locks_reply *r = &sm->res->reply;
	const struct locks_lease *l = &sm->leases[sm->locks[lk].lease];

	r->token = sm->locks[lk].token;
	r->id = l->id;
	r->ttl_ms = l->ttl_ms;
	r->deadline_ms = l->deadline_ms;
	HASP_ASSERT(r->token != 0);
}

/* ACQUIRE of lock `lk` by the session that holds it (a client that lost
 * the reply, or asks again after a restart of its process): GRANTED with
 * the same token, and for a lock with its own TTL the TTL is re-armed from
 * this command with the requested TTL, like RENEW, so the validity the
 * client computes from this request's send time is conservative. On a
 * shared lease nothing changes (the lease has its own keepalive). Another
 * lease form than the lock's is refused: release first. */
static void lock_table_reacquire(struct locks *sm, uint32_t lk, uint32_t shared,
				 const struct locks_cmd *cmd)
{
	uint32_t ls = sm->locks[lk].lease;
	struct locks_lease *l = &sm->leases[ls];
	bool own_ttl = (l->flags & LEASE_FLAG_PRIVATE) != 0;

	if (own_ttl ? shared != LOCKS_NONE : shared != ls) {
		locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_SELF_HELD);
		return;
	}
	if (own_ttl) {
		locks_bump(sm);
		l->ttl_ms = cmd->ttl_ms;
		lease_arm(sm, ls);
	}
	locks_reply_set(sm, HASP_STATUS_GRANTED, LOCKS_REASON_SELF_HELD);
	lock_table_reply_holder(sm, lk);
}

void lock_table_cmd_acquire(struct locks *sm, uint32_t s, const struct locks_cmd *cmd)
{
	struct locks_reply *r = &sm->res->reply;
	uint32_t shared = LOCKS_NONE;

	if (!lock_table_name_ok(sm, cmd))
		return;
	if ((cmd->mode != HASP_ACQUIRE_TRY && cmd->mode != HASP_ACQUIRE_WAIT) ||
	    (cmd->ttl_ms == 0) == (cmd->lease_id == 0)) {
		locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_BAD_FIELDS);
		return;
	}
	if (cmd->lease_id == 0 && !locks_ttl_valid(cmd->ttl_ms)) {
		locks_reply_set(sm, HASP_STATUS_BAD_TTL, LOCKS_REASON_NONE);
		return;
	}
	if (cmd->lease_id != 0) {
		shared = lease_find(sm, cmd->lease_id);
		if (shared == LOCKS_NONE) {
			locks_reply_set(sm, HASP_STATUS_LEASE_EXPIRED, LOCKS_REASON_NONE);
			return;
		}
		if (sm->leases[shared].flags & LEASE_FLAG_PRIVATE) {
			locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_PRIVATE_LEASE);
			return;
		}
	}

	uint32_t hash = hindex_hash_bytes(sm->cfg.hash_seed, cmd->name, cmd->name_len);
	uint32_t lk = lock_table_lookup(sm, cmd->name, cmd->name_len, hash);
	if (lk == LOCKS_NONE) {
		if (!lock_table_room(sm, s, shared, true, cmd->name_len))
			return;
		locks_bump(sm);
		uint32_t ls = shared != LOCKS_NONE ? shared
						   : lease_create(sm, cmd->ttl_ms, LEASE_FLAG_PRIVATE);
		lk = slots_alloc(&sm->lock_slots);
		HASP_ASSERT(lk != SLOTS_NONE);
		struct locks_lock *l = &sm->locks[lk];
		*l = (struct locks_lock){
			.hash = hash,
			.name_len = (uint8_t)cmd->name_len,
			.waiter_head = LOCKS_NONE,
			.waiter_tail = LOCKS_NONE,
		};
		l->name_off = arena_append(&sm->lock_names, lk, cmd->name, cmd->name_len);
		sm->lock_name_bytes += cmd->name_len;
		hindex_insert(&sm->lock_index, hash, lk);
		lock_table_grant(sm, lk, s, ls);
		/* Watchers see a free lock being taken as well as a hand-off. */
		struct locks_event *ev = locks_event_push(sm, HASP_EVENT_LOCK_GRANTED, cmd->name,
							  cmd->name_len);
		ev->cause = LOCKS_GRANT_DIRECT;
		ev->session_id = sm->sessions[s].id;
		ev->token = l->token;
		ev->lease_id = shared != LOCKS_NONE ? sm->leases[ls].id : 0;
		ev->ttl_ms = sm->leases[ls].ttl_ms;
		ev->deadline_ms = sm->leases[ls].deadline_ms;
		locks_reply_set(sm, HASP_STATUS_GRANTED, LOCKS_REASON_NONE);
		r->token = l->token;
		r->id = sm->leases[ls].id;
		r->ttl_ms = sm->leases[ls].ttl_ms;
		r->deadline_ms = sm->leases[ls].deadline_ms;
		return;
	}

	struct locks_lock *l = &sm->locks[lk];
	r->token = l->token; /* BUSY and QUEUED report the holder's token */
	if (l->holder_session_id == sm->sessions[s].id) {
		lock_table_reacquire(sm, lk, shared, cmd);
		return;
	}
	if (cmd->mode == HASP_ACQUIRE_TRY) {
		locks_reply_set(sm, HASP_STATUS_BUSY, LOCKS_REASON_NONE);
		return;
	}
	uint32_t position;
	uint32_t w = waiters_find(sm, lk, s, &position);
	if (w != LOCKS_NONE) {
		/* A re-issued WAIT (the client gave up locally and asks again)
		 * updates its entry's TTL, so that the grant carries the TTL of
		 * the request the client still waits on. Another lease than the
		 * entry's is refused: cancel the entry first. */
		uint32_t wl = sm->waiters[w].lease;
		bool entry_private = (sm->leases[wl].flags & LEASE_FLAG_PRIVATE) != 0;
		if (entry_private ? shared != LOCKS_NONE : shared != wl) {
			locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_QUEUED_OTHER_LEASE);
			return;
		}
		if (entry_private && sm->leases[wl].ttl_ms != cmd->ttl_ms) {
			HASP_ASSERT(sm->leases[wl].deadline_ms == LOCKS_DEADLINE_NONE); /* armed at grant */
			locks_bump(sm);
			sm->leases[wl].ttl_ms = cmd->ttl_ms;
		}
		locks_reply_set(sm, HASP_STATUS_QUEUED, LOCKS_REASON_ALREADY_QUEUED);
		r->position = position;
		r->id = sm->leases[wl].id;
		return;
	}
	if (!lock_table_room(sm, s, shared, false, 0))
		return;
	locks_bump(sm);
	uint32_t ls = shared != LOCKS_NONE ? shared : lease_create(sm, cmd->ttl_ms, LEASE_FLAG_PRIVATE);
	waiters_enqueue(sm, lk, s, ls);
	locks_reply_set(sm, HASP_STATUS_QUEUED, LOCKS_REASON_NONE);
	r->position = l->waiter_count;
	r->id = sm->leases[ls].id;
}

/* True when session `s` may act as the holder of `l`: it is the holding
 * session, or the holder's owner (identity) is its own and the session was
 * opened with LOCKS_CMD_OWNER_RELEASE (a CLI that releases in one process
 * what it acquired in another; a client that goes on after its session
 * expired). A token is a fence, not a capability: knowing it is not
 * enough. Owner 0 (sessions from before owners existed) matches nothing. */
static bool lock_table_may_hold(const struct locks *sm, const struct locks_lock *l, uint32_t s)
{
	const struct locks_session *ss = &sm->sessions[s];

	if (l->holder_session_id == ss->id)
		return true;
	return (ss->flags & LOCKS_CMD_OWNER_RELEASE) != 0 && ss->owner != 0 &&
	       ss->owner == l->holder_owner;
}

/* The lock a RELEASE or RENEW of session `s` names if `cmd->token` is its
 * current token and `s` may act as its holder; replies NOT_HOLDER and
 * returns LOCKS_NONE otherwise. Tokens of one lock strictly increase, so a
 * stale token never matches a later grant. */
static uint32_t lock_table_owned(struct locks *sm, uint32_t s, const struct locks_cmd *cmd)
{
	if (!lock_table_name_ok(sm, cmd))
		return LOCKS_NONE;
	uint32_t lk = lock_table_find(sm, cmd->name, cmd->name_len);
	if (lk == LOCKS_NONE) {
		locks_reply_set(sm, HASP_STATUS_NOT_HOLDER, LOCKS_REASON_NO_LOCK);
		return LOCKS_NONE;
	}
	if (sm->locks[lk].token != cmd->token) {
		locks_reply_set(sm, HASP_STATUS_NOT_HOLDER, LOCKS_REASON_TOKEN_MISMATCH);
		return LOCKS_NONE;
	}
	if (!lock_table_may_hold(sm, &sm->locks[lk], s)) {
		sm->stats.not_owner++;
		locks_reply_set(sm, HASP_STATUS_NOT_HOLDER, LOCKS_REASON_NOT_OWNER);
		return LOCKS_NONE;
	}
	return lk;
}

void lock_table_cmd_release(struct locks *sm, uint32_t s, const struct locks_cmd *cmd)
{
	uint32_t lk = lock_table_owned(sm, s, cmd);

	if (lk == LOCKS_NONE)
		return;
	locks_bump(sm);
	sm->res->reply.token = sm->locks[lk].token;
	lock_table_release(sm, lk, LOCKS_CAUSE_RELEASE);
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
}

void lock_table_cmd_cancel(struct locks *sm, uint32_t s, const struct locks_cmd *cmd)
{
	if (!lock_table_name_ok(sm, cmd))
		return;
	uint32_t lk = lock_table_find(sm, cmd->name, cmd->name_len);
	uint32_t position;
	uint32_t w = lk == LOCKS_NONE ? LOCKS_NONE : waiters_find(sm, lk, s, &position);
	if (w == LOCKS_NONE) {
		locks_reply_set(sm, HASP_STATUS_NOT_FOUND, LOCKS_REASON_NONE);
		return;
	}
	uint32_t waiting = sm->locks[lk].waiter_count;
	locks_bump(sm);
	waiters_drop(sm, w);
	HASP_ASSERT(sm->locks[lk].waiter_count == waiting - 1);
	HASP_ASSERT(waiters_find(sm, lk, s, &position) == LOCKS_NONE);
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
}

void lock_table_cmd_renew(struct locks *sm, uint32_t s, const struct locks_cmd *cmd)
{
	uint32_t lk = lock_table_owned(sm, s, cmd);

	if (lk == LOCKS_NONE)
		return;
	uint32_t ls = sm->locks[lk].lease;
	struct locks_lease *l = &sm->leases[ls];
	if (cmd->ttl_ms != 0 && !locks_ttl_valid(cmd->ttl_ms)) {
		locks_reply_set(sm, HASP_STATUS_BAD_TTL, LOCKS_REASON_NONE);
		return;
	}
	/* A shared lease's TTL belongs to all its locks: renewing one of them
	 * is a keepalive of the lease, and may not change the TTL. */
	if (!(l->flags & LEASE_FLAG_PRIVATE) && cmd->ttl_ms != 0 && cmd->ttl_ms != l->ttl_ms) {
		locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_BAD_FIELDS);
		return;
	}
	locks_bump(sm);
	if (cmd->ttl_ms != 0)
		l->ttl_ms = cmd->ttl_ms;
	lease_arm(sm, ls);
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
	lock_table_reply_holder(sm, lk);
}

void lock_table_cmd_force_release(struct locks *sm, const struct locks_cmd *cmd)
{
	if (!lock_table_name_ok(sm, cmd))
		return;
	uint32_t lk = lock_table_find(sm, cmd->name, cmd->name_len);
	if (lk == LOCKS_NONE) {
		locks_reply_set(sm, HASP_STATUS_NOT_FOUND, LOCKS_REASON_NO_LOCK);
		return;
	}
	/* The bump makes the old holder's token stale everywhere: the next
	 * grant (to a waiter now, or to anyone later) carries a larger one. */
	locks_bump(sm);
	sm->res->reply.token = sm->locks[lk].token;
	lock_table_release(sm, lk, LOCKS_CAUSE_FORCE);
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
}
