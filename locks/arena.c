/*
 * The compacting arena (see arena.h). Header layout, little-endian:
 *   offset 0  u32 owner (ARENA_OWNER_DEAD once freed)
 *   offset 4  u16 data size
 */
#include "locks/arena.h"

#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/bytes.h"
#include "hasp/errors.h"

uint64_t arena_size_for(uint64_t data_max, uint64_t blob_max)
{
	uint64_t budget = data_max + blob_max * ARENA_HEADER_SIZE;

	return budget + budget / 2 + 64u;
}

int arena_init(struct arena *a, uint64_t size, arena_moved_fn *moved, void *moved_ctx)
{
	HASP_ASSERT(moved != NULL);
	*a = (struct arena){ .moved = moved, .moved_ctx = moved_ctx };
	if (size > UINT32_MAX)
		return -HASP_ECONFIG;
	a->base = hasp_alloc((size_t)size);
	if (a->base == NULL)
		return -HASP_ENOMEM;
	a->size = (uint32_t)size;
	return 0;
}

void arena_copy(struct arena *dst, const struct arena *src)
{
	HASP_ASSERT(dst->size == src->size);
	memcpy(dst->base, src->base, src->tail);
	dst->tail = src->tail;
	dst->live_size = src->live_size;
	dst->compaction_count = src->compaction_count;
}

void arena_deinit(struct arena *a)
{
	hasp_free(a->base);
	a->base = NULL;
}

void arena_clear(struct arena *a)
{
	a->tail = 0;
	a->live_size = 0;
}

/* Slides live blobs down over dead ones, in address order. */
static void arena_compact(struct arena *a)
{
	uint32_t read = 0, write = 0;

	while (read < a->tail) {
		uint32_t owner = get_u32le(a->base + read);
		uint32_t total = ARENA_HEADER_SIZE + get_u16le(a->base + read + 4);
		HASP_ASSERT(read + total <= a->tail);
		if (owner != ARENA_OWNER_DEAD) {
			if (write != read) {
				memmove(a->base + write, a->base + read, total);
				a->moved(a->moved_ctx, owner, write + ARENA_HEADER_SIZE);
			}
			write += total;
		}
		read += total;
	}
	HASP_ASSERT(write == a->live_size);
	a->tail = write;
	a->compaction_count++;
}

uint32_t arena_append(struct arena *a, uint32_t owner, const void *data, uint32_t size)
{
	uint32_t total = ARENA_HEADER_SIZE + size;

	HASP_ASSERT(size <= UINT16_MAX);
	HASP_ASSERT(owner != ARENA_OWNER_DEAD);
	if (a->size - a->tail < total)
		arena_compact(a);
	/* The caller's budget check guarantees room after compaction. */
	HASP_ASSERT(a->size - a->tail >= total);
	uint8_t *p = a->base + a->tail;
	put_u32le(p, owner);
	put_u16le(p + 4, (uint16_t)size);
	if (size > 0)
		memcpy(p + ARENA_HEADER_SIZE, data, size);
	a->tail += total;
	a->live_size += total;
	return (uint32_t)(p - a->base) + ARENA_HEADER_SIZE;
}

void arena_free(struct arena *a, uint32_t offset)
{
	HASP_ASSERT(offset >= ARENA_HEADER_SIZE);
	HASP_ASSERT(offset <= a->tail);
	uint8_t *h = a->base + offset - ARENA_HEADER_SIZE;
	HASP_ASSERT(get_u32le(h) != ARENA_OWNER_DEAD);
	put_u32le(h, ARENA_OWNER_DEAD);
	a->live_size -= ARENA_HEADER_SIZE + get_u16le(h + 4);
}
