/*
 * IPv4 validation and header writing (see ipv4.h).
 */
#include "dataplane/ipv4.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "common/assert.h"
#include "dataplane/csum.h"
#include "dataplane/netbytes.h"
#include "hasp/errors.h"

enum ipv4_parse_result ipv4_parse(const uint8_t *pkt, size_t pkt_size, bool csum_verified,
				  struct ipv4_view *ip)
{
	HASP_ASSERT(pkt != NULL || pkt_size == 0);
	HASP_ASSERT(ip != NULL);
	if (pkt_size < IPV4_HDR_SIZE)
		return IPV4_PARSE_TRUNCATED;
	if ((pkt[0] >> 4) != 4)
		return IPV4_PARSE_BAD_VERSION;
	size_t hdr_size = (size_t)(pkt[0] & 0x0fu) * 4;
	if (hdr_size < IPV4_HDR_SIZE)
		return IPV4_PARSE_BAD_IHL;
	uint16_t total_size = get_be16(pkt + 2);
	if (total_size < hdr_size)
		return IPV4_PARSE_BAD_LENGTH;
	if (total_size > pkt_size)
		return IPV4_PARSE_TRUNCATED;
	if (hdr_size != IPV4_HDR_SIZE)
		return IPV4_PARSE_OPTIONS;
	uint16_t frag = get_be16(pkt + 6);
	if ((frag & (IPV4_FLAG_MF | IPV4_FRAG_OFFSET_MASK)) != 0)
		return IPV4_PARSE_FRAGMENT;
	if (!csum_verified && csum_fold(csum_add(0, pkt, IPV4_HDR_SIZE)) != 0)
		return IPV4_PARSE_BAD_CSUM;
	ip->ttl = pkt[8];
	ip->proto = pkt[9];
	ip->src = get_be32(pkt + 12);
	ip->dst = get_be32(pkt + 16);
	ip->total_size = total_size;
	ip->payload = pkt + IPV4_HDR_SIZE;
	ip->payload_size = (uint16_t)(total_size - IPV4_HDR_SIZE);
	HASP_ASSERT(ip->payload + ip->payload_size <= pkt + pkt_size);
	return IPV4_PARSE_OK;
}

void ipv4_write_header(uint8_t *hdr, uint32_t src, uint32_t dst, uint8_t proto,
		       uint16_t payload_size, bool csum_software)
{
	HASP_ASSERT(hdr != NULL);
	HASP_ASSERT(payload_size <= 65535u - IPV4_HDR_SIZE);
	hdr[0] = 0x45;
	hdr[1] = 0;
	put_be16(hdr + 2, (uint16_t)(IPV4_HDR_SIZE + payload_size));
	put_be16(hdr + 4, 0);
	put_be16(hdr + 6, IPV4_FLAG_DF);
	hdr[8] = IPV4_TTL_DEFAULT;
	hdr[9] = proto;
	put_be16(hdr + 10, 0);
	put_be32(hdr + 12, src);
	put_be32(hdr + 16, dst);
	if (csum_software)
		put_be16(hdr + 10, csum_fold(csum_add(0, hdr, IPV4_HDR_SIZE)));
}

bool ipv4_addr_is_martian_source(uint32_t addr)
{
	return addr == 0 || addr == 0xffffffffu || (addr >> 28) >= 0xe;
}

int ipv4_addr_parse(const char *text, uint32_t *addr)
{
	struct in_addr in;

	HASP_ASSERT(text != NULL && addr != NULL);
	if (inet_pton(AF_INET, text, &in) != 1)
		return -HASP_EINVAL;
	*addr = ntohl(in.s_addr);
	return 0;
}

void ipv4_addr_format(uint32_t addr, char *text)
{
	HASP_ASSERT(text != NULL);
	snprintf(text, IPV4_ADDR_TEXT_SIZE, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 0xffu,
		 (addr >> 8) & 0xffu, addr & 0xffu);
}
