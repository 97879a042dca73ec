/*
 * ARP for IPv4 over Ethernet (RFC 826): parse, and build requests, replies
 * and gratuitous announcements as whole Ethernet frames.
 *
 *   offset size field (after the 14-byte Ethernet header)
 *   0      2    hardware type, 1 (Ethernet)
 *   2      2    protocol type, 0x0800 (IPv4)
 *   4      1    hardware address size, 6
 *   5      1    protocol address size, 4
 *   6      2    operation: 1 request, 2 reply
 *   8      6    sender hardware address (sha)
 *   14     4    sender protocol address (spa)
 *   18     6    target hardware address (tha)
 *   24     4    target protocol address (tpa)
 *
 * IPv4 addresses are host-order uint32_t throughout the dataplane API.
 */
#ifndef HASP_DATAPLANE_ARP_H
#define HASP_DATAPLANE_ARP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/eth.h"

#define ARP_BODY_SIZE 28u
#define ARP_FRAME_SIZE (ETH_HDR_SIZE + ARP_BODY_SIZE) /* 42, padded to 60 */
#define ARP_OP_REQUEST 1u
#define ARP_OP_REPLY 2u

struct arp_view {
	uint16_t op;
	struct eth_addr sha;
	uint32_t spa;
	struct eth_addr tha;
	uint32_t tpa;
};

enum arp_parse_result {
	ARP_PARSE_OK = 0,
	ARP_PARSE_TRUNCATED,   /* fewer than 28 bytes */
	ARP_PARSE_UNSUPPORTED, /* not Ethernet/IPv4, or an unknown operation */
};

/* Parses the ARP body `body` (the bytes after the Ethernet header). */
enum arp_parse_result arp_parse(const uint8_t *body, size_t body_size, struct arp_view *arp);

/* Writes a complete ARP frame (Ethernet header included) into `frame`, which
 * has room for ETH_FRAME_SIZE_MIN bytes, padding it with zeros to the minimum
 * frame size. Returns the frame size (ETH_FRAME_SIZE_MIN). `eth_dst` is the
 * Ethernet destination (broadcast for requests); the Ethernet source is
 * arp->sha. */
size_t arp_write_frame(uint8_t *frame, const struct eth_addr *eth_dst, const struct arp_view *arp);

/* Fills `arp` for a request for `target_ip` from (mac, ip). */
void arp_make_request(struct arp_view *arp, const struct eth_addr *mac, uint32_t ip,
		      uint32_t target_ip);

/* Fills `arp` for a gratuitous announcement of (mac, ip): a request with
 * spa == tpa == ip, so neighbours update their caches (RFC 5227 §3). */
void arp_make_announce(struct arp_view *arp, const struct eth_addr *mac, uint32_t ip);

#endif
