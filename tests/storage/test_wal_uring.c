/*
 * The real engine: io_uring and O_DIRECT on the disk filesystem (a temp dir
 * under /tmp, ext4 on the build machines), and the buffered fallback on
 * tmpfs (/dev/shm). Appends, reopen, recovery of a torn tail, truncation,
 * every sync mode, and the storage facade with hard state and snapshots.
 */
#include <fcntl.h>
#include <poll.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "hasp/errors.h"
#include "storage/storage.h"
#include "storage/uring.h"
#include "storage/wal.h"
#include "tests/test_util.h"

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rm_rf(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static char *temp_dir(const char *base, char *buf, size_t size)
{
	snprintf(buf, size, "%s/hasp-storage-test-XXXXXX", base);
	return mkdtemp(buf);
}

static void append(struct storage *s, uint64_t from, uint64_t to, uint64_t term, uint32_t size)
{
	uint8_t buf[4096];

	for (uint64_t i = from; i <= to; i++) {
		struct wal_entry e = { i, term, 1, size, buf };
		int rc;
		memset(buf, (int)(i & 0xff), size);
		while ((rc = wal_append(&s->wal, &e)) == -HASP_EFULL)
			(void)storage_poll(s, true);
		assert_int_equal(rc, 0);
	}
	assert_int_equal(wal_submit(&s->wal), 0);
}

static void wait_durable(struct storage *s, uint64_t index)
{
	while (wal_durable_index(&s->wal) < index) {
		assert_false(storage_failed(s));
		(void)storage_poll(s, true);
	}
}

struct counted {
	uint64_t first, last, count;
	bool ok;
	uint64_t term_at_last;
};

static int count_entry(void *arg, const struct wal_entry *e)
{
	struct counted *c = arg;

	if (c->count == 0)
		c->first = e->index;
	c->last = e->index;
	c->count++;
	c->term_at_last = e->term;
	for (uint32_t i = 0; i < e->size; i++) {
		if (((const uint8_t *)e->data)[i] != (uint8_t)(e->index & 0xff))
			c->ok = false;
	}
	return 0;
}

static void replay(struct storage *s, struct counted *c)
{
	memset(c, 0, sizeof(*c));
	c->ok = true;
	assert_int_equal(wal_replay(&s->wal, count_entry, c), 0);
	assert_true(c->ok);
}

static void config(struct storage_config *cfg, const char *dir, enum wal_sync_mode mode)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->dir = dir;
	cfg->segment_size = 1 << 20;
	cfg->write_size_max = 64 << 10;
	cfg->writes_inflight_max = 8;
	cfg->sync_mode = mode;
}

static void test_uring_wal_append_reopen_recover_every_sync_mode(void **state)
{
	(void)state;
	char dir[128];

	for (enum wal_sync_mode mode = WAL_SYNC_LINKED; mode <= WAL_SYNC_DRAIN; mode++) {
		struct storage s;
		struct storage_config cfg;
		struct hard_state hs;
		struct counted c;

		assert_non_null(temp_dir("/tmp", dir, sizeof(dir)));
		config(&cfg, dir, mode);
		assert_int_equal(storage_open(&s, &cfg, &hs), 0);
		assert_string_equal(uring_io_fs_name(s.uring), "ext4");
		append(&s, 1, 2000, 1, 300); /* about 0.7 MiB: rolls over once */
		wait_durable(&s, 2000);
		assert_true(wal_direct_io(&s.wal));
		assert_true(s.wal.segment_count >= 1);
		storage_close(&s);
		assert_int_equal(storage_open(&s, &cfg, &hs), 0);
		assert_int_equal(wal_last_index(&s.wal), 2000);
		replay(&s, &c);
		assert_int_equal(c.first, 1);
		assert_int_equal(c.last, 2000);
		assert_int_equal(c.count, 2000);
		storage_close(&s);
		rm_rf(dir);
	}
}

