/*
 * Sessions and the exactly-once reply window (see session.h).
 */
#include "locks/session.h"

#include "common/bytes.h"
#include "locks/internal.h"
#include "locks/waiters.h"

uint64_t session_heap_key(const void *ctx, uint32_t slot)
{
	const struct locks *sm = ctx;
	return sm->sessions[slot].deadline_ms;
}

void session_heap_set_pos(void *ctx, uint32_t slot, uint32_t pos)
{
	struct locks *sm = ctx;
	sm->sessions[slot].heap_pos = pos;
}

uint32_t session_find(const struct locks *sm, uint64_t id)
{
	uint32_t s = locks_id_slot(id);

	if (id == 0 || s >= sm->cfg.sessions_max || !slots_used(&sm->session_slots, s))
		return LOCKS_NONE;
	return sm->sessions[s].id == id ? s : LOCKS_NONE;
}

/* The hash of a u64 key (a nonce, an owner) in the machine's indexes. */
static uint32_t session_hash_u64(const struct locks *sm, uint64_t key)
{
	uint8_t bytes[8];

	put_u64le(bytes, key);
	return hindex_hash_bytes(sm->cfg.hash_seed, bytes, sizeof(bytes));
}

/* A u64 key to look up, for the indexes' equality callbacks. */
struct session_u64_key {
	const struct locks *sm;
	uint64_t key;
};

uint32_t session_nonce_hash(const struct locks *sm, uint64_t nonce)
{
	return session_hash_u64(sm, nonce);
}

uint32_t session_nonce_hash_of(const void *ctx, uint32_t slot)
{
	const struct locks *sm = ctx;
	return session_nonce_hash(sm, sm->sessions[slot].nonce);
}

static bool session_nonce_eq(const void *ctx, uint32_t slot)
{
	const struct session_u64_key *k = ctx;
	return k->sm->sessions[slot].nonce == k->key;
}

uint32_t session_find_nonce(const struct locks *sm, uint64_t nonce)
{
	struct session_u64_key k = { .sm = sm, .key = nonce };

	HASP_ASSERT(nonce != 0);
	uint32_t s = hindex_find(&sm->nonce_index, session_nonce_hash(sm, nonce), session_nonce_eq, &k);
	return s == HINDEX_NONE ? LOCKS_NONE : s;
}

static uint64_t session_reply_index(const struct locks *sm, uint32_t s, uint64_t seq)
{
	return (uint64_t)s * sm->cfg.session_window + seq % sm->cfg.session_window;
}

/* Every write of the cached replies comes through here, so that locks_copy
 * copies only the records written since the last copy; and a machine that
 * was a copy is one no longer. Inline: it runs on every applied command. */
static inline void session_reply_written(struct locks *sm, uint64_t i)
{
	dirty_mark(&sm->replies_written, i);
	sm->copy_of = NULL;
}

/* Zeroes the records of an ending session's reply window that are in use
 * (a record with seq 0 is all zero), so that only those count as written:
 * a session that sent a few commands leaves a few records to copy. */
static void session_replies_clear(struct locks *sm, uint32_t s)
{
	uint64_t first = (uint64_t)s * sm->cfg.session_window;

	for (uint64_t i = first; i < first + sm->cfg.session_window; i++) {
		if (sm->replies[i].seq != 0) {
			memset(&sm->replies[i], 0, sizeof(sm->replies[i]));
			session_reply_written(sm, i);
		}
	}
}

enum session_seq_verdict session_seq_check(const struct locks *sm, uint32_t s, uint64_t seq,
					   uint64_t digest, const struct locks_cached_reply **cached)
{
	const struct locks_session *ss = &sm->sessions[s];
	uint64_t window = sm->cfg.session_window;

	HASP_ASSERT(seq > 0);
	if (seq > ss->seq_max)
		return seq - ss->seq_max > LOCKS_SEQ_JUMP_MAX ? SESSION_SEQ_JUMP : SESSION_SEQ_NEW;
	if (ss->seq_max - seq >= window || seq < ss->seq_floor)
		return SESSION_SEQ_TOO_OLD;
	/* Inside the window: the ring slot holds this seq if it was applied,
	 * or an older one if this request has not arrived yet (reordered). */
	const struct locks_cached_reply *c = &sm->replies[session_reply_index(sm, s, seq)];
	if (c->seq != seq)
		return SESSION_SEQ_NEW;
	/* The same seq with other bytes is not a retransmission: it must not
	 * receive the first request's reply (a write would be lost silently). */
	if (c->digest != 0 && digest != 0 && c->digest != digest)
		return SESSION_SEQ_MISMATCH;
	*cached = c;
	return SESSION_SEQ_DUPLICATE;
}

static void session_touch(struct locks *sm, uint32_t s)
{
	struct locks_session *ss = &sm->sessions[s];

	ss->deadline_ms = sm->log_time_ms + ss->ttl_ms;
	dheap_update(&sm->session_heap, ss->heap_pos);
}

