/*
 * Counter arithmetic and formatting for struct dp_stats (see dp_stats.h).
 */
#include "dataplane/dp_stats.h"

#include <stdbool.h>
#include <stdio.h>

#include "common/assert.h"

void dp_stats_add(struct dp_stats *total, const struct dp_stats *one)
{
	HASP_ASSERT(total != NULL && one != NULL);
#define DP_STATS_ADD(name, outcome, help) total->name += one->name;
	DP_STATS_TABLE(DP_STATS_ADD)
#undef DP_STATS_ADD
}

uint64_t dp_stats_rx_outcomes(const struct dp_stats *stats)
{
	uint64_t sum = 0;

	HASP_ASSERT(stats != NULL);
#define DP_STATS_OUTCOME(name, outcome, help) \
	if (outcome)                          \
		sum += stats->name;
	DP_STATS_TABLE(DP_STATS_OUTCOME)
#undef DP_STATS_OUTCOME
	return sum;
}

/* One JSON field `"name":value` after *sep ("{" first, then ","), at
 * buf + *used. False if it does not fit. */
static bool json_field(char *buf, size_t buf_size, size_t *used, const char **sep,
		       const char *name, uint64_t value)
{
	int n = snprintf(buf + *used, buf_size - *used, "%s\"%s\":%llu", *sep, name,
			 (unsigned long long)value);
	if (n < 0 || (size_t)n >= buf_size - *used)
		return false;
	*used += (size_t)n;
	*sep = ",";
	return true;
}

/* Closes the object: its length, or 0 (buf emptied) if the brace does not
 * fit or a field did not (ok false). */
static size_t json_end(char *buf, size_t buf_size, size_t used, bool ok)
{
	int n = ok ? snprintf(buf + used, buf_size - used, "}") : -1;
	if (n < 0 || (size_t)n >= buf_size - used) {
		buf[0] = '\0';
		return 0;
	}
	return used + (size_t)n;
}

size_t dp_stats_format_json(const struct dp_stats *stats, char *buf, size_t buf_size)
{
	size_t used = 0;
	const char *sep = "{";
	bool ok = true;

	HASP_ASSERT(stats != NULL && buf != NULL);
	HASP_ASSERT(buf_size > 0);
#define DP_STATS_JSON(name, outcome, help) \
	ok = ok && json_field(buf, buf_size, &used, &sep, #name, stats->name);
	DP_STATS_TABLE(DP_STATS_JSON)
#undef DP_STATS_JSON
	return json_end(buf, buf_size, used, ok);
}

void dp_stats_visit(const struct dp_stats *stats,
		    void (*visit)(const char *name, const char *help, uint64_t value, void *arg),
		    void *arg)
{
	HASP_ASSERT(stats != NULL && visit != NULL);
#define DP_STATS_VISIT(name, outcome, help) visit(#name, help, stats->name, arg);
	DP_STATS_TABLE(DP_STATS_VISIT)
#undef DP_STATS_VISIT
}

size_t dp_port_stats_format_json(const struct dp_port_stats *stats, char *buf, size_t buf_size)
{
	size_t used = 0;
	const char *sep = "{";
	bool ok = true;

	HASP_ASSERT(stats != NULL && buf != NULL);
	HASP_ASSERT(buf_size > 0);
#define DP_PORT_STATS_JSON(name, eth_field, help) \
	ok = ok && json_field(buf, buf_size, &used, &sep, #name, stats->name);
	DP_PORT_STATS_TABLE(DP_PORT_STATS_JSON)
#undef DP_PORT_STATS_JSON
	return json_end(buf, buf_size, used, ok);
}
