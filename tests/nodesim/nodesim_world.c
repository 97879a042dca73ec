/*
 * The simulated world of nodesim: the clock, the network and the nodes
 * with their disks; crashes, restarts and partitions (the nemesis). The
 * clients and their workload are in nodesim_clients.c.
 *
 * Time moves by events: the next datagram delivery, the next instant a
 * node's node_work() asked for, the next client wake-up or the next
 * nemesis step, whichever comes first. Every random choice comes from the
 * world's PRNG (seeded once), the disks' own seeds derive from it, and
 * the clients' nonces too: a seed replays exactly.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "node/node.h"
#include "storage/simdisk.h"
#include "tests/node/sim_keys.h"
#include "tests/nodesim/nodesim_world.h"

#define NODE_CLIENT_PORT 7000
#define NODE_PEER_PORT 7001

uint32_t world_node_ip(uint32_t i)
{
	return 0x0a000001u + i; /* 10.0.0.1 .. */
}

uint32_t world_client_ip(uint32_t k)
{
	return 0x0a000101u + k; /* 10.0.1.1 .. */
}

uint32_t world_rand(struct world *w, uint32_t n)
{
	return n == 0 ? 0 : (uint32_t)(prng_next(&w->prng) % n);
}

bool world_chance(struct world *w, uint32_t per_million)
{
	return world_rand(w, 1000000) < per_million;
}

/* ---- the network: a heap of datagrams by delivery time ---- */

static bool dgram_before(const struct dgram *a, const struct dgram *b)
{
	return a->at_ns != b->at_ns ? a->at_ns < b->at_ns : a->order < b->order;
}

static void heap_push(struct world *w, struct dgram *d)
{
	nodesim_grow((void **)&w->heap, w->heap_count, &w->heap_size, sizeof(*w->heap), 1024);
	uint32_t i = w->heap_count++;
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (!dgram_before(d, w->heap[p]))
			break;
		w->heap[i] = w->heap[p];
		i = p;
	}
	w->heap[i] = d;
}

static struct dgram *heap_pop(struct world *w)
{
	struct dgram *top = w->heap[0];
	struct dgram *last = w->heap[--w->heap_count];
	uint32_t i = 0;
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		const struct dgram *best = last;
		if (l < w->heap_count && dgram_before(w->heap[l], best)) {
			m = l;
			best = w->heap[l];
		}
		if (r < w->heap_count && dgram_before(w->heap[r], best))
			m = r;
		if (m == i)
			break;
		w->heap[i] = w->heap[m];
		i = m;
	}
	if (w->heap_count > 0)
		w->heap[i] = last;
	return top;
}

/* Endpoint index: nodes 0..N-1, clients N.. (for the partition groups). */
static int endpoint_of(const struct world *w, uint32_t ip)
{
	for (uint32_t i = 0; i < w->node_count; i++)
		if (world_node_ip(i) == ip)
			return (int)i;
	for (uint32_t k = 0; k < w->client_count; k++)
		if (world_client_ip(k) == ip)
			return (int)(w->node_count + k);
	return -1;
}

void world_send(struct world *w, uint32_t src_ip, uint16_t src_port, uint32_t dst_ip,
		uint16_t dst_port, const void *data, size_t size)
{
	int from = endpoint_of(w, src_ip), to = endpoint_of(w, dst_ip);

	w->res->datagrams++;
	if (from < 0 || to < 0 || size > HASP_MTU_JUMBO)
		return;
	if (w->group[from] != w->group[to] || world_chance(w, w->drop_ppm)) {
		w->res->dropped++;
		return;
	}
	uint32_t copies = world_chance(w, w->dup_ppm) ? 2 : 1;
	w->res->duplicated += copies - 1;
	for (uint32_t c = 0; c < copies; c++) {
		struct dgram *d = hasp_alloc(sizeof(*d) + size);
		HASP_ASSERT(d != NULL);
		/* Mostly a LAN round, sometimes late: reordering follows. */
		uint64_t delay = 20000 + world_rand(w, w->delay_max_ns);
		if (world_chance(w, 20000))
			delay += world_rand(w, 50u * 1000000u);
		d->at_ns = w->now_ns + delay;
		d->order = w->next_order++;
		d->src_ip = src_ip;
		d->dst_ip = dst_ip;
		d->src_port = src_port;
		d->dst_port = dst_port;
		d->size = (uint32_t)size;
		memcpy(d->data, data, size);
		heap_push(w, d);
	}
}

