/*
 * The lock state machine against the stories users of distributed locks
 * tell (docs/STATE_MACHINE.md; background: Kleppmann's GC pause and fencing,
 * ZooKeeper's herd effect, etcd's leases and their failover bugs).
 */
#include <stdio.h>
#include <string.h>

#include "hasp/errors.h"
#include "hasp/fence.h"
#include "locks/internal.h"
#include "locks/locks.h"
#include "locks/session.h"
#include "locks/snapshot.h"
#include "tests/locks/locks_harness.h"
#include "tests/locks/snapshot_v3_rich.h"
#include "tests/locks/snapshot_v4_rich.h"
#include "tests/test_util.h"

#define TRY HASP_ACQUIRE_TRY
#define WAIT HASP_ACQUIRE_WAIT

/* Kleppmann's story: A pauses past its TTL, the leader's EXPIRE commits, B
 * acquires with a larger token and writes; A's late write is refused by the
 * fenced resource. */
static void test_gc_pause_late_write_is_fenced(void **state)
{
	(void)state;
	struct harness h;
	struct hasp_fence storage;
	uint64_t due[4];

	harness_init(&h);
	hasp_fence_init(&storage);
	uint64_t a = harness_session(&h, 60000);
	uint64_t b = harness_session(&h, 60000);

	const struct locks_reply *r = harness_acquire(&h, a, 1, "billing", TRY, 100, 0);
	assert_int_equal(r->status, HASP_STATUS_GRANTED);
	uint64_t token_a = r->token, lease_a = r->id;
	assert_true(hasp_fence_admit(&storage, token_a));
	/* The leader's next timer: A's lease (sessions live longer). */
	assert_int_equal(locks_deadline_min(&h.sm), r->deadline_ms);

	/* A pauses. The leader's clock passes the deadline; it asks which leases
	 * are due and proposes EXPIRE for them. */
	h.now_ms += 99;
	assert_int_equal(locks_leases_due(&h.sm, locks_log_time(&h.sm, h.term, h.now_ms), due, 4), 0);
	h.now_ms += 1;
	uint64_t log_now = locks_log_time(&h.sm, h.term, h.now_ms);
	assert_int_equal(locks_leases_due(&h.sm, log_now, due, 4), 1);
	assert_int_equal(due[0], lease_a);
	r = harness_expire(&h, lease_a);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(r->reason, LOCKS_REASON_NONE);
	assert_int_equal(h.res.event_count, 1);
	assert_int_equal(h.res.events[0].type, HASP_EVENT_LOCK_RELEASED);
	assert_int_equal(h.res.events[0].cause, LOCKS_CAUSE_EXPIRE);
	assert_int_equal(h.res.events[0].token, token_a);

	r = harness_acquire(&h, b, 1, "billing", TRY, 100, 0);
	assert_int_equal(r->status, HASP_STATUS_GRANTED);
	uint64_t token_b = r->token;
	assert_true(token_b > token_a);
	assert_true(hasp_fence_admit(&storage, token_b));

	/* A wakes up and writes with its old token: refused. */
	assert_false(hasp_fence_admit(&storage, token_a));
	assert_false(locks_check(&h.sm, (const uint8_t *)"billing", 7, token_a));
	assert_true(locks_check(&h.sm, (const uint8_t *)"billing", 7, token_b));
	/* And A cannot release or renew B's lock with it. */
	assert_int_equal(harness_release(&h, a, 2, "billing", token_a)->status, HASP_STATUS_NOT_HOLDER);
	assert_int_equal(harness_renew(&h, a, 3, "billing", token_a, 100)->status, HASP_STATUS_NOT_HOLDER);
	harness_deinit(&h);
}

/* A token that is not the lock's current one is NOT_HOLDER, whichever
 * session presents it: the holder's own session with a wrong or stale
 * token, another session, token 0, and a lock nobody holds. */
static void test_wrong_token_is_not_holder_from_any_session(void **state)
{
	(void)state;
	struct harness h;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	uint64_t b = harness_session(&h, 60000);
	uint64_t stale = harness_acquire(&h, a, 1, "db", TRY, 1000, 0)->token;
	assert_int_equal(harness_release(&h, a, 2, "db", stale)->status, HASP_STATUS_OK);
	uint64_t token = harness_acquire(&h, a, 3, "db", TRY, 1000, 0)->token;
	assert_true(token > stale);
	uint64_t rev = h.sm.revision;

	const uint64_t wrong[] = { token + 1, token - 1, stale, 0 };
	uint64_t seq_a = 4, seq_b = 1;
	for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
		const struct locks_reply *r = harness_release(&h, a, seq_a++, "db", wrong[i]);
		assert_int_equal(r->status, HASP_STATUS_NOT_HOLDER);
		assert_int_equal(r->reason, LOCKS_REASON_TOKEN_MISMATCH);
		r = harness_release(&h, b, seq_b++, "db", wrong[i]);
		assert_int_equal(r->status, HASP_STATUS_NOT_HOLDER);
		assert_int_equal(r->reason, LOCKS_REASON_TOKEN_MISMATCH);
		r = harness_renew(&h, a, seq_a++, "db", wrong[i], 1000);
		assert_int_equal(r->status, HASP_STATUS_NOT_HOLDER);
		r = harness_renew(&h, b, seq_b++, "db", wrong[i], 0);
		assert_int_equal(r->status, HASP_STATUS_NOT_HOLDER);
	}
	const struct locks_reply *r = harness_release(&h, b, seq_b++, "nobody", token);
	assert_int_equal(r->status, HASP_STATUS_NOT_HOLDER);
	assert_int_equal(r->reason, LOCKS_REASON_NO_LOCK);
	assert_int_equal(harness_renew(&h, a, seq_a++, "nobody", token, 0)->reason, LOCKS_REASON_NO_LOCK);
	assert_int_equal(h.sm.revision, rev); /* refusals change nothing */
	assert_true(locks_check(&h.sm, (const uint8_t *)"db", 2, token));

	/* The holder with the right token still can. */
	r = harness_renew(&h, a, seq_a++, "db", token, 5000);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(r->ttl_ms, 5000);
	assert_int_equal(r->deadline_ms, h.sm.log_time_ms + 5000);
	assert_int_equal(harness_release(&h, a, seq_a++, "db", token)->status, HASP_STATUS_OK);
	struct locks_lock_info info;
	assert_false(locks_lock_read(&h.sm, (const uint8_t *)"db", 2, &info));
	harness_deinit(&h);
}

/* RELEASE needs the token AND the holder: the holding session, or another
 * session of the same owner (identity) opened with OWNER_RELEASE. Another
 * identity that read the token gets NOT_HOLDER (not_owner) and changes
 * nothing (security issue, attack 1: the token alone released anyone's
 * lock). */
static void test_release_by_token_needs_the_holder_or_its_owner(void **state)
{
	(void)state;
	struct harness h;
	struct locks_session_info si;

	harness_init(&h);
	uint64_t a = harness_open_owned(&h, 60000, 0, 7, LOCKS_CMD_OWNER_RELEASE, 0)->id;
	uint64_t b = harness_open_owned(&h, 60000, 0, 7, LOCKS_CMD_OWNER_RELEASE, 0)->id;
	uint64_t c = harness_open_owned(&h, 60000, 0, 8, LOCKS_CMD_OWNER_RELEASE, 0)->id;
	uint64_t x = harness_open_owned(&h, 60000, 0, 9, LOCKS_CMD_OWNER_RELEASE, 0)->id;
	uint64_t token = harness_acquire(&h, a, 1, "job", TRY, 30000, 0)->token;
	assert_int_equal(harness_acquire(&h, c, 1, "job", WAIT, 30000, 0)->status, HASP_STATUS_QUEUED);
	assert_true(locks_session_read(&h.sm, a, &si));
	assert_int_equal(si.lock_count, 1);

	/* Another identity with the right token: refused, nothing changes. */
	uint64_t rev = h.sm.revision;
	const struct locks_reply *r = harness_release(&h, x, 1, "job", token);
	assert_int_equal(r->status, HASP_STATUS_NOT_HOLDER);
	assert_int_equal(r->reason, LOCKS_REASON_NOT_OWNER);
	assert_int_equal(h.sm.revision, rev);
	assert_true(locks_check(&h.sm, (const uint8_t *)"job", 3, token));
	assert_int_equal(h.sm.stats.not_owner, 1);

	/* A session of the holder's identity may release it. */
	r = harness_release(&h, b, 1, "job", token);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(r->token, token);
	const struct locks_event *rel = harness_event(&h, HASP_EVENT_LOCK_RELEASED, 0);
	assert_non_null(rel);
	assert_int_equal(rel->session_id, a);
	assert_int_equal(rel->cause, LOCKS_CAUSE_RELEASE);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_LOCK_GRANTED), 1);
	assert_int_equal(harness_event(&h, HASP_EVENT_LOCK_GRANTED, 0)->session_id, c);
	assert_true(locks_session_read(&h.sm, a, &si));
	assert_int_equal(si.lock_count, 0);
	assert_true(locks_session_read(&h.sm, c, &si));
	assert_int_equal(si.lock_count, 1);
	assert_int_equal(si.waiter_count, 0);
	/* The same token again is stale: the lock has a new grant. */
	assert_int_equal(harness_release(&h, a, 2, "job", token)->status, HASP_STATUS_NOT_HOLDER);
	harness_deinit(&h);
}

/* Without OWNER_RELEASE only the holding session may release or renew, even
 * from its own identity; sessions without an owner (entries from before
 * owners) never match one another. */
static void test_release_without_owner_release_is_session_bound(void **state)
{
	(void)state;
	struct harness h;

	harness_init(&h);
	uint64_t a = harness_open_owned(&h, 60000, 0, 7, 0, 0)->id;
	uint64_t b = harness_open_owned(&h, 60000, 0, 7, 0, 0)->id;
	uint64_t n1 = harness_session(&h, 60000);
	uint64_t n2 = harness_session(&h, 60000);
	uint64_t token = harness_acquire(&h, a, 1, "job", TRY, 30000, 0)->token;
	assert_int_equal(harness_release(&h, b, 1, "job", token)->reason, LOCKS_REASON_NOT_OWNER);
	assert_int_equal(harness_renew(&h, b, 2, "job", token, 10)->reason, LOCKS_REASON_NOT_OWNER);
	uint64_t t2 = harness_acquire(&h, n1, 1, "other", TRY, 30000, 0)->token;
	assert_int_equal(harness_release(&h, n2, 1, "other", t2)->reason, LOCKS_REASON_NOT_OWNER);
	assert_int_equal(harness_release(&h, a, 2, "job", token)->status, HASP_STATUS_OK);
	assert_int_equal(harness_release(&h, n1, 2, "other", t2)->status, HASP_STATUS_OK);
	harness_deinit(&h);
}

/* RENEW by token from another session of the holder's identity extends the
 * holder's lease (and may change a private lease's TTL); the holder stays
 * the acquiring session. Another identity cannot renew it, not even to
 * shorten it (attack 1: a 10 ms renew by a stranger). */
static void test_renew_by_token_from_the_holders_identity(void **state)
{
	(void)state;
	struct harness h;
	struct locks_lock_info info;

	harness_init(&h);
	uint64_t a = harness_open_owned(&h, 60000, 0, 7, LOCKS_CMD_OWNER_RELEASE, 0)->id;
	uint64_t b = harness_open_owned(&h, 60000, 0, 7, LOCKS_CMD_OWNER_RELEASE, 0)->id;
	uint64_t x = harness_open_owned(&h, 60000, 0, 9, LOCKS_CMD_OWNER_RELEASE, 0)->id;
	const struct locks_reply *r = harness_acquire(&h, a, 1, "job", TRY, 1000, 0);
	uint64_t token = r->token, lease = r->id;
	h.now_ms += 900;
	uint64_t rev = h.sm.revision;
	r = harness_renew(&h, x, 1, "job", token, 10);
	assert_int_equal(r->status, HASP_STATUS_NOT_HOLDER);
	assert_int_equal(r->reason, LOCKS_REASON_NOT_OWNER);
	assert_int_equal(h.sm.revision, rev);
	r = harness_renew(&h, b, 1, "job", token, 4000);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(r->token, token);
	assert_int_equal(r->id, lease);
	assert_int_equal(r->ttl_ms, 4000);
	assert_int_equal(r->deadline_ms, h.sm.log_time_ms + 4000);
	assert_int_equal(h.sm.revision, rev + 1);
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"job", 3, &info));
	assert_int_equal(info.holder_session_id, a);
	assert_int_equal(info.holder_owner, 7);
	assert_int_equal(info.token, token);
	assert_int_equal(info.deadline_ms, h.sm.log_time_ms + 4000);
	/* The old deadline passed; the renewed lease is not due. */
	h.now_ms += 200;
	assert_int_equal(harness_expire(&h, lease)->reason, LOCKS_REASON_NOT_DUE);
	assert_true(locks_check(&h.sm, (const uint8_t *)"job", 3, token));
	harness_deinit(&h);
}

