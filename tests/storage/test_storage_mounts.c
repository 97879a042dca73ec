/*
 * Storage on file systems the test mounts itself (root only; exit 77, a
 * skip, otherwise): a data dir on a read-only file system is refused with
 * EROFS named, not as a bare I/O error, whether the directory exists or has
 * to be created. Each mount is a private tmpfs under a temp dir, detached
 * at the end.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hasp/errors.h"
#include "storage/storage.h"
#include "storage/uring.h"
#include "tests/fsync_spy.h"
#include "tests/test_util.h"

static char base[128];
static char mnt[200];
static bool mounted;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	(void)state;
	snprintf(base, sizeof(base), "/tmp/hasp-mounts-test-XXXXXX");
	if (mkdtemp(base) == NULL)
		return -1;
	snprintf(mnt, sizeof(mnt), "%s/ro", base);
	if (mkdir(mnt, 0755) != 0)
		return -1;
	/* Written first, then made read-only: a data dir that exists. */
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") != 0)
		return -1;
	mounted = true;
	char sub[300];
	snprintf(sub, sizeof(sub), "%s/data", mnt);
	if (mkdir(sub, 0755) != 0)
		return -1;
	if (mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY, "size=1m") != 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (mounted && umount2(mnt, MNT_DETACH) != 0)
		return -1;
	mounted = false;
	return nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

static void open_expect_erofs(const char *dir)
{
	struct storage s;
	struct storage_config cfg = { .dir = dir, .segment_size = 1 << 20 };
	struct hard_state hs;

	errno = 0;
	assert_int_equal(storage_open(&s, &cfg, &hs), -HASP_ESYS);
	assert_int_equal(errno, EROFS);
	assert_non_null(s.open_failed);
	assert_string_equal(s.open_failed, "directory");
}

static void test_read_only_data_dir_is_refused_naming_erofs(void **state)
{
	(void)state;
	char dir[300];

	snprintf(dir, sizeof(dir), "%s/data", mnt);
	open_expect_erofs(dir); /* exists: before, the hard state create failed as EIO */
	snprintf(dir, sizeof(dir), "%s/new", mnt);
	open_expect_erofs(dir); /* has to be created: mkdir fails with EROFS */
	assert_int_equal(access(dir, F_OK), -1);
}

static void test_new_data_dir_is_created_and_usable(void **state)
{
	/* mkdir, then the parent's fsync, on a writable file system. */
	(void)state;
	char dir[300];
	struct storage s;
	struct hard_state hs;

	snprintf(dir, sizeof(dir), "%s/fresh", base);
	struct storage_config cfg = { .dir = dir, .segment_size = 1 << 20 };
	fsync_spy_reset();
	assert_int_equal(storage_open(&s, &cfg, &hs), 0);
	storage_close(&s);
	assert_int_equal(access(dir, W_OK), 0);
	/* The new directory's name is durable: its parent was synced (issue
	 * 11 item 15; it was not before). */
	assert_true(fsync_spy_dir_synced(base));
	assert_int_equal(uring_fsync_parent_dir(dir), 0);
	assert_int_equal(uring_fsync_parent_dir("relative-name"), 0); /* the cwd */
	assert_int_equal(uring_fsync_parent_dir(""), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_only_data_dir_is_refused_naming_erofs),
		cmocka_unit_test(test_new_data_dir_is_created_and_usable),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "test_storage_mounts: needs root (mounts a tmpfs): skipped\n");
		return 77;
	}
	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, setup, teardown);
}
