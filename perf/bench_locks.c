/*
 * bench_locks: memory per lease and apply throughput of the lock state
 * machine on one core (not a test; never gates anything).
 *
 * Loads N leases (default 1M) each holding one lock named "lock/%07u",
 * through the real apply path (LEASE_GRANT + ACQUIRE per lease, spread over
 * 1000 client sessions), then times a keepalive pass over every lease, a
 * release pass over every lock, a revoke pass over every lease, and a
 * private-TTL acquire+release mix.
 * Also times one snapshot serialization of the loaded state
 * (locks_snapshot_size + locks_snapshot_write), and the copy a snapshot
 * starts with (locks_copy): into fresh memory, into a used copy, and into
 * it again after one command per session (the reply records those wrote).
 * Reports bytes per lease two ways: the tables' sizing sum divided by the
 * lease count, and the process RSS growth divided by the lease count.
 * The usual estimate for a lock service is 200 bytes per lease.
 *
 * Built from the locks/ sources without the O(n) debug invariant checks.
 *   usage: bench_locks [lease_count]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_locks_commit.h"
#include "common/clock.h"
#include "locks/locks.h"
#include "locks/snapshot.h"

#define SESSIONS 1000u

static struct locks sm;
static struct locks_result res;
static uint64_t apply_index;
static uint64_t seqs[SESSIONS];
static uint64_t session_ids[SESSIONS];

static uint64_t rss_bytes(void)
{
	unsigned long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f == NULL)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return (uint64_t)resident * 4096u;
}

static const struct locks_reply *apply(struct locks_cmd *cmd)
{
	cmd->term = 1;
	cmd->now_ms = 1000 + apply_index / 1000; /* the leader's clock: 1 ms per 1000 commands */
	locks_apply(&sm, ++apply_index, cmd, &res);
	return &res.reply;
}

static struct locks_cmd client(uint8_t op, uint32_t s)
{
	struct locks_cmd c = { .op = op, .session_id = session_ids[s], .seq = ++seqs[s] };
	return c;
}

static double rate(uint64_t count, uint64_t ns)
{
	return ns > 0 ? (double)count * 1e9 / (double)ns : 0.0;
}

