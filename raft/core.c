/*
 * Role transitions and the small shared machinery of the raft core (see
 * core.h). Kept apart from raft.c so that every protocol file can use them
 * without depending on the step dispatcher.
 */
#include "raft/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "raft/log.h"
#include "raft/progress.h"
#include "raft/read_index.h"

void core_trace(struct raft *r, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	if (r->cfg.trace == NULL)
		return;
	n = snprintf(line, sizeof(line), "n%u t%llu ", r->cfg.id, (unsigned long long)r->term);
	HASP_ASSERT(n > 0 && (size_t)n < sizeof(line));
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	r->cfg.trace(r->cfg.trace_arg, line);
}

struct raft_msg *core_msg(struct raft *r, uint8_t type, uint32_t to)
{
	struct raft_update *up = r->up;

	HASP_ASSERT(up != NULL);
	HASP_ASSERT(to != 0 && to != r->cfg.id);
	if (up->msg_count >= r->msgs_max) {
		r->counters.msg_dropped_full++;
		return NULL;
	}
	struct raft_msg *m = &r->msgs[up->msg_count++];
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->cluster_id = r->cfg.cluster_id;
	m->from = r->cfg.id;
	m->to = to;
	m->term = r->term;
	r->counters.msg_sent++;
	return m;
}

void core_reset_election_timer(struct raft *r)
{
	uint32_t base = r->cfg.election_ticks;

	r->election_elapsed = 0;
	r->election_timeout = base + (uint32_t)prng_below(r->prng, base);
	HASP_ASSERT(r->election_timeout >= base && r->election_timeout < 2 * base);
}

void core_become_follower(struct raft *r, uint64_t term, uint32_t leader)
{
	HASP_ASSERT(term >= r->term);
	if (term > r->term) {
		r->term = term;
		r->vote = 0; /* §3.3: a new term starts without a vote */
	}
	if (r->role == RAFT_LEADER)
		read_index_drop(r);
	if (r->role != RAFT_FOLLOWER || r->leader_id != leader) {
		/* A follower trusts only what this leader told it (recv_append.c). */
		r->verified = r->commit; /* committed entries match every leader */
		r->ack_pending = false;
		core_trace(r, "follower leader=n%u", leader);
	}
	/* Only a leader's own timer restarts here: a follower's election
	 * timeout runs on through a rejected vote request of a higher term
	 * (Figure 3.1: it restarts on hearing from the leader or granting a
	 * vote), or a candidate with a stale log could keep every other
	 * server from ever timing out. */
	if (r->role == RAFT_LEADER)
		core_reset_election_timer(r);
	r->role = RAFT_FOLLOWER;
	r->leader_id = leader;
	r->transfer_target = 0;
	HASP_ASSERT(r->role == RAFT_FOLLOWER);
}

struct raft_progress *core_progress(struct raft *r, uint32_t id)
{
	for (uint32_t i = 0; i < r->cfg.peers_max; i++)
		if (r->progress[i].id == id && id != 0)
			return &r->progress[i];
	return NULL;
}

const struct raft_member *core_member(const struct raft *r, uint32_t id)
{
	for (uint32_t i = 0; i < r->conf.count; i++)
		if (r->conf.members[i].id == id)
			return &r->conf.members[i];
	return NULL;
}

bool core_is_voter(const struct raft *r, uint32_t id)
{
	const struct raft_member *m = core_member(r, id);
	return m != NULL && m->role == RAFT_VOTER;
}

uint32_t core_voter_count(const struct raft *r)
{
	uint32_t count = 0;
	for (uint32_t i = 0; i < r->conf.count; i++)
		count += r->conf.members[i].role == RAFT_VOTER;
	return count;
}

uint64_t core_quorum_value(const struct raft *r, uint64_t (*value_of)(const struct raft *r,
								      const struct raft_progress *pr))
{
	uint64_t values[RAFT_CONF_MEMBERS_MAX];
	uint32_t count = 0;

	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		const struct raft_progress *pr = &r->progress[i];
		if (pr->id == 0 || pr->role != RAFT_VOTER)
			continue;
		HASP_ASSERT(count < RAFT_CONF_MEMBERS_MAX);
		values[count++] = value_of(r, pr);
	}
	if (count == 0)
		return 0;
	/* Insertion sort, descending: at most nine values. */
	for (uint32_t i = 1; i < count; i++) {
		uint64_t v = values[i];
		uint32_t j = i;
		while (j > 0 && values[j - 1] < v) {
			values[j] = values[j - 1];
			j--;
		}
		values[j] = v;
	}
	/* The quorum-th largest value is reached by a majority. */
	return values[count / 2];
}

uint64_t core_last_term(const struct raft *r)
{
	return log_term(&r->log, r->log.last);
}

void *core_zalloc(size_t count, size_t size)
{
	if (count == 0 || size == 0 || count > SIZE_MAX / size)
		return NULL;
	void *p = hasp_alloc(count * size);
	if (p != NULL)
		memset(p, 0, count * size);
	return p;
}
