/*
 * WAL segments: spares prepared ahead, new segments' headers written through
 * the ring, prefix compaction and reset. Everything here keeps one rule: the
 * oldest segment on disk carries a durable header (its first index), and no
 * data goes into a segment before its header is durable.
 */
#include "storage/wal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/log.h"
#include "hasp/errors.h"
#include "storage/wal_internal.h"
#include "storage/wal_scan.h"

/* Spare segments. A segment is created ahead of need so that rollover on
 * the hot path waits for no device: the spare is created and preallocated
 * (open, fallocate), zeros are written over it through the ring, one chunk
 * in flight (WAL_FILL_ZEROS: fallocate leaves unwritten extents, and every
 * sync after a write into one would commit the file system's journal too),
 * and the fsync and the directory fsync that make its blocks and its name
 * durable go through the ring. Rollover takes a ready spare and writes its header
 * (RWF_DSYNC) through the ring; writes for the new segment are built
 * meanwhile but start only once the header is durable, so that recovery
 * always finds the header (with the segment's first index) of any segment
 * holding data, even after compaction dropped every segment before it. A
 * spare never used has no header and is deleted by recovery. */
static int wal_spare_open(struct wal *w)
{
	struct storage_io io = w->cfg.io;
	struct wal_segment *seg = &w->spare;
	bool direct;
	int rc;

	memset(seg, 0, sizeof(*seg));
	seg->seq = w->segment_seq_next++;
	seg->keep_min = UINT64_MAX;
	seg->size = w->cfg.segment_size;
	seg->fd = -1;
	wal_segment_name(seg->name, sizeof(seg->name), seg->seq);
	rc = io.ops->open(io.ctx, seg->name, STORAGE_OPEN_CREATE | STORAGE_OPEN_DIRECT, &seg->fd,
			  &direct);
	if (rc == 0) {
		w->direct = direct;
		rc = io.ops->allocate(io.ctx, seg->fd, seg->size);
	}
	if (rc != 0) {
		wal_fail(w, "segment create", seg->name, 0, 0, rc);
		if (seg->fd >= 0)
			io.ops->close(io.ctx, seg->fd);
		seg->fd = -1;
		return w->fail_code;
	}
	return 0;
}

/* The spare's size (fallocate), its written zeros and its name become
 * durable before it is used: recovery takes a segment shorter than the
 * spare for a cut one (wal_scan.c, lost segments). Two ops, both reported
 * as WAL_OP_SPARE. */
static void wal_spare_sync(struct wal *w)
{
	struct storage_io io = w->cfg.io;
	int rc = io.ops->submit_fsync(io.ctx, w->spare.fd, 0, wal_user_data(0, 0, WAL_OP_SPARE));

	if (rc != 0) {
		wal_fail(w, "fsync", w->spare.name, 0, 0, rc);
		return;
	}
	w->spare_ops_pending++;
	rc = io.ops->submit_sync_dir(io.ctx, 0, wal_user_data(0, 0, WAL_OP_SPARE));
	if (rc != 0) {
		wal_fail(w, "directory fsync", w->spare.name, 0, 0, rc);
		return;
	}
	w->spare_ops_pending++;
	w->spare_state = WAL_SPARE_SYNCING;
	w->spare_sync_failed = false;
}

/* Writes the spare's next chunk of zeros, or, once the whole file has
 * them, starts its sync. One write in flight: a 256 KiB write queued before
 * a WAL write delays that write's sync by little, and a spare is ready long
 * before the active segment fills. */
static void wal_spare_fill_next(struct wal *w)
{
	struct storage_io io = w->cfg.io;
	uint64_t left = w->spare.size - w->spare_fill_offset;

	if (left == 0) {
		wal_spare_sync(w);
		return;
	}
	uint32_t n = left < WAL_FILL_CHUNK ? (uint32_t)left : WAL_FILL_CHUNK;
	int rc = io.ops->submit_write(io.ctx, w->spare.fd, w->fill_buf, n, w->spare_fill_offset, 0,
				      wal_user_data(0, 0, WAL_OP_SPARE_FILL));
	if (rc != 0) {
		wal_fail(w, "segment zero fill", w->spare.name, w->spare_fill_offset, n, rc);
		return;
	}
	w->spare_ops_pending++;
	w->spare_state = WAL_SPARE_FILLING;
}

