/*
 * The caps on a lock's validity after an unanswered TTL change
 * (client/ttl_caps.c) across a session change: a lock with its own TTL
 * outlives the session that took it, so the cap of that session's lost
 * re-ACQUIRE (or its full-table cap) must keep binding the lock's
 * hasp_lock, and must never bind a grant to a later session.
 *
 * The responder hands out strictly increasing tokens, as a cluster does
 * (the revision of the grant), loses every request with a TTL of 1000 ms
 * (the cluster may have applied it) and ends the session on CHECK.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client_impl.h"
#include "common/clock.h"
#include "hasp/client.h"
#include "tests/client/client_test.h"
#include "tests/client/responder.h"
#include "tests/test_util.h"

#define LOST_TTL_MS 1000u
#define LONG_TTL_MS 60000u

struct increasing_tokens {
	uint64_t last_token; /* the responder thread's alone */
	atomic_int lost_seen; /* requests lost so far */
};

static void script_increasing_tokens(struct responder *r, int node, const struct hasp_wire_msg *req,
				     const struct sockaddr_in *from, void *arg)
{
	struct increasing_tokens *s = arg;

	if (req == NULL || responder_answer_session(r, node, req, from))
		return;
	switch (req->hdr.opcode) {
	case HASP_OP_ACQUIRE:
		if (req->body.acquire.ttl_ms != LOST_TTL_MS)
			reply_granted(r, node, req, from, ++s->last_token);
		else
			atomic_fetch_add(&s->lost_seen, 1);
		return;
	case HASP_OP_RENEW:
		if (req->body.renew.ttl_ms != LOST_TTL_MS)
			reply_granted(r, node, req, from, req->body.renew.token);
		return;
	case HASP_OP_CHECK:
		reply_status(r, node, req, from, HASP_STATUS_SESSION_EXPIRED);
		return;
	default:
		reply_status(r, node, req, from, HASP_STATUS_OK);
	}
}

static struct hasp_client *client_on_increasing_tokens(struct responder *r,
						       struct increasing_tokens *s, char *cluster,
						       size_t cluster_size, uint32_t deadline_ms)
{
	struct hasp_client_config cfg;

	s->last_token = 0;
	atomic_store(&s->lost_seen, 0);
	assert_int_equal(responder_start(r, 1, script_increasing_tokens, s), 0);
	test_config(&cfg, NULL);
	cfg.deadline_ms = deadline_ms; /* when a lost request gives up */
	return client_on(r, &cfg, cluster, cluster_size);
}

/* Ends the client's session (CHECK answers SESSION_EXPIRED) and opens a
 * new one. */
static void replace_session(struct hasp_client *c)
{
	uint64_t session = hasp_client_session_id(c);

	assert_int_equal(hasp_client_check(c, "any", 1), -HASP_ESESSION);
	assert_int_equal(hasp_client_connect(c), 0);
	assert_int_not_equal(hasp_client_session_id(c), session);
}

static void acquire_lost(struct hasp_client *c, const char *name)
{
	struct hasp_acquire_opts lost = { .ttl_ms = LOST_TTL_MS };
	struct hasp_lock ignored;

	assert_int_equal(hasp_client_acquire(c, name, &lost, &ignored), -HASP_ETIMEDOUT);
}

/* A 60 s lock re-acquired with a TTL of 1 s, the answer lost: the cluster
 * may have re-armed the lease to 1 s. The session then ends, the lock does
 * not: its hasp_lock stays capped. A renew of its token answered in the
 * new session sets the lease again and ends the cap. */
static void test_lost_reacquire_still_caps_the_lock_after_its_session(void **state)
{
	static struct increasing_tokens s;
	static struct responder r;
	struct hasp_acquire_opts opts = { .ttl_ms = LONG_TTL_MS };
	struct hasp_lock lock;
	char cluster[128];
	(void)state;

	struct hasp_client *c = client_on_increasing_tokens(&r, &s, cluster, sizeof(cluster), 100);
	assert_int_equal(hasp_client_acquire(c, "job", &opts, &lock), 0);
	acquire_lost(c, "job");
	uint64_t after = clock_monotonic_ns();
	assert_true(hasp_client_lock_valid_until(c, &lock) <= after + LOST_TTL_MS * MS);

	replace_session(c);
	assert_true(hasp_client_lock_valid_until(c, &lock) <= after + LOST_TTL_MS * MS);
	assert_false(hasp_client_lock_safe(c, &lock, LOST_TTL_MS));

	struct hasp_lock renewed = lock;
	assert_int_equal(hasp_client_renew(c, "job", lock.token, LONG_TTL_MS, &renewed), 0);
	assert_true(hasp_client_lock_valid_until(c, &renewed) > after + 50000 * MS);
	hasp_client_close(c);
	responder_stop(&r);
}

