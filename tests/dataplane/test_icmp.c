/*
 * ICMP echo: requests are recognised, damaged ones refused, and the in-place
 * reply keeps identifier, sequence and data with a valid checksum.
 */
#include "dataplane/icmp.h"

#include <string.h>

#include "tests/dataplane/frames.h"
#include "tests/test_util.h"

#define MSG(frame) ((frame) + ETH_HDR_SIZE + IPV4_HDR_SIZE)

static void test_icmp_echo_request_is_recognised(void **state)
{
	(void)state;
	uint8_t frame[256];
	frames_icmp_echo(frame, 7, 9, 56);
	assert_int_equal(icmp_parse(MSG(frame), ICMP_HDR_SIZE + 56), ICMP_PARSE_ECHO_REQUEST);
}

static void test_icmp_reply_in_place_keeps_id_seq_data(void **state)
{
	(void)state;
	uint8_t frame[256], before[256];
	frames_icmp_echo(frame, 0x1234, 0x5678, 33); /* odd size */
	memcpy(before, frame, sizeof(frame));
	icmp_echo_reply_in_place(MSG(frame), ICMP_HDR_SIZE + 33);
	assert_int_equal(MSG(frame)[0], ICMP_TYPE_ECHO_REPLY);
	assert_int_equal(get_be16(MSG(frame) + 4), 0x1234);
	assert_int_equal(get_be16(MSG(frame) + 6), 0x5678);
	assert_memory_equal(MSG(frame) + 8, MSG(before) + 8, 33);
	assert_int_equal(csum_fold(csum_add(0, MSG(frame), ICMP_HDR_SIZE + 33)), 0);
	assert_int_equal(icmp_parse(MSG(frame), ICMP_HDR_SIZE + 33), ICMP_PARSE_OTHER);
}

static void test_icmp_truncated_damaged_and_other_are_refused(void **state)
{
	(void)state;
	uint8_t frame[256];
	frames_icmp_echo(frame, 1, 1, 8);
	for (size_t size = 0; size < ICMP_HDR_SIZE; size++)
		assert_int_equal(icmp_parse(MSG(frame), size), ICMP_PARSE_TRUNCATED);
	MSG(frame)[ICMP_HDR_SIZE + 3] ^= 0xff;
	assert_int_equal(icmp_parse(MSG(frame), ICMP_HDR_SIZE + 8), ICMP_PARSE_BAD_CSUM);
	frames_icmp_echo(frame, 1, 1, 8);
	MSG(frame)[0] = 13; /* timestamp request */
	put_be16(MSG(frame) + 2, 0);
	put_be16(MSG(frame) + 2, csum_fold(csum_add(0, MSG(frame), ICMP_HDR_SIZE + 8)));
	assert_int_equal(icmp_parse(MSG(frame), ICMP_HDR_SIZE + 8), ICMP_PARSE_OTHER);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_icmp_echo_request_is_recognised),
		cmocka_unit_test(test_icmp_reply_in_place_keeps_id_seq_data),
		cmocka_unit_test(test_icmp_truncated_damaged_and_other_are_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
