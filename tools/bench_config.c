/*
 * hasp-bench's configuration defaults and checks, result storage and the
 * names used in reports (tools/bench_engine.h).
 */
#include "tools/bench_engine.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/limits.h"
#include "common/prng.h"
#include "hasp/errors.h"
#include "hasp/wire.h"
#include "tools/bench_arrival.h"

static const char *const lat_names[BENCH_LAT_COUNT] = {
	"op", "acquire", "release", "keepalive", "put", "get", "notify", "grant_last",
};

const char *bench_lat_name(enum bench_lat l)
{
	HASP_ASSERT(l < BENCH_LAT_COUNT);
	return lat_names[l];
}

void bench_record(const struct bench_config *cfg, struct bench_result *res, enum bench_lat l,
		  uint64_t start_ns, uint64_t end_ns)
{
	bench_hist_record(res->lat[l], end_ns - start_ns);
	if (cfg->latency_log != NULL)
		fprintf(cfg->latency_log, "%s %llu %llu\n", bench_lat_name(l),
			(unsigned long long)start_ns, (unsigned long long)(end_ns - start_ns));
}

const char *bench_op_name(uint8_t opcode)
{
	switch (opcode) {
	case HASP_OP_SESSION_OPEN: return "SESSION_OPEN";
	case HASP_OP_SESSION_KEEPALIVE: return "SESSION_KEEPALIVE";
	case HASP_OP_SESSION_CLOSE: return "SESSION_CLOSE";
	case HASP_OP_ACQUIRE: return "ACQUIRE";
	case HASP_OP_RELEASE: return "RELEASE";
	case HASP_OP_LOCK_READ: return "LOCK_READ";
	case HASP_OP_WATCH: return "WATCH";
	case HASP_OP_WATCH_STATUS: return "WATCH_STATUS";
	case HASP_OP_KV_PUT: return "KV_PUT";
	case HASP_OP_KV_GET: return "KV_GET";
	default: return NULL;
	}
}

const char *bench_workload_name(enum bench_workload w)
{
	switch (w) {
	case BENCH_WL_CYCLE: return "cycle";
	case BENCH_WL_KEEPALIVE: return "keepalive";
	case BENCH_WL_KV: return "kv";
	case BENCH_WL_BURST: return "burst";
	case BENCH_WL_STORM: return "storm";
	}
	return "?";
}

void bench_config_default(struct bench_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->workload = BENCH_WL_CYCLE;
	cfg->clients = 16;
	cfg->keys = 1024;
	cfg->zipf_s = 0.99;
	cfg->lock_ttl_ms = 5000;
	cfg->session_ttl_ms = 10000;
	cfg->count_max = 1000000;
	cfg->duration_ms = 10000;
	cfg->put_percent = 10;
	cfg->value_size = 64;
	cfg->waiters = 16;
	cfg->storm_locks = 1000;
	cfg->window_ms = 1000;
	cfg->request_timeout_ms = 200;
	cfg->request_deadline_ms = 5000;
	cfg->wait_recheck_ms = 500;
	cfg->seed = 1;
	cfg->threads = 1;
	snprintf(cfg->prefix, sizeof(cfg->prefix), "hb");
}

int bench_config_auth(struct bench_config *cfg, char *err, size_t err_size)
{
	const char *id = getenv("HASP_ID");
	const char *key_file = getenv("HASP_KEY_FILE");

	cfg->auth = false;
	if (id == NULL || id[0] == '\0')
		return 0;
	size_t size = strlen(id);
	if (size > HASP_IDENTITY_SIZE_MAX || !hasp_name_valid(id, size)) {
		snprintf(err, err_size, "HASP_ID must be 1..32 bytes of 0x21..0x7e");
		return -HASP_ENAME;
	}
	if (key_file == NULL || auth_init() != 0) {
		snprintf(err, err_size, "HASP_ID is set but HASP_KEY_FILE is not");
		return -HASP_ECONFIG;
	}
	int rc = auth_key_load(key_file, &cfg->identity_key);
	if (rc != 0) {
		snprintf(err, err_size, "HASP_KEY_FILE %s: %s", key_file, hasp_strerror(rc));
		return rc;
	}
	memcpy(cfg->identity, id, size);
	cfg->identity_size = (uint8_t)size;
	cfg->auth = true;
	return 0;
}