/* The old session's cap binds the grants it could have re-armed, which
 * all came before the session change: a later grant of the same name to
 * the new session (a larger token) is not capped by it. */
static void test_lost_reacquire_of_an_ended_session_spares_a_new_grant(void **state)
{
	static struct increasing_tokens s;
	static struct responder r;
	struct hasp_acquire_opts opts = { .ttl_ms = LONG_TTL_MS };
	struct hasp_lock old, fresh;
	char cluster[128];
	(void)state;

	struct hasp_client *c = client_on_increasing_tokens(&r, &s, cluster, sizeof(cluster), 100);
	assert_int_equal(hasp_client_acquire(c, "job", &opts, &old), 0);
	acquire_lost(c, "job");
	uint64_t after = clock_monotonic_ns();

	replace_session(c);
	assert_int_equal(hasp_client_acquire(c, "job", &opts, &fresh), 0);
	assert_true(fresh.token > old.token);
	assert_true(hasp_client_lock_valid_until(c, &fresh) > after + 50000 * MS);
	assert_true(hasp_client_lock_valid_until(c, &old) <= after + LOST_TTL_MS * MS);
	hasp_client_close(c);
	responder_stop(&r);
}

/* A table full of one session's caps (32) caps every lock of it; that
 * session's locks stay capped once it ended, a new session's grants are
 * not, and the ended session's caps leave room for the new session's own
 * (its one lost renew caps that lock alone). */
static void test_full_table_of_an_ended_session_still_caps_its_locks(void **state)
{
	static struct increasing_tokens s;
	static struct responder r;
	struct hasp_acquire_opts opts = { .ttl_ms = LONG_TTL_MS };
	struct hasp_lock held, a, b;
	char name[32];
	char cluster[128];
	(void)state;

	struct hasp_client *c = client_on_increasing_tokens(&r, &s, cluster, sizeof(cluster), 100);
	assert_int_equal(hasp_client_acquire(c, "held", &opts, &held), 0);
	uint64_t before = clock_monotonic_ns();
	for (int i = 0; i < 33; i++) {
		snprintf(name, sizeof(name), "lost-%d", i);
		acquire_lost(c, name);
	}
	uint64_t after = clock_monotonic_ns();
	/* The 33rd cap did not fit: every lock of the session is capped. */
	assert_true(hasp_client_lock_valid_until(c, &held) <= after + LOST_TTL_MS * MS);

	replace_session(c);
	assert_true(hasp_client_lock_valid_until(c, &held) <= after + LOST_TTL_MS * MS);
	assert_int_equal(hasp_client_acquire(c, "a", &opts, &a), 0);
	assert_int_equal(hasp_client_acquire(c, "b", &opts, &b), 0);
	assert_true(hasp_client_lock_valid_until(c, &a) > before + 50000 * MS);

	assert_int_equal(hasp_client_renew(c, "a", a.token, LOST_TTL_MS, NULL), -HASP_ETIMEDOUT);
	uint64_t renewed = clock_monotonic_ns();
	assert_true(hasp_client_lock_valid_until(c, &a) <= renewed + LOST_TTL_MS * MS);
	assert_true(hasp_client_lock_valid_until(c, &b) > renewed + 50000 * MS);
	assert_true(hasp_client_lock_valid_until(c, &held) <= after + LOST_TTL_MS * MS);
	hasp_client_close(c);
	responder_stop(&r);
}

static void *acquire_lost_main(void *arg)
{
	acquire_lost(arg, "job");
	return NULL;
}