/* The reply cache answers only a retransmission: the same seq with another
 * request digest is refused and does not return the cached reply (attack
 * 5: an attacker's request at the victim's next seq made the victim's real
 * request receive the attacker's OK unapplied). */
static void test_same_seq_with_other_digest_is_refused(void **state)
{
	(void)state;
	struct harness h;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	struct locks_cmd c = harness_cmd(LOCKS_OP_KV_PUT, a, 1, "cfg");
	c.value = (const uint8_t *)"v1";
	c.value_len = 2;
	c.digest = 0x1111;
	assert_int_equal(harness_apply(&h, &c)->status, HASP_STATUS_OK);
	uint64_t rev = h.sm.revision;
	c.value = (const uint8_t *)"v2";
	c.digest = 0x2222;
	const struct locks_reply *r = harness_apply(&h, &c);
	assert_int_equal(r->status, HASP_STATUS_BAD_REQUEST);
	assert_int_equal(r->reason, LOCKS_REASON_REQUEST_MISMATCH);
	assert_false(h.res.duplicate);
	assert_int_equal(h.sm.revision, rev);
	/* The real retransmission still gets its cached reply. */
	c.value = (const uint8_t *)"v1";
	c.digest = 0x1111;
	assert_int_equal(harness_apply(&h, &c)->status, HASP_STATUS_OK);
	assert_true(h.res.duplicate);
	harness_deinit(&h);
}

/* A seq far ahead of the session's highest is refused and does not move
 * the window (attack 4: one datagram with seq 2^63 made every later request
 * of the victim "too old"). */
static void test_seq_jump_is_refused_and_moves_nothing(void **state)
{
	(void)state;
	struct harness h;
	struct locks_session_info si;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	assert_int_equal(harness_acquire(&h, a, 1, "x", TRY, 30000, 0)->status, HASP_STATUS_GRANTED);
	const struct locks_reply *r = harness_acquire(&h, a, 1ull << 63, "y", TRY, 30000, 0);
	assert_int_equal(r->status, HASP_STATUS_BAD_REQUEST);
	assert_int_equal(r->reason, LOCKS_REASON_SEQ_JUMP);
	/* Counted by reason (hasp_reply_reasons_total), nothing else. */
	assert_int_equal(h.sm.stats.by_reason[LOCKS_REASON_SEQ_JUMP], 1);
	assert_int_equal(h.sm.stats.by_reason[LOCKS_REASON_REQUEST_MISMATCH], 0);
	assert_string_equal(locks_reason_name(LOCKS_REASON_SEQ_JUMP), "seq_jump");
	assert_string_equal(locks_reason_name(LOCKS_REASON_COUNT), "unknown");
	for (uint32_t i = 0; i < LOCKS_REASON_COUNT; i++) /* every reason has its name */
		assert_string_not_equal(locks_reason_name(i), "unknown");
	assert_true(locks_session_read(&h.sm, a, &si));
	assert_int_equal(si.seq_max, 1);
	assert_int_equal(harness_acquire(&h, a, 2, "y", TRY, 30000, 0)->status, HASP_STATUS_GRANTED);
	/* Up to the bound is a legitimate gap (reads take numbers too). */
	assert_int_equal(harness_acquire(&h, a, 2 + LOCKS_SEQ_JUMP_MAX, "z", TRY, 30000, 0)->status,
			 HASP_STATUS_GRANTED);
	harness_deinit(&h);
}

/* An owner's session quota bounds its sessions (attack 8: one sender
 * filled the table); other owners still open. A nonce of a live session
 * of another owner opens nothing and reveals nothing. */
static void test_owner_quota_and_nonce_of_another_owner(void **state)
{
	(void)state;
	struct harness h;

	harness_init(&h);
	assert_int_equal(harness_open_owned(&h, 60000, 11, 7, 0, 2)->status, HASP_STATUS_OK);
	assert_int_equal(harness_open_owned(&h, 60000, 12, 7, 0, 2)->status, HASP_STATUS_OK);
	const struct locks_reply *r = harness_open_owned(&h, 60000, 13, 7, 0, 2);
	assert_int_equal(r->status, HASP_STATUS_FULL);
	assert_int_equal(r->reason, LOCKS_REASON_OWNER_SESSIONS_FULL);
	/* A retried open of a live session is still answered. */
	r = harness_open_owned(&h, 60000, 12, 7, 0, 2);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_true(h.res.duplicate);
	assert_int_equal(harness_open_owned(&h, 60000, 14, 8, 0, 2)->status, HASP_STATUS_OK);
	uint32_t sessions = h.sm.session_slots.used_count;
	r = harness_open_owned(&h, 60000, 11, 8, 0, 2);
	assert_int_equal(r->status, HASP_STATUS_BAD_REQUEST);
	assert_int_equal(r->reason, LOCKS_REASON_NONCE_IN_USE);
	assert_int_equal(r->id, 0);
	assert_int_equal(h.sm.session_slots.used_count, sessions);
	harness_deinit(&h);
}

/* ACQUIRE by the session that holds the lock is answered GRANTED with the
 * same token and re-arms a lock's own TTL from this command (correctness
 * issue, item 16: it answered BUSY, which a client reads as "someone else
 * holds it"). Another lease form is refused. */
static void test_acquire_by_the_holder_regrants_and_rearms(void **state)
{
	(void)state;
	struct harness h;
	struct locks_lock_info info;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	uint64_t token = harness_acquire(&h, a, 1, "job", TRY, 1000, 0)->token;
	h.now_ms += 800;
	const struct locks_reply *r = harness_acquire(&h, a, 2, "job", TRY, 3000, 0);
	assert_int_equal(r->status, HASP_STATUS_GRANTED);
	assert_int_equal(r->token, token);
	assert_int_equal(r->ttl_ms, 3000);
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"job", 3, &info));
	assert_int_equal(info.deadline_ms, h.sm.log_time_ms + 3000);
	assert_int_equal(info.token, token);
	uint64_t lease = harness_lease_op(&h, LOCKS_OP_LEASE_GRANT, a, 3, 0, 5000)->id;
	r = harness_acquire(&h, a, 4, "job", TRY, 0, lease);
	assert_int_equal(r->status, HASP_STATUS_BAD_REQUEST);
	assert_int_equal(r->reason, LOCKS_REASON_SELF_HELD);
	harness_deinit(&h);
}

/* A WAIT re-issued by the same session (the client gave up locally and asks
 * again with another TTL) updates its queue entry: the grant it later gets
 * carries the TTL of the request the client still waits on, in the event
 * and in the lease (correctness issue, item 1: it carried the first TTL
 * while the client counted with the second). Another lease is refused. */
static void test_reissued_wait_is_granted_with_its_new_ttl(void **state)
{
	(void)state;
	struct harness h;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	uint64_t b = harness_session(&h, 60000);
	const struct locks_reply *r = harness_acquire(&h, a, 1, "q", WAIT, 5000, 0);
	assert_int_equal(r->status, HASP_STATUS_GRANTED);
	uint64_t token_a = r->token;
	r = harness_acquire(&h, b, 1, "q", WAIT, 1000, 0);
	assert_int_equal(r->status, HASP_STATUS_QUEUED);
	uint64_t entry_lease = r->id;
	r = harness_acquire(&h, b, 2, "q", WAIT, 6000, 0);
	assert_int_equal(r->status, HASP_STATUS_QUEUED);
	assert_int_equal(r->reason, LOCKS_REASON_ALREADY_QUEUED);
	assert_int_equal(r->position, 1);
	assert_int_equal(r->id, entry_lease);
	/* On another lease: refused, and the entry is unchanged. */
	r = harness_lease_op(&h, LOCKS_OP_LEASE_GRANT, b, 3, 0, 30000);
	assert_int_equal(r->status, HASP_STATUS_OK);
	r = harness_acquire(&h, b, 4, "q", WAIT, 0, r->id);
	assert_int_equal(r->status, HASP_STATUS_BAD_REQUEST);
	assert_int_equal(r->reason, LOCKS_REASON_QUEUED_OTHER_LEASE);

	r = harness_release(&h, a, 2, "q", token_a);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_LOCK_GRANTED), 1);
	const struct locks_event *g = harness_event(&h, HASP_EVENT_LOCK_GRANTED, 0);
	assert_int_equal(g->session_id, b);
	assert_int_equal(g->lease_id, 0); /* its own TTL, not a shared lease */
	assert_int_equal(g->ttl_ms, 6000);
	assert_int_equal(g->deadline_ms, h.sm.log_time_ms + 6000);
	harness_deinit(&h);
}

/* Taking a free lock is an event too, so watchers see every grant
 * (correctness issue, item 3: only hand-offs were). Its cause tells the node
 * not to push it to the acquirer, who has its reply. */
static void test_grant_of_a_free_lock_is_an_event(void **state)
{
	(void)state;
	struct harness h;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	uint64_t b = harness_session(&h, 60000);
	const struct locks_reply *r = harness_acquire(&h, a, 1, "free", TRY, 700, 0);
	assert_int_equal(r->status, HASP_STATUS_GRANTED);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_LOCK_GRANTED), 1);
	const struct locks_event *g = harness_event(&h, HASP_EVENT_LOCK_GRANTED, 0);
	assert_int_equal(g->cause, LOCKS_GRANT_DIRECT);
	assert_int_equal(g->session_id, a);
	assert_int_equal(g->token, r->token);
	assert_int_equal(g->ttl_ms, 700);
	uint64_t token = r->token;
	assert_int_equal(harness_acquire(&h, b, 1, "free", WAIT, 900, 0)->status, HASP_STATUS_QUEUED);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_LOCK_GRANTED), 0);
	assert_int_equal(harness_release(&h, a, 2, "free", token)->status, HASP_STATUS_OK);
	g = harness_event(&h, HASP_EVENT_LOCK_GRANTED, 0);
	assert_int_equal(g->cause, LOCKS_GRANT_HANDOFF);
	assert_int_equal(g->session_id, b);
	harness_deinit(&h);
}

/* CANCEL drops the session's WAIT entry: the lock is never handed to a
 * session that gave up waiting (correctness issue, item 1: an orphaned
 * entry was granted and blocked the lock for its TTL). */
static void test_cancel_drops_the_wait_entry(void **state)
{
	(void)state;
	struct harness h;
	struct locks_lock_info info;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	uint64_t b = harness_session(&h, 60000);
	uint64_t c = harness_session(&h, 60000);
	const struct locks_reply *r = harness_acquire(&h, a, 1, "q", WAIT, 5000, 0);
	uint64_t token_a = r->token;
	assert_int_equal(harness_acquire(&h, b, 1, "q", WAIT, 1000, 0)->status, HASP_STATUS_QUEUED);
	assert_int_equal(harness_acquire(&h, c, 1, "q", WAIT, 1000, 0)->status, HASP_STATUS_QUEUED);
	uint64_t revision = h.sm.revision;

	struct locks_cmd cmd = harness_cmd(LOCKS_OP_CANCEL, b, 2, "q");
	r = harness_apply(&h, &cmd);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(h.sm.revision, revision + 1);
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"q", 1, &info));
	assert_int_equal(info.waiter_count, 1);
	/* Again, or by the holder, or on a lock nobody holds: nothing to drop. */
	cmd = harness_cmd(LOCKS_OP_CANCEL, b, 3, "q");
	assert_int_equal(harness_apply(&h, &cmd)->status, HASP_STATUS_NOT_FOUND);
	cmd = harness_cmd(LOCKS_OP_CANCEL, a, 2, "q");
	assert_int_equal(harness_apply(&h, &cmd)->status, HASP_STATUS_NOT_FOUND);
	cmd = harness_cmd(LOCKS_OP_CANCEL, a, 3, "nobody");
	assert_int_equal(harness_apply(&h, &cmd)->status, HASP_STATUS_NOT_FOUND);
	assert_int_equal(h.sm.revision, revision + 1);

	/* The release hands the lock to c, not to b who gave up. */
	r = harness_release(&h, a, 4, "q", token_a);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_LOCK_GRANTED), 1);
	assert_int_equal(harness_event(&h, HASP_EVENT_LOCK_GRANTED, 0)->session_id, c);
	harness_deinit(&h);
}

/* Expiry hands the lock to the oldest waiter: exactly one GRANTED event
 * (no herd), and the rest of the queue moves up. */
