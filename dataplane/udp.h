/*
 * UDP over IPv4 (RFC 768): validate a datagram and write a whole frame.
 *
 *   offset size field
 *   0      2    source port
 *   2      2    destination port
 *   4      2    length (header + payload), at least 8, at most the IPv4
 *                payload (anything after it inside the IPv4 payload is
 *                ignored, as RFC 768 allows)
 *   6      2    checksum over the pseudo-header, header and payload; 0 means
 *                "not computed" and is accepted on IPv4 (a computed sum of 0
 *                is sent as 0xffff)
 *   8      ...  payload
 */
#ifndef HASP_DATAPLANE_UDP_H
#define HASP_DATAPLANE_UDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/eth.h"

#define UDP_HDR_SIZE 8u
/* Offset of the payload in a frame written by udp_write_frame(). */
#define UDP_FRAME_PAYLOAD_OFFSET (ETH_HDR_SIZE + 20u + UDP_HDR_SIZE)

struct udp_view {
	uint16_t src_port;
	uint16_t dst_port;
	bool csum_zero;        /* the sender did not compute a checksum */
	const uint8_t *payload;
	uint16_t payload_size;
};

enum udp_parse_result {
	UDP_PARSE_OK = 0,
	UDP_PARSE_TRUNCATED,  /* fewer than 8 bytes */
	UDP_PARSE_BAD_LENGTH, /* length field below 8 or beyond the IPv4 payload */
	UDP_PARSE_BAD_CSUM,
};

/* Validates the UDP datagram in an IPv4 payload. `src_ip`/`dst_ip` (host
 * order) feed the pseudo-header. The checksum is verified in software unless
 * `csum_verified` says the port did. On UDP_PARSE_OK, `udp` points into
 * `seg`. */
enum udp_parse_result udp_parse(const uint8_t *seg, size_t seg_size, uint32_t src_ip,
				uint32_t dst_ip, bool csum_verified, struct udp_view *udp);

/* Everything needed to address one datagram on the wire. */
struct udp_endpoints {
	struct eth_addr src_mac;
	struct eth_addr dst_mac;
	uint32_t src_ip;
	uint32_t dst_ip;
	uint16_t src_port;
	uint16_t dst_port;
};

/* Writes Ethernet, IPv4 and UDP headers for a payload of `payload_size`
 * bytes into `frame` (at least UDP_FRAME_PAYLOAD_OFFSET bytes). The payload
 * must already be at frame + UDP_FRAME_PAYLOAD_OFFSET when `csum_software` is
 * set, because the UDP checksum covers it. With `csum_software` false the
 * IPv4 checksum is 0 and the UDP checksum holds the pseudo-header sum, the
 * form a port with TX checksum offload completes. Returns the frame size
 * (the caller pads to ETH_FRAME_SIZE_MIN if its port needs that). */
size_t udp_write_frame(uint8_t *frame, const struct udp_endpoints *ep, uint16_t payload_size,
		       bool csum_software);

#endif
