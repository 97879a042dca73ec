/*
 * A small seeded PRNG (xoshiro256**, seeded through splitmix64).
 *
 * Randomness in hasp is always an input: the pure cores take a struct prng
 * owned by their caller (election timeouts), and the simulator derives every
 * random choice from one seed, so that a seed replays a run exactly.
 */
#ifndef HASP_COMMON_PRNG_H
#define HASP_COMMON_PRNG_H

#include <stdbool.h>
#include <stdint.h>

struct prng {
	uint64_t s[4];
};

void prng_seed(struct prng *p, uint64_t seed);
uint64_t prng_next(struct prng *p);
/* Uniform in [0, bound); bound must be > 0. */
uint64_t prng_below(struct prng *p, uint64_t bound);
/* Uniform in [lo, hi]; lo <= hi. */
uint64_t prng_range(struct prng *p, uint64_t lo, uint64_t hi);
/* True with probability per_million / 1e6. */
bool prng_chance(struct prng *p, uint32_t per_million);

#endif
