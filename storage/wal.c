/*
 * The WAL write path: group commit into a ring of write slots, pipelined
 * submission, in-order durability and truncation markers. Segments (spares,
 * headers, compaction, reset) live in wal_segment.c, recovery and replay in
 * wal_recover.c and wal_scan.c, the format in wal_format.c.
 *
 * Partial blocks: a write is padded with zeros to the next 4 KiB block.
 * When the write before it is durable (state DONE or freed), the next write
 * packs: it starts at that write's last, partial block, carries the block's
 * old bytes unchanged, and puts its batch right after them. Two rules make
 * that safe (docs/STORAGE.md, "Partial blocks"):
 * - Never two writes to one block in flight: a write packs only behind a
 *   durable one; behind one still in flight it starts on a fresh block, so
 *   out-of-order completion cannot land an older copy of a block last.
 * - A torn rewrite cannot lose old records: every byte of them is the same
 *   in the old and the new copy of the block, so any mix of the two (per
 *   sector, or a sector torn inside) still holds them; only the new batch
 *   may be damaged, and it was not reported durable.
 * Padding that remains is counted in stats.padding_bytes.
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

LOG_TOPIC_DEFINE(storage);

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

struct wal_write *wal_slot(struct wal *w, uint32_t nth)
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

void wal_fail(struct wal *w, const char *what, const char *file, uint64_t offset, uint32_t size,
	      int res)
{
	if (!w->failed)
		LOG_ERROR(storage,
			  "wal %s failed file=%s offset=%llu len=%u err=%d (%s); durability stops",
			  what, file, (unsigned long long)offset, size, -res, strerror(-res));
	w->failed = true;
	if (w->fail_code == 0)
		w->fail_code = wal_errno_code(res);
}

const char *wal_segment_name_of(const struct wal *w, uint64_t seq)
{
	for (uint32_t i = 0; i < w->segment_count; i++) {
		if (w->segments[i].seq == seq)
			return w->segments[i].name;
	}
	return "?";
}

/* Closes the open write: batch header, zero padding, the end index it makes
 * durable. */
