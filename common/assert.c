/*
 * The failure path of HASP_ASSERT. Kept out of line so that the check in the
 * caller is one compare and a cold call.
 */
#include "common/assert.h"

#include <stdio.h>
#include <stdlib.h>

static hasp_assert_handler_fn *assert_handler;

void hasp_assert_set_handler(hasp_assert_handler_fn *handler)
{
	assert_handler = handler;
}

void hasp_assert_fail(const char *expr, const char *file, int line)
{
	if (assert_handler != NULL) {
		assert_handler(0, expr, file, line);
		return;
	}
	fprintf(stderr, "hasp: assertion failed: %s (%s:%d)\n", expr, file, line);
	fflush(stderr);
	abort();
}
