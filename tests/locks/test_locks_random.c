/*
 * Seeded random command sequences against a simple reference model.
 *
 * The model is a second, naive implementation of the contract (arrays and
 * linear scans, no links, no slots): it predicts every reply status, the
 * revision, and the set of lock/KV events of each command, and after every
 * command its view of every lock (holder, token, queue length) must match
 * the state machine's. Along the way it checks the safety properties the
 * issue names: at most one holder per lock, tokens strictly increasing per
 * lock, grants to waiters in FIFO order, leases and their locks consistent,
 * capacities respected (the small configuration is filled to FULL often),
 * duplicates changing nothing, and the leader's retransmission queries
 * (locks_cached_reply_find, locks_open_reply_find) answering exactly the
 * duplicates, with their bytes. Ownership is by token and lease: releases and
 * renews come from the holder's session or any other, a session's end drops
 * only its waiters (its locks live on until their lease ends or a release by
 * token), and opens reuse a few client nonces so that retried opens meet
 * live sessions. Every run prints its seed; HASP_TEST_SEED replays one.
 */
#include <stdio.h>
#include <string.h>

#include "common/prng.h"
#include "locks/locks.h"
#include "locks/session.h"
#include "locks/snapshot.h"
#include "tests/locks/locks_harness.h"
#include "tests/test_util.h"

#define M_NAMES 10
#define M_KEYS 6
#define M_SESSIONS_EVER 512
#define M_LEASES_EVER 8192
#define M_QUEUE 64
#define STEPS 10000
#define SEEDS 6

static const char *const lock_names[M_NAMES] = { "a", "b", "c", "d", "e", "f", "g", "h", "i", "j" };
static const char *const key_names[M_KEYS] = { "k/1", "k/2", "k/3", "k/44", "k/555", "kk" };

struct m_waiter {
	int sess;
	int lease;
};

struct m_lock {
	bool held;
	int sess;
	int lease;
	uint64_t token;
	uint64_t last_token;
	struct m_waiter q[M_QUEUE];
	int qlen;
};

struct m_sess {
	uint64_t id;
	uint64_t nonce;
	struct locks_reply open_reply;
	bool live;
	uint32_t ttl;
	uint64_t deadline;
	uint64_t seq;
	int held, waiting;
	bool has_last, has_prev;
	struct locks_cmd last_cmd, prev_cmd; /* the last two commands applied */
	struct locks_reply last_reply, prev_reply;
	uint64_t floor; /* the seq of its last command with LOCKS_CMD_SEQ_FLOOR */
};

struct m_lease {
	uint64_t id;
	bool live, priv;
	uint32_t ttl;
	uint64_t deadline;
	int locks, waiters, keys;
};

struct m_key {
	bool live;
	int lease;
	uint32_t size;
};

struct m_event {
	uint8_t type;
	const char *name;
	uint64_t session_id;
	uint64_t token;
};

struct model {
	struct locks_config cfg;
	struct m_lock locks[M_NAMES];
	struct m_sess sess[M_SESSIONS_EVER];
	int sess_count;
	struct m_lease leases[M_LEASES_EVER];
	int lease_count;
	struct m_key keys[M_KEYS];
	uint64_t revision, log, term;
	int64_t offset;
	uint64_t kv_bytes;
	/* Per command. */
	bool changed;
	struct m_event ev[256];
	int ev_count;
	uint64_t grants, handoffs, fulls;
	uint64_t dup_opens, foreign_releases, orphan_releases;
	uint64_t below_floor; /* late duplicates refused under a floor */
};

static int live_count_sessions(const struct model *m)
{
	int n = 0;
	for (int i = 0; i < m->sess_count; i++)
		n += m->sess[i].live;
	return n;
}

static int live_count_leases(const struct model *m)
{
	int n = 0;
	for (int i = 0; i < m->lease_count; i++)
		n += m->leases[i].live;
	return n;
}

static int count_locks(const struct model *m)
{
	int n = 0;
	for (int i = 0; i < M_NAMES; i++)
		n += m->locks[i].held;
	return n;
}

static int count_waiters(const struct model *m)
{
	int n = 0;
	for (int i = 0; i < M_NAMES; i++)
		n += m->locks[i].qlen;
	return n;
}

static int count_keys(const struct model *m)
{
	int n = 0;
	for (int i = 0; i < M_KEYS; i++)
		n += m->keys[i].live;
	return n;
}

static void m_event(struct model *m, uint8_t type, const char *name, uint64_t sid, uint64_t token)
{
	assert_true(m->ev_count < 256);
	m->ev[m->ev_count++] = (struct m_event){ type, name, sid, token };
}

static void m_bump(struct model *m)
{
	if (!m->changed) {
		m->changed = true;
		m->revision++;
	}
}

static void m_time(struct model *m, uint64_t term, uint64_t now)
{
	if (term > m->term) {
		m->term = term;
		m->offset = (int64_t)m->log - (int64_t)now;
	} else {
		int64_t t = (int64_t)now + m->offset;
		if (t > (int64_t)m->log)
			m->log = (uint64_t)t;
	}
}

static void m_arm(struct model *m, int l)
{
	m->leases[l].deadline = m->log + m->leases[l].ttl;
}

static int m_new_lease(struct model *m, uint64_t id, uint32_t ttl, bool priv)
{
	assert_true(m->lease_count < M_LEASES_EVER);
	int l = m->lease_count++;
	m->leases[l] = (struct m_lease){ .id = id, .live = true, .priv = priv, .ttl = ttl,
					 .deadline = LOCKS_DEADLINE_NONE };
	if (!priv)
		m_arm(m, l);
	return l;
}

