/*
 * Big-endian (network order) field access for the packet codecs.
 *
 * hasp's own formats are little-endian (common/bytes.h); Ethernet, ARP, IPv4,
 * UDP and ICMP are big-endian. Fields are read and written byte by byte so
 * that the codecs never make unaligned or type-punned accesses into a frame
 * (UBSan checks this in the unit tests and the fuzz target).
 */
#ifndef HASP_DATAPLANE_NETBYTES_H
#define HASP_DATAPLANE_NETBYTES_H

#include <stdint.h>

static inline uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t get_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

#endif