void wal_segment_fill_done(struct wal *w, const struct storage_cqe *cqe)
{
	HASP_ASSERT(w->spare_ops_pending > 0);
	w->spare_ops_pending--;
	if (w->failed)
		return;
	if (cqe->res == -EINTR || cqe->res == -EAGAIN) {
		w->stats.retries++;
	} else if (cqe->res <= 0) {
		/* No progress would be retried forever: an I/O error. */
		wal_fail(w, "segment zero fill", w->spare.name, w->spare_fill_offset, 0,
			 cqe->res < 0 ? cqe->res : -EIO);
		return;
	} else {
		/* A short write continues where it stopped. */
		HASP_ASSERT((uint64_t)cqe->res <= w->spare.size - w->spare_fill_offset);
		w->spare_fill_offset += (uint64_t)cqe->res;
		w->stats.fill_bytes += (uint64_t)cqe->res;
	}
	wal_spare_fill_next(w);
	(void)w->cfg.io.ops->submit(w->cfg.io.ctx);
}

/* Starts preparing the next spare (non-blocking but for open + fallocate). */
void wal_segment_prepare(struct wal *w)
{
	if (w->failed || w->spare_state != WAL_SPARE_NONE)
		return;
	if (wal_spare_open(w) == 0) {
		w->spare_fill_offset = 0;
		if (w->cfg.segment_fill == WAL_FILL_ZEROS)
			wal_spare_fill_next(w);
		else
			wal_spare_sync(w);
		(void)w->cfg.io.ops->submit(w->cfg.io.ctx);
	}
}

/* Writes zeros over the whole spare, blocking (wal_segment_prepare_now). */
static int wal_spare_fill_now(struct wal *w)
{
	struct storage_io io = w->cfg.io;

	for (uint64_t at = 0; at < w->spare.size; at += WAL_FILL_CHUNK) {
		uint64_t left = w->spare.size - at;
		size_t n = left < WAL_FILL_CHUNK ? (size_t)left : WAL_FILL_CHUNK;
		int rc = io.ops->pwrite(io.ctx, w->spare.fd, w->fill_buf, n, at);
		if (rc != 0) {
			wal_fail(w, "segment zero fill", w->spare.name, at, (uint32_t)n, rc);
			return w->fail_code;
		}
		w->stats.fill_bytes += n;
	}
	return 0;
}

/* Prepares the spare and waits for it (wal_open: blocking is fine there). */
int wal_segment_prepare_now(struct wal *w)
{
	int rc;

	if ((rc = wal_spare_open(w)) != 0)
		return rc;
	if (w->cfg.segment_fill == WAL_FILL_ZEROS && (rc = wal_spare_fill_now(w)) != 0)
		return rc;
	if ((rc = w->cfg.io.ops->fsync(w->cfg.io.ctx, w->spare.fd)) != 0) {
		wal_fail(w, "fsync", w->spare.name, 0, 0, rc);
		return w->fail_code;
	}
	if ((rc = w->cfg.io.ops->sync_dir(w->cfg.io.ctx)) != 0) {
		wal_fail(w, "directory fsync", w->spare.name, 0, 0, rc);
		return w->fail_code;
	}
	w->spare_state = WAL_SPARE_READY;
	return 0;
}

void wal_segment_spare_done(struct wal *w, const struct storage_cqe *cqe)
{
	HASP_ASSERT(w->spare_ops_pending > 0);
	w->spare_ops_pending--;
	if (w->failed)
		return;
	if (cqe->res == -EINTR || cqe->res == -EAGAIN)
		w->spare_sync_failed = true; /* both again once both are back */
	else if (cqe->res < 0) {
		wal_fail(w, "spare fsync", w->spare.name, 0, 0, cqe->res);
		return;
	}
	if (w->spare_ops_pending > 0)
		return;
	if (w->spare_sync_failed) {
		w->stats.retries++;
		wal_spare_sync(w);
		(void)w->cfg.io.ops->submit(w->cfg.io.ctx);
		return;
	}
	w->spare_state = WAL_SPARE_READY;
}