int bench_config_check(const struct bench_config *cfg, char *err, size_t err_size)
{
#define REFUSE(...)                                    \
	do {                                           \
		snprintf(err, err_size, __VA_ARGS__); \
		return -HASP_ECONFIG;                  \
	} while (0)
	if (cfg->cluster == NULL || cfg->cluster[0] == '\0')
		REFUSE("no cluster address (--cluster or HASP_CLUSTER)");
	if (cfg->clients < 1 || cfg->clients > BENCH_CLIENTS_MAX)
		REFUSE("clients must be 1..%u", BENCH_CLIENTS_MAX);
	if (cfg->keys < 1 || cfg->keys > 100000000u)
		REFUSE("keys must be 1..100000000");
	if (cfg->count_max < 1)
		REFUSE("count must be at least 1 (every run is bounded)");
	if (cfg->duration_ms < 1 || cfg->duration_ms > BENCH_DURATION_MS_MAX ||
	    cfg->warmup_ms > BENCH_DURATION_MS_MAX)
		REFUSE("duration must be 1 ms .. 1 h (every run is bounded)");
	if (cfg->rate < 0.0 || cfg->rate > 1e8)
		REFUSE("rate must be 0 (closed loop) .. 1e8 per second");
	if (cfg->lock_ttl_ms < HASP_TTL_MS_MIN || cfg->lock_ttl_ms > HASP_TTL_MS_MAX ||
	    cfg->session_ttl_ms < HASP_TTL_MS_MIN || cfg->session_ttl_ms > HASP_TTL_MS_MAX)
		REFUSE("TTLs must be %u .. %u ms", HASP_TTL_MS_MIN, HASP_TTL_MS_MAX);
	if (cfg->put_percent > 100 || cfg->value_size > HASP_VALUE_SIZE_MAX)
		REFUSE("put percent must be 0..100 and value size 0..%u", HASP_VALUE_SIZE_MAX);
	if (cfg->request_timeout_ms < 1 || cfg->request_deadline_ms < cfg->request_timeout_ms ||
	    cfg->request_deadline_ms > BENCH_DURATION_MS_MAX)
		REFUSE("request timeout must be >= 1 ms and <= the deadline (at most 1 h)");
	if (cfg->zipf_s < 0.0 || cfg->zipf_s > 10.0)
		REFUSE("zipf exponent must be 0..10");
	if (cfg->workload == BENCH_WL_BURST &&
	    (cfg->waiters < 1 || cfg->waiters + 1u > BENCH_CLIENTS_MAX))
		REFUSE("burst needs 1..%u waiters", BENCH_CLIENTS_MAX - 1u);
	if (cfg->workload == BENCH_WL_BURST && cfg->rate > 0.0)
		REFUSE("burst runs rounds back to back (closed loop only)");
	if (cfg->workload == BENCH_WL_STORM) {
		if (cfg->storm_locks < 1 || cfg->storm_locks > BENCH_STORM_LOCKS_MAX)
			REFUSE("storm needs 1..%u locks (3 sessions each)", BENCH_STORM_LOCKS_MAX);
		if (cfg->window_ms < 1 || cfg->window_ms > BENCH_WINDOW_MS_MAX)
			REFUSE("storm release window must be 1..%u ms", BENCH_WINDOW_MS_MAX);
		/* A lock that expires before its holder's release hands off
		 * on its own: the storm would measure expiry, not release. */
		if (cfg->lock_ttl_ms <= cfg->window_ms)
			REFUSE("storm needs a lock TTL (--ttl) longer than the release window");
		if (cfg->rate > 0.0)
			REFUSE("storm runs rounds back to back (closed loop only)");
	}
	char probe[HASP_NAME_SIZE_MAX + 1];
	uint32_t key_max = cfg->workload == BENCH_WL_STORM ? cfg->storm_locks : cfg->keys;
	int n = snprintf(probe, sizeof(probe), "%s/k%u", cfg->prefix, key_max);
	if (n < 0 || (size_t)n > HASP_NAME_SIZE_MAX || !hasp_name_valid(probe, (size_t)n))
		REFUSE("prefix makes invalid names (1..128 bytes of 0x21..0x7e)");
	return 0;
#undef REFUSE
}

