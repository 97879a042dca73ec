/*
 * The dataplane's node-facing API (see dp.h): EAL and port bring-up, the
 * per-lcore state sized once, UDP port registration, and the send paths
 * that turn a payload into a frame on an lcore's TX buffer.
 */
#include "dataplane/dp.h"

#include <string.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/limits.h"
#include "common/log.h"
#include "dataplane/ipv4.h"
#include "dataplane/lcore_loop.h"
#include "dataplane/udp.h"
#include "hasp/errors.h"

LOG_TOPIC_DECLARE(dataplane);

#define DP_ARP_INBOX_SIZE 256u

static void dp_config_defaults(struct dp_config *cfg)
{
	if (cfg->mtu == 0)
		cfg->mtu = HASP_MTU_DEFAULT;
	if (cfg->rxd_count == 0)
		cfg->rxd_count = 512;
	if (cfg->txd_count == 0)
		cfg->txd_count = 512;
	if (cfg->arp_entries == 0)
		cfg->arp_entries = 256;
	if (cfg->arp_pending == 0)
		cfg->arp_pending = 4;
	if (cfg->idle_spin == 0)
		cfg->idle_spin = IDLE_SPIN_DEFAULT;
}

static int dp_lcores_init(struct dp *dp)
{
	const struct arp_cache_config arp_cfg = {
		.entry_count = dp->cfg.arp_entries,
		.pending_max = dp->cfg.arp_pending,
		.reachable_ns = 60ull * 1000000000u, /* Linux-like base reachable time */
		.retry_ns = 1000000000u,
		.request_max = 3,
	};
	uint32_t lcore_id, index = 0;

	dp->lcores = hasp_alloc_aligned(64, sizeof(*dp->lcores) * dp->lcore_count);
	if (dp->lcores == NULL)
		return -HASP_ENOMEM;
	memset(dp->lcores, 0, sizeof(*dp->lcores) * dp->lcore_count);
	for (uint32_t i = 0; i < dp->lcore_count; i++)
		dp->lcores[i].idle.wake_fd = -1; /* deinit must not close fd 0 */
	/* Index 0 is the main lcore (the thread that calls dp_run); workers
	 * follow in EAL order. The index is also the queue id. */
	dp->lcores[0].lcore_id = rte_get_main_lcore();
	RTE_LCORE_FOREACH_WORKER(lcore_id) {
		HASP_ASSERT(index + 1 < dp->lcore_count);
		dp->lcores[++index].lcore_id = lcore_id;
	}
	HASP_ASSERT(index + 1 == dp->lcore_count);
	if (dp->cfg.rx_forward && dp->lcore_count > 1) {
		/* A datagram is at most the MTU less the IPv4 and UDP headers. */
		int rc = rx_forward_init(&dp->fwd, dp->lcore_count, dp->cfg.mtu - 28u);
		if (rc != 0)
			return rc;
		dp->fwd_on = true;
	}
	for (uint32_t i = 0; i < dp->lcore_count; i++) {
		struct dp_lcore *lc = &dp->lcores[i];
		lc->dp = dp;
		lc->index = i;
		const struct arp_cache_ops ops = {
			lcore_loop_arp_send_request, lcore_loop_arp_release, lc,
		};
		int rc = arp_cache_init(&lc->arp, &arp_cfg, &ops);
		if (rc != 0)
			return rc;
		/* Created here, not on the lcore, so that dp_stop() can wake
		 * an lcore that has not started yet. */
		rc = idle_init(&lc->idle, dp->cfg.idle, dp->cfg.idle_spin);
		if (rc != 0)
			return rc;
		atomic_init(&lc->asleep, false);
		if (dp->lcore_count > 1) {
			lc->arp_inbox = lcore_loop_arp_inbox_create(i, DP_ARP_INBOX_SIZE);
			if (lc->arp_inbox == NULL)
				return -HASP_ENOMEM;
		}
	}
	return 0;
}