static void wal_header_start(struct wal *w)
{
	struct storage_io io = w->cfg.io;
	int rc;

	w->header_attempt++;
	rc = io.ops->submit_write(io.ctx, w->header_fd, w->header_buf, BLOCK, 0, STORAGE_SUBMIT_DSYNC,
				  wal_user_data(0, w->header_attempt, WAL_OP_HEADER));
	if (rc != 0) {
		wal_fail(w, "segment header write", wal_segment_name_of(w, w->header_seq), 0, BLOCK,
			 rc);
		return;
	}
	w->header_ops_pending++;
	(void)io.ops->submit(io.ctx);
}

void wal_segment_header_done(struct wal *w, const struct storage_cqe *cqe)
{
	uint16_t attempt = (uint16_t)(cqe->user_data >> 8);

	HASP_ASSERT(w->header_ops_pending > 0);
	w->header_ops_pending--;
	if (w->failed || attempt != w->header_attempt)
		return;
	if (cqe->res == -EINTR || cqe->res == -EAGAIN || (cqe->res > 0 && cqe->res < (int)BLOCK)) {
		/* One block: rewrite it whole. */
		w->stats.retries++;
		wal_header_start(w);
		return;
	}
	if (cqe->res <= 0) {
		wal_fail(w, "segment header write", wal_segment_name_of(w, w->header_seq), 0, BLOCK,
			 cqe->res < 0 ? cqe->res : -EIO);
		return;
	}
	w->header_pending = false;
}

/* Makes the ready spare the active segment, starting at first_index, and
 * starts its header write. Returns 0, -HASP_EFULL (the spare or the previous
 * header is not ready yet: poll and retry) or the failure code. */
int wal_segment_activate(struct wal *w, uint64_t first_index)
{
	struct wal_segment_header h = { 0 };

	if (w->failed)
		return w->fail_code;
	if (w->segment_count == w->cfg.segment_count_max) {
		w->stats.full++;
		return -HASP_EFULL;
	}
	if (w->spare_state != WAL_SPARE_READY || w->header_pending) {
		wal_segment_prepare(w);
		w->stats.spare_waits++;
		return w->failed ? w->fail_code : -HASP_EFULL;
	}
	struct wal_segment *seg = &w->segments[w->segment_count++];
	*seg = w->spare;
	seg->first_index = first_index;
	w->spare_state = WAL_SPARE_NONE;
	w->spare.fd = -1;
	w->write_offset = BLOCK;
	w->stats.rollovers++;

	h.seq = seg->seq;
	h.first_index = first_index;
	h.segment_size = seg->size;
	h.block_size = BLOCK;
	h.version = w->cfg.format_version != 0 ? w->cfg.format_version : WAL_FORMAT_VERSION;
	seg->version = h.version;
	memset(w->header_buf, 0, BLOCK);
	wal_segment_header_encode(w->header_buf, &h);
	w->header_fd = seg->fd;
	w->header_seq = seg->seq;
	w->header_pending = true;
	wal_header_start(w);
	wal_segment_prepare(w);
	return w->failed ? w->fail_code : 0;
}

/* After dropping segments: the log starts at the first segment's first
 * index, or lower where a truncation marker in a remaining segment cut below
 * it (the entries after such a marker were appended again). Recovery
 * computes the same. */
static void wal_first_index_update(struct wal *w)
{
	uint64_t first = w->segments[0].first_index;

	for (uint32_t i = 0; i < w->segment_count; i++) {
		if (w->segments[i].keep_min != UINT64_MAX && w->segments[i].keep_min + 1 < first)
			first = w->segments[i].keep_min + 1;
	}
	if (first > w->first_index)
		w->first_index = first;
}