int bench_result_init(struct bench_result *res)
{
	memset(res, 0, sizeof(*res));
	for (int i = 0; i < BENCH_LAT_COUNT; i++) {
		res->lat[i] = hasp_alloc(sizeof(*res->lat[i]));
		if (res->lat[i] == NULL) {
			bench_result_deinit(res);
			return -HASP_ENOMEM;
		}
		bench_hist_reset(res->lat[i]);
	}
	return 0;
}

void bench_result_deinit(struct bench_result *res)
{
	for (int i = 0; i < BENCH_LAT_COUNT; i++) {
		hasp_free(res->lat[i]);
		res->lat[i] = NULL;
	}
}

void bench_result_merge(struct bench_result *target, const struct bench_result *source)
{
	HASP_ASSERT(target != source);
	for (int i = 0; i < BENCH_LAT_COUNT; i++)
		bench_hist_merge(target->lat[i], source->lat[i]);
	target->ops += source->ops;
	target->cycles += source->cycles;
	target->busy += source->busy;
	target->ops_started += source->ops_started;
	if (source->elapsed_ns > target->elapsed_ns)
		target->elapsed_ns = source->elapsed_ns;
	for (uint32_t s = 0; s < HASP_STATUS_COUNT; s++) {
		target->statuses[s] += source->statuses[s];
		for (uint32_t op = 0; op < BENCH_OPCODE_LIMIT; op++)
			target->op_statuses[op][s] += source->op_statuses[op][s];
	}
	static_assert(sizeof(struct bench_errors) % sizeof(uint64_t) == 0,
		      "struct bench_errors is all uint64_t counters");
	uint64_t *t = (uint64_t *)&target->err;
	const uint64_t *src = (const uint64_t *)&source->err;
	for (size_t i = 0; i < sizeof(target->err) / sizeof(uint64_t); i++)
		t[i] += src[i];
	if (source->backlog_max > target->backlog_max)
		target->backlog_max = source->backlog_max;
	target->tx_datagrams += source->tx_datagrams;
	target->rx_datagrams += source->rx_datagrams;
	target->tx_calls += source->tx_calls;
	target->rx_calls += source->rx_calls;
	target->events += source->events;
	target->sessions += source->sessions;
	target->storm_granted += source->storm_granted;
	target->storm_told += source->storm_told;
	target->storm_coalesced += source->storm_coalesced;
	target->storm_resynced += source->storm_resynced;
}

uint32_t bench_key_pick(const struct bench_config *cfg, const struct bench_zipf *zipf,
			struct prng *prng, uint32_t index, uint32_t clients)
{
	if (cfg->workload == BENCH_WL_BURST)
		return 0;
	if (cfg->workload == BENCH_WL_STORM) /* holder i, waiter L+i, watcher 2L+i: lock i */
		return index % cfg->storm_locks;
	if (cfg->contended || cfg->workload == BENCH_WL_KV)
		return bench_zipf_next(zipf, prng);
	uint32_t per_client = cfg->keys / clients;
	if (per_client == 0)
		return index % cfg->keys;
	return index + clients * (uint32_t)prng_below(prng, per_client);
}
