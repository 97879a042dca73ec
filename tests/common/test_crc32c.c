/*
 * CRC32C: known vectors, hardware versus table, and chaining.
 */
#include "common/crc32c.h"

#include <string.h>

#include "common/prng.h"
#include "tests/test_util.h"

static void test_crc32c_known_vectors(void **state)
{
	(void)state;
	/* RFC 3720 appendix B.4 check value and iSCSI test patterns. */
	assert_int_equal(crc32c("123456789", 9), 0xE3069283u);
	uint8_t zeros[32] = { 0 };
	uint8_t ones[32];
	memset(ones, 0xff, sizeof(ones));
	assert_int_equal(crc32c(zeros, sizeof(zeros)), 0x8A9136AAu);
	assert_int_equal(crc32c(ones, sizeof(ones)), 0x62A8AB43u);
	assert_int_equal(crc32c("", 0), 0u);
}

static void test_crc32c_hw_matches_table_on_random_buffers(void **state)
{
	(void)state;
	struct prng p;
	uint8_t buf[1031];

	prng_seed(&p, 7);
	for (int round = 0; round < 200; round++) {
		size_t size = prng_below(&p, sizeof(buf) + 1);
		for (size_t i = 0; i < size; i++)
			buf[i] = (uint8_t)prng_next(&p);
		assert_int_equal(crc32c_extend(0, buf, size), crc32c_extend_sw(0, buf, size));
	}
}

static void test_crc32c_chaining_equals_one_pass(void **state)
{
	(void)state;
	const char *text = "the quick brown fox jumps over the lazy dog";
	size_t size = strlen(text);

	for (size_t split = 0; split <= size; split++) {
		uint32_t c = crc32c_extend(0, text, split);
		c = crc32c_extend(c, text + split, size - split);
		assert_int_equal(c, crc32c(text, size));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c_known_vectors),
		cmocka_unit_test(test_crc32c_hw_matches_table_on_random_buffers),
		cmocka_unit_test(test_crc32c_chaining_equals_one_pass),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
