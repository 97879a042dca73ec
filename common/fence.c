/*
 * hasp_fence_admit(): a monotonic high-water mark with compare-and-swap.
 */
#include "hasp/fence.h"

bool hasp_fence_admit(struct hasp_fence *fence, uint64_t token)
{
	uint64_t seen = __atomic_load_n(&fence->highest_token, __ATOMIC_ACQUIRE);

	if (token == 0)
		return false;
	while (token >= seen) {
		if (token == seen)
			return true;
		if (__atomic_compare_exchange_n(&fence->highest_token, &seen, token, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return true;
		/* seen now holds the newer value; re-check against it. */
	}
	return false;
}

uint64_t hasp_fence_highest(const struct hasp_fence *fence)
{
	return __atomic_load_n(&fence->highest_token, __ATOMIC_ACQUIRE);
}
