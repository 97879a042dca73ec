/*
 * Snapshots over the simulated disk: save and load the newest, keep the
 * last N, skip a corrupt one with a warning, survive a crash after a save,
 * leave the old set in place when a save fails, and clean stray temp files.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hasp/errors.h"
#include "storage/simdisk.h"
#include "storage/snapshot.h"
#include "tests/test_util.h"

static struct simdisk *disk_new(uint64_t seed)
{
	struct simdisk_config dc;

	simdisk_config_default(&dc, seed);
	return simdisk_create(&dc);
}

static void save(struct storage_io io, uint64_t index, uint64_t term, unsigned keep)
{
	uint8_t data[5000];
	char members[32];
	struct snapshot_meta m = { index, term, 0, sizeof(data) };

	for (uint32_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(index + i);
	m.membership_size = (uint32_t)snprintf(members, sizeof(members), "n1,n2,n3@%llu",
					       (unsigned long long)index);
	assert_int_equal(snapshot_save(io, &m, members, data, keep, NULL), 0);
}

static void check_loaded(const struct snapshot *s, uint64_t index, uint64_t term)
{
	char members[32];

	assert_int_equal(s->meta.last_index, index);
	assert_int_equal(s->meta.last_term, term);
	assert_int_equal(s->meta.data_size, 5000);
	for (uint32_t i = 0; i < 5000; i++)
		assert_int_equal(s->data[i], (uint8_t)(index + i));
	int n = snprintf(members, sizeof(members), "n1,n2,n3@%llu", (unsigned long long)index);
	assert_int_equal(s->meta.membership_size, n);
	assert_memory_equal(s->membership, members, n);
}

static unsigned count_snapshots(struct simdisk *d, uint64_t lo, uint64_t hi)
{
	char name[STORAGE_NAME_SIZE_MAX];
	unsigned n = 0;
	uint64_t size;

	for (uint64_t i = lo; i <= hi; i++) {
		snapshot_name(name, sizeof(name), i, 1);
		n += simdisk_file_data(d, name, &size) != NULL;
	}
	return n;
}

static void test_snapshot_save_then_load_returns_the_newest(void **state)
{
	(void)state;
	struct simdisk *d = disk_new(1);
	struct snapshot s;

	assert_int_equal(snapshot_load(simdisk_io(d), &s), -HASP_ENOENT);
	save(simdisk_io(d), 10, 1, 3);
	save(simdisk_io(d), 20, 1, 3);
	simdisk_crash(d); /* a completed save is durable */
	assert_int_equal(snapshot_load(simdisk_io(d), &s), 0);
	check_loaded(&s, 20, 1);
	assert_int_equal(s.skipped, 0);
	snapshot_release(&s);
	simdisk_destroy(d);
}

static void test_snapshot_keeps_the_last_n(void **state)
{
	(void)state;
	struct simdisk *d = disk_new(2);

	for (uint64_t i = 1; i <= 6; i++)
		save(simdisk_io(d), i, 1, 2);
	assert_int_equal(count_snapshots(d, 1, 6), 2);
	assert_int_equal(count_snapshots(d, 5, 6), 2);
	simdisk_destroy(d);
}

/* Trimming works from fixed arrays (it runs on the lcore, docs/STYLE.md §6): at
 * most 8 stale files go per save, so a backlog drains over later saves,
 * and the newest are kept whatever order the directory lists them in. */
static void test_snapshot_trim_drains_a_backlog_eight_per_save(void **state)
{
	(void)state;
	struct simdisk *d = disk_new(7);

	for (uint64_t i = 20; i >= 1; i--)
		save(simdisk_io(d), i, 1, SNAPSHOT_KEEP_MAX);
	assert_int_equal(count_snapshots(d, 1, 20), 20);
	save(simdisk_io(d), 21, 1, 2); /* 19 stale */
	assert_int_equal(count_snapshots(d, 1, 21), 13);
	assert_int_equal(count_snapshots(d, 20, 21), 2);
	save(simdisk_io(d), 22, 1, 2); /* 12 stale */
	assert_int_equal(count_snapshots(d, 1, 22), 6);
	save(simdisk_io(d), 23, 1, 2); /* 5 stale */
	assert_int_equal(count_snapshots(d, 1, 23), 2);
	assert_int_equal(count_snapshots(d, 22, 23), 2);
	simdisk_destroy(d);
}