static int m_lease_by_id(const struct model *m, uint64_t id)
{
	for (int i = 0; i < m->lease_count; i++)
		if (m->leases[i].id == id)
			return i;
	return -1;
}

/* Removes queue entry `k` of lock `n`; `drop` ends a pending private lease. */
static void m_unqueue(struct model *m, int n, int k, bool drop)
{
	struct m_lock *lk = &m->locks[n];
	struct m_waiter w = lk->q[k];

	m->sess[w.sess].waiting--;
	m->leases[w.lease].waiters--;
	if (drop && m->leases[w.lease].priv)
		m->leases[w.lease].live = false;
	memmove(&lk->q[k], &lk->q[k + 1], (size_t)(lk->qlen - k - 1) * sizeof(lk->q[0]));
	lk->qlen--;
}

static void m_release(struct model *m, int n)
{
	struct m_lock *lk = &m->locks[n];

	assert_true(lk->held);
	assert_true(m->changed);
	/* The RELEASED event names the session that acquired it, even ended. */
	m_event(m, HASP_EVENT_LOCK_RELEASED, lock_names[n], m->sess[lk->sess].id, lk->token);
	m->orphan_releases += !m->sess[lk->sess].live;
	m->sess[lk->sess].held--;
	m->leases[lk->lease].locks--;
	if (m->leases[lk->lease].priv)
		m->leases[lk->lease].live = false;
	lk->held = false;
	if (lk->qlen == 0)
		return;
	/* FIFO: the oldest waiter gets it, in this same command. */
	struct m_waiter w = lk->q[0];
	m_unqueue(m, n, 0, false);
	lk->held = true;
	lk->sess = w.sess;
	lk->lease = w.lease;
	lk->token = m->revision;
	assert_true(lk->token > lk->last_token);
	lk->last_token = lk->token;
	m->sess[w.sess].held++;
	m->leases[w.lease].locks++;
	if (m->leases[w.lease].priv)
		m_arm(m, w.lease);
	m->handoffs++;
	m_event(m, HASP_EVENT_LOCK_GRANTED, lock_names[n], m->sess[w.sess].id, lk->token);
}

/* A session's end drops its waiters (and their pending private leases);
 * the locks it holds stay, still naming it as holder. */
static void m_session_end(struct model *m, int s)
{
	for (int n = 0; n < M_NAMES; n++)
		for (int k = m->locks[n].qlen - 1; k >= 0; k--)
			if (m->locks[n].q[k].sess == s)
				m_unqueue(m, n, k, true);
	assert_int_equal(m->sess[s].waiting, 0);
	m->sess[s].live = false;
}

static int m_session_by_nonce(const struct model *m, uint64_t nonce)
{
	for (int i = 0; i < m->sess_count; i++)
		if (m->sess[i].live && m->sess[i].nonce == nonce)
			return i;
	return -1;
}

static void m_lease_end(struct model *m, int l)
{
	for (int n = 0; n < M_NAMES; n++)
		for (int k = m->locks[n].qlen - 1; k >= 0; k--)
			if (m->locks[n].q[k].lease == l)
				m_unqueue(m, n, k, true);
	for (int n = 0; n < M_NAMES; n++)
		if (m->locks[n].held && m->locks[n].lease == l)
			m_release(m, n);
	for (int k = 0; k < M_KEYS; k++)
		if (m->keys[k].live && m->keys[k].lease == l) {
			m->keys[k].live = false;
			m->kv_bytes -= m->keys[k].size;
			m->leases[l].keys--;
			m_event(m, HASP_EVENT_KV_DELETED, key_names[k], 0, 0);
		}
	assert_int_equal(m->leases[l].locks + m->leases[l].waiters + m->leases[l].keys, 0);
	m->leases[l].live = false;
}

/* --- Predictions: each returns the expected status and reason and
 * updates the model (using ids from the real reply where needed). --- */

struct expect {
	uint8_t status, reason;
};

static struct expect full(struct model *m, uint8_t reason)
{
	m->fulls++;
	return (struct expect){ HASP_STATUS_FULL, reason };
}

