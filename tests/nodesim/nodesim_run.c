/*
 * One seed of the node simulation: the world and its clients, the
 * workload for run_ms of simulated time with the nemesis at work, then a
 * quiet drain (faults healed, outstanding operations completed), then the
 * checks and the history's digest.
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "tests/nodesim/nodesim_world.h"

#define NS_PER_MS 1000000ull
#define DRAIN_MS 20000ull
#define SETTLE_MS 3000ull /* more than checker.py's events slack (2 s) */

int nodesim_run(const struct nodesim_options *opt, struct nodesim_result *res)
{
	struct world *w = hasp_calloc(1, sizeof(*w));
	int rc = 0;

	HASP_ASSERT(w != NULL);
	HASP_ASSERT(opt->nodes == 3 || opt->nodes == 5);
	HASP_ASSERT(opt->clients >= 1 && opt->clients < NODESIM_CLIENTS_MAX); /* and the watcher */
	memset(res, 0, sizeof(*res));
	struct nodesim_history *hist = nodesim_history_new();
	struct nodesim_check checks = { 0 }, *check = &checks;
	if (world_init(w, opt, res) != 0) {
		rc = -1;
		goto out;
	}
	w->hist = hist;
	w->check = check;
	HASP_ASSERT(world_clients_open(w, opt->seed) == 0);
	w->workload_on = true;
	uint64_t end = w->now_ns + (uint64_t)opt->run_ms * NS_PER_MS;
	/* No new fault in the last second: the run ends healed. */
	uint64_t faults_until = end - (end - w->now_ns) / 8;
	while (w->now_ns < end) {
		if (world_step(w, faults_until) != 0) {
			rc = -1;
			goto close;
		}
	}
	w->workload_on = false;
	for (uint64_t drain = w->now_ns + DRAIN_MS * NS_PER_MS;
	     (world_clients_busy(w) > 0 || w->fault != NULL) && w->now_ns < drain;) {
		if (world_step(w, 0) != 0) {
			rc = -1;
			goto close;
		}
	}
	/* Events of the last grants reach the watcher, then it stops. */
	for (uint64_t settle = w->now_ns + SETTLE_MS * NS_PER_MS; opt->watch && w->now_ns < settle;) {
		if (world_step(w, 0) != 0) {
			rc = -1;
			goto close;
		}
	}
	if (opt->watch)
		world_watcher_end(w);
	res->violations = nodesim_check_run(check, res->first_violation,
					    sizeof(res->first_violation));
	if (world_clients_busy(w) > 0 && res->violations == 0) {
		res->violations = 1;
		snprintf(res->first_violation, sizeof(res->first_violation),
			 "liveness: %u operations still outstanding %llu s after the last fault healed",
			 world_clients_busy(w), DRAIN_MS / 1000);
	}
close:
	res->digest = nodesim_history_digest(hist);
	res->records = nodesim_history_records(hist);
	if (opt->history != NULL && nodesim_history_write(hist, opt->history) != 0)
		fprintf(stderr, "nodesim: cannot write %s\n", opt->history);
	world_clients_close(w);
out:
	world_deinit(w);
	nodesim_history_free(hist);
	nodesim_check_deinit(check);
	hasp_free(w);
	return rc;
}
