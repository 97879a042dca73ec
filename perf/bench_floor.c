/*
 * bench_floor: the physical floor of each cost in a lock cycle on this
 * machine (docs/PERFORMANCE.md, "Cost per lock cycle"): the price of one
 * system call of each kind a node makes, timed over many repetitions.
 *
 *   unshare -n build/perf/perf/bench_floor [iterations] [dir]
 *
 * As root, in a network namespace of its own (unshare -n): it makes a tap
 * device there. Cases:
 *   tap_read_empty   readv() of a non-blocking tap with nothing queued
 *                    (what net_tap's rx_burst costs on an empty poll)
 *   tap_write        writev() of one 128-byte UDP frame into the tap (net_tap's
 *                    TX of one datagram; the kernel routes and drops it)
 *   ppoll_ready      ppoll() of 3 fds, one readable: an idle wait that returns
 *   eventfd_write    write() to an eventfd (a cross-thread wake)
 *   clock_gettime    CLOCK_MONOTONIC (vDSO)
 *   uring_nop        io_uring_submit_and_wait() of one NOP (one io_uring_enter)
 *   pwrite_4k        pwrite() of one 4 KiB block to a file in `dir`
 *   fdatasync_4k     pwrite() of 4 KiB then fdatasync(): the WAL's floor per write
 *   dsync_4k_allocated  O_DIRECT pwritev2(RWF_DSYNC) of 4 KiB, each into the next
 *                    block of a file preallocated with fallocate (unwritten
 *                    extents: each sync also commits the journal's extent change)
 *   dsync_4k_zeroed  the same into a file written with zeros first (what the
 *                    WAL's segments are since segment_fill = zeros)
 * Prints one JSON object: per case, CPU ns and wall ns per operation (means).
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int tap_open(void)
{
	struct ifreq ifr;
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "floortap0");
	if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
		close(fd);
		return -1;
	}
	/* Up, so writes enter the stack as a node's replies do. */
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s >= 0) {
		if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
			ifr.ifr_flags |= IFF_UP;
			(void)ioctl(s, SIOCSIFFLAGS, &ifr);
		}
		close(s);
	}
	return fd;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time per operation (what the call costs this thread: a loaded machine
 * that preempts us does not inflate it), and wall time, which for
 * fdatasync is the wait for the disk. */
static uint64_t c0;

static void report(const char *name, uint64_t t0, uint64_t t1, unsigned long iters, int *first)
{
	printf("%s\"%s\":{\"cpu\":%.0f,\"wall\":%.0f}", *first ? "" : ",", name,
	       (double)(cpu_ns() - c0) / (double)iters, (double)(t1 - t0) / (double)iters);
	*first = 0;
}