/* A re-ACQUIRE under way when another thread replaces the session gets no
 * answer any more and may have been applied, as after a timeout: it caps
 * the lock as a lost one does. */
static void test_reacquire_cut_off_by_a_session_change_caps_the_lock(void **state)
{
	static struct increasing_tokens s;
	static struct responder r;
	struct hasp_acquire_opts opts = { .ttl_ms = LONG_TTL_MS };
	struct hasp_lock lock;
	pthread_t thread;
	char cluster[128];
	(void)state;

	/* The re-ACQUIRE's own deadline is far: the session change ends it. */
	struct hasp_client *c = client_on_increasing_tokens(&r, &s, cluster, sizeof(cluster), 60000);
	assert_int_equal(hasp_client_acquire(c, "job", &opts, &lock), 0);
	assert_int_equal(pthread_create(&thread, NULL, acquire_lost_main, c), 0);
	/* Bounded: the responder sees the re-ACQUIRE within a few ms. */
	for (int i = 0; i < 30000 && atomic_load(&s.lost_seen) == 0; i++)
		usleep(1000);
	assert_int_not_equal(atomic_load(&s.lost_seen), 0);
	replace_session(c);
	assert_int_equal(pthread_join(thread, NULL), 0);
	uint64_t after = clock_monotonic_ns();
	assert_true(hasp_client_lock_valid_until(c, &lock) <= after + LOST_TTL_MS * MS);
	hasp_client_close(c);
	responder_stop(&r);
}

/* ---- the table itself (white box: the paths no script reaches) ---- */

#define FAR_NS UINT64_MAX

static struct hasp_client *bare_client(uint64_t session_id)
{
	struct hasp_client *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	c->session_id = session_id; /* drift margin 0: a cap is send + TTL */
	return c;
}

/* A request of `session_id` on `name` (token 0: an ACQUIRE), first sent at
 * `send_ns` with a TTL of 1000 ms, given up at `now_ns` unanswered. */
static void note_lost(struct hasp_client *c, uint64_t session_id, const char *name,
		      uint64_t token, uint64_t send_ns, uint64_t now_ns)
{
	static struct client_req r;
	struct hasp_wire_msg m;

	/* The request as client_req_init encodes it (the cap reads the
	 * name back from its datagram), then as numbered and sent. */
	memset(&m, 0, sizeof(m));
	if (token == 0) {
		m.hdr.opcode = HASP_OP_ACQUIRE;
		m.body.acquire.name = (struct hasp_wire_bytes){ (const uint8_t *)name, strlen(name) };
		m.body.acquire.ttl_ms = LOST_TTL_MS;
	} else {
		m.hdr.opcode = HASP_OP_RENEW;
		m.body.renew.name = (struct hasp_wire_bytes){ (const uint8_t *)name, strlen(name) };
		m.body.renew.token = token;
		m.body.renew.ttl_ms = LOST_TTL_MS;
	}
	assert_int_equal(client_req_init(c, &r, &m, UINT64_MAX), 0);
	assert_int_equal(r.ttl_change_ms, LOST_TTL_MS);
	assert_int_equal(r.ttl_token, token);
	r.sent = true;
	r.session_id = session_id;
	r.first_send_ns = send_ns;
	client_ttl_cap_note_locked(c, &r, now_ns);
}

static void session_replaced(struct hasp_client *c, uint64_t session_id)
{
	c->session_id = session_id;
	client_ttl_caps_session_replaced_locked(c);
}

/* An answer of the old session taken in after the change (it arrived
 * before): its grant came before the change, so the old cap binds it too;
 * the new session's grant of the name stays free, and an answered renew
 * of an old token, sent after the cap was made, ends the cap. */
