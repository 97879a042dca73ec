/*
 * Adaptive idle without DPDK: the spin count, and the hybrid wait on real
 * fds and signals: a readable fd armed with O_ASYNC ends the wait with a
 * signal, a wake from another thread ends it, nothing ends it at the
 * deadline, and port fds (AF_PACKET sockets, /dev/net/tun) are found in
 * /proc/self/fd. Deadlines are generous: the tests check which event ended
 * a wait (counters), never how fast.
 */
#include "dataplane/idle.h"

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "hasp/errors.h"
#include "tests/test_util.h"

#define SEC 1000000000ull

static void test_idle_spins_then_asks_to_sleep_and_work_resets(void **state)
{
	(void)state;
	struct idle idle;
	idle_init(&idle, IDLE_SLEEP, 4);
	assert_false(idle_note(&idle, false));
	assert_false(idle_note(&idle, false));
	assert_false(idle_note(&idle, false));
	assert_true(idle_note(&idle, false));
	assert_false(idle_note(&idle, true));
	assert_false(idle_note(&idle, false));
}

static void test_idle_poll_mode_never_sleeps(void **state)
{
	(void)state;
	struct idle idle;
	idle_init(&idle, IDLE_POLL, 1);
	for (int i = 0; i < 1000; i++)
		assert_false(idle_note(&idle, false));
	struct dp_stats st = { 0 };
	expect_assert_failure(idle_wait(&idle, 0, 1, &st));
}

static void test_idle_hybrid_readable_fd_ends_the_wait_with_a_signal(void **state)
{
	(void)state;
	struct idle idle;
	struct dp_stats st = { 0 };
	int p[2];
	assert_int_equal(pipe(p), 0);
	idle_init(&idle, IDLE_HYBRID, 1);
	assert_int_equal(idle_add_fd(&idle, p[0]), 0);
	idle_arm(&idle);
	assert_true(idle.armed);
	assert_true((fcntl(p[0], F_GETFL) & O_ASYNC) != 0);
	assert_int_equal(write(p[1], "x", 1), 1);
	uint64_t now = clock_monotonic_ns();
	idle_wait(&idle, now, now + 30 * SEC, &st);
	assert_int_equal(st.idle_sleeps, 1);
	assert_int_equal(st.idle_wake_signal, 1);
	assert_int_equal(st.idle_wake_timeout, 0);
	/* Disarmed on wake: the fd no longer signals. */
	assert_false(idle.armed);
	assert_int_equal(fcntl(p[0], F_GETFL) & O_ASYNC, 0);
	close(p[0]);
	close(p[1]);
}

static void test_idle_hybrid_without_events_ends_at_the_deadline(void **state)
{
	(void)state;
	struct idle idle;
	struct dp_stats st = { 0 };
	int p[2];
	assert_int_equal(pipe(p), 0);
	idle_init(&idle, IDLE_HYBRID, 1);
	assert_int_equal(idle_add_fd(&idle, p[0]), 0);
	idle_arm(&idle);
	uint64_t now = clock_monotonic_ns();
	idle_wait(&idle, now, now + SEC / 100, &st);
	assert_int_equal(st.idle_wake_timeout, 1);
	assert_int_equal(st.idle_wake_signal, 0);
	/* A deadline already past returns at once, still counted. */
	idle_arm(&idle);
	idle_wait(&idle, now + SEC, now, &st);
	assert_int_equal(st.idle_wake_timeout, 2);
	close(p[0]);
	close(p[1]);
}

struct waker {
	pid_t tid;
};

static void *waker_main(void *arg)
{
	struct waker *w = arg;
	usleep(20000);
	idle_wake_thread(w->tid);
	return NULL;
}

