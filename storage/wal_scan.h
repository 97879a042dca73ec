/*
 * The recovery scan of the WAL: reads every segment, finds the longest valid
 * prefix, and classifies whatever follows it as a torn tail (safe to cut) or
 * corruption (refuse to start). Shared by wal_open() and hasp-waldump, which
 * runs it without repairing anything.
 *
 * Rules (docs/STORAGE.md, "Recovery"):
 * - The prefix is the run of batches, from the first segment on, whose batch
 *   header and every record check out and whose indexes continue the log
 *   (truncation markers may move it back). After a batch comes the next one
 *   (packed, format version 2), or zeros to the block end and the next one
 *   on the next block. It ends at the first place that is zero (never
 *   written) or bad, or at a segment whose header is bad or does not
 *   continue the log.
 * - Everything after that stop point is the "after region". Every batch
 *   header there that checks out carries a watermark: the highest index that
 *   had been reported durable when it was written. If any watermark reaches
 *   the first index missing from the prefix, an entry that was reported
 *   durable is gone: corruption. Otherwise the after region only holds
 *   writes that were never reported durable (pipelined writes land out of
 *   order, so a later write may survive a crash that lost an earlier one):
 *   a torn tail, cut by wal_open().
 */
#ifndef HASP_STORAGE_WAL_SCAN_H
#define HASP_STORAGE_WAL_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/io.h"
#include "storage/wal_format.h"

struct wal_scan_segment {
	char name[STORAGE_NAME_SIZE_MAX];
	uint64_t seq;
	uint64_t file_size;
	int header_rc; /* 0 or the decode error of block 0 */
	struct wal_segment_header header;
	uint64_t index_max;  /* highest entry index recorded in the prefix part */
	uint64_t keep_min;   /* lowest keep index of its truncation markers */
	uint64_t end_offset; /* end of the prefix part (block aligned unless
			      * bad bytes follow a batch inside its block) */
	bool in_prefix;      /* the segment (or its start) belongs to the prefix */
	bool empty;          /* never written: all zeros (an unused spare) */
};

struct wal_scan_marker {
	uint32_t segment; /* position in wal_scan.segments */
	uint64_t offset;  /* of the record */
	uint64_t keep_index;
};

/* Optional callbacks while scanning (hasp-waldump prints from them). */
struct wal_scan_visitor {
	void *arg;
	void (*segment)(void *arg, const struct wal_scan_segment *s);
	void (*batch)(void *arg, const struct wal_scan_segment *s, uint64_t offset,
		      const struct wal_batch_header *b, bool in_prefix);
	void (*record)(void *arg, const struct wal_scan_segment *s, uint64_t offset,
		       const struct wal_record_header *r, const uint8_t *payload);
};

struct wal_scan {
	struct wal_scan_segment *segments; /* sorted by seq; hasp_alloc'd */
	uint32_t segment_count;
	uint32_t prefix_segment_count; /* segments [0, n) hold the prefix */
	uint64_t first_index;          /* of the log; last_index + 1 when empty */
	uint64_t last_index;
	uint64_t watermark_max; /* highest watermark in the prefix */

	/* Where the prefix stops: the next write goes here. */
	uint32_t stop_segment;
	uint64_t stop_offset;
	bool stop_dirty;         /* non-zero bytes follow the stop in its segment */
	bool after_found;        /* a valid batch header exists after the stop */
	uint64_t after_watermark_max;
	char after_file[STORAGE_NAME_SIZE_MAX]; /* where that highest watermark was */
	uint64_t after_offset;

	/* Set when the scan refuses: the file and offset of the first bad byte. */
	bool corrupt;
	bool lost_segment; /* the refusal is a cut or missing segment file */
	char corrupt_file[STORAGE_NAME_SIZE_MAX];
	uint64_t corrupt_offset;
	const char *corrupt_reason;

	struct wal_scan_marker *markers; /* truncation markers in the prefix */
	uint32_t marker_count;
	uint32_t marker_cap;
};

/* Scans the segments in io's directory. Returns 0 (even when corrupt is set:
 * the caller decides), -HASP_ENOMEM, -HASP_EFULL (more than segment_count_max
 * segments) or -HASP_EIO (a read failed; logged). Free with wal_scan_free. */
int wal_scan_run(struct wal_scan *sc, struct storage_io io, uint32_t segment_count_max,
		 const struct wal_scan_visitor *v) __attribute__((warn_unused_result));
void wal_scan_free(struct wal_scan *sc);

/* Validates the batch at `offset` (8-byte aligned) of a segment image and,
 * when it checks out, advances *expected past it (applying truncation
 * markers), calls `record` for each record and sets *next_offset to the
 * batch's end (where a packed batch may follow; see wal_scan_skip_padding).
 * Returns 0, -HASP_ENOENT (zero header: no batch) or
 * -HASP_ECORRUPT. A truncation marker that keeps less than *log_first_index
 * lowers it: the entries after it were appended again (compaction may have
 * dropped older segments in between). */
int wal_scan_batch(const uint8_t *image, uint64_t image_size, uint64_t offset, uint64_t segment_seq,
		   uint64_t *log_first_index, uint64_t *expected, struct wal_batch_header *b,
		   uint64_t *next_offset,
		   void (*record)(void *arg, uint64_t offset, const struct wal_record_header *r,
				  const uint8_t *payload),
		   void *arg) __attribute__((warn_unused_result));

/* Where the next batch after a batch ending at `offset` may start: the next
 * block boundary when the rest of offset's block is zero (padding), else
 * offset itself (a packed batch, or bad bytes). */
uint64_t wal_scan_skip_padding(const uint8_t *image, uint64_t image_size, uint64_t offset);

/* Zeroes a segment file from `offset` (8-byte aligned) to `size`. A partial
 * first block is read and written back with its bytes before `offset`
 * unchanged, so a torn rewrite keeps them (old and new copy agree there).
 * Blocking. Returns 0 or a negative errno. */
int wal_scan_zero_from(struct storage_io io, int fd, uint64_t offset, uint64_t size)
	__attribute__((warn_unused_result));

/* Reads a whole segment into a fresh aligned buffer (hasp_free it). */
int wal_scan_read_segment(struct storage_io io, const char *name, uint8_t **image,
			  uint64_t *size) __attribute__((warn_unused_result));

#endif
