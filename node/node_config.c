/*
 * haspd configuration parsing and checking (see node_config.h).
 *
 * One table maps every key to a setter, so the file, the flags and the
 * reference in docs/OPERATIONS.md name the same things. Numbers are parsed
 * strictly (the whole text, in range); an error message always starts with
 * the key it is about, so an operator sees which line to fix.
 */
#include "node/node_config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "dataplane/eth.h"
#include "dataplane/ipv4.h"
#include "hasp/errors.h"
#include "storage/snapshot.h"
#include "storage/wal.h"

static int fail(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t err_size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
	return -HASP_ECONFIG;
}

void node_config_default(struct node_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->prefix_len = 24;
	cfg->idle = IDLE_HYBRID;
	cfg->peer_auth = true; /* insecure only by explicit `peer_auth = off` */
	cfg->client_auth = true; /* likewise `client_auth = off` */
	cfg->session_ttl_max_ms = 300000;
	cfg->identity_sessions_max = 64;
	cfg->batch_max = 64;
	cfg->batch_delay_us = 50;
	/* 20 ms ticks: heartbeats every 40 ms, elections after 200..400 ms,
	 * and an idle TICK command every 100 ms. Each wake-up of an idle node
	 * costs the dataplane's spin before it sleeps again, so fewer timers
	 * is what lets three nodes idle on two cores (measured in
	 * docs/OPERATIONS.md). */
	cfg->tick_ms = 20;
	cfg->election_ticks = 10;
	cfg->heartbeat_ticks = 2;
	cfg->time_tick_ms = 100;
	/* A snapshot every 8192 entries, not 2048: each one copies and writes
	 * the whole state (it forked then), and at 2048 they took a third of
	 * the nodes' CPU at 64 clients (docs/PERFORMANCE.md, "Snapshot frequency").
	 * threshold + trailing must fit in half the window: 32768 slots,
	 * 40 MiB of log. */
	cfg->log_window = 32768;
	cfg->snapshot_threshold = 8192;
	cfg->snapshot_trailing = 512;
	cfg->snapshots_kept = 2;
	/* Snapshot files reach the disk at 100 MB/s at most, so that the WALs'
	 * fdatasyncs do not queue behind a whole file: with every node
	 * snapshotting a 12 MB state every 2 s, acquire p99 fell to about half
	 * (docs/STORAGE.md, "Snapshot write rate"). */
	cfg->snapshot_write_rate = 100;
	cfg->watches_max = 131072;
	cfg->watches_per_session_max = 64;
	cfg->watch_rate = 100000;
	cfg->watch_burst = 1000;
	cfg->segment_size = 64ull << 20;
	/* Few writes in flight: fdatasyncs of one file serialise in the
	 * kernel, so more in flight only adds queueing; appends arriving
	 * meanwhile join the open write (group commit). Measured in
	 * docs/OPERATIONS.md. */
	cfg->wal_writes_inflight = 2;
	/* The WAL's idle watermark (docs/STORAGE.md) costs a 4 KiB write and
	 * an fdatasync, and a node at light load goes idle after nearly every
	 * write: written every time, it doubled the fsyncs per command
	 * (docs/PERFORMANCE.md, "Cost per lock cycle"). */
	cfg->idle_watermark_ms = 100;
	/* One RWF_DSYNC write per group commit instead of a write and a
	 * linked fdatasync: the fdatasync runs on an io-wq worker, a thread
	 * to wake and a completion more per write. On net_af_packet it cost
	 * the three nodes 19-42 % more CPU per lock cycle, at no gain in
	 * cycles; with dsync part of that work moves to the kernel's
	 * direct-I/O workers (the cache flush), and the machine as a whole
	 * still spent about 15 % less on a quiet machine
	 * (docs/PERFORMANCE.md, "wal_sync = dsync"). */
	cfg->wal_sync = WAL_SYNC_DSYNC;
	/* New segments are written with zeros before use, so a sync does not
	 * also commit the file system's journal for the extents the write
	 * filled (docs/PERFORMANCE.md, "Segments written with zeros"). */
	cfg->segment_fill = WAL_FILL_ZEROS;
	locks_config_default(&cfg->locks);
	/* The protocol lets a client pipeline 32 requests (PROTOCOL.md,
	 * "Exactly once"); the reply cache must cover them. */
	cfg->locks.session_window = HASP_SESSION_INFLIGHT_MAX;
	cfg->locks.sessions_max = 4096;
	/* Debug builds only: the walk over full-size tables takes about 4 ms,
	 * which after every command made a debug node CPU-bound at a few
	 * hundred commands a second (its loop late, elections churning in
	 * the cluster tests). Every 256th command keeps it under 20 us a
	 * command; the simulators check every command. */
	cfg->locks.invariants_every = 256;
}

