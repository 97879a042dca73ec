/*
 * Snapshots off the node's lcore: a job (serialize a copy of the state
 * machine, write and sync the snapshot file) runs on a writer thread while
 * the lcore goes on applying commands. The lcore first copies the state
 * machine (locks_copy: about 1.5 ms for 100,000 locks, with no page fault
 * after the first snapshot), so the thread reads memory nobody writes
 * until the job is done. docs/STORAGE.md, "Snapshots off the lcore".
 *
 * Why not fork() any more: on this kind of VM fork() stopped the lcore for
 * 10-80 ms with a 100,000-lock state, and every page the lcore wrote while
 * the child lived took a copy-on-write fault of about 25 us
 * (docs/PERFORMANCE.md, "Snapshots off the lcore").
 *
 * The thread is made by snap_writer_spawn() after EAL init (no thread may
 * exist before it; haspd calls it before the lcore loop starts, so that the
 * lcore never allocates a stack), or else by the first job, and runs on
 * `cpus` minus the CPUs of the thread that makes it (the rule DPDK uses for
 * its control threads), or on `cpus` when that leaves none. One job at a time; poll with
 * snap_writer_done(). Not for the simulated disk (one thread by design):
 * the node runs the job inline there.
 */
#ifndef HASP_NODE_SNAP_WRITER_H
#define HASP_NODE_SNAP_WRITER_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The writer thread's name (top -H, /proc/PID/task/TID/comm). */
#define SNAP_WRITER_THREAD_NAME "hasp-snap"

/* The job, run on the writer thread: returns 0 or a negative hasp error
 * and sets *written (bytes it produced). It may read only what the lcore
 * leaves alone until snap_writer_done() reports it. */
typedef int (*snap_writer_job)(void *arg, uint64_t *written);

struct snap_writer {
	pthread_t thread;
	bool thread_made;
	bool running;            /* the lcore's view: a job started, not yet reported */
	cpu_set_t cpus;          /* where the thread may run (before the lcore's are taken out) */
	bool cpus_known;
	pthread_mutex_t mu;      /* guards the hand-over below */
	pthread_cond_t cv;
	snap_writer_job job;     /* set with `pending`, under mu */
	void *arg;
	bool pending;            /* a job handed over, not yet taken by the thread */
	bool stop;
	atomic_bool finished;    /* the thread's result is in rc/written (release) */
	int rc;
	uint64_t written;
	uint64_t jobs;
	uint64_t thread_failures; /* the thread could not be made: the caller ran inline */
};

/* Records `cpus` (NULL: inherit the lcore's) for the thread made later:
 * call it where the process's own affinity is still whole (before EAL
 * init). Makes no thread. Returns 0 or -HASP_ESYS. */
int snap_writer_init(struct snap_writer *w, const cpu_set_t *cpus)
	__attribute__((warn_unused_result));
/* Waits for a running job, then stops and joins the thread. */
void snap_writer_deinit(struct snap_writer *w);

/* Makes the thread now if it is not yet. 0 or -HASP_ENOMEM. */
int snap_writer_spawn(struct snap_writer *w) __attribute__((warn_unused_result));

/* Hands job(arg) to the thread (made now if it is not yet). Returns 0, or
 * -HASP_EBUSY (one is running), or -HASP_ENOMEM (no thread: run the job
 * inline instead). */
int snap_writer_start(struct snap_writer *w, snap_writer_job job, void *arg)
	__attribute__((warn_unused_result));

/* True once the running job has ended (wait: block until it has), with its
 * result in *rc and *written; false while it runs or if none runs. */
bool snap_writer_done(struct snap_writer *w, bool wait, int *rc, uint64_t *written);

static inline bool snap_writer_running(const struct snap_writer *w) { return w->running; }

/* Memory for snapshot buffers (mmap, reserved lazily by the kernel:
 * buffers are sized for the largest state); NULL on failure. */
void *snap_buf_alloc(size_t size);
void snap_buf_free(void *p, size_t size);

#endif
