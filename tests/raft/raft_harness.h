/*
 * A small in-memory cluster for the raft unit tests: up to five nodes
 * running the real core, messages encoded and decoded through the real
 * codec into one FIFO queue, delivered on demand, with per-link cuts and
 * optional automatic persistence (the node reports every write durable at
 * once). Tests script ticks, deliveries and proposals and look at the nodes'
 * state and at the emitted trace.
 */
#ifndef HASP_TESTS_RAFT_RAFT_HARNESS_H
#define HASP_TESTS_RAFT_RAFT_HARNESS_H

#include <stdio.h>
#include <string.h>

#include "common/prng.h"
#include "raft/msg_codec.h"
#include "raft/raft.h"
#include "tests/test_util.h"

#define TH_NODES 5
#define TH_QUEUE 4096
#define TH_CLUSTER 0x7465737400000001ull

struct th_packet {
	uint32_t from;
	uint32_t to;
	uint16_t size;
	uint8_t data[1500];
};

struct th {
	uint32_t count;
	struct raft r[TH_NODES];
	struct prng prng[TH_NODES];
	bool down[TH_NODES];
	bool cut[TH_NODES][TH_NODES];     /* drop messages from a to b */
	bool auto_persist[TH_NODES];
	struct th_packet q[TH_QUEUE];
	uint32_t q_head;
	uint32_t q_len;
	uint64_t applied[TH_NODES];       /* last applied index */
	uint8_t last_reject;
	uint64_t last_propose_index;
	uint32_t last_read_count;
	struct raft_read last_reads[8];
	uint8_t snap[TH_NODES][8192];     /* received snapshot bytes */
	uint64_t snap_installed[TH_NODES];
	uint64_t snap_size[TH_NODES];
	char trace[16384];
	size_t trace_len;
	bool trace_on;
};

static inline void th_trace(void *arg, const char *line)
{
	struct th *th = arg;
	if (!th->trace_on)
		return;
	int n = snprintf(th->trace + th->trace_len, sizeof(th->trace) - th->trace_len, "%s\n", line);
	if (n > 0 && th->trace_len + (size_t)n < sizeof(th->trace))
		th->trace_len += (size_t)n;
}

static inline void th_config(struct th *th, struct raft_config *cfg, uint32_t id)
{
	raft_config_default(cfg, TH_CLUSTER, id);
	cfg->peers_max = 7;
	cfg->election_ticks = 10;
	cfg->heartbeat_ticks = 1;
	cfg->log_window = 256;
	cfg->snapshot_threshold = 32;
	cfg->snapshot_trailing = 8;
	cfg->entry_bytes_max = 200;
	cfg->inflight_max = 4;
	cfg->reads_max = 8;
	cfg->trace = th_trace;
	cfg->trace_arg = th;
}

/* `count` nodes with ids 1..count; the first `voters` form the initial
 * configuration, the others join later (empty configuration). */
static inline void th_init_ex(struct th *th, uint32_t count, uint32_t voters, bool pre_vote,
			      bool check_quorum)
{
	struct raft_persisted_state ps;

	memset(th, 0, sizeof(*th));
	th->count = count;
	memset(&ps, 0, sizeof(ps));
	for (uint32_t i = 0; i < voters; i++) {
		ps.snap_conf.members[i].id = i + 1;
		ps.snap_conf.members[i].role = RAFT_VOTER;
	}
	ps.snap_conf.count = voters;
	for (uint32_t i = 0; i < count; i++) {
		struct raft_config cfg;
		struct raft_persisted_state ps_i = ps;
		th_config(th, &cfg, i + 1);
		cfg.pre_vote = pre_vote;
		cfg.check_quorum = check_quorum;
		prng_seed(&th->prng[i], 1000 + i);
		assert_int_equal(raft_init(&th->r[i], &cfg, &th->prng[i]), 0);
		if (i >= voters)
			ps_i.snap_conf.count = 0;
		assert_int_equal(raft_restore(&th->r[i], &ps_i), 0);
		th->auto_persist[i] = true;
	}
}

static inline void th_init(struct th *th, uint32_t count)
{
	th_init_ex(th, count, count, false, false);
}

/* Restarts node i from a given durable state: term, vote and a log whose
 * entry k (index k + 1) has term terms[k]; the configuration is the
 * initial one of th_init(). */
static inline void th_restart(struct th *th, uint32_t i, uint64_t term, uint32_t vote,
			      const uint64_t *terms, uint32_t count)
{
	struct raft_config cfg = th->r[i].cfg;
	struct raft_persisted_state ps;
	struct raft_entry entries[64];
	static const char payload[] = "entry";

	assert_true(count <= 64);
	raft_deinit(&th->r[i]);
	assert_int_equal(raft_init(&th->r[i], &cfg, &th->prng[i]), 0);
	memset(&ps, 0, sizeof(ps));
	ps.term = term;
	ps.vote = vote;
	for (uint32_t k = 0; k < th->count; k++) {
		ps.snap_conf.members[k].id = k + 1;
		ps.snap_conf.members[k].role = RAFT_VOTER;
	}
	ps.snap_conf.count = th->count;
	for (uint32_t k = 0; k < count; k++) {
		entries[k].index = k + 1;
		entries[k].term = terms[k];
		entries[k].type = RAFT_ENTRY_COMMAND;
		entries[k].data = (const uint8_t *)payload;
		entries[k].size = sizeof(payload);
	}
	ps.entries = entries;
	ps.entry_count = count;
	assert_int_equal(raft_restore(&th->r[i], &ps), 0);
	th->applied[i] = 0;
}

