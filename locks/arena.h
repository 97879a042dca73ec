/*
 * A compacting byte arena for variable-length names, keys and values.
 *
 * Blobs are appended at the tail behind a 6-byte header (owner index, size).
 * Freeing only marks a blob dead. When an append does not fit, the arena
 * slides every live blob down over the dead ones (in address order, so the
 * result is deterministic) and tells the owner table each blob's new offset
 * through `moved`.
 *
 * Why not size classes: a slab allocator can fail on fragmentation while the
 * logical byte count is under its limit, and a replica restored from a
 * snapshot (whose layout is compact) would then answer FULL differently from
 * one that applied the log. Here capacity is purely logical: the caller
 * checks its byte budget before appending, and an append within budget
 * always succeeds (physical size >= budget + headers; see arena_size_for).
 * The cost is an occasional O(arena) compaction; slack in the physical size
 * makes it amortized O(1) per byte appended.
 */
#ifndef HASP_LOCKS_ARENA_H
#define HASP_LOCKS_ARENA_H

#include <stdint.h>

#define ARENA_HEADER_SIZE 6u
#define ARENA_OWNER_DEAD UINT32_MAX

/* Called during compaction for each live blob that moved; `offset` is the
 * new offset of its data. */
typedef void arena_moved_fn(void *ctx, uint32_t owner, uint32_t offset);

struct arena {
	uint8_t *base;
	uint32_t size;       /* physical bytes */
	uint32_t tail;       /* first free byte */
	uint32_t live_size;  /* bytes of live blobs including headers */
	uint64_t compaction_count;
	arena_moved_fn *moved;
	void *moved_ctx;
};

/* Physical size for `data_max` bytes of data in at most `blob_max` blobs,
 * plus half again as slack so compactions stay rare. */
uint64_t arena_size_for(uint64_t data_max, uint64_t blob_max);

/* Returns 0, -HASP_ENOMEM or -HASP_ECONFIG (size over 4 GiB). */
int arena_init(struct arena *a, uint64_t size, arena_moved_fn *moved, void *moved_ctx)
	__attribute__((warn_unused_result));
void arena_deinit(struct arena *a);
void arena_clear(struct arena *a);
/* Makes dst's blobs those of src (the bytes up to src's tail); both of
 * the same size. dst keeps its own `moved` callback. */
void arena_copy(struct arena *dst, const struct arena *src);

/* Appends a blob of `size` bytes (copied from `data`) for `owner` and returns
 * the offset of its data. The caller guarantees it fits the budget the arena
 * was sized for; may compact first (calling `moved` for other owners). */
uint32_t arena_append(struct arena *a, uint32_t owner, const void *data, uint32_t size);

/* Marks the blob whose data starts at `offset` dead. */
void arena_free(struct arena *a, uint32_t offset);

static inline const uint8_t *arena_data(const struct arena *a, uint32_t offset)
{
	return a->base + offset;
}

#endif
