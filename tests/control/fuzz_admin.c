/*
 * Fuzz target for the admin request path: arbitrary bytes, cut into lines,
 * each a request through control_call_start() (parse, registry lookup)
 * into the built-in commands and the node's own commands
 * (node/node_admin.c: members.*, leader.transfer, locks.*, leases.list,
 * sessions.list, snapshot.save), which run on a real single-node core (the
 * simulated disk, a simulated clock) stepped as haspd's lcore steps it
 * until the request completes; and the raw bytes through the JSON
 * tokenizer. Properties: nothing crashes or leaks, every request
 * completes (the node answers or times out itself), every reply the server
 * would send is valid JSON with an "ok" member, and the node still leads
 * afterwards.
 *
 * Set up once: the node leads itself and holds a session with three locks,
 * so listings, locks.show and locks.release_force have something to show.
 * Left out because they change state that the next input would inherit:
 * log.level (global log levels) and removing node 1 (the only voter).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "control/control_impl.h"
#include "control/json.h"
#include "hasp/errors.h"
#include "hasp/wire.h"
#include "node/node.h"
#include "node/node_admin.h"
#include "storage/simdisk.h"

#define CLIENT_IP 0x0a000064u
#define LINES_MAX 8u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct node fz_node;
static struct node_admin fz_admin;
static struct simdisk *fz_disk;
static uint64_t fz_now = 1000000000ull;
static bool fz_ready;
static struct control_request req;
static char result[65536];
static char line[70000];
static struct json_token toks[8192];

static void fz_send(void *ctx, uint32_t ip, uint16_t dst_port, uint16_t src_port, const void *p,
		    size_t size)
{
	(void)ctx;
	(void)ip;
	(void)dst_port;
	(void)src_port;
	(void)p;
	(void)size;
}

static void fz_step(void)
{
	uint64_t deadline = UINT64_MAX;
	fz_now += 1000000;
	(void)node_work(&fz_node, fz_now, &deadline);
	(void)node_admin_work(&fz_admin, fz_now, NULL, &deadline);
}

static void fz_client(uint8_t opcode, uint64_t session, uint64_t seq, const char *name)
{
	struct hasp_wire_msg m = { .hdr = { .opcode = opcode, .session_id = session, .seq = seq } };
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	if (opcode == HASP_OP_SESSION_OPEN)
		m.body.session_open = (struct hasp_wire_session_open){ .client_nonce = 7, .ttl_ms = 3600000 };
	else
		m.body.acquire = (struct hasp_wire_acquire){
			.name = { (const uint8_t *)name, strlen(name) }, .ttl_ms = 3600000, .mode = HASP_ACQUIRE_TRY,
		};
	int n = hasp_wire_encode(&m, buf, sizeof(buf));
	HASP_ASSERT(n > 0);
	node_client_rx(&fz_node, fz_now, CLIENT_IP, 5555, buf, (size_t)n);
	for (int i = 0; i < 20; i++)
		fz_step();
}

static void fz_setup(void)
{
	struct node_config c;
	char err[256];
	node_config_default(&c);
	static const char *kv[][2] = {
		{ "node_id", "1" }, { "cluster_id", "42" }, { "member", "1,10.0.0.1,7001,7000" },
		{ "ip", "10.0.0.1/24" }, { "mac", "02:77:00:00:00:01" }, { "data_dir", "fuzz" },
		{ "eal", "-l 0" }, { "log_window", "256" }, { "snapshot_threshold", "64" },
		{ "snapshot_trailing", "16" }, { "segment_size", "262144" }, { "locks_max", "64" },
		{ "leases_max", "128" }, { "sessions_max", "32" }, { "waiters_max", "64" },
		{ "kv_entries_max", "64" }, { "kv_bytes_max", "65536" }, { "peer_auth", "off" }, { "client_auth", "off" },
	};
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		HASP_ASSERT(node_config_set(&c, kv[i][0], kv[i][1], err, sizeof(err)) == 0);
	struct simdisk_config dc;
	simdisk_config_default(&dc, 1);
	dc.short_write_per_million = 0;
	fz_disk = simdisk_create(&dc);
	HASP_ASSERT(fz_disk != NULL);
	struct node_net net = { .send = fz_send };
	HASP_ASSERT(node_init(&fz_node, &c, simdisk_io(fz_disk), &net, fz_now, err, sizeof(err)) == 0);
	/* No sockets: requests go in through control_call_start(). */
	HASP_ASSERT(node_admin_init(&fz_admin, &fz_node, "", "") == 0);
	for (int i = 0; i < 1000 && fz_node.role != RAFT_LEADER; i++)
		fz_step();
	HASP_ASSERT(fz_node.role == RAFT_LEADER);
	for (int i = 0; i < 50; i++)
		fz_step();
	fz_client(HASP_OP_SESSION_OPEN, 0, 1, NULL);
	uint32_t cursor = 0;
	uint64_t session = 0;
	struct locks_session_info si;
	HASP_ASSERT(locks_session_next(&fz_node.sm, &cursor, &session, &si));
	fz_client(HASP_OP_ACQUIRE, session, 2, "db/a");
	fz_client(HASP_OP_ACQUIRE, session, 3, "db/b");
	fz_client(HASP_OP_ACQUIRE, session, 4, "q");
	fz_ready = true;
}

