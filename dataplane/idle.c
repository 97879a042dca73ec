/*
 * Adaptive idle for dataplane lcores (see idle.h for the strategy and why
 * it waits with ppoll; measurements in docs/DATAPLANE.md).
 */
#include "dataplane/idle.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/assert.h"
#include "hasp/errors.h"

#ifndef AF_PACKET
#define AF_PACKET 17
#endif

int idle_signals_prepare(void)
{
	struct sigaction ign;

	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++) {
		/* net_tap takes the first RT signal still at SIG_DFL for its
		 * RX trigger; with none free, rx_burst always reads. */
		if (sigaction(s, &ign, NULL) != 0)
			return -HASP_ESYS;
	}
	return 0;
}

int idle_init(struct idle *idle, enum idle_mode mode, uint32_t spin_max)
{
	HASP_ASSERT(idle != NULL);
	HASP_ASSERT(mode == IDLE_POLL || mode == IDLE_HYBRID || mode == IDLE_SLEEP);
	memset(idle, 0, sizeof(*idle));
	idle->spin_max = spin_max > 0 ? spin_max : IDLE_SPIN_DEFAULT;
	idle->sleep_ns = 1000;
	idle->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (idle->wake_fd < 0)
		return -HASP_ESYS;
	idle->fds[0] = (struct pollfd){ .fd = idle->wake_fd, .events = POLLIN };
	idle->fd_count = 1;
	idle->mode = mode;
	return 0;
}

void idle_deinit(struct idle *idle)
{
	HASP_ASSERT(idle != NULL);
	if (idle->wake_fd >= 0)
		close(idle->wake_fd);
	idle->wake_fd = -1;
	idle->fd_count = 0;
}

void idle_set_mode(struct idle *idle, enum idle_mode mode)
{
	HASP_ASSERT(idle != NULL && idle->wake_fd >= 0);
	HASP_ASSERT(mode == IDLE_POLL || mode == IDLE_HYBRID || mode == IDLE_SLEEP);
	idle->mode = mode;
	idle->empty_polls = 0;
	idle->sleep_ns = 1000;
}

int idle_add_fd(struct idle *idle, int fd)
{
	HASP_ASSERT(idle != NULL && fd >= 0);
	for (uint32_t i = 0; i < idle->fd_count; i++)
		if (idle->fds[i].fd == fd)
			return 0;
	if (idle->fd_count == IDLE_FDS_MAX + 1)
		return -HASP_EFULL;
	idle->fds[idle->fd_count++] = (struct pollfd){ .fd = fd, .events = POLLIN };
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
	if (idle->empty_polls < idle->spin_max)
		idle->empty_polls++;
	/* Once spun out, stay in the sleeping phase until work shows up:
	 * spinning again after every wait would cost the CPU we save. */
	return idle->empty_polls >= idle->spin_max;
}

/* Consumes pending wakes so the next wait is not ended by stale news. */
static void idle_drain_wake(struct idle *idle)
{
	uint64_t count;
	while (read(idle->wake_fd, &count, sizeof(count)) == (ssize_t)sizeof(count)) {
	}
}

void idle_wait(struct idle *idle, uint64_t now_ns, uint64_t deadline_ns, struct dp_stats *stats)
{
	HASP_ASSERT(idle != NULL && stats != NULL);
	HASP_ASSERT(idle->mode != IDLE_POLL && idle->wake_fd >= 0);
	uint64_t wait_ns = deadline_ns > now_ns ? deadline_ns - now_ns : 0;
	if (wait_ns > IDLE_WAIT_MAX_NS)
		wait_ns = IDLE_WAIT_MAX_NS;
	/* HYBRID waits on every fd; SLEEP only on its wake fd, for a pause
	 * that doubles while nothing happens. */
	nfds_t nfds = idle->fd_count;
	if (idle->mode == IDLE_SLEEP) {
		nfds = 1;
		if (idle->sleep_ns < wait_ns)
			wait_ns = idle->sleep_ns;
		if (idle->sleep_ns < IDLE_SLEEP_MAX_NS)
			idle->sleep_ns *= 2;
	}
	struct timespec ts = { (time_t)(wait_ns / 1000000000u), (long)(wait_ns % 1000000000u) };
	stats->idle_sleeps++;
	int n = ppoll(idle->fds, nfds, &ts, NULL);
	if (n > 0) {
		stats->idle_wake_ready++;
		if (idle->fds[0].revents != 0)
			idle_drain_wake(idle);
	} else {
		/* 0: the deadline; -1 EINTR: a signal the node handles. */
		stats->idle_wake_timeout++;
	}
}

void idle_wake(struct idle *idle)
{
	uint64_t one = 1;
	if (idle->wake_fd >= 0)
		(void)!write(idle->wake_fd, &one, sizeof(one));
}