static bool parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	if (text == NULL || *text == '\0' || *text == '-')
		return false;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 0);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

static int set_u32(const char *key, const char *value, uint32_t min, uint32_t max, uint32_t *out,
		   char *err, size_t err_size)
{
	uint64_t v;
	if (!parse_u64(value, min, max, &v))
		return fail(err, err_size, "%s: '%s' is not a number in %u..%u", key, value, min, max);
	*out = (uint32_t)v;
	return 0;
}

static int parse_ip_prefix(const char *text, uint32_t *ip, uint8_t *prefix_len)
{
	char buf[32];
	const char *slash = strchr(text, '/');
	size_t n = slash ? (size_t)(slash - text) : strlen(text);
	uint64_t len = 24;

	if (n >= sizeof(buf))
		return -HASP_EINVAL;
	memcpy(buf, text, n);
	buf[n] = '\0';
	if (slash != NULL && !parse_u64(slash + 1, 1, 32, &len))
		return -HASP_EINVAL;
	if (ipv4_addr_parse(buf, ip) != 0)
		return -HASP_EINVAL;
	*prefix_len = (uint8_t)len;
	return 0;
}

/* member = id,ip,peer_port,client_port[,public_key] */
static int set_member(struct node_config *cfg, const char *value, char *err, size_t err_size)
{
	char buf[192];
	char *fields[5];
	uint32_t n = 0;
	uint64_t id, pp, cp;
	uint32_t ip;

	if (strlen(value) >= sizeof(buf))
		return fail(err, err_size, "member: '%s' is too long", value);
	strcpy(buf, value);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n == 5)
			return fail(err, err_size, "member: '%s' has more than id,ip,peer_port,client_port,public_key",
				    value);
		while (*tok == ' ')
			tok++;
		fields[n++] = tok;
	}
	if (n < 4)
		return fail(err, err_size, "member: '%s' is not id,ip,peer_port,client_port,public_key", value);
	if (!parse_u64(fields[0], 1, UINT32_MAX, &id))
		return fail(err, err_size, "member: id '%s' is not a number in 1..%u", fields[0], UINT32_MAX);
	if (ipv4_addr_parse(fields[1], &ip) != 0)
		return fail(err, err_size, "member: '%s' is not an IPv4 address", fields[1]);
	if (!parse_u64(fields[2], 1, 65535, &pp) || !parse_u64(fields[3], 1, 65535, &cp))
		return fail(err, err_size, "member: ports '%s,%s' must be 1..65535", fields[2], fields[3]);
	if (pp == cp)
		return fail(err, err_size, "member: peer_port and client_port of node %llu are both %llu",
			    (unsigned long long)id, (unsigned long long)pp);
	for (uint32_t i = 0; i < cfg->member_count; i++)
		if (cfg->members[i].id == id)
			return fail(err, err_size, "member: node id %llu listed twice", (unsigned long long)id);
	if (cfg->member_count == NODE_MEMBERS_MAX)
		return fail(err, err_size, "member: more than %u members", NODE_MEMBERS_MAX);
	struct node_member m = { .id = (uint32_t)id, .ip = ip, .peer_port = (uint16_t)pp, .client_port = (uint16_t)cp };
	if (n == 5) {
		char *end = fields[4] + strlen(fields[4]);
		while (end > fields[4] && end[-1] == ' ')
			*--end = '\0';
		if (auth_public_parse(fields[4], m.pub) != 0)
			return fail(err, err_size,
				    "member: node %llu's public key is not 64 hex digits of a usable key "
				    "(hasp-keygen --public KEYFILE prints one)",
				    (unsigned long long)id);
		for (uint32_t i = 0; i < cfg->member_count; i++)
			if (cfg->members[i].has_pub && memcmp(cfg->members[i].pub, m.pub, AUTH_PUBLIC_SIZE) == 0)
				return fail(err, err_size, "member: nodes %u and %llu have the same public key",
					    cfg->members[i].id, (unsigned long long)id);
		m.has_pub = true;
	}
	cfg->members[cfg->member_count++] = m;
	return 0;
}

