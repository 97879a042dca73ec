/*
 * The WAL write path: group commit into a ring of write slots, pipelined
 * submission, in-order durability, truncation markers, segment rollover and
 * prefix compaction. Recovery lives in wal_scan.c; the format in
 * wal_format.c.
 *
 * Partial blocks: every write starts on a fresh 4 KiB block and is padded to
 * the next one, so a block that holds a record is written exactly once and a
 * record is immutable once written. No write ever rewrites a block another
 * write (in flight or durable) touched, so out-of-order completion cannot
 * undo data and a torn write cannot damage records reported durable. The
 * cost is padding (counted in stats.padding_bytes; docs/STORAGE.md has the
 * measured numbers); under load the writes are large and it vanishes.
 */
#include "storage/wal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/log.h"
#include "hasp/errors.h"
#include "storage/wal_scan.h"

LOG_TOPIC_DEFINE(storage);

#define BLOCK HASP_WAL_BLOCK_SIZE

enum wal_op_kind { WAL_OP_WRITE = 1, WAL_OP_SYNC = 2, WAL_OP_SPARE = 3, WAL_OP_HEADER = 4 };

/* user_data: owner (8 bits) | slot (16) | attempt (16) | kind (8). */
static uint64_t wal_user_data(uint32_t slot, uint16_t attempt, enum wal_op_kind kind)
{
	return (WAL_USER_DATA_OWNER << 56) | ((uint64_t)slot << 24) | ((uint64_t)attempt << 8) |
	       (uint64_t)kind;
}

void wal_config_default(struct wal_config *cfg, struct storage_io io)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->io = io;
	cfg->segment_size = 64ull << 20;
	cfg->write_size_max = 1u << 20;
	cfg->writes_inflight_max = 16;
	cfg->segment_count_max = 1024;
	cfg->sync_mode = WAL_SYNC_LINKED;
}

static int wal_errno_code(int res)
{
	return res == -ENOSPC ? -HASP_ENOSPC : -HASP_EIO;
}

static struct wal_write *wal_slot(struct wal *w, uint32_t nth)
{
	return &w->writes[(w->write_head + nth) % w->write_count];
}

static uint32_t wal_slot_id(const struct wal *w, const struct wal_write *s)
{
	return (uint32_t)(s - w->writes);
}

/* The newest slot if it is still taking appends. */
static struct wal_write *wal_filling(struct wal *w)
{
	if (w->write_used == 0)
		return NULL;
	struct wal_write *s = wal_slot(w, w->write_used - 1);
	return s->state == WAL_WRITE_FILLING ? s : NULL;
}

static void wal_fail(struct wal *w, const char *what, const char *file, uint64_t offset,
		     uint32_t size, int res)
{
	if (!w->failed)
		LOG_ERROR(storage,
			  "wal %s failed file=%s offset=%llu len=%u err=%d (%s); durability stops",
			  what, file, (unsigned long long)offset, size, -res, strerror(-res));
	w->failed = true;
	if (w->fail_code == 0)
		w->fail_code = wal_errno_code(res);
}

static const char *wal_segment_name_of(const struct wal *w, uint64_t seq)
{
	for (uint32_t i = 0; i < w->segment_count; i++) {
		if (w->segments[i].seq == seq)
			return w->segments[i].name;
	}
	return "?";
}

/* Spare segments. A segment is created ahead of need so that rollover on
 * the hot path waits for no device: the spare is created and preallocated
 * (open, fallocate), and the directory fsync that makes its name durable goes
 * through the ring. Rollover takes a ready spare and writes its header
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

static void wal_spare_sync(struct wal *w)
{
	struct storage_io io = w->cfg.io;
	int rc = io.ops->submit_sync_dir(io.ctx, 0, wal_user_data(0, 0, WAL_OP_SPARE));

	if (rc != 0) {
		wal_fail(w, "directory fsync", w->spare.name, 0, 0, rc);
		return;
	}
	w->spare_ops_pending++;
	w->spare_state = WAL_SPARE_SYNCING;
}

/* Starts preparing the next spare (non-blocking but for open + fallocate). */
static void wal_spare_prepare(struct wal *w)
{
	if (w->failed || w->spare_state != WAL_SPARE_NONE)
		return;
	if (wal_spare_open(w) == 0) {
		wal_spare_sync(w);
		(void)w->cfg.io.ops->submit(w->cfg.io.ctx);
	}
}

