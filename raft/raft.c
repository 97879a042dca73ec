/*
 * raft_init/raft_restore/raft_step: the entry points of the core. raft_step
 * filters every received message once (cluster, addressee, membership,
 * term), dispatches the event to the protocol file that owns it, and then
 * builds the update from what changed, in the order the loop must obey
 * (raft.h): persist, send, apply, reply.
 */
#include "raft/raft.h"

#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "hasp/errors.h"
#include "raft/core.h"
#include "raft/election.h"
#include "raft/log.h"
#include "raft/membership.h"
#include "raft/msg_codec.h"
#include "raft/progress.h"
#include "raft/read_index.h"
#include "raft/recv_append.h"
#include "raft/replicate.h"
#include "raft/snapshot.h"

void raft_config_default(struct raft_config *cfg, uint64_t cluster_id, uint32_t id)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->cluster_id = cluster_id;
	cfg->id = id;
	cfg->peers_max = 7;
	cfg->election_ticks = 10;
	cfg->heartbeat_ticks = 1;
	cfg->inflight_max = 8;
	cfg->inflight_bytes_max = 64 * 1024;
	cfg->entry_bytes_max = 1280;
	cfg->log_window = 8192;
	cfg->mtu = 1500;
	cfg->snapshot_threshold = 2048;
	cfg->snapshot_trailing = 512;
	cfg->snapshot_chunk_max = 0;
	cfg->reads_max = 256;
	cfg->pre_vote = true;
	cfg->check_quorum = true;
}

static bool config_ok(const struct raft_config *cfg)
{
	uint32_t append_budget;

	if (cfg->id == 0 || cfg->peers_max == 0 || cfg->peers_max > RAFT_CONF_MEMBERS_MAX)
		return false;
	if (cfg->election_ticks < 2 || cfg->heartbeat_ticks == 0 ||
	    cfg->heartbeat_ticks >= cfg->election_ticks)
		return false;
	if (cfg->inflight_max == 0 || cfg->inflight_bytes_max == 0 || cfg->reads_max == 0)
		return false;
	if (cfg->mtu < 256 || cfg->mtu > 65535)
		return false;
	/* One entry of the largest size must fit one AppendEntries datagram. */
	append_budget = cfg->mtu - RAFT_DATAGRAM_OVERHEAD - MSG_CODEC_HEADER_SIZE -
			MSG_CODEC_APPEND_FIXED_SIZE - MSG_CODEC_ENTRY_HEADER_SIZE;
	if (cfg->entry_bytes_max < MEMBERSHIP_CONF_SIZE_MAX || cfg->entry_bytes_max > append_budget)
		return false;
	/* The window holds the snapshot threshold and the trailing entries in
	 * its first half; the other half takes uncommitted entries. */
	if (cfg->log_window < 16 ||
	    (uint64_t)cfg->snapshot_threshold + cfg->snapshot_trailing > cfg->log_window / 2 ||
	    cfg->snapshot_threshold == 0)
		return false;
	return true;
}

int raft_init(struct raft *r, const struct raft_config *cfg, struct prng *prng)
{
	int rc;

	memset(r, 0, sizeof(*r));
	if (!config_ok(cfg))
		return -HASP_ECONFIG;
	r->cfg = *cfg;
	r->prng = prng;
	/* Messages one step may emit, per peer: a full pipeline of appends,
	 * a heartbeat or probe, a snapshot chunk, a TimeoutNow, and a reply;
	 * plus one vote request per peer. */
	r->msgs_max = cfg->peers_max * (cfg->inflight_max + 5);
	rc = log_init(&r->log, cfg->log_window, cfg->entry_bytes_max);
	if (rc != 0)
		goto fail;
	rc = progress_init(r);
	if (rc != 0)
		goto fail;
	r->msgs = core_zalloc(r->msgs_max, sizeof(*r->msgs));
	/* Persist and apply lists are each at most one window. */
	r->up_entries = core_zalloc(2 * (size_t)cfg->log_window, sizeof(*r->up_entries));
	r->reads = core_zalloc(cfg->reads_max, sizeof(*r->reads));
	r->up_reads = core_zalloc(cfg->reads_max, sizeof(*r->up_reads));
	if (r->msgs == NULL || r->up_entries == NULL || r->reads == NULL || r->up_reads == NULL) {
		rc = -HASP_ENOMEM;
		goto fail;
	}
	r->role = RAFT_FOLLOWER;
	core_reset_election_timer(r);
	return 0;
fail:
	raft_deinit(r);
	return rc;
}

