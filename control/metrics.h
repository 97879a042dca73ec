/*
 * The metrics registry of a node: counters, gauges and histograms exposed
 * in the Prometheus text format (GET /metrics) and as JSON (the `metrics`
 * admin command, `haspctl metrics`).
 *
 * Shape (Prometheus client model, DPDK telemetry's "counters not logs"):
 * every series is registered once, mostly before the node starts, with a name under
 * `hasp_`, a help line and up to METRICS_LABELS_MAX labels; registration is
 * the only allocation (the array is sized in metrics_init). Series with the
 * same name form one family and share HELP/TYPE; register them with the
 * same help text.
 *
 * Updates are lock-free and never block: each series has exactly ONE
 * writer thread (the lcore that owns it, or the admin thread for its own
 * counters), which updates plain uint64_t fields with relaxed atomic
 * stores; the exposition reads them with relaxed atomic loads (a slightly
 * stale view is fine, a torn value is impossible). A series may instead
 * point at a counter the writer already keeps (metrics_*_ref: a node_stats
 * or dp_stats field), so the hot path pays nothing extra.
 *
 * Values are integers in a raw unit and are multiplied by the series'
 * scale on export: a duration kept in nanoseconds is exported in seconds
 * with scale 1e-9 (Prometheus base units).
 */
#ifndef HASP_CONTROL_METRICS_H
#define HASP_CONTROL_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/json.h"

#define METRICS_NAME_SIZE 64u
#define METRICS_LABELS_MAX 2u
#define METRICS_LABELS_TEXT_SIZE 96u
#define METRICS_BUCKETS_MAX 16u

enum metrics_type {
	METRICS_COUNTER = 1,
	METRICS_GAUGE = 2,
	METRICS_HISTOGRAM = 3,
};

struct metrics_label {
	const char *name;  /* [a-zA-Z_][a-zA-Z0-9_]*, not "le" */
	const char *value; /* any text; escaped on export */
};

/* One series. Writers use the metric_* functions below only. */
struct metric {
	uint8_t type;
	char name[METRICS_NAME_SIZE];
	const char *help;                       /* static text, outlives the registry */
	char labels[METRICS_LABELS_TEXT_SIZE];  /* `a="x",b="y"`, escaped; "" for none */
	double scale;
	const uint64_t *source;                 /* counter/gauge: read this instead of value */
	uint64_t value;                         /* counter, or gauge as int64 bits */
	/* Histogram: counts[i] observations <= bounds[i] (and > bounds[i-1]);
	 * counts[bucket_count] the rest (+Inf). Cumulated on export. */
	uint32_t bucket_count;
	uint64_t bounds[METRICS_BUCKETS_MAX];
	uint64_t counts[METRICS_BUCKETS_MAX + 1];
	uint64_t sum;
	/* Histogram kept by its writer (metrics_histogram_ref): read these
	 * instead of counts and sum. */
	const uint64_t *counts_source;
	const uint64_t *sum_source;
};

struct metrics {
	struct metric *series;
	uint32_t count;
	uint32_t max;
};

/* Sizes the registry for series_max series. 0 or -HASP_ENOMEM. */
int metrics_init(struct metrics *m, uint32_t series_max) __attribute__((warn_unused_result));
void metrics_deinit(struct metrics *m);

/* Registration. One thread registers at a time; registration may go on
 * after scrapes started (a new peer's series, from the lcore): it never
 * allocates, and a series becomes visible only once complete. Returns the
 * series, or NULL when the registry is full, the name or a label is invalid,
 * or the same name and labels exist already. `name` is copied; `help` must
 * be static. */
struct metric *metrics_counter(struct metrics *m, const char *name, const char *help,
			       const struct metrics_label *labels, uint32_t label_count);
struct metric *metrics_gauge(struct metrics *m, const char *name, const char *help,
			     const struct metrics_label *labels, uint32_t label_count);
/* `bounds` are raw upper bounds, strictly increasing, 1..METRICS_BUCKETS_MAX. */
struct metric *metrics_histogram(struct metrics *m, const char *name, const char *help,
				 const struct metrics_label *labels, uint32_t label_count,
				 const uint64_t *bounds, uint32_t bound_count, double scale);
/* A histogram whose bucket counts (bound_count + 1 words, not cumulated,
 * the last one +Inf) and raw sum its writer keeps in place (node_hist.h),
 * so an observation costs the hot path nothing beyond its own adds. */
struct metric *metrics_histogram_ref(struct metrics *m, const char *name, const char *help,
				     const struct metrics_label *labels, uint32_t label_count,
				     const uint64_t *bounds, uint32_t bound_count, double scale,
				     const uint64_t *counts, const uint64_t *sum);
/* A counter or gauge whose value is read from *source (owned by its writer,
 * aligned, must outlive the registry). */
struct metric *metrics_counter_ref(struct metrics *m, const char *name, const char *help,
				   const struct metrics_label *labels, uint32_t label_count,
				   const uint64_t *source);
struct metric *metrics_gauge_ref(struct metrics *m, const char *name, const char *help,
				 const struct metrics_label *labels, uint32_t label_count,
				 const uint64_t *source);
/* A gauge exported as raw * scale (e.g. nanoseconds as seconds: 1e-9). */
struct metric *metrics_gauge_scaled(struct metrics *m, const char *name, const char *help,
				    const struct metrics_label *labels, uint32_t label_count,
				    double scale);
/* A counter exported as raw * scale (CPU clock ticks as seconds). */
struct metric *metrics_counter_scaled(struct metrics *m, const char *name, const char *help,
				      const struct metrics_label *labels, uint32_t label_count,
				      double scale);

/* ---- updates: only from the series' one writer thread ---- */

static inline void metric_add(struct metric *s, uint64_t n)
{
	__atomic_store_n(&s->value, s->value + n, __ATOMIC_RELAXED);
}

static inline void metric_inc(struct metric *s)
{
	metric_add(s, 1);
}

static inline void metric_set(struct metric *s, int64_t v)
{
	__atomic_store_n(&s->value, (uint64_t)v, __ATOMIC_RELAXED);
}

void metric_observe(struct metric *s, uint64_t raw);

/* ---- readers (any thread) ---- */

/* Counter or gauge value, scaled. */
double metric_value(const struct metric *s);

/* The series with this name and label text (`reason="malformed"`), or NULL. */
const struct metric *metrics_find(const struct metrics *m, const char *name, const char *labels);

/* Writes the Prometheus text exposition format (version 0.0.4) into buf.
 * Returns the length (NUL-terminated), or 0 when it does not fit. */
size_t metrics_expose(const struct metrics *m, char *buf, size_t size);

/* Writes a JSON array of {"name","type","help","labels":{..},"value"} (histograms:
 * "count","sum","buckets":[[le,cumulative],...]) into w. */
void metrics_json(const struct metrics *m, struct json_writer *w);

/* True when `name` is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*). */
bool metrics_name_valid(const char *name);

#endif
