/*
 * hasp-bench reports (tools/bench_report.h). Plain stdio: the report is
 * written once, after the run, so its cost never shows in a measurement.
 */
#include "tools/bench_report.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "hasp/types.h"

void bench_machine_get(struct bench_machine *m)
{
	struct utsname u;
	FILE *f;
	char line[256];

	memset(m, 0, sizeof(*m));
	m->nproc = sysconf(_SC_NPROCESSORS_ONLN);
	snprintf(m->kernel, sizeof(m->kernel), "unknown");
	if (uname(&u) == 0)
		snprintf(m->kernel, sizeof(m->kernel), "%s", u.release);
	snprintf(m->cpu, sizeof(m->cpu), "unknown");
	f = fopen("/proc/cpuinfo", "r");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *colon = strchr(line, ':');
		if (strncmp(line, "model name", 10) != 0 || colon == NULL)
			continue;
		colon++;
		while (*colon == ' ' || *colon == '\t')
			colon++;
		colon[strcspn(colon, "\n")] = '\0';
		snprintf(m->cpu, sizeof(m->cpu), "%s", colon);
		break;
	}
	fclose(f);
}

void bench_json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			fprintf(out, "\\u%04x", ch);
		else
			fputc(ch, out);
	}
	fputc('"', out);
}

static double us(uint64_t ns)
{
	return (double)ns / 1000.0;
}

void bench_json_hist(FILE *out, const struct bench_hist *h)
{
	fprintf(out,
		"{\"count\":%llu,\"mean\":%.3f,\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,"
		"\"p999\":%.3f,\"max\":%.3f}",
		(unsigned long long)h->count, bench_hist_mean(h) / 1000.0,
		us(bench_hist_quantile(h, 0.5)), us(bench_hist_quantile(h, 0.9)),
		us(bench_hist_quantile(h, 0.99)), us(bench_hist_quantile(h, 0.999)),
		us(h->count ? h->max : 0));
}

static const char *mode_name(const struct bench_config *cfg)
{
	return cfg->wait ? "wait" : "try";
}

struct error_field {
	const char *name;
	size_t offset;
};

#define ERR(f) { #f, offsetof(struct bench_errors, f) }
static const struct error_field error_fields[] = {
	ERR(timeouts), ERR(retransmits), ERR(redirects), ERR(malformed), ERR(stray),
	ERR(wait_rereads), ERR(wait_timeouts), ERR(notify_missing), ERR(arrivals_dropped),
	ERR(send_errors), ERR(session_reopens), ERR(sessions_failed), ERR(unfinished),
	ERR(failed_ops), ERR(rewatches), ERR(storm_waiters_missing), ERR(storm_watchers_missing),
	ERR(closes_unanswered),
};
#undef ERR

static uint64_t error_value(const struct bench_errors *e, const struct error_field *f)
{
	uint64_t v;
	memcpy(&v, (const uint8_t *)e + f->offset, sizeof(v));
	return v;
}

/* The sessions a workload runs (burst: W + 1, storm: 3L). */
static uint32_t sessions_of(const struct bench_config *cfg)
{
	if (cfg->workload == BENCH_WL_BURST)
		return cfg->waiters + 1u;
	if (cfg->workload == BENCH_WL_STORM)
		return 3u * cfg->storm_locks;
	return cfg->clients;
}

static double per_s(uint64_t n, uint64_t ns)
{
	return ns ? (double)n * 1e9 / (double)ns : 0.0;
}

/* The answers a healthy cluster gives hasp-bench's requests; the table
 * lists every other (request, status) pair as a refusal. */
static bool expected_status(uint8_t opcode, uint32_t status)
{
	/* Retried inside the engine and counted under errors. */
	if (status == HASP_STATUS_NOT_LEADER || status == HASP_STATUS_UNAVAILABLE ||
	    status == HASP_STATUS_OVERLOADED)
		return true;
	switch (opcode) {
	case HASP_OP_ACQUIRE:
		return status == HASP_STATUS_GRANTED || status == HASP_STATUS_QUEUED ||
		       status == HASP_STATUS_BUSY;
	case HASP_OP_LOCK_READ:
	case HASP_OP_KV_GET:
		return status == HASP_STATUS_OK || status == HASP_STATUS_NOT_FOUND;
	default:
		return status == HASP_STATUS_OK;
	}
}