/* Prepares the spare and waits for it (wal_open: blocking is fine there). */
static int wal_spare_prepare_now(struct wal *w)
{
	int rc;

	if ((rc = wal_spare_open(w)) != 0)
		return rc;
	if ((rc = w->cfg.io.ops->sync_dir(w->cfg.io.ctx)) != 0) {
		wal_fail(w, "directory fsync", w->spare.name, 0, 0, rc);
		return w->fail_code;
	}
	w->spare_state = WAL_SPARE_READY;
	return 0;
}

static void wal_spare_done(struct wal *w, const struct storage_cqe *cqe)
{
	HASP_ASSERT(w->spare_ops_pending > 0);
	w->spare_ops_pending--;
	if (w->failed)
		return;
	if (cqe->res == -EINTR || cqe->res == -EAGAIN) {
		w->stats.retries++;
		wal_spare_sync(w);
		(void)w->cfg.io.ops->submit(w->cfg.io.ctx);
		return;
	}
	if (cqe->res < 0) {
		wal_fail(w, "directory fsync", w->spare.name, 0, 0, cqe->res);
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

static void wal_header_done(struct wal *w, const struct storage_cqe *cqe)
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
static int wal_segment_activate(struct wal *w, uint64_t first_index)
{
	struct wal_segment_header h = { 0 };

	if (w->failed)
		return w->fail_code;
	if (w->segment_count == w->cfg.segment_count_max) {
		w->stats.full++;
		return -HASP_EFULL;
	}
	if (w->spare_state != WAL_SPARE_READY || w->header_pending) {
		wal_spare_prepare(w);
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
	memset(w->header_buf, 0, BLOCK);
	wal_segment_header_encode(w->header_buf, &h);
	w->header_fd = seg->fd;
	w->header_seq = seg->seq;
	w->header_pending = true;
	wal_header_start(w);
	wal_spare_prepare(w);
	return w->failed ? w->fail_code : 0;
}

/* Closes the open write: batch header, zero padding, the end index it makes
 * durable. */
static void wal_seal(struct wal *w, struct wal_write *s)
{
	struct wal_batch_header b = { 0 };

	HASP_ASSERT(s->state == WAL_WRITE_FILLING);
	HASP_ASSERT(s->record_count > 0);
	b.records_size = s->used - WAL_BATCH_HEADER_SIZE;
	b.record_count = s->record_count;
	b.first_index = s->first_index;
	b.watermark = w->durable_index;
	b.segment_seq = s->segment_seq;
	wal_batch_header_encode(s->buf, &b);
	s->size = (uint32_t)wal_block_round_up(s->used);
	memset(s->buf + s->used, 0, s->size - s->used);
	s->end_index = w->last_index;
	s->state = WAL_WRITE_READY;
	w->stats.padding_bytes += s->size - b.records_size;
	w->stats.records_bytes += b.records_size;
#ifdef HASP_DEBUG_ASSERTS
	{
		/* Check the batch before it leaves, as recovery will after. */
		uint64_t exp = s->start_index, next, first = w->first_index;
		struct wal_batch_header check;
		HASP_DASSERT(wal_scan_batch(s->buf, s->size, 0, s->segment_seq, &first, &exp, &check,
					    &next, NULL, NULL) == 0);
		HASP_DASSERT(next == s->size);
		HASP_DASSERT(exp == w->last_index + 1);
	}
#endif
}

/* Capacity of a slot: one write, and what is left of its segment. */
static uint64_t wal_slot_capacity(const struct wal *w, const struct wal_write *s)
{
	uint64_t left = w->segments[s->segment].size - s->offset;
	return left < w->cfg.write_size_max ? left : w->cfg.write_size_max;
}

/* Puts one encoded record into the open write, opening a new write (and a
 * new segment) when it does not fit. */
static int wal_put(struct wal *w, const struct wal_record_header *r, const void *payload,
		   uint64_t next_index)
{
	uint32_t rsize = wal_record_size(r->payload_size);
	uint64_t need = WAL_BATCH_HEADER_SIZE + (uint64_t)rsize;
	struct wal_write *s = wal_filling(w);
	int rc;

	if (need > w->cfg.write_size_max || need > w->cfg.segment_size - BLOCK)
		return -HASP_ETOOBIG;
	if (s != NULL && s->used + rsize > wal_slot_capacity(w, s)) {
		wal_seal(w, s);
		s = NULL;
	}
	if (s == NULL) {
		if (w->write_used == w->write_count) {
			w->stats.full++;
			return -HASP_EFULL;
		}
		if (w->segment_count == 0 ||
		    w->write_offset + wal_block_round_up(need) >
			    w->segments[w->segment_count - 1].size) {
			if ((rc = wal_segment_activate(w, next_index)) != 0)
				return rc;
		}
		s = wal_slot(w, w->write_used);
		HASP_ASSERT(s->state == WAL_WRITE_FREE);
		HASP_ASSERT(s->ops_pending == 0);
		s->state = WAL_WRITE_FILLING;
		s->used = WAL_BATCH_HEADER_SIZE;
		s->record_count = 0;
		s->first_index = 0;
		s->start_index = next_index;
		s->segment = w->segment_count - 1;
		s->segment_seq = w->segments[s->segment].seq;
		s->fd = w->segments[s->segment].fd;
		s->offset = w->write_offset;
		s->done_bytes = 0;
		s->write_done = false;
		s->reported = false;
		w->write_used++;
	}
	wal_record_encode(s->buf + s->used, r, payload);
	s->used += rsize;
	s->record_count++;
	if (r->type != WAL_TYPE_TRUNCATE) {
		if (s->first_index == 0)
			s->first_index = r->index;
		if (r->index > w->segments[s->segment].index_max)
			w->segments[s->segment].index_max = r->index;
	} else if (r->index < w->segments[s->segment].keep_min) {
		w->segments[s->segment].keep_min = r->index;
	}
	/* The frontier covers the open write as it grows. */
	w->write_offset = s->offset + wal_block_round_up(s->used);
	return 0;
}

/* The WAL's invariants (checked after each state change in debug builds). */
bool wal_invariants_ok(const struct wal *w)
{
	uint32_t inflight = 0;
	uint64_t end_prev = 0;
	bool filling_seen = false;

	if (w->durable_index > w->last_index || w->first_index > w->last_index + 1 ||
	    w->write_used > w->write_count || w->inflight > w->cfg.writes_inflight_max)
		return false;
	for (uint32_t i = 0; i < w->write_used; i++) {
		const struct wal_write *s = &w->writes[(w->write_head + i) % w->write_count];
		if (s->state == WAL_WRITE_FREE || filling_seen)
			return false; /* only the newest slot may be taking appends */
		filling_seen = s->state == WAL_WRITE_FILLING;
		inflight += s->state == WAL_WRITE_INFLIGHT;
		if (s->state != WAL_WRITE_FILLING && (s->size % BLOCK != 0 || s->offset % BLOCK != 0))
			return false;
		/* Writes not yet reported make the log durable in order (a
		 * truncation may have lowered reported ones' end below). */
		if (s->state != WAL_WRITE_FILLING && !s->reported) {
			if (s->end_index < end_prev || s->end_index < w->durable_index)
				return false;
			end_prev = s->end_index;
		}
	}
	for (uint32_t i = 1; i < w->segment_count; i++) {
		if (w->segments[i].seq <= w->segments[i - 1].seq)
			return false;
	}
	return inflight == w->inflight && w->write_offset % BLOCK == 0;
}

int wal_append(struct wal *w, const struct wal_entry *e)
{
	struct wal_record_header r;
	int rc;

	HASP_ASSERT(e != NULL);
	HASP_ASSERT(e->size == 0 || e->data != NULL);
	if (w->failed)
		return w->fail_code;
	if (e->index != w->last_index + 1 || e->type > WAL_TYPE_USER_MAX)
		return -HASP_EINVAL;
	r.payload_size = e->size;
	r.term = e->term;
	r.index = e->index;
	r.type = e->type;
	if ((rc = wal_put(w, &r, e->data, e->index)) != 0)
		return rc;
	w->last_index = e->index;
	w->replay_allowed = false; /* replay reads the recovered log only */
	w->stats.appends++;
	HASP_ASSERT(w->durable_index <= w->last_index);
	HASP_DASSERT(wal_invariants_ok(w));
	return 0;
}

static int wal_start(struct wal *w, struct wal_write *s)
{
	struct storage_io io = w->cfg.io;
	uint32_t slot = wal_slot_id(w, s);
	const uint8_t *buf = s->buf + s->done_bytes;
	uint32_t size = s->size - s->done_bytes;
	uint64_t offset = s->offset + s->done_bytes;
	int rc;

	HASP_ASSERT(s->done_bytes < s->size || s->write_done);
	s->attempt++;
	if (s->write_done) {
		/* Only the sync is left (it was interrupted). */
		rc = io.ops->submit_fsync(io.ctx, s->fd, 0, wal_user_data(slot, s->attempt, WAL_OP_SYNC));
		s->ops_pending += rc == 0;
	} else if (w->cfg.sync_mode == WAL_SYNC_DSYNC) {
		rc = io.ops->submit_write(io.ctx, s->fd, buf, size, offset, STORAGE_SUBMIT_DSYNC,
					  wal_user_data(slot, s->attempt, WAL_OP_WRITE));
		s->ops_pending += rc == 0;
	} else {
		unsigned wflags = w->cfg.sync_mode == WAL_SYNC_LINKED ? STORAGE_SUBMIT_LINK : 0;
		unsigned sflags = w->cfg.sync_mode == WAL_SYNC_DRAIN ? STORAGE_SUBMIT_DRAIN : 0;
		rc = io.ops->submit_write(io.ctx, s->fd, buf, size, offset, wflags,
					  wal_user_data(slot, s->attempt, WAL_OP_WRITE));
		s->ops_pending += rc == 0;
		if (rc == 0) {
			rc = io.ops->submit_fsync(io.ctx, s->fd, sflags,
						  wal_user_data(slot, s->attempt, WAL_OP_SYNC));
			s->ops_pending += rc == 0;
		}
	}
	if (rc != 0) {
		wal_fail(w, "submit", wal_segment_name_of(w, s->segment_seq), offset, size, rc);
		return w->fail_code;
	}
	return 0;
}

int wal_submit(struct wal *w)
{
	int rc;

	if (w->failed)
		return w->fail_code;
	for (uint32_t i = 0; i < w->write_used && w->inflight < w->cfg.writes_inflight_max; i++) {
		struct wal_write *s = wal_slot(w, i);
		if (w->header_pending && s->segment_seq == w->header_seq)
			break; /* its segment's header is not durable yet */
		if (s->state == WAL_WRITE_FILLING)
			wal_seal(w, s);
		if (s->state != WAL_WRITE_READY)
			continue;
		if ((rc = wal_start(w, s)) != 0)
			return rc;
		s->state = WAL_WRITE_INFLIGHT;
		w->inflight++;
		w->stats.writes++;
	}
	rc = w->cfg.io.ops->submit(w->cfg.io.ctx);
	if (rc != 0 && rc != -EAGAIN && rc != -EBUSY && rc != -EINTR) {
		wal_fail(w, "io_uring submit", "-", 0, 0, rc);
		return w->fail_code;
	}
	return 0;
}

/* Reports durability in write order and frees slots whose ops are all back. */
static void wal_advance(struct wal *w)
{
	for (uint32_t i = 0; i < w->write_used; i++) {
		struct wal_write *s = wal_slot(w, i);
		if (s->state != WAL_WRITE_DONE)
			break;
		if (!s->reported) {
			HASP_ASSERT(s->end_index >= w->durable_index);
			w->durable_index = s->end_index;
			s->reported = true;
		}
	}
	while (w->write_used > 0) {
		struct wal_write *s = wal_slot(w, 0);
		if (!(s->state == WAL_WRITE_DONE && s->reported && s->ops_pending == 0))
			break;
		s->state = WAL_WRITE_FREE;
		w->write_head = (w->write_head + 1) % w->write_count;
		w->write_used--;
	}
	HASP_ASSERT(w->durable_index <= w->last_index);
}

static bool wal_retryable(int res)
{
	return res == -EINTR || res == -EAGAIN;
}

void wal_io_done(struct wal *w, const struct storage_cqe *cqe)
{
	uint32_t slot = (uint32_t)(cqe->user_data >> 24) & 0xffffu;
	uint16_t attempt = (uint16_t)(cqe->user_data >> 8);
	enum wal_op_kind kind = (enum wal_op_kind)(cqe->user_data & 0xffu);
	struct wal_write *s;

	HASP_ASSERT((cqe->user_data >> 56) == WAL_USER_DATA_OWNER);
	if (kind == WAL_OP_SPARE) {
		wal_spare_done(w, cqe);
		return;
	}
	if (kind == WAL_OP_HEADER) {
		wal_header_done(w, cqe);
		return;
	}
	HASP_ASSERT(slot < w->write_count);
	s = &w->writes[slot];
	HASP_ASSERT(s->ops_pending > 0);
	s->ops_pending--;
	if (w->failed || attempt != s->attempt || s->state != WAL_WRITE_INFLIGHT) {
		/* A completion of an abandoned attempt (e.g. the sync cancelled
		 * after a short write), or after failure: nothing to do. */
		wal_advance(w);
		return;
	}
	if (cqe->res == -ECANCELED)
		return; /* the write it was linked to failed or was short */
	if (kind == WAL_OP_WRITE) {
		if (wal_retryable(cqe->res)) {
			w->stats.retries++;
			if (wal_start(w, s) == 0)
				(void)w->cfg.io.ops->submit(w->cfg.io.ctx);
			return;
		}
		if (cqe->res <= 0) {
			/* A write that makes no progress would be retried forever:
			 * treat it as the I/O error it is. */
			wal_fail(w, "write", wal_segment_name_of(w, s->segment_seq),
				 s->offset + s->done_bytes, s->size - s->done_bytes,
				 cqe->res < 0 ? cqe->res : -EIO);
			return;
		}
		HASP_ASSERT((uint32_t)cqe->res <= s->size - s->done_bytes);
		s->done_bytes += (uint32_t)cqe->res;
		if (s->done_bytes < s->size) {
			/* Short write: continue from where it stopped; the linked
			 * sync of this attempt is cancelled or stale. */
			w->stats.short_writes++;
			if (wal_start(w, s) == 0)
				(void)w->cfg.io.ops->submit(w->cfg.io.ctx);
			return;
		}
		s->write_done = true;
		if (w->cfg.sync_mode != WAL_SYNC_DSYNC)
			return; /* the sync of this attempt follows */
	} else {
		HASP_ASSERT(kind == WAL_OP_SYNC);
		if (wal_retryable(cqe->res)) {
			w->stats.retries++;
			if (s->write_done && wal_start(w, s) == 0)
				(void)w->cfg.io.ops->submit(w->cfg.io.ctx);
			return;
		}
		if (cqe->res < 0) {
			wal_fail(w, "fdatasync", wal_segment_name_of(w, s->segment_seq), s->offset,
				 s->size, cqe->res);
			return;
		}
		if (!s->write_done)
			return; /* a drained sync that ran before a continued write */
	}
	s->state = WAL_WRITE_DONE;
	HASP_ASSERT(w->inflight > 0);
	w->inflight--;
	wal_advance(w);
	HASP_DASSERT(wal_invariants_ok(w));
}

unsigned wal_poll(struct wal *w, bool wait)
{
	struct storage_cqe cqes[32];
	unsigned n = w->cfg.io.ops->reap(w->cfg.io.ctx, cqes, 32, wait);

	for (unsigned i = 0; i < n; i++)
		wal_io_done(w, &cqes[i]);
	if (!w->failed)
		{
		int submit_rc = wal_submit(w);
		(void)submit_rc; /* a failure is recorded in the wal */
	}
	return n;
}

static bool wal_ops_pending(const struct wal *w)
{
	if (w->spare_ops_pending > 0 || w->header_ops_pending > 0)
		return true;
	for (uint32_t i = 0; i < w->write_count; i++) {
		if (w->writes[i].ops_pending > 0)
			return true;
	}
	return false;
}

int wal_drain(struct wal *w)
{
	if (!w->failed) {
		int rc = wal_submit(w);
		if (rc != 0)
			return rc;
	}
	while (wal_ops_pending(w) ||
	       (!w->failed && w->durable_index < w->last_index && w->write_used > 0))
		(void)wal_poll(w, true);
	return w->failed ? w->fail_code : 0;
}

int wal_truncate_suffix(struct wal *w, uint64_t index)
{
	struct wal_record_header r = { 0 };
	int rc;

	if (w->failed)
		return w->fail_code;
	if (index > w->last_index)
		return -HASP_EINVAL;
	if (index == w->last_index)
		return 0;
	r.type = WAL_TYPE_TRUNCATE;
	r.index = index;
	if ((rc = wal_put(w, &r, NULL, w->last_index + 1)) != 0)
		return rc;
	w->last_index = index;
	w->replay_allowed = false;
	if (index + 1 < w->first_index)
		w->first_index = index + 1; /* everything from index + 1 is appended again */
	/* Entries above index no longer count, whichever write holds them. */
	if (w->durable_index > index)
		w->durable_index = index;
	for (uint32_t i = 0; i < w->write_used; i++) {
		struct wal_write *s = wal_slot(w, i);
		if (!s->reported && s->state != WAL_WRITE_FILLING && s->end_index > index)
			s->end_index = index;
	}
	w->stats.truncations++;
	HASP_DASSERT(wal_invariants_ok(w));
	return 0;
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
		io.ops->close(io.ctx, w->segments[i].fd);
		rc = io.ops->unlink(io.ctx, w->segments[i].name);
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
	wal_spare_prepare(w);
	return w->failed ? w->fail_code : 0;
}

static int wal_config_check(const struct wal_config *cfg)
{
	if (cfg->io.ops == NULL || cfg->segment_size % BLOCK != 0 || cfg->segment_size < 4 * BLOCK ||
	    cfg->write_size_max % BLOCK != 0 || cfg->write_size_max < BLOCK ||
	    cfg->write_size_max > cfg->segment_size - BLOCK || cfg->writes_inflight_max == 0 ||
	    cfg->writes_inflight_max > WAL_WRITES_MAX || cfg->segment_count_max < 2 ||
	    cfg->sync_mode > WAL_SYNC_DRAIN)
		return -HASP_ECONFIG;
	return 0;
}

/* Cuts what follows the valid prefix: later segments are deleted and the
 * rest of the last one is zeroed, so that stale writes can never be read as
 * a continuation of new ones. Both are made durable before any new write. */
static int wal_repair(struct wal *w, const struct wal_scan *sc)
{
	struct storage_io io = w->cfg.io;
	uint32_t keep = sc->prefix_segment_count;
	bool unlinked = false, torn = false;
	int rc;

	for (uint32_t i = keep; i < sc->segment_count; i++) {
		if (sc->segments[i].empty)
			LOG_DEBUG(storage, "wal: deleting unused spare file=%s", sc->segments[i].name);
		else
			LOG_WARN(storage, "wal torn tail: deleting segment file=%s",
				 sc->segments[i].name);
		rc = io.ops->unlink(io.ctx, sc->segments[i].name);
		if (rc != 0 && rc != -ENOENT) {
			wal_fail(w, "unlink", sc->segments[i].name, 0, 0, rc);
			return w->fail_code;
		}
		unlinked = true;
		torn |= !sc->segments[i].empty;
	}
	if (unlinked && (rc = io.ops->sync_dir(io.ctx)) != 0) {
		wal_fail(w, "directory fsync", ".", 0, 0, rc);
		return w->fail_code;
	}
	if (keep > 0 && sc->stop_dirty) {
		const struct wal_scan_segment *s = &sc->segments[keep - 1];
		const struct wal_segment *seg = &w->segments[keep - 1];
		LOG_WARN(storage, "wal torn tail: cutting file=%s offset=%llu index=%llu", s->name,
			 (unsigned long long)sc->stop_offset, (unsigned long long)(sc->last_index + 1));
		rc = io.ops->zero_range(io.ctx, seg->fd, sc->stop_offset,
					s->file_size - sc->stop_offset);
		if (rc == 0)
			rc = io.ops->fsync(io.ctx, seg->fd);
		if (rc != 0) {
			wal_fail(w, "zero torn tail", s->name, sc->stop_offset, 0, rc);
			return w->fail_code;
		}
	}
	if (torn || sc->stop_dirty)
		w->stats.recovered_torn_tails++;
	return 0;
}

static int wal_open_segments(struct wal *w, const struct wal_scan *sc)
{
	struct storage_io io = w->cfg.io;
	int rc;

	for (uint32_t i = 0; i < sc->prefix_segment_count; i++) {
		const struct wal_scan_segment *s = &sc->segments[i];
		struct wal_segment *seg = &w->segments[i];
		bool direct;

		memset(seg, 0, sizeof(*seg));
		snprintf(seg->name, sizeof(seg->name), "%s", s->name);
		seg->seq = s->seq;
		seg->first_index = s->header.first_index;
		seg->index_max = s->index_max;
		seg->keep_min = s->keep_min;
		seg->size = s->header.segment_size;
		rc = io.ops->open(io.ctx, s->name, STORAGE_OPEN_DIRECT, &seg->fd, &direct);
		if (rc != 0) {
			wal_fail(w, "open", s->name, 0, 0, rc);
			return w->fail_code;
		}
		w->direct = direct;
		w->segment_count++;
		if (s->file_size < seg->size &&
		    (rc = io.ops->allocate(io.ctx, seg->fd, seg->size)) != 0) {
			wal_fail(w, "fallocate", s->name, 0, 0, rc);
			return w->fail_code;
		}
	}
	return 0;
}

int wal_open(struct wal *w, const struct wal_config *cfg)
{
	struct wal_scan sc;
	int rc;

	memset(w, 0, sizeof(*w));
	w->spare.fd = -1;
	if ((rc = wal_config_check(cfg)) != 0)
		return rc;
	w->cfg = *cfg;
	w->write_count = cfg->writes_inflight_max + 2;
	w->writes = hasp_calloc(w->write_count, sizeof(w->writes[0]));
	w->segments = hasp_calloc(cfg->segment_count_max, sizeof(w->segments[0]));
	w->header_buf = hasp_alloc_aligned(BLOCK, BLOCK);
	if (w->writes == NULL || w->segments == NULL || w->header_buf == NULL) {
		rc = -HASP_ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < w->write_count; i++) {
		w->writes[i].buf = hasp_alloc_aligned(BLOCK, cfg->write_size_max);
		if (w->writes[i].buf == NULL) {
			rc = -HASP_ENOMEM;
			goto fail;
		}
	}

	rc = wal_scan_run(&sc, cfg->io, cfg->segment_count_max, NULL);
	if (rc != 0)
		goto fail;
	if (sc.corrupt) {
		LOG_ERROR(storage,
			  "wal corrupt file=%s offset=%llu: %s (highest later watermark %llu in "
			  "file=%s offset=%llu, log ends at index %llu); refusing to start, see "
			  "docs/STORAGE.md \"Operator repair\"",
			  sc.corrupt_file, (unsigned long long)sc.corrupt_offset, sc.corrupt_reason,
			  (unsigned long long)sc.after_watermark_max, sc.after_file,
			  (unsigned long long)sc.after_offset, (unsigned long long)sc.last_index);
		wal_scan_free(&sc);
		rc = -HASP_ECORRUPT;
		goto fail;
	}
	w->segment_seq_next = 1;
	for (uint32_t i = 0; i < sc.segment_count; i++) {
		if (sc.segments[i].seq >= w->segment_seq_next)
			w->segment_seq_next = sc.segments[i].seq + 1;
	}
	if ((rc = wal_open_segments(w, &sc)) != 0 || (rc = wal_repair(w, &sc)) != 0) {
		wal_scan_free(&sc);
		goto fail;
	}
	/* What recovery read may sit in a cache (a process crash after buffered
	 * writes): sync it before calling it durable. */
	for (uint32_t i = 0; i < w->segment_count; i++) {
		rc = cfg->io.ops->fsync(cfg->io.ctx, w->segments[i].fd);
		if (rc != 0) {
			wal_fail(w, "fsync", w->segments[i].name, 0, 0, rc);
			rc = w->fail_code;
			wal_scan_free(&sc);
			goto fail;
		}
	}
	w->first_index = sc.first_index;
	w->last_index = sc.last_index;
	w->durable_index = sc.last_index;
	w->write_offset = w->segment_count > 0 ? sc.stop_offset : 0;
	w->markers = sc.markers;
	w->marker_count = sc.marker_count;
	sc.markers = NULL;
	w->replay_allowed = true;
	wal_scan_free(&sc);
	if ((rc = wal_spare_prepare_now(w)) != 0)
		goto fail;
	HASP_ASSERT(w->first_index <= w->last_index + 1);
	HASP_ASSERT(w->segment_count == 0 || w->write_offset >= BLOCK);
	return 0;

fail:
	wal_close(w);
	return rc;
}

void wal_close(struct wal *w)
{
	if (w->spare.fd >= 0 && w->cfg.io.ops != NULL)
		w->cfg.io.ops->close(w->cfg.io.ctx, w->spare.fd);
	for (uint32_t i = 0; i < w->segment_count; i++)
		w->cfg.io.ops->close(w->cfg.io.ctx, w->segments[i].fd);
	if (w->writes != NULL) {
		for (uint32_t i = 0; i < w->write_count; i++)
			hasp_free(w->writes[i].buf);
	}
	hasp_free(w->writes);
	hasp_free(w->segments);
	hasp_free(w->header_buf);
	hasp_free(w->markers);
	memset(w, 0, sizeof(*w));
}

struct wal_replay_ctx {
	struct wal *w;
	uint32_t segment;
	uint32_t marker; /* first marker at or after the current position */
	uint64_t *keep_after; /* min keep_index of markers [k, count) */
	int (*visit)(void *arg, const struct wal_entry *e);
	void *arg;
	int rc;
};

static void wal_replay_record(void *arg, uint64_t offset, const struct wal_record_header *r,
			      const uint8_t *payload)
{
	struct wal_replay_ctx *c = arg;
	const struct wal *w = c->w;

	while (c->marker < w->marker_count &&
	       (w->markers[c->marker].segment < c->segment ||
		(w->markers[c->marker].segment == c->segment &&
		 w->markers[c->marker].offset <= offset)))
		c->marker++;
	if (c->rc != 0 || r->type == WAL_TYPE_TRUNCATE)
		return;
	/* The live copy of an index is its last one: an entry is live unless a
	 * later marker cut below it (or it lies beyond the end of the log). */
	if (r->index > w->last_index || r->index < w->first_index ||
	    (c->marker < w->marker_count && r->index > c->keep_after[c->marker]))
		return;
	struct wal_entry e = { r->index, r->term, r->type, r->payload_size, payload };
	c->rc = c->visit(c->arg, &e);
}

int wal_replay(struct wal *w, int (*visit)(void *arg, const struct wal_entry *e), void *arg)
{
	struct wal_replay_ctx c = { w, 0, 0, NULL, visit, arg, 0 };
	uint64_t expected = w->segment_count ? w->segments[0].first_index : w->first_index;
	uint64_t log_first = expected;
	int rc = 0;

	if (!w->replay_allowed)
		return -HASP_ESTATE;
	if (w->marker_count > 0) {
		c.keep_after = hasp_calloc(w->marker_count, sizeof(uint64_t));
		if (c.keep_after == NULL)
			return -HASP_ENOMEM;
		uint64_t min = UINT64_MAX;
		for (uint32_t k = w->marker_count; k-- > 0;) {
			if (w->markers[k].keep_index < min)
				min = w->markers[k].keep_index;
			c.keep_after[k] = min;
		}
	}
	for (uint32_t i = 0; i < w->segment_count && rc == 0 && c.rc == 0; i++) {
		uint8_t *image;
		uint64_t size, at = BLOCK, next;
		struct wal_batch_header b;

		if ((rc = wal_scan_read_segment(w->cfg.io, w->segments[i].name, &image, &size)) != 0)
			break;
		c.segment = i;
		while (c.rc == 0 && wal_scan_batch(image, size, at, w->segments[i].seq, &log_first,
						   &expected, &b, &next, wal_replay_record, &c) == 0)
			at = next;
		hasp_free(image);
	}
	hasp_free(c.keep_after);
	if (rc == 0 && c.rc == 0 && expected != w->last_index + 1) {
		LOG_ERROR(storage, "wal replay found index %llu, expected the log to end at %llu",
			  (unsigned long long)expected - 1, (unsigned long long)w->last_index);
		return -HASP_EIO;
	}
	return rc != 0 ? rc : c.rc;
}
