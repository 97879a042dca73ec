/*
 * Latency histograms for hasp-bench and the peer drivers: HDR-style
 * log-linear buckets over unsigned 64-bit values (nanoseconds).
 *
 * Values below 2^BENCH_HIST_SUB_BITS are counted exactly; above, each
 * power-of-two octave is split into 2^BENCH_HIST_SUB_BITS linear
 * sub-buckets, so a reported percentile is within 1 / 2^SUB_BITS (0.79 %)
 * of the true value at any magnitude, with a fixed 58 KiB table and O(1)
 * record. A percentile reports the HIGHEST value of its bucket (never
 * optimistic), clamped to the exact maximum. min, max, count and sum are
 * exact.
 *
 * Ownership: the caller owns the struct (large: allocate it, do not put it
 * on a small stack). Not thread-safe: one histogram per thread, merged at
 * the end with bench_hist_merge().
 */
#ifndef HASP_TOOLS_BENCH_HIST_H
#define HASP_TOOLS_BENCH_HIST_H

#include <stdint.h>

#define BENCH_HIST_SUB_BITS 7u
#define BENCH_HIST_SUB_COUNT (1u << BENCH_HIST_SUB_BITS)
/* Octaves above the exact range: exponents 0 .. 63 - SUB_BITS, plus the
 * exact range itself. */
#define BENCH_HIST_BUCKET_COUNT ((64u - BENCH_HIST_SUB_BITS + 1u) * BENCH_HIST_SUB_COUNT)

struct bench_hist {
	uint64_t counts[BENCH_HIST_BUCKET_COUNT];
	uint64_t count;
	uint64_t min;
	uint64_t max;
	double sum; /* for the mean; doubles keep 2^53 exactly, enough for ns sums */
};

void bench_hist_reset(struct bench_hist *h);
void bench_hist_record(struct bench_hist *h, uint64_t value);
/* Adds every count of `source` to `target`. */
void bench_hist_merge(struct bench_hist *target, const struct bench_hist *source);
/* The value at quantile q (0 < q <= 1): the smallest bucket upper bound
 * with at least ceil(q * count) values at or below it, clamped to max.
 * 0 when the histogram is empty. */
uint64_t bench_hist_quantile(const struct bench_hist *h, double q);
double bench_hist_mean(const struct bench_hist *h);

/* Bucket arithmetic, exposed for the tests. */
uint32_t bench_hist_bucket_index(uint64_t value);
uint64_t bench_hist_bucket_high(uint32_t bucket_index);

#endif
