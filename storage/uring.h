/*
 * The real disk behind struct storage_io_ops: io_uring for the hot path
 * (writes and fdatasyncs, submitted and reaped without blocking) and plain
 * syscalls relative to one directory fd for the rare metadata operations.
 *
 * O_DIRECT: open() asks for it when STORAGE_OPEN_DIRECT is set. Where the
 * filesystem refuses it (EINVAL) or only emulates it (tmpfs, ramfs: memory
 * that no sync makes durable), the file is opened buffered instead, a warning
 * is logged once per directory and `direct_fallbacks` counts it; durability
 * then rests on fdatasync/RWF_DSYNC, which the WAL issues in both modes.
 */
#ifndef HASP_STORAGE_URING_H
#define HASP_STORAGE_URING_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/io.h"

struct uring_io;

struct uring_io_stats {
	uint64_t direct_fallbacks; /* opens that asked for O_DIRECT and got buffered I/O */
	uint64_t submit_retries;   /* io_uring_enter interrupted or busy */
	uint64_t wait_eintr;       /* waits interrupted by signals (and retried) */
};

/* Creates the ring (queue_depth entries) and opens dir (created if missing).
 * Returns 0, -HASP_ENOMEM or -HASP_ESYS (errno logged). */
/* fsyncs the directory holding path (after creating or renaming path in
 * it, so that the name is durable). Returns 0 or -errno. */
int uring_fsync_parent_dir(const char *path) __attribute__((warn_unused_result));

int uring_io_open(struct uring_io **u, const char *dir, unsigned queue_depth)
	__attribute__((warn_unused_result));
/* Closes the ring and the directory; every op must have been reaped. */
void uring_io_close(struct uring_io *u);

struct storage_io uring_io_ops(struct uring_io *u);
void uring_io_stats_get(const struct uring_io *u, struct uring_io_stats *stats);

/* The ring's fd: it polls readable (POLLIN, epoll) while completions wait
 * to be reaped, so an idle node can sleep on it with its other fds instead
 * of spinning on storage_poll(). */
int uring_io_ring_fd(const struct uring_io *u);

/* The filesystem type of the directory ("ext4", "tmpfs", "xfs", or hex). */
const char *uring_io_fs_name(const struct uring_io *u);

#endif
