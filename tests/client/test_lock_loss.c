/*
 * Lock loss and automatic renewal against the scripted responder: an
 * auto_renew lock is renewed by the asynchronous loop and by the keepalive
 * thread and stays valid past its first TTL; a refused renew, unanswered
 * renews and an expired lease each call lock_lost_fn once, never before
 * the validity minus the margin.
 *
 * Loops end when the awaited renewals or losses happened (each is due
 * within a 300 ms TTL); a count bound stops them anyway.
 */
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "hasp/client.h"
#include "tests/client/client_test.h"
#include "tests/client/responder.h"
#include "tests/test_util.h"

#define TURNS_MAX 20000

enum renew_mode { RENEW_OK, RENEW_REFUSED, RENEW_SILENT };

struct script {
	enum renew_mode renew;
	bool release_silent; /* RELEASE goes unanswered */
};

static void script_locks(struct responder *r, int node, const struct hasp_wire_msg *req,
			 const struct sockaddr_in *from, void *arg)
{
	struct script *s = arg;
	struct hasp_wire_msg rep;

	if (req == NULL || responder_answer_session(r, node, req, from))
		return;
	switch (req->hdr.opcode) {
	case HASP_OP_ACQUIRE:
		responder_reply_init(&rep, req, HASP_STATUS_GRANTED);
		rep.body.granted.token = 40;
		rep.body.granted.lease_id = req->body.acquire.lease_id;
		/* A lease lock carries the lease's TTL. */
		rep.body.granted.ttl_ms = req->body.acquire.lease_id ? 300 : req->body.acquire.ttl_ms;
		responder_send(r, node, from, &rep);
		return;
	case HASP_OP_RENEW:
		if (s->renew == RENEW_SILENT)
			return;
		if (s->renew == RENEW_REFUSED) {
			reply_status(r, node, req, from, HASP_STATUS_NOT_HOLDER);
			return;
		}
		/* ttl_ms 0 keeps the lock's TTL: the answer says which. */
		responder_reply_init(&rep, req, HASP_STATUS_GRANTED);
		rep.body.granted.token = 40;
		rep.body.granted.ttl_ms = 300;
		responder_send(r, node, from, &rep);
		return;
	case HASP_OP_RELEASE:
		if (s->release_silent)
			return;
		reply_status(r, node, req, from, HASP_STATUS_OK);
		return;
	case HASP_OP_LEASE_GRANT:
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		rep.body.lease_ok.lease_id = 9;
		rep.body.lease_ok.ttl_ms = req->body.lease_grant.ttl_ms;
		responder_send(r, node, from, &rep);
		return;
	case HASP_OP_LEASE_KEEPALIVE: /* the lease is gone on the cluster */
		reply_status(r, node, req, from, HASP_STATUS_LEASE_EXPIRED);
		return;
	default:
		reply_status(r, node, req, from, HASP_STATUS_OK);
	}
}

struct losses {
	pthread_mutex_t mu;
	int count;
	struct hasp_lock_loss last;
	uint64_t at_ns;
};

static void on_lost(struct hasp_client *c, const struct hasp_lock_loss *loss, void *arg)
{
	struct losses *l = arg;

	assert_non_null(c);
	pthread_mutex_lock(&l->mu);
	l->count++;
	l->last = *loss;
	l->at_ns = clock_monotonic_ns();
	pthread_mutex_unlock(&l->mu);
}

static int losses_count(struct losses *l)
{
	pthread_mutex_lock(&l->mu);
	int n = l->count;
	pthread_mutex_unlock(&l->mu);
	return n;
}

static void loop_turn(struct hasp_client *c)
{
	struct pollfd pfd = { .fd = hasp_client_fd(c), .events = POLLIN };
	int timeout = hasp_client_timeout_ms(c);

	assert_true(pfd.fd >= 0);
	assert_true(timeout >= 0); /* a watched lock always has a next instant */
	assert_true(poll(&pfd, 1, timeout) >= 0);
	assert_int_equal(hasp_client_process(c, NULL), 0);
}

struct acquired {
	int rc;
	struct hasp_lock lock;
};

static void on_acquired(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct acquired *a = arg;

	(void)c;
	a->rc = res->rc;
	a->lock = res->lock;
}

static struct hasp_client *loss_client(struct responder *r, struct script *s, struct losses *l,
				       char *cluster, size_t size)
{
	struct hasp_client_config cfg;

	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->mu, NULL);
	assert_int_equal(responder_start(r, 1, script_locks, s), 0);
	test_config(&cfg, NULL);
	cfg.lock_lost_fn = on_lost;
	cfg.lock_lost_arg = l;
	cfg.lock_lost_margin_ms = 50;
	return client_on(r, &cfg, cluster, size);
}

