/*
 * nodesim: the deterministic simulation of whole nodes and libhasp clients
 * over a range of seeds (docs/TESTING.md "Node simulation").
 *
 *   nodesim --seeds 200 [--seed-start 0] [--nodes 3|5|0] [--clients 3]
 *           [--run-ms 8000] [--history-dir DIR] [--twice] [--shrink] [--watch]
 *   nodesim --seed 1234 --verbose --history-dir DIR     replay one seed
 *
 * --nodes 0 (the default) alternates 3 and 5 nodes by seed. --twice runs
 * the first seed a second time and fails unless both histories are the
 * same bytes (determinism). --history-dir writes seed-<n>.jsonl for each
 * seed (tests/fault/checker.py reads them). --shrink lets renewals and
 * re-acquires by the holder shorten the TTL (see nodesim_clients.c);
 * --watch adds a client that watches both locks (the events property,
 * which only checker.py judges). A failing seed prints the seed, the
 * property, the command that replays it, and writes its history
 * (into --history-dir, or the current directory) for checker.py, which
 * names the operations. Exit status: 0 all passed, 1 a seed failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/assert.h"
#include "common/log.h"
#include "tests/nodesim/nodesim.h"

static struct nodesim_options current;

static void assert_handler(int result, const char *expr, const char *file, int line)
{
	if (result)
		return;
	fprintf(stderr, "hasp: assertion failed: %s (%s:%d)\n", expr, file, line);
	fprintf(stderr, "nodesim: seed=%llu nodes=%u\n", (unsigned long long)current.seed,
		current.nodes);
	fprintf(stderr, "replay: nodesim --seed %llu --nodes %u --clients %u --run-ms %u --verbose\n",
		(unsigned long long)current.seed, current.nodes, current.clients, current.run_ms);
	abort();
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* the program's own speed, not the simulation */
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	uint64_t seed_start = 0, seeds = 10;
	uint32_t nodes, clients, run_ms;
	bool verbose = false, twice = false, shrink = false, watch = false;
	const char *dir = NULL;
	char path[4096];

	uint64_t one_seed = UINT64_MAX, n_nodes = 0, n_clients = 3, n_run_ms = 8000;
	const struct {
		const char *name;
		uint64_t *value; /* a number option, or NULL */
		bool *flag;
	} opts[] = {
		{ "--seed", &one_seed, NULL },       { "--seeds", &seeds, NULL },
		{ "--seed-start", &seed_start, NULL }, { "--nodes", &n_nodes, NULL },
		{ "--clients", &n_clients, NULL },   { "--run-ms", &n_run_ms, NULL },
		{ "--twice", NULL, &twice },         { "--shrink", NULL, &shrink },
		{ "--watch", NULL, &watch },         { "--verbose", NULL, &verbose },
	};
	for (int i = 1; i < argc; i++) {
		size_t k = 0;
		while (k < sizeof(opts) / sizeof(opts[0]) && strcmp(argv[i], opts[k].name) != 0)
			k++;
		if (k < sizeof(opts) / sizeof(opts[0]) && opts[k].flag != NULL) {
			*opts[k].flag = true;
			continue;
		}
		char *end = NULL;
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (v != NULL && strcmp(argv[i], "--history-dir") == 0) {
			dir = v;
		} else if (v != NULL && k < sizeof(opts) / sizeof(opts[0]) &&
			   (*opts[k].value = strtoull(v, &end, 0), end != v && *end == '\0')) {
		} else {
			fprintf(stderr, "usage: nodesim [--seed S | --seeds N [--seed-start S]] "
					"[--nodes 3|5|0] [--clients N] [--run-ms MS] "
					"[--history-dir DIR] [--twice] [--shrink] [--watch] [--verbose]\n");
			return 2;
		}
		i++;
	}
	if (one_seed != UINT64_MAX) {
		seed_start = one_seed;
		seeds = 1;
	}
	if (n_nodes > 5 || n_clients >= NODESIM_CLIENTS_MAX || n_run_ms > 3600000) {
		fprintf(stderr, "nodesim: out of range\n");
		return 2;
	}
	nodes = (uint32_t)n_nodes;
	clients = (uint32_t)n_clients;
	run_ms = (uint32_t)n_run_ms;
	if ((nodes != 0 && nodes != 3 && nodes != 5) || clients < 1 || clients >= NODESIM_CLIENTS_MAX ||
	    run_ms < 1000 || seeds == 0) {
		fprintf(stderr, "nodesim: --nodes 3|5|0, --clients 1..%u, --run-ms >= 1000, --seeds >= 1\n",
			NODESIM_CLIENTS_MAX - 1);
		return 2;
	}
	hasp_assert_set_handler(assert_handler);
	/* The nodes' log lines carry the real clock and say what the
	 * history says: only errors, unless --verbose. */
	if (!verbose && log_set_level("all", LOG_LEVEL_ERROR) != 0)
		return 2;

	struct nodesim_result res, total;
	uint64_t failed = 0;
	double start = now_s();
	memset(&total, 0, sizeof(total));
	for (uint64_t s = seed_start; s < seed_start + seeds; s++) {
		current = (struct nodesim_options){
			.seed = s, .nodes = nodes ? nodes : (s % 2 ? 5 : 3), .clients = clients,
			.run_ms = run_ms, .verbose = verbose, .shrink = shrink,
			.watch = watch,
		};
		if (dir != NULL) {
			snprintf(path, sizeof(path), "%s/seed-%llu.jsonl", dir, (unsigned long long)s);
			current.history = path;
		}
		int rc = nodesim_run(&current, &res);
		if (rc == 0 && res.violations == 0 && twice && s == seed_start) {
			struct nodesim_result again;
			struct nodesim_options o = current;
			o.history = NULL;
			int rc2 = nodesim_run(&o, &again);
			if (rc2 != 0 || again.digest != res.digest || again.records != res.records) {
				fprintf(stderr, "nodesim: seed %llu is not deterministic: history digest "
						"%016llx (%llu records), then %016llx (%llu records)\n",
					(unsigned long long)s, (unsigned long long)res.digest,
					(unsigned long long)res.records, (unsigned long long)again.digest,
					(unsigned long long)again.records);
				failed++;
				continue;
			}
			printf("nodesim: seed %llu twice: the same history (digest %016llx, %llu records)\n",
			       (unsigned long long)s, (unsigned long long)res.digest,
			       (unsigned long long)res.records);
		}
		total.records += res.records;
		total.grants += res.grants;
		total.releases += res.releases;
		total.renews += res.renews;
		total.reads += res.reads;
		total.writes += res.writes;
		total.writes_refused += res.writes_refused;
		total.crashes += res.crashes;
		total.partitions += res.partitions;
		total.datagrams += res.datagrams;
		total.dropped += res.dropped;
		total.duplicated += res.duplicated;
		if (verbose)
			printf("nodesim: seed %llu nodes %u: %llu records, %llu grants, digest %016llx\n",
			       (unsigned long long)s, current.nodes, (unsigned long long)res.records,
			       (unsigned long long)res.grants, (unsigned long long)res.digest);
		if (rc != 0 || res.violations != 0) {
			failed++;
			fprintf(stderr, "nodesim: FAIL seed=%llu nodes=%u: %s (%u violations)\n",
				(unsigned long long)s, current.nodes, res.first_violation, res.violations);
			if (dir == NULL) {
				snprintf(path, sizeof(path), "nodesim-seed-%llu.jsonl", (unsigned long long)s);
				current.history = path;
				struct nodesim_result again;
				(void)nodesim_run(&current, &again);
			}
			fprintf(stderr, "  history: %s (tests/fault/checker.py %s names the operations)\n",
				current.history, current.history);
			fprintf(stderr, "  replay: nodesim --seed %llu --nodes %u --clients %u --run-ms %u "
					"--verbose\n",
				(unsigned long long)s, current.nodes, clients, run_ms);
		}
	}
	double secs = now_s() - start;
	printf("nodesim: %llu seeds (%llu..%llu), %llu failed, %.1f s, %.2f seeds/s "
	       "(%u ms simulated each, %u clients)\n",
	       (unsigned long long)seeds, (unsigned long long)seed_start,
	       (unsigned long long)(seed_start + seeds - 1), (unsigned long long)failed, secs,
	       secs > 0 ? (double)seeds / secs : 0.0, run_ms, clients);
	printf("nodesim: %llu records: %llu grants, %llu releases, %llu renewals, %llu reads, "
	       "%llu writes (%llu refused by the fence); %llu crashes, %llu partitions; "
	       "%llu datagrams, %llu dropped, %llu duplicated\n",
	       (unsigned long long)total.records, (unsigned long long)total.grants,
	       (unsigned long long)total.releases, (unsigned long long)total.renews,
	       (unsigned long long)total.reads, (unsigned long long)total.writes,
	       (unsigned long long)total.writes_refused, (unsigned long long)total.crashes,
	       (unsigned long long)total.partitions, (unsigned long long)total.datagrams,
	       (unsigned long long)total.dropped, (unsigned long long)total.duplicated);
	return failed ? 1 : 0;
}
