/*
 * A manual measurement, not a test (timing never gates a test): sequential
 * CHECK round trips of libhasp against the scripted responder on
 * 127.0.0.1, reporting p50/p99/p99.9 and the rate. It measures the client
 * library and the kernel loopback path only, not a hasp node.
 *
 *   ./build/tests/client/bench_loopback
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "hasp/client.h"
#include "tests/client/responder.h"

#define ROUNDS 20000

static void script_ok(struct responder *r, int node, const struct hasp_wire_msg *req,
		      const struct sockaddr_in *from, void *arg)
{
	struct hasp_wire_msg rep;
	(void)arg;

	if (req == NULL || responder_answer_session(r, node, req, from))
		return;
	responder_reply_init(&rep, req, HASP_STATUS_OK);
	responder_send(r, node, from, &rep);
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(void)
{
	static struct responder r;
	static uint64_t latency_ns[ROUNDS];
	struct hasp_client_config cfg;
	struct hasp_client *c;
	char cluster[64];

	if (responder_start(&r, 1, script_ok, NULL) != 0)
		return 1;
	responder_cluster(&r, cluster, sizeof(cluster));
	hasp_client_config_default(&cfg);
	cfg.cluster = cluster;
	if (hasp_client_open(&c, &cfg) != 0 || hasp_client_check(c, "job", 1) != 0)
		return 1;
	uint64_t t0 = clock_monotonic_ns();
	for (int i = 0; i < ROUNDS; i++) {
		uint64_t a = clock_monotonic_ns();
		if (hasp_client_check(c, "job", 1) != 0)
			return 2;
		latency_ns[i] = clock_monotonic_ns() - a;
	}
	uint64_t total_ns = clock_monotonic_ns() - t0;
	qsort(latency_ns, ROUNDS, sizeof(latency_ns[0]), compare_u64);
	printf("libhasp sequential CHECK vs loopback responder: n=%d p50=%.1fus p99=%.1fus "
	       "p99.9=%.1fus rate=%.0f/s\n",
	       ROUNDS, latency_ns[ROUNDS / 2] / 1e3, latency_ns[ROUNDS * 99 / 100] / 1e3,
	       latency_ns[ROUNDS * 999 / 1000] / 1e3, ROUNDS / (total_ns / 1e9));
	hasp_client_close(c);
	responder_stop(&r);
	return 0;
}
