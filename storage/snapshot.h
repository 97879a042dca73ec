/*
 * Snapshots: the state machine's bytes plus the last included index and
 * term and the cluster membership blob, in files
 * `snap-<index as 16 hex>-<term as 16 hex>.snap`.
 *
 * Saving writes `<name>.tmp`, fsyncs it, renames it into place and fsyncs the
 * directory, so a crash leaves either the old set or the old set plus the
 * complete new file; then it deletes all but the newest `keep` snapshots
 * (at most 8 per save, so a backlog drains over later saves).
 * Loading tries the snapshots newest first and takes the first whose
 * checksums verify, logging a warning for each it skips. Stray .tmp files
 * (a crash during a save) are deleted at load.
 *
 * Blocking (buffered writes and fsyncs): snapshots are rare and large; call
 * these from a thread that may block, not from the WAL's polling loop.
 *
 * File format (version 1), then membership bytes, then data bytes:
 * | off | size | field                                        |
 * |-----|------|----------------------------------------------|
 * |   0 |    8 | magic 0x31504e5350534148 ("HASPSNP1")        |
 * |   8 |    2 | version (1)                                  |
 * |  10 |    2 | header size (64)                             |
 * |  12 |    4 | membership size                              |
 * |  16 |    8 | data size                                    |
 * |  24 |    8 | last included index                          |
 * |  32 |    8 | last included term                           |
 * |  40 |    4 | CRC32C of membership then data               |
 * |  44 |   16 | reserved, zero                               |
 * |  60 |    4 | CRC32C of bytes 0..59                        |
 */
#ifndef HASP_STORAGE_SNAPSHOT_H
#define HASP_STORAGE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/io.h"

#define SNAPSHOT_MAGIC 0x31504e5350534148ull
#define SNAPSHOT_VERSION 1u
#define SNAPSHOT_HEADER_SIZE 64u
/* Upper bounds checked at load, so a damaged size field cannot make us
 * allocate without limit. */
#define SNAPSHOT_MEMBERSHIP_SIZE_MAX (1u << 20)
#define SNAPSHOT_DATA_SIZE_MAX (1ull << 36)
/* The most snapshots snapshot_save() keeps (its trimming state is a fixed
 * array of this many on the stack). */
#define SNAPSHOT_KEEP_MAX 100u

struct snapshot_meta {
	uint64_t last_index;
	uint64_t last_term;
	uint32_t membership_size;
	uint64_t data_size;
};

/* A loaded snapshot; buffers are hasp_alloc'd and owned by the caller
 * (snapshot_release frees them). */
struct snapshot {
	struct snapshot_meta meta;
	uint8_t *membership;
	uint8_t *data;
	uint64_t skipped; /* newer snapshots skipped as corrupt */
};

/* Pacing of a snapshot's data (snapshot_save): written in pieces of
 * `piece` bytes, each pushed to the device (writeback) before `after_piece`
 * is told how many data bytes are out and may wait. A WAL's fdatasync then
 * finds at most a piece of snapshot bytes ahead of it in the device's
 * cache instead of the whole file (docs/STORAGE.md, "Snapshot write
 * rate"). For a writer thread only: the waits stop the caller. */
struct snapshot_pace {
	uint64_t piece;
	void (*after_piece)(void *arg, uint64_t written);
	void *arg;
};

/* Saves a snapshot and keeps the newest `keep` (1..SNAPSHOT_KEEP_MAX),
 * deleting up to 8 older ones per call. The caller keeps the buffers.
 * `pace` NULL: the data in one write. Allocates nothing (it may run on the
 * node's lcore). Returns 0, -HASP_EINVAL, -HASP_EIO or -HASP_ENOSPC. */
int snapshot_save(struct storage_io io, const struct snapshot_meta *meta, const void *membership,
		  const void *data, unsigned keep, const struct snapshot_pace *pace)
	__attribute__((warn_unused_result));

/* Loads the newest valid snapshot. Returns 0, -HASP_ENOENT (none valid),
 * -HASP_EIO or -HASP_ENOMEM. */
int snapshot_load(struct storage_io io, struct snapshot *snap) __attribute__((warn_unused_result));
void snapshot_release(struct snapshot *snap);

/* Checks a whole snapshot file image: 0, -HASP_EMAGIC, -HASP_EVERSION,
 * -HASP_ETRUNCATED, -HASP_ELENGTH or -HASP_ECORRUPT. */
int snapshot_decode(const uint8_t *image, uint64_t size, struct snapshot_meta *meta)
	__attribute__((warn_unused_result));

/* "snap-%016llx-%016llx.snap"; parse returns false for other names. */
void snapshot_name(char *buf, size_t size, uint64_t index, uint64_t term);
bool snapshot_name_parse(const char *name, uint64_t *index, uint64_t *term);

#endif
