/*
 * The classifier: each kind of frame gets its verdict and exactly one
 * counter; replies are built in place and valid; malformed frames at every
 * truncation length are dropped as truncated; random damage never breaks
 * the one-outcome-per-frame accounting. Frames live in malloc'd buffers of
 * their exact size so ASan sees any read past the end.
 */
#include "dataplane/classify.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/prng.h"
#include "tests/dataplane/frames.h"
#include "tests/test_util.h"

struct fixture {
	struct classify_config cfg;
	struct dp_stats stats;
	struct classify_result res;
};

/* Classifies a copy of `frame` in an exact-size heap buffer; the (possibly
 * rewritten) bytes are copied back so tests can inspect replies. */
static enum classify_verdict run(struct fixture *fx, uint8_t *frame, size_t size,
				 const struct classify_hints *hints)
{
	uint8_t *copy = size > 0 ? hasp_alloc(size) : NULL;
	if (size > 0) {
		assert_non_null(copy);
		memcpy(copy, frame, size);
	}
	classify_frame(&fx->cfg, copy, size, hints, &fx->res, &fx->stats);
	if (size > 0)
		memcpy(frame, copy, size);
	/* Payload pointers point into the copy: rebase them on `frame`. */
	if (fx->res.verdict == CLASSIFY_UDP)
		fx->res.udp.payload = frame + (fx->res.udp.payload - copy);
	hasp_free(copy);
	assert_int_equal(dp_stats_rx_outcomes(&fx->stats), fx->stats.rx_frames);
	return fx->res.verdict;
}

static void init(struct fixture *fx)
{
	memset(fx, 0, sizeof(*fx));
	frames_config(&fx->cfg);
}

static void test_classify_udp_to_our_port_is_delivered(void **state)
{
	(void)state;
	struct fixture fx;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	init(&fx);
	size_t size = frames_udp(frame, "lock", 4);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_UDP);
	assert_int_equal(fx.res.udp.src_ip, FRAMES_PEER_IP);
	assert_int_equal(fx.res.udp.dst_ip, FRAMES_NODE_IP);
	assert_int_equal(fx.res.udp.src_port, FRAMES_PEER_PORT);
	assert_int_equal(fx.res.udp.dst_port, FRAMES_PORT);
	assert_int_equal(fx.res.udp.port_index, 0);
	assert_int_equal(fx.res.udp.payload_size, 4);
	assert_memory_equal(fx.res.udp.payload, "lock", 4);
	assert_true(eth_addr_equal(&fx.res.udp.src_mac, &frames_peer_mac));
	assert_false(fx.res.arp_learn);
	assert_int_equal(fx.stats.rx_udp, 1);
	assert_int_equal(fx.stats.rx_bytes, size);

	/* The second registered port has index 1. */
	put_be16(frame + ETH_HDR_SIZE + IPV4_HDR_SIZE + 2, FRAMES_PORT + 1);
	put_be16(frame + ETH_HDR_SIZE + IPV4_HDR_SIZE + 6, 0);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_UDP);
	assert_int_equal(fx.res.udp.port_index, 1);
	assert_int_equal(fx.stats.rx_udp_zero_csum, 1);
}

static void test_classify_udp_to_unknown_port_is_counted(void **state)
{
	(void)state;
	struct fixture fx;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	init(&fx);
	size_t size = frames_udp(frame, "x", 1);
	put_be16(frame + ETH_HDR_SIZE + IPV4_HDR_SIZE + 2, 9);
	put_be16(frame + ETH_HDR_SIZE + IPV4_HDR_SIZE + 6, 0);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_DROP);
	assert_int_equal(fx.stats.rx_unknown_port, 1);
}

static void test_classify_drops_frames_for_other_macs_even_the_taps(void **state)
{
	(void)state;
	struct fixture fx;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	const struct eth_addr tap_mac = { { 0x5a, 0x11, 0x22, 0x33, 0x44, 0x55 } };
	const struct eth_addr ipv6_mcast = { { 0x33, 0x33, 0, 0, 0, 1 } };
	init(&fx);
	size_t size = frames_udp(frame, "x", 1);
	memcpy(frame, tap_mac.bytes, ETH_ADDR_SIZE);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_DROP);
	memcpy(frame, ipv6_mcast.bytes, ETH_ADDR_SIZE);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_DROP);
	assert_int_equal(fx.stats.rx_not_for_us, 2);
	/* Broadcast is accepted at layer 2; the IP layer decides. */
	memcpy(frame, eth_addr_broadcast.bytes, ETH_ADDR_SIZE);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_UDP);
}

