/*
 * UDP validation and frame writing (see udp.h).
 */
#include "dataplane/udp.h"

#include "common/assert.h"
#include "common/limits.h"
#include "dataplane/csum.h"
#include "dataplane/ipv4.h"
#include "dataplane/netbytes.h"

enum udp_parse_result udp_parse(const uint8_t *seg, size_t seg_size, uint32_t src_ip,
				uint32_t dst_ip, bool csum_verified, struct udp_view *udp)
{
	HASP_ASSERT(seg != NULL || seg_size == 0);
	HASP_ASSERT(udp != NULL);
	if (seg_size < UDP_HDR_SIZE)
		return UDP_PARSE_TRUNCATED;
	uint16_t udp_size = get_be16(seg + 4);
	if (udp_size < UDP_HDR_SIZE || udp_size > seg_size)
		return UDP_PARSE_BAD_LENGTH;
	uint16_t stored = get_be16(seg + 6);
	if (stored != 0 && !csum_verified) {
		uint32_t sum = csum_pseudo_udp4(src_ip, dst_ip, udp_size);
		if (csum_fold(csum_add(sum, seg, udp_size)) != 0)
			return UDP_PARSE_BAD_CSUM;
	}
	udp->src_port = get_be16(seg);
	udp->dst_port = get_be16(seg + 2);
	udp->csum_zero = stored == 0;
	udp->payload = seg + UDP_HDR_SIZE;
	udp->payload_size = (uint16_t)(udp_size - UDP_HDR_SIZE);
	return UDP_PARSE_OK;
}

size_t udp_write_frame(uint8_t *frame, const struct udp_endpoints *ep, uint16_t payload_size,
		       bool csum_software)
{
	HASP_ASSERT(frame != NULL && ep != NULL);
	HASP_ASSERT(payload_size <= HASP_DATAGRAM_SIZE_MAX);
	uint8_t *ip = frame + ETH_HDR_SIZE;
	uint8_t *seg = ip + IPV4_HDR_SIZE;
	uint16_t udp_size = (uint16_t)(UDP_HDR_SIZE + payload_size);

	eth_write(frame, &ep->dst_mac, &ep->src_mac, ETH_TYPE_IPV4);
	ipv4_write_header(ip, ep->src_ip, ep->dst_ip, IPV4_PROTO_UDP, udp_size, csum_software);
	put_be16(seg, ep->src_port);
	put_be16(seg + 2, ep->dst_port);
	put_be16(seg + 4, udp_size);
	put_be16(seg + 6, 0);
	if (csum_software) {
		uint32_t sum = csum_pseudo_udp4(ep->src_ip, ep->dst_ip, udp_size);
		uint16_t csum = csum_fold(csum_add(sum, seg, udp_size));
		/* RFC 768: a computed zero is transmitted as all ones. */
		put_be16(seg + 6, csum == 0 ? 0xffffu : csum);
	} else {
		put_be16(seg + 6, csum_pseudo_udp4_folded(ep->src_ip, ep->dst_ip, udp_size));
	}
	return UDP_FRAME_PAYLOAD_OFFSET + payload_size;
}
