/*
 * hasp-bench's DPDK transport: the engine (tools/bench_engine.h) driven
 * from a dataplane lcore (dataplane/dp.h) on hasp-bench's own EAL port,
 * e.g. a net_tap attached to the cluster's bridge or a net_memif, so that
 * the load generator's packet path costs as little as the nodes' and can
 * drive more load than the kernel socket path.
 *
 * The engine runs in lcore 0's work hook (bench_libhasp_step; its group's
 * datagrams go out with dp_udp_send, which resolves the node's MAC by
 * ARP); replies arrive through a UDP handler on cfg->local_port and go to
 * the group (bench_libhasp_input). The run starts
 * settle_ms after the port is up (time for the caller to attach a TAP to
 * its bridge) and dp_run returns when the engine's run is over.
 */
#ifndef HASP_TOOLS_BENCH_DPDK_H
#define HASP_TOOLS_BENCH_DPDK_H

#include <stdint.h>

#include "tools/bench_engine.h"

struct bench_dpdk_config {
	int eal_argc;        /* EAL arguments; eal_argv[0] is the program name */
	char **eal_argv;
	uint32_t ip;         /* our address, host order */
	uint8_t prefix_len;
	uint8_t mac[6];
	uint16_t local_port; /* UDP source port of every request */
	uint32_t settle_ms;  /* wait this long after the port is up */
	uint32_t idle;       /* enum idle_mode: 0 poll, 1 hybrid, 2 sleep */
};

/* As bench_run_libhasp, over DPDK. Also -HASP_ESYS when the EAL or port failed;
 * -HASP_ENOTSUP when this build has no DPDK. */
int bench_run_dpdk(const struct bench_config *cfg, const struct bench_dpdk_config *dcfg,
		   struct bench_result *res) __attribute__((warn_unused_result));

#endif
