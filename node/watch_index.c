/*
 * The watch registry's indexes (watch_index.h).
 *
 * Why a hash per prefix length rather than a trie or a sorted prefix
 * table: the memory stays one fixed array of entries plus a table of
 * 32-bit slots, whatever the names (a trie over 128-byte names needs
 * child links per byte or per edge, allocated as names arrive); an insert
 * or a removal is O(1) (a sorted table shifts); and an event on a name of
 * L bytes costs one pass over its bytes (the hash is computed
 * incrementally, byte by byte) plus one probe per prefix length that some
 * prefix watch uses, plus its matching watchers. Watches on one key share
 * one table slot and are chained from it, so 10,000 watchers of one lock
 * are one probe and a walk of 10,000 entries.
 *
 * The hash is seeded per node (names are client input: a client must not
 * be able to pick names that all fall into one probe run). Removal from
 * the table is the backward-shift delete of linear probing (no
 * tombstones), as notify.c's session table does.
 */
#include "node/watch_index.h"

#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "hasp/errors.h"

int watch_index_init(struct watch_index *x, uint32_t capacity, uint64_t seed)
{
	memset(x, 0, sizeof(*x));
	if (capacity == 0 || capacity > (1u << 30))
		return -HASP_EINVAL;
	uint32_t size = 16;
	while (size < 2u * capacity)
		size <<= 1;
	x->w = hasp_calloc(capacity, sizeof(*x->w));
	x->table = hasp_calloc(size, sizeof(*x->table));
	if (x->w == NULL || x->table == NULL) {
		watch_index_deinit(x);
		return -HASP_ENOMEM;
	}
	memset(x->table, 0xff, (size_t)size * sizeof(*x->table)); /* WATCH_NONE */
	x->mask = size - 1;
	x->capacity = capacity;
	x->free_head = WATCH_NONE;
	x->held_head = x->held_tail = WATCH_NONE;
	x->seed = seed;
	return 0;
}

void watch_index_deinit(struct watch_index *x)
{
	hasp_free(x->w);
	hasp_free(x->table);
	x->w = NULL;
	x->table = NULL;
	x->capacity = 0;
}

size_t watch_index_bytes_per_watch(const struct watch_index *x)
{
	HASP_ASSERT(x->capacity > 0);
	size_t table = ((size_t)x->mask + 1) * sizeof(*x->table);
	return sizeof(struct watch) + (table + x->capacity - 1) / x->capacity;
}

/* ---- the key hash ---- */

#define HASH_START(x) ((x)->seed ^ 0xcbf29ce484222325ull)

static inline uint64_t hash_byte(uint64_t h, uint8_t b)
{
	return (h ^ b) * 0x100000001b3ull;
}

/* The hash of a key from the running hash of its name's bytes. */
static inline uint32_t hash_final(const struct watch_index *x, uint64_t h, uint8_t len, bool prefix)
{
	h ^= ((uint64_t)len << 1 | (uint64_t)prefix) + (x->seed >> 7);
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return (uint32_t)h;
}

static uint32_t key_hash(const struct watch_index *x, const uint8_t *name, uint8_t len, bool prefix)
{
	uint64_t h = HASH_START(x);
	for (uint8_t i = 0; i < len; i++)
		h = hash_byte(h, name[i]);
	return hash_final(x, h, len, prefix);
}

static bool key_equal(const struct watch *w, uint32_t hash, const uint8_t *name, uint8_t len,
		      bool prefix)
{
	return w->hash == hash && w->prefix == prefix && w->name_len == len &&
	       memcmp(w->name, name, len) == 0;
}

/* The table slot holding the key, or the free slot where it would go. */
static uint32_t slot_of(const struct watch_index *x, uint32_t hash, const uint8_t *name, uint8_t len,
			bool prefix)
{
	uint32_t s = hash & x->mask;
	/* At most half full: a free slot ends every probe run. */
	while (x->table[s] != WATCH_NONE && !key_equal(&x->w[x->table[s]], hash, name, len, prefix))
		s = (s + 1) & x->mask;
	return s;
}

/* Deletes table slot s, shifting later entries of its run back. */
static void slot_delete(struct watch_index *x, uint32_t s)
{
	x->table[s] = WATCH_NONE;
	for (uint32_t j = (s + 1) & x->mask; x->table[j] != WATCH_NONE; j = (j + 1) & x->mask) {
		uint32_t home = x->w[x->table[j]].hash & x->mask;
		/* j may move back to the hole s when its home is not in (s, j]. */
		bool stays = s <= j ? (home > s && home <= j) : (home > s || home <= j);
		if (!stays) {
			x->table[s] = x->table[j];
			x->table[j] = WATCH_NONE;
			s = j;
		}
	}
}