static struct expect m_acquire(struct model *m, int s, int n, uint8_t mode, uint32_t ttl, int shared,
			       uint64_t lease_id, const struct locks_reply *r)
{
	struct m_lock *lk = &m->locks[n];
	struct m_sess *ss = &m->sess[s];
	const struct locks_config *c = &m->cfg;

	if (lease_id != 0) {
		if (shared < 0 || !m->leases[shared].live)
			return (struct expect){ HASP_STATUS_LEASE_EXPIRED, 0 };
		if (m->leases[shared].priv)
			return (struct expect){ HASP_STATUS_BAD_REQUEST, LOCKS_REASON_PRIVATE_LEASE };
	}
	bool private_ttl = lease_id == 0;
	if (!lk->held) {
		if (ss->held + ss->waiting >= (int)c->locks_per_session_max)
			return full(m, LOCKS_REASON_SESSION_LOCKS_FULL);
		if (private_ttl && live_count_leases(m) >= (int)c->leases_max)
			return full(m, LOCKS_REASON_LEASES_FULL);
		if (!private_ttl && m->leases[shared].locks + m->leases[shared].waiters >=
					    (int)c->locks_per_lease_max)
			return full(m, LOCKS_REASON_LEASE_ITEMS_FULL);
		if (count_locks(m) >= (int)c->locks_max)
			return full(m, LOCKS_REASON_LOCKS_FULL);
		m_bump(m);
		int l = private_ttl ? m_new_lease(m, r->id, ttl, true) : shared;
		if (private_ttl)
			m_arm(m, l);
		lk->held = true;
		lk->sess = s;
		lk->lease = l;
		lk->token = m->revision;
		assert_true(lk->token > lk->last_token);
		lk->last_token = lk->token;
		/* Watchers see a free lock being taken. */
		m_event(m, HASP_EVENT_LOCK_GRANTED, lock_names[n], ss->id, lk->token);
		ss->held++;
		m->leases[l].locks++;
		m->grants++;
		return (struct expect){ HASP_STATUS_GRANTED, 0 };
	}
	if (lk->sess == s) {
		/* The holder asks again: GRANTED with the same token; a lock
		 * with its own TTL is re-armed with this TTL (item 16). */
		struct m_lease *held = &m->leases[lk->lease];
		if (held->priv ? !private_ttl : shared != lk->lease)
			return (struct expect){ HASP_STATUS_BAD_REQUEST, LOCKS_REASON_SELF_HELD };
		if (held->priv) {
			m_bump(m);
			held->ttl = ttl;
			m_arm(m, lk->lease);
		}
		assert_int_equal(r->token, lk->token);
		return (struct expect){ HASP_STATUS_GRANTED, LOCKS_REASON_SELF_HELD };
	}
	if (mode == HASP_ACQUIRE_TRY)
		return (struct expect){ HASP_STATUS_BUSY, 0 };
	for (int k = 0; k < lk->qlen; k++)
		if (lk->q[k].sess == s) {
			/* A re-issued WAIT updates its entry's own TTL; another
			 * lease than the entry's is refused. */
			struct m_lease *el = &m->leases[lk->q[k].lease];
			if (el->priv ? !private_ttl : lk->q[k].lease != shared)
				return (struct expect){ HASP_STATUS_BAD_REQUEST, LOCKS_REASON_QUEUED_OTHER_LEASE };
			assert_int_equal(r->position, k + 1);
			if (el->priv && el->ttl != ttl) {
				m_bump(m);
				el->ttl = ttl;
			}
			return (struct expect){ HASP_STATUS_QUEUED, LOCKS_REASON_ALREADY_QUEUED };
		}
	if (ss->held + ss->waiting >= (int)c->locks_per_session_max)
		return full(m, LOCKS_REASON_SESSION_LOCKS_FULL);
	if (private_ttl && live_count_leases(m) >= (int)c->leases_max)
		return full(m, LOCKS_REASON_LEASES_FULL);
	if (!private_ttl &&
	    m->leases[shared].locks + m->leases[shared].waiters >= (int)c->locks_per_lease_max)
		return full(m, LOCKS_REASON_LEASE_ITEMS_FULL);
	if (count_waiters(m) >= (int)c->waiters_max)
		return full(m, LOCKS_REASON_WAITERS_FULL);
	m_bump(m);
	int l = private_ttl ? m_new_lease(m, r->id, ttl, true) : shared;
	assert_true(lk->qlen < M_QUEUE);
	lk->q[lk->qlen++] = (struct m_waiter){ s, l };
	ss->waiting++;
	m->leases[l].waiters++;
	assert_int_equal(r->position, lk->qlen);
	return (struct expect){ HASP_STATUS_QUEUED, 0 };
}

/* The token alone decides; the caller's session does not matter. */
static bool m_owned(const struct model *m, int n, uint64_t token, struct expect *e)
{
	const struct m_lock *lk = &m->locks[n];

	if (!lk->held) {
		*e = (struct expect){ HASP_STATUS_NOT_HOLDER, LOCKS_REASON_NO_LOCK };
		return false;
	}
	if (lk->token != token) {
		*e = (struct expect){ HASP_STATUS_NOT_HOLDER, LOCKS_REASON_TOKEN_MISMATCH };
		return false;
	}
	return true;
}

static struct expect m_kv_put(struct model *m, int k, uint32_t size, int lease, uint64_t lease_id)
{
	struct m_key *key = &m->keys[k];
	const struct locks_config *c = &m->cfg;

	if (lease_id != 0) {
		if (lease < 0 || !m->leases[lease].live)
			return (struct expect){ HASP_STATUS_LEASE_EXPIRED, 0 };
		if (m->leases[lease].priv)
			return (struct expect){ HASP_STATUS_BAD_REQUEST, LOCKS_REASON_PRIVATE_LEASE };
	} else {
		lease = -1;
	}
	uint32_t old = key->live ? key->size : 0;
	if (!key->live && count_keys(m) >= (int)c->kv_entries_max)
		return full(m, LOCKS_REASON_KV_FULL);
	if (m->kv_bytes - old + size > c->kv_bytes_max)
		return full(m, LOCKS_REASON_KV_BYTES_FULL);
	if (lease >= 0 && (!key->live || key->lease != lease) &&
	    m->leases[lease].keys >= (int)c->keys_per_lease_max)
		return full(m, LOCKS_REASON_LEASE_ITEMS_FULL);
	m_bump(m);
	if (key->live && key->lease >= 0)
		m->leases[key->lease].keys--;
	key->live = true;
	key->lease = lease;
	if (lease >= 0)
		m->leases[lease].keys++;
	m->kv_bytes = m->kv_bytes - old + size;
	key->size = size;
	m_event(m, HASP_EVENT_KV_PUT, key_names[k], 0, 0);
	return (struct expect){ HASP_STATUS_OK, 0 };
}

