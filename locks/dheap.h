/*
 * A binary min-heap of record slots ordered by deadline, for the leader's
 * expiry queries (earliest deadline, everything due at a log time).
 *
 * The heap holds only slot numbers; the owner table stores each record's
 * deadline and its position in the heap, reached through callbacks, so a
 * keepalive can move a record in O(log n). Leader-side only: apply never
 * depends on the heap's layout, which is why a restored machine may rebuild
 * it in another shape.
 */
#ifndef HASP_LOCKS_DHEAP_H
#define HASP_LOCKS_DHEAP_H

#include <stdint.h>

#define DHEAP_NONE UINT32_MAX

typedef uint64_t dheap_key_fn(const void *ctx, uint32_t slot);
typedef void dheap_set_pos_fn(void *ctx, uint32_t slot, uint32_t pos);

struct dheap {
	uint32_t *items;
	uint32_t count;
	uint32_t capacity;
	dheap_key_fn *key;
	dheap_set_pos_fn *set_pos;
	void *ctx;
};

int dheap_init(struct dheap *h, uint32_t capacity, dheap_key_fn *key, dheap_set_pos_fn *set_pos,
	       void *ctx) __attribute__((warn_unused_result));
void dheap_deinit(struct dheap *h);
void dheap_clear(struct dheap *h);
/* Makes dst's items those of src; both of the same capacity. The
 * positions the heap keeps in its owner's records are the owner's to copy. */
void dheap_copy(struct dheap *dst, const struct dheap *src);

void dheap_insert(struct dheap *h, uint32_t slot);
void dheap_remove(struct dheap *h, uint32_t pos);
/* Restores order after the key of the item at `pos` changed. */
void dheap_update(struct dheap *h, uint32_t pos);

/* The slot with the smallest key, or DHEAP_NONE. */
static inline uint32_t dheap_min(const struct dheap *h)
{
	return h->count > 0 ? h->items[0] : DHEAP_NONE;
}

/* Collects up to `max` slots whose key is <= `limit` (any order). */
uint32_t dheap_due(const struct dheap *h, uint64_t limit, uint32_t *slots, uint32_t max);

#endif
