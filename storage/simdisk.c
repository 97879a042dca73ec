/*
 * The simulated disk (see simdisk.h for the model). Files keep two images,
 * `data` (what reads see) and `durable` (what survives a crash), plus a
 * per-sector write generation: 0 means clean, otherwise the generation of the
 * last write that touched the sector. An fsync remembers the generation when
 * it started and makes only sectors written before that durable, as a real
 * fdatasync covers only writes that completed before it was issued.
 */
#include "storage/simdisk.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/prng.h"

#define SECTOR SIMDISK_SECTOR_SIZE
#define FD_BASE 3

struct sim_file {
	bool used;
	uint8_t *data;
	uint8_t *durable;
	uint32_t *dirty_gen; /* per sector, 0 when clean */
	uint64_t size;
	uint64_t durable_size;
	uint64_t cap; /* bytes, a multiple of SECTOR */
};

struct sim_dirent {
	bool used;
	char name[STORAGE_NAME_SIZE_MAX];
	int file;         /* current target, -1 when absent */
	int durable_file; /* target after a crash, -1 when absent */
};

struct sim_fd {
	bool used;
	bool direct;
	int file;
	int write_err; /* every write through this fd fails with -write_err */
};

struct sim_op {
	uint64_t seq;
	uint64_t user_data;
	enum simdisk_op_kind kind;
	int fd;
	int file;
	const uint8_t *buf; /* the submitter's buffer, kept until reaped */
	uint8_t *copy;      /* what it held at submission (a crash may land it later) */
	bool direct;
	uint32_t size;
	uint64_t offset;
	unsigned flags;
	uint64_t link_pred; /* seq of the op this one waits for, 0 for none */
	bool pred_done;
	bool pred_failed;
	bool started;
	bool done;
	uint64_t start_gen;
};

struct simdisk {
	struct simdisk_config cfg;
	struct prng prng;
	struct sim_file *files;
	uint32_t file_count;
	struct sim_dirent *dirents;
	uint32_t dirent_count;
	struct sim_fd *fds;
	uint32_t fd_count;
	struct sim_op *ops;
	uint32_t op_count;
	uint32_t op_cap;
	uint64_t op_seq;
	uint64_t link_next_pred; /* seq the next submitted op is linked to */
	uint64_t gen;
	int64_t fail_n[2];
	char fail_prefix[STORAGE_NAME_SIZE_MAX]; /* simdisk_fail_new_files */
	int fail_prefix_err;
	int fail_err[2];
	struct simdisk_stats stats;
};

/* Grows an array of elem_size-byte elements to at least want entries. */
static bool sim_grow(void **array, uint32_t *count, uint32_t want, size_t elem_size)
{
	if (want <= *count)
		return true;
	uint32_t n = *count ? *count : 8;
	while (n < want)
		n *= 2;
	void *p = hasp_calloc(n, elem_size);
	if (p == NULL)
		return false;
	if (*array != NULL) {
		memcpy(p, *array, (size_t)*count * elem_size);
		hasp_free(*array);
	}
	*array = p;
	*count = n;
	return true;
}

void simdisk_config_default(struct simdisk_config *cfg, uint64_t seed)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->seed = seed;
	cfg->complete_per_million = 500000;
	cfg->short_write_per_million = 20000;
	cfg->again_per_million = 20000;
	cfg->torn_sector_per_million = 200000;
	cfg->direct_supported = true;
}

struct simdisk *simdisk_create(const struct simdisk_config *cfg)
{
	struct simdisk *d = hasp_calloc(1, sizeof(*d));

	if (d == NULL)
		return NULL;
	d->cfg = *cfg;
	prng_seed(&d->prng, cfg->seed);
	d->fail_n[0] = d->fail_n[1] = -1;
	return d;
}

static void sim_file_free(struct sim_file *f)
{
	hasp_free(f->data);
	hasp_free(f->durable);
	hasp_free(f->dirty_gen);
	memset(f, 0, sizeof(*f));
}

