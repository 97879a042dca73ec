/*
 * The WAL on-disk format: records, batch headers and segment headers encode
 * and check, and any damage is reported as an error, never accepted.
 */
#include <string.h>

#include "common/bytes.h"
#include "common/crc32c.h"
#include "hasp/errors.h"
#include "storage/wal_format.h"
#include "storage/wal_scan.h"
#include "tests/test_util.h"

static void test_record_round_trips(void **state)
{
	(void)state;
	uint8_t buf[256];
	struct wal_record_header r = { 5, 7, 42, 3 }, out;
	const uint8_t *payload;

	assert_int_equal(wal_record_size(5), 32 + 8);
	assert_int_equal(wal_record_size(0), 32);
	assert_int_equal(wal_record_size(8), 40);
	wal_record_encode(buf, &r, "hello");
	assert_int_equal(wal_record_decode(buf, sizeof(buf), &out, &payload), 0);
	assert_int_equal(out.payload_size, 5);
	assert_int_equal(out.term, 7);
	assert_int_equal(out.index, 42);
	assert_int_equal(out.type, 3);
	assert_memory_equal(payload, "hello", 5);
	/* Padding bytes are zero. */
	assert_int_equal(buf[32 + 5], 0);
	assert_int_equal(buf[32 + 7], 0);
}

