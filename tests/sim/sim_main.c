/*
 * sim_raft: runs the deterministic Raft simulation over a range of seeds.
 *
 *   sim_raft --seeds 10000 [--seed-start 0] [--nodes 3|5|0] [--sm model|locks]
 *   sim_raft --seed 1234 --nodes 5 --verbose       replay one seed
 *   sim_raft --forever                             until stopped or failed
 *
 * --nodes 0 alternates 3 and 5 nodes by seed. A failing seed prints
 * `seed=<n>` and the command that replays it exactly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/assert.h"
#include "tests/sim/sim.h"

/* What a failing assertion must print: the seed and how to replay it. */
static uint64_t current_seed;
static uint32_t current_nodes;
static const char *current_sm = "model";
static const char *program = "sim_raft";

static void assert_handler(int result, const char *expr, const char *file, int line)
{
	if (result)
		return;
	fprintf(stderr, "hasp: assertion failed: %s (%s:%d)\n", expr, file, line);
	fprintf(stderr, "seed=%llu nodes=%u sm=%s\n", (unsigned long long)current_seed,
		current_nodes, current_sm);
	fprintf(stderr, "replay: %s --seed %llu --nodes %u --sm %s --verbose\n", program,
		(unsigned long long)current_seed, current_nodes, current_sm);
	abort();
}

static const struct sim_sm_ops *sm_by_name(const char *name)
{
	if (strcmp(name, "model") == 0)
		return &sim_lockmodel_ops;
	if (strcmp(name, "locks") == 0)
		return &sim_locks_ops;
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t seed_start = 0, seeds = 100;
	uint32_t nodes = 0;
	bool verbose = false, forever = false, one = false;
	const char *sm_name = "model";
	struct sim_options opt;
	struct sim_stats stats, total;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--seed") == 0 && v) {
			seed_start = strtoull(v, NULL, 0);
			seeds = 1;
			one = true;
			i++;
		} else if (strcmp(a, "--seeds") == 0 && v) {
			seeds = strtoull(v, NULL, 0);
			i++;
		} else if (strcmp(a, "--seed-start") == 0 && v) {
			seed_start = strtoull(v, NULL, 0);
			i++;
		} else if (strcmp(a, "--nodes") == 0 && v) {
			nodes = (uint32_t)strtoul(v, NULL, 0);
			i++;
		} else if (strcmp(a, "--sm") == 0 && v) {
			sm_name = v;
			i++;
		} else if (strcmp(a, "--verbose") == 0) {
			verbose = true;
		} else if (strcmp(a, "--forever") == 0) {
			forever = true;
		} else {
			fprintf(stderr, "usage: %s [--seeds N] [--seed-start S] [--seed S] "
					"[--nodes 3|5|0] [--sm model|locks] [--verbose] [--forever]\n",
				argv[0]);
			return 2;
		}
	}
	if (nodes != 0 && nodes != 3 && nodes != 5) {
		fprintf(stderr, "--nodes must be 3, 5 or 0 (alternate)\n");
		return 2;
	}
	program = argv[0];
	current_sm = sm_name;
	hasp_assert_set_handler(assert_handler);
	memset(&opt, 0, sizeof(opt));
	opt.sm = sm_by_name(sm_name);
	if (opt.sm == NULL) {
		fprintf(stderr, "unknown state machine: %s\n", sm_name);
		return 2;
	}
	opt.verbose = verbose;
	opt.fault_ms = 2000;
	opt.liveness_ms = 5000;
	memset(&total, 0, sizeof(total));
	clock_t start = clock();
	uint64_t run = 0;
	for (uint64_t s = seed_start; forever || s < seed_start + seeds; s++, run++) {
		opt.seed = s;
		opt.nodes = nodes != 0 ? nodes : (s % 2 == 0 ? 3 : 5);
		current_seed = s;
		current_nodes = opt.nodes;
		if (!sim_run(&opt, &stats)) {
			fprintf(stderr, "seed=%llu nodes=%u sm=%s\n", (unsigned long long)s, opt.nodes,
				sm_name);
			fprintf(stderr, "replay: %s --seed %llu --nodes %u --sm %s --verbose\n", argv[0],
				(unsigned long long)s, opt.nodes, sm_name);
			return 1;
		}
		total.steps += stats.steps;
		total.commits += stats.commits;
		total.acked += stats.acked;
		total.crashes += stats.crashes;
		total.elections += stats.elections;
		total.snapshots += stats.snapshots;
		total.conf_changes += stats.conf_changes;
		total.reads += stats.reads;
		total.granted += stats.granted;
		total.expired += stats.expired;
		total.sim_ms += stats.sim_ms;
		if (one || (forever && run % 1000 == 999))
			printf("seed=%llu steps=%llu commits=%llu acked=%llu crashes=%llu "
			       "leaders=%llu snapshots=%llu conf=%llu reads=%llu sim_ms=%llu\n",
			       (unsigned long long)s, (unsigned long long)stats.steps,
			       (unsigned long long)stats.commits, (unsigned long long)stats.acked,
			       (unsigned long long)stats.crashes, (unsigned long long)stats.elections,
			       (unsigned long long)stats.snapshots,
			       (unsigned long long)stats.conf_changes, (unsigned long long)stats.reads,
			       (unsigned long long)stats.sim_ms);
	}
	double secs = (double)(clock() - start) / CLOCKS_PER_SEC;
	printf("sim: %llu seeds from %llu ok (sm=%s) in %.1fs: steps=%llu commits=%llu acked=%llu "
	       "granted=%llu expired=%llu crashes=%llu leaders=%llu snapshots=%llu conf=%llu "
	       "reads=%llu sim_s=%llu\n",
	       (unsigned long long)run, (unsigned long long)seed_start, sm_name, secs,
	       (unsigned long long)total.steps, (unsigned long long)total.commits,
	       (unsigned long long)total.acked, (unsigned long long)total.granted,
	       (unsigned long long)total.expired, (unsigned long long)total.crashes,
	       (unsigned long long)total.elections, (unsigned long long)total.snapshots,
	       (unsigned long long)total.conf_changes, (unsigned long long)total.reads,
	       (unsigned long long)(total.sim_ms / 1000));
	return 0;
}