/* ---- sessions ---- */

uint32_t watch_index_session_find(const struct watch_index *x, uint32_t head, const uint8_t *name,
				  uint8_t len, bool prefix)
{
	for (uint32_t i = head; i != WATCH_NONE; i = x->w[i].sess_next) {
		const struct watch *w = &x->w[i];
		if (w->prefix == prefix && w->name_len == len && memcmp(w->name, name, len) == 0)
			return i;
	}
	return WATCH_NONE;
}

uint32_t watch_index_session_count(const struct watch_index *x, uint32_t head)
{
	uint32_t n = 0;
	for (uint32_t i = head; i != WATCH_NONE; i = x->w[i].sess_next)
		n++;
	return n;
}

/* ---- add and remove ---- */

uint32_t watch_index_add(struct watch_index *x, uint32_t *session_head, uint64_t session_id,
			 const uint8_t *name, uint8_t len, bool prefix)
{
	HASP_ASSERT(session_id != 0 && len <= HASP_NAME_SIZE_MAX);
	uint32_t i;
	if (x->free_head != WATCH_NONE) {
		i = x->free_head;
		x->free_head = x->w[i].key_next;
	} else if (x->top < x->capacity) {
		i = x->top++;
	} else {
		return WATCH_NONE;
	}
	struct watch *w = &x->w[i];
	HASP_ASSERT(w->session_id == 0);
	memset(w, 0, offsetof(struct watch, name)); /* the names are overwritten or unused */
	w->session_id = session_id;
	w->prefix = prefix;
	w->name_len = len;
	memcpy(w->name, name, len);
	w->hash = key_hash(x, name, len, prefix);
	w->epoch = x->epoch;
	w->held_next = w->held_prev = WATCH_NONE;

	/* First of its key: the table slot names it, the old first follows. */
	uint32_t s = slot_of(x, w->hash, name, len, prefix);
	w->key_prev = WATCH_NONE;
	w->key_next = x->table[s];
	if (w->key_next != WATCH_NONE) {
		x->w[w->key_next].key_prev = i;
	} else {
		x->keys++;
		if (prefix && x->prefix_keys[len]++ == 0)
			x->prefix_lens_used++;
	}
	x->table[s] = i;

	w->sess_prev = WATCH_NONE;
	w->sess_next = *session_head;
	if (w->sess_next != WATCH_NONE)
		x->w[w->sess_next].sess_prev = i;
	*session_head = i;

	x->count++;
	HASP_ASSERT(x->count <= x->capacity && x->keys <= x->count);
	return i;
}

void watch_index_remove(struct watch_index *x, uint32_t *session_head, uint32_t i)
{
	HASP_ASSERT(i < x->top);
	struct watch *w = &x->w[i];
	HASP_ASSERT(w->session_id != 0 && x->count > 0);
	watch_index_unhold(x, i);

	if (w->key_prev != WATCH_NONE) {
		x->w[w->key_prev].key_next = w->key_next;
	} else {
		uint32_t s = slot_of(x, w->hash, w->name, w->name_len, w->prefix);
		HASP_ASSERT(x->table[s] == i);
		if (w->key_next != WATCH_NONE) {
			x->table[s] = w->key_next;
		} else {
			slot_delete(x, s);
			x->keys--;
			if (w->prefix && --x->prefix_keys[w->name_len] == 0)
				x->prefix_lens_used--;
		}
	}
	if (w->key_next != WATCH_NONE)
		x->w[w->key_next].key_prev = w->key_prev;

	if (w->sess_prev != WATCH_NONE)
		x->w[w->sess_prev].sess_next = w->sess_next;
	else
		*session_head = w->sess_next;
	if (w->sess_next != WATCH_NONE)
		x->w[w->sess_next].sess_prev = w->sess_prev;

	w->session_id = 0;
	w->key_next = x->free_head;
	x->free_head = i;
	x->count--;
}

uint32_t watch_index_remove_session(struct watch_index *x, uint32_t *session_head)
{
	uint32_t held = 0;
	while (*session_head != WATCH_NONE) {
		held += x->w[*session_head].queued;
		watch_index_remove(x, session_head, *session_head);
	}
	return held;
}

/* ---- events ---- */

static void visit_key(struct watch_index *x, uint32_t hash, const uint8_t *name, uint8_t len,
		      bool prefix, watch_visit_fn *visit, void *arg)
{
	uint32_t s = slot_of(x, hash, name, len, prefix);
	for (uint32_t i = x->table[s]; i != WATCH_NONE;) {
		uint32_t next = x->w[i].key_next;
		visit(arg, x, i);
		i = next;
	}
}

