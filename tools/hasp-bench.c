/*
 * hasp-bench: the load generator of hasp (docs/PERFORMANCE.md). Its
 * sessions are libhasp clients in one client group (one socket, batched
 * syscalls: tools/bench_engine.h), and it prints a table and/or one JSON
 * object with the commit, the configuration and the machine's facts.
 *
 *   hasp-bench [--cluster host:port,...] [--workload W] [options]
 *   hasp-bench --dpdk --ip A.B.C.D/N --mac M [options] -- <EAL arguments>
 *
 * The second form sends from hasp-bench's own DPDK port instead of a kernel
 * socket (tools/bench_dpdk.h; only in builds with DPDK).
 *
 * Every run is bounded by --count AND --duration (plus --warmup before it
 * and a short drain after it). Exit codes: 0 ran (the JSON says how well),
 * 2 usage or configuration, 3 no session could be opened, 4 a storm lost a
 * lock (a waiter not granted or a watcher not told: the run's own verdict),
 * 1 other errors.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "bench_commit.h"
#include "common/resolve.h"
#include "common/version.h"
#include "hasp/errors.h"
#include "tools/bench_dpdk.h"
#include "tools/bench_engine.h"
#include "tools/bench_report.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: hasp-bench [options]\n"
		"  --cluster LIST     host:port,... (default $HASP_CLUSTER)\n"
		"  --workload W       cycle | contended | keepalive | kv | burst | storm (default cycle)\n"
		"  --clients N        sessions (default 16)\n"
		"  --keys K           key space (default 1024)\n"
		"  --zipf S           Zipf exponent of contended and kv keys (default 0.99)\n"
		"  --wait | --try     ACQUIRE mode (default try)\n"
		"  --ttl MS           lock TTL (default 5000)\n"
		"  --session-ttl MS   session TTL (default 10000)\n"
		"  --rate R           open loop at R ops/s with Poisson arrivals (default: closed loop)\n"
		"  --count N          most operations (burst: rounds) (default 1000000)\n"
		"  --duration S       measured seconds (default 10)\n"
		"  --warmup S         unmeasured seconds first (default 0)\n"
		"  --put-percent P    kv: share of puts (default 10)\n"
		"  --value-size B     kv: value bytes (default 64)\n"
		"  --waiters W        burst: waiters (default 16)\n"
		"  --watchers         burst: watchers instead of waiters\n"
		"  --locks L          storm: held locks, each with a waiter and a watcher\n"
		"                     (3L sessions; default 1000)\n"
		"  --window-ms MS     storm: the L releases spread over MS (default 1000)\n"
		"  --timeout MS       retransmit after MS of silence (default 200)\n"
		"  --deadline MS      give a request up after MS (a queued WAIT after twice\n"
		"                     that; default 5000; at least --timeout)\n"
		"  --threads T        T client groups side by side, a thread, a socket and\n"
		"                     clients/T sessions each (kernel mode; default 1)\n"
		"  --seed N           PRNG seed (default 1)\n"
		"  --prefix P         lock/key name prefix (default hb<pid>)\n"
		"  --engine libhasp   the only engine: libhasp's async core, a client group\n"
		"                     (per thread with --threads; on the port's datagrams\n"
		"                     with --dpdk). `wire`, hasp-bench's own protocol engine\n"
		"                     until session 23, is refused (perf/engines builds it\n"
		"                     from its last commit for side-by-side runs)\n"
		"  --json             print the JSON object instead of the table\n"
		"  --out FILE         also write the JSON object to FILE\n"
		"  --latency-log FILE write every measured latency sample to FILE, a line\n"
		"                     each: KIND START_NS LATENCY_NS (KIND as in the JSON's\n"
		"                     latency_us, START_NS on CLOCK_MONOTONIC; for\n"
		"                     placing one run's samples in another's time)\n"
		"DPDK mode (EAL arguments after --, e.g. -l 1 --no-huge -m 64 --no-pci\n"
		"  --file-prefix hb --vdev=net_tap0,iface=hbtap0):\n"
		"  --dpdk             send from an own DPDK port\n"
		"  --ip A.B.C.D/N     its address and subnet\n"
		"  --mac M            its MAC, e.g. 02:77:00:00:00:50\n"
		"  --local-port P     UDP source port (default 7100)\n"
		"  --settle-ms MS     wait after the port is up, e.g. to attach a TAP (default 2000)\n"
		"  --idle poll|hybrid|sleep  lcore idle strategy (default hybrid)\n");
}

static bool parse_double(const char *s, double *out)
{
	char *end;
	*out = strtod(s, &end);
	return *s != '\0' && *end == '\0';
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (*s == '-')
		return false;
	*out = strtoull(s, &end, 0);
	return *s != '\0' && *end == '\0';
}

static bool parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;
	if (!parse_u64(s, &v) || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

struct thread_run {
	struct bench_config cfg;
	struct bench_result res;
	pthread_t thread;
	int rc;
};

static void *thread_main(void *arg)
{
	struct thread_run *t = arg;
	t->rc = bench_run_libhasp(&t->cfg, &t->res);
	return NULL;
}

/* --threads: the clients, the count and the open loop's rate split over T
 * engines, each with its own socket and seed. Uncontended cycles also get
 * a prefix per thread, since each engine partitions its keys among its
 * own clients only; shared workloads (contended, kv, keepalive) keep one
 * key space. */