/* Acquires "job" (TTL 300 ms, auto_renew) through the loop. */
static struct hasp_lock acquire_in_loop(struct hasp_client *c)
{
	struct acquired a = { .rc = 1 };
	struct hasp_acquire_opts opts = { .ttl_ms = 300, .auto_renew = true };

	assert_int_equal(hasp_client_acquire_async(c, "job", &opts, on_acquired, &a, NULL), 0);
	for (int i = 0; i < TURNS_MAX && a.rc == 1; i++)
		loop_turn(c);
	assert_int_equal(a.rc, 0);
	assert_int_equal(a.lock.token, 40);
	return a.lock;
}

static void test_loop_renews_an_auto_renew_lock(void **state)
{
	static struct script s = { .renew = RENEW_OK };
	static struct responder r;
	static struct losses l;
	struct hasp_client_stats st;
	char cluster[128];
	(void)state;

	struct hasp_client *c = loss_client(&r, &s, &l, cluster, sizeof(cluster));
	struct hasp_lock lock = acquire_in_loop(c);
	uint64_t first_until = hasp_client_lock_valid_until(c, &lock);
	/* Three renewals: the lock lives well past its first TTL. */
	for (int i = 0; i < TURNS_MAX && responder_count(&r, HASP_OP_RENEW, -1) < 3; i++)
		loop_turn(c);
	assert_true(responder_count(&r, HASP_OP_RENEW, -1) >= 3);
	for (int i = 0; i < 10; i++)
		loop_turn(c); /* the last renew's answer */
	assert_int_equal(losses_count(&l), 0);
	assert_true(hasp_client_lock_valid_until(c, &lock) > first_until);
	/* Released through the client: no longer renewed nor watched. */
	assert_int_equal(hasp_client_release(c, "job", lock.token), 0);
	for (int i = 0; i < 10; i++) { /* a renew in flight completes */
		struct pollfd pfd = { .fd = hasp_client_fd(c), .events = POLLIN };
		assert_true(poll(&pfd, 1, 50) >= 0);
		assert_int_equal(hasp_client_process(c, NULL), 0);
	}
	uint32_t renews = responder_count(&r, HASP_OP_RENEW, -1);
	hasp_client_stats_get(c, &st);
	assert_int_equal(st.lock_renews, renews);
	/* Only the session's keepalive is left (a third of 10 s away). */
	assert_true(hasp_client_timeout_ms(c) > 300);
	hasp_client_close(c);
	responder_stop(&r);
	pthread_mutex_destroy(&l.mu);
}

/* A release whose answer never came: the application let the lock go,
 * and libhasp must not keep it alive by renewing it (it would outlive
 * the application's interest, and every other client would wait). If the
 * release did not apply, the lock ends at its TTL. */
static void test_unanswered_release_stops_the_renewals(void **state)
{
	static struct script s = { .renew = RENEW_OK, .release_silent = true };
	static struct responder r;
	static struct losses l;
	char cluster[128];
	(void)state;

	struct hasp_client *c = loss_client(&r, &s, &l, cluster, sizeof(cluster));
	struct hasp_lock lock = acquire_in_loop(c);
	assert_int_equal(hasp_client_set_deadline(c, 200), 0);
	assert_int_equal(hasp_client_release(c, "job", lock.token), -HASP_ETIMEDOUT);
	uint32_t renews = responder_count(&r, HASP_OP_RENEW, -1);
	/* Past two renew instants (a third of 300 ms each) and the validity. */
	uint64_t until = clock_monotonic_ns() + 500 * MS;
	while (clock_monotonic_ns() < until) {
		struct pollfd pfd = { .fd = hasp_client_fd(c), .events = POLLIN };
		assert_true(poll(&pfd, 1, 20) >= 0);
		assert_int_equal(hasp_client_process(c, NULL), 0);
	}
	/* A renew already in flight at the release may still be counted. */
	assert_true(responder_count(&r, HASP_OP_RENEW, -1) <= renews + 1);
	assert_int_equal(losses_count(&l), 0); /* let go, not lost */
	hasp_client_close(c);
	responder_stop(&r);
	pthread_mutex_destroy(&l.mu);
}

static void test_refused_renew_is_a_loss(void **state)
{
	static struct script s = { .renew = RENEW_REFUSED };
	static struct responder r;
	static struct losses l;
	char cluster[128];
	(void)state;

	struct hasp_client *c = loss_client(&r, &s, &l, cluster, sizeof(cluster));
	struct hasp_lock lock = acquire_in_loop(c);
	for (int i = 0; i < TURNS_MAX && losses_count(&l) == 0; i++)
		loop_turn(c);
	assert_int_equal(l.count, 1);
	assert_int_equal(l.last.reason, -HASP_ENOTHOLDER);
	assert_int_equal(l.last.token, lock.token);
	assert_string_equal(l.last.name, "job");
	assert_int_equal(responder_count(&r, HASP_OP_RENEW, -1), 1); /* not renewed after */
	hasp_client_close(c);
	responder_stop(&r);
	pthread_mutex_destroy(&l.mu);
}