static void node_net_send(void *ctx, uint32_t dst_ip, uint16_t dst_port, uint16_t src_port,
			  const void *payload, size_t size)
{
	struct world_node *wn = ctx;
	world_send(wn->w, world_node_ip(wn->index), src_port, dst_ip, dst_port, payload, size);
}

static void deliver(struct world *w, struct dgram *d)
{
	int to = endpoint_of(w, d->dst_ip);
	int from = endpoint_of(w, d->src_ip);

	/* A partition that began while it flew stops it too. */
	if (to < 0 || from < 0 || w->group[from] != w->group[to]) {
		w->res->dropped++;
		hasp_free(d);
		return;
	}
	if ((uint32_t)to < w->node_count) {
		struct world_node *wn = &w->nodes[to];
		if (wn->up) {
			if (d->dst_port == NODE_PEER_PORT)
				node_peer_rx(&wn->node, w->now_ns, d->src_ip, d->src_port, d->data, d->size);
			else if (d->dst_port == NODE_CLIENT_PORT)
				node_client_rx(&wn->node, w->now_ns, d->src_ip, d->src_port, d->data,
					       d->size);
			wn->wake_ns = w->now_ns;
		}
		hasp_free(d);
		return;
	}
	world_client_deliver(w, (uint32_t)to - w->node_count, d); /* takes d */
}

/* ---- nodes ---- */

static int node_start(struct world *w, uint32_t i)
{
	struct world_node *wn = &w->nodes[i];
	struct node_net net = { .send = node_net_send, .ctx = wn };
	char err[256];

	int rc = node_init(&wn->node, &wn->cfg, simdisk_io(wn->disk), &net, w->now_ns, err,
			   sizeof(err));
	if (rc != 0) {
		snprintf(w->res->first_violation, sizeof(w->res->first_violation),
			 "restart: node %u does not start from its disk: %s (rc %d)", i + 1, err, rc);
		return -1;
	}
	wn->up = true;
	wn->wake_ns = w->now_ns;
	return 0;
}

static void node_crash(struct world *w, uint32_t i)
{
	struct world_node *wn = &w->nodes[i];

	HASP_ASSERT(wn->up);
	/* The process goes (node_deinit lets the ops in flight land, as
	 * the WAL tests' crashes do: simdisk cannot free a node whose files
	 * it already dropped), then the power: every sector written but not
	 * synced keeps, reverts or tears, every unsynced directory change
	 * happens or not. */
	node_deinit(&wn->node);
	simdisk_crash(wn->disk);
	wn->up = false;
	w->res->crashes++;
}

static void node_config_fill(struct world *w, uint32_t i)
{
	struct node_config *c = &w->nodes[i].cfg;
	char err[256], v[64];

	node_config_default(c);
#define SET(key, val) HASP_ASSERT(node_config_set(c, key, val, err, sizeof(err)) == 0)
	snprintf(v, sizeof(v), "%u", i + 1);
	SET("node_id", v);
	SET("cluster_id", "42");
	for (uint32_t m = 0; m < w->node_count; m++) {
		snprintf(v, sizeof(v), "%u,10.0.0.%u,%u,%u", m + 1, m + 1, NODE_PEER_PORT,
			 NODE_CLIENT_PORT);
		SET("member", v);
	}
	snprintf(v, sizeof(v), "10.0.0.%u/24", i + 1);
	SET("ip", v);
	SET("mac", "02:77:00:00:00:01");
	SET("data_dir", "sim");
	SET("eal", "-l 0");
	SET("log_window", "512");
	SET("snapshot_threshold", "200");
	SET("snapshot_trailing", "50");
	SET("segment_size", "65536");
	/* Small tables: the state machine's debug invariants walk them all
	 * on every apply (HASP_DASSERT), and a few hot locks need little. */
	SET("sessions_max", "64");
	SET("locks_max", "64");
	SET("leases_max", "64");
	SET("waiters_max", "64");
	SET("kv_entries_max", "64");
	SET("watches_max", "64");
	SET("time_tick_ms", "20");
	SET("client_auth", "off");
#undef SET
	c->locks.invariants_every = 1; /* small tables: check after every command */
	sim_peer_keys(c); /* every node's key pair, every member's public key */
}

