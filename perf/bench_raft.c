/*
 * bench_raft: the raft core's own cost per command. A 3-node group runs in
 * one thread on one core with no real I/O: messages go through the real
 * codec into in-memory queues, every write is reported durable at once, and
 * committed entries are "applied" by counting them. What remains is the
 * core (and its codec): proposals, AppendEntries, acks, commit, apply.
 *
 *   bench_raft [--seconds S] [--size BYTES] [--seed N]
 *
 * Prints one line per batch size (1, 16, 128 commands per proposal) with
 * committed commands per second on the leader, ns per command and messages
 * per command, plus the seed, the build's assertion mode and the ratios
 * between batch sizes (docs/STYLE.md §9: ratios within one run).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "perf/raft_group.h"

int main(int argc, char **argv)
{
	double seconds = 1.0;
	uint32_t size = 32;
	uint64_t seed = 1;
	static const uint32_t batches[] = { 1, 16, 128 };
	double rate[3];

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--seconds") == 0)
			seconds = atof(argv[i + 1]);
		else if (strcmp(argv[i], "--size") == 0)
			size = (uint32_t)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--seed") == 0)
			seed = strtoull(argv[i + 1], NULL, 0);
	}
	if (size == 0 || size > 1024)
		size = 32;
#ifdef HASP_DEBUG_ASSERTS
	const char *asserts = "on (O(window) invariants each step; -Ddebug_asserts=false for numbers)";
#else
	const char *asserts = "off";
#endif
	printf("bench_raft: 3 nodes, one thread, in-memory network and disk, command %u B, "
	       "seed %llu, debug asserts %s\n", size, (unsigned long long)seed, asserts);
	printf("%8s %12s %14s %10s %10s\n", "batch", "commands", "commands/s", "ns/cmd", "msgs/cmd");

	static uint8_t payload[1024];
	struct raft_buf bufs[128];
	for (uint32_t i = 0; i < size; i++)
		payload[i] = (uint8_t)i;
	for (uint32_t i = 0; i < 128; i++) {
		bufs[i].data = payload;
		bufs[i].size = size;
	}
	for (int b = 0; b < 3; b++) {
		uint32_t batch = batches[b];
		raft_group_init(seed);
		uint64_t start_applied = raft_group_stats.applied[0];
		uint64_t t0 = clock_monotonic_ns(), t1 = t0;
		uint64_t rounds = 0;
		struct raft_event ev = { .type = RAFT_EVENT_PROPOSE };
		ev.propose.bufs = bufs;
		ev.propose.count = batch;
		while ((double)(t1 - t0) < seconds * 1e9) {
			for (int k = 0; k < 64; k++) {
				raft_group_step(0, &ev);
				raft_group_drain();
				rounds++;
			}
			t1 = clock_monotonic_ns();
		}
		/* One more heartbeat round lets the followers apply the tail. */
		struct raft_event tick = { .type = RAFT_EVENT_TICK };
		raft_group_step(0, &tick);
		raft_group_drain();
		uint64_t commands = raft_group_stats.applied[0] - start_applied;
		double secs = (double)(t1 - t0) / 1e9;
		rate[b] = (double)commands / secs;
		printf("%8u %12llu %14.0f %10.1f %10.2f\n", batch, (unsigned long long)commands, rate[b],
		       1e9 / rate[b], (double)raft_group_stats.messages / (double)commands);
		const uint64_t *applied = raft_group_stats.applied;
		if (applied[1] < applied[0] - batch || applied[2] < applied[0] - batch) {
			fprintf(stderr, "bench: followers did not apply (%llu %llu of %llu)\n",
				(unsigned long long)applied[1], (unsigned long long)applied[2],
				(unsigned long long)applied[0]);
			return 1;
		}
		(void)rounds;
		raft_group_deinit();
	}
	printf("ratios: batch16/batch1 %.1fx, batch128/batch1 %.1fx\n", rate[1] / rate[0],
	       rate[2] / rate[0]);
	return 0;
}
