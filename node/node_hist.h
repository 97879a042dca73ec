/*
 * A fixed-bucket latency histogram the node's lcore fills in the hot path
 * (one compare per bucket passed, two adds; no allocation, no lock) and the
 * metrics registry exposes in place (metrics_histogram_ref). One bucket
 * layout for every latency of a node, so dashboards can compare them and
 * alerts can use one set of `le` values: 10 us to 1 s in 1-2.5-5 steps
 * (docs/CONTROL.md "Metrics").
 */
#ifndef HASP_NODE_NODE_HIST_H
#define HASP_NODE_NODE_HIST_H

#include <stdint.h>

#define NODE_HIST_BOUNDS 16u

/* Upper bounds in nanoseconds: 10, 25, 50, 100, 250, 500 us, 1, 2.5, 5,
 * 10, 25, 50, 100, 250, 500 ms, 1 s. */
extern const uint64_t node_hist_bounds_ns[NODE_HIST_BOUNDS];

struct node_hist {
	uint64_t counts[NODE_HIST_BOUNDS + 1]; /* per bucket, not cumulated; last: +Inf */
	uint64_t sum_ns;
};

/* One writer (the node's lcore); readers load the words relaxed. */
static inline void node_hist_observe(struct node_hist *h, uint64_t ns)
{
	uint32_t i = 0;
	while (i < NODE_HIST_BOUNDS && ns > node_hist_bounds_ns[i])
		i++;
	__atomic_store_n(&h->counts[i], h->counts[i] + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&h->sum_ns, h->sum_ns + ns, __ATOMIC_RELAXED);
}

#endif
