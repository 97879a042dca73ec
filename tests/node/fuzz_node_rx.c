/*
 * Fuzz target: arbitrary datagrams into a running node core.
 *
 * One node (a single-member group, so it leads itself) on the simulated
 * disk is set up once; each input is a sequence of records
 *     kind u8 (even: client port, odd: raft port), size u16le, bytes
 * fed to node_client_rx()/node_peer_rx() with the simulated clock moving
 * 1 ms per record and node_work() run after each. Whatever the bytes, the
 * node must not crash, leak or read out of bounds, and no input without a
 * sealed record may make it stop leading; replies go to a sink that decodes
 * every one as a valid wire reply (the node never sends what a client would
 * refuse).
 *
 * Peer authentication is on: raft-port bytes of a record whose kind has
 * bit 1 set (3, 7, ...) are first sealed with node 2's pair key (a fresh
 * counter each; node 2 at 10.0.0.2 is known, not a configuration member),
 * so the fuzzer reaches the raft decoder and raft; the
 * other raft-port records test the MAC check itself. A sealed record comes
 * from an authenticated peer, which Raft trusts: an AppendEntries of a
 * higher term deposes the leader, and a configuration entry in it may
 * leave node 1 unable to lead again. When such an input leaves the node
 * not leading, it is torn down (node_deinit must free everything: the
 * leak check sees it) and the next input starts on a fresh one.
 *
 * Built a second time as fuzz_node_rx_auth (FUZZ_CLIENT_AUTH): the node
 * runs with client_auth = on and one identity, and client-port records of
 * kind 2, 6, ... are first tagged, under the session key of the session
 * their header names when the node knows it, else under the identity key,
 * so the fuzzer reaches the authenticated decoder, dispatch and the state
 * machine; the other client records test the tag check itself.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/bytes.h"
#include "common/wire_auth.h"
#include "node/node.h"
#include "hasp/wire.h"
#include "storage/simdisk.h"
#include "tests/node/sim_keys.h"

#define CLIENT_IP 0x0a000064u

static struct node fuzz_node;
static struct simdisk *fuzz_disk;
static uint64_t fuzz_now = 1000000000ull;
static bool fuzz_ready;
static struct auth_key fuzz_key;
static struct peer_auth_tx fuzz_tx = { .epoch = 1 };
#ifdef FUZZ_CLIENT_AUTH
static struct auth_key fuzz_identity_key;

/* An identities file with one identity "fz" (key all 0x33 bytes), allowed
 * everything; written once, owner-only, as the node requires, in $TMPDIR
 * (tests/fuzz_run.sh gives each run its own and checks it is left empty),
 * and removed once node_init() has read it. */
static const char *fuzz_identities(void)
{
	static char path[4096];
	const char *dir = getenv("TMPDIR");
	int n = snprintf(path, sizeof(path), "%s/hasp-fuzz-ids.XXXXXX", dir && *dir ? dir : "/tmp");
	HASP_ASSERT(n > 0 && (size_t)n < sizeof(path));
	int fd = mkstemp(path);
	HASP_ASSERT(fd >= 0);
	char line[128] = "fz ";
	for (int i = 0; i < 32; i++)
		strcat(line, "33");
	strcat(line, " allow=all:\n");
	HASP_ASSERT(write(fd, line, strlen(line)) == (ssize_t)strlen(line));
	close(fd);
	memset(fuzz_identity_key.bytes, 0x33, sizeof(fuzz_identity_key.bytes));
	return path;
}
#endif

static void fuzz_send(void *ctx, uint32_t ip, uint16_t dst_port, uint16_t src_port, const void *p,
		      size_t size)
{
	(void)ctx;
	(void)dst_port;
	(void)src_port;
	if (ip != CLIENT_IP)
		return;
	/* Everything the node sends a client must decode as a reply. */
	uint8_t copy[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg m;
	HASP_ASSERT(size <= sizeof(copy));
	memcpy(copy, p, size);
	HASP_ASSERT(hasp_wire_decode_reply(copy, size, &m) == 0);
}

static void fuzz_run_ms(uint32_t ms)
{
	for (uint32_t i = 0; i < ms * 10; i++) {
		uint64_t deadline = UINT64_MAX;
		fuzz_now += 100000;
		(void)node_work(&fuzz_node, fuzz_now, &deadline);
	}
}

static void fuzz_setup(void)
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
		{ "kv_entries_max", "64" }, { "kv_bytes_max", "65536" }, { "lock_name_bytes_max", "8192" },
		{ "locks_per_lease_max", "16" }, { "keys_per_lease_max", "16" },
		{ "locks_per_session_max", "16" }, { "watches_max", "16" }, { "client_auth", "off" },
	};
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		HASP_ASSERT(node_config_set(&c, kv[i][0], kv[i][1], err, sizeof(err)) == 0);
	sim_peer_keys(&c);
