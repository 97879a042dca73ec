/*
 * The two-level marked set of dirty.h.
 */
#include "locks/dirty.h"

#include "common/alloc.h"
#include "common/assert.h"
#include "hasp/errors.h"
#include "locks/zalloc.h"

static uint64_t words_for(uint64_t bits)
{
	return (bits + 63u) / 64u;
}

uint64_t dirty_memory_size(uint64_t bits)
{
	return (words_for(bits) + words_for(words_for(bits))) * sizeof(uint64_t);
}

int dirty_init(struct dirty_set *d, uint64_t bits)
{
	HASP_ASSERT(bits > 0);
	d->bits = bits;
	d->word_count = words_for(bits);
	d->summary_count = words_for(d->word_count);
	d->words = locks_zalloc(d->word_count, sizeof(uint64_t));
	d->summary = locks_zalloc(d->summary_count, sizeof(uint64_t));
	if (d->words == NULL || d->summary == NULL) {
		dirty_deinit(d);
		return -HASP_ENOMEM;
	}
	return 0;
}

void dirty_deinit(struct dirty_set *d)
{
	hasp_free(d->words);
	hasp_free(d->summary);
	d->words = NULL;
	d->summary = NULL;
}

/* The bits [lo, hi] of a word, 0 <= lo <= hi < 64. */
static uint64_t bit_span(unsigned lo, unsigned hi)
{
	uint64_t upto_hi = hi == 63u ? ~0ull : (1ull << (hi + 1u)) - 1u;
	return upto_hi & ~((1ull << lo) - 1u);
}

uint64_t dirty_drain(struct dirty_set *d, dirty_run_fn *visit, void *ctx)
{
	uint64_t marked = 0;
	uint64_t run_first = 0, run_count = 0; /* the run still open */

	for (uint64_t s = 0; s < d->summary_count; s++) {
		uint64_t sw = d->summary[s];
		d->summary[s] = 0;
		while (sw != 0) {
			uint64_t w = s * 64u + (uint64_t)__builtin_ctzll(sw);
			uint64_t bits = d->words[w];
			sw &= sw - 1u;
			d->words[w] = 0;
			marked += (uint64_t)__builtin_popcountll(bits);
			while (bits != 0) {
				unsigned lo = (unsigned)__builtin_ctzll(bits);
				/* The run of ones from lo: the zeros above it end it. */
				uint64_t above = ~(bits >> lo);
				unsigned len = above == 0 ? 64u - lo : (unsigned)__builtin_ctzll(above);
				uint64_t first = w * 64u + lo;
				if (run_count > 0 && run_first + run_count == first) {
					run_count += len;
				} else {
					if (run_count > 0 && visit != NULL)
						visit(ctx, run_first, run_count);
					run_first = first;
					run_count = len;
				}
				bits = lo + len >= 64u ? 0 : bits & ~bit_span(lo, lo + len - 1u);
			}
		}
	}
	if (run_count > 0 && visit != NULL)
		visit(ctx, run_first, run_count);
	return marked;
}
