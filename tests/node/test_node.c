/*
 * The node core without DPDK: three nodes (raft + locks + WAL on the
 * simulated disk) wired by an in-memory network, a simulated clock, and a
 * client that speaks the real wire protocol. What haspd does on the lcore,
 * minus the packets: dispatch, batching, pending replies, ReadIndex reads,
 * expiry timers, pushed events, restart from the WAL, and that none of it
 * allocates once started (docs/STYLE.md §6).
 */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/wire_auth.h"
#include "node/node.h"
#include "node/notify.h"
#include "hasp/errors.h"
#include "raft/msg_codec.h"
#include "storage/simdisk.h"
#include "storage/wal.h"
#include "tests/node/sim_keys.h"
#include "tests/storage/forbid_io.h"
#include "tests/test_util.h"

#define NODES 3
#define NET_MAX 8192
#define CLIENT_IP 0x0a000064u /* 10.0.0.100 */
#define CLIENT_PORT 5555
#define STEP_NS 100000ull     /* 100 us per simulation step */

/* The cluster key every simulated node shares (a test key, not secret). */

struct dgram {
	uint32_t src_ip, dst_ip;
	uint16_t src_port, dst_port;
	uint16_t size;
	uint8_t data[HASP_DATAGRAM_SIZE_MAX];
};

struct sim {
	struct node nodes[NODES];
	struct simdisk *disks[NODES];
	bool up[NODES];
	bool isolated[NODES];
	bool paused[NODES]; /* SIGSTOPped: runs nothing, its datagrams wait */
	struct node_config cfg[NODES];
	struct dgram *net;
	uint32_t net_count;
	struct dgram *inbox; /* datagrams to the client */
	uint32_t inbox_count;
	uint64_t now_ns;
	uint32_t sending; /* node index whose callback runs */
};

static struct sim *g;
/* Set by the client-authentication tests before sim_create: the nodes then
 * run with client_auth = on and this identities file. */
static const char *sim_identities;
/* Set by a test before sim_create: more configuration keys, NULL-ended. */
static const char *const *sim_extra_config;

static void sim_send(void *ctx, uint32_t ip, uint16_t dst_port, uint16_t src_port, const void *p,
		     size_t size)
{
	struct sim *s = g;
	uint32_t from = (uint32_t)(uintptr_t)ctx;
	if (s->isolated[from])
		return;
	struct dgram *d = ip == CLIENT_IP ? (s->inbox_count < NET_MAX ? &s->inbox[s->inbox_count++] : NULL)
					  : (s->net_count < NET_MAX ? &s->net[s->net_count++] : NULL);
	if (d == NULL)
		return;
	d->src_ip = s->cfg[from].ip;
	d->dst_ip = ip;
	d->src_port = src_port;
	d->dst_port = dst_port;
	d->size = (uint16_t)size;
	memcpy(d->data, p, size);
}

static void sim_start_node(struct sim *s, uint32_t i)
{
	char err[256];
	struct node_net net = { .send = sim_send, .ctx = (void *)(uintptr_t)i };
	int rc = node_init(&s->nodes[i], &s->cfg[i], forbid_io_wrap(simdisk_io(s->disks[i])), &net,
			   s->now_ns, err, sizeof(err));
	if (rc != 0)
		print_message("node_init: %s\n", err);
	assert_int_equal(rc, 0);
	s->up[i] = true;
}

static struct sim *sim_create_with(uint64_t seed, const char *segment_size)
{
	struct sim *s = test_calloc(1, sizeof(*s));
	s->net = test_calloc(NET_MAX, sizeof(*s->net));
	s->inbox = test_calloc(NET_MAX, sizeof(*s->inbox));
	s->now_ns = 1000000000ull;
	g = s;
	for (uint32_t i = 0; i < NODES; i++) {
		struct node_config *c = &s->cfg[i];
		char err[256];
		node_config_default(c);
		assert_int_equal(node_config_set(c, "node_id", i == 0 ? "1" : i == 1 ? "2" : "3", err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "cluster_id", "42", err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "member", "1,10.0.0.1,7001,7000", err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "member", "2,10.0.0.2,7001,7000", err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "member", "3,10.0.0.3,7001,7000", err, sizeof(err)), 0);
		const char *ips[] = { "10.0.0.1/24", "10.0.0.2/24", "10.0.0.3/24" };
		assert_int_equal(node_config_set(c, "ip", ips[i], err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "mac", "02:77:00:00:00:01", err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "data_dir", "sim", err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "eal", "-l 0", err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "log_window", "512", err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "snapshot_threshold", "100", err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "snapshot_trailing", "20", err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "segment_size", segment_size, err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "sessions_max", "64", err, sizeof(err)), 0);
		assert_int_equal(node_config_set(c, "time_tick_ms", "20", err, sizeof(err)), 0);
		/* Clients of this simulation speak v1 unless a test names an
		 * identities file (the client-authentication tests). */
		if (sim_identities != NULL)
			assert_int_equal(node_config_set(c, "client_identities_file", sim_identities, err,
							 sizeof(err)), 0);
		else
			assert_int_equal(node_config_set(c, "client_auth", "off", err, sizeof(err)), 0);
		for (const char *const *kv = sim_extra_config; kv != NULL && kv[0] != NULL; kv += 2)
			assert_int_equal(node_config_set(c, kv[0], kv[1], err, sizeof(err)), 0);
		sim_peer_keys(c);
		struct simdisk_config dc;
		simdisk_config_default(&dc, seed + i);
		dc.short_write_per_million = 0;
		s->disks[i] = simdisk_create(&dc);
		assert_non_null(s->disks[i]);
		sim_start_node(s, i);
	}
	return s;
}

static struct sim *sim_create(uint64_t seed)
{
	return sim_create_with(seed, "262144");
}

static void sim_destroy(struct sim *s)
{
	for (uint32_t i = 0; i < NODES; i++) {
		if (s->up[i])
			node_deinit(&s->nodes[i]);
		simdisk_destroy(s->disks[i]);
	}
	test_free(s->net);
	test_free(s->inbox);
	test_free(s);
	g = NULL;
}

static int node_of_ip(const struct sim *s, uint32_t ip)
{
	for (int i = 0; i < NODES; i++)
		if (s->cfg[i].ip == ip)
			return i;
	return -1;
}

/* One step: deliver what is in flight, then run every node's work. Each
 * node entry point runs inside the forbidden-thread window while a test
 * opens it (tests/storage/forbid_io.h). */
static void sim_step(struct sim *s)
{
	static struct dgram batch[NET_MAX];
	uint32_t count = s->net_count;
	memcpy(batch, s->net, count * sizeof(*batch));
	s->net_count = 0;
	for (uint32_t k = 0; k < count; k++) {
		int i = node_of_ip(s, batch[k].dst_ip);
		if (i < 0 || !s->up[i] || s->isolated[i])
			continue;
		if (s->paused[i]) {
			/* Kept in order for its resumption (a socket buffer). */
			if (s->net_count < NET_MAX)
				s->net[s->net_count++] = batch[k];
			continue;
		}
		if (batch[k].dst_port == 7001) {
			forbid_io_enter();
			node_peer_rx(&s->nodes[i], s->now_ns, batch[k].src_ip, batch[k].src_port, batch[k].data,
				     batch[k].size);
			forbid_io_leave();
		}
	}
	s->now_ns += STEP_NS;
	for (uint32_t i = 0; i < NODES; i++) {
		uint64_t deadline = UINT64_MAX;
		if (!s->up[i] || s->paused[i])
			continue;
		forbid_io_enter();
		(void)node_work(&s->nodes[i], s->now_ns, &deadline);
		forbid_io_leave();
	}
}

static void sim_run_ms(struct sim *s, uint32_t ms)
{
	for (uint64_t end = s->now_ns + ms * 1000000ull; s->now_ns < end;)
		sim_step(s);
}

/* A whole-cluster restart: every node stops (its memory gone, its disk
 * kept) and starts again. */
static void sim_restart_all(struct sim *s)
{
	for (uint32_t i = 0; i < NODES; i++) {
		node_deinit(&s->nodes[i]);
		s->up[i] = false;
	}
	for (uint32_t i = 0; i < NODES; i++)
		sim_start_node(s, i);
}

static int sim_leader(struct sim *s)
{
	int leader = -1;
	for (int i = 0; i < NODES; i++)
		if (s->up[i] && !s->isolated[i] && s->nodes[i].role == RAFT_LEADER && s->nodes[i].applied > 0)
			leader = i;
	return leader;
}

static int sim_wait_leader(struct sim *s)
{
	for (int t = 0; t < 5000 && sim_leader(s) < 0; t++)
		sim_run_ms(s, 1);
	int l = sim_leader(s);
	assert_true(l >= 0);
	sim_run_ms(s, 20); /* its TICK commits */
	return l;
}

/* Delivers `req` to node i from the client's address at `port`, now,
 * without a simulation step: nothing reaches the other nodes in between,
 * so a command the node proposed is still uncommitted afterwards. */
static void sim_rx(struct sim *s, int i, const struct hasp_wire_msg *req, uint16_t port)
{
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	int size = hasp_wire_encode(req, buf, sizeof(buf));
	assert_true(size > 0);
	forbid_io_enter();
	node_client_rx(&s->nodes[i], s->now_ns, CLIENT_IP, port, buf, (size_t)size);
	forbid_io_leave();
}

/* Sends a request to node i and runs until a reply with this seq arrives. */
static bool sim_call(struct sim *s, int i, const struct hasp_wire_msg *req, struct hasp_wire_msg *reply,
		     uint8_t *keep)
{
	s->inbox_count = 0;
	sim_rx(s, i, req, CLIENT_PORT);
	for (int t = 0; t < 20000; t++) {
		for (uint32_t k = 0; k < s->inbox_count; k++) {
			struct dgram *d = &s->inbox[k];
			memcpy(keep, d->data, d->size);
			if (hasp_wire_decode_reply(keep, d->size, reply) == 0 &&
			    reply->hdr.opcode == req->hdr.opcode && reply->hdr.seq == req->hdr.seq)
				return true;
		}
		sim_step(s);
	}
	return false;
}

static uint64_t sim_open(struct sim *s, int i, uint64_t nonce)
{
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_SESSION_OPEN, .seq = 1 } };
	struct hasp_wire_msg reply;
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	req.body.session_open = (struct hasp_wire_session_open){ .client_nonce = nonce, .ttl_ms = 60000 };
	assert_true(sim_call(s, i, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	return reply.body.session_opened.session_id;
}

static struct hasp_wire_msg acquire_req(uint64_t session, uint64_t seq, const char *name, uint32_t ttl,
					uint8_t mode)
{
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_ACQUIRE, .session_id = session, .seq = seq } };
	req.body.acquire = (struct hasp_wire_acquire){
		.name = { (const uint8_t *)name, strlen(name) }, .ttl_ms = ttl, .mode = mode,
	};
	return req;
}

static struct hasp_wire_msg read_req(uint64_t session, uint64_t seq, const char *name)
{
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_LOCK_READ, .session_id = session, .seq = seq } };
	req.body.lock_read.name = (struct hasp_wire_bytes){ (const uint8_t *)name, strlen(name) };
	return req;
}

static void test_node_three_nodes_elect_grant_and_redirect(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(1));
	int l = sim_wait_leader(s);
	int f = (l + 1) % NODES;
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;

	uint64_t sid = sim_open(s, l, 7);
	assert_true(sid != 0);
	struct hasp_wire_msg req = acquire_req(sid, 1, "lock/a", 5000, HASP_ACQUIRE_TRY);
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	uint64_t token = reply.body.granted.token;
	assert_true(token > 0);

	/* A retry of the same request gets the cached reply (exactly once),
	 * which the leader answers from its reply cache: no duplicate entry
	 * is proposed and applied. So does a retried open (same nonce). */
	const struct node *ln = &s->nodes[l];
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	assert_int_equal(reply.body.granted.token, token);
	assert_int_equal(ln->stats.client_replies_from_cache, 1);
	assert_int_equal(sim_open(s, l, 7), sid);
	assert_int_equal(ln->stats.client_replies_from_cache, 2);
	assert_int_equal(ln->sm.stats.duplicates, 0);

	/* A follower redirects with the leader's address and client port. */
	req = read_req(sid, 2, "lock/a");
	assert_true(sim_call(s, f, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_NOT_LEADER);
	assert_int_equal(reply.body.not_leader.known, 1);
	assert_int_equal(reply.body.not_leader.leader_id, s->cfg[l].node_id);
	assert_int_equal(reply.body.not_leader.ipv4[3], (uint8_t)s->cfg[l].ip);
	assert_int_equal(reply.body.not_leader.port, 7000);

	/* The leader answers the read after a ReadIndex round. */
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(reply.body.lock_info.token, token);
	assert_int_equal(reply.body.lock_info.holder_session_id, sid);
	assert_true(s->nodes[l].stats.reads >= 1);
	sim_destroy(s);
}

/* Replies in the client's inbox to `opcode` and `seq` sent to `port`, with
 * `status` (HASP_STATUS_COUNT: any status). */
static int sim_replies(struct sim *s, uint8_t opcode, uint64_t seq, uint16_t port, unsigned status)
{
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	int count = 0;

	for (uint32_t k = 0; k < s->inbox_count; k++) {
		memcpy(keep, s->inbox[k].data, s->inbox[k].size);
		if (hasp_wire_decode_reply(keep, s->inbox[k].size, &reply) == 0 &&
		    reply.hdr.opcode == opcode && reply.hdr.seq == seq && s->inbox[k].dst_port == port &&
		    (status == HASP_STATUS_COUNT || reply.hdr.status == status))
			count++;
	}
	return count;
}

/* A byte-identical copy of a command still in flight (proposed and not
 * committed, or still in the open batch) is not proposed again: the
 * leader drops it and the original's reply, once applied, is the one
 * answer (docs/PROTOCOL.md "Exactly once"). The same seq with another
 * digest is no copy: proposed, and refused by the apply. */