void simdisk_destroy(struct simdisk *d)
{
	if (d == NULL)
		return;
	for (uint32_t i = 0; i < d->file_count; i++)
		sim_file_free(&d->files[i]);
	for (uint32_t i = 0; i < d->op_count; i++)
		hasp_free(d->ops[i].copy);
	hasp_free(d->files);
	hasp_free(d->dirents);
	hasp_free(d->fds);
	hasp_free(d->ops);
	hasp_free(d);
}

static bool sim_file_reserve(struct sim_file *f, uint64_t size)
{
	if (size <= f->cap)
		return true;
	uint64_t cap = f->cap ? f->cap : 16 * SECTOR;
	while (cap < size)
		cap *= 2;
	uint8_t *data = hasp_calloc(1, cap);
	uint8_t *durable = hasp_calloc(1, cap);
	uint32_t *gen = hasp_calloc(cap / SECTOR, sizeof(uint32_t));
	if (data == NULL || durable == NULL || gen == NULL) {
		hasp_free(data);
		hasp_free(durable);
		hasp_free(gen);
		return false;
	}
	if (f->cap > 0) {
		memcpy(data, f->data, f->cap);
		memcpy(durable, f->durable, f->cap);
		memcpy(gen, f->dirty_gen, f->cap / SECTOR * sizeof(uint32_t));
	}
	hasp_free(f->data);
	hasp_free(f->durable);
	hasp_free(f->dirty_gen);
	f->data = data;
	f->durable = durable;
	f->dirty_gen = gen;
	f->cap = cap;
	return true;
}

static int sim_file_new(struct simdisk *d)
{
	for (uint32_t i = 0; i < d->file_count; i++) {
		if (!d->files[i].used) {
			d->files[i].used = true;
			return (int)i;
		}
	}
	uint32_t i = d->file_count;
	if (!sim_grow((void **)&d->files, &d->file_count, i + 1, sizeof(struct sim_file)))
		return -1;
	d->files[i].used = true;
	return (int)i;
}

static struct sim_dirent *sim_dirent_find(struct simdisk *d, const char *name)
{
	for (uint32_t i = 0; i < d->dirent_count; i++) {
		if (d->dirents[i].used && strcmp(d->dirents[i].name, name) == 0)
			return &d->dirents[i];
	}
	return NULL;
}

static struct sim_dirent *sim_dirent_add(struct simdisk *d, const char *name)
{
	uint32_t i;

	for (i = 0; i < d->dirent_count; i++) {
		if (!d->dirents[i].used)
			break;
	}
	if (i == d->dirent_count &&
	    !sim_grow((void **)&d->dirents, &d->dirent_count, i + 1, sizeof(struct sim_dirent)))
		return NULL;
	struct sim_dirent *e = &d->dirents[i];
	e->used = true;
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->file = -1;
	e->durable_file = -1;
	return e;
}

/* Frees files that no name (current or durable) and no fd refers to. */
static void sim_collect(struct simdisk *d)
{
	for (uint32_t f = 0; f < d->file_count; f++) {
		if (!d->files[f].used)
			continue;
		bool live = false;
		for (uint32_t i = 0; i < d->dirent_count && !live; i++) {
			const struct sim_dirent *e = &d->dirents[i];
			live = e->used && (e->file == (int)f || e->durable_file == (int)f);
		}
		for (uint32_t i = 0; i < d->fd_count && !live; i++)
			live = d->fds[i].used && d->fds[i].file == (int)f;
		if (!live)
			sim_file_free(&d->files[f]);
	}
}

static struct sim_fd *sim_fd_get(struct simdisk *d, int fd)
{
	if (fd < FD_BASE || (uint32_t)(fd - FD_BASE) >= d->fd_count || !d->fds[fd - FD_BASE].used)
		return NULL;
	return &d->fds[fd - FD_BASE];
}