static int run_threads(const struct bench_config *cfg, struct bench_result *res)
{
	uint32_t n = cfg->threads;
	struct thread_run *t = calloc(n, sizeof(*t));
	int rc = 0;

	if (t == NULL)
		return -HASP_ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		t[i].cfg = *cfg;
		t[i].cfg.clients = cfg->clients / n + (i < cfg->clients % n);
		t[i].cfg.count_max = cfg->count_max / n + (i < cfg->count_max % n);
		if (t[i].cfg.count_max == 0)
			t[i].cfg.count_max = 1;
		t[i].cfg.seed = cfg->seed + i;
		/* --rate is the run's offered load: each engine takes its
		 * share (each took all of it: T times the load asked for). */
		t[i].cfg.rate = cfg->rate / n;
		if (cfg->workload == BENCH_WL_CYCLE && !cfg->contended)
			snprintf(t[i].cfg.prefix, sizeof(t[i].cfg.prefix), "%.50st%u", cfg->prefix, i);
		if (bench_result_init(&t[i].res) != 0 ||
		    pthread_create(&t[i].thread, NULL, thread_main, &t[i]) != 0) {
			fprintf(stderr, "hasp-bench: cannot start thread %u\n", i);
			exit(1);
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		pthread_join(t[i].thread, NULL);
		if (t[i].rc == 0)
			bench_result_merge(res, &t[i].res);
		else if (rc == 0)
			rc = t[i].rc;
		bench_result_deinit(&t[i].res);
	}
	free(t);
	/* One engine that opened no session fails the run, as in one thread. */
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "cluster", required_argument, NULL, 'c' },
		{ "workload", required_argument, NULL, 'W' },
		{ "clients", required_argument, NULL, 'n' },
		{ "keys", required_argument, NULL, 'k' },
		{ "zipf", required_argument, NULL, 'z' },
		{ "wait", no_argument, NULL, 'w' },
		{ "try", no_argument, NULL, 't' },
		{ "ttl", required_argument, NULL, 'T' },
		{ "session-ttl", required_argument, NULL, 'S' },
		{ "rate", required_argument, NULL, 'r' },
		{ "count", required_argument, NULL, 'C' },
		{ "duration", required_argument, NULL, 'd' },
		{ "warmup", required_argument, NULL, 'u' },
		{ "put-percent", required_argument, NULL, 'p' },
		{ "value-size", required_argument, NULL, 'v' },
		{ "waiters", required_argument, NULL, 'a' },
		{ "watchers", no_argument, NULL, 'A' },
		{ "timeout", required_argument, NULL, 'o' },
		{ "seed", required_argument, NULL, 's' },
		{ "prefix", required_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'j' },
		{ "out", required_argument, NULL, 'O' },
		{ "latency-log", required_argument, NULL, 'Y' },
		{ "help", no_argument, NULL, 'h' },
		{ "dpdk", no_argument, NULL, 'D' },
		{ "ip", required_argument, NULL, 'I' },
		{ "mac", required_argument, NULL, 'M' },
		{ "local-port", required_argument, NULL, 'L' },
		{ "settle-ms", required_argument, NULL, 'E' },
		{ "idle", required_argument, NULL, 'X' },
		{ "threads", required_argument, NULL, 'H' },
		{ "engine", required_argument, NULL, 'G' },
		{ "locks", required_argument, NULL, 'l' },
		{ "window-ms", required_argument, NULL, 'm' },
		{ "deadline", required_argument, NULL, 'e' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench_config cfg;
	struct bench_result res;
	const char *out_path = NULL, *latency_log_path = NULL;
	bool json = false, ok = true, dpdk = false, have_ip = false, have_mac = false;
	struct bench_dpdk_config dcfg = { .local_port = 7100, .settle_ms = 2000, .idle = 1 };
	double seconds;
	int opt;

	/* --help or --version anywhere before "--" (even as another option's
	 * value) answer at once and send nothing. */
	if (version_requested(argc, argv, "hasp-bench"))
		return 0;
	if (help_requested(argc, argv)) {
		usage(stdout);
		return 0;
	}
	bench_config_default(&cfg);
	cfg.cluster = getenv("HASP_CLUSTER");
	snprintf(cfg.prefix, sizeof(cfg.prefix), "hb%ld", (long)getpid());
	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'c': cfg.cluster = optarg; break;
		case 'W':
			if (strcmp(optarg, "cycle") == 0) {
				cfg.workload = BENCH_WL_CYCLE;
			} else if (strcmp(optarg, "contended") == 0) {
				cfg.workload = BENCH_WL_CYCLE;
				cfg.contended = true;
			} else if (strcmp(optarg, "keepalive") == 0) {
				cfg.workload = BENCH_WL_KEEPALIVE;
			} else if (strcmp(optarg, "kv") == 0) {
				cfg.workload = BENCH_WL_KV;
			} else if (strcmp(optarg, "burst") == 0) {
				cfg.workload = BENCH_WL_BURST;
			} else if (strcmp(optarg, "storm") == 0) {
				cfg.workload = BENCH_WL_STORM;
			} else {
				ok = false;
			}
			break;
		case 'n': ok &= parse_u32(optarg, &cfg.clients); break;
		case 'k': ok &= parse_u32(optarg, &cfg.keys); break;
		case 'z': ok &= parse_double(optarg, &cfg.zipf_s); break;
		case 'w': cfg.wait = true; break;
		case 't': cfg.wait = false; break;
		case 'T': ok &= parse_u32(optarg, &cfg.lock_ttl_ms); break;
		case 'S': ok &= parse_u32(optarg, &cfg.session_ttl_ms); break;
		case 'r': ok &= parse_double(optarg, &cfg.rate); break;
		case 'C': ok &= parse_u64(optarg, &cfg.count_max); break;
		case 'd':
			ok &= parse_double(optarg, &seconds) && seconds > 0 && seconds <= 3600;
			cfg.duration_ms = ok ? (uint32_t)(seconds * 1000.0 + 0.5) : 0;
			break;
		case 'u':
			ok &= parse_double(optarg, &seconds) && seconds >= 0 && seconds <= 3600;
			cfg.warmup_ms = ok ? (uint32_t)(seconds * 1000.0 + 0.5) : 0;
			break;
		case 'p': ok &= parse_u32(optarg, &cfg.put_percent); break;
		case 'v': ok &= parse_u32(optarg, &cfg.value_size); break;
		case 'a': ok &= parse_u32(optarg, &cfg.waiters); break;
		case 'A': cfg.watchers = true; break;
		case 'l': ok &= parse_u32(optarg, &cfg.storm_locks); break;
		case 'm': ok &= parse_u32(optarg, &cfg.window_ms); break;
		case 'o': ok &= parse_u32(optarg, &cfg.request_timeout_ms); break;
		case 'e': ok &= parse_u32(optarg, &cfg.request_deadline_ms); break;
		case 's': ok &= parse_u64(optarg, &cfg.seed); break;
		case 'P': snprintf(cfg.prefix, sizeof(cfg.prefix), "%s", optarg); break;
		case 'j': json = true; break;
		case 'O': out_path = optarg; break;
		case 'Y': latency_log_path = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'D': dpdk = true; break;
		case 'I': {
			char ip[32];
			const char *slash = strchr(optarg, '/');
			size_t len = slash ? (size_t)(slash - optarg) : strlen(optarg);
			struct in_addr a;
			uint32_t prefix;
			ok &= len < sizeof(ip) && slash != NULL && parse_u32(slash + 1, &prefix) &&
			      prefix >= 1 && prefix <= 32;
			if (!ok)
				break;
			memcpy(ip, optarg, len);
			ip[len] = '\0';
			ok &= inet_pton(AF_INET, ip, &a) == 1;
			dcfg.ip = ntohl(a.s_addr);
			dcfg.prefix_len = (uint8_t)prefix;
			have_ip = ok;
			break;
		}
		case 'M': {
			unsigned int b[6];
			char tail;
			ok &= sscanf(optarg, "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4],
				     &b[5], &tail) == 6;
			for (int i = 0; ok && i < 6; i++) {
				ok &= b[i] <= 0xff;
				dcfg.mac[i] = (uint8_t)b[i];
			}
			have_mac = ok;
			break;
		}
		case 'L': {
			uint32_t port;
			ok &= parse_u32(optarg, &port) && port > 0 && port < 65535;
			dcfg.local_port = (uint16_t)port;
			break;
		}
		case 'E': ok &= parse_u32(optarg, &dcfg.settle_ms) && dcfg.settle_ms <= 60000; break;
		case 'H': ok &= parse_u32(optarg, &cfg.threads) && cfg.threads >= 1 && cfg.threads <= 64; break;
		case 'G': /* one engine (docs/PERFORMANCE.md "Engines") */
			if (strcmp(optarg, "wire") == 0) {
				fprintf(stderr, "hasp-bench: the wire engine was retired in session 23; "
						"perf/engines runs the hasp-bench of its last commit\n");
				return 2;
			}
			ok &= strcmp(optarg, "libhasp") == 0;
			break;
		case 'X':
			dcfg.idle = strcmp(optarg, "poll") == 0 ? 0 : strcmp(optarg, "hybrid") == 0 ? 1
				  : strcmp(optarg, "sleep") == 0 ? 2 : 99;
			ok &= dcfg.idle <= 2;
			break;
		default: ok = false; break;
		}
	}
	/* EAL arguments follow "--" in DPDK mode; none otherwise. */
	if (!ok || (!dpdk && optind != argc) || (dpdk && (!have_ip || !have_mac))) {
		usage(stderr);
		return 2;
	}
	char *eal_argv[64];
	if (dpdk) {
		int n = argc - optind;
		if (n + 1 > (int)(sizeof(eal_argv) / sizeof(eal_argv[0]))) {
			usage(stderr);
			return 2;
		}
		eal_argv[0] = argv[0];
		for (int i = 0; i < n; i++)
			eal_argv[i + 1] = argv[optind + i];
		dcfg.eal_argc = n + 1;
		dcfg.eal_argv = eal_argv;
	}
	char why[160];
	if (bench_config_auth(&cfg, why, sizeof(why)) != 0 ||
	    bench_config_check(&cfg, why, sizeof(why)) != 0) {
		fprintf(stderr, "hasp-bench: %s\n", why);
		return 2;
	}
	/* Host names become IPv4 addresses once, before any traffic. */
	static char resolved[4096];
	char rerr[512];
	int rrc = resolve_cluster(cfg.cluster, resolved, sizeof(resolved), rerr, sizeof(rerr));
	if (rrc != RESOLVE_OK) {
		fprintf(stderr, "hasp-bench: %s\n", rerr);
		return rrc == RESOLVE_UNAVAILABLE ? 1 : 2;
	}
	cfg.cluster = resolved;
	if (bench_result_init(&res) != 0) {
		fprintf(stderr, "hasp-bench: out of memory\n");
		return 1;
	}
	if (cfg.threads > 1 && (dpdk || cfg.workload == BENCH_WL_BURST ||
				cfg.workload == BENCH_WL_STORM || cfg.clients < cfg.threads)) {
		fprintf(stderr, "hasp-bench: --threads needs kernel mode, a non-burst workload and "
				"at least one client per thread\n");
		bench_result_deinit(&res);
		return 2;
	}
	if (latency_log_path != NULL) {
		cfg.latency_log = fopen(latency_log_path, "w");
		if (cfg.latency_log == NULL) {
			perror(latency_log_path);
			bench_result_deinit(&res);
			return 1;
		}
		/* A line per sample: written in large blocks, not per line. */
		(void)setvbuf(cfg.latency_log, NULL, _IOFBF, 1u << 20);
	}
	/* A long run on a terminal shows it is alive (kernel mode, one
	 * engine); piped or --json output stays one report. */
	if (!json && !dpdk && cfg.threads == 1 && isatty(STDOUT_FILENO))
		cfg.progress = stdout;
	int rc = dpdk ? bench_run_dpdk(&cfg, &dcfg, &res)
		 : cfg.threads > 1 ? run_threads(&cfg, &res)
				   : bench_run_libhasp(&cfg, &res);
	/* A log that could not be written in full is an error, not a shorter log. */
	if (cfg.latency_log != NULL && (ferror(cfg.latency_log) | fclose(cfg.latency_log)) != 0) {
		perror(latency_log_path);
		if (rc == 0)
			rc = -HASP_ESYS;
	}
	if (rc != 0) {
		fprintf(stderr, "hasp-bench: %s\n", hasp_strerror(rc));
		bench_result_deinit(&res);
		return rc == -HASP_ETIMEDOUT ? 3 : rc == -HASP_ECONFIG ? 2 : 1;
	}
	if (json)
		bench_report_json(stdout, BENCH_COMMIT, &cfg, &res);
	else
		bench_report_table(stdout, &cfg, &res);
	if (out_path != NULL) {
		FILE *f = fopen(out_path, "w");
		if (f == NULL) {
			perror(out_path);
			bench_result_deinit(&res);
			return 1;
		}
		bench_report_json(f, BENCH_COMMIT, &cfg, &res);
		fclose(f);
	}
	/* A storm decides for itself: every waiter granted, every watcher
	 * told, in every round it ran (tools/bench_libhasp_storm.c). */
	bool storm_lost = cfg.workload == BENCH_WL_STORM &&
			  (res.err.storm_waiters_missing > 0 || res.err.storm_watchers_missing > 0 ||
			   res.storm_granted == 0);
	bench_result_deinit(&res);
	if (storm_lost)
		fprintf(stderr, "hasp-bench: the storm lost a lock (see storm/errors above)\n");
	return storm_lost ? 4 : 0;
}
