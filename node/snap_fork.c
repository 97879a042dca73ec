/*
 * Snapshot jobs in a forked child (see snap_fork.h).
 */
#include "node/snap_fork.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "hasp/errors.h"

LOG_TOPIC_DECLARE(node);

void *snap_shared_alloc(size_t size)
{
	void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void snap_shared_free(void *p, size_t size)
{
	if (p != NULL)
		(void)munmap(p, size ? size : 1);
}

void snap_fork_exclude(void *p, size_t size, bool exclude)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t end = ((uintptr_t)p + size) & ~(page - 1);

	if (p == NULL || end <= start)
		return;
	/* Best effort: a region that stays in costs time, not correctness. */
	(void)madvise((void *)start, end - start, exclude ? MADV_DONTFORK : MADV_DOFORK);
}

int snap_fork_init(struct snap_fork *f)
{
	memset(f, 0, sizeof(*f));
	f->ctl = snap_shared_alloc(sizeof(*f->ctl));
	return f->ctl == NULL ? -HASP_ENOMEM : 0;
}

void snap_fork_deinit(struct snap_fork *f)
{
	int rc;
	uint64_t written;

	if (snap_fork_running(f))
		(void)snap_fork_done(f, true, &rc, &written);
	snap_shared_free(f->ctl, sizeof(*f->ctl));
	f->ctl = NULL;
}

int snap_fork_start(struct snap_fork *f, snap_fork_job job, void *arg)
{
	sigset_t all, old;
	pid_t parent = getpid();

	if (snap_fork_running(f))
		return -HASP_EBUSY;
	f->ctl->rc = -HASP_EIO; /* until the child says otherwise */
	f->ctl->written = 0;
	/* The child takes no signal handler of the parent's (stats dumps,
	 * stop flags): signals stay blocked in it; SIGKILL still works. */
	sigfillset(&all);
	(void)pthread_sigmask(SIG_BLOCK, &all, &old);
	uint64_t t0 = clock_monotonic_ns();
	pid_t pid = fork();
	if (pid == 0) {
		/* The child: one thread, a copy-on-write image of the node. It
		 * dies with the parent rather than write on behind a restart. */
		uint64_t written = 0;
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(2);
		int rc = job(arg, &written);
		f->ctl->written = written;
		f->ctl->rc = rc;
		_exit(0);
	}
	uint64_t took = clock_monotonic_ns() - t0;
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		f->fork_failures++;
		LOG_WARN(node, "snapshot: fork failed err=%d (%s); saving on the lcore instead", errno,
			 strerror(errno));
		return -HASP_ENOMEM;
	}
	f->pid = pid;
	f->forks++;
	f->fork_ns_last = took;
	if (took > f->fork_ns_max)
		f->fork_ns_max = took;
	return 0;
}

bool snap_fork_done(struct snap_fork *f, bool wait, int *rc, uint64_t *written)
{
	int status = 0;
	pid_t got;

	if (!snap_fork_running(f))
		return false;
	do
		got = waitpid(f->pid, &status, wait ? 0 : WNOHANG);
	while (got < 0 && errno == EINTR);
	if (got == 0)
		return false;
	f->pid = 0;
	if (got < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		f->children_died++;
		LOG_WARN(node, "snapshot: writer process ended without a result status=%d", status);
		*rc = -HASP_EIO;
		*written = 0;
		return true;
	}
	*rc = f->ctl->rc;
	*written = f->ctl->written;
	return true;
}
