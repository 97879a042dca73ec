/*
 * The I/O seam of storage/: a small ops table chosen once at open.
 *
 * Two implementations exist: storage/uring.c (io_uring for the hot path,
 * plain syscalls for the rare metadata operations) and storage/simdisk.c (an
 * in-memory disk that is deterministic from a seed and can crash). The WAL,
 * the hard-state slots and the snapshots are written only against this table,
 * so the same logic runs unchanged over both (TigerBeetle's storage
 * simulator, SQLite's test6.c crash VFS).
 *
 * Every operation works on names relative to ONE directory, bound when the
 * implementation is created. Return values follow the kernel: 0 (or a byte
 * count) on success, -errno on failure; callers map them to -HASP_E* codes.
 *
 * The asynchronous half (submit_write, submit_fsync, submit, reap) is the hot
 * path: nothing there blocks, except reap(wait=true), which blocks until at
 * least one completion arrives and retries on EINTR itself. The synchronous
 * half is for recovery, segment creation, truncation and snapshots.
 */
#ifndef HASP_STORAGE_IO_H
#define HASP_STORAGE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* File names inside the storage directory, including the terminating NUL. */
#define STORAGE_NAME_SIZE_MAX 64u

/* open() flags. */
#define STORAGE_OPEN_CREATE (1u << 0) /* create when missing */
#define STORAGE_OPEN_DIRECT (1u << 1) /* ask for O_DIRECT; *direct says if granted */

/* submit_write()/submit_fsync() flags. */
#define STORAGE_SUBMIT_LINK (1u << 0)  /* the next op starts after this one completes, and
					* is cancelled (-ECANCELED) if this one fails or is
					* short (IOSQE_IO_LINK) */
#define STORAGE_SUBMIT_DSYNC (1u << 1) /* write: durable when it completes (RWF_DSYNC) */
#define STORAGE_SUBMIT_DRAIN (1u << 2) /* starts after every earlier op completed
					* (IOSQE_IO_DRAIN) */

/* One completion: the submitter's user_data and the kernel-style result
 * (bytes written, 0 for a sync, or -errno). */
struct storage_cqe {
	uint64_t user_data;
	int32_t res;
};

typedef void storage_list_fn(const char *name, void *arg);

struct storage_io_ops {
	/* Synchronous: files and the directory. */
	int (*open)(void *ctx, const char *name, unsigned flags, int *fd, bool *direct);
	void (*close)(void *ctx, int fd);
	/* Reads up to size bytes; *got is what was read (short at end of file). */
	int (*pread)(void *ctx, int fd, void *buf, size_t size, uint64_t offset, size_t *got);
	/* Writes all size bytes (continuing short writes) or fails. */
	int (*pwrite)(void *ctx, int fd, const void *buf, size_t size, uint64_t offset);
	int (*fsync)(void *ctx, int fd);
	/* Starts writing [offset, offset + size) of the file's cached pages to
	 * the device and waits until they are written (sync_file_range): paces
	 * a large write. Not durable; fsync still decides that. */
	int (*writeback)(void *ctx, int fd, uint64_t offset, uint64_t size);
	/* Preallocates [0, size) so later writes need no allocation (fallocate). */
	int (*allocate)(void *ctx, int fd, uint64_t size);
	/* Makes [offset, offset + size) read as zeros; size stays (ZERO_RANGE). */
	int (*zero_range)(void *ctx, int fd, uint64_t offset, uint64_t size);
	/* Shrinks the file to `size` bytes (ftruncate), freeing what follows. */
	int (*truncate)(void *ctx, int fd, uint64_t size);
	int (*size)(void *ctx, int fd, uint64_t *size);
	int (*rename)(void *ctx, const char *from, const char *to);
	int (*unlink)(void *ctx, const char *name);
	/* Makes creations, renames and unlinks in the directory durable. */
	int (*sync_dir)(void *ctx);
	/* Calls fn once per regular file name in the directory, in no order. */
	int (*list)(void *ctx, storage_list_fn *fn, void *arg);

	/* Asynchronous: queued until submit(), completed through reap(). The
	 * buffer must stay untouched until the op's completion is reaped. */
	int (*submit_write)(void *ctx, int fd, const void *buf, uint32_t size, uint64_t offset,
			    unsigned flags, uint64_t user_data);
	int (*submit_fsync)(void *ctx, int fd, unsigned flags, uint64_t user_data);
	/* fsync of the directory itself: creations and renames become durable. */
	int (*submit_sync_dir)(void *ctx, unsigned flags, uint64_t user_data);
	/* Hands queued ops to the device; 0 or -errno (-EAGAIN/-EBUSY: try later). */
	int (*submit)(void *ctx);
	/* Returns up to count_max completions; with wait, blocks for at least one
	 * while any op is outstanding. */
	unsigned (*reap)(void *ctx, struct storage_cqe *cqes, unsigned count_max, bool wait);
};

/* An implementation bound to its state. Owned by whoever created it. */
struct storage_io {
	const struct storage_io_ops *ops;
	void *ctx;
};

#endif