static void test_snapshot_save_refuses_keep_out_of_range(void **state)
{
	(void)state;
	struct simdisk *d = disk_new(8);
	struct snapshot_meta m = { 5, 1, 0, 4 };

	assert_int_equal(snapshot_save(simdisk_io(d), &m, NULL, "abcd", 0, NULL), -HASP_EINVAL);
	assert_int_equal(snapshot_save(simdisk_io(d), &m, NULL, "abcd", SNAPSHOT_KEEP_MAX + 1, NULL),
			 -HASP_EINVAL);
	assert_int_equal(count_snapshots(d, 5, 5), 0);
	simdisk_destroy(d);
}

/* What a pace's wait saw: the data bytes out after each piece. */
struct pace_log {
	uint64_t written[16];
	uint32_t count;
};

static void pace_record(void *arg, uint64_t written)
{
	struct pace_log *log = arg;
	assert_true(log->count < 16);
	log->written[log->count++] = written;
}

/* A paced save writes the data in pieces, each pushed to the device before
 * the wait is told how far it got, and the file loads as an unpaced one
 * does; a pace without a piece size or a wait is refused. */
static void test_snapshot_paced_save_writes_pieces_and_waits_after_each(void **state)
{
	(void)state;
	struct simdisk *d = disk_new(11);
	uint8_t data[5000];
	struct snapshot_meta m = { 9, 2, 3, sizeof(data) };
	struct pace_log log = { .count = 0 };
	struct snapshot_pace pace = { .piece = 1024, .after_piece = pace_record, .arg = &log };

	for (uint32_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	assert_int_equal(snapshot_save(simdisk_io(d), &m, "a,b", data, 2, &pace), 0);
	static const uint64_t want[] = { 1024, 2048, 3072, 4096, 5000 };
	assert_int_equal(log.count, 5);
	for (uint32_t i = 0; i < 5; i++)
		assert_int_equal(log.written[i], want[i]);
	struct simdisk_stats st;
	simdisk_stats_get(d, &st);
	assert_int_equal(st.writebacks, 5);
	struct snapshot snap;
	assert_int_equal(snapshot_load(simdisk_io(d), &snap), 0);
	assert_int_equal(snap.meta.last_index, 9);
	assert_int_equal(snap.meta.data_size, sizeof(data));
	assert_memory_equal(snap.data, data, sizeof(data));
	assert_memory_equal(snap.membership, "a,b", 3);
	snapshot_release(&snap);

	struct snapshot_meta next = { 10, 2, 0, 4 };
	struct snapshot_pace no_piece = { .piece = 0, .after_piece = pace_record, .arg = &log };
	struct snapshot_pace no_wait = { .piece = 1024, .after_piece = NULL, .arg = NULL };
	assert_int_equal(snapshot_save(simdisk_io(d), &next, NULL, "abcd", 2, &no_piece), -HASP_EINVAL);
	assert_int_equal(snapshot_save(simdisk_io(d), &next, NULL, "abcd", 2, &no_wait), -HASP_EINVAL);
	assert_int_equal(count_snapshots(d, 10, 10), 0);
	simdisk_destroy(d);
}

static void test_snapshot_corrupt_newest_is_skipped(void **state)
{
	(void)state;
	struct simdisk *d = disk_new(3);
	struct snapshot s;
	char name[STORAGE_NAME_SIZE_MAX];
	uint8_t b = 0x42;

	save(simdisk_io(d), 7, 1, 3);
	save(simdisk_io(d), 8, 1, 3);
	snapshot_name(name, sizeof(name), 8, 1);
	assert_true(simdisk_poke(d, name, SNAPSHOT_HEADER_SIZE + 100, &b, 1));
	assert_int_equal(snapshot_load(simdisk_io(d), &s), 0);
	check_loaded(&s, 7, 1);
	assert_int_equal(s.skipped, 1);
	snapshot_release(&s);
	/* A damaged header is skipped the same way. */
	snapshot_name(name, sizeof(name), 7, 1);
	assert_true(simdisk_poke(d, name, 30, &b, 1));
	assert_int_equal(snapshot_load(simdisk_io(d), &s), -HASP_ENOENT);
	assert_int_equal(s.skipped, 2);
	simdisk_destroy(d);
}

static void test_snapshot_failed_save_keeps_the_old_one_and_cleans_up(void **state)
{
	(void)state;
	struct simdisk *d = disk_new(4);
	struct snapshot s;
	uint8_t data[10] = { 0 };
	struct snapshot_meta m = { 50, 2, 0, sizeof(data) };
	uint64_t size;

	save(simdisk_io(d), 40, 1, 3);
	simdisk_fail_nth(d, SIMDISK_OP_FSYNC, 0, EIO);
	assert_int_equal(snapshot_save(simdisk_io(d), &m, NULL, data, 3, NULL), -HASP_EIO);
	assert_null(simdisk_file_data(d, "snap-0000000000000032-0000000000000002.snap.tmp", &size));
	simdisk_crash(d);
	assert_int_equal(snapshot_load(simdisk_io(d), &s), 0);
	check_loaded(&s, 40, 1);
	snapshot_release(&s);
	simdisk_destroy(d);
}

static void test_snapshot_load_removes_stray_temp_files(void **state)
{
	(void)state;
	struct simdisk *d = disk_new(5);
	struct storage_io io = simdisk_io(d);
	struct snapshot s;
	uint64_t size;
	bool direct;
	int fd;

	assert_int_equal(io.ops->open(io.ctx, "snap-1.snap.tmp", STORAGE_OPEN_CREATE, &fd, &direct), 0);
	assert_int_equal(io.ops->pwrite(io.ctx, fd, "half", 4, 0), 0);
	io.ops->close(io.ctx, fd);
	assert_int_equal(snapshot_load(io, &s), -HASP_ENOENT);
	assert_null(simdisk_file_data(d, "snap-1.snap.tmp", &size));
	simdisk_destroy(d);
}

static void test_snapshot_decode_rejects_damage(void **state)
{
	(void)state;
	uint8_t image[SNAPSHOT_HEADER_SIZE + 4];
	struct snapshot_meta m;
	struct simdisk *d = disk_new(6);
	struct snapshot_meta in = { 3, 1, 0, 4 };
	uint64_t size;
	char name[STORAGE_NAME_SIZE_MAX];

	assert_int_equal(snapshot_save(simdisk_io(d), &in, NULL, "abcd", 1, NULL), 0);
	snapshot_name(name, sizeof(name), 3, 1);
	memcpy(image, simdisk_file_data(d, name, &size), sizeof(image));
	assert_int_equal(size, sizeof(image));
	assert_int_equal(snapshot_decode(image, sizeof(image), &m), 0);
	assert_int_equal(snapshot_decode(image, sizeof(image) - 1, &m), -HASP_ETRUNCATED);
	assert_int_equal(snapshot_decode(image, 10, &m), -HASP_ETRUNCATED);
	image[0] ^= 1;
	assert_int_equal(snapshot_decode(image, sizeof(image), &m), -HASP_EMAGIC);
	image[0] ^= 1;
	image[SNAPSHOT_HEADER_SIZE] ^= 1;
	assert_int_equal(snapshot_decode(image, sizeof(image), &m), -HASP_ECORRUPT);
	simdisk_destroy(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_snapshot_save_then_load_returns_the_newest),
		cmocka_unit_test(test_snapshot_keeps_the_last_n),
		cmocka_unit_test(test_snapshot_trim_drains_a_backlog_eight_per_save),
		cmocka_unit_test(test_snapshot_save_refuses_keep_out_of_range),
		cmocka_unit_test(test_snapshot_paced_save_writes_pieces_and_waits_after_each),
		cmocka_unit_test(test_snapshot_corrupt_newest_is_skipped),
		cmocka_unit_test(test_snapshot_failed_save_keeps_the_old_one_and_cleans_up),
		cmocka_unit_test(test_snapshot_load_removes_stray_temp_files),
		cmocka_unit_test(test_snapshot_decode_rejects_damage),
	};

	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