static void test_classify_unknown_ethertypes_are_counted(void **state)
{
	(void)state;
	struct fixture fx;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	init(&fx);
	size_t size = frames_udp(frame, "x", 1);
	put_be16(frame + 12, 0x86dd); /* IPv6 */
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_DROP);
	put_be16(frame + 12, 0x8100); /* 802.1Q tag */
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_DROP);
	assert_int_equal(fx.stats.rx_unknown_ethertype, 2);
}

static void test_classify_arp_request_for_us_is_answered_in_place(void **state)
{
	(void)state;
	struct fixture fx;
	uint8_t frame[ETH_FRAME_SIZE_MIN];
	struct arp_view arp;
	struct eth_hdr_view eth;
	init(&fx);
	size_t size = frames_arp_request(frame, FRAMES_NODE_IP);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_REPLY);
	assert_int_equal(fx.res.reply_size, ETH_FRAME_SIZE_MIN);
	assert_true(fx.res.arp_learn && fx.res.arp_create);
	assert_int_equal(fx.res.arp_ip, FRAMES_PEER_IP);
	assert_true(eth_addr_equal(&fx.res.arp_mac, &frames_peer_mac));
	assert_true(eth_parse(frame, size, &eth));
	assert_true(eth_addr_equal(&eth.dst, &frames_peer_mac));
	/* Our own MAC, never the tap's (the MAC trap). */
	assert_true(eth_addr_equal(&eth.src, &frames_node_mac));
	assert_int_equal(arp_parse(frame + ETH_HDR_SIZE, ARP_BODY_SIZE, &arp), ARP_PARSE_OK);
	assert_int_equal(arp.op, ARP_OP_REPLY);
	assert_true(eth_addr_equal(&arp.sha, &frames_node_mac));
	assert_int_equal(arp.spa, FRAMES_NODE_IP);
	assert_true(eth_addr_equal(&arp.tha, &frames_peer_mac));
	assert_int_equal(arp.tpa, FRAMES_PEER_IP);
	assert_int_equal(fx.stats.rx_arp_request, 1);

	/* An unpadded 42-byte request (a tap does not pad) is answered too. */
	size = frames_arp_request(frame, FRAMES_NODE_IP);
	assert_int_equal(run(&fx, frame, ARP_FRAME_SIZE, NULL), CLASSIFY_REPLY);
	assert_int_equal(fx.res.reply_size, ARP_FRAME_SIZE);
	assert_int_equal(arp_parse(frame + ETH_HDR_SIZE, ARP_BODY_SIZE, &arp), ARP_PARSE_OK);
	assert_int_equal(arp.op, ARP_OP_REPLY);
}

static void test_classify_arp_about_others_only_refreshes(void **state)
{
	(void)state;
	struct fixture fx;
	uint8_t frame[ETH_FRAME_SIZE_MIN];
	struct arp_view arp;
	init(&fx);
	size_t size = frames_arp_request(frame, FRAMES_NODE_IP + 5);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_CONSUMED);
	assert_true(fx.res.arp_learn);
	assert_false(fx.res.arp_create);
	assert_int_equal(fx.stats.rx_arp_other, 1);

	/* A reply addressed to us is learned with create. */
	arp_make_request(&arp, &frames_peer_mac, FRAMES_PEER_IP, FRAMES_NODE_IP);
	arp.op = ARP_OP_REPLY;
	arp.tha = frames_node_mac;
	arp_write_frame(frame, &frames_node_mac, &arp);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_CONSUMED);
	assert_true(fx.res.arp_learn && fx.res.arp_create);
	assert_int_equal(fx.stats.rx_arp_reply, 1);

	/* A gratuitous announcement refreshes without creating. */
	arp_make_announce(&arp, &frames_peer_mac, FRAMES_PEER_IP);
	arp_write_frame(frame, &eth_addr_broadcast, &arp);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_CONSUMED);
	assert_true(fx.res.arp_learn);
	assert_false(fx.res.arp_create);
	assert_int_equal(fx.stats.rx_arp_reply, 2);
}