static void test_node_in_flight_copy_is_not_proposed_again(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(15));
	int l = sim_wait_leader(s);
	struct node *n = &s->nodes[l];
	uint64_t sid = sim_open(s, l, 71);
	uint64_t duplicates = n->sm.stats.duplicates;
	s->inbox_count = 0;

	/* Seq 1 is proposed at once (nothing else was in flight); its copy,
	 * in the same step, finds it proposed and not committed (no follower
	 * has seen it yet). One from another address is dropped all the same. */
	struct hasp_wire_msg a = acquire_req(sid, 1, "lock/f1", 60000, HASP_ACQUIRE_TRY);
	uint64_t last = raft_last_index(&n->raft);
	sim_rx(s, l, &a, CLIENT_PORT);
	assert_int_equal(raft_last_index(&n->raft), last + 1);
	assert_true(n->raft.commit < last + 1);
	sim_rx(s, l, &a, CLIENT_PORT);
	sim_rx(s, l, &a, CLIENT_PORT + 1);
	assert_int_equal(raft_last_index(&n->raft), last + 1);
	assert_int_equal(n->batch_count, 0);
	assert_int_equal(n->stats.client_retransmits_in_flight, 2);

	/* Seq 2 waits in the batch behind seq 1; its copy finds it there. */
	struct hasp_wire_msg b = acquire_req(sid, 2, "lock/f2", 60000, HASP_ACQUIRE_TRY);
	sim_rx(s, l, &b, CLIENT_PORT);
	sim_rx(s, l, &b, CLIENT_PORT);
	assert_int_equal(n->batch_count, 1);
	assert_int_equal(n->stats.client_retransmits_in_flight, 3);

	/* Seq 2 with another body (another digest) is proposed, and the
	 * state machine refuses it; seq 2's first copy keeps its mark. */
	struct hasp_wire_msg c = acquire_req(sid, 2, "lock/f3", 60000, HASP_ACQUIRE_TRY);
	sim_rx(s, l, &c, CLIENT_PORT);
	assert_int_equal(n->batch_count, 2);
	sim_rx(s, l, &b, CLIENT_PORT);
	assert_int_equal(n->batch_count, 2);
	assert_int_equal(n->stats.client_retransmits_in_flight, 4);

	sim_run_ms(s, 50);
	assert_int_equal(sim_replies(s, HASP_OP_ACQUIRE, 1, CLIENT_PORT, HASP_STATUS_COUNT), 1);
	assert_int_equal(sim_replies(s, HASP_OP_ACQUIRE, 1, CLIENT_PORT, HASP_STATUS_GRANTED), 1);
	assert_int_equal(sim_replies(s, HASP_OP_ACQUIRE, 1, CLIENT_PORT + 1, HASP_STATUS_COUNT), 0);
	assert_int_equal(sim_replies(s, HASP_OP_ACQUIRE, 2, CLIENT_PORT, HASP_STATUS_COUNT), 2);
	assert_int_equal(sim_replies(s, HASP_OP_ACQUIRE, 2, CLIENT_PORT, HASP_STATUS_GRANTED), 1);
	assert_int_equal(sim_replies(s, HASP_OP_ACQUIRE, 2, CLIENT_PORT, HASP_STATUS_BAD_REQUEST), 1);
	/* No duplicate reached the log. */
	assert_int_equal(n->sm.stats.duplicates, duplicates);
	assert_int_equal(n->stats.client_retransmits_in_flight, 4);

	/* Applied now: a copy is answered from the cache. */
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	assert_true(sim_call(s, l, &a, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	assert_int_equal(n->stats.client_replies_from_cache, 1);
	sim_destroy(s);
}

/* Steps until node i leads and has applied its term's first entry. */
static void sim_wait_lead(struct sim *s, int i)
{
	for (int t = 0; t < 50000 && !(s->nodes[i].role == RAFT_LEADER && s->nodes[i].lead_ready); t++)
		sim_step(s);
	assert_int_equal(s->nodes[i].role, RAFT_LEADER);
	assert_true(s->nodes[i].lead_ready);
}

/* The mark of a copy in flight does not outlive what it marks: a batch
 * refused when leadership moves, and a term that ended. When the node
 * leads again, a copy of a command that was never proposed is proposed
 * and answered, one that applied is answered from the cache, and a copy
 * in flight in the new term is dropped again. */
static void test_node_in_flight_mark_ends_with_its_batch_and_term(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(16));
	int l = sim_wait_leader(s);
	int f = (l + 1) % NODES;
	struct node *n = &s->nodes[l];
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	uint64_t sid = sim_open(s, l, 81);
	s->inbox_count = 0;

	/* Seq 1 proposed, seq 2 in the batch behind it; a copy of each. */
	struct hasp_wire_msg a = acquire_req(sid, 1, "lock/g1", 60000, HASP_ACQUIRE_TRY);
	struct hasp_wire_msg b = acquire_req(sid, 2, "lock/g2", 60000, HASP_ACQUIRE_TRY);
	sim_rx(s, l, &a, CLIENT_PORT);
	sim_rx(s, l, &b, CLIENT_PORT);
	sim_rx(s, l, &a, CLIENT_PORT);
	sim_rx(s, l, &b, CLIENT_PORT);
	assert_int_equal(n->batch_count, 1);
	assert_int_equal(n->stats.client_retransmits_in_flight, 2);

	/* Leadership moves to f before the batch closes: the batch is
	 * refused (a transfer is in progress, or the node is no longer the
	 * leader), so seq 2 was never proposed; seq 1 commits under f. */
	uint64_t term = n->term;
	struct raft_event ev = { .type = RAFT_EVENT_TRANSFER, .transfer = { .target = s->cfg[f].node_id } };
	node_step(n, &ev);
	sim_wait_lead(s, f);
	sim_run_ms(s, 20);
	assert_int_equal(sim_replies(s, HASP_OP_ACQUIRE, 1, CLIENT_PORT, HASP_STATUS_GRANTED), 1);
	assert_int_equal(sim_replies(s, HASP_OP_ACQUIRE, 2, CLIENT_PORT, HASP_STATUS_GRANTED), 0);

	/* And back to the first node, in a later term. */
	ev.transfer.target = s->cfg[l].node_id;
	node_step(&s->nodes[f], &ev);
	sim_wait_lead(s, l);
	assert_true(n->term > term);

	/* Seq 2 was never proposed: its copy is proposed now and granted,
	 * not taken for the copy of a batch item long gone. */
	assert_true(sim_call(s, l, &b, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	/* Seq 1 applied: answered from the cache. */
	uint64_t cached = n->stats.client_replies_from_cache;
	assert_true(sim_call(s, l, &a, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	assert_int_equal(n->stats.client_replies_from_cache, cached + 1);
	assert_int_equal(n->stats.client_retransmits_in_flight, 2);

	/* In this term a copy in flight is dropped again. */
	struct hasp_wire_msg c = acquire_req(sid, 3, "lock/g3", 60000, HASP_ACQUIRE_TRY);
	uint64_t last = raft_last_index(&n->raft);
	s->inbox_count = 0;
	sim_rx(s, l, &c, CLIENT_PORT);
	sim_rx(s, l, &c, CLIENT_PORT);
	assert_int_equal(raft_last_index(&n->raft), last + 1);
	assert_int_equal(n->stats.client_retransmits_in_flight, 3);
	sim_run_ms(s, 50);
	assert_int_equal(sim_replies(s, HASP_OP_ACQUIRE, 3, CLIENT_PORT, HASP_STATUS_COUNT), 1);
	sim_destroy(s);
}

/* Opens sessions A and B (nonces 11, 12); A takes `name` (TRY, ttl_a),
 * B queues behind it (WAIT, ttl_b, first in line). Returns A's token. */
static uint64_t hold_and_queue(struct sim *s, int l, const char *name, uint32_t ttl_a,
			       uint32_t ttl_b, uint64_t *a, uint64_t *b)
{
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;

	*a = sim_open(s, l, 11);
	*b = sim_open(s, l, 12);
	struct hasp_wire_msg req = acquire_req(*a, 1, name, ttl_a, HASP_ACQUIRE_TRY);
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	uint64_t token = reply.body.granted.token;
	req = acquire_req(*b, 1, name, ttl_b, HASP_ACQUIRE_WAIT);
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_QUEUED);
	assert_int_equal(reply.body.queued.position, 1);
	return token;
}

static void test_node_expiry_hands_lock_to_waiter_with_pushed_event(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(2));
	int l = sim_wait_leader(s);
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;

	uint64_t a, b;
	uint64_t token_a = hold_and_queue(s, l, "lock/x", 100, 5000, &a, &b);

	/* The leader's timer expires A's lease; B is told by an EVENT. */
	s->inbox_count = 0;
	bool granted = false;
	uint64_t token_b = 0;
	for (int t = 0; t < 5000 && !granted; t++) {
		sim_step(s);
		for (uint32_t k = 0; k < s->inbox_count; k++) {
			memcpy(keep, s->inbox[k].data, s->inbox[k].size);
			if (hasp_wire_decode_reply(keep, s->inbox[k].size, &reply) == 0 &&
			    reply.hdr.opcode == HASP_OP_EVENT && reply.hdr.session_id == b &&
			    reply.body.event.type == HASP_EVENT_LOCK_GRANTED) {
				granted = true;
				token_b = reply.body.event.revision;
			}
		}
	}
	assert_true(granted);
	assert_true(token_b > token_a);
	assert_true(s->nodes[l].stats.expiries_proposed >= 1);
	assert_true(s->nodes[l].stats.events_pushed >= 1);
	sim_destroy(s);
}

/* Steps until session's LOCK_GRANTED events reach the client, then counts
 * those sent to client port `port`. */
static int grant_events_to(struct sim *s, uint64_t session, uint16_t port)
{
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg ev;
	int sent = 0, any = 0;

	for (int t = 0; t < 200 && any == 0; t++) {
		sim_step(s);
		for (uint32_t k = 0; k < s->inbox_count; k++) {
			memcpy(keep, s->inbox[k].data, s->inbox[k].size);
			if (hasp_wire_decode_reply(keep, s->inbox[k].size, &ev) != 0 ||
			    ev.hdr.opcode != HASP_OP_EVENT || ev.hdr.session_id != session ||
			    ev.body.event.type != HASP_EVENT_LOCK_GRANTED)
				continue;
			any++;
			sent += s->inbox[k].dst_port == port;
		}
	}
	return sent;
}

/* A byte-identical replay of a session's earlier request, from another
 * address, must not move where the session's events go: only a sequence
 * number the node has not seen from the session yet does (a tag proves
 * who made a datagram, not who sends it now). */
static void test_node_replayed_request_does_not_move_the_sessions_events(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(2));
	int l = sim_wait_leader(s);
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX], captured[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	const uint16_t attacker_port = CLIENT_PORT + 1;

	uint64_t a, b;
	uint64_t token = hold_and_queue(s, l, "lock/r", 60000, 60000, &a, &b);
	/* B's WAIT as it was sent (the same message encodes to the same bytes). */
	struct hasp_wire_msg req = acquire_req(b, 1, "lock/r", 60000, HASP_ACQUIRE_WAIT);
	int size = hasp_wire_encode(&req, captured, sizeof(captured));
	assert_true(size > 0);

	/* The replay, from elsewhere: answered (from the cache), and nothing
	 * else. */
	s->inbox_count = 0;
	node_client_rx(&s->nodes[l], s->now_ns, CLIENT_IP, attacker_port, captured, (size_t)size);
	sim_run_ms(s, 20);
	bool replay_answered = false;
	for (uint32_t k = 0; k < s->inbox_count; k++)
		replay_answered |= s->inbox[k].dst_port == attacker_port;
	assert_true(replay_answered);

	/* A releases; B's grant goes where B's requests came from. */
	struct hasp_wire_msg rel = { .hdr = { .opcode = HASP_OP_RELEASE, .session_id = a, .seq = 2 } };
	rel.body.release = (struct hasp_wire_name_token){ { (const uint8_t *)"lock/r", 6 }, token };
	assert_true(sim_call(s, l, &rel, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(grant_events_to(s, b, attacker_port), 0);
	assert_int_equal(grant_events_to(s, b, CLIENT_PORT), 1);

	/* A new seq from a new address (the client's NAT rebound) does move
	 * it: B, queued again from there, is granted there. */
	req = acquire_req(a, 3, "lock/s", 60000, HASP_ACQUIRE_TRY);
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	token = reply.body.granted.token;
	req = acquire_req(b, 2, "lock/s", 60000, HASP_ACQUIRE_WAIT);
	size = hasp_wire_encode(&req, captured, sizeof(captured));
	assert_true(size > 0);
	node_client_rx(&s->nodes[l], s->now_ns, CLIENT_IP, attacker_port, captured, (size_t)size);
	sim_run_ms(s, 20);
	rel.hdr.seq = 4;
	rel.body.release = (struct hasp_wire_name_token){ { (const uint8_t *)"lock/s", 6 }, token };
	assert_true(sim_call(s, l, &rel, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(grant_events_to(s, b, attacker_port), 1);
	sim_destroy(s);
}

/* A waiter that also watches its lock gets the hand-off once (correctness
 * issue, item 3: the grant to the waiter and the watch event were two
 * datagrams carrying the same event). */
static void test_node_waiter_that_watches_gets_its_grant_once(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(14));
	int l = sim_wait_leader(s);
	struct node *n = &s->nodes[l];
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;

	uint64_t a = sim_open(s, l, 61), b = sim_open(s, l, 62);
	struct hasp_wire_msg req = acquire_req(a, 1, "lock/w", 100, HASP_ACQUIRE_TRY);
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	req = acquire_req(b, 1, "lock/w", 5000, HASP_ACQUIRE_WAIT);
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_QUEUED);
	struct hasp_wire_msg watch = { .hdr = { .opcode = HASP_OP_WATCH, .session_id = b, .seq = 2 } };
	watch.body.watch = (struct hasp_wire_watch){ .name = { (const uint8_t *)"lock/w", 6 } };
	assert_true(sim_call(s, l, &watch, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);

	/* A's lease expires; B is granted the lock as a waiter and sees it as
	 * a watcher: one event, and the node says it dropped the copy. */
	uint64_t dedup = n->stats.events_deduplicated;
	s->inbox_count = 0;
	sim_run_ms(s, 2000);
	int grants = 0, released = 0;
	for (uint32_t k = 0; k < s->inbox_count; k++) {
		memcpy(keep, s->inbox[k].data, s->inbox[k].size);
		if (hasp_wire_decode_reply(keep, s->inbox[k].size, &reply) != 0 || reply.hdr.opcode != HASP_OP_EVENT ||
		    reply.hdr.session_id != b)
			continue;
		grants += reply.body.event.type == HASP_EVENT_LOCK_GRANTED;
		released += reply.body.event.type == HASP_EVENT_LOCK_RELEASED;
	}
	assert_int_equal(released, 1); /* the watch saw A's lease end */
	assert_int_equal(grants, 1);
	assert_int_equal(n->stats.events_deduplicated, dedup + 1);
	sim_destroy(s);
}

static void test_node_isolated_leader_replaced_grant_kept(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(3));
	int l = sim_wait_leader(s);
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;

	uint64_t sid = sim_open(s, l, 21);
	struct hasp_wire_msg req = acquire_req(sid, 1, "lock/k", 60000, HASP_ACQUIRE_TRY);
	assert_true(sim_call(s, l, &req, &reply, keep));
	uint64_t token = reply.body.granted.token;

	s->isolated[l] = true;
	int nl = -1;
	for (int t = 0; t < 5000 && nl < 0; t++) {
		sim_run_ms(s, 1);
		nl = sim_leader(s);
	}
	assert_true(nl >= 0 && nl != l);
	sim_run_ms(s, 20);
	req = read_req(sid, 2, "lock/k");
	assert_true(sim_call(s, nl, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(reply.body.lock_info.token, token);
	/* A new grant under the new leader has a larger token. */
	req = acquire_req(sid, 3, "lock/k2", 60000, HASP_ACQUIRE_TRY);
	assert_true(sim_call(s, nl, &req, &reply, keep));
	assert_true(reply.body.granted.token > token);
	sim_destroy(s);
}

/* Steps until a node other than `not` leads (role only: it need not have
 * applied anything yet); *before_ns is the time before the step in which
 * it won. */
static int sim_step_to_a_win(struct sim *s, int not, uint64_t *before_ns)
{
	for (int t = 0; t < 50000; t++) {
		*before_ns = s->now_ns;
		sim_step(s);
		for (int i = 0; i < NODES; i++)
			if (i != not && s->up[i] && !s->isolated[i] && s->nodes[i].role == RAFT_LEADER)
				return i;
	}
	fail_msg("no node won an election");
	return -1;
}

/* hasp_leader_ready_seconds_last: from the step a node won its election to
 * the step it applied the term's first entry. It takes at least a step (the
 * no-op needs a follower's acknowledgement) and no more than the steps in
 * between; a node that never led reports 0; a new leader's figure is its
 * own, and the old leader keeps its last one. */
static void test_node_leader_ready_is_timed_from_the_win_to_the_first_entry(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(41));
	uint64_t before_win = 0;
	int l = sim_step_to_a_win(s, -1, &before_win);
	struct node *n = &s->nodes[l];
	assert_false(n->lead_ready);
	assert_int_equal(n->lead_ready_ns_last, 0);
	for (int t = 0; t < 50000 && !n->lead_ready; t++)
		sim_step(s);
	assert_true(n->lead_ready);
	assert_true(n->applied >= n->raft.term_start);
	uint64_t first = n->lead_ready_ns_last;
	assert_true(first >= STEP_NS);
	assert_true(first <= s->now_ns - before_win);
	for (int i = 0; i < NODES; i++)
		if (i != l)
			assert_int_equal(s->nodes[i].lead_ready_ns_last, 0);

	s->isolated[l] = true;
	int nl = sim_step_to_a_win(s, l, &before_win);
	struct node *m = &s->nodes[nl];
	assert_false(m->lead_ready);
	for (int t = 0; t < 50000 && !m->lead_ready; t++)
		sim_step(s);
	assert_true(m->lead_ready);
	assert_true(m->lead_ready_ns_last >= STEP_NS);
	assert_true(m->lead_ready_ns_last <= s->now_ns - before_win);
	assert_int_equal(n->lead_ready_ns_last, first);
	sim_destroy(s);
}

/* A follower that was not scheduled for 600 ms (30 ticks, more than an
 * election timeout) while the leader's heartbeats queued for it reads them
 * on waking and neither campaigns nor disturbs the leader: the ticks it
 * missed are dropped, not replayed in one burst before the heartbeats count
 * (docs/RAFT.md, "Ticks after a stall"). */
static void test_node_stalled_follower_does_not_campaign_on_waking(void **state)
{
	(void)state;
	struct sim *s = sim_create(61);
	int l = sim_wait_leader(s);
	int f = (l + 1) % NODES;
	uint64_t term = s->nodes[l].raft.term;
	uint64_t pre_votes = s->nodes[f].raft.counters.pre_votes;
	uint64_t elections = s->nodes[f].raft.counters.elections;

	s->paused[f] = true;
	sim_run_ms(s, 600);
	assert_true(s->net_count > 0); /* the heartbeats that wait for it */
	s->paused[f] = false;
	sim_run_ms(s, 100);

	assert_int_equal(s->nodes[f].raft.counters.pre_votes, pre_votes);
	assert_int_equal(s->nodes[f].raft.counters.elections, elections);
	assert_int_equal(s->nodes[f].role, RAFT_FOLLOWER);
	assert_int_equal(s->nodes[l].raft.term, term);
	assert_int_equal(sim_leader(s), l);
	assert_true(s->nodes[f].stats.ticks_dropped > 0);
	sim_destroy(s);
}

static void test_node_restart_recovers_from_wal_and_snapshot(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(4));
	int l = sim_wait_leader(s);
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;

	uint64_t sid = sim_open(s, l, 31);
	struct hasp_wire_msg req = acquire_req(sid, 1, "lock/r", 60000, HASP_ACQUIRE_TRY);
	assert_true(sim_call(s, l, &req, &reply, keep));
	uint64_t token = reply.body.granted.token;
	/* Past the snapshot threshold (100) with idle TICKs (every 20 ms). */
	sim_run_ms(s, 4000);
	assert_true(s->nodes[l].stats.snapshots_taken >= 1);

	sim_restart_all(s);
	l = sim_wait_leader(s);
	req = read_req(sid, 2, "lock/r");
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(reply.body.lock_info.token, token);
	sim_destroy(s);
}

/* A leader elected after a whole-cluster restart has applied nothing past
 * its snapshot until its term's first entry commits: a live session is
 * unknown to it for that while. It must not answer SESSION_EXPIRED (the
 * client would take its session, locks and watches for gone: nodesim
 * --seed 11 --watch); a keepalive goes through the log and is answered
 * OK, a WATCH is UNAVAILABLE (asked again) until the state machine is
 * current. */
static void test_node_new_leader_does_not_expire_a_session_it_has_not_applied(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(41));
	int l = sim_wait_leader(s);
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	uint64_t sid = sim_open(s, l, 61); /* in the log only: no snapshot yet */

	sim_restart_all(s);
	l = -1;
	for (int t = 0; t < 50000 && l < 0; t++) {
		sim_step(s);
		for (int i = 0; i < NODES; i++)
			if (s->nodes[i].role == RAFT_LEADER)
				l = i;
	}
	assert_true(l >= 0);
	struct node *n = &s->nodes[l];
	assert_true(n->applied < n->raft.term_start); /* the window this test is about */

	struct hasp_wire_msg watch = { .hdr = { .opcode = HASP_OP_WATCH, .session_id = sid, .seq = 1 } };
	watch.body.watch = (struct hasp_wire_watch){ .name = { (const uint8_t *)"w/", 2 },
						     .flags = HASP_WIRE_WATCH_PREFIX };
	assert_true(sim_call(s, l, &watch, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_UNAVAILABLE);
	assert_int_equal(n->stats.client_unavailable, 1);
	struct hasp_wire_msg ka = { .hdr = { .opcode = HASP_OP_SESSION_KEEPALIVE, .session_id = sid, .seq = 2 } };
	assert_true(n->applied < n->raft.term_start); /* nothing ran since */
	assert_true(sim_call(s, l, &ka, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(n->stats.client_no_session, 0);

	/* Current now: the watch registers, an unknown session is expired. */
	assert_true(n->applied >= n->raft.term_start);
	watch.hdr.seq = 3;
	assert_true(sim_call(s, l, &watch, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	ka.hdr.session_id = sid + 1000;
	assert_true(sim_call(s, l, &ka, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_SESSION_EXPIRED);
	assert_int_equal(n->stats.client_no_session, 1);
	sim_destroy(s);
}

static void test_node_bad_datagrams_are_counted_not_applied(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(5));
	int l = sim_wait_leader(s);
	struct node *n = &s->nodes[l];
	uint8_t junk[64];
	memset(junk, 0xab, sizeof(junk));

	uint64_t applied = n->stats.applied_commands;
	node_client_rx(n, s->now_ns, CLIENT_IP, CLIENT_PORT, junk, 10);
	node_client_rx(n, s->now_ns, CLIENT_IP, CLIENT_PORT, junk, sizeof(junk));
	assert_int_equal(n->stats.client_bad, 2);
	assert_int_equal(n->stats.client_unanswered, 2);
	assert_int_equal(n->stats.client_bad_reason[HASP_ETRUNCATED], 1);
	assert_int_equal(n->stats.client_bad_reason[HASP_EMAGIC], 1);

	/* Junk without a MAC stops at the MAC check; junk with a valid one
	 * (a member gone wrong) stops at the decoder. */
	int a = (l + 1) % NODES, b = (l + 2) % NODES; /* two other members */
	struct auth_key key;
	struct peer_auth_tx tx = { .epoch = 1 };
	sim_pair_tx(s->cfg[a].node_id, n->cfg.node_id, &key);
	node_peer_rx(n, s->now_ns, s->cfg[a].ip, 7001, junk, sizeof(junk));
	assert_int_equal(n->stats.peer_auth_bad, 1);
	assert_int_equal(n->stats.peer_bad, 0);
	uint8_t buf[256];
	memcpy(buf, junk, sizeof(junk));
	size_t sealed = peer_auth_seal(&key, &tx, buf, sizeof(junk), sizeof(buf));
	node_peer_rx(n, s->now_ns, s->cfg[a].ip, 7001, buf, sealed);
	assert_int_equal(n->stats.peer_bad, 1);
	/* A well-formed raft message of another cluster (valid MAC). */
	struct raft_msg m = { .type = RAFT_MSG_APPEND_RESP, .cluster_id = 99, .from = s->cfg[a].node_id,
			      .to = n->cfg.node_id, .term = 1 };
	int size = msg_codec_encode(&m, buf, sizeof(buf));
	assert_true(size > 0);
	sealed = peer_auth_seal(&key, &tx, buf, (size_t)size, sizeof(buf));
	node_peer_rx(n, s->now_ns, s->cfg[a].ip, 7001, buf, sealed);
	assert_int_equal(n->stats.peer_dropped_cluster, 1);
	/* Member a's valid MAC naming member b as the sender: a member may
	 * not speak as another, even from its own address. */
	m.cluster_id = 42;
	m.from = s->cfg[b].node_id;
	size = msg_codec_encode(&m, buf, sizeof(buf));
	sealed = peer_auth_seal(&key, &tx, buf, (size_t)size, sizeof(buf));
	node_peer_rx(n, s->now_ns, s->cfg[a].ip, 7001, buf, sealed);
	assert_int_equal(n->stats.peer_dropped_node, 1);
	/* The same from b's address, or from an address no member has: the
	 * key of a's pair is not b's, and an unknown address has none. */
	node_peer_rx(n, s->now_ns, s->cfg[b].ip, 7001, buf, sealed);
	node_peer_rx(n, s->now_ns, CLIENT_IP, 7001, buf, sealed);
	assert_int_equal(n->stats.peer_auth_bad, 3);
	assert_int_equal(n->stats.peer_dropped_node, 1);
	sim_run_ms(s, 5);
	assert_true(n->stats.applied_commands >= applied); /* nothing of the junk applied */
	assert_int_equal(n->stats.apply_decode_errors, 0);
	sim_destroy(s);
}

/* WATCH_COUNT or WATCH_STATUS of session sid at node l, answered OK (the
 * bodies hold no pointers into the datagram). */
static struct hasp_wire_msg sim_watch_query(struct sim *s, int l, uint64_t sid, uint64_t seq,
					    uint8_t opcode)
{
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	struct hasp_wire_msg req = { .hdr = { .opcode = opcode, .session_id = sid, .seq = seq } };

	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	return reply;
}

static uint32_t sim_watch_count(struct sim *s, int l, uint64_t sid, uint64_t seq)
{
	return sim_watch_query(s, l, sid, seq, HASP_OP_WATCH_COUNT).body.watch_count.count;
}

/* Watches are node-local, and a restart loses them while the session
 * lives on in the log: WATCH_COUNT is how a client learns that the leader
 * holds fewer than it registered (fault suite, pause-leader+whole-restart:
 * a watcher lost grants without a gap when the restart fell between two
 * of its keepalives). A name and a prefix watch of one string count two. */
static void test_node_watch_count_tells_a_restart_that_lost_the_watches(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(17));
	int l = sim_wait_leader(s);
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	uint64_t sid = sim_open(s, l, 71), other = sim_open(s, l, 72);

	assert_int_equal(sim_watch_count(s, l, sid, 1), 0);
	for (uint64_t k = 0; k < 3; k++) {
		struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_WATCH, .session_id = sid,
						      .seq = 2 + k } };
		req.body.watch = (struct hasp_wire_watch){ .name = { (const uint8_t *)"w/a", 3 },
							   .flags = k == 1 ? HASP_WIRE_WATCH_PREFIX : 0 };
		assert_true(sim_call(s, l, &req, &reply, keep));
		assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	}
	assert_int_equal(sim_watch_count(s, l, sid, 5), 2); /* the third was the first again */
	assert_int_equal(sim_watch_count(s, l, other, 1), 0);
	struct hasp_wire_msg unknown = { .hdr = { .opcode = HASP_OP_WATCH_COUNT,
						  .session_id = sid + 1000, .seq = 1 } };
	assert_true(sim_call(s, l, &unknown, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_SESSION_EXPIRED);
	int f = (l + 1) % NODES;
	struct hasp_wire_msg at_follower = { .hdr = { .opcode = HASP_OP_WATCH_COUNT,
						      .session_id = sid, .seq = 6 } };
	assert_true(sim_call(s, f, &at_follower, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_NOT_LEADER);

	sim_restart_all(s);
	l = sim_wait_leader(s);
	/* Answered once the new leader knows the session (UNAVAILABLE before,
	 * as WATCH: test_node_new_leader_does_not_expire_a_session_...). */
	uint64_t seq = 7;
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_WATCH_COUNT, .session_id = sid } };
	do {
		req.hdr.seq = seq++;
		assert_true(sim_call(s, l, &req, &reply, keep));
		sim_run_ms(s, 20);
	} while (reply.hdr.status == HASP_STATUS_UNAVAILABLE && seq < 200);
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(reply.body.watch_count.count, 0);
	sim_destroy(s);
}

static void sim_watch_prefix(struct sim *s, int l, uint64_t session, uint64_t seq, const char *prefix);

static struct hasp_wire_watch_status sim_watch_status(struct sim *s, int l, uint64_t sid,
						      uint64_t seq)
{
	return sim_watch_query(s, l, sid, seq, HASP_OP_WATCH_STATUS).body.watch_status;
}

/* Events are not acknowledged, and a lost event shows only in the prev of
 * the next one: the last event of a burst, lost, would go unnoticed
 * (the 20,000-lock storm lost 1-3 % of its watchers' last events to UDP
 * overflow). WATCH_STATUS names the last event the node sent the session,
 * so that a client that did not get it knows. */
static void test_node_watch_status_names_the_last_event_sent(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(18));
	int l = sim_wait_leader(s);
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	uint64_t w = sim_open(s, l, 81), a = sim_open(s, l, 82);

	struct hasp_wire_watch_status st = sim_watch_status(s, l, w, 1);
	assert_int_equal(st.count, 0);
	assert_int_equal(st.last_event_index, 0); /* nothing sent yet */
	assert_int_equal(st.last_event_sub, 0);
	sim_watch_prefix(s, l, w, 2, "w/");
	uint64_t last_index = 0;
	uint32_t last_sub = 0, events = 0;
	for (uint64_t k = 0; k < 3; k++) {
		struct hasp_wire_msg put = { .hdr = { .opcode = HASP_OP_KV_PUT, .session_id = a,
						      .seq = 1 + k } };
		put.body.kv_put = (struct hasp_wire_kv_put){ .key = { (const uint8_t *)"w/1", 3 },
							     .value = { (const uint8_t *)"v", 1 } };
		assert_true(sim_call(s, l, &put, &reply, keep)); /* empties the inbox first */
		assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
		sim_run_ms(s, 100);
		for (uint32_t i = 0; i < s->inbox_count; i++) {
			memcpy(keep, s->inbox[i].data, s->inbox[i].size);
			if (hasp_wire_decode_reply(keep, s->inbox[i].size, &reply) == 0 &&
			    reply.hdr.opcode == HASP_OP_EVENT && reply.hdr.session_id == w) {
				assert_true(reply.hdr.seq > last_index);
				last_index = reply.hdr.seq;
				last_sub = reply.body.event.sub;
				events++;
			}
		}
	}
	assert_int_equal(events, 3);
	st = sim_watch_status(s, l, w, 3);
	assert_int_equal(st.count, 1);
	assert_int_equal(st.last_event_index, last_index);
	assert_int_equal(st.last_event_sub, last_sub);
	/* The writer was sent nothing; an unknown session, a follower: as
	 * WATCH_COUNT. */
	st = sim_watch_status(s, l, a, 4);
	assert_int_equal(st.count, 0);
	assert_int_equal(st.last_event_index, 0);
	struct hasp_wire_msg unknown = { .hdr = { .opcode = HASP_OP_WATCH_STATUS,
						  .session_id = w + 1000, .seq = 1 } };
	assert_true(sim_call(s, l, &unknown, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_SESSION_EXPIRED);
	unknown.hdr.session_id = w;
	unknown.hdr.seq = 4;
	assert_true(sim_call(s, (l + 1) % NODES, &unknown, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_NOT_LEADER);
	sim_destroy(s);
}

/* One session cannot take every watch of the node (correctness issue,
 * item 3): past watches_per_session_max it gets FULL, others still watch. */
static void test_node_watches_are_bounded_per_session(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(16));
	int l = sim_wait_leader(s);
	struct node *n = &s->nodes[l];
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;

	n->cfg.watches_per_session_max = 3;
	uint64_t greedy = sim_open(s, l, 51), other = sim_open(s, l, 52);
	char name[16];
	for (uint64_t i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "g/%u", (unsigned)i);
		struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_WATCH, .session_id = greedy,
						      .seq = i + 1 } };
		req.body.watch = (struct hasp_wire_watch){ .name = { (const uint8_t *)name, strlen(name) } };
		assert_true(sim_call(s, l, &req, &reply, keep));
		assert_int_equal(reply.hdr.status, i < 3 ? HASP_STATUS_OK : HASP_STATUS_FULL);
	}
	assert_int_equal(n->stats.watch_full, 2);
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_WATCH, .session_id = other, .seq = 1 } };
	req.body.watch = (struct hasp_wire_watch){ .name = { (const uint8_t *)"g/0", 3 } };
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	sim_destroy(s);
}