static void test_uring_wal_truncate_suffix_and_torn_tail_recover(void **state)
{
	(void)state;
	char dir[128], path[256];
	struct storage s;
	struct storage_config cfg;
	struct hard_state hs;
	struct counted c;

	assert_non_null(temp_dir("/tmp", dir, sizeof(dir)));
	config(&cfg, dir, WAL_SYNC_LINKED);
	assert_int_equal(storage_open(&s, &cfg, &hs), 0);
	append(&s, 1, 100, 1, 100);
	wait_durable(&s, 100);
	assert_int_equal(wal_truncate_suffix(&s.wal, 80), 0);
	append(&s, 81, 90, 2, 100);
	wait_durable(&s, 90);
	uint64_t tail = s.wal.write_offset;
	storage_close(&s);

	/* A torn write after the durable ones: a batch header of garbage at
	 * the next block, as a crash in the middle of a write leaves. */
	snprintf(path, sizeof(path), "%s/wal-0000000000000001.seg", dir);
	int fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	char junk[512];
	memset(junk, 0x77, sizeof(junk));
	assert_int_equal(pwrite(fd, junk, sizeof(junk), (off_t)tail), (ssize_t)sizeof(junk));
	close(fd);

	assert_int_equal(storage_open(&s, &cfg, &hs), 0);
	assert_int_equal(s.wal.stats.recovered_torn_tails, 1);
	replay(&s, &c);
	assert_int_equal(c.last, 90);
	assert_int_equal(c.count, 90);
	assert_int_equal(c.term_at_last, 2);
	storage_close(&s);
	rm_rf(dir);
}

static void test_uring_hard_state_and_snapshots_on_disk(void **state)
{
	(void)state;
	char dir[128];
	struct storage s;
	struct storage_config cfg;
	struct hard_state hs = { 7, 2 }, loaded;
	struct snapshot snap;
	struct snapshot_meta m = { 500, 7, 3, 6 };

	assert_non_null(temp_dir("/tmp", dir, sizeof(dir)));
	config(&cfg, dir, WAL_SYNC_DSYNC);
	assert_int_equal(storage_open(&s, &cfg, &loaded), 0);
	assert_int_equal(loaded.term, 0);
	int64_t seq = hardstate_save(&s.hs, &hs);
	assert_true(seq > 0);
	while (hardstate_durable_seq(&s.hs) < (uint64_t)seq) {
		assert_false(storage_failed(&s));
		(void)storage_poll(&s, true);
	}
	/* Two older ones first: keep-2 trimming lists the real directory
	 * (getdents64, no opendir) and deletes index 300. */
	struct snapshot_meta old = m;
	old.last_index = 300;
	assert_int_equal(snapshot_save(s.io, &old, "a,b", "oldsnp", 2, NULL), 0);
	old.last_index = 400;
	assert_int_equal(snapshot_save(s.io, &old, "a,b", "oldsnp", 2, NULL), 0);
	assert_int_equal(snapshot_save(s.io, &m, "a,b", "snapdt", 2, NULL), 0);
	char path[256], name[STORAGE_NAME_SIZE_MAX];
	snapshot_name(name, sizeof(name), 300, 7);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(access(path, F_OK), -1);
	snapshot_name(name, sizeof(name), 400, 7);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(access(path, F_OK), 0);
	/* An idle loop can sleep on the ring fd: readable once a completion
	 * waits, and the reap then finds it. */
	struct pollfd pfd = { uring_io_ring_fd(s.uring), POLLIN, 0 };
	assert_int_equal(poll(&pfd, 1, 0), 0);
	append(&s, 1, 1, 7, 10);
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	assert_true(storage_poll(&s, false) > 0);
	storage_close(&s);
	assert_int_equal(storage_open(&s, &cfg, &loaded), 0);
	assert_int_equal(loaded.term, 7);
	assert_int_equal(loaded.vote, 2);
	assert_int_equal(snapshot_load(s.io, &snap), 0);
	assert_int_equal(snap.meta.last_index, 500);
	assert_memory_equal(snap.data, "snapdt", 6);
	snapshot_release(&snap);
	storage_close(&s);
	rm_rf(dir);
}