void raft_deinit(struct raft *r)
{
	hasp_free(r->up_reads);
	hasp_free(r->reads);
	hasp_free(r->up_entries);
	hasp_free(r->msgs);
	progress_deinit(r);
	log_deinit(&r->log);
	memset(r, 0, sizeof(*r));
}

int raft_restore(struct raft *r, const struct raft_persisted_state *ps)
{
	HASP_ASSERT(r->log.slots != NULL);
	if (!membership_conf_valid(&ps->snap_conf, r->cfg.peers_max))
		return -HASP_ECONFIG;
	if (ps->entry_count > r->log.window)
		return -HASP_EINVAL;
	for (uint32_t i = 0; i < ps->entry_count; i++) {
		const struct raft_entry *e = &ps->entries[i];
		uint64_t prev_term = i == 0 ? ps->snap_term : ps->entries[i - 1].term;
		struct raft_conf conf;
		if (e->index != ps->snap_index + 1 + i || e->term < prev_term || e->term > ps->term ||
		    e->size > r->cfg.entry_bytes_max || e->type < RAFT_ENTRY_COMMAND ||
		    e->type > RAFT_ENTRY_CONF)
			return -HASP_EINVAL;
		if (e->type == RAFT_ENTRY_CONF &&
		    (membership_conf_decode(&conf, e->data, e->size) != 0 ||
		     !membership_conf_valid(&conf, r->cfg.peers_max)))
			return -HASP_EINVAL;
	}
	r->term = ps->term;
	r->vote = ps->vote;
	log_reset(&r->log, ps->snap_index, ps->snap_term);
	r->snap_conf = ps->snap_conf;
	r->conf = ps->snap_conf;
	r->conf_index = ps->snap_index;
	progress_sync(r);
	for (uint32_t i = 0; i < ps->entry_count; i++) {
		const struct raft_entry *e = &ps->entries[i];
		const struct raft_entry *kept = log_append(&r->log, e->term, e->type, e->data, e->size);
		if (kept->type == RAFT_ENTRY_CONF) {
			struct raft_conf conf;
			int rc = membership_conf_decode(&conf, kept->data, kept->size);
			HASP_ASSERT(rc == 0);
			r->conf = conf;
			r->conf_index = kept->index;
		}
	}
	progress_sync(r);
	r->was_member = core_member(r, r->cfg.id) != NULL;
	for (uint32_t i = 0; i < ps->entry_count && !r->was_member; i++) {
		struct raft_conf conf;
		if (ps->entries[i].type == RAFT_ENTRY_CONF &&
		    membership_conf_decode(&conf, ps->entries[i].data, ps->entries[i].size) == 0)
			for (uint32_t k = 0; k < conf.count; k++)
				r->was_member |= conf.members[k].id == r->cfg.id;
	}
	for (uint32_t k = 0; k < ps->snap_conf.count; k++)
		r->was_member |= ps->snap_conf.members[k].id == r->cfg.id;
	r->commit = ps->snap_index;
	r->applied = ps->snap_index;
	r->persisted = r->log.last;
	if (ps->snap_data != NULL && ps->snap_size > 0) {
		r->snap_data = ps->snap_data;
		r->snap_data_size = ps->snap_size;
		r->snap_data_index = ps->snap_index;
	}
	HASP_DASSERT(raft_invariants_ok(r));
	return 0;
}

