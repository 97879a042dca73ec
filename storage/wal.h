/*
 * The write-ahead log: Raft entries appended in segment files through a
 * polled, pipelined group commit (format in wal_format.h, rules in
 * docs/STORAGE.md).
 *
 * The node's polling loop drives it; nothing here blocks on the hot path:
 *
 *     wal_append(w, &entry)     copy entries in (they join the open write)
 *     wal_submit(w)             start writes while fewer than
 *                               writes_inflight_max are in flight
 *     storage_poll() / wal_poll(w, false)
 *                               reap completions, retry, advance durability
 *     wal_durable_index(w)      entries <= this survive any crash; the node
 *                               may acknowledge them (persist before send)
 *
 * Group commit: appends that arrive while writes are in flight accumulate in
 * the open write, which starts as soon as a write slot frees. Each write is
 * one batch: a batch header, the records, zeros to the next 4 KiB block.
 * Packing: when the write before it is durable, a write starts inside that
 * write's last, partial block and rewrites it (its old bytes unchanged), so
 * small writes do not each take a 4 KiB block (docs/STORAGE.md, "Partial
 * blocks").
 * Every write gets its own fdatasync (linked SQE), RWF_DSYNC, or drained
 * fdatasync (config), and durability is reported strictly in write order,
 * whatever order the kernel completes them in.
 *
 * Failure: an error other than a short write, -EINTR or -EAGAIN (e.g. -EIO,
 * -ENOSPC) is logged with the file and offset and puts the WAL into a failed
 * state: the durable index stops moving and every later append or submit
 * returns the error. The node must stop acknowledging and restart.
 *
 * Blocking calls (not on the hot path, documented each): wal_open (recovery),
 * wal_compact and wal_reset (unlink + directory fsync), wal_replay (reads),
 * wal_drain. Segment rollover does not wait for the device: the next segment
 * is prepared ahead (create and fallocate in the call that consumed the last
 * spare; zeros written over it, its fsync and the directory fsync through
 * the ring), and its header is written through the ring; writes for it
 * start once the header is durable.
 *
 * Single-threaded: one thread calls every function of one wal.
 */
#ifndef HASP_STORAGE_WAL_H
#define HASP_STORAGE_WAL_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/io.h"
#include "storage/wal_format.h"

/* Writes in flight at once, at most. */
#define WAL_WRITES_MAX 64u

/* The top byte of user_data of every op the WAL submits; storage_poll()
 * dispatches completions on it. */
#define WAL_USER_DATA_OWNER 0x57ull

enum wal_sync_mode {
	WAL_SYNC_LINKED = 0, /* write, then fdatasync linked to it (IOSQE_IO_LINK) */
	WAL_SYNC_DSYNC = 1,  /* the write itself carries RWF_DSYNC */
	WAL_SYNC_DRAIN = 2,  /* write, then fdatasync with IOSQE_IO_DRAIN */
};

/* How a new segment's blocks are made ready before it is used. */
enum wal_segment_fill {
	/* fallocate, then zeros written over the whole file through the ring
	 * (a chunk at a time) and one fsync: its extents are then written
	 * ones, so a later RWF_DSYNC write or fdatasync has no extent
	 * conversion to journal, only the data and the cache flush
	 * (docs/STORAGE.md, "Spare segments are written with zeros"). */
	WAL_FILL_ZEROS = 0,
	/* fallocate only: the blocks stay unwritten extents, and the first
	 * write into each makes the next sync commit the file system's
	 * journal too. Less device traffic per segment. */
	WAL_FILL_ALLOCATE = 1,
};

/* Bytes of zeros per write while a spare is filled (one in flight). */
#define WAL_FILL_CHUNK (256u << 10)

struct wal_config {
	struct storage_io io;         /* the caller keeps it alive until wal_close */
	uint64_t segment_size;        /* bytes, a multiple of 4 KiB, >= 4 blocks */
	uint32_t write_size_max;      /* bytes per write, a multiple of 4 KiB */
	uint32_t writes_inflight_max; /* 1..WAL_WRITES_MAX */
	uint32_t segment_count_max;   /* segment files at most (open fds) */
	enum wal_sync_mode sync_mode;
	enum wal_segment_fill segment_fill;
	/* Segment format for new segments: 0 or WAL_FORMAT_VERSION (packs
	 * small writes), or 1 (every write on a fresh block: what older
	 * versions wrote; tests and comparisons). */
	uint16_t format_version;
};

