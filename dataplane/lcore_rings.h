/*
 * What both hand-offs between lcores are made of (rx_forward.h: RX lcores
 * to lcore 0; tx_post.h: lcore 0 to the sending lcores): one rte_mempool
 * of fixed-size messages and one single-producer single-consumer rte_ring
 * of message pointers per lcore other than 0, the ring of lcore i being
 * the one lcore i fills (rx_forward) or empties (tx_post).
 *
 * The pool has no per-lcore cache: gets happen on one side and puts on the
 * other, so a cache would only park messages on the wrong side and add a
 * term to the caller's sizing sum. Everything is allocated in
 * lcore_rings_init(); afterwards nothing blocks and nothing allocates.
 */
#ifndef HASP_DATAPLANE_LCORE_RINGS_H
#define HASP_DATAPLANE_LCORE_RINGS_H

#include <stdbool.h>
#include <stdint.h>

#define LCORE_RINGS_BURST_MAX 32u /* messages per take or put */

struct rte_mempool;
struct rte_ring;

struct lcore_rings {
	struct rte_mempool *pool;
	struct rte_ring **rings; /* by lcore index; [0] unused (NULL) */
	uint32_t lcore_count;    /* rings has this many slots */
};

/* Creates a pool of `msg_count` messages of `msg_size` bytes named
 * "<name>_pool" and rings "<name>_<i>" of `ring_size` (a power of two) for
 * lcores 1..lcore_count-1. EAL must be up. Allocates. Returns 0 or
 * -HASP_ENOMEM; on error everything acquired is released. */
int lcore_rings_init(struct lcore_rings *r, const char *name, uint32_t lcore_count, uint32_t msg_size,
		     uint32_t ring_size, uint32_t msg_count) __attribute__((warn_unused_result));
/* Returns what the rings still hold to the pool and frees everything. */
void lcore_rings_deinit(struct lcore_rings *r);

/* A free message, or NULL when the pool is empty. */
void *lcore_rings_get(struct lcore_rings *r);
/* Enqueues `m` on lcore `index`'s ring (>= 1). False when the ring is full:
 * `m` stays the caller's (lcore_rings_put() returns it). */
bool lcore_rings_enqueue(struct lcore_rings *r, uint32_t index, void *m)
	__attribute__((warn_unused_result));
/* Dequeues up to `max` (<= LCORE_RINGS_BURST_MAX) messages from lcore
 * `index`'s ring (0: none). Return them with lcore_rings_put() after use. */
uint32_t lcore_rings_take(struct lcore_rings *r, uint32_t index, void **msgs, uint32_t max);
void lcore_rings_put(struct lcore_rings *r, void **msgs, uint32_t count);
/* True when lcore `index`'s ring (>= 1) holds a message. */
bool lcore_rings_pending(const struct lcore_rings *r, uint32_t index);

#endif
