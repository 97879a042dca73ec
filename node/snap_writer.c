/*
 * Snapshot jobs on a writer thread (see snap_writer.h).
 */
#include "node/snap_writer.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "hasp/errors.h"

LOG_TOPIC_DECLARE(node);

#define SNAP_WRITER_NICE 10

void *snap_buf_alloc(size_t size)
{
	void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void snap_buf_free(void *p, size_t size)
{
	if (p != NULL)
		(void)munmap(p, size ? size : 1);
}

int snap_writer_init(struct snap_writer *w, const cpu_set_t *cpus)
{
	memset(w, 0, sizeof(*w));
	atomic_init(&w->finished, false);
	if (cpus != NULL) {
		w->cpus = *cpus;
		w->cpus_known = true;
	}
	if (pthread_mutex_init(&w->mu, NULL) != 0)
		return -HASP_ESYS;
	if (pthread_cond_init(&w->cv, NULL) != 0) {
		pthread_mutex_destroy(&w->mu);
		return -HASP_ESYS;
	}
	return 0;
}

static void *writer_main(void *arg)
{
	struct snap_writer *w = arg;

	/* Below the lcores in the scheduler's eyes: where the writer shares a
	 * CPU with them, a snapshot takes longer rather than delaying
	 * requests. Best effort (nice is per thread on Linux). */
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), SNAP_WRITER_NICE);
	/* Its own name in top -H, ps -L and /proc/PID/task/TID/comm, beside
	 * the lcores' (best effort). */
	(void)pthread_setname_np(pthread_self(), SNAP_WRITER_THREAD_NAME);
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->pending && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->pending)
			break; /* stop, nothing handed over */
		w->pending = false;
		snap_writer_job job = w->job;
		void *job_arg = w->arg;
		pthread_mutex_unlock(&w->mu);

		uint64_t written = 0;
		int rc = job(job_arg, &written);

		pthread_mutex_lock(&w->mu);
		w->rc = rc;
		w->written = written;
		atomic_store_explicit(&w->finished, true, memory_order_release);
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* The writer's CPUs: those recorded at init minus the caller's (the
 * lcore's), or all recorded when that leaves none. */
static void writer_cpus(const struct snap_writer *w, cpu_set_t *out)
{
	cpu_set_t mine;

	*out = w->cpus;
	if (pthread_getaffinity_np(pthread_self(), sizeof(mine), &mine) != 0)
		return;
	cpu_set_t rest;
	CPU_ZERO(&rest);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &w->cpus) && !CPU_ISSET(c, &mine))
			CPU_SET(c, &rest);
	if (CPU_COUNT(&rest) > 0)
		*out = rest;
}

static int writer_make(struct snap_writer *w)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int rc;

	if (pthread_attr_init(&attr) != 0)
		return -HASP_ENOMEM;
	if (w->cpus_known) {
		cpu_set_t cpus;
		writer_cpus(w, &cpus);
		(void)pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
	}
	/* The thread takes no signal meant for the node's handlers. */
	sigfillset(&all);
	(void)pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&w->thread, &attr, writer_main, w);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		w->thread_failures++;
		LOG_WARN(node, "snapshot: no writer thread err=%d (%s); saving on the lcore instead",
			 rc, strerror(rc));
		return -HASP_ENOMEM;
	}
	w->thread_made = true;
	return 0;
}

int snap_writer_spawn(struct snap_writer *w)
{
	return w->thread_made ? 0 : writer_make(w);
}

int snap_writer_start(struct snap_writer *w, snap_writer_job job, void *arg)
{
	if (w->running)
		return -HASP_EBUSY;
	int rc = snap_writer_spawn(w);
	if (rc != 0)
		return rc;
	pthread_mutex_lock(&w->mu);
	atomic_store_explicit(&w->finished, false, memory_order_relaxed);
	w->job = job;
	w->arg = arg;
	w->pending = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	w->running = true;
	w->jobs++;
	return 0;
}

bool snap_writer_done(struct snap_writer *w, bool wait, int *rc, uint64_t *written)
{
	if (!w->running)
		return false;
	/* The poll from the lcore's loop takes no lock. */
	if (!wait && !atomic_load_explicit(&w->finished, memory_order_acquire))
		return false;
	pthread_mutex_lock(&w->mu);
	while (!atomic_load_explicit(&w->finished, memory_order_acquire))
		pthread_cond_wait(&w->cv, &w->mu);
	*rc = w->rc;
	*written = w->written;
	pthread_mutex_unlock(&w->mu);
	w->running = false;
	return true;
}

void snap_writer_deinit(struct snap_writer *w)
{
	int rc;
	uint64_t written;

	(void)snap_writer_done(w, true, &rc, &written);
	if (w->thread_made) {
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->thread, NULL);
		w->thread_made = false;
	}
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
}
