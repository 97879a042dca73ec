/*
 * The kernel-side driver of the dataplane integration test (itest_echo.sh):
 * talks to a running hasp-dp-echo through the tap the script created, with
 * ordinary sockets and a raw AF_PACKET socket, and checks its counters.
 *
 *   dp_itest ping  <node-ip> <count>
 *   dp_itest udp   <node-ip> <port> <count> [gap-us]
 *   dp_itest rate  <node-ip> <port> <seconds> <window>   (a measurement)
 *   dp_itest hello <kernel-ip> <port> <echo-pid>
 *   dp_itest raw   <ifname> <node-mac> <node-ip> <kernel-ip> <port> <echo-pid> <stats-file>
 *                  [tap|tap2|af_packet]
 *   dp_itest peer  <pid-a> <stats-a> <pid-b> <stats-b>
 *   dp_itest final <stats-file>
 *
 * Each prints what it checked and exits 0, or prints why and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/limits.h"
#include "dataplane/arp.h"
#include "dataplane/csum.h"
#include "dataplane/icmp.h"
#include "dataplane/ipv4.h"
#include "dataplane/netbytes.h"
#include "dataplane/udp.h"

#define FAIL(...)                                     \
	do {                                          \
		fprintf(stderr, "dp_itest: FAIL: "); \
		fprintf(stderr, __VA_ARGS__);         \
		fprintf(stderr, "\n");                \
		exit(1);                              \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		FAIL("bad address %s", ip);
	return sa;
}

/* Waits up to timeout_ms for `fd` to be readable. */
static bool wait_readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, timeout_ms) == 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmd_ping(const char *ip, int count)
{
	int fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
	struct sockaddr_in sa = sin_of(ip, 0);
	uint16_t id = (uint16_t)getpid();
	int answered = 0;

	if (fd < 0)
		FAIL("raw ICMP socket: %s", strerror(errno));
	for (int seq = 1; seq <= count; seq++) {
		uint8_t msg[64] = { 0 }, buf[2048];
		msg[0] = ICMP_TYPE_ECHO_REQUEST;
		put_be16(msg + 4, id);
		put_be16(msg + 6, (uint16_t)seq);
		memcpy(msg + 8, "hasp-dp-itest-ping", 18);
		put_be16(msg + 2, csum_fold(csum_add(0, msg, sizeof(msg))));
		if (sendto(fd, msg, sizeof(msg), 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			FAIL("ping send: %s", strerror(errno));
		uint64_t deadline = now_ns() + 2000000000ull;
		while (now_ns() < deadline && wait_readable(fd, 100)) {
			ssize_t n = recv(fd, buf, sizeof(buf), 0);
			if (n < 20 + 8)
				continue;
			const uint8_t *r = buf + (buf[0] & 0xf) * 4; /* raw sockets include the IP header */
			if (r[0] == ICMP_TYPE_ECHO_REPLY && get_be16(r + 4) == id &&
			    get_be16(r + 6) == seq && memcmp(r + 8, msg + 8, 56) == 0 &&
			    csum_fold(csum_add(0, r, (size_t)(n - (r - buf)))) == 0) {
				answered++;
				break;
			}
		}
	}
	close(fd);
	printf("ping: %d/%d echo replies from %s\n", answered, count, ip);
	if (answered != count)
		FAIL("ping: %d of %d unanswered", count - answered, count);
	return 0;
}

static int cmd_udp(const char *ip, uint16_t port, int count, int gap_us)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in sa = sin_of(ip, port);
	static const size_t sizes[] = { 0, 1, 64, 512, 1000, HASP_DATAGRAM_SIZE_MAX };
	uint64_t *rtt = calloc((size_t)count, sizeof(uint64_t));
	int ok = 0;

	if (fd < 0 || rtt == NULL)
		FAIL("udp socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		FAIL("udp connect: %s", strerror(errno));
	for (int i = 0; i < count; i++) {
		uint8_t out[HASP_DATAGRAM_SIZE_MAX], in[2048];
		if (gap_us > 0)
			usleep((useconds_t)gap_us); /* let the node fall asleep */
		size_t size = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
		for (size_t b = 0; b < size; b++)
			out[b] = (uint8_t)(i + b * 31);
		/* The first exchange may wait for neighbour resolution: retry. */
		for (int attempt = 0; attempt < 5; attempt++) {
			uint64_t t0 = now_ns();
			if (send(fd, out, size, 0) != (ssize_t)size)
				FAIL("udp send: %s", strerror(errno));
			if (!wait_readable(fd, 1000))
				continue;
			ssize_t n = recv(fd, in, sizeof(in), 0);
			rtt[i] = now_ns() - t0;
			if (n != (ssize_t)size || memcmp(in, out, size) != 0)
				FAIL("udp: echo %d of %zu bytes came back as %zd bytes or different", i,
				     size, n);
			ok++;
			break;
		}
	}
	close(fd);
	if (ok != count)
		FAIL("udp: %d of %d datagrams not echoed", count - ok, count);
	qsort(rtt, (size_t)count, sizeof(uint64_t), cmp_u64);
	printf("udp: %d/%d echoes verified (sizes 0..%u); rtt p50=%.1fus p99=%.1fus max=%.1fus\n", ok,
	       count, HASP_DATAGRAM_SIZE_MAX, rtt[count / 2] / 1e3, rtt[count * 99 / 100] / 1e3,
	       rtt[count - 1] / 1e3);
	free(rtt);
	return 0;
}

/* Keeps `window` 64-byte datagrams in flight for `seconds` and reports
 * echoes per second. Lost datagrams are replaced after 10 ms of silence. */
static int cmd_rate(const char *ip, uint16_t port, int seconds, int window)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = sin_of(ip, port);
	uint8_t out[64] = "hasp-dp-itest-rate", in[2048];
	uint64_t echoes = 0, sent = 0;

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		FAIL("rate: socket: %s", strerror(errno));
	uint64_t start = now_ns(), end = start + (uint64_t)seconds * 1000000000u;
	for (int i = 0; i < window; i++)
		sent += send(fd, out, sizeof(out), 0) == (ssize_t)sizeof(out);
	while (now_ns() < end) {
		if (!wait_readable(fd, 10)) {
			uint64_t in_flight = sent - echoes;
			for (uint64_t i = in_flight; i < (uint64_t)window; i++)
				sent += send(fd, out, sizeof(out), 0) == (ssize_t)sizeof(out);
			continue;
		}
		while (recv(fd, in, sizeof(in), 0) > 0) {
			echoes++;
			sent += send(fd, out, sizeof(out), 0) == (ssize_t)sizeof(out);
		}
	}
	close(fd);
	double secs = (double)(now_ns() - start) / 1e9;
	printf("rate: %.0f echoes/s (64 B, window %d, %.1f s, %llu sent)\n", (double)echoes / secs,
	       window, secs, (unsigned long long)sent);
	return echoes > 0 ? 0 : 1;
}

static int cmd_hello(const char *ip, uint16_t port, pid_t pid)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in sa = sin_of(ip, port);
	char buf[256];

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		FAIL("hello bind %s:%u: %s", ip, port, strerror(errno));
	for (int attempt = 0; attempt < 5; attempt++) {
		if (kill(pid, SIGUSR2) != 0)
			FAIL("hello: kill %d: %s", (int)pid, strerror(errno));
		if (!wait_readable(fd, 1500))
			continue;
		ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n > 0) {
			buf[n] = '\0';
			if (strcmp(buf, "hasp-dp-echo hello") != 0)
				FAIL("hello: unexpected payload '%s'", buf);
			printf("hello: initiated datagram arrived after ARP resolution (attempt %d)\n",
			       attempt + 1);
			close(fd);
			return 0;
		}
	}
	FAIL("hello: no datagram from the node within 7.5 s");
}

