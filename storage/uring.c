/*
 * io_uring implementation of the storage I/O seam (see uring.h).
 *
 * One ring per storage directory, driven by its owner's polling loop: ops are
 * queued with io_uring_get_sqe, handed to the kernel by submit() and reaped by
 * reap(). Every wait retries on EINTR: DPDK's tap PMD signals every thread on
 * each received packet (docs/ENVIRONMENT.md), so an interrupted wait is routine.
 */
#include "storage/uring.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <liburing.h>

#include "common/dirsync.h"
#include "common/alloc.h"
#include "common/assert.h"
#include "common/log.h"
#include "hasp/errors.h"

LOG_TOPIC_DECLARE(storage);

struct uring_io {
	struct io_uring ring;
	int dir_fd;
	unsigned queued;   /* SQEs prepared but not yet submitted */
	unsigned inflight; /* submitted ops whose completion is not reaped */
	bool direct_warned;
	long fs_type;
	char fs_name[16];
	char dir[256];
	struct uring_io_stats stats;
};

static const char *fs_type_name(long type, char *buf, size_t size)
{
	switch (type) {
	case EXT4_SUPER_MAGIC: return "ext4";
	case TMPFS_MAGIC: return "tmpfs";
	case RAMFS_MAGIC: return "ramfs";
	case 0x58465342: return "xfs";
	case BTRFS_SUPER_MAGIC: return "btrfs";
	case 0x2fc12fc1: return "zfs";
	case OVERLAYFS_SUPER_MAGIC: return "overlayfs";
	default: snprintf(buf, size, "0x%lx", (unsigned long)type); return buf;
	}
}

int uring_fsync_parent_dir(const char *path)
{
	return dirsync_parent(path);
}

int uring_io_open(struct uring_io **out, const char *dir, unsigned queue_depth)
{
	struct uring_io *u = hasp_calloc(1, sizeof(*u));
	struct statfs sfs;
	int rc;

	if (u == NULL)
		return -HASP_ENOMEM;
	snprintf(u->dir, sizeof(u->dir), "%s", dir);
	if (mkdir(dir, 0755) == 0) {
		/* The new directory's name is durable only once its parent is
		 * synced: without it a power cut can lose the whole data dir,
		 * files fsynced inside it included. */
		int err = uring_fsync_parent_dir(dir);
		if (err != 0) {
			LOG_ERROR(storage, "fsync of the parent of new dir=%s failed errno=%d (%s)", dir,
				  -err, strerror(-err));
			errno = -err;
			rc = -HASP_ESYS;
			goto fail_free;
		}
	} else if (errno != EEXIST) {
		int err = errno;
		LOG_ERROR(storage, "mkdir failed dir=%s errno=%d (%s)", dir, err, strerror(err));
		errno = err;
		rc = -HASP_ESYS;
		goto fail_free;
	}
	u->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (u->dir_fd < 0) {
		LOG_ERROR(storage, "open dir failed dir=%s errno=%d (%s)", dir, errno, strerror(errno));
		rc = -HASP_ESYS;
		goto fail_free;
	}
	u->fs_type = fstatfs(u->dir_fd, &sfs) == 0 ? (long)sfs.f_type : 0;
	const char *name = fs_type_name(u->fs_type, u->fs_name, sizeof(u->fs_name));
	if (name != u->fs_name)
		snprintf(u->fs_name, sizeof(u->fs_name), "%s", name);
	rc = io_uring_queue_init(queue_depth, &u->ring, 0);
	if (rc < 0) {
		LOG_ERROR(storage, "io_uring_queue_init failed depth=%u errno=%d (%s)", queue_depth, -rc,
			  strerror(-rc));
		rc = -HASP_ESYS;
		goto fail_dir;
	}
	*out = u;
	return 0;

fail_dir:
	close(u->dir_fd);
fail_free:;
	int err = errno; /* the caller names it (node_init) */
	hasp_free(u);
	errno = err;
	return rc;
}

void uring_io_close(struct uring_io *u)
{
	if (u == NULL)
		return;
	HASP_ASSERT(u->inflight == 0);
	io_uring_queue_exit(&u->ring);
	close(u->dir_fd);
	hasp_free(u);
}

void uring_io_stats_get(const struct uring_io *u, struct uring_io_stats *stats)
{
	*stats = u->stats;
}

int uring_io_ring_fd(const struct uring_io *u)
{
	return u->ring.ring_fd;
}

const char *uring_io_fs_name(const struct uring_io *u)
{
	return u->fs_name;
}

/* ---- synchronous ops ---- */

