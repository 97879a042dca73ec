/*
 * Snapshot write and restore (see snapshot.h). Little-endian throughout:
 *
 * | offset | size | field                                                  |
 * |--------|------|--------------------------------------------------------|
 * | 0      | 4    | magic "HLSM"                                           |
 * | 4      | 2    | version (5; 4, 3 and 2 are still read)                 |
 * | 6      | 2    | flags (0)                                              |
 * | 8      | 8    | total size in bytes, trailer included                  |
 * | 16     | 44   | capacities: locks, leases, sessions, waiters, kv       |
 * |        |      | entries, kv bytes, name bytes, locks/lease, keys/lease, |
 * |        |      | locks/session, session window (u32 each)               |
 * | 60     | 48   | revision, applied index, log time, last term,          |
 * |        |      | time offset (i64), id counter (u64 each)               |
 * | 108    | ...  | sessions, leases, locks, waiters, kv: each a u32 count |
 * |        |      | then records in ascending slot order (below)           |
 * | end-4  | 4    | CRC32C of every byte before it                         |
 *
 * Records (slot u32 first; links are slot numbers, 0xffffffff for none):
 *   session: id, deadline, seq_max, nonce, open_deadline (u64); ttl,
 *            waiter_head, lock_count, waiter_count (u32); v3: owner (u64),
 *            flags (u8); v5: seq_floor (u64); then the cached replies.
 *            v4: a bitmap of the window's slots in use (seq != 0;
 *            ceil(window / 8) bytes, bit k of byte k / 8 for slot k),
 *            then for each such slot in order:
 *            seq, digest (u64), status, reason (u8), a mask (u8) of the
 *            reply's nonzero fields among reserved (u16), position, ttl,
 *            reserved2 (u32), token, id, revision, deadline (u64), bit 0
 *            first, and those fields. v2/v3: all `window` slots, each seq
 *            (u64), v3: digest (u64), and the reply's 48 bytes in full
 *   lease:   id, deadline (u64); ttl, lock_head, waiter_head, kv_head,
 *            lock_count, waiter_count, kv_count, flags (u32)
 *   lock:    token, holder_session_id (u64; the session may have ended);
 *            v3: holder_owner (u64);
 *            lease, lease_next, lease_prev, waiter_head, waiter_tail,
 *            waiter_count (u32); name_len (u8); name
 *   waiter:  lock, session, lease, next, prev, session_next, session_prev,
 *            lease_next, lease_prev (u32)
 *   kv:      create_rev, mod_rev, version (u64); lease, lease_next,
 *            lease_prev (u32); key_len (u8); value_len (u16); key; value
 */
#include "locks/snapshot.h"

#include "common/bytes.h"
#include "common/crc32c.h"
#include "hasp/errors.h"
#include "locks/internal.h"
#include "locks/kv.h"
#include "locks/lease.h"
#include "locks/lock_table.h"
#include "locks/session.h"
#include "locks/waiters.h"

#define SNAP_HEADER_SIZE 108u
#define SNAP_TOTAL_OFFSET 8u /* after the magic, the version and a zero u16 */

static void snap_cfg_write(struct byte_writer *w, const struct locks_config *c)
{
	byte_writer_u32(w, c->locks_max);
	byte_writer_u32(w, c->leases_max);
	byte_writer_u32(w, c->sessions_max);
	byte_writer_u32(w, c->waiters_max);
	byte_writer_u32(w, c->kv_entries_max);
	byte_writer_u32(w, c->kv_bytes_max);
	byte_writer_u32(w, c->lock_name_bytes_max);
	byte_writer_u32(w, c->locks_per_lease_max);
	byte_writer_u32(w, c->keys_per_lease_max);
	byte_writer_u32(w, c->locks_per_session_max);
	byte_writer_u32(w, c->session_window);
}