static void dp_lcores_deinit(struct dp *dp)
{
	if (dp->lcores == NULL)
		return;
	for (uint32_t i = 0; i < dp->lcore_count; i++) {
		struct dp_lcore *lc = &dp->lcores[i];
		if (lc->arp.entries != NULL)
			arp_cache_deinit(&lc->arp); /* frees parked mbufs */
		rte_ring_free(lc->arp_inbox);
		idle_deinit(&lc->idle);
		for (uint16_t t = 0; t < lc->tx_count; t++)
			rte_pktmbuf_free(lc->tx[t]);
	}
	if (dp->fwd_on)
		rx_forward_deinit(&dp->fwd);
	dp->fwd_on = false;
	if (dp->post_on)
		tx_post_deinit(&dp->post);
	dp->post_on = false;
	hasp_free(dp->lcores);
	dp->lcores = NULL;
}

int dp_init(struct dp *dp, const struct dp_config *cfg)
{
	int rc;

	HASP_ASSERT(dp != NULL && cfg != NULL);
	HASP_ASSERT(cfg->eal_argc >= 1 && cfg->eal_argv != NULL);
	memset(dp, 0, sizeof(*dp));
	dp->cfg = *cfg;
	dp_config_defaults(&dp->cfg);
	if (cfg->ip == 0 || cfg->prefix_len == 0 || cfg->prefix_len > 32 ||
	    eth_addr_is_multicast(&cfg->mac) || eth_addr_is_zero(&cfg->mac))
		return -HASP_EINVAL;
	dp->subnet_mask = cfg->prefix_len == 32 ? 0xffffffffu : ~(0xffffffffu >> cfg->prefix_len);
	if (cfg->gateway != 0 && (cfg->gateway & dp->subnet_mask) != (cfg->ip & dp->subnet_mask))
		return -HASP_EINVAL; /* the gateway must be on-link */
	dp->classify.mac = cfg->mac;
	dp->classify.ip = cfg->ip;
	atomic_init(&dp->stopping, false);

	rc = idle_signals_prepare();
	if (rc != 0)
		return rc;
	if (rte_eal_init(dp->cfg.eal_argc, dp->cfg.eal_argv) < 0) {
		LOG_ERROR(dataplane, "rte_eal_init failed: %s", rte_strerror(rte_errno));
		return -HASP_ESYS;
	}
	dp->eal_up = true;
	dp->lcore_count = rte_lcore_count();
	if (dp->lcore_count > DP_LCORES_MAX) {
		rc = -HASP_ECONFIG;
		goto fail;
	}
	/* Mbufs an lcore holds outside the rings, per queue: */
	uint32_t extra = DP_RX_BURST                        /* the burst in hand */
		       + DP_TX_BUFFER                       /* the TX buffer */
		       + dp->cfg.arp_entries / 4 * 3 * dp->cfg.arp_pending; /* parked on ARP */
	const struct port_config pcfg = {
		.name = cfg->port_name,
		.mac = cfg->mac,
		.queue_count = (uint16_t)dp->lcore_count,
		.rxd_count = dp->cfg.rxd_count,
		.txd_count = dp->cfg.txd_count,
		.mtu = dp->cfg.mtu,
		.extra_mbufs = extra,
	};
	rc = port_open(&dp->port, &pcfg);
	if (rc != 0)
		goto fail;
	rc = dp_lcores_init(dp);
	if (rc != 0)
		goto fail;
	return 0;
fail:
	dp_deinit(dp);
	return rc;
}

int dp_udp_register(struct dp *dp, uint16_t udp_port, dp_udp_handler_fn *fn, void *arg)
{
	HASP_ASSERT(dp != NULL && fn != NULL);
	HASP_ASSERT(!dp->running);
	for (uint32_t i = 0; i < dp->classify.port_count; i++)
		if (dp->classify.ports[i] == udp_port)
			return -HASP_EEXIST;
	if (dp->classify.port_count == CLASSIFY_PORTS_MAX)
		return -HASP_EFULL;
	dp->handlers[dp->classify.port_count] = (struct dp_port_handler){ fn, arg };
	dp->classify.ports[dp->classify.port_count++] = udp_port;
	return 0;
}

void dp_set_work(struct dp *dp, dp_work_fn *fn, void *arg)
{
	HASP_ASSERT(dp != NULL && !dp->running);
	dp->work = fn;
	dp->work_arg = arg;
}