/* Sends a forged raft message m to node i as if from the member at src_ip:
 * what an attacker on the rack network can do without the cluster key
 * (issue 15, attack 7). */
static void sim_forge_peer(struct sim *s, int i, uint32_t src_ip, const struct raft_msg *m)
{
	uint8_t buf[512];
	int size = msg_codec_encode(m, buf, sizeof(buf));
	assert_true(size > 0);
	forbid_io_enter();
	node_peer_rx(&s->nodes[i], s->now_ns, src_ip, 7001, buf, (size_t)size);
	forbid_io_leave();
}

/* Issue 15, attack 7: a datagram with a member's source address and term+1
 * must neither depose the leader nor put a forged entry into a follower's
 * log or commit it. */
static void test_node_forged_peer_messages_neither_depose_nor_commit(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(13));
	int l = sim_wait_leader(s);
	int f = (l + 1) % NODES;
	struct node *leader = &s->nodes[l];
	struct node *follower = &s->nodes[f];
	uint64_t term = leader->raft.term;

	/* To the leader, from the follower's address: a higher-term reply and
	 * a forced (transfer) vote request. */
	struct raft_msg resp = { .type = RAFT_MSG_APPEND_RESP, .cluster_id = 42, .from = s->cfg[f].node_id,
				 .to = s->cfg[l].node_id, .term = term + 1, .reject = true };
	sim_forge_peer(s, l, s->cfg[f].ip, &resp);
	struct raft_msg vote = { .type = RAFT_MSG_VOTE, .cluster_id = 42, .from = s->cfg[f].node_id,
				 .to = s->cfg[l].node_id, .term = term + 1, .last_index = 1u << 30,
				 .last_term = term + 1, .transfer = true };
	sim_forge_peer(s, l, s->cfg[f].ip, &vote);
	assert_int_equal(leader->raft.term, term);
	assert_int_equal(leader->role, RAFT_LEADER);

	/* To the follower, from the leader's address: an entry at term+1 that
	 * the forged commit index would commit. */
	uint64_t last = raft_last_index(&follower->raft);
	uint64_t applied = follower->applied;
	static const uint8_t junk[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	struct raft_entry e = { .term = term + 1, .index = last + 1, .data = junk, .size = sizeof(junk),
				.type = RAFT_ENTRY_COMMAND };
	struct raft_msg app = { .type = RAFT_MSG_APPEND, .cluster_id = 42, .from = s->cfg[l].node_id,
				.to = s->cfg[f].node_id, .term = term + 1, .prev_index = last,
				.prev_term = raft_term_at(&follower->raft, last), .commit = last + 1,
				.entries = &e, .entry_count = 1 };
	sim_forge_peer(s, f, s->cfg[l].ip, &app);
	assert_int_equal(follower->raft.term, term);
	assert_int_equal(follower->applied, applied);
	assert_int_equal(leader->stats.peer_auth_bad, 2);
	assert_int_equal(follower->stats.peer_auth_bad, 1);

	/* The same vote sealed by the third member, which holds its own key
	 * pair: under its pair key with the leader (a valid MAC, but from
	 * the follower's address), and under its pair key with the follower
	 * (stolen from neither). Both fail: only f's key opens f's address. */
	int third = (l + 2) % NODES;
	struct auth_key wrong;
	struct peer_auth_tx tx = { .epoch = UINT64_MAX };
	uint8_t buf[512];
	sim_pair_tx(s->cfg[third].node_id, s->cfg[l].node_id, &wrong);
	int size = msg_codec_encode(&vote, buf, sizeof(buf));
	assert_true(size > 0);
	size_t sealed = peer_auth_seal(&wrong, &tx, buf, (size_t)size, sizeof(buf));
	node_peer_rx(leader, s->now_ns, s->cfg[f].ip, 7001, buf, sealed);
	sim_pair_tx(s->cfg[third].node_id, s->cfg[f].node_id, &wrong);
	size = msg_codec_encode(&vote, buf, sizeof(buf));
	sealed = peer_auth_seal(&wrong, &tx, buf, (size_t)size, sizeof(buf));
	node_peer_rx(leader, s->now_ns, s->cfg[f].ip, 7001, buf, sealed);
	assert_int_equal(leader->stats.peer_auth_bad, 4);
	assert_int_equal(leader->raft.term, term);
	assert_int_equal(leader->role, RAFT_LEADER);

	/* A real datagram from the leader to the follower, captured on the
	 * wire: delivered once, then replayed, tampered and truncated. */
	struct dgram copy;
	bool captured = false;
	for (int t = 0; t < 2000 && !captured; t++) {
		sim_step(s);
		for (uint32_t k = 0; k < s->net_count && !captured; k++)
			if (s->net[k].src_ip == s->cfg[l].ip && s->net[k].dst_ip == s->cfg[f].ip) {
				copy = s->net[k];
				captured = true;
			}
	}
	assert_true(captured);
	sim_step(s); /* delivers the original */
	uint64_t replayed = follower->stats.peer_auth_replayed;
	node_peer_rx(follower, s->now_ns, copy.src_ip, 7001, copy.data, copy.size);
	assert_int_equal(follower->stats.peer_auth_replayed, replayed + 1);
	copy.data[copy.size / 2] ^= 0x01;
	node_peer_rx(follower, s->now_ns, copy.src_ip, 7001, copy.data, copy.size);
	copy.data[copy.size / 2] ^= 0x01;
	node_peer_rx(follower, s->now_ns, copy.src_ip, 7001, copy.data, copy.size - 1);
	node_peer_rx(follower, s->now_ns, copy.src_ip, 7001, copy.data, PEER_AUTH_TRAILER_SIZE - 1);
	assert_int_equal(follower->stats.peer_auth_bad, 4);

	/* And nothing of it surfaces later: the real leader keeps its term and
	 * every log holds only entries of terms up to it. */
	sim_run_ms(s, 50);
	assert_int_equal(sim_leader(s), l);
	for (int i = 0; i < NODES; i++) {
		assert_int_equal(s->nodes[i].raft.term, term);
		assert_true(raft_term_at(&s->nodes[i].raft, raft_last_index(&s->nodes[i].raft)) <= term);
	}
	sim_destroy(s);
}

