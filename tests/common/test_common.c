/*
 * The small pieces of common/: error table, PRNG determinism, allocator
 * accounting and failure injection, bounded byte readers, assertions, logging.
 */
#include <string.h>

#include "common/alloc.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/prng.h"
#include "hasp/errors.h"
#include "hasp/fence.h"
#include "hasp/types.h"
#include "tests/test_util.h"

static void test_strerror_names_every_code(void **state)
{
	(void)state;
	assert_string_equal(hasp_strerror(-HASP_EIO), "I/O error");
	assert_string_equal(hasp_strerror(HASP_EIO), "I/O error");
	assert_string_equal(hasp_strerror_name(-HASP_ECORRUPT), "ECORRUPT");
	assert_string_equal(hasp_strerror(0), "success");
	assert_string_equal(hasp_strerror(-9999), "unknown error");
#define CHECK_CODE(name, value, msg) assert_string_equal(hasp_strerror(-(value)), msg);
	HASP_ERROR_TABLE(CHECK_CODE)
#undef CHECK_CODE
}

static void test_status_names(void **state)
{
	(void)state;
	assert_string_equal(hasp_status_name(HASP_STATUS_GRANTED), "GRANTED");
	assert_string_equal(hasp_status_name(HASP_STATUS_OVERLOADED), "OVERLOADED");
	assert_string_equal(hasp_status_name(HASP_STATUS_COUNT), "?");
	for (uint32_t s = 0; s < HASP_STATUS_COUNT; s++)
		assert_string_not_equal(hasp_status_name(s), "?");
}

/* libhasp's return convention: every status is 0 or a negative code with a
 * message of its own, and a cluster refusal maps back to its status. */
static void test_status_error_map(void **state)
{
	(void)state;
	assert_int_equal(hasp_status_error(HASP_STATUS_OK), 0);
	assert_int_equal(hasp_status_error(HASP_STATUS_GRANTED), 0);
	assert_int_equal(hasp_status_error(HASP_STATUS_BUSY), -HASP_EBUSY);
	assert_int_equal(hasp_status_error(HASP_STATUS_NOT_HOLDER), -HASP_ENOTHOLDER);
	assert_int_equal(hasp_status_error(HASP_STATUS_NOT_FOUND), -HASP_ENOENT);
	assert_int_equal(hasp_status_error(HASP_STATUS_COMPARE_FAILED), -HASP_ECOMPARE);
	assert_int_equal(hasp_status_error(HASP_STATUS_SESSION_EXPIRED), -HASP_ESESSION);
	assert_int_equal(hasp_status_error(HASP_STATUS_LEASE_EXPIRED), -HASP_ELEASE);
	assert_int_equal(hasp_status_error(HASP_STATUS_FORBIDDEN), -HASP_EFORBIDDEN);
	assert_int_equal(hasp_status_error(HASP_STATUS_BAD_TTL), -HASP_ERANGE);
	assert_int_equal(hasp_status_error(HASP_STATUS_COUNT), -HASP_ECORRUPT);
	assert_int_equal(hasp_status_error(9999), -HASP_ECORRUPT);
	for (uint32_t s = 0; s < HASP_STATUS_COUNT; s++) {
		int err = hasp_status_error(s);
		assert_true(err <= 0);
		assert_string_not_equal(hasp_strerror(err), "unknown error");
		int back = hasp_error_status(err);
		/* The reverse is exact where it is defined. */
		if (back >= 0)
			assert_int_equal(hasp_status_error((uint32_t)back), err);
	}
	assert_int_equal(hasp_error_status(-HASP_EBUSY), HASP_STATUS_BUSY);
	assert_int_equal(hasp_error_status(HASP_ENOTHOLDER), HASP_STATUS_NOT_HOLDER);
	assert_int_equal(hasp_error_status(0), HASP_STATUS_OK);
	assert_int_equal(hasp_error_status(-HASP_ETIMEDOUT), -1); /* not a refusal */
	assert_int_equal(hasp_error_status(-HASP_ENAME), -1);     /* may be local */
}

static void test_prng_same_seed_same_sequence(void **state)
{
	(void)state;
	struct prng a, b, c;

	prng_seed(&a, 42);
	prng_seed(&b, 42);
	prng_seed(&c, 43);
	int differ = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t x = prng_next(&a);
		assert_int_equal(x, prng_next(&b));
		differ += x != prng_next(&c);
	}
	assert_true(differ > 990);
}

static void test_prng_below_stays_in_bounds_and_covers(void **state)
{
	(void)state;
	struct prng p;
	int seen[7] = { 0 };

	prng_seed(&p, 1);
	for (int i = 0; i < 7000; i++) {
		uint64_t x = prng_below(&p, 7);
		assert_true(x < 7);
		seen[x]++;
	}
	for (int i = 0; i < 7; i++)
		assert_true(seen[i] > 700 && seen[i] < 1300);
	for (int i = 0; i < 100; i++) {
		uint64_t x = prng_range(&p, 5, 9);
		assert_true(x >= 5 && x <= 9);
	}
}