/* Reads counter `name` from the JSON object in `text`; -1 if absent. */
static long long json_get(const char *text, const char *name)
{
	char key[96];
	snprintf(key, sizeof(key), "\"%s\":", name);
	const char *p = strstr(text, key);
	return p != NULL ? strtoll(p + strlen(key), NULL, 10) : -1;
}

static bool read_file(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return false;
	size_t n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = '\0';
	return n > 0;
}

/* Asks the echo process for a fresh dump and returns it in `buf`. */
static void fresh_stats(pid_t pid, const char *path, char *buf, size_t size)
{
	long long seq_before = read_file(path, buf, size) ? json_get(buf, "dump_seq") : 0;
	if (kill(pid, SIGUSR1) != 0)
		FAIL("stats: kill %d: %s", (int)pid, strerror(errno));
	for (int i = 0; i < 300; i++) {
		usleep(10000);
		if (read_file(path, buf, size) && json_get(buf, "dump_seq") > seq_before)
			return;
	}
	FAIL("stats: %s not refreshed within 3 s", path);
}

struct raw_case {
	const char *name;
	const char *counter; /* expected to grow by `expected` */
	int expected;
	size_t size;
	uint8_t frame[128];
};

static size_t raw_udp(uint8_t *frame, const struct udp_endpoints *ep, const char *payload)
{
	size_t n = strlen(payload);
	memcpy(frame + UDP_FRAME_PAYLOAD_OFFSET, payload, n);
	return udp_write_frame(frame, ep, (uint16_t)n, true);
}