static void test_idle_wake_thread_ends_a_wait_from_another_thread(void **state)
{
	(void)state;
	struct idle idle;
	struct dp_stats st = { 0 };
	struct waker w;
	pthread_t t;
	int p[2];
	assert_int_equal(pipe(p), 0);
	idle_init(&idle, IDLE_HYBRID, 1);
	assert_int_equal(idle_add_fd(&idle, p[0]), 0);
	w.tid = idle.tid;
	assert_int_equal(pthread_create(&t, NULL, waker_main, &w), 0);
	idle_arm(&idle);
	uint64_t now = clock_monotonic_ns();
	/* The longest wait is IDLE_WAIT_MAX_NS (100 ms); the waker fires at
	 * 20 ms, so only a signal can explain idle_wake_signal == 1 unless
	 * the machine stalls the waker for 80 ms. */
	idle_wait(&idle, now, now + 30 * SEC, &st);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(st.idle_wake_signal + st.idle_wake_timeout, 1);
	if (st.idle_wake_timeout == 1)
		print_message("waker was late (loaded machine): wait ended at the cap\n");
	close(p[0]);
	close(p[1]);
}

static void test_idle_sleep_mode_pauses_and_stays_sleepy(void **state)
{
	(void)state;
	struct idle idle;
	struct dp_stats st = { 0 };
	idle_init(&idle, IDLE_SLEEP, 2);
	assert_false(idle_note(&idle, false));
	assert_true(idle_note(&idle, false));
	uint64_t now = clock_monotonic_ns();
	idle_wait(&idle, now, now + SEC, &st);
	assert_int_equal(st.idle_wake_timeout, 1);
	/* Still in the sleeping phase: the next empty iteration sleeps again
	 * instead of spinning anew. */
	assert_true(idle_note(&idle, false));
}

static void test_idle_finds_port_fds_and_bounds_the_table(void **state)
{
	(void)state;
	struct idle idle;
	idle_init(&idle, IDLE_HYBRID, 1);
	int before = idle_add_port_fds(&idle);
	assert_true(before >= 0);
	/* AF_PACKET needs CAP_NET_RAW (CI runs as root). */
	int raw = socket(AF_PACKET, SOCK_RAW, 0);
	int udp = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(udp >= 0);
	if (raw >= 0) {
		idle_init(&idle, IDLE_HYBRID, 1);
		assert_int_equal(idle_add_port_fds(&idle), before + 1);
		bool seen = false;
		for (uint32_t i = 0; i < idle.fd_count; i++)
			seen |= idle.fds[i] == raw;
		assert_true(seen);
		close(raw);
	} else {
		print_message("no CAP_NET_RAW: AF_PACKET discovery not exercised\n");
	}
	/* An ordinary UDP socket is not a port fd. */
	for (uint32_t i = 0; i < idle.fd_count; i++)
		assert_int_not_equal(idle.fds[i], udp);
	close(udp);
	idle_init(&idle, IDLE_HYBRID, 1);
	for (int fd = 0; fd < (int)IDLE_FDS_MAX; fd++)
		assert_int_equal(idle_add_fd(&idle, 100 + fd), 0);
	assert_int_equal(idle_add_fd(&idle, 100), 0); /* duplicate: no new slot */
	assert_int_equal(idle_add_fd(&idle, 999), -HASP_EFULL);
}

int main(void)
{
	test_util_install_assert_handler();
	/* As dp_init() does before rte_eal_init(): before any thread exists. */
	if (idle_signals_prepare() != 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_spins_then_asks_to_sleep_and_work_resets),
		cmocka_unit_test(test_idle_poll_mode_never_sleeps),
		cmocka_unit_test(test_idle_hybrid_readable_fd_ends_the_wait_with_a_signal),
		cmocka_unit_test(test_idle_hybrid_without_events_ends_at_the_deadline),
		cmocka_unit_test(test_idle_wake_thread_ends_a_wait_from_another_thread),
		cmocka_unit_test(test_idle_sleep_mode_pauses_and_stays_sleepy),
		cmocka_unit_test(test_idle_finds_port_fds_and_bounds_the_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