/* The request's words as the server splits them (on spaces). */
static bool fz_left_out(const char *s, size_t n)
{
	char buf[CONTROL_REQUEST_SIZE_MAX + 1];
	if (n > CONTROL_REQUEST_SIZE_MAX)
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (strstr(buf, "log.level") != NULL)
		return true;
	char *save = NULL, *tok = strtok_r(buf, " \r\n", &save);
	if (tok == NULL || strcmp(tok, "members.remove") != 0)
		return false;
	while ((tok = strtok_r(NULL, " \r\n", &save)) != NULL) {
		uint64_t id;
		if (control_parse_u64(tok, &id) && id == fz_node.cfg.node_id)
			return true;
	}
	return false;
}

static void fz_request(const char *s, size_t n)
{
	struct control_call call;
	memset(&req, 0, sizeof(req));
	bool done = control_call_start(&fz_admin.ctl, &call, s, n, &req, result, sizeof(result), 0,
				       true);
	/* The node completes every request it took within its admin timeout
	 * (5 s of node time); 7 s of steps is a generous bound. */
	for (int i = 0; !done && i < 7000; i++) {
		fz_step();
		done = control_call_poll(&fz_admin.ctl, &call, 0);
	}
	HASP_ASSERT(done);
	size_t len = control_reply_render(&req, -1, line, sizeof(line));
	HASP_ASSERT(len > 0 && line[len - 1] == '\n');
	int count = json_parse(line, len - 1, toks, sizeof(toks) / sizeof(toks[0]));
	HASP_ASSERT(count > 0);
	bool ok;
	HASP_ASSERT(json_tok_bool(line, toks, json_get(line, toks, 0, "ok"), &ok));
	HASP_ASSERT(ok == (req.error == 0));
	if (!ok)
		HASP_ASSERT(json_get(line, toks, 0, "error") >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!fz_ready)
		fz_setup();
	/* The tokenizer on raw bytes. */
	int parsed = json_parse((const char *)data, size, toks, sizeof(toks) / sizeof(toks[0]));
	HASP_ASSERT(parsed <= (int)(sizeof(toks) / sizeof(toks[0])));
	HASP_ASSERT(parsed > 0 || parsed == -HASP_ECORRUPT || parsed == -HASP_EFULL ||
		    parsed == -HASP_ETOOBIG);

	/* Lines (an exact-size heap copy each, so ASan sees any overread). */
	size_t pos = 0;
	for (uint32_t k = 0; k < LINES_MAX && pos < size; k++) {
		const uint8_t *nl = memchr(data + pos, '\n', size - pos);
		size_t n = nl != NULL ? (size_t)(nl - (data + pos)) + 1 : size - pos;
		if (!fz_left_out((const char *)data + pos, n)) {
			char *copy = malloc(n ? n : 1);
			HASP_ASSERT(copy != NULL);
			memcpy(copy, data + pos, n);
			fz_request(copy, n);
			free(copy);
		}
		pos += n;
	}
	HASP_ASSERT(fz_node.role == RAFT_LEADER);
	return 0;
}
