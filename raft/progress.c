/*
 * Follower progress and the AppendEntries pipeline (see progress.h). The
 * in-flight ring remembers the last index and the encoded size of each
 * message, so that an ack frees exactly the messages it covers and the byte
 * budget stays honest.
 */
#include "raft/progress.h"

#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "hasp/errors.h"
#include "raft/core.h"

int progress_init(struct raft *r)
{
	uint32_t n = r->cfg.peers_max;
	uint32_t k = r->cfg.inflight_max;

	r->progress = core_zalloc(n, sizeof(*r->progress));
	if (r->progress == NULL)
		return -HASP_ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		r->progress[i].inflight_last = core_zalloc(k, sizeof(uint64_t));
		r->progress[i].inflight_size = core_zalloc(k, sizeof(uint32_t));
		if (r->progress[i].inflight_last == NULL || r->progress[i].inflight_size == NULL)
			return -HASP_ENOMEM; /* progress_deinit() frees what exists */
	}
	return 0;
}

void progress_deinit(struct raft *r)
{
	if (r->progress == NULL)
		return;
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		hasp_free(r->progress[i].inflight_last);
		hasp_free(r->progress[i].inflight_size);
	}
	hasp_free(r->progress);
	r->progress = NULL;
}

static void progress_clear(struct raft_progress *pr, uint32_t id, uint8_t role, uint64_t next)
{
	uint64_t *last = pr->inflight_last;
	uint32_t *size = pr->inflight_size;

	memset(pr, 0, sizeof(*pr));
	pr->inflight_last = last;
	pr->inflight_size = size;
	pr->id = id;
	pr->role = role;
	pr->next = next;
	pr->state = RAFT_PROBE;
}

void progress_sync(struct raft *r)
{
	/* Drop slots of members that left. */
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		struct raft_progress *pr = &r->progress[i];
		if (pr->id != 0 && core_member(r, pr->id) == NULL)
			progress_clear(pr, 0, 0, 0);
	}
	/* Add new members; update roles (promotion). */
	for (uint32_t m = 0; m < r->conf.count; m++) {
		const struct raft_member *mem = &r->conf.members[m];
		struct raft_progress *pr = core_progress(r, mem->id);
		if (pr != NULL) {
			pr->role = mem->role;
			continue;
		}
		for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
			if (r->progress[i].id == 0) {
				pr = &r->progress[i];
				break;
			}
		}
		HASP_ASSERT(pr != NULL); /* conf.count <= peers_max */
		progress_clear(pr, mem->id, mem->role, r->log.last + 1);
	}
}

void progress_heard_from(struct raft_progress *pr)
{
	pr->recent_active = true;
	pr->silent_ticks = 0;
}

void progress_reset_all(struct raft *r)
{
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		struct raft_progress *pr = &r->progress[i];
		if (pr->id == 0)
			continue;
		progress_clear(pr, pr->id, pr->role, r->log.last + 1);
		if (pr->id == r->cfg.id) {
			pr->match = r->persisted;
			pr->recent_active = true;
		}
	}
}

static void inflight_reset(struct raft_progress *pr)
{
	pr->inflight_head = 0;
	pr->inflight_count = 0;
	pr->inflight_bytes = 0;
	pr->stall_ticks = 0;
}

void progress_become_probe(struct raft_progress *pr)
{
	inflight_reset(pr);
	pr->state = RAFT_PROBE;
	pr->probe_sent = false;
	pr->next = pr->match + 1;
}

void progress_become_replicate(struct raft_progress *pr)
{
	inflight_reset(pr);
	pr->state = RAFT_REPLICATE;
	pr->probe_sent = false;
	pr->next = pr->match + 1;
}

void progress_become_snapshot(struct raft_progress *pr, uint64_t snap_index)
{
	inflight_reset(pr);
	pr->state = RAFT_SNAPSHOTTING;
	pr->snap_index = snap_index;
	pr->snap_offset = 0;
	pr->snap_ticks = 0;
}

bool progress_inflight_full(const struct raft *r, const struct raft_progress *pr)
{
	return pr->inflight_count >= r->cfg.inflight_max ||
	       pr->inflight_bytes >= r->cfg.inflight_bytes_max;
}

void progress_inflight_add(struct raft_progress *pr, uint32_t inflight_max, uint64_t last_index,
			   uint32_t size)
{
	HASP_ASSERT(pr->inflight_count < inflight_max);
	uint32_t slot = (pr->inflight_head + pr->inflight_count) % inflight_max;
	pr->inflight_last[slot] = last_index;
	pr->inflight_size[slot] = size;
	pr->inflight_count++;
	pr->inflight_bytes += size;
}

void progress_inflight_free_to(struct raft_progress *pr, uint32_t inflight_max, uint64_t index)
{
	while (pr->inflight_count > 0 && pr->inflight_last[pr->inflight_head] <= index) {
		HASP_ASSERT(pr->inflight_bytes >= pr->inflight_size[pr->inflight_head]);
		pr->inflight_bytes -= pr->inflight_size[pr->inflight_head];
		pr->inflight_head = (pr->inflight_head + 1) % inflight_max;
		pr->inflight_count--;
		pr->stall_ticks = 0;
	}
}
