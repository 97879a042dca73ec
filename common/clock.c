/*
 * Thin wrappers over clock_gettime(); CLOCK_MONOTONIC cannot fail with a
 * valid clock id, which the assertion records.
 */
#include "common/clock.h"

#include <errno.h>
#include <time.h>

#include "common/assert.h"

static uint64_t clock_read_ns(clockid_t id)
{
	struct timespec ts;
	int rc = clock_gettime(id, &ts);

	HASP_ASSERT(rc == 0);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t clock_monotonic_ns(void)
{
	return clock_read_ns(CLOCK_MONOTONIC);
}

uint64_t clock_monotonic_us(void)
{
	return clock_monotonic_ns() / 1000u;
}

uint64_t clock_monotonic_ms(void)
{
	return clock_monotonic_ns() / 1000000u;
}

void clock_sleep_until_ns(uint64_t deadline_ns)
{
	struct timespec ts = { .tv_sec = (time_t)(deadline_ns / 1000000000ull),
			       .tv_nsec = (long)(deadline_ns % 1000000000ull) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
	}
}

uint64_t clock_realtime_ns(void)
{
	return clock_read_ns(CLOCK_REALTIME);
}
