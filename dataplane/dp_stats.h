/*
 * Per-lcore dataplane counters (docs/STYLE.md §8: counters, not logs).
 *
 * Each lcore owns one struct dp_stats and is its only writer; readers (the
 * control plane, the echo program's SIGUSR1 dump) sum them with
 * dp_stats_add() and tolerate a slightly stale view (aligned 64-bit loads
 * do not tear on x86-64). Every drop has exactly one reason; a frame counted
 * in rx_frames ends in exactly one of the rx_* outcome counters, which
 * tests check with dp_stats_rx_outcomes().
 *
 * The table is the documentation: docs/DATAPLANE.md lists the same names.
 */
#ifndef HASP_DATAPLANE_DP_STATS_H
#define HASP_DATAPLANE_DP_STATS_H

#include <stddef.h>
#include <stdint.h>

/* X(name, is_rx_outcome, help) */
#define DP_STATS_TABLE(X)                                                                   \
	X(rx_frames, 0, "frames received from the port")                                    \
	X(rx_bytes, 0, "bytes received from the port")                                      \
	X(rx_truncated, 1, "frame shorter than a header or than its length fields")         \
	X(rx_not_for_us, 1, "destination MAC neither ours nor broadcast")                   \
	X(rx_unknown_ethertype, 1, "neither IPv4 nor ARP (IPv6, VLAN tags, ...)")             \
	X(rx_arp_request, 1, "ARP request for our IP, answered")                            \
	X(rx_arp_reply, 1, "ARP reply or announcement, learned")                            \
	X(rx_arp_other, 1, "valid ARP not about us (another target)")                       \
	X(rx_arp_unsupported, 1, "ARP that is not Ethernet/IPv4 or has an unknown op")      \
	X(rx_arp_conflict, 1, "ARP from another MAC claiming our IP")                       \
	X(rx_bad_ipv4_version, 1, "IP version field is not 4")                              \
	X(rx_bad_ipv4_ihl, 1, "IPv4 header length below 20 bytes")                          \
	X(rx_bad_ipv4_len, 1, "IPv4 total length below the header size")                    \
	X(rx_bad_ipv4_csum, 1, "IPv4 header checksum fails")                                \
	X(rx_ip_options, 1, "IPv4 header with options (dropped by policy)")                 \
	X(rx_ip_fragment, 1, "IPv4 fragment (dropped by policy; we never fragment)")        \
	X(rx_ip_not_for_us, 1, "IPv4 destination is not our address")                       \
	X(rx_ip_bad_src, 1, "IPv4 source is 0, broadcast, multicast or class E")            \
	X(rx_ip_unknown_proto, 1, "IPv4 protocol neither UDP nor ICMP")                     \
	X(rx_icmp_echo, 1, "ICMP echo request, answered")                                   \
	X(rx_icmp_other, 1, "valid ICMP that is not an echo request")                       \
	X(rx_bad_icmp_csum, 1, "ICMP checksum fails")                                       \
	X(rx_bad_udp_len, 1, "UDP length field below 8 or beyond the IPv4 payload")         \
	X(rx_bad_udp_csum, 1, "UDP checksum fails")                                         \
	X(rx_unknown_port, 1, "UDP to a port without a registered handler")                 \
	X(rx_udp, 1, "UDP datagram handed to a port handler")                               \
	X(rx_udp_zero_csum, 0, "of rx_udp: sender sent no checksum (allowed on IPv4)")      \
	X(rx_multiseg, 1, "multi-segment mbuf (we never enable scatter)")                   \
	X(tx_frames, 0, "frames handed to the port")                                        \
	X(tx_bytes, 0, "bytes handed to the port")                                          \
	X(tx_udp, 0, "UDP datagrams sent (replies and initiated sends)")                    \
	X(tx_arp_reply, 0, "ARP replies sent")                                              \
	X(tx_arp_request, 0, "ARP requests and announcements sent")                         \
	X(tx_icmp_reply, 0, "ICMP echo replies sent")                                       \
	X(tx_ring_full, 0, "frames dropped because the TX queue stayed full")               \
	X(tx_no_mbuf, 0, "sends dropped because the mbuf pool was empty")                   \
	X(tx_too_big, 0, "sends refused: payload above HASP_DATAGRAM_SIZE_MAX")             \
	X(tx_no_route, 0, "sends refused: no route (off-link without gateway, own or group address)")   \
	X(tx_arp_queued, 0, "sends parked waiting for ARP resolution")                      \
	X(tx_arp_dropped, 0, "sends dropped: ARP queue full or resolution failed")          \
	X(idle_sleeps, 0, "times the lcore went to sleep waiting for traffic")              \
	X(idle_wake_ready, 0, "sleeps ended by a readable fd or a wake")                    \
	X(idle_wake_timeout, 0, "sleeps ended by the timer deadline")                       \
	X(loop_iterations, 0, "iterations of the run-to-completion loop")                   \
	X(rx_forwarded, 0, "of rx_udp: handed by an RX lcore to lcore 0's ring")            \
	X(rx_ring_full, 0, "of rx_udp: dropped, the RX lcore's ring to lcore 0 was full")   \
	X(rx_forward_no_msg, 0, "of rx_udp: dropped, no free hand-off message")              \
	X(fwd_handled, 0, "lcore 0: forwarded datagrams taken from the rings and handled")  \
	X(fwd_wakes, 0, "RX lcore: wakes written to a sleeping lcore 0")                  \
	X(post_queued, 0, "lcore 0: datagrams handed to another lcore to send")           \
	X(post_ring_full, 0, "lcore 0: datagrams not posted, the target's ring was full") \
	X(post_no_msg, 0, "lcore 0: datagrams not posted, no free message or too big") \
	X(post_handled, 0, "other lcores: posted datagrams taken from the ring and handled") \
	X(post_wakes, 0, "lcore 0: wakes written to a sleeping lcore it posted to")

