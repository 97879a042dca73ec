/*
 * DPDK port bring-up (see port.h), modelled on the shape of DPDK's l2fwd and
 * l3fwd set-up: query capabilities, size the pool from a written sum,
 * configure, set up queues, start.
 */
#include "dataplane/port.h"

#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <linux/if_packet.h>

#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "common/assert.h"
#include "common/limits.h"
#include "common/log.h"
#include "hasp/errors.h"

LOG_TOPIC_DEFINE(dataplane)

#define PORT_MEMPOOL_CACHE 256u

static int port_pick(const struct port_config *cfg, uint16_t *port_id)
{
	if (cfg->name != NULL)
		return rte_eth_dev_get_port_by_name(cfg->name, port_id) == 0 ? 0 : -HASP_ENOENT;
	uint16_t id;
	RTE_ETH_FOREACH_DEV(id) {
		*port_id = id;
		return 0;
	}
	return -HASP_ENOENT;
}

/* Mbufs the pool must hold so that no lcore ever finds it empty in normal
 * operation (docs/STYLE.md §6): every descriptor can hold one, plus what each
 * lcore keeps in hand, plus what the per-lcore mempool caches can hide. */
static uint32_t port_mbuf_count(const struct port *p, const struct port_config *cfg)
{
	uint32_t n = p->queue_count * (uint32_t)p->rxd_count   /* RX rings kept full */
		   + p->queue_count * (uint32_t)p->txd_count   /* TX rings in flight */
		   + p->queue_count * cfg->extra_mbufs         /* bursts, TX buffers, ARP */
		   + (rte_lcore_count() + 1u) * PORT_MEMPOOL_CACHE; /* per-lcore caches */
	/* rte_mempool is most memory-efficient at 2^k - 1 elements. */
	uint32_t pow = 1;
	while (pow - 1 < n)
		pow <<= 1;
	return pow - 1;
}

/* net_af_packet opens one packet socket per queue pair when its vdev is
 * probed (rte_eal_init) and keeps it until the port is closed; it does not
 * say which descriptors those are, so they are found here, once, as this
 * process's AF_PACKET raw sockets (nothing else in it opens one). */
static void port_find_packet_fds(struct port *p)
{
	struct rlimit lim;
	int max = 1024;
	if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < 65536)
		max = (int)lim.rlim_cur;
	for (int fd = 0; fd < max && p->packet_fd_count < PORT_QUEUES_MAX; fd++) {
		int domain = 0, type = 0;
		socklen_t len = sizeof(domain);
		if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_PACKET)
			continue;
		len = sizeof(type);
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_RAW)
			p->packet_fds[p->packet_fd_count++] = fd;
	}
	LOG_INFO(dataplane, "port=%u driver=net_af_packet packet sockets=%u (kernel RX drops read from them)",
		 p->port_id, p->packet_fd_count);
}

/* Adds the frames each packet socket's kernel side dropped since the last
 * read (its RX ring was full: the lcore did not drain it in time). */