static void count_piece(void *arg, uint64_t written)
{
	uint64_t *pieces = arg;
	(*pieces)++;
	assert_true(written % (64u << 10) == 0 || written == (200u << 10) + 5);
}

/* A paced snapshot on a real file system: every piece goes through
 * sync_file_range, and the file reads back whole. */
static void test_uring_paced_snapshot_reads_back(void **state)
{
	(void)state;
	char dir[128];
	struct storage s;
	struct storage_config cfg;
	struct hard_state loaded;
	struct snapshot snap;
	static uint8_t data[(200u << 10) + 5];
	struct snapshot_meta m = { 77, 3, 3, sizeof(data) };
	uint64_t pieces = 0;
	struct snapshot_pace pace = { .piece = 64u << 10, .after_piece = count_piece, .arg = &pieces };

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i ^ (i >> 9));
	assert_non_null(temp_dir("/tmp", dir, sizeof(dir)));
	config(&cfg, dir, WAL_SYNC_LINKED);
	assert_int_equal(storage_open(&s, &cfg, &loaded), 0);
	assert_int_equal(snapshot_save(s.io, &m, "a,b", data, 2, &pace), 0);
	assert_int_equal(pieces, 4);
	assert_int_equal(snapshot_load(s.io, &snap), 0);
	assert_int_equal(snap.meta.last_index, 77);
	assert_int_equal(snap.meta.data_size, sizeof(data));
	assert_memory_equal(snap.data, data, sizeof(data));
	snapshot_release(&snap);
	storage_close(&s);
	rm_rf(dir);
}

/* Compaction takes a dropped segment's name at once and frees its blocks in
 * paced steps of its open, unlinked file (one unlink of a written 64 MiB
 * segment held every fdatasync of the file system up for 11-15 ms). On a
 * real file system: the file is gone from the directory, its blocks are
 * still allocated until the step, none are after it, and the log reopens
 * whole. */
static void test_uring_compacted_segments_are_freed_in_steps(void **state)
{
	(void)state;
	char dir[128], path[256];
	struct storage s;
	struct storage_config cfg;
	struct hard_state loaded;
	struct stat st;

	assert_non_null(temp_dir("/tmp", dir, sizeof(dir)));
	config(&cfg, dir, WAL_SYNC_LINKED);
	assert_int_equal(storage_open(&s, &cfg, &loaded), 0);
	append(&s, 1, 1200, 1, 4000); /* about 5 MB: four 1 MiB segments and more */
	wait_durable(&s, 1200);
	snprintf(path, sizeof(path), "%s/%s", dir, s.wal.segments[0].name);
	assert_int_equal(stat(path, &st), 0);
	int dropped = wal_compact(&s.wal, 900);
	assert_true(dropped >= 2);
	assert_int_equal(stat(path, &st), -1); /* the name is gone */
	assert_int_equal(s.wal.retiring_count, (uint32_t)dropped);
	uint64_t now = 1, deadline = UINT64_MAX;
	while (s.wal.retiring_count > 0) {
		int fd = s.wal.retiring[0].fd;
		uint32_t left = s.wal.retiring_count;
		assert_int_equal(fstat(fd, &st), 0);
		assert_true(st.st_blocks > 0); /* still allocated */
		assert_int_equal(st.st_nlink, 0);
		assert_true(wal_retire_step(&s.wal, now, &deadline));
		assert_int_equal(s.wal.retiring_count, left - 1); /* 1 MiB: one step */
		now += WAL_RETIRE_PACE_NS;
	}
	uint64_t first = wal_first_index(&s.wal);
	storage_close(&s);
	assert_int_equal(storage_open(&s, &cfg, &loaded), 0);
	assert_int_equal(wal_first_index(&s.wal), first);
	assert_int_equal(wal_last_index(&s.wal), 1200);
	storage_close(&s);
	rm_rf(dir);
}

/* The file system's map of a file: bytes in extents, and how many of them
 * are unwritten (allocated by fallocate, never written: a sync after a
 * write into them also commits the journal's extent conversion). */