/* Applies bytes to the current image and marks their sectors dirty. */
static int sim_apply(struct simdisk *d, struct sim_file *f, const uint8_t *buf, uint64_t size,
		     uint64_t offset)
{
	if (size == 0)
		return 0;
	if (!sim_file_reserve(f, offset + size))
		return -ENOMEM;
	memcpy(f->data + offset, buf, size);
	if (offset + size > f->size)
		f->size = offset + size;
	d->gen++;
	for (uint64_t s = offset / SECTOR; s <= (offset + size - 1) / SECTOR; s++)
		f->dirty_gen[s] = (uint32_t)d->gen;
	d->stats.bytes_written += size;
	return 0;
}

/* Makes sectors written at or before start_gen durable (all with UINT64_MAX)
 * in [first, last] sector range. */
static void sim_persist(struct sim_file *f, uint64_t start_gen, uint64_t first, uint64_t last)
{
	for (uint64_t s = first; s <= last && s < f->cap / SECTOR; s++) {
		if (f->dirty_gen[s] != 0 && f->dirty_gen[s] <= start_gen) {
			memcpy(f->durable + s * SECTOR, f->data + s * SECTOR, SECTOR);
			f->dirty_gen[s] = 0;
		}
	}
	f->durable_size = f->size;
}

/* Consumes an injected failure for this kind, if it is due. */
static int sim_injected(struct simdisk *d, enum simdisk_op_kind kind)
{
	if (d->fail_n[kind] < 0)
		return 0;
	if (d->fail_n[kind] > 0) {
		d->fail_n[kind]--;
		return 0;
	}
	d->fail_n[kind] = -1;
	d->stats.injected_errors++;
	return -d->fail_err[kind];
}

static bool sim_aligned(const struct sim_fd *fd, const void *buf, uint64_t size, uint64_t offset)
{
	if (!fd->direct)
		return true;
	return (uintptr_t)buf % SECTOR == 0 && size % SECTOR == 0 && offset % SECTOR == 0;
}

/* ---- synchronous ops ---- */

static int sim_open(void *ctx, const char *name, unsigned flags, int *fd_out, bool *direct)
{
	struct simdisk *d = ctx;
	struct sim_dirent *e = sim_dirent_find(d, name);
	uint32_t i;

	if (strlen(name) >= STORAGE_NAME_SIZE_MAX)
		return -ENAMETOOLONG;
	if (e == NULL || e->file < 0) {
		if (!(flags & STORAGE_OPEN_CREATE))
			return -ENOENT;
		if (e == NULL && (e = sim_dirent_add(d, name)) == NULL)
			return -ENOMEM;
		int f = sim_file_new(d);
		if (f < 0)
			return -ENOMEM;
		e->file = f;
	}
	for (i = 0; i < d->fd_count; i++) {
		if (!d->fds[i].used)
			break;
	}
	if (i == d->fd_count && !sim_grow((void **)&d->fds, &d->fd_count, i + 1, sizeof(struct sim_fd)))
		return -ENOMEM;
	d->fds[i].used = true;
	d->fds[i].file = e->file;
	d->fds[i].write_err = d->fail_prefix_err != 0 && d->files[e->file].size == 0 &&
					      strncmp(name, d->fail_prefix, strlen(d->fail_prefix)) == 0
				      ? d->fail_prefix_err
				      : 0;
	d->fds[i].direct = (flags & STORAGE_OPEN_DIRECT) && d->cfg.direct_supported;
	*direct = d->fds[i].direct;
	*fd_out = (int)i + FD_BASE;
	return 0;
}

static void sim_close(void *ctx, int fd)
{
	struct simdisk *d = ctx;
	struct sim_fd *f = sim_fd_get(d, fd);

	HASP_ASSERT(f != NULL);
	f->used = false;
}