static void test_node_watch_events_are_rate_limited_and_coalesced(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(6));
	int l = sim_wait_leader(s);
	struct node *n = &s->nodes[l];
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;

	/* A bucket of 2 tokens refilled at 1 per second. */
	n->cfg.watch_rate = 1;
	n->cfg.watch_burst = 2;
	n->watch_tokens = 2;
	uint64_t w = sim_open(s, l, 41), a = sim_open(s, l, 42);
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_WATCH, .session_id = w, .seq = 1 } };
	req.body.watch = (struct hasp_wire_watch){ .name = { (const uint8_t *)"w/", 2 },
						   .flags = HASP_WIRE_WATCH_PREFIX };
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	/* A session the state machine does not know cannot watch. */
	req.hdr.session_id = 0x7777;
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_SESSION_EXPIRED);

	const char *keys[] = { "w/1", "w/2", "w/3", "w/4", "w/5", "other" };
	uint64_t put_index[6];
	for (uint64_t i = 0; i < 6; i++) {
		struct hasp_wire_msg put = { .hdr = { .opcode = HASP_OP_KV_PUT, .session_id = a, .seq = i + 1 } };
		put.body.kv_put = (struct hasp_wire_kv_put){ .key = { (const uint8_t *)keys[i], strlen(keys[i]) },
							     .value = { (const uint8_t *)"v", 1 } };
		assert_true(sim_call(s, l, &put, &reply, keep));
		assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
		put_index[i] = n->applied; /* applied before the reply went out */
	}
	/* Two sent at once, the third held, the fourth and fifth replace it
	 * (and mark the gap); "other" does not match the prefix. */
	assert_int_equal(n->stats.events_pushed, 2);
	assert_int_equal(n->stats.watch_events_sent, 2);
	assert_int_equal(n->stats.watch_rate_limited, 3);
	assert_int_equal(n->stats.watch_coalesced, 2);
	assert_int_equal(n->watches.held_count, 1);

	/* The held (latest) event goes out when a token refills. */
	s->inbox_count = 0;
	sim_run_ms(s, 1500);
	assert_int_equal(n->stats.events_pushed, 3);
	assert_int_equal(n->stats.watch_events_sent, 3);
	assert_int_equal(n->watches.held_count, 0);
	assert_int_equal(n->stats.watch_dropped, 0);
	bool seen = false;
	for (uint32_t k = 0; k < s->inbox_count; k++) {
		memcpy(keep, s->inbox[k].data, s->inbox[k].size);
		if (hasp_wire_decode_reply(keep, s->inbox[k].size, &reply) == 0 &&
		    reply.hdr.opcode == HASP_OP_EVENT && reply.hdr.session_id == w) {
			assert_int_equal(reply.body.event.type, HASP_EVENT_KV_PUT);
			assert_int_equal(reply.body.event.name.size, 3);
			assert_memory_equal(reply.body.event.name.data, "w/5", 3);
			/* Its identity is the Raft index of the put of w/5; the
			 * events it replaced are reported as a gap, not lost
			 * silently (they were other keys). */
			assert_int_equal(reply.hdr.seq, put_index[4]);
			assert_int_equal(reply.body.event.sub, 0);
			assert_int_equal(reply.body.event.prev_index, 0);
			assert_int_equal(reply.body.event.prev_sub, HASP_WIRE_EVENT_PREV_GAP);
			seen = true;
		}
	}
	assert_true(seen);
	sim_destroy(s);
}

/* Event lanes (node.h struct node_event_lanes; haspd's lcores 1..): every
 * event of a session leaves through that session's lane, in the node's
 * order, and the per-lcore counters say which lane sent what. An event a
 * lane has no room for (its queue full) is sent by the node itself and
 * counted, not lost; the chain of prevs goes on through it. */
#define LANES 3u
#define LANE_WATCHERS 12u
struct lane_log {
	struct sim *s;
	uint32_t from;          /* the leader's index, for sim_send */
	bool refuse;            /* the lanes' queues are full */
	uint64_t sent[LANES];
	uint32_t lane_of[LANE_WATCHERS];
	uint64_t session[LANE_WATCHERS];
	bool keyed;             /* a key was passed (client_auth is off here) */
};

static bool sim_lane_send(void *ctx, uint32_t lane, uint32_t ip, uint16_t dst_port, uint16_t src_port,
			  const struct auth_key *key, const void *payload, size_t size)
{
	struct lane_log *log = ctx;
	struct hasp_wire_msg ev;
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	assert_true(lane < LANES);
	if (log->refuse)
		return false;
	log->keyed |= key != NULL;
	memcpy(keep, payload, size);
	assert_int_equal(hasp_wire_decode_reply(keep, size, &ev), 0);
	for (uint32_t k = 0; k < LANE_WATCHERS; k++)
		if (log->session[k] == ev.hdr.session_id)
			log->lane_of[k] = lane;
	log->sent[lane]++;
	sim_send((void *)(uintptr_t)log->from, ip, dst_port, src_port, payload, size);
	return true;
}

/* The events of session `sid` in the client's inbox, in arrival order. */
static uint32_t inbox_events(struct sim *s, uint64_t sid, struct hasp_wire_msg *ev, uint32_t max)
{
	static uint8_t keep[8][HASP_DATAGRAM_SIZE_MAX];
	uint32_t count = 0;
	for (uint32_t k = 0; k < s->inbox_count && count < max && count < 8; k++) {
		memcpy(keep[count], s->inbox[k].data, s->inbox[k].size);
		if (hasp_wire_decode_reply(keep[count], s->inbox[k].size, &ev[count]) == 0 &&
		    ev[count].hdr.opcode == HASP_OP_EVENT && ev[count].hdr.session_id == sid)
			count++;
	}
	return count;
}

/* Session `a` writes `key` (3 bytes) on leader l; returns the put's Raft
 * index. */
static uint64_t lane_put(struct sim *s, int l, uint64_t a, const char *key)
{
	static uint64_t seq;
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	struct hasp_wire_msg put = { .hdr = { .opcode = HASP_OP_KV_PUT, .session_id = a, .seq = ++seq } };
	put.body.kv_put = (struct hasp_wire_kv_put){ .key = { (const uint8_t *)key, 3 },
						     .value = { (const uint8_t *)"v", 1 } };
	assert_true(sim_call(s, l, &put, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	return s->nodes[l].applied; /* applied before the reply went out */
}

static void test_node_events_leave_through_their_sessions_lane(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(23));
	int l = sim_wait_leader(s);
	struct node *n = &s->nodes[l];
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	struct lane_log log = { .s = s, .from = (uint32_t)l };
	struct node_event_lanes lanes = { .count = LANES, .send = sim_lane_send, .ctx = &log };

	struct node_event_lanes bad = lanes;
	bad.count = NODE_EVENT_LANES_MAX + 1;
	assert_int_equal(node_set_event_lanes(n, &bad), -HASP_EINVAL);
	assert_int_equal(node_set_event_lanes(n, &lanes), 0);
	uint64_t a = sim_open(s, l, 70);
	for (uint32_t k = 0; k < LANE_WATCHERS; k++) {
		log.session[k] = sim_open(s, l, 71 + k);
		struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_WATCH, .session_id = log.session[k], .seq = 2 } };
		req.body.watch = (struct hasp_wire_watch){ .name = { (const uint8_t *)"q/", 2 },
							   .flags = HASP_WIRE_WATCH_PREFIX };
		assert_true(sim_call(s, l, &req, &reply, keep));
		assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	}
	/* Two puts, collected together: each watcher gets both, in order,
	 * the second naming the first. */
	uint64_t i1 = lane_put(s, l, a, "q/1");
	uint32_t before = s->inbox_count;
	struct dgram *first = test_calloc(before, sizeof(*first));
	memcpy(first, s->inbox, before * sizeof(*first));
	uint64_t i2 = lane_put(s, l, a, "q/2");
	memmove(s->inbox + before, s->inbox, s->inbox_count * sizeof(*s->inbox));
	memcpy(s->inbox, first, before * sizeof(*first));
	s->inbox_count += before;
	test_free(first);
	uint32_t used = 0;
	for (uint32_t k = 0; k < LANE_WATCHERS; k++) {
		struct hasp_wire_msg ev[8];
		assert_int_equal(inbox_events(s, log.session[k], ev, 8), 2);
		assert_int_equal(ev[0].hdr.seq, i1);
		assert_int_equal(ev[1].hdr.seq, i2);
		assert_int_equal(ev[1].body.event.prev_index, i1);
		assert_int_equal(log.lane_of[k] + 1, node_event_lcore(n, log.session[k]));
	}
	for (uint32_t j = 0; j < LANES; j++) {
		/* The per-lcore rows count what each lane carried. */
		assert_int_equal(n->watch_by_lcore[1 + j].count[NODE_WATCH_SENT], log.sent[j]);
		used += log.sent[j] > 0;
	}
	assert_true(used >= 2); /* 12 sessions over 3 lanes */
	assert_int_equal(n->watch_by_lcore[0].count[NODE_WATCH_SENT], 0);
	assert_int_equal(n->stats.watch_events_sent, 2 * LANE_WATCHERS);
	assert_int_equal(n->stats.events_pushed, 2 * LANE_WATCHERS);
	assert_false(log.keyed);

	/* The lanes are full: the node sends the events itself, counted. */
	uint64_t carried = log.sent[0] + log.sent[1] + log.sent[2];
	log.refuse = true;
	uint64_t i3 = lane_put(s, l, a, "q/3");
	assert_int_equal(n->stats.events_lane_overflow, LANE_WATCHERS);
	assert_int_equal(n->stats.watch_events_sent, 3 * LANE_WATCHERS);
	assert_int_equal(log.sent[0] + log.sent[1] + log.sent[2], carried);
	for (uint32_t k = 0; k < LANE_WATCHERS; k++) {
		struct hasp_wire_msg ev[8];
		assert_int_equal(inbox_events(s, log.session[k], ev, 8), 1);
		assert_int_equal(ev[0].hdr.seq, i3);
		assert_int_equal(ev[0].body.event.prev_index, i2);
	}
	/* Room again: back on the lanes, the chain unbroken. */
	log.refuse = false;
	uint64_t i4 = lane_put(s, l, a, "q/4");
	for (uint32_t k = 0; k < LANE_WATCHERS; k++) {
		struct hasp_wire_msg ev[8];
		assert_int_equal(inbox_events(s, log.session[k], ev, 8), 1);
		assert_int_equal(ev[0].hdr.seq, i4);
		assert_int_equal(ev[0].body.event.prev_index, i3);
	}
	assert_int_equal(log.sent[0] + log.sent[1] + log.sent[2], carried + LANE_WATCHERS);
	sim_destroy(s);
}