bool raft_removed(const struct raft *r)
{
	if (r->removal_notice_index > r->conf_index)
		return true;
	return r->was_member && r->conf.count > 0 && core_member(r, r->cfg.id) == NULL &&
	       r->commit >= r->conf_index;
}

uint8_t raft_self_role(const struct raft *r)
{
	const struct raft_member *m = core_member(r, r->cfg.id);
	return m != NULL ? m->role : 0;
}

uint64_t raft_term_at(const struct raft *r, uint64_t index)
{
	return log_term(&r->log, index);
}

uint64_t raft_last_index(const struct raft *r)
{
	return r->log.last;
}

const struct raft_entry *raft_entry_at(const struct raft *r, uint64_t index)
{
	return log_get(&r->log, index);
}

const char *raft_role_name(uint8_t role)
{
	switch (role) {
	case RAFT_FOLLOWER:
		return "follower";
	case RAFT_PRE_CANDIDATE:
		return "pre-candidate";
	case RAFT_CANDIDATE:
		return "candidate";
	case RAFT_LEADER:
		return "leader";
	default:
		return "?";
	}
}

/* Requests §4.1 tells us to accept from servers outside our configuration
 * (a leader or candidate of a configuration we have not seen yet). */
static bool accepted_from_nonmember(uint8_t type)
{
	return type == RAFT_MSG_APPEND || type == RAFT_MSG_SNAPSHOT || type == RAFT_MSG_VOTE ||
	       type == RAFT_MSG_PRE_VOTE || type == RAFT_MSG_TIMEOUT_NOW;
}

static bool committed_member(const struct raft *r, uint32_t id)
{
	struct raft_conf committed;
	if (r->conf_index <= r->commit)
		return false; /* the latest configuration is the committed one */
	membership_conf_at(r, r->commit, &committed);
	for (uint32_t i = 0; i < committed.count; i++)
		if (committed.members[i].id == id)
			return true;
	return false;
}

static void reply_stale(struct raft *r, const struct raft_msg *m)
{
	/* A deposed leader (or a candidate back from a partition) learns the
	 * newer term from our reply and steps down; with PreVote it would
	 * otherwise never hear of it. */
	if (m->type == RAFT_MSG_APPEND || m->type == RAFT_MSG_SNAPSHOT) {
		struct raft_msg *resp = core_msg(r, RAFT_MSG_APPEND_RESP, m->from);
		if (resp != NULL)
			resp->reject = true;
	} else if (m->type == RAFT_MSG_PRE_VOTE || m->type == RAFT_MSG_VOTE) {
		/* Figure 3.1: RequestVote replies false with currentTerm when
		 * term < currentTerm, so the candidate catches up. Without it
		 * two servers whose (uncommitted) configurations do not include
		 * each other's voters can campaign forever in different
		 * terms (found by the simulator, seed 79382). */
		uint8_t type = m->type == RAFT_MSG_VOTE ? RAFT_MSG_VOTE_RESP : RAFT_MSG_PRE_VOTE_RESP;
		struct raft_msg *resp = core_msg(r, type, m->from);
		if (resp != NULL)
			resp->reject = true;
	}
}

/* A vote request from a server our committed configuration does not list
 * (issue 11 item 6): say so, naming that configuration's entry, so that a
 * server removed while cut off learns it instead of campaigning forever.
 * Only once our latest configuration is committed: an uncommitted one
 * proves nothing, and a server added by an entry we lack has a newer
 * configuration than the one we would name. */
static void tell_not_member(struct raft *r, const struct raft_msg *m)
{
	if (r->conf_index == 0 || r->conf_index > r->commit)
		return;
	uint8_t type = m->type == RAFT_MSG_VOTE ? RAFT_MSG_VOTE_RESP : RAFT_MSG_PRE_VOTE_RESP;
	struct raft_msg *resp = core_msg(r, type, m->from);
	if (resp == NULL)
		return;
	resp->reject = true;
	resp->not_member = true;
	resp->index = r->conf_index;
	r->counters.removal_notices_sent++;
}