static int set_eal(struct node_config *cfg, const char *value, char *err, size_t err_size)
{
	if (strlen(value) >= sizeof(cfg->eal_text))
		return fail(err, err_size, "eal: longer than %zu bytes", sizeof(cfg->eal_text) - 1);
	strcpy(cfg->eal_text, value);
	cfg->eal_argc = 1;
	cfg->eal_argv[0] = "haspd";
	for (char *save = NULL, *tok = strtok_r(cfg->eal_text, " \t", &save); tok != NULL;
	     tok = strtok_r(NULL, " \t", &save)) {
		if (cfg->eal_argc == (int)NODE_EAL_ARGS_MAX)
			return fail(err, err_size, "eal: more than %u arguments", NODE_EAL_ARGS_MAX);
		cfg->eal_argv[cfg->eal_argc++] = tok;
	}
	cfg->eal_argv[cfg->eal_argc] = NULL;
	return 0;
}

static int set_path(const char *key, const char *value, char *out, char *err, size_t err_size)
{
	if (strlen(value) >= NODE_PATH_SIZE)
		return fail(err, err_size, "%s: path longer than %u bytes", key, NODE_PATH_SIZE - 1);
	strcpy(out, value);
	return 0;
}

#define U32_KEY(name, field, min, max) { name, offsetof(struct node_config, field), min, max }

struct u32_key {
	const char *name;
	size_t offset;
	uint32_t min, max;
};

static const struct u32_key u32_keys[] = {
	U32_KEY("node_id", node_id, 1, UINT32_MAX),
	U32_KEY("batch_max", batch_max, 1, 1024),
	U32_KEY("batch_delay_us", batch_delay_us, 0, 100000),
	U32_KEY("tick_ms", tick_ms, 1, 1000),
	U32_KEY("election_ticks", election_ticks, 3, 1000),
	U32_KEY("heartbeat_ticks", heartbeat_ticks, 1, 500),
	U32_KEY("time_tick_ms", time_tick_ms, 1, 60000),
	U32_KEY("log_window", log_window, 64, 1u << 20),
	U32_KEY("snapshot_threshold", snapshot_threshold, 1, 1u << 19),
	U32_KEY("snapshot_trailing", snapshot_trailing, 0, 1u << 19),
	U32_KEY("snapshots_kept", snapshots_kept, 1, SNAPSHOT_KEEP_MAX),
	U32_KEY("snapshot_write_rate", snapshot_write_rate, 0, 100000),
	U32_KEY("wal_writes_inflight", wal_writes_inflight, 1, 64),
	U32_KEY("idle_watermark_ms", idle_watermark_ms, 0, 60000),
	U32_KEY("watches_max", watches_max, 1, 1u << 20),
	U32_KEY("watches_per_session_max", watches_per_session_max, 1, 1u << 20),
	U32_KEY("watch_rate", watch_rate, 1, 100000000),
	U32_KEY("watch_burst", watch_burst, 1, 1000000),
	U32_KEY("idle_spin", idle_spin, 0, 1000000),
	U32_KEY("locks_max", locks.locks_max, 1, 1u << 26),
	U32_KEY("leases_max", locks.leases_max, 1, 1u << 26),
	U32_KEY("sessions_max", locks.sessions_max, 1, 1u << 24),
	U32_KEY("waiters_max", locks.waiters_max, 1, 1u << 26),
	U32_KEY("kv_entries_max", locks.kv_entries_max, 1, 1u << 26),
	U32_KEY("kv_bytes_max", locks.kv_bytes_max, 1, 1u << 31),
	U32_KEY("lock_name_bytes_max", locks.lock_name_bytes_max, 1, 1u << 31),
	U32_KEY("locks_per_lease_max", locks.locks_per_lease_max, 1, 1u << 20),
	U32_KEY("keys_per_lease_max", locks.keys_per_lease_max, 1, 1u << 20),
	U32_KEY("locks_per_session_max", locks.locks_per_session_max, 1, 1u << 20),
	U32_KEY("session_window", locks.session_window, 1, 1024),
	U32_KEY("session_ttl_max_ms", session_ttl_max_ms, HASP_TTL_MS_MIN, HASP_TTL_MS_MAX),
	U32_KEY("identity_sessions_max", identity_sessions_max, 1, 65535),
};

