/*
 * Snapshot files (format and rules in snapshot.h).
 */
#include "storage/snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "hasp/errors.h"

LOG_TOPIC_DECLARE(storage);

#define SNAP_LIST_MAX 256u

void snapshot_name(char *buf, size_t size, uint64_t index, uint64_t term)
{
	snprintf(buf, size, "snap-%016llx-%016llx.snap", (unsigned long long)index,
		 (unsigned long long)term);
}

static bool snap_hex(const char *p, size_t n, uint64_t *v)
{
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return false;
		*v = (*v << 4) | (uint64_t)d;
	}
	return true;
}

bool snapshot_name_parse(const char *name, uint64_t *index, uint64_t *term)
{
	/* snap- (5) + 16 + '-' + 16 + .snap (5) = 43 */
	return strlen(name) == 43 && strncmp(name, "snap-", 5) == 0 && name[21] == '-' &&
	       strcmp(name + 38, ".snap") == 0 && snap_hex(name + 5, 16, index) &&
	       snap_hex(name + 22, 16, term);
}

static void snap_header_encode(uint8_t *h, const struct snapshot_meta *m, uint32_t body_crc)
{
	memset(h, 0, SNAPSHOT_HEADER_SIZE);
	put_u64le(h + 0, SNAPSHOT_MAGIC);
	put_u16le(h + 8, SNAPSHOT_VERSION);
	put_u16le(h + 10, SNAPSHOT_HEADER_SIZE);
	put_u32le(h + 12, m->membership_size);
	put_u64le(h + 16, m->data_size);
	put_u64le(h + 24, m->last_index);
	put_u64le(h + 32, m->last_term);
	put_u32le(h + 40, body_crc);
	put_u32le(h + 60, crc32c(h, 60));
}

int snapshot_decode(const uint8_t *image, uint64_t size, struct snapshot_meta *m)
{
	if (size < SNAPSHOT_HEADER_SIZE)
		return -HASP_ETRUNCATED;
	if (get_u64le(image) != SNAPSHOT_MAGIC)
		return -HASP_EMAGIC;
	if (get_u32le(image + 60) != crc32c(image, 60))
		return -HASP_ECORRUPT;
	if (get_u16le(image + 8) != SNAPSHOT_VERSION || get_u16le(image + 10) != SNAPSHOT_HEADER_SIZE)
		return -HASP_EVERSION;
	for (uint32_t i = 44; i < 60; i++) {
		if (image[i] != 0)
			return -HASP_ECORRUPT;
	}
	m->membership_size = get_u32le(image + 12);
	m->data_size = get_u64le(image + 16);
	m->last_index = get_u64le(image + 24);
	m->last_term = get_u64le(image + 32);
	if (m->membership_size > SNAPSHOT_MEMBERSHIP_SIZE_MAX || m->data_size > SNAPSHOT_DATA_SIZE_MAX)
		return -HASP_ELENGTH;
	if (size != SNAPSHOT_HEADER_SIZE + (uint64_t)m->membership_size + m->data_size)
		return size < SNAPSHOT_HEADER_SIZE + (uint64_t)m->membership_size + m->data_size
			       ? -HASP_ETRUNCATED
			       : -HASP_ELENGTH;
	if (get_u32le(image + 40) !=
	    crc32c(image + SNAPSHOT_HEADER_SIZE, m->membership_size + m->data_size))
		return -HASP_ECORRUPT;
	return 0;
}

struct snap_item {
	char name[STORAGE_NAME_SIZE_MAX];
	uint64_t index;
	uint64_t term;
};

struct snap_list {
	struct snap_item items[SNAP_LIST_MAX];
	uint32_t count;
	char tmp[8][STORAGE_NAME_SIZE_MAX];
	uint32_t tmp_count;
};

static void snap_collect(const char *name, void *arg)
{
	struct snap_list *l = arg;
	uint64_t index, term;
	size_t n = strlen(name);

	if (n > 4 && strcmp(name + n - 4, ".tmp") == 0 && strncmp(name, "snap-", 5) == 0) {
		if (l->tmp_count < 8)
			snprintf(l->tmp[l->tmp_count++], STORAGE_NAME_SIZE_MAX, "%s", name);
		return;
	}
	if (!snapshot_name_parse(name, &index, &term) || l->count == SNAP_LIST_MAX)
		return;
	snprintf(l->items[l->count].name, STORAGE_NAME_SIZE_MAX, "%s", name);
	l->items[l->count].index = index;
	l->items[l->count].term = term;
	l->count++;
}

/* Newest first. */
static int snap_cmp(const void *a, const void *b)
{
	const struct snap_item *x = a, *y = b;
	if (x->index != y->index)
		return x->index > y->index ? -1 : 1;
	return x->term > y->term ? -1 : x->term < y->term;
}

static int snap_list(struct storage_io io, struct snap_list *l)
{
	memset(l, 0, sizeof(*l));
	int rc = io.ops->list(io.ctx, snap_collect, l);
	if (rc != 0)
		return rc;
	qsort(l->items, l->count, sizeof(l->items[0]), snap_cmp);
	return 0;
}

