/*
 * What a dataplane lcore does when there is no traffic.
 *
 * POLL   busy-polls forever: real hardware with dedicated cores.
 * HYBRID (ENVIRONMENT.md, "Idle strategy"): spin `spin_max` empty polls,
 *        then arm O_ASYNC with our own real-time signal on the port's fds
 *        (tap queues, AF_PACKET sockets) and on any wake fd the node added
 *        (an io_uring eventfd), poll once more to close the race with a
 *        packet that arrived before arming, and sigtimedwait() until the
 *        next timer deadline. Disarm on wake. Several nodes then share two
 *        cores at well under 1 % idle CPU with no lost wakeups.
 * SLEEP  spin, then nanosleep with a doubling pause up to sleep_max_ns: the
 *        fallback when no fd can signal readiness (net_memif, or an lcore
 *        other than the first when several share one port's fds).
 *
 * idle_signals_prepare() must run before rte_eal_init(): it sets every
 * real-time signal to SIG_IGN so net_tap finds no free signal for its
 * per-packet RX trigger (which halves throughput and interrupts every wait
 * with EINTR), and blocks them all in the calling thread so that every
 * thread the EAL creates inherits the mask; only sigtimedwait() receives
 * our signal then.
 */
#ifndef HASP_DATAPLANE_IDLE_H
#define HASP_DATAPLANE_IDLE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dataplane/dp_stats.h"

enum idle_mode {
	IDLE_POLL = 0,
	IDLE_HYBRID,
	IDLE_SLEEP,
};

#define IDLE_FDS_MAX 16u
#define IDLE_SPIN_DEFAULT 256u
/* Longest single wait: bounds how stale a forgotten deadline can get. */
#define IDLE_WAIT_MAX_NS 100000000ull /* 100 ms */
#define IDLE_SLEEP_MAX_NS 500000ull   /* 0.5 ms */

struct idle {
	enum idle_mode mode;
	uint32_t spin_max;
	uint32_t empty_polls;
	uint64_t sleep_ns;   /* SLEEP: current pause */
	int signal;          /* HYBRID: our real-time signal */
	pid_t tid;           /* thread that waits (F_SETOWN_EX target) */
	int fds[IDLE_FDS_MAX];
	uint32_t fd_count;
	bool armed;
};

/* See the file comment. Returns 0 or -HASP_ESYS. Call once per process,
 * before rte_eal_init() and before creating any thread. */
int idle_signals_prepare(void) __attribute__((warn_unused_result));

/* The real-time signal HYBRID waits on (also used to wake an lcore). */
int idle_wake_signal(void);

/* Prepares `idle` for the calling thread (its tid is the signal target).
 * HYBRID without fds falls back to SLEEP. */
void idle_init(struct idle *idle, enum idle_mode mode, uint32_t spin_max);

/* Adds an fd whose readability must wake the lcore. -HASP_EFULL when full. */
int idle_add_fd(struct idle *idle, int fd) __attribute__((warn_unused_result));

/* Adds every /dev/net/tun fd and AF_PACKET socket open in the process (the
 * fds behind net_tap and net_af_packet queues). Returns how many were found,
 * or a negative -HASP_E* code. */
int idle_add_port_fds(struct idle *idle) __attribute__((warn_unused_result));

/* Records one loop iteration. Returns true when the lcore should now try to
 * sleep (enough consecutive empty iterations). */
bool idle_note(struct idle *idle, bool did_work);

/* HYBRID: arms O_ASYNC on the fds; the caller then polls once more and calls
 * idle_wait() only if that poll was empty. No-op in other modes. */
void idle_arm(struct idle *idle);

/* Sleeps until a readiness signal, a wake (idle_wake_thread) or `deadline_ns`
 * (CLOCK_MONOTONIC; capped at now + IDLE_WAIT_MAX_NS), then disarms.
 * Counts into `stats`. */
void idle_wait(struct idle *idle, uint64_t now_ns, uint64_t deadline_ns, struct dp_stats *stats);

/* Resets the spin count without sleeping (the last poll found work). */
void idle_cancel(struct idle *idle);

/* Wakes thread `tid` from idle_wait(). Async-signal-safe. */
void idle_wake_thread(pid_t tid);

#endif