int node_config_set(struct node_config *cfg, const char *key, const char *value, char *err,
		    size_t err_size)
{
	char k[64];
	size_t n = strlen(key);

	if (n == 0 || n >= sizeof(k))
		return fail(err, err_size, "unknown key '%s'", key);
	for (size_t i = 0; i <= n; i++)
		k[i] = key[i] == '-' ? '_' : key[i];
	if (value == NULL)
		return fail(err, err_size, "%s: missing value", k);

	for (size_t i = 0; i < sizeof(u32_keys) / sizeof(u32_keys[0]); i++)
		if (strcmp(k, u32_keys[i].name) == 0)
			return set_u32(k, value, u32_keys[i].min, u32_keys[i].max,
				       (uint32_t *)((char *)cfg + u32_keys[i].offset), err, err_size);
	if (strcmp(k, "cluster_id") == 0) {
		if (!parse_u64(value, 1, UINT64_MAX, &cfg->cluster_id))
			return fail(err, err_size, "cluster_id: '%s' is not a non-zero 64-bit number", value);
		return 0;
	}
	if (strcmp(k, "member") == 0)
		return set_member(cfg, value, err, err_size);
	if (strcmp(k, "ip") == 0) {
		if (parse_ip_prefix(value, &cfg->ip, &cfg->prefix_len) != 0)
			return fail(err, err_size, "ip: '%s' is not A.B.C.D/LEN", value);
		return 0;
	}
	if (strcmp(k, "gateway") == 0) {
		if (ipv4_addr_parse(value, &cfg->gateway) != 0)
			return fail(err, err_size, "gateway: '%s' is not an IPv4 address", value);
		return 0;
	}
	if (strcmp(k, "mac") == 0) {
		struct eth_addr mac;
		if (eth_addr_parse(value, &mac) != 0 || (mac.bytes[0] & 1) != 0)
			return fail(err, err_size, "mac: '%s' is not a unicast MAC aa:bb:cc:dd:ee:ff", value);
		memcpy(cfg->mac, mac.bytes, 6);
		return 0;
	}
	if (strcmp(k, "idle") == 0) {
		if (strcmp(value, "poll") == 0)
			cfg->idle = IDLE_POLL;
		else if (strcmp(value, "hybrid") == 0)
			cfg->idle = IDLE_HYBRID;
		else if (strcmp(value, "sleep") == 0)
			cfg->idle = IDLE_SLEEP;
		else
			return fail(err, err_size, "idle: '%s' is not poll, hybrid or sleep", value);
		return 0;
	}
	if (strcmp(k, "port") == 0) {
		if (strlen(value) >= sizeof(cfg->port_name))
			return fail(err, err_size, "port: name too long");
		strcpy(cfg->port_name, value);
		return 0;
	}
	if (strcmp(k, "wal_sync") == 0) {
		if (strcmp(value, "linked") == 0)
			cfg->wal_sync = WAL_SYNC_LINKED;
		else if (strcmp(value, "dsync") == 0)
			cfg->wal_sync = WAL_SYNC_DSYNC;
		else if (strcmp(value, "drain") == 0)
			cfg->wal_sync = WAL_SYNC_DRAIN;
		else
			return fail(err, err_size, "wal_sync: '%s' is not linked, dsync or drain", value);
		return 0;
	}
	if (strcmp(k, "segment_fill") == 0) {
		if (strcmp(value, "zeros") == 0)
			cfg->segment_fill = WAL_FILL_ZEROS;
		else if (strcmp(value, "allocate") == 0)
			cfg->segment_fill = WAL_FILL_ALLOCATE;
		else
			return fail(err, err_size, "segment_fill: '%s' is not zeros or allocate", value);
		return 0;
	}
	if (strcmp(k, "data_dir") == 0)
		return set_path(k, value, cfg->data_dir, err, err_size);
	if (strcmp(k, "stats_file") == 0)
		return set_path(k, value, cfg->stats_file, err, err_size);
	if (strcmp(k, "admin_socket") == 0)
		return set_path(k, value, cfg->admin_socket, err, err_size);
	if (strcmp(k, "admin_addr") == 0) {
		uint32_t ip;
		const char *colon = strrchr(value, ':');
		char host[32];
		if (colon == NULL || (size_t)(colon - value) >= sizeof(host) ||
		    strlen(value) >= sizeof(cfg->admin_addr))
			return fail(err, err_size, "admin_addr: '%s' is not A.B.C.D:PORT", value);
		memcpy(host, value, (size_t)(colon - value));
		host[colon - value] = '\0';
		char *end;
		unsigned long port = strtoul(colon + 1, &end, 10);
		if (ipv4_addr_parse(host, &ip) != 0 || *end != '\0' || port == 0 || port > 65535)
			return fail(err, err_size, "admin_addr: '%s' is not A.B.C.D:PORT", value);
		strcpy(cfg->admin_addr, value);
		return 0;
	}
	if (strcmp(k, "bootstrap") == 0) {
		if (strcmp(value, "1") != 0 && strcmp(value, "0") != 0 && strcmp(value, "true") != 0 &&
		    strcmp(value, "false") != 0)
			return fail(err, err_size, "bootstrap: '%s' is not 0 or 1", value);
		cfg->bootstrap = value[0] == '1' || value[0] == 't';
		return 0;
	}
	if (strcmp(k, "join") == 0) {
		if (strcmp(value, "1") != 0 && strcmp(value, "0") != 0 && strcmp(value, "true") != 0 &&
		    strcmp(value, "false") != 0)
			return fail(err, err_size, "join: '%s' is not 0 or 1", value);
		cfg->join = value[0] == '1' || value[0] == 't';
		return 0;
	}
	if (strcmp(k, "peer_auth") == 0) {
		if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
			return fail(err, err_size, "peer_auth: '%s' is not on or off", value);
		cfg->peer_auth = value[1] == 'n';
		return 0;
	}
	if (strcmp(k, "node_key_file") == 0)
		return set_path(k, value, cfg->node_key_file, err, err_size);
	if (strcmp(k, "peer_key_file") == 0)
		/* The shared cluster key let any member speak as any other;
		 * refused rather than kept (docs/SECURITY.md 3.5, migration). */
		return fail(err, err_size,
			    "peer_key_file: the shared cluster key is no longer used; give this node "
			    "node_key_file (hasp-keygen FILE) and every member line its public key "
			    "(hasp-keygen --public FILE), docs/SECURITY.md 3.5");
	if (strcmp(k, "admin_key_file") == 0)
		return set_path(k, value, cfg->admin_key_file, err, err_size);
	if (strcmp(k, "client_auth") == 0) {
		if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
			return fail(err, err_size, "client_auth: '%s' is not on or off", value);
		cfg->client_auth = value[1] == 'n';
		return 0;
	}
	if (strcmp(k, "client_identities_file") == 0)
		return set_path(k, value, cfg->client_identities_file, err, err_size);
	if (strcmp(k, "eal") == 0)
		return set_eal(cfg, value, err, err_size);
	if (strcmp(k, "segment_size") == 0) {
		if (!parse_u64(value, 1u << 16, 1ull << 34, &cfg->segment_size) ||
		    cfg->segment_size % 4096 != 0)
			return fail(err, err_size, "segment_size: '%s' is not a multiple of 4096 in 64 KiB..16 GiB",
				    value);
		return 0;
	}
	return fail(err, err_size, "unknown key '%s'", k);
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return s;
}

