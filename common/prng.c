/*
 * xoshiro256** by Blackman and Vigna (public domain algorithm), written from
 * its published description. prng_below() uses rejection so that the result
 * is unbiased, which matters for long simulations with small bounds.
 */
#include "common/prng.h"

#include "common/assert.h"

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void prng_seed(struct prng *p, uint64_t seed)
{
	uint64_t x = seed;
	for (int i = 0; i < 4; i++)
		p->s[i] = splitmix64(&x);
}

uint64_t prng_next(struct prng *p)
{
	uint64_t *s = p->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

uint64_t prng_below(struct prng *p, uint64_t bound)
{
	HASP_ASSERT(bound > 0);
	uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
	uint64_t x;

	do {
		x = prng_next(p);
	} while (x >= limit);
	return x % bound;
}

uint64_t prng_range(struct prng *p, uint64_t lo, uint64_t hi)
{
	HASP_ASSERT(lo <= hi);
	if (hi - lo == UINT64_MAX)
		return prng_next(p);
	return lo + prng_below(p, hi - lo + 1);
}

bool prng_chance(struct prng *p, uint32_t per_million)
{
	return prng_below(p, 1000000u) < per_million;
}