/* The per-node watch counters: a held event that never goes out is counted
 * as dropped (step-down, UNWATCH, the session's end), and a session's end
 * takes every watch of it from the registry. */
static void test_node_watch_held_events_dropped_are_counted(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(17));
	int l = sim_wait_leader(s);
	struct node *n = &s->nodes[l];
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;

	n->cfg.watch_rate = 1;
	n->cfg.watch_burst = 1;
	n->watch_tokens = 0; /* every watch event is held */
	uint64_t w = sim_open(s, l, 61), a = sim_open(s, l, 62);
	const char *watched[] = { "d/", "d/1", "e/" };
	for (uint64_t k = 0; k < 3; k++) {
		struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_WATCH, .session_id = w, .seq = k + 1 } };
		req.body.watch = (struct hasp_wire_watch){
			.name = { (const uint8_t *)watched[k], strlen(watched[k]) },
			.flags = k == 1 ? 0 : HASP_WIRE_WATCH_PREFIX };
		assert_true(sim_call(s, l, &req, &reply, keep));
		assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	}
	assert_int_equal(n->watches.count, 3);
	uint64_t seq = 1;
	const char *keys[] = { "d/1", "e/1", "e/2" };
	for (uint64_t k = 0; k < 3; k++) {
		struct hasp_wire_msg put = { .hdr = { .opcode = HASP_OP_KV_PUT, .session_id = a, .seq = seq++ } };
		put.body.kv_put = (struct hasp_wire_kv_put){ .key = { (const uint8_t *)keys[k], 3 },
							     .value = { (const uint8_t *)"v", 1 } };
		assert_true(sim_call(s, l, &put, &reply, keep));
		assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	}
	/* d/1 matched two watches (prefix and exact), e/1 and e/2 one: three
	 * held (e/2 replaced e/1), none sent. */
	assert_int_equal(n->stats.watch_rate_limited, 4);
	assert_int_equal(n->stats.watch_coalesced, 1);
	assert_int_equal(n->stats.watch_events_sent, 0);
	assert_int_equal(n->watches.held_count, 3);

	/* UNWATCH of a watch with a held event drops it. */
	struct hasp_wire_msg un = { .hdr = { .opcode = HASP_OP_UNWATCH, .session_id = w, .seq = 4 } };
	un.body.watch = (struct hasp_wire_watch){ .name = { (const uint8_t *)"d/1", 3 } };
	assert_true(sim_call(s, l, &un, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(n->stats.watch_dropped, 1);
	assert_int_equal(n->watches.count, 2);
	assert_int_equal(n->watches.held_count, 2);

	/* A step-down drops what is held; the watches stay. */
	notify_clear(n);
	assert_int_equal(n->stats.watch_dropped, 3);
	assert_int_equal(n->watches.held_count, 0);
	assert_int_equal(n->watches.count, 2);

	/* Held again, then the session ends: its watches and held events go. */
	struct hasp_wire_msg put = { .hdr = { .opcode = HASP_OP_KV_PUT, .session_id = a, .seq = seq++ } };
	put.body.kv_put = (struct hasp_wire_kv_put){ .key = { (const uint8_t *)"e/3", 3 },
						     .value = { (const uint8_t *)"v", 1 } };
	n->watch_tokens = 0;
	assert_true(sim_call(s, l, &put, &reply, keep));
	assert_int_equal(n->watches.held_count, 1);
	struct hasp_wire_msg close = { .hdr = { .opcode = HASP_OP_SESSION_CLOSE, .session_id = w, .seq = 5 } };
	assert_true(sim_call(s, l, &close, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(n->watches.count, 0);
	assert_int_equal(n->watches.held_count, 0);
	assert_int_equal(n->stats.watch_dropped, 4);
	assert_true(watch_index_check(&n->watches));
	sim_destroy(s);
}

/* A node that stops leading and leads again without another leader in
 * between (a flapping election, seen by the fault suite under load) keeps
 * its watches: the client saw no new leader and would never register them
 * again. The first event after carries the gap marker (what was applied
 * while the node did not lead was not pushed). Before, the step-down
 * dropped every watch and the watcher heard nothing, silently. */
static void test_node_watches_survive_a_step_down_with_a_gap(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(13));
	int l = sim_wait_leader(s);
	struct node *n = &s->nodes[l];
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	uint64_t w = sim_open(s, l, 51), a = sim_open(s, l, 52);
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_WATCH, .session_id = w, .seq = 1 } };
	req.body.watch = (struct hasp_wire_watch){ .name = { (const uint8_t *)"w/", 2 },
						   .flags = HASP_WIRE_WATCH_PREFIX };
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);

	notify_clear(n); /* what a step-down does to the watches */
	assert_int_equal(n->watches.count, 1);
	struct hasp_wire_msg put = { .hdr = { .opcode = HASP_OP_KV_PUT, .session_id = a, .seq = 1 } };
	put.body.kv_put = (struct hasp_wire_kv_put){ .key = { (const uint8_t *)"w/1", 3 },
						     .value = { (const uint8_t *)"v", 1 } };
	assert_true(sim_call(s, l, &put, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	sim_run_ms(s, 100);
	bool seen = false;
	for (uint32_t k = 0; k < s->inbox_count; k++) {
		memcpy(keep, s->inbox[k].data, s->inbox[k].size);
		if (hasp_wire_decode_reply(keep, s->inbox[k].size, &reply) == 0 &&
		    reply.hdr.opcode == HASP_OP_EVENT && reply.hdr.session_id == w) {
			assert_int_equal(reply.body.event.prev_index, 0);
			assert_int_equal(reply.body.event.prev_sub, HASP_WIRE_EVENT_PREV_GAP);
			seen = true;
		}
	}
	assert_true(seen);
	sim_destroy(s);
}

/* Events in the client's inbox from node `from` to `session` naming
 * `name` (the event's key or lock). */
static int events_from(struct sim *s, int from, uint64_t session, const char *name)
{
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg m;
	int count = 0;
	for (uint32_t k = 0; k < s->inbox_count; k++) {
		memcpy(keep, s->inbox[k].data, s->inbox[k].size);
		if (s->inbox[k].src_ip == s->cfg[from].ip && hasp_wire_decode_reply(keep, s->inbox[k].size, &m) == 0 &&
		    m.hdr.opcode == HASP_OP_EVENT && m.hdr.session_id == session &&
		    m.body.event.name.size == strlen(name) && memcmp(m.body.event.name.data, name, strlen(name)) == 0)
			count++;
	}
	return count;
}

/* Session `session` watches `prefix` at node l. */
static void sim_watch_prefix(struct sim *s, int l, uint64_t session, uint64_t seq, const char *prefix)
{
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_WATCH, .session_id = session, .seq = seq } };
	req.body.watch = (struct hasp_wire_watch){ .name = { (const uint8_t *)prefix, strlen(prefix) },
						   .flags = HASP_WIRE_WATCH_PREFIX };
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
}

/* The leader l gets req (it proposes it at once: its AppendEntries are out,
 * nothing acknowledged yet) and is stopped (SIGSTOP: it runs nothing, its
 * datagrams wait). stall_ticks, when not 0, is its stall threshold in
 * ticks (the node's election_ticks, not raft's). */
static void stall_after(struct sim *s, int l, const struct hasp_wire_msg *req, uint32_t stall_ticks)
{
	struct node *n = &s->nodes[l];
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	int size = hasp_wire_encode(req, buf, sizeof(buf));
	assert_true(size > 0);
	if (stall_ticks != 0)
		n->cfg.election_ticks = stall_ticks;
	s->inbox_count = 0;
	node_client_rx(n, s->now_ns, CLIENT_IP, CLIENT_PORT, buf, (size_t)size);
	s->paused[l] = true;
}

/* A put of s/1 stalls the leader, while session *watcher watches "s/". */
static struct sim *stall_after_put(uint64_t seed, uint32_t stall_ticks, int *leader, uint64_t *watcher)
{
	struct sim *s = sim_create(seed);
	int l = sim_wait_leader(s);
	uint64_t w = sim_open(s, l, 71), a = sim_open(s, l, 72);
	sim_watch_prefix(s, l, w, 1, "s/");
	struct hasp_wire_msg put = { .hdr = { .opcode = HASP_OP_KV_PUT, .session_id = a, .seq = 1 } };
	put.body.kv_put = (struct hasp_wire_kv_put){ .key = { (const uint8_t *)"s/1", 3 },
						     .value = { (const uint8_t *)"v", 1 } };
	stall_after(s, l, &put, stall_ticks);
	*leader = l;
	*watcher = w;
	return s;
}

/* A leader stopped (SIGSTOP, a VM pause) longer than the election timeout
 * is resumed after another node took over: the acknowledgements that
 * waited in its socket buffer commit a put it proposed before the pause,
 * and it applies it while it still believes it leads. It must not push
 * the put's watch event (the new leader serves the watchers now, and the
 * event would reach them after the new leader's): a node that finds it was
 * stalled pushes nothing until a quorum round begun after the stall
 * confirms it still leads, and here it learns of the new term first and
 * steps down. Before, the event went out at once. */
static void test_node_resumed_leader_pushes_no_stale_event(void **state)
{
	(void)state;
	int l;
	uint64_t w;
	struct sim *s = stall_after_put(test_util_seed(19), 0, &l, &w);
	struct node *n = &s->nodes[l];
	int nl = -1;
	for (int t = 0; t < 5000 && nl < 0; t++) {
		sim_run_ms(s, 1);
		for (int i = 0; i < NODES; i++)
			if (i != l && s->nodes[i].role == RAFT_LEADER && s->nodes[i].applied > 0)
				nl = i;
	}
	assert_true(nl >= 0);
	sim_run_ms(s, 20);
	struct locks_kv_info kv;
	assert_true(locks_kv_get(&s->nodes[nl].sm, (const uint8_t *)"s/1", 3, &kv)); /* committed */
	assert_int_equal(n->role, RAFT_LEADER); /* it knows nothing yet */
	uint64_t applied = n->applied;

	/* Resumed: it applies the put, but sends its watcher nothing. */
	s->inbox_count = 0;
	s->paused[l] = false;
	sim_run_ms(s, 50);
	assert_true(n->applied > applied);
	assert_int_not_equal(n->role, RAFT_LEADER);
	assert_int_equal(events_from(s, l, w, "s/1"), 0);
	assert_int_equal(n->stats.leader_stalls, 1);
	assert_true(n->stats.events_unconfirmed >= 1);
	sim_destroy(s);
}

/* The other outcome of the same rule: the stalled leader still leads (its
 * stall was shorter than the followers' patience), so the quorum round
 * confirms it and the event it held goes out, once. Its stall threshold
 * is lowered to 3 ticks (60 ms) so that a 100 ms pause counts while the
 * followers, 200 ms or more, stay put. */
static void test_node_stalled_leader_confirmed_sends_held_events(void **state)
{
	(void)state;
	int l;
	uint64_t w;
	struct sim *s = stall_after_put(test_util_seed(23), 3, &l, &w);
	struct node *n = &s->nodes[l];
	uint64_t term = n->raft.term;
	sim_run_ms(s, 100);
	s->paused[l] = false;
	sim_run_ms(s, 100);
	assert_int_equal(n->role, RAFT_LEADER);
	assert_int_equal(n->raft.term, term);
	assert_int_equal(n->stats.leader_stalls, 1);
	assert_true(n->stats.events_unconfirmed >= 1); /* held, then sent */
	assert_false(n->lead_unconfirmed);
	assert_int_equal(events_from(s, l, w, "s/1"), 1);
	sim_destroy(s);
}

/* A waiter's own LOCK_GRANTED is not held (it has no slot): a stalled
 * leader not yet confirmed drops it, and the session's next event names
 * no predecessor (prev (0, GAP)), so that libhasp reports the gap and the
 * waiter re-reads its lock. Here the waiter also watches the lock: the
 * watch's copy of the grant is held and, once the leader is confirmed,
 * goes out as that next event. */
static void test_node_stalled_leader_drops_a_waiters_grant_with_a_gap(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(29));
	int l = sim_wait_leader(s);
	struct node *n = &s->nodes[l];
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	uint64_t a = sim_open(s, l, 91), b = sim_open(s, l, 92);
	struct hasp_wire_msg req = acquire_req(a, 1, "g/x", 60000, HASP_ACQUIRE_TRY);
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	uint64_t token = reply.body.granted.token;
	req = acquire_req(b, 1, "g/x", 60000, HASP_ACQUIRE_WAIT);
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_QUEUED);
	sim_watch_prefix(s, l, b, 2, "g/");

	struct hasp_wire_msg rel = { .hdr = { .opcode = HASP_OP_RELEASE, .session_id = a, .seq = 2 } };
	rel.body.release = (struct hasp_wire_name_token){ { (const uint8_t *)"g/x", 3 }, token };
	stall_after(s, l, &rel, 3);
	sim_run_ms(s, 100);
	s->paused[l] = false;
	sim_run_ms(s, 100);
	assert_int_equal(n->role, RAFT_LEADER);
	assert_int_equal(n->stats.leader_stalls, 1);
	assert_true(n->stats.events_unconfirmed >= 2); /* the grant dropped, the watch's copy held */
	bool first = true;
	int grants = 0;
	for (uint32_t k = 0; k < s->inbox_count; k++) {
		memcpy(keep, s->inbox[k].data, s->inbox[k].size);
		if (hasp_wire_decode_reply(keep, s->inbox[k].size, &reply) != 0 || reply.hdr.opcode != HASP_OP_EVENT ||
		    reply.hdr.session_id != b)
			continue;
		if (first) {
			assert_int_equal(reply.body.event.prev_index, 0);
			assert_int_equal(reply.body.event.prev_sub, HASP_WIRE_EVENT_PREV_GAP);
			first = false;
		}
		grants += reply.body.event.type == HASP_EVENT_LOCK_GRANTED;
	}
	assert_false(first);
	assert_int_equal(grants, 1); /* the watch's copy */
	sim_destroy(s);
}

/* A follower that stays down must not stop the group: the leader keeps
 * taking snapshots while its transfer to the dead node goes nowhere, so its
 * log window never fills, and the node catches up by InstallSnapshot when
 * it is back. */
static void test_node_dead_follower_does_not_fill_the_window(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(7));
	int l = sim_wait_leader(s);
	int f = (l + 1) % NODES;
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;

	s->isolated[f] = true;
	/* Idle TICKs every 20 ms: 12 s is ~600 entries, more than the
	 * 512-entry window. */
	sim_run_ms(s, 12000);
	assert_int_equal(sim_leader(s), l);
	assert_true(s->nodes[l].raft.commit > s->nodes[f].applied + 512);
	uint64_t sid = sim_open(s, l, 51);
	struct hasp_wire_msg req = acquire_req(sid, 1, "lock/d", 5000, HASP_ACQUIRE_TRY);
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	assert_int_equal(s->nodes[l].raft.counters.proposals_rejected, 0);
	assert_int_equal(s->nodes[l].stats.client_overloaded, 0);

	s->isolated[f] = false;
	sim_run_ms(s, 2000);
	assert_true(s->nodes[f].stats.snapshots_installed >= 1);
	assert_true(s->nodes[f].applied >= s->nodes[l].raft.commit - 1);
	sim_destroy(s);
}

static bool session_addr_known(const struct node *n, uint64_t id)
{
	for (uint32_t i = 0; i <= n->sessions_mask; i++)
		if (n->sessions[i].id == id)
			return true;
	return false;
}

/* The session -> address table (notify.c) is not replicated: a node drops
 * an entry when it applies the session's end. A node that misses that
 * entry because it catches up by InstallSnapshot must drop it too, or the
 * table fills over time (issue 11 item 6). Here the leader that recorded
 * the session is cut off past the log window while the session closes
 * elsewhere; back, it installs a snapshot without that session. */
