/*
 * hasp-bench reports: a human table and one JSON object per run, both from
 * a struct bench_result, with the commit, the configuration and the
 * machine's facts (nproc, kernel, CPU model) so that a number is never
 * separated from what produced it. Latencies are reported in microseconds
 * (p50/p90/p99/p99.9/max) from the engine's nanosecond histograms.
 *
 * The JSON layout (perf/run and the plots read it; append fields, never
 * rename):
 *   { "tool": "hasp-bench", "format": 1, "commit": "...", "system": "hasp",
 *     "machine": { "nproc", "kernel", "cpu" },
 *     "config": { "workload", "clients", "keys", "contended", "zipf_s",
 *                 "mode", "rate", "count_max", "duration_ms", ... },
 *     "results": { "ops", "ops_per_s", "cycles", "cycles_per_s", "busy",
 *                  "elapsed_s", "sessions",
 *                  "latency_us": { "<op|acquire|...>": { "count", "mean",
 *                                  "p50", "p90", "p99", "p999", "max" } },
 *                  "statuses": { "<STATUS>": n }, "errors": { "<kind>": n },
 *                  "io": { "tx_datagrams", "rx_datagrams", "tx_calls",
 *                          "rx_calls", "events", "backlog_max" } } }
 */
#ifndef HASP_TOOLS_BENCH_REPORT_H
#define HASP_TOOLS_BENCH_REPORT_H

#include <stdio.h>

#include "tools/bench_engine.h"
#include "tools/bench_hist.h"

struct bench_machine {
	long nproc;
	char kernel[128];
	char cpu[128];
};

void bench_machine_get(struct bench_machine *m);

/* Writes `s` as a JSON string literal (quotes and escapes). */
void bench_json_string(FILE *out, const char *s);
/* Writes {"count":..,"mean":..,"p50":..,...} in microseconds. */
void bench_json_hist(FILE *out, const struct bench_hist *h);

void bench_report_table(FILE *out, const struct bench_config *cfg, const struct bench_result *res);
void bench_report_json(FILE *out, const char *commit, const struct bench_config *cfg,
		       const struct bench_result *res);

#endif
