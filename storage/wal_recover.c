/*
 * Opening the WAL: check the config, scan (wal_scan.c), refuse corruption,
 * cut a torn tail, sync what is kept, prepare a spare segment; and replay
 * the recovered log to the node.
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

static int wal_config_check(const struct wal_config *cfg)
{
	if (cfg->io.ops == NULL || cfg->segment_size % BLOCK != 0 || cfg->segment_size < 4 * BLOCK ||
	    cfg->write_size_max % BLOCK != 0 || cfg->write_size_max < BLOCK ||
	    cfg->write_size_max > cfg->segment_size - BLOCK || cfg->writes_inflight_max == 0 ||
	    cfg->writes_inflight_max > WAL_WRITES_MAX || cfg->segment_count_max < 2 ||
	    cfg->sync_mode > WAL_SYNC_DRAIN || cfg->segment_fill > WAL_FILL_ALLOCATE ||
	    (cfg->format_version != 0 && (cfg->format_version < WAL_FORMAT_VERSION_MIN ||
					  cfg->format_version > WAL_FORMAT_VERSION)))
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
	bool torn = false;
	int rc;

	/* Newest first, each deletion durable before the next: a crash in
	 * between leaves segments numbered without a gap, which recovery would
	 * otherwise take for a lost segment. */
	for (uint32_t i = sc->segment_count; i-- > keep;) {
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
		if ((rc = io.ops->sync_dir(io.ctx)) != 0) {
			wal_fail(w, "directory fsync", ".", 0, 0, rc);
			return w->fail_code;
		}
		torn |= !sc->segments[i].empty;
	}
	if (keep > 0 && sc->stop_dirty) {
		const struct wal_scan_segment *s = &sc->segments[keep - 1];
		const struct wal_segment *seg = &w->segments[keep - 1];
		LOG_WARN(storage, "wal torn tail: cutting file=%s offset=%llu index=%llu", s->name,
			 (unsigned long long)sc->stop_offset, (unsigned long long)(sc->last_index + 1));
		rc = wal_scan_zero_from(io, seg->fd, sc->stop_offset, s->file_size);
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
		seg->version = s->header.version;
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
	w->tail_buf = hasp_alloc_aligned(BLOCK, BLOCK);
	if (cfg->segment_fill == WAL_FILL_ZEROS) {
		w->fill_buf = hasp_alloc_aligned(BLOCK, WAL_FILL_CHUNK);
		if (w->fill_buf != NULL)
			memset(w->fill_buf, 0, WAL_FILL_CHUNK);
	}
	if (w->writes == NULL || w->segments == NULL || w->header_buf == NULL ||
	    w->tail_buf == NULL || (cfg->segment_fill == WAL_FILL_ZEROS && w->fill_buf == NULL)) {
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
	if (sc.corrupt && sc.lost_segment) {
		LOG_ERROR(storage,
			  "wal segment lost file=%s offset=%llu: %s; the log that remains ends at "
			  "index %llu and acknowledged entries after it may be gone; refusing to "
			  "start, see docs/STORAGE.md \"Missing or truncated WAL segment\"",
			  sc.corrupt_file, (unsigned long long)sc.corrupt_offset, sc.corrupt_reason,
			  (unsigned long long)sc.last_index);
		wal_scan_free(&sc);
		rc = -HASP_ECORRUPT;
		goto fail;
	}
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
	/* The next segment continues the numbers of the kept ones (recovery
	 * deletes the rest durably, newest first), so the numbers stay without
	 * gaps; with none kept, past every name seen. */
	w->segment_seq_next = 1;
	for (uint32_t i = 0; i < sc.segment_count; i++) {
		if (sc.segments[i].seq >= w->segment_seq_next)
			w->segment_seq_next = sc.segments[i].seq + 1;
	}
	if (sc.prefix_segment_count > 0)
		w->segment_seq_next = sc.segments[sc.prefix_segment_count - 1].seq + 1;
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
	/* The next write starts on a fresh block (the cut zeroed the rest of
	 * a partial one); packing resumes after it. */
	w->write_offset = w->segment_count > 0 ? wal_block_round_up(sc.stop_offset) : 0;
	w->markers = sc.markers;
	w->marker_count = sc.marker_count;
	sc.markers = NULL;
	w->replay_allowed = true;
	wal_scan_free(&sc);
	if ((rc = wal_segment_prepare_now(w)) != 0)
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
	for (uint32_t i = 0; i < w->retiring_count; i++)
		w->cfg.io.ops->close(w->cfg.io.ctx, w->retiring[i].fd);
	if (w->writes != NULL) {
		for (uint32_t i = 0; i < w->write_count; i++)
			hasp_free(w->writes[i].buf);
	}
	hasp_free(w->writes);
	hasp_free(w->segments);
	hasp_free(w->header_buf);
	hasp_free(w->tail_buf);
	hasp_free(w->fill_buf);
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
		while (c.rc == 0 &&
		       wal_scan_batch(image, size, at = wal_scan_skip_padding(image, size, at),
				      w->segments[i].seq, &log_first, &expected, &b, &next,
				      wal_replay_record, &c) == 0)
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