struct dp_stats {
#define DP_STATS_FIELD(name, outcome, help) uint64_t name;
	DP_STATS_TABLE(DP_STATS_FIELD)
#undef DP_STATS_FIELD
};

/* The port's own counters, as its PMD reports them (rte_eth_stats_get,
 * dataplane/port.c): frames the kernel or the NIC dropped before any lcore
 * read them are only seen here. X(name, rte_eth_stats field, help). Which
 * ones a PMD fills: docs/OPERATIONS.md "Port counters". */
#define DP_PORT_STATS_TABLE(X)                                                                \
	X(rx_packets, ipackets, "frames the port delivered to the dataplane (PMD count)")        \
	X(tx_packets, opackets, "frames the port sent (PMD count)")                              \
	X(rx_missed, imissed, "frames dropped before the dataplane read them (RX ring full)")   \
	X(rx_errors, ierrors, "erroneous frames the port received")                              \
	X(rx_nombuf, rx_nombuf, "RX mbuf allocation failures")                                   \
	X(tx_errors, oerrors, "frames the port failed to send")

struct dp_port_stats {
#define DP_PORT_STATS_FIELD(name, eth_field, help) uint64_t name;
	DP_PORT_STATS_TABLE(DP_PORT_STATS_FIELD)
#undef DP_PORT_STATS_FIELD
};

/* Writes the port counters as one JSON object ({"rx_packets":1,...}).
 * Returns the length written (without the NUL), or 0 if it does not fit. */
size_t dp_port_stats_format_json(const struct dp_port_stats *stats, char *buf, size_t buf_size);

/* total += one, field by field. */
void dp_stats_add(struct dp_stats *total, const struct dp_stats *one);

/* The sum of the rx outcome counters: equals rx_frames when every frame was
 * accounted exactly once. */
uint64_t dp_stats_rx_outcomes(const struct dp_stats *stats);

/* Writes the counters as one JSON object ({"rx_frames":1,...}) into `buf`.
 * Returns the length written (without the NUL), or 0 if it does not fit. */
size_t dp_stats_format_json(const struct dp_stats *stats, char *buf, size_t buf_size);

/* Visits each counter with its name and help text (control plane, docs). */
void dp_stats_visit(const struct dp_stats *stats,
		    void (*visit)(const char *name, const char *help, uint64_t value, void *arg),
		    void *arg);

#endif
