/*
 * hasp-waldump on a good storage directory (exit 0, prints segments,
 * records, hard state and snapshots) and on a corrupted one (exit 2, names
 * the file and offset), then the operator repair it suggests (--truncate-at)
 * lets the node start again.
 *
 *   test_waldump <path to hasp-waldump>
 */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hasp/errors.h"
#include "storage/storage.h"
#include "tests/test_util.h"

static const char *tool;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Runs the tool; returns its exit status and fills out with its stdout. */
static int run_tool(const char *args, char *out, size_t size)
{
	char cmd[512];
	size_t n = 0;

	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", tool, args);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	while (n + 1 < size) {
		size_t got = fread(out + n, 1, size - 1 - n, p);
		if (got == 0)
			break;
		n += got;
	}
	out[n] = 0;
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void build_dir(const char *dir)
{
	struct storage s;
	struct storage_config cfg = { .dir = dir, .segment_size = 256 << 10 };
	struct hard_state hs = { 3, 2 };
	struct snapshot_meta m = { 2, 1, 3, 4 };
	uint8_t buf[100];

	assert_int_equal(storage_open(&s, &cfg, &hs), 0);
	memset(buf, 0xab, sizeof(buf));
	for (uint64_t i = 1; i <= 5; i++) {
		struct wal_entry e = { i, 1, 4, sizeof(buf), buf };
		assert_int_equal(wal_append(&s.wal, &e), 0);
		assert_int_equal(wal_drain(&s.wal), 0); /* one batch per entry */
	}
	hs = (struct hard_state){ 3, 2 };
	assert_true(hardstate_save(&s.hs, &hs) > 0);
	while (hardstate_busy(&s.hs))
		(void)storage_poll(&s, true);
	assert_int_equal(snapshot_save(s.io, &m, "a,b", "data", 2, NULL), 0);
	storage_close(&s);
}