static void port_read_packet_drops(struct port *p)
{
	for (uint32_t i = 0; i < p->packet_fd_count; i++) {
		struct tpacket_stats_v3 st; /* the larger layout: V2 fills a prefix */
		socklen_t len = sizeof(st);
		memset(&st, 0, sizeof(st));
		if (getsockopt(p->packet_fds[i], SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
			p->packet_drops += st.tp_drops;
	}
}

/* The tap interface's kernel TX drops (frames the kernel could not queue
 * to the tap's reader: us); open/read, no stdio (this runs on the lcore,
 * where nothing may allocate). False when unreadable. */
static bool port_tap_drops(const struct port *p, uint64_t *drops)
{
	char path[96], buf[32];
	snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/tx_dropped", p->tap_ifname);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	*drops = strtoull(buf, NULL, 10);
	return true;
}

int port_open(struct port *p, const struct port_config *cfg)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	struct rte_ether_addr mac;
	int rc;

	HASP_ASSERT(p != NULL && cfg != NULL);
	HASP_ASSERT(cfg->queue_count >= 1 && cfg->queue_count <= PORT_QUEUES_MAX);
	memset(p, 0, sizeof(*p));
	rc = port_pick(cfg, &p->port_id);
	if (rc != 0) {
		LOG_ERROR(dataplane, "no port name=%s (check --vdev / PCI binding)",
			  cfg->name != NULL ? cfg->name : "(first)");
		return rc;
	}
	if (rte_eth_dev_info_get(p->port_id, &info) != 0)
		return -HASP_EIO;
	snprintf(p->driver, sizeof(p->driver), "%s", info.driver_name);
	if (cfg->queue_count > info.max_rx_queues || cfg->queue_count > info.max_tx_queues) {
		LOG_ERROR(dataplane, "port=%u driver=%s has max_rx_queues=%u max_tx_queues=%u, need %u",
			  p->port_id, p->driver, info.max_rx_queues, info.max_tx_queues,
			  cfg->queue_count);
		return -HASP_ECONFIG;
	}
	p->queue_count = cfg->queue_count;
	p->rxd_count = cfg->rxd_count;
	p->txd_count = cfg->txd_count;
	if (rte_eth_dev_adjust_nb_rx_tx_desc(p->port_id, &p->rxd_count, &p->txd_count) != 0)
		return -HASP_EIO;

	memset(&conf, 0, sizeof(conf));
	conf.rxmode.mtu = cfg->mtu;
	/* RSS only helps with more than one queue, and only where the port
	 * hashes IP/UDP; otherwise everything lands on queue 0. */
	uint64_t rss_hf = info.flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP);
	if (p->queue_count > 1 && rss_hf != 0) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
		p->rss = true;
	} else if (p->queue_count > 1) {
		LOG_WARN(dataplane, "port=%u driver=%s has no RSS: queues other than 0 get no traffic",
			 p->port_id, p->driver);
	}
	/* Offload only the pair we need; net_af_packet has neither and gets
	 * software checksums (classify.c, udp.c). */
	const uint64_t rx_want = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
	const uint64_t tx_want = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
	if ((info.rx_offload_capa & rx_want) == rx_want) {
		conf.rxmode.offloads |= rx_want;
		p->rx_csum = true;
	}
	if ((info.tx_offload_capa & tx_want) == tx_want) {
		conf.txmode.offloads |= tx_want;
		p->tx_csum = true;
	}
	if (cfg->mtu < info.min_mtu || cfg->mtu > info.max_mtu) {
		LOG_ERROR(dataplane, "port=%u mtu=%u outside %u..%u", p->port_id, cfg->mtu,
			  info.min_mtu, info.max_mtu);
		return -HASP_ECONFIG;
	}

	p->mbuf_count = port_mbuf_count(p, cfg);
	char pool_name[RTE_MEMPOOL_NAMESIZE];
	snprintf(pool_name, sizeof(pool_name), "hasp_mbufs_%u", p->port_id);
	/* Data room: one whole frame at the MTU in a single segment (we never
	 * enable scatter; multi-segment mbufs are counted and dropped). */
	uint32_t data_room = RTE_PKTMBUF_HEADROOM + cfg->mtu + ETH_HDR_SIZE + 4 /* FCS */;
	if (data_room < RTE_MBUF_DEFAULT_BUF_SIZE)
		data_room = RTE_MBUF_DEFAULT_BUF_SIZE;
	p->pool = rte_pktmbuf_pool_create(pool_name, p->mbuf_count, PORT_MEMPOOL_CACHE, 0,
					  (uint16_t)data_room, (int)rte_eth_dev_socket_id(p->port_id));
	if (p->pool == NULL) {
		LOG_ERROR(dataplane, "mbuf pool of %u failed: %s (raise -m?)", p->mbuf_count,
			  rte_strerror(rte_errno));
		return -HASP_ENOMEM;
	}

	rc = rte_eth_dev_configure(p->port_id, p->queue_count, p->queue_count, &conf);
	if (rc != 0) {
		LOG_ERROR(dataplane, "configure port=%u: %s", p->port_id, rte_strerror(-rc));
		goto fail_pool;
	}
	for (uint16_t q = 0; q < p->queue_count; q++) {
		struct rte_eth_rxconf rxconf = info.default_rxconf;
		struct rte_eth_txconf txconf = info.default_txconf;
		rxconf.offloads = conf.rxmode.offloads;
		txconf.offloads = conf.txmode.offloads;
		rc = rte_eth_rx_queue_setup(p->port_id, q, p->rxd_count,
					    (unsigned)rte_eth_dev_socket_id(p->port_id), &rxconf, p->pool);
		if (rc == 0)
			rc = rte_eth_tx_queue_setup(p->port_id, q, p->txd_count,
						    (unsigned)rte_eth_dev_socket_id(p->port_id), &txconf);
		if (rc != 0) {
			LOG_ERROR(dataplane, "queue %u setup port=%u: %s", q, p->port_id,
				  rte_strerror(-rc));
			goto fail_pool;
		}
	}
	rc = rte_eth_macaddr_get(p->port_id, &mac);
	if (rc == 0)
		memcpy(p->port_mac.bytes, mac.addr_bytes, ETH_ADDR_SIZE);
	/* The port must deliver frames for our MAC. A tap hands us every frame
	 * the kernel sends on it, and its MAC must NOT become ours (the kernel
	 * side would share it: the MAC trap), so it gets nothing. Any other
	 * port gets our MAC as an extra filter, or promiscuous mode if it has
	 * no room (net_af_packet: the PMD sets IFF_PROMISC). The classifier
	 * drops whatever is not for us. */
	if (!eth_addr_equal(&p->port_mac, &cfg->mac) && strcmp(p->driver, "net_tap") != 0) {
		struct rte_ether_addr ours;
		memcpy(ours.addr_bytes, cfg->mac.bytes, ETH_ADDR_SIZE);
		if (rte_eth_dev_mac_addr_add(p->port_id, &ours, 0) != 0) {
			(void)rte_eth_promiscuous_enable(p->port_id);
			p->promiscuous = true;
		}
	}
	rc = rte_eth_dev_start(p->port_id);
	if (rc != 0) {
		LOG_ERROR(dataplane, "start port=%u: %s", p->port_id, rte_strerror(-rc));
		goto fail_pool;
	}
	if (strcmp(p->driver, "net_af_packet") == 0)
		port_find_packet_fds(p);
	if (strcmp(p->driver, "net_tap") == 0 && info.if_index != 0 &&
	    if_indextoname(info.if_index, p->tap_ifname) != NULL &&
	    !port_tap_drops(p, &p->tap_drops_at_open))
		p->tap_ifname[0] = '\0'; /* no sysfs to read: rx_missed stays the PMD's */
	LOG_INFO(dataplane,
		 "port=%u driver=%s queues=%u rxd=%u txd=%u mbufs=%u rss=%d rx_csum=%d tx_csum=%d promisc=%d",
		 p->port_id, p->driver, p->queue_count, p->rxd_count, p->txd_count, p->mbuf_count,
		 p->rss, p->rx_csum, p->tx_csum, p->promiscuous);
	return 0;