void session_seq_record(struct locks *sm, uint32_t s, uint64_t seq, uint64_t digest,
			const struct locks_reply *reply)
{
	struct locks_session *ss = &sm->sessions[s];
	uint64_t i = session_reply_index(sm, s, seq);
	struct locks_cached_reply *c = &sm->replies[i];

	HASP_ASSERT(seq > 0);
	HASP_ASSERT(c->seq < seq);
	session_reply_written(sm, i);
	c->seq = seq;
	c->digest = digest;
	c->reply = *reply;
	if (seq > ss->seq_max)
		ss->seq_max = seq;
	session_touch(sm, s);
}

void session_seq_floor(struct locks *sm, uint32_t s, uint64_t seq)
{
	struct locks_session *ss = &sm->sessions[s];
	uint64_t window = sm->cfg.session_window;

	HASP_ASSERT(seq <= ss->seq_max);
	if (seq <= ss->seq_floor)
		return;
	/* Every cached seq is at or above the old floor (invariants.c), so
	 * the slots of the seqs from there up to this one, at most a window's
	 * worth, are the ones that can hold a seq below the new floor. A
	 * client that waits for each reply moves the floor by one: one slot. */
	uint64_t from = seq - ss->seq_floor > window ? seq - window : ss->seq_floor;
	for (uint64_t t = from; t < seq; t++) {
		uint64_t i = session_reply_index(sm, s, t);
		if (sm->replies[i].seq != 0 && sm->replies[i].seq < seq) {
			memset(&sm->replies[i], 0, sizeof(sm->replies[i]));
			session_reply_written(sm, i);
		}
	}
	ss->seq_floor = seq;
}

/* The owner records: derived from the sessions (rebuilt on restore), so
 * an open's quota check costs a lookup. It was a scan of the whole session
 * table, which at sessions_max 131072 made each open cost more than the
 * node could take in a burst of them (docs/PERFORMANCE.md, "Remaining"). */
uint32_t session_owner_hash_of(const void *ctx, uint32_t slot)
{
	const struct locks *sm = ctx;
	return session_hash_u64(sm, sm->owners[slot].owner);
}

static bool session_owner_eq(const void *ctx, uint32_t slot)
{
	const struct session_u64_key *k = ctx;
	return k->sm->owners[slot].owner == k->key;
}

uint32_t session_owner_find(const struct locks *sm, uint64_t owner)
{
	struct session_u64_key k = { .sm = sm, .key = owner };
	uint32_t o = hindex_find(&sm->owner_index, session_hash_u64(sm, owner), session_owner_eq, &k);
	return o == HINDEX_NONE ? LOCKS_NONE : o;
}

uint32_t session_owner_count(const struct locks *sm, uint64_t owner)
{
	uint32_t o = session_owner_find(sm, owner);
	return o == LOCKS_NONE ? 0 : sm->owners[o].sessions;
}

void session_owner_add(struct locks *sm, uint64_t owner)
{
	uint32_t o = session_owner_find(sm, owner);

	if (o == LOCKS_NONE) {
		/* At most one record per live session: sessions_max fits all. */
		o = slots_alloc(&sm->owner_slots);
		HASP_ASSERT(o != SLOTS_NONE);
		sm->owners[o] = (struct locks_owner){ .owner = owner };
		hindex_insert(&sm->owner_index, session_hash_u64(sm, owner), o);
	}
	sm->owners[o].sessions++;
}

void session_owner_remove(struct locks *sm, uint64_t owner)
{
	uint32_t o = session_owner_find(sm, owner);

	HASP_ASSERT(o != LOCKS_NONE && sm->owners[o].sessions > 0);
	if (--sm->owners[o].sessions > 0)
		return;
	hindex_remove(&sm->owner_index, session_hash_u64(sm, owner), o, session_owner_hash_of, sm);
	memset(&sm->owners[o], 0, sizeof(sm->owners[o])); /* free records are all-zero */
	slots_free(&sm->owner_slots, o);
}

void session_open_reply_fill(const struct locks *sm, uint32_t s, struct locks_reply *r)
{
	const struct locks_session *ss = &sm->sessions[s];

	HASP_ASSERT(slots_used(&sm->session_slots, s));
	r->status = HASP_STATUS_OK;
	r->reason = LOCKS_REASON_NONE;
	r->id = ss->id;
	r->ttl_ms = ss->ttl_ms;
	r->deadline_ms = ss->open_deadline_ms;
	HASP_ASSERT(r->id != 0);
}