static void test_classify_arp_claiming_our_ip_is_a_conflict_not_learned(void **state)
{
	(void)state;
	struct fixture fx;
	uint8_t frame[ETH_FRAME_SIZE_MIN];
	struct arp_view arp;
	init(&fx);
	arp_make_announce(&arp, &frames_peer_mac, FRAMES_NODE_IP);
	size_t size = arp_write_frame(frame, &eth_addr_broadcast, &arp);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_DROP);
	assert_false(fx.res.arp_learn);
	assert_int_equal(fx.stats.rx_arp_conflict, 1);
	/* An ARP probe (sender 0.0.0.0) for us is answered, never learned. */
	arp_make_request(&arp, &frames_peer_mac, 0, FRAMES_NODE_IP);
	arp_write_frame(frame, &eth_addr_broadcast, &arp);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_REPLY);
	assert_false(fx.res.arp_learn);
	/* Foreign hardware type. */
	frames_arp_request(frame, FRAMES_NODE_IP);
	frame[ETH_HDR_SIZE + 1] = 6;
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_DROP);
	assert_int_equal(fx.stats.rx_arp_unsupported, 1);
}

static void test_classify_ping_is_answered_in_place(void **state)
{
	(void)state;
	struct fixture fx;
	uint8_t frame[256], request[256];
	struct ipv4_view ip;
	struct eth_hdr_view eth;
	init(&fx);
	size_t size = frames_icmp_echo(frame, 0x42, 3, 56);
	memcpy(request, frame, size);
	/* Ethernet padding after the IP packet is not echoed back. */
	memset(frame + size, 0, 4);
	assert_int_equal(run(&fx, frame, size + 4, NULL), CLASSIFY_REPLY);
	assert_int_equal(fx.res.reply_size, size);
	assert_true(eth_parse(frame, size, &eth));
	assert_true(eth_addr_equal(&eth.dst, &frames_peer_mac));
	assert_true(eth_addr_equal(&eth.src, &frames_node_mac));
	assert_int_equal(ipv4_parse(frame + ETH_HDR_SIZE, size - ETH_HDR_SIZE, false, &ip),
			 IPV4_PARSE_OK);
	assert_int_equal(ip.src, FRAMES_NODE_IP);
	assert_int_equal(ip.dst, FRAMES_PEER_IP);
	assert_int_equal(ip.proto, IPV4_PROTO_ICMP);
	const uint8_t *msg = frame + ETH_HDR_SIZE + IPV4_HDR_SIZE;
	assert_int_equal(msg[0], ICMP_TYPE_ECHO_REPLY);
	assert_int_equal(csum_fold(csum_add(0, msg, ip.payload_size)), 0);
	assert_memory_equal(msg + 4, request + ETH_HDR_SIZE + IPV4_HDR_SIZE + 4, 4 + 56);
	assert_int_equal(fx.stats.rx_icmp_echo, 1);
}

static void test_classify_ipv4_faults_map_to_their_counters(void **state)
{
	(void)state;
	struct fixture fx;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	uint8_t *h = frame + ETH_HDR_SIZE;
	size_t size;
	init(&fx);

	size = frames_udp(frame, "x", 1);
	h[11] ^= 1;
	run(&fx, frame, size, NULL);
	assert_int_equal(fx.stats.rx_bad_ipv4_csum, 1);

	size = frames_udp(frame, "x", 1);
	put_be16(h + 6, IPV4_FLAG_MF);
	frames_fix_ipv4_csum(frame);
	run(&fx, frame, size, NULL);
	assert_int_equal(fx.stats.rx_ip_fragment, 1);

	size = frames_udp(frame, "x", 1);
	h[0] = 0x46;
	frames_fix_ipv4_csum(frame);
	run(&fx, frame, size, NULL);
	assert_int_equal(fx.stats.rx_ip_options, 1);

	size = frames_udp(frame, "x", 1);
	h[0] = 0x65;
	run(&fx, frame, size, NULL);
	assert_int_equal(fx.stats.rx_bad_ipv4_version, 1);

	size = frames_udp(frame, "x", 1);
	h[0] = 0x43;
	run(&fx, frame, size, NULL);
	assert_int_equal(fx.stats.rx_bad_ipv4_ihl, 1);

	size = frames_udp(frame, "x", 1);
	put_be16(h + 2, 10);
	frames_fix_ipv4_csum(frame);
	run(&fx, frame, size, NULL);
	assert_int_equal(fx.stats.rx_bad_ipv4_len, 1);

	size = frames_udp(frame, "x", 1);
	put_be32(h + 16, FRAMES_NODE_IP + 1);
	frames_fix_ipv4_csum(frame);
	run(&fx, frame, size, NULL);
	assert_int_equal(fx.stats.rx_ip_not_for_us, 1);

	size = frames_udp(frame, "x", 1);
	put_be32(h + 12, 0xffffffffu);
	frames_fix_ipv4_csum(frame);
	run(&fx, frame, size, NULL);
	assert_int_equal(fx.stats.rx_ip_bad_src, 1);

	size = frames_udp(frame, "x", 1);
	h[9] = 6; /* TCP */
	frames_fix_ipv4_csum(frame);
	run(&fx, frame, size, NULL);
	assert_int_equal(fx.stats.rx_ip_unknown_proto, 1);

	assert_int_equal(fx.stats.rx_frames, 9);
}