static void test_expiry_hands_lock_to_oldest_waiter(void **state)
{
	(void)state;
	struct harness h;
	struct locks_lock_info info;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	uint64_t b = harness_session(&h, 60000);
	uint64_t c = harness_session(&h, 60000);
	uint64_t d = harness_session(&h, 60000);
	const struct locks_reply *r = harness_acquire(&h, a, 1, "q", WAIT, 50, 0);
	assert_int_equal(r->status, HASP_STATUS_GRANTED);
	uint64_t token_a = r->token, lease_a = r->id;
	r = harness_acquire(&h, b, 1, "q", WAIT, 200, 0);
	assert_int_equal(r->status, HASP_STATUS_QUEUED);
	assert_int_equal(r->position, 1);
	r = harness_acquire(&h, c, 1, "q", WAIT, 200, 0);
	assert_int_equal(r->position, 2);
	r = harness_acquire(&h, d, 1, "q", WAIT, 200, 0);
	assert_int_equal(r->position, 3);
	/* Asking again does not queue twice. */
	r = harness_acquire(&h, c, 2, "q", WAIT, 200, 0);
	assert_int_equal(r->status, HASP_STATUS_QUEUED);
	assert_int_equal(r->reason, LOCKS_REASON_ALREADY_QUEUED);
	assert_int_equal(r->position, 2);

	h.now_ms += 50;
	r = harness_expire(&h, lease_a);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_LOCK_RELEASED), 1);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_LOCK_GRANTED), 1);
	const struct locks_event *g = harness_event(&h, HASP_EVENT_LOCK_GRANTED, 0);
	assert_int_equal(g->session_id, b);
	assert_true(g->token > token_a);
	assert_int_equal(g->token, h.sm.revision);
	/* The waiter's own TTL counts from the grant, not from its queueing. */
	assert_int_equal(g->deadline_ms, h.sm.log_time_ms + 200);
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"q", 1, &info));
	assert_int_equal(info.holder_session_id, b);
	assert_int_equal(info.waiter_count, 2);
	r = harness_acquire(&h, d, 2, "q", WAIT, 200, 0);
	assert_int_equal(r->position, 2); /* c is next, d after it */

	/* Releasing by b hands to c, again one grant. */
	r = harness_release(&h, b, 2, "q", g->token);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_LOCK_GRANTED), 1);
	assert_int_equal(harness_event(&h, HASP_EVENT_LOCK_GRANTED, 0)->session_id, c);
	harness_deinit(&h);
}

/* etcd-style shared lease: one keepalive renews all; revoke releases every
 * lock at once, handing each to its head waiter, and drops the lease's own
 * waiters. */
static void test_revoke_shared_lease_releases_all_locks(void **state)
{
	(void)state;
	struct harness h;
	struct locks_lock_info info;
	struct locks_lease_info li;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	uint64_t b = harness_session(&h, 60000);
	const struct locks_reply *r = harness_lease_op(&h, LOCKS_OP_LEASE_GRANT, a, 1, 0, 3000);
	assert_int_equal(r->status, HASP_STATUS_OK);
	uint64_t lease = r->id;
	r = harness_lease_op(&h, LOCKS_OP_LEASE_GRANT, b, 1, 0, 3000);
	uint64_t lease_b = r->id;
	assert_int_equal(harness_acquire(&h, a, 2, "x", TRY, 0, lease)->status, HASP_STATUS_GRANTED);
	assert_int_equal(harness_acquire(&h, a, 3, "y", TRY, 0, lease)->status, HASP_STATUS_GRANTED);
	assert_int_equal(harness_acquire(&h, a, 4, "z", TRY, 0, lease)->status, HASP_STATUS_GRANTED);
	assert_int_equal(harness_acquire(&h, b, 2, "x", WAIT, 0, lease_b)->status, HASP_STATUS_QUEUED);
	assert_int_equal(harness_acquire(&h, b, 3, "y", WAIT, 500, 0)->status, HASP_STATUS_QUEUED);
	assert_int_equal(harness_put(&h, a, 5, "svc/a", "10.0.0.1", lease)->status, HASP_STATUS_OK);
	assert_true(locks_lease_read(&h.sm, lease, &li));
	assert_int_equal(li.lock_count, 3);
	assert_int_equal(li.key_count, 1);

	/* One keepalive renews every lock of the lease. */
	h.now_ms += 1000;
	r = harness_lease_op(&h, LOCKS_OP_LEASE_KEEPALIVE, a, 6, lease, 0);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"z", 1, &info));
	assert_int_equal(info.deadline_ms, h.sm.log_time_ms + 3000);
	assert_false(info.private_lease);

	uint64_t rev = h.sm.revision;
	r = harness_lease_op(&h, LOCKS_OP_LEASE_REVOKE, a, 7, lease, 0);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(h.sm.revision, rev + 1); /* one command, one revision */
	assert_int_equal(harness_event_count(&h, HASP_EVENT_LOCK_RELEASED), 3);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_LOCK_GRANTED), 2);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_KV_DELETED), 1);
	for (uint32_t i = 0; i < 2; i++) {
		const struct locks_event *g = harness_event(&h, HASP_EVENT_LOCK_GRANTED, i);
		assert_int_equal(g->session_id, b);
		assert_int_equal(g->token, rev + 1);
	}
	assert_false(locks_lease_read(&h.sm, lease, &li));
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"x", 1, &info));
	assert_int_equal(info.lease_id, lease_b);
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"y", 1, &info));
	assert_true(info.private_lease);
	assert_false(locks_lock_read(&h.sm, (const uint8_t *)"z", 1, &info));
	struct locks_kv_info kv;
	assert_false(locks_kv_get(&h.sm, (const uint8_t *)"svc/a", 5, &kv));
	/* The lease is gone for everyone. */
	assert_int_equal(harness_lease_op(&h, LOCKS_OP_LEASE_KEEPALIVE, a, 8, lease, 0)->status,
			 HASP_STATUS_LEASE_EXPIRED);
	assert_int_equal(harness_acquire(&h, a, 9, "w", TRY, 0, lease)->status, HASP_STATUS_LEASE_EXPIRED);
	harness_deinit(&h);
}

/* Raft thesis §6.3: a retried request gets the identical reply and changes
 * nothing; a pipelining client's reordered requests are each applied once. */
static void test_duplicate_request_returns_identical_reply(void **state)
{
	(void)state;
	struct harness h;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	uint64_t b = harness_session(&h, 60000);
	struct locks_reply first = *harness_acquire(&h, a, 1, "dup", TRY, 1000, 0);
	assert_int_equal(first.status, HASP_STATUS_GRANTED);
	uint64_t rev = h.sm.revision;

	h.now_ms += 10;
	const struct locks_reply *again = harness_acquire(&h, a, 1, "dup", TRY, 1000, 0);
	assert_true(h.res.duplicate);
	assert_memory_equal(again, &first, sizeof(first));
	assert_int_equal(h.sm.revision, rev);
	assert_int_equal(h.res.event_count, 0);

	/* A refusal is cached too: b's retry still sees BUSY after the lock
	 * became free, because that is what its request got. */
	struct locks_reply busy = *harness_acquire(&h, b, 1, "dup", TRY, 1000, 0);
	assert_int_equal(busy.status, HASP_STATUS_BUSY);
	assert_int_equal(harness_release(&h, a, 2, "dup", first.token)->status, HASP_STATUS_OK);
	assert_memory_equal(harness_acquire(&h, b, 1, "dup", TRY, 1000, 0), &busy, sizeof(busy));

	/* Pipelined and reordered: seq 4 arrives before 3; both apply once. */
	assert_int_equal(harness_acquire(&h, a, 4, "p4", TRY, 1000, 0)->status, HASP_STATUS_GRANTED);
	assert_false(h.res.duplicate);
	assert_int_equal(harness_acquire(&h, a, 3, "p3", TRY, 1000, 0)->status, HASP_STATUS_GRANTED);
	assert_false(h.res.duplicate);
	harness_acquire(&h, a, 3, "p3", TRY, 1000, 0);
	assert_true(h.res.duplicate);

	/* A seq that fell out of the window gets a typed refusal. */
	uint32_t window = h.sm.cfg.session_window;
	assert_int_equal(harness_acquire(&h, a, 4 + window, "far", TRY, 1000, 0)->status,
			 HASP_STATUS_GRANTED);
	rev = h.sm.revision;
	const struct locks_reply *old = harness_acquire(&h, a, 4, "p4", TRY, 1000, 0);
	assert_int_equal(old->status, HASP_STATUS_BAD_REQUEST);
	assert_int_equal(old->reason, LOCKS_REASON_SEQ_TOO_OLD);
	assert_int_equal(h.sm.revision, rev);
	assert_int_equal(harness_acquire(&h, a, 0, "zero", TRY, 1000, 0)->reason, LOCKS_REASON_SEQ_INVALID);
	/* Unknown sessions are refused. */
	assert_int_equal(harness_acquire(&h, a + 1, 1, "x", TRY, 1000, 0)->status,
			 HASP_STATUS_SESSION_EXPIRED);
	harness_deinit(&h);
}

static uint8_t *snapshot_take(const struct locks *sm, size_t *size)
{
	size_t cap = locks_snapshot_size(sm);
	uint8_t *buf = malloc(cap);
	assert_non_null(buf);
	assert_int_equal(locks_snapshot_write(sm, buf, cap, size), 0);
	assert_int_equal(*size, cap);
	return buf;
}

static uint64_t open_owned_id(struct harness *h, uint64_t owner, uint32_t quota)
{
	const struct locks_reply *r = harness_open_owned(h, 60000, 0, owner, 0, quota);
	return r->status == HASP_STATUS_OK ? r->id : 0;
}

/* The quota counts live sessions: a closed or expired session makes room
 * again, and the count is the same after a snapshot's restore and in a
 * copy (it is derived from the sessions, not replicated). */
static void test_owner_quota_follows_closes_expiries_restores_and_copies(void **state)
{
	(void)state;
	struct harness h, h2, h3;

	harness_init(&h);
	harness_init(&h2);
	harness_init(&h3);
	uint64_t a = open_owned_id(&h, 7, 2);
	h.now_ms += 1000;
	uint64_t b = open_owned_id(&h, 7, 2);
	assert_true(a != 0 && b != 0 && open_owned_id(&h, 8, 2) != 0);
	assert_int_equal(open_owned_id(&h, 7, 2), 0); /* full */
	struct locks_cmd close = harness_cmd(LOCKS_OP_SESSION_CLOSE, a, 1, NULL);
	assert_int_equal(harness_apply(&h, &close)->status, HASP_STATUS_OK);
	h.now_ms += 10000;
	uint64_t c = open_owned_id(&h, 7, 2);
	assert_true(c != 0);
	assert_int_equal(open_owned_id(&h, 7, 2), 0);
	/* b expires (its deadline is 10 s before c's): room for one more. */
	h.now_ms += 50500;
	struct locks_cmd expire = { .op = LOCKS_OP_SESSION_EXPIRE, .session_id = b };
	assert_int_equal(harness_apply(&h, &expire)->status, HASP_STATUS_OK);
	assert_false(locks_session_read(&h.sm, b, &(struct locks_session_info){ 0 }));
	uint64_t d = open_owned_id(&h, 7, 2);
	assert_true(d != 0);
	assert_true(locks_invariants_ok(&h.sm));

	size_t size;
	uint8_t *snap = snapshot_take(&h.sm, &size);
	assert_int_equal(locks_snapshot_restore(&h2.sm, snap, size), 0);
	free(snap);
	(void)locks_copy(&h3.sm, &h.sm);
	struct harness *all[] = { &h, &h2, &h3 };
	for (int i = 0; i < 3; i++) {
		struct harness *m = all[i];
		m->index = h.index;
		m->now_ms = h.now_ms;
		assert_true(locks_invariants_ok(&m->sm));
		assert_int_equal(open_owned_id(m, 7, 2), 0);
		assert_true(open_owned_id(m, 8, 2) != 0);
		assert_int_equal(open_owned_id(m, 8, 2), 0);
		struct locks_cmd end = harness_cmd(LOCKS_OP_SESSION_CLOSE, c, 1, NULL);
		assert_int_equal(harness_apply(m, &end)->status, HASP_STATUS_OK);
		assert_true(open_owned_id(m, 7, 2) != 0);
		assert_true(locks_invariants_ok(&m->sm));
	}
	harness_deinit(&h);
	harness_deinit(&h2);
	harness_deinit(&h3);
}

/* Builds a state with every kind of record. */
static void build_rich_state(struct harness *h, uint64_t *a, uint64_t *b, uint64_t *lease)
{
	*a = harness_open(h, 5000, 0xa11ce)->id;
	*b = harness_session(h, 5000);
	*lease = harness_lease_op(h, LOCKS_OP_LEASE_GRANT, *a, 1, 0, 2000)->id;
	harness_acquire(h, *a, 2, "s/1", TRY, 0, *lease);
	harness_acquire(h, *a, 3, "s/2", TRY, 700, 0);
	harness_acquire(h, *b, 1, "s/1", WAIT, 300, 0);
	harness_acquire(h, *b, 2, "s/2", WAIT, 0, *lease);
	harness_put(h, *a, 4, "cfg/x", "1", 0);
	harness_put(h, *b, 3, "cfg/y", "two", *lease);
	harness_put(h, *b, 4, "cfg/x", "3", 0);
	h->now_ms += 100;
	harness_tick(h);
}

