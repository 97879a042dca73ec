/*
 * Open-loop arrival schedules for hasp-bench: Poisson arrivals (exponential
 * gaps) at a target rate from a seeded PRNG, so a seed replays the same
 * schedule, and Zipf key choice for contended workloads.
 *
 * Arrival times are INTENDED send times: the load generator measures each
 * operation's latency from its intended time, not from when it managed to
 * send, so a server stall that delays later sends shows up as queueing
 * latency instead of being hidden (coordinated omission).
 */
#ifndef HASP_TOOLS_BENCH_ARRIVAL_H
#define HASP_TOOLS_BENCH_ARRIVAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/prng.h"

struct bench_arrival {
	struct prng prng;
	double mean_gap_ns; /* 1e9 / rate */
	double next_ns;     /* intended time of the next arrival, from start */
	uint64_t start_ns;
};

/* rate_per_s > 0. The first arrival is one gap after start_ns. */
void bench_arrival_init(struct bench_arrival *a, double rate_per_s, uint64_t seed,
			uint64_t start_ns);
/* The intended time (ns, same clock as start_ns) of the next arrival, and
 * advances the schedule by one exponential gap. */
uint64_t bench_arrival_next(struct bench_arrival *a);
/* Peeks at the next arrival's intended time without advancing. */
uint64_t bench_arrival_peek(const struct bench_arrival *a);

/* Open-loop arrivals that found no idle client: their intended times,
 * oldest first, at most `capacity` (an arrival beyond it is dropped and
 * counted by the caller). Shared by both of hasp-bench's engines. */
struct bench_backlog {
	uint64_t *slots;
	uint32_t capacity, head, len;
};
int bench_backlog_init(struct bench_backlog *b, uint32_t capacity)
	__attribute__((warn_unused_result));
void bench_backlog_deinit(struct bench_backlog *b);
/* Queues `intended` and raises *len_max to the new length; false when the
 * backlog is full (nothing queued). */
bool bench_backlog_push(struct bench_backlog *b, uint64_t intended, uint64_t *len_max)
	__attribute__((warn_unused_result));
/* The oldest arrival's intended time, taken out; b->len > 0. */
uint64_t bench_backlog_pop(struct bench_backlog *b);

/* Zipf(s) over [0, n): rank 0 is the hottest key. Precomputes the CDF
 * (n doubles, allocated with hasp_alloc; bench_zipf_deinit frees it).
 * s = 0 is uniform. Returns 0 or -HASP_ENOMEM / -HASP_EINVAL. */
struct bench_zipf {
	double *cdf;
	uint32_t n;
};
int bench_zipf_init(struct bench_zipf *z, uint32_t n, double s)
	__attribute__((warn_unused_result));
void bench_zipf_deinit(struct bench_zipf *z);
uint32_t bench_zipf_next(const struct bench_zipf *z, struct prng *p);

#endif
