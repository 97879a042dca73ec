/*
 * Ethernet II header parsing and writing on byte buffers (see eth.h).
 */
#include "dataplane/eth.h"

#include <stdio.h>
#include <string.h>

#include "common/assert.h"
#include "dataplane/netbytes.h"
#include "hasp/errors.h"

const struct eth_addr eth_addr_broadcast = { { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff } };

bool eth_parse(const uint8_t *frame, size_t frame_size, struct eth_hdr_view *hdr)
{
	HASP_ASSERT(frame != NULL || frame_size == 0);
	HASP_ASSERT(hdr != NULL);
	if (frame_size < ETH_HDR_SIZE)
		return false;
	memcpy(hdr->dst.bytes, frame, ETH_ADDR_SIZE);
	memcpy(hdr->src.bytes, frame + 6, ETH_ADDR_SIZE);
	hdr->type = get_be16(frame + 12);
	return true;
}

void eth_write(uint8_t *frame, const struct eth_addr *dst, const struct eth_addr *src,
	       uint16_t type)
{
	HASP_ASSERT(frame != NULL);
	HASP_ASSERT(dst != NULL && src != NULL);
	/* memmove: a reply written in place may pass its own source as dst. */
	memmove(frame, dst->bytes, ETH_ADDR_SIZE);
	memmove(frame + 6, src->bytes, ETH_ADDR_SIZE);
	put_be16(frame + 12, type);
}

bool eth_addr_equal(const struct eth_addr *a, const struct eth_addr *b)
{
	return memcmp(a->bytes, b->bytes, ETH_ADDR_SIZE) == 0;
}

bool eth_addr_is_broadcast(const struct eth_addr *a)
{
	return eth_addr_equal(a, &eth_addr_broadcast);
}

bool eth_addr_is_multicast(const struct eth_addr *a)
{
	return (a->bytes[0] & 1u) != 0;
}

bool eth_addr_is_zero(const struct eth_addr *a)
{
	static const struct eth_addr zero;
	return eth_addr_equal(a, &zero);
}

static int eth_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int eth_addr_parse(const char *text, struct eth_addr *addr)
{
	struct eth_addr out;

	HASP_ASSERT(text != NULL);
	HASP_ASSERT(addr != NULL);
	/* Exactly "xx:xx:xx:xx:xx:xx": no sign, space or 0x that sscanf
	 * would tolerate. */
	if (strlen(text) != 17)
		return -HASP_EINVAL;
	for (unsigned i = 0; i < ETH_ADDR_SIZE; i++) {
		const char *p = text + 3 * i;
		int hi = eth_hex_digit(p[0]), lo = eth_hex_digit(p[1]);
		if (hi < 0 || lo < 0 || (i < ETH_ADDR_SIZE - 1 && p[2] != ':'))
			return -HASP_EINVAL;
		out.bytes[i] = (uint8_t)(hi << 4 | lo);
	}
	*addr = out;
	return 0;
}

void eth_addr_format(const struct eth_addr *addr, char *text)
{
	HASP_ASSERT(addr != NULL && text != NULL);
	snprintf(text, ETH_ADDR_TEXT_SIZE, "%02x:%02x:%02x:%02x:%02x:%02x", addr->bytes[0],
		 addr->bytes[1], addr->bytes[2], addr->bytes[3], addr->bytes[4], addr->bytes[5]);
}