int dp_set_post_handler(struct dp *dp, dp_post_fn *fn, void *arg)
{
	HASP_ASSERT(dp != NULL && dp->lcores != NULL && !dp->running && !dp->post_on);
	HASP_ASSERT(fn != NULL);
	/* lcore 0 keeps the targets it posted to in one 64-bit mask. */
	if (dp->lcore_count < 2 || dp->lcore_count > 64)
		return -HASP_EINVAL;
	int rc = tx_post_init(&dp->post, dp->lcore_count, dp->cfg.mtu - 28u);
	if (rc != 0)
		return rc;
	dp->post_fn = fn;
	dp->post_arg = arg;
	dp->post_on = true;
	return 0;
}

bool dp_post(struct dp_lcore *lc, uint32_t target, const struct tx_post_msg *hdr, const void *payload)
{
	struct dp *dp = lc->dp;

	HASP_ASSERT(lc->index == 0 && dp->post_on);
	HASP_ASSERT(target >= 1 && target < dp->lcore_count);
	if (!tx_post_push(&dp->post, target, hdr, payload, &lc->stats))
		return false;
	lc->post_targets |= 1ull << target;
	return true;
}

int dp_add_wake_fd(struct dp *dp, int fd)
{
	HASP_ASSERT(dp != NULL && !dp->running);
	HASP_ASSERT(fd >= 0);
	if (dp->wake_fd_count == IDLE_FDS_MAX)
		return -HASP_EFULL;
	dp->wake_fds[dp->wake_fd_count++] = fd;
	return 0;
}

int dp_run(struct dp *dp)
{
	uint32_t lcore_id;

	HASP_ASSERT(dp != NULL && dp->lcores != NULL);
	HASP_ASSERT(rte_lcore_id() == rte_get_main_lcore());
	dp->running = true;
	RTE_LCORE_FOREACH_WORKER(lcore_id) {
		for (uint32_t i = 1; i < dp->lcore_count; i++) {
			if (dp->lcores[i].lcore_id != lcore_id)
				continue;
			if (rte_eal_remote_launch(lcore_loop_run, &dp->lcores[i], lcore_id) != 0) {
				dp_stop(dp);
				rte_eal_mp_wait_lcore();
				dp->running = false;
				return -HASP_ESYS;
			}
		}
	}
	(void)lcore_loop_run(&dp->lcores[0]);
	rte_eal_mp_wait_lcore();
	dp->running = false;
	return 0;
}

void dp_stop(struct dp *dp)
{
	atomic_store(&dp->stopping, true);
	if (dp->lcores == NULL)
		return;
	for (uint32_t i = 0; i < dp->lcore_count; i++)
		idle_wake(&dp->lcores[i].idle);
}

void dp_deinit(struct dp *dp)
{
	HASP_ASSERT(dp != NULL && !dp->running);
	dp_lcores_deinit(dp);
	port_close(&dp->port);
	if (dp->eal_up)
		(void)rte_eal_cleanup();
	dp->eal_up = false;
}

void dp_stats_sum(const struct dp *dp, struct dp_stats *total)
{
	HASP_ASSERT(dp != NULL && total != NULL);
	memset(total, 0, sizeof(*total));
	for (uint32_t i = 0; i < dp->lcore_count && dp->lcores != NULL; i++)
		dp_stats_add(total, &dp->lcores[i].stats);
}

void dp_arp_stats_sum(const struct dp *dp, struct arp_cache_stats *total)
{
	HASP_ASSERT(dp != NULL && total != NULL);
	memset(total, 0, sizeof(*total));
	for (uint32_t i = 0; i < dp->lcore_count && dp->lcores != NULL; i++) {
		const struct arp_cache_stats *s = &dp->lcores[i].arp.stats;
		total->hits += s->hits;
		total->misses += s->misses;
		total->queued += s->queued;
		total->queue_full += s->queue_full;
		total->table_full += s->table_full;
		total->requests += s->requests;
		total->learned += s->learned;
		total->released += s->released;
		total->failed += s->failed;
		total->expired += s->expired;
	}
}

/* Builds a UDP frame in a fresh mbuf; the destination MAC may be filled in
 * later (ARP). Returns NULL (counted) when the pool is empty. */
