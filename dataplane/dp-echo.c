/*
 * hasp-dp-echo: the dataplane's smoke target. Brings up one port (net_tap
 * in tests) with its own IP and MAC, answers ARP and ping, and echoes every
 * UDP datagram sent to --udp-port back to its sender.
 *
 *   hasp-dp-echo <EAL args> -- --ip 10.199.7.2/24 --mac 02:77:00:00:00:01
 *                [--udp-port 7] [--idle poll|hybrid|sleep]
 *                [--stats-file PATH] [--hello IP:PORT]
 *
 * Signals: SIGUSR1 writes the counters as one JSON object to --stats-file
 * (atomically: temporary file, then rename); SIGUSR2 sends one "hello"
 * datagram to --hello through dp_udp_send() (exercising ARP resolution),
 * from the local port after --udp-port (unregistered: when --hello is
 * another echo node, its echo is counted as rx_unknown_port here instead of
 * starting an endless ping-pong);
 * SIGINT/SIGTERM stop it, and the final counters are written and printed.
 * The JSON includes "alloc_forbidden": heap allocations made by lcores
 * after start, which must be zero.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/version.h"
#include "dataplane/dp.h"
#include "dataplane/ipv4.h"
#include "hasp/errors.h"

static struct dp echo_dp;
static volatile sig_atomic_t dump_requested;
static volatile sig_atomic_t hello_requested;
static const char *stats_path;
static uint32_t hello_ip;
static uint16_t hello_port;
static uint16_t echo_port = 7;
static unsigned dump_seq;

static void on_stop(int sig)
{
	(void)sig;
	dp_stop(&echo_dp);
}

static void on_usr(int sig)
{
	if (sig == SIGUSR1)
		dump_requested = 1;
	else
		hello_requested = 1;
}

static size_t echo_format(char *buf, size_t buf_size)
{
	struct dp_stats st;
	struct arp_cache_stats arp;
	struct hasp_alloc_stats alloc;

	dp_stats_sum(&echo_dp, &st);
	dp_arp_stats_sum(&echo_dp, &arp);
	hasp_alloc_stats_get(&alloc);
	size_t n = dp_stats_format_json(&st, buf, buf_size);
	if (n == 0)
		return 0;
	int extra = snprintf(buf + n - 1, buf_size - (n - 1),
			     ",\"arp_requests\":%llu,\"arp_learned\":%llu,\"arp_released\":%llu,"
			     "\"arp_failed\":%llu,\"alloc_forbidden\":%llu,\"dump_seq\":%u}\n",
			     (unsigned long long)arp.requests, (unsigned long long)arp.learned,
			     (unsigned long long)arp.released, (unsigned long long)arp.failed,
			     (unsigned long long)alloc.forbidden_count, ++dump_seq);
	if (extra < 0 || (size_t)extra >= buf_size - (n - 1))
		return 0;
	n = n - 1 + (size_t)extra;
	/* Per-lcore frames, to see how the port spread the flows. */
	n -= 2; /* back over "}\n" */
	for (uint32_t i = 0; i < echo_dp.lcore_count; i++) {
		extra = snprintf(buf + n, buf_size - n, "%s%llu", i == 0 ? ",\"lcore_rx_frames\":[" : ",",
				 (unsigned long long)echo_dp.lcores[i].stats.rx_frames);
		if (extra < 0 || (size_t)extra >= buf_size - n)
			return 0;
		n += (size_t)extra;
	}
	extra = snprintf(buf + n, buf_size - n, "]}\n");
	if (extra < 0 || (size_t)extra >= buf_size - n)
		return 0;
	return n + (size_t)extra;
}

/* Writes the counters to stats_path. Runs on lcore 0 only when asked (a
 * SIGUSR1), so the file I/O never sits on the packet path. */
static void echo_dump(void)
{
	char buf[8192], tmp[4096];
	size_t n = echo_format(buf, sizeof(buf));

	if (stats_path == NULL || n == 0)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", stats_path);
	FILE *f = fopen(tmp, "w");
	if (f == NULL)
		return;
	fwrite(buf, 1, n, f);
	fclose(f);
	(void)rename(tmp, stats_path);
}

static void echo_handler(struct dp_lcore *lc, const struct dp_datagram *dg, void *arg)
{
	(void)arg;
	(void)dp_udp_reply(lc, dg, dg->payload, dg->payload_size);
}

static bool echo_work(struct dp_lcore *lc, uint64_t now_ns, uint64_t *deadline_ns, void *arg)
{
	(void)now_ns;
	(void)deadline_ns;
	(void)arg;
	if (dp_lcore_index(lc) != 0)
		return false;
	bool did = false;
	if (hello_requested) {
		static const char hello[] = "hasp-dp-echo hello";
		hello_requested = 0;
		if (hello_port != 0)
			(void)dp_udp_send(lc, hello_ip, hello_port, (uint16_t)(echo_port + 1), hello,
					  sizeof(hello) - 1);
		did = true;
	}
	if (dump_requested) {
		/* File I/O on an lcore: this tool's one exception, only on
		 * request. (libc's stdio buffers do not go through
		 * hasp_alloc(), so alloc_forbidden still means what it says.) */
		dump_requested = 0;
		echo_dump();
		did = true;
	}
	return did;
}