static int sim_pread(void *ctx, int fd, void *buf, size_t size, uint64_t offset, size_t *got)
{
	struct simdisk *d = ctx;
	struct sim_fd *sfd = sim_fd_get(d, fd);

	if (sfd == NULL)
		return -EBADF;
	if (!sim_aligned(sfd, buf, size, offset))
		return -EINVAL;
	const struct sim_file *f = &d->files[sfd->file];
	size_t n = offset >= f->size ? 0 : (size_t)(f->size - offset < size ? f->size - offset : size);
	if (n > 0)
		memcpy(buf, f->data + offset, n);
	*got = n;
	return 0;
}

static int sim_pwrite(void *ctx, int fd, const void *buf, size_t size, uint64_t offset)
{
	struct simdisk *d = ctx;
	struct sim_fd *sfd = sim_fd_get(d, fd);
	int rc;

	if (sfd == NULL)
		return -EBADF;
	if (!sim_aligned(sfd, buf, size, offset))
		return -EINVAL;
	d->stats.writes++;
	if (sfd->write_err != 0) {
		d->stats.injected_errors++;
		return -sfd->write_err;
	}
	if ((rc = sim_injected(d, SIMDISK_OP_WRITE)) != 0)
		return rc;
	return sim_apply(d, &d->files[sfd->file], buf, size, offset);
}

static int sim_fsync(void *ctx, int fd)
{
	struct simdisk *d = ctx;
	struct sim_fd *sfd = sim_fd_get(d, fd);
	int rc;

	if (sfd == NULL)
		return -EBADF;
	d->stats.fsyncs++;
	if ((rc = sim_injected(d, SIMDISK_OP_FSYNC)) != 0)
		return rc;
	sim_persist(&d->files[sfd->file], UINT64_MAX, 0, UINT64_MAX);
	return 0;
}

/* A simulated disk has no page cache to push: only the call is counted
 * (durability is still fsync's). */
static int sim_writeback(void *ctx, int fd, uint64_t offset, uint64_t size)
{
	struct simdisk *d = ctx;
	(void)offset;
	(void)size;
	if (sim_fd_get(d, fd) == NULL)
		return -EBADF;
	d->stats.writebacks++;
	return 0;
}

static int sim_allocate(void *ctx, int fd, uint64_t size)
{
	struct simdisk *d = ctx;
	struct sim_fd *sfd = sim_fd_get(d, fd);

	if (sfd == NULL)
		return -EBADF;
	struct sim_file *f = &d->files[sfd->file];
	if (!sim_file_reserve(f, size))
		return -ENOSPC;
	if (size > f->size)
		f->size = size;
	return 0;
}

/* Shrinks at once, durably: hasp truncates only files already unlinked. */
static int sim_truncate(void *ctx, int fd, uint64_t size)
{
	struct simdisk *d = ctx;
	struct sim_fd *sfd = sim_fd_get(d, fd);

	if (sfd == NULL)
		return -EBADF;
	struct sim_file *f = &d->files[sfd->file];
	if (size > f->size)
		return -EINVAL;
	f->size = size;
	if (f->durable_size > size)
		f->durable_size = size;
	return 0;
}

static int sim_zero_range(void *ctx, int fd, uint64_t offset, uint64_t size)
{
	struct simdisk *d = ctx;
	struct sim_fd *sfd = sim_fd_get(d, fd);

	if (sfd == NULL)
		return -EBADF;
	struct sim_file *f = &d->files[sfd->file];
	if (size == 0)
		return 0;
	if (!sim_file_reserve(f, offset + size))
		return -ENOSPC;
	uint64_t keep = f->size;
	memset(f->data + offset, 0, size);
	d->gen++;
	for (uint64_t s = offset / SECTOR; s <= (offset + size - 1) / SECTOR; s++)
		f->dirty_gen[s] = (uint32_t)d->gen;
	if (keep > f->size)
		f->size = keep;
	return 0;
}

static int sim_size(void *ctx, int fd, uint64_t *size)
{
	struct simdisk *d = ctx;
	struct sim_fd *sfd = sim_fd_get(d, fd);

	if (sfd == NULL)
		return -EBADF;
	*size = d->files[sfd->file].size;
	return 0;
}