static void snap_reply_read(struct byte_reader *r, struct locks_reply *out)
{
	out->status = byte_reader_u8(r);
	out->reason = byte_reader_u8(r);
	out->reserved = byte_reader_u16(r);
	out->position = byte_reader_u32(r);
	out->ttl_ms = byte_reader_u32(r);
	out->reserved2 = byte_reader_u32(r);
	out->token = byte_reader_u64(r);
	out->id = byte_reader_u64(r);
	out->revision = byte_reader_u64(r);
	out->deadline_ms = byte_reader_u64(r);
}

/* v4's reply: status, reason, a mask of the nonzero fields, those fields. */
enum {
	SNAP_R_RESERVED = 1u << 0, SNAP_R_POSITION = 1u << 1, SNAP_R_TTL = 1u << 2,
	SNAP_R_RESERVED2 = 1u << 3, SNAP_R_TOKEN = 1u << 4, SNAP_R_ID = 1u << 5,
	SNAP_R_REVISION = 1u << 6, SNAP_R_DEADLINE = 1u << 7,
};

static uint8_t snap_reply_mask(const struct locks_reply *r)
{
	return (uint8_t)((r->reserved ? SNAP_R_RESERVED : 0) | (r->position ? SNAP_R_POSITION : 0) |
			 (r->ttl_ms ? SNAP_R_TTL : 0) | (r->reserved2 ? SNAP_R_RESERVED2 : 0) |
			 (r->token ? SNAP_R_TOKEN : 0) | (r->id ? SNAP_R_ID : 0) |
			 (r->revision ? SNAP_R_REVISION : 0) | (r->deadline_ms ? SNAP_R_DEADLINE : 0));
}

static size_t snap_reply_compact_size(const struct locks_reply *r)
{
	uint8_t m = snap_reply_mask(r);
	return 3 + (m & SNAP_R_RESERVED ? 2 : 0) +
	       4 * (size_t)(!!(m & SNAP_R_POSITION) + !!(m & SNAP_R_TTL) + !!(m & SNAP_R_RESERVED2)) +
	       8 * (size_t)(!!(m & SNAP_R_TOKEN) + !!(m & SNAP_R_ID) + !!(m & SNAP_R_REVISION) +
			    !!(m & SNAP_R_DEADLINE));
}

static void snap_reply_write_compact(struct byte_writer *w, const struct locks_reply *r)
{
	uint8_t m = snap_reply_mask(r);

	byte_writer_u8(w, r->status);
	byte_writer_u8(w, r->reason);
	byte_writer_u8(w, m);
	if (m & SNAP_R_RESERVED)
		byte_writer_u16(w, r->reserved);
	if (m & SNAP_R_POSITION)
		byte_writer_u32(w, r->position);
	if (m & SNAP_R_TTL)
		byte_writer_u32(w, r->ttl_ms);
	if (m & SNAP_R_RESERVED2)
		byte_writer_u32(w, r->reserved2);
	if (m & SNAP_R_TOKEN)
		byte_writer_u64(w, r->token);
	if (m & SNAP_R_ID)
		byte_writer_u64(w, r->id);
	if (m & SNAP_R_REVISION)
		byte_writer_u64(w, r->revision);
	if (m & SNAP_R_DEADLINE)
		byte_writer_u64(w, r->deadline_ms);
}

/* A field the mask names must be nonzero, or the same reply would have two
 * encodings (and snapshot(restore(s)) != s). */
static bool snap_reply_read_compact(struct byte_reader *r, struct locks_reply *out)
{
	out->status = byte_reader_u8(r);
	out->reason = byte_reader_u8(r);
	uint8_t m = byte_reader_u8(r);
	if (m & SNAP_R_RESERVED)
		out->reserved = byte_reader_u16(r);
	if (m & SNAP_R_POSITION)
		out->position = byte_reader_u32(r);
	if (m & SNAP_R_TTL)
		out->ttl_ms = byte_reader_u32(r);
	if (m & SNAP_R_RESERVED2)
		out->reserved2 = byte_reader_u32(r);
	if (m & SNAP_R_TOKEN)
		out->token = byte_reader_u64(r);
	if (m & SNAP_R_ID)
		out->id = byte_reader_u64(r);
	if (m & SNAP_R_REVISION)
		out->revision = byte_reader_u64(r);
	if (m & SNAP_R_DEADLINE)
		out->deadline_ms = byte_reader_u64(r);
	return !r->failed && snap_reply_mask(out) == m;
}