static int parse_ip_prefix(const char *text, uint32_t *ip, uint8_t *prefix_len)
{
	char buf[32];
	const char *slash = strchr(text, '/');
	if (slash == NULL || (size_t)(slash - text) >= sizeof(buf))
		return -HASP_EINVAL;
	memcpy(buf, text, (size_t)(slash - text));
	buf[slash - text] = '\0';
	long len = strtol(slash + 1, NULL, 10);
	if (len < 1 || len > 32 || ipv4_addr_parse(buf, ip) != 0)
		return -HASP_EINVAL;
	*prefix_len = (uint8_t)len;
	return 0;
}

static int parse_ip_port(const char *text, uint32_t *ip, uint16_t *port)
{
	char buf[32];
	const char *colon = strchr(text, ':');
	if (colon == NULL || (size_t)(colon - text) >= sizeof(buf))
		return -HASP_EINVAL;
	memcpy(buf, text, (size_t)(colon - text));
	buf[colon - text] = '\0';
	long p = strtol(colon + 1, NULL, 10);
	if (p < 1 || p > 65535 || ipv4_addr_parse(buf, ip) != 0)
		return -HASP_EINVAL;
	*port = (uint16_t)p;
	return 0;
}

static void usage_to(FILE *out, const char *prog)
{
	fprintf(out,
		"usage: %s <EAL args> -- --ip A.B.C.D/LEN --mac 02:77:00:00:00:NN\n"
		"       [--udp-port N] [--idle poll|hybrid|sleep] [--stats-file PATH]\n"
		"       [--hello IP:PORT] [--port NAME]\n"
		"The dataplane's smoke target: answers ARP and ping on its own port and echoes\n"
		"every UDP datagram sent to --udp-port (docs/DATAPLANE.md).\n",
		prog);
}

static void usage(const char *prog)
{
	usage_to(stderr, prog);
}

int main(int argc, char **argv)
{
	struct dp_config cfg = { .idle = IDLE_HYBRID };
	int sep = 1;

	if (version_requested(argc, argv, "hasp-dp-echo"))
		return 0;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0) {
			usage_to(stdout, "hasp-dp-echo");
			return 0;
		}

	while (sep < argc && strcmp(argv[sep], "--") != 0)
		sep++;
	cfg.eal_argc = sep;
	cfg.eal_argv = argv;

	static const struct option opts[] = {
		{ "ip", required_argument, NULL, 'i' },
		{ "mac", required_argument, NULL, 'm' },
		{ "udp-port", required_argument, NULL, 'u' },
		{ "idle", required_argument, NULL, 'd' },
		{ "stats-file", required_argument, NULL, 's' },
		{ "hello", required_argument, NULL, 'h' },
		{ "port", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_ip = false, have_mac = false;
	int app_argc = argc - sep;
	char **app_argv = argv + sep; /* app_argv[0] is "--" (or argv end) */
	int c;
	optind = 1;
	while (app_argc > 1 && (c = getopt_long(app_argc, app_argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			have_ip = parse_ip_prefix(optarg, &cfg.ip, &cfg.prefix_len) == 0;
			break;
		case 'm':
			have_mac = eth_addr_parse(optarg, &cfg.mac) == 0;
			break;
		case 'u':
			echo_port = (uint16_t)strtoul(optarg, NULL, 10);
			break;
		case 'd':
			if (strcmp(optarg, "poll") == 0)
				cfg.idle = IDLE_POLL;
			else if (strcmp(optarg, "hybrid") == 0)
				cfg.idle = IDLE_HYBRID;
			else if (strcmp(optarg, "sleep") == 0)
				cfg.idle = IDLE_SLEEP;
			else
				goto bad;
			break;
		case 's':
			stats_path = optarg;
			break;
		case 'h':
			if (parse_ip_port(optarg, &hello_ip, &hello_port) != 0)
				goto bad;
			break;
		case 'p':
			cfg.port_name = optarg;
			break;
		default:
			goto bad;
		}
	}
	if (!have_ip || !have_mac || echo_port == 0 || echo_port == 65535)
		goto bad;

	int rc = dp_init(&echo_dp, &cfg);
	if (rc != 0) {
		fprintf(stderr, "hasp-dp-echo: dp_init: %s\n", hasp_strerror(rc));
		return 1;
	}
	if (dp_udp_register(&echo_dp, echo_port, echo_handler, NULL) != 0)
		return 1;
	dp_set_work(&echo_dp, echo_work, NULL);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_usr;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);

	fprintf(stderr, "hasp-dp-echo: ready port=%s udp=%u\n", echo_dp.port.driver, echo_port);
	rc = dp_run(&echo_dp);
	if (rc != 0)
		fprintf(stderr, "hasp-dp-echo: dp_run: %s\n", hasp_strerror(rc));

	char buf[8192];
	if (echo_format(buf, sizeof(buf)) > 0)
		fputs(buf, stdout);
	echo_dump();
	dp_deinit(&echo_dp);
	return rc == 0 ? 0 : 1;
bad:
	usage(argv[0]);
	return 2;
}