static void fix_ip_csum(uint8_t *frame)
{
	uint8_t *ip = frame + ETH_HDR_SIZE;
	put_be16(ip + 10, 0);
	put_be16(ip + 10, csum_fold(csum_add(0, ip, (size_t)(ip[0] & 0xf) * 4)));
}

static int cmd_raw(const char *ifname, const char *mac_text, const char *node_ip,
		   const char *kernel_ip, uint16_t port, pid_t pid, const char *stats_path,
		   const char *kind)
{
	static struct raw_case cases[16];
	struct udp_endpoints ep = { .src_mac = { { 0x02, 0x99, 0, 0, 0, 0x01 } } };
	unsigned n = 0;
	char before[16384], after[16384];

	if (eth_addr_parse(mac_text, &ep.dst_mac) != 0 || ipv4_addr_parse(node_ip, &ep.dst_ip) != 0 ||
	    ipv4_addr_parse(kernel_ip, &ep.src_ip) != 0)
		FAIL("raw: bad arguments");
	ep.src_port = 40001;
	ep.dst_port = port;

	struct raw_case *c;
#define CASE(nm, ctr) (c = &cases[n++], c->name = (nm), c->counter = (ctr), c->expected = 1)
	CASE("valid datagram", "rx_udp");
	c->size = raw_udp(c->frame, &ep, "valid");
	CASE("bad IPv4 header checksum", "rx_bad_ipv4_csum");
	c->size = raw_udp(c->frame, &ep, "badipcsum");
	c->frame[ETH_HDR_SIZE + 10] ^= 0x5a;
	CASE("bad UDP checksum", "rx_bad_udp_csum");
	c->size = raw_udp(c->frame, &ep, "badudpcsum");
	c->frame[c->size - 1] ^= 0x01;
	CASE("IPv4 fragment", "rx_ip_fragment");
	/* net_af_packet joins its sockets with PACKET_FANOUT_FLAG_DEFRAG, so
	 * the kernel holds a lone fragment for reassembly: it never reaches
	 * the dataplane. */
	if (strcmp(kind, "af_packet") == 0)
		c->expected = 0;
	c->size = raw_udp(c->frame, &ep, "fragment");
	put_be16(c->frame + ETH_HDR_SIZE + 6, IPV4_FLAG_MF);
	fix_ip_csum(c->frame);
	CASE("IPv4 options", "rx_ip_options");
	c->size = raw_udp(c->frame, &ep, "options!");
	c->frame[ETH_HDR_SIZE] = 0x46;
	fix_ip_csum(c->frame);
	CASE("IPv4 version 6 in an IPv4 frame", "rx_bad_ipv4_version");
	c->size = raw_udp(c->frame, &ep, "version");
	c->frame[ETH_HDR_SIZE] = 0x65;
	CASE("IPv4 total length beyond the frame", "rx_truncated");
	c->size = raw_udp(c->frame, &ep, "truncated");
	put_be16(c->frame + ETH_HDR_SIZE + 2, 200);
	fix_ip_csum(c->frame);
	CASE("UDP to an unregistered port", "rx_unknown_port");
	ep.dst_port = (uint16_t)(port + 1);
	c->size = raw_udp(c->frame, &ep, "noport");
	ep.dst_port = port;
	CASE("IPv4 to another address", "rx_ip_not_for_us");
	ep.dst_ip++;
	c->size = raw_udp(c->frame, &ep, "otherip");
	ep.dst_ip--;
	CASE("TCP", "rx_ip_unknown_proto");
	c->size = raw_udp(c->frame, &ep, "tcp-ish");
	c->frame[ETH_HDR_SIZE + 9] = 6;
	fix_ip_csum(c->frame);
	CASE("unknown EtherType", "rx_unknown_ethertype");
	c->size = raw_udp(c->frame, &ep, "ethertype");
	put_be16(c->frame + 12, 0x88b5);
	CASE("ARP with a foreign hardware type", "rx_arp_unsupported");
	{
		struct arp_view arp;
		arp_make_request(&arp, &ep.src_mac, ep.src_ip, ep.dst_ip);
		c->size = arp_write_frame(c->frame, &eth_addr_broadcast, &arp);
		c->frame[ETH_HDR_SIZE + 1] = 6;
	}
	CASE("unicast to another MAC (the tap's own, say)", "rx_not_for_us");
	c->size = raw_udp(c->frame, &ep, "othermac");
	c->frame[5] ^= 0x40;
#undef CASE

	int fd = socket(AF_PACKET, SOCK_RAW, 0);
	struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex(ifname),
				  .sll_halen = ETH_ADDR_SIZE };
	if (fd < 0 || ll.sll_ifindex == 0)
		FAIL("raw: AF_PACKET on %s: %s", ifname, strerror(errno));
	fresh_stats(pid, stats_path, before, sizeof(before));
	for (unsigned i = 0; i < n; i++) {
		memcpy(ll.sll_addr, cases[i].frame, ETH_ADDR_SIZE);
		if (sendto(fd, cases[i].frame, cases[i].size, 0, (struct sockaddr *)&ll, sizeof(ll)) !=
		    (ssize_t)cases[i].size)
			FAIL("raw: send '%s': %s", cases[i].name, strerror(errno));
	}
	close(fd);
	/* Poll (bounded) until every counter that should move has, instead
	 * of sleeping a fixed time: the frames are handled in order, so the
	 * exact counts are read once the last has arrived. */
	for (int tries = 0; tries < 50; tries++) {
		bool arrived = true;
		fresh_stats(pid, stats_path, after, sizeof(after));
		for (unsigned i = 0; i < n; i++)
			arrived &= json_get(after, cases[i].counter) - json_get(before, cases[i].counter) >=
				   cases[i].expected;
		if (arrived)
			break;
		usleep(100000);
	}

	int failed = 0;
	for (unsigned i = 0; i < n; i++) {
		long long delta = json_get(after, cases[i].counter) - json_get(before, cases[i].counter);
		/* rx_not_for_us also sees the kernel's own multicast chatter. */
		bool ok = strcmp(cases[i].counter, "rx_not_for_us") == 0 ? delta >= cases[i].expected
									   : delta == cases[i].expected;
		printf("raw: %-45s %-22s +%lld %s\n", cases[i].name, cases[i].counter, delta,
		       ok ? "ok" : "WRONG");
		failed += !ok;
	}
	if (failed) {
		/* Show where the frames went instead. */
		for (const char *k = strchr(after, '"'); k != NULL; k = strchr(k, '"')) {
			const char *end = strchr(k + 1, '"');
			char name[64];
			if (end == NULL || (size_t)(end - k - 1) >= sizeof(name))
				break;
			memcpy(name, k + 1, (size_t)(end - k - 1));
			name[end - k - 1] = '\0';
			long long d = json_get(after, name) - json_get(before, name);
			if (d != 0)
				printf("raw: counter %s changed by %lld\n", name, d);
			k = strchr(end, ',');
			if (k == NULL)
				break;
		}
		FAIL("raw: %d of %u malformed-frame cases not counted as expected", failed, n);
	}
	return 0;
}

