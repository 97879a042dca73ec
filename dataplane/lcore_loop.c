/*
 * One dataplane lcore's loop (see lcore_loop.h). Nothing here allocates from
 * the heap: mbufs come from the port's pool, everything else was sized in
 * dp_init().
 */
#include "dataplane/lcore_loop.h"

#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_ring_elem.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/clock.h"
#include "dataplane/arp.h"
#include "dataplane/netbytes.h"

/* An (ip, mac) pair learned on one lcore, for the others (ARP replies reach
 * only queue 0 under RSS, but every lcore's cache needs them). */
struct lcore_arp_note {
	uint32_t ip;
	uint8_t mac[ETH_ADDR_SIZE];
	uint8_t create;
	uint8_t pad;
};
_Static_assert(sizeof(struct lcore_arp_note) % 4 == 0, "rte_ring elements are 4-byte multiples");

static uint64_t lcore_tx_deadline_ns(const struct dp_lcore *lc);

struct rte_ring *lcore_loop_arp_inbox_create(uint32_t index, uint32_t count)
{
	char name[RTE_RING_NAMESIZE];
	snprintf(name, sizeof(name), "hasp_arp_%u", index);
	/* Any lcore may produce, only the owner consumes. */
	return rte_ring_create_elem(name, sizeof(struct lcore_arp_note), count,
				    (int)rte_socket_id(), RING_F_SC_DEQ);
}

void lcore_loop_flush(struct dp_lcore *lc)
{
	const struct port *p = &lc->dp->port;
	uint16_t sent = 0;
	uint64_t bytes = 0;

	if (lc->tx_count == 0)
		return;
	/* Count bytes before the burst: the PMD frees what it sent. */
	for (uint16_t i = 0; i < lc->tx_count; i++)
		bytes += rte_pktmbuf_pkt_len(lc->tx[i]);
	for (int tries = 0; tries < 4 && sent < lc->tx_count; tries++)
		sent += rte_eth_tx_burst(p->port_id, (uint16_t)lc->index, lc->tx + sent,
					 (uint16_t)(lc->tx_count - sent));
	for (uint16_t i = sent; i < lc->tx_count; i++) {
		bytes -= rte_pktmbuf_pkt_len(lc->tx[i]);
		rte_pktmbuf_free(lc->tx[i]);
		lc->stats.tx_ring_full++;
	}
	lc->stats.tx_frames += sent;
	lc->stats.tx_bytes += bytes;
	lc->tx_count = 0;
}

void lcore_loop_tx(struct dp_lcore *lc, struct rte_mbuf *m)
{
	HASP_ASSERT(lc != NULL && m != NULL);
	if (lc->tx_count == DP_TX_BUFFER)
		lcore_loop_flush(lc);
	if (lc->tx_count == 0)
		lc->tx_first_ns = lc->now_ns;
	lc->tx[lc->tx_count++] = m;
	HASP_ASSERT(lc->tx_count <= DP_TX_BUFFER);
}

static uint64_t lcore_tx_deadline_ns(const struct dp_lcore *lc)
{
	return lc->tx_count > 0 ? lc->tx_first_ns + DP_TX_DRAIN_NS : UINT64_MAX;
}

static void lcore_send_arp(struct dp_lcore *lc, const struct arp_view *arp)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(lc->dp->port.pool);
	if (m == NULL) {
		lc->stats.tx_no_mbuf++;
		return;
	}
	uint8_t *frame = (uint8_t *)rte_pktmbuf_append(m, ETH_FRAME_SIZE_MIN);
	HASP_ASSERT(frame != NULL); /* data room is a whole MTU */
	arp_write_frame(frame, &eth_addr_broadcast, arp);
	lc->stats.tx_arp_request++;
	lcore_loop_tx(lc, m);
}

void lcore_loop_arp_send_request(void *arg, uint32_t ip)
{
	struct dp_lcore *lc = arg;
	struct arp_view arp;
	arp_make_request(&arp, &lc->dp->cfg.mac, lc->dp->cfg.ip, ip);
	lcore_send_arp(lc, &arp);
}

