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
#include <stdio.h>
#include <unistd.h>

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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
