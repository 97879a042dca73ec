#include "common/duration.h"

#include <string.h>

int duration_parse_ms(const char *s, uint64_t max_ms, uint64_t *ms)
{
	static const struct {
		const char *unit;
		uint64_t ms;
	} units[] = { { "", 1 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 } };
	uint64_t v = 0;
	const char *p = s;

	if (s == NULL || *p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].unit) != 0)
			continue;
		if (v > max_ms / units[i].ms)
			return -1;
		*ms = v * units[i].ms;
		return 0;
	}
	return -1;
}