/* Renews go unanswered: the loss is told once, and never before the
 * validity minus the margin (it is the validity that decides). */
static void test_unanswered_renews_are_a_loss_before_validity_ends(void **state)
{
	static struct script s = { .renew = RENEW_SILENT };
	static struct responder r;
	static struct losses l;
	char cluster[128];
	(void)state;

	struct hasp_client *c = loss_client(&r, &s, &l, cluster, sizeof(cluster));
	struct hasp_lock lock = acquire_in_loop(c);
	for (int i = 0; i < TURNS_MAX && losses_count(&l) == 0; i++)
		loop_turn(c);
	assert_int_equal(l.count, 1);
	assert_int_equal(l.last.reason, -HASP_ETIMEDOUT);
	assert_int_equal(l.last.valid_until_ns, lock.valid_until_ns);
	assert_true(l.at_ns >= lock.valid_until_ns - 50 * MS);
	assert_true(responder_count(&r, HASP_OP_RENEW, -1) >= 1);
	for (int i = 0; i < 5; i++)
		loop_turn(c);
	assert_int_equal(losses_count(&l), 1); /* once */
	hasp_client_close(c);
	responder_stop(&r);
	pthread_mutex_destroy(&l.mu);
}

/* The keepalive thread renews and reports too (blocking calls). */
static void test_keepalive_thread_reports_a_refused_renew(void **state)
{
	static struct script s = { .renew = RENEW_REFUSED };
	static struct responder r;
	static struct losses l;
	struct hasp_lock lock;
	char cluster[128];
	(void)state;

	struct hasp_client *c = loss_client(&r, &s, &l, cluster, sizeof(cluster));
	struct hasp_acquire_opts opts = { .ttl_ms = 300, .auto_renew = true };
	assert_int_equal(hasp_client_acquire(c, "job", &opts, &lock), 0);
	assert_int_equal(hasp_client_keepalive_start(c), 0);
	for (int i = 0; i < 5000 && losses_count(&l) == 0; i++)
		usleep(1000);
	hasp_client_keepalive_stop(c);
	assert_int_equal(l.count, 1);
	assert_int_equal(l.last.reason, -HASP_ENOTHOLDER);
	hasp_client_close(c);
	responder_stop(&r);
	pthread_mutex_destroy(&l.mu);
}

/* A lock on a lease the loop keeps alive: the lease's keepalive answers
 * LEASE_EXPIRED, and the lock is reported lost for that reason. */
static void test_expired_lease_is_a_loss_of_its_locks(void **state)
{
	static struct script s = { .renew = RENEW_OK };
	static struct responder r;
	static struct losses l;
	struct hasp_lease lease;
	struct hasp_lock lock;
	char cluster[128];
	(void)state;

	struct hasp_client *c = loss_client(&r, &s, &l, cluster, sizeof(cluster));
	assert_int_equal(hasp_client_lease_grant(c, 300, &lease), 0);
	struct hasp_acquire_opts opts = { .lease_id = lease.lease_id };
	assert_int_equal(hasp_client_acquire(c, "job", &opts, &lock), 0);
	assert_int_equal(lock.lease_id, 9);
	for (int i = 0; i < TURNS_MAX && losses_count(&l) == 0; i++)
		loop_turn(c);
	assert_int_equal(l.count, 1);
	assert_int_equal(l.last.reason, -HASP_ELEASE);
	assert_int_equal(l.last.lease_id, 9);
	assert_true(responder_count(&r, HASP_OP_LEASE_KEEPALIVE, -1) >= 1); /* sent by the loop */
	assert_int_equal(responder_count(&r, HASP_OP_RENEW, -1), 0); /* a lease lock is not renewed */
	hasp_client_close(c);
	responder_stop(&r);
	pthread_mutex_destroy(&l.mu);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_loop_renews_an_auto_renew_lock, responder_teardown),
		cmocka_unit_test_teardown(test_unanswered_release_stops_the_renewals, responder_teardown),
		cmocka_unit_test_teardown(test_refused_renew_is_a_loss, responder_teardown),
		cmocka_unit_test_teardown(test_unanswered_renews_are_a_loss_before_validity_ends,
					  responder_teardown),
		cmocka_unit_test_teardown(test_keepalive_thread_reports_a_refused_renew,
					  responder_teardown),
		cmocka_unit_test_teardown(test_expired_lease_is_a_loss_of_its_locks,
					  responder_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
