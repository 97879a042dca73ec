/*
 * Binary min-heap with positions stored by the owner (see dheap.h).
 */
#include "locks/dheap.h"

#include "locks/zalloc.h"
#include "common/assert.h"
#include "hasp/errors.h"

int dheap_init(struct dheap *h, uint32_t capacity, dheap_key_fn *key, dheap_set_pos_fn *set_pos,
	       void *ctx)
{
	*h = (struct dheap){ .capacity = capacity, .key = key, .set_pos = set_pos, .ctx = ctx };
	h->items = locks_zalloc(capacity, sizeof(uint32_t));
	return h->items == NULL ? -HASP_ENOMEM : 0;
}

void dheap_deinit(struct dheap *h)
{
	hasp_free(h->items);
	h->items = NULL;
}

void dheap_copy(struct dheap *dst, const struct dheap *src)
{
	HASP_ASSERT(dst->capacity == src->capacity);
	memcpy(dst->items, src->items, (size_t)src->count * sizeof(uint32_t));
	dst->count = src->count;
}

void dheap_clear(struct dheap *h)
{
	h->count = 0;
}

static void dheap_place(struct dheap *h, uint32_t pos, uint32_t slot)
{
	h->items[pos] = slot;
	h->set_pos(h->ctx, slot, pos);
}

static void dheap_sift_up(struct dheap *h, uint32_t pos)
{
	uint32_t slot = h->items[pos];
	uint64_t k = h->key(h->ctx, slot);

	while (pos > 0) {
		uint32_t parent = (pos - 1) / 2;
		if (h->key(h->ctx, h->items[parent]) <= k)
			break;
		dheap_place(h, pos, h->items[parent]);
		pos = parent;
	}
	dheap_place(h, pos, slot);
}

static void dheap_sift_down(struct dheap *h, uint32_t pos)
{
	uint32_t slot = h->items[pos];
	uint64_t k = h->key(h->ctx, slot);

	for (;;) {
		uint32_t child = 2 * pos + 1;
		if (child >= h->count)
			break;
		uint64_t ck = h->key(h->ctx, h->items[child]);
		if (child + 1 < h->count) {
			uint64_t rk = h->key(h->ctx, h->items[child + 1]);
			if (rk < ck) {
				child++;
				ck = rk;
			}
		}
		if (k <= ck)
			break;
		dheap_place(h, pos, h->items[child]);
		pos = child;
	}
	dheap_place(h, pos, slot);
}

void dheap_insert(struct dheap *h, uint32_t slot)
{
	HASP_ASSERT(h->count < h->capacity);
	h->items[h->count] = slot;
	h->count++;
	dheap_sift_up(h, h->count - 1);
}

void dheap_remove(struct dheap *h, uint32_t pos)
{
	HASP_ASSERT(pos < h->count);
	uint32_t last = h->items[h->count - 1];
	h->count--;
	if (pos == h->count)
		return;
	dheap_place(h, pos, last);
	dheap_update(h, pos);
}

void dheap_update(struct dheap *h, uint32_t pos)
{
	HASP_ASSERT(pos < h->count);
	if (pos > 0 && h->key(h->ctx, h->items[(pos - 1) / 2]) > h->key(h->ctx, h->items[pos]))
		dheap_sift_up(h, pos);
	else
		dheap_sift_down(h, pos);
}

uint32_t dheap_due(const struct dheap *h, uint64_t limit, uint32_t *slots, uint32_t max)
{
	/* Depth-first over the subtree of due items; `slots` doubles as the
	 * output, the explicit stack is the positions still to visit. */
	uint32_t found = 0;
	uint32_t stack[64];
	uint32_t depth = 0;

	if (h->count == 0 || max == 0)
		return 0;
	stack[depth++] = 0;
	while (depth > 0 && found < max) {
		uint32_t pos = stack[--depth];
		if (h->key(h->ctx, h->items[pos]) > limit)
			continue;
		slots[found++] = h->items[pos];
		/* Children of a due item may be due; a heap of depth < 32 never
		 * needs more than ~2 stack entries per level. */
		for (uint32_t c = 2 * pos + 1; c <= 2 * pos + 2 && c < h->count; c++) {
			HASP_ASSERT(depth < 64);
			stack[depth++] = c;
		}
	}
	return found;
}