static size_t snap_bitmap_size(uint32_t window)
{
	return ((size_t)window + 7) / 8;
}

/* A session's cached replies as v4 writes them. */
static size_t snap_session_replies_size(const struct locks *sm, uint32_t slot)
{
	uint32_t window = sm->cfg.session_window;
	size_t size = snap_bitmap_size(window);

	for (uint32_t k = 0; k < window; k++) {
		const struct locks_cached_reply *cr = &sm->replies[(uint64_t)slot * window + k];
		if (cr->seq != 0)
			size += 16 + snap_reply_compact_size(&cr->reply);
	}
	return size;
}

static void snap_session_replies_write(struct byte_writer *w, const struct locks *sm, uint32_t slot)
{
	uint32_t window = sm->cfg.session_window;
	const struct locks_cached_reply *ring = &sm->replies[(uint64_t)slot * window];

	for (uint32_t byte = 0; byte < snap_bitmap_size(window); byte++) {
		uint8_t bits = 0;
		for (uint32_t b = 0; b < 8 && byte * 8 + b < window; b++)
			bits |= (uint8_t)((ring[byte * 8 + b].seq != 0) << b);
		byte_writer_u8(w, bits);
	}
	for (uint32_t k = 0; k < window; k++) {
		if (ring[k].seq == 0)
			continue;
		byte_writer_u64(w, ring[k].seq);
		byte_writer_u64(w, ring[k].digest);
		snap_reply_write_compact(w, &ring[k].reply);
	}
}

