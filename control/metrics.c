/*
 * The metrics registry and its two exports (see metrics.h).
 *
 * Families are not stored separately: the exposition walks the series in
 * registration order and, at the first series of each name, writes HELP and
 * TYPE and then every series of that name. O(series^2) on a few hundred
 * series per scrape is nothing next to keeping a second index in sync.
 */
#include "control/metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "hasp/errors.h"

int metrics_init(struct metrics *m, uint32_t series_max)
{
	HASP_ASSERT(series_max > 0);
	memset(m, 0, sizeof(*m));
	m->series = hasp_calloc(series_max, sizeof(*m->series));
	if (m->series == NULL)
		return -HASP_ENOMEM;
	m->max = series_max;
	return 0;
}

void metrics_deinit(struct metrics *m)
{
	hasp_free(m->series);
	memset(m, 0, sizeof(*m));
}

static bool name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && c >= '0' && c <= '9');
}

bool metrics_name_valid(const char *name)
{
	if (name == NULL || name[0] == '\0' || strlen(name) >= METRICS_NAME_SIZE)
		return false;
	for (size_t i = 0; name[i] != '\0'; i++)
		if (!name_char(name[i], i == 0))
			return false;
	return true;
}

static bool label_name_valid(const char *name)
{
	if (name == NULL || name[0] == '\0' || strcmp(name, "le") == 0 || strncmp(name, "__", 2) == 0)
		return false;
	for (size_t i = 0; name[i] != '\0'; i++)
		if (!name_char(name[i], i == 0) || name[i] == ':')
			return false;
	return true;
}

/* Formats `a="x",b="y"` with the exposition format's escapes (backslash,
 * quote, newline). False when it does not fit. */
static bool labels_format(char *out, size_t size, const struct metrics_label *labels, uint32_t count)
{
	size_t o = 0;
	out[0] = '\0';
	for (uint32_t i = 0; i < count; i++) {
		if (!label_name_valid(labels[i].name) || labels[i].value == NULL)
			return false;
		int n = snprintf(out + o, size - o, "%s%s=\"", i ? "," : "", labels[i].name);
		if (n < 0 || (size_t)n >= size - o)
			return false;
		o += (size_t)n;
		for (const char *v = labels[i].value; *v != '\0'; v++) {
			const char *esc = *v == '\\' ? "\\\\" : *v == '"' ? "\\\"" : *v == '\n' ? "\\n" : NULL;
			size_t need = esc ? 2 : 1;
			if (o + need + 2 >= size)
				return false;
			if (esc) {
				memcpy(out + o, esc, 2);
			} else {
				out[o] = *v;
			}
			o += need;
		}
		out[o++] = '"';
		out[o] = '\0';
	}
	return true;
}

static struct metric *add(struct metrics *m, uint8_t type, const char *name, const char *help,
			  const struct metrics_label *labels, uint32_t label_count)
{
	HASP_ASSERT(m->series != NULL);
	HASP_ASSERT(help != NULL);
	if (m->count == m->max || !metrics_name_valid(name) || label_count > METRICS_LABELS_MAX)
		return NULL;
	struct metric *s = &m->series[m->count];
	memset(s, 0, sizeof(*s));
	if (!labels_format(s->labels, sizeof(s->labels), labels, label_count))
		return NULL;
	for (uint32_t i = 0; i < m->count; i++) {
		const struct metric *o = &m->series[i];
		if (strcmp(o->name, name) == 0 && (o->type != type || strcmp(o->labels, s->labels) == 0))
			return NULL; /* duplicate series, or one family with two types */
	}
	s->type = type;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->help = help;
	s->scale = 1.0;
	return s; /* not visible until publish() */
}

/* Makes the series complete and visible: readers load count with acquire,
 * so registration may go on while scrapes run (from the one registering
 * thread). */