/* One entry. The caller keeps `data`; wal_append copies it. */
struct wal_entry {
	uint64_t index;
	uint64_t term;
	uint16_t type; /* 0..WAL_TYPE_USER_MAX */
	uint32_t size;
	const void *data;
};

struct wal_stats {
	uint64_t appends;
	uint64_t writes;            /* group-commit writes started */
	uint64_t records_bytes;     /* record bytes written (headers + payloads) */
	uint64_t padding_bytes;     /* log space not holding records: batch headers,
				     * the unused rest of blocks left behind */
	uint64_t device_bytes;      /* bytes the writes carried (whole blocks,
				     * rewritten tail bytes included) */
	uint64_t packed_writes;     /* writes that started inside the previous
				     * write's last block */
	uint64_t short_writes;      /* continued */
	uint64_t retries;           /* -EINTR/-EAGAIN resubmitted */
	uint64_t full;              /* appends refused with -HASP_EFULL */
	uint64_t rollovers;
	uint64_t truncations;
	uint64_t segments_dropped;
	uint64_t retire_steps;    /* truncations of dropped segments (wal_retire_step) */
	uint64_t recovered_torn_tails;
	uint64_t spare_waits;       /* rollovers that found the next segment not ready */
	uint64_t fill_bytes;        /* zeros written into spare segments */
	uint64_t watermark_writes;  /* empty batches written by wal_idle/wal_drain */
};

enum wal_spare_state {
	WAL_SPARE_NONE = 0,
	WAL_SPARE_FILLING, /* created; zeros being written (WAL_FILL_ZEROS) */
	WAL_SPARE_SYNCING, /* created (and filled); its fsync and directory fsync in flight */
	WAL_SPARE_READY,
};

enum wal_write_state {
	WAL_WRITE_FREE = 0,
	WAL_WRITE_FILLING, /* taking appends */
	WAL_WRITE_READY,   /* sealed, waiting for an in-flight position */
	WAL_WRITE_INFLIGHT,
	WAL_WRITE_DONE, /* durable */
};

/* One group-commit write and its buffer (internal; visible for sizing). */
struct wal_write {
	enum wal_write_state state;
	uint8_t *buf; /* write_size_max bytes, 4 KiB aligned */
	uint32_t used;        /* bytes filled from the block start: a packed
			       * write's copied tail, its batch header, records */
	uint32_t batch_off;   /* where its batch header is in buf (0 unless packed) */
	uint32_t size;        /* bytes written: used rounded up to a block */
	uint32_t done_bytes;  /* written so far (short writes continue) */
	uint32_t record_count;
	uint64_t first_index; /* first entry in it, 0 if only a marker */
	uint64_t start_index; /* the log's next index when it opened */
	uint64_t end_index;   /* the log's last index once it is durable */
	uint32_t segment;     /* position in wal.segments when assigned */
	uint64_t segment_seq;
	int fd;
	uint64_t offset;
	uint16_t attempt;     /* bumped on each resubmission; stale completions ignored */
	uint8_t ops_pending;  /* completions still to reap */
	bool write_done;
	bool reported;
};

struct wal_segment {
	char name[STORAGE_NAME_SIZE_MAX];
	uint64_t seq;
	uint64_t first_index;
	uint64_t index_max; /* highest entry index written in it */
	uint64_t keep_min;  /* lowest keep index of its truncation markers */
	uint64_t size;      /* bytes, from its header */
	uint16_t version;   /* format version of its header */
	int fd;
};

/* A dropped segment whose name is gone and whose blocks are freed a step
 * at a time (wal_retire_step). */
struct wal_retiring {
	int fd;
	uint64_t size; /* what is left to free */
};

#define WAL_RETIRING_MAX 8u
#define WAL_RETIRE_STEP (2ull << 20)       /* bytes freed per step */
#define WAL_RETIRE_PACE_NS 5000000ull      /* between two steps */

