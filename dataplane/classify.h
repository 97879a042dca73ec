/*
 * The packet classifier: one received Ethernet frame in, one verdict out.
 *
 * This is the whole receive-side protocol logic of the dataplane, written on
 * a plain byte buffer with no DPDK types so that it is unit-tested and fuzzed
 * under ASan on malloc'd memory (ASan cannot see inside mbufs). The lcore
 * loop calls it for each frame of an RX burst and acts on the verdict:
 *
 *   CLASSIFY_DROP    count already bumped (one reason per frame); free it.
 *   CLASSIFY_REPLY   the frame was rewritten IN PLACE into a reply (ARP
 *                    reply, ICMP echo reply) of reply_size bytes; send it.
 *   CLASSIFY_UDP     a datagram for registered port ports[port_index]; the
 *                    udp fields point into the frame, valid while it lives.
 *   CLASSIFY_CONSUMED nothing to send (e.g. an ARP reply that was learned).
 *
 * Independently of the verdict, `arp_learn` asks the caller to feed
 * (arp_ip, arp_mac) into its ARP cache: create an entry if `arp_create`,
 * otherwise only refresh an existing one (RFC 826 "merge").
 *
 * Every frame increments rx_frames and exactly one rx_* outcome counter.
 */
#ifndef HASP_DATAPLANE_CLASSIFY_H
#define HASP_DATAPLANE_CLASSIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/dp_stats.h"
#include "dataplane/eth.h"

/* UDP ports one node listens on: client port, raft peer port, admin, and
 * later one per shard. A linear scan of a handful is faster than a table. */
#define CLASSIFY_PORTS_MAX 16u

struct classify_config {
	struct eth_addr mac; /* our own MAC: never the tap's (the MAC trap) */
	uint32_t ip;         /* our IPv4 address, host order */
	uint16_t ports[CLASSIFY_PORTS_MAX];
	uint32_t port_count;
};

/* What the port already knows about checksums of this frame (mbuf ol_flags).
 * UNKNOWN makes the classifier verify in software. */
enum classify_csum {
	CLASSIFY_CSUM_UNKNOWN = 0,
	CLASSIFY_CSUM_GOOD,
	CLASSIFY_CSUM_BAD,
};

struct classify_hints {
	enum classify_csum ip_csum;
	enum classify_csum l4_csum;
};

enum classify_verdict {
	CLASSIFY_DROP = 0,
	CLASSIFY_REPLY,
	CLASSIFY_UDP,
	CLASSIFY_CONSUMED,
};

struct classify_udp {
	struct eth_addr src_mac;
	uint32_t src_ip;
	uint32_t dst_ip;
	uint16_t src_port;
	uint16_t dst_port;
	uint32_t port_index; /* index into classify_config.ports */
	const uint8_t *payload;
	uint16_t payload_size;
};

struct classify_result {
	enum classify_verdict verdict;
	size_t reply_size; /* CLASSIFY_REPLY only */
	struct classify_udp udp; /* CLASSIFY_UDP only */
	bool arp_learn;
	bool arp_create;
	uint32_t arp_ip;
	struct eth_addr arp_mac;
};

/* Classifies `frame` (`frame_size` bytes, which the caller may write: replies
 * are built in place). `hints` may be NULL (verify everything). Counts into
 * `stats`. */
void classify_frame(const struct classify_config *cfg, uint8_t *frame, size_t frame_size,
		    const struct classify_hints *hints, struct classify_result *res,
		    struct dp_stats *stats);

#endif
