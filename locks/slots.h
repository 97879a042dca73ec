/*
 * A slot allocator that always hands out the lowest free index.
 *
 * Every record table of the state machine (locks, leases, sessions, waiters,
 * KV entries) takes its slots from one of these. Lowest-free allocation makes
 * the next index a function of the set of live slots alone, so a machine
 * restored from a snapshot (which records live slot indices) allocates
 * exactly the indices the original would have: no hidden free-list order
 * survives outside the snapshot.
 *
 * A hierarchical bitmap (bit set = used; a parent bit is set when its 64-bit
 * child word is full) finds the lowest free slot in one word per level: four
 * levels cover 16M slots. Memory: about capacity / 8 bytes.
 */
#ifndef HASP_LOCKS_SLOTS_H
#define HASP_LOCKS_SLOTS_H

#include <stdbool.h>
#include <stdint.h>

#define SLOTS_NONE UINT32_MAX
#define SLOTS_LEVELS_MAX 4u
#define SLOTS_CAPACITY_MAX (1u << 24) /* 64^4 = 16M slots */

struct slots {
	uint64_t *levels[SLOTS_LEVELS_MAX]; /* levels[0]: one bit per slot */
	uint32_t level_words[SLOTS_LEVELS_MAX];
	uint32_t level_count;
	uint32_t capacity;
	uint32_t used_count;
};

/* Sizes the bitmap for `capacity` slots (1..SLOTS_CAPACITY_MAX); all free.
 * Returns 0 or -HASP_ENOMEM. */
int slots_init(struct slots *s, uint32_t capacity) __attribute__((warn_unused_result));
void slots_deinit(struct slots *s);

/* Marks every slot free. */
void slots_clear(struct slots *s);

/* The lowest free index, now used; SLOTS_NONE when all are used. */
uint32_t slots_alloc(struct slots *s);

/* Marks a specific free index used (snapshot restore). */
void slots_take(struct slots *s, uint32_t index);

/* Frees a used index. */
void slots_free(struct slots *s, uint32_t index);

bool slots_used(const struct slots *s, uint32_t index);

/* One past the highest used index (0 when none is used): the records a
 * copy of the table must carry. O(capacity / 64). */
uint32_t slots_high_water(const struct slots *s);

/* Makes dst's bitmap equal to src's; both sized for the same capacity. */
void slots_copy(struct slots *dst, const struct slots *src);

/* Bytes of memory this allocator holds (for the sizing report). */
uint64_t slots_memory_size(uint32_t capacity);

#endif