static void extent_bytes(int fd, uint64_t *mapped, uint64_t *unwritten)
{
	enum { EXTENTS = 256 };
	union {
		struct fiemap map;
		uint8_t bytes[sizeof(struct fiemap) + EXTENTS * sizeof(struct fiemap_extent)];
	} u;
	uint64_t start = 0;

	*mapped = *unwritten = 0;
	for (;;) {
		memset(&u, 0, sizeof(u));
		u.map.fm_start = start;
		u.map.fm_length = FIEMAP_MAX_OFFSET - start;
		u.map.fm_flags = FIEMAP_FLAG_SYNC;
		u.map.fm_extent_count = EXTENTS;
		assert_int_equal(ioctl(fd, FS_IOC_FIEMAP, &u.map), 0);
		if (u.map.fm_mapped_extents == 0)
			return;
		for (uint32_t i = 0; i < u.map.fm_mapped_extents; i++) {
			const struct fiemap_extent *e = &u.map.fm_extents[i];
			*mapped += e->fe_length;
			if (e->fe_flags & FIEMAP_EXTENT_UNWRITTEN)
				*unwritten += e->fe_length;
			start = e->fe_logical + e->fe_length;
			if (e->fe_flags & FIEMAP_EXTENT_LAST)
				return;
		}
	}
}

/* A spare segment is ready only once zeros are written over it: the one
 * wal_open prepares (blocking) and the one prepared through the ring after
 * a rollover. With segment_fill allocate its blocks stay unwritten. */
static void test_uring_spare_segments_are_written_before_use(void **state)
{
	(void)state;
	char dir[128];
	struct storage s;
	struct storage_config cfg;
	struct hard_state loaded;
	uint64_t mapped, unwritten;

	assert_non_null(temp_dir("/tmp", dir, sizeof(dir)));
	config(&cfg, dir, WAL_SYNC_DSYNC);
	assert_int_equal(storage_open(&s, &cfg, &loaded), 0);
	assert_int_equal(s.wal.spare_state, WAL_SPARE_READY);
	extent_bytes(s.wal.spare.fd, &mapped, &unwritten);
	assert_int_equal(mapped, cfg.segment_size);
	assert_int_equal(unwritten, 0);
	assert_int_equal(s.wal.stats.fill_bytes, cfg.segment_size);

	append(&s, 1, 300, 1, 4000); /* about 1.2 MB: rolls over once */
	wait_durable(&s, 300);
	assert_true(s.wal.stats.rollovers >= 2);
	while (s.wal.spare_state != WAL_SPARE_READY) {
		assert_false(storage_failed(&s));
		(void)storage_poll(&s, true);
	}
	extent_bytes(s.wal.spare.fd, &mapped, &unwritten);
	assert_int_equal(mapped, cfg.segment_size);
	assert_int_equal(unwritten, 0);
	for (uint32_t i = 0; i < s.wal.segment_count; i++) {
		extent_bytes(s.wal.segments[i].fd, &mapped, &unwritten);
		assert_int_equal(unwritten, 0);
	}
	assert_int_equal(s.wal.stats.fill_bytes, (s.wal.stats.rollovers + 1) * cfg.segment_size);
	storage_close(&s);
	rm_rf(dir);

	/* The other choice: fallocate alone, no zeros written. */
	assert_non_null(temp_dir("/tmp", dir, sizeof(dir)));
	config(&cfg, dir, WAL_SYNC_DSYNC);
	cfg.segment_fill = WAL_FILL_ALLOCATE;
	assert_int_equal(storage_open(&s, &cfg, &loaded), 0);
	extent_bytes(s.wal.spare.fd, &mapped, &unwritten);
	assert_int_equal(mapped, cfg.segment_size);
	assert_int_equal(unwritten, cfg.segment_size);
	assert_int_equal(s.wal.stats.fill_bytes, 0);
	storage_close(&s);
	rm_rf(dir);
}