/* snapshot -> restore gives byte-identical state and identical replies and
 * events to the same future commands. */
static void test_snapshot_restore_identical_state_and_replies(void **state)
{
	(void)state;
	struct harness h1, h2;
	uint64_t a, b, lease;
	size_t size1, size2;

	harness_init(&h1);
	harness_init(&h2);
	h2.sm.cfg.hash_seed = 12345; /* per-node seeds may differ */
	build_rich_state(&h1, &a, &b, &lease);
	uint8_t *snap1 = snapshot_take(&h1.sm, &size1);
	assert_int_equal(locks_snapshot_restore(&h2.sm, snap1, size1), 0);
	assert_true(locks_invariants_ok(&h2.sm));
	uint8_t *snap2 = snapshot_take(&h2.sm, &size2);
	assert_int_equal(size1, size2);
	assert_memory_equal(snap1, snap2, size1);
	h2.index = h1.index;

	/* The same future on both. */
	for (int i = 0; i < 2; i++) {
		struct harness *h = i == 0 ? &h1 : &h2;
		h->now_ms = h1.now_ms;
	}
	struct locks_reply r1[10], r2[10];
	for (int i = 0; i < 2; i++) {
		struct harness *h = i == 0 ? &h1 : &h2;
		struct locks_reply *out = i == 0 ? r1 : r2;
		uint64_t c = harness_session(h, 5000);
		out[0] = *harness_acquire(h, c, 1, "s/1", WAIT, 100, 0);
		out[1] = *harness_acquire(h, a, 3, "s/2", TRY, 700, 0); /* duplicate */
		h->now_ms += 2500;
		out[2] = *harness_expire(h, lease);
		out[3] = *harness_lease_op(h, LOCKS_OP_LEASE_GRANT, b, 5, 0, 1000);
		out[4] = *harness_acquire(h, c, 2, "new", TRY, 100, 0);
		struct locks_cmd cas = harness_cmd(LOCKS_OP_KV_CAS, b, 6, "cfg/x");
		cas.token = 9999;
		out[5] = *harness_apply(h, &cas);
		out[6] = *harness_put(h, c, 3, "cfg/z", "zz", out[3].id);
		/* The open nonce survived the snapshot: a retried open of a is
		 * answered from it, on both machines. */
		out[7] = *harness_open(h, 5000, 0xa11ce);
		assert_true(h->res.duplicate);
		struct locks_cmd close = harness_cmd(LOCKS_OP_SESSION_CLOSE, a, 5, NULL);
		out[8] = *harness_apply(h, &close);
		out[9] = *harness_open(h, 5000, 0xa11ce);
	}
	assert_memory_equal(r1, r2, sizeof(r1));
	assert_int_equal(r1[1].status, HASP_STATUS_GRANTED);
	assert_int_equal(r1[7].id, a);
	assert_true(r1[9].id != a);
	free(snap1);
	free(snap2);
	snap1 = snapshot_take(&h1.sm, &size1);
	snap2 = snapshot_take(&h2.sm, &size2);
	assert_int_equal(size1, size2);
	assert_memory_equal(snap1, snap2, size1);
	free(snap1);
	free(snap2);
	harness_deinit(&h1);
	harness_deinit(&h2);
}

/* An older version's image of build_rich_state() restores to the state
 * that function builds: it writes the same bytes in the current version. */
static void assert_old_image_is_still_read(const uint8_t *image, size_t image_size, uint8_t version)
{
	struct harness h1, h2;
	uint64_t a, b, lease;
	size_t size1, size2;

	harness_init(&h1);
	harness_init(&h2);
	build_rich_state(&h1, &a, &b, &lease);
	assert_int_equal(image[4], version);
	assert_int_equal(locks_snapshot_restore(&h2.sm, image, image_size), 0);
	assert_true(locks_invariants_ok(&h2.sm));
	uint8_t *snap1 = snapshot_take(&h1.sm, &size1);
	uint8_t *snap2 = snapshot_take(&h2.sm, &size2);
	assert_int_equal(snap1[4], LOCKS_SNAPSHOT_VERSION);
	assert_int_equal(size1, size2);
	assert_memory_equal(snap1, snap2, size1);
	if (version == 3)
		assert_true(size1 < image_size); /* v4 made replies sparse */
	free(snap1);
	free(snap2);
	harness_deinit(&h1);
	harness_deinit(&h2);
}

/* Version 3 wrote every reply slot in full. */
static void test_snapshot_v3_is_still_read(void **state)
{
	(void)state;
	assert_old_image_is_still_read(snapshot_v3_rich, sizeof(snapshot_v3_rich), 3);
}

/* Version 4 had no session floors: they restore as 0 (none). */
static void test_snapshot_v4_is_still_read(void **state)
{
	(void)state;
	assert_old_image_is_still_read(snapshot_v4_rich, sizeof(snapshot_v4_rich), 4);
}

/* The cached replies of session `id` (seq != 0). */
static uint32_t cached_replies(const struct harness *h, uint64_t id)
{
	uint32_t window = h->sm.cfg.session_window, n = 0;
	const struct locks_cached_reply *ring = &h->sm.replies[(uint64_t)locks_id_slot(id) * window];

	for (uint32_t k = 0; k < window; k++)
		n += ring[k].seq != 0;
	return n;
}

static const struct locks_reply *keepalive_with_floor(struct harness *h, uint64_t session, uint64_t seq)
{
	struct locks_cmd c = harness_cmd(LOCKS_OP_SESSION_KEEPALIVE, session, seq, NULL);
	c.flags = LOCKS_CMD_SEQ_FLOOR;
	return harness_apply(h, &c);
}

/* A command with LOCKS_CMD_SEQ_FLOOR drops the session's cached replies
 * below its seq, and those seqs are refused from then on: a late duplicate
 * of an acquire whose lock was released since must not take it again. The
 * floor survives a snapshot. */
static void test_seq_floor_drops_lower_replies_and_refuses_them(void **state)
{
	(void)state;
	struct harness h, h2;

	harness_init(&h);
	harness_init(&h2);
	uint64_t s = harness_session(&h, 5000);
	uint64_t token = harness_acquire(&h, s, 1, "x", TRY, 1000, 0)->token;
	assert_int_equal(harness_release(&h, s, 2, "x", token)->status, HASP_STATUS_OK);
	/* Reordered: 4 before 3, both new. */
	assert_int_equal(harness_put(&h, s, 4, "k", "four", 0)->status, HASP_STATUS_OK);
	assert_int_equal(harness_put(&h, s, 3, "k", "three", 0)->status, HASP_STATUS_OK);
	assert_int_equal(cached_replies(&h, s), 4);
	/* Without a floor a duplicate gets its cached reply. */
	assert_int_equal(harness_acquire(&h, s, 1, "x", TRY, 1000, 0)->token, token);
	assert_true(h.res.duplicate);

	assert_int_equal(keepalive_with_floor(&h, s, 5)->status, HASP_STATUS_OK);
	assert_int_equal(cached_replies(&h, s), 1);
	struct locks_session_info info;
	assert_true(locks_session_read(&h.sm, s, &info));
	assert_int_equal(info.seq_floor, 5);
	assert_true(locks_invariants_ok(&h.sm));

	size_t size;
	uint8_t *snap = snapshot_take(&h.sm, &size);
	assert_int_equal(locks_snapshot_restore(&h2.sm, snap, size), 0);
	assert_true(locks_invariants_ok(&h2.sm));
	h2.index = h.index;
	h2.now_ms = h.now_ms;
	for (int i = 0; i < 2; i++) {
		struct harness *m = i == 0 ? &h : &h2;
		uint64_t revision = m->sm.revision;
		const struct locks_reply *r = harness_acquire(m, s, 1, "x", TRY, 1000, 0);
		assert_int_equal(r->status, HASP_STATUS_BAD_REQUEST);
		assert_int_equal(r->reason, LOCKS_REASON_SEQ_TOO_OLD);
		r = harness_put(m, s, 4, "k", "four", 0);
		assert_int_equal(r->reason, LOCKS_REASON_SEQ_TOO_OLD);
		assert_int_equal(m->sm.revision, revision);
		struct locks_lock_info li;
		assert_false(locks_lock_read(&m->sm, (const uint8_t *)"x", 1, &li));
		/* The floor's own seq is still a duplicate; the next is new. */
		assert_int_equal(keepalive_with_floor(m, s, 5)->status, HASP_STATUS_OK);
		assert_true(m->res.duplicate);
		assert_int_equal(harness_acquire(m, s, 6, "x", TRY, 1000, 0)->status, HASP_STATUS_GRANTED);
		assert_int_equal(cached_replies(m, s), 2);
	}
	free(snap);
	/* A floor that jumps more than a window clears every older slot. */
	uint32_t window = h.sm.cfg.session_window;
	for (uint64_t seq = 7; seq < 7 + 2 * window; seq++)
		assert_int_equal(harness_put(&h, s, seq, "k", "v", 0)->status, HASP_STATUS_OK);
	assert_int_equal(cached_replies(&h, s), window);
	assert_int_equal(keepalive_with_floor(&h, s, 7 + 3 * window)->status, HASP_STATUS_OK);
	assert_int_equal(cached_replies(&h, s), 1);
	assert_true(locks_invariants_ok(&h.sm));
	harness_deinit(&h);
	harness_deinit(&h2);
}

/* v4 writes a session's cached replies sparsely: a new session costs its
 * record and the bitmap, each cached reply its seq, digest, status,
 * reason, mask and nonzero fields, and an empty slot nothing (v3 wrote
 * every slot's 64 bytes). */
static void test_snapshot_writes_only_the_replies_in_use(void **state)
{
	(void)state;
	struct harness h;
	size_t size0, size1, size2, size3;

	harness_init(&h);
	uint64_t keep = harness_session(&h, 5000);
	harness_acquire(&h, keep, 1, "keep", TRY, 1000, 0);
	free(snapshot_take(&h.sm, &size0));
	uint64_t s = harness_session(&h, 5000);
	free(snapshot_take(&h.sm, &size1));
	assert_int_equal(size1 - size0, 4 + 40 + 16 + 9 + 8 + (h.sm.cfg.session_window + 7) / 8);
	const struct locks_reply *g = harness_acquire(&h, s, 1, "x", TRY, 1000, 0);
	assert_int_equal(g->status, HASP_STATUS_GRANTED);
	assert_int_equal(harness_release(&h, s, 2, "x", g->token)->status, HASP_STATUS_OK);
	free(snapshot_take(&h.sm, &size2));
	/* Two replies, the lock gone again: 19 bytes each and their fields. */
	assert_true(size2 - size1 >= 2 * 19 && size2 - size1 <= 2 * (19 + 2 + 3 * 4 + 4 * 8));
	/* The whole window in use costs at most window x 65 bytes, and the
	 * restored machine writes the same bytes. */
	for (uint64_t seq = 3; seq < 3 + 2 * h.sm.cfg.session_window; seq++)
		assert_int_equal(harness_put(&h, s, seq, "k", "v", 0)->status, HASP_STATUS_OK);
	uint8_t *snap = snapshot_take(&h.sm, &size3);
	assert_true(size3 - size2 <= (size_t)h.sm.cfg.session_window * 65 + 64);
	struct harness h2;
	harness_init(&h2);
	assert_int_equal(locks_snapshot_restore(&h2.sm, snap, size3), 0);
	size_t size4;
	uint8_t *again = snapshot_take(&h2.sm, &size4);
	assert_int_equal(size4, size3);
	assert_memory_equal(again, snap, size3);
	free(snap);
	free(again);
	harness_deinit(&h2);
	harness_deinit(&h);
}

/* A snapshot's copy stops the lcore (docs/STORAGE.md "Snapshots off the
 * lcore"): while the destination is still the last copy made from the
 * machine, locks_copy carries only the reply records written since; when
 * it cannot know that, every live session's window. */