void bench_report_table(FILE *out, const struct bench_config *cfg, const struct bench_result *res)
{
	fprintf(out, "hasp-bench: workload=%s clients=%u keys=%u %s mode=%s loop=%s",
		bench_workload_name(cfg->workload), sessions_of(cfg),
		cfg->keys, cfg->contended ? "contended" : "uncontended", mode_name(cfg),
		cfg->rate > 0.0 ? "open" : "closed");
	if (cfg->rate > 0.0)
		fprintf(out, " rate=%.0f/s", cfg->rate);
	fprintf(out, " seed=%llu\n", (unsigned long long)cfg->seed);
	fprintf(out, "ops %llu in %.3f s: %.0f ops/s", (unsigned long long)res->ops,
		(double)res->elapsed_ns / 1e9, per_s(res->ops, res->elapsed_ns));
	if (cfg->workload == BENCH_WL_CYCLE)
		fprintf(out, ", cycles %llu (%.0f/s), busy %llu", (unsigned long long)res->cycles,
			per_s(res->cycles, res->elapsed_ns), (unsigned long long)res->busy);
	fprintf(out, ", sessions %u\n", res->sessions);
	if (cfg->workload == BENCH_WL_STORM)
		fprintf(out, "storm: locks %u window %u ms: waiters granted %llu missing %llu, "
			     "watchers told %llu (coalesced %llu, resynced %llu) missing %llu\n",
			cfg->storm_locks, cfg->window_ms, (unsigned long long)res->storm_granted,
			(unsigned long long)res->err.storm_waiters_missing,
			(unsigned long long)res->storm_told, (unsigned long long)res->storm_coalesced,
			(unsigned long long)res->storm_resynced,
			(unsigned long long)res->err.storm_watchers_missing);
	fprintf(out, "%-10s %10s %10s %10s %10s %10s %10s %10s\n", "latency", "count", "mean_us",
		"p50_us", "p90_us", "p99_us", "p99.9_us", "max_us");
	for (int l = 0; l < BENCH_LAT_COUNT; l++) {
		const struct bench_hist *h = res->lat[l];
		if (h->count == 0)
			continue;
		fprintf(out, "%-10s %10llu %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f\n",
			bench_lat_name((enum bench_lat)l), (unsigned long long)h->count,
			bench_hist_mean(h) / 1000.0, us(bench_hist_quantile(h, 0.5)),
			us(bench_hist_quantile(h, 0.9)), us(bench_hist_quantile(h, 0.99)),
			us(bench_hist_quantile(h, 0.999)), us(h->max));
	}
	fprintf(out, "statuses:");
	for (uint32_t s = 0; s < HASP_STATUS_COUNT; s++)
		if (res->statuses[s])
			fprintf(out, " %s=%llu", hasp_status_name(s), (unsigned long long)res->statuses[s]);
	fprintf(out, "\nrefusals:");
	for (uint32_t op = 0; op < BENCH_OPCODE_LIMIT; op++)
		for (uint32_t st = 0; st < HASP_STATUS_COUNT; st++)
			if (res->op_statuses[op][st] && !expected_status((uint8_t)op, st))
				fprintf(out, " %s:%s=%llu", bench_op_name((uint8_t)op) ? bench_op_name((uint8_t)op) : "?",
					hasp_status_name(st), (unsigned long long)res->op_statuses[op][st]);
	fprintf(out, "\nerrors:");
	for (size_t i = 0; i < sizeof(error_fields) / sizeof(error_fields[0]); i++) {
		uint64_t v = error_value(&res->err, &error_fields[i]);
		if (v)
			fprintf(out, " %s=%llu", error_fields[i].name, (unsigned long long)v);
	}
	fprintf(out, "\nio: tx=%llu in %llu send batches, rx=%llu in %llu receive batches, events=%llu\n",
		(unsigned long long)res->tx_datagrams, (unsigned long long)res->tx_calls,
		(unsigned long long)res->rx_datagrams, (unsigned long long)res->rx_calls,
		(unsigned long long)res->events);
}

