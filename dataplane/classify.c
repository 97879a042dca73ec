/*
 * Receive-side classification (see classify.h). Layer by layer, each parser
 * returns a reason and this file maps reasons to counters, so the parsers
 * stay free of policy and the counters stay in one place.
 */
#include "dataplane/classify.h"

#include <string.h>

#include "common/assert.h"
#include "dataplane/arp.h"
#include "dataplane/csum.h"
#include "dataplane/icmp.h"
#include "dataplane/ipv4.h"
#include "dataplane/netbytes.h"
#include "dataplane/udp.h"

static void classify_arp(const struct classify_config *cfg, uint8_t *frame, size_t frame_size,
			 struct classify_result *res, struct dp_stats *stats)
{
	struct arp_view arp;

	switch (arp_parse(frame + ETH_HDR_SIZE, frame_size - ETH_HDR_SIZE, &arp)) {
	case ARP_PARSE_OK:
		break;
	case ARP_PARSE_TRUNCATED:
		stats->rx_truncated++;
		return;
	case ARP_PARSE_UNSUPPORTED:
		stats->rx_arp_unsupported++;
		return;
	}
	if (arp.spa == cfg->ip) {
		/* Someone else claims our address (or a loop echoed ours):
		 * never learn it, and let the operator see it. */
		stats->rx_arp_conflict++;
		return;
	}
	bool learnable = !ipv4_addr_is_martian_source(arp.spa) && !eth_addr_is_multicast(&arp.sha);
	bool for_us = arp.tpa == cfg->ip;
	res->arp_learn = learnable;
	res->arp_create = learnable && for_us; /* RFC 826: add only if we are the target */
	res->arp_ip = arp.spa;
	res->arp_mac = arp.sha;
	if (for_us && arp.op == ARP_OP_REQUEST) {
		struct arp_view reply = {
			.op = ARP_OP_REPLY,
			.sha = cfg->mac,
			.spa = cfg->ip,
			.tha = arp.sha,
			.tpa = arp.spa,
		};
		if (frame_size < ETH_FRAME_SIZE_MIN) {
			/* The reply is padded to 60 bytes; a shorter request
			 * (legal on a tap, which does not pad) cannot hold it
			 * in place. Answer anyway in the first 42 bytes. */
			res->reply_size = ETH_HDR_SIZE + ARP_BODY_SIZE;
			uint8_t tmp[ETH_FRAME_SIZE_MIN];
			arp_write_frame(tmp, &arp.sha, &reply);
			memcpy(frame, tmp, res->reply_size);
		} else {
			res->reply_size = arp_write_frame(frame, &arp.sha, &reply);
		}
		res->verdict = CLASSIFY_REPLY;
		stats->rx_arp_request++;
		return;
	}
	res->verdict = CLASSIFY_CONSUMED;
	if ((for_us && arp.op == ARP_OP_REPLY) || arp.spa == arp.tpa)
		stats->rx_arp_reply++;
	else
		stats->rx_arp_other++;
}

static bool classify_ipv4_ok(enum ipv4_parse_result r, struct dp_stats *stats)
{
	switch (r) {
	case IPV4_PARSE_OK:
		return true;
	case IPV4_PARSE_TRUNCATED:
		stats->rx_truncated++;
		return false;
	case IPV4_PARSE_BAD_VERSION:
		stats->rx_bad_ipv4_version++;
		return false;
	case IPV4_PARSE_BAD_IHL:
		stats->rx_bad_ipv4_ihl++;
		return false;
	case IPV4_PARSE_BAD_LENGTH:
		stats->rx_bad_ipv4_len++;
		return false;
	case IPV4_PARSE_OPTIONS:
		stats->rx_ip_options++;
		return false;
	case IPV4_PARSE_FRAGMENT:
		stats->rx_ip_fragment++;
		return false;
	case IPV4_PARSE_BAD_CSUM:
		stats->rx_bad_ipv4_csum++;
		return false;
	}
	HASP_UNREACHABLE();
	return false;
}

static void classify_icmp(const struct classify_config *cfg, uint8_t *frame,
			  const struct ipv4_view *ip, struct classify_result *res,
			  struct dp_stats *stats)
{
	uint8_t *iph = frame + ETH_HDR_SIZE;
	uint8_t *msg = iph + IPV4_HDR_SIZE;

	switch (icmp_parse(ip->payload, ip->payload_size)) {
	case ICMP_PARSE_ECHO_REQUEST:
		break;
	case ICMP_PARSE_TRUNCATED:
		stats->rx_truncated++;
		return;
	case ICMP_PARSE_BAD_CSUM:
		stats->rx_bad_icmp_csum++;
		return;
	case ICMP_PARSE_OTHER:
		stats->rx_icmp_other++;
		return;
	}
	struct eth_addr peer_mac;
	memcpy(peer_mac.bytes, frame + 6, ETH_ADDR_SIZE);
	eth_write(frame, &peer_mac, &cfg->mac, ETH_TYPE_IPV4);
	ipv4_write_header(iph, cfg->ip, ip->src, IPV4_PROTO_ICMP, ip->payload_size, true);
	icmp_echo_reply_in_place(msg, ip->payload_size);
	res->verdict = CLASSIFY_REPLY;
	res->reply_size = ETH_HDR_SIZE + ip->total_size;
	stats->rx_icmp_echo++;
}

