/*
 * The monotonic clock, for the edges only.
 *
 * raft/ and locks/ never read a clock: time reaches them as ticks or as a
 * timestamp inside a command. A meson test greps them for this header.
 */
#ifndef HASP_COMMON_CLOCK_H
#define HASP_COMMON_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds; never goes backwards. */
uint64_t clock_monotonic_ns(void);
uint64_t clock_monotonic_us(void);
uint64_t clock_monotonic_ms(void);

/* Sleeps until CLOCK_MONOTONIC reads deadline_ns (returns at once if it
 * has); a signal does not end the wait early. Never on an lcore. */
void clock_sleep_until_ns(uint64_t deadline_ns);

/* CLOCK_REALTIME in nanoseconds, for log lines and reports only. */
uint64_t clock_realtime_ns(void);

#endif
