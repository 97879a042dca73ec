/*
 * hasp-bench's DPDK transport in a build without DPDK: refuses, so the
 * option exists everywhere and says why it cannot run.
 */
#include "tools/bench_dpdk.h"

#include "hasp/errors.h"

int bench_run_dpdk(const struct bench_config *cfg, const struct bench_dpdk_config *dcfg,
		   struct bench_result *res)
{
	(void)cfg;
	(void)dcfg;
	(void)res;
	return -HASP_ENOTSUP;
}