static void test_waldump_prints_a_good_directory(void **state)
{
	(void)state;
	char dir[] = "/tmp/hasp-waldump-test-XXXXXX";
	static char out[1 << 16];

	assert_non_null(mkdtemp(dir));
	build_dir(dir);
	assert_int_equal(run_tool(dir, out, sizeof(out)), 0);
	printf("%s", out);
	assert_non_null(strstr(out, "segment wal-0000000000000001.seg seq=1 first_index=1"));
	/* Packed (format version 2): entry 1's batch at 4096 (48 + 136 bytes),
	 * its idle watermark batch (48), then entry 2's batch at 4328. */
	assert_non_null(strstr(out, "batch wal-0000000000000001.seg offset=4328 first_index=2"));
	assert_non_null(strstr(out, "record offset=4376 index=2 term=1 type=4 length=100"));
	assert_non_null(strstr(out, "wal: first_index=1 last_index=5"));
	assert_non_null(strstr(out, "status=clean"));
	assert_non_null(strstr(out, "records=0 bytes=0 watermark=5")); /* the idle watermark */
	assert_non_null(strstr(out, "unused (a spare, never written)"));
	assert_non_null(strstr(out, "hardstate slot=1 seq=1 term=3 vote=2"));
	assert_non_null(strstr(out, "snapshot snap-0000000000000002-0000000000000001.snap index=2"));
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_waldump_names_file_and_offset_of_corruption_and_repairs(void **state)
{
	(void)state;
	char dir[] = "/tmp/hasp-waldump-test-XXXXXX";
	char path[256], args[512];
	static char out[1 << 16];
	struct storage s;
	struct hard_state hs;

	assert_non_null(mkdtemp(dir));
	build_dir(dir);
	/* Flip one payload byte of entry 2 (its batch is at 4328, packed in
	 * block 1; each entry was drained, so an idle watermark batch follows
	 * each): later batches prove entry 2 was durable, so this is
	 * corruption, not a torn write. */
	snprintf(path, sizeof(path), "%s/wal-0000000000000001.seg", dir);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, 4328 + 48 + 32 + 10), 1);
	b ^= 0x10;
	assert_int_equal(pwrite(fd, &b, 1, 4328 + 48 + 32 + 10), 1);
	close(fd);

	assert_int_equal(run_tool(dir, out, sizeof(out)), 2);
	printf("%s", out);
	assert_non_null(strstr(out, "CORRUPT file=wal-0000000000000001.seg offset=4328"));
	assert_non_null(strstr(out, "--truncate-at wal-0000000000000001.seg 4328"));

	struct storage_config cfg = { .dir = dir, .segment_size = 256 << 10 };
	assert_int_equal(storage_open(&s, &cfg, &hs), -HASP_ECORRUPT);

	snprintf(args, sizeof(args), "--truncate-at wal-0000000000000001.seg 4328 %s", dir);
	assert_int_equal(run_tool(args, out, sizeof(out)), 0);
	assert_int_equal(run_tool(dir, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "last_index=1 "));
	assert_int_equal(storage_open(&s, &cfg, &hs), 0);
	assert_int_equal(wal_last_index(&s.wal), 1);
	assert_int_equal(hs.term, 3);
	storage_close(&s);

	/* A damaged snapshot is reported too. */
	snprintf(path, sizeof(path), "%s/snap-0000000000000002-0000000000000001.snap", dir);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "X", 1, 66), 1);
	close(fd);
	assert_int_equal(run_tool(dir, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "CORRUPT file=snap-0000000000000002-0000000000000001.snap"));
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_waldump_reports_a_cut_segment_and_repairs(void **state)
{
	/* A segment cut short (preallocated to 256 KiB, now 4796 bytes, in the
	 * middle of entry 4's packed batch at 4792): the node refuses, the tool
	 * names the file and suggests the cut at the end of what remains
	 * (inside the block), and after the repair (which gives the file its
	 * size back and keeps the block's bytes before the cut) the node
	 * starts. */
	(void)state;
	char dir[] = "/tmp/hasp-waldump-test-XXXXXX";
	char path[256], args[512];
	static char out[1 << 16];
	struct storage s;
	struct hard_state hs;
	struct storage_config cfg = { .dir = dir, .segment_size = 256 << 10 };

	assert_non_null(mkdtemp(dir));
	build_dir(dir);
	snprintf(path, sizeof(path), "%s/wal-0000000000000001.seg", dir);
	assert_int_equal(truncate(path, 4796), 0);
	assert_int_equal(storage_open(&s, &cfg, &hs), -HASP_ECORRUPT);
	assert_int_equal(run_tool(dir, out, sizeof(out)), 2);
	printf("%s", out);
	assert_non_null(strstr(out, "LOST file=wal-0000000000000001.seg offset=4796: segment "
				    "shorter than its preallocated size"));
	const char *cut = strstr(out, "--truncate-at wal-0000000000000001.seg ");
	assert_non_null(cut);
	unsigned long long offset = strtoull(cut + strlen("--truncate-at wal-0000000000000001.seg "),
					     NULL, 10);
	assert_int_equal(offset, 4792);

	snprintf(args, sizeof(args), "--truncate-at wal-0000000000000001.seg %llu %s", offset, dir);
	assert_int_equal(run_tool(args, out, sizeof(out)), 0);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 256 << 10);
	assert_int_equal(run_tool(dir, out, sizeof(out)), 0);
	assert_int_equal(storage_open(&s, &cfg, &hs), 0);
	assert_int_equal(wal_last_index(&s.wal), 3);
	assert_int_equal(hs.term, 3);
	storage_close(&s);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_waldump_refuses_a_missing_directory(void **state)
{
	(void)state;
	static char out[4096];

	assert_int_equal(run_tool("/tmp/hasp-waldump-no-such-dir", out, sizeof(out)), 1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_waldump_prints_a_good_directory),
		cmocka_unit_test(test_waldump_names_file_and_offset_of_corruption_and_repairs),
		cmocka_unit_test(test_waldump_reports_a_cut_segment_and_repairs),
		cmocka_unit_test(test_waldump_refuses_a_missing_directory),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: test_waldump <hasp-waldump>\n");
		return 1;
	}
	tool = argv[1];
	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