static struct rte_mbuf *dp_udp_frame(struct dp_lcore *lc, const struct udp_endpoints *ep,
				     const void *payload, size_t payload_size)
{
	const struct port *p = &lc->dp->port;
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);

	if (m == NULL) {
		lc->stats.tx_no_mbuf++;
		return NULL;
	}
	uint8_t *frame = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(UDP_FRAME_PAYLOAD_OFFSET +
								      payload_size));
	HASP_ASSERT(frame != NULL); /* data room holds a whole MTU frame */
	memcpy(frame + UDP_FRAME_PAYLOAD_OFFSET, payload, payload_size);
	udp_write_frame(frame, ep, (uint16_t)payload_size, !p->tx_csum);
	if (p->tx_csum) {
		m->l2_len = ETH_HDR_SIZE;
		m->l3_len = 20;
		m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM;
	}
	return m;
}

int dp_udp_reply(struct dp_lcore *lc, const struct dp_datagram *dg, const void *payload,
		 size_t payload_size)
{
	HASP_ASSERT(lc != NULL && dg != NULL);
	HASP_ASSERT(payload != NULL || payload_size == 0);
	if (payload_size > HASP_DATAGRAM_SIZE_MAX) {
		lc->stats.tx_too_big++;
		return -HASP_ETOOBIG;
	}
	const struct udp_endpoints ep = {
		.src_mac = lc->dp->cfg.mac,
		.dst_mac = dg->src_mac,
		.src_ip = lc->dp->cfg.ip,
		.dst_ip = dg->src_ip,
		.src_port = dg->dst_port,
		.dst_port = dg->src_port,
	};
	struct rte_mbuf *m = dp_udp_frame(lc, &ep, payload, payload_size);
	if (m == NULL)
		return -HASP_ENOMEM;
	lc->stats.tx_udp++;
	lcore_loop_tx(lc, m);
	return 0;
}

int dp_udp_send(struct dp_lcore *lc, uint32_t dst_ip, uint16_t dst_port, uint16_t src_port,
		const void *payload, size_t payload_size)
{
	HASP_ASSERT(lc != NULL);
	HASP_ASSERT(payload != NULL || payload_size == 0);
	const struct dp *dp = lc->dp;
	if (payload_size > HASP_DATAGRAM_SIZE_MAX) {
		lc->stats.tx_too_big++;
		return -HASP_ETOOBIG;
	}
	if (dst_ip == dp->cfg.ip || ipv4_addr_is_martian_source(dst_ip)) {
		/* Never ARP for ourselves or a broadcast/multicast address. */
		lc->stats.tx_no_route++;
		return -HASP_ENOENT;
	}
	uint32_t next_hop = dst_ip;
	if ((dst_ip & dp->subnet_mask) != (dp->cfg.ip & dp->subnet_mask)) {
		if (dp->cfg.gateway == 0) {
			lc->stats.tx_no_route++;
			return -HASP_ENOENT;
		}
		next_hop = dp->cfg.gateway;
	}
	const struct udp_endpoints ep = {
		.src_mac = dp->cfg.mac,
		.src_ip = dp->cfg.ip,
		.dst_ip = dst_ip,
		.src_port = src_port,
		.dst_port = dst_port,
	};
	struct rte_mbuf *m = dp_udp_frame(lc, &ep, payload, payload_size);
	if (m == NULL)
		return -HASP_ENOMEM;
	struct eth_addr mac;
	switch (arp_cache_resolve(&lc->arp, next_hop, lc->now_ns, m, &mac)) {
	case ARP_CACHE_HIT:
		memcpy(rte_pktmbuf_mtod(m, uint8_t *), mac.bytes, ETH_ADDR_SIZE);
		lc->stats.tx_udp++;
		lcore_loop_tx(lc, m);
		return 0;
	case ARP_CACHE_QUEUED:
		lc->stats.tx_udp++;
		lc->stats.tx_arp_queued++;
		return 0;
	case ARP_CACHE_DROPPED:
		break;
	}
	lc->stats.tx_arp_dropped++;
	rte_pktmbuf_free(m);
	return -HASP_EFULL;
}
