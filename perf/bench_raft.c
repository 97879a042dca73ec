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
 * between batch sizes (STYLE §9: ratios within one run).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/prng.h"
#include "raft/msg_codec.h"
#include "raft/raft.h"

#define NODES 3
#define QUEUE 4096
#define CLUSTER 0xbe7c4ull

struct packet {
	uint32_t to;
	uint16_t size;
	uint8_t data[1500];
};

static struct raft R[NODES];
static struct prng P[NODES];
static struct packet Q[QUEUE];
static uint32_t q_head, q_len;
static uint64_t applied[NODES];
static uint64_t messages;

static void step(uint32_t i, const struct raft_event *ev);

static void handle(uint32_t i, struct raft_update *up)
{
	for (uint32_t k = 0; k < up->msg_count; k++) {
		struct packet *p = &Q[(q_head + q_len) % QUEUE];
		int n = msg_codec_encode(&up->msgs[k], p->data, sizeof(p->data));
		if (n <= 0 || q_len == QUEUE) {
			fprintf(stderr, "bench: queue or encode failure\n");
			exit(1);
		}
		p->size = (uint16_t)n;
		p->to = up->msgs[k].to;
		q_len++;
		messages++;
	}
	applied[i] += up->apply_count;
	if (up->entry_count > 0) {
		struct raft_event ev = { .type = RAFT_EVENT_PERSISTED };
		ev.persisted.index = up->entries[up->entry_count - 1].index;
		ev.persisted.term = up->entries[up->entry_count - 1].term;
		step(i, &ev);
	}
	if (up->snapshot_wanted) {
		static uint8_t image[64];
		struct raft_event ev = { .type = RAFT_EVENT_SNAPSHOT };
		ev.snapshot.index = R[i].applied;
		ev.snapshot.data = image;
		ev.snapshot.size = sizeof(image);
		step(i, &ev);
	}
}

static void step(uint32_t i, const struct raft_event *ev)
{
	struct raft_update up;
	raft_step(&R[i], ev, &up);
	handle(i, &up);
}

static void deliver_all(void)
{
	struct raft_entry entries[128];
	struct raft_msg m;

	while (q_len > 0) {
		struct packet *p = &Q[q_head];
		q_head = (q_head + 1) % QUEUE;
		q_len--;
		if (msg_codec_decode(&m, entries, 128, p->data, p->size) != 0) {
			fprintf(stderr, "bench: decode failure\n");
			exit(1);
		}
		struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
		step(p->to - 1, &ev);
	}
}

static void setup(uint64_t seed)
{
	struct raft_persisted_state ps;

	memset(&ps, 0, sizeof(ps));
	ps.snap_conf.count = NODES;
	for (uint32_t i = 0; i < NODES; i++) {
		ps.snap_conf.members[i].id = i + 1;
		ps.snap_conf.members[i].role = RAFT_VOTER;
	}
	for (uint32_t i = 0; i < NODES; i++) {
		struct raft_config cfg;
		raft_config_default(&cfg, CLUSTER, i + 1);
		prng_seed(&P[i], seed + i);
		if (raft_init(&R[i], &cfg, &P[i]) != 0 || raft_restore(&R[i], &ps) != 0) {
			fprintf(stderr, "bench: init failed\n");
			exit(1);
		}
		applied[i] = 0;
	}
	q_head = q_len = 0;
	/* Elect node 1. */
	struct raft_event tick = { .type = RAFT_EVENT_TICK };
	for (int t = 0; t < 100 && R[0].role != RAFT_LEADER; t++) {
		step(0, &tick);
		deliver_all();
	}
	if (R[0].role != RAFT_LEADER) {
		fprintf(stderr, "bench: no leader\n");
		exit(1);
	}
}

static void teardown(void)
{
	for (uint32_t i = 0; i < NODES; i++)
		raft_deinit(&R[i]);
}

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
		setup(seed);
		messages = 0;
		uint64_t start_applied = applied[0];
		uint64_t t0 = clock_monotonic_ns(), t1 = t0;
		uint64_t rounds = 0;
		struct raft_event ev = { .type = RAFT_EVENT_PROPOSE };
		ev.propose.bufs = bufs;
		ev.propose.count = batch;
		while ((double)(t1 - t0) < seconds * 1e9) {
			for (int k = 0; k < 64; k++) {
				step(0, &ev);
				deliver_all();
				rounds++;
			}
			t1 = clock_monotonic_ns();
		}
		/* One more heartbeat round lets the followers apply the tail. */
		struct raft_event tick = { .type = RAFT_EVENT_TICK };
		step(0, &tick);
		deliver_all();
		uint64_t commands = applied[0] - start_applied;
		double secs = (double)(t1 - t0) / 1e9;
		rate[b] = (double)commands / secs;
		printf("%8u %12llu %14.0f %10.1f %10.2f\n", batch, (unsigned long long)commands, rate[b],
		       1e9 / rate[b], (double)messages / (double)commands);
		if (applied[1] < applied[0] - batch || applied[2] < applied[0] - batch) {
			fprintf(stderr, "bench: followers did not apply (%llu %llu of %llu)\n",
				(unsigned long long)applied[1], (unsigned long long)applied[2],
				(unsigned long long)applied[0]);
			return 1;
		}
		(void)rounds;
		teardown();
	}
	printf("ratios: batch16/batch1 %.1fx, batch128/batch1 %.1fx\n", rate[1] / rate[0],
	       rate[2] / rate[0]);
	return 0;
}