/* Compares the real events with the model's, as sets keyed by type+name. */
static void check_events(const struct model *m, const struct harness *h)
{
	assert_int_equal(h->res.event_count, m->ev_count);
	bool used[256] = { false };
	for (uint32_t i = 0; i < h->res.event_count; i++) {
		const struct locks_event *ev = &h->res.events[i];
		bool found = false;
		for (int j = 0; j < m->ev_count && !found; j++) {
			const struct m_event *me = &m->ev[j];
			if (used[j] || me->type != ev->type || strlen(me->name) != ev->name_len ||
			    memcmp(me->name, ev->name, ev->name_len) != 0)
				continue;
			if (ev->type == HASP_EVENT_LOCK_RELEASED || ev->type == HASP_EVENT_LOCK_GRANTED) {
				assert_int_equal(ev->session_id, me->session_id);
				assert_int_equal(ev->token, me->token);
			}
			used[j] = found = true;
		}
		assert_true(found);
	}
}

/* The model's view of every lock and table matches the machine's. */
static void check_state(const struct model *m, const struct harness *h)
{
	struct locks_lock_info info;
	struct locks_counts counts;

	assert_true(locks_invariants_ok(&h->sm));
	for (int n = 0; n < M_NAMES; n++) {
		const struct m_lock *lk = &m->locks[n];
		bool held = locks_lock_read(&h->sm, (const uint8_t *)lock_names[n], 1, &info);
		assert_int_equal(held, lk->held);
		if (!held)
			continue;
		assert_int_equal(info.holder_session_id, m->sess[lk->sess].id);
		assert_int_equal(info.token, lk->token);
		assert_int_equal(info.lease_id, m->leases[lk->lease].id);
		assert_int_equal(info.deadline_ms, m->leases[lk->lease].deadline);
		assert_int_equal(info.waiter_count, lk->qlen);
	}
	for (int i = 0; i < m->sess_count; i++) {
		struct locks_session_info si;
		const struct m_sess *ss = &m->sess[i];
		assert_int_equal(locks_session_read(&h->sm, ss->id, &si), ss->live);
		if (!ss->live)
			continue;
		assert_int_equal(si.lock_count, ss->held);
		assert_int_equal(si.waiter_count, ss->waiting);
		assert_int_equal(si.deadline_ms, ss->deadline);
	}
	locks_counts_get(&h->sm, &counts);
	assert_int_equal(counts.locks, count_locks(m));
	assert_int_equal(counts.waiters, count_waiters(m));
	assert_int_equal(counts.sessions, live_count_sessions(m));
	assert_int_equal(counts.leases, live_count_leases(m));
	assert_int_equal(counts.kv_entries, count_keys(m));
	assert_true(counts.locks <= m->cfg.locks_max && counts.leases <= m->cfg.leases_max);
	assert_true(counts.sessions <= m->cfg.sessions_max && counts.waiters <= m->cfg.waiters_max);
	assert_int_equal(h->sm.revision, m->revision);
	assert_int_equal(h->sm.log_time_ms, m->log);
}

static int pick_session(struct model *m, struct prng *p)
{
	if (m->sess_count == 0)
		return -1;
	/* Mostly live sessions, sometimes a dead one. */
	for (int tries = 0; tries < 8; tries++) {
		int s = (int)prng_below(p, (uint64_t)m->sess_count);
		if (m->sess[s].live || prng_chance(p, 50000))
			return s;
	}
	return (int)prng_below(p, (uint64_t)m->sess_count);
}

static int pick_lease(struct model *m, struct prng *p)
{
	if (m->lease_count == 0)
		return -1;
	for (int tries = 0; tries < 16; tries++) {
		int l = (int)prng_below(p, (uint64_t)m->lease_count);
		if ((m->leases[l].live && !m->leases[l].priv) || prng_chance(p, 30000))
			return l;
	}
	return (int)prng_below(p, (uint64_t)m->lease_count);
}

/* Applies a session's earlier command again: the answer is `cached` (a
 * duplicate) or, with NULL, a refusal under the session's floor; nothing
 * changes and no event is emitted. The first apply's events are put back
 * in h->res for the event check. */
static void m_reapply(struct model *m, struct harness *h, const struct locks_cmd *cmd,
		      const struct locks_reply *cached)
{
	uint64_t rev = h->sm.revision;
	struct locks_event saved[256];
	uint32_t saved_count = h->res.event_count;
	memcpy(saved, h->res.events, saved_count * sizeof(saved[0]));
	/* The leader's query answers exactly these (a hit, the same bytes),
	 * and never a refusal under the floor. */
	struct locks_reply found;
	bool hit = locks_cached_reply_find(&h->sm, cmd->session_id, cmd->seq, cmd->digest, &found);
	assert_int_equal(hit, cached != NULL);
	if (hit)
		assert_memory_equal(&found, cached, sizeof(found));
	struct locks_cmd again_cmd = *cmd;
	const struct locks_reply *again = harness_apply(h, &again_cmd);
	m_time(m, again_cmd.term, again_cmd.now_ms);
	if (cached != NULL) {
		assert_true(h->res.duplicate);
		assert_memory_equal(again, cached, sizeof(*again));
	} else {
		assert_int_equal(again->status, HASP_STATUS_BAD_REQUEST);
		assert_int_equal(again->reason, LOCKS_REASON_SEQ_TOO_OLD);
	}
	assert_int_equal(h->sm.revision, rev);
	assert_int_equal(h->res.event_count, 0);
	memcpy(h->res.events, saved, saved_count * sizeof(saved[0]));
	h->res.event_count = saved_count;
}