void lcore_loop_announce(struct dp_lcore *lc)
{
	struct arp_view arp;
	arp_make_announce(&arp, &lc->dp->cfg.mac, lc->dp->cfg.ip);
	lcore_send_arp(lc, &arp);
}

void lcore_loop_arp_release(void *arg, void *item, const struct eth_addr *mac)
{
	struct dp_lcore *lc = arg;
	struct rte_mbuf *m = item;

	if (mac == NULL) {
		lc->stats.tx_arp_dropped++;
		rte_pktmbuf_free(m);
		return;
	}
	/* The parked frame was built with a zero destination MAC; the UDP
	 * checksum does not cover it, so only the first 6 bytes change. */
	memcpy(rte_pktmbuf_mtod(m, uint8_t *), mac->bytes, ETH_ADDR_SIZE);
	lcore_loop_tx(lc, m);
}

static void lcore_arp_learned(struct dp_lcore *lc, const struct classify_result *res)
{
	struct dp *dp = lc->dp;

	arp_cache_update(&lc->arp, res->arp_ip, &res->arp_mac, lc->now_ns, res->arp_create);
	if (dp->lcore_count == 1)
		return;
	struct lcore_arp_note note = { .ip = res->arp_ip, .create = res->arp_create };
	memcpy(note.mac, res->arp_mac.bytes, ETH_ADDR_SIZE);
	for (uint32_t i = 0; i < dp->lcore_count; i++) {
		if (i == lc->index)
			continue;
		/* A full inbox loses a refresh; that lcore re-requests. */
		(void)rte_ring_enqueue_elem(dp->lcores[i].arp_inbox, &note, sizeof(note));
	}
}

static void lcore_arp_inbox_drain(struct dp_lcore *lc)
{
	struct lcore_arp_note note;

	if (lc->arp_inbox == NULL)
		return;
	while (rte_ring_dequeue_elem(lc->arp_inbox, &note, sizeof(note)) == 0) {
		struct eth_addr mac;
		memcpy(mac.bytes, note.mac, ETH_ADDR_SIZE);
		arp_cache_update(&lc->arp, note.ip, &mac, lc->now_ns, note.create != 0);
	}
}

static enum classify_csum lcore_csum_hint(uint64_t flags, uint64_t mask, uint64_t good,
					  uint64_t bad)
{
	uint64_t v = flags & mask;
	if (v == good)
		return CLASSIFY_CSUM_GOOD;
	if (v == bad)
		return CLASSIFY_CSUM_BAD;
	return CLASSIFY_CSUM_UNKNOWN; /* unknown, or "none" (not checked) */
}