static int sim_rename(void *ctx, const char *from, const char *to)
{
	struct simdisk *d = ctx;
	struct sim_dirent *src = sim_dirent_find(d, from);
	struct sim_dirent *dst;

	if (src == NULL || src->file < 0)
		return -ENOENT;
	if ((dst = sim_dirent_find(d, to)) == NULL && (dst = sim_dirent_add(d, to)) == NULL)
		return -ENOMEM;
	src = sim_dirent_find(d, from); /* the table may have moved */
	dst->file = src->file;
	src->file = -1;
	return 0;
}

static int sim_unlink(void *ctx, const char *name)
{
	struct simdisk *d = ctx;
	struct sim_dirent *e = sim_dirent_find(d, name);

	if (e == NULL || e->file < 0)
		return -ENOENT;
	e->file = -1;
	return 0;
}

static int sim_sync_dir(void *ctx)
{
	struct simdisk *d = ctx;

	for (uint32_t i = 0; i < d->dirent_count; i++) {
		struct sim_dirent *e = &d->dirents[i];
		e->durable_file = e->file;
		if (e->file < 0)
			e->used = false;
	}
	sim_collect(d);
	return 0;
}

static int sim_list(void *ctx, storage_list_fn *fn, void *arg)
{
	struct simdisk *d = ctx;

	for (uint32_t i = 0; i < d->dirent_count; i++) {
		if (d->dirents[i].used && d->dirents[i].file >= 0)
			fn(d->dirents[i].name, arg);
	}
	return 0;
}

/* ---- asynchronous ops ---- */

static int sim_op_add(struct simdisk *d, const struct sim_op *proto)
{
	if (d->op_count == d->op_cap &&
	    !sim_grow((void **)&d->ops, &d->op_cap, d->op_count + 1, sizeof(struct sim_op)))
		return -ENOMEM;
	struct sim_op *op = &d->ops[d->op_count++];
	*op = *proto;
	op->seq = ++d->op_seq;
	op->link_pred = d->link_next_pred;
	op->pred_done = op->link_pred == 0;
	d->link_next_pred = (op->flags & STORAGE_SUBMIT_LINK) ? op->seq : 0;
	if (op->pred_done && !(op->flags & STORAGE_SUBMIT_DRAIN)) {
		op->started = true;
		op->start_gen = d->gen;
	}
	return 0;
}

static int sim_submit_write(void *ctx, int fd, const void *buf, uint32_t size, uint64_t offset,
			    unsigned flags, uint64_t user_data)
{
	struct simdisk *d = ctx;
	struct sim_fd *sfd = sim_fd_get(d, fd);
	struct sim_op op = { 0 };

	if (sfd == NULL)
		return -EBADF;
	op.kind = SIMDISK_OP_WRITE;
	op.fd = fd;
	op.file = sfd->file;
	op.buf = buf;
	op.direct = sfd->direct;
	op.copy = hasp_alloc(size ? size : 1);
	if (op.copy == NULL)
		return -ENOMEM;
	memcpy(op.copy, buf, size);
	op.size = size;
	op.offset = offset;
	op.flags = flags;
	op.user_data = user_data;
	int rc = sim_op_add(d, &op);
	if (rc != 0)
		hasp_free(op.copy);
	return rc;
}

static int sim_submit_fsync(void *ctx, int fd, unsigned flags, uint64_t user_data)
{
	struct simdisk *d = ctx;
	struct sim_fd *sfd = sim_fd_get(d, fd);
	struct sim_op op = { 0 };

	if (sfd == NULL)
		return -EBADF;
	op.kind = SIMDISK_OP_FSYNC;
	op.fd = fd;
	op.file = sfd->file;
	op.flags = flags;
	op.user_data = user_data;
	return sim_op_add(d, &op);
}