static void classify_udp(const struct classify_config *cfg, const uint8_t *frame,
			 const struct ipv4_view *ip, const struct classify_hints *hints,
			 struct classify_result *res, struct dp_stats *stats)
{
	struct udp_view udp;

	if (hints->l4_csum == CLASSIFY_CSUM_BAD) {
		stats->rx_bad_udp_csum++;
		return;
	}
	switch (udp_parse(ip->payload, ip->payload_size, ip->src, ip->dst,
			  hints->l4_csum == CLASSIFY_CSUM_GOOD, &udp)) {
	case UDP_PARSE_OK:
		break;
	case UDP_PARSE_TRUNCATED:
		stats->rx_truncated++;
		return;
	case UDP_PARSE_BAD_LENGTH:
		stats->rx_bad_udp_len++;
		return;
	case UDP_PARSE_BAD_CSUM:
		stats->rx_bad_udp_csum++;
		return;
	}
	for (uint32_t i = 0; i < cfg->port_count; i++) {
		if (cfg->ports[i] != udp.dst_port)
			continue;
		memcpy(res->udp.src_mac.bytes, frame + 6, ETH_ADDR_SIZE);
		res->udp.src_ip = ip->src;
		res->udp.dst_ip = ip->dst;
		res->udp.src_port = udp.src_port;
		res->udp.dst_port = udp.dst_port;
		res->udp.port_index = i;
		res->udp.payload = udp.payload;
		res->udp.payload_size = udp.payload_size;
		res->verdict = CLASSIFY_UDP;
		stats->rx_udp++;
		stats->rx_udp_zero_csum += udp.csum_zero;
		return;
	}
	stats->rx_unknown_port++;
}

static void classify_ipv4(const struct classify_config *cfg, uint8_t *frame, size_t frame_size,
			  const struct classify_hints *hints, struct classify_result *res,
			  struct dp_stats *stats)
{
	struct ipv4_view ip;
	const uint8_t *pkt = frame + ETH_HDR_SIZE;
	size_t pkt_size = frame_size - ETH_HDR_SIZE;

	if (hints->ip_csum == CLASSIFY_CSUM_BAD) {
		stats->rx_bad_ipv4_csum++;
		return;
	}
	if (!classify_ipv4_ok(ipv4_parse(pkt, pkt_size, hints->ip_csum == CLASSIFY_CSUM_GOOD, &ip),
			      stats))
		return;
	if (ip.dst != cfg->ip) {
		stats->rx_ip_not_for_us++;
		return;
	}
	if (ipv4_addr_is_martian_source(ip.src)) {
		stats->rx_ip_bad_src++;
		return;
	}
	if (ip.proto == IPV4_PROTO_UDP)
		classify_udp(cfg, frame, &ip, hints, res, stats);
	else if (ip.proto == IPV4_PROTO_ICMP)
		classify_icmp(cfg, frame, &ip, res, stats);
	else
		stats->rx_ip_unknown_proto++;
}

void classify_frame(const struct classify_config *cfg, uint8_t *frame, size_t frame_size,
		    const struct classify_hints *hints, struct classify_result *res,
		    struct dp_stats *stats)
{
	static const struct classify_hints no_hints;
	struct eth_hdr_view eth;

	HASP_ASSERT(cfg != NULL && res != NULL && stats != NULL);
	HASP_ASSERT(frame != NULL || frame_size == 0);
	HASP_ASSERT(cfg->port_count <= CLASSIFY_PORTS_MAX);
#ifdef HASP_DEBUG_ASSERTS
	uint64_t outcomes_before = dp_stats_rx_outcomes(stats);
#endif
	memset(res, 0, sizeof(*res));
	res->verdict = CLASSIFY_DROP;
	if (hints == NULL)
		hints = &no_hints;
	stats->rx_frames++;
	stats->rx_bytes += frame_size;

	if (!eth_parse(frame, frame_size, &eth)) {
		stats->rx_truncated++;
	} else if (!eth_addr_equal(&eth.dst, &cfg->mac) && !eth_addr_is_broadcast(&eth.dst)) {
		stats->rx_not_for_us++;
	} else if (eth.type == ETH_TYPE_ARP) {
		classify_arp(cfg, frame, frame_size, res, stats);
	} else if (eth.type == ETH_TYPE_IPV4) {
		classify_ipv4(cfg, frame, frame_size, hints, res, stats);
	} else {
		stats->rx_unknown_ethertype++;
	}
#ifdef HASP_DEBUG_ASSERTS
	/* Exactly one outcome per frame (dp_stats.h). */
	HASP_DASSERT(dp_stats_rx_outcomes(stats) == outcomes_before + 1);
#endif
	HASP_ASSERT(res->verdict != CLASSIFY_REPLY || res->reply_size <= frame_size);
}
