/*
 * The Internet checksum against known answers (RFC 1071 §3, a captured IPv4
 * header) and its algebra: split sums, odd tails, self-verification.
 */
#include "dataplane/csum.h"

#include <string.h>

#include "common/prng.h"
#include "tests/test_util.h"

static void test_csum_rfc1071_example(void **state)
{
	(void)state;
	/* RFC 1071 §3: these bytes sum to ddf2 (one's complement). */
	const uint8_t data[] = { 0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7 };
	assert_int_equal(csum_fold(csum_add(0, data, sizeof(data))), (uint16_t)~0xddf2);
}

static void test_csum_known_ipv4_header(void **state)
{
	(void)state;
	uint8_t hdr[] = { 0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
			  0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7 };
	assert_int_equal(csum_fold(csum_add(0, hdr, sizeof(hdr))), 0);
	hdr[10] = hdr[11] = 0;
	assert_int_equal(csum_fold(csum_add(0, hdr, sizeof(hdr))), 0xb861);
}

static void test_csum_odd_tail_is_zero_padded(void **state)
{
	(void)state;
	const uint8_t odd[] = { 0x12, 0x34, 0x56 };
	const uint8_t padded[] = { 0x12, 0x34, 0x56, 0x00 };
	assert_int_equal(csum_fold(csum_add(0, odd, 3)), csum_fold(csum_add(0, padded, 4)));
}

static void test_csum_split_at_even_offsets_equals_whole(void **state)
{
	(void)state;
	struct prng p;
	uint8_t buf[1500];
	uint64_t seed = test_util_seed(7);

	print_message("seed=%llu\n", (unsigned long long)seed);
	prng_seed(&p, seed);
	for (int round = 0; round < 200; round++) {
		size_t size = (size_t)prng_below(&p, sizeof(buf) + 1);
		for (size_t i = 0; i < size; i++)
			buf[i] = (uint8_t)prng_next(&p);
		size_t cut = (size_t)prng_below(&p, size / 2 + 1) * 2;
		uint32_t whole = csum_add(0, buf, size);
		uint32_t split = csum_add(csum_add(0, buf, cut), buf + cut, size - cut);
		assert_int_equal(csum_fold(whole), csum_fold(split));
	}
}

static void test_csum_pseudo_header_folded_is_complement_of_fold(void **state)
{
	(void)state;
	uint32_t sum = csum_pseudo_udp4(0x0a000001, 0x0a000002, 20);
	/* 0a00 + 0001 + 0a00 + 0002 + 0011 + 0014 = 0x1428 */
	assert_int_equal(sum, 0x1428);
	assert_int_equal(csum_pseudo_udp4_folded(0x0a000001, 0x0a000002, 20), 0x1428);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_csum_rfc1071_example),
		cmocka_unit_test(test_csum_known_ipv4_header),
		cmocka_unit_test(test_csum_odd_tail_is_zero_padded),
		cmocka_unit_test(test_csum_split_at_even_offsets_equals_whole),
		cmocka_unit_test(test_csum_pseudo_header_folded_is_complement_of_fold),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
