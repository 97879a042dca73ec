/*
 * Ethernet header parsing and writing, and MAC address text.
 */
#include "dataplane/eth.h"

#include <string.h>

#include "hasp/errors.h"
#include "tests/test_util.h"

static void test_eth_parse_reads_fields(void **state)
{
	(void)state;
	const uint8_t frame[ETH_HDR_SIZE] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0x06 };
	struct eth_hdr_view h;
	assert_true(eth_parse(frame, sizeof(frame), &h));
	assert_int_equal(h.dst.bytes[0], 1);
	assert_int_equal(h.src.bytes[5], 12);
	assert_int_equal(h.type, ETH_TYPE_ARP);
}

static void test_eth_parse_refuses_every_short_length(void **state)
{
	(void)state;
	uint8_t frame[ETH_HDR_SIZE] = { 0 };
	struct eth_hdr_view h;
	for (size_t size = 0; size < ETH_HDR_SIZE; size++)
		assert_false(eth_parse(frame, size, &h));
}

static void test_eth_write_then_parse_round_trips(void **state)
{
	(void)state;
	uint8_t frame[ETH_HDR_SIZE];
	struct eth_addr a = { { 0x02, 0x77, 0, 0, 0, 9 } }, b = { { 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff } };
	struct eth_hdr_view h;
	eth_write(frame, &a, &b, ETH_TYPE_IPV4);
	assert_true(eth_parse(frame, sizeof(frame), &h));
	assert_true(eth_addr_equal(&h.dst, &a));
	assert_true(eth_addr_equal(&h.src, &b));
	assert_int_equal(h.type, ETH_TYPE_IPV4);
}

static void test_eth_addr_classes(void **state)
{
	(void)state;
	struct eth_addr zero = { { 0 } }, mcast = { { 0x33, 0x33, 0, 0, 0, 1 } };
	struct eth_addr local = { { 0x02, 0x77, 0, 0, 0, 1 } };
	assert_true(eth_addr_is_broadcast(&eth_addr_broadcast));
	assert_true(eth_addr_is_multicast(&eth_addr_broadcast));
	assert_true(eth_addr_is_multicast(&mcast));
	assert_false(eth_addr_is_broadcast(&mcast));
	assert_false(eth_addr_is_multicast(&local));
	assert_true(eth_addr_is_zero(&zero));
	assert_false(eth_addr_is_zero(&local));
}

static void test_eth_addr_parse_and_format(void **state)
{
	(void)state;
	struct eth_addr a;
	char text[ETH_ADDR_TEXT_SIZE];
	assert_int_equal(eth_addr_parse("02:77:00:00:00:0A", &a), 0);
	assert_int_equal(a.bytes[0], 0x02);
	assert_int_equal(a.bytes[5], 0x0a);
	eth_addr_format(&a, text);
	assert_string_equal(text, "02:77:00:00:00:0a");
	assert_int_equal(eth_addr_parse("02:77:00:00:00", &a), -HASP_EINVAL);
	assert_int_equal(eth_addr_parse("02:77:00:00:00:0g", &a), -HASP_EINVAL);
	assert_int_equal(eth_addr_parse("02-77-00-00-00-01", &a), -HASP_EINVAL);
	assert_int_equal(eth_addr_parse(" 2:77:00:00:00:01", &a), -HASP_EINVAL);
	assert_int_equal(eth_addr_parse("02:77:00:00:00:011", &a), -HASP_EINVAL);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_eth_parse_reads_fields),
		cmocka_unit_test(test_eth_parse_refuses_every_short_length),
		cmocka_unit_test(test_eth_write_then_parse_round_trips),
		cmocka_unit_test(test_eth_addr_classes),
		cmocka_unit_test(test_eth_addr_parse_and_format),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