/* Session-carrying command: handles SESSION_EXPIRED, duplicates and the
 * session refresh around the op-specific prediction. */
static void run_client(struct model *m, struct harness *h, struct prng *p, int s, struct locks_cmd *cmd,
		       int n, int lease, int key)
{
	struct m_sess *ss = &m->sess[s];
	uint64_t rev_before = h->sm.revision;

	cmd->session_id = ss->id;
	cmd->seq = ss->seq + 1;
	cmd->digest = cmd->seq * 0x9e3779b97f4a7c15ull | 1; /* as the node sets one */
	struct locks_reply found;
	assert_false(locks_cached_reply_find(&h->sm, cmd->session_id, cmd->seq, cmd->digest, &found));
	/* The model waits for each reply, so it may always say so. */
	if (prng_chance(p, 500000))
		cmd->flags |= LOCKS_CMD_SEQ_FLOOR;
	const struct locks_reply *r = harness_apply(h, cmd);
	m_time(m, cmd->term, cmd->now_ms);
	if (!ss->live) {
		assert_int_equal(r->status, HASP_STATUS_SESSION_EXPIRED);
		assert_int_equal(h->sm.revision, rev_before);
		return;
	}
	struct expect e = { 0, 0 };
	switch (cmd->op) {
	case LOCKS_OP_ACQUIRE:
		e = m_acquire(m, s, n, cmd->mode, cmd->ttl_ms, lease, cmd->lease_id, r);
		break;
	case LOCKS_OP_RELEASE:
		if (m_owned(m, n, cmd->token, &e)) {
			m->foreign_releases += m->locks[n].sess != s;
			m_bump(m);
			m_release(m, n);
			e = (struct expect){ HASP_STATUS_OK, 0 };
		}
		break;
	case LOCKS_OP_RENEW:
		if (m_owned(m, n, cmd->token, &e)) {
			struct m_lease *ls = &m->leases[m->locks[n].lease];
			if (!ls->priv && cmd->ttl_ms != 0 && cmd->ttl_ms != ls->ttl) {
				e = (struct expect){ HASP_STATUS_BAD_REQUEST, LOCKS_REASON_BAD_FIELDS };
				break;
			}
			m_bump(m);
			if (cmd->ttl_ms != 0)
				ls->ttl = cmd->ttl_ms;
			m_arm(m, m->locks[n].lease);
			e = (struct expect){ HASP_STATUS_OK, 0 };
		}
		break;
	case LOCKS_OP_LEASE_GRANT:
		if (live_count_leases(m) >= (int)m->cfg.leases_max) {
			e = full(m, LOCKS_REASON_LEASES_FULL);
			break;
		}
		m_bump(m);
		m_new_lease(m, r->id, cmd->ttl_ms, false);
		e = (struct expect){ HASP_STATUS_OK, 0 };
		break;
	case LOCKS_OP_LEASE_KEEPALIVE:
	case LOCKS_OP_LEASE_REVOKE:
		if (lease < 0 || !m->leases[lease].live) {
			e = (struct expect){ HASP_STATUS_LEASE_EXPIRED, 0 };
		} else if (m->leases[lease].priv) {
			e = (struct expect){ HASP_STATUS_BAD_REQUEST, LOCKS_REASON_PRIVATE_LEASE };
		} else {
			m_bump(m);
			if (cmd->op == LOCKS_OP_LEASE_KEEPALIVE)
				m_arm(m, lease);
			else
				m_lease_end(m, lease);
			e = (struct expect){ HASP_STATUS_OK, 0 };
		}
		break;
	case LOCKS_OP_SESSION_KEEPALIVE:
		m_bump(m);
		e = (struct expect){ HASP_STATUS_OK, 0 };
		break;
	case LOCKS_OP_SESSION_CLOSE:
		m_bump(m);
		m_session_end(m, s);
		e = (struct expect){ HASP_STATUS_OK, 0 };
		break;
	case LOCKS_OP_KV_PUT:
		e = m_kv_put(m, key, cmd->value_len + cmd->name_len, lease, cmd->lease_id);
		break;
	case LOCKS_OP_KV_DELETE:
		if (!m->keys[key].live) {
			e = (struct expect){ HASP_STATUS_NOT_FOUND, 0 };
			break;
		}
		m_bump(m);
		if (m->keys[key].lease >= 0)
			m->leases[m->keys[key].lease].keys--;
		m->keys[key].live = false;
		m->kv_bytes -= m->keys[key].size;
		m_event(m, HASP_EVENT_KV_DELETED, key_names[key], 0, 0);
		e = (struct expect){ HASP_STATUS_OK, 0 };
		break;
	default:
		fail();
	}
	if (r->status != e.status || r->reason != e.reason)
		fprintf(stderr, "op %u: got %s/%u, model %s/%u\n", cmd->op, hasp_status_name(r->status),
			r->reason, hasp_status_name(e.status), e.reason);
	assert_int_equal(r->status, e.status);
	assert_int_equal(r->reason, e.reason);
	assert_false(h->res.duplicate);
	if (cmd->op == LOCKS_OP_SESSION_CLOSE)
		return;
	ss->seq = cmd->seq;
	ss->deadline = m->log + ss->ttl; /* every command of a session refreshes it */
	if (cmd->flags & LOCKS_CMD_SEQ_FLOOR)
		ss->floor = cmd->seq;
	ss->has_prev = ss->has_last;
	ss->prev_cmd = ss->last_cmd;
	ss->prev_reply = ss->last_reply;
	ss->has_last = true;
	ss->last_cmd = *cmd;
	ss->last_reply = *r;

	/* Sometimes retry at once: identical reply, nothing changes. */
	if (prng_chance(p, 100000))
		m_reapply(m, h, &ss->last_cmd, &ss->last_reply);
	/* Sometimes a late duplicate of the command before: its cached reply,
	 * or, once a floor passed it, refused; nothing changes either way. */
	if (ss->has_prev && prng_chance(p, 100000)) {
		bool floored = ss->prev_cmd.seq < ss->floor;
		m_reapply(m, h, &ss->prev_cmd, floored ? NULL : &ss->prev_reply);
		m->below_floor += floored;
	}
}

