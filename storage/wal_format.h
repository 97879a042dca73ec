/*
 * The on-disk format of the write-ahead log: segment headers, batch headers
 * and records, with their encoders and checkers. Pure functions over bytes;
 * the tables below are the format's single definition (docs/STORAGE.md copies
 * them). All integers are little-endian. Version 2 (version 1 is read).
 *
 * A segment file `wal-<seq as 16 hex digits>.seg` is preallocated to the
 * configured size. Block 0 holds the segment header; every later write (one
 * group commit, a "batch") is a batch header followed by its records, each
 * 8-byte aligned, then zeros to the next block boundary. In version 1 every
 * batch starts on a block boundary. Version 2 also packs: a batch may start
 * right after the previous one (8-byte aligned, inside its last block), the
 * write then rewriting that block with its old bytes unchanged. After a
 * batch comes either the next batch, or zeros to the block end and the next
 * batch on the next block. Blocks never written read as zeros (fallocate),
 * which is how the end of the data in a segment is recognised.
 *
 * Segment header (block 0):
 * | off | size | field                                           |
 * |-----|------|-------------------------------------------------|
 * |   0 |    8 | magic 0x314c4157_50534148 ("HASPWAL1")          |
 * |   8 |    2 | version (2; 1 = no packing)                     |
 * |  10 |    2 | header size (64)                                |
 * |  12 |    4 | block size (4096)                               |
 * |  16 |    8 | segment sequence number (matches the file name) |
 * |  24 |    8 | first index: the index of the first entry       |
 * |  32 |    8 | segment size in bytes                           |
 * |  40 |   20 | reserved, zero                                  |
 * |  60 |    4 | CRC32C of bytes 0..59                           |
 *
 * Batch header (8-byte aligned, once per group-commit write):
 * | off | size | field                                                 |
 * |-----|------|-------------------------------------------------------|
 * |   0 |    4 | magic 0x48574231 ("1BWH" on disk)                     |
 * |   4 |    4 | records size: bytes of records after this header      |
 * |   8 |    4 | record count (0 only for an idle watermark batch)     |
 * |  12 |    4 | reserved, zero                                        |
 * |  16 |    8 | first index (of the first entry record; 0 if none)    |
 * |  24 |    8 | watermark: highest index reported durable when this   |
 * |     |      | write was built (recovery rule, docs/STORAGE.md)      |
 * |  32 |    8 | segment sequence number (a misplaced block is refused)|
 * |  40 |    4 | reserved, zero                                        |
 * |  44 |    4 | CRC32C of bytes 0..43                                 |
 *
 * Record (8-byte aligned, payload padded with zeros to 8):
 * | off | size | field                                                 |
 * |-----|------|-------------------------------------------------------|
 * |   0 |    4 | CRC32C of bytes 4..31 and the payload                 |
 * |   4 |    4 | payload size                                          |
 * |   8 |    8 | term                                                  |
 * |  16 |    8 | index (for a truncation marker: keep entries <= this) |
 * |  24 |    2 | type (WAL_TYPE_TRUNCATE = 0xffff is internal)         |
 * |  26 |    6 | reserved, zero                                        |
 * |  32 |    n | payload                                               |
 */
#ifndef HASP_STORAGE_WAL_FORMAT_H
#define HASP_STORAGE_WAL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

#define WAL_FORMAT_VERSION 2u
/* The oldest segment version read: 1, every batch on a block boundary. */
#define WAL_FORMAT_VERSION_MIN 1u
#define WAL_SEGMENT_MAGIC 0x314c415750534148ull
#define WAL_BATCH_MAGIC 0x48574231u
#define WAL_SEGMENT_HEADER_SIZE 64u
#define WAL_BATCH_HEADER_SIZE 48u
#define WAL_RECORD_HEADER_SIZE 32u
#define WAL_RECORD_ALIGN 8u

/* Entry types 0..WAL_TYPE_USER_MAX belong to the caller (Raft). */
#define WAL_TYPE_USER_MAX 0xfffeu
#define WAL_TYPE_TRUNCATE 0xffffu

struct wal_segment_header {
	uint64_t seq;
	uint64_t first_index;
	uint64_t segment_size;
	uint32_t block_size;
	uint16_t version; /* WAL_FORMAT_VERSION_MIN..WAL_FORMAT_VERSION */
};

struct wal_batch_header {
	uint32_t records_size;
	uint32_t record_count;
	uint64_t first_index;
	uint64_t watermark;
	uint64_t segment_seq;
};

struct wal_record_header {
	uint32_t payload_size;
	uint64_t term;
	uint64_t index;
	uint16_t type;
};

/* Bytes a record takes in a batch, header and padding included. */
static inline uint32_t wal_record_size(uint32_t payload_size)
{
	return WAL_RECORD_HEADER_SIZE +
	       ((payload_size + WAL_RECORD_ALIGN - 1) & ~(WAL_RECORD_ALIGN - 1));
}

static inline uint64_t wal_block_round_up(uint64_t size)
{
	return (size + HASP_WAL_BLOCK_SIZE - 1) & ~(uint64_t)(HASP_WAL_BLOCK_SIZE - 1);
}

/* Writes the 64-byte header into buf (which has at least that many bytes). */
void wal_segment_header_encode(uint8_t *buf, const struct wal_segment_header *h);
/* 0, -HASP_EMAGIC (also for all zeros), -HASP_ECORRUPT (checksum) or
 * -HASP_EVERSION. */
int wal_segment_header_decode(const uint8_t *buf, struct wal_segment_header *h)
	__attribute__((warn_unused_result));

void wal_batch_header_encode(uint8_t *buf, const struct wal_batch_header *b);
/* 0, -HASP_EMAGIC or -HASP_ECORRUPT. */
int wal_batch_header_decode(const uint8_t *buf, struct wal_batch_header *b)
	__attribute__((warn_unused_result));

/* Writes header, payload and padding at buf (wal_record_size() bytes). */
void wal_record_encode(uint8_t *buf, const struct wal_record_header *r, const void *payload);
/* Checks the record at buf with `left` bytes available: 0, -HASP_ETRUNCATED
 * (does not fit), -HASP_ECORRUPT (checksum) or -HASP_EFLAGS (reserved bytes
 * set). On success *payload points into buf. */
int wal_record_decode(const uint8_t *buf, size_t left, struct wal_record_header *r,
		      const uint8_t **payload) __attribute__((warn_unused_result));

/* True when all bytes are zero (a never-written block or header). */
bool wal_bytes_zero(const uint8_t *buf, size_t size);

/* "wal-%016llx.seg"; returns false if name is not a segment name. */
void wal_segment_name(char *buf, size_t size, uint64_t seq);
bool wal_segment_name_parse(const char *name, uint64_t *seq);

#endif