static int sim_submit_sync_dir(void *ctx, unsigned flags, uint64_t user_data)
{
	struct simdisk *d = ctx;
	struct sim_op op = { 0 };

	op.kind = SIMDISK_OP_SYNC_DIR;
	op.fd = -1;
	op.file = -1;
	op.flags = flags;
	op.user_data = user_data;
	return sim_op_add(d, &op);
}

static int sim_submit(void *ctx)
{
	(void)ctx;
	return 0;
}

static bool sim_op_eligible(const struct simdisk *d, const struct sim_op *op)
{
	if (op->done || !op->pred_done)
		return false;
	if (op->flags & STORAGE_SUBMIT_DRAIN) {
		for (uint32_t i = 0; i < d->op_count; i++) {
			if (!d->ops[i].done && d->ops[i].seq < op->seq)
				return false;
		}
	}
	return true;
}

static int32_t sim_op_run(struct simdisk *d, struct sim_op *op)
{
	struct sim_file *f;
	int rc;

	if (op->pred_failed)
		return -ECANCELED;
	if (op->kind == SIMDISK_OP_SYNC_DIR) {
		if (prng_chance(&d->prng, d->cfg.again_per_million)) {
			d->stats.agains++;
			return -EINTR;
		}
		return sim_sync_dir(d);
	}
	f = &d->files[op->file];
	if (op->kind == SIMDISK_OP_FSYNC) {
		d->stats.fsyncs++;
		if ((rc = sim_injected(d, SIMDISK_OP_FSYNC)) != 0)
			return rc;
	} else {
		d->stats.writes++;
		if (!sim_aligned(&(struct sim_fd){ .direct = op->direct }, op->buf, op->size,
				 op->offset))
			return -EINVAL;
		if ((rc = sim_injected(d, SIMDISK_OP_WRITE)) != 0)
			return rc;
	}
	if (prng_chance(&d->prng, d->cfg.again_per_million)) {
		d->stats.agains++;
		return prng_below(&d->prng, 2) ? -EAGAIN : -EINTR;
	}
	if (op->kind == SIMDISK_OP_FSYNC) {
		sim_persist(f, op->start_gen, 0, UINT64_MAX);
		return 0;
	}
	uint32_t size = op->size;
	if (size > SECTOR && size % SECTOR == 0 &&
	    prng_chance(&d->prng, d->cfg.short_write_per_million)) {
		size = (uint32_t)prng_range(&d->prng, 1, size / SECTOR - 1) * SECTOR;
		d->stats.short_writes++;
	}
	/* The submitter must not touch a buffer while its write is in flight. */
	HASP_ASSERT(memcmp(op->buf, op->copy, op->size) == 0);
	if ((rc = sim_apply(d, f, op->copy, size, op->offset)) != 0)
		return rc;
	if ((op->flags & STORAGE_SUBMIT_DSYNC) && size > 0)
		sim_persist(f, UINT64_MAX, op->offset / SECTOR, (op->offset + size - 1) / SECTOR);
	return (int32_t)size;
}

static void sim_op_complete(struct simdisk *d, struct sim_op *op, struct storage_cqe *cqe)
{
	int32_t res = sim_op_run(d, op);
	bool failed = res < 0 || (op->kind == SIMDISK_OP_WRITE && (uint32_t)res != op->size);

	op->done = true;
	cqe->user_data = op->user_data;
	cqe->res = res;
	for (uint32_t i = 0; i < d->op_count; i++) {
		struct sim_op *next = &d->ops[i];
		if (!next->done && next->link_pred == op->seq) {
			next->pred_done = true;
			next->pred_failed = failed;
		}
	}
}

