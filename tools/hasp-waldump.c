/*
 * hasp-waldump: prints what a node's storage directory holds (WAL segments,
 * batches and records, hard-state slots, snapshots) using the same scan as
 * recovery, and says what recovery would do. It never changes anything,
 * except with --truncate-at, the operator's repair tool.
 *
 *   hasp-waldump [-q] <dir>
 *       -q: segments and summary only, no per-record lines.
 *       Exit 0: clean, or a torn tail that the next start will cut.
 *       Exit 2: corruption (the node refuses to start; the file and offset
 *       are printed), or a damaged snapshot. Exit 1: usage or I/O error.
 *
 *   hasp-waldump --truncate-at <segment file> <offset> <dir>
 *       Cuts the WAL at a batch offset (as printed): zeroes the rest of
 *       that segment, deletes every later segment, syncs. Entries from that
 *       point on are gone: only do it after confirming that a majority of
 *       the other replicas hold them (docs/STORAGE.md, "Operator repair").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/version.h"
#include "hasp/errors.h"
#include "storage/hardstate.h"
#include "storage/snapshot.h"
#include "storage/uring.h"
#include "storage/wal_scan.h"

struct dump {
	bool quiet;
	struct storage_io io;
	unsigned snapshots_bad;
};

static void dump_segment(void *arg, const struct wal_scan_segment *s)
{
	(void)arg;
	if (s->header_rc == 0)
		printf("segment %s seq=%llu first_index=%llu size=%llu header=ok\n", s->name,
		       (unsigned long long)s->seq, (unsigned long long)s->header.first_index,
		       (unsigned long long)s->header.segment_size);
	else if (s->empty)
		printf("segment %s seq=%llu size=%llu unused (a spare, never written)\n", s->name,
		       (unsigned long long)s->seq, (unsigned long long)s->file_size);
	else
		printf("segment %s seq=%llu size=%llu header=BAD (%s) offset=0\n", s->name,
		       (unsigned long long)s->seq, (unsigned long long)s->file_size,
		       hasp_strerror_name(s->header_rc));
}

static void dump_batch(void *arg, const struct wal_scan_segment *s, uint64_t offset,
		       const struct wal_batch_header *b, bool in_prefix)
{
	const struct dump *d = arg;

	if (d->quiet && in_prefix)
		return;
	printf("  %sbatch %s offset=%llu first_index=%llu records=%u bytes=%u watermark=%llu\n",
	       in_prefix ? "" : "after-end ", s->name, (unsigned long long)offset,
	       (unsigned long long)b->first_index, b->record_count, b->records_size,
	       (unsigned long long)b->watermark);
}

static void dump_record(void *arg, const struct wal_scan_segment *s, uint64_t offset,
			const struct wal_record_header *r, const uint8_t *payload)
{
	const struct dump *d = arg;

	(void)s;
	(void)payload;
	if (d->quiet)
		return;
	if (r->type == WAL_TYPE_TRUNCATE)
		printf("    truncate offset=%llu keep_through_index=%llu\n", (unsigned long long)offset,
		       (unsigned long long)r->index);
	else
		printf("    record offset=%llu index=%llu term=%llu type=%u length=%u\n",
		       (unsigned long long)offset, (unsigned long long)r->index,
		       (unsigned long long)r->term, r->type, r->payload_size);
}

static void dump_hardstate(struct storage_io io)
{
	uint8_t *image = hasp_alloc_aligned(4096, 2 * HARDSTATE_SLOT_SIZE);
	size_t got = 0;
	bool direct;
	int fd;

	if (image == NULL)
		return;
	memset(image, 0, 2 * HARDSTATE_SLOT_SIZE);
	if (io.ops->open(io.ctx, HARDSTATE_FILE, STORAGE_OPEN_DIRECT, &fd, &direct) != 0) {
		printf("hardstate: none\n");
		hasp_free(image);
		return;
	}
	(void)io.ops->pread(io.ctx, fd, image, 2 * HARDSTATE_SLOT_SIZE, 0, &got);
	io.ops->close(io.ctx, fd);
	for (uint32_t i = 0; i < 2; i++) {
		struct hard_state hs;
		uint64_t seq;
		int rc = hardstate_slot_decode(image + i * HARDSTATE_SLOT_SIZE, &seq, &hs);
		if (rc == 0)
			printf("hardstate slot=%u seq=%llu term=%llu vote=%llu\n", i,
			       (unsigned long long)seq, (unsigned long long)hs.term,
			       (unsigned long long)hs.vote);
		else
			printf("hardstate slot=%u %s file=%s offset=%u\n", i,
			       rc == -HASP_EMAGIC ? "empty" : "invalid", HARDSTATE_FILE,
			       i * HARDSTATE_SLOT_SIZE);
	}
	hasp_free(image);
}

static void dump_snapshot(const char *name, void *arg)
{
	struct dump *d = arg;
	struct snapshot_meta m;
	uint64_t index, term, size = 0;
	uint8_t *image = NULL;
	size_t got = 0;
	bool direct;
	int fd, rc;

	if (!snapshot_name_parse(name, &index, &term))
		return;
	rc = d->io.ops->open(d->io.ctx, name, 0, &fd, &direct);
	if (rc == 0) {
		rc = d->io.ops->size(d->io.ctx, fd, &size);
		image = rc == 0 ? hasp_alloc(size ? size : 1) : NULL;
		if (image != NULL)
			rc = d->io.ops->pread(d->io.ctx, fd, image, size, 0, &got);
		d->io.ops->close(d->io.ctx, fd);
	}
	rc = image == NULL || rc != 0 || got != size ? -HASP_EIO : snapshot_decode(image, size, &m);
	if (rc == 0 && (m.last_index != index || m.last_term != term))
		rc = -HASP_ECORRUPT;
	if (rc == 0)
		printf("snapshot %s index=%llu term=%llu membership=%u data=%llu ok\n", name,
		       (unsigned long long)m.last_index, (unsigned long long)m.last_term,
		       m.membership_size, (unsigned long long)m.data_size);
	else {
		printf("snapshot %s CORRUPT file=%s offset=0 (%s)\n", name, name, hasp_strerror_name(rc));
		d->snapshots_bad++;
	}
	hasp_free(image);
}

static int truncate_at(struct storage_io io, const char *file, uint64_t offset)
{
	struct wal_scan sc;
	uint64_t seq;
	bool direct, found = false;
	int fd, rc;

	if (!wal_segment_name_parse(file, &seq) || offset % WAL_RECORD_ALIGN != 0 ||
	    offset < HASP_WAL_BLOCK_SIZE) {
		fprintf(stderr, "--truncate-at needs a segment file name and a batch offset "
				"(a multiple of %u, at least %u)\n",
			WAL_RECORD_ALIGN, HASP_WAL_BLOCK_SIZE);
		return 1;
	}
	if (wal_scan_run(&sc, io, 1u << 20, NULL) != 0) {
		fprintf(stderr, "scan failed\n");
		return 1;
	}
	for (uint32_t i = 0; i < sc.segment_count; i++) {
		if (sc.segments[i].seq > seq) {
			rc = io.ops->unlink(io.ctx, sc.segments[i].name);
			printf("deleted %s%s\n", sc.segments[i].name, rc == 0 ? "" : " (FAILED)");
		} else if (sc.segments[i].seq == seq) {
			found = true;
			rc = io.ops->open(io.ctx, file, 0, &fd, &direct);
			/* A cut segment gets its preallocated size back (zeros),
			 * or the next start would refuse it again. */
			if (rc == 0 && sc.segments[i].header_rc == 0 &&
			    sc.segments[i].file_size < sc.segments[i].header.segment_size)
				rc = io.ops->allocate(io.ctx, fd, sc.segments[i].header.segment_size);
			if (rc == 0 && offset < sc.segments[i].file_size) {
				rc = wal_scan_zero_from(io, fd, offset, sc.segments[i].file_size);
				if (rc == 0)
					rc = io.ops->fsync(io.ctx, fd);
			}
			if (rc == 0)
				io.ops->close(io.ctx, fd);
			printf("zeroed %s from offset=%llu%s\n", file, (unsigned long long)offset,
			       rc == 0 ? "" : " (FAILED)");
			if (rc != 0) {
				wal_scan_free(&sc);
				return 1;
			}
		}
	}
	wal_scan_free(&sc);
	if (!found) {
		fprintf(stderr, "no segment %s\n", file);
		return 1;
	}
	return io.ops->sync_dir(io.ctx) == 0 ? 0 : 1;
}