static void test_copy_carries_only_the_replies_written_since(void **state)
{
	(void)state;
	struct harness h, c, other;
	uint64_t s[3];

	harness_init(&h);
	uint64_t window = h.sm.cfg.session_window;
	for (int i = 0; i < 3; i++)
		s[i] = harness_session(&h, 60000);
	for (uint64_t seq = 1; seq <= window; seq++)
		assert_int_equal(harness_put(&h, s[0], seq, "k", "v", 0)->status, HASP_STATUS_OK);
	harness_init_cfg(&c, &h.sm.cfg);
	harness_init_cfg(&other, &h.sm.cfg);

	/* A fresh destination: every live session's window. */
	assert_int_equal(locks_copy(&c.sm, &h.sm), 3 * window);
	assert_same_snapshot(&c.sm, &h.sm);
	/* Nothing written since: nothing to carry, and still the same. */
	assert_int_equal(locks_copy(&c.sm, &h.sm), 0);
	assert_same_snapshot(&c.sm, &h.sm);
	/* One command each on two sessions: their two records. */
	assert_int_equal(harness_put(&h, s[1], 1, "k", "w", 0)->status, HASP_STATUS_OK);
	assert_int_equal(harness_put(&h, s[2], 1, "k", "x", 0)->status, HASP_STATUS_OK);
	assert_int_equal(locks_copy(&c.sm, &h.sm), 2);
	assert_same_snapshot(&c.sm, &h.sm);
	/* A full window overwritten: each record once. */
	for (uint64_t seq = window + 1; seq <= 3 * window; seq++)
		assert_int_equal(harness_put(&h, s[0], seq, "k", "y", 0)->status, HASP_STATUS_OK);
	assert_int_equal(locks_copy(&c.sm, &h.sm), window);
	assert_same_snapshot(&c.sm, &h.sm);
	/* A session opened writes no record (its window is zero already); one
	 * closed zeroes the records it used: all of s[0]'s, one of s[1]'s. */
	uint64_t s3 = harness_session(&h, 60000);
	assert_int_equal(locks_copy(&c.sm, &h.sm), 0);
	struct locks_cmd close = harness_cmd(LOCKS_OP_SESSION_CLOSE, s[0], 3 * window + 1, NULL);
	assert_int_equal(harness_apply(&h, &close)->status, HASP_STATUS_OK);
	struct locks_cmd close1 = harness_cmd(LOCKS_OP_SESSION_CLOSE, s[1], 2, NULL);
	assert_int_equal(harness_apply(&h, &close1)->status, HASP_STATUS_OK);
	assert_int_equal(locks_copy(&c.sm, &h.sm), window + 1);
	assert_same_snapshot(&c.sm, &h.sm);

	/* Another copy made from the machine since: c is not the last one. */
	assert_int_equal(harness_put(&h, s3, 1, "k", "z", 0)->status, HASP_STATUS_OK);
	assert_int_equal(locks_copy(&other.sm, &h.sm), 4 * window);
	assert_int_equal(locks_copy(&c.sm, &h.sm), 4 * window);
	assert_same_snapshot(&c.sm, &h.sm);
	/* The copy written by a command of its own is no copy any more. */
	c.index = h.index;
	assert_int_equal(harness_put(&c, s3, 2, "k", "q", 0)->status, HASP_STATUS_OK);
	assert_int_equal(locks_copy(&c.sm, &h.sm), 4 * window);
	assert_same_snapshot(&c.sm, &h.sm);
	/* A machine that was a copy's destination copies whole from itself:
	 * what the copy wrote into it, its own record lacks. */
	assert_int_equal(locks_copy(&other.sm, &c.sm), 4 * window);
	assert_same_snapshot(&other.sm, &h.sm);
	/* A restored machine: the restore wrote what nothing recorded. */
	size_t size;
	uint8_t *snap = snapshot_take(&h.sm, &size);
	assert_int_equal(locks_copy(&c.sm, &h.sm), 0);
	assert_int_equal(locks_snapshot_restore(&h.sm, snap, size), 0);
	assert_int_equal(locks_copy(&c.sm, &h.sm), 4 * window);
	assert_same_snapshot(&c.sm, &h.sm);
	assert_int_equal(locks_copy(&c.sm, &h.sm), 0);
	free(snap);
	harness_deinit(&other);
	harness_deinit(&c);
	harness_deinit(&h);
}

/* locks_snapshot_write walks the state once and sets the header's total
 * last: every buffer short of the snapshot is refused, and a larger one
 * gets the same bytes as one of the exact size. */
static void test_snapshot_write_refuses_a_short_buffer(void **state)
{
	(void)state;
	struct harness h;
	uint64_t a, b, lease;
	size_t size, written = 0;

	harness_init(&h);
	build_rich_state(&h, &a, &b, &lease);
	uint8_t *want = snapshot_take(&h.sm, &size);
	uint8_t *buf = malloc(size + 64);
	assert_non_null(buf);
	for (size_t n = 0; n < size; n += n < 256 || size - n < 256 ? 1 : 97)
		assert_int_equal(locks_snapshot_write(&h.sm, buf, n, &written), -HASP_ETOOBIG);
	assert_int_equal(written, 0);
	assert_int_equal(locks_snapshot_write(&h.sm, buf, size + 64, &written), 0);
	assert_int_equal(written, size);
	assert_memory_equal(buf, want, size);
	struct harness h2;
	harness_init(&h2);
	assert_int_equal(locks_snapshot_restore(&h2.sm, buf, written), 0);
	assert_same_snapshot(&h2.sm, &h.sm);
	harness_deinit(&h2);
	free(buf);
	free(want);
	harness_deinit(&h);
}

static void test_corrupt_snapshot_refused_target_untouched(void **state)
{
	(void)state;
	struct harness h1, h2;
	uint64_t a, b, lease;
	size_t size, before_size;

	harness_init(&h1);
	harness_init(&h2);
	build_rich_state(&h1, &a, &b, &lease);
	uint64_t c = harness_session(&h2, 1000);
	harness_acquire(&h2, c, 1, "mine", TRY, 100, 0);
	uint8_t *before = snapshot_take(&h2.sm, &before_size);
	uint8_t *snap = snapshot_take(&h1.sm, &size);

	/* Every single-byte flip and every truncation is refused. */
	for (size_t i = 0; i < size; i++) {
		snap[i] ^= 0x40;
		assert_true(locks_snapshot_restore(&h2.sm, snap, size) < 0);
		snap[i] ^= 0x40;
	}
	for (size_t n = 0; n < size; n++)
		assert_true(locks_snapshot_restore(&h2.sm, snap, n) < 0);
	assert_int_equal(locks_snapshot_restore(&h2.sm, snap, size / 2), -HASP_ETRUNCATED);
	snap[0] ^= 1;
	assert_int_equal(locks_snapshot_restore(&h2.sm, snap, size), -HASP_EMAGIC);
	snap[0] ^= 1;
	snap[4] = 1; /* version 1 (sessions owned locks) is refused */
	assert_int_equal(locks_snapshot_restore(&h2.sm, snap, size), -HASP_EVERSION);
	snap[4] = LOCKS_SNAPSHOT_VERSION + 1; /* a version from the future */
	assert_int_equal(locks_snapshot_restore(&h2.sm, snap, size), -HASP_EVERSION);
	snap[4] = LOCKS_SNAPSHOT_VERSION;
	snap[size - 1] ^= 1;
	assert_int_equal(locks_snapshot_restore(&h2.sm, snap, size), -HASP_ECORRUPT);
	snap[size - 1] ^= 1;

	size_t after_size;
	uint8_t *after = snapshot_take(&h2.sm, &after_size);
	assert_int_equal(after_size, before_size);
	assert_memory_equal(after, before, before_size);

	/* A machine with other capacities refuses it. */
	struct harness h3;
	struct locks_config cfg;
	locks_config_default(&cfg);
	cfg.locks_max++;
	harness_init_cfg(&h3, &cfg);
	assert_int_equal(locks_snapshot_restore(&h3.sm, snap, size), -HASP_ECONFIG);
	assert_int_equal(locks_snapshot_restore(&h2.sm, snap, size), 0);
	harness_deinit(&h3);
	free(after);
	free(before);
	free(snap);
	harness_deinit(&h1);
	harness_deinit(&h2);
}

/* A keepalive that committed before a stale EXPIRE wins; the EXPIRE is a
 * no-op. */
static void test_keepalive_committed_before_stale_expire_wins(void **state)
{
	(void)state;
	struct harness h;
	uint64_t due[2];

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	uint64_t lease = harness_lease_op(&h, LOCKS_OP_LEASE_GRANT, a, 1, 0, 100)->id;
	const struct locks_reply *r = harness_acquire(&h, a, 2, "k", TRY, 0, lease);
	uint64_t token = r->token;

	h.now_ms += 100;
	/* The leader sees the lease due and proposes EXPIRE; the client's
	 * keepalive reaches the log first. */
	assert_int_equal(locks_leases_due(&h.sm, locks_log_time(&h.sm, h.term, h.now_ms), due, 2), 1);
	assert_int_equal(harness_lease_op(&h, LOCKS_OP_LEASE_KEEPALIVE, a, 3, lease, 0)->status,
			 HASP_STATUS_OK);
	uint64_t rev = h.sm.revision;
	r = harness_expire(&h, lease);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(r->reason, LOCKS_REASON_NOT_DUE);
	assert_int_equal(h.res.event_count, 0);
	assert_int_equal(h.sm.revision, rev);
	assert_true(locks_check(&h.sm, (const uint8_t *)"k", 1, token));
	/* The same holds for a renew of a private lease, and for sessions. */
	uint64_t own = harness_acquire(&h, a, 4, "own", TRY, 50, 0)->id;
	h.now_ms += 60;
	struct locks_lock_info info;
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"own", 3, &info));
	assert_int_equal(harness_renew(&h, a, 5, "own", info.token, 0)->status, HASP_STATUS_OK);
	assert_int_equal(harness_expire(&h, own)->reason, LOCKS_REASON_NOT_DUE);
	struct locks_cmd se = { .op = LOCKS_OP_SESSION_EXPIRE, .session_id = a };
	assert_int_equal(harness_apply(&h, &se)->reason, LOCKS_REASON_NOT_DUE);
	harness_deinit(&h);
}

/* Lease time across leader changes (etcd issues 9395 and 9888): a new
 * leader's clock is rebased onto the last log time, so a deadline is
 * neither shortened (new clock far ahead) nor reset (new clock behind). */
static void test_new_term_does_not_shorten_or_reset_deadlines(void **state)
{
	(void)state;
	struct harness h;

	harness_init(&h);
	uint64_t a = harness_session(&h, 600000);
	const struct locks_reply *r = harness_acquire(&h, a, 1, "t", TRY, 1000, 0);
	uint64_t lease = r->id, deadline = r->deadline_ms;
	h.now_ms += 400;
	harness_tick(&h);
	uint64_t log_before = h.sm.log_time_ms;
	assert_int_equal(deadline - log_before, 600);

	/* Term 2: the new leader's clock reads far ahead of the old one's.
	 * Log time does not jump; the lease is not due. */
	h.term = 2;
	h.now_ms = 50000000;
	assert_int_equal(locks_log_time(&h.sm, 2, h.now_ms), log_before);
	r = harness_expire(&h, lease);
	assert_int_equal(r->reason, LOCKS_REASON_NOT_DUE);
	assert_int_equal(h.sm.log_time_ms, log_before);
	struct locks_lock_info info;
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"t", 1, &info));
	assert_int_equal(info.deadline_ms, deadline); /* not reset to a full TTL */

	/* The remaining 600 ms count on the new leader's clock. */
	h.now_ms += 599;
	assert_int_equal(locks_log_time(&h.sm, 2, h.now_ms), deadline - 1);
	assert_int_equal(harness_expire(&h, lease)->reason, LOCKS_REASON_NOT_DUE);
	h.now_ms += 1;
	r = harness_expire(&h, lease);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(r->reason, LOCKS_REASON_NONE);

	/* Term 3: the clock reads behind (another machine's boot time): log time
	 * still continues from where it was and never goes backwards. */
	uint64_t log_t2 = h.sm.log_time_ms;
	h.term = 3;
	h.now_ms = 5;
	harness_tick(&h);
	assert_int_equal(h.sm.log_time_ms, log_t2);
	h.now_ms = 25;
	harness_tick(&h);
	assert_int_equal(h.sm.log_time_ms, log_t2 + 20);

	/* A command from an older term cannot occur in a Raft log; it is
	 * refused and changes nothing. */
	uint64_t rev = h.sm.revision;
	h.term = 2;
	h.now_ms = 999999999;
	r = harness_tick(&h);
	assert_int_equal(r->status, HASP_STATUS_BAD_REQUEST);
	assert_int_equal(r->reason, LOCKS_REASON_STALE_TERM);
	assert_int_equal(h.sm.log_time_ms, log_t2 + 20);
	assert_int_equal(h.sm.revision, rev);
	harness_deinit(&h);
}

/* A session is for exactly-once replies and wait queues, not ownership:
 * its end (expiry or close) drops its waiters and their pending private
 * leases, emits nothing, and leaves the locks it holds to their leases. They
 * keep reporting the ended session as holder until released by token or
 * their lease ends, which hands them to their next waiter as usual. */