struct wal {
	struct wal_config cfg;
	bool direct;      /* O_DIRECT granted on the segments */
	bool failed;
	int fail_code;    /* -HASP_EIO or -HASP_ENOSPC once failed */
	uint64_t first_index;
	uint64_t last_index;    /* last appended (first_index - 1 when empty) */
	uint64_t durable_index;
	uint64_t watermark_written; /* highest watermark in a sealed write */
	struct wal_segment *segments; /* [0, segment_count), the last is active */
	uint32_t segment_count;
	uint64_t segment_seq_next;
	struct wal_segment spare; /* the next segment, prepared ahead (fd -1: none) */
	enum wal_spare_state spare_state;
	uint8_t spare_ops_pending;
	bool spare_sync_failed;     /* an op of the spare sync asked to be redone */
	uint64_t spare_fill_offset; /* zeros written below this offset of the spare */
	uint8_t *fill_buf;          /* WAL_FILL_CHUNK zeros, 4 KiB aligned (WAL_FILL_ZEROS) */
	uint8_t *header_buf;       /* the new segment's header block, while written */
	bool header_pending;       /* writes to header_seq wait until it is durable */
	uint64_t header_seq;
	int header_fd;
	uint16_t header_attempt;
	uint8_t header_ops_pending;
	uint64_t write_offset; /* next free block in the active segment */
	/* The last sealed write's partial last block (packing): its bytes, how
	 * many hold data (0: none to pack into), where it is, and which write
	 * owns it (packing waits until that write is durable). */
	uint8_t *tail_buf;
	uint32_t tail_len;
	uint64_t tail_offset;
	uint64_t tail_segment_seq;
	const struct wal_write *tail_owner;
	uint64_t log_end;         /* end of the newest sealed batch in its segment */
	uint64_t log_end_seq;     /* ... and that segment's sequence number */
	struct wal_write *writes; /* ring of write_count slots in write order */
	uint32_t write_count;
	uint32_t write_head;      /* oldest not yet freed */
	uint32_t write_used;      /* slots between head and tail */
	uint32_t inflight;
	struct wal_scan_marker *markers; /* from recovery, for wal_replay */
	uint32_t marker_count;
	bool replay_allowed;
	struct wal_retiring retiring[WAL_RETIRING_MAX];
	uint32_t retiring_count;
	uint64_t retire_next_ns; /* the next step, CLOCK_MONOTONIC */
	struct wal_stats stats;
};

/* Opens the WAL in cfg->io's directory and recovers it: keeps the longest
 * valid prefix, cuts a torn tail, fsyncs what it keeps (so all of it counts
 * as durable). Blocking. Returns 0, -HASP_EINVAL/-HASP_ECONFIG (config),
 * -HASP_ENOMEM, -HASP_EIO, or -HASP_ECORRUPT: a record that had been reported
 * durable is damaged; the WAL refuses to start and logs the file and offset
 * (operator repair: docs/STORAGE.md). */
int wal_open(struct wal *w, const struct wal_config *cfg) __attribute__((warn_unused_result));

/* Frees memory and closes fds, without any I/O (safe after a simulated
 * crash). Writes in flight are abandoned: call wal_drain() first to wait. */
void wal_close(struct wal *w);

/* Delivers the recovered log in index order: every entry from
 * wal_first_index() to wal_last_index() once (entries at or below the
 * snapshot's index may be among them: skip those). Only between wal_open()
 * and the first append. Blocking reads. Returns 0, a visit's nonzero
 * return, or -HASP_EIO/-HASP_ENOMEM/-HASP_ESTATE. `e->data` is valid only
 * during the call. */
int wal_replay(struct wal *w, int (*visit)(void *arg, const struct wal_entry *e), void *arg)
	__attribute__((warn_unused_result));

/* Copies one entry into the open write. e->index must be last_index + 1.
 * Returns 0, -HASP_EINVAL (index or type), -HASP_ETOOBIG (cannot fit one
 * write or segment), -HASP_EFULL (every write slot busy: poll, then retry),
 * or the failure code. -HASP_EFULL also when the next segment is not ready
 * yet (stats.spare_waits) or segment_count_max segments exist (compact). */
int wal_append(struct wal *w, const struct wal_entry *e) __attribute__((warn_unused_result));

