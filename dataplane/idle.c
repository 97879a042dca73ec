/*
 * Adaptive idle for dataplane lcores (see idle.h for the strategy and its
 * measurements in ENVIRONMENT.md and docs/DATAPLANE.md).
 */
#include "dataplane/idle.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/assert.h"
#include "hasp/errors.h"

#ifndef AF_PACKET
#define AF_PACKET 17
#endif

/* SIGRTMIN is a function call in glibc (it reserves the first few for
 * itself); our signal is the last one, which nothing else in the process
 * claims once all are ignored. */
int idle_wake_signal(void)
{
	return SIGRTMAX;
}

int idle_signals_prepare(void)
{
	sigset_t set;
	struct sigaction ign;

	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigemptyset(&set);
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++) {
		/* SIG_IGN: net_tap picks the first RT signal still at SIG_DFL
		 * for its RX trigger; with none free, rx_burst always reads. */
		if (sigaction(s, &ign, NULL) != 0)
			return -HASP_ESYS;
		sigaddset(&set, s);
	}
	/* An overflowing RT signal queue falls back to SIGIO, whose default
	 * action would kill the process. */
	if (sigaction(SIGIO, &ign, NULL) != 0)
		return -HASP_ESYS;
	/* Blocked signals are queued even while ignored, so sigtimedwait()
	 * still receives them; threads created later inherit this mask. */
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
		return -HASP_ESYS;
	return 0;
}

void idle_init(struct idle *idle, enum idle_mode mode, uint32_t spin_max)
{
	HASP_ASSERT(idle != NULL);
	HASP_ASSERT(mode == IDLE_POLL || mode == IDLE_HYBRID || mode == IDLE_SLEEP);
	memset(idle, 0, sizeof(*idle));
	idle->mode = mode;
	idle->spin_max = spin_max > 0 ? spin_max : IDLE_SPIN_DEFAULT;
	idle->signal = idle_wake_signal();
	idle->tid = (pid_t)syscall(SYS_gettid);
	idle->sleep_ns = 1000;
}

int idle_add_fd(struct idle *idle, int fd)
{
	HASP_ASSERT(idle != NULL && fd >= 0);
	for (uint32_t i = 0; i < idle->fd_count; i++)
		if (idle->fds[i] == fd)
			return 0;
	if (idle->fd_count == IDLE_FDS_MAX)
		return -HASP_EFULL;
	idle->fds[idle->fd_count++] = fd;
	return 0;
}

static bool idle_fd_is_port(int fd)
{
	char link[64], target[64];
	int domain;
	socklen_t len = sizeof(domain);

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	if (strcmp(target, "/dev/net/tun") == 0)
		return true;
	return strncmp(target, "socket:", 7) == 0 &&
	       getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_PACKET;
}

int idle_add_port_fds(struct idle *idle)
{
	int found = 0;

	HASP_ASSERT(idle != NULL);
	DIR *dir = opendir("/proc/self/fd");
	if (dir == NULL)
		return -HASP_ESYS;
	struct dirent *ent;
	while ((ent = readdir(dir)) != NULL) {
		if (ent->d_name[0] < '0' || ent->d_name[0] > '9')
			continue;
		int fd = atoi(ent->d_name);
		if (fd == dirfd(dir) || !idle_fd_is_port(fd))
			continue;
		if (idle_add_fd(idle, fd) != 0) {
			closedir(dir);
			return -HASP_EFULL;
		}
		found++;
	}
	closedir(dir);
	return found;
}

bool idle_note(struct idle *idle, bool did_work)
{
	if (did_work) {
		idle->empty_polls = 0;
		idle->sleep_ns = 1000;
		return false;
	}
	if (idle->mode == IDLE_POLL)
		return false;
	return ++idle->empty_polls >= idle->spin_max;
}

static void idle_set_async(struct idle *idle, bool on)
{
	struct f_owner_ex owner = { .type = F_OWNER_TID, .pid = idle->tid };

	for (uint32_t i = 0; i < idle->fd_count; i++) {
		int fd = idle->fds[i];
		int flags = fcntl(fd, F_GETFL);
		if (flags < 0)
			continue;
		if (on) {
			/* Signal this thread (not the process) with our RT
			 * signal, which carries the fd and queues. */
			(void)fcntl(fd, F_SETSIG, idle->signal);
			(void)fcntl(fd, F_SETOWN_EX, &owner);
			(void)fcntl(fd, F_SETFL, flags | O_ASYNC);
		} else {
			(void)fcntl(fd, F_SETFL, flags & ~O_ASYNC);
		}
	}
	idle->armed = on;
}

void idle_arm(struct idle *idle)
{
	HASP_ASSERT(idle != NULL);
	if (idle->mode == IDLE_HYBRID && idle->fd_count > 0)
		idle_set_async(idle, true);
}

void idle_cancel(struct idle *idle)
{
	HASP_ASSERT(idle != NULL);
	if (idle->armed)
		idle_set_async(idle, false);
	idle->empty_polls = 0;
}

/* Discards signals queued while we were awake (readiness we already served
 * by polling), so the next wait does not return at once for stale news. */
static void idle_drain_signals(const sigset_t *set)
{
	struct timespec zero = { 0, 0 };
	while (sigtimedwait(set, NULL, &zero) > 0) {
	}
}

void idle_wait(struct idle *idle, uint64_t now_ns, uint64_t deadline_ns, struct dp_stats *stats)
{
	HASP_ASSERT(idle != NULL && stats != NULL);
	HASP_ASSERT(idle->mode != IDLE_POLL);
	uint64_t wait_ns = deadline_ns > now_ns ? deadline_ns - now_ns : 0;
	if (wait_ns > IDLE_WAIT_MAX_NS)
		wait_ns = IDLE_WAIT_MAX_NS;
	stats->idle_sleeps++;
	if (idle->mode == IDLE_HYBRID && idle->armed) {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, idle->signal);
		struct timespec ts = { (time_t)(wait_ns / 1000000000u), (long)(wait_ns % 1000000000u) };
		int sig = sigtimedwait(&set, NULL, &ts);
		idle_set_async(idle, false);
		idle_drain_signals(&set);
		if (sig > 0)
			stats->idle_wake_signal++;
		else
			stats->idle_wake_timeout++;
	} else {
		/* SLEEP (or HYBRID without fds): doubling pause, capped. */
		uint64_t pause = idle->sleep_ns < wait_ns ? idle->sleep_ns : wait_ns;
		struct timespec ts = { 0, (long)pause };
		nanosleep(&ts, NULL);
		if (idle->sleep_ns < IDLE_SLEEP_MAX_NS)
			idle->sleep_ns *= 2;
		stats->idle_wake_timeout++;
		/* Stay in the sleeping phase until work shows up: spinning
		 * again after every pause would cost the CPU we are saving. */
		HASP_ASSERT(!idle->armed);
		return;
	}
	idle->empty_polls = 0;
	HASP_ASSERT(!idle->armed);
}

void idle_wake_thread(pid_t tid)
{
	(void)syscall(SYS_tgkill, getpid(), tid, idle_wake_signal());
}