static void lcore_handle(struct dp_lcore *lc, struct rte_mbuf *m)
{
	struct dp *dp = lc->dp;
	struct classify_hints hints = { CLASSIFY_CSUM_UNKNOWN, CLASSIFY_CSUM_UNKNOWN };
	struct classify_result res;

	if (m->nb_segs != 1) {
		lc->stats.rx_frames++;
		lc->stats.rx_bytes += rte_pktmbuf_pkt_len(m);
		lc->stats.rx_multiseg++;
		rte_pktmbuf_free(m);
		return;
	}
	if (dp->port.rx_csum) {
		hints.ip_csum = lcore_csum_hint(m->ol_flags, RTE_MBUF_F_RX_IP_CKSUM_MASK,
						RTE_MBUF_F_RX_IP_CKSUM_GOOD, RTE_MBUF_F_RX_IP_CKSUM_BAD);
		hints.l4_csum = lcore_csum_hint(m->ol_flags, RTE_MBUF_F_RX_L4_CKSUM_MASK,
						RTE_MBUF_F_RX_L4_CKSUM_GOOD, RTE_MBUF_F_RX_L4_CKSUM_BAD);
	}
	uint8_t *frame = rte_pktmbuf_mtod(m, uint8_t *);
	classify_frame(&dp->classify, frame, rte_pktmbuf_data_len(m), &hints, &res, &lc->stats);
	if (res.arp_learn)
		lcore_arp_learned(lc, &res);

	switch (res.verdict) {
	case CLASSIFY_REPLY:
		/* Rewritten in place: trim to the reply, clear RX offload
		 * flags so the PMD does not mistake them for TX requests. */
		rte_pktmbuf_trim(m, (uint16_t)(rte_pktmbuf_data_len(m) - res.reply_size));
		m->ol_flags = 0;
		if (get_be16(frame + 12) == ETH_TYPE_ARP)
			lc->stats.tx_arp_reply++;
		else
			lc->stats.tx_icmp_reply++;
		lcore_loop_tx(lc, m);
		return;
	case CLASSIFY_UDP: {
		if (dp->fwd_on && lc->index != 0) {
			/* An RX lcore: copy to lcore 0, which runs the handler. */
			const struct rx_forward_msg hdr = {
				.src_ip = res.udp.src_ip,
				.dst_ip = res.udp.dst_ip,
				.src_port = res.udp.src_port,
				.dst_port = res.udp.dst_port,
				.payload_size = res.udp.payload_size,
				.port_index = (uint8_t)res.udp.port_index,
				.src_mac = res.udp.src_mac,
			};
			if (rx_forward_push(&dp->fwd, lc->index, &hdr, res.udp.payload, &lc->stats))
				lc->fwd_pushed = true;
			rte_pktmbuf_free(m);
			return;
		}
		const struct dp_port_handler *h = &dp->handlers[res.udp.port_index];
		struct dp_datagram dg = {
			.src_ip = res.udp.src_ip,
			.src_port = res.udp.src_port,
			.dst_ip = res.udp.dst_ip,
			.dst_port = res.udp.dst_port,
			.src_mac = res.udp.src_mac,
			.payload = res.udp.payload,
			.payload_size = res.udp.payload_size,
		};
		h->fn(lc, &dg, h->arg);
		rte_pktmbuf_free(m);
		return;
	}
	case CLASSIFY_DROP:
	case CLASSIFY_CONSUMED:
		rte_pktmbuf_free(m);
		return;
	}
	HASP_UNREACHABLE();
}

/* Lcore 0: hands every forwarded datagram to its port's handler, exactly as
 * if it had been received here (the reply leaves from lcore 0's queue; the
 * datagram carries the sender's MAC for dp_udp_reply()). Takes at most one
 * ring's worth per RX lcore per iteration, so its own queue and the work
 * hook are not starved. Returns how many it handled. */
static uint32_t lcore_fwd_drain(struct dp_lcore *lc)
{
	struct dp *dp = lc->dp;
	struct rx_forward_msg *msgs[RX_FORWARD_BURST];
	uint32_t total = 0;

	HASP_ASSERT(lc->index == 0 && dp->fwd_on);
	for (uint32_t i = 1; i < dp->lcore_count; i++) {
		for (uint32_t taken = 0; taken < RX_FORWARD_RING_SIZE;) {
			uint32_t n = rx_forward_take(&dp->fwd, i, msgs, RX_FORWARD_BURST);
			if (n == 0)
				break;
			for (uint32_t k = 0; k < n; k++) {
				const struct rx_forward_msg *m = msgs[k];
				HASP_ASSERT(m->rx_index == i);
				HASP_ASSERT(m->port_index < dp->classify.port_count);
				const struct dp_port_handler *h = &dp->handlers[m->port_index];
				const struct dp_datagram dg = {
					.src_ip = m->src_ip,
					.src_port = m->src_port,
					.dst_ip = m->dst_ip,
					.dst_port = m->dst_port,
					.src_mac = m->src_mac,
					.payload = m->payload,
					.payload_size = m->payload_size,
				};
				h->fn(lc, &dg, h->arg);
			}
			rx_forward_put(&dp->fwd, msgs, n);
			taken += n;
			total += n;
		}
	}
	lc->stats.fwd_handled += total;
	return total;
}

/* An RX lcore after a burst that forwarded something: wake lcore 0 if it
 * sleeps (see lcore_sleep() for why no wake is lost). */
static void lcore_fwd_notify(struct dp_lcore *lc)
{
	struct dp_lcore *raft = &lc->dp->lcores[0];

	lc->fwd_pushed = false;
	/* Orders our ring enqueue before the load of `asleep` (pairs with the
	 * fence in lcore_sleep()). */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&raft->asleep, memory_order_relaxed)) {
		idle_wake(&raft->idle);
		lc->stats.fwd_wakes++;
	}
}