/* Node A (its --hello is node B's echo port) sends a datagram to B through
 * the bridge; B echoes it to A's unregistered port. Checks B's rx_udp and
 * A's rx_unknown_port: DPDK to DPDK, each resolving the other by ARP. */
static int cmd_peer(pid_t pid_a, const char *stats_a, pid_t pid_b, const char *stats_b)
{
	char a0[16384], b0[16384], a1[16384], b1[16384];

	fresh_stats(pid_a, stats_a, a0, sizeof(a0));
	fresh_stats(pid_b, stats_b, b0, sizeof(b0));
	for (int attempt = 0; attempt < 6; attempt++) {
		if (kill(pid_a, SIGUSR2) != 0)
			FAIL("peer: kill %d: %s", (int)pid_a, strerror(errno));
		usleep(1000000);
		fresh_stats(pid_a, stats_a, a1, sizeof(a1));
		fresh_stats(pid_b, stats_b, b1, sizeof(b1));
		long long b_udp = json_get(b1, "rx_udp") - json_get(b0, "rx_udp");
		long long a_back = json_get(a1, "rx_unknown_port") - json_get(a0, "rx_unknown_port");
		if (b_udp >= 1 && a_back >= 1) {
			printf("peer: node to node over the bridge: B got %lld, A got %lld echoes back "
			       "(attempt %d; A arp_requests=%lld)\n",
			       b_udp, a_back, attempt + 1, json_get(a1, "arp_requests"));
			return 0;
		}
	}
	FAIL("peer: no node-to-node round trip within 6 s");
}