static void save_hs(struct storage *s, uint64_t term, uint64_t vote)
{
	struct hard_state hs = { term, vote };
	int64_t seq = hardstate_save(&s->hs, &hs);
	assert_true(seq > 0);
	while (hardstate_durable_seq(&s->hs) < (uint64_t)seq) {
		assert_false(storage_failed(s));
		(void)storage_poll(s, true);
	}
}

static void test_uring_hard_state_damage_refuses_to_start(void **state)
{
	/* Real files: a damaged newest slot, a deleted hard state file next
	 * to a WAL, and a term below the log's or the snapshot's each refuse
	 * the start with a message naming the hard state file. */
	(void)state;
	char dir[128], path[256], err[256];
	struct storage s;
	struct storage_config cfg;
	struct hard_state hs;
	uint8_t junk[16];

	assert_non_null(temp_dir("/tmp", dir, sizeof(dir)));
	config(&cfg, dir, WAL_SYNC_DSYNC);
	assert_int_equal(storage_open(&s, &cfg, &hs), 0);
	save_hs(&s, 3, 1);
	save_hs(&s, 4, 2);
	save_hs(&s, 5, 3);
	uint32_t newest = s.hs.durable_slot;
	append(&s, 1, 10, 5, 100);
	wait_durable(&s, 10);
	assert_int_equal(storage_check_hard_state(&s, &hs, 0, 0, 5, err, sizeof(err)), -HASP_ECORRUPT);
	hs = hardstate_durable(&s.hs);
	assert_int_equal(storage_check_hard_state(&s, &hs, 0, 0, 5, err, sizeof(err)), 0);
	storage_close(&s);

	/* Damage inside the newest slot's record. */
	snprintf(path, sizeof(path), "%s/%s", dir, HARDSTATE_FILE);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	memset(junk, 0x5a, sizeof(junk));
	assert_int_equal(pwrite(fd, junk, sizeof(junk), (off_t)newest * HARDSTATE_SLOT_SIZE + 24),
			 (ssize_t)sizeof(junk));
	assert_int_equal(fsync(fd), 0);
	assert_int_equal(close(fd), 0);
	assert_int_equal(storage_open(&s, &cfg, &hs), -HASP_ECORRUPT);
	assert_non_null(s.open_failed);
	assert_non_null(strstr(s.open_failed, HARDSTATE_FILE));

	/* The file gone: the open recreates it, the check refuses. */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(storage_open(&s, &cfg, &hs), 0);
	assert_true(s.hs.created);
	assert_int_equal(hs.term, 0);
	assert_int_equal(storage_check_hard_state(&s, &hs, 0, 0, 5, err, sizeof(err)), -HASP_ECORRUPT);
	assert_non_null(strstr(err, "hard state file " HARDSTATE_FILE " is missing"));
	/* A term below the last entry's or the snapshot's term. */
	save_hs(&s, 4, 0);
	hs = hardstate_durable(&s.hs);
	assert_int_equal(storage_check_hard_state(&s, &hs, 0, 0, 5, err, sizeof(err)), -HASP_ECORRUPT);
	assert_non_null(strstr(err, "last log entry's term 5"));
	assert_int_equal(storage_check_hard_state(&s, &hs, 3, 6, 4, err, sizeof(err)), -HASP_ECORRUPT);
	assert_non_null(strstr(err, "snapshot's term 6"));
	assert_int_equal(storage_check_hard_state(&s, &hs, 3, 4, 4, err, sizeof(err)), 0);
	storage_close(&s);
	rm_rf(dir);
}

/* Writes entries over three segments and closes; returns the newest
 * segment that holds entries (path) and the spare's. */
static void three_segments(const char *dir, struct storage_config *cfg, char *newest, char *spare,
			   size_t size)
{
	struct storage s;
	struct hard_state hs;

	config(cfg, dir, WAL_SYNC_LINKED);
	cfg->segment_size = 64 << 10;
	cfg->write_size_max = 16 << 10;
	assert_int_equal(storage_open(&s, cfg, &hs), 0);
	append(&s, 1, 400, 1, 300); /* about 150 KiB: three segments of 64 KiB */
	wait_durable(&s, 400);
	assert_true(s.wal.segment_count >= 3);
	snprintf(newest, size, "%s/%s", dir, s.wal.segments[s.wal.segment_count - 1].name);
	snprintf(spare, size, "%s/%s", dir, s.wal.spare.name);
	assert_int_equal(wal_drain(&s.wal), 0);
	storage_close(&s);
	assert_int_equal(access(spare, F_OK), 0);
}

