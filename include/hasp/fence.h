/*
 * The fenced-resource helper: enforce fencing tokens where the resource lives.
 *
 * A lock alone cannot stop a holder that paused past its lease (a GC pause, a
 * stopped VM) from writing after another client was granted the lock. The
 * fix (Kleppmann's fencing argument, Chubby's sequencers) is for the
 * resource to remember the highest token it has accepted and to refuse any
 * operation carrying a lower one. hasp's tokens are strictly increasing per
 * lock across grants, leader changes and restarts, so this check is exact.
 *
 * One struct hasp_fence guards one resource (one lock name). It is a single
 * 64-bit word updated with compare-and-swap, so hasp_fence_admit() may be
 * called from several threads at once without a lock.
 */
#ifndef HASP_FENCE_H
#define HASP_FENCE_H

#include <stdbool.h>
#include <stdint.h>

struct hasp_fence {
	uint64_t highest_token; /* 0: nothing admitted yet; read atomically */
};

static inline void hasp_fence_init(struct hasp_fence *fence)
{
	__atomic_store_n(&fence->highest_token, 0, __ATOMIC_RELAXED);
}

/*
 * Admits an operation carrying `token` iff token >= the highest token admitted
 * so far, and raises the high-water mark to `token`. Equal tokens are
 * admitted: the current holder may issue many operations. Token 0 is never a
 * valid grant and is always refused.
 */
bool hasp_fence_admit(struct hasp_fence *fence, uint64_t token) __attribute__((warn_unused_result));

/* The highest token admitted so far (0 if none). */
uint64_t hasp_fence_highest(const struct hasp_fence *fence);

#endif