static void test_session_end_drops_waiters_and_keeps_held_locks_until_lease_ends(void **state)
{
	(void)state;
	struct harness h;
	struct locks_lock_info info;
	struct locks_counts counts;
	uint64_t due[4];

	harness_init(&h);
	uint64_t a = harness_session(&h, 1000);
	uint64_t b = harness_session(&h, 600000);
	uint64_t c = harness_session(&h, 600000);
	uint64_t shared = harness_lease_op(&h, LOCKS_OP_LEASE_GRANT, b, 1, 0, 60000)->id;
	const struct locks_reply *r = harness_acquire(&h, a, 1, "m", TRY, 5000, 0);
	uint64_t token_m = r->token, lease_m = r->id;
	uint64_t token_s = harness_acquire(&h, a, 2, "s", TRY, 0, shared)->token;
	harness_acquire(&h, b, 2, "n", TRY, 60000, 0);
	harness_acquire(&h, c, 1, "m", WAIT, 60000, 0);
	assert_int_equal(harness_acquire(&h, a, 3, "n", WAIT, 60000, 0)->status, HASP_STATUS_QUEUED);
	locks_counts_get(&h.sm, &counts);
	assert_int_equal(counts.waiters, 2);
	uint32_t leases_before = counts.leases;

	h.now_ms += 1000;
	assert_int_equal(locks_sessions_due(&h.sm, locks_log_time(&h.sm, h.term, h.now_ms), due, 4), 1);
	assert_int_equal(due[0], a);
	struct locks_cmd se = { .op = LOCKS_OP_SESSION_EXPIRE, .session_id = a };
	uint64_t rev = h.sm.revision;
	r = harness_apply(&h, &se);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(r->reason, LOCKS_REASON_NONE);
	assert_int_equal(h.sm.revision, rev + 1);
	assert_int_equal(h.res.event_count, 0); /* nothing released, nobody woken */
	locks_counts_get(&h.sm, &counts);
	assert_int_equal(counts.waiters, 1);       /* a's waiter left; c's stays */
	assert_int_equal(counts.leases, leases_before - 1); /* with its pending lease */
	assert_int_equal(counts.sessions, 2);
	assert_int_equal(counts.locks, 3);
	/* a's locks are still held, reported as a's, tokens unchanged. */
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"m", 1, &info));
	assert_int_equal(info.holder_session_id, a);
	assert_int_equal(info.token, token_m);
	assert_int_equal(info.waiter_count, 1);
	assert_true(locks_check(&h.sm, (const uint8_t *)"m", 1, token_m));
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"s", 1, &info));
	assert_int_equal(info.holder_session_id, a);
	/* Releasing n grants nobody: a's waiter left with a. */
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"n", 1, &info));
	assert_int_equal(harness_release(&h, b, 3, "n", info.token)->status, HASP_STATUS_OK);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_LOCK_GRANTED), 0);

	/* a's slot goes to the next session; it is not a's holder identity:
	 * acquiring m is plain BUSY (not SELF_HELD), its quota starts empty. */
	uint64_t d = harness_session(&h, 600000);
	assert_int_equal(d & 0xffffff, a & 0xffffff);
	r = harness_acquire(&h, d, 1, "m", TRY, 100, 0);
	assert_int_equal(r->status, HASP_STATUS_BUSY);
	assert_int_equal(r->reason, LOCKS_REASON_NONE);
	assert_int_equal(r->token, token_m);
	struct locks_session_info si;
	assert_true(locks_session_read(&h.sm, d, &si));
	assert_int_equal(si.lock_count, 0);

	/* m's own TTL ends: expiry releases it (as a's grant) to c. */
	h.now_ms += 4000;
	r = harness_expire(&h, lease_m);
	assert_int_equal(r->reason, LOCKS_REASON_NONE);
	const struct locks_event *rel = harness_event(&h, HASP_EVENT_LOCK_RELEASED, 0);
	assert_non_null(rel);
	assert_int_equal(rel->session_id, a);
	assert_int_equal(rel->token, token_m);
	assert_int_equal(rel->cause, LOCKS_CAUSE_EXPIRE);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_LOCK_GRANTED), 1);
	assert_int_equal(harness_event(&h, HASP_EVENT_LOCK_GRANTED, 0)->session_id, c);
	assert_true(locks_session_read(&h.sm, d, &si));
	assert_int_equal(si.lock_count, 0);

	/* Close does the same: c's lock stays, the closed session is gone, and
	 * a retried close gets SESSION_EXPIRED. The shared lease's lock of the
	 * ended a goes with its lease. */
	struct locks_cmd close = harness_cmd(LOCKS_OP_SESSION_CLOSE, c, 2, NULL);
	assert_int_equal(harness_apply(&h, &close)->status, HASP_STATUS_OK);
	assert_int_equal(h.res.event_count, 0);
	assert_true(locks_lock_read(&h.sm, (const uint8_t *)"m", 1, &info));
	assert_int_equal(info.holder_session_id, c);
	assert_int_equal(harness_apply(&h, &close)->status, HASP_STATUS_SESSION_EXPIRED);
	assert_true(locks_check(&h.sm, (const uint8_t *)"s", 1, token_s));
	assert_int_equal(harness_lease_op(&h, LOCKS_OP_LEASE_REVOKE, b, 4, shared, 0)->status,
			 HASP_STATUS_OK);
	assert_int_equal(harness_event(&h, HASP_EVENT_LOCK_RELEASED, 0)->session_id, a);
	assert_false(locks_lock_read(&h.sm, (const uint8_t *)"s", 1, &info));
	assert_true(locks_invariants_ok(&h.sm));
	harness_deinit(&h);
}

/* A KV_PUT of "k" by session `s` at `seq` with request `digest`. */
static struct locks_cmd put_with_digest(uint64_t s, uint64_t seq, uint64_t digest)
{
	struct locks_cmd c = harness_cmd(LOCKS_OP_KV_PUT, s, seq, "k");
	c.value = (const uint8_t *)"v";
	c.value_len = 1;
	c.digest = digest;
	return c;
}

/* The leader answers a retransmission from locks_cached_reply_find()
 * instead of proposing it (docs/PROTOCOL.md, "Exactly once"): it finds a
 * reply exactly where applying the duplicate would answer from the cache,
 * the same bytes, and changes nothing; everywhere else the apply decides. */
static void test_cached_reply_find_answers_what_a_duplicate_apply_would(void **state)
{
	(void)state;
	struct harness h;
	struct locks_reply found;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	struct locks_cmd acq = harness_cmd(LOCKS_OP_ACQUIRE, a, 1, "q");
	acq.mode = TRY;
	acq.ttl_ms = 1000;
	acq.digest = 0xabc;
	/* Not applied yet (in flight): nothing to answer from. */
	assert_false(locks_cached_reply_find(&h.sm, a, 1, 0xabc, &found));
	assert_int_equal(harness_apply(&h, &acq)->status, HASP_STATUS_GRANTED);

	/* A hit: what the duplicate's apply returns, byte for byte. */
	uint64_t revision = h.sm.revision, index = h.sm.applied_index;
	assert_true(locks_cached_reply_find(&h.sm, a, 1, 0xabc, &found));
	assert_int_equal(h.sm.revision, revision);
	assert_int_equal(h.sm.applied_index, index);
	h.now_ms += 10;
	assert_memory_equal(harness_apply(&h, &acq), &found, sizeof(found));
	assert_true(h.res.duplicate);
	assert_int_equal(found.status, HASP_STATUS_GRANTED);

	/* Another digest (the apply refuses it: request_mismatch), digest 0,
	 * seq 0, a seq not applied, an unknown session: no answer. */
	assert_false(locks_cached_reply_find(&h.sm, a, 1, 0xdef, &found));
	assert_false(locks_cached_reply_find(&h.sm, a, 1, 0, &found));
	assert_false(locks_cached_reply_find(&h.sm, a, 0, 0xabc, &found));
	assert_false(locks_cached_reply_find(&h.sm, a, 2, 0xabc, &found));
	assert_false(locks_cached_reply_find(&h.sm, a + 1, 1, 0xabc, &found));
	assert_false(locks_cached_reply_find(&h.sm, 0, 1, 0xabc, &found));

	/* Reordered: 3 applied before 2, so 2 is in the window but not
	 * recorded yet. A record without a digest (an entry from before
	 * digests) is left to the apply, which answers it from the cache. */
	struct locks_cmd put3 = put_with_digest(a, 3, 0x333);
	assert_int_equal(harness_apply(&h, &put3)->status, HASP_STATUS_OK);
	assert_false(locks_cached_reply_find(&h.sm, a, 2, 0x222, &found));
	assert_true(locks_cached_reply_find(&h.sm, a, 3, 0x333, &found));
	struct locks_cmd put2 = put_with_digest(a, 2, 0);
	assert_int_equal(harness_apply(&h, &put2)->status, HASP_STATUS_OK);
	assert_false(locks_cached_reply_find(&h.sm, a, 2, 0x222, &found));
	put2.digest = 0x222;
	harness_apply(&h, &put2);
	assert_true(h.res.duplicate);

	/* Below the floor the apply refuses (seq_too_old): no answer, though
	 * the seq was applied with this digest. */
	assert_int_equal(keepalive_with_floor(&h, a, 4)->status, HASP_STATUS_OK);
	assert_false(locks_cached_reply_find(&h.sm, a, 1, 0xabc, &found));
	assert_false(locks_cached_reply_find(&h.sm, a, 3, 0x333, &found));
	assert_int_equal(harness_apply(&h, &acq)->reason, LOCKS_REASON_SEQ_TOO_OLD);

	/* An ended session's cache goes with it. */
	struct locks_cmd put5 = put_with_digest(a, 5, 0x555);
	harness_apply(&h, &put5);
	assert_true(locks_cached_reply_find(&h.sm, a, 5, 0x555, &found));
	struct locks_cmd close = harness_cmd(LOCKS_OP_SESSION_CLOSE, a, 6, NULL);
	assert_int_equal(harness_apply(&h, &close)->status, HASP_STATUS_OK);
	assert_false(locks_cached_reply_find(&h.sm, a, 5, 0x555, &found));
	harness_deinit(&h);
}

/* The same for a retried SESSION_OPEN, found by its nonce: the open's
 * reply for its own owner while its session lives, nothing otherwise. */
static void test_open_reply_find_by_nonce(void **state)
{
	(void)state;
	struct harness h;
	struct locks_reply found;

	harness_init(&h);
	struct locks_cmd open = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 5000, .nonce = 0x77, .owner = 9 };
	assert_false(locks_open_reply_find(&h.sm, 0x77, 9, &found));
	struct locks_reply first = *harness_apply(&h, &open);
	assert_int_equal(first.status, HASP_STATUS_OK);

	h.now_ms += 100;
	uint64_t revision = h.sm.revision;
	assert_true(locks_open_reply_find(&h.sm, 0x77, 9, &found));
	assert_memory_equal(&found, &first, sizeof(found));
	assert_memory_equal(harness_apply(&h, &open), &found, sizeof(found));
	assert_true(h.res.duplicate);
	assert_int_equal(h.sm.revision, revision);

	/* Another owner's open with the nonce is refused at apply
	 * (nonce_in_use); another nonce or none opens a new session. */
	assert_false(locks_open_reply_find(&h.sm, 0x77, 10, &found));
	assert_false(locks_open_reply_find(&h.sm, 0x78, 9, &found));
	assert_false(locks_open_reply_find(&h.sm, 0, 9, &found));

	/* Once the session ended the nonce opens a new one. */
	struct locks_cmd close = harness_cmd(LOCKS_OP_SESSION_CLOSE, first.id, 1, NULL);
	assert_int_equal(harness_apply(&h, &close)->status, HASP_STATUS_OK);
	assert_false(locks_open_reply_find(&h.sm, 0x77, 9, &found));
	harness_deinit(&h);
}

/* SESSION_OPEN has no seq yet; the client's nonce makes it exactly-once
 * (docs/PROTOCOL.md): a retried open gets the identical reply and changes
 * nothing, also after time moved and when the table has filled since. */
static void test_session_open_same_nonce_returns_same_session(void **state)
{
	(void)state;
	struct harness h;
	struct locks_config cfg;
	struct locks_counts counts;

	locks_config_default(&cfg);
	cfg.sessions_max = 2;
	harness_init_cfg(&h, &cfg);
	struct locks_cmd open = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 5000, .nonce = 0xfeedbeef };
	struct locks_reply first = *harness_apply(&h, &open);
	assert_int_equal(first.status, HASP_STATUS_OK);
	assert_false(h.res.duplicate);
	uint64_t rev = h.sm.revision;

	/* The session works (and its deadline moves) in between. */
	h.now_ms += 700;
	assert_int_equal(harness_acquire(&h, first.id, 1, "x", TRY, 100, 0)->status, HASP_STATUS_GRANTED);
	rev = h.sm.revision;
	h.now_ms += 300;
	const struct locks_reply *again = harness_apply(&h, &open);
	assert_true(h.res.duplicate);
	assert_memory_equal(again, &first, sizeof(first));
	assert_int_equal(h.sm.revision, rev);
	assert_int_equal(h.res.event_count, 0);
	locks_counts_get(&h.sm, &counts);
	assert_int_equal(counts.sessions, 1);

	/* Fill the table: a retry of the first open is still answered. */
	assert_int_equal(harness_session(&h, 5000) != first.id, 1);
	struct locks_cmd other = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 5000, .nonce = 7 };
	assert_int_equal(harness_apply(&h, &other)->reason, LOCKS_REASON_SESSIONS_FULL);
	rev = h.sm.revision;
	again = harness_apply(&h, &open);
	assert_memory_equal(again, &first, sizeof(first));
	assert_int_equal(h.sm.revision, rev);
	harness_deinit(&h);
}

