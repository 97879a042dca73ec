/*
 * Poisson arrivals and Zipf keys (tools/bench_arrival.h). Gaps are
 * -ln(U) * mean with U uniform in (0, 1] from the caller's seed, the
 * inverse-CDF method; the schedule is accumulated in double nanoseconds so
 * that rounding does not drift the rate over long runs.
 */
#include "tools/bench_arrival.h"

#include <math.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "hasp/errors.h"

/* Uniform in (0, 1]: 53 random bits, never 0 (ln 0 is -inf). */
static double uniform_open(struct prng *p)
{
	return (double)((prng_next(p) >> 11) + 1u) * (1.0 / 9007199254740992.0);
}

void bench_arrival_init(struct bench_arrival *a, double rate_per_s, uint64_t seed,
			uint64_t start_ns)
{
	HASP_ASSERT(rate_per_s > 0.0);
	prng_seed(&a->prng, seed);
	a->mean_gap_ns = 1e9 / rate_per_s;
	a->start_ns = start_ns;
	a->next_ns = -log(uniform_open(&a->prng)) * a->mean_gap_ns;
	HASP_ASSERT(a->next_ns >= 0.0);
}

uint64_t bench_arrival_peek(const struct bench_arrival *a)
{
	return a->start_ns + (uint64_t)a->next_ns;
}

uint64_t bench_arrival_next(struct bench_arrival *a)
{
	uint64_t at = bench_arrival_peek(a);
	a->next_ns += -log(uniform_open(&a->prng)) * a->mean_gap_ns;
	HASP_ASSERT(bench_arrival_peek(a) >= at);
	return at;
}

int bench_zipf_init(struct bench_zipf *z, uint32_t n, double s)
{
	if (n == 0 || s < 0.0)
		return -HASP_EINVAL;
	z->cdf = hasp_calloc(n, sizeof(*z->cdf));
	if (z->cdf == NULL)
		return -HASP_ENOMEM;
	z->n = n;
	double total = 0.0;
	for (uint32_t k = 0; k < n; k++) {
		total += 1.0 / pow((double)k + 1.0, s);
		z->cdf[k] = total;
	}
	for (uint32_t k = 0; k < n; k++)
		z->cdf[k] /= total;
	z->cdf[n - 1] = 1.0;
	return 0;
}

void bench_zipf_deinit(struct bench_zipf *z)
{
	hasp_free(z->cdf);
	z->cdf = NULL;
	z->n = 0;
}

uint32_t bench_zipf_next(const struct bench_zipf *z, struct prng *p)
{
	HASP_ASSERT(z->n > 0);
	double u = uniform_open(p);
	/* The first k with cdf[k] >= u, by binary search. */
	uint32_t lo = 0, hi = z->n - 1;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2u;
		if (z->cdf[mid] >= u)
			hi = mid;
		else
			lo = mid + 1u;
	}
	HASP_ASSERT(lo < z->n);
	return lo;
}

int bench_backlog_init(struct bench_backlog *b, uint32_t capacity)
{
	*b = (struct bench_backlog){ .capacity = capacity };
	b->slots = hasp_calloc(capacity, sizeof(*b->slots));
	return b->slots == NULL ? -HASP_ENOMEM : 0;
}

void bench_backlog_deinit(struct bench_backlog *b)
{
	hasp_free(b->slots);
	*b = (struct bench_backlog){ 0 };
}

bool bench_backlog_push(struct bench_backlog *b, uint64_t intended, uint64_t *len_max)
{
	if (b->len == b->capacity)
		return false;
	b->slots[(b->head + b->len) % b->capacity] = intended;
	b->len++;
	if (b->len > *len_max)
		*len_max = b->len;
	return true;
}

uint64_t bench_backlog_pop(struct bench_backlog *b)
{
	HASP_ASSERT(b->len > 0);
	uint64_t intended = b->slots[b->head];
	b->head = (b->head + 1u) % b->capacity;
	b->len--;
	return intended;
}