void watch_index_match(struct watch_index *x, const uint8_t *name, uint8_t len,
		       watch_visit_fn *visit, void *arg)
{
	if (x->count == 0)
		return;
	uint64_t h = HASH_START(x);
	uint32_t lens_left = x->prefix_lens_used;
	for (uint32_t l = 0;; l++) {
		if (lens_left > 0 && x->prefix_keys[l] > 0) {
			lens_left--;
			visit_key(x, hash_final(x, h, (uint8_t)l, true), name, (uint8_t)l, true, visit, arg);
		}
		if (l == len)
			break;
		h = hash_byte(h, name[l]);
	}
	visit_key(x, hash_final(x, h, len, false), name, len, false, visit, arg);
}

/* ---- the held FIFO ---- */

void watch_index_hold(struct watch_index *x, uint32_t i)
{
	struct watch *w = &x->w[i];
	HASP_ASSERT(w->session_id != 0);
	if (w->queued)
		return;
	w->queued = true;
	w->held_next = WATCH_NONE;
	w->held_prev = x->held_tail;
	if (x->held_tail != WATCH_NONE)
		x->w[x->held_tail].held_next = i;
	else
		x->held_head = i;
	x->held_tail = i;
	x->held_count++;
}

void watch_index_unhold(struct watch_index *x, uint32_t i)
{
	struct watch *w = &x->w[i];
	if (!w->queued)
		return;
	if (w->held_prev != WATCH_NONE)
		x->w[w->held_prev].held_next = w->held_next;
	else
		x->held_head = w->held_next;
	if (w->held_next != WATCH_NONE)
		x->w[w->held_next].held_prev = w->held_prev;
	else
		x->held_tail = w->held_prev;
	w->queued = false;
	w->held_next = w->held_prev = WATCH_NONE;
	HASP_ASSERT(x->held_count > 0);
	x->held_count--;
}

void watch_index_new_epoch(struct watch_index *x)
{
	x->epoch++;
}

/* ---- invariants ---- */

static bool check_key_chains(const struct watch_index *x)
{
	uint32_t keys = 0, chained = 0;
	uint32_t prefix_keys[HASP_NAME_SIZE_MAX + 1] = { 0 };
	for (uint32_t s = 0; s <= x->mask; s++) {
		uint32_t i = x->table[s];
		if (i == WATCH_NONE)
			continue;
		if (i >= x->top || x->w[i].session_id == 0 || x->w[i].key_prev != WATCH_NONE)
			return false;
		const struct watch *head = &x->w[i];
		if (slot_of(x, head->hash, head->name, head->name_len, head->prefix) != s)
			return false;
		keys++;
		prefix_keys[head->name_len] += head->prefix;
		for (uint32_t prev = WATCH_NONE; i != WATCH_NONE; prev = i, i = x->w[i].key_next) {
			const struct watch *w = &x->w[i];
			if (i >= x->top || w->session_id == 0 || w->key_prev != prev || chained++ > x->count ||
			    !key_equal(w, head->hash, head->name, head->name_len, head->prefix))
				return false;
		}
	}
	uint32_t lens = 0;
	for (uint32_t l = 0; l <= HASP_NAME_SIZE_MAX; l++) {
		if (prefix_keys[l] != x->prefix_keys[l])
			return false;
		lens += prefix_keys[l] > 0;
	}
	return keys == x->keys && chained == x->count && lens == x->prefix_lens_used;
}

bool watch_index_check(const struct watch_index *x)
{
	uint32_t used = 0, free = 0, queued = 0;
	for (uint32_t i = 0; i < x->top; i++) {
		used += x->w[i].session_id != 0;
		queued += x->w[i].session_id != 0 && x->w[i].queued;
	}
	for (uint32_t i = x->free_head; i != WATCH_NONE; i = x->w[i].key_next)
		if (i >= x->top || x->w[i].session_id != 0 || free++ > x->top)
			return false;
	if (used != x->count || used + free != x->top || queued != x->held_count)
		return false;
	uint32_t fifo = 0;
	for (uint32_t i = x->held_head, prev = WATCH_NONE; i != WATCH_NONE;
	     prev = i, i = x->w[i].held_next) {
		if (!x->w[i].queued || x->w[i].held_prev != prev || fifo++ > x->count)
			return false;
		if (x->w[i].held_next == WATCH_NONE && x->held_tail != i)
			return false;
	}
	return fifo == x->held_count && check_key_chains(x);
}
