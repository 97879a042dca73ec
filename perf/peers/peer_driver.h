/*
 * The shared harness of the peer drivers (perf/peers/): the same
 * lock-cycle workload hasp-bench's "cycle" workload runs, against another
 * system through that system's own client protocol.
 *
 * N threads, each with its own connection (a peer client is blocking:
 * one request in flight per connection, as each hasp-bench session has
 * one), run acquire-then-release cycles in a closed loop. Thread i owns the
 * keys i, i + N, i + 2N, ... below K, so no two threads ever contend (the
 * same partition hasp-bench uses for its uncontended workload). Acquire
 * latency runs from the call to the grant; every run is bounded by a
 * cycle count and a duration. With --rate R the loop is open: each thread
 * starts cycles at Poisson arrivals of rate R / N and measures latency from
 * the intended arrival (a late start counts as queueing). The output is one JSON object with the
 * same results layout as hasp-bench (tools/bench_report.h), so perf/peers/run
 * and the plots read both alike.
 *
 * A driver supplies struct peer_ops; peer_main() parses the common
 * arguments and runs everything.
 */
#ifndef HASP_PERF_PEERS_PEER_DRIVER_H
#define HASP_PERF_PEERS_PEER_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

struct peer_args {
	const char *endpoints; /* system-specific list, e.g. host:port,... */
	const char *durability; /* label printed in the table */
	uint32_t clients;
	uint32_t keys;
	uint32_t ttl_ms;
	uint64_t count_max;
	uint32_t duration_ms;
	uint32_t warmup_ms;
	const char *prefix;
	const char *out_path;
	double rate; /* > 0: open loop, Poisson arrivals at this many cycles/s */
	/* Open loop: true (--arrivals thread, the default), each thread its
	 * own stream at rate/clients, an arrival waiting for its own thread;
	 * false (--arrivals shared), one stream at `rate` whose arrivals the
	 * threads take in order as they come free, a queue served by every
	 * thread as hasp-bench's backlog is. */
	bool per_thread_arrivals;
};

enum peer_outcome {
	PEER_GRANTED = 0,
	PEER_BUSY = 1,   /* held by someone else (never expected: keys are partitioned) */
	PEER_ERROR = -1, /* the call failed; the connection may be reopened */
};

struct peer_ops {
	const char *system; /* "etcd", "zookeeper", "redis" */
	/* Opens one thread's connection; NULL on failure. `thread` is 0..N-1
	 * and `keys` lists the keys this thread will use (for set-up such as
	 * ZooKeeper's parent nodes). */
	void *(*connect)(const struct peer_args *a, uint32_t thread, char **keys,
			 uint32_t key_count);
	enum peer_outcome (*acquire)(void *conn, const char *key, uint32_t ttl_ms);
	enum peer_outcome (*release)(void *conn, const char *key);
	void (*close)(void *conn);
};

int peer_main(int argc, char **argv, const struct peer_ops *ops);

#endif