static void test_session_open_different_nonces_open_different_sessions(void **state)
{
	(void)state;
	struct harness h;
	struct locks_counts counts;

	harness_init(&h);
	struct locks_cmd open = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 5000, .nonce = 1 };
	uint64_t x = harness_apply(&h, &open)->id;
	open.nonce = 2;
	uint64_t rev = h.sm.revision;
	const struct locks_reply *r = harness_apply(&h, &open);
	assert_false(h.res.duplicate);
	assert_int_equal(h.sm.revision, rev + 1);
	uint64_t y = r->id;
	assert_true(x != y);
	/* Nonce 0 means "no deduplication": every open is a new session. */
	open.nonce = 0;
	uint64_t z1 = harness_apply(&h, &open)->id;
	uint64_t z2 = harness_apply(&h, &open)->id;
	assert_false(h.res.duplicate);
	assert_true(z1 != z2 && z1 != x && z2 != y);
	locks_counts_get(&h.sm, &counts);
	assert_int_equal(counts.sessions, 4);
	harness_deinit(&h);
}

/* The nonce names a live session: once it ends (close or expiry), the same
 * nonce opens a new one. */
static void test_session_nonce_opens_new_session_after_session_ends(void **state)
{
	(void)state;
	struct harness h;

	harness_init(&h);
	struct locks_cmd open = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 1000, .nonce = 42 };
	uint64_t first = harness_apply(&h, &open)->id;
	struct locks_cmd close = harness_cmd(LOCKS_OP_SESSION_CLOSE, first, 1, NULL);
	assert_int_equal(harness_apply(&h, &close)->status, HASP_STATUS_OK);
	uint64_t rev = h.sm.revision;
	const struct locks_reply *r = harness_apply(&h, &open);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_false(h.res.duplicate);
	assert_int_equal(h.sm.revision, rev + 1);
	uint64_t second = r->id;
	assert_true(second != first);

	h.now_ms += 1000;
	struct locks_cmd se = { .op = LOCKS_OP_SESSION_EXPIRE, .session_id = second };
	assert_int_equal(harness_apply(&h, &se)->reason, LOCKS_REASON_NONE);
	r = harness_apply(&h, &open);
	assert_false(h.res.duplicate);
	assert_true(r->id != first && r->id != second);
	harness_deinit(&h);
}

/* Operator force-release: the next grant has a larger token, so the old
 * holder is fenced everywhere. */
static void test_force_release_makes_old_token_stale(void **state)
{
	(void)state;
	struct harness h;
	struct hasp_fence fence;

	harness_init(&h);
	hasp_fence_init(&fence);
	uint64_t a = harness_session(&h, 60000);
	uint64_t b = harness_session(&h, 60000);
	uint64_t old = harness_acquire(&h, a, 1, "f", TRY, 60000, 0)->token;
	assert_true(hasp_fence_admit(&fence, old));
	harness_acquire(&h, b, 1, "f", WAIT, 60000, 0);
	struct locks_cmd force = harness_cmd(LOCKS_OP_FORCE_RELEASE, 0, 0, "f");
	const struct locks_reply *r = harness_apply(&h, &force);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_int_equal(r->token, old);
	const struct locks_event *g = harness_event(&h, HASP_EVENT_LOCK_GRANTED, 0);
	assert_non_null(g);
	assert_int_equal(g->session_id, b);
	assert_true(hasp_fence_admit(&fence, g->token));
	assert_false(hasp_fence_admit(&fence, old));
	assert_int_equal(harness_release(&h, a, 2, "f", old)->status, HASP_STATUS_NOT_HOLDER);
	assert_int_equal(harness_apply(&h, &force)->status, HASP_STATUS_OK);
	assert_int_equal(harness_apply(&h, &force)->status, HASP_STATUS_NOT_FOUND);
	harness_deinit(&h);
}

/* KV_CAS by value (issue 11 item 5): the value is what is compared, a
 * missing key never matches, and a failed CAS changes nothing. */
static void test_kv_cas_by_value(void **state)
{
	(void)state;
	struct harness h;
	struct locks_kv_info info;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	const struct locks_reply *r = harness_put(&h, a, 1, "cfg/v", "old", 0);
	assert_int_equal(r->status, HASP_STATUS_OK);
	uint64_t rev = r->revision;

	struct locks_cmd cas = harness_cmd(LOCKS_OP_KV_CAS, a, 2, "cfg/v");
	cas.flags = LOCKS_CMD_CAS_VALUE;
	cas.expect = (const uint8_t *)"wrong";
	cas.expect_len = 5;
	cas.value = (const uint8_t *)"new";
	cas.value_len = 3;
	r = harness_apply(&h, &cas);
	assert_int_equal(r->status, HASP_STATUS_COMPARE_FAILED);
	assert_int_equal(r->reason, LOCKS_REASON_KV_MISMATCH);
	assert_int_equal(r->revision, rev);
	assert_int_equal(h.res.event_count, 0);
	assert_true(locks_kv_get(&h.sm, (const uint8_t *)"cfg/v", 5, &info));
	assert_int_equal(info.mod_revision, rev);
	assert_memory_equal(info.value, "old", 3);

	/* A prefix of the value is not the value. */
	cas.seq = 3;
	cas.expect = (const uint8_t *)"ol";
	cas.expect_len = 2;
	assert_int_equal(harness_apply(&h, &cas)->status, HASP_STATUS_COMPARE_FAILED);

	cas.seq = 4;
	cas.expect = (const uint8_t *)"old";
	cas.expect_len = 3;
	r = harness_apply(&h, &cas);
	assert_int_equal(r->status, HASP_STATUS_OK);
	assert_true(r->revision > rev);
	assert_true(locks_kv_get(&h.sm, (const uint8_t *)"cfg/v", 5, &info));
	assert_int_equal(info.value_len, 3);
	assert_memory_equal(info.value, "new", 3);

	/* A missing key has no value: not created, even for an empty one. */
	struct locks_cmd miss = harness_cmd(LOCKS_OP_KV_CAS, a, 5, "cfg/none");
	miss.flags = LOCKS_CMD_CAS_VALUE;
	miss.value = (const uint8_t *)"x";
	miss.value_len = 1;
	r = harness_apply(&h, &miss);
	assert_int_equal(r->status, HASP_STATUS_COMPARE_FAILED);
	assert_int_equal(r->reason, LOCKS_REASON_KV_MISSING);
	assert_int_equal(r->revision, 0);
	assert_false(locks_kv_get(&h.sm, (const uint8_t *)"cfg/none", 8, &info));
	miss.seq = 6;
	miss.expect = (const uint8_t *)"x";
	miss.expect_len = 1;
	assert_int_equal(harness_apply(&h, &miss)->status, HASP_STATUS_COMPARE_FAILED);
	assert_false(locks_kv_get(&h.sm, (const uint8_t *)"cfg/none", 8, &info));
	harness_deinit(&h);
}

static void test_kv_revisions_cas_range_and_lease(void **state)
{
	(void)state;
	struct harness h;
	struct locks_kv_info info, out[8];

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	const struct locks_reply *r = harness_put(&h, a, 1, "cfg/b", "1", 0);
	assert_int_equal(r->status, HASP_STATUS_OK);
	uint64_t created = r->revision;
	assert_int_equal(harness_event(&h, HASP_EVENT_KV_PUT, 0)->revision, created);
	r = harness_put(&h, a, 2, "cfg/b", "22", 0);
	uint64_t modified = r->revision;
	assert_true(locks_kv_get(&h.sm, (const uint8_t *)"cfg/b", 5, &info));
	assert_int_equal(info.create_revision, created);
	assert_int_equal(info.mod_revision, modified);
	assert_int_equal(info.version, 2);
	assert_int_equal(info.value_len, 2);
	assert_memory_equal(info.value, "22", 2);

	struct locks_cmd cas = harness_cmd(LOCKS_OP_KV_CAS, a, 3, "cfg/b");
	cas.value = (const uint8_t *)"333";
	cas.value_len = 3;
	cas.token = created; /* stale */
	r = harness_apply(&h, &cas);
	assert_int_equal(r->status, HASP_STATUS_COMPARE_FAILED);
	assert_int_equal(r->revision, modified);
	cas.seq = 4;
	cas.token = modified;
	assert_int_equal(harness_apply(&h, &cas)->status, HASP_STATUS_OK);
	/* Expected revision 0: create only if absent. */
	struct locks_cmd create = harness_cmd(LOCKS_OP_KV_CAS, a, 5, "cfg/a");
	assert_int_equal(harness_apply(&h, &create)->status, HASP_STATUS_OK);
	create.seq = 6;
	assert_int_equal(harness_apply(&h, &create)->status, HASP_STATUS_COMPARE_FAILED);

	harness_put(&h, a, 7, "cfg/c", "", 0);
	harness_put(&h, a, 8, "cfg", "root", 0);
	harness_put(&h, a, 9, "other", "x", 0);
	uint32_t n = locks_kv_range(&h.sm, (const uint8_t *)"cfg", 3, NULL, 0, out, 8);
	assert_int_equal(n, 4);
	const char *expect[] = { "cfg", "cfg/a", "cfg/b", "cfg/c" };
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(out[i].key_len, strlen(expect[i]));
		assert_memory_equal(out[i].key, expect[i], out[i].key_len);
	}
	n = locks_kv_range(&h.sm, (const uint8_t *)"cfg/", 4, (const uint8_t *)"cfg/a", 5, out, 1);
	assert_int_equal(n, 1);
	assert_memory_equal(out[0].key, "cfg/b", 5);

	struct locks_cmd del = harness_cmd(LOCKS_OP_KV_DELETE, a, 10, "cfg/b");
	assert_int_equal(harness_apply(&h, &del)->status, HASP_STATUS_OK);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_KV_DELETED), 1);
	del.seq = 11;
	assert_int_equal(harness_apply(&h, &del)->status, HASP_STATUS_NOT_FOUND);

	/* A leased key goes with its lease; a put without the lease detaches. */
	uint64_t lease = harness_lease_op(&h, LOCKS_OP_LEASE_GRANT, a, 12, 0, 100)->id;
	harness_put(&h, a, 13, "svc/1", "up", lease);
	harness_put(&h, a, 14, "svc/2", "up", lease);
	harness_put(&h, a, 15, "svc/2", "up", 0);
	h.now_ms += 100;
	assert_int_equal(harness_expire(&h, lease)->status, HASP_STATUS_OK);
	assert_int_equal(harness_event_count(&h, HASP_EVENT_KV_DELETED), 1);
	assert_false(locks_kv_get(&h.sm, (const uint8_t *)"svc/1", 5, &info));
	assert_true(locks_kv_get(&h.sm, (const uint8_t *)"svc/2", 5, &info));

	/* Bad input is a typed reply. */
	char big[HASP_VALUE_SIZE_MAX + 2];
	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_int_equal(harness_put(&h, a, 16, "k", big, 0)->status, HASP_STATUS_TOO_LARGE);
	assert_int_equal(harness_put(&h, a, 17, "bad key", "v", 0)->status, HASP_STATUS_BAD_NAME);
	harness_deinit(&h);
}