static void test_node_snapshot_install_forgets_ended_sessions(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(12));
	int l = sim_wait_leader(s);
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	uint64_t gone = sim_open(s, l, 61), kept = sim_open(s, l, 62);
	assert_true(session_addr_known(&s->nodes[l], gone));
	assert_true(session_addr_known(&s->nodes[l], kept));

	s->isolated[l] = true;
	int nl = -1;
	for (int t = 0; t < 5000 && nl < 0; t++) {
		sim_run_ms(s, 1);
		for (int i = 0; i < NODES; i++)
			if (i != l && s->nodes[i].role == RAFT_LEADER)
				nl = i;
	}
	assert_true(nl >= 0);
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_SESSION_CLOSE, .session_id = gone, .seq = 1 } };
	assert_true(sim_call(s, nl, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	req = (struct hasp_wire_msg){ .hdr = { .opcode = HASP_OP_SESSION_KEEPALIVE, .session_id = kept, .seq = 1 } };
	assert_true(sim_call(s, nl, &req, &reply, keep));
	/* Idle TICKs every 20 ms: 12 s is ~600 entries, past the window. */
	sim_run_ms(s, 12000);
	assert_true(s->nodes[nl].raft.log.snap_index > s->nodes[l].raft.log.last);
	uint64_t installed = s->nodes[l].stats.snapshots_installed;
	s->isolated[l] = false;
	sim_run_ms(s, 2000);
	assert_true(s->nodes[l].stats.snapshots_installed > installed);
	struct locks_session_info si;
	assert_false(locks_session_read(&s->nodes[l].sm, gone, &si));
	assert_true(locks_session_read(&s->nodes[l].sm, kept, &si));
	assert_false(session_addr_known(&s->nodes[l], gone));
	assert_true(s->nodes[l].stats.sessions_pruned >= 1);
	assert_true(session_addr_known(&s->nodes[l], kept));
	sim_destroy(s);
}

/* A full disk on the leader: the WAL and hard state are preallocated and
 * still take writes, new snapshot files do not (ENOSPC). The leader must
 * count the failures, retry with backoff instead of in every loop
 * iteration, report itself degraded, and, before its log window fills,
 * hand leadership to a follower so the cluster keeps committing. Before,
 * it retried on every iteration with a log line each, health said ok, and
 * commit stopped at the window until an election. */
static void test_node_failing_snapshots_back_off_and_hand_off(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(11));
	int l = sim_wait_leader(s);
	struct node *ln = &s->nodes[l];
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	struct simdisk_stats st;
	char why[64];

	simdisk_fail_new_files(s->disks[l], "snap-", ENOSPC);
	/* Idle TICKs every 20 ms: past the snapshot threshold (100) within
	 * 2 s, then snapshots are due all the time. */
	sim_run_ms(s, 4000);
	simdisk_stats_get(s->disks[l], &st);
	assert_true(ln->stats.snapshot_failures >= 2);
	/* Every attempt is one failed write of the new file. Backoff 100 ms,
	 * doubling: at most about log2(4000 / 100) + 1 attempts in 4 s of
	 * simulated time, not one per loop iteration (thousands). */
	assert_int_equal(st.injected_errors, ln->stats.snapshot_failures);
	assert_true(ln->stats.snapshot_failures <= 8);
	assert_int_equal(ln->snap_fail_error, -HASP_ENOSPC);
	assert_false(ln->failed);
	assert_int_equal(sim_leader(s), l);
	assert_non_null(node_degraded(ln, why, sizeof(why)));
	assert_non_null(strstr(why, "snapshot saves failing: ENOSPC"));

	/* 12 s more is ~600 entries, past the 512-entry window: the leader
	 * hands off before it fills, and the new leader commits. */
	uint64_t commit_before = ln->raft.commit;
	sim_run_ms(s, 12000);
	assert_true(ln->stats.snapshot_transfers >= 1);
	int l2 = sim_leader(s);
	assert_true(l2 >= 0 && l2 != l);
	assert_true(s->nodes[l2].raft.commit > commit_before + 512);
	uint64_t sid = sim_open(s, l2, 61);
	struct hasp_wire_msg req = acquire_req(sid, 1, "lock/full", 5000, HASP_ACQUIRE_TRY);
	assert_true(sim_call(s, l2, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	/* The old leader still cannot save snapshots: it says so. */
	assert_true(ln->failed || node_degraded(ln, why, sizeof(why)) != NULL);

	/* Space again: the next save works and clears the state. */
	simdisk_fail_new_files(s->disks[l], "", 0);
	if (!ln->failed) {
		sim_run_ms(s, 31000); /* at most one backoff (30 s) */
		assert_int_equal(ln->snap_fail_streak, 0);
		assert_null(node_degraded(ln, why, sizeof(why)));
	}
	sim_destroy(s);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int real_init(struct node *n, const char *dir, const char *extra_key, char *err, size_t size)
{
	struct node_config c;
	struct node_net net = { .send = sim_send, .ctx = (void *)(uintptr_t)0 };
	node_config_default(&c);
	assert_int_equal(node_config_set(&c, "node_id", "1", err, size), 0);
	assert_int_equal(node_config_set(&c, "cluster_id", "42", err, size), 0);
	assert_int_equal(node_config_set(&c, "member", "1,10.0.0.1,7001,7000", err, size), 0);
	assert_int_equal(node_config_set(&c, "member", "2,10.0.0.2,7001,7000", err, size), 0);
	assert_int_equal(node_config_set(&c, "member", "3,10.0.0.3,7001,7000", err, size), 0);
	assert_int_equal(node_config_set(&c, "ip", "10.0.0.1/24", err, size), 0);
	assert_int_equal(node_config_set(&c, "mac", "02:77:00:00:00:01", err, size), 0);
	assert_int_equal(node_config_set(&c, "data_dir", dir, err, size), 0);
	assert_int_equal(node_config_set(&c, "eal", "-l 0", err, size), 0);
	assert_int_equal(node_config_set(&c, "log_window", "512", err, size), 0);
	assert_int_equal(node_config_set(&c, "snapshot_threshold", "100", err, size), 0);
	assert_int_equal(node_config_set(&c, "snapshot_trailing", "20", err, size), 0);
	assert_int_equal(node_config_set(&c, "segment_size", "262144", err, size), 0);
	assert_int_equal(node_config_set(&c, "sessions_max", "64", err, size), 0);
	assert_int_equal(node_config_set(&c, "client_auth", "off", err, size), 0);
	if (extra_key != NULL)
		assert_int_equal(node_config_set(&c, extra_key, "1", err, size), 0);
	sim_peer_keys(&c);
	return node_init(n, &c, (struct storage_io){ 0 }, &net, 1000000000ull, err, size);
}

/* A data dir that exists but is empty is what a wiped member looks like:
 * started as an initial voter it would have forgotten its vote. It is
 * refused (nothing written into it) unless bootstrap = 1 or join = 1; a
 * directory haspd creates itself, and a restart, start as before. */
static void test_node_existing_empty_data_dir_is_refused(void **state)
{
	(void)state;
	char base[] = "/tmp/hasp-node-blank-XXXXXX", dir[128], err[512];
	struct node *n = test_calloc(1, sizeof(*n));

	assert_non_null(mkdtemp(base));
	snprintf(dir, sizeof(dir), "%s/data", base);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(real_init(n, dir, NULL, err, sizeof(err)), -HASP_ECONFIG);
	assert_non_null(strstr(err, "exists but is empty"));
	assert_non_null(strstr(err, "Replacing a lost data dir"));
	assert_int_equal(rmdir(dir), 0); /* still empty: nothing was created */
	assert_int_equal(mkdir(dir, 0755), 0);

	assert_int_equal(real_init(n, dir, "bootstrap", err, sizeof(err)), 0);
	node_deinit(n);
	assert_int_equal(real_init(n, dir, NULL, err, sizeof(err)), 0); /* a restart */
	node_deinit(n);

	snprintf(dir, sizeof(dir), "%s/joiner", base);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(real_init(n, dir, "join", err, sizeof(err)), 0);
	node_deinit(n);

	snprintf(dir, sizeof(dir), "%s/fresh", base); /* haspd creates it */
	assert_int_equal(real_init(n, dir, NULL, err, sizeof(err)), 0);
	node_deinit(n);
	test_free(n);
	assert_int_equal(nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

/* Issue 11: a follower whose data dir was wiped (a new, empty simulated
 * disk) and which is restarted catches up under the same leader, by
 * snapshot; while it is away the leader's health is degraded (member not
 * heard from), and once it has caught up it is not. Before, the leader
 * took the follower's rejects at its old match index as stale and the
 * follower stayed at 0 until a leader change. */
static void test_node_wiped_follower_catches_up_and_health_reports_lag(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(12));
	int l = sim_wait_leader(s);
	int f = (l + 1) % NODES;
	char why[64];
	uint64_t term = s->nodes[l].raft.term;

	sim_run_ms(s, 3000); /* ~150 entries, a snapshot on every node */
	assert_null(node_degraded(&s->nodes[l], why, sizeof(why)));
	assert_true(s->nodes[f].applied > 100);

	node_deinit(&s->nodes[f]);
	s->up[f] = false;
	sim_run_ms(s, 1000);
	assert_non_null(node_degraded(&s->nodes[l], why, sizeof(why)));
	assert_non_null(strstr(why, "not heard from"));

	struct simdisk_config dc;
	simdisk_config_default(&dc, test_util_seed(12) + 100);
	dc.short_write_per_million = 0;
	simdisk_destroy(s->disks[f]);
	s->disks[f] = simdisk_create(&dc);
	sim_start_node(s, f);
	assert_int_equal(s->nodes[f].applied, 0);
	sim_run_ms(s, 2000);
	assert_int_equal(sim_leader(s), l);
	assert_int_equal(s->nodes[l].raft.term, term);
	assert_true(s->nodes[f].applied + 2 >= s->nodes[l].raft.commit);
	assert_true(s->nodes[l].raft.counters.follower_log_lost >= 1);
	assert_null(node_degraded(&s->nodes[l], why, sizeof(why)));
	sim_destroy(s);
}

/* KV_PUT name = "v" through node l; must answer OK. */
static void sim_put_v(struct sim *s, int l, uint64_t sid, uint64_t seq, const char *name,
		      uint8_t *keep)
{
	struct hasp_wire_msg reply;
	struct hasp_wire_msg put = { .hdr = { .opcode = HASP_OP_KV_PUT, .session_id = sid,
					      .seq = seq } };
	put.body.kv_put = (struct hasp_wire_kv_put){ .key = { (const uint8_t *)name, strlen(name) },
						     .value = { (const uint8_t *)"v", 1 } };
	assert_true(sim_call(s, l, &put, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
}

static uint64_t watermark_writes(const struct sim *s, int i)
{
	return s->nodes[i].st.wal.stats.watermark_writes;
}

/* The WAL's idle watermark (a 4 KiB write and an fdatasync) is written at
 * most once per idle_watermark_ms, not every time the node goes idle (at
 * light load, after nearly every write: docs/PERFORMANCE.md "Cost per lock
 * cycle"); one held back is still written when its time comes. */
static void test_node_idle_watermark_is_rate_limited(void **state)
{
	(void)state;
	/* An idle leader proposes a TICK every 20 ms: 50 writes a second,
	 * each followed by idleness. */
	static const char *const every_idle[] = { "idle_watermark_ms", "0", NULL };
	static const char *const limited[] = { "idle_watermark_ms", "100", NULL };
	uint64_t before[NODES];

	sim_extra_config = every_idle;
	struct sim *s = sim_create(61);
	int l = sim_wait_leader(s);
	for (int i = 0; i < NODES; i++)
		before[i] = watermark_writes(s, i);
	sim_run_ms(s, 1000);
	for (int i = 0; i < NODES; i++)
		assert_true(watermark_writes(s, i) - before[i] >= 25);
	sim_destroy(s);

	sim_extra_config = limited;
	s = sim_create(61);
	l = sim_wait_leader(s);
	for (int i = 0; i < NODES; i++)
		before[i] = watermark_writes(s, i);
	sim_run_ms(s, 1000);
	for (int i = 0; i < NODES; i++) {
		uint64_t n = watermark_writes(s, i) - before[i];
		assert_true(n >= 5 && n <= 11);
	}
	/* Every node vouches for what is durable within the interval. */
	uint64_t sid = sim_open(s, l, 7);
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	sim_put_v(s, l, sid, 1, "wm", keep);
	sim_run_ms(s, 150);
	for (int i = 0; i < NODES; i++) {
		const struct wal *w = &s->nodes[i].st.wal;
		assert_true(w->watermark_written + 2 * 5 >= w->durable_index); /* <= 100 ms of TICKs */
	}
	sim_destroy(s);
	sim_extra_config = NULL;
}

/* docs/STYLE.md §6: after start, the lcore allocates nothing. The node cores run
 * marked (see forbid_io.h) while the cluster rolls WAL segments over (64 KiB
 * segments), takes snapshots and compacts, sends InstallSnapshot to a
 * follower that was isolated past the log window, restarts a follower, and
 * serves acquires, KV puts and pushed watch events. */
static void test_node_lcore_allocates_nothing_after_start(void **state)
{
	(void)state;
	struct hasp_alloc_stats before, after;
	struct sim *s = sim_create_with(test_util_seed(8), "65536");
	int l = sim_wait_leader(s);
	int f = (l + 1) % NODES, r = (l + 2) % NODES;
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	char name[32];

	hasp_alloc_stats_get(&before);
	uint64_t libc_before = forbid_io_libc_count();
	forbid_io_window(true);
	uint64_t sid = sim_open(s, l, 81), w = sim_open(s, l, 82);
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_WATCH, .session_id = w, .seq = 1 } };
	req.body.watch = (struct hasp_wire_watch){ .name = { (const uint8_t *)"k/", 2 },
						   .flags = HASP_WIRE_WATCH_PREFIX };
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	uint64_t seq = 1;
	for (uint64_t i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "lock/%llu", (unsigned long long)i);
		req = acquire_req(sid, seq++, name, 60000, HASP_ACQUIRE_TRY);
		assert_true(sim_call(s, l, &req, &reply, keep));
		assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
		snprintf(name, sizeof(name), "k/%llu", (unsigned long long)i);
		sim_put_v(s, l, sid, seq++, name, keep);
	}
	assert_true(s->nodes[l].stats.events_pushed >= 1);

	/* A follower cut off past the 512-entry window needs InstallSnapshot. */
	s->isolated[f] = true;
	sim_run_ms(s, 12000);
	s->isolated[f] = false;
	sim_run_ms(s, 2000);
	assert_true(s->nodes[f].stats.snapshots_installed >= 1);

	/* A follower restart: node_deinit/node_init are the process's start,
	 * outside the window; its catch-up afterwards is inside it. */
	node_deinit(&s->nodes[r]);
	s->up[r] = false;
	sim_run_ms(s, 500);
	forbid_io_window(false);
	sim_start_node(s, r);
	forbid_io_window(true);
	sim_run_ms(s, 3000);
	assert_true(s->nodes[r].applied >= s->nodes[l].raft.commit - 1);
	/* Enough entries to roll 64 KiB segments over several times with the
	 * WAL packing small writes (docs/STORAGE.md, "Partial blocks"). */
	for (uint64_t i = 0; i < 1500; i++) {
		snprintf(name, sizeof(name), "k/%llu", (unsigned long long)(i % 40));
		sim_put_v(s, l, sid, seq++, name, keep);
	}

	forbid_io_window(false);
	hasp_alloc_stats_get(&after);
	for (int i = 0; i < NODES; i++) {
		assert_true(s->nodes[i].stats.snapshots_taken + s->nodes[i].stats.snapshots_installed >= 2);
		assert_true(s->nodes[i].st.wal.stats.rollovers >= 3);
		assert_true(s->nodes[i].st.wal.stats.segments_dropped >= 1);
	}
	print_message("forbidden allocations: %llu (rollovers on the leader: %llu)\n",
		      (unsigned long long)(after.forbidden_count - before.forbidden_count),
		      (unsigned long long)s->nodes[l].st.wal.stats.rollovers);
	assert_int_equal(after.forbidden_count - before.forbidden_count, 0);
	/* And no libc allocation behind hasp_alloc's back (normal build). */
	print_message("libc allocations while marked: %llu (%s)\n",
		      (unsigned long long)(forbid_io_libc_count() - libc_before),
		      forbid_io_libc_counted() ? "counted" : "not counted under sanitizers");
	assert_int_equal(forbid_io_libc_count() - libc_before, 0);
	sim_destroy(s);
}

/* Member lines carry public keys (docs/SECURITY.md 3.5): hostile ones are
 * refused with the field named, and nothing is added. */
static void test_node_config_member_public_keys(void **state)
{
	(void)state;
	struct node_config c;
	char err[512], line[192], hex1[AUTH_PUBLIC_HEX_SIZE], hex2[AUTH_PUBLIC_HEX_SIZE];
	sim_pub_hex(1, hex1);
	sim_pub_hex(2, hex2);
	node_config_default(&c);
	snprintf(line, sizeof(line), "1,10.1.0.1,7001,7000,%s", hex1);
	assert_int_equal(node_config_set(&c, "member", line, err, sizeof(err)), 0);
	assert_true(c.members[0].has_pub);
	static const char *const bad[] = {
		"2,10.1.0.2,7001,7000,xyz",                                     /* not hex */
		"2,10.1.0.2,7001,7000,0123",                                    /* short */
		"2,10.1.0.2,7001,7000,0000000000000000000000000000000000000000000000000000000000000000",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(node_config_set(&c, "member", bad[i], err, sizeof(err)), -HASP_ECONFIG);
		assert_non_null(strstr(err, "public key is not 64 hex digits"));
	}
	snprintf(line, sizeof(line), "2,10.1.0.2,7001,7000,%s0", hex2); /* 65 digits */
	assert_int_equal(node_config_set(&c, "member", line, err, sizeof(err)), -HASP_ECONFIG);
	snprintf(line, sizeof(line), "2,10.1.0.2,7001,7000,%s", hex1); /* node 1's key */
	assert_int_equal(node_config_set(&c, "member", line, err, sizeof(err)), -HASP_ECONFIG);
	assert_non_null(strstr(err, "nodes 1 and 2 have the same public key"));
	assert_int_equal(c.member_count, 1);
	/* The cluster key of earlier versions is refused, naming the new key. */
	assert_int_equal(node_config_set(&c, "peer_key_file", "/etc/hasp/cluster.key", err, sizeof(err)),
			 -HASP_ECONFIG);
	assert_non_null(strstr(err, "node_key_file"));
	/* The whole configuration: a member without a key, and this node's
	 * key pair not the one of its member line, are refused. */
	snprintf(line, sizeof(line), "2,10.1.0.2,7001,7000,%s", hex2);
	assert_int_equal(node_config_set(&c, "member", line, err, sizeof(err)), 0);
	static const char *const kv[][2] = { { "node_id", "1" }, { "cluster_id", "5" }, { "ip", "10.1.0.1/24" },
					     { "mac", "02:00:00:00:00:01" }, { "data_dir", "/tmp/x" },
					     { "eal", "-l 0" }, { "client_auth", "off" } };
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		assert_int_equal(node_config_set(&c, kv[i][0], kv[i][1], err, sizeof(err)), 0);
	sim_node_secret(1, &c.node_key);
	assert_int_equal(auth_public_key(&c.node_key, c.node_pub), 0);
	c.node_key_loaded = true;
	assert_int_equal(node_config_check(&c, err, sizeof(err)), 0);
	sim_node_secret(2, &c.node_key);
	assert_int_equal(auth_public_key(&c.node_key, c.node_pub), 0);
	assert_int_equal(node_config_check(&c, err, sizeof(err)), -HASP_ECONFIG);
	assert_non_null(strstr(err, "node 1's public key is not node_key_file's"));
	sim_node_secret(1, &c.node_key);
	assert_int_equal(auth_public_key(&c.node_key, c.node_pub), 0);
	assert_int_equal(node_config_set(&c, "member", "3,10.1.0.3,7001,7000", err, sizeof(err)), 0);
	assert_int_equal(node_config_check(&c, err, sizeof(err)), -HASP_ECONFIG);
	assert_non_null(strstr(err, "node 3 has no public key"));
	assert_int_equal(node_config_set(&c, "peer_auth", "off", err, sizeof(err)), 0);
	assert_int_equal(node_config_check(&c, err, sizeof(err)), 0);
}

static void test_node_config_names_the_bad_field(void **state)
{
	(void)state;
	struct node_config c;
	char err[512];
	char *argv_missing[] = { "haspd", "--node-id", "1", NULL };
	assert_int_equal(node_config_load(&c, 3, argv_missing, err, sizeof(err)), -HASP_ECONFIG);
	assert_non_null(strstr(err, "cluster_id"));
	char *argv_bad[] = { "haspd", "--node-id", "1", "--batch-max", "zero", NULL };
	assert_int_equal(node_config_load(&c, 5, argv_bad, err, sizeof(err)), -HASP_ECONFIG);
	assert_non_null(strstr(err, "batch_max"));
	/* Peer authentication is on unless turned off explicitly. */
	char *argv_nokey[] = { "haspd", "--node-id", "1", "--cluster-id", "5", "--member", "1,10.1.0.1,7001,7000",
			       "--ip", "10.1.0.1/24", "--mac", "02:00:00:00:00:01", "--data-dir", "/tmp/x",
			       "--", "-l", "0", NULL };
	assert_int_equal(node_config_load(&c, 16, argv_nokey, err, sizeof(err)), -HASP_ECONFIG);
	assert_non_null(strstr(err, "node_key_file"));
	char *argv_ok[] = { "haspd", "--node-id", "1", "--cluster-id", "5", "--member", "1,10.1.0.1,7001,7000",
			    "--ip", "10.1.0.1/24", "--mac", "02:00:00:00:00:01", "--data-dir", "/tmp/x",
			    "--peer-auth", "off", "--", "-l", "0", NULL };
	/* Client authentication too: no identities file, no start. */
	assert_int_equal(node_config_load(&c, 18, argv_ok, err, sizeof(err)), -HASP_ECONFIG);
	assert_non_null(strstr(err, "client_identities_file"));
	char *argv_ok2[] = { "haspd", "--node-id", "1", "--cluster-id", "5", "--member", "1,10.1.0.1,7001,7000",
			     "--ip", "10.1.0.1/24", "--mac", "02:00:00:00:00:01", "--data-dir", "/tmp/x",
			     "--peer-auth", "off", "--client-auth", "off", "--", "-l", "0", NULL };
	assert_int_equal(node_config_load(&c, 20, argv_ok2, err, sizeof(err)), 0);
	assert_false(c.peer_auth);
	assert_false(c.client_auth);
	assert_int_equal(c.eal_argc, 3);
	assert_string_equal(c.eal_argv[1], "-l");
	assert_int_equal(c.members[0].client_port, 7000);
}

/* The WAL's writes carry RWF_DSYNC unless the operator asks for a linked
 * or drained fdatasync (docs/PERFORMANCE.md, "wal_sync = dsync"). */
static void test_node_config_wal_sync_defaults_to_dsync(void **state)
{
	(void)state;
	struct node_config c;
	char err[256];
	node_config_default(&c);
	assert_int_equal(c.wal_sync, WAL_SYNC_DSYNC);
	assert_int_equal(node_config_set(&c, "wal_sync", "linked", err, sizeof(err)), 0);
	assert_int_equal(c.wal_sync, WAL_SYNC_LINKED);
	assert_int_equal(node_config_set(&c, "wal_sync", "drain", err, sizeof(err)), 0);
	assert_int_equal(c.wal_sync, WAL_SYNC_DRAIN);
	assert_int_equal(node_config_set(&c, "wal_sync", "fsync", err, sizeof(err)), -HASP_ECONFIG);
	assert_non_null(strstr(err, "not linked, dsync or drain"));
	assert_int_equal(c.wal_sync, WAL_SYNC_DRAIN);
}

static void test_node_config_segment_fill_defaults_to_zeros(void **state)
{
	(void)state;
	struct node_config c;
	char err[256];
	node_config_default(&c);
	assert_int_equal(c.segment_fill, WAL_FILL_ZEROS);
	assert_int_equal(node_config_set(&c, "segment_fill", "allocate", err, sizeof(err)), 0);
	assert_int_equal(c.segment_fill, WAL_FILL_ALLOCATE);
	assert_int_equal(node_config_set(&c, "segment_fill", "ones", err, sizeof(err)), -HASP_ECONFIG);
	assert_non_null(strstr(err, "not zeros or allocate"));
	assert_int_equal(c.segment_fill, WAL_FILL_ALLOCATE);
	assert_int_equal(node_config_set(&c, "segment_fill", "zeros", err, sizeof(err)), 0);
	assert_int_equal(c.segment_fill, WAL_FILL_ZEROS);
}

static struct hasp_wire_msg cas_value_req(uint64_t session, uint64_t seq, const char *key, const char *expect,
					  const char *value)
{
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_KV_CAS, .session_id = session, .seq = seq } };
	req.body.kv_cas = (struct hasp_wire_kv_cas){
		.key = { (const uint8_t *)key, strlen(key) },
		.expected_value = { (const uint8_t *)expect, strlen(expect) },
		.value = { (const uint8_t *)value, strlen(value) },
		.flags = HASP_WIRE_CAS_VALUE,
	};
	return req;
}

/* KV_CAS with VALUE through the node (issue 11 item 5): the dispatch used
 * to drop the expected value and compare revision 0, so a wrong value on a
 * missing key created it. */
static void test_node_kv_cas_compares_the_value(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(9));
	int l = sim_wait_leader(s);
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	uint64_t sid = sim_open(s, l, 11);

	struct hasp_wire_msg req = cas_value_req(sid, 1, "cfg/missing", "nope", "created");
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_COMPARE_FAILED);
	struct hasp_wire_msg get = { .hdr = { .opcode = HASP_OP_KV_GET, .session_id = sid, .seq = 2 } };
	get.body.kv_get.name = (struct hasp_wire_bytes){ (const uint8_t *)"cfg/missing", 11 };
	assert_true(sim_call(s, l, &get, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_NOT_FOUND);

	struct hasp_wire_msg put = { .hdr = { .opcode = HASP_OP_KV_PUT, .session_id = sid, .seq = 3 } };
	put.body.kv_put = (struct hasp_wire_kv_put){ .key = { (const uint8_t *)"cfg/k", 5 },
						     .value = { (const uint8_t *)"v1", 2 } };
	assert_true(sim_call(s, l, &put, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	uint64_t rev = reply.body.kv_revision.revision;

	req = cas_value_req(sid, 4, "cfg/k", "v0", "v2");
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_COMPARE_FAILED);
	get.hdr.seq = 5;
	get.body.kv_get.name = (struct hasp_wire_bytes){ (const uint8_t *)"cfg/k", 5 };
	assert_true(sim_call(s, l, &get, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(reply.body.kv_value.revision, rev);
	assert_int_equal(reply.body.kv_value.value.size, 2);
	assert_memory_equal(reply.body.kv_value.value.data, "v1", 2);

	req = cas_value_req(sid, 6, "cfg/k", "v1", "v2");
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_true(reply.body.kv_revision.revision > rev);
	get.hdr.seq = 7;
	assert_true(sim_call(s, l, &get, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(reply.body.kv_value.value.size, 2);
	assert_memory_equal(reply.body.kv_value.value.data, "v2", 2);
	sim_destroy(s);
}

/* Writes a request header from docs/PROTOCOL.md's table (little-endian). */
static size_t raw_header(uint8_t *b, uint8_t opcode, uint64_t session, uint64_t seq, uint16_t body)
{
	memset(b, 0, HASP_WIRE_HEADER_SIZE);
	memcpy(b, "HASP", 4);
	b[4] = 1;
	b[5] = opcode;
	for (int i = 0; i < 8; i++) {
		b[8 + i] = (uint8_t)(session >> (8 * i));
		b[16 + i] = (uint8_t)(seq >> (8 * i));
	}
	b[24] = (uint8_t)body;
	b[25] = (uint8_t)(body >> 8);
	return HASP_WIRE_HEADER_SIZE;
}

/* Sends raw bytes to node i and returns the status of the first reply
 * echoing `seq`, or -1 when none came. */
static int sim_raw_status(struct sim *s, int i, const uint8_t *buf, size_t size, uint64_t seq)
{
	s->inbox_count = 0;
	node_client_rx(&s->nodes[i], s->now_ns, CLIENT_IP, CLIENT_PORT, buf, size);
	for (int t = 0; t < 2000; t++) {
		for (uint32_t k = 0; k < s->inbox_count; k++) {
			const struct dgram *d = &s->inbox[k];
			if (d->size < HASP_WIRE_HEADER_SIZE || (d->data[6] & 1) == 0)
				continue;
			uint64_t got = 0;
			for (int j = 7; j >= 0; j--)
				got = got << 8 | d->data[16 + j];
			if (got == seq)
				return d->data[26] | d->data[27] << 8;
		}
		sim_step(s);
	}
	return -1;
}

/* ---- client authentication (wire v2, docs/SECURITY.md section 4) ---- */

/* Sends `req` as wire v2 sealed with `key` (NULL: unsealed) to node i; true
 * with the reply when one that verifies under `reply_key` comes back. */
static bool sim_call_v2(struct sim *s, int i, struct hasp_wire_msg req, const struct auth_key *key,
			const struct auth_key *reply_key, struct hasp_wire_msg *reply, uint8_t *keep)
{
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	req.hdr.version = 2;
	int size = hasp_wire_encode(&req, buf, sizeof(buf));
	assert_true(size > 0);
	if (key != NULL)
		hasp_wire_seal(key, buf, (size_t)size);
	s->inbox_count = 0;
	node_client_rx(&s->nodes[i], s->now_ns, CLIENT_IP, CLIENT_PORT, buf, (size_t)size);
	for (int t = 0; t < 3000; t++) {
		for (uint32_t k = 0; k < s->inbox_count; k++) {
			struct dgram *d = &s->inbox[k];
			memcpy(keep, d->data, d->size);
			if (hasp_wire_decode_reply(keep, d->size, reply) == 0 && reply->hdr.version == 2 &&
			    reply->hdr.opcode == req.hdr.opcode && reply->hdr.seq == req.hdr.seq &&
			    hasp_wire_tag_ok(reply_key, keep, d->size))
				return true;
		}
		sim_step(s);
	}
	return false;
}

static uint64_t sim_open_v2(struct sim *s, int i, const char *identity, const struct auth_key *key,
			    uint64_t nonce, struct auth_key *session_key)
{
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_SESSION_OPEN, .seq = 1 } };
	struct hasp_wire_msg reply;
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	req.body.session_open = (struct hasp_wire_session_open){
		.client_nonce = nonce, .ttl_ms = 60000,
		.identity = { (const uint8_t *)identity, strlen(identity) },
	};
	if (!sim_call_v2(s, i, req, key, key, &reply, keep) || reply.hdr.status != HASP_STATUS_OK)
		return 0;
	uint64_t id = reply.body.session_opened.session_id;
	hasp_session_key(key, id, nonce, session_key);
	return id;
}

/* A simulated cluster that reads the identities file `path`, and on its
 * leader two sessions: alice's (key all 0x11) holding "job" with `token`,
 * and bob's (key all 0x22). */
struct two_clients {
	struct sim *s;
	int l;
	uint64_t a, b, token;
	struct auth_key alice, bob, as, bs;
};

static void two_clients_start(struct two_clients *t, uint64_t seed, const char *path)
{
	struct hasp_wire_msg reply;
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];

	memset(t->alice.bytes, 0x11, sizeof(t->alice.bytes));
	memset(t->bob.bytes, 0x22, sizeof(t->bob.bytes));
	sim_identities = path;
	t->s = sim_create(seed);
	t->l = sim_wait_leader(t->s);
	t->a = sim_open_v2(t->s, t->l, "alice", &t->alice, 5, &t->as);
	t->b = sim_open_v2(t->s, t->l, "bob", &t->bob, 6, &t->bs);
	assert_true(t->a != 0 && t->b != 0);
	assert_true(sim_call_v2(t->s, t->l, acquire_req(t->a, 1, "job", 60000, HASP_ACQUIRE_TRY), &t->as,
				&t->as, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	t->token = reply.body.granted.token;
}

/* A node with client_auth = on acts only on datagrams whose tag verifies
 * under the session's key (the identity's for an open), answers them
 * tagged, and drops the rest unanswered before they touch anything:
 * untagged, v1, another identity's key on the victim's session id, an
 * unknown identity. Permissions and ownership hold between identities.
 * (Security issue 15, attacks 1-3 and 6 at node level; the real-cluster
 * suite is node_itest_hostile.) */
static void test_node_client_auth_acts_only_on_verified_datagrams(void **state)
{
	(void)state;
	char dir[] = "/tmp/hasp-test-ids.XXXXXX";
	char path[64];
	struct hasp_wire_msg reply;
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct two_clients t;

	assert_int_equal(auth_init(), 0);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/identities", dir);
	/* Keys as hex: all 0x11 bytes and all 0x22 bytes. */
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("alice ", f);
	for (int k = 0; k < 32; k++)
		fputs("11", f);
	fputs(" allow=all:\nbob ", f);
	for (int k = 0; k < 32; k++)
		fputs("22", f);
	fputs(" allow=read: allow=acquire:bob/\n", f);
	fclose(f);
	assert_int_equal(chmod(path, 0600), 0);
	two_clients_start(&t, 91, path);
	struct sim *s = t.s;
	int l = t.l;
	struct node *n = &s->nodes[l];
	uint64_t a = t.a, b = t.b, token = t.token;
	struct auth_key alice = t.alice, bob = t.bob, as = t.as, bs = t.bs;

	/* Untagged, v1, under bob's key with alice's id, an unknown identity,
	 * an open under a wrong key: no reply, each counted. */
	uint64_t bad = n->stats.client_auth_bad, unknown = n->stats.client_auth_unknown;
	struct hasp_wire_msg close = { .hdr = { .opcode = HASP_OP_SESSION_CLOSE, .session_id = a, .seq = 2 } };
	assert_false(sim_call_v2(s, l, close, NULL, &as, &reply, keep));
	assert_false(sim_call_v2(s, l, close, &bs, &as, &reply, keep));
	assert_int_equal(n->stats.client_auth_bad, bad + 2);
	uint8_t v1[HASP_DATAGRAM_SIZE_MAX];
	int size = hasp_wire_encode(&close, v1, sizeof(v1));
	uint64_t version = n->stats.client_auth_version;
	assert_int_equal(sim_raw_status(s, l, v1, (size_t)size, 2), -1);
	assert_int_equal(n->stats.client_auth_version, version + 1);
	struct auth_key mallory;
	assert_int_equal(sim_open_v2(s, l, "mallory", &alice, 7, &mallory), 0);
	assert_int_equal(sim_open_v2(s, l, "alice", &bob, 8, &mallory), 0);
	assert_int_equal(n->stats.client_auth_unknown, unknown + 1);
	assert_int_equal(n->stats.client_auth_bad, bad + 3);

	/* Bob reads the lock without learning the holder, cannot release it
	 * (no acquire permission on job), cannot even with permission on
	 * his own prefix hold what alice holds. */
	assert_true(sim_call_v2(s, l, read_req(b, 1, "job"), &bs, &bs, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(reply.body.lock_info.token, token);
	assert_int_equal(reply.body.lock_info.holder_session_id, 0);
	struct hasp_wire_msg rel = { .hdr = { .opcode = HASP_OP_RELEASE, .session_id = b, .seq = 2 } };
	rel.body.release = (struct hasp_wire_name_token){ { (const uint8_t *)"job", 3 }, token };
	assert_true(sim_call_v2(s, l, rel, &bs, &bs, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_FORBIDDEN);

	/* Alice's session is intact: her next request works and sees her
	 * lock with her as holder. */
	assert_true(sim_call_v2(s, l, read_req(a, 2, "job"), &as, &as, &reply, keep));
	assert_int_equal(reply.body.lock_info.holder_session_id, a);
	assert_int_equal(reply.body.lock_info.token, token);
	sim_destroy(s);
	sim_identities = NULL;
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

/* Writes an identities file (0600, renamed over `path`): one identity per
 * name, allowed everything, its key all `fills[i]` bytes; then `extra`. */
static void ids_write(const char *path, const char *const *names, const uint8_t *fills, int count,
		      const char *extra)
{
	char tmp[80];
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	FILE *f = fopen(tmp, "w");
	assert_non_null(f);
	for (int i = 0; i < count; i++) {
		fprintf(f, "%s ", names[i]);
		for (int k = 0; k < 32; k++)
			fprintf(f, "%02x", fills[i]);
		fputs(" allow=all:\n", f);
	}
	fputs(extra, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(tmp, 0600), 0);
	assert_int_equal(rename(tmp, path), 0);
}

/* A live reload of the identities file (docs/SECURITY.md 4.10) is all or
 * nothing, and after it the sessions of a rotated key or a removed
 * identity are not served while the identity's locks survive for its
 * new key. (The real-cluster test, with SIGHUP and identities.reload, is
 * node_itest_admin_identities.) */
static void test_node_identities_reload_is_atomic_and_rotates_keys(void **state)
{
	(void)state;
	char dir[] = "/tmp/hasp-test-reload.XXXXXX";
	char path[64], err[256];
	static const char *const both[] = { "alice", "bob" };
	struct auth_key alice2, as2, dummy;
	struct hasp_wire_msg reply;
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct two_clients t;

	assert_int_equal(auth_init(), 0);
	memset(alice2.bytes, 0x33, sizeof(alice2.bytes));
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/identities", dir);
	ids_write(path, both, (const uint8_t[]){ 0x11, 0x22 }, 2, "");
	two_clients_start(&t, test_util_seed(92), path);
	struct sim *s = t.s;
	int l = t.l;
	struct node *n = &s->nodes[l];
	uint64_t a = t.a, b = t.b, token = t.token;
	struct auth_key alice = t.alice, bob = t.bob, as = t.as, bs = t.bs;

	/* One bad line: refused whole on every node, nothing changes. */
	ids_write(path, both, (const uint8_t[]){ 0x11, 0x22 }, 2, "broken zz allow=all:\n");
	for (uint32_t i = 0; i < NODES; i++) {
		assert_int_equal(client_auth_load(&s->nodes[i].client_auth, path, 64, err, sizeof(err)),
				 -HASP_ECONFIG);
		assert_non_null(strstr(err, "identities:3:"));
		assert_int_equal(s->nodes[i].client_auth.id_count, 2);
	}
	assert_true(sim_call_v2(s, l, read_req(a, 2, "job"), &as, &as, &reply, keep));
	assert_true(sim_call_v2(s, l, read_req(b, 1, "job"), &bs, &bs, &reply, keep));

	/* Alice's key rotated, bob removed. */
	ids_write(path, both, (const uint8_t[]){ 0x33 }, 1, "");
	for (uint32_t i = 0; i < NODES; i++)
		assert_int_equal(client_auth_load(&s->nodes[i].client_auth, path, 64, err, sizeof(err)), 0);
	uint64_t bad = n->stats.client_auth_bad, unknown = n->stats.client_auth_unknown;
	assert_false(sim_call_v2(s, l, read_req(a, 3, "job"), &as, &as, &reply, keep));
	assert_int_equal(n->stats.client_auth_bad, bad + 1);
	assert_false(sim_call_v2(s, l, read_req(b, 2, "job"), &bs, &bs, &reply, keep));
	assert_int_equal(n->stats.client_auth_unknown, unknown + 1);
	assert_int_equal(sim_open_v2(s, l, "alice", &alice, 7, &dummy), 0);
	assert_int_equal(sim_open_v2(s, l, "bob", &bob, 8, &dummy), 0);

	/* The new key opens; the lock is still the old session's, and the
	 * identity releases it. */
	uint64_t a2 = sim_open_v2(s, l, "alice", &alice2, 9, &as2);
	assert_true(a2 != 0);
	assert_true(sim_call_v2(s, l, read_req(a2, 1, "job"), &as2, &as2, &reply, keep));
	assert_int_equal(reply.body.lock_info.holder_session_id, a);
	assert_int_equal(reply.body.lock_info.token, token);
	struct hasp_wire_msg rel = { .hdr = { .opcode = HASP_OP_RELEASE, .session_id = a2, .seq = 2 } };
	rel.body.release = (struct hasp_wire_name_token){ { (const uint8_t *)"job", 3 }, token };
	assert_true(sim_call_v2(s, l, rel, &as2, &as2, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	sim_destroy(s);
	sim_identities = NULL;
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

/* Issue 11 item 16: an EVENT sent as a request is answered BAD_OPCODE, as
 * the opcode table says (it used to get no reply at all). */
static void test_node_event_as_request_is_bad_opcode(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(10));
	int l = sim_wait_leader(s);
	uint8_t buf[HASP_WIRE_HEADER_SIZE];
	size_t size = raw_header(buf, HASP_OP_EVENT, 0, 77, 0);
	assert_int_equal(sim_raw_status(s, l, buf, size, 77), HASP_STATUS_BAD_OPCODE);
	size = raw_header(buf, 200, 0, 78, 0); /* unknown opcode, for contrast */
	assert_int_equal(sim_raw_status(s, l, buf, size, 78), HASP_STATUS_BAD_OPCODE);
	sim_destroy(s);
}

/* Issue 11 item 16: MORE means "entries remain after the last one", also
 * when the client's own limit stopped the range. */
static void test_node_kv_range_more_with_a_limit(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(11));
	int l = sim_wait_leader(s);
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	uint64_t sid = sim_open(s, l, 12);
	const char *keys[] = { "r/a", "r/b", "r/c" };
	for (uint64_t i = 0; i < 3; i++) {
		struct hasp_wire_msg put = { .hdr = { .opcode = HASP_OP_KV_PUT, .session_id = sid, .seq = i + 1 } };
		put.body.kv_put = (struct hasp_wire_kv_put){ .key = { (const uint8_t *)keys[i], 3 },
							     .value = { (const uint8_t *)"x", 1 } };
		assert_true(sim_call(s, l, &put, &reply, keep));
		assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	}
	struct hasp_wire_msg range = { .hdr = { .opcode = HASP_OP_KV_RANGE, .session_id = sid, .seq = 10 } };
	range.body.kv_range = (struct hasp_wire_kv_range){ .prefix = { (const uint8_t *)"r/", 2 }, .limit = 2 };
	assert_true(sim_call(s, l, &range, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_OK);
	assert_int_equal(reply.body.kv_entries.entry_count, 2);
	assert_int_equal(reply.body.kv_entries.flags & HASP_WIRE_RANGE_MORE, HASP_WIRE_RANGE_MORE);
	range.hdr.seq = 11;
	range.body.kv_range.limit = 3; /* exactly the set: nothing remains */
	assert_true(sim_call(s, l, &range, &reply, keep));
	assert_int_equal(reply.body.kv_entries.entry_count, 3);
	assert_int_equal(reply.body.kv_entries.flags & HASP_WIRE_RANGE_MORE, 0);
	range.hdr.seq = 12;
	range.body.kv_range.limit = 2;
	range.body.kv_range.start_after = (struct hasp_wire_bytes){ (const uint8_t *)"r/b", 3 };
	assert_true(sim_call(s, l, &range, &reply, keep));
	assert_int_equal(reply.body.kv_entries.entry_count, 1);
	assert_int_equal(reply.body.kv_entries.flags & HASP_WIRE_RANGE_MORE, 0);
	sim_destroy(s);
}

/* Issue 11 items 9/16: RENEW with TTL 0 keeps the lock's TTL (one contract
 * for the wire, the node and libhasp; the wire used to refuse it). */
static void test_node_renew_ttl_zero_keeps_the_ttl(void **state)
{
	(void)state;
	struct sim *s = sim_create(test_util_seed(12));
	int l = sim_wait_leader(s);
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg reply;
	uint64_t sid = sim_open(s, l, 13);
	struct hasp_wire_msg req = acquire_req(sid, 1, "lock/r", 4000, HASP_ACQUIRE_TRY);
	assert_true(sim_call(s, l, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	uint64_t token = reply.body.granted.token;
	struct hasp_wire_msg renew = { .hdr = { .opcode = HASP_OP_RENEW, .session_id = sid, .seq = 2 } };
	renew.body.renew = (struct hasp_wire_renew){ .name = { (const uint8_t *)"lock/r", 6 }, .token = token,
						     .ttl_ms = 0 };
	assert_true(sim_call(s, l, &renew, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	assert_int_equal(reply.body.granted.token, token);
	assert_int_equal(reply.body.granted.ttl_ms, 4000);
	sim_destroy(s);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_node_three_nodes_elect_grant_and_redirect),
		cmocka_unit_test(test_node_in_flight_copy_is_not_proposed_again),
		cmocka_unit_test(test_node_in_flight_mark_ends_with_its_batch_and_term),
		cmocka_unit_test(test_node_leader_ready_is_timed_from_the_win_to_the_first_entry),
		cmocka_unit_test(test_node_expiry_hands_lock_to_waiter_with_pushed_event),
		cmocka_unit_test(test_node_replayed_request_does_not_move_the_sessions_events),
		cmocka_unit_test(test_node_waiter_that_watches_gets_its_grant_once),
		cmocka_unit_test(test_node_isolated_leader_replaced_grant_kept),
		cmocka_unit_test(test_node_stalled_follower_does_not_campaign_on_waking),
		cmocka_unit_test(test_node_restart_recovers_from_wal_and_snapshot),
		cmocka_unit_test(test_node_new_leader_does_not_expire_a_session_it_has_not_applied),
		cmocka_unit_test(test_node_failing_snapshots_back_off_and_hand_off),
		cmocka_unit_test(test_node_existing_empty_data_dir_is_refused),
		cmocka_unit_test(test_node_wiped_follower_catches_up_and_health_reports_lag),
		cmocka_unit_test(test_node_bad_datagrams_are_counted_not_applied),
		cmocka_unit_test(test_node_watches_are_bounded_per_session),
		cmocka_unit_test(test_node_watch_count_tells_a_restart_that_lost_the_watches),
		cmocka_unit_test(test_node_watch_status_names_the_last_event_sent),
		cmocka_unit_test(test_node_forged_peer_messages_neither_depose_nor_commit),
		cmocka_unit_test(test_node_watch_events_are_rate_limited_and_coalesced),
		cmocka_unit_test(test_node_events_leave_through_their_sessions_lane),
		cmocka_unit_test(test_node_dead_follower_does_not_fill_the_window),
		cmocka_unit_test(test_node_lcore_allocates_nothing_after_start),
		cmocka_unit_test(test_node_idle_watermark_is_rate_limited),
		cmocka_unit_test(test_node_snapshot_install_forgets_ended_sessions),
		cmocka_unit_test(test_node_config_names_the_bad_field),
		cmocka_unit_test(test_node_config_wal_sync_defaults_to_dsync),
		cmocka_unit_test(test_node_config_segment_fill_defaults_to_zeros),
		cmocka_unit_test(test_node_config_member_public_keys),
		cmocka_unit_test(test_node_kv_cas_compares_the_value),
		cmocka_unit_test(test_node_event_as_request_is_bad_opcode),
		cmocka_unit_test(test_node_client_auth_acts_only_on_verified_datagrams),
		cmocka_unit_test(test_node_identities_reload_is_atomic_and_rotates_keys),
		cmocka_unit_test(test_node_watches_survive_a_step_down_with_a_gap),
		cmocka_unit_test(test_node_watch_held_events_dropped_are_counted),
		cmocka_unit_test(test_node_kv_range_more_with_a_limit),
		cmocka_unit_test(test_node_renew_ttl_zero_keeps_the_ttl),
		cmocka_unit_test(test_node_resumed_leader_pushes_no_stale_event),
		cmocka_unit_test(test_node_stalled_leader_confirmed_sends_held_events),
		cmocka_unit_test(test_node_stalled_leader_drops_a_waiters_grant_with_a_gap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
