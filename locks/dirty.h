/*
 * A set of marked indices that can be drained in time proportional to what
 * was marked: the record of which reply-cache entries changed since a
 * state machine was last copied (locks_copy copies only those).
 *
 * Two levels of bitmap: a bit per index, and a summary bit per 64-bit word
 * of the first level that has any bit set. Marking is two stores; draining
 * reads the summary (one word per 4,096 indices) and then only the words it
 * names. Memory: about bits / 8 bytes.
 */
#ifndef HASP_LOCKS_DIRTY_H
#define HASP_LOCKS_DIRTY_H

#include <stdint.h>

struct dirty_set {
	uint64_t *words;   /* bit i: index i is marked */
	uint64_t *summary; /* bit w: words[w] is not zero */
	uint64_t bits;
	uint64_t word_count, summary_count;
};

/* Bytes a set of `bits` indices holds (for the sizing sum). */
uint64_t dirty_memory_size(uint64_t bits);

/* Sizes the set for indices [0, bits), bits > 0; none marked. Returns 0 or
 * -HASP_ENOMEM. */
int dirty_init(struct dirty_set *d, uint64_t bits) __attribute__((warn_unused_result));
void dirty_deinit(struct dirty_set *d);

static inline void dirty_mark(struct dirty_set *d, uint64_t i)
{
	d->words[i / 64u] |= 1ull << (i % 64u);
	d->summary[i / 4096u] |= 1ull << (i / 64u % 64u);
}

/* Called once per run of consecutive marked indices [first, first + count). */
typedef void dirty_run_fn(void *ctx, uint64_t first, uint64_t count);

/* Visits the marked indices as maximal runs, lowest first, and unmarks
 * them all. `visit` may be NULL (just unmark). Returns how many indices
 * were marked. Cost: the summary plus the words with a mark. */
uint64_t dirty_drain(struct dirty_set *d, dirty_run_fn *visit, void *ctx);

#endif
