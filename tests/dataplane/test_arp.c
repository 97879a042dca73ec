/*
 * ARP codec: requests, announcements and replies round-trip; truncated and
 * foreign (non Ethernet/IPv4) packets are refused with the right reason.
 */
#include "dataplane/arp.h"

#include <string.h>

#include "tests/dataplane/frames.h"
#include "tests/test_util.h"

static void test_arp_request_round_trips_and_is_padded(void **state)
{
	(void)state;
	uint8_t frame[ETH_FRAME_SIZE_MIN];
	struct arp_view arp;
	struct eth_hdr_view eth;

	memset(frame, 0xee, sizeof(frame));
	assert_int_equal(frames_arp_request(frame, FRAMES_NODE_IP), ETH_FRAME_SIZE_MIN);
	assert_true(eth_parse(frame, sizeof(frame), &eth));
	assert_true(eth_addr_is_broadcast(&eth.dst));
	assert_true(eth_addr_equal(&eth.src, &frames_peer_mac));
	assert_int_equal(eth.type, ETH_TYPE_ARP);
	assert_int_equal(arp_parse(frame + ETH_HDR_SIZE, ARP_BODY_SIZE, &arp), ARP_PARSE_OK);
	assert_int_equal(arp.op, ARP_OP_REQUEST);
	assert_int_equal(arp.spa, FRAMES_PEER_IP);
	assert_int_equal(arp.tpa, FRAMES_NODE_IP);
	assert_true(eth_addr_equal(&arp.sha, &frames_peer_mac));
	assert_true(eth_addr_is_zero(&arp.tha));
	for (size_t i = ARP_FRAME_SIZE; i < ETH_FRAME_SIZE_MIN; i++)
		assert_int_equal(frame[i], 0);
}

static void test_arp_announce_names_itself_as_target(void **state)
{
	(void)state;
	struct arp_view arp;
	arp_make_announce(&arp, &frames_node_mac, FRAMES_NODE_IP);
	assert_int_equal(arp.op, ARP_OP_REQUEST);
	assert_int_equal(arp.spa, FRAMES_NODE_IP);
	assert_int_equal(arp.tpa, FRAMES_NODE_IP);
}

static void test_arp_parse_refuses_every_truncation(void **state)
{
	(void)state;
	uint8_t frame[ETH_FRAME_SIZE_MIN];
	struct arp_view arp;
	frames_arp_request(frame, FRAMES_NODE_IP);
	for (size_t size = 0; size < ARP_BODY_SIZE; size++)
		assert_int_equal(arp_parse(frame + ETH_HDR_SIZE, size, &arp), ARP_PARSE_TRUNCATED);
}

static void test_arp_parse_refuses_foreign_types_and_ops(void **state)
{
	(void)state;
	uint8_t frame[ETH_FRAME_SIZE_MIN];
	struct arp_view arp;
	const size_t fields[] = { 1 /* htype */, 3 /* ptype */, 4 /* hlen */, 5 /* plen */, 7 /* op */ };

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		frames_arp_request(frame, FRAMES_NODE_IP);
		frame[ETH_HDR_SIZE + fields[i]] ^= 0x40;
		assert_int_equal(arp_parse(frame + ETH_HDR_SIZE, ARP_BODY_SIZE, &arp),
				 ARP_PARSE_UNSUPPORTED);
	}
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arp_request_round_trips_and_is_padded),
		cmocka_unit_test(test_arp_announce_names_itself_as_target),
		cmocka_unit_test(test_arp_parse_refuses_every_truncation),
		cmocka_unit_test(test_arp_parse_refuses_foreign_types_and_ops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
