/*
 * What a dataplane lcore does when there is no traffic.
 *
 * POLL   busy-polls forever: real hardware with dedicated cores.
 * HYBRID spin `spin_max` empty iterations (default 1: wait after the first
 *        empty one), then ppoll() the port's fds (tap
 *        queues, AF_PACKET sockets), the node's wake fds (an io_uring
 *        eventfd) and our own wake eventfd until the next timer deadline.
 *        Several nodes then share two cores at well under 1 % idle CPU.
 * SLEEP  spin, then pause with a doubling timeout up to sleep_max_ns (still
 *        ended early by idle_wake()): the fallback when no fd can report
 *        readiness (net_memif, NICs).
 *
 * Why ppoll and not the O_ASYNC + sigtimedwait recipe of docs/ENVIRONMENT.md:
 * eventfds and io_uring ring fds have no fasync support, so O_ASYNC on the
 * node's io_uring eventfd never raises a signal (measured on this kernel)
 * and a completion would wait for the timer. ppoll is level-triggered, so
 * it also needs no "arm, then poll once more" step: a frame that arrived
 * after the last RX burst leaves its fd readable and ppoll returns at once.
 * (The tap PMD's own epoll rx-interrupt mode, which lost wakeups, is not
 * used.) Idle CPU and wake latency matched the O_ASYNC variant
 * (docs/DATAPLANE.md).
 *
 * idle_signals_prepare() must run before rte_eal_init(): it sets every
 * real-time signal to SIG_IGN so net_tap finds no free signal for its
 * per-packet RX trigger (which halves throughput and interrupts every wait
 * with EINTR); rx_burst then always reads.
 */
#ifndef HASP_DATAPLANE_IDLE_H
#define HASP_DATAPLANE_IDLE_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "dataplane/dp_stats.h"

enum idle_mode {
	IDLE_POLL = 0,
	IDLE_HYBRID,
	IDLE_SLEEP,
};

#define IDLE_FDS_MAX 16u
/* One empty iteration, then wait. Each iteration on net_tap is a readv()
 * system call that costs about 2 us of CPU on this VM whether or not a frame
 * is there, so a spin buys nothing a ppoll() does not, and 256 of them after
 * every burst were most of a node's CPU (docs/PERFORMANCE.md, "Cost per lock
 * cycle": 5x the cycles and a sixth of the CPU per cycle at 16 clients).
 * Dedicated cores use IDLE_POLL instead. */
#define IDLE_SPIN_DEFAULT 1u
/* Longest single wait: bounds how stale a forgotten deadline can get. */
#define IDLE_WAIT_MAX_NS 100000000ull /* 100 ms */
#define IDLE_SLEEP_MAX_NS 500000ull   /* 0.5 ms */

struct idle {
	enum idle_mode mode;
	uint32_t spin_max;
	uint32_t empty_polls;
	uint64_t sleep_ns;    /* SLEEP: current pause */
	int wake_fd;          /* our eventfd: idle_wake() */
	uint32_t fd_count;    /* fds[0] is wake_fd; port and node fds follow */
	struct pollfd fds[IDLE_FDS_MAX + 1];
};

/* See the file comment. Returns 0 or -HASP_ESYS. Call once per process,
 * before rte_eal_init(). */
int idle_signals_prepare(void) __attribute__((warn_unused_result));

/* Prepares `idle` (creates its wake eventfd). Returns 0 or -HASP_ESYS. */
int idle_init(struct idle *idle, enum idle_mode mode, uint32_t spin_max)
	__attribute__((warn_unused_result));
void idle_deinit(struct idle *idle);

/* Switches mode (HYBRID without port fds falls back to SLEEP), keeping
 * the wake eventfd and the fds added so far. */
void idle_set_mode(struct idle *idle, enum idle_mode mode);

/* Adds an fd whose readability must end a HYBRID wait. -HASP_EFULL when
 * full; adding an fd twice is a no-op. */
int idle_add_fd(struct idle *idle, int fd) __attribute__((warn_unused_result));

/* Adds every /dev/net/tun fd and AF_PACKET socket open in the process (the
 * fds behind net_tap and net_af_packet queues). Returns how many were found,
 * or a negative -HASP_E* code. */
int idle_add_port_fds(struct idle *idle) __attribute__((warn_unused_result));

/* Records one loop iteration. Returns true when the lcore should now sleep
 * (enough consecutive empty iterations). */
bool idle_note(struct idle *idle, bool did_work);

/* Sleeps until an fd is readable, idle_wake(), or `deadline_ns`
 * (CLOCK_MONOTONIC; capped at now + IDLE_WAIT_MAX_NS). Counts into `stats`. */
void idle_wait(struct idle *idle, uint64_t now_ns, uint64_t deadline_ns, struct dp_stats *stats);

/* Ends the current or next wait of `idle`. Async-signal-safe, any thread. */
void idle_wake(struct idle *idle);

#endif