/* A member (it is in our configuration, or receive() would have dropped
 * its reply) says its committed configuration at m->index does not list
 * us. Committed configurations form one chain, each appended after the
 * previous one committed, so one newer than ours that leaves us out means
 * we were removed; an older or equal one is stale news and ignored. */
static void learn_removal(struct raft *r, const struct raft_msg *m)
{
	if (m->index <= r->conf_index || m->index <= r->removal_notice_index)
		return;
	r->removal_notice_index = m->index;
	r->counters.removal_notices++;
	core_trace(r, "removed: told by a member of a newer configuration");
	if (r->role != RAFT_FOLLOWER)
		core_become_follower(r, r->term, 0);
}

/* Terms, indexes and sizes from the wire stay below 2^62, so that no sum
 * or +1 in the core can overflow, whatever a peer (or a fuzzer) sends. */
static bool msg_numbers_sane(const struct raft_msg *m)
{
	const uint64_t max = (uint64_t)1 << 62;
	uint64_t values[] = { m->term, m->last_index, m->last_term, m->prev_index, m->prev_term,
			      m->commit, m->read_seq, m->index, m->hint_index, m->hint_term,
			      m->snap_index, m->snap_term, m->snap_size, m->offset };
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		if (values[i] >= max)
			return false;
	for (uint32_t i = 0; i < m->entry_count; i++)
		if (m->entries[i].term >= max)
			return false;
	return true;
}

static void receive(struct raft *r, const struct raft_msg *m)
{
	r->counters.msg_received++;
	if (m->cluster_id != r->cfg.cluster_id) {
		r->counters.msg_dropped_cluster++;
		return;
	}
	if (m->to != r->cfg.id) {
		r->counters.msg_dropped_to++;
		return;
	}
	if (m->from == 0 || m->from == r->cfg.id || m->type < RAFT_MSG_VOTE ||
	    m->type >= RAFT_MSG_TYPE_COUNT || (m->type == RAFT_MSG_APPEND && m->entry_count > 0 &&
					       m->entries == NULL) ||
	    !msg_numbers_sane(m)) {
		r->counters.msg_dropped_invalid++;
		return;
	}
	if (core_member(r, m->from) == NULL && !accepted_from_nonmember(m->type)) {
		r->counters.msg_dropped_nonmember++;
		return;
	}
	/* A vote request from a server that is in neither our latest nor our
	 * committed configuration comes from a removed server that never
	 * learned it (it would depose the leader with its higher term), or
	 * from a member added by an entry we lack. Ignoring the latter costs
	 * no election: every member joins as a learner by an entry that
	 * committed on a majority of the voters before it can be promoted,
	 * and a server lacking a committed entry could not elect it anyway. A
	 * server whose removal we hold but have not seen commit is still
	 * heard: it may hold the only log the new majority would elect
	 * (election_may_campaign; simulator seed 5220). */
	if ((m->type == RAFT_MSG_VOTE || m->type == RAFT_MSG_PRE_VOTE) && core_member(r, m->from) == NULL &&
	    !committed_member(r, m->from)) {
		r->counters.msg_dropped_nonmember++;
		tell_not_member(r, m);
		return;
	}
	/* Checked before the term: the notice comes from a member whose term
	 * may be far below the one the removed candidate climbed to. */
	if ((m->type == RAFT_MSG_VOTE_RESP || m->type == RAFT_MSG_PRE_VOTE_RESP) && m->not_member) {
		learn_removal(r, m);
		return;
	}
	if (m->term > r->term) {
		bool vote_req = m->type == RAFT_MSG_VOTE || m->type == RAFT_MSG_PRE_VOTE;
		/* §4.2.3: a server that heard from a current leader within the
		 * minimum election timeout ignores vote requests, so a removed or
		 * partitioned server cannot disrupt the cluster. */
		if (vote_req && !m->transfer && election_in_lease(r)) {
			r->counters.msg_dropped_stale++;
			return;
		}
		/* Pre-votes and granted pre-vote replies carry a future term
		 * and must not change ours (§9.6). */
		bool pre = m->type == RAFT_MSG_PRE_VOTE ||
			   (m->type == RAFT_MSG_PRE_VOTE_RESP && !m->reject);
		if (!pre) {
			bool from_leader = m->type == RAFT_MSG_APPEND || m->type == RAFT_MSG_SNAPSHOT ||
					   m->type == RAFT_MSG_TIMEOUT_NOW;
			core_become_follower(r, m->term, from_leader ? m->from : 0);
		}
	} else if (m->term < r->term) {
		r->counters.msg_dropped_stale++;
		reply_stale(r, m);
		return;
	}
	switch (m->type) {
	case RAFT_MSG_VOTE:
	case RAFT_MSG_PRE_VOTE:
		election_recv_vote(r, m);
		break;
	case RAFT_MSG_VOTE_RESP:
	case RAFT_MSG_PRE_VOTE_RESP:
		election_recv_vote_resp(r, m);
		break;
	case RAFT_MSG_APPEND:
		if (r->role == RAFT_LEADER) {
			r->counters.msg_dropped_invalid++; /* two leaders in one term */
			break;
		}
		recv_append(r, m);
		break;
	case RAFT_MSG_APPEND_RESP:
		replicate_recv_append_resp(r, m);
		break;
	case RAFT_MSG_SNAPSHOT:
		if (r->role == RAFT_LEADER) {
			r->counters.msg_dropped_invalid++;
			break;
		}
		snapshot_recv(r, m);
		break;
	case RAFT_MSG_SNAPSHOT_RESP:
		snapshot_recv_resp(r, m);
		break;
	case RAFT_MSG_TIMEOUT_NOW:
		election_recv_timeout_now(r, m);
		break;
	default:
		HASP_UNREACHABLE();
	}
}

