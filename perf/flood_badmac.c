/*
 * flood_badmac: a cheap, rate-limited bad-MAC flood for the measurement of
 * docs/SECURITY.md section 6 (driven by perf/flood_p99). Not a test.
 *
 *   flood_badmac ADDR:PORT --rate N --seconds S --count N [--batch B] [--seed X]
 *
 * Sends well-formed wire v2 ACQUIREs (hasp_wire_encode, so the node decodes
 * them as it would a client's) with random session ids and random tags:
 * none can verify, so the node must drop every one unanswered
 * (client_auth_unknown, or client_auth_bad for an id that happens to be
 * live). A pool of 1024 datagrams is built once; the send loop only hands
 * batches of B (default 32) to sendmmsg(2) and sleeps until the next
 * batch is due (absolute CLOCK_MONOTONIC deadlines), so the flooder costs
 * the kernel's UDP send path and little else, and the rate is held to N
 * datagrams/s however fast the machine is.
 *
 * Bounded: it stops after S seconds (at most 600) or N datagrams (at most
 * 100,000,000), whichever comes first, and on SIGINT/SIGTERM. It prints
 * one JSON line: datagrams sent, send errors, elapsed seconds, achieved
 * rate, and the CPU seconds (user, system) the flooder itself used, from
 * getrusage(2), so a run can show the flood did not just steal a core.
 */
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/prng.h"
#include "common/version.h"
#include "hasp/types.h"
#include "hasp/wire.h"

#define POOL 1024u
#define BATCH_MAX 256u
#define SECONDS_MAX 600.0
#define COUNT_MAX 100000000ull
#define RATE_MAX 2000000.0

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: flood_badmac ADDR:PORT --rate N --seconds S --count N [--batch B] [--seed X]\n"
		     "  ADDR:PORT    an IPv4 node client address, e.g. 10.77.0.11:7000\n"
		     "  --rate N     datagrams per second (1..%.0f)\n"
		     "  --seconds S  stop after S seconds (at most %.0f)\n"
		     "  --count N    stop after N datagrams (at most %llu)\n"
		     "  --batch B    datagrams per sendmmsg (1..%u, default 32)\n"
		     "  --seed X     seed of the random session ids and tags (default 1)\n"
		     "Prints one JSON line: sent, errors, elapsed_s, rate, cpu_user_s, cpu_sys_s.\n",
		RATE_MAX, SECONDS_MAX, COUNT_MAX, BATCH_MAX);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static int parse_addr(const char *arg, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(arg, ':');
	if (colon == NULL || (size_t)(colon - arg) >= sizeof(host))
		return -1;
	memcpy(host, arg, (size_t)(colon - arg));
	host[colon - arg] = '\0';
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end != '\0' || port < 1 || port > 65535)
		return -1;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* One ACQUIRE of "flood/NNNN" under a random session id with a random tag. */
static int build(struct prng *p, unsigned i, uint8_t *buf, size_t size)
{
	char name[16];
	int len = snprintf(name, sizeof(name), "flood/%04u", i % 10000u);
	struct hasp_wire_msg m;
	memset(&m, 0, sizeof(m));
	m.hdr.version = 2;
	m.hdr.opcode = HASP_OP_ACQUIRE;
	m.hdr.session_id = prng_next(p) | 1u; /* never 0 (that would be an open) */
	m.hdr.seq = 1 + prng_below(p, 1000);
	m.body.acquire.name.data = (const uint8_t *)name;
	m.body.acquire.name.size = (size_t)len;
	m.body.acquire.ttl_ms = 5000;
	int n = hasp_wire_encode(&m, buf, size);
	if (n < 0)
		return n;
	for (unsigned k = 0; k < HASP_WIRE_TAG_SIZE; k += 8) {
		uint64_t r = prng_next(p);
		memcpy(buf + HASP_WIRE_TAG_OFFSET + k, &r, 8);
	}
	return n;
}

