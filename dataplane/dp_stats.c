/*
 * Counter arithmetic and formatting for struct dp_stats (see dp_stats.h).
 */
#include "dataplane/dp_stats.h"

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

size_t dp_stats_format_json(const struct dp_stats *stats, char *buf, size_t buf_size)
{
	size_t used = 0;
	int n;

	HASP_ASSERT(stats != NULL && buf != NULL);
	HASP_ASSERT(buf_size > 0);
	const char *sep = "{";
#define DP_STATS_JSON(name, outcome, help)                                                    \
	n = snprintf(buf + used, buf_size - used, "%s\"%s\":%llu", sep, #name,                \
		     (unsigned long long)stats->name);                                        \
	if (n < 0 || (size_t)n >= buf_size - used)                                            \
		goto overflow;                                                                \
	used += (size_t)n;                                                                    \
	sep = ",";
	DP_STATS_TABLE(DP_STATS_JSON)
#undef DP_STATS_JSON
	n = snprintf(buf + used, buf_size - used, "}");
	if (n < 0 || (size_t)n >= buf_size - used)
		goto overflow;
	return used + (size_t)n;
overflow:
	buf[0] = '\0';
	return 0;
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
	int n;

	HASP_ASSERT(stats != NULL && buf != NULL);
	HASP_ASSERT(buf_size > 0);
	const char *sep = "{";
#define DP_PORT_STATS_JSON(name, eth_field, help)                                             \
	n = snprintf(buf + used, buf_size - used, "%s\"%s\":%llu", sep, #name,                \
		     (unsigned long long)stats->name);                                        \
	if (n < 0 || (size_t)n >= buf_size - used)                                            \
		goto overflow;                                                                \
	used += (size_t)n;                                                                    \
	sep = ",";
	DP_PORT_STATS_TABLE(DP_PORT_STATS_JSON)
#undef DP_PORT_STATS_JSON
	n = snprintf(buf + used, buf_size - used, "}");
	if (n < 0 || (size_t)n >= buf_size - used)
		goto overflow;
	return used + (size_t)n;
overflow:
	buf[0] = '\0';
	return 0;
}
