/*
 * Hand-off of datagrams to send from lcore 0 to the other lcores: the
 * reverse of rx_forward.h, on the same pool and rings (lcore_rings.h).
 *
 * The node core runs on lcore 0 alone, and with several lcores the others
 * only receive. Work whose cost is per datagram sent and that needs none
 * of the node's state can go to them instead: haspd hands each watch event
 * (its encoded bytes and the session key that seals it) to one of them,
 * which seals it and sends it from its own TX queue (docs/OPERATIONS.md,
 * "More lcores"). Lcore 0 copies the datagram into a message from one
 * shared rte_mempool and enqueues the pointer on the target lcore's own
 * single-producer single-consumer rte_ring; the target dequeues, calls the
 * dataplane's post handler (dp_set_post_handler()) and returns the message.
 *
 * Nothing blocks and nothing allocates after tx_post_init(): a full ring or
 * an empty pool refuses the datagram and counts it (post_ring_full,
 * post_no_msg), as a full NIC queue would; haspd then sends it from lcore 0.
 *
 * Sizing (tx_post_init()), one term per holder of a message:
 *   msg_count = tx_lcores * ring_size   (each ring full; SPSC rings without
 *                                        RING_F_EXACT_SZ hold size-1)
 *             + 1                        (the one lcore 0 holds between get
 *                                        and enqueue)
 *             + tx_lcores * TX_POST_BURST (each target's dequeued burst)
 */
#ifndef HASP_DATAPLANE_TX_POST_H
#define HASP_DATAPLANE_TX_POST_H

#include <stdbool.h>
#include <stdint.h>

#include "dataplane/dp_stats.h"
#include "dataplane/lcore_rings.h"

/* Per target lcore, a power of two. A release empties the node's watch
 * token bucket at once (watch_burst, 1000 by default) and waiter grants are
 * not rate-limited, so a ring must take a whole bucket while its lcore is
 * not running; 1024 overflowed once in 400,000 events of a 10,000-watcher
 * burst on the shared two cores (docs/PERFORMANCE.md, "Fan-out over cores"). */
#define TX_POST_RING_SIZE 4096u
#define TX_POST_BURST 32u       /* messages a target takes per dequeue */
#define TX_POST_AUX_SIZE 32u    /* bytes the handler reads besides the datagram */

/* One datagram to send (addresses and ports host order) and what the
 * handler needs to finish it: haspd puts the sealing key in `aux`. */
struct tx_post_msg {
	uint32_t dst_ip;
	uint16_t dst_port;
	uint16_t src_port;
	uint16_t payload_size;
	bool has_aux;
	uint8_t aux[TX_POST_AUX_SIZE];
	uint8_t payload[]; /* payload_max bytes; the handler may rewrite them */
};

struct tx_post {
	struct lcore_rings r; /* ring i: what lcore i is to send */
	uint32_t payload_max;
};

/* Creates the pool and one ring per target lcore (indexes 1..lcore_count-1).
 * EAL must be up. Allocates. Returns 0, -HASP_EINVAL or -HASP_ENOMEM; on
 * error everything acquired is released. */
int tx_post_init(struct tx_post *p, uint32_t lcore_count, uint32_t payload_max)
	__attribute__((warn_unused_result));
void tx_post_deinit(struct tx_post *p);

/* Lcore 0: copies the datagram into a message for lcore `target` (>= 1)
 * and enqueues it. Returns true when queued; false when dropped (counted
 * in `stats`, lcore 0's). Never blocks. */
bool tx_post_push(struct tx_post *p, uint32_t target, const struct tx_post_msg *hdr,
		  const uint8_t *payload, struct dp_stats *stats)
	__attribute__((warn_unused_result));

/* Lcore `target`: dequeues up to `max` (<= TX_POST_BURST) messages. The
 * caller returns them with tx_post_put() after use. */
uint32_t tx_post_take(struct tx_post *p, uint32_t target, struct tx_post_msg **msgs, uint32_t max);
void tx_post_put(struct tx_post *p, struct tx_post_msg **msgs, uint32_t count);

/* True when lcore `target`'s ring holds a message (before it sleeps). */
bool tx_post_pending(const struct tx_post *p, uint32_t target);

#endif