int wal_compact(struct wal *w, uint64_t index)
{
	struct storage_io io = w->cfg.io;
	uint32_t drop = 0;
	int rc;

	/* Oldest first; never the active segment, never one a write still
	 * uses. */
	while (drop + 1 < w->segment_count && w->segments[drop].index_max <= index) {
		/* Keep a segment whose successor's header is not durable yet:
		 * the oldest segment on disk must always anchor the log. */
		if (w->header_pending && w->segments[drop + 1].seq == w->header_seq)
			break;
		bool busy = false;
		for (uint32_t i = 0; i < w->write_used; i++)
			busy |= wal_slot(w, i)->segment_seq == w->segments[drop].seq;
		if (busy)
			break;
		drop++;
	}
	if (drop == 0)
		return 0;
	for (uint32_t i = 0; i < drop; i++) {
		/* The name goes now; the blocks, freed by the last close, go
		 * in steps (wal_retire_step), unless the queue is full. */
		rc = io.ops->unlink(io.ctx, w->segments[i].name);
		if (w->retiring_count < WAL_RETIRING_MAX && (rc == 0 || rc == -ENOENT))
			w->retiring[w->retiring_count++] = (struct wal_retiring){
				.fd = w->segments[i].fd, .size = w->segments[i].size };
		else
			io.ops->close(io.ctx, w->segments[i].fd);
		if (rc != 0 && rc != -ENOENT) {
			LOG_ERROR(storage, "wal unlink failed file=%s err=%d (%s)", w->segments[i].name,
				  -rc, strerror(-rc));
			/* Keep the table consistent: forget what was closed. */
			memmove(w->segments, w->segments + i + 1,
				(w->segment_count - i - 1) * sizeof(w->segments[0]));
			w->segment_count -= i + 1;
			wal_first_index_update(w);
			return -HASP_EIO;
		}
	}
	memmove(w->segments, w->segments + drop, (w->segment_count - drop) * sizeof(w->segments[0]));
	w->segment_count -= drop;
	for (uint32_t i = 0; i < w->write_used; i++) {
		struct wal_write *s = wal_slot(w, i);
		if (s->state != WAL_WRITE_FREE)
			s->segment -= drop;
	}
	wal_first_index_update(w);
	rc = io.ops->sync_dir(io.ctx);
	w->stats.segments_dropped += drop;
	if (rc != 0) {
		LOG_ERROR(storage, "wal directory fsync failed err=%d (%s)", -rc, strerror(-rc));
		return -HASP_EIO;
	}
	return (int)drop;
}

bool wal_retire_step(struct wal *w, uint64_t now_ns, uint64_t *deadline_ns)
{
	struct storage_io io = w->cfg.io;

	if (w->retiring_count == 0)
		return false;
	if (now_ns < w->retire_next_ns) {
		if (w->retire_next_ns < *deadline_ns)
			*deadline_ns = w->retire_next_ns;
		return false;
	}
	struct wal_retiring *r = &w->retiring[0];
	r->size = r->size > WAL_RETIRE_STEP ? r->size - WAL_RETIRE_STEP : 0;
	int rc = io.ops->truncate(io.ctx, r->fd, r->size);
	w->stats.retire_steps++;
	if (rc != 0 || r->size == 0) {
		/* Done, or the file system refused: the close frees the rest. */
		io.ops->close(io.ctx, r->fd);
		memmove(w->retiring, w->retiring + 1, --w->retiring_count * sizeof(w->retiring[0]));
	}
	w->retire_next_ns = now_ns + WAL_RETIRE_PACE_NS;
	if (w->retiring_count > 0 && w->retire_next_ns < *deadline_ns)
		*deadline_ns = w->retire_next_ns;
	return true;
}

int wal_reset(struct wal *w, uint64_t index)
{
	struct storage_io io = w->cfg.io;
	int rc;

	if ((rc = wal_drain(w)) != 0)
		return rc;
	/* Delete first, then create: a crash in between leaves an empty log,
	 * which the snapshot at index covers. */
	for (uint32_t i = 0; i < w->segment_count; i++) {
		io.ops->close(io.ctx, w->segments[i].fd);
		rc = io.ops->unlink(io.ctx, w->segments[i].name);
		if (rc != 0 && rc != -ENOENT) {
			w->segment_count = 0;
			wal_fail(w, "unlink", w->segments[i].name, 0, 0, rc);
			return w->fail_code;
		}
	}
	w->stats.segments_dropped += w->segment_count;
	w->segment_count = 0;
	if ((rc = io.ops->sync_dir(io.ctx)) != 0) {
		wal_fail(w, "directory fsync", ".", 0, 0, rc);
		return w->fail_code;
	}
	w->first_index = index + 1;
	w->last_index = index;
	w->durable_index = index;
	w->replay_allowed = false;
	/* The next append starts a segment at index + 1 (from the spare). Until
	 * its first write is durable a crash leaves an empty log, which the
	 * snapshot at index covers: the node resets again after loading it. */
	wal_segment_prepare(w);
	return w->failed ? w->fail_code : 0;
}
