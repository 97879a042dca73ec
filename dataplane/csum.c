/*
 * RFC 1071 one's-complement sum. Straightforward 16-bit word loop: the
 * dataplane only sums headers and datagrams of at most 1472 bytes, and the
 * ports that matter for speed offload the UDP sum anyway.
 */
#include "dataplane/csum.h"

#include "common/assert.h"

uint32_t csum_add(uint32_t sum, const void *data, size_t size)
{
	const uint8_t *p = data;
	uint64_t acc = sum;

	HASP_ASSERT(data != NULL || size == 0);
	HASP_ASSERT(size <= 65535);
	while (size >= 2) {
		acc += (uint32_t)((p[0] << 8) | p[1]);
		p += 2;
		size -= 2;
	}
	if (size == 1)
		acc += (uint32_t)(p[0] << 8);
	/* Fold the carries of at most 32767 words back into 32 bits now, so the
	 * unfolded sum can be carried between calls without overflow. */
	while (acc >> 32)
		acc = (acc & 0xffffffffu) + (acc >> 32);
	return (uint32_t)acc;
}

uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffffu) + (sum >> 16);
	return (uint16_t)~sum;
}

uint32_t csum_pseudo_udp4(uint32_t src_ip, uint32_t dst_ip, uint16_t udp_size)
{
	uint32_t sum = 0;

	sum += src_ip >> 16;
	sum += src_ip & 0xffffu;
	sum += dst_ip >> 16;
	sum += dst_ip & 0xffffu;
	sum += 17; /* IPPROTO_UDP */
	sum += udp_size;
	return sum;
}

uint16_t csum_pseudo_udp4_folded(uint32_t src_ip, uint32_t dst_ip, uint16_t udp_size)
{
	return (uint16_t)~csum_fold(csum_pseudo_udp4(src_ip, dst_ip, udp_size));
}