int main(int argc, char **argv)
{
	unsigned long iters = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
	const char *dir = argc > 2 ? argv[2] : ".";
	int first = 1;
	uint64_t t0;

	if (iters == 0) {
		fprintf(stderr, "usage: bench_floor [iterations] [dir]\n");
		return 2;
	}
	int tap = tap_open();
	if (tap < 0) {
		fprintf(stderr, "bench_floor: no tap (%s): run as root under unshare -n\n", strerror(errno));
		return 1;
	}
	printf("{\"iterations\":%lu,\"ns_per_op\":{", iters);

	uint8_t frame[128];
	memset(frame, 0, sizeof(frame));
	struct iovec iov = { frame, sizeof(frame) };
	c0 = cpu_ns();
	t0 = now_ns();
	unsigned long got = 0; /* the kernel's own frames (IPv6 MLD, ...) */
	for (unsigned long i = 0; i < iters; i++)
		got += readv(tap, &iov, 1) >= 0;
	report("tap_read_empty", t0, now_ns(), iters, &first);

	/* An Ethernet + IPv4 + UDP frame to an address nobody has. */
	memset(frame, 0xff, 6);
	frame[6] = 0x02;
	frame[12] = 0x08;
	frame[14] = 0x45;
	frame[16] = 0;
	frame[17] = 114;
	frame[22] = 64;
	frame[23] = 17;
	frame[26] = 10, frame[29] = 1;
	frame[30] = 10, frame[33] = 2;
	unsigned long sent = 0;
	c0 = cpu_ns();
	t0 = now_ns();
	for (unsigned long i = 0; i < iters; i++)
		sent += writev(tap, &iov, 1) == (ssize_t)sizeof(frame);
	report("tap_write", t0, now_ns(), iters, &first);

	int efd = eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC);
	int efd2 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	struct pollfd pfd[3] = { { efd2, POLLIN, 0 }, { tap, POLLIN, 0 }, { efd, POLLIN, 0 } };
	struct timespec zero = { 0, 0 };
	c0 = cpu_ns();
	t0 = now_ns();
	for (unsigned long i = 0; i < iters; i++)
		(void)ppoll(pfd, 3, &zero, NULL);
	report("ppoll_ready", t0, now_ns(), iters, &first);

	uint64_t one = 1, v;
	c0 = cpu_ns();
	t0 = now_ns();
	for (unsigned long i = 0; i < iters; i++) {
		(void)!write(efd2, &one, sizeof(one));
		if ((i & 1023) == 1023)
			(void)!read(efd2, &v, sizeof(v));
	}
	report("eventfd_write", t0, now_ns(), iters, &first);

	c0 = cpu_ns();
	t0 = now_ns();
	uint64_t sink = 0;
	for (unsigned long i = 0; i < iters; i++)
		sink += now_ns();
	report("clock_gettime", t0, now_ns(), iters, &first);

	struct io_uring ring;
	if (io_uring_queue_init(8, &ring, 0) == 0) {
		c0 = cpu_ns();
	t0 = now_ns();
		for (unsigned long i = 0; i < iters; i++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			struct io_uring_cqe *cqe;
			io_uring_prep_nop(sqe);
			if (io_uring_submit_and_wait(&ring, 1) < 0)
				break;
			if (io_uring_peek_cqe(&ring, &cqe) == 0)
				io_uring_cqe_seen(&ring, cqe);
		}
		report("uring_nop", t0, now_ns(), iters, &first);
		io_uring_queue_exit(&ring);
	}

	char path[4096];
	snprintf(path, sizeof(path), "%s/bench_floor.%d", dir, (int)getpid());
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		static uint8_t block[4096] __attribute__((aligned(4096)));
		unsigned long n = iters / 10 > 0 ? iters / 10 : 1;
		c0 = cpu_ns();
	t0 = now_ns();
		for (unsigned long i = 0; i < n; i++)
			(void)!pwrite(fd, block, sizeof(block), (off_t)((i % 256) * sizeof(block)));
		report("pwrite_4k", t0, now_ns(), n, &first);
		n = iters / 100 > 0 ? iters / 100 : 1;
		c0 = cpu_ns();
	t0 = now_ns();
		for (unsigned long i = 0; i < n; i++) {
			(void)!pwrite(fd, block, sizeof(block), (off_t)((i % 256) * sizeof(block)));
			(void)fdatasync(fd);
		}
		report("fdatasync_4k", t0, now_ns(), n, &first);
		close(fd);
		unlink(path);
	}
	/* RWF_DSYNC writes into new blocks: fallocated against zero-written. */
	for (int zeroed = 0; zeroed <= 1; zeroed++) {
		static uint8_t big[1 << 20] __attribute__((aligned(4096)));
		static uint8_t block[4096] __attribute__((aligned(4096)));
		unsigned long n = iters / 10 > 0 ? iters / 10 : 1;
		off_t size = (off_t)n * 4096;
		int ok = 1;

		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0600);
		if (fd < 0 || fallocate(fd, 0, 0, size) != 0)
			ok = 0;
		for (off_t at = 0; ok && zeroed && at < size; at += (off_t)sizeof(big)) {
			size_t len = size - at < (off_t)sizeof(big) ? (size_t)(size - at) : sizeof(big);
			ok = pwrite(fd, big, len, at) == (ssize_t)len;
		}
		if (ok && fsync(fd) != 0)
			ok = 0;
		memset(block, 0x5a, sizeof(block));
		struct iovec biov = { block, sizeof(block) };
		c0 = cpu_ns();
		t0 = now_ns();
		for (unsigned long i = 0; ok && i < n; i++)
			ok = pwritev2(fd, &biov, 1, (off_t)(i * sizeof(block)), RWF_DSYNC) ==
			     (ssize_t)sizeof(block);
		if (ok)
			report(zeroed ? "dsync_4k_zeroed" : "dsync_4k_allocated", t0, now_ns(), n, &first);
		else
			fprintf(stderr, "bench_floor: dsync case in %s: %s\n", dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(path);
	}
	printf("},\"tap_frames_read\":%lu,\"tap_frames_sent\":%lu,\"sink\":%llu}\n", got, sent, (unsigned long long)(sink & 1));
	close(efd);
	close(efd2);
	close(tap);
	return 0;
}
