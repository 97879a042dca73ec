/*
 * IPv4 validation: each malformation maps to its own reason, checked in a
 * fixed order so that a truncated header is never misreported; headers we
 * write verify; address helpers.
 */
#include "dataplane/ipv4.h"

#include <string.h>

#include "hasp/errors.h"
#include "tests/dataplane/frames.h"
#include "tests/test_util.h"

static size_t make(uint8_t *frame)
{
	static const uint8_t payload[10] = "0123456789";
	return frames_udp(frame, payload, sizeof(payload));
}

static enum ipv4_parse_result parse(const uint8_t *frame, size_t frame_size, struct ipv4_view *ip)
{
	return ipv4_parse(frame + ETH_HDR_SIZE, frame_size - ETH_HDR_SIZE, false, ip);
}

static void test_ipv4_written_header_parses(void **state)
{
	(void)state;
	uint8_t frame[128];
	struct ipv4_view ip;
	size_t size = make(frame);
	assert_int_equal(parse(frame, size, &ip), IPV4_PARSE_OK);
	assert_int_equal(ip.src, FRAMES_PEER_IP);
	assert_int_equal(ip.dst, FRAMES_NODE_IP);
	assert_int_equal(ip.proto, IPV4_PROTO_UDP);
	assert_int_equal(ip.ttl, IPV4_TTL_DEFAULT);
	assert_int_equal(ip.total_size, size - ETH_HDR_SIZE);
	assert_int_equal(ip.payload_size, size - ETH_HDR_SIZE - IPV4_HDR_SIZE);
	assert_ptr_equal(ip.payload, frame + ETH_HDR_SIZE + IPV4_HDR_SIZE);
}

static void test_ipv4_padding_after_total_length_is_ignored(void **state)
{
	(void)state;
	uint8_t frame[128];
	struct ipv4_view ip;
	size_t size = make(frame);
	memset(frame + size, 0, 20);
	assert_int_equal(parse(frame, size + 20, &ip), IPV4_PARSE_OK);
	assert_int_equal(ip.total_size, size - ETH_HDR_SIZE);
}

static void test_ipv4_every_truncation_is_truncated(void **state)
{
	(void)state;
	uint8_t frame[128];
	struct ipv4_view ip;
	size_t size = make(frame);
	for (size_t cut = ETH_HDR_SIZE; cut < size; cut++)
		assert_int_equal(parse(frame, cut, &ip), IPV4_PARSE_TRUNCATED);
}

static void test_ipv4_bad_fields_have_their_reasons(void **state)
{
	(void)state;
	uint8_t frame[128];
	uint8_t *h = frame + ETH_HDR_SIZE;
	struct ipv4_view ip;
	size_t size;

	size = make(frame);
	h[0] = 0x65;
	frames_fix_ipv4_csum(frame);
	assert_int_equal(parse(frame, size, &ip), IPV4_PARSE_BAD_VERSION);

	size = make(frame);
	h[0] = 0x44;
	assert_int_equal(parse(frame, size, &ip), IPV4_PARSE_BAD_IHL);

	size = make(frame);
	put_be16(h + 2, 19);
	frames_fix_ipv4_csum(frame);
	assert_int_equal(parse(frame, size, &ip), IPV4_PARSE_BAD_LENGTH);

	size = make(frame);
	put_be16(h + 2, (uint16_t)(size - ETH_HDR_SIZE + 1));
	frames_fix_ipv4_csum(frame);
	assert_int_equal(parse(frame, size, &ip), IPV4_PARSE_TRUNCATED);

	size = make(frame);
	h[0] = 0x46; /* one option word: the UDP header now looks like it */
	frames_fix_ipv4_csum(frame);
	assert_int_equal(parse(frame, size, &ip), IPV4_PARSE_OPTIONS);

	size = make(frame);
	put_be16(h + 6, IPV4_FLAG_MF);
	frames_fix_ipv4_csum(frame);
	assert_int_equal(parse(frame, size, &ip), IPV4_PARSE_FRAGMENT);

	size = make(frame);
	put_be16(h + 6, 185); /* a later fragment, offset 1480 */
	frames_fix_ipv4_csum(frame);
	assert_int_equal(parse(frame, size, &ip), IPV4_PARSE_FRAGMENT);

	size = make(frame);
	h[8] ^= 1; /* TTL changed without fixing the checksum */
	assert_int_equal(parse(frame, size, &ip), IPV4_PARSE_BAD_CSUM);
	/* The port vouched for the header: no software check. */
	assert_int_equal(ipv4_parse(h, size - ETH_HDR_SIZE, true, &ip), IPV4_PARSE_OK);
}

static void test_ipv4_ttl_zero_is_accepted_for_us(void **state)
{
	(void)state;
	/* RFC 1122 §3.2.1.7: a host must not discard a datagram addressed to
	 * it because of its TTL. */
	uint8_t frame[128];
	struct ipv4_view ip;
	size_t size = make(frame);
	frame[ETH_HDR_SIZE + 8] = 0;
	frames_fix_ipv4_csum(frame);
	assert_int_equal(parse(frame, size, &ip), IPV4_PARSE_OK);
	assert_int_equal(ip.ttl, 0);
}

static void test_ipv4_header_without_software_csum_leaves_zero(void **state)
{
	(void)state;
	uint8_t h[IPV4_HDR_SIZE];
	ipv4_write_header(h, 1, 2, IPV4_PROTO_UDP, 8, false);
	assert_int_equal(get_be16(h + 10), 0);
	assert_int_equal(get_be16(h + 6), IPV4_FLAG_DF);
}

static void test_ipv4_addresses_parse_format_and_martians(void **state)
{
	(void)state;
	uint32_t a;
	char text[IPV4_ADDR_TEXT_SIZE];
	assert_int_equal(ipv4_addr_parse("10.199.3.1", &a), 0);
	assert_int_equal(a, 0x0ac70301u);
	ipv4_addr_format(a, text);
	assert_string_equal(text, "10.199.3.1");
	assert_int_equal(ipv4_addr_parse("10.199.3", &a), -HASP_EINVAL);
	assert_int_equal(ipv4_addr_parse("10.199.3.256", &a), -HASP_EINVAL);
	assert_true(ipv4_addr_is_martian_source(0));
	assert_true(ipv4_addr_is_martian_source(0xffffffffu));
	assert_true(ipv4_addr_is_martian_source(0xe0000001u));
	assert_true(ipv4_addr_is_martian_source(0xf0000001u));
	assert_false(ipv4_addr_is_martian_source(0x0ac70301u));
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipv4_written_header_parses),
		cmocka_unit_test(test_ipv4_padding_after_total_length_is_ignored),
		cmocka_unit_test(test_ipv4_every_truncation_is_truncated),
		cmocka_unit_test(test_ipv4_bad_fields_have_their_reasons),
		cmocka_unit_test(test_ipv4_ttl_zero_is_accepted_for_us),
		cmocka_unit_test(test_ipv4_header_without_software_csum_leaves_zero),
		cmocka_unit_test(test_ipv4_addresses_parse_format_and_martians),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