static void test_alloc_counts_and_injects_failures(void **state)
{
	(void)state;
	struct hasp_alloc_stats before, after;

	hasp_alloc_stats_get(&before);
	void *a = hasp_alloc(16);
	assert_non_null(a);
	hasp_alloc_fail_after(1);
	void *b = hasp_calloc(4, 4);
	assert_non_null(b);
	void *c = hasp_alloc(16);
	assert_null(c);
	hasp_alloc_fail_never();
	void *d = hasp_alloc_aligned(4096, 4096);
	assert_non_null(d);
	assert_int_equal((uintptr_t)d % 4096, 0);
	hasp_free(a);
	hasp_free(b);
	hasp_free(d);
	hasp_free(NULL);
	hasp_alloc_stats_get(&after);
	assert_int_equal(after.alloc_count - before.alloc_count, 3);
	assert_int_equal(after.free_count - before.free_count, 3);
	assert_int_equal(after.failed_count - before.failed_count, 1);
	assert_null(hasp_calloc(SIZE_MAX, 2)); /* overflow is a failure, not a wrap */
}

static void test_alloc_on_forbidden_thread_is_counted(void **state)
{
	(void)state;
	struct hasp_alloc_stats before, after;

	hasp_alloc_stats_get(&before);
	hasp_alloc_forbid_thread(true);
	void *p = hasp_alloc(8);
	hasp_alloc_forbid_thread(false);
	hasp_free(p);
	hasp_alloc_stats_get(&after);
	assert_int_equal(after.forbidden_count - before.forbidden_count, 1);
}

static void test_byte_reader_never_reads_past_end(void **state)
{
	(void)state;
	const uint8_t data[5] = { 1, 2, 3, 4, 5 };
	struct byte_reader r;

	byte_reader_init(&r, data, sizeof(data));
	assert_int_equal(byte_reader_u32(&r), 0x04030201u);
	assert_false(r.failed);
	assert_int_equal(byte_reader_u16(&r), 0); /* only one byte left */
	assert_true(r.failed);
	assert_int_equal(byte_reader_u8(&r), 0); /* stays failed */
	assert_null(byte_reader_take(&r, 0));
}

static void test_byte_writer_refuses_overflow(void **state)
{
	(void)state;
	uint8_t buf[10];
	struct byte_writer w;

	byte_writer_init(&w, buf, sizeof(buf));
	byte_writer_u64(&w, 0x1122334455667788ull);
	assert_false(w.failed);
	assert_int_equal(get_u64le(buf), 0x1122334455667788ull);
	byte_writer_u32(&w, 1);
	assert_true(w.failed);
	assert_int_equal(w.written, 8);
}

static void test_assert_reaches_handler(void **state)
{
	(void)state;
	int x = 1;
	expect_assert_failure(HASP_ASSERT(x == 2));
}

static void test_log_levels_by_topic(void **state)
{
	(void)state;
	assert_int_equal(log_level_parse("debug"), LOG_LEVEL_DEBUG);
	assert_int_equal(log_level_parse("nonsense"), -1);
	assert_int_equal(log_set_level("no-such-topic", LOG_LEVEL_DEBUG), -HASP_ENOENT);
	assert_int_equal(log_set_level("testtopic", LOG_LEVEL_DEBUG), 0);
}

/* Kleppmann's story: the paused holder's late write carries a lower token. */
static void test_fence_refuses_lower_token_after_newer_grant(void **state)
{
	(void)state;
	struct hasp_fence fence;

	hasp_fence_init(&fence);
	assert_true(hasp_fence_admit(&fence, 33));  /* client 1 writes */
	assert_true(hasp_fence_admit(&fence, 34));  /* client 2, newer grant */
	assert_true(hasp_fence_admit(&fence, 34));  /* the holder may write again */
	assert_false(hasp_fence_admit(&fence, 33)); /* client 1 wakes up: refused */
	assert_false(hasp_fence_admit(&fence, 0));  /* 0 is never a grant */
	assert_int_equal(hasp_fence_highest(&fence), 34);
}

LOG_TOPIC_DEFINE(testtopic)

/* A deadline already past returns at once; a future one is never left
 * early (no upper bound: a loaded machine may wake late). */
static void test_clock_sleep_until_waits_for_the_deadline(void **state)
{
	(void)state;
	uint64_t now = clock_monotonic_ns();
	clock_sleep_until_ns(now - 1000000u);
	clock_sleep_until_ns(0);
	uint64_t deadline = clock_monotonic_ns() + 2000000u;
	clock_sleep_until_ns(deadline);
	assert_true(clock_monotonic_ns() >= deadline);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strerror_names_every_code),
		cmocka_unit_test(test_status_names),
		cmocka_unit_test(test_clock_sleep_until_waits_for_the_deadline),
		cmocka_unit_test(test_status_error_map),
		cmocka_unit_test(test_prng_same_seed_same_sequence),
		cmocka_unit_test(test_prng_below_stays_in_bounds_and_covers),
		cmocka_unit_test(test_alloc_counts_and_injects_failures),
		cmocka_unit_test(test_alloc_on_forbidden_thread_is_counted),
		cmocka_unit_test(test_byte_reader_never_reads_past_end),
		cmocka_unit_test(test_byte_writer_refuses_overflow),
		cmocka_unit_test(test_assert_reaches_handler),
		cmocka_unit_test(test_log_levels_by_topic),
		cmocka_unit_test(test_fence_refuses_lower_token_after_newer_grant),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
