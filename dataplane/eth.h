/*
 * Ethernet II framing.
 *
 * The dataplane accepts a frame only when its destination is our own MAC or
 * the broadcast address. This filter is in software on purpose: the tap PMD
 * gives the DPDK port and the kernel's tap netdev the same MAC and does not
 * filter, so on a bridge every node must use its own MAC (02:77:00:00:00:NN)
 * and drop the rest (docs/ENVIRONMENT.md, "The MAC trap on a bridge").
 *
 *   offset size field
 *   0      6    destination MAC
 *   6      6    source MAC
 *   12     2    EtherType (0x0800 IPv4, 0x0806 ARP), big-endian
 *   14     ...  payload (VLAN tags are not supported: counted as unknown)
 */
#ifndef HASP_DATAPLANE_ETH_H
#define HASP_DATAPLANE_ETH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ETH_ADDR_SIZE 6u
#define ETH_HDR_SIZE 14u
#define ETH_TYPE_IPV4 0x0800u
#define ETH_TYPE_ARP 0x0806u
/* Smallest frame on the wire without the FCS; shorter ones are padded. */
#define ETH_FRAME_SIZE_MIN 60u
/* Largest frame at MTU 1500 without the FCS. */
#define ETH_FRAME_SIZE_MAX 1514u

struct eth_addr {
	uint8_t bytes[ETH_ADDR_SIZE];
};

struct eth_hdr_view {
	struct eth_addr dst;
	struct eth_addr src;
	uint16_t type; /* host order */
};

/* Reads the header of `frame`. Returns false (nothing read) when the frame is
 * shorter than a header. */
bool eth_parse(const uint8_t *frame, size_t frame_size, struct eth_hdr_view *hdr);

/* Writes a header at `frame`, which has at least ETH_HDR_SIZE bytes. */
void eth_write(uint8_t *frame, const struct eth_addr *dst, const struct eth_addr *src,
	       uint16_t type);

bool eth_addr_equal(const struct eth_addr *a, const struct eth_addr *b);
bool eth_addr_is_broadcast(const struct eth_addr *a);
/* Multicast includes broadcast (the group bit of the first byte). */
bool eth_addr_is_multicast(const struct eth_addr *a);
bool eth_addr_is_zero(const struct eth_addr *a);

/* Parses "02:77:00:00:00:01". Returns 0 or -HASP_EINVAL. */
int eth_addr_parse(const char *text, struct eth_addr *addr) __attribute__((warn_unused_result));

/* Formats into `text` (at least ETH_ADDR_TEXT_SIZE bytes). */
#define ETH_ADDR_TEXT_SIZE 18u
void eth_addr_format(const struct eth_addr *addr, char *text);

extern const struct eth_addr eth_addr_broadcast;

#endif