/* Writes everything but the trailer; with a NULL-sized writer it measures. */
static void snap_body_write(const struct locks *sm, struct byte_writer *w, uint64_t total)
{
	const struct locks_config *c = &sm->cfg;

	byte_writer_u32(w, LOCKS_SNAPSHOT_MAGIC);
	byte_writer_u16(w, LOCKS_SNAPSHOT_VERSION);
	byte_writer_u16(w, 0);
	byte_writer_u64(w, total);
	snap_cfg_write(w, c);
	byte_writer_u64(w, sm->revision);
	byte_writer_u64(w, sm->applied_index);
	byte_writer_u64(w, sm->log_time_ms);
	byte_writer_u64(w, sm->last_term);
	byte_writer_u64(w, (uint64_t)sm->time_offset_ms);
	byte_writer_u64(w, sm->id_counter);

	byte_writer_u32(w, sm->session_slots.used_count);
	for (uint32_t i = 0; i < c->sessions_max; i++) {
		if (!slots_used(&sm->session_slots, i))
			continue;
		const struct locks_session *s = &sm->sessions[i];
		byte_writer_u32(w, i);
		byte_writer_u64(w, s->id);
		byte_writer_u64(w, s->deadline_ms);
		byte_writer_u64(w, s->seq_max);
		byte_writer_u64(w, s->nonce);
		byte_writer_u64(w, s->open_deadline_ms);
		byte_writer_u32(w, s->ttl_ms);
		byte_writer_u32(w, s->waiter_head);
		byte_writer_u32(w, s->lock_count);
		byte_writer_u32(w, s->waiter_count);
		byte_writer_u64(w, s->owner);
		byte_writer_u8(w, s->flags);
		byte_writer_u64(w, s->seq_floor);
		snap_session_replies_write(w, sm, i);
	}
	byte_writer_u32(w, sm->lease_slots.used_count);
	for (uint32_t i = 0; i < c->leases_max; i++) {
		if (!slots_used(&sm->lease_slots, i))
			continue;
		const struct locks_lease *l = &sm->leases[i];
		byte_writer_u32(w, i);
		byte_writer_u64(w, l->id);
		byte_writer_u64(w, l->deadline_ms);
		byte_writer_u32(w, l->ttl_ms);
		byte_writer_u32(w, l->lock_head);
		byte_writer_u32(w, l->waiter_head);
		byte_writer_u32(w, l->kv_head);
		byte_writer_u32(w, l->lock_count);
		byte_writer_u32(w, l->waiter_count);
		byte_writer_u32(w, l->kv_count);
		byte_writer_u32(w, l->flags);
	}
	byte_writer_u32(w, sm->lock_slots.used_count);
	for (uint32_t i = 0; i < c->locks_max; i++) {
		if (!slots_used(&sm->lock_slots, i))
			continue;
		const struct locks_lock *l = &sm->locks[i];
		byte_writer_u32(w, i);
		byte_writer_u64(w, l->token);
		byte_writer_u64(w, l->holder_session_id);
		byte_writer_u64(w, l->holder_owner);
		byte_writer_u32(w, l->lease);
		byte_writer_u32(w, l->lease_next);
		byte_writer_u32(w, l->lease_prev);
		byte_writer_u32(w, l->waiter_head);
		byte_writer_u32(w, l->waiter_tail);
		byte_writer_u32(w, l->waiter_count);
		byte_writer_u8(w, l->name_len);
		byte_writer_copy(w, arena_data(&sm->lock_names, l->name_off), l->name_len);
	}
	byte_writer_u32(w, sm->waiter_slots.used_count);
	for (uint32_t i = 0; i < c->waiters_max; i++) {
		if (!slots_used(&sm->waiter_slots, i))
			continue;
		const struct locks_waiter *x = &sm->waiters[i];
		byte_writer_u32(w, i);
		byte_writer_u32(w, x->lock);
		byte_writer_u32(w, x->session);
		byte_writer_u32(w, x->lease);
		byte_writer_u32(w, x->next);
		byte_writer_u32(w, x->prev);
		byte_writer_u32(w, x->session_next);
		byte_writer_u32(w, x->session_prev);
		byte_writer_u32(w, x->lease_next);
		byte_writer_u32(w, x->lease_prev);
	}
	byte_writer_u32(w, sm->kv_slots.used_count);
	for (uint32_t i = 0; i < c->kv_entries_max; i++) {
		if (!slots_used(&sm->kv_slots, i))
			continue;
		const struct locks_kv *e = &sm->kvs[i];
		byte_writer_u32(w, i);
		byte_writer_u64(w, e->create_revision);
		byte_writer_u64(w, e->mod_revision);
		byte_writer_u64(w, e->version);
		byte_writer_u32(w, e->lease);
		byte_writer_u32(w, e->lease_next);
		byte_writer_u32(w, e->lease_prev);
		byte_writer_u8(w, e->key_len);
		byte_writer_u16(w, e->value_len);
		byte_writer_copy(w, arena_data(&sm->kv_bytes_arena, e->off),
				 (size_t)e->key_len + e->value_len);
	}
}

size_t locks_snapshot_size(const struct locks *sm)
{
	/* Must match snap_body_write() field for field (asserted in debug
	 * builds by locks_snapshot_write). */
	size_t size = SNAP_HEADER_SIZE;
	size += 4 + (size_t)sm->session_slots.used_count * (4 + 40 + 16 + 9 + 8);
	for (uint32_t i = 0; i < sm->cfg.sessions_max; i++)
		if (slots_used(&sm->session_slots, i))
			size += snap_session_replies_size(sm, i);
	size += 4 + (size_t)sm->lease_slots.used_count * (4 + 16 + 32);
	size += 4 + (size_t)sm->lock_slots.used_count * (4 + 24 + 24 + 1) + sm->lock_name_bytes;
	size += 4 + (size_t)sm->waiter_slots.used_count * (4 + 36);
	size += 4 + (size_t)sm->kv_slots.used_count * (4 + 24 + 12 + 1 + 2) + sm->kv_bytes;
	return size + 4;
}