static void test_uring_wal_truncated_or_missing_newest_segment_refuses(void **state)
{
	/* Segments are preallocated to their full size before their header is
	 * written and numbered without gaps up to the spare: a segment shorter
	 * than its header says, or a gap below the spare, lost entries that
	 * were durable. Before, both opened as a clean, shorter log. */
	(void)state;
	char dir[128], newest[300], spare[300];
	struct storage s;
	struct storage_config cfg;
	struct hard_state hs;
	struct counted c;

	for (int kind = 0; kind < 3; kind++) {
		assert_non_null(temp_dir("/tmp", dir, sizeof(dir)));
		three_segments(dir, &cfg, newest, spare, sizeof(newest));
		if (kind == 0)
			assert_int_equal(truncate(newest, 8192), 0); /* cut inside the entries */
		else if (kind == 1)
			assert_int_equal(truncate(newest, 0), 0);
		else
			assert_int_equal(unlink(newest), 0);
		assert_int_equal(storage_open(&s, &cfg, &hs), -HASP_ECORRUPT);
		assert_non_null(s.open_failed);
		assert_string_equal(s.open_failed, "WAL");
		/* Refused without repairing: the evidence is still there. */
		assert_int_equal(access(spare, F_OK), 0);
		rm_rf(dir);
	}

	/* A clean reopen of the same layout still works, the spare included. */
	assert_non_null(temp_dir("/tmp", dir, sizeof(dir)));
	three_segments(dir, &cfg, newest, spare, sizeof(newest));
	assert_int_equal(storage_open(&s, &cfg, &hs), 0);
	replay(&s, &c);
	assert_int_equal(c.last, 400);
	assert_int_equal(c.count, 400);
	storage_close(&s);
	rm_rf(dir);
}

static void test_uring_wal_on_tmpfs_falls_back_to_buffered_and_warns(void **state)
{
	(void)state;
	char dir[128];
	struct storage s;
	struct storage_config cfg;
	struct hard_state hs;
	struct uring_io_stats st;
	struct counted c;

	assert_non_null(temp_dir("/dev/shm", dir, sizeof(dir)));
	config(&cfg, dir, WAL_SYNC_LINKED);
	assert_int_equal(storage_open(&s, &cfg, &hs), 0);
	assert_string_equal(uring_io_fs_name(s.uring), "tmpfs");
	append(&s, 1, 500, 1, 200);
	wait_durable(&s, 500);
	assert_false(wal_direct_io(&s.wal));
	uring_io_stats_get(s.uring, &st);
	assert_true(st.direct_fallbacks > 0); /* and one LOG_WARN line */
	storage_close(&s);
	assert_int_equal(storage_open(&s, &cfg, &hs), 0);
	replay(&s, &c);
	assert_int_equal(c.last, 500);
	storage_close(&s);
	rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uring_wal_append_reopen_recover_every_sync_mode),
		cmocka_unit_test(test_uring_wal_truncate_suffix_and_torn_tail_recover),
		cmocka_unit_test(test_uring_hard_state_and_snapshots_on_disk),
		cmocka_unit_test(test_uring_paced_snapshot_reads_back),
		cmocka_unit_test(test_uring_hard_state_damage_refuses_to_start),
		cmocka_unit_test(test_uring_compacted_segments_are_freed_in_steps),
		cmocka_unit_test(test_uring_spare_segments_are_written_before_use),
		cmocka_unit_test(test_uring_wal_truncated_or_missing_newest_segment_refuses),
		cmocka_unit_test(test_uring_wal_on_tmpfs_falls_back_to_buffered_and_warns),
	};

	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