static inline void th_deinit(struct th *th)
{
	for (uint32_t i = 0; i < th->count; i++)
		raft_deinit(&th->r[i]);
}

static inline void th_queue(struct th *th, const struct raft_msg *m)
{
	assert_true(th->q_len < TH_QUEUE);
	struct th_packet *p = &th->q[(th->q_head + th->q_len) % TH_QUEUE];
	int size = msg_codec_encode(m, p->data, sizeof(p->data));
	assert_true(size > 0);
	p->from = m->from;
	p->to = m->to;
	p->size = (uint16_t)size;
	th->q_len++;
}

static inline void th_step(struct th *th, uint32_t i, const struct raft_event *ev,
			   struct raft_update *up)
{
	struct raft_update local;
	if (up == NULL)
		up = &local;
	raft_step(&th->r[i], ev, up);
	if (ev->type != RAFT_EVENT_PERSISTED) {
		th->last_reject = up->reject;
		th->last_propose_index = up->propose_index;
	}
	for (uint32_t k = 0; k < up->read_count && k < 8; k++)
		th->last_reads[k] = up->reads[k];
	if (up->read_count > 0)
		th->last_read_count = up->read_count;
	for (uint32_t k = 0; k < up->msg_count; k++)
		if (!th->down[i])
			th_queue(th, &up->msgs[k]);
	if (up->apply_count > 0) {
		assert_int_equal(up->apply[0].index, th->applied[i] + 1);
		th->applied[i] = up->apply[up->apply_count - 1].index;
	}
	if (up->snap_chunk_size > 0) {
		assert_true(up->snap_chunk_offset + up->snap_chunk_size <= sizeof(th->snap[i]));
		memcpy(th->snap[i] + up->snap_chunk_offset, up->snap_chunk, up->snap_chunk_size);
	}
	if (up->snap_install) {
		th->applied[i] = up->snap_index;
		th->snap_installed[i] = up->snap_index;
		th->snap_size[i] = up->snap_size;
	}
	if (up->entry_count > 0 && th->auto_persist[i]) {
		struct raft_event p = { .type = RAFT_EVENT_PERSISTED };
		p.persisted.index = up->entries[up->entry_count - 1].index;
		p.persisted.term = up->entries[up->entry_count - 1].term;
		th_step(th, i, &p, NULL);
	}
}

static inline void th_tick(struct th *th, uint32_t i)
{
	struct raft_event ev = { .type = RAFT_EVENT_TICK };
	th_step(th, i, &ev, NULL);
}

static inline void th_persist(struct th *th, uint32_t i)
{
	struct raft_event ev = { .type = RAFT_EVENT_PERSISTED };
	ev.persisted.index = raft_last_index(&th->r[i]);
	ev.persisted.term = raft_term_at(&th->r[i], ev.persisted.index);
	th_step(th, i, &ev, NULL);
}

/* Delivers the oldest queued message; returns false when none. */
static inline bool th_deliver_one(struct th *th)
{
	struct raft_msg m;
	struct raft_entry entries[128];
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE };

	if (th->q_len == 0)
		return false;
	struct th_packet p = th->q[th->q_head];
	th->q_head = (th->q_head + 1) % TH_QUEUE;
	th->q_len--;
	uint32_t to = p.to - 1, from = p.from - 1;
	if (to >= th->count || th->down[to] || (from < TH_NODES && th->cut[from][to]))
		return true;
	assert_int_equal(msg_codec_decode(&m, entries, 128, p.data, p.size), 0);
	ev.msg = &m;
	th_step(th, to, &ev, NULL);
	return true;
}

static inline void th_deliver_all(struct th *th)
{
	for (int n = 0; n < 100000 && th_deliver_one(th); n++)
		;
	assert_int_equal(th->q_len, 0);
}

static inline void th_drop_all(struct th *th)
{
	th->q_len = 0;
}

/* Ticks node i until it campaigns (its randomized timeout is below twice
 * the election ticks), then delivers everything. */
static inline void th_campaign(struct th *th, uint32_t i)
{
	uint8_t role = th->r[i].role;
	for (uint32_t t = 0; t < 2 * th->r[i].cfg.election_ticks && th->r[i].role == role; t++)
		th_tick(th, i);
	th_deliver_all(th);
}

static inline void th_elect(struct th *th, uint32_t i)
{
	th_campaign(th, i);
	assert_int_equal(th->r[i].role, RAFT_LEADER);
	/* Commit the no-op everywhere: a heartbeat round carries commit. */
	th_tick(th, i);
	th_deliver_all(th);
}

static inline void th_propose(struct th *th, uint32_t i, const char *text)
{
	struct raft_buf buf = { .data = text, .size = (uint32_t)strlen(text) };
	struct raft_event ev = { .type = RAFT_EVENT_PROPOSE };
	ev.propose.bufs = &buf;
	ev.propose.count = 1;
	th_step(th, i, &ev, NULL);
}

static inline void th_isolate(struct th *th, uint32_t i, bool cut)
{
	for (uint32_t j = 0; j < TH_NODES; j++) {
		if (j == i)
			continue;
		th->cut[i][j] = cut;
		th->cut[j][i] = cut;
	}
}

#endif
