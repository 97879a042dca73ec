/*
 * The in-memory Raft log: a ring of log_window entry slots, each with room
 * for entry_bytes_max bytes, holding the consecutive entries first..last that
 * follow the snapshot (snap_index, snap_term).
 *
 * Fixed slots waste some memory for small commands but make every operation
 * O(1) without an allocator, and a slot's data pointer never moves, so
 * views handed to the loop stay valid for the step. The window only shrinks
 * from the front through log_compact() (a snapshot covers the entries), so
 * entries after the snapshot are always held: first <= snap_index + 1.
 */
#ifndef HASP_RAFT_LOG_H
#define HASP_RAFT_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include "raft/raft.h"

/* Allocates the window. Returns 0 or -HASP_ENOMEM. */
int log_init(struct raft_log *l, uint32_t window, uint32_t entry_bytes_max)
	__attribute__((warn_unused_result));
void log_deinit(struct raft_log *l);

/* Empties the log and puts its start after the snapshot (index, term). */
void log_reset(struct raft_log *l, uint64_t snap_index, uint64_t snap_term);

static inline uint64_t log_count(const struct raft_log *l)
{
	return l->last >= l->first ? l->last - l->first + 1 : 0;
}

/* Free slots for new entries at the end. */
static inline uint64_t log_room(const struct raft_log *l)
{
	return l->window - log_count(l);
}

/* Term at index: snap_term at snap_index, the entry's term inside the
 * window, 0 otherwise (compacted away or beyond the end). */
uint64_t log_term(const struct raft_log *l, uint64_t index);

/* The term is known at index (index is snap_index or held). */
bool log_has_term(const struct raft_log *l, uint64_t index);

/* The entry at index, NULL if not held. */
const struct raft_entry *log_get(const struct raft_log *l, uint64_t index);

/* Appends one entry at last + 1 (copying `size` bytes). There must be room
 * and term must not go down. */
const struct raft_entry *log_append(struct raft_log *l, uint64_t term, uint8_t type,
				    const void *data, uint32_t size);

/* Drops entries with index >= from (from > snap_index). */
void log_truncate(struct raft_log *l, uint64_t from);

/* Records a snapshot at (index, term) and drops held entries < keep_from
 * (keep_from <= index + 1). If the snapshot is past the end, the log is
 * reset to start after it. */
void log_compact(struct raft_log *l, uint64_t index, uint64_t term, uint64_t keep_from);

/* Largest index <= index whose term is <= term, for fast back-off; stops
 * at the first index whose term is unknown (returns it). */
uint64_t log_find_conflict_by_term(const struct raft_log *l, uint64_t index, uint64_t term);

#endif