static int snap_errno(int rc)
{
	return rc == -ENOSPC ? -HASP_ENOSPC : -HASP_EIO;
}

/* Keep-N trimming without the heap (docs/STYLE.md §6): this runs on the node's
 * lcore after start, so it works in two listing passes over fixed stack
 * arrays instead of a heap list of every name. Pass one keeps the newest
 * `keep` (index, term) pairs, newest first, in at most SNAPSHOT_KEEP_MAX
 * slots (1.6 KiB); the oldest of them is the cut. Pass two gathers the names
 * older than the cut, up to SNAP_TRIM_MAX per save (one goes stale per save
 * in the steady state; a backlog drains over the next saves). No qsort
 * either: glibc's may malloc for large arrays. */
#define SNAP_TRIM_MAX 8u

struct snap_key {
	uint64_t index;
	uint64_t term;
};

static bool snap_newer(struct snap_key a, struct snap_key b)
{
	return a.index != b.index ? a.index > b.index : a.term > b.term;
}

struct snap_newest {
	struct snap_key keys[SNAPSHOT_KEEP_MAX];
	uint32_t count; /* kept so far, <= keep */
	uint32_t keep;
	uint32_t seen;  /* snapshot files listed */
};

static void snap_newest_collect(const char *name, void *arg)
{
	struct snap_newest *nw = arg;
	struct snap_key k;

	if (!snapshot_name_parse(name, &k.index, &k.term))
		return;
	nw->seen++;
	/* Insertion into the sorted top-`keep`: drop k if it is older than a
	 * full set's oldest, else shift the older ones down one place. */
	uint32_t at = nw->count;
	while (at > 0 && snap_newer(k, nw->keys[at - 1]))
		at--;
	if (at >= nw->keep)
		return;
	uint32_t last = nw->count < nw->keep ? nw->count : nw->keep - 1;
	memmove(&nw->keys[at + 1], &nw->keys[at], (last - at) * sizeof(nw->keys[0]));
	nw->keys[at] = k;
	if (nw->count < nw->keep)
		nw->count++;
}

struct snap_stale {
	struct snap_key cut; /* the oldest snapshot kept */
	char names[SNAP_TRIM_MAX][STORAGE_NAME_SIZE_MAX];
	uint32_t count;
};

static void snap_stale_collect(const char *name, void *arg)
{
	struct snap_stale *st = arg;
	struct snap_key k;

	if (!snapshot_name_parse(name, &k.index, &k.term) || !snap_newer(st->cut, k) ||
	    st->count == SNAP_TRIM_MAX)
		return;
	snprintf(st->names[st->count++], STORAGE_NAME_SIZE_MAX, "%s", name);
}

static void snap_trim(struct storage_io io, unsigned keep)
{
	struct snap_newest nw = { .keep = keep };
	struct snap_stale st = { .count = 0 };

	HASP_ASSERT(keep >= 1);
	HASP_ASSERT(keep <= SNAPSHOT_KEEP_MAX);
	if (io.ops->list(io.ctx, snap_newest_collect, &nw) != 0 || nw.seen <= keep)
		return; /* trimming waits for the next save */
	HASP_ASSERT(nw.count == keep);
	st.cut = nw.keys[keep - 1];
	if (io.ops->list(io.ctx, snap_stale_collect, &st) != 0)
		return;
	for (uint32_t i = 0; i < st.count; i++)
		(void)io.ops->unlink(io.ctx, st.names[i]);
	if (st.count > 0)
		(void)io.ops->sync_dir(io.ctx);
}

/* The data, in one write or paced (struct snapshot_pace). */
static int snap_write_data(struct storage_io io, int fd, const uint8_t *data, uint64_t size,
			   uint64_t offset, const struct snapshot_pace *pace)
{
	if (pace == NULL)
		return io.ops->pwrite(io.ctx, fd, data, size, offset);
	for (uint64_t done = 0; done < size;) {
		uint64_t len = size - done < pace->piece ? size - done : pace->piece;
		int rc = io.ops->pwrite(io.ctx, fd, data + done, len, offset + done);
		if (rc == 0)
			rc = io.ops->writeback(io.ctx, fd, offset + done, len);
		if (rc != 0)
			return rc;
		done += len;
		pace->after_piece(pace->arg, done);
	}
	return 0;
}