#ifdef FUZZ_CLIENT_AUTH
	HASP_ASSERT(node_config_set(&c, "client_auth", "on", err, sizeof(err)) == 0);
	const char *identities = fuzz_identities();
	HASP_ASSERT(node_config_set(&c, "client_identities_file", identities, err, sizeof(err)) == 0);
#endif
	sim_pair_tx(2, 1, &fuzz_key);
	struct simdisk_config dc;
	simdisk_config_default(&dc, 1);
	fuzz_disk = simdisk_create(&dc);
	HASP_ASSERT(fuzz_disk != NULL);
	struct node_net net = { .send = fuzz_send };
	HASP_ASSERT(node_init(&fuzz_node, &c, simdisk_io(fuzz_disk), &net, fuzz_now, err, sizeof(err)) == 0);
#ifdef FUZZ_CLIENT_AUTH
	HASP_ASSERT(unlink(identities) == 0); /* loaded: nothing reads it again */
#endif
	fuzz_run_ms(1000);
	HASP_ASSERT(fuzz_node.role == RAFT_LEADER);
	/* Node 2 at 10.0.0.2, known with its public key as `members add`
	 * would record it (not a member of the configuration): sealed records
	 * come from it, so they pass the MAC and reach the decoder and raft. */
	struct node_member two = { .id = 2, .ip = 0x0a000002u, .peer_port = 7001, .client_port = 7000,
				   .has_pub = true };
	struct auth_key sk;
	sim_node_secret(2, &sk);
	HASP_ASSERT(auth_public_key(&sk, two.pub) == 0);
	fuzz_node.cfg.members[fuzz_node.cfg.member_count] = two;
	HASP_ASSERT(peer_keys_derive(&fuzz_node.peer_keys[fuzz_node.cfg.member_count], &fuzz_node.cfg, &two) == 0);
	fuzz_node.cfg.member_count++;
	fuzz_ready = true;
}

static void fuzz_teardown(void)
{
	node_deinit(&fuzz_node);
	simdisk_destroy(fuzz_disk);
	memset(&fuzz_node, 0, sizeof(fuzz_node));
	fuzz_disk = NULL;
	fuzz_ready = false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!fuzz_ready)
		fuzz_setup();
	size_t pos = 0;
	bool sealed_any = false;
	while (pos + 3 <= size) {
		uint8_t kind = data[pos];
		size_t len = (size_t)data[pos + 1] | (size_t)data[pos + 2] << 8;
		pos += 3;
		if (len > size - pos)
			len = size - pos;
		/* Exact-size heap copy so ASan sees any read past the datagram. */
		bool seal = (kind & 3) == 3 && len > 0;
		size_t dg_size = seal ? len + PEER_AUTH_TRAILER_SIZE : len;
		uint8_t *dg = malloc(dg_size ? dg_size : 1);
		HASP_ASSERT(dg != NULL);
		memcpy(dg, data + pos, len);
		if (seal)
			len = peer_auth_seal(&fuzz_key, &fuzz_tx, dg, len, dg_size);
		sealed_any |= seal;
#ifdef FUZZ_CLIENT_AUTH
		if ((kind & 3) == 2 && len >= HASP_WIRE_HEADER_SIZE) {
			const struct client_identity *who;
			uint64_t sid = get_u64le(dg + 8);
			const struct auth_key *k =
				sid != 0 ? client_auth_session_key(&fuzz_node.client_auth, &fuzz_node.sm, sid, &who)
					 : &fuzz_identity_key;
			hasp_wire_seal(k != NULL ? k : &fuzz_identity_key, dg, len);
		}
#endif
		if (kind & 1)
			node_peer_rx(&fuzz_node, fuzz_now, 0x0a000002u, 7001, dg, len);
		else
			node_client_rx(&fuzz_node, fuzz_now, CLIENT_IP, 5555, dg, len);
		free(dg);
		pos += len;
		fuzz_run_ms(1);
	}
	fuzz_run_ms(2);
	if (!sealed_any)
		HASP_ASSERT(fuzz_node.role == RAFT_LEADER);
	else if (fuzz_node.role != RAFT_LEADER)
		fuzz_teardown();
	return 0;
}
