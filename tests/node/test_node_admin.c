/*
 * The node's admin commands (node/node_admin.c) on three real node
 * cores (raft + locks + WAL on the simulated disk) wired by an in-memory
 * network and a simulated clock, so they run under ASan: the admin side
 * queues requests with control_call_start() and the simulation steps each
 * node's work hook, which drains them with control_poll() exactly as
 * haspd's lcore does. Covers: redirect data on followers, forced release
 * (the old token goes stale), listings, a learner added and removed,
 * leadership transfer, snapshot save, and the published status/metrics.
 * Every test also checks that the lcore side (node entry points and
 * node_admin_work, run inside the forbidden-thread window of
 * tests/storage/forbid_io.h) allocated nothing (docs/STYLE.md §6).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "control/control_impl.h"
#include "control/json.h"
#include "node/node.h"
#include "node/node_admin.h"
#include "hasp/errors.h"
#include "storage/simdisk.h"
#include "tests/node/sim_keys.h"
#include "tests/storage/forbid_io.h"
#include "tests/test_util.h"

#define NODES 3
#define NET_MAX 8192
#define CLIENT_IP 0x0a000064u
#define CLIENT_PORT 5555
#define STEP_NS 100000ull

struct dgram {
	uint32_t src_ip, dst_ip;
	uint16_t src_port, dst_port;
	uint16_t size;
	uint8_t data[HASP_DATAGRAM_SIZE_MAX];
};

struct sim {
	struct node nodes[NODES];
	struct node_admin admin[NODES];
	struct simdisk *disks[NODES];
	struct node_config cfg[NODES];
	struct dgram *net;
	uint32_t net_count;
	struct dgram *inbox;
	uint32_t inbox_count;
	uint64_t now_ns;
	uint64_t forbidden_before; /* hasp_alloc_stats forbidden_count at start */
	uint64_t libc_before;      /* forbid_io_libc_count() at start */
};

static struct sim *g;