void bench_report_json(FILE *out, const char *commit, const struct bench_config *cfg,
		       const struct bench_result *res)
{
	struct bench_machine m;

	bench_machine_get(&m);
	fprintf(out, "{\"tool\":\"hasp-bench\",\"format\":1,\"system\":\"hasp\",\"commit\":");
	bench_json_string(out, commit);
	fprintf(out, ",\"machine\":{\"nproc\":%ld,\"kernel\":", m.nproc);
	bench_json_string(out, m.kernel);
	fprintf(out, ",\"cpu\":");
	bench_json_string(out, m.cpu);
	fprintf(out, "},\"config\":{\"workload\":\"%s\",\"clients\":%u,\"keys\":%u,"
		     "\"contended\":%s,\"zipf_s\":%.3f,\"mode\":\"%s\",\"loop\":\"%s\",\"rate\":%.1f,"
		     "\"count_max\":%llu,\"duration_ms\":%u,\"warmup_ms\":%u,\"lock_ttl_ms\":%u,"
		     "\"session_ttl_ms\":%u,\"put_percent\":%u,\"value_size\":%u,\"waiters\":%u,"
		     "\"watchers\":%s,\"storm_locks\":%u,\"window_ms\":%u,\"request_timeout_ms\":%u,\"request_deadline_ms\":%u,\"threads\":%u,\"engine\":\"libhasp\","
		     "\"seed\":%llu,"
		     "\"prefix\":",
		bench_workload_name(cfg->workload),
		sessions_of(cfg), cfg->keys,
		cfg->contended ? "true" : "false", cfg->zipf_s, mode_name(cfg),
		cfg->rate > 0.0 ? "open" : "closed", cfg->rate, (unsigned long long)cfg->count_max,
		cfg->duration_ms, cfg->warmup_ms, cfg->lock_ttl_ms, cfg->session_ttl_ms,
		cfg->put_percent, cfg->value_size, cfg->waiters, cfg->watchers ? "true" : "false",
		cfg->storm_locks, cfg->window_ms,
		cfg->request_timeout_ms, cfg->request_deadline_ms, cfg->threads,
		(unsigned long long)cfg->seed);
	bench_json_string(out, cfg->prefix);
	fprintf(out, ",\"cluster\":");
	bench_json_string(out, cfg->cluster != NULL ? cfg->cluster : "");
	fprintf(out, "},\"results\":{\"ops\":%llu,\"ops_per_s\":%.1f,\"cycles\":%llu,"
		     "\"cycles_per_s\":%.1f,\"busy\":%llu,\"elapsed_s\":%.6f,\"sessions\":%u,"
		     "\"storm\":{\"granted\":%llu,\"told\":%llu,\"coalesced\":%llu,"
		     "\"resynced\":%llu},"
		     "\"latency_us\":{",
		(unsigned long long)res->ops, per_s(res->ops, res->elapsed_ns),
		(unsigned long long)res->cycles, per_s(res->cycles, res->elapsed_ns),
		(unsigned long long)res->busy, (double)res->elapsed_ns / 1e9, res->sessions,
		(unsigned long long)res->storm_granted, (unsigned long long)res->storm_told,
		(unsigned long long)res->storm_coalesced, (unsigned long long)res->storm_resynced);
	bool first = true;
	for (int l = 0; l < BENCH_LAT_COUNT; l++) {
		if (res->lat[l]->count == 0)
			continue;
		fprintf(out, "%s\"%s\":", first ? "" : ",", bench_lat_name((enum bench_lat)l));
		bench_json_hist(out, res->lat[l]);
		first = false;
	}
	fprintf(out, "},\"statuses\":{");
	first = true;
	for (uint32_t s = 0; s < HASP_STATUS_COUNT; s++) {
		if (!res->statuses[s])
			continue;
		fprintf(out, "%s\"%s\":%llu", first ? "" : ",", hasp_status_name(s),
			(unsigned long long)res->statuses[s]);
		first = false;
	}
	fprintf(out, "},\"statuses_by_op\":{");
	first = true;
	for (uint32_t op = 0; op < BENCH_OPCODE_LIMIT; op++) {
		bool any = false;
		for (uint32_t st = 0; st < HASP_STATUS_COUNT; st++) {
			if (!res->op_statuses[op][st])
				continue;
			if (!any)
				fprintf(out, "%s\"%s\":{", first ? "" : ",",
					bench_op_name((uint8_t)op) ? bench_op_name((uint8_t)op) : "?");
			fprintf(out, "%s\"%s\":%llu", any ? "," : "", hasp_status_name(st),
				(unsigned long long)res->op_statuses[op][st]);
			any = true;
			first = false;
		}
		if (any)
			fputc('}', out);
	}
	fprintf(out, "},\"errors\":{");
	for (size_t i = 0; i < sizeof(error_fields) / sizeof(error_fields[0]); i++)
		fprintf(out, "%s\"%s\":%llu", i ? "," : "", error_fields[i].name,
			(unsigned long long)error_value(&res->err, &error_fields[i]));
	fprintf(out, "},\"io\":{\"tx_datagrams\":%llu,\"rx_datagrams\":%llu,\"tx_calls\":%llu,"
		     "\"rx_calls\":%llu,\"events\":%llu,\"backlog_max\":%llu}}}\n",
		(unsigned long long)res->tx_datagrams, (unsigned long long)res->rx_datagrams,
		(unsigned long long)res->tx_calls, (unsigned long long)res->rx_calls,
		(unsigned long long)res->events, (unsigned long long)res->backlog_max);
}

/* One line of a long run on a terminal: that second's completed operations,
 * the p99 of every operation so far, and the errors so far. */
void bench_progress_line(FILE *f, const struct bench_result *res, uint32_t tick, uint64_t ops)
{
	const struct bench_errors *er = &res->err;
	uint64_t errors = er->timeouts + er->malformed + er->wait_timeouts + er->notify_missing +
			  er->arrivals_dropped + er->send_errors;
	fprintf(f, "hasp-bench: %us ops/s=%" PRIu64 " p99_us=%.0f errors=%" PRIu64 "\n", tick, ops,
		(double)bench_hist_quantile(res->lat[BENCH_LAT_OP], 0.99) / 1000.0, errors);
	fflush(f);
}
