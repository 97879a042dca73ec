/*
 * Internals shared by the WAL's files: wal.c (write path), wal_segment.c
 * (spare segments, headers, compaction, reset) and wal_recover.c (open,
 * repair, replay). Not for other modules.
 */
#ifndef HASP_STORAGE_WAL_INTERNAL_H
#define HASP_STORAGE_WAL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/log.h"
#include "storage/wal.h"

LOG_TOPIC_DECLARE(storage);

#define BLOCK HASP_WAL_BLOCK_SIZE

enum wal_op_kind {
	WAL_OP_WRITE = 1,
	WAL_OP_SYNC = 2,
	WAL_OP_SPARE = 3,
	WAL_OP_HEADER = 4,
	WAL_OP_SPARE_FILL = 5,
};

/* user_data: owner (8 bits) | slot (16) | attempt (16) | kind (8). */
static inline uint64_t wal_user_data(uint32_t slot, uint16_t attempt, enum wal_op_kind kind)
{
	return (WAL_USER_DATA_OWNER << 56) | ((uint64_t)slot << 24) | ((uint64_t)attempt << 8) |
	       (uint64_t)kind;
}

/* Logs once and enters the failed state (durability stops). */
void wal_fail(struct wal *w, const char *what, const char *file, uint64_t offset, uint32_t size,
	      int res);
const char *wal_segment_name_of(const struct wal *w, uint64_t seq);
/* The nth used write slot, oldest first. */
struct wal_write *wal_slot(struct wal *w, uint32_t nth);
/* True while any op the WAL submitted is not reaped. */
bool wal_ops_pending(const struct wal *w);

/* wal_segment.c */
int wal_segment_prepare_now(struct wal *w) __attribute__((warn_unused_result));
void wal_segment_prepare(struct wal *w);
void wal_segment_spare_done(struct wal *w, const struct storage_cqe *cqe);
void wal_segment_fill_done(struct wal *w, const struct storage_cqe *cqe);
void wal_segment_header_done(struct wal *w, const struct storage_cqe *cqe);
int wal_segment_activate(struct wal *w, uint64_t first_index) __attribute__((warn_unused_result));

#endif
