/*
 * Log-linear latency histogram (tools/bench_hist.h). The layout is the one
 * HdrHistogram made familiar: bucket index = (octave, top bits below the
 * leading one). Written from that description, not from its code.
 */
#include "tools/bench_hist.h"

#include <string.h>

#include "common/assert.h"

void bench_hist_reset(struct bench_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

uint32_t bench_hist_bucket_index(uint64_t value)
{
	if (value < BENCH_HIST_SUB_COUNT)
		return (uint32_t)value;
	uint32_t msb = 63u - (uint32_t)__builtin_clzll(value);
	uint32_t shift = msb - BENCH_HIST_SUB_BITS; /* octave above the exact range */
	/* value >> shift is in [SUB_COUNT, 2 * SUB_COUNT). */
	uint32_t index = (shift + 1u) * BENCH_HIST_SUB_COUNT +
			 (uint32_t)(value >> shift) - BENCH_HIST_SUB_COUNT;
	HASP_ASSERT(index < BENCH_HIST_BUCKET_COUNT);
	return index;
}

uint64_t bench_hist_bucket_high(uint32_t bucket_index)
{
	HASP_ASSERT(bucket_index < BENCH_HIST_BUCKET_COUNT);
	if (bucket_index < BENCH_HIST_SUB_COUNT)
		return bucket_index;
	uint32_t shift = bucket_index / BENCH_HIST_SUB_COUNT - 1u;
	uint64_t top = BENCH_HIST_SUB_COUNT + bucket_index % BENCH_HIST_SUB_COUNT;
	/* The last bucket's high end is UINT64_MAX; the sum cannot overflow
	 * below it. */
	return (top << shift) + ((1ull << shift) - 1u);
}

void bench_hist_record(struct bench_hist *h, uint64_t value)
{
	h->counts[bench_hist_bucket_index(value)]++;
	h->count++;
	h->sum += (double)value;
	if (value < h->min)
		h->min = value;
	if (value > h->max)
		h->max = value;
}

void bench_hist_merge(struct bench_hist *target, const struct bench_hist *source)
{
	HASP_ASSERT(target != source);
	for (uint32_t i = 0; i < BENCH_HIST_BUCKET_COUNT; i++)
		target->counts[i] += source->counts[i];
	target->count += source->count;
	target->sum += source->sum;
	if (source->min < target->min)
		target->min = source->min;
	if (source->max > target->max)
		target->max = source->max;
}

uint64_t bench_hist_quantile(const struct bench_hist *h, double q)
{
	HASP_ASSERT(q > 0.0 && q <= 1.0);
	if (h->count == 0)
		return 0;
	/* rank = ceil(q * count), at least 1. */
	double exact = q * (double)h->count;
	uint64_t rank = (uint64_t)exact;
	if ((double)rank < exact)
		rank++;
	if (rank == 0)
		rank = 1;
	if (rank > h->count)
		rank = h->count;
	uint64_t seen = 0;
	for (uint32_t i = 0; i < BENCH_HIST_BUCKET_COUNT; i++) {
		seen += h->counts[i];
		if (seen >= rank) {
			uint64_t high = bench_hist_bucket_high(i);
			return high < h->max ? high : h->max;
		}
	}
	HASP_UNREACHABLE();
	return h->max;
}

double bench_hist_mean(const struct bench_hist *h)
{
	return h->count ? h->sum / (double)h->count : 0.0;
}