static int load_file(struct node_config *cfg, const char *path, char *err, size_t err_size)
{
	char line[1536];
	unsigned line_no = 0;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return fail(err, err_size, "config: cannot open '%s': %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f) != NULL) {
		line_no++;
		char *s = trim(line);
		if (*s == '#' || *s == '\0')
			continue;
		char *eq = strchr(s, '=');
		if (eq == NULL) {
			fclose(f);
			return fail(err, err_size, "config: %s:%u: expected key = value", path, line_no);
		}
		*eq = '\0';
		char msg[256];
		int rc = node_config_set(cfg, trim(s), trim(eq + 1), msg, sizeof(msg));
		if (rc != 0) {
			fclose(f);
			return fail(err, err_size, "%s (%s:%u)", msg, path, line_no);
		}
	}
	fclose(f);
	return 0;
}

const struct node_member *node_config_member(const struct node_config *cfg, uint32_t id)
{
	for (uint32_t i = 0; i < cfg->member_count; i++)
		if (cfg->members[i].id == id)
			return &cfg->members[i];
	return NULL;
}

const struct node_member *node_config_member_by_ip(const struct node_config *cfg, uint32_t ip)
{
	for (uint32_t i = 0; i < cfg->member_count; i++)
		if (cfg->members[i].ip == ip)
			return &cfg->members[i];
	return NULL;
}