/* Lcore 0 after posting: wake every target it posted to that sleeps (the
 * producer's half of lcore_sleep()'s hand-shake, as in lcore_fwd_notify()). */
static void lcore_post_notify(struct dp_lcore *lc)
{
	struct dp *dp = lc->dp;
	uint64_t targets = lc->post_targets;

	HASP_ASSERT(lc->index == 0 && dp->post_on);
	lc->post_targets = 0;
	/* Orders our ring enqueues before the loads of `asleep` (pairs with
	 * the fence in lcore_sleep()). */
	atomic_thread_fence(memory_order_seq_cst);
	for (uint32_t i = 1; i < dp->lcore_count; i++) {
		struct dp_lcore *t = &dp->lcores[i];
		if ((targets & (1ull << i)) != 0 && atomic_load_explicit(&t->asleep, memory_order_relaxed)) {
			idle_wake(&t->idle);
			lc->stats.post_wakes++;
		}
	}
}

/* Lcores 1..: sends what lcore 0 posted, at most one ring's worth per
 * iteration so that this lcore's own queue is not starved. Returns how
 * many it handled. */
static uint32_t lcore_post_drain(struct dp_lcore *lc)
{
	struct dp *dp = lc->dp;
	struct tx_post_msg *msgs[TX_POST_BURST];
	uint32_t total = 0;

	HASP_ASSERT(lc->index != 0 && dp->post_on);
	while (total < TX_POST_RING_SIZE) {
		uint32_t n = tx_post_take(&dp->post, lc->index, msgs, TX_POST_BURST);
		if (n == 0)
			break;
		for (uint32_t k = 0; k < n; k++)
			dp->post_fn(lc, msgs[k], dp->post_arg);
		tx_post_put(&dp->post, msgs, n);
		total += n;
	}
	lc->stats.post_handled += total;
	return total;
}

/* Whether other lcores hand this one messages (lcore 0: rx_forward's
 * rings; lcores 1..: tx_post's), and whether one is waiting now. */
static bool lcore_gets_handoffs(const struct dp_lcore *lc)
{
	return lc->index == 0 ? lc->dp->fwd_on : lc->dp->post_on;
}

static bool lcore_handoff_pending(const struct dp_lcore *lc)
{
	const struct dp *dp = lc->dp;
	return lc->index == 0 ? rx_forward_pending(&dp->fwd) : tx_post_pending(&dp->post, lc->index);
}

/* Sleeps until a frame, a node fd, a wake or `deadline`.
 *
 * An lcore that other lcores hand messages to (lcore 0 from the RX lcores,
 * a sending lcore from lcore 0) must not sleep past one just enqueued. The
 * hand-shake is Dekker's: the sleeper stores asleep=true, fences, then
 * checks its rings; the producer enqueues, fences, then loads `asleep`.
 * With both fences sequentially consistent, at least one side sees the
 * other's store: either the sleeper finds the message and does not sleep,
 * or the producer sees asleep=true and writes the sleeper's wake eventfd.
 * That eventfd is level-triggered and polled by every wait, so a write
 * that lands before ppoll() starts still ends it at once (it costs one
 * spurious wake at worst, never a lost one). Producers write the eventfd
 * only while the consumer sleeps, so a busy one costs them no syscall. */
static void lcore_sleep(struct dp_lcore *lc, uint64_t deadline)
{
	if (!lcore_gets_handoffs(lc)) {
		idle_wait(&lc->idle, clock_monotonic_ns(), deadline, &lc->stats);
		return;
	}
	atomic_store_explicit(&lc->asleep, true, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (!lcore_handoff_pending(lc))
		idle_wait(&lc->idle, clock_monotonic_ns(), deadline, &lc->stats);
	atomic_store_explicit(&lc->asleep, false, memory_order_relaxed);
}

/* One RX burst: returns how many frames it handled. */
static uint16_t lcore_rx(struct dp_lcore *lc)
{
	struct rte_mbuf *burst[DP_RX_BURST];
	uint16_t n = rte_eth_rx_burst(lc->dp->port.port_id, (uint16_t)lc->index, burst, DP_RX_BURST);

	for (uint16_t i = 0; i < n; i++) {
		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(burst[i + 1], void *));
		lcore_handle(lc, burst[i]);
	}
	return n;
}