static void step(struct model *m, struct harness *h, struct prng *p)
{
	m->changed = false;
	m->ev_count = 0;
	uint64_t rev_before = m->revision;

	/* Time: the leader's clock moves; now and then a new leader whose
	 * clock reads anything. */
	if (prng_chance(p, 300000))
		h->now_ms += prng_below(p, 300);
	if (prng_chance(p, 5000)) {
		h->term++;
		h->now_ms = prng_below(p, 1000000000);
	}

	uint64_t kind = prng_below(p, 100);
	int s = pick_session(m, p);
	int n = (int)prng_below(p, M_NAMES);
	struct locks_cmd cmd = { 0 };
	const struct locks_reply *r;

	if (s < 0 || kind < 4) { /* open a session, often with a reused nonce */
		cmd.op = LOCKS_OP_SESSION_OPEN;
		cmd.ttl_ms = (uint32_t)prng_range(p, 200, 3000);
		cmd.nonce = prng_chance(p, 600000) ? prng_range(p, 1, 8) : 0;
		/* One identity that may release its other sessions' locks: the
		 * model's token-only ownership (tests/locks/test_locks.c covers
		 * owners and session-bound release). */
		cmd.owner = 1;
		cmd.flags = LOCKS_CMD_OWNER_RELEASE;
		int same = cmd.nonce != 0 ? m_session_by_nonce(m, cmd.nonce) : -1;
		/* The leader's query finds exactly the retried opens. */
		struct locks_reply found;
		assert_int_equal(locks_open_reply_find(&h->sm, cmd.nonce, cmd.owner, &found), same >= 0);
		if (same >= 0)
			assert_memory_equal(&found, &m->sess[same].open_reply, sizeof(found));
		r = harness_apply(h, &cmd);
		m_time(m, cmd.term, cmd.now_ms);
		if (same >= 0) {
			/* A retried open: the first open's reply, nothing else. */
			assert_true(h->res.duplicate);
			assert_memory_equal(r, &m->sess[same].open_reply, sizeof(*r));
			m->dup_opens++;
		} else if (live_count_sessions(m) >= (int)m->cfg.sessions_max) {
			assert_int_equal(r->status, HASP_STATUS_FULL);
			m->fulls++;
		} else {
			assert_int_equal(r->status, HASP_STATUS_OK);
			assert_false(h->res.duplicate);
			m_bump(m);
			assert_true(m->sess_count < M_SESSIONS_EVER);
			m->sess[m->sess_count++] = (struct m_sess){
				.id = r->id, .nonce = cmd.nonce, .open_reply = *r, .live = true,
				.ttl = cmd.ttl_ms, .deadline = m->log + cmd.ttl_ms,
			};
		}
	} else if (kind < 40) { /* acquire */
		cmd = harness_cmd(LOCKS_OP_ACQUIRE, 0, 0, lock_names[n]);
		cmd.mode = prng_chance(p, 600000) ? HASP_ACQUIRE_WAIT : HASP_ACQUIRE_TRY;
		int lease = -1;
		if (prng_chance(p, 350000) && (lease = pick_lease(m, p)) >= 0)
			cmd.lease_id = m->leases[lease].id;
		else
			cmd.ttl_ms = (uint32_t)prng_range(p, 10, 800);
		run_client(m, h, p, s, &cmd, n, lease, 0);
	} else if (kind < 58) { /* release, usually with the right token */
		cmd = harness_cmd(LOCKS_OP_RELEASE, 0, 0, lock_names[n]);
		cmd.token = m->locks[n].token + (prng_chance(p, 200000) ? 1 : 0);
		if (cmd.token == 0)
			cmd.token = 1;
		/* From the holder's session, or from any other (the token is the
		 * capability; the holder's session may have ended). */
		if (m->locks[n].held && m->sess[m->locks[n].sess].live && prng_chance(p, 500000))
			s = m->locks[n].sess;
		run_client(m, h, p, s, &cmd, n, -1, 0);
	} else if (kind < 63) { /* renew */
		cmd = harness_cmd(LOCKS_OP_RENEW, 0, 0, lock_names[n]);
		cmd.token = m->locks[n].token ? m->locks[n].token : 1;
		if (prng_chance(p, 100000))
			cmd.token++;
		cmd.ttl_ms = prng_chance(p, 500000) ? 0 : (uint32_t)prng_range(p, 10, 800);
		if (m->locks[n].held && m->sess[m->locks[n].sess].live && prng_chance(p, 500000))
			s = m->locks[n].sess;
		run_client(m, h, p, s, &cmd, n, -1, 0);
	} else if (kind < 68) { /* lease grant */
		cmd = harness_cmd(LOCKS_OP_LEASE_GRANT, 0, 0, NULL);
		cmd.ttl_ms = (uint32_t)prng_range(p, 50, 2000);
		run_client(m, h, p, s, &cmd, 0, -1, 0);
	} else if (kind < 74) { /* lease keepalive / revoke */
		int lease = pick_lease(m, p);
		cmd = harness_cmd(prng_chance(p, 700000) ? LOCKS_OP_LEASE_KEEPALIVE : LOCKS_OP_LEASE_REVOKE,
				  0, 0, NULL);
		cmd.lease_id = lease >= 0 ? m->leases[lease].id : 12345;
		run_client(m, h, p, s, &cmd, 0, lease, 0);
	} else if (kind < 82) { /* the leader expires what is due (or a stale id) */
		uint64_t ids[4];
		/* The leader's view may run ahead of the log time the EXPIRE gets
		 * (it decided on a later reading): apply must re-check. */
		uint64_t ahead = h->now_ms + prng_below(p, 100);
		uint32_t due = locks_leases_due(&h->sm, locks_log_time(&h->sm, h->term, ahead), ids, 4);
		int lease = -1;
		if (due > 0 && prng_chance(p, 800000)) {
			lease = m_lease_by_id(m, ids[prng_below(p, due)]);
			assert_true(lease >= 0);
		} else {
			lease = pick_lease(m, p);
		}
		cmd.op = LOCKS_OP_LEASE_EXPIRE;
		cmd.lease_id = lease >= 0 ? m->leases[lease].id : 777;
		r = harness_apply(h, &cmd);
		m_time(m, cmd.term, cmd.now_ms);
		if (lease < 0 || !m->leases[lease].live) {
			assert_int_equal(r->status, HASP_STATUS_NOT_FOUND);
		} else if (m->leases[lease].deadline > m->log) {
			assert_int_equal(r->reason, LOCKS_REASON_NOT_DUE);
		} else {
			assert_int_equal(r->status, HASP_STATUS_OK);
			assert_int_equal(r->reason, LOCKS_REASON_NONE);
			m_bump(m);
			m_lease_end(m, lease);
		}
	} else if (kind < 86) { /* session expiry, keepalive, close */
		uint64_t c = prng_below(p, 3);
		if (c == 0) {
			cmd.op = LOCKS_OP_SESSION_EXPIRE;
			cmd.session_id = m->sess[s].id;
			r = harness_apply(h, &cmd);
			m_time(m, cmd.term, cmd.now_ms);
			if (!m->sess[s].live) {
				assert_int_equal(r->status, HASP_STATUS_NOT_FOUND);
			} else if (m->sess[s].deadline > m->log) {
				assert_int_equal(r->reason, LOCKS_REASON_NOT_DUE);
			} else {
				assert_int_equal(r->reason, LOCKS_REASON_NONE);
				m_bump(m);
				m_session_end(m, s);
			}
		} else {
			cmd = harness_cmd(c == 1 ? LOCKS_OP_SESSION_KEEPALIVE : LOCKS_OP_SESSION_CLOSE, 0, 0, NULL);
			if (c == 2 && !prng_chance(p, 300000))
				cmd.op = LOCKS_OP_SESSION_KEEPALIVE;
			run_client(m, h, p, s, &cmd, 0, -1, 0);
		}
	} else if (kind < 88) { /* operator force-release */
		cmd = harness_cmd(LOCKS_OP_FORCE_RELEASE, 0, 0, lock_names[n]);
		r = harness_apply(h, &cmd);
		m_time(m, cmd.term, cmd.now_ms);
		if (!m->locks[n].held) {
			assert_int_equal(r->status, HASP_STATUS_NOT_FOUND);
		} else {
			assert_int_equal(r->status, HASP_STATUS_OK);
			m_bump(m);
			m_release(m, n);
		}
	} else if (kind < 96) { /* KV */
		int k = (int)prng_below(p, M_KEYS);
		static const uint8_t value[32] = "0123456789abcdefghijklmnopqrstu";
		if (prng_chance(p, 700000)) {
			cmd = harness_cmd(LOCKS_OP_KV_PUT, 0, 0, key_names[k]);
			cmd.value = value;
			cmd.value_len = (uint16_t)prng_below(p, 20);
			int lease = -1;
			if (prng_chance(p, 400000) && (lease = pick_lease(m, p)) >= 0)
				cmd.lease_id = m->leases[lease].id;
			run_client(m, h, p, s, &cmd, 0, lease, k);
		} else {
			cmd = harness_cmd(LOCKS_OP_KV_DELETE, 0, 0, key_names[k]);
			run_client(m, h, p, s, &cmd, 0, -1, k);
		}
	} else { /* a tick */
		cmd.op = LOCKS_OP_TICK;
		r = harness_apply(h, &cmd);
		m_time(m, cmd.term, cmd.now_ms);
		assert_int_equal(r->status, HASP_STATUS_OK);
	}
	assert_int_equal(m->revision, rev_before + (m->changed ? 1 : 0));
	check_events(m, h);
	check_state(m, h);
}

