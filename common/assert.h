/*
 * Always-on assertions.
 *
 * HASP_ASSERT(x) checks programmer errors in every build: on failure it logs
 * the file, line and expression and aborts (like RTE_VERIFY or Redis's
 * serverAssert). HASP_DASSERT(x) is for O(n) checks and is compiled only with
 * HASP_DEBUG_ASSERTS (debug, simulation and fuzz builds). Neither may have
 * side effects.
 *
 * Bad input (a packet, a WAL record, an operator request) is never asserted:
 * it is answered with an error and counted.
 *
 * Tests replace the failure handler (hasp_assert_set_handler) with one that
 * calls cmocka's mock_assert(), so expect_assert_failure() covers the negative
 * space without rebuilding the libraries under test.
 */
#ifndef HASP_COMMON_ASSERT_H
#define HASP_COMMON_ASSERT_H

typedef void hasp_assert_handler_fn(int result, const char *expr, const char *file, int line);

/* Installs a handler that replaces log-and-abort; NULL restores the default. */
void hasp_assert_set_handler(hasp_assert_handler_fn *handler);

/* Called when an assertion fails; does not return unless a test handler
 * longjmps out of it. */
void hasp_assert_fail(const char *expr, const char *file, int line);

#define HASP_ASSERT(x)                                          \
	do {                                                    \
		if (__builtin_expect(!(x), 0))                  \
			hasp_assert_fail(#x, __FILE__, __LINE__); \
	} while (0)

#ifdef HASP_DEBUG_ASSERTS
#define HASP_DASSERT(x) HASP_ASSERT(x)
#else
#define HASP_DASSERT(x) ((void)sizeof(!(x)))
#endif

#define HASP_UNREACHABLE() hasp_assert_fail("unreachable", __FILE__, __LINE__)

#endif