static void finish(struct raft *r, struct raft_update *up)
{
	uint32_t n = 0;

	up->msgs = r->msgs;
	if (r->term != r->step_term || r->vote != r->step_vote) {
		up->hard_state_changed = true;
		up->term = r->term;
		up->vote = r->vote;
	}
	if (r->dirty_from <= r->log.last) {
		HASP_ASSERT(r->dirty_from >= r->log.first);
		up->entries = &r->up_entries[0];
		for (uint64_t i = r->dirty_from; i <= r->log.last; i++)
			r->up_entries[n++] = *log_get(&r->log, i);
		up->entry_count = n;
		HASP_ASSERT(n <= r->log.window);
	}
	if (r->commit > r->applied) {
		uint32_t a = 0;
		up->apply = &r->up_entries[r->log.window];
		for (uint64_t i = r->applied + 1; i <= r->commit; i++)
			r->up_entries[r->log.window + a++] = *log_get(&r->log, i);
		up->apply_count = a;
		r->applied = r->commit;
	}
	/* A leader sending a snapshot does not ask for another: the caller may
	 * replace the bytes being sent, and the transfer would restart forever
	 * under load. Compaction waits; a full window pushes back. */
	up->snapshot_wanted = r->applied - r->log.snap_index >= r->cfg.snapshot_threshold &&
			      !snapshot_sending(r);
	up->reads = r->up_reads;
	up->role = r->role;
	up->leader_id = r->leader_id;
	up->role_changed = r->role != r->step_role || r->leader_id != r->step_leader;
	up->commit = r->commit;
	r->up = NULL;
}

