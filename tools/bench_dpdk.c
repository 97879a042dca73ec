/*
 * hasp-bench over DPDK (tools/bench_dpdk.h). One lcore is enough: the
 * engine is one thread by design; extra EAL lcores would only poll. The
 * engine (tools/bench_libhasp.c) runs on a libhasp group on the
 * application's datagrams (libhasp 1.6): the port's datagrams go to the
 * group, and the group's sends to the port.
 */
#include "tools/bench_dpdk.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "common/assert.h"
#include "common/clock.h"
#include "dataplane/dp.h"
#include "hasp/client.h"
#include "hasp/errors.h"

struct dpdk_run {
	struct dp dp;
	const struct bench_config *cfg;
	const struct bench_dpdk_config *dcfg;
	struct bench_result *res;
	struct lh_engine *lh;
	uint64_t start_ns; /* when the engine may start */
	struct dp_lcore *lc; /* during the engine's step */
	bool done;
	int rc;
};

static struct dpdk_run run_state; /* one run per process: EAL cannot restart */

/* The libhasp group's send function: out of the port, from lcore 0's
 * work hook (r->lc); anything else is lost, as on a full socket. */
static int dpdk_group_send(void *arg, const struct sockaddr_in *to, const void *data, size_t size)
{
	struct dpdk_run *r = arg;

	if (r->lc == NULL)
		return -1;
	return dp_udp_send(r->lc, ntohl(to->sin_addr.s_addr), ntohs(to->sin_port),
			   r->dcfg->local_port, data, size) == 0
		       ? 0
		       : -1;
}

static void dpdk_reply(struct dp_lcore *lc, const struct dp_datagram *dg, void *arg)
{
	struct dpdk_run *r = arg;
	struct sockaddr_in from = { .sin_family = AF_INET,
				    .sin_port = htons(dg->src_port),
				    .sin_addr.s_addr = htonl(dg->src_ip) };

	(void)lc;
	if (r->done)
		return;
	(void)!bench_libhasp_input(r->lh, dg->payload, dg->payload_size, &from);
}

/* lcore 0's work on the libhasp engine: a step (start-up, run, drain,
 * closes), its sends out of the port; the clients are freed while the
 * port can still send. */
static bool dpdk_work_libhasp(struct dpdk_run *r, struct dp_lcore *lc, uint64_t now_ns,
			      uint64_t *deadline_ns)
{
	bool worked;
	int rc;

	r->lc = lc;
	bool over = bench_libhasp_step(r->lh, now_ns, &rc, &worked);
	if (over) {
		bench_libhasp_close(r->lh);
		r->rc = rc;
		r->done = true;
		dp_stop(&r->dp);
	}
	r->lc = NULL;
	if (!over && bench_libhasp_wake_ns(r->lh) < *deadline_ns)
		*deadline_ns = bench_libhasp_wake_ns(r->lh);
	return worked;
}

static bool dpdk_work(struct dp_lcore *lc, uint64_t now_ns, uint64_t *deadline_ns, void *arg)
{
	struct dpdk_run *r = arg;

	if (dp_lcore_index(lc) != 0 || r->done)
		return false;
	if (now_ns < r->start_ns) {
		*deadline_ns = r->start_ns;
		return false;
	}
	return dpdk_work_libhasp(r, lc, now_ns, deadline_ns);
}

int bench_run_dpdk(const struct bench_config *cfg, const struct bench_dpdk_config *dcfg,
		   struct bench_result *res)
{
	struct dpdk_run *r = &run_state;
	struct dp_config dpc;
	char why[128];

	if (bench_config_check(cfg, why, sizeof(why)) != 0)
		return -HASP_ECONFIG;
	memset(r, 0, sizeof(*r));
	r->cfg = cfg;
	r->dcfg = dcfg;
	r->res = res;
	memset(&dpc, 0, sizeof(dpc));
	dpc.eal_argc = dcfg->eal_argc;
	dpc.eal_argv = dcfg->eal_argv;
	memcpy(dpc.mac.bytes, dcfg->mac, sizeof(dpc.mac.bytes));
	dpc.ip = dcfg->ip;
	dpc.prefix_len = dcfg->prefix_len;
	dpc.idle = (enum idle_mode)dcfg->idle;
	int rc = dp_init(&r->dp, &dpc);
	if (rc != 0)
		return rc;
	rc = dp_udp_register(&r->dp, dcfg->local_port, dpdk_reply, r);
	if (rc != 0)
		goto out;
	struct hasp_client_group_io io = { .send = dpdk_group_send, .arg = r };
	rc = bench_libhasp_create(&r->lh, cfg, res, &io);
	if (rc != 0)
		goto out;
	dp_set_work(&r->dp, dpdk_work, r);
	r->start_ns = clock_monotonic_ns() + (uint64_t)dcfg->settle_ms * 1000000u;
	fprintf(stderr, "hasp-bench: dpdk port %s up; starting in %u ms\n", r->dp.port.driver,
		dcfg->settle_ms);
	rc = dp_run(&r->dp);
	if (rc == 0)
		rc = r->done ? r->rc : -HASP_ESHUTDOWN;
out:
	bench_libhasp_destroy(r->lh);
	r->lh = NULL;
	dp_deinit(&r->dp);
	return rc;
}
