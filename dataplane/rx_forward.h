/*
 * Hand-off of UDP datagrams from RX lcores to the raft lcore (lcore 0).
 *
 * With more than one dataplane lcore, every lcore receives on its own queue,
 * but the node core (raft, WAL, state machine) is single-threaded on lcore 0
 * (docs/STYLE.md §1: "Lcores reach the raft thread only through rte_rings of
 * preallocated messages"). An RX lcore copies each datagram for a port
 * handler into a message from one shared rte_mempool and enqueues the
 * pointer on its own single-producer single-consumer rte_ring; lcore 0
 * dequeues, rebuilds the struct dp_datagram and calls the port's handler as
 * if it had received the frame itself, then returns the message.
 *
 * Nothing blocks and nothing allocates after rx_forward_init(): a full ring
 * or an empty pool drops the datagram and counts it (rx_ring_full,
 * rx_forward_no_msg), as a full NIC queue would. Clients retry.
 *
 * Sizing (rx_forward_init()), one term per holder of a message:
 *   msg_count = rx_lcores * ring_size   (each ring full; SPSC rings without
 *                                         RING_F_EXACT_SZ hold size-1)
 *             + rx_lcores                (the one an RX lcore holds between
 *                                         get and enqueue)
 *             + RX_FORWARD_BURST         (lcore 0's dequeued burst)
 * so the pool only runs dry if the accounting is wrong; it is counted anyway.
 *
 * The single-lcore dataplane never creates this: lcore 0 handles its own
 * datagrams zero-copy from the RX mbuf, as before.
 */
#ifndef HASP_DATAPLANE_RX_FORWARD_H
#define HASP_DATAPLANE_RX_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "dataplane/dp_stats.h"
#include "dataplane/eth.h"
#include "dataplane/lcore_rings.h"

#define RX_FORWARD_RING_SIZE 1024u /* per RX lcore, a power of two */
#define RX_FORWARD_BURST 32u       /* messages lcore 0 takes per dequeue */

/* One forwarded datagram: the payload copy and everything the handler and
 * a reply need (addresses and ports host order, the sender's MAC). */
struct rx_forward_msg {
	uint32_t src_ip;
	uint32_t dst_ip;
	uint16_t src_port;
	uint16_t dst_port;
	uint16_t payload_size;
	uint8_t port_index;  /* handler index (classify's port table) */
	uint8_t rx_index;    /* the RX lcore that received it */
	struct eth_addr src_mac;
	uint8_t payload[];   /* payload_max bytes */
};

struct rx_forward {
	struct lcore_rings r; /* ring i: RX lcore i's */
	uint32_t payload_max;
};

/* Creates the pool and one ring per RX lcore (indexes 1..lcore_count-1).
 * EAL must be up. Allocates. Returns 0, -HASP_EINVAL or -HASP_ENOMEM; on
 * error everything acquired is released. */
int rx_forward_init(struct rx_forward *f, uint32_t lcore_count, uint32_t payload_max)
	__attribute__((warn_unused_result));
void rx_forward_deinit(struct rx_forward *f);

/* RX lcore `rx_index` (>= 1): copies the datagram into a message and
 * enqueues it. Returns true when queued; false when dropped (counted in
 * `stats`). Never blocks. */
bool rx_forward_push(struct rx_forward *f, uint32_t rx_index, const struct rx_forward_msg *hdr,
		     const uint8_t *payload, struct dp_stats *stats);

/* Lcore 0: dequeues up to `max` messages from RX lcore `rx_index`'s ring.
 * The caller returns them with rx_forward_put() after use. */
uint32_t rx_forward_take(struct rx_forward *f, uint32_t rx_index, struct rx_forward_msg **msgs,
			 uint32_t max);
void rx_forward_put(struct rx_forward *f, struct rx_forward_msg **msgs, uint32_t count);

/* True when any ring holds a message (lcore 0, before it sleeps). */
bool rx_forward_pending(const struct rx_forward *f);

#endif