static int ur_open(void *ctx, const char *name, unsigned flags, int *fd_out, bool *direct)
{
	struct uring_io *u = ctx;
	int oflags = O_RDWR | O_CLOEXEC | ((flags & STORAGE_OPEN_CREATE) ? O_CREAT : 0);
	bool want_direct = (flags & STORAGE_OPEN_DIRECT) != 0;
	int fd = -1;

	/* tmpfs and ramfs accept O_DIRECT on recent kernels but only emulate it;
	 * say so rather than pretend the writes bypass a cache. */
	if (want_direct && (u->fs_type == TMPFS_MAGIC || u->fs_type == RAMFS_MAGIC))
		want_direct = false;
	else if (want_direct) {
		fd = openat(u->dir_fd, name, oflags | O_DIRECT, 0644);
		if (fd < 0 && errno != EINVAL)
			return -errno;
		want_direct = fd >= 0;
	}
	if (fd < 0) {
		fd = openat(u->dir_fd, name, oflags, 0644);
		if (fd < 0)
			return -errno;
		if (flags & STORAGE_OPEN_DIRECT) {
			u->stats.direct_fallbacks++;
			if (!u->direct_warned)
				LOG_WARN(storage,
					 "O_DIRECT unavailable, using buffered I/O + fdatasync dir=%s fs=%s",
					 u->dir, u->fs_name);
			u->direct_warned = true;
		}
	}
	*direct = want_direct;
	*fd_out = fd;
	return 0;
}

static void ur_close(void *ctx, int fd)
{
	(void)ctx;
	close(fd);
}

