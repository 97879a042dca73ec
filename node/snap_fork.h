/*
 * Snapshots off the node's lcore: a job (serialize the state machine, write
 * and sync the snapshot file) runs in a forked child process. fork() gives
 * the child a copy-on-write image of the node at that instant, so the child
 * serializes exactly the state at the snapshot's index while the lcore goes
 * on applying commands; the kernel copies a page only when the lcore first
 * writes to it. What the child must hand back (the snapshot bytes raft
 * sends to followers, the size, the result) goes into MAP_SHARED memory
 * from snap_shared_alloc(). docs/STORAGE.md, "Snapshots off the lcore".
 *
 * The lcore blocks only for fork() itself (copying page tables: about
 * proportional to the node's resident memory). One job at a time; poll
 * with snap_fork_done(). Not for the simulated disk (its state lives in
 * this process's memory: the child's writes would be lost): the node runs
 * the job inline there.
 */
#ifndef HASP_NODE_SNAP_FORK_H
#define HASP_NODE_SNAP_FORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Written by the child, read by the parent once the child exited. */
struct snap_fork_ctl {
	int32_t rc;
	uint32_t reserved;
	uint64_t written;
};

struct snap_fork {
	pid_t pid;                 /* the running child, 0 if none */
	struct snap_fork_ctl *ctl; /* MAP_SHARED */
	uint64_t fork_ns_last;     /* how long the last fork() blocked the caller */
	uint64_t fork_ns_max;
	uint64_t forks;
	uint64_t fork_failures;    /* fork() refused (EAGAIN, ENOMEM): the caller ran inline */
	uint64_t children_died;    /* a child ended by a signal or without its result */
};

/* The job, run in the child: returns 0 or a negative hasp error, and sets
 * *written (bytes it produced). It must not allocate (another thread may
 * have held an allocator lock at fork()) and must leave shared state alone
 * except memory from snap_shared_alloc(). */
typedef int (*snap_fork_job)(void *arg, uint64_t *written);

int snap_fork_init(struct snap_fork *f) __attribute__((warn_unused_result));
/* Waits for a running child (blocking), then unmaps. */
void snap_fork_deinit(struct snap_fork *f);

/* Keeps the pages wholly inside [p, p + size) out of every child
 * (MADV_DONTFORK), or with `exclude` false lets them in again. For large
 * regions the job never reads (the raft log window): fork() then neither
 * copies their page tables nor write-protects them, so it blocks the
 * caller for less and the lcore takes no copy-on-write fault on its next
 * write to each page. Let a region in again before it is freed: the
 * allocator may reuse its pages for memory the job does read. */
void snap_fork_exclude(void *p, size_t size, bool exclude);

/* Starts job(arg) in a child. Returns 0, or -HASP_EBUSY (one is running),
 * or -HASP_ENOMEM (fork() failed: run the job inline instead). */
int snap_fork_start(struct snap_fork *f, snap_fork_job job, void *arg)
	__attribute__((warn_unused_result));

/* True once the running child has ended (wait: block until it has), with
 * its result in *rc and *written; false while it runs or if none runs. A
 * child that died without a result reports -HASP_EIO. */
bool snap_fork_done(struct snap_fork *f, bool wait, int *rc, uint64_t *written);

static inline bool snap_fork_running(const struct snap_fork *f) { return f->pid > 0; }

/* Zeroed memory shared with children (mmap MAP_SHARED | MAP_ANONYMOUS),
 * reserved lazily by the kernel; NULL on failure. */
void *snap_shared_alloc(size_t size);
void snap_shared_free(void *p, size_t size);

#endif