static const char usage_text[] =
	"usage: hasp-waldump [-q] <dir>\n"
	"       hasp-waldump --truncate-at <segment file> <offset> <dir>\n"
	"Prints every WAL record, snapshot and hard state of a node's data directory\n"
	"(-q: only the summary and the problems); --truncate-at cuts a segment at a\n"
	"byte offset (offline repair, docs/STORAGE.md). Exit 0 clean, 1 otherwise.\n";

static int usage(void)
{
	fputs(usage_text, stderr);
	return 1;
}

int main(int argc, char **argv)
{
	struct dump d = { 0 };
	struct uring_io *u;
	struct wal_scan sc;
	struct stat st;
	const char *dir = NULL, *cut_file = NULL;
	uint64_t cut_offset = 0;
	int status = 0;

	if (version_requested(argc, argv, "hasp-waldump"))
		return 0;
	if (help_requested(argc, argv)) {
		fputs(usage_text, stdout);
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-q") == 0)
			d.quiet = true;
		else if (strcmp(argv[i], "--truncate-at") == 0 && i + 2 < argc) {
			cut_file = argv[++i];
			cut_offset = strtoull(argv[++i], NULL, 0);
		} else if (argv[i][0] == '-' || dir != NULL)
			return usage();
		else
			dir = argv[i];
	}
	if (dir == NULL)
		return usage();
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "hasp-waldump: %s: not a directory\n", dir);
		return 1;
	}
	if (uring_io_open(&u, dir, 8) != 0)
		return 1;
	d.io = uring_io_ops(u);
	if (cut_file != NULL) {
		status = truncate_at(d.io, cut_file, cut_offset);
		uring_io_close(u);
		return status;
	}

	struct wal_scan_visitor v = { &d, dump_segment, dump_batch, dump_record };
	if (wal_scan_run(&sc, d.io, 1u << 20, &v) != 0) {
		fprintf(stderr, "hasp-waldump: scan failed\n");
		uring_io_close(u);
		return 1;
	}
	if (sc.segment_count == 0)
		printf("wal: empty\n");
	else {
		const char *end = sc.prefix_segment_count ? sc.segments[sc.stop_segment].name : "-";
		bool torn = sc.stop_dirty;
		for (uint32_t i = sc.prefix_segment_count; i < sc.segment_count; i++)
			torn |= !sc.segments[i].empty;
		printf("wal: first_index=%llu last_index=%llu end=%s offset=%llu status=%s\n",
		       (unsigned long long)sc.first_index, (unsigned long long)sc.last_index, end,
		       (unsigned long long)sc.stop_offset,
		       sc.corrupt ? "CORRUPT" : torn ? "torn-tail (cut at next start)" : "clean");
	}
	if (sc.corrupt && sc.lost_segment) {
		printf("LOST file=%s offset=%llu: %s; the log that remains ends at index %llu\n",
		       sc.corrupt_file, (unsigned long long)sc.corrupt_offset, sc.corrupt_reason,
		       (unsigned long long)sc.last_index);
		if (sc.prefix_segment_count > 0)
			printf("repair: see docs/STORAGE.md \"Missing or truncated WAL segment\"; "
			       "e.g. after confirming the other replicas hold the entries:\n"
			       "  hasp-waldump --truncate-at %s %llu %s\n",
			       sc.segments[sc.stop_segment].name,
			       (unsigned long long)(sc.stop_offset > HASP_WAL_BLOCK_SIZE
							    ? sc.stop_offset
							    : HASP_WAL_BLOCK_SIZE),
			       dir);
		else
			printf("repair: see docs/STORAGE.md \"Missing or truncated WAL segment\" "
			       "(nothing valid remains: replace the member)\n");
		status = 2;
	} else if (sc.corrupt) {
		printf("CORRUPT file=%s offset=%llu: %s; a later write (file=%s offset=%llu) "
		       "records index %llu as durable, but the log ends at %llu\n",
		       sc.corrupt_file, (unsigned long long)sc.corrupt_offset, sc.corrupt_reason,
		       sc.after_file, (unsigned long long)sc.after_offset,
		       (unsigned long long)sc.after_watermark_max, (unsigned long long)sc.last_index);
		printf("repair: see docs/STORAGE.md \"Operator repair\"; e.g. after confirming the "
		       "other replicas hold the entries:\n  hasp-waldump --truncate-at %s %llu %s\n",
		       sc.corrupt_file, (unsigned long long)sc.corrupt_offset, dir);
		status = 2;
	}
	wal_scan_free(&sc);
	dump_hardstate(d.io);
	(void)d.io.ops->list(d.io.ctx, dump_snapshot, &d);
	if (d.snapshots_bad > 0)
		status = 2;
	uring_io_close(u);
	return status;
}