static void sim_send(void *ctx, uint32_t ip, uint16_t dst_port, uint16_t src_port, const void *p,
		     size_t size)
{
	struct sim *s = g;
	uint32_t from = (uint32_t)(uintptr_t)ctx;
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

static struct sim *sim_create(void)
{
	struct sim *s = test_calloc(1, sizeof(*s));
	s->net = test_calloc(NET_MAX, sizeof(*s->net));
	s->inbox = test_calloc(NET_MAX, sizeof(*s->inbox));
	s->now_ns = 1000000000ull;
	g = s;
	for (uint32_t i = 0; i < NODES; i++) {
		struct node_config *c = &s->cfg[i];
		char err[256], id[4];
		snprintf(id, sizeof(id), "%u", i + 1);
		node_config_default(c);
		const char *kv[][2] = {
			{ "node_id", id }, { "cluster_id", "42" }, { "member", "1,10.0.0.1,7001,7000" },
			{ "member", "2,10.0.0.2,7001,7000" }, { "member", "3,10.0.0.3,7001,7000" },
			{ "ip", i == 0 ? "10.0.0.1/24" : i == 1 ? "10.0.0.2/24" : "10.0.0.3/24" },
			{ "mac", "02:77:00:00:00:01" }, { "data_dir", "sim" }, { "eal", "-l 0" },
			{ "log_window", "512" }, { "snapshot_threshold", "100" }, { "snapshot_trailing", "20" }, { "segment_size", "262144" },
			{ "sessions_max", "64" }, { "time_tick_ms", "20" }, { "client_auth", "off" },
		};
		for (size_t k = 0; k < sizeof(kv) / sizeof(kv[0]); k++)
			assert_int_equal(node_config_set(c, kv[k][0], kv[k][1], err, sizeof(err)), 0);
		sim_peer_keys(c);
		struct simdisk_config dc;
		simdisk_config_default(&dc, 7 + i);
		dc.short_write_per_million = 0;
		s->disks[i] = simdisk_create(&dc);
		assert_non_null(s->disks[i]);
		struct node_net net = { .send = sim_send, .ctx = (void *)(uintptr_t)i };
		assert_int_equal(node_init(&s->nodes[i], c, forbid_io_wrap(simdisk_io(s->disks[i])), &net,
					   s->now_ns, err, sizeof(err)), 0);
		/* No sockets: requests go in through control_call_start(). */
		assert_int_equal(node_admin_init(&s->admin[i], &s->nodes[i], "", ""), 0);
	}
	struct hasp_alloc_stats st;
	hasp_alloc_stats_get(&st);
	s->forbidden_before = st.forbidden_count;
	s->libc_before = forbid_io_libc_count();
	forbid_io_window(true);
	return s;
}

static void sim_destroy(struct sim *s)
{
	struct hasp_alloc_stats st;
	forbid_io_window(false);
	hasp_alloc_stats_get(&st);
	assert_int_equal(st.forbidden_count - s->forbidden_before, 0);
	assert_int_equal(forbid_io_libc_count() - s->libc_before, 0);
	for (uint32_t i = 0; i < NODES; i++) {
		node_admin_deinit(&s->admin[i]);
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

static void sim_step(struct sim *s)
{
	static struct dgram batch[NET_MAX];
	uint32_t count = s->net_count;
	memcpy(batch, s->net, count * sizeof(*batch));
	s->net_count = 0;
	for (uint32_t k = 0; k < count; k++) {
		int i = node_of_ip(s, batch[k].dst_ip);
		if (i >= 0 && batch[k].dst_port == 7001) {
			forbid_io_enter();
			node_peer_rx(&s->nodes[i], s->now_ns, batch[k].src_ip, batch[k].src_port, batch[k].data,
				     batch[k].size);
			forbid_io_leave();
		}
	}
	s->now_ns += STEP_NS;
	for (uint32_t i = 0; i < NODES; i++) {
		uint64_t deadline = UINT64_MAX;
		forbid_io_enter();
		(void)node_work(&s->nodes[i], s->now_ns, &deadline);
		(void)node_admin_work(&s->admin[i], s->now_ns, NULL, &deadline);
		forbid_io_leave();
	}
}

static void sim_run_ms(struct sim *s, uint32_t ms)
{
	for (uint64_t end = s->now_ns + ms * 1000000ull; s->now_ns < end;)
		sim_step(s);
}

static int sim_leader(struct sim *s)
{
	for (int i = 0; i < NODES; i++)
		if (s->nodes[i].role == RAFT_LEADER && s->nodes[i].applied > 0)
			return i;
	return -1;
}

static int sim_wait_leader(struct sim *s)
{
	for (int t = 0; t < 5000 && sim_leader(s) < 0; t++)
		sim_run_ms(s, 1);
	int l = sim_leader(s);
	assert_true(l >= 0);
	sim_run_ms(s, 30);
	return l;
}

/* One admin request to node i, stepping the simulation until it completes. */
struct reply {
	struct control_request req;
	char result[65536];
	char line[70000];
	struct json_token t[2048];
	int res; /* token of the result */
};

static struct reply *admin(struct sim *s, int i, const char *line)
{
	static struct reply r;
	struct control_call call;
	memset(&r.req, 0, sizeof(r.req));
	bool done = control_call_start(&s->admin[i].ctl, &call, line, strlen(line), &r.req, r.result,
				       sizeof(r.result), 0, true);
	for (int t = 0; !done && t < 50000; t++) {
		sim_step(s);
		done = control_call_poll(&s->admin[i].ctl, &call, 0); /* now 0: never times out */
	}
	assert_true(done);
	size_t n = control_reply_render(&r.req, -1, r.line, sizeof(r.line));
	assert_true(n > 0);
	assert_true(json_parse(r.line, n, r.t, 2048) > 0);
	r.res = json_get(r.line, r.t, 0, "result");
	return &r;
}

static uint64_t res_u64(struct reply *r, const char *key)
{
	uint64_t v = 0;
	if (!json_tok_u64(r->line, r->t, json_get(r->line, r->t, r->res, key), &v))
		fail_msg("no %s in %s", key, r->line);
	return v;
}

static void expect_error(struct reply *r, const char *code)
{
	if (r->req.error == 0 || strcmp(hasp_strerror_name(r->req.error), code) != 0)
		fail_msg("want %s: %s", code, r->line);
}

static void expect_ok(struct reply *r)
{
	if (r->req.error != 0)
		fail_msg("want ok: %s", r->line);
}

/* The client side: open a session and acquire with the wire protocol. */
static bool sim_call(struct sim *s, int i, const struct hasp_wire_msg *req, struct hasp_wire_msg *reply,
		     uint8_t *keep)
{
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	int size = hasp_wire_encode(req, buf, sizeof(buf));
	assert_true(size > 0);
	s->inbox_count = 0;
	forbid_io_enter();
	node_client_rx(&s->nodes[i], s->now_ns, CLIENT_IP, CLIENT_PORT, buf, (size_t)size);
	forbid_io_leave();
	for (int t = 0; t < 20000; t++) {
		for (uint32_t k = 0; k < s->inbox_count; k++) {
			memcpy(keep, s->inbox[k].data, s->inbox[k].size);
			if (hasp_wire_decode_reply(keep, s->inbox[k].size, reply) == 0 &&
			    reply->hdr.opcode == req->hdr.opcode && reply->hdr.seq == req->hdr.seq)
				return true;
		}
		sim_step(s);
	}
	return false;
}

static uint64_t acquire(struct sim *s, int leader, const char *name, uint64_t *session)
{
	struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_SESSION_OPEN, .seq = 1 } }, reply;
	uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
	req.body.session_open = (struct hasp_wire_session_open){ .client_nonce = 99, .ttl_ms = 60000 };
	assert_true(sim_call(s, leader, &req, &reply, keep));
	*session = reply.body.session_opened.session_id;
	req = (struct hasp_wire_msg){ .hdr = { .opcode = HASP_OP_ACQUIRE, .session_id = *session, .seq = 2 } };
	req.body.acquire = (struct hasp_wire_acquire){
		.name = { (const uint8_t *)name, strlen(name) }, .ttl_ms = 60000, .mode = HASP_ACQUIRE_TRY,
	};
	assert_true(sim_call(s, leader, &req, &reply, keep));
	assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	return reply.body.granted.token;
}

static void test_node_admin_force_release_makes_the_token_stale(void **state)
{
	(void)state;
	struct sim *s = sim_create();
	int l = sim_wait_leader(s);
	int f = (l + 1) % NODES;
	uint64_t session;
	uint64_t token = acquire(s, l, "db/primary", &session);
	sim_run_ms(s, 20);
	assert_true(locks_check(&s->nodes[f].sm, (const uint8_t *)"db/primary", 10, token));

	/* Answered locally on a follower, from its applied state. */
	struct reply *r = admin(s, f, "locks.show db/primary");
	expect_ok(r);
	assert_int_equal(res_u64(r, "token"), token);
	assert_int_equal(res_u64(r, "holder"), session);
	r = admin(s, f, "locks.list prefix=db/");
	expect_ok(r);
	assert_int_equal(r->t[json_get(r->line, r->t, r->res, "locks")].size, 1);
	r = admin(s, f, "locks.list prefix=zz");
	assert_int_equal(r->t[json_get(r->line, r->t, r->res, "locks")].size, 0);
	/* Without a prefix, on a follower and on the leader, while a lock is
	 * held: every lock (this once crashed the node: a NULL prefix reached
	 * memcmp). */
	for (int n = 0; n < 2; n++) {
		r = admin(s, n == 0 ? f : l, "locks.list");
		expect_ok(r);
		assert_int_equal(r->t[json_get(r->line, r->t, r->res, "locks")].size, 1);
	}
	r = admin(s, f, "sessions.list");
	expect_ok(r);
	assert_true(r->t[json_get(r->line, r->t, r->res, "sessions")].size >= 1);
	r = admin(s, f, "leases.list");
	expect_ok(r);
	r = admin(s, f, "locks.show nothing");
	expect_error(r, "ENOENT");

	/* The follower refuses the forced release and names the leader. */
	r = admin(s, f, "locks.release_force db/primary");
	expect_error(r, "ENOTLEADER");
	assert_int_equal(r->req.leader_id, s->nodes[l].cfg.node_id);

	r = admin(s, l, "locks.release_force db/primary");
	expect_ok(r);
	assert_int_equal(res_u64(r, "released_token"), token);
	sim_run_ms(s, 20);
	for (int i = 0; i < NODES; i++)
		assert_false(locks_check(&s->nodes[i].sm, (const uint8_t *)"db/primary", 10, token));
	r = admin(s, l, "locks.release_force db/primary");
	expect_error(r, "ENOENT");
	sim_destroy(s);
}

/* Each impossible membership change is refused with its own code and a
 * message that names the rule (it was one EINVAL "no such member, already
 * a member, or the configuration is full" for all of them). */
static void expect_refusal(struct reply *r, const char *code, const char *text)
{
	expect_error(r, code);
	if (strstr(r->line, text) == NULL)
		fail_msg("want \"%s\" in: %s", text, r->line);
}

/* "VERB ID IP 7001 7000 PUBLIC_KEY" for node id (its test key pair). */
static const char *member_line(char *buf, size_t size, const char *verb, uint32_t id, const char *ip)
{
	char hex[AUTH_PUBLIC_HEX_SIZE];
	sim_pub_hex(id, hex);
	snprintf(buf, size, "%s %u %s 7001 7000 %s", verb, id, ip, hex);
	return buf;
}

static void test_node_admin_learner_added_and_removed(void **state)
{
	(void)state;
	struct sim *s = sim_create();
	int l = sim_wait_leader(s);
	char line[192];
	struct reply *r = admin(s, l, "members.add 4 10.0.0.4 7001 7000");
	expect_refusal(r, "EINVAL", "public_key: missing");
	r = admin(s, l, "members.add 4 10.0.0.4 7001 7000 00");
	expect_refusal(r, "EINVAL", "public_key: not 64 hex digits");
	r = admin(s, l, member_line(line, sizeof(line), "members.add", 4, "10.0.0.4"));
	expect_ok(r);
	assert_int_equal(res_u64(r, "id"), 4);
	sim_run_ms(s, 20);
	bool learner = false;
	for (uint32_t k = 0; k < s->nodes[l].raft.conf.count; k++)
		learner |= s->nodes[l].raft.conf.members[k].id == 4 &&
			   s->nodes[l].raft.conf.members[k].role == RAFT_LEARNER;
	assert_true(learner);
	/* A second change waits for none: the first has committed. */
	r = admin(s, l, member_line(line, sizeof(line), "members.add", 4, "10.0.0.9"));
	expect_error(r, "EEXIST"); /* another address for a known id */
	r = admin(s, l, member_line(line, sizeof(line), "members.add", 5, "10.0.0.4"));
	expect_error(r, "EEXIST"); /* another key for a known id's address */
	r = admin(s, l, "members.promote 4");
	expect_error(r, "ESTATE"); /* node 4 never answered: not caught up */
	r = admin(s, (l + 1) % NODES, "members.remove 4");
	expect_error(r, "ENOTLEADER");
	r = admin(s, l, "members.remove 4");
	expect_ok(r);
	sim_run_ms(s, 20);
	assert_int_equal(s->nodes[l].raft.conf.count, 3);
	/* members.address on a follower records the address only. */
	r = admin(s, (l + 1) % NODES, member_line(line, sizeof(line), "members.address", 5, "10.0.0.5"));
	expect_ok(r);
	assert_non_null(node_config_member(&s->nodes[(l + 1) % NODES].cfg, 5));
	r = admin(s, l, "members.add 0 10.0.0.4 7001 7000");
	expect_error(r, "EINVAL");
	sim_destroy(s);
}


static void test_node_admin_membership_refusals_say_which_rule(void **state)
{
	(void)state;
	struct sim *s = sim_create();
	int l = sim_wait_leader(s);
	uint32_t fid = s->nodes[(l + 1) % NODES].cfg.node_id;
	char line[192], ip[16];
	snprintf(ip, sizeof(ip), "10.0.0.%u", fid);
	expect_refusal(admin(s, l, member_line(line, sizeof(line), "members.add", fid, ip)), "EEXIST",
		       "is already a member (a voter)");
	snprintf(line, sizeof(line), "members.promote %u", fid);
	expect_refusal(admin(s, l, line), "EEXIST", "is already a voter");
	expect_refusal(admin(s, l, "members.remove 7"), "ENOENT", "node 7 is not a member");
	expect_refusal(admin(s, l, "members.promote 7"), "ENOENT", "node 7 is not a member");
	/* Learners up to NODE_MEMBERS_MAX members, then the configuration is
	 * full. */
	for (uint32_t id = 4; id <= NODE_MEMBERS_MAX; id++) {
		snprintf(ip, sizeof(ip), "10.0.0.%u", id);
		expect_ok(admin(s, l, member_line(line, sizeof(line), "members.add", id, ip)));
		sim_run_ms(s, 20);
	}
	expect_refusal(admin(s, l, member_line(line, sizeof(line), "members.add", 4, "10.0.0.4")), "EEXIST",
		       "node 4 is already a member (a learner)");
	expect_refusal(admin(s, l, member_line(line, sizeof(line), "members.add", NODE_MEMBERS_MAX + 1, "10.0.0.99")),
		       "EFULL", "configuration is full");
	sim_destroy(s);
}

static void test_node_admin_transfer_moves_leadership(void **state)
{
	(void)state;
	struct sim *s = sim_create();
	int l = sim_wait_leader(s);
	int t = (l + 2) % NODES;
	char line[64];
	/* Bad arguments are refused with a reason (they once answered ok with
	 * an invalid result): no id, two ids, id 0, past 32 bits. */
	static const char *const bad[] = { "leader.transfer", "leader.transfer 1 2", "leader.transfer 0",
					   "leader.transfer 4294967296" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct reply *b = admin(s, l, bad[i]);
		expect_error(b, "EINVAL");
		assert_non_null(strstr(b->line, "usage: leader.transfer <id>"));
	}
	assert_int_equal(s->nodes[l].role, RAFT_LEADER);
	snprintf(line, sizeof(line), "leader.transfer %u", s->nodes[t].cfg.node_id);
	struct reply *r = admin(s, l, line);
	expect_ok(r);
	assert_int_equal(res_u64(r, "leader_id"), s->nodes[t].cfg.node_id);
	sim_run_ms(s, 50);
	assert_int_equal(s->nodes[t].role, RAFT_LEADER);
	/* Status and metrics follow, published by the work hook. */
	struct control_status st;
	control_status_read(&s->admin[t].ctl, &st);
	assert_int_equal(st.role, RAFT_LEADER);
	assert_int_equal(st.leader_id, s->nodes[t].cfg.node_id);
	assert_int_equal(st.member_count, 3);
	assert_true(st.can_commit);
	/* The leader measured a heartbeat round trip to each follower (the
	 * simulated network delivers in one 100 us step). */
	sim_run_ms(s, 300);
	control_status_read(&s->admin[t].ctl, &st);
	for (uint64_t k = 0; k < st.member_count; k++)
		if (st.members[k].id != s->nodes[t].cfg.node_id)
			assert_true(st.members[k].rtt_ns >= STEP_NS && st.members[k].rtt_ns < 100 * STEP_NS);
	assert_true(metric_value(s->admin[t].nm.is_leader) == 1);
	/* The new leader timed its win to its no-op applied (the simulated
	 * network: at least one 100 us step for a follower's acknowledgement). */
	double ready_s = metric_value(s->admin[t].nm.leader_ready_last); /* seconds */
	assert_true(ready_s >= STEP_NS * 1e-9 && ready_s < 100 * STEP_NS * 1e-9);
	assert_true(metric_value(s->admin[l].nm.leader_changes_metric) >= 1);
	assert_true(metric_value(s->admin[l].nm.has_leader) == 1);
	/* The dataplane's counters are series too (zero here: no dataplane). */
	assert_non_null(metrics_find(control_metrics(&s->admin[t].ctl), "hasp_dp_rx_frames_total", ""));
	sim_destroy(s);
}

static void test_node_admin_snapshot_save_names_the_file(void **state)
{
	(void)state;
	struct sim *s = sim_create();
	int l = sim_wait_leader(s);
	uint64_t session;
	(void)acquire(s, l, "snap/a", &session);
	struct reply *r = admin(s, l, "snapshot.save");
	expect_ok(r);
	assert_true(res_u64(r, "index") > 0);
	assert_non_null(strstr(r->req.attach_path, "snap-"));
	assert_int_equal(s->nodes[l].stats.snapshots_taken, 1);
	sim_destroy(s);
}

static void test_node_admin_config_keys_are_checked(void **state)
{
	(void)state;
	struct node_config c;
	char err[256];
	node_config_default(&c);
	assert_false(c.join);
	assert_string_equal(c.admin_addr, "");
	assert_int_equal(node_config_set(&c, "admin_addr", "10.0.0.1:7070", err, sizeof(err)), 0);
	assert_string_equal(c.admin_addr, "10.0.0.1:7070");
	assert_int_equal(node_config_set(&c, "admin-addr", "10.0.0.1", err, sizeof(err)), -HASP_ECONFIG);
	assert_non_null(strstr(err, "admin_addr"));
	assert_int_equal(node_config_set(&c, "admin_addr", "host:7070", err, sizeof(err)), -HASP_ECONFIG);
	assert_int_equal(node_config_set(&c, "admin_addr", "10.0.0.1:70000", err, sizeof(err)), -HASP_ECONFIG);
	assert_int_equal(node_config_set(&c, "admin_socket", "/run/hasp/a.sock", err, sizeof(err)), 0);
	assert_string_equal(c.admin_socket, "/run/hasp/a.sock");
	assert_int_equal(node_config_set(&c, "join", "1", err, sizeof(err)), 0);
	assert_true(c.join);
	assert_int_equal(node_config_set(&c, "join", "maybe", err, sizeof(err)), -HASP_ECONFIG);
	assert_non_null(strstr(err, "join"));

	/* A joining node boots with no configuration of its own (it waits
	 * for the leader); without join the member lines are the voters. */
	for (int join = 0; join <= 1; join++) {
		struct node_config jc;
		struct node *n = test_calloc(1, sizeof(*n));
		node_config_default(&jc);
		const char *kv[][2] = {
			{ "node_id", "4" }, { "cluster_id", "42" }, { "member", "1,10.0.0.1,7001,7000" },
			{ "member", "4,10.0.0.4,7001,7000" }, { "ip", "10.0.0.4/24" },
			{ "mac", "02:77:00:00:00:04" }, { "data_dir", "sim" }, { "eal", "-l 0" },
			{ "segment_size", "262144" }, { "join", join ? "1" : "0" }, { "peer_auth", "off" }, { "client_auth", "off" },
		};
		for (size_t k = 0; k < sizeof(kv) / sizeof(kv[0]); k++)
			assert_int_equal(node_config_set(&jc, kv[k][0], kv[k][1], err, sizeof(err)), 0);
		struct simdisk_config dc;
		simdisk_config_default(&dc, 3);
		struct simdisk *disk = simdisk_create(&dc);
		struct node_net net = { .send = sim_send };
		assert_int_equal(node_init(n, &jc, simdisk_io(disk), &net, 1000000000ull, err, sizeof(err)), 0);
		assert_int_equal(n->raft.conf.count, join ? 0 : 2);
		node_deinit(n);
		simdisk_destroy(disk);
		test_free(n);
	}
}

/* Every admin input is untrusted (issue 11 item 4): numbers that overflow,
 * octal or hex spellings, a zero limit (a pager following `next` would loop
 * forever), options a command does not take, repeated options and stray
 * words are refused with EINVAL and change nothing; paging with a small
 * limit visits every record once. */
static void test_node_admin_listing_options_are_checked(void **state)
{
	(void)state;
	struct sim *s = sim_create();
	int l = sim_wait_leader(s);
	uint64_t session;
	(void)acquire(s, l, "page/0", &session);
	for (uint32_t k = 1; k < 3; k++) {
		char name[16];
		struct hasp_wire_msg req = { .hdr = { .opcode = HASP_OP_ACQUIRE, .session_id = session,
						      .seq = 2 + k } }, reply;
		uint8_t keep[HASP_DATAGRAM_SIZE_MAX];
		snprintf(name, sizeof(name), "page/%u", k);
		req.body.acquire = (struct hasp_wire_acquire){
			.name = { (const uint8_t *)name, strlen(name) }, .ttl_ms = 60000, .mode = HASP_ACQUIRE_TRY,
		};
		assert_true(sim_call(s, l, &req, &reply, keep));
		assert_int_equal(reply.hdr.status, HASP_STATUS_GRANTED);
	}
	static const char *const bad[] = {
		"locks.list limit=99999999999999999999", "locks.list limit=18446744073709551616",
		"locks.list after=99999999999999999999", "locks.list after=4294967296",
		"locks.list limit=0", "locks.list limit=", "locks.list limit=-1", "locks.list limit=0x10",
		"locks.list limit=1 limit=2", "locks.list prefix=a prefix=b", "locks.list bogus=1",
		"locks.list page/", "locks.list =1", "sessions.list prefix=x", "leases.list prefix=x",
		"sessions.list limit=0", "leases.list after=1x", "snapshot.save now",
		"members.remove 0x2", "members.remove 02", "leader.transfer 0x2",
		"members.promote 99999999999999999999", "members.add 4 10.0.0.4 7001 0x1b58",
		"members.address 4 10.0.0.4 07001 7000", "locks.show a b",
		/* Addresses a member cannot have (the config file refuses
		 * equal ports too). */
		"members.address 4 10.0.0.4 7001 7001", "members.address 4 0.0.0.0 7001 7000",
		"members.address 4 255.255.255.255 7001 7000", "members.address 4 127.0.0.1 7001 7000",
		"members.address 4 224.0.0.1 7001 7000", "members.add 4 10.0.0.4 7001 7001",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct reply *r = admin(s, l, bad[i]);
		if (r->req.error != -HASP_EINVAL)
			fail_msg("%s: want EINVAL: %s", bad[i], r->line);
	}
	/* Another member's IP: peers are told apart by address. */
	char dline[192];
	struct reply *dup = admin(s, l, member_line(dline, sizeof(dline), "members.address", 4, "10.0.0.2"));
	expect_error(dup, "EEXIST");
	/* Another member's public key: a pair key would be shared. */
	char hex[AUTH_PUBLIC_HEX_SIZE];
	sim_pub_hex(2, hex);
	snprintf(dline, sizeof(dline), "members.address 4 10.0.0.4 7001 7000 %s", hex);
	expect_refusal(admin(s, l, dline), "EEXIST", "that public key is node 2's");
	/* Nothing changed: every member is still there, no address learned. */
	assert_int_equal(s->nodes[l].raft.conf.count, 3);
	assert_null(node_config_member(&s->nodes[l].cfg, 4));
	assert_int_equal(s->nodes[l].stats.snapshots_taken, 0);

	/* Paging one at a time visits each lock once and ends. */
	uint64_t after = 0, seen = 0;
	for (int page = 0; page < 10; page++) {
		char line[64];
		snprintf(line, sizeof(line), "locks.list prefix=page/ limit=1 after=%llu",
			 (unsigned long long)after);
		struct reply *r = admin(s, l, line);
		expect_ok(r);
		seen += r->t[json_get(r->line, r->t, r->res, "locks")].size;
		bool more = false;
		assert_true(json_tok_bool(r->line, r->t, json_get(r->line, r->t, r->res, "truncated"), &more));
		if (!more)
			break;
		uint64_t next = res_u64(r, "next");
		assert_true(next > after);
		after = next;
	}
	assert_int_equal(seen, 3);
	sim_destroy(s);
}

static const char *status_role(struct sim *s, int i)
{
	struct reply *r = admin(s, i, "status");
	expect_ok(r);
	static char role[32];
	int t = json_get(r->line, r->t, r->res, "role");
	assert_true(t >= 0);
	snprintf(role, sizeof(role), "%.*s", (int)(r->t[t].end - r->t[t].start), r->line + r->t[t].start);
	return role;
}

/* Membership as `status` shows it (issue 11 item 6): a learner says
 * "learner" (it showed "follower"); a node that learned it was removed
 * says "removed", is unhealthy with that reason and never campaigns again;
 * a removed node that never learned it cannot depose the leader. */
static void test_node_admin_status_shows_learner_and_removed(void **state)
{
	(void)state;
	struct sim *s = sim_create();
	int l = sim_wait_leader(s);
	int f = (l + 1) % NODES;
	char line[64];
	uint32_t fid = s->nodes[f].cfg.node_id;
	snprintf(line, sizeof(line), "members.remove %u", fid);
	expect_ok(admin(s, l, line));
	/* The removed follower is not told (the leader stops replicating to
	 * it), so it campaigns: the others ignore it. */
	uint64_t term = s->nodes[l].term;
	int o = 3 - l - f; /* the other member */
	uint64_t bad_l = s->nodes[l].stats.peer_auth_bad, bad_o = s->nodes[o].stats.peer_auth_bad;
	sim_run_ms(s, 3000);
	assert_int_equal(s->nodes[l].role, RAFT_LEADER);
	assert_int_equal(s->nodes[l].term, term);
	/* Once the removal committed, its pair keys are revoked on both: its
	 * campaign (its own, real keys, from its own address) is dropped and
	 * counted, and only its vote requests are answered, with the news of
	 * its removal, which it learns (docs/SECURITY.md 3.5). */
	assert_int_equal(s->nodes[l].stats.peer_keys_revoked, 1);
	assert_int_equal(s->nodes[o].stats.peer_keys_revoked, 1);
	assert_true(s->nodes[l].stats.peer_auth_bad > bad_l);
	assert_true(s->nodes[o].stats.peer_auth_bad > bad_o);
	assert_true(s->nodes[l].raft.counters.removal_notices_sent + s->nodes[o].raft.counters.removal_notices_sent >
		    0);
	assert_true(raft_removed(&s->nodes[f].raft));
	/* Added back as a learner it replicates, and says what it is. */
	char ip[16], mline[192];
	snprintf(ip, sizeof(ip), "10.0.0.%u", fid);
	for (int i = 0; i < NODES; i++) /* as haspctl members add does */
		if (i != l && i != f)
			expect_ok(admin(s, i, member_line(mline, sizeof(mline), "members.address", fid, ip)));
	expect_ok(admin(s, l, member_line(mline, sizeof(mline), "members.add", fid, ip)));
	sim_run_ms(s, 200);
	assert_string_equal(status_role(s, f), "learner");
	snprintf(line, sizeof(line), "members.promote %u", fid);
	expect_ok(admin(s, l, line));
	sim_run_ms(s, 200);
	assert_string_equal(status_role(s, f), "follower");
	assert_string_equal(status_role(s, l), "leader");

	/* The leader removes itself: once that commits it knows, says so and
	 * stays out of elections. */
	snprintf(line, sizeof(line), "members.remove %u", s->nodes[l].cfg.node_id);
	expect_ok(admin(s, l, line));
	sim_run_ms(s, 500);
	assert_string_equal(status_role(s, l), "removed");
	/* Health at the simulated clock (the admin command would use the
	 * real one, far from the simulation's). */
	char reason[64];
	struct control_status st;
	control_status_read(&s->admin[l].ctl, &st);
	assert_false(control_health(&s->admin[l].ctl, st.published_ns, reason, sizeof(reason)));
	assert_string_equal(reason, "removed");
	uint64_t campaigns = s->nodes[l].raft.counters.elections + s->nodes[l].raft.counters.pre_votes;
	sim_run_ms(s, 3000);
	assert_int_equal(s->nodes[l].raft.counters.elections + s->nodes[l].raft.counters.pre_votes, campaigns);
	assert_string_equal(status_role(s, l), "removed");
	int nl = sim_leader(s);
	assert_true(nl >= 0 && nl != l);
	sim_destroy(s);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_node_admin_force_release_makes_the_token_stale),
		cmocka_unit_test(test_node_admin_learner_added_and_removed),
		cmocka_unit_test(test_node_admin_membership_refusals_say_which_rule),
		cmocka_unit_test(test_node_admin_transfer_moves_leadership),
		cmocka_unit_test(test_node_admin_snapshot_save_names_the_file),
		cmocka_unit_test(test_node_admin_config_keys_are_checked),
		cmocka_unit_test(test_node_admin_listing_options_are_checked),
		cmocka_unit_test(test_node_admin_status_shows_learner_and_removed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
