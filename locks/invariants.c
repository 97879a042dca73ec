/*
 * locks_invariants_ok(): every cross-link, count and capacity of the tables
 * agrees (exactly one holder per lock, lease/lock/waiter/session links
 * consistent, counts match, capacities respected, free slots zeroed, each
 * open nonce indexed once). It
 * returns false rather than asserting so that tests and restore can ask.
 */
#include "locks/invariants.h"

#include "locks/internal.h"
#include "locks/kv.h"
#include "locks/lease.h"
#include "locks/lock_table.h"
#include "locks/session.h"
#include "locks/waiters.h"

#define CHECK(x)                      \
	do {                          \
		if (!(x))             \
			return false; \
	} while (0)

static bool live(const struct slots *s, uint32_t i)
{
	return i < s->capacity && slots_used(s, i);
}

static bool zero(const void *p, size_t size)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < size; i++)
		if (b[i] != 0)
			return false;
	return true;
}

/* Locks held by live sessions, as a count and two slot-weighted sums: with
 * no per-session list of locks, these tie every live session's lock_count to
 * the locks whose holder id resolves to it (a count moved from one session
 * to another changes the weighted sums) in O(locks + sessions). */
struct held_tally {
	uint64_t count, sum1, sum2;
};

static void tally_add(struct held_tally *t, uint32_t slot, uint64_t n)
{
	uint64_t w = (uint64_t)slot + 1;

	t->count += n;
	t->sum1 += n * w;
	t->sum2 += n * w * w;
}

static bool locks_ok(const struct locks *sm, uint64_t *name_bytes, struct held_tally *held)
{
	uint32_t count = 0;

	for (uint32_t i = 0; i < sm->cfg.locks_max; i++) {
		const struct locks_lock *l = &sm->locks[i];
		if (!slots_used(&sm->lock_slots, i)) {
			CHECK(zero(l, sizeof(*l)));
			continue;
		}
		count++;
		/* Exactly one holder: a lease that lists the lock, and the id of
		 * the session that acquired it (live or ended, never reused). */
		CHECK(live(&sm->lease_slots, l->lease));
		CHECK(l->holder_session_id != 0 &&
		      (l->holder_session_id >> LOCKS_ID_SLOT_BITS) <= sm->id_counter &&
		      locks_id_slot(l->holder_session_id) < sm->cfg.sessions_max);
		uint32_t holder = session_find(sm, l->holder_session_id);
		if (holder != LOCKS_NONE)
			tally_add(held, holder, 1);
		CHECK(l->token > 0 && l->token <= sm->revision);
		CHECK(l->name_len > 0 && l->name_len <= HASP_NAME_SIZE_MAX);
		const uint8_t *name = arena_data(&sm->lock_names, l->name_off);
		CHECK(locks_name_valid(name, l->name_len));
		CHECK(hindex_hash_bytes(sm->cfg.hash_seed, name, l->name_len) == l->hash);
		CHECK(lock_table_find(sm, name, l->name_len) == i);
		*name_bytes += l->name_len;
		/* The FIFO queue is well linked and its count right. */
		uint32_t n = 0, prev = LOCKS_NONE;
		for (uint32_t w = l->waiter_head; w != LOCKS_NONE; w = sm->waiters[w].next) {
			CHECK(live(&sm->waiter_slots, w));
			CHECK(sm->waiters[w].lock == i && sm->waiters[w].prev == prev);
			CHECK(sm->sessions[sm->waiters[w].session].id != l->holder_session_id);
			CHECK(++n <= sm->cfg.waiters_max);
			prev = w;
		}
		CHECK(l->waiter_tail == prev && l->waiter_count == n);
	}
	return count == sm->lock_slots.used_count && count == sm->lock_index.count;
}

