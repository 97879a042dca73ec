/*
 * Membership (see membership.h). Configurations are tiny (at most nine
 * members), so they are copied by value and searched linearly; a fallback
 * after truncation scans the log window backwards, which is rare (only a
 * deposed leader's uncommitted configuration entry is ever truncated).
 */
#include "raft/membership.h"

#include <stdio.h>
#include <string.h>

#include "common/assert.h"
#include "common/bytes.h"
#include "hasp/errors.h"
#include "raft/core.h"
#include "raft/log.h"
#include "raft/progress.h"
#include "raft/replicate.h"

uint32_t membership_conf_encode(const struct raft_conf *conf, uint8_t *buf)
{
	struct byte_writer w;

	HASP_ASSERT(conf->count <= RAFT_CONF_MEMBERS_MAX);
	byte_writer_init(&w, buf, MEMBERSHIP_CONF_SIZE_MAX);
	byte_writer_u8(&w, MEMBERSHIP_CONF_VERSION);
	byte_writer_u8(&w, (uint8_t)conf->count);
	for (uint32_t i = 0; i < conf->count; i++) {
		byte_writer_u32(&w, conf->members[i].id);
		byte_writer_u8(&w, conf->members[i].role);
	}
	HASP_ASSERT(!w.failed);
	return (uint32_t)w.written;
}

bool membership_conf_valid(const struct raft_conf *conf, uint32_t peers_max)
{
	if (conf->count > peers_max || conf->count > RAFT_CONF_MEMBERS_MAX)
		return false;
	for (uint32_t i = 0; i < conf->count; i++) {
		const struct raft_member *m = &conf->members[i];
		if (m->id == 0 || (m->role != RAFT_VOTER && m->role != RAFT_LEARNER))
			return false;
		for (uint32_t j = 0; j < i; j++)
			if (conf->members[j].id == m->id)
				return false;
	}
	return true;
}

int membership_conf_decode(struct raft_conf *conf, const void *data, size_t size)
{
	struct byte_reader rd;

	memset(conf, 0, sizeof(*conf));
	byte_reader_init(&rd, data, size);
	uint8_t version = byte_reader_u8(&rd);
	uint8_t count = byte_reader_u8(&rd);
	if (rd.failed)
		return -HASP_ETRUNCATED;
	if (version != MEMBERSHIP_CONF_VERSION)
		return -HASP_EVERSION;
	if (count > RAFT_CONF_MEMBERS_MAX)
		return -HASP_ECORRUPT;
	conf->count = count;
	for (uint32_t i = 0; i < count; i++) {
		conf->members[i].id = byte_reader_u32(&rd);
		conf->members[i].role = byte_reader_u8(&rd);
	}
	if (rd.failed)
		return -HASP_ETRUNCATED;
	if (rd.left != 0)
		return -HASP_ELENGTH;
	if (!membership_conf_valid(conf, RAFT_CONF_MEMBERS_MAX))
		return -HASP_ECORRUPT;
	return 0;
}

static void trace_conf(struct raft *r)
{
	char text[16 * RAFT_CONF_MEMBERS_MAX + 1];
	size_t n = 0;

	text[0] = '\0';
	for (uint32_t i = 0; i < r->conf.count; i++) {
		const struct raft_member *m = &r->conf.members[i];
		int k = snprintf(text + n, sizeof(text) - n, " %c%u",
				 m->role == RAFT_VOTER ? 'n' : 'l', m->id);
		HASP_ASSERT(k > 0 && (size_t)k < sizeof(text) - n);
		n += (size_t)k;
	}
	core_trace(r, "conf %llu:%s", (unsigned long long)r->conf_index, text);
}

void membership_set(struct raft *r, const struct raft_conf *conf, uint64_t index)
{
	HASP_ASSERT(membership_conf_valid(conf, r->cfg.peers_max));
	r->conf = *conf;
	r->conf_index = index;
	if (core_member(r, r->cfg.id) != NULL)
		r->was_member = true;
	progress_sync(r);
	if (r->transfer_target != 0 && !core_is_voter(r, r->transfer_target))
		r->transfer_target = 0;
	trace_conf(r);
}

void membership_on_append(struct raft *r, const struct raft_entry *e)
{
	struct raft_conf conf;

	HASP_ASSERT(e->type == RAFT_ENTRY_CONF);
	/* recv_append.c validated the payload before appending it. */
	int rc = membership_conf_decode(&conf, e->data, e->size);
	HASP_ASSERT(rc == 0);
	membership_set(r, &conf, e->index);
}

