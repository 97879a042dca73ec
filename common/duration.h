/*
 * Durations as operators type them on a command line: `500ms`, `5s`, `2m`,
 * `1h`; a bare number is milliseconds (docs/CLIENT.md "Durations").
 */
#ifndef HASP_COMMON_DURATION_H
#define HASP_COMMON_DURATION_H

#include <stdint.h>

/* Parses `s` (decimal digits, then nothing, "ms", "s", "m" or "h") into
 * milliseconds. Returns 0, or -1 when `s` is not such a duration or is
 * above max_ms (nothing is written to *ms then). */
int duration_parse_ms(const char *s, uint64_t max_ms, uint64_t *ms) __attribute__((warn_unused_result));

#endif
