/*
 * One DPDK Ethernet port for the dataplane: pick it, size its mbuf pool,
 * configure one RX/TX queue pair per dataplane lcore (RSS when the port has
 * it and there is more than one queue), enable checksum offload where the
 * port advertises it, and start it.
 *
 * Works with a real NIC (by PCI address, bound to vfio-pci), net_tap,
 * net_af_packet and net_memif. Must run after rte_eal_init(), on the main
 * lcore. The pool and port are released by port_close().
 */
#ifndef HASP_DATAPLANE_PORT_H
#define HASP_DATAPLANE_PORT_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_mempool.h>

#include "dataplane/dp_stats.h"
#include "dataplane/eth.h"

#define PORT_QUEUES_MAX 16u

struct port_config {
	const char *name;      /* "0000:03:00.0", "net_tap0"; NULL: the only port */
	struct eth_addr mac;   /* our MAC (never the tap's, see eth.h) */
	uint16_t queue_count;  /* RX/TX queue pairs, one per dataplane lcore */
	uint16_t rxd_count;    /* RX descriptors per queue (adjusted by the PMD) */
	uint16_t txd_count;    /* TX descriptors per queue */
	uint16_t mtu;          /* HASP_MTU_DEFAULT unless jumbo */
	uint32_t extra_mbufs;  /* per queue: mbufs the lcore may hold outside the
				* rings (burst, TX buffer, ARP-parked datagrams) */
};

struct port {
	uint16_t port_id;
	uint16_t queue_count;
	uint16_t rxd_count;
	uint16_t txd_count;
	struct rte_mempool *pool;
	uint32_t mbuf_count;
	bool rss;          /* RSS spreads flows over the queues */
	bool rx_csum;      /* RX IPv4+UDP checksum offload enabled */
	bool tx_csum;      /* TX IPv4+UDP checksum offload enabled */
	bool promiscuous;  /* our MAC could not be installed as a filter */
	char driver[32];
	struct eth_addr port_mac; /* the port's own MAC (for diagnostics) */
	/* net_af_packet: its queues' packet sockets, whose kernel drop counts
	 * (PACKET_STATISTICS, reset by each read) port_stats_read() adds up
	 * in packet_drops: the PMD of DPDK 22.11 leaves imissed at 0. */
	int packet_fds[PORT_QUEUES_MAX];
	uint32_t packet_fd_count;
	uint64_t packet_drops;
	/* net_tap: the tap interface, whose kernel side counts the frames it
	 * could not queue to us as its own TX drops (the PMD does not). */
	char tap_ifname[16];
	uint64_t tap_drops_at_open;
};

/* Returns 0, -HASP_ENOENT (no such port), -HASP_ECONFIG (too many queues,
 * bad MTU), -HASP_ENOMEM (pool), -HASP_EIO (the PMD refused). */
int port_open(struct port *p, const struct port_config *cfg) __attribute__((warn_unused_result));
void port_close(struct port *p);

/* The port's own counters (rte_eth_stats_get; on net_af_packet rx_missed
 * is the kernel's count of frames dropped because a queue's RX ring was
 * full, a getsockopt per queue; on net_tap the tap interface's TX drops
 * since the port opened, a read of its sysfs counter). For the admin path, at most every second
 * or so, never per packet, and from one thread only (it accumulates the
 * kernel's drops); the PMD's counters it only reads, so the lcores may
 * receive meanwhile. Returns 0 or -HASP_EIO (out zeroed). */
int port_stats_read(struct port *p, struct dp_port_stats *out) __attribute__((warn_unused_result));

#endif