static void wal_seal(struct wal *w, struct wal_write *s)
{
	struct wal_batch_header b = { 0 };

	HASP_ASSERT(s->state == WAL_WRITE_FILLING);
	HASP_ASSERT(s->record_count > 0 || s->used == s->batch_off + WAL_BATCH_HEADER_SIZE);
	b.records_size = s->used - s->batch_off - WAL_BATCH_HEADER_SIZE;
	b.record_count = s->record_count;
	b.first_index = s->first_index;
	b.watermark = w->durable_index;
	b.segment_seq = s->segment_seq;
	wal_batch_header_encode(s->buf + s->batch_off, &b);
	s->size = (uint32_t)wal_block_round_up(s->used);
	memset(s->buf + s->used, 0, s->size - s->used);
	s->end_index = w->last_index;
	s->state = WAL_WRITE_READY;
	w->watermark_written = b.watermark;

	/* Space: from the end of the previous batch in this segment (the rest
	 * of a block left behind counts) to the end of this one. */
	uint64_t end = s->offset + s->used;
	uint64_t start = s->segment_seq == w->log_end_seq && w->log_end <= s->offset + s->batch_off
				 ? w->log_end
				 : s->offset + s->batch_off;
	w->stats.padding_bytes += end - start - b.records_size;
	w->stats.records_bytes += b.records_size;
	w->stats.device_bytes += s->size;
	w->log_end = end;
	w->log_end_seq = s->segment_seq;

	/* Its last block, if partial, is where the next write may pack. */
	w->tail_len = s->used % BLOCK;
	if (w->tail_len != 0) {
		uint32_t at = s->used - w->tail_len;
		memcpy(w->tail_buf, s->buf + at, w->tail_len);
		w->tail_offset = s->offset + at;
		w->tail_segment_seq = s->segment_seq;
		w->tail_owner = s;
	}
#ifdef HASP_DEBUG_ASSERTS
	{
		/* Check the batch before it leaves, as recovery will after. */
		uint64_t exp = s->start_index, next, first = w->first_index;
		struct wal_batch_header check;
		HASP_DASSERT(wal_scan_batch(s->buf, s->size, s->batch_off, s->segment_seq, &first,
					    &exp, &check, &next, NULL, NULL) == 0);
		HASP_DASSERT(next == s->used);
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

/* True when a new write of `need` bytes (batch header included) may start
 * inside the last write's partial block: that write is durable (so no two
 * writes to the block are ever in flight together), the block is the last
 * one used in the active segment, the segment's format packs, and the write
 * fits. */
static bool wal_can_pack(const struct wal *w, uint64_t need)
{
	const struct wal_segment *seg;

	if (w->tail_len == 0 || w->segment_count == 0)
		return false;
	seg = &w->segments[w->segment_count - 1];
	if (seg->version < 2 || w->tail_segment_seq != seg->seq ||
	    w->tail_offset + BLOCK != w->write_offset ||
	    !(w->tail_owner->state == WAL_WRITE_DONE || w->tail_owner->state == WAL_WRITE_FREE))
		return false;
	uint64_t left = seg->size - w->tail_offset;
	uint64_t cap = left < w->cfg.write_size_max ? left : w->cfg.write_size_max;
	return w->tail_len + need <= cap;
}

/* Opens the next write slot at the frontier of the active segment, packed
 * into the last write's partial block when wal_can_pack() allows. The
 * caller checked that a slot is free and the segment has room for `need`
 * bytes on a fresh block. */
static struct wal_write *wal_slot_open(struct wal *w, uint64_t next_index, uint64_t need)
{
	struct wal_write *s = wal_slot(w, w->write_used);
	bool pack = wal_can_pack(w, need);

	HASP_ASSERT(w->write_used < w->write_count);
	HASP_ASSERT(s->state == WAL_WRITE_FREE);
	HASP_ASSERT(s->ops_pending == 0);
	s->state = WAL_WRITE_FILLING;
	s->batch_off = pack ? w->tail_len : 0;
	if (pack) {
		/* The block's bytes as they are on disk, unchanged. */
		memcpy(s->buf, w->tail_buf, w->tail_len);
		w->stats.packed_writes++;
	}
	s->used = s->batch_off + WAL_BATCH_HEADER_SIZE;
	s->record_count = 0;
	s->first_index = 0;
	s->start_index = next_index;
	s->segment = w->segment_count - 1;
	s->segment_seq = w->segments[s->segment].seq;
	s->fd = w->segments[s->segment].fd;
	s->offset = pack ? w->tail_offset : w->write_offset;
	s->done_bytes = 0;
	s->write_done = false;
	s->reported = false;
	w->tail_len = 0; /* this write owns the block now */
	w->write_used++;
	w->write_offset = s->offset + wal_block_round_up(s->used);
	return s;
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
		s = wal_slot_open(w, next_index, need);
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

/* When the WAL is idle with entries whose durability no write on disk
 * records yet, an empty batch carrying the durable index as its watermark
 * makes recovery refuse (instead of cutting as a torn write) damage found
 * later in those entries: the newest batches are otherwise the one place
 * where damage to durable data looks like a torn write. */
bool wal_idle_due(const struct wal *w)
{
	return !w->failed && w->write_used == 0 && w->durable_index > w->watermark_written &&
	       w->segment_count > 0 && !w->header_pending &&
	       w->write_offset + BLOCK <= w->segments[w->segment_count - 1].size;
}

static bool wal_watermark_idle(struct wal *w)
{
	if (!wal_idle_due(w))
		return false;
	struct wal_write *s = wal_slot_open(w, w->last_index + 1, WAL_BATCH_HEADER_SIZE);
	wal_seal(w, s);
	w->stats.watermark_writes++;
	return true;
}

int wal_idle(struct wal *w)
{
	if (w->failed)
		return w->fail_code;
	if (!wal_watermark_idle(w))
		return 0;
	return wal_submit(w);
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
		wal_segment_spare_done(w, cqe);
		return;
	}
	if (kind == WAL_OP_SPARE_FILL) {
		wal_segment_fill_done(w, cqe);
		return;
	}
	if (kind == WAL_OP_HEADER) {
		wal_segment_header_done(w, cqe);
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

bool wal_ops_pending(const struct wal *w)
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
	/* A clean stop leaves every durable entry vouched for on disk. */
	if (wal_watermark_idle(w)) {
		int rc = wal_submit(w);
		if (rc != 0)
			return rc;
		while (wal_ops_pending(w))
			(void)wal_poll(w, true);
	}
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
	if (w->watermark_written > index)
		w->watermark_written = index; /* the entries after the cut need their own */
	for (uint32_t i = 0; i < w->write_used; i++) {
		struct wal_write *s = wal_slot(w, i);
		if (!s->reported && s->state != WAL_WRITE_FILLING && s->end_index > index)
			s->end_index = index;
	}
	w->stats.truncations++;
	HASP_DASSERT(wal_invariants_ok(w));
	return 0;
}