/* Starts writes: sealed ones in order, then the open one, while fewer than
 * writes_inflight_max are in flight. Returns 0 or the failure code. */
int wal_submit(struct wal *w) __attribute__((warn_unused_result));

/* Reaps completions (waiting for one if `wait` and any is outstanding),
 * then submits what can start. Returns completions handled. Use this when
 * the WAL owns its io alone; storage_poll() does it for a shared ring. */
unsigned wal_poll(struct wal *w, bool wait);

/* Call when the node's loop is about to sleep (nothing to append). If
 * entries are durable that no write on disk vouches for yet, writes an empty
 * batch whose watermark is the durable index (non-blocking; one 4 KiB write),
 * so that damage found later in the newest entries is refused as corruption
 * instead of cut as a torn write (docs/STORAGE.md, "Idle watermark"). Not
 * calling it is safe; it only narrows that window. Returns 0 or the failure
 * code. */
int wal_idle(struct wal *w) __attribute__((warn_unused_result));

/* True when wal_idle() would write a watermark now: durable entries that no
 * write on disk vouches for, and nothing in the WAL's write queue. */
bool wal_idle_due(const struct wal *w);

/* Handles one completion whose user_data has WAL_USER_DATA_OWNER. */
void wal_io_done(struct wal *w, const struct storage_cqe *cqe);

/* Waits (blocking) until nothing is in flight and the open write is
 * durable, then writes the idle watermark (see wal_idle) and waits for it.
 * Returns 0 or the failure code. */
int wal_drain(struct wal *w) __attribute__((warn_unused_result));

/* Drops entries > index (a Raft conflict). Non-blocking: it appends a
 * truncation marker, so the cut becomes durable in write order with the
 * entries that follow it. The durable index drops to index at once if it
 * was above. index must be <= last_index (Raft never cuts at or below its
 * snapshot, so index >= first_index - 1 in practice). Returns 0,
 * -HASP_EINVAL, -HASP_EFULL or the failure code. */
int wal_truncate_suffix(struct wal *w, uint64_t index) __attribute__((warn_unused_result));

/* Deletes whole segments, oldest first, whose entries are all <= index
 * (after a snapshot at index is durable). Never the active segment or one
 * with writes in flight. Blocking (unlink, directory fsync), but the blocks
 * of a deleted segment are freed later, a step at a time
 * (wal_retire_step): one unlink of a written 64 MiB segment took 14-19 ms
 * on ext4 and held every fdatasync of the file system up by as long. Returns
 * the number of segments deleted or a negative error. */
int wal_compact(struct wal *w, uint64_t index) __attribute__((warn_unused_result));

/* Frees WAL_RETIRE_STEP bytes of the oldest deleted segment still open
 * (ftruncate of its unlinked file), at most one step per
 * WAL_RETIRE_PACE_NS, then closes it once empty. Returns true when it
 * did a step; *deadline_ns is lowered to the next step's time while
 * segments remain. A crash meanwhile loses nothing: the files have no
 * name, and the kernel frees them. */
bool wal_retire_step(struct wal *w, uint64_t now_ns, uint64_t *deadline_ns);

/* Empties the log so the next append is index + 1 (after installing a
 * snapshot at index that is ahead of the log). Drains, deletes every
 * segment, creates a new one. Blocking. Returns 0 or an error. */
int wal_reset(struct wal *w, uint64_t index) __attribute__((warn_unused_result));

static inline uint64_t wal_first_index(const struct wal *w) { return w->first_index; }
static inline uint64_t wal_last_index(const struct wal *w) { return w->last_index; }
static inline uint64_t wal_durable_index(const struct wal *w) { return w->durable_index; }
static inline bool wal_failed(const struct wal *w) { return w->failed; }
static inline bool wal_direct_io(const struct wal *w) { return w->direct; }
static inline unsigned wal_inflight(const struct wal *w) { return w->inflight; }

/* True when the WAL's internal invariants hold (for HASP_DASSERT and tests). */
bool wal_invariants_ok(const struct wal *w);

/* Sets cfg to the defaults: 64 MiB segments, 1 MiB writes, 16 in flight,
 * 1024 segments, linked fdatasync. */
void wal_config_default(struct wal_config *cfg, struct storage_io io);

#endif
