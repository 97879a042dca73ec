/*
 * Helpers shared by the cmocka tests.
 *
 * test_util_install_assert_handler() routes HASP_ASSERT failures in the code
 * under test to cmocka's mock_assert(), so that expect_assert_failure() works
 * on libraries built without UNIT_TESTING.
 */
#ifndef HASP_TESTS_TEST_UTIL_H
#define HASP_TESTS_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "common/assert.h"

static void test_util_assert_to_cmocka(int result, const char *expr, const char *file, int line)
{
	mock_assert(result, expr, file, line);
}

static inline void test_util_install_assert_handler(void)
{
	hasp_assert_set_handler(test_util_assert_to_cmocka);
}

/* Seed for randomized tests: HASP_TEST_SEED in the environment, else
 * `fallback`. Randomized tests print the seed they use. */
static inline uint64_t test_util_seed(uint64_t fallback)
{
	const char *env = getenv("HASP_TEST_SEED");
	return env != NULL ? strtoull(env, NULL, 0) : fallback;
}

#endif