static bool leases_ok(const struct locks *sm)
{
	uint32_t count = 0, armed = 0;

	for (uint32_t i = 0; i < sm->cfg.leases_max; i++) {
		const struct locks_lease *ls = &sm->leases[i];
		if (!slots_used(&sm->lease_slots, i)) {
			CHECK(zero(ls, sizeof(*ls)));
			continue;
		}
		count++;
		CHECK(locks_id_slot(ls->id) == i && (ls->id >> LOCKS_ID_SLOT_BITS) <= sm->id_counter);
		CHECK(locks_ttl_valid(ls->ttl_ms));
		uint32_t n = 0, prev = LOCKS_NONE;
		for (uint32_t lk = ls->lock_head; lk != LOCKS_NONE; lk = sm->locks[lk].lease_next) {
			CHECK(live(&sm->lock_slots, lk));
			CHECK(sm->locks[lk].lease == i && sm->locks[lk].lease_prev == prev);
			CHECK(++n <= sm->cfg.locks_max);
			prev = lk;
		}
		CHECK(ls->lock_count == n);
		n = 0, prev = LOCKS_NONE;
		for (uint32_t w = ls->waiter_head; w != LOCKS_NONE; w = sm->waiters[w].lease_next) {
			CHECK(live(&sm->waiter_slots, w));
			CHECK(sm->waiters[w].lease == i && sm->waiters[w].lease_prev == prev);
			CHECK(++n <= sm->cfg.waiters_max);
			prev = w;
		}
		CHECK(ls->waiter_count == n);
		n = 0, prev = LOCKS_NONE;
		for (uint32_t e = ls->kv_head; e != LOCKS_NONE; e = sm->kvs[e].lease_next) {
			CHECK(live(&sm->kv_slots, e));
			CHECK(sm->kvs[e].lease == i && sm->kvs[e].lease_prev == prev);
			CHECK(++n <= sm->cfg.kv_entries_max);
			prev = e;
		}
		CHECK(ls->kv_count == n);
		if (ls->flags & LEASE_FLAG_PRIVATE) {
			/* A private lease serves exactly one lock or one waiter; it is
			 * armed exactly when it serves a lock. */
			CHECK(ls->lock_count + ls->waiter_count == 1 && ls->kv_count == 0);
			CHECK((ls->lock_count == 1) == (ls->deadline_ms != LOCKS_DEADLINE_NONE));
		} else {
			CHECK(ls->flags == 0);
			CHECK(ls->lock_count + ls->waiter_count <= sm->cfg.locks_per_lease_max);
			CHECK(ls->kv_count <= sm->cfg.keys_per_lease_max);
			CHECK(ls->deadline_ms != LOCKS_DEADLINE_NONE);
		}
		if (ls->deadline_ms != LOCKS_DEADLINE_NONE) {
			armed++;
			CHECK(ls->heap_pos < sm->lease_heap.count && sm->lease_heap.items[ls->heap_pos] == i);
		} else {
			CHECK(ls->heap_pos == LOCKS_NONE);
		}
	}
	return count == sm->lease_slots.used_count && armed == sm->lease_heap.count;
}

static bool sessions_ok(const struct locks *sm, const struct held_tally *held)
{
	uint32_t count = 0, nonces = 0;
	uint64_t window = sm->cfg.session_window;
	struct held_tally counted = { 0 };

	for (uint32_t i = 0; i < sm->cfg.sessions_max; i++) {
		const struct locks_session *ss = &sm->sessions[i];
		const struct locks_cached_reply *ring = &sm->replies[(uint64_t)i * window];
		if (!slots_used(&sm->session_slots, i)) {
			CHECK(zero(ss, sizeof(*ss)));
			CHECK(zero(ring, window * sizeof(*ring)));
			continue;
		}
		count++;
		CHECK(locks_id_slot(ss->id) == i && (ss->id >> LOCKS_ID_SLOT_BITS) <= sm->id_counter);
		CHECK(locks_ttl_valid(ss->ttl_ms));
		CHECK(ss->heap_pos < sm->session_heap.count && sm->session_heap.items[ss->heap_pos] == i);
		/* The open's deadline only moves later (log time never goes back). */
		CHECK(ss->open_deadline_ms <= ss->deadline_ms);
		/* A non-zero nonce finds this session, so no two live sessions
		 * share one. */
		if (ss->nonce != 0) {
			nonces++;
			CHECK(session_find_nonce(sm, ss->nonce) == i);
		}
		tally_add(&counted, i, ss->lock_count);
		uint32_t n = 0, prev = LOCKS_NONE;
		for (uint32_t w = ss->waiter_head; w != LOCKS_NONE; w = sm->waiters[w].session_next) {
			CHECK(live(&sm->waiter_slots, w));
			CHECK(sm->waiters[w].session == i && sm->waiters[w].session_prev == prev);
			CHECK(++n <= sm->cfg.waiters_max);
			prev = w;
		}
		CHECK(ss->waiter_count == n);
		CHECK(ss->lock_count + ss->waiter_count <= sm->cfg.locks_per_session_max);
		/* Cached replies sit at seq % window (older ones linger until
		 * overwritten; session_seq_check never reads past the window),
		 * none below the session's floor. */
		CHECK(ss->seq_floor <= ss->seq_max);
		for (uint64_t k = 0; k < window; k++) {
			uint64_t seq = ring[k].seq;
			CHECK(seq == 0 || (seq % window == k && seq <= ss->seq_max &&
					   seq >= ss->seq_floor));
			/* An empty slot is all zero (snapshots v4 leave it out). */
			CHECK(seq != 0 || zero(&ring[k], sizeof(ring[k])));
		}
	}
	CHECK(counted.count == held->count && counted.sum1 == held->sum1 &&
	      counted.sum2 == held->sum2);
	return count == sm->session_slots.used_count && count == sm->session_heap.count &&
	       nonces == sm->nonce_index.count;
}

