/*
 * ARP codec (see arp.h). Only the Ethernet/IPv4 form exists on our links;
 * anything else is reported as unsupported and counted by the classifier.
 */
#include "dataplane/arp.h"

#include <string.h>

#include "common/assert.h"
#include "dataplane/netbytes.h"

enum arp_parse_result arp_parse(const uint8_t *body, size_t body_size, struct arp_view *arp)
{
	HASP_ASSERT(body != NULL || body_size == 0);
	HASP_ASSERT(arp != NULL);
	if (body_size < ARP_BODY_SIZE)
		return ARP_PARSE_TRUNCATED;
	if (get_be16(body) != 1 || get_be16(body + 2) != ETH_TYPE_IPV4 || body[4] != 6 ||
	    body[5] != 4)
		return ARP_PARSE_UNSUPPORTED;
	arp->op = get_be16(body + 6);
	if (arp->op != ARP_OP_REQUEST && arp->op != ARP_OP_REPLY)
		return ARP_PARSE_UNSUPPORTED;
	memcpy(arp->sha.bytes, body + 8, ETH_ADDR_SIZE);
	arp->spa = get_be32(body + 14);
	memcpy(arp->tha.bytes, body + 18, ETH_ADDR_SIZE);
	arp->tpa = get_be32(body + 24);
	return ARP_PARSE_OK;
}

size_t arp_write_frame(uint8_t *frame, const struct eth_addr *eth_dst, const struct arp_view *arp)
{
	HASP_ASSERT(frame != NULL && eth_dst != NULL);
	HASP_ASSERT(arp != NULL && (arp->op == ARP_OP_REQUEST || arp->op == ARP_OP_REPLY));
	/* Copy the view first: the caller may pass a view of this very frame. */
	struct arp_view a = *arp;
	struct eth_addr dst = *eth_dst;
	uint8_t *body = frame + ETH_HDR_SIZE;

	eth_write(frame, &dst, &a.sha, ETH_TYPE_ARP);
	put_be16(body, 1);
	put_be16(body + 2, ETH_TYPE_IPV4);
	body[4] = 6;
	body[5] = 4;
	put_be16(body + 6, a.op);
	memcpy(body + 8, a.sha.bytes, ETH_ADDR_SIZE);
	put_be32(body + 14, a.spa);
	memcpy(body + 18, a.tha.bytes, ETH_ADDR_SIZE);
	put_be32(body + 24, a.tpa);
	memset(frame + ARP_FRAME_SIZE, 0, ETH_FRAME_SIZE_MIN - ARP_FRAME_SIZE);
	return ETH_FRAME_SIZE_MIN;
}

void arp_make_request(struct arp_view *arp, const struct eth_addr *mac, uint32_t ip,
		      uint32_t target_ip)
{
	HASP_ASSERT(arp != NULL && mac != NULL);
	memset(arp, 0, sizeof(*arp));
	arp->op = ARP_OP_REQUEST;
	arp->sha = *mac;
	arp->spa = ip;
	arp->tpa = target_ip; /* tha stays zero: unknown */
}

void arp_make_announce(struct arp_view *arp, const struct eth_addr *mac, uint32_t ip)
{
	arp_make_request(arp, mac, ip, ip);
}
