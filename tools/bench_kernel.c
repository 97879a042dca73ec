/*
 * hasp-bench over the kernel: one non-blocking UDP socket, requests sent
 * with sendmmsg and replies read with recvmmsg in batches of cfg->batch,
 * and ppoll until the engine's next timer when there is nothing to do
 * (tools/bench_engine.h, bench_run).
 */
#include "tools/bench_engine.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/clock.h"
#include "common/limits.h"
#include "hasp/errors.h"

#define RX_CALLS_PER_ITER 16u

struct kernel_net {
	int fd;
	uint32_t batch;
	struct bench_result *res;
	struct mmsghdr msgs[BENCH_BATCH_MAX];
	struct iovec iov[BENCH_BATCH_MAX];
	struct sockaddr_in from[BENCH_BATCH_MAX];
	uint8_t buf[BENCH_BATCH_MAX][HASP_DATAGRAM_SIZE_MAX + 1];
};

static int kernel_send(void *arg, const struct bench_tx *tx, uint32_t count)
{
	struct kernel_net *k = arg;

	HASP_ASSERT(count > 0 && count <= BENCH_BATCH_MAX);
	for (uint32_t i = 0; i < count; i++) {
		k->iov[i].iov_base = (void *)tx[i].data;
		k->iov[i].iov_len = tx[i].size;
		memset(&k->msgs[i].msg_hdr, 0, sizeof(k->msgs[i].msg_hdr));
		k->msgs[i].msg_hdr.msg_iov = &k->iov[i];
		k->msgs[i].msg_hdr.msg_iovlen = 1;
		k->msgs[i].msg_hdr.msg_name = (void *)tx[i].to;
		k->msgs[i].msg_hdr.msg_namelen = sizeof(*tx[i].to);
	}
	int sent = sendmmsg(k->fd, k->msgs, count, MSG_DONTWAIT);
	if (sent >= 0)
		return sent;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ENOBUFS)
		return 0;
	return -1; /* e.g. an ICMP error reported on this socket */
}

/* Reads what the socket holds, at most RX_CALLS_PER_ITER batches, so
 * sends and timers are not starved. Returns the datagrams read. */
static uint32_t kernel_drain(struct kernel_net *k, struct bench_engine *e)
{
	uint32_t total = 0;

	for (uint32_t call = 0; call < RX_CALLS_PER_ITER; call++) {
		for (uint32_t i = 0; i < k->batch; i++) {
			k->iov[i].iov_base = k->buf[i];
			k->iov[i].iov_len = sizeof(k->buf[i]);
			memset(&k->msgs[i].msg_hdr, 0, sizeof(k->msgs[i].msg_hdr));
			k->msgs[i].msg_hdr.msg_iov = &k->iov[i];
			k->msgs[i].msg_hdr.msg_iovlen = 1;
			k->msgs[i].msg_hdr.msg_name = &k->from[i];
			k->msgs[i].msg_hdr.msg_namelen = sizeof(k->from[i]);
		}
		int got = recvmmsg(k->fd, k->msgs, k->batch, MSG_DONTWAIT, NULL);
		if (got <= 0)
			break;
		k->res->rx_calls++;
		uint64_t now = clock_monotonic_ns();
		for (int i = 0; i < got; i++)
			bench_engine_receive(e, now, k->buf[i], k->msgs[i].msg_len);
		total += (uint32_t)got;
		if ((uint32_t)got < k->batch)
			break;
	}
	return total;
}

static void kernel_wait(struct kernel_net *k, uint64_t until_ns)
{
	struct pollfd pfd = { .fd = k->fd, .events = POLLIN };
	uint64_t now = clock_monotonic_ns();
	uint64_t wait_ns = until_ns > now ? until_ns - now : 0;
	struct timespec ts = { .tv_sec = (time_t)(wait_ns / 1000000000u),
			       .tv_nsec = (long)(wait_ns % 1000000000u) };

	(void)ppoll(&pfd, 1, &ts, NULL);
}

/* One line of a long run on a terminal: that second's completed operations,
 * the p99 of every operation so far, and the errors so far. */
void bench_progress_line(FILE *f, const struct bench_result *res, uint32_t tick, uint64_t ops)
{
	const struct bench_errors *er = &res->err;
	uint64_t errors = er->timeouts + er->malformed + er->wait_timeouts + er->notify_missing +
			  er->arrivals_dropped + er->send_errors;
	fprintf(f, "hasp-bench: %us ops/s=%" PRIu64 " p99_us=%.0f errors=%" PRIu64 "\n", tick, ops,
		(double)bench_hist_quantile(res->lat[BENCH_LAT_OP], 0.99) / 1000.0, errors);
	fflush(f);
}

int bench_run(const struct bench_config *cfg, struct bench_result *res)
{
	struct bench_engine *e = NULL;
	int rc = bench_engine_create(&e, cfg, res, clock_monotonic_ns());

	if (rc != 0)
		return rc;
	/* Large buffers: on the heap, so several runs may go on at once in
	 * different threads (hasp-bench --threads). */
	struct kernel_net *kp = hasp_calloc(1, sizeof(*kp));
	if (kp == NULL) {
		bench_engine_destroy(e);
		return -HASP_ENOMEM;
	}
	kp->batch = cfg->batch;
	kp->res = res;
	kp->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (kp->fd < 0) {
		bench_engine_destroy(e);
		hasp_free(kp);
		return -HASP_ESYS;
	}
	/* Room for a burst of replies to every session at once. */
	int buf_size = 8 << 20;
	(void)setsockopt(kp->fd, SOL_SOCKET, SO_RCVBUF, &buf_size, sizeof(buf_size));
	(void)setsockopt(kp->fd, SOL_SOCKET, SO_SNDBUF, &buf_size, sizeof(buf_size));
	struct sockaddr_in any = { .sin_family = AF_INET };
	if (bind(kp->fd, (struct sockaddr *)&any, sizeof(any)) != 0) {
		close(kp->fd);
		bench_engine_destroy(e);
		hasp_free(kp);
		return -HASP_ESYS;
	}
	uint64_t progress_ns = clock_monotonic_ns() + 1000000000ull, progress_ops = 0;
	uint32_t progress_tick = 0;
	while (true) {
		uint64_t wake = UINT64_MAX;
		uint64_t now = clock_monotonic_ns();
		if (bench_engine_step(e, now, &wake))
			break;
		if (cfg->progress != NULL && now >= progress_ns) {
			bench_progress_line(cfg->progress, res, ++progress_tick, res->ops - progress_ops);
			progress_ops = res->ops;
			progress_ns += 1000000000ull;
		}
		if (cfg->progress != NULL && wake > progress_ns)
			wake = progress_ns;
		bench_engine_flush(e, kernel_send, kp);
		uint32_t got = kernel_drain(kp, e);
		if (got == 0 && !bench_engine_sends_pending(e))
			kernel_wait(kp, wake);
	}
	rc = bench_engine_failed(e) ? -HASP_ETIMEDOUT : 0;
	close(kp->fd);
	bench_engine_destroy(e);
	hasp_free(kp);
	return rc;
}