static int ur_pread(void *ctx, int fd, void *buf, size_t size, uint64_t offset, size_t *got)
{
	size_t done = 0;

	(void)ctx;
	while (done < size) {
		ssize_t n = pread(fd, (uint8_t *)buf + done, size - done, (off_t)(offset + done));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*got = done;
	return 0;
}

static int ur_pwrite(void *ctx, int fd, const void *buf, size_t size, uint64_t offset)
{
	size_t done = 0;

	(void)ctx;
	while (done < size) {
		ssize_t n = pwrite(fd, (const uint8_t *)buf + done, size - done, (off_t)(offset + done));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

static int ur_fsync(void *ctx, int fd)
{
	(void)ctx;
	while (fsync(fd) != 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

static int ur_writeback(void *ctx, int fd, uint64_t offset, uint64_t size)
{
	(void)ctx;
	while (sync_file_range(fd, (off_t)offset, (off_t)size,
			       SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
				       SYNC_FILE_RANGE_WAIT_AFTER) != 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

static int ur_truncate(void *ctx, int fd, uint64_t size)
{
	(void)ctx;
	return ftruncate(fd, (off_t)size) == 0 ? 0 : -errno;
}

static int ur_allocate(void *ctx, int fd, uint64_t size)
{
	if (fallocate(fd, 0, 0, (off_t)size) == 0)
		return 0;
	if (errno != EOPNOTSUPP)
		return -errno;
	/* No fallocate: extend the file so reads of the tail return zeros. */
	return ur_truncate(ctx, fd, size);
}

static int ur_zero_range(void *ctx, int fd, uint64_t offset, uint64_t size)
{
	static const uint8_t zeros[4096] __attribute__((aligned(4096)));

	(void)ctx;
	if (size == 0)
		return 0;
	if (fallocate(fd, FALLOC_FL_ZERO_RANGE, (off_t)offset, (off_t)size) == 0)
		return 0;
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)size) == 0)
		return 0;
	/* Neither is supported: write zeros (aligned, so O_DIRECT accepts it). */
	for (uint64_t at = 0; at < size; at += sizeof(zeros)) {
		size_t n = size - at < sizeof(zeros) ? (size_t)(size - at) : sizeof(zeros);
		int rc = ur_pwrite(ctx, fd, zeros, n, offset + at);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int ur_size(void *ctx, int fd, uint64_t *size)
{
	struct stat st;

	(void)ctx;
	if (fstat(fd, &st) != 0)
		return -errno;
	*size = (uint64_t)st.st_size;
	return 0;
}

static int ur_rename(void *ctx, const char *from, const char *to)
{
	struct uring_io *u = ctx;
	return renameat(u->dir_fd, from, u->dir_fd, to) == 0 ? 0 : -errno;
}

static int ur_unlink(void *ctx, const char *name)
{
	struct uring_io *u = ctx;
	return unlinkat(u->dir_fd, name, 0) == 0 ? 0 : -errno;
}

static int ur_sync_dir(void *ctx)
{
	struct uring_io *u = ctx;
	return ur_fsync(ctx, u->dir_fd);
}

/* Lists with getdents64 into a stack buffer, not opendir(): opendir mallocs
 * its buffer, and this runs on the node's lcore when a snapshot save trims
 * old snapshots (docs/STYLE.md §6). */
struct ur_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static int ur_list(void *ctx, storage_list_fn *fn, void *arg)
{
	struct uring_io *u = ctx;
	char buf[4096] __attribute__((aligned(8)));
	int fd = openat(u->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		for (long at = 0; at < n;) {
			const struct ur_dirent64 *ent = (const void *)(buf + at);
			HASP_ASSERT(ent->d_reclen > 0);
			if (ent->d_type == DT_REG || ent->d_type == DT_UNKNOWN)
				fn(ent->d_name, arg);
			at += ent->d_reclen;
		}
	}
	close(fd);
	return rc;
}

/* ---- asynchronous ops ---- */

static struct io_uring_sqe *ur_sqe(struct uring_io *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (sqe == NULL) {
		/* The SQ is full of prepared entries: hand them over and retry. */
		int rc = io_uring_submit(&u->ring);
		if (rc > 0) {
			u->inflight += (unsigned)rc;
			u->queued -= (unsigned)rc;
		}
		sqe = io_uring_get_sqe(&u->ring);
	}
	return sqe;
}

static void ur_sqe_flags(struct io_uring_sqe *sqe, unsigned flags)
{
	unsigned f = 0;

	if (flags & STORAGE_SUBMIT_LINK)
		f |= IOSQE_IO_LINK;
	if (flags & STORAGE_SUBMIT_DRAIN)
		f |= IOSQE_IO_DRAIN;
	io_uring_sqe_set_flags(sqe, f);
}

static int ur_submit_write(void *ctx, int fd, const void *buf, uint32_t size, uint64_t offset,
			   unsigned flags, uint64_t user_data)
{
	struct uring_io *u = ctx;
	struct io_uring_sqe *sqe = ur_sqe(u);

	if (sqe == NULL)
		return -EBUSY;
	io_uring_prep_write(sqe, fd, buf, size, offset);
	if (flags & STORAGE_SUBMIT_DSYNC)
		sqe->rw_flags = RWF_DSYNC;
	ur_sqe_flags(sqe, flags);
	io_uring_sqe_set_data64(sqe, user_data);
	u->queued++;
	return 0;
}

static int ur_submit_fsync(void *ctx, int fd, unsigned flags, uint64_t user_data)
{
	struct uring_io *u = ctx;
	struct io_uring_sqe *sqe = ur_sqe(u);

	if (sqe == NULL)
		return -EBUSY;
	io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
	ur_sqe_flags(sqe, flags);
	io_uring_sqe_set_data64(sqe, user_data);
	u->queued++;
	return 0;
}

static int ur_submit_sync_dir(void *ctx, unsigned flags, uint64_t user_data)
{
	struct uring_io *u = ctx;
	struct io_uring_sqe *sqe = ur_sqe(u);

	if (sqe == NULL)
		return -EBUSY;
	io_uring_prep_fsync(sqe, u->dir_fd, 0);
	ur_sqe_flags(sqe, flags);
	io_uring_sqe_set_data64(sqe, user_data);
	u->queued++;
	return 0;
}

static int ur_submit(void *ctx)
{
	struct uring_io *u = ctx;

	while (u->queued > 0) {
		int rc = io_uring_submit(&u->ring);
		if (rc == -EINTR) {
			u->stats.submit_retries++;
			continue;
		}
		if (rc == -EAGAIN || rc == -EBUSY) {
			u->stats.submit_retries++;
			return rc;
		}
		if (rc < 0)
			return rc;
		u->inflight += (unsigned)rc;
		u->queued -= (unsigned)rc;
		if (rc == 0)
			break;
	}
	return 0;
}

static unsigned ur_reap(void *ctx, struct storage_cqe *cqes, unsigned count_max, bool wait)
{
	struct uring_io *u = ctx;
	struct io_uring_cqe *cqe;
	unsigned count = 0;

	while (count < count_max) {
		int rc = io_uring_peek_cqe(&u->ring, &cqe);
		if (rc == -EAGAIN && wait && count == 0 && u->inflight > 0) {
			rc = io_uring_wait_cqe(&u->ring, &cqe);
			if (rc == -EINTR) {
				u->stats.wait_eintr++;
				continue;
			}
		}
		if (rc != 0)
			break;
		cqes[count].user_data = io_uring_cqe_get_data64(cqe);
		cqes[count].res = cqe->res;
		count++;
		io_uring_cqe_seen(&u->ring, cqe);
		HASP_ASSERT(u->inflight > 0);
		u->inflight--;
	}
	return count;
}

static const struct storage_io_ops uring_ops = {
	.open = ur_open,
	.close = ur_close,
	.pread = ur_pread,
	.pwrite = ur_pwrite,
	.fsync = ur_fsync,
	.writeback = ur_writeback,
	.allocate = ur_allocate,
	.zero_range = ur_zero_range,
	.truncate = ur_truncate,
	.size = ur_size,
	.rename = ur_rename,
	.unlink = ur_unlink,
	.sync_dir = ur_sync_dir,
	.list = ur_list,
	.submit_write = ur_submit_write,
	.submit_fsync = ur_submit_fsync,
	.submit_sync_dir = ur_submit_sync_dir,
	.submit = ur_submit,
	.reap = ur_reap,
};

struct storage_io uring_io_ops(struct uring_io *u)
{
	return (struct storage_io){ .ops = &uring_ops, .ctx = u };
}