const struct node_member *node_config_self(const struct node_config *cfg)
{
	return node_config_member(cfg, cfg->node_id);
}

int node_config_check(const struct node_config *cfg, char *err, size_t err_size)
{
	if (cfg->node_id == 0)
		return fail(err, err_size, "node_id: missing (a non-zero number)");
	if (cfg->cluster_id == 0)
		return fail(err, err_size, "cluster_id: missing (a non-zero number)");
	if (cfg->member_count == 0)
		return fail(err, err_size, "member: missing (one line per node: id,ip,peer_port,client_port)");
	const struct node_member *self = node_config_self(cfg);
	if (self == NULL)
		return fail(err, err_size, "member: node_id %u is not in the member list", cfg->node_id);
	if (cfg->ip == 0)
		return fail(err, err_size, "ip: missing (this node's A.B.C.D/LEN)");
	if (self->ip != cfg->ip)
		return fail(err, err_size, "ip: differs from this node's member entry");
	static const uint8_t zero_mac[6];
	if (memcmp(cfg->mac, zero_mac, 6) == 0)
		return fail(err, err_size, "mac: missing (this node's own MAC, e.g. 02:77:00:00:00:01)");
	if (cfg->data_dir[0] == '\0')
		return fail(err, err_size, "data_dir: missing");
	if (cfg->eal_argc < 2)
		return fail(err, err_size, "eal: missing (the DPDK EAL arguments, or give them after --)");
	if (cfg->peer_auth && !cfg->node_key_loaded)
		return fail(err, err_size,
			    "node_key_file: missing (this node's secret key, made by hasp-keygen; "
			    "or peer_auth = off for an insecure test cluster)");
	for (uint32_t i = 0; cfg->peer_auth && i < cfg->member_count; i++)
		if (!cfg->members[i].has_pub)
			return fail(err, err_size,
				    "member: node %u has no public key (the fifth field, "
				    "id,ip,peer_port,client_port,public_key; needed with peer_auth = on)",
				    cfg->members[i].id);
	if (cfg->peer_auth && memcmp(self->pub, cfg->node_pub, AUTH_PUBLIC_SIZE) != 0)
		return fail(err, err_size,
			    "member: node %u's public key is not node_key_file's (hasp-keygen --public "
			    "FILE prints it)",
			    cfg->node_id);
	if (cfg->client_auth && cfg->client_identities_file[0] == '\0')
		return fail(err, err_size,
			    "client_identities_file: missing (the clients' identities and keys, "
			    "made by hasp-keygen --identity; or client_auth = off for an insecure "
			    "test cluster)");
	for (uint32_t i = 0; i < cfg->member_count; i++)
		for (uint32_t j = i + 1; j < cfg->member_count; j++)
			if (cfg->members[i].ip == cfg->members[j].ip)
				return fail(err, err_size, "member: nodes %u and %u share an IP address",
					    cfg->members[i].id, cfg->members[j].id);
	if (cfg->heartbeat_ticks >= cfg->election_ticks)
		return fail(err, err_size, "heartbeat_ticks: must be below election_ticks (%u)",
			    cfg->election_ticks);
	if ((uint64_t)cfg->snapshot_threshold + cfg->snapshot_trailing > cfg->log_window / 2)
		return fail(err, err_size,
			    "snapshot_threshold: threshold + snapshot_trailing must be <= log_window / 2 (%u)",
			    cfg->log_window / 2);
	if (cfg->locks.session_window < HASP_SESSION_INFLIGHT_MAX)
		return fail(err, err_size, "session_window: must be >= %u (the protocol's in-flight window)",
			    HASP_SESSION_INFLIGHT_MAX);
	if (locks_config_check(&cfg->locks) != 0)
		return fail(err, err_size, "locks_max: the state machine capacities are inconsistent");
	return 0;
}