/* Capacities are a designed state: FULL with a reason, never a crash. */
static void test_full_is_a_typed_reply(void **state)
{
	(void)state;
	struct harness h;
	struct locks_config cfg;
	char name[16];

	locks_config_default(&cfg);
	cfg.locks_max = 4;
	cfg.leases_max = 6;
	cfg.waiters_max = 2;
	cfg.sessions_max = 3;
	cfg.kv_entries_max = 2;
	cfg.kv_bytes_max = 10;
	cfg.locks_per_lease_max = 2;
	harness_init_cfg(&h, &cfg);
	uint64_t a = harness_session(&h, 60000);
	uint64_t b = harness_session(&h, 60000);
	uint64_t seq = 1;
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "l%d", i);
		assert_int_equal(harness_acquire(&h, a, seq++, name, TRY, 100, 0)->status, HASP_STATUS_GRANTED);
	}
	const struct locks_reply *r = harness_acquire(&h, a, seq++, "l4", TRY, 100, 0);
	assert_int_equal(r->status, HASP_STATUS_FULL);
	assert_int_equal(r->reason, LOCKS_REASON_LOCKS_FULL);
	assert_int_equal(harness_acquire(&h, b, 1, "l0", WAIT, 100, 0)->status, HASP_STATUS_QUEUED);
	/* 4 private leases held + 1 pending for the waiter + this one = 6. */
	uint64_t lease = harness_lease_op(&h, LOCKS_OP_LEASE_GRANT, b, 3, 0, 1000)->id;
	assert_int_equal(harness_lease_op(&h, LOCKS_OP_LEASE_GRANT, b, 4, 0, 1000)->reason,
			 LOCKS_REASON_LEASES_FULL);
	r = harness_acquire(&h, b, 2, "l1", WAIT, 100, 0);
	assert_int_equal(r->reason, LOCKS_REASON_LEASES_FULL);
	assert_int_equal(harness_acquire(&h, b, 5, "l1", WAIT, 0, lease)->status, HASP_STATUS_QUEUED);
	r = harness_acquire(&h, b, 6, "l2", WAIT, 0, lease);
	assert_int_equal(r->reason, LOCKS_REASON_WAITERS_FULL);
	assert_int_equal(harness_session(&h, 1000) != 0, 1);
	struct locks_cmd open = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 1000 };
	assert_int_equal(harness_apply(&h, &open)->reason, LOCKS_REASON_SESSIONS_FULL);
	assert_int_equal(harness_put(&h, a, seq++, "k1", "1234", 0)->status, HASP_STATUS_OK);
	assert_int_equal(harness_put(&h, a, seq++, "k2", "12345", 0)->reason, LOCKS_REASON_KV_BYTES_FULL);
	assert_int_equal(harness_put(&h, a, seq++, "k2", "1", 0)->status, HASP_STATUS_OK);
	assert_int_equal(harness_put(&h, a, seq++, "k3", "", 0)->reason, LOCKS_REASON_KV_FULL);
	assert_true(h.sm.stats.full >= 6);
	harness_deinit(&h);
}

static void test_bad_commands_change_nothing(void **state)
{
	(void)state;
	struct harness h;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	uint64_t rev = h.sm.revision;
	assert_int_equal(harness_acquire(&h, a, 1, "", TRY, 100, 0)->status, HASP_STATUS_BAD_NAME);
	assert_int_equal(harness_acquire(&h, a, 2, "a b", TRY, 100, 0)->status, HASP_STATUS_BAD_NAME);
	assert_int_equal(harness_acquire(&h, a, 3, "ok", TRY, 5, 0)->status, HASP_STATUS_BAD_TTL);
	assert_int_equal(harness_acquire(&h, a, 4, "ok", TRY, 0, 0)->status, HASP_STATUS_BAD_REQUEST);
	assert_int_equal(harness_acquire(&h, a, 5, "ok", 7, 100, 0)->status, HASP_STATUS_BAD_REQUEST);
	assert_int_equal(harness_acquire(&h, a, 6, "ok", TRY, 100, 77)->status, HASP_STATUS_BAD_REQUEST);
	struct locks_cmd odd = { .op = 99 };
	assert_int_equal(harness_apply(&h, &odd)->status, HASP_STATUS_BAD_OPCODE);
	struct locks_cmd extra = { .op = LOCKS_OP_TICK, .token = 5 };
	assert_int_equal(harness_apply(&h, &extra)->status, HASP_STATUS_BAD_REQUEST);
	struct locks_cmd stray_nonce = harness_cmd(LOCKS_OP_SESSION_KEEPALIVE, a, 1, NULL);
	stray_nonce.nonce = 5;
	assert_int_equal(harness_apply(&h, &stray_nonce)->reason, LOCKS_REASON_BAD_FIELDS);
	/* A private lease is not addressable by lease commands. */
	uint64_t own = harness_acquire(&h, a, 7, "ok", TRY, 100, 0)->id;
	rev = h.sm.revision;
	assert_int_equal(harness_lease_op(&h, LOCKS_OP_LEASE_REVOKE, a, 8, own, 0)->reason,
			 LOCKS_REASON_PRIVATE_LEASE);
	assert_int_equal(harness_acquire(&h, a, 9, "ok2", TRY, 0, own)->reason, LOCKS_REASON_PRIVATE_LEASE);
	assert_int_equal(h.sm.revision, rev);
	/* Stray owner fields on a non-open command, a stray digest on a
	 * non-client command. */
	struct locks_cmd stray_owner = harness_cmd(LOCKS_OP_SESSION_KEEPALIVE, a, 11, NULL);
	stray_owner.owner = 5;
	assert_int_equal(harness_apply(&h, &stray_owner)->reason, LOCKS_REASON_BAD_FIELDS);
	struct locks_cmd stray_digest = { .op = LOCKS_OP_TICK, .digest = 5 };
	assert_int_equal(harness_apply(&h, &stray_digest)->status, HASP_STATUS_BAD_REQUEST);
	assert_int_equal(h.sm.revision, rev);
	harness_deinit(&h);
}

static void test_init_refuses_bad_config_and_survives_alloc_failure(void **state)
{
	(void)state;
	struct locks sm;
	struct locks_config cfg;

	locks_config_default(&cfg);
	cfg.session_window = 0;
	assert_int_equal(locks_init(&sm, &cfg), -HASP_ECONFIG);
	locks_config_default(&cfg);
	for (uint64_t n = 0; n < 24; n++) {
		hasp_alloc_fail_after(n);
		int rc = locks_init(&sm, &cfg);
		hasp_alloc_fail_never();
		if (rc == 0) {
			locks_deinit(&sm);
			break;
		}
		assert_int_equal(rc, -HASP_ENOMEM);
	}
	assert_true(locks_memory_size(&cfg) > 0);
	assert_true(locks_events_max(&cfg) >= 2 * cfg.locks_per_lease_max);
}

/* The revision moves once per state-changing command, so tokens of one
 * lock strictly increase even inside one batch, and never on refusals. */
/* The control plane lists locks, leases and sessions with a cursor: every
 * live record exactly once, resumable from any cursor, nothing after the
 * last one. */
static void test_cursor_lists_every_live_record_once(void **state)
{
	(void)state;
	struct harness h;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	uint64_t b = harness_session(&h, 60000);
	uint64_t lease = harness_lease_op(&h, LOCKS_OP_LEASE_GRANT, a, 1, 0, 5000)->id;
	const char *names[] = { "list/a", "list/b", "list/c" };
	uint64_t tokens[3];
	tokens[0] = harness_acquire(&h, a, 2, names[0], TRY, 1000, 0)->token;
	tokens[1] = harness_acquire(&h, b, 1, names[1], TRY, 0, lease)->token;
	tokens[2] = harness_acquire(&h, b, 2, names[2], TRY, 1000, 0)->token;
	/* A released lock is gone from the listing. */
	harness_acquire(&h, a, 3, "list/gone", TRY, 1000, 0);
	uint64_t gone = h.sm.revision;
	assert_int_equal(harness_release(&h, a, 4, "list/gone", gone)->status, HASP_STATUS_OK);

	bool seen[3] = { false, false, false };
	uint32_t cursor = 0, count = 0, resume = 0;
	const uint8_t *name;
	uint32_t name_len;
	struct locks_lock_info li;
	while (locks_lock_next(&h.sm, &cursor, &name, &name_len, &li)) {
		if (count++ == 0)
			resume = cursor;
		for (int i = 0; i < 3; i++) {
			if (name_len == strlen(names[i]) && memcmp(name, names[i], name_len) == 0) {
				assert_false(seen[i]);
				seen[i] = true;
				assert_int_equal(li.token, tokens[i]);
			}
		}
	}
	assert_int_equal(count, 3);
	assert_true(seen[0] && seen[1] && seen[2]);
	assert_false(locks_lock_next(&h.sm, &cursor, &name, &name_len, &li));
	/* Resuming after the first record yields the other two. */
	count = 0;
	while (locks_lock_next(&h.sm, &resume, &name, &name_len, &li))
		count++;
	assert_int_equal(count, 2);

	uint32_t shared = 0, private = 0;
	uint64_t id;
	struct locks_lease_info lsi;
	cursor = 0;
	while (locks_lease_next(&h.sm, &cursor, &id, &lsi)) {
		if (lsi.private_lease) {
			private++;
		} else {
			shared++;
			assert_int_equal(id, lease);
			assert_int_equal(lsi.lock_count, 1);
		}
	}
	assert_int_equal(shared, 1);
	assert_int_equal(private, 2); /* list/a and list/c carry their own TTL */

	struct locks_session_info si;
	uint32_t sessions = 0;
	cursor = 0;
	while (locks_session_next(&h.sm, &cursor, &id, &si)) {
		assert_true(id == a || id == b);
		sessions++;
	}
	assert_int_equal(sessions, 2);
	harness_deinit(&h);
}

static void test_tokens_strictly_increase_per_lock(void **state)
{
	(void)state;
	struct harness h;
	uint64_t last = 0;

	harness_init(&h);
	uint64_t a = harness_session(&h, 60000);
	uint64_t b = harness_session(&h, 60000);
	for (uint64_t i = 1; i <= 50; i++) {
		uint64_t s = i % 2 ? a : b;
		const struct locks_reply *r = harness_acquire(&h, s, 2 * i, "tok", TRY, 100, 0);
		assert_int_equal(r->status, HASP_STATUS_GRANTED);
		assert_true(r->token > last);
		last = r->token;
		assert_int_equal(harness_release(&h, s, 2 * i + 1, "tok", r->token)->status, HASP_STATUS_OK);
	}
	harness_deinit(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gc_pause_late_write_is_fenced),
		cmocka_unit_test(test_wrong_token_is_not_holder_from_any_session),
		cmocka_unit_test(test_release_by_token_needs_the_holder_or_its_owner),
		cmocka_unit_test(test_release_without_owner_release_is_session_bound),
		cmocka_unit_test(test_renew_by_token_from_the_holders_identity),
		cmocka_unit_test(test_same_seq_with_other_digest_is_refused),
		cmocka_unit_test(test_seq_jump_is_refused_and_moves_nothing),
		cmocka_unit_test(test_owner_quota_and_nonce_of_another_owner),
		cmocka_unit_test(test_owner_quota_follows_closes_expiries_restores_and_copies),
		cmocka_unit_test(test_acquire_by_the_holder_regrants_and_rearms),
		cmocka_unit_test(test_reissued_wait_is_granted_with_its_new_ttl),
		cmocka_unit_test(test_cancel_drops_the_wait_entry),
		cmocka_unit_test(test_grant_of_a_free_lock_is_an_event),
		cmocka_unit_test(test_expiry_hands_lock_to_oldest_waiter),
		cmocka_unit_test(test_revoke_shared_lease_releases_all_locks),
		cmocka_unit_test(test_duplicate_request_returns_identical_reply),
		cmocka_unit_test(test_snapshot_restore_identical_state_and_replies),
		cmocka_unit_test(test_snapshot_v3_is_still_read),
		cmocka_unit_test(test_snapshot_v4_is_still_read),
		cmocka_unit_test(test_snapshot_writes_only_the_replies_in_use),
		cmocka_unit_test(test_copy_carries_only_the_replies_written_since),
		cmocka_unit_test(test_seq_floor_drops_lower_replies_and_refuses_them),
		cmocka_unit_test(test_cached_reply_find_answers_what_a_duplicate_apply_would),
		cmocka_unit_test(test_open_reply_find_by_nonce),
		cmocka_unit_test(test_snapshot_write_refuses_a_short_buffer),
		cmocka_unit_test(test_corrupt_snapshot_refused_target_untouched),
		cmocka_unit_test(test_keepalive_committed_before_stale_expire_wins),
		cmocka_unit_test(test_new_term_does_not_shorten_or_reset_deadlines),
		cmocka_unit_test(test_session_end_drops_waiters_and_keeps_held_locks_until_lease_ends),
		cmocka_unit_test(test_session_open_same_nonce_returns_same_session),
		cmocka_unit_test(test_session_open_different_nonces_open_different_sessions),
		cmocka_unit_test(test_session_nonce_opens_new_session_after_session_ends),
		cmocka_unit_test(test_force_release_makes_old_token_stale),
		cmocka_unit_test(test_kv_revisions_cas_range_and_lease),
		cmocka_unit_test(test_kv_cas_by_value),
		cmocka_unit_test(test_full_is_a_typed_reply),
		cmocka_unit_test(test_bad_commands_change_nothing),
		cmocka_unit_test(test_init_refuses_bad_config_and_survives_alloc_failure),
		cmocka_unit_test(test_tokens_strictly_increase_per_lock),
		cmocka_unit_test(test_cursor_lists_every_live_record_once),
	};

	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