static struct metric *publish(struct metrics *m, struct metric *s)
{
	if (s == NULL)
		return NULL;
	HASP_ASSERT(s == &m->series[m->count]);
	__atomic_store_n(&m->count, m->count + 1, __ATOMIC_RELEASE);
	return s;
}

struct metric *metrics_counter(struct metrics *m, const char *name, const char *help,
			       const struct metrics_label *labels, uint32_t label_count)
{
	return publish(m, add(m, METRICS_COUNTER, name, help, labels, label_count));
}

struct metric *metrics_gauge(struct metrics *m, const char *name, const char *help,
			     const struct metrics_label *labels, uint32_t label_count)
{
	return publish(m, add(m, METRICS_GAUGE, name, help, labels, label_count));
}

struct metric *metrics_counter_ref(struct metrics *m, const char *name, const char *help,
				   const struct metrics_label *labels, uint32_t label_count,
				   const uint64_t *source)
{
	HASP_ASSERT(source != NULL);
	struct metric *s = add(m, METRICS_COUNTER, name, help, labels, label_count);
	if (s != NULL)
		s->source = source;
	return publish(m, s);
}

struct metric *metrics_gauge_ref(struct metrics *m, const char *name, const char *help,
				 const struct metrics_label *labels, uint32_t label_count,
				 const uint64_t *source)
{
	HASP_ASSERT(source != NULL);
	struct metric *s = add(m, METRICS_GAUGE, name, help, labels, label_count);
	if (s != NULL)
		s->source = source;
	return publish(m, s);
}

/* A histogram series, checked and filled, not yet published. */
static struct metric *hist_add(struct metrics *m, const char *name, const char *help,
			       const struct metrics_label *labels, uint32_t label_count,
			       const uint64_t *bounds, uint32_t bound_count, double scale)
{
	if (bound_count == 0 || bound_count > METRICS_BUCKETS_MAX)
		return NULL;
	for (uint32_t i = 1; i < bound_count; i++)
		if (bounds[i] <= bounds[i - 1])
			return NULL;
	struct metric *s = add(m, METRICS_HISTOGRAM, name, help, labels, label_count);
	if (s == NULL)
		return NULL;
	s->bucket_count = bound_count;
	memcpy(s->bounds, bounds, bound_count * sizeof(bounds[0]));
	s->scale = scale;
	return s;
}

struct metric *metrics_histogram(struct metrics *m, const char *name, const char *help,
				 const struct metrics_label *labels, uint32_t label_count,
				 const uint64_t *bounds, uint32_t bound_count, double scale)
{
	return publish(m, hist_add(m, name, help, labels, label_count, bounds, bound_count, scale));
}

struct metric *metrics_histogram_ref(struct metrics *m, const char *name, const char *help,
				     const struct metrics_label *labels, uint32_t label_count,
				     const uint64_t *bounds, uint32_t bound_count, double scale,
				     const uint64_t *counts, const uint64_t *sum)
{
	HASP_ASSERT(counts != NULL && sum != NULL);
	struct metric *s = hist_add(m, name, help, labels, label_count, bounds, bound_count, scale);
	if (s != NULL) {
		s->counts_source = counts;
		s->sum_source = sum;
	}
	return publish(m, s);
}

static struct metric *scaled(struct metrics *m, uint8_t type, const char *name, const char *help,
			     const struct metrics_label *labels, uint32_t label_count, double scale)
{
	HASP_ASSERT(scale > 0);
	struct metric *s = add(m, type, name, help, labels, label_count);
	if (s != NULL)
		s->scale = scale;
	return publish(m, s);
}

struct metric *metrics_gauge_scaled(struct metrics *m, const char *name, const char *help,
				    const struct metrics_label *labels, uint32_t label_count,
				    double scale)
{
	return scaled(m, METRICS_GAUGE, name, help, labels, label_count, scale);
}

struct metric *metrics_counter_scaled(struct metrics *m, const char *name, const char *help,
				      const struct metrics_label *labels, uint32_t label_count,
				      double scale)
{
	return scaled(m, METRICS_COUNTER, name, help, labels, label_count, scale);
}