int locks_snapshot_write(const struct locks *sm, uint8_t *buf, size_t buf_size, size_t *written)
{
	struct byte_writer w;

	/* One walk: the header's total is written as 0 and set once the body
	 * is out. Measuring first (locks_snapshot_size) would read every
	 * session's reply window twice, and since version 4 that walk is most
	 * of the work at tens of thousands of sessions. */
	byte_writer_init(&w, buf, buf_size);
	snap_body_write(sm, &w, 0);
	if (w.failed || w.left < 4)
		return -HASP_ETOOBIG;
	size_t size = w.written + 4;
	put_u64le(buf + SNAP_TOTAL_OFFSET, size);
	byte_writer_u32(&w, crc32c(buf, size - 4));
	HASP_ASSERT(w.written == size);
	HASP_DASSERT(size == locks_snapshot_size(sm)); /* the measure matches, field for field */
	*written = size;
	return 0;
}

/* --- Restore: one parser, run twice: first to validate (sm untouched),
 * then to load. --- */

static bool snap_link_ok(uint32_t link, uint32_t capacity)
{
	return link == LOCKS_NONE || link < capacity;
}

/* Reads the next record's slot: strictly ascending and in range. */
static bool snap_slot(struct byte_reader *r, uint32_t *slot, int64_t *prev, uint32_t capacity)
{
	*slot = byte_reader_u32(r);
	if (r->failed || *slot >= capacity || (int64_t)*slot <= *prev)
		return false;
	*prev = *slot;
	return true;
}

/* A session's cached replies, in the snapshot's version; v4: a slot the
 * bitmap names holds a seq other than 0, and the bitmap's spare bits are 0
 * (one encoding per state). */
static int snap_session_replies_read(struct locks *sm, struct byte_reader *r, uint16_t version,
				     uint32_t slot, bool load)
{
	uint32_t window = sm->cfg.session_window;
	struct locks_cached_reply *ring = &sm->replies[(uint64_t)slot * window];
	uint8_t bitmap[(LOCKS_WINDOW_MAX + 7) / 8];

	if (version < 4) {
		for (uint32_t k = 0; k < window; k++) {
			struct locks_cached_reply cr = { 0 };
			cr.seq = byte_reader_u64(r);
			if (version >= 3)
				cr.digest = byte_reader_u64(r);
			snap_reply_read(r, &cr.reply);
			if (load)
				ring[k] = cr;
		}
		return r->failed ? -HASP_ECORRUPT : 0;
	}
	size_t bytes = snap_bitmap_size(window);
	const uint8_t *taken = byte_reader_take(r, bytes);
	if (taken == NULL || bytes > sizeof(bitmap))
		return -HASP_ECORRUPT;
	memcpy(bitmap, taken, bytes);
	if (window % 8 != 0 && (bitmap[bytes - 1] >> (window % 8)) != 0)
		return -HASP_ECORRUPT;
	for (uint32_t k = 0; k < window; k++) {
		struct locks_cached_reply cr = { 0 };
		if (bitmap[k / 8] & (1u << (k % 8))) {
			cr.seq = byte_reader_u64(r);
			cr.digest = byte_reader_u64(r);
			if (!snap_reply_read_compact(r, &cr.reply) || cr.seq == 0)
				return -HASP_ECORRUPT;
		}
		if (load)
			ring[k] = cr;
	}
	return 0;
}

