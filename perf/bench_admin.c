/*
 * bench_admin: admin round trips over the Unix socket, for an admin-thread
 * command (`health`) and an lcore command (through the request slots,
 * drained by a fake lcore thread that polls like the node's work hook),
 * and the cost of one /metrics exposition of the node's metric set.
 * Not a test (docs/STYLE.md §9: timing stays out of pass/fail).
 *
 *   ninja -C build perf/bench_admin && ./build/perf/bench_admin [requests]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "control/admin_client.h"
#include "control/control.h"
#include "node/node_metrics.h"

static volatile int stop;

static bool cmd_nop(struct control_request *req, void *arg)
{
	(void)arg;
	json_object_begin(&req->out);
	json_kv_bool(&req->out, "ok", true);
	json_object_end(&req->out);
	return true;
}

/* A busy-polling lcore, as on real hardware (an idle one is woken by the
 * wake fd instead). */
static void *lcore(void *arg)
{
	struct control *c = arg;
	while (!stop)
		control_poll(c, 4);
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void run(struct admin_client *a, const char *line, uint64_t *lat, int n)
{
	const char *text;
	size_t len;
	for (int i = 0; i < n; i++) {
		uint64_t t = clock_monotonic_ns();
		if (admin_client_call(a, line, &text, &len) != 0) {
			fprintf(stderr, "bench_admin: call failed\n");
			exit(1);
		}
		lat[i] = clock_monotonic_ns() - t;
	}
	qsort(lat, (size_t)n, sizeof(*lat), cmp);
	printf("%-10s n=%d p50=%.1f us p99=%.1f us p99.9=%.1f us\n", line, n, lat[n / 2] / 1e3,
	       lat[n * 99 / 100] / 1e3, lat[n * 999 / 1000] / 1e3);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	char dir[] = "/tmp/hasp-bench-admin-XXXXXX";
	if (n < 1000 || mkdtemp(dir) == NULL)
		return 2;
	struct control c;
	struct control_config cfg = { 0 };
	snprintf(cfg.unix_path, sizeof(cfg.unix_path), "%s/admin.sock", dir);
	struct node_metrics nm;
	struct control_command nop = { "lc.nop", "", "no-op on the lcore", CONTROL_ON_LCORE, cmd_nop, NULL };
	if (control_init(&c, &cfg) != 0 || node_metrics_register(&nm, &c, 1) != 0 ||
	    control_register(&c, &nop) != 0 || control_start(&c) != 0)
		return 1;
	pthread_t t;
	if (pthread_create(&t, NULL, lcore, &c) != 0)
		return 1;
	struct admin_client a;
	if (admin_client_open(&a, cfg.unix_path, 5000) != 0)
		return 1;
	uint64_t *lat = calloc((size_t)n, sizeof(*lat));
	run(&a, "health", lat, n);
	run(&a, "lc.nop", lat, n);
	admin_client_close(&a);

	static char buf[256 * 1024];
	uint64_t t0 = clock_monotonic_ns();
	size_t len = 0;
	for (int i = 0; i < 1000; i++)
		len = metrics_expose(control_metrics(&c), buf, sizeof(buf));
	printf("/metrics  %zu bytes, %u series, %.1f us per exposition\n", len,
	       control_metrics(&c)->count, (clock_monotonic_ns() - t0) / 1000 / 1e3);
	stop = 1;
	pthread_join(t, NULL);
	control_stop(&c);
	control_deinit(&c);
	rmdir(dir);
	free(lat);
	return 0;
}