int world_init(struct world *w, const struct nodesim_options *opt, struct nodesim_result *res)
{
	memset(w, 0, sizeof(*w));
	w->res = res;
	w->verbose = opt->verbose;
	w->shrink = opt->shrink;
	prng_seed(&w->prng, opt->seed * 0x9e3779b97f4a7c15ull + 1);
	w->now_ns = 1000000000ull;
	w->node_count = opt->nodes;
	w->client_count = opt->clients + (opt->watch ? 1 : 0);
	w->watcher = opt->watch ? opt->clients : UINT32_MAX;
	/* The network's weather for this seed. */
	w->drop_ppm = world_rand(w, 4) == 0 ? 0 : world_rand(w, 50000);
	w->dup_ppm = world_rand(w, 20000);
	w->delay_max_ns = 100000 + world_rand(w, 3000000);
	for (uint32_t i = 0; i < w->node_count; i++) {
		struct world_node *wn = &w->nodes[i];
		struct simdisk_config dc;
		wn->w = w;
		wn->index = i;
		node_config_fill(w, i);
		simdisk_config_default(&dc, prng_next(&w->prng));
		dc.short_write_per_million = 0; /* as the node tests: short writes are the WAL's tests' */
		wn->disk = simdisk_create(&dc);
		HASP_ASSERT(wn->disk != NULL);
		if (node_start(w, i) != 0)
			return -1;
	}
	w->next_nemesis_ns = w->now_ns + 2000000000ull; /* a leader first */
	return 0;
}

void world_deinit(struct world *w)
{
	for (uint32_t i = 0; i < w->node_count; i++) {
		const struct node_stats *st = &w->nodes[i].node.stats;
		if (w->verbose && w->nodes[i].up)
			fprintf(stderr,
				"nodesim: node %u: client rx %llu, bad %llu, replies %llu, not leader %llu, "
				"no session %llu, events %llu, applied %llu\n",
				i + 1, (unsigned long long)st->client_rx, (unsigned long long)st->client_bad,
				(unsigned long long)st->client_replies,
				(unsigned long long)st->client_not_leader,
				(unsigned long long)st->client_no_session,
				(unsigned long long)st->events_pushed,
				(unsigned long long)w->nodes[i].node.applied);
	}
	for (uint32_t i = 0; i < w->node_count; i++) {
		if (w->nodes[i].up)
			node_deinit(&w->nodes[i].node);
		simdisk_destroy(w->nodes[i].disk);
	}
	while (w->heap_count > 0)
		hasp_free(heap_pop(w));
	hasp_free(w->heap);
}

int world_leader(const struct world *w)
{
	int l = -1;
	uint64_t term = 0;
	for (uint32_t i = 0; i < w->node_count; i++) {
		const struct world_node *wn = &w->nodes[i];
		if (wn->up && wn->node.role == RAFT_LEADER && wn->node.term >= term) {
			l = (int)i;
			term = wn->node.term;
		}
	}
	return l;
}

/* ---- the nemesis: one fault at a time, then a heal ---- */

static int heal(struct world *w)
{
	for (uint32_t i = 0; i < w->node_count; i++) {
		if (!w->nodes[i].up) {
			if (node_start(w, i) != 0)
				return -1;
			w->res->restarts++;
		}
	}
	memset(w->group, 0, sizeof(w->group));
	nodesim_history_add(w->hist, w->now_ns, "nemesis",
			    "\"f\": \"nemesis\", \"type\": \"heal\", \"name\": \"%s\"", w->fault);
	w->fault = NULL;
	return 0;
}