static void test_record_every_bit_flip_is_detected(void **state)
{
	(void)state;
	uint8_t buf[64];
	struct wal_record_header r = { 16, 9, 100, 1 }, out;
	const uint8_t *payload;

	wal_record_encode(buf, &r, "0123456789abcdef");
	for (uint32_t bit = 0; bit < 48 * 8; bit++) {
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_int_not_equal(wal_record_decode(buf, sizeof(buf), &out, &payload), 0);
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	assert_int_equal(wal_record_decode(buf, sizeof(buf), &out, &payload), 0);
}

static void test_record_that_does_not_fit_is_truncated(void **state)
{
	(void)state;
	uint8_t buf[64];
	struct wal_record_header r = { 16, 9, 100, 1 }, out;
	const uint8_t *payload;

	wal_record_encode(buf, &r, "0123456789abcdef");
	assert_int_equal(wal_record_decode(buf, 47, &out, &payload), -HASP_ETRUNCATED);
	assert_int_equal(wal_record_decode(buf, 20, &out, &payload), -HASP_ETRUNCATED);
	/* A huge size field cannot make the checker read past the end. */
	put_u32le(buf + 4, 0xfffffff0u);
	assert_int_equal(wal_record_decode(buf, sizeof(buf), &out, &payload), -HASP_ETRUNCATED);
}

static void test_segment_header_round_trips_and_rejects_damage(void **state)
{
	(void)state;
	uint8_t buf[WAL_SEGMENT_HEADER_SIZE];
	struct wal_segment_header h = { 3, 1000, 64 * 4096, 4096, WAL_FORMAT_VERSION }, out;

	wal_segment_header_encode(buf, &h);
	assert_int_equal(wal_segment_header_decode(buf, &out), 0);
	assert_int_equal(out.seq, 3);
	assert_int_equal(out.first_index, 1000);
	assert_int_equal(out.segment_size, 64 * 4096);
	assert_int_equal(out.version, WAL_FORMAT_VERSION);
	buf[25] ^= 1;
	assert_int_equal(wal_segment_header_decode(buf, &out), -HASP_ECORRUPT);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(wal_segment_header_decode(buf, &out), -HASP_EMAGIC);
	/* The old version (no packing) is still read. */
	h.version = WAL_FORMAT_VERSION_MIN;
	wal_segment_header_encode(buf, &h);
	assert_int_equal(wal_segment_header_decode(buf, &out), 0);
	assert_int_equal(out.version, 1);
	/* A future version with a valid checksum is refused as a version. */
	put_u16le(buf + 8, WAL_FORMAT_VERSION + 1);
	put_u32le(buf + 60, crc32c(buf, 60));
	assert_int_equal(wal_segment_header_decode(buf, &out), -HASP_EVERSION);
}

static void test_batch_header_round_trips(void **state)
{
	(void)state;
	uint8_t buf[WAL_BATCH_HEADER_SIZE];
	struct wal_batch_header b = { 4000, 12, 77, 70, 5 }, out;

	wal_batch_header_encode(buf, &b);
	assert_int_equal(wal_batch_header_decode(buf, &out), 0);
	assert_int_equal(out.records_size, 4000);
	assert_int_equal(out.record_count, 12);
	assert_int_equal(out.first_index, 77);
	assert_int_equal(out.watermark, 70);
	assert_int_equal(out.segment_seq, 5);
	buf[30] ^= 0x80;
	assert_int_equal(wal_batch_header_decode(buf, &out), -HASP_ECORRUPT);
}

/* Builds a batch image of `count` records starting at `first`. */
static uint64_t build_batch(uint8_t *image, uint64_t first, uint32_t count, uint64_t seq)
{
	uint32_t at = WAL_BATCH_HEADER_SIZE;
	struct wal_batch_header b = { 0, count, first, first - 1, seq };

	for (uint32_t i = 0; i < count; i++) {
		struct wal_record_header r = { 3, 1, first + i, 0 };
		wal_record_encode(image + at, &r, "abc");
		at += wal_record_size(3);
	}
	b.records_size = at - WAL_BATCH_HEADER_SIZE;
	wal_batch_header_encode(image, &b);
	return at;
}

static void test_scan_batch_accepts_whole_batches_only(void **state)
{
	(void)state;
	static uint8_t image[2 * 4096] __attribute__((aligned(4096)));
	struct wal_batch_header b;
	uint64_t expected = 10, next, first = 1;

	memset(image, 0, sizeof(image));
	uint64_t end = build_batch(image, 10, 5, 1);
	assert_int_equal(end, WAL_BATCH_HEADER_SIZE + 5 * wal_record_size(3));
	assert_int_equal(wal_scan_batch(image, sizeof(image), 0, 1, &first, &expected, &b, &next, NULL,
					NULL),
			 0);
	assert_int_equal(expected, 15);
	assert_int_equal(next, end);
	/* Zeros to the block end: the next batch would start on the next block. */
	assert_int_equal(wal_scan_skip_padding(image, sizeof(image), end), 4096);
	/* A packed batch right after it (format version 2) is read in place. */
	uint64_t end2 = end + build_batch(image + end, 15, 2, 1);
	assert_int_equal(wal_scan_skip_padding(image, sizeof(image), end), end);
	assert_int_equal(wal_scan_batch(image, sizeof(image), end, 1, &first, &expected, &b, &next,
					NULL, NULL),
			 0);
	assert_int_equal(expected, 17);
	assert_int_equal(next, end2);
	assert_int_equal(wal_scan_skip_padding(image, sizeof(image), end2), 4096);
	memset(image + end, 0, end2 - end);
	expected = 10;
	/* The next block is zero: no batch. */
	assert_int_equal(wal_scan_batch(image, sizeof(image), 4096, 1, &first, &expected, &b, &next,
					NULL, NULL),
			 -HASP_ENOENT);
	/* Wrong expected index, wrong segment, or a damaged last record: the
	 * whole batch is refused and expected does not move. */
	expected = 11;
	assert_int_equal(wal_scan_batch(image, sizeof(image), 0, 1, &first, &expected, &b, &next, NULL,
					NULL),
			 -HASP_ECORRUPT);
	assert_int_equal(expected, 11);
	expected = 10;
	assert_int_equal(wal_scan_batch(image, sizeof(image), 0, 2, &first, &expected, &b, &next, NULL,
					NULL),
			 -HASP_ECORRUPT);
	image[WAL_BATCH_HEADER_SIZE + 4 * wal_record_size(3) + 33] ^= 4;
	assert_int_equal(wal_scan_batch(image, sizeof(image), 0, 1, &first, &expected, &b, &next, NULL,
					NULL),
			 -HASP_ECORRUPT);
	assert_int_equal(expected, 10);
}

static void test_segment_names_parse(void **state)
{
	(void)state;
	char name[STORAGE_NAME_SIZE_MAX];
	uint64_t seq;

	wal_segment_name(name, sizeof(name), 0x1234);
	assert_string_equal(name, "wal-0000000000001234.seg");
	assert_true(wal_segment_name_parse(name, &seq));
	assert_int_equal(seq, 0x1234);
	assert_false(wal_segment_name_parse("wal-000000000000123.seg", &seq));
	assert_false(wal_segment_name_parse("wal-000000000000123G.seg", &seq));
	assert_false(wal_segment_name_parse("hardstate", &seq));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_round_trips),
		cmocka_unit_test(test_record_every_bit_flip_is_detected),
		cmocka_unit_test(test_record_that_does_not_fit_is_truncated),
		cmocka_unit_test(test_segment_header_round_trips_and_rejects_damage),
		cmocka_unit_test(test_batch_header_round_trips),
		cmocka_unit_test(test_scan_batch_accepts_whole_batches_only),
		cmocka_unit_test(test_segment_names_parse),
	};

	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