void session_cmd_open(struct locks *sm, const struct locks_cmd *cmd)
{
	/* A retried open (same nonce) while its session lives: the same reply
	 * and nothing else, like a duplicate seq (no revision move, no deadline
	 * refresh). Checked first, so that a retry is answered even when the
	 * table has filled since. Refusals are not remembered: they changed
	 * nothing, and a retry simply runs again. */
	if (cmd->nonce != 0) {
		uint32_t s = session_find_nonce(sm, cmd->nonce);
		if (s != LOCKS_NONE && sm->sessions[s].owner != cmd->owner) {
			/* Nonces travel in clear: another identity's open with
			 * the same nonce must not learn or join this session. */
			locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_NONCE_IN_USE);
			return;
		}
		if (s != LOCKS_NONE) {
			session_open_reply_fill(sm, s, &sm->res->reply);
			sm->res->duplicate = true;
			sm->stats.duplicates++;
			return;
		}
	}
	if (!locks_ttl_valid(cmd->ttl_ms)) {
		locks_reply_set(sm, HASP_STATUS_BAD_TTL, LOCKS_REASON_NONE);
		return;
	}
	if (cmd->owner_sessions_max != 0 &&
	    session_owner_count(sm, cmd->owner) >= cmd->owner_sessions_max) {
		locks_reply_set(sm, HASP_STATUS_FULL, LOCKS_REASON_OWNER_SESSIONS_FULL);
		return;
	}
	uint32_t s = slots_alloc(&sm->session_slots);
	if (s == SLOTS_NONE) {
		locks_reply_set(sm, HASP_STATUS_FULL, LOCKS_REASON_SESSIONS_FULL);
		return;
	}
	locks_bump(sm);
	struct locks_session *ss = &sm->sessions[s];
	*ss = (struct locks_session){
		.id = locks_id_make(sm, s),
		.deadline_ms = sm->log_time_ms + cmd->ttl_ms,
		.nonce = cmd->nonce,
		.open_deadline_ms = sm->log_time_ms + cmd->ttl_ms,
		.ttl_ms = cmd->ttl_ms,
		.waiter_head = LOCKS_NONE,
		.owner = cmd->owner,
		.flags = (uint8_t)(cmd->flags & LOCKS_CMD_OWNER_RELEASE),
	};
	/* Its reply window is all zero already: a free slot's records are
	 * (session_end, locks_reset; checked by locks_invariants_ok), so an
	 * open writes none of them and a copy carries none. */
	dheap_insert(&sm->session_heap, s);
	if (ss->nonce != 0)
		hindex_insert(&sm->nonce_index, session_nonce_hash(sm, ss->nonce), s);
	session_owner_add(sm, ss->owner);
	session_open_reply_fill(sm, s, &sm->res->reply);
}

void session_cmd_keepalive(struct locks *sm, uint32_t s)
{
	struct locks_reply *r = &sm->res->reply;
	struct locks_session *ss = &sm->sessions[s];

	/* The deadline moves in session_seq_record(), like for every command of
	 * the session; the reply reports the deadline it will get. */
	locks_bump(sm);
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
	r->id = ss->id;
	r->ttl_ms = ss->ttl_ms;
	r->deadline_ms = sm->log_time_ms + ss->ttl_ms;
}

/* Ends a session: its waiters leave their queues (with their pending
 * private leases) and its reply window goes. The locks it holds stay: they
 * belong to their tokens and leases, and go by RELEASE with the token, by
 * lease expiry or revoke, or by FORCE_RELEASE (docs/STATE_MACHINE.md,
 * "Sessions"). Its lock count goes with it; the locks keep its id, which no
 * later session can have. */
static void session_end(struct locks *sm, uint32_t s)
{
	struct locks_session *ss = &sm->sessions[s];
	uint64_t id = ss->id;

	HASP_ASSERT(sm->bumped);
	while (ss->waiter_head != LOCKS_NONE)
		waiters_drop(sm, ss->waiter_head);
	HASP_ASSERT(ss->waiter_count == 0);
	if (ss->nonce != 0)
		hindex_remove(&sm->nonce_index, session_nonce_hash(sm, ss->nonce), s,
			      session_nonce_hash_of, sm);
	dheap_remove(&sm->session_heap, ss->heap_pos);
	session_owner_remove(sm, ss->owner);
	session_replies_clear(sm, s);
	memset(ss, 0, sizeof(*ss)); /* free records are all-zero, padding too */
	slots_free(&sm->session_slots, s);
	HASP_ASSERT(session_find(sm, id) == LOCKS_NONE);
}

void session_cmd_close(struct locks *sm, uint32_t s)
{
	locks_bump(sm);
	sm->res->reply.id = sm->sessions[s].id;
	session_end(sm, s);
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
}

void session_cmd_expire(struct locks *sm, const struct locks_cmd *cmd)
{
	uint32_t s = session_find(sm, cmd->session_id);

	if (s == LOCKS_NONE) {
		locks_reply_set(sm, HASP_STATUS_NOT_FOUND, LOCKS_REASON_NONE);
		return;
	}
	sm->res->reply.id = cmd->session_id;
	sm->res->reply.deadline_ms = sm->sessions[s].deadline_ms;
	/* The leader decided on its clock; the log decides: a command of the
	 * session committed in between pushed the deadline out, and wins. */
	if (sm->sessions[s].deadline_ms > sm->log_time_ms) {
		sm->stats.expire_noop++;
		locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NOT_DUE);
		return;
	}
	locks_bump(sm);
	session_end(sm, s);
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
}
