/*
 * Frame builders shared by the dataplane tests and the fuzz corpus
 * generator: valid ARP, ICMP echo and UDP frames addressed to the test node,
 * which the tests then damage byte by byte.
 */
#ifndef HASP_TESTS_DATAPLANE_FRAMES_H
#define HASP_TESTS_DATAPLANE_FRAMES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dataplane/arp.h"
#include "dataplane/classify.h"
#include "dataplane/csum.h"
#include "dataplane/icmp.h"
#include "dataplane/ipv4.h"
#include "dataplane/netbytes.h"
#include "dataplane/udp.h"

#define FRAMES_NODE_IP 0x0ac76301u /* 10.199.99.1 */
#define FRAMES_PEER_IP 0x0ac76302u /* 10.199.99.2 */
#define FRAMES_PORT 7700u
#define FRAMES_PEER_PORT 40000u

static const struct eth_addr frames_node_mac = { { 0x02, 0x77, 0, 0, 0, 0x01 } };
static const struct eth_addr frames_peer_mac = { { 0x02, 0x99, 0, 0, 0, 0x02 } };

static inline void frames_config(struct classify_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->mac = frames_node_mac;
	cfg->ip = FRAMES_NODE_IP;
	cfg->ports[0] = FRAMES_PORT;
	cfg->ports[1] = FRAMES_PORT + 1;
	cfg->port_count = 2;
}

/* A UDP datagram from the peer to the node with a software checksum. */
static inline size_t frames_udp(uint8_t *frame, const void *payload, uint16_t payload_size)
{
	struct udp_endpoints ep = {
		.src_mac = frames_peer_mac,
		.dst_mac = frames_node_mac,
		.src_ip = FRAMES_PEER_IP,
		.dst_ip = FRAMES_NODE_IP,
		.src_port = FRAMES_PEER_PORT,
		.dst_port = FRAMES_PORT,
	};
	memcpy(frame + UDP_FRAME_PAYLOAD_OFFSET, payload, payload_size);
	return udp_write_frame(frame, &ep, payload_size, true);
}

/* An ICMP echo request from the peer with `data_size` bytes of data. */
static inline size_t frames_icmp_echo(uint8_t *frame, uint16_t id, uint16_t seq, uint16_t data_size)
{
	uint8_t *msg = frame + ETH_HDR_SIZE + IPV4_HDR_SIZE;

	eth_write(frame, &frames_node_mac, &frames_peer_mac, ETH_TYPE_IPV4);
	ipv4_write_header(frame + ETH_HDR_SIZE, FRAMES_PEER_IP, FRAMES_NODE_IP, IPV4_PROTO_ICMP,
			  (uint16_t)(ICMP_HDR_SIZE + data_size), true);
	msg[0] = ICMP_TYPE_ECHO_REQUEST;
	msg[1] = 0;
	put_be16(msg + 2, 0);
	put_be16(msg + 4, id);
	put_be16(msg + 6, seq);
	for (uint16_t i = 0; i < data_size; i++)
		msg[ICMP_HDR_SIZE + i] = (uint8_t)(i * 7 + 1);
	put_be16(msg + 2, csum_fold(csum_add(0, msg, ICMP_HDR_SIZE + data_size)));
	return ETH_HDR_SIZE + IPV4_HDR_SIZE + ICMP_HDR_SIZE + data_size;
}

/* A broadcast ARP request from the peer for `target_ip`. */
static inline size_t frames_arp_request(uint8_t *frame, uint32_t target_ip)
{
	struct arp_view arp;
	arp_make_request(&arp, &frames_peer_mac, FRAMES_PEER_IP, target_ip);
	return arp_write_frame(frame, &eth_addr_broadcast, &arp);
}

/* Recomputes the IPv4 header checksum after a test edited the header. */
static inline void frames_fix_ipv4_csum(uint8_t *frame)
{
	uint8_t *ip = frame + ETH_HDR_SIZE;
	size_t hdr_size = (size_t)(ip[0] & 0xf) * 4;
	put_be16(ip + 10, 0);
	put_be16(ip + 10, csum_fold(csum_add(0, ip, hdr_size)));
}

#endif