static const char usage_text[] =
	"usage: haspd [--config FILE] [--KEY VALUE ...] [-- EAL arguments]\n"
	"       haspd --help | --version\n"
	"  keys (file: 'key = value'; flags: --key value): node_id, cluster_id,\n"
	"  member (id,ip,peer_port,client_port,public_key; repeat), ip (A.B.C.D/LEN), mac,\n"
	"  gateway, port, data_dir, stats_file, admin_socket, admin_addr, admin_key_file,\n"
	"  join, bootstrap,\n"
	"  peer_auth (on|off), node_key_file, client_auth (on|off),\n"
	"  client_identities_file, session_ttl_max_ms, identity_sessions_max,\n"
	"  eal, idle (poll|hybrid|sleep),\n"
	"  idle_spin, batch_max, batch_delay_us, tick_ms, election_ticks, heartbeat_ticks,\n"
	"  time_tick_ms, log_window, snapshot_threshold, snapshot_trailing,\n"
	"  snapshots_kept, snapshot_write_rate, segment_size, wal_writes_inflight,\n"
	"  idle_watermark_ms, wal_sync, segment_fill (zeros|allocate),\n"
	"  watches_max, watches_per_session_max, watch_rate, watch_burst,\n"
	"  locks_max, leases_max, sessions_max, waiters_max, kv_entries_max,\n"
	"  kv_bytes_max, lock_name_bytes_max, locks_per_lease_max,\n"
	"  keys_per_lease_max, locks_per_session_max, session_window.\n"
	"  See docs/OPERATIONS.md. Exit: 0 stopped, 2 bad configuration,\n"
	"  3 unusable data dir, 4 runtime failure (dataplane or disk).\n";

/* Reads the key file named by config key `what` (owner-only, never
 * logged); 0 or -HASP_ECONFIG with a message naming the key and the rule. */
