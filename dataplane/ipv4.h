/*
 * IPv4 header validation and writing (RFC 791, RFC 1122 §3.2.1).
 *
 *   offset size field
 *   0      1    version (4) << 4 | IHL (header size in 32-bit words, 5..15)
 *   1      1    DSCP/ECN (ignored on receive, 0 on send)
 *   2      2    total length (header + payload); the frame may be longer
 *                (Ethernet padding), never shorter
 *   4      2    identification (0 on send: atomic datagrams, RFC 6864 §4.1)
 *   6      2    flags (DF 0x4000, MF 0x2000) | fragment offset
 *   8      1    TTL (64 on send; not checked on receive, RFC 1122 §3.2.1.7)
 *   9      1    protocol (1 ICMP, 17 UDP)
 *   10     2    header checksum
 *   12     4    source address
 *   16     4    destination address
 *
 * hasp never sends fragments (a datagram is at most 1472 bytes, DF set) and
 * drops every fragment and every header with options, counting them: both
 * are attack surface with no use on a lock service's link.
 */
#ifndef HASP_DATAPLANE_IPV4_H
#define HASP_DATAPLANE_IPV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IPV4_HDR_SIZE 20u
#define IPV4_PROTO_ICMP 1u
#define IPV4_PROTO_UDP 17u
#define IPV4_TTL_DEFAULT 64u
#define IPV4_FLAG_DF 0x4000u
#define IPV4_FLAG_MF 0x2000u
#define IPV4_FRAG_OFFSET_MASK 0x1fffu

struct ipv4_view {
	uint32_t src;          /* host order */
	uint32_t dst;          /* host order */
	uint8_t proto;
	uint8_t ttl;
	uint16_t total_size;   /* header + payload */
	const uint8_t *payload;
	uint16_t payload_size; /* total_size - IPV4_HDR_SIZE */
};

enum ipv4_parse_result {
	IPV4_PARSE_OK = 0,
	IPV4_PARSE_TRUNCATED,   /* shorter than the header or its total length */
	IPV4_PARSE_BAD_VERSION, /* version is not 4 */
	IPV4_PARSE_BAD_IHL,     /* IHL below 5 */
	IPV4_PARSE_BAD_LENGTH,  /* total length below the header size */
	IPV4_PARSE_OPTIONS,     /* IHL above 5: dropped by policy */
	IPV4_PARSE_FRAGMENT,    /* MF set or a non-zero offset: dropped by policy */
	IPV4_PARSE_BAD_CSUM,    /* header checksum fails */
};

/* Validates the IPv4 packet at `pkt` (the bytes after the Ethernet header,
 * possibly followed by padding). The checksum is verified unless
 * `csum_verified` says the port already did. On IPV4_PARSE_OK, `ip` points
 * into `pkt`. Checks run in the order of the enum, so a truncated header is
 * never reported as anything else. */
enum ipv4_parse_result ipv4_parse(const uint8_t *pkt, size_t pkt_size, bool csum_verified,
				  struct ipv4_view *ip);

/* Writes a 20-byte header for `payload_size` bytes of `proto` at `hdr`, DF
 * set, TTL 64, id 0. With `csum_software` the header checksum is computed;
 * otherwise it is left 0 for the port to fill (TX offload). */
void ipv4_write_header(uint8_t *hdr, uint32_t src, uint32_t dst, uint8_t proto,
		       uint16_t payload_size, bool csum_software);

/* True for addresses that must never be a source we answer: 0.0.0.0,
 * 255.255.255.255, multicast (224/4) and class E (240/4). */
bool ipv4_addr_is_martian_source(uint32_t addr);

/* Parses dotted-quad text into a host-order address. 0 or -HASP_EINVAL. */
int ipv4_addr_parse(const char *text, uint32_t *addr) __attribute__((warn_unused_result));

#define IPV4_ADDR_TEXT_SIZE 16u
void ipv4_addr_format(uint32_t addr, char *text);

#endif
