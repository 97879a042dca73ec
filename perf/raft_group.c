/*
 * The in-memory raft group shared by bench_raft and perf_micro (see the
 * header). Writes are durable at once, so PERSISTED follows every append;
 * a snapshot request is answered with a small fixed image.
 */
#include "perf/raft_group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/prng.h"
#include "raft/msg_codec.h"

#define QUEUE 4096
#define CLUSTER 0xbe7c4ull

struct packet {
	uint32_t to;
	uint16_t size;
	uint8_t data[1500];
};

struct raft raft_group_nodes[RAFT_GROUP_NODES];
struct raft_group_stats raft_group_stats;

static struct prng prngs[RAFT_GROUP_NODES];
static struct packet queue[QUEUE];
static uint32_t q_head, q_len;

static void raft_group_fail(const char *what)
{
	fprintf(stderr, "raft_group: %s\n", what);
	exit(1);
}

static void raft_group_handle(uint32_t i, struct raft_update *up)
{
	for (uint32_t k = 0; k < up->msg_count; k++) {
		struct packet *p = &queue[(q_head + q_len) % QUEUE];
		int n = msg_codec_encode(&up->msgs[k], p->data, sizeof(p->data));
		if (n <= 0 || q_len == QUEUE)
			raft_group_fail("queue or encode failure");
		p->size = (uint16_t)n;
		p->to = up->msgs[k].to;
		q_len++;
		raft_group_stats.messages++;
	}
	raft_group_stats.applied[i] += up->apply_count;
	if (up->entry_count > 0) {
		struct raft_event ev = { .type = RAFT_EVENT_PERSISTED };
		ev.persisted.index = up->entries[up->entry_count - 1].index;
		ev.persisted.term = up->entries[up->entry_count - 1].term;
		raft_group_step(i, &ev);
	}
	if (up->snapshot_wanted) {
		static uint8_t image[64];
		struct raft_event ev = { .type = RAFT_EVENT_SNAPSHOT };
		ev.snapshot.index = raft_group_nodes[i].applied;
		ev.snapshot.data = image;
		ev.snapshot.size = sizeof(image);
		raft_group_step(i, &ev);
	}
}

void raft_group_step(uint32_t i, const struct raft_event *ev)
{
	struct raft_update up;
	raft_step(&raft_group_nodes[i], ev, &up);
	raft_group_handle(i, &up);
}

void raft_group_drain(void)
{
	static struct raft_entry entries[128];
	struct raft_msg m;

	while (q_len > 0) {
		struct packet *p = &queue[q_head];
		q_head = (q_head + 1) % QUEUE;
		q_len--;
		if (msg_codec_decode(&m, entries, 128, p->data, p->size) != 0)
			raft_group_fail("decode failure");
		struct raft_event ev = { .type = RAFT_EVENT_RECEIVE, .msg = &m };
		raft_group_step(p->to - 1, &ev);
	}
}

void raft_group_init(uint64_t seed)
{
	struct raft_persisted_state ps;

	memset(&ps, 0, sizeof(ps));
	memset(&raft_group_stats, 0, sizeof(raft_group_stats));
	q_head = q_len = 0;
	ps.snap_conf.count = RAFT_GROUP_NODES;
	for (uint32_t i = 0; i < RAFT_GROUP_NODES; i++) {
		ps.snap_conf.members[i].id = i + 1;
		ps.snap_conf.members[i].role = RAFT_VOTER;
	}
	for (uint32_t i = 0; i < RAFT_GROUP_NODES; i++) {
		struct raft_config cfg;
		raft_config_default(&cfg, CLUSTER, i + 1);
		prng_seed(&prngs[i], seed + i);
		if (raft_init(&raft_group_nodes[i], &cfg, &prngs[i]) != 0 ||
		    raft_restore(&raft_group_nodes[i], &ps) != 0)
			raft_group_fail("init failed");
	}
	struct raft_event tick = { .type = RAFT_EVENT_TICK };
	for (int t = 0; t < 100 && raft_group_nodes[0].role != RAFT_LEADER; t++) {
		raft_group_step(0, &tick);
		raft_group_drain();
	}
	if (raft_group_nodes[0].role != RAFT_LEADER)
		raft_group_fail("no leader");
}

void raft_group_deinit(void)
{
	for (uint32_t i = 0; i < RAFT_GROUP_NODES; i++)
		raft_deinit(&raft_group_nodes[i]);
}
