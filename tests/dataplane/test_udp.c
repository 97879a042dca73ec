/*
 * UDP validation and frame writing: checksums in software (including the
 * "no checksum" zero and the computed-zero-sent-as-ffff rule), the offload
 * form, and every malformed length.
 */
#include "dataplane/udp.h"

#include <string.h>

#include "common/limits.h"
#include "tests/dataplane/frames.h"
#include "tests/test_util.h"

#define SEG(frame) ((frame) + ETH_HDR_SIZE + IPV4_HDR_SIZE)

static enum udp_parse_result parse(const uint8_t *frame, size_t seg_size, struct udp_view *udp)
{
	return udp_parse(SEG(frame), seg_size, FRAMES_PEER_IP, FRAMES_NODE_IP, false, udp);
}

static void test_udp_written_frame_verifies_and_reads_back(void **state)
{
	(void)state;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	struct udp_view udp;
	size_t size = frames_udp(frame, "hello", 5);
	assert_int_equal(size, UDP_FRAME_PAYLOAD_OFFSET + 5);
	assert_int_equal(parse(frame, UDP_HDR_SIZE + 5, &udp), UDP_PARSE_OK);
	assert_int_equal(udp.src_port, FRAMES_PEER_PORT);
	assert_int_equal(udp.dst_port, FRAMES_PORT);
	assert_int_equal(udp.payload_size, 5);
	assert_memory_equal(udp.payload, "hello", 5);
	assert_false(udp.csum_zero);
}

static void test_udp_largest_datagram_round_trips(void **state)
{
	(void)state;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	uint8_t payload[HASP_DATAGRAM_SIZE_MAX];
	struct udp_view udp;
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 13);
	size_t size = frames_udp(frame, payload, sizeof(payload));
	assert_int_equal(size, ETH_FRAME_SIZE_MAX);
	assert_int_equal(parse(frame, UDP_HDR_SIZE + sizeof(payload), &udp), UDP_PARSE_OK);
	assert_memory_equal(udp.payload, payload, sizeof(payload));
}

static void test_udp_any_flipped_payload_bit_fails_the_checksum(void **state)
{
	(void)state;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	struct udp_view udp;
	size_t size = frames_udp(frame, "abcdefgh", 8);
	for (size_t i = UDP_FRAME_PAYLOAD_OFFSET; i < size; i++) {
		frame[i] ^= 0x10;
		assert_int_equal(parse(frame, UDP_HDR_SIZE + 8, &udp), UDP_PARSE_BAD_CSUM);
		/* The port vouched for it: accepted without a software sum. */
		assert_int_equal(udp_parse(SEG(frame), UDP_HDR_SIZE + 8, FRAMES_PEER_IP,
					   FRAMES_NODE_IP, true, &udp),
				 UDP_PARSE_OK);
		frame[i] ^= 0x10;
	}
}

static void test_udp_wrong_pseudo_header_fails_the_checksum(void **state)
{
	(void)state;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	struct udp_view udp;
	frames_udp(frame, "abc", 3);
	assert_int_equal(udp_parse(SEG(frame), UDP_HDR_SIZE + 3, FRAMES_PEER_IP + 1,
				   FRAMES_NODE_IP, false, &udp),
			 UDP_PARSE_BAD_CSUM);
}

static void test_udp_zero_checksum_means_none_and_is_accepted(void **state)
{
	(void)state;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	struct udp_view udp;
	frames_udp(frame, "abc", 3);
	put_be16(SEG(frame) + 6, 0);
	frame[UDP_FRAME_PAYLOAD_OFFSET] ^= 1; /* unchecked, so unnoticed */
	assert_int_equal(parse(frame, UDP_HDR_SIZE + 3, &udp), UDP_PARSE_OK);
	assert_true(udp.csum_zero);
}

static void test_udp_computed_zero_is_sent_as_all_ones(void **state)
{
	(void)state;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	struct udp_view udp;
	uint8_t payload[2] = { 0, 0 };
	/* Choose the two payload bytes so the one's-complement sum is ffff,
	 * i.e. the computed checksum is zero. */
	frames_udp(frame, payload, 2);
	put_be16(SEG(frame) + 6, 0);
	uint32_t sum = csum_pseudo_udp4(FRAMES_PEER_IP, FRAMES_NODE_IP, UDP_HDR_SIZE + 2);
	uint16_t folded = (uint16_t)~csum_fold(csum_add(sum, SEG(frame), UDP_HDR_SIZE + 2));
	put_be16(payload, (uint16_t)~folded);
	frames_udp(frame, payload, 2);
	assert_int_equal(get_be16(SEG(frame) + 6), 0xffff);
	assert_int_equal(parse(frame, UDP_HDR_SIZE + 2, &udp), UDP_PARSE_OK);
	assert_false(udp.csum_zero);
}

static void test_udp_bad_lengths_are_refused(void **state)
{
	(void)state;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	struct udp_view udp;
	frames_udp(frame, "abcd", 4);
	for (size_t size = 0; size < UDP_HDR_SIZE; size++)
		assert_int_equal(parse(frame, size, &udp), UDP_PARSE_TRUNCATED);
	for (size_t size = UDP_HDR_SIZE; size < UDP_HDR_SIZE + 4; size++)
		assert_int_equal(parse(frame, size, &udp), UDP_PARSE_BAD_LENGTH);
	put_be16(SEG(frame) + 4, 7);
	assert_int_equal(parse(frame, UDP_HDR_SIZE + 4, &udp), UDP_PARSE_BAD_LENGTH);
}

static void test_udp_offload_form_holds_the_pseudo_header_sum(void **state)
{
	(void)state;
	uint8_t frame[ETH_FRAME_SIZE_MAX];
	struct udp_endpoints ep = {
		.src_mac = frames_node_mac, .dst_mac = frames_peer_mac,
		.src_ip = FRAMES_NODE_IP, .dst_ip = FRAMES_PEER_IP,
		.src_port = 1, .dst_port = 2,
	};
	udp_write_frame(frame, &ep, 4, false);
	assert_int_equal(get_be16(frame + ETH_HDR_SIZE + 10), 0);
	assert_int_equal(get_be16(SEG(frame) + 6),
			 csum_pseudo_udp4_folded(FRAMES_NODE_IP, FRAMES_PEER_IP, UDP_HDR_SIZE + 4));
}

static void test_udp_write_asserts_on_oversized_payload(void **state)
{
	(void)state;
	static uint8_t frame[ETH_FRAME_SIZE_MAX + 64];
	struct udp_endpoints ep = { 0 };
	expect_assert_failure(udp_write_frame(frame, &ep, HASP_DATAGRAM_SIZE_MAX + 1, true));
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_udp_written_frame_verifies_and_reads_back),
		cmocka_unit_test(test_udp_largest_datagram_round_trips),
		cmocka_unit_test(test_udp_any_flipped_payload_bit_fails_the_checksum),
		cmocka_unit_test(test_udp_wrong_pseudo_header_fails_the_checksum),
		cmocka_unit_test(test_udp_zero_checksum_means_none_and_is_accepted),
		cmocka_unit_test(test_udp_computed_zero_is_sent_as_all_ones),
		cmocka_unit_test(test_udp_bad_lengths_are_refused),
		cmocka_unit_test(test_udp_offload_form_holds_the_pseudo_header_sum),
		cmocka_unit_test(test_udp_write_asserts_on_oversized_payload),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
