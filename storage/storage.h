/*
 * The storage edge of a node: one directory, one I/O implementation (an
 * io_uring ring, or a simulated disk), and on it the WAL, the hard-state
 * slots and the snapshots. This is what the node's polling loop drives.
 *
 * Order of side effects (the node writes this once, where it happens):
 * persist (WAL entries durable up to an index, hard state durable) -> send
 * (append acks, votes) -> apply -> reply. In calls:
 *
 *     storage_open(&s, &cfg, &hs)            recover; hs = term and vote
 *     wal_replay(&s.wal, visit, arg)         hand the log to Raft
 *     loop:
 *         wal_append(&s.wal, &e) ...         entries from Raft
 *         hardstate_save(&s.hs, &hs)         new term or vote (returns seq)
 *         wal_submit(&s.wal)
 *         storage_poll(&s, false)            reap, retry, advance
 *         wal_durable_index(&s.wal)          ack appends up to here
 *         hardstate_durable_seq(&s.hs) >= seq   ack the vote / new term
 *         if (storage_failed(&s)) stop acknowledging, restart
 *         before sleeping: wal_idle(&s.wal), then wait on the ring fd
 *
 * Ownership: struct storage owns the ring (or borrows the caller's simulated
 * disk), the WAL and the hard state; storage_close releases them.
 */
#ifndef HASP_STORAGE_STORAGE_H
#define HASP_STORAGE_STORAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/hardstate.h"
#include "storage/io.h"
#include "storage/snapshot.h"
#include "storage/wal.h"

struct uring_io;

struct storage_config {
	/* Either dir (a real directory, io_uring) or io (e.g. simdisk_io()). */
	const char *dir;
	struct storage_io io;
	uint64_t segment_size;        /* 0: default 64 MiB */
	uint32_t write_size_max;      /* 0: default 1 MiB */
	uint32_t writes_inflight_max; /* 0: default 16 */
	uint32_t segment_count_max;   /* 0: default 1024 */
	enum wal_sync_mode sync_mode;
	enum wal_segment_fill segment_fill; /* 0: WAL_FILL_ZEROS */
};

struct storage {
	struct uring_io *uring; /* NULL when cfg.io was given */
	struct storage_io io;
	struct wal wal;
	struct hardstate hs;
	/* After storage_open failed: which part refused, for the operator. */
	const char *open_failed;
};

/* Opens the directory (or the given io), recovers the WAL and loads the
 * hard state into *hs. Blocking. Errors as wal_open() and hardstate_open(). */
int storage_open(struct storage *s, const struct storage_config *cfg, struct hard_state *hs)
	__attribute__((warn_unused_result));
/* Checks the loaded hard state against the rest of the directory (Raft
 * persists term and vote before any entry or snapshot of that term): a
 * blank hard state next to a snapshot or a non-empty WAL, or a term below
 * the snapshot's or the last entry's term, means the newest vote was lost.
 * Returns 0, or -HASP_ECORRUPT with a message naming the hard state file in
 * err. snap_index 0: no snapshot. */
int storage_check_hard_state(const struct storage *s, const struct hard_state *hs,
			     uint64_t snap_index, uint64_t snap_term, uint64_t last_log_term,
			     char *err, size_t err_size) __attribute__((warn_unused_result));

/* Releases everything without I/O (call wal_drain first for a clean stop). */
void storage_close(struct storage *s);

/* Reaps completions for the WAL and the hard state, then starts what can
 * start. With wait, blocks until one completion arrives (retrying EINTR).
 * Returns completions handled. */
unsigned storage_poll(struct storage *s, bool wait);

static inline bool storage_failed(const struct storage *s)
{
	return s->wal.failed || s->hs.failed;
}

#endif