static void fault(struct world *w)
{
	uint32_t n = w->node_count, minority = (n - 1) / 2;
	int leader = world_leader(w);
	uint32_t pick = world_rand(w, 6);

	switch (pick) {
	case 0: /* kill -9 of the leader */
	case 1: /* ... of a random node */
		if (pick == 0 && leader >= 0) {
			node_crash(w, (uint32_t)leader);
			w->fault = "crash_leader";
		} else {
			node_crash(w, world_rand(w, n));
			w->fault = "crash_node";
		}
		break;
	case 2: /* whole-cluster restart */
		for (uint32_t i = 0; i < n; i++)
			node_crash(w, i);
		w->fault = "crash_all";
		break;
	case 3: /* isolate the leader (its clients stay with it: a stale leader) */
		if (leader >= 0) {
			w->group[leader] = 1;
			for (uint32_t k = 0; k < w->client_count; k++)
				w->group[n + k] = (uint8_t)world_rand(w, 2);
		}
		w->fault = "isolate_leader";
		w->res->partitions++;
		break;
	case 4: /* a minority/majority split, clients scattered */
		for (uint32_t m = 0; m < minority; m++)
			w->group[world_rand(w, n)] = 1;
		for (uint32_t k = 0; k < w->client_count; k++)
			w->group[n + k] = (uint8_t)world_rand(w, 2);
		w->fault = "split";
		w->res->partitions++;
		break;
	default: /* a client cut off from everything */
		w->group[n + world_rand(w, w->client_count)] = 2;
		w->fault = "isolate_client";
		w->res->partitions++;
		break;
	}
	nodesim_history_add(w->hist, w->now_ns, "nemesis",
			    "\"f\": \"nemesis\", \"type\": \"fault\", \"name\": \"%s\"", w->fault);
	if (w->verbose)
		fprintf(stderr, "nodesim: t=%llu fault %s (leader %d)\n", (unsigned long long)w->now_ns,
			w->fault, leader + 1);
}

static int nemesis(struct world *w)
{
	if (w->fault != NULL) {
		if (heal(w) != 0)
			return -1;
		w->next_nemesis_ns = w->now_ns + 500000000ull + world_rand(w, 2000u) * 1000000ull;
	} else {
		fault(w);
		w->next_nemesis_ns = w->now_ns + 100000000ull + world_rand(w, 3000u) * 1000000ull;
	}
	return 0;
}

/* ---- the loop ---- */

/* The instant the next datagram lands or a node wants to run. */
static uint64_t nodes_next(const struct world *w)
{
	uint64_t next = UINT64_MAX;

	if (w->heap_count > 0)
		next = w->heap[0]->at_ns;
	for (uint32_t i = 0; i < w->node_count; i++)
		if (w->nodes[i].up && w->nodes[i].wake_ns < next)
			next = w->nodes[i].wake_ns;
	return next;
}

/* Delivers what has landed, then runs every node whose instant has come. */
static void run_nodes(struct world *w)
{
	while (w->heap_count > 0 && w->heap[0]->at_ns <= w->now_ns)
		deliver(w, heap_pop(w));
	for (uint32_t i = 0; i < w->node_count; i++) {
		struct world_node *wn = &w->nodes[i];
		if (!wn->up || wn->wake_ns > w->now_ns)
			continue;
		uint64_t deadline = UINT64_MAX;
		(void)node_work(&wn->node, w->now_ns, &deadline);
		/* Disk completions come in node_work's reaps: look again soon
		 * while ops are in flight. */
		uint64_t soon = w->now_ns + (simdisk_inflight(wn->disk) > 0 ? 50000u : 10000000u);
		if (deadline > soon)
			deadline = soon;
		if (deadline <= w->now_ns)
			deadline = w->now_ns + 20000;
		wn->wake_ns = deadline;
	}
}

int world_step(struct world *w, uint64_t nemesis_until_ns)
{
	uint64_t next = nodes_next(w);
	uint64_t cw = world_clients_next(w);
	next = cw < next ? cw : next;
	bool nem = w->next_nemesis_ns < nemesis_until_ns || w->fault != NULL;
	if (nem && w->next_nemesis_ns < next)
		next = w->next_nemesis_ns;
	HASP_ASSERT(next != UINT64_MAX);
	if (next > w->now_ns)
		w->now_ns = next;

	while (w->heap_count > 0 && w->heap[0]->at_ns <= w->now_ns)
		deliver(w, heap_pop(w));
	if (nem && w->now_ns >= w->next_nemesis_ns && nemesis(w) != 0)
		return -1;
	run_nodes(w);
	world_clients_run(w);
	return 0;
}

void world_run_nodes_until(struct world *w, uint64_t until_ns, const struct sim_client *sc)
{
	while (w->now_ns < until_ns && sc->inbox_head == NULL) {
		uint64_t next = nodes_next(w);
		w->now_ns = next < until_ns ? (next > w->now_ns ? next : w->now_ns) : until_ns;
		run_nodes(w);
	}
}