static void run_seed(uint64_t seed)
{
	struct harness *h = malloc(sizeof(*h)), *spare = NULL, *shadow = NULL;
	uint32_t copies = 0, partial_copies = 0;
	struct model *m = calloc(1, sizeof(*m));
	struct prng p;

	assert_non_null(m);
	assert_non_null(h);
	locks_config_default(&m->cfg);
	m->cfg.locks_max = 7;
	m->cfg.leases_max = 12;
	m->cfg.sessions_max = 5;
	m->cfg.waiters_max = 9;
	m->cfg.kv_entries_max = 4;
	m->cfg.kv_bytes_max = 48;
	m->cfg.lock_name_bytes_max = 7; /* small arenas: compactions happen often */
	m->cfg.locks_per_lease_max = 3;
	m->cfg.keys_per_lease_max = 2;
	m->cfg.locks_per_session_max = 4;
	m->cfg.session_window = 4;
	harness_init_cfg(h, &m->cfg);
	prng_seed(&p, seed);
	for (int i = 0; i < STEPS; i++) {
		step(m, h, &p);
		/* Now and then the machine goes on as a copy of itself (what a
		 * snapshot is written from, locks_copy; the original prefaulted
		 * first, as the node does): the copy must be whole,
		 * derived state included, so the model must not notice. The
		 * machine left behind is the next copy's destination: reused
		 * with an older state, larger or smaller. */
		if (i % 997 == 250) {
			if (spare == NULL) {
				spare = malloc(sizeof(*spare));
				assert_non_null(spare);
				harness_init_cfg(spare, &m->cfg);
			}
			locks_prefault(&h->sm); /* changes nothing the model could see */
			locks_copy(&spare->sm, &h->sm);
			assert_true(locks_invariants_ok(&spare->sm));
			assert_same_snapshot(&h->sm, &spare->sm);
			spare->index = h->index;
			spare->term = h->term;
			spare->now_ms = h->now_ms;
			struct harness *t = h;
			h = spare;
			spare = t;
			copies++;
		}
		/* Often, a shadow copy kept up to date: while it is still the
		 * last copy of the machine, only the reply records written since
		 * are carried; it must be whole all the same (the model has
		 * checked the machine, the snapshot compares the two). */
		if (i % 41 == 7) {
			if (shadow == NULL) {
				shadow = malloc(sizeof(*shadow));
				assert_non_null(shadow);
				harness_init_cfg(shadow, &m->cfg);
			}
			uint64_t whole = (uint64_t)slots_high_water(&h->sm.session_slots) *
					 m->cfg.session_window;
			uint64_t carried = locks_copy(&shadow->sm, &h->sm);
			partial_copies += carried < whole;
			assert_true(locks_invariants_ok(&shadow->sm));
			assert_same_snapshot(&h->sm, &shadow->sm);
			assert_memory_equal(h->sm.replies, shadow->sm.replies,
					    (size_t)m->cfg.sessions_max * m->cfg.session_window *
						    sizeof(struct locks_cached_reply));
		}
		/* Now and then a follower installs a snapshot: it must continue
		 * exactly like the machine it came from. */
		if (i % 997 == 500) {
			size_t size, size2;
			struct harness *h2 = malloc(sizeof(*h2));
			uint8_t *a = malloc(locks_snapshot_size(&h->sm));
			assert_non_null(h2);
			assert_int_equal(locks_snapshot_write(&h->sm, a, locks_snapshot_size(&h->sm), &size), 0);
			harness_init_cfg(h2, &m->cfg);
			assert_int_equal(locks_snapshot_restore(&h2->sm, a, size), 0);
			uint8_t *b = malloc(size);
			assert_int_equal(locks_snapshot_write(&h2->sm, b, size, &size2), 0);
			assert_memory_equal(a, b, size);
			h2->index = h->index;
			h2->term = h->term;
			h2->now_ms = h->now_ms;
			harness_deinit(h);
			free(h);
			h = h2;
			free(a);
			free(b);
		}
	}
	printf("seed=%llu steps=%d grants=%llu handoffs=%llu full=%llu revision=%llu "
	       "name_compactions=%llu dup_opens=%llu foreign_releases=%llu orphan_releases=%llu "
	       "below_floor=%llu\n",
	       (unsigned long long)seed, STEPS, (unsigned long long)m->grants,
	       (unsigned long long)m->handoffs, (unsigned long long)m->fulls,
	       (unsigned long long)m->revision,
	       (unsigned long long)h->sm.lock_names.compaction_count,
	       (unsigned long long)m->dup_opens, (unsigned long long)m->foreign_releases,
	       (unsigned long long)m->orphan_releases, (unsigned long long)m->below_floor);
	/* The runs must reach the interesting states. */
	assert_true(m->handoffs > 10);
	assert_true(m->fulls > 10);
	assert_true(m->dup_opens > 10);
	assert_true(m->foreign_releases > 10);
	assert_true(m->orphan_releases > 10);
	assert_true(m->below_floor > 10);
	assert_true(copies > 1); /* a reused destination too */
	assert_true(partial_copies > 10);
	if (shadow != NULL) {
		harness_deinit(shadow);
		free(shadow);
	}
	if (spare != NULL) {
		harness_deinit(spare);
		free(spare);
	}
	harness_deinit(h);
	free(h);
	free(m);
}

static void test_random_commands_match_reference_model(void **state)
{
	(void)state;
	uint64_t base = test_util_seed(20261122);

	for (uint64_t i = 0; i < SEEDS; i++)
		run_seed(base + i);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_commands_match_reference_model),
	};

	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