void raft_step(struct raft *r, const struct raft_event *ev, struct raft_update *up)
{
	HASP_ASSERT(r->log.slots != NULL);
	HASP_ASSERT(ev != NULL && up != NULL);
	memset(up, 0, sizeof(*up));
	r->up = up;
	r->step_term = r->term;
	r->step_vote = r->vote;
	r->step_role = r->role;
	r->step_leader = r->leader_id;
	r->dirty_from = UINT64_MAX;

	switch (ev->type) {
	case RAFT_EVENT_TICK:
		if (r->role == RAFT_LEADER)
			replicate_tick(r);
		else
			election_tick(r);
		break;
	case RAFT_EVENT_RECEIVE:
		receive(r, ev->msg);
		break;
	case RAFT_EVENT_PROPOSE:
		replicate_propose(r, ev);
		break;
	case RAFT_EVENT_PERSISTED:
		recv_append_persisted(r, ev->persisted.index, ev->persisted.term);
		break;
	case RAFT_EVENT_SNAPSHOT:
		snapshot_taken(r, ev);
		break;
	case RAFT_EVENT_READ_INDEX:
		read_index_request(r, ev->read.ctx);
		break;
	case RAFT_EVENT_TRANSFER:
		replicate_transfer(r, ev->transfer.target);
		break;
	case RAFT_EVENT_CONF_CHANGE:
		membership_change(r, ev->conf.op, ev->conf.id);
		break;
	default:
		up->reject = RAFT_CONF_INVALID;
		break;
	}
	if (up->reject != RAFT_OK)
		up->leader_id = r->leader_id;
	finish(r, up);
	HASP_DASSERT(raft_invariants_ok(r));
}

/* The line of the last failed invariant, for the debugger and the
 * simulator's failure report. */
int raft_invariant_line;

static bool invariant_failed(int line)
{
	raft_invariant_line = line;
	return false;
}

bool raft_invariants_ok(const struct raft *r)
{
	const struct raft_log *l = &r->log;

	if (l->first > l->snap_index + 1 || l->last + 1 < l->first || l->last + 1 - l->first > l->window)
		return invariant_failed(__LINE__);
	if (r->applied < l->snap_index || r->applied > r->commit || r->commit > l->last)
		return invariant_failed(__LINE__);
	if (r->persisted > l->last)
		return invariant_failed(__LINE__);
	uint64_t prev_term = l->first <= l->snap_index ? 0 : l->snap_term;
	for (uint64_t i = l->first; i <= l->last; i++) {
		const struct raft_entry *e = &l->slots[i % l->window];
		if (e->index != i || e->term < prev_term || e->term > r->term ||
		    e->size > l->entry_bytes_max)
			return invariant_failed(__LINE__);
		if (i == l->snap_index && e->term != l->snap_term)
			return invariant_failed(__LINE__);
		prev_term = e->term;
	}
	if (!membership_conf_valid(&r->conf, r->cfg.peers_max) || r->conf_index > l->last)
		return invariant_failed(__LINE__);
	if ((r->role == RAFT_LEADER || r->role == RAFT_CANDIDATE) && r->vote != r->cfg.id)
		return invariant_failed(__LINE__);
	if ((r->role == RAFT_LEADER) != (r->leader_id == r->cfg.id))
		return invariant_failed(__LINE__);
	if (r->reads_count > r->cfg.reads_max)
		return invariant_failed(__LINE__);
	uint32_t slots = 0;
	for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
		const struct raft_progress *pr = &r->progress[i];
		if (pr->id == 0)
			continue;
		slots++;
		if (core_member(r, pr->id) == NULL)
			return invariant_failed(__LINE__);
		if (r->role == RAFT_LEADER && pr->id != r->cfg.id &&
		    (pr->next <= pr->match || pr->next > l->last + 1 || pr->match > l->last ||
		     pr->inflight_count > r->cfg.inflight_max))
			return invariant_failed(__LINE__);
	}
	if (slots != r->conf.count)
		return invariant_failed(__LINE__);
	return true;
}
