/*
 * Adaptive idle without DPDK: the spin count, and the hybrid wait on real
 * fds: a readable fd ends it (also one that became readable before the
 * wait began: the wait is level-triggered), an eventfd ends it (the node's
 * io_uring wake fd, which O_ASYNC could not signal), idle_wake() from
 * another thread ends it, and otherwise the deadline does. Port fds
 * (AF_PACKET sockets) are found in /proc/self/fd. Deadlines are generous:
 * the tests check which event ended a wait (counters), never how fast.
 */
#include "dataplane/idle.h"

#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "hasp/errors.h"
#include "tests/test_util.h"

#define SEC 1000000000ull

static void test_idle_spins_then_sleeps_until_work_shows_up(void **state)
{
	(void)state;
	struct idle idle;
	assert_int_equal(idle_init(&idle, IDLE_SLEEP, 4), 0);
	assert_false(idle_note(&idle, false));
	assert_false(idle_note(&idle, false));
	assert_false(idle_note(&idle, false));
	assert_true(idle_note(&idle, false));
	/* Still sleepy after a wait: no new spin until work arrives. */
	assert_true(idle_note(&idle, false));
	assert_false(idle_note(&idle, true));
	assert_false(idle_note(&idle, false));
	idle_deinit(&idle);
}

/* The default spin: a hybrid lcore waits after its first empty poll (each
 * poll of net_tap is a system call; 256 of them after every burst were most
 * of a node's CPU, docs/PERFORMANCE.md "Cost per lock cycle"). */
static void test_idle_default_waits_after_the_first_empty_poll(void **state)
{
	(void)state;
	struct idle idle;
	assert_int_equal(idle_init(&idle, IDLE_HYBRID, 0), 0);
	assert_int_equal(idle.spin_max, IDLE_SPIN_DEFAULT);
	assert_false(idle_note(&idle, true));
	assert_true(idle_note(&idle, false));
	idle_deinit(&idle);
}

static void test_idle_poll_mode_never_sleeps(void **state)
{
	(void)state;
	struct idle idle;
	struct dp_stats st = { 0 };
	assert_int_equal(idle_init(&idle, IDLE_POLL, 1), 0);
	for (int i = 0; i < 1000; i++)
		assert_false(idle_note(&idle, false));
	expect_assert_failure(idle_wait(&idle, 0, 1, &st));
	idle_deinit(&idle);
}

static void test_idle_hybrid_readable_fd_ends_the_wait_even_if_ready_before(void **state)
{
	(void)state;
	struct idle idle;
	struct dp_stats st = { 0 };
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(idle_init(&idle, IDLE_HYBRID, 1), 0);
	assert_int_equal(idle_add_fd(&idle, p[0]), 0);
	/* The frame arrived between the last RX burst and the wait: the
	 * case that needed "poll once more" with edge-like signals. */
	assert_int_equal(write(p[1], "x", 1), 1);
	uint64_t now = clock_monotonic_ns();
	idle_wait(&idle, now, now + 30 * SEC, &st);
	assert_int_equal(st.idle_sleeps, 1);
	assert_int_equal(st.idle_wake_ready, 1);
	assert_int_equal(st.idle_wake_timeout, 0);
	idle_deinit(&idle);
	close(p[0]);
	close(p[1]);
}

static void test_idle_hybrid_node_eventfd_ends_the_wait(void **state)
{
	(void)state;
	struct idle idle;
	struct dp_stats st = { 0 };
	uint64_t one = 1;
	int efd = eventfd(0, EFD_NONBLOCK);
	assert_true(efd >= 0);
	assert_int_equal(idle_init(&idle, IDLE_HYBRID, 1), 0);
	assert_int_equal(idle_add_fd(&idle, efd), 0);
	assert_int_equal(write(efd, &one, sizeof(one)), sizeof(one));
	uint64_t now = clock_monotonic_ns();
	idle_wait(&idle, now, now + 30 * SEC, &st);
	assert_int_equal(st.idle_wake_ready, 1);
	idle_deinit(&idle);
	close(efd);
}

static void test_idle_hybrid_without_events_ends_at_the_deadline(void **state)
{
	(void)state;
	struct idle idle;
	struct dp_stats st = { 0 };
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(idle_init(&idle, IDLE_HYBRID, 1), 0);
	assert_int_equal(idle_add_fd(&idle, p[0]), 0);
	uint64_t now = clock_monotonic_ns();
	idle_wait(&idle, now, now + SEC / 100, &st);
	assert_int_equal(st.idle_wake_timeout, 1);
	assert_int_equal(st.idle_wake_ready, 0);
	/* A deadline already past returns at once, still counted. */
	idle_wait(&idle, now + SEC, now, &st);
	assert_int_equal(st.idle_wake_timeout, 2);
	idle_deinit(&idle);
	close(p[0]);
	close(p[1]);
}