static void test_late_answer_of_an_ended_session_is_capped_too(void **state)
{
	(void)state;
	struct hasp_client *c = bare_client(1);
	const uint64_t cap_ns = 100 + LOST_TTL_MS * MS;

	client_ttl_cap_clear_locked(c, "job", 5, 10, 1); /* granted token 5 */
	note_lost(c, 1, "job", 0, 100, 200);
	session_replaced(c, 2);
	assert_int_equal(client_ttl_cap_apply_locked(c, "job", 5, FAR_NS), cap_ns);

	/* Sent before the cap was made: it does not end it, it is bound. */
	client_ttl_cap_clear_locked(c, "job", 9, 150, 1);
	assert_int_equal(client_ttl_cap_apply_locked(c, "job", 9, FAR_NS), cap_ns);
	client_ttl_cap_clear_locked(c, "job", 12, 300, 2); /* the new session's */
	assert_int_equal(client_ttl_cap_apply_locked(c, "job", 12, FAR_NS), FAR_NS);
	assert_int_equal(client_ttl_cap_apply_locked(c, "other", 9, FAR_NS), FAR_NS);

	client_ttl_cap_clear_locked(c, "job", 9, 300, 2); /* renewed after it */
	assert_int_equal(client_ttl_cap_apply_locked(c, "job", 5, FAR_NS), FAR_NS);
	assert_int_equal(c->ttl_caps_used, 0);
	free(c);
}

/* A request given up after its session was replaced (cancelled late) is
 * noted as ended at once: it caps the old grants, not the new ones. */
static void test_request_given_up_after_the_change_caps_only_old_grants(void **state)
{
	(void)state;
	struct hasp_client *c = bare_client(1);

	client_ttl_cap_clear_locked(c, "job", 5, 10, 1);
	session_replaced(c, 2);
	client_ttl_cap_clear_locked(c, "job", 8, 20, 2);
	note_lost(c, 1, "job", 0, 100, 200);
	assert_int_equal(client_ttl_cap_apply_locked(c, "job", 5, FAR_NS), 100 + LOST_TTL_MS * MS);
	assert_int_equal(client_ttl_cap_apply_locked(c, "job", 8, FAR_NS), FAR_NS);
	free(c);
}

/* A table full of ended caps of distinct names makes room for the current
 * session: they fold into one cap on every old token, never lowering less
 * than before, and the current session's grants stay free. */
static void test_full_table_folds_ended_caps_before_current_ones(void **state)
{
	(void)state;
	struct hasp_client *c = bare_client(1);
	char name[32];

	client_ttl_cap_clear_locked(c, "lock-0", 5, 10, 1);
	for (uint32_t i = 0; i < CLIENT_TTL_CAPS; i++) {
		snprintf(name, sizeof(name), "lock-%u", i);
		note_lost(c, 1, name, 0, 100 + i, 200 + i);
	}
	assert_int_equal(c->ttl_caps_used, CLIENT_TTL_CAPS);
	session_replaced(c, 2);
	client_ttl_cap_clear_locked(c, "new", 7, 1000, 2);
	note_lost(c, 2, "new", 7, 1000, 1100); /* needs a free entry */
	assert_int_equal(c->ttl_caps_used, 1);
	assert_int_equal(c->ttl_cap_all_ns, 0);
	/* lock-0 was capped at 100 + 1 s; now at the earliest of all, the same. */
	assert_int_equal(client_ttl_cap_apply_locked(c, "lock-0", 5, FAR_NS), 100 + LOST_TTL_MS * MS);
	assert_int_equal(client_ttl_cap_apply_locked(c, "lock-9", 5, FAR_NS), 100 + LOST_TTL_MS * MS);
	assert_int_equal(client_ttl_cap_apply_locked(c, "new", 7, FAR_NS), 1000 + LOST_TTL_MS * MS);
	assert_int_equal(client_ttl_cap_apply_locked(c, "fresh", 8, FAR_NS), FAR_NS);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_lost_reacquire_still_caps_the_lock_after_its_session,
					  responder_teardown),
		cmocka_unit_test_teardown(test_lost_reacquire_of_an_ended_session_spares_a_new_grant,
					  responder_teardown),
		cmocka_unit_test_teardown(test_full_table_of_an_ended_session_still_caps_its_locks,
					  responder_teardown),
		cmocka_unit_test_teardown(test_reacquire_cut_off_by_a_session_change_caps_the_lock,
					  responder_teardown),
		cmocka_unit_test(test_late_answer_of_an_ended_session_is_capped_too),
		cmocka_unit_test(test_request_given_up_after_the_change_caps_only_old_grants),
		cmocka_unit_test(test_full_table_folds_ended_caps_before_current_ones),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