static int key_file_load(const char *what, const char *path, struct auth_key *key, char *err,
			 size_t err_size)
{
	if (auth_init() != 0)
		return fail(err, err_size, "%s: libsodium failed to initialise", what);
	int rc = auth_key_load(path, key);
	if (rc == -HASP_ECONFIG)
		return fail(err, err_size,
			    "%s: %s must be a regular file owned by this user, mode 0600 or 0400", what,
			    path);
	if (rc == -HASP_ESYS)
		return fail(err, err_size, "%s: cannot read '%s': %s", what, path, strerror(errno));
	if (rc != 0)
		return fail(err, err_size, "%s: %s: %s (want 64 hex digits and a newline)", what, path,
			    hasp_strerror(rc));
	return 0;
}

int node_config_load(struct node_config *cfg, int argc, char **argv, char *err, size_t err_size)
{
	int sep = argc;
	int rc;

	HASP_ASSERT(cfg != NULL && argv != NULL);
	node_config_default(cfg);
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			sep = i;
			break;
		}
	/* The file first, so that flags override it wherever they appear. */
	for (int i = 1; i < sep; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			snprintf(err, err_size, "%s", usage_text);
			return 1;
		}
		if (strncmp(argv[i], "--config", 8) == 0 && (argv[i][8] == '\0' || argv[i][8] == '=')) {
			const char *path = argv[i][8] == '=' ? argv[i] + 9 : (i + 1 < sep ? argv[i + 1] : NULL);
			if (path == NULL)
				return fail(err, err_size, "config: missing file name");
			if ((rc = load_file(cfg, path, err, err_size)) != 0)
				return rc;
		}
	}
	for (int i = 1; i < sep; i++) {
		const char *a = argv[i];
		if (strncmp(a, "--", 2) != 0)
			return fail(err, err_size, "argument '%s': expected --key value", a);
		a += 2;
		char key[64];
		const char *eq = strchr(a, '=');
		const char *value;
		size_t n = eq ? (size_t)(eq - a) : strlen(a);
		if (n >= sizeof(key))
			return fail(err, err_size, "argument '%s': key too long", argv[i]);
		memcpy(key, a, n);
		key[n] = '\0';
		if (eq != NULL) {
			value = eq + 1;
		} else {
			if (i + 1 >= sep)
				return fail(err, err_size, "%s: missing value", key);
			value = argv[++i];
		}
		if (strcmp(key, "config") == 0)
			continue;
		if ((rc = node_config_set(cfg, key, value, err, err_size)) != 0)
			return rc;
	}
	if (sep < argc) {
		cfg->eal_argc = 1;
		cfg->eal_argv[0] = argv[0];
		for (int i = sep + 1; i < argc; i++) {
			if (cfg->eal_argc == (int)NODE_EAL_ARGS_MAX)
				return fail(err, err_size, "eal: more than %u arguments", NODE_EAL_ARGS_MAX);
			cfg->eal_argv[cfg->eal_argc++] = argv[i];
		}
		cfg->eal_argv[cfg->eal_argc] = NULL;
	}
	if (cfg->peer_auth && cfg->node_key_file[0] != '\0') {
		if (auth_init() != 0)
			return fail(err, err_size, "node_key_file: libsodium failed to initialise");
		if ((rc = key_file_load("node_key_file", cfg->node_key_file, &cfg->node_key, err,
					err_size)) != 0)
			return rc;
		if (auth_public_key(&cfg->node_key, cfg->node_pub) != 0) {
			auth_key_wipe(&cfg->node_key);
			return fail(err, err_size, "node_key_file: %s is not a usable X25519 secret key",
				    cfg->node_key_file);
		}
		cfg->node_key_loaded = true;
	}
	if (cfg->admin_key_file[0] != '\0') {
		if ((rc = key_file_load("admin_key_file", cfg->admin_key_file, &cfg->admin_key, err,
					err_size)) != 0)
			return rc;
		cfg->admin_key_loaded = true;
	}
	return node_config_check(cfg, err, err_size);
}