int main(int argc, char **argv)
{
	if (version_requested(argc, argv, "flood_badmac"))
		return 0;
	if (help_requested(argc, argv)) {
		usage(stdout);
		return 0;
	}
	const char *target = NULL;
	double rate = 0, seconds = 0;
	unsigned long long count = 0, seed = 1;
	unsigned batch = 32;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (a[0] != '-') {
			target = a;
			continue;
		}
		if (v == NULL) {
			fprintf(stderr, "flood_badmac: %s needs a value\n", a);
			return 2;
		}
		i++;
		char *end = NULL;
		if (strcmp(a, "--rate") == 0)
			rate = strtod(v, &end);
		else if (strcmp(a, "--seconds") == 0)
			seconds = strtod(v, &end);
		else if (strcmp(a, "--count") == 0)
			count = strtoull(v, &end, 10);
		else if (strcmp(a, "--batch") == 0)
			batch = (unsigned)strtoul(v, &end, 10);
		else if (strcmp(a, "--seed") == 0)
			seed = strtoull(v, &end, 10);
		else {
			fprintf(stderr, "flood_badmac: unknown option %s\n", a);
			usage(stderr);
			return 2;
		}
		if (end == v || *end != '\0') {
			fprintf(stderr, "flood_badmac: bad value for %s: %s\n", a, v);
			return 2;
		}
	}
	struct sockaddr_in sa;
	if (target == NULL || parse_addr(target, &sa) != 0) {
		usage(stderr);
		return 2;
	}
	if (!(rate >= 1 && rate <= RATE_MAX) || !(seconds > 0 && seconds <= SECONDS_MAX) || count < 1 ||
	    count > COUNT_MAX || batch < 1 || batch > BATCH_MAX) {
		fprintf(stderr, "flood_badmac: --rate, --seconds and --count are required and bounded "
				"(see --help)\n");
		return 2;
	}

	static uint8_t pool[POOL][128];
	static size_t pool_len[POOL];
	struct prng p;
	prng_seed(&p, seed);
	for (unsigned i = 0; i < POOL; i++) {
		int n = build(&p, i, pool[i], sizeof(pool[i]));
		if (n < 0) {
			fprintf(stderr, "flood_badmac: cannot encode a datagram (%d)\n", n);
			return 1;
		}
		pool_len[i] = (size_t)n;
	}
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("flood_badmac: socket");
		return 1;
	}
	struct sigaction act;
	memset(&act, 0, sizeof(act));
	act.sa_handler = on_signal;
	sigaction(SIGINT, &act, NULL);
	sigaction(SIGTERM, &act, NULL);

	static struct mmsghdr msgs[BATCH_MAX];
	static struct iovec iov[BATCH_MAX];
	unsigned long long sent = 0, errors = 0;
	unsigned next = 0;
	double start = now_s(), end = start + seconds, interval = (double)batch / rate;
	double due = start;
	while (!stop && sent < count) {
		double t = now_s();
		if (t >= end)
			break;
		if (t < due) {
			double wait = due - t;
			struct timespec ts = {.tv_sec = (time_t)wait,
					      .tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9)};
			nanosleep(&ts, NULL); /* EINTR: the loop checks stop */
			continue;
		}
		unsigned k = batch;
		if (count - sent < k)
			k = (unsigned)(count - sent);
		for (unsigned j = 0; j < k; j++) {
			unsigned idx = next++ % POOL;
			iov[j].iov_base = pool[idx];
			iov[j].iov_len = pool_len[idx];
			memset(&msgs[j], 0, sizeof(msgs[j]));
			msgs[j].msg_hdr.msg_name = &sa;
			msgs[j].msg_hdr.msg_namelen = sizeof(sa);
			msgs[j].msg_hdr.msg_iov = &iov[j];
			msgs[j].msg_hdr.msg_iovlen = 1;
		}
		int r = sendmmsg(fd, msgs, k, 0);
		if (r < 0) {
			if (errno != EINTR)
				errors += k;
		} else {
			sent += (unsigned)r;
			errors += k - (unsigned)r;
		}
		due += interval;
		/* Behind by more than a second (a stopped process): do not
		 * catch up in one burst. */
		if (due < t - 1.0)
			due = t;
	}
	double elapsed = now_s() - start;
	close(fd);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("{\"sent\":%llu,\"errors\":%llu,\"elapsed_s\":%.3f,\"rate\":%.1f,"
	       "\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f}\n",
	       sent, errors, elapsed, elapsed > 0 ? (double)sent / elapsed : 0.0, tv_s(ru.ru_utime),
	       tv_s(ru.ru_stime));
	return 0;
}
