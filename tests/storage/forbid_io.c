/*
 * The forbidden-thread window and the lifting storage wrapper (contract in
 * forbid_io.h).
 */
#include "tests/storage/forbid_io.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "common/assert.h"

static bool g_forbid;      /* the window is open */
static bool g_forbid_now;  /* the mark while inside a node entry point */
static bool g_marked;      /* the thread is marked right now */

/* The mark is set through here so that the libc counter below sees it. */
static void mark(bool on)
{
	g_marked = on;
	hasp_alloc_forbid_thread(on);
}

/* libc allocations behind our back (opendir, stdio buffers, qsort) do not
 * pass through hasp_alloc(). Where we can, replace malloc with a counting
 * one that forwards to glibc's own (glibc's internal callers use the
 * replacement too). Not under sanitizers: they own malloc. */
#if defined(__SANITIZE_ADDRESS__)
#define FORBID_IO_LIBC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FORBID_IO_LIBC 0
#endif
#endif
#ifndef FORBID_IO_LIBC
#define FORBID_IO_LIBC 1
#endif

static uint64_t g_libc_count;

#if FORBID_IO_LIBC
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void __libc_free(void *ptr);

void *malloc(size_t size)
{
	g_libc_count += g_marked;
	return __libc_malloc(size);
}

void *calloc(size_t count, size_t size)
{
	g_libc_count += g_marked;
	return __libc_calloc(count, size);
}

void *realloc(void *ptr, size_t size)
{
	g_libc_count += g_marked;
	return __libc_realloc(ptr, size);
}

void free(void *ptr)
{
	__libc_free(ptr);
}
#endif

bool forbid_io_libc_counted(void)
{
	return FORBID_IO_LIBC;
}

uint64_t forbid_io_libc_count(void)
{
	return g_libc_count;
}

void forbid_io_window(bool open)
{
	g_forbid = open;
}

void forbid_io_enter(void)
{
	g_forbid_now = g_forbid;
	mark(g_forbid);
}

void forbid_io_leave(void)
{
	g_forbid_now = false;
	mark(false);
}

/* Each wrapper lifts the mark for the call and restores the entry point's
 * mark (g_forbid_now) on return. */
static const struct storage_io_ops *g_disk_ops;
static struct storage_io_ops g_shim_ops;

#define SHIM_CALL(expr)                                                                             \
	do {                                                                                        \
		mark(false);                                                                        \
		expr;                                                                               \
		mark(g_forbid_now);                                                                 \
	} while (0)

static int shim_open(void *ctx, const char *name, unsigned flags, int *fd, bool *direct)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->open(ctx, name, flags, fd, direct));
	return rc;
}
static void shim_close(void *ctx, int fd)
{
	SHIM_CALL(g_disk_ops->close(ctx, fd));
}
static int shim_pread(void *ctx, int fd, void *buf, size_t size, uint64_t offset, size_t *got)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->pread(ctx, fd, buf, size, offset, got));
	return rc;
}
static int shim_pwrite(void *ctx, int fd, const void *buf, size_t size, uint64_t offset)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->pwrite(ctx, fd, buf, size, offset));
	return rc;
}
static int shim_fsync(void *ctx, int fd)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->fsync(ctx, fd));
	return rc;
}
static int shim_writeback(void *ctx, int fd, uint64_t offset, uint64_t size)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->writeback(ctx, fd, offset, size));
	return rc;
}
static int shim_allocate(void *ctx, int fd, uint64_t size)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->allocate(ctx, fd, size));
	return rc;
}
static int shim_truncate(void *ctx, int fd, uint64_t size)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->truncate(ctx, fd, size));
	return rc;
}
static int shim_zero_range(void *ctx, int fd, uint64_t offset, uint64_t size)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->zero_range(ctx, fd, offset, size));
	return rc;
}
static int shim_size(void *ctx, int fd, uint64_t *size)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->size(ctx, fd, size));
	return rc;
}
static int shim_rename(void *ctx, const char *from, const char *to)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->rename(ctx, from, to));
	return rc;
}
static int shim_unlink(void *ctx, const char *name)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->unlink(ctx, name));
	return rc;
}
static int shim_sync_dir(void *ctx)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->sync_dir(ctx));
	return rc;
}
struct shim_list_ctx {
	storage_list_fn *fn;
	void *arg;
};
static void shim_list_fn(const char *name, void *arg)
{
	struct shim_list_ctx *c = arg;
	mark(g_forbid_now);
	c->fn(name, c->arg);
	mark(false);
}
static int shim_list(void *ctx, storage_list_fn *fn, void *arg)
{
	struct shim_list_ctx c = { fn, arg };
	int rc;
	SHIM_CALL(rc = g_disk_ops->list(ctx, shim_list_fn, &c));
	return rc;
}
static int shim_submit_write(void *ctx, int fd, const void *buf, uint32_t size, uint64_t offset,
			     unsigned flags, uint64_t user_data)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->submit_write(ctx, fd, buf, size, offset, flags, user_data));
	return rc;
}
static int shim_submit_fsync(void *ctx, int fd, unsigned flags, uint64_t user_data)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->submit_fsync(ctx, fd, flags, user_data));
	return rc;
}
static int shim_submit_sync_dir(void *ctx, unsigned flags, uint64_t user_data)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->submit_sync_dir(ctx, flags, user_data));
	return rc;
}
static int shim_submit(void *ctx)
{
	int rc;
	SHIM_CALL(rc = g_disk_ops->submit(ctx));
	return rc;
}
static unsigned shim_reap(void *ctx, struct storage_cqe *cqes, unsigned count_max, bool wait)
{
	unsigned n;
	SHIM_CALL(n = g_disk_ops->reap(ctx, cqes, count_max, wait));
	return n;
}

struct storage_io forbid_io_wrap(struct storage_io io)
{
	HASP_ASSERT(g_disk_ops == NULL || g_disk_ops == io.ops);
	g_disk_ops = io.ops;
	g_shim_ops = (struct storage_io_ops){
		.open = shim_open, .close = shim_close, .pread = shim_pread, .pwrite = shim_pwrite,
		.fsync = shim_fsync, .writeback = shim_writeback, .allocate = shim_allocate, .zero_range = shim_zero_range,
		.truncate = shim_truncate,
		.size = shim_size, .rename = shim_rename, .unlink = shim_unlink,
		.sync_dir = shim_sync_dir, .list = shim_list, .submit_write = shim_submit_write,
		.submit_fsync = shim_submit_fsync, .submit_sync_dir = shim_submit_sync_dir,
		.submit = shim_submit, .reap = shim_reap,
	};
	io.ops = &g_shim_ops;
	return io;
}