int main(int argc, char **argv)
{
	uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000000u;
	struct locks_config cfg;
	char name[32];
	uint64_t *lease_ids, *tokens;

	if (n < SESSIONS || n > 8000000u) {
		fprintf(stderr, "lease_count must be %u..8000000\n", SESSIONS);
		return 2;
	}
	lease_ids = malloc(sizeof(uint64_t) * n);
	tokens = malloc(sizeof(uint64_t) * n);
	if (lease_ids == NULL || tokens == NULL)
		return 1;
	locks_config_default(&cfg);
	cfg.locks_max = n;
	cfg.leases_max = n;
	cfg.sessions_max = SESSIONS;
	cfg.waiters_max = 1024;
	cfg.kv_entries_max = 1024;
	cfg.kv_bytes_max = 64 * 1024;
	cfg.lock_name_bytes_max = n * 12u; /* "lock/%07u" is 12 bytes */
	cfg.locks_per_lease_max = 16;
	cfg.locks_per_session_max = 2 * (n / SESSIONS) + 16;

	uint64_t rss0 = rss_bytes();
	if (locks_init(&sm, &cfg) != 0) {
		fprintf(stderr, "locks_init failed\n");
		return 1;
	}
	res.event_count_max = locks_events_max(&cfg);
	res.events = calloc(res.event_count_max, sizeof(*res.events));
	if (res.events == NULL)
		return 1;

	for (uint32_t s = 0; s < SESSIONS; s++) {
		struct locks_cmd c = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 3600000 };
		session_ids[s] = apply(&c)->id;
	}

	/* Load: one shared lease per lock, like an etcd client per resource. */
	uint64_t t0 = clock_monotonic_ns();
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = i % SESSIONS;
		struct locks_cmd g = client(LOCKS_OP_LEASE_GRANT, s);
		g.ttl_ms = 60000;
		const struct locks_reply *r = apply(&g);
		if (r->status != HASP_STATUS_OK)
			return fprintf(stderr, "grant %u: %s\n", i, hasp_status_name(r->status)), 1;
		lease_ids[i] = r->id;
		struct locks_cmd a = client(LOCKS_OP_ACQUIRE, s);
		int len = snprintf(name, sizeof(name), "lock/%07u", i);
		a.name = (const uint8_t *)name;
		a.name_len = (uint16_t)len;
		a.lease_id = lease_ids[i];
		r = apply(&a);
		if (r->status != HASP_STATUS_GRANTED)
			return fprintf(stderr, "acquire %u: %s\n", i, hasp_status_name(r->status)), 1;
		tokens[i] = r->token;
	}
	uint64_t t_load = clock_monotonic_ns() - t0;
	uint64_t rss1 = rss_bytes();
	uint64_t table_bytes = locks_memory_size(&cfg);

	/* The copy the node's lcore makes for a snapshot (locks_copy), twice:
	 * into fresh memory (page faults) and into the same copy again (the
	 * node reuses it). Then serialization, which the writer thread does
	 * from that copy. */
	struct locks copy;
	if (locks_init(&copy, &cfg) != 0)
		return fprintf(stderr, "init of the copy failed\n"), 1;
	t0 = clock_monotonic_ns();
	locks_copy(&copy, &sm);
	uint64_t t_copy_first = clock_monotonic_ns() - t0;
	locks_deinit(&copy);
	if (locks_init(&copy, &cfg) != 0)
		return fprintf(stderr, "init of the copy failed\n"), 1;
	t0 = clock_monotonic_ns();
	locks_prefault(&copy);
	uint64_t t_prefault = clock_monotonic_ns() - t0;
	t0 = clock_monotonic_ns();
	locks_copy(&copy, &sm);
	uint64_t t_copy_prefaulted = clock_monotonic_ns() - t0;
	t0 = clock_monotonic_ns();
	uint64_t replies_unchanged = locks_copy(&copy, &sm);
	uint64_t t_copy = clock_monotonic_ns() - t0;
	/* One command per session, then a copy into the same copy: it carries
	 * those commands' reply records, not every session's window. */
	for (uint32_t s = 0; s < SESSIONS; s++) {
		struct locks_cmd k = client(LOCKS_OP_LEASE_KEEPALIVE, s);
		k.lease_id = lease_ids[s];
		if (apply(&k)->status != HASP_STATUS_OK)
			return fprintf(stderr, "keepalive %u failed\n", s), 1;
	}
	t0 = clock_monotonic_ns();
	uint64_t replies_after = locks_copy(&copy, &sm);
	uint64_t t_copy_after = clock_monotonic_ns() - t0;
	locks_deinit(&copy);
	t0 = clock_monotonic_ns();
	size_t snap_size = locks_snapshot_size(&sm), snap_written = 0;
	uint8_t *snap = malloc(snap_size);
	if (snap == NULL || locks_snapshot_write(&sm, snap, snap_size, &snap_written) != 0)
		return fprintf(stderr, "snapshot write failed\n"), 1;
	uint64_t t_snap = clock_monotonic_ns() - t0;
	free(snap);

	/* Keepalive every lease (each moves its deadline: a heap sift). */
	t0 = clock_monotonic_ns();
	for (uint32_t i = 0; i < n; i++) {
		struct locks_cmd k = client(LOCKS_OP_LEASE_KEEPALIVE, i % SESSIONS);
		k.lease_id = lease_ids[i];
		if (apply(&k)->status != HASP_STATUS_OK)
			return fprintf(stderr, "keepalive %u failed\n", i), 1;
	}
	uint64_t t_keep = clock_monotonic_ns() - t0;

	/* Release every lock (token-checked, one RELEASED event each). */
	t0 = clock_monotonic_ns();
	for (uint32_t i = 0; i < n; i++) {
		struct locks_cmd r = client(LOCKS_OP_RELEASE, i % SESSIONS);
		int len = snprintf(name, sizeof(name), "lock/%07u", i);
		r.name = (const uint8_t *)name;
		r.name_len = (uint16_t)len;
		r.token = tokens[i];
		if (apply(&r)->status != HASP_STATUS_OK)
			return fprintf(stderr, "release %u failed\n", i), 1;
	}
	uint64_t t_release = clock_monotonic_ns() - t0;

	/* Revoke every (now empty) lease, freeing room for private ones. */
	t0 = clock_monotonic_ns();
	for (uint32_t i = 0; i < n; i++) {
		struct locks_cmd v = client(LOCKS_OP_LEASE_REVOKE, i % SESSIONS);
		v.lease_id = lease_ids[i];
		if (apply(&v)->status != HASP_STATUS_OK)
			return fprintf(stderr, "revoke %u failed\n", i), 1;
	}
	uint64_t t_revoke = clock_monotonic_ns() - t0;

	/* A private-TTL mix: acquire with its own TTL, then release. */
	uint32_t mix = n / 2;
	t0 = clock_monotonic_ns();
	for (uint32_t i = 0; i < mix; i++) {
		uint32_t s = i % SESSIONS;
		struct locks_cmd a = client(LOCKS_OP_ACQUIRE, s);
		int len = snprintf(name, sizeof(name), "lock/%07u", i);
		a.name = (const uint8_t *)name;
		a.name_len = (uint16_t)len;
		a.ttl_ms = 10000;
		const struct locks_reply *r = apply(&a);
		if (r->status != HASP_STATUS_GRANTED)
			return fprintf(stderr, "ttl acquire %u failed\n", i), 1;
		struct locks_cmd rel = client(LOCKS_OP_RELEASE, s);
		rel.name = a.name;
		rel.name_len = a.name_len;
		rel.token = r->token;
		if (apply(&rel)->status != HASP_STATUS_OK)
			return fprintf(stderr, "ttl release %u failed\n", i), 1;
	}
	uint64_t t_mix = clock_monotonic_ns() - t0;

	printf("bench_locks commit=%s leases=%u sessions=%u (each lease holds one lock \"lock/%%07u\")\n",
	       BENCH_COMMIT, n, SESSIONS);
	printf("memory: tables %.1f MiB = %.1f bytes/lease (sizing sum, locks_memory_size)\n",
	       (double)table_bytes / 1048576.0, (double)table_bytes / n);
	printf("memory: RSS delta %.1f MiB = %.1f bytes/lease (init + load, /proc/self/statm)\n",
	       (double)(rss1 - rss0) / 1048576.0, (double)(rss1 - rss0) / n);
	printf("memory: usual estimate 200 bytes/lease; ratio %.2f\n", (double)table_bytes / n / 200.0);
	printf("snapshot: serialize %u leases+locks, %u sessions: %.1f ms, %zu bytes\n", n, SESSIONS,
	       (double)t_snap / 1e6, snap_written);
	printf("snapshot: copy (locks_copy) into fresh memory %.2f ms, prefaulted (locks_prefault "
	       "%.2f ms first) %.2f ms, into a used copy %.2f ms (%llu reply records)\n",
	       (double)t_copy_first / 1e6, (double)t_prefault / 1e6, (double)t_copy_prefaulted / 1e6,
	       (double)t_copy / 1e6, (unsigned long long)replies_unchanged);
	printf("snapshot: copy after %u more commands %.2f ms (%llu reply records of %llu)\n",
	       SESSIONS, (double)t_copy_after / 1e6, (unsigned long long)replies_after,
	       (unsigned long long)SESSIONS * cfg.session_window);
	printf("apply: grant+acquire  %10.0f cmds/s (%u cmds)\n", rate(2ull * n, t_load), 2 * n);
	printf("apply: lease keepalive %10.0f cmds/s (%u cmds)\n", rate(n, t_keep), n);
	printf("apply: release        %10.0f cmds/s (%u cmds)\n", rate(n, t_release), n);
	printf("apply: lease revoke   %10.0f cmds/s (%u cmds)\n", rate(n, t_revoke), n);
	printf("apply: ttl acquire+release %6.0f cmds/s (%u cmds)\n", rate(2ull * mix, t_mix), 2 * mix);
	printf("arena compactions: names %llu\n", (unsigned long long)sm.lock_names.compaction_count);
	locks_deinit(&sm);
	free(res.events);
	free(tokens);
	free(lease_ids);
	return 0;
}