int snapshot_save(struct storage_io io, const struct snapshot_meta *meta, const void *membership,
		  const void *data, unsigned keep, const struct snapshot_pace *pace)
{
	char name[48], tmp[STORAGE_NAME_SIZE_MAX];
	uint8_t header[SNAPSHOT_HEADER_SIZE];
	const char *step;
	bool direct;
	int fd, rc;

	if (keep == 0 || keep > SNAPSHOT_KEEP_MAX || meta->membership_size > SNAPSHOT_MEMBERSHIP_SIZE_MAX ||
	    meta->data_size > SNAPSHOT_DATA_SIZE_MAX ||
	    (meta->membership_size > 0 && membership == NULL) || (meta->data_size > 0 && data == NULL) ||
	    (pace != NULL && (pace->piece == 0 || pace->after_piece == NULL)))
		return -HASP_EINVAL;
	snapshot_name(name, sizeof(name), meta->last_index, meta->last_term);
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	uint32_t crc = crc32c_extend(0, membership, meta->membership_size);
	crc = crc32c_extend(crc, data, meta->data_size);
	snap_header_encode(header, meta, crc);

	(void)io.ops->unlink(io.ctx, tmp);
	step = "create";
	rc = io.ops->open(io.ctx, tmp, STORAGE_OPEN_CREATE, &fd, &direct);
	if (rc != 0)
		goto fail;
	step = "write";
	rc = io.ops->pwrite(io.ctx, fd, header, sizeof(header), 0);
	if (rc == 0 && meta->membership_size > 0)
		rc = io.ops->pwrite(io.ctx, fd, membership, meta->membership_size, sizeof(header));
	if (rc == 0 && meta->data_size > 0)
		rc = snap_write_data(io, fd, data, meta->data_size, sizeof(header) + meta->membership_size,
				     pace);
	if (rc == 0) {
		step = "fsync";
		rc = io.ops->fsync(io.ctx, fd);
	}
	io.ops->close(io.ctx, fd);
	if (rc != 0)
		goto fail_unlink;
	step = "rename";
	if ((rc = io.ops->rename(io.ctx, tmp, name)) != 0)
		goto fail_unlink;
	step = "directory fsync";
	if ((rc = io.ops->sync_dir(io.ctx)) != 0)
		goto fail;

	/* Keep the newest `keep`; the one just written is among them unless
	 * newer ones exist (then it is the one deleted, which is right). */
	snap_trim(io, keep);
	return 0;

fail_unlink:
	(void)io.ops->unlink(io.ctx, tmp);
fail:
	LOG_ERROR(storage, "snapshot %s failed file=%s err=%d (%s)", step, tmp, -rc, strerror(-rc));
	return snap_errno(rc);
}

/* Reads a whole file (buffered). */
static int snap_read(struct storage_io io, const char *name, uint8_t **image, uint64_t *size)
{
	bool direct;
	size_t got;
	int fd, rc;

	*image = NULL;
	if ((rc = io.ops->open(io.ctx, name, 0, &fd, &direct)) != 0)
		return rc;
	rc = io.ops->size(io.ctx, fd, size);
	if (rc == 0 && *size > SNAPSHOT_HEADER_SIZE + SNAPSHOT_MEMBERSHIP_SIZE_MAX + SNAPSHOT_DATA_SIZE_MAX)
		rc = -EFBIG;
	if (rc == 0) {
		*image = hasp_alloc(*size ? *size : 1);
		rc = *image == NULL ? -ENOMEM : io.ops->pread(io.ctx, fd, *image, *size, 0, &got);
		if (rc == 0 && got != *size)
			rc = -EIO;
	}
	io.ops->close(io.ctx, fd);
	if (rc != 0) {
		hasp_free(*image);
		*image = NULL;
	}
	return rc;
}

int snapshot_load(struct storage_io io, struct snapshot *snap)
{
	struct snap_list *l = hasp_alloc(sizeof(*l));
	int rc;

	memset(snap, 0, sizeof(*snap));
	if (l == NULL)
		return -HASP_ENOMEM;
	if ((rc = snap_list(io, l)) != 0) {
		hasp_free(l);
		return -HASP_EIO;
	}
	for (uint32_t i = 0; i < l->tmp_count; i++)
		(void)io.ops->unlink(io.ctx, l->tmp[i]);
	rc = -HASP_ENOENT;
	for (uint32_t i = 0; i < l->count; i++) {
		uint8_t *image;
		uint64_t size;
		struct snapshot_meta m;
		const char *why = NULL;
		int err = snap_read(io, l->items[i].name, &image, &size);
		if (err != 0)
			why = strerror(-err);
		else if ((err = snapshot_decode(image, size, &m)) != 0)
			why = hasp_strerror(err);
		else if (m.last_index != l->items[i].index || m.last_term != l->items[i].term)
			why = "header disagrees with the file name";
		if (why != NULL) {
			LOG_WARN(storage, "snapshot skipped file=%s reason=%s", l->items[i].name, why);
			hasp_free(image);
			snap->skipped++;
			continue;
		}
		snap->meta = m;
		snap->membership = hasp_alloc(m.membership_size ? m.membership_size : 1);
		snap->data = hasp_alloc(m.data_size ? m.data_size : 1);
		if (snap->membership == NULL || snap->data == NULL) {
			hasp_free(image);
			snapshot_release(snap);
			rc = -HASP_ENOMEM;
			break;
		}
		memcpy(snap->membership, image + SNAPSHOT_HEADER_SIZE, m.membership_size);
		memcpy(snap->data, image + SNAPSHOT_HEADER_SIZE + m.membership_size, m.data_size);
		hasp_free(image);
		rc = 0;
		break;
	}
	hasp_free(l);
	return rc;
}

void snapshot_release(struct snapshot *snap)
{
	hasp_free(snap->membership);
	hasp_free(snap->data);
	snap->membership = NULL;
	snap->data = NULL;
}