static void lcore_idle_setup(struct dp_lcore *lc)
{
	struct dp *dp = lc->dp;

	/* The idle state (and its wake eventfd) was created by dp_init(), so
	 * dp_stop() can wake this lcore at any time; here it learns its fds. */
	if (dp->cfg.idle != IDLE_HYBRID) {
		idle_set_mode(&lc->idle, dp->cfg.idle);
		return;
	}
	/* Port fds cannot be told apart per queue: every lcore waits on all
	 * of them (a frame for another queue costs a spurious wake). */
	int found = idle_add_port_fds(&lc->idle);
	if (lc->index == 0) {
		for (uint32_t i = 0; i < dp->wake_fd_count; i++) {
			/* dp_add_wake_fd() bounds the count, but port fds share
			 * the table; a node fd that does not fit is still served
			 * by the work hook, its wakeups come with the timer. */
			if (idle_add_fd(&lc->idle, dp->wake_fds[i]) != 0)
				break;
		}
	}
	/* net_memif or a NIC: no fd reports frames; sleep instead. */
	idle_set_mode(&lc->idle, found > 0 ? IDLE_HYBRID : IDLE_SLEEP);
}

int lcore_loop_run(void *arg)
{
	struct dp_lcore *lc = arg;
	struct dp *dp = lc->dp;

	HASP_ASSERT(lc != NULL && dp != NULL);
	HASP_ASSERT(lc->index < dp->lcore_count);
	lc->tid = (pid_t)syscall(SYS_gettid);
	lcore_idle_setup(lc);
	lc->now_ns = clock_monotonic_ns();
	lc->announce_ns = lc->now_ns;
	lc->announce_count = lc->index == 0 ? 0 : DP_ANNOUNCE_COUNT;
	/* From here on this thread must not allocate (docs/STYLE.md §6). */
	hasp_alloc_forbid_thread(true);

	while (!atomic_load_explicit(&dp->stopping, memory_order_relaxed)) {
		lc->now_ns = clock_monotonic_ns();
		lc->stats.loop_iterations++;
		lcore_arp_inbox_drain(lc);
		uint16_t n = lcore_rx(lc);
		bool did_work = n > 0;
		if (lc->fwd_pushed)
			lcore_fwd_notify(lc);
		if (dp->fwd_on && lc->index == 0)
			did_work |= lcore_fwd_drain(lc) > 0;
		if (dp->post_on && lc->index != 0)
			did_work |= lcore_post_drain(lc) > 0;
		arp_cache_tick(&lc->arp, lc->now_ns);
		uint64_t deadline = arp_cache_next_deadline(&lc->arp);
		if (lc->announce_count < DP_ANNOUNCE_COUNT) {
			/* Neighbours learn our MAC now, not on first use. */
			if (lc->now_ns >= lc->announce_ns) {
				lcore_loop_announce(lc);
				lc->announce_ns = lc->now_ns + (1000000000ull << lc->announce_count);
				lc->announce_count++;
				did_work = true;
			}
			if (lc->announce_count < DP_ANNOUNCE_COUNT && lc->announce_ns < deadline)
				deadline = lc->announce_ns;
		}
		if (dp->work != NULL)
			did_work |= dp->work(lc, lc->now_ns, &deadline, dp->work_arg);
		/* Handlers and the work hook post; wake the targets now. */
		if (lc->post_targets != 0)
			lcore_post_notify(lc);
		if (n < DP_RX_BURST || lc->now_ns >= lcore_tx_deadline_ns(lc))
			lcore_loop_flush(lc);
		if (!idle_note(&lc->idle, did_work))
			continue;
		/* Nothing for spin_max iterations: send what we hold, then
		 * sleep until a frame, a node fd, a wake or the deadline. The
		 * wait is level-triggered, so a frame that arrived since the
		 * last burst ends it at once. */
		lcore_loop_flush(lc);
		if (atomic_load_explicit(&dp->stopping, memory_order_relaxed))
			break;
		lcore_sleep(lc, deadline);
	}
	lcore_loop_flush(lc);
	hasp_alloc_forbid_thread(false);
	return 0;
}
