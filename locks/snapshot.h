/*
 * Snapshots of the whole state machine: versioned, checksummed bytes.
 *
 * The snapshot records every live record at its slot index together with
 * its list links, plus the replicated scalars (revision, log time, term and
 * time offset, id counter). Because slots are allocated lowest-free
 * (slots.h), the live set determines every future allocation, so a machine
 * restored from a snapshot answers every future command exactly as the
 * original, and snapshot(restore(snapshot(S))) == snapshot(S) byte for byte.
 * Derived structures (hash indexes, arenas, deadline heaps) are rebuilt.
 * Counters (struct locks_stats) are not replicated and not included.
 *
 * Format table: snapshot.c and docs/STATE_MACHINE.md.
 */
#ifndef HASP_LOCKS_SNAPSHOT_H
#define HASP_LOCKS_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "locks/locks.h"

#define LOCKS_SNAPSHOT_MAGIC 0x4d534c48u /* "HLSM" little-endian */
/* 2: locks store their holder's session id (not a slot) and no session list
 * links; sessions store their open nonce and the open's deadline. Version 1
 * snapshots are refused (-HASP_EVERSION). */
/* 4: a session's cached replies are sparse and compact (a bitmap of the
 * slots in use, then only those, each reply's zero fields left out): a
 * session that made a few requests no longer costs window x 64 bytes. */
/* 4, 3 and 2 are still read (2: owners and digests 0; before 5: no floors) */
#define LOCKS_SNAPSHOT_VERSION 5u

/* Exact bytes locks_snapshot_write() produces for the current state. O(n). */
size_t locks_snapshot_size(const struct locks *sm);

/* Writes the snapshot into `buf` in one walk of the state. Returns 0 and
 * sets *written, or -HASP_ETOOBIG when buf_size is too small (buf may then
 * hold part of it). */
int locks_snapshot_write(const struct locks *sm, uint8_t *buf, size_t buf_size, size_t *written)
	__attribute__((warn_unused_result));

/*
 * Replaces the state of `sm` (initialised, any state) with a snapshot.
 * Checks the size, magic, version, CRC32C, that the capacities equal sm's
 * configuration, and every field's range before touching sm: a corrupt,
 * truncated or foreign snapshot is refused and sm is left as it was.
 * Returns 0, -HASP_ETRUNCATED, -HASP_EMAGIC, -HASP_EVERSION, -HASP_ECORRUPT
 * (checksum or structure), -HASP_ELENGTH or -HASP_ECONFIG (capacities
 * differ). Should the checksummed content still be inconsistent (only a bug
 * could write that), sm is left empty and -HASP_ECORRUPT returned.
 */
int locks_snapshot_restore(struct locks *sm, const uint8_t *buf, size_t size)
	__attribute__((warn_unused_result));

#endif