fail_pool:
	rte_mempool_free(p->pool);
	p->pool = NULL;
	return -HASP_EIO;
}

void port_close(struct port *p)
{
	HASP_ASSERT(p != NULL);
	if (p->pool == NULL)
		return;
	(void)rte_eth_dev_stop(p->port_id);
	(void)rte_eth_dev_close(p->port_id);
	rte_mempool_free(p->pool);
	p->pool = NULL;
}

int port_stats_read(struct port *p, struct dp_port_stats *out)
{
	struct rte_eth_stats st;

	HASP_ASSERT(p != NULL && out != NULL);
	memset(out, 0, sizeof(*out));
	if (p->pool == NULL || rte_eth_stats_get(p->port_id, &st) != 0)
		return -HASP_EIO;
#define PORT_STATS_COPY(name, eth_field, help) out->name = st.eth_field;
	DP_PORT_STATS_TABLE(PORT_STATS_COPY)
#undef PORT_STATS_COPY
	port_read_packet_drops(p);
	out->rx_missed += p->packet_drops;
	uint64_t tap_drops;
	if (p->tap_ifname[0] != '\0' && port_tap_drops(p, &tap_drops) && tap_drops >= p->tap_drops_at_open)
		out->rx_missed += tap_drops - p->tap_drops_at_open;
	return 0;
}