static unsigned sim_reap(void *ctx, struct storage_cqe *cqes, unsigned count_max, bool wait)
{
	struct simdisk *d = ctx;
	unsigned count = 0;
	uint32_t start = d->op_count ? (uint32_t)prng_below(&d->prng, d->op_count) : 0;

	/* Visit ops from a random start so completions come out of order. */
	for (uint32_t k = 0; k < d->op_count && count < count_max; k++) {
		struct sim_op *op = &d->ops[(start + k) % d->op_count];
		if (!sim_op_eligible(d, op))
			continue;
		if (!op->started) {
			op->started = true;
			op->start_gen = d->gen;
		}
		if (prng_chance(&d->prng, d->cfg.complete_per_million))
			sim_op_complete(d, op, &cqes[count++]);
	}
	if (count == 0 && wait && count_max > 0) {
		for (uint32_t k = 0; k < d->op_count; k++) {
			struct sim_op *op = &d->ops[(start + k) % d->op_count];
			if (sim_op_eligible(d, op)) {
				if (!op->started) {
					op->started = true;
					op->start_gen = d->gen;
				}
				sim_op_complete(d, op, &cqes[count++]);
				break;
			}
		}
	}
	uint32_t kept = 0;
	for (uint32_t i = 0; i < d->op_count; i++) {
		if (!d->ops[i].done)
			d->ops[kept++] = d->ops[i];
		else
			hasp_free(d->ops[i].copy);
	}
	d->op_count = kept;
	return count;
}

static const struct storage_io_ops simdisk_ops = {
	.open = sim_open,
	.close = sim_close,
	.pread = sim_pread,
	.pwrite = sim_pwrite,
	.fsync = sim_fsync,
	.writeback = sim_writeback,
	.allocate = sim_allocate,
	.zero_range = sim_zero_range,
	.truncate = sim_truncate,
	.size = sim_size,
	.rename = sim_rename,
	.unlink = sim_unlink,
	.sync_dir = sim_sync_dir,
	.list = sim_list,
	.submit_write = sim_submit_write,
	.submit_fsync = sim_submit_fsync,
	.submit_sync_dir = sim_submit_sync_dir,
	.submit = sim_submit,
	.reap = sim_reap,
};

struct storage_io simdisk_io(struct simdisk *d)
{
	return (struct storage_io){ .ops = &simdisk_ops, .ctx = d };
}

/* ---- faults ---- */

static void sim_crash_sector(struct simdisk *d, struct sim_file *f, uint64_t s)
{
	uint8_t *cur = f->data + s * SECTOR;
	const uint8_t *old = f->durable + s * SECTOR;

	if (prng_chance(&d->prng, d->cfg.torn_sector_per_million)) {
		/* A torn sector: a prefix of one version, the rest of the other. */
		uint32_t split = (uint32_t)prng_range(&d->prng, 1, SECTOR - 1);
		if (prng_below(&d->prng, 2))
			memcpy(cur + split, old + split, SECTOR - split);
		else
			memcpy(cur, old, split);
	} else if (prng_below(&d->prng, 2)) {
		memcpy(cur, old, SECTOR);
	}
}

void simdisk_crash(struct simdisk *d)
{
	d->stats.crashes++;
	/* Ops in flight land in part: any subset of their sectors. */
	for (uint32_t i = 0; i < d->op_count; i++) {
		struct sim_op *op = &d->ops[i];
		if (op->kind != SIMDISK_OP_WRITE || op->pred_failed || !d->files[op->file].used ||
		    !prng_below(&d->prng, 2))
			continue;
		for (uint64_t at = 0; at < op->size; at += SECTOR) {
			uint64_t n = op->size - at < SECTOR ? op->size - at : SECTOR;
			if (prng_below(&d->prng, 2) &&
			    sim_apply(d, &d->files[op->file], op->copy + at, n, op->offset + at) != 0)
				break;
		}
	}
	for (uint32_t i = 0; i < d->op_count; i++)
		hasp_free(d->ops[i].copy);
	d->op_count = 0;
	d->link_next_pred = 0;
	for (uint32_t fi = 0; fi < d->file_count; fi++) {
		struct sim_file *f = &d->files[fi];
		if (!f->used)
			continue;
		for (uint64_t s = 0; s < f->cap / SECTOR; s++) {
			if (f->dirty_gen[s] != 0)
				sim_crash_sector(d, f, s);
			f->dirty_gen[s] = 0;
		}
		if (f->size != f->durable_size && prng_below(&d->prng, 2))
			f->size = f->durable_size;
		if (f->size < f->cap)
			memset(f->data + f->size, 0, f->cap - f->size);
		memcpy(f->durable, f->data, f->cap);
		f->durable_size = f->size;
	}
	for (uint32_t i = 0; i < d->dirent_count; i++) {
		struct sim_dirent *e = &d->dirents[i];
		if (!e->used)
			continue;
		if (e->file != e->durable_file && prng_below(&d->prng, 2))
			e->file = e->durable_file;
		e->durable_file = e->file;
		if (e->file < 0)
			e->used = false;
	}
	for (uint32_t i = 0; i < d->fd_count; i++)
		d->fds[i].used = false;
	sim_collect(d);
}