static void test_classify_udp_faults_and_port_checksum_hints(void **state)
{
	(void)state;
	struct fixture fx;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	uint8_t *seg = frame + ETH_HDR_SIZE + IPV4_HDR_SIZE;
	const struct classify_hints good = { CLASSIFY_CSUM_GOOD, CLASSIFY_CSUM_GOOD };
	const struct classify_hints l4_bad = { CLASSIFY_CSUM_GOOD, CLASSIFY_CSUM_BAD };
	const struct classify_hints ip_bad = { CLASSIFY_CSUM_BAD, CLASSIFY_CSUM_UNKNOWN };
	init(&fx);

	size_t size = frames_udp(frame, "abc", 3);
	seg[8] ^= 1;
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_DROP);
	assert_int_equal(fx.stats.rx_bad_udp_csum, 1);
	assert_int_equal(run(&fx, frame, size, &good), CLASSIFY_UDP);
	size = frames_udp(frame, "abc", 3);
	assert_int_equal(run(&fx, frame, size, &l4_bad), CLASSIFY_DROP);
	assert_int_equal(fx.stats.rx_bad_udp_csum, 2);
	assert_int_equal(run(&fx, frame, size, &ip_bad), CLASSIFY_DROP);
	assert_int_equal(fx.stats.rx_bad_ipv4_csum, 1);

	size = frames_udp(frame, "abc", 3);
	put_be16(seg + 4, 4);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_DROP);
	put_be16(seg + 4, 200);
	assert_int_equal(run(&fx, frame, size, NULL), CLASSIFY_DROP);
	assert_int_equal(fx.stats.rx_bad_udp_len, 2);
}

/* Every proper prefix of a valid UDP, ICMP or ARP frame is truncated: it is
 * dropped as such (ARP prefixes that still hold the 28-byte body are whole
 * requests: the rest is padding). */
static void test_classify_every_truncation_is_dropped_as_truncated(void **state)
{
	(void)state;
	struct fixture fx;
	uint8_t frames[3][ETH_FRAME_SIZE_MAX];
	size_t sizes[3];
	init(&fx);
	sizes[0] = frames_udp(frames[0], "payload!", 8);
	sizes[1] = frames_icmp_echo(frames[1], 1, 2, 24);
	sizes[2] = frames_arp_request(frames[2], FRAMES_NODE_IP);
	for (int k = 0; k < 3; k++) {
		for (size_t cut = 0; cut < sizes[k]; cut++) {
			uint8_t frame[ETH_FRAME_SIZE_MAX];
			uint64_t before = fx.stats.rx_truncated;
			memcpy(frame, frames[k], sizes[k]);
			enum classify_verdict v = run(&fx, frame, cut, NULL);
			if (k == 2 && cut >= ARP_FRAME_SIZE) {
				assert_int_equal(v, CLASSIFY_REPLY);
				continue;
			}
			assert_int_equal(v, CLASSIFY_DROP);
			assert_int_equal(fx.stats.rx_truncated, before + 1);
		}
	}
}

/* Random damage to valid frames: never a crash, never a read past the end,
 * always exactly one outcome, replies never longer than the frame. */