void membership_conf_at(const struct raft *r, uint64_t index, struct raft_conf *conf)
{
	uint64_t i = index < r->log.last ? index : r->log.last;

	for (; i > r->log.snap_index && i >= r->log.first; i--) {
		const struct raft_entry *e = log_get(&r->log, i);
		if (e->type == RAFT_ENTRY_CONF) {
			int rc = membership_conf_decode(conf, e->data, e->size);
			HASP_ASSERT(rc == 0);
			return;
		}
	}
	*conf = r->snap_conf;
}

void membership_on_truncate(struct raft *r, uint64_t from)
{
	struct raft_conf conf;

	if (r->conf_index < from)
		return;
	membership_conf_at(r, from - 1, &conf);
	/* The index of the fallback only needs to be below `from`. */
	uint64_t index = r->log.snap_index;
	for (uint64_t i = from - 1; i > r->log.snap_index && i >= r->log.first; i--) {
		if (log_get(&r->log, i)->type == RAFT_ENTRY_CONF) {
			index = i;
			break;
		}
	}
	membership_set(r, &conf, index);
}

void membership_on_commit(struct raft *r)
{
	if (r->role != RAFT_LEADER || r->commit < r->conf_index || core_is_voter(r, r->cfg.id))
		return;
	/* §4.2.2: the removed leader steps down once Cnew is committed. Hand
	 * over to the most up-to-date voter at once instead of waiting for an
	 * election timeout. */
	struct raft_progress *best = NULL;
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		struct raft_progress *pr = &r->progress[i];
		if (pr->id == 0 || pr->id == r->cfg.id || pr->role != RAFT_VOTER)
			continue;
		if (best == NULL || pr->match > best->match)
			best = pr;
	}
	if (best != NULL && best->match == r->log.last)
		(void)core_msg(r, RAFT_MSG_TIMEOUT_NOW, best->id);
	core_trace(r, "step down: removed");
	core_become_follower(r, r->term, 0);
}

void membership_change(struct raft *r, uint8_t op, uint32_t id)
{
	struct raft_update *up = r->up;
	struct raft_conf conf = r->conf;
	uint8_t buf[MEMBERSHIP_CONF_SIZE_MAX];
	int found = -1;

	if (r->role != RAFT_LEADER) {
		up->reject = RAFT_NOT_LEADER;
		return;
	}
	if (r->transfer_target != 0) {
		up->reject = RAFT_TRANSFERRING;
		return;
	}
	/* §4.1: one change at a time, each committed before the next; and the
	 * leader must have committed in its term (a previous leader's change
	 * might otherwise still be pending, §4.1 bug fix). */
	if (r->conf_index > r->commit || r->commit < r->term_start) {
		up->reject = RAFT_CONF_PENDING;
		return;
	}
	if (log_room(&r->log) == 0) {
		up->reject = RAFT_FULL;
		return;
	}
	for (uint32_t i = 0; i < conf.count; i++)
		if (conf.members[i].id == id)
			found = (int)i;
	switch (op) {
	case RAFT_CONF_ADD_LEARNER:
		if (id == 0 || found >= 0 || conf.count >= r->cfg.peers_max) {
			up->reject = RAFT_CONF_INVALID;
			return;
		}
		conf.members[conf.count].id = id;
		conf.members[conf.count].role = RAFT_LEARNER;
		conf.count++;
		break;
	case RAFT_CONF_PROMOTE: {
		if (found < 0 || conf.members[found].role != RAFT_LEARNER) {
			up->reject = RAFT_CONF_INVALID;
			return;
		}
		/* §4.2.1: a new server joins the vote only once it has caught
		 * up, or it would stall commitment while it does. */
		const struct raft_progress *pr = core_progress(r, id);
		HASP_ASSERT(pr != NULL);
		if (pr->match < r->commit) {
			up->reject = RAFT_NOT_CAUGHT_UP;
			return;
		}
		conf.members[found].role = RAFT_VOTER;
		break;
	}
	case RAFT_CONF_REMOVE:
		if (found < 0 ||
		    (conf.members[found].role == RAFT_VOTER && core_voter_count(r) == 1)) {
			up->reject = RAFT_CONF_INVALID;
			return;
		}
		conf.members[found] = conf.members[conf.count - 1];
		conf.count--;
		break;
	default:
		up->reject = RAFT_CONF_INVALID;
		return;
	}
	r->counters.conf_changes++;
	uint32_t size = membership_conf_encode(&conf, buf);
	up->propose_index = r->log.last + 1;
	up->propose_count = 1;
	replicate_append_local(r, RAFT_ENTRY_CONF, buf, size);
	replicate_broadcast(r);
	replicate_maybe_commit(r);
}
