/*
 * The Internet checksum (RFC 1071) in software.
 *
 * Used to verify and fill IPv4 header, UDP and ICMP checksums when the port
 * does not offload them (net_af_packet advertises no offload) and by the
 * unit tests and fuzz targets, which run on malloc'd buffers outside the EAL.
 * Sums are kept unfolded in 32 bits between calls so that a pseudo-header
 * and a payload can be summed separately, then folded once.
 */
#ifndef HASP_DATAPLANE_CSUM_H
#define HASP_DATAPLANE_CSUM_H

#include <stddef.h>
#include <stdint.h>

/* Adds `size` bytes at `data` (big-endian 16-bit words, odd tail padded with
 * zero) to the running sum `sum` and returns the new unfolded sum. */
uint32_t csum_add(uint32_t sum, const void *data, size_t size);

/* Folds a running sum to 16 bits and complements it: the value to store in a
 * checksum field (host order). A packet whose stored checksum is included in
 * the sum verifies when csum_fold() returns 0. */
uint16_t csum_fold(uint32_t sum);

/* The IPv4 pseudo-header sum for UDP (RFC 768): addresses and length in host
 * order, protocol 17. Unfolded; add the UDP header and payload to it. */
uint32_t csum_pseudo_udp4(uint32_t src_ip, uint32_t dst_ip, uint16_t udp_size);

/* The folded (not complemented) pseudo-header sum in host order: what a NIC
 * with UDP checksum offload expects in the UDP checksum field. */
uint16_t csum_pseudo_udp4_folded(uint32_t src_ip, uint32_t dst_ip, uint16_t udp_size);

#endif