static void test_classify_random_damage_keeps_accounting_exact(void **state)
{
	(void)state;
	struct fixture fx;
	struct prng p;
	uint64_t seed = test_util_seed(5);
	uint8_t base[3][ETH_FRAME_SIZE_MAX];
	size_t sizes[3];

	print_message("seed=%llu\n", (unsigned long long)seed);
	prng_seed(&p, seed);
	init(&fx);
	sizes[0] = frames_udp(base[0], "0123456789abcdef", 16);
	sizes[1] = frames_icmp_echo(base[1], 9, 9, 40);
	sizes[2] = frames_arp_request(base[2], FRAMES_NODE_IP);
	for (int round = 0; round < 20000; round++) {
		uint8_t frame[ETH_FRAME_SIZE_MAX];
		int k = (int)prng_below(&p, 3);
		size_t size = sizes[k];
		memcpy(frame, base[k], size);
		for (uint64_t flips = prng_range(&p, 1, 4); flips > 0; flips--)
			frame[prng_below(&p, size)] ^= (uint8_t)(1u << prng_below(&p, 8));
		if (prng_chance(&p, 250000))
			size = (size_t)prng_below(&p, size + 1);
		enum classify_verdict v = run(&fx, frame, size, NULL);
		if (v == CLASSIFY_REPLY)
			assert_true(fx.res.reply_size <= size);
	}
	assert_int_equal(fx.stats.rx_frames, 20000);
}

static void test_classify_stats_format_as_json(void **state)
{
	(void)state;
	struct dp_stats a = { 0 }, b = { 0 };
	char buf[4096];
	a.rx_frames = 3;
	b.rx_frames = 4;
	b.tx_udp = 2;
	dp_stats_add(&a, &b);
	size_t n = dp_stats_format_json(&a, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(strlen(buf), n);
	assert_non_null(strstr(buf, "{\"rx_frames\":7,"));
	assert_non_null(strstr(buf, "\"tx_udp\":2"));
	assert_int_equal(buf[n - 1], '}');
	assert_int_equal(dp_stats_format_json(&a, buf, 20), 0);
	assert_string_equal(buf, "");
}

static void test_port_stats_json_is_whole_or_empty(void **state)
{
	struct dp_port_stats ps = { .rx_packets = 5, .tx_packets = 4, .rx_missed = 3,
				    .rx_errors = 0, .rx_nombuf = 2, .tx_errors = 1 };
	const char *want = "{\"rx_packets\":5,\"tx_packets\":4,\"rx_missed\":3,"
			   "\"rx_errors\":0,\"rx_nombuf\":2,\"tx_errors\":1}";
	char buf[256];
	(void)state;

	assert_int_equal(dp_port_stats_format_json(&ps, buf, sizeof(buf)), strlen(want));
	assert_string_equal(buf, want);
	/* Room for everything but the closing brace, or but its NUL: nothing. */
	assert_int_equal(dp_port_stats_format_json(&ps, buf, strlen(want)), 0);
	assert_string_equal(buf, "");
	assert_int_equal(dp_port_stats_format_json(&ps, buf, strlen(want) - 1), 0);
	assert_string_equal(buf, "");
	assert_int_equal(dp_port_stats_format_json(&ps, buf, strlen(want) + 1), strlen(want));
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classify_udp_to_our_port_is_delivered),
		cmocka_unit_test(test_port_stats_json_is_whole_or_empty),
		cmocka_unit_test(test_classify_udp_to_unknown_port_is_counted),
		cmocka_unit_test(test_classify_drops_frames_for_other_macs_even_the_taps),
		cmocka_unit_test(test_classify_unknown_ethertypes_are_counted),
		cmocka_unit_test(test_classify_arp_request_for_us_is_answered_in_place),
		cmocka_unit_test(test_classify_arp_about_others_only_refreshes),
		cmocka_unit_test(test_classify_arp_claiming_our_ip_is_a_conflict_not_learned),
		cmocka_unit_test(test_classify_ping_is_answered_in_place),
		cmocka_unit_test(test_classify_ipv4_faults_map_to_their_counters),
		cmocka_unit_test(test_classify_udp_faults_and_port_checksum_hints),
		cmocka_unit_test(test_classify_every_truncation_is_dropped_as_truncated),
		cmocka_unit_test(test_classify_random_damage_keeps_accounting_exact),
		cmocka_unit_test(test_classify_stats_format_as_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
