/*
 * The run-to-completion loop of one dataplane lcore (DPDK l2fwd/l3fwd
 * shape): RX burst, classify each frame, hand UDP datagrams to the port's
 * handler, answer ARP and ping in place, run the node's work hook, flush the
 * TX buffer, and idle adaptively when nothing happened (idle.h).
 *
 * With dp_config.rx_forward and several lcores, lcores 1.. copy UDP
 * datagrams onto their ring to lcore 0 instead of calling the handler, and
 * lcore 0 drains the rings right after its own RX burst, before the work
 * hook (rx_forward.h; the wake protocol is at lcore_sleep() in the .c).
 *
 * TX buffering: frames collect in lc->tx and go out in one burst when the
 * buffer is full, at the end of an iteration whose RX burst was not full
 * (nothing more is waiting, so holding frames only adds latency), or when
 * the drain deadline (DP_TX_DRAIN_NS after the oldest buffered frame)
 * passes, and always before sleeping.
 */
#ifndef HASP_DATAPLANE_LCORE_LOOP_H
#define HASP_DATAPLANE_LCORE_LOOP_H

#include <stdint.h>

#include "dataplane/dp.h"

#define DP_TX_DRAIN_NS 100000ull /* 100 us, as in l2fwd */

/* The lcore entry point (rte_lcore_function_t): `arg` is a struct dp_lcore.
 * Returns 0 after dp_stop(). */
int lcore_loop_run(void *arg);

/* Queues `m` for transmission on this lcore's queue (flushing if full). */
void lcore_loop_tx(struct dp_lcore *lc, struct rte_mbuf *m);

/* Sends everything queued; frames the port will not take after a few tries
 * are freed and counted in tx_ring_full. */
void lcore_loop_flush(struct dp_lcore *lc);

/* ARP cache ops (arp_cache.h) bound to an lcore: `arg` is the dp_lcore. */
void lcore_loop_arp_send_request(void *arg, uint32_t ip);
void lcore_loop_arp_release(void *arg, void *item, const struct eth_addr *mac);

/* Creates lcore `index`'s inbox of (ip, mac) pairs learned by the other
 * lcores (ARP replies reach only one queue). NULL when out of memory. */
struct rte_ring *lcore_loop_arp_inbox_create(uint32_t index, uint32_t count);

/* Sends a gratuitous ARP announcing our (ip, mac). */
void lcore_loop_announce(struct dp_lcore *lc);

#endif
