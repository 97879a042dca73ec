/*
 * The WAL recovery scan (rules in wal_scan.h). It reads each segment whole
 * (recovery is not the hot path; a segment is tens of MiB at most), walks the
 * batches of the valid prefix, then probes every 8-byte position of the
 * rest that is not in an all-zero block for batch headers whose watermarks
 * prove that something durable is missing (packed batches, format version
 * 2, start anywhere 8-byte aligned).
 */
#include "storage/wal_scan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/log.h"
#include "hasp/errors.h"

LOG_TOPIC_DECLARE(storage);

#define BLOCK HASP_WAL_BLOCK_SIZE

struct scan_names {
	struct wal_scan_segment *segments;
	uint32_t count;
	uint32_t cap;
	bool overflow;
};

static void scan_collect(const char *name, void *arg)
{
	struct scan_names *n = arg;
	uint64_t seq;

	if (!wal_segment_name_parse(name, &seq))
		return;
	if (n->count == n->cap) {
		n->overflow = true;
		return;
	}
	struct wal_scan_segment *s = &n->segments[n->count++];
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->seq = seq;
}

static int scan_seq_cmp(const void *a, const void *b)
{
	const struct wal_scan_segment *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int wal_scan_read_segment(struct storage_io io, const char *name, uint8_t **image, uint64_t *size)
{
	int fd, rc;
	bool direct;
	size_t got;
	uint64_t file_size;

	*image = NULL;
	*size = 0;
	rc = io.ops->open(io.ctx, name, STORAGE_OPEN_DIRECT, &fd, &direct);
	if (rc != 0) {
		LOG_ERROR(storage, "wal open failed file=%s err=%d (%s)", name, -rc, strerror(-rc));
		return -HASP_EIO;
	}
	rc = io.ops->size(io.ctx, fd, &file_size);
	if (rc == 0) {
		uint64_t alloc = wal_block_round_up(file_size ? file_size : 1);
		*image = hasp_alloc_aligned(BLOCK, alloc);
		if (*image == NULL) {
			io.ops->close(io.ctx, fd);
			return -HASP_ENOMEM;
		}
		memset(*image, 0, alloc);
		rc = io.ops->pread(io.ctx, fd, *image, alloc, 0, &got);
	}
	io.ops->close(io.ctx, fd);
	if (rc != 0) {
		LOG_ERROR(storage, "wal read failed file=%s err=%d (%s)", name, -rc, strerror(-rc));
		hasp_free(*image);
		*image = NULL;
		return -HASP_EIO;
	}
	*size = file_size;
	return 0;
}

int wal_scan_batch(const uint8_t *image, uint64_t image_size, uint64_t offset, uint64_t segment_seq,
		   uint64_t *log_first_index, uint64_t *expected, struct wal_batch_header *b,
		   uint64_t *next_offset,
		   void (*record)(void *arg, uint64_t offset, const struct wal_record_header *r,
				  const uint8_t *payload),
		   void *arg)
{
	struct wal_record_header r;
	const uint8_t *payload;
	uint64_t exp = *expected;
	uint64_t first = *log_first_index;
	uint64_t first_entry = 0;

	HASP_ASSERT(offset % WAL_RECORD_ALIGN == 0);
	if (offset + WAL_BATCH_HEADER_SIZE > image_size)
		return -HASP_ENOENT;
	if (wal_bytes_zero(image + offset, WAL_BATCH_HEADER_SIZE))
		return -HASP_ENOENT;
	if (wal_batch_header_decode(image + offset, b) != 0 || b->segment_seq != segment_seq ||
	    (b->record_count == 0) != (b->records_size == 0) ||
	    offset + WAL_BATCH_HEADER_SIZE + (uint64_t)b->records_size > image_size)
		return -HASP_ECORRUPT;

	/* Check everything before accepting anything: a batch is one write and
	 * is kept or dropped whole. */
	uint64_t at = offset + WAL_BATCH_HEADER_SIZE;
	uint64_t end = at + b->records_size;
	for (uint32_t k = 0; k < b->record_count; k++) {
		if (wal_record_decode(image + at, end - at, &r, &payload) != 0)
			return -HASP_ECORRUPT;
		if (r.type == WAL_TYPE_TRUNCATE) {
			if (r.index >= exp || r.payload_size != 0) {
				LOG_DEBUG(storage, "wal scan: bad marker keep=%llu expected=%llu",
					  (unsigned long long)r.index, (unsigned long long)exp);
				return -HASP_ECORRUPT;
			}
			exp = r.index + 1;
			if (exp < first)
				first = exp;
		} else {
			if (r.index != exp) {
				LOG_DEBUG(storage, "wal scan: record index=%llu expected=%llu",
					  (unsigned long long)r.index, (unsigned long long)exp);
				return -HASP_ECORRUPT;
			}
			if (first_entry == 0)
				first_entry = r.index;
			exp++;
		}
		at += wal_record_size(r.payload_size);
	}
	if (at != end || b->first_index != first_entry)
		return -HASP_ECORRUPT;
	if (record != NULL) {
		at = offset + WAL_BATCH_HEADER_SIZE;
		for (uint32_t k = 0; k < b->record_count; k++) {
			int rc = wal_record_decode(image + at, end - at, &r, &payload);
			HASP_ASSERT(rc == 0);
			record(arg, at, &r, payload);
			at += wal_record_size(r.payload_size);
		}
	}
	*expected = exp;
	*log_first_index = first;
	*next_offset = end;
	return 0;
}

uint64_t wal_scan_skip_padding(const uint8_t *image, uint64_t image_size, uint64_t offset)
{
	uint64_t aligned = wal_block_round_up(offset);

	if (aligned == offset || aligned > wal_block_round_up(image_size) ||
	    !wal_bytes_zero(image + offset, aligned - offset))
		return offset;
	return aligned;
}

int wal_scan_zero_from(struct storage_io io, int fd, uint64_t offset, uint64_t size)
{
	uint64_t aligned = wal_block_round_up(offset);
	size_t got;
	int rc;

	HASP_ASSERT(offset % WAL_RECORD_ALIGN == 0);
	if (offset % BLOCK != 0) {
		uint64_t block = aligned - BLOCK;
		uint8_t *buf = hasp_alloc_aligned(BLOCK, BLOCK);
		if (buf == NULL)
			return -ENOMEM;
		memset(buf, 0, BLOCK);
		rc = io.ops->pread(io.ctx, fd, buf, BLOCK, block, &got);
		if (rc == 0) {
			memset(buf + (offset - block), 0, aligned - offset);
			rc = io.ops->pwrite(io.ctx, fd, buf, BLOCK, block);
		}
		hasp_free(buf);
		if (rc != 0)
			return rc;
	}
	return aligned < size ? io.ops->zero_range(io.ctx, fd, aligned, size - aligned) : 0;
}

struct scan_record_ctx {
	struct wal_scan *sc;
	uint32_t segment;
	const struct wal_scan_visitor *v;
	int rc;
};

static void scan_record(void *arg, uint64_t offset, const struct wal_record_header *r,
			const uint8_t *payload)
{
	struct scan_record_ctx *c = arg;
	struct wal_scan *sc = c->sc;
	struct wal_scan_segment *s = &sc->segments[c->segment];

	if (r->type == WAL_TYPE_TRUNCATE) {
		if (sc->marker_count == sc->marker_cap) {
			uint32_t cap = sc->marker_cap ? sc->marker_cap * 2 : 16;
			struct wal_scan_marker *m = hasp_calloc(cap, sizeof(*m));
			if (m == NULL) {
				c->rc = -HASP_ENOMEM;
				return;
			}
			if (sc->markers != NULL)
				memcpy(m, sc->markers, sc->marker_count * sizeof(*m));
			hasp_free(sc->markers);
			sc->markers = m;
			sc->marker_cap = cap;
		}
		sc->markers[sc->marker_count++] =
			(struct wal_scan_marker){ c->segment, offset, r->index };
		if (r->index < s->keep_min)
			s->keep_min = r->index;
	} else if (r->index > s->index_max) {
		s->index_max = r->index;
	}
	if (c->v != NULL && c->v->record != NULL)
		c->v->record(c->v->arg, s, offset, r, payload);
}

/* Probes every 8-byte position in [from, size) of a segment image, skipping
 * all-zero blocks, for valid batch headers; folds their watermarks into the
 * after-region summary. */
static void scan_after(struct wal_scan *sc, const struct wal_scan_segment *s, const uint8_t *image,
		       uint64_t size, uint64_t from, const struct wal_scan_visitor *v)
{
	struct wal_batch_header b;

	for (uint64_t at = from; at + WAL_BATCH_HEADER_SIZE <= size; at += WAL_RECORD_ALIGN) {
		if (at % BLOCK == 0 && at + BLOCK <= size && wal_bytes_zero(image + at, BLOCK)) {
			at += BLOCK - WAL_RECORD_ALIGN;
			continue;
		}
		if (wal_batch_header_decode(image + at, &b) != 0 || b.segment_seq != s->seq)
			continue;
		if (v != NULL && v->batch != NULL)
			v->batch(v->arg, s, at, &b, false);
		if (!sc->after_found || b.watermark > sc->after_watermark_max) {
			sc->after_watermark_max = b.watermark;
			snprintf(sc->after_file, sizeof(sc->after_file), "%s", s->name);
			sc->after_offset = at;
		}
		sc->after_found = true;
	}
}

static void scan_corrupt(struct wal_scan *sc, const char *file, uint64_t offset, const char *reason)
{
	sc->corrupt = true;
	snprintf(sc->corrupt_file, sizeof(sc->corrupt_file), "%s", file);
	sc->corrupt_offset = offset;
	sc->corrupt_reason = reason;
}

int wal_scan_run(struct wal_scan *sc, struct storage_io io, uint32_t segment_count_max,
		 const struct wal_scan_visitor *v)
{
	struct scan_names names = { 0 };
	uint64_t expected = 0;
	bool stopped = false;
	int rc;

	memset(sc, 0, sizeof(*sc));
	names.cap = segment_count_max;
	names.segments = hasp_calloc(segment_count_max, sizeof(struct wal_scan_segment));
	if (names.segments == NULL)
		return -HASP_ENOMEM;
	rc = io.ops->list(io.ctx, scan_collect, &names);
	if (rc != 0) {
		LOG_ERROR(storage, "wal list failed err=%d (%s)", -rc, strerror(-rc));
		hasp_free(names.segments);
		return -HASP_EIO;
	}
	sc->segments = names.segments;
	sc->segment_count = names.count;
	if (names.overflow) {
		LOG_ERROR(storage, "wal has more segments than segment_count_max=%u", segment_count_max);
		return -HASP_EFULL;
	}
	qsort(sc->segments, sc->segment_count, sizeof(sc->segments[0]), scan_seq_cmp);

	for (uint32_t i = 0; i < sc->segment_count; i++) {
		struct wal_scan_segment *s = &sc->segments[i];
		uint8_t *image;
		uint64_t size;

		rc = wal_scan_read_segment(io, s->name, &image, &size);
		if (rc != 0)
			return rc;
		s->file_size = size;
		s->empty = wal_bytes_zero(image, size);
		s->header_rc = size < WAL_SEGMENT_HEADER_SIZE
				       ? -HASP_ETRUNCATED
				       : wal_segment_header_decode(image, &s->header);
		if (s->header_rc == 0 && s->header.seq != s->seq)
			s->header_rc = -HASP_ECORRUPT;
		if (v != NULL && v->segment != NULL)
			v->segment(v->arg, s);

		if (!stopped) {
			bool continues = s->header_rc == 0 &&
					 (i == 0 || s->header.first_index == expected);
			if (!continues) {
				LOG_DEBUG(storage,
					  "wal scan: segment does not continue the log file=%s header=%d "
					  "seq=%llu first_index=%llu expected=%llu",
					  s->name, s->header_rc, (unsigned long long)s->seq,
					  (unsigned long long)s->header.first_index,
					  (unsigned long long)expected);
				/* The prefix ended with the previous segment (or, for
				 * the first, the log is empty). */
				stopped = true;
				if (i == 0) {
					sc->first_index = 1;
					sc->last_index = 0;
				}
				sc->stop_segment = i == 0 ? 0 : i - 1;
				sc->stop_offset = i == 0 ? 0 : sc->segments[i - 1].end_offset;
			} else {
				struct scan_record_ctx ctx = { sc, i, v, 0 };
				uint64_t at = BLOCK;
				struct wal_batch_header b;
				uint64_t next;

				s->in_prefix = true;
				sc->prefix_segment_count = i + 1;
				if (i == 0) {
					expected = s->header.first_index;
					sc->first_index = expected;
				}
				for (;;) {
					at = wal_scan_skip_padding(image, size, at);
					if (v != NULL && v->batch != NULL) {
						/* Print the batch before its records: check
						 * first, then walk again with the visitor. */
						uint64_t e2 = expected, f2 = sc->first_index;
						rc = wal_scan_batch(image, size, at, s->seq, &f2, &e2, &b,
								    &next, NULL, NULL);
						if (rc != 0)
							break;
						v->batch(v->arg, s, at, &b, true);
					}
					rc = wal_scan_batch(image, size, at, s->seq, &sc->first_index,
							    &expected, &b, &next, scan_record, &ctx);
					if (rc != 0)
						break;
					if (ctx.rc != 0) {
						hasp_free(image);
						return ctx.rc;
					}
					if (b.watermark > sc->watermark_max)
						sc->watermark_max = b.watermark;
					at = next;
				}
				s->end_offset = at;
				sc->last_index = expected - 1;
				LOG_DEBUG(storage, "wal scan: file=%s prefix ends offset=%llu expected=%llu rc=%d",
					  s->name, (unsigned long long)at, (unsigned long long)expected, rc);
				if (at % BLOCK != 0 ? at < size : at + BLOCK <= size) {
					/* A zero or bad block (or bad bytes right after a
					 * batch) before the end of the segment: the
					 * prefix stops here. */
					stopped = true;
					sc->stop_segment = i;
					sc->stop_offset = at;
					sc->stop_dirty = !wal_bytes_zero(image + at, size - at);
					scan_after(sc, s, image, size, at, v);
				}
				hasp_free(image);
				continue;
			}
		}
		/* The whole segment lies after the stop. */
		scan_after(sc, s, image, size, BLOCK, v);
		hasp_free(image);
	}
	if (!stopped && sc->segment_count > 0) {
		/* The last segment is full to its end: the next write rolls over. */
		sc->stop_segment = sc->segment_count - 1;
		sc->stop_offset = sc->segments[sc->stop_segment].end_offset;
	}
	if (sc->segment_count == 0) {
		sc->first_index = 1;
		sc->last_index = 0;
	}

	/* Lost segments (checked first: the evidence is about whole files).
	 * A segment is preallocated to its full size, and made durable, before
	 * its header is written, and segments are numbered without gaps from
	 * the oldest kept one up to the spare (compaction deletes from the
	 * oldest, recovery deletes from the newest). So a segment shorter than
	 * its header says was cut, and a gap in the numbers, or a headerless
	 * segment shorter than the newest one before it, lost a segment that
	 * may have held durable entries. */
	for (uint32_t i = 0; i < sc->segment_count && !sc->corrupt; i++) {
		const struct wal_scan_segment *s = &sc->segments[i];
		const struct wal_scan_segment *last = &sc->segments[sc->segment_count - 1];
		if (s->header_rc == 0 && s->file_size < s->header.segment_size)
			scan_corrupt(sc, s->name, s->file_size,
				     "segment shorter than its preallocated size (truncated)");
		else if (i > 0 && s->seq != sc->segments[i - 1].seq + 1)
			scan_corrupt(sc, s->name, 0, "segments missing before this one (deleted)");
		else if (i + 1 < sc->segment_count && s->header_rc != 0 && s->empty &&
			 s->file_size < last->file_size)
			scan_corrupt(sc, s->name, s->file_size,
				     "headerless segment shorter than a later one (truncated)");
	}
	if (sc->corrupt) {
		sc->lost_segment = true;
		return 0;
	}

	/* Corruption: a write made after some entry was reported durable
	 * survived, but that entry is not in the prefix. */
	if (sc->after_found && sc->after_watermark_max > sc->last_index) {
		if (sc->prefix_segment_count == 0)
			scan_corrupt(sc, sc->segments[0].name, 0, "bad segment header before valid data");
		else if (sc->stop_offset < sc->segments[sc->stop_segment].file_size)
			scan_corrupt(sc, sc->segments[sc->stop_segment].name, sc->stop_offset,
				     "bad batch followed by writes that prove it was durable");
		else
			scan_corrupt(sc, sc->segments[sc->stop_segment + 1].name, 0,
				     "segment does not continue the log but holds later durable writes");
	}
	return 0;
}

void wal_scan_free(struct wal_scan *sc)
{
	hasp_free(sc->segments);
	hasp_free(sc->markers);
	memset(sc, 0, sizeof(*sc));
}