bool simdisk_flip_bit(struct simdisk *d, const char *prefix)
{
	uint32_t candidates = 0;
	size_t plen = strlen(prefix);

	for (uint32_t i = 0; i < d->dirent_count; i++) {
		const struct sim_dirent *e = &d->dirents[i];
		candidates += e->used && e->file >= 0 && strncmp(e->name, prefix, plen) == 0 &&
			      d->files[e->file].size > 0;
	}
	if (candidates == 0)
		return false;
	uint64_t pick = prng_below(&d->prng, candidates);
	for (uint32_t i = 0; i < d->dirent_count; i++) {
		const struct sim_dirent *e = &d->dirents[i];
		if (!(e->used && e->file >= 0 && strncmp(e->name, prefix, plen) == 0 &&
		      d->files[e->file].size > 0) ||
		    pick-- != 0)
			continue;
		struct sim_file *f = &d->files[e->file];
		uint64_t at = prng_below(&d->prng, f->size);
		uint8_t mask = (uint8_t)(1u << prng_below(&d->prng, 8));
		f->data[at] ^= mask;
		f->durable[at] ^= mask;
		d->stats.bit_flips++;
		return true;
	}
	HASP_UNREACHABLE();
	return false;
}

void simdisk_fail_new_files(struct simdisk *d, const char *prefix, int err)
{
	snprintf(d->fail_prefix, sizeof(d->fail_prefix), "%s", prefix);
	d->fail_prefix_err = err;
}

void simdisk_fail_nth(struct simdisk *d, enum simdisk_op_kind kind, uint32_t n, int err)
{
	HASP_ASSERT(kind == SIMDISK_OP_WRITE || kind == SIMDISK_OP_FSYNC);
	HASP_ASSERT(err > 0);
	d->fail_n[kind] = n;
	d->fail_err[kind] = err;
}

void simdisk_fail_clear(struct simdisk *d)
{
	d->fail_n[SIMDISK_OP_WRITE] = -1;
	d->fail_n[SIMDISK_OP_FSYNC] = -1;
}

unsigned simdisk_inflight(const struct simdisk *d)
{
	return d->op_count;
}

void simdisk_stats_get(const struct simdisk *d, struct simdisk_stats *stats)
{
	*stats = d->stats;
}

const uint8_t *simdisk_file_data(const struct simdisk *d, const char *name, uint64_t *size)
{
	const struct sim_dirent *e = sim_dirent_find((struct simdisk *)d, name);

	if (e == NULL || e->file < 0)
		return NULL;
	*size = d->files[e->file].size;
	return d->files[e->file].data;
}

bool simdisk_poke(struct simdisk *d, const char *name, uint64_t offset, const void *data,
		  uint32_t size)
{
	const struct sim_dirent *e = sim_dirent_find(d, name);

	if (e == NULL || e->file < 0 || offset + size > d->files[e->file].size)
		return false;
	memcpy(d->files[e->file].data + offset, data, size);
	memcpy(d->files[e->file].durable + offset, data, size);
	return true;
}
