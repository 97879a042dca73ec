/*
 * A simulated disk behind struct storage_io_ops, for tests and the Raft
 * simulator.
 *
 * Everything is in memory and every choice comes from one seed, so a seed
 * replays a run exactly. Submitted ops complete in reap() calls, each eligible
 * op with a chosen probability per call, in random order (the kernel may
 * complete out of order); links and drains are honoured. The disk keeps, per
 * 512-byte sector, the contents that would survive a power cut: a write makes
 * sectors dirty, an fsync makes the sectors dirty when it started durable, an
 * RWF_DSYNC write is durable at completion. The directory is modelled the same
 * way: creations, renames and unlinks are durable only after sync_dir.
 *
 * simdisk_crash() cuts the power: ops in flight land in part or not at all,
 * each dirty sector keeps its new contents, reverts to the durable ones, or
 * tears (part new, part old), and each unsynced directory change happens or
 * not. Faults on demand: short writes, -EAGAIN/-EINTR completions, -EIO or
 * -ENOSPC on the n-th write or fsync, and bit flips in stored data.
 *
 * Single-threaded. All memory comes from hasp_alloc (it is a test tool: it
 * allocates as files grow).
 */
#ifndef HASP_STORAGE_SIMDISK_H
#define HASP_STORAGE_SIMDISK_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/io.h"

#define SIMDISK_SECTOR_SIZE 512u

struct simdisk_config {
	uint64_t seed;
	/* Chance per reap() that an eligible op completes. */
	uint32_t complete_per_million;
	/* Chance that a completing write is short (multi-sector writes only). */
	uint32_t short_write_per_million;
	/* Chance that a completing op returns -EAGAIN or -EINTR, having done nothing. */
	uint32_t again_per_million;
	/* Chance, at a crash, that a dirty sector tears instead of keeping or
	 * reverting; the rest split evenly between keep and revert. */
	uint32_t torn_sector_per_million;
	/* When false, open() never grants O_DIRECT (like an old tmpfs). */
	bool direct_supported;
};

enum simdisk_op_kind {
	SIMDISK_OP_WRITE = 0, /* async writes and sync pwrite */
	SIMDISK_OP_FSYNC = 1, /* async fsyncs and sync fsync */
	SIMDISK_OP_SYNC_DIR = 2, /* async directory fsync (no injection) */
};

struct simdisk_stats {
	uint64_t writes, fsyncs, short_writes, agains, injected_errors, crashes, bit_flips;
	uint64_t writebacks; /* writeback() calls: nothing to do on a simulated disk */
	uint64_t bytes_written;
};

struct simdisk;

/* Fills cfg with a mild default: everything completes within a few reaps. */
void simdisk_config_default(struct simdisk_config *cfg, uint64_t seed);

/* Returns NULL when out of memory. */
struct simdisk *simdisk_create(const struct simdisk_config *cfg);
void simdisk_destroy(struct simdisk *d);

/* The ops table bound to this disk. Valid until simdisk_destroy(). */
struct storage_io simdisk_io(struct simdisk *d);

/* Power cut: see above. Every fd is closed and every op in flight dropped
 * (their completions are never reported), so close the users first without
 * doing I/O (wal_close() does none). */
void simdisk_crash(struct simdisk *d);

/* Flips one random bit in the stored bytes of a random file whose name
 * starts with prefix (all files for ""); returns false if none has data. */
bool simdisk_flip_bit(struct simdisk *d, const char *prefix);

/* The n-th (0 = next) write or fsync of this kind, sync or async, fails with
 * -err (EIO, ENOSPC), doing nothing. One pending injection per kind. */
void simdisk_fail_nth(struct simdisk *d, enum simdisk_op_kind kind, uint32_t n, int err);

/* A full disk for new files: every synchronous write through an fd opened
 * (from now on) on an empty file whose name starts with prefix fails with
 * -err, as ENOSPC does when preallocated files still take writes. err 0
 * stops it for later opens. */
void simdisk_fail_new_files(struct simdisk *d, const char *prefix, int err);

/* Cancels pending injections of both kinds. */
void simdisk_fail_clear(struct simdisk *d);

/* Operations still in flight. */
unsigned simdisk_inflight(const struct simdisk *d);

void simdisk_stats_get(const struct simdisk *d, struct simdisk_stats *stats);

/* Direct access for tests and tools: the current contents of a file
 * (NULL if missing) and its size. */
const uint8_t *simdisk_file_data(const struct simdisk *d, const char *name, uint64_t *size);
/* Overwrites bytes of a file in place, durable at once (to plant corruption). */
bool simdisk_poke(struct simdisk *d, const char *name, uint64_t offset, const void *data,
		  uint32_t size);

#endif