static int snap_parse(struct locks *sm, struct byte_reader *r, uint16_t version, bool load)
{
	const struct locks_config *c = &sm->cfg;
	uint64_t name_bytes = 0, kv_bytes = 0;
	int64_t prev;
	uint32_t count, slot;

	uint64_t revision = byte_reader_u64(r);
	uint64_t applied_index = byte_reader_u64(r);
	uint64_t log_time = byte_reader_u64(r);
	uint64_t last_term = byte_reader_u64(r);
	int64_t offset = (int64_t)byte_reader_u64(r);
	uint64_t id_counter = byte_reader_u64(r);
	if (r->failed || log_time > LOCKS_TIME_MS_MAX || id_counter >= (1ull << 40))
		return -HASP_ECORRUPT;
	if (load) {
		sm->revision = revision;
		sm->applied_index = applied_index;
		sm->log_time_ms = log_time;
		sm->last_term = last_term;
		sm->time_offset_ms = offset;
		sm->id_counter = id_counter;
	}

	count = byte_reader_u32(r);
	prev = -1;
	for (uint32_t n = 0; n < count; n++) {
		if (!snap_slot(r, &slot, &prev, c->sessions_max))
			return -HASP_ECORRUPT;
		struct locks_session s = { 0 };
		s.id = byte_reader_u64(r);
		s.deadline_ms = byte_reader_u64(r);
		s.seq_max = byte_reader_u64(r);
		s.nonce = byte_reader_u64(r);
		s.open_deadline_ms = byte_reader_u64(r);
		s.ttl_ms = byte_reader_u32(r);
		s.waiter_head = byte_reader_u32(r);
		s.lock_count = byte_reader_u32(r);
		s.waiter_count = byte_reader_u32(r);
		if (version >= 3) {
			s.owner = byte_reader_u64(r);
			s.flags = byte_reader_u8(r);
		}
		if (version >= 5)
			s.seq_floor = byte_reader_u64(r);
		if (r->failed || (s.flags & ~LOCKS_CMD_OWNER_RELEASE) != 0 || s.seq_floor > s.seq_max ||
		    locks_id_slot(s.id) != slot || !snap_link_ok(s.waiter_head, c->waiters_max))
			return -HASP_ECORRUPT;
		if (snap_session_replies_read(sm, r, version, slot, load) != 0)
			return -HASP_ECORRUPT;
		if (load) {
			memcpy(&sm->sessions[slot], &s, sizeof(s));
			slots_take(&sm->session_slots, slot);
			dheap_insert(&sm->session_heap, slot);
			/* Two sessions with one nonce would both be indexed; the
			 * invariant check after loading refuses that. */
			if (s.nonce != 0)
				hindex_insert(&sm->nonce_index, session_nonce_hash(sm, s.nonce), slot);
			session_owner_add(sm, s.owner);
		}
	}

	count = byte_reader_u32(r);
	prev = -1;
	for (uint32_t n = 0; n < count; n++) {
		if (!snap_slot(r, &slot, &prev, c->leases_max))
			return -HASP_ECORRUPT;
		struct locks_lease l = { 0 };
		l.id = byte_reader_u64(r);
		l.deadline_ms = byte_reader_u64(r);
		l.ttl_ms = byte_reader_u32(r);
		l.lock_head = byte_reader_u32(r);
		l.waiter_head = byte_reader_u32(r);
		l.kv_head = byte_reader_u32(r);
		l.lock_count = byte_reader_u32(r);
		l.waiter_count = byte_reader_u32(r);
		l.kv_count = byte_reader_u32(r);
		l.flags = byte_reader_u32(r);
		l.heap_pos = LOCKS_NONE;
		if (r->failed || locks_id_slot(l.id) != slot || !snap_link_ok(l.lock_head, c->locks_max) ||
		    !snap_link_ok(l.waiter_head, c->waiters_max) ||
		    !snap_link_ok(l.kv_head, c->kv_entries_max) || (l.flags & ~LEASE_FLAG_PRIVATE) != 0)
			return -HASP_ECORRUPT;
		if (load) {
			memcpy(&sm->leases[slot], &l, sizeof(l));
			slots_take(&sm->lease_slots, slot);
			if (l.deadline_ms != LOCKS_DEADLINE_NONE)
				dheap_insert(&sm->lease_heap, slot);
		}
	}

	count = byte_reader_u32(r);
	prev = -1;
	for (uint32_t n = 0; n < count; n++) {
		if (!snap_slot(r, &slot, &prev, c->locks_max))
			return -HASP_ECORRUPT;
		struct locks_lock l = { 0 };
		l.token = byte_reader_u64(r);
		l.holder_session_id = byte_reader_u64(r);
		if (version >= 3)
			l.holder_owner = byte_reader_u64(r);
		l.lease = byte_reader_u32(r);
		l.lease_next = byte_reader_u32(r);
		l.lease_prev = byte_reader_u32(r);
		l.waiter_head = byte_reader_u32(r);
		l.waiter_tail = byte_reader_u32(r);
		l.waiter_count = byte_reader_u32(r);
		l.name_len = byte_reader_u8(r);
		const uint8_t *name = byte_reader_take(r, l.name_len);
		if (r->failed || !locks_name_valid(name, l.name_len) || l.holder_session_id == 0 ||
		    locks_id_slot(l.holder_session_id) >= c->sessions_max ||
		    (l.holder_session_id >> LOCKS_ID_SLOT_BITS) > id_counter ||
		    l.lease >= c->leases_max || !snap_link_ok(l.lease_next, c->locks_max) ||
		    !snap_link_ok(l.lease_prev, c->locks_max) ||
		    !snap_link_ok(l.waiter_head, c->waiters_max) ||
		    !snap_link_ok(l.waiter_tail, c->waiters_max))
			return -HASP_ECORRUPT;
		name_bytes += l.name_len;
		if (name_bytes > c->lock_name_bytes_max)
			return -HASP_ECORRUPT;
		if (load) {
			l.hash = hindex_hash_bytes(c->hash_seed, name, l.name_len);
			memcpy(&sm->locks[slot], &l, sizeof(l));
			slots_take(&sm->lock_slots, slot);
			sm->locks[slot].name_off = arena_append(&sm->lock_names, slot, name, l.name_len);
			hindex_insert(&sm->lock_index, l.hash, slot);
		}
	}

	count = byte_reader_u32(r);
	prev = -1;
	for (uint32_t n = 0; n < count; n++) {
		if (!snap_slot(r, &slot, &prev, c->waiters_max))
			return -HASP_ECORRUPT;
		struct locks_waiter x = { 0 };
		x.lock = byte_reader_u32(r);
		x.session = byte_reader_u32(r);
		x.lease = byte_reader_u32(r);
		x.next = byte_reader_u32(r);
		x.prev = byte_reader_u32(r);
		x.session_next = byte_reader_u32(r);
		x.session_prev = byte_reader_u32(r);
		x.lease_next = byte_reader_u32(r);
		x.lease_prev = byte_reader_u32(r);
		if (r->failed || x.lock >= c->locks_max || x.session >= c->sessions_max ||
		    x.lease >= c->leases_max || !snap_link_ok(x.next, c->waiters_max) ||
		    !snap_link_ok(x.prev, c->waiters_max) || !snap_link_ok(x.session_next, c->waiters_max) ||
		    !snap_link_ok(x.session_prev, c->waiters_max) ||
		    !snap_link_ok(x.lease_next, c->waiters_max) || !snap_link_ok(x.lease_prev, c->waiters_max))
			return -HASP_ECORRUPT;
		if (load) {
			sm->waiters[slot] = x;
			slots_take(&sm->waiter_slots, slot);
		}
	}

	count = byte_reader_u32(r);
	prev = -1;
	for (uint32_t n = 0; n < count; n++) {
		if (!snap_slot(r, &slot, &prev, c->kv_entries_max))
			return -HASP_ECORRUPT;
		struct locks_kv e = { 0 };
		e.create_revision = byte_reader_u64(r);
		e.mod_revision = byte_reader_u64(r);
		e.version = byte_reader_u64(r);
		e.lease = byte_reader_u32(r);
		e.lease_next = byte_reader_u32(r);
		e.lease_prev = byte_reader_u32(r);
		e.key_len = byte_reader_u8(r);
		e.value_len = byte_reader_u16(r);
		const uint8_t *blob = byte_reader_take(r, (size_t)e.key_len + e.value_len);
		if (r->failed || !locks_name_valid(blob, e.key_len) || e.value_len > HASP_VALUE_SIZE_MAX ||
		    !snap_link_ok(e.lease, c->leases_max) || !snap_link_ok(e.lease_next, c->kv_entries_max) ||
		    !snap_link_ok(e.lease_prev, c->kv_entries_max))
			return -HASP_ECORRUPT;
		kv_bytes += (uint64_t)e.key_len + e.value_len;
		if (kv_bytes > c->kv_bytes_max)
			return -HASP_ECORRUPT;
		if (load) {
			e.hash = hindex_hash_bytes(c->hash_seed, blob, e.key_len);
			memcpy(&sm->kvs[slot], &e, sizeof(e));
			slots_take(&sm->kv_slots, slot);
			sm->kvs[slot].off = arena_append(&sm->kv_bytes_arena, slot, blob,
							 (uint32_t)e.key_len + e.value_len);
			hindex_insert(&sm->kv_index, e.hash, slot);
		}
	}
	if (r->failed || r->left != 4)
		return -HASP_ECORRUPT;
	if (load) {
		sm->lock_name_bytes = name_bytes;
		sm->kv_bytes = kv_bytes;
	}
	return 0;
}