/* The owner records count each owner's live sessions: every record is
 * found by its owner and counts more than none, and the sessions of each
 * record (a slot-weighted tally, as for held locks) are the live sessions
 * whose owner finds that record. */
static bool owners_ok(const struct locks *sm)
{
	struct held_tally by_sessions = { 0 }, by_records = { 0 };
	uint32_t records = 0;

	for (uint32_t i = 0; i < sm->cfg.sessions_max; i++) {
		if (!slots_used(&sm->session_slots, i))
			continue;
		uint32_t o = session_owner_find(sm, sm->sessions[i].owner);
		CHECK(o != LOCKS_NONE);
		tally_add(&by_sessions, o, 1);
	}
	for (uint32_t o = 0; o < sm->cfg.sessions_max; o++) {
		const struct locks_owner *r = &sm->owners[o];
		if (!slots_used(&sm->owner_slots, o)) {
			CHECK(zero(r, sizeof(*r)));
			continue;
		}
		records++;
		CHECK(r->sessions > 0 && r->reserved == 0 && session_owner_find(sm, r->owner) == o);
		tally_add(&by_records, o, r->sessions);
	}
	CHECK(by_sessions.count == by_records.count && by_sessions.sum1 == by_records.sum1 &&
	      by_sessions.sum2 == by_records.sum2);
	return records == sm->owner_slots.used_count && records == sm->owner_index.count;
}

static bool waiters_ok(const struct locks *sm)
{
	uint32_t count = 0;

	for (uint32_t i = 0; i < sm->cfg.waiters_max; i++) {
		const struct locks_waiter *w = &sm->waiters[i];
		if (!slots_used(&sm->waiter_slots, i)) {
			CHECK(zero(w, sizeof(*w)));
			continue;
		}
		count++;
		CHECK(live(&sm->lock_slots, w->lock));
		CHECK(live(&sm->session_slots, w->session));
		CHECK(live(&sm->lease_slots, w->lease));
	}
	return count == sm->waiter_slots.used_count;
}

static bool kv_ok(const struct locks *sm, uint64_t *kv_bytes)
{
	uint32_t count = 0;

	for (uint32_t i = 0; i < sm->cfg.kv_entries_max; i++) {
		const struct locks_kv *e = &sm->kvs[i];
		if (!slots_used(&sm->kv_slots, i)) {
			CHECK(zero(e, sizeof(*e)));
			continue;
		}
		count++;
		const uint8_t *key = arena_data(&sm->kv_bytes_arena, e->off);
		CHECK(locks_name_valid(key, e->key_len));
		CHECK(e->value_len <= HASP_VALUE_SIZE_MAX);
		CHECK(kv_find(sm, key, e->key_len) == i);
		CHECK(e->create_revision > 0 && e->create_revision <= e->mod_revision);
		CHECK(e->mod_revision <= sm->revision && e->version > 0);
		CHECK(e->lease == LOCKS_NONE || live(&sm->lease_slots, e->lease));
		*kv_bytes += (uint64_t)e->key_len + e->value_len;
	}
	return count == sm->kv_slots.used_count && count == sm->kv_index.count;
}

bool locks_invariants_ok(const struct locks *sm)
{
	uint64_t name_bytes = 0, kv_bytes = 0;
	struct held_tally held = { 0 };

	CHECK(locks_ok(sm, &name_bytes, &held));
	CHECK(leases_ok(sm));
	CHECK(sessions_ok(sm, &held));
	CHECK(owners_ok(sm));
	CHECK(waiters_ok(sm));
	CHECK(kv_ok(sm, &kv_bytes));
	CHECK(name_bytes == sm->lock_name_bytes && name_bytes <= sm->cfg.lock_name_bytes_max);
	CHECK(kv_bytes == sm->kv_bytes && kv_bytes <= sm->cfg.kv_bytes_max);
	CHECK(sm->log_time_ms <= LOCKS_TIME_MS_MAX);
	/* Lease heap order (the session heap is checked the same way). */
	for (uint32_t p = 1; p < sm->lease_heap.count; p++)
		CHECK(sm->leases[sm->lease_heap.items[(p - 1) / 2]].deadline_ms <=
		      sm->leases[sm->lease_heap.items[p]].deadline_ms);
	for (uint32_t p = 1; p < sm->session_heap.count; p++)
		CHECK(sm->sessions[sm->session_heap.items[(p - 1) / 2]].deadline_ms <=
		      sm->sessions[sm->session_heap.items[p]].deadline_ms);
	return true;
}