void metric_observe(struct metric *s, uint64_t raw)
{
	HASP_ASSERT(s->type == METRICS_HISTOGRAM && s->counts_source == NULL);
	uint32_t i = 0;
	while (i < s->bucket_count && raw > s->bounds[i])
		i++;
	/* Single writer: plain read-modify-write, published with relaxed
	 * stores so the scraper never sees a torn word. */
	__atomic_store_n(&s->counts[i], s->counts[i] + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&s->sum, s->sum + raw, __ATOMIC_RELAXED);
}

static uint64_t raw_value(const struct metric *s)
{
	return __atomic_load_n(s->source != NULL ? s->source : &s->value, __ATOMIC_RELAXED);
}

double metric_value(const struct metric *s)
{
	HASP_ASSERT(s->type != METRICS_HISTOGRAM);
	uint64_t raw = raw_value(s);
	double v = s->type == METRICS_GAUGE && s->source == NULL ? (double)(int64_t)raw : (double)raw;
	return v * s->scale;
}

static uint64_t bucket_raw(const struct metric *s, uint32_t i)
{
	return __atomic_load_n(s->counts_source != NULL ? &s->counts_source[i] : &s->counts[i],
			       __ATOMIC_RELAXED);
}

static double sum_scaled(const struct metric *s)
{
	return (double)__atomic_load_n(s->sum_source != NULL ? s->sum_source : &s->sum,
				       __ATOMIC_RELAXED) * s->scale;
}

static uint32_t count_acquire(const struct metrics *m)
{
	return __atomic_load_n(&m->count, __ATOMIC_ACQUIRE);
}

const struct metric *metrics_find(const struct metrics *m, const char *name, const char *labels)
{
	uint32_t count = count_acquire(m);
	for (uint32_t i = 0; i < count; i++)
		if (strcmp(m->series[i].name, name) == 0 && strcmp(m->series[i].labels, labels) == 0)
			return &m->series[i];
	return NULL;
}

/* ---- Prometheus text format ---- */

struct out {
	char *buf;
	size_t size, len;
	bool overflow;
};

static void outf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(struct out *o, const char *fmt, ...)
{
	if (o->overflow)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->size - o->len) {
		o->overflow = true;
		return;
	}
	o->len += (size_t)n;
}

/* Values as Prometheus floats: integers exactly, others with 15
 * significant digits, so a scaled bound prints as 0.0005 and not as the
 * binary neighbour 0.00050000000000000001. */
static void fmt_value(char *b, size_t n, double v)
{
	if (isinf(v))
		snprintf(b, n, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 1e15)
		snprintf(b, n, "%.0f", v);
	else
		snprintf(b, n, "%.15g", v);
}

static const char *type_name(uint8_t t)
{
	return t == METRICS_COUNTER ? "counter" : t == METRICS_GAUGE ? "gauge" : "histogram";
}

/* HELP text escapes backslash and newline only. */
static void out_help(struct out *o, const char *help)
{
	for (const char *c = help; *c != '\0'; c++) {
		if (*c == '\\')
			outf(o, "\\\\");
		else if (*c == '\n')
			outf(o, "\\n");
		else
			outf(o, "%c", *c);
	}
}