static int cmd_final(const char *path)
{
	char buf[16384];
	if (!read_file(path, buf, sizeof(buf)))
		FAIL("final: no stats in %s", path);
	long long forbidden = json_get(buf, "alloc_forbidden");
	long long frames = json_get(buf, "rx_frames");
	const char *per_lcore = strstr(buf, "\"lcore_rx_frames\":");
	printf("final: rx_frames=%lld tx_frames=%lld alloc_forbidden=%lld idle_sleeps=%lld %.*s\n",
	       frames, json_get(buf, "tx_frames"), forbidden, json_get(buf, "idle_sleeps"),
	       per_lcore != NULL ? (int)strcspn(per_lcore, "]") + 1 : 0, per_lcore != NULL ? per_lcore : "");
	if (forbidden != 0)
		FAIL("final: lcores allocated %lld times after start", forbidden);
	if (frames <= 0)
		FAIL("final: no frames counted");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[1], "ping") == 0)
		return cmd_ping(argv[2], atoi(argv[3]));
	if (argc >= 5 && strcmp(argv[1], "udp") == 0)
		return cmd_udp(argv[2], (uint16_t)atoi(argv[3]), atoi(argv[4]),
			       argc >= 6 ? atoi(argv[5]) : 0);
	if (argc >= 6 && strcmp(argv[1], "rate") == 0)
		return cmd_rate(argv[2], (uint16_t)atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
	if (argc >= 5 && strcmp(argv[1], "hello") == 0)
		return cmd_hello(argv[2], (uint16_t)atoi(argv[3]), (pid_t)atoi(argv[4]));
	if (argc >= 9 && strcmp(argv[1], "raw") == 0)
		return cmd_raw(argv[2], argv[3], argv[4], argv[5], (uint16_t)atoi(argv[6]),
			       (pid_t)atoi(argv[7]), argv[8], argc >= 10 ? argv[9] : "tap");
	if (argc >= 6 && strcmp(argv[1], "peer") == 0)
		return cmd_peer((pid_t)atoi(argv[2]), argv[3], (pid_t)atoi(argv[4]), argv[5]);
	if (argc >= 3 && strcmp(argv[1], "final") == 0)
		return cmd_final(argv[2]);
	fprintf(stderr, "usage: see the comment at the top of dp_itest.c\n");
	return 2;
}