static void *waker_main(void *arg)
{
	usleep(20000);
	idle_wake(arg);
	return NULL;
}

static void test_idle_wake_from_another_thread_ends_the_wait(void **state)
{
	(void)state;
	struct idle idle;
	struct dp_stats st = { 0 };
	pthread_t t;
	assert_int_equal(idle_init(&idle, IDLE_HYBRID, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, waker_main, &idle), 0);
	uint64_t now = clock_monotonic_ns();
	/* Capped at IDLE_WAIT_MAX_NS (100 ms): loop until the wake lands,
	 * so a late waker on a loaded machine cannot fail the test. */
	for (int i = 0; i < 300 && st.idle_wake_ready == 0; i++)
		idle_wait(&idle, now, now + 30 * SEC, &st);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(st.idle_wake_ready, 1);
	/* The wake was consumed: the next wait ends at its deadline. */
	now = clock_monotonic_ns();
	idle_wait(&idle, now, now + SEC / 100, &st);
	assert_int_equal(st.idle_wake_ready, 1);
	idle_deinit(&idle);
}

static void test_idle_wake_before_the_wait_is_not_lost(void **state)
{
	(void)state;
	struct idle idle;
	struct dp_stats st = { 0 };
	assert_int_equal(idle_init(&idle, IDLE_SLEEP, 1), 0);
	/* dp_stop() may run just before the lcore goes to sleep. */
	idle_wake(&idle);
	idle_wake(&idle);
	uint64_t now = clock_monotonic_ns();
	idle_wait(&idle, now, now + 30 * SEC, &st);
	assert_int_equal(st.idle_wake_ready, 1);
	idle_deinit(&idle);
}

static void test_idle_finds_port_fds_and_bounds_the_table(void **state)
{
	(void)state;
	struct idle idle;
	assert_int_equal(idle_init(&idle, IDLE_HYBRID, 1), 0);
	int before = idle_add_port_fds(&idle);
	assert_true(before >= 0);
	/* AF_PACKET needs CAP_NET_RAW (CI runs as root). */
	int raw = socket(AF_PACKET, SOCK_RAW, 0);
	int udp = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(udp >= 0);
	idle_deinit(&idle);
	assert_int_equal(idle_init(&idle, IDLE_HYBRID, 1), 0);
	int found = idle_add_port_fds(&idle);
	bool seen_raw = false;
	for (uint32_t i = 0; i < idle.fd_count; i++) {
		seen_raw |= idle.fds[i].fd == raw;
		/* An ordinary UDP socket is not a port fd. */
		assert_int_not_equal(idle.fds[i].fd, udp);
	}
	if (raw >= 0) {
		assert_int_equal(found, before + 1);
		assert_true(seen_raw);
		close(raw);
	} else {
		print_message("no CAP_NET_RAW: AF_PACKET discovery not exercised\n");
	}
	close(udp);
	idle_deinit(&idle);
	assert_int_equal(idle_init(&idle, IDLE_HYBRID, 1), 0);
	for (int fd = 0; fd < (int)IDLE_FDS_MAX; fd++)
		assert_int_equal(idle_add_fd(&idle, 100 + fd), 0);
	assert_int_equal(idle_add_fd(&idle, 100), 0); /* duplicate: no new slot */
	assert_int_equal(idle_add_fd(&idle, 999), -HASP_EFULL);
	idle_deinit(&idle);
}

int main(void)
{
	test_util_install_assert_handler();
	if (idle_signals_prepare() != 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_spins_then_sleeps_until_work_shows_up),
		cmocka_unit_test(test_idle_default_waits_after_the_first_empty_poll),
		cmocka_unit_test(test_idle_poll_mode_never_sleeps),
		cmocka_unit_test(test_idle_hybrid_readable_fd_ends_the_wait_even_if_ready_before),
		cmocka_unit_test(test_idle_hybrid_node_eventfd_ends_the_wait),
		cmocka_unit_test(test_idle_hybrid_without_events_ends_at_the_deadline),
		cmocka_unit_test(test_idle_wake_from_another_thread_ends_the_wait),
		cmocka_unit_test(test_idle_wake_before_the_wait_is_not_lost),
		cmocka_unit_test(test_idle_finds_port_fds_and_bounds_the_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