static void expose_series(struct out *o, const struct metric *s)
{
	char v[40];
	const char *open = s->labels[0] ? "{" : "";
	const char *close = s->labels[0] ? "}" : "";
	if (s->type != METRICS_HISTOGRAM) {
		fmt_value(v, sizeof(v), metric_value(s));
		outf(o, "%s%s%s%s %s\n", s->name, open, s->labels, close, v);
		return;
	}
	uint64_t cum = 0;
	const char *sep = s->labels[0] ? "," : "";
	for (uint32_t i = 0; i <= s->bucket_count; i++) {
		cum += bucket_raw(s, i);
		if (i < s->bucket_count)
			fmt_value(v, sizeof(v), (double)s->bounds[i] * s->scale);
		else
			snprintf(v, sizeof(v), "+Inf");
		outf(o, "%s_bucket{%s%sle=\"%s\"} %llu\n", s->name, s->labels, sep, v,
		     (unsigned long long)cum);
	}
	fmt_value(v, sizeof(v), sum_scaled(s));
	outf(o, "%s_sum%s%s%s %s\n", s->name, open, s->labels, close, v);
	/* _count is the +Inf bucket, so the two always agree in one scrape. */
	outf(o, "%s_count%s%s%s %llu\n", s->name, open, s->labels, close, (unsigned long long)cum);
}

size_t metrics_expose(const struct metrics *m, char *buf, size_t size)
{
	HASP_ASSERT(buf != NULL && size > 0);
	struct out o = { .buf = buf, .size = size };
	uint32_t count = count_acquire(m);
	buf[0] = '\0';
	for (uint32_t i = 0; i < count; i++) {
		const struct metric *s = &m->series[i];
		bool seen = false;
		for (uint32_t j = 0; j < i && !seen; j++)
			seen = strcmp(m->series[j].name, s->name) == 0;
		if (seen)
			continue;
		outf(&o, "# HELP %s ", s->name);
		out_help(&o, s->help);
		outf(&o, "\n# TYPE %s %s\n", s->name, type_name(s->type));
		for (uint32_t j = i; j < count; j++)
			if (strcmp(m->series[j].name, s->name) == 0)
				expose_series(&o, &m->series[j]);
	}
	if (o.overflow)
		return 0;
	HASP_ASSERT(o.len < size);
	return o.len;
}

/* ---- JSON ---- */

/* The label text is `k="v",...` with Prometheus escapes; turn it back into
 * JSON members. */
static void labels_json(struct json_writer *w, const char *t)
{
	json_object_begin(w);
	while (*t != '\0') {
		const char *eq = strchr(t, '=');
		HASP_ASSERT(eq != NULL && eq[1] == '"');
		char key[METRICS_LABELS_TEXT_SIZE], val[METRICS_LABELS_TEXT_SIZE];
		size_t kn = (size_t)(eq - t), vn = 0;
		memcpy(key, t, kn);
		key[kn] = '\0';
		const char *c = eq + 2;
		while (*c != '"') {
			if (*c == '\\') {
				c++;
				val[vn++] = *c == 'n' ? '\n' : *c;
			} else {
				val[vn++] = *c;
			}
			c++;
		}
		val[vn] = '\0';
		json_kv_str(w, key, val);
		t = c + 1;
		if (*t == ',')
			t++;
	}
	json_object_end(w);
}

void metrics_json(const struct metrics *m, struct json_writer *w)
{
	uint32_t count = count_acquire(m);
	json_array_begin(w);
	for (uint32_t i = 0; i < count; i++) {
		const struct metric *s = &m->series[i];
		json_object_begin(w);
		json_kv_str(w, "name", s->name);
		json_kv_str(w, "type", type_name(s->type));
		json_kv_str(w, "help", s->help);
		json_key(w, "labels");
		labels_json(w, s->labels);
		if (s->type != METRICS_HISTOGRAM) {
			json_kv_double(w, "value", metric_value(s));
		} else {
			uint64_t cum = 0;
			json_key(w, "buckets");
			json_array_begin(w);
			for (uint32_t b = 0; b <= s->bucket_count; b++) {
				cum += bucket_raw(s, b);
				json_array_begin(w);
				if (b < s->bucket_count)
					json_double(w, (double)s->bounds[b] * s->scale);
				else
					json_string(w, "+Inf");
				json_u64(w, cum);
				json_array_end(w);
			}
			json_array_end(w);
			json_kv_u64(w, "count", cum);
			json_kv_double(w, "sum", sum_scaled(s));
		}
		json_object_end(w);
	}
	json_array_end(w);
}