/* Checks everything before the body: size, magic, version, CRC, capacities. */
static int snap_header(const struct locks *sm, const uint8_t *buf, size_t size, struct byte_reader *r,
		       uint16_t *version)
{
	if (size < SNAP_HEADER_SIZE + 4)
		return -HASP_ETRUNCATED;
	byte_reader_init(r, buf, size);
	if (byte_reader_u32(r) != LOCKS_SNAPSHOT_MAGIC)
		return -HASP_EMAGIC;
	*version = byte_reader_u16(r);
	if (*version < 2 || *version > LOCKS_SNAPSHOT_VERSION)
		return -HASP_EVERSION;
	if (byte_reader_u16(r) != 0)
		return -HASP_ECORRUPT;
	uint64_t total = byte_reader_u64(r);
	if (total > size)
		return -HASP_ETRUNCATED;
	if (total != size)
		return -HASP_ELENGTH;
	if (crc32c(buf, size - 4) != get_u32le(buf + size - 4))
		return -HASP_ECORRUPT;
	uint8_t cfg_bytes[44];
	struct byte_writer w;
	byte_writer_init(&w, cfg_bytes, sizeof(cfg_bytes));
	snap_cfg_write(&w, &sm->cfg);
	const uint8_t *theirs = byte_reader_take(r, sizeof(cfg_bytes));
	if (theirs == NULL || memcmp(theirs, cfg_bytes, sizeof(cfg_bytes)) != 0)
		return -HASP_ECONFIG;
	return 0;
}

int locks_snapshot_restore(struct locks *sm, const uint8_t *buf, size_t size)
{
	struct byte_reader r;
	uint16_t version = 0;
	int rc = snap_header(sm, buf, size, &r, &version);

	if (rc != 0)
		return rc;
	struct byte_reader check = r;
	rc = snap_parse(sm, &check, version, false);
	if (rc != 0)
		return rc;
	locks_reset(sm);
	rc = snap_parse(sm, &r, version, true);
	HASP_ASSERT(rc == 0); /* the validating pass accepted the same bytes */
	if (!locks_invariants_ok(sm)) {
		locks_reset(sm);
		return -HASP_ECORRUPT;
	}
	return 0;
}
