/*
 * haspd: the hasp appliance node.
 *
 *   haspd --config FILE [--key value ...] [-- EAL arguments]
 *
 * Binds the node core (node.h) to the dataplane (dp.h): the client and
 * peer UDP ports are handlers on lcore 0, node_work() is the lcore's work
 * hook, and the storage ring's fd wakes the idle lcore when a write
 * completes. The whole node runs on lcore 0, the raft lcore (run to
 * completion: RX burst -> dispatch -> raft step -> WAL submit/reap -> apply
 * -> replies -> TX). With more EAL lcores (-l 0-1), the others are RX
 * lcores: each receives on its own queue and hands its datagrams to lcore 0
 * through an rte_ring (dp_config.rx_forward, rx_forward.h), so the handlers
 * below still run on lcore 0 only (docs/OPERATIONS.md, "More lcores").
 *
 * Exit codes: 0 after SIGINT/SIGTERM (in-flight WAL writes finished),
 * 2 invalid configuration (the message names the field), 3 unusable data
 * directory (the message names the path), 4 runtime failure (EAL, port or
 * a failed disk). SIGUSR1 writes the counters as one JSON line to
 * stats_file (atomically) or stderr; they are printed at exit too.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/auth.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/version.h"
#include "common/wire_auth.h"
#include "dataplane/dp.h"
#include "node/node.h"
#include "node/node_admin.h"
#include "hasp/errors.h"

#define EXIT_CONFIG 2
#define EXIT_DATA_DIR 3
#define EXIT_RUNTIME 4

static struct dp haspd_dp;
static struct node haspd_node;
static struct node_admin haspd_admin; /* control plane: docs/CONTROL.md */
static uint64_t haspd_dp_sum_ns;
static uint64_t haspd_port_read_ns; /* next read of the port counters */
static struct node_config haspd_cfg;
static struct dp_lcore *haspd_lcore; /* the lcore in whose handler or hook we are */
static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t dump_requested;
static volatile sig_atomic_t reload_requested; /* SIGHUP: read the identities file again */
static volatile sig_atomic_t dp_running; /* dp_init done: dp_stop may be called */

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
	/* Ends dp_run() (waking an idle lcore); main() then drains. Before the
	 * dataplane exists, main() sees stop_requested instead. */
	if (dp_running)
		dp_stop(&haspd_dp);
}

static void on_usr1(int sig)
{
	(void)sig;
	dump_requested = 1;
}

static void on_hup(int sig)
{
	(void)sig;
	reload_requested = 1;
}

/* SIGHUP on the lcore: the identities file again, all or nothing
 * (node_admin_identities_reload); the outcome on stderr, without stdio
 * buffers (docs/STYLE.md §6) and never a key. */
static void identities_reload(void)
{
	char err[512], line[640];
	int rc = node_admin_identities_reload(&haspd_admin, err, sizeof(err));
	int n = rc >= 0 ? snprintf(line, sizeof(line), "haspd: SIGHUP: %d client identities loaded\n", rc)
			: snprintf(line, sizeof(line),
				   "haspd: SIGHUP: identities not reloaded, the old set stays: %s\n", err);
	size_t len = n <= 0 ? 0 : (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
	if (write(STDERR_FILENO, line, len) < 0) {
		/* stderr gone: the counters still say it */
	}
}

static void net_send(void *ctx, uint32_t ip, uint16_t dst_port, uint16_t src_port,
		     const void *payload, size_t size)
{
	(void)ctx;
	if (haspd_lcore != NULL)
		(void)dp_udp_send(haspd_lcore, ip, dst_port, src_port, payload, size);
}

/* Event lane `lane` (node.h struct node_event_lanes) is lcore 1 + lane:
 * the node, on lcore 0, posts the encoded event and its session key there. */
static bool event_post(void *ctx, uint32_t lane, uint32_t ip, uint16_t dst_port, uint16_t src_port,
		       const struct auth_key *key, const void *payload, size_t size)
{
	_Static_assert(sizeof(key->bytes) == TX_POST_AUX_SIZE, "the key travels in aux");
	(void)ctx;
	if (haspd_lcore == NULL || size > UINT16_MAX)
		return false;
	struct tx_post_msg hdr = { .dst_ip = ip, .dst_port = dst_port, .src_port = src_port,
				   .payload_size = (uint16_t)size, .has_aux = key != NULL };
	if (key != NULL)
		memcpy(hdr.aux, key->bytes, sizeof(hdr.aux));
	bool queued = dp_post(haspd_lcore, 1 + lane, &hdr, payload);
	explicit_bzero(hdr.aux, sizeof(hdr.aux));
	return queued;
}

/* On lcore 1 + lane: seals what event_post() handed over and sends it from
 * this lcore's TX queue. The key copy is wiped once used. */
static void on_post(struct dp_lcore *lc, struct tx_post_msg *m, void *arg)
{
	(void)arg;
	if (m->has_aux) {
		struct auth_key key;
		memcpy(key.bytes, m->aux, sizeof(key.bytes));
		explicit_bzero(m->aux, sizeof(m->aux));
		hasp_wire_seal(&key, m->payload, m->payload_size);
		auth_key_wipe(&key);
	}
	(void)dp_udp_send(lc, m->dst_ip, m->dst_port, m->src_port, m->payload, m->payload_size);
}

/* With more than one lcore, events leave from lcores 1.. (one lane each,
 * up to NODE_EVENT_LANES_MAX): sealing and sending a watch fan-out is then
 * off the node's lcore (docs/OPERATIONS.md, "More lcores"). 0, or an error
 * already reported. */
static int event_lanes_start(void)
{
	uint32_t lcores = dp_lcore_count(&haspd_dp);
	if (lcores < 2)
		return 0;
	uint32_t lanes = lcores - 1 < NODE_EVENT_LANES_MAX ? lcores - 1 : NODE_EVENT_LANES_MAX;
	int rc = dp_set_post_handler(&haspd_dp, on_post, NULL);
	if (rc == 0) {
		struct node_event_lanes l = { .count = lanes, .send = event_post };
		rc = node_set_event_lanes(&haspd_node, &l);
	}
	if (rc != 0)
		fprintf(stderr, "haspd: event lanes on %u lcores: %s\n", lanes, hasp_strerror(rc));
	return rc;
}

static void on_client(struct dp_lcore *lc, const struct dp_datagram *dg, void *arg)
{
	(void)arg;
	/* rx_forward: RX lcores never call handlers (dp.h). */
	HASP_ASSERT(dp_lcore_index(lc) == 0);
	haspd_lcore = lc;
	node_client_rx(&haspd_node, lc->now_ns, dg->src_ip, dg->src_port, dg->payload,
		       dg->payload_size);
}

static void on_peer(struct dp_lcore *lc, const struct dp_datagram *dg, void *arg)
{
	(void)arg;
	HASP_ASSERT(dp_lcore_index(lc) == 0);
	haspd_lcore = lc;
	node_peer_rx(&haspd_node, lc->now_ns, dg->src_ip, dg->src_port, dg->payload, dg->payload_size);
}

static void dump_stats(bool at_exit)
{
	char buf[8192];
	struct dp_stats dps;
	size_t n = node_stats_json(&haspd_node, buf, sizeof(buf));
	if (n == 0)
		return;
	/* Append the dataplane's counters under "dp". */
	dp_stats_sum(&haspd_dp, &dps);
	char dbuf[4096];
	size_t dn = dp_stats_format_json(&dps, dbuf, sizeof(dbuf));
	/* The port's own counters under "port" (read now: this is not the
	 * packet path). */
	struct dp_port_stats ps;
	if (port_stats_read(&haspd_dp.port, &ps) != 0)
		ps = haspd_admin.port; /* the port is closed: its last reading */
	char pbuf[512];
	size_t pn = dp_port_stats_format_json(&ps, pbuf, sizeof(pbuf));
	struct hasp_alloc_stats alloc;
	hasp_alloc_stats_get(&alloc);
	if (dn > 1 && pn > 1 && n + dn + pn + 80 < sizeof(buf)) {
		while (dn > 0 && (dbuf[dn - 1] == '\n' || dbuf[dn - 1] == '}'))
			dn--;
		n -= 2; /* "}\n" */
		n += (size_t)snprintf(buf + n, sizeof(buf) - n,
				      ",\"dp\":%.*s},\"port\":%.*s,\"alloc_forbidden\":%llu}\n", (int)dn,
				      dbuf, (int)pn, pbuf, (unsigned long long)alloc.forbidden_count);
	}
	if (haspd_cfg.stats_file[0] != '\0') {
		char tmp[NODE_PATH_SIZE + 8];
		snprintf(tmp, sizeof(tmp), "%s.tmp", haspd_cfg.stats_file);
		/* open/write, not fopen: stdio mallocs its buffer, and this
		 * runs on the lcore (SIGUSR1), where nothing may allocate. */
		int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			bool ok = write(fd, buf, n) == (ssize_t)n;
			close(fd);
			if (ok)
				(void)rename(tmp, haspd_cfg.stats_file);
		}
	}
	if (at_exit || haspd_cfg.stats_file[0] == '\0')
		fwrite(buf, 1, n, stderr);
}

static bool work(struct dp_lcore *lc, uint64_t now_ns, uint64_t *deadline_ns, void *arg)
{
	(void)arg;
	if (dp_lcore_index(lc) != 0)
		return false;
	haspd_lcore = lc;
	if (dump_requested) {
		/* Inside the forbidden window like everything else here:
		 * dump_stats() uses no stdio buffers (docs/STYLE.md §6). */
		dump_requested = 0;
		dump_stats(false);
	}
	if (reload_requested) {
		reload_requested = 0;
		identities_reload();
	}
	bool did = node_work(&haspd_node, now_ns, deadline_ns);
	/* The control plane after the node's step: admin commands run here,
	 * on the node's thread; status and metrics are published. The
	 * dataplane's counters are summed for it every 10 ms. */
	struct dp_stats dps, *dpp = NULL;
	if (now_ns >= haspd_dp_sum_ns) {
		dp_stats_sum(&haspd_dp, &dps);
		dpp = &dps;
		haspd_dp_sum_ns = now_ns + 10000000ull;
	}
	/* The port's counters (a system call per queue on net_af_packet):
	 * every second, off the per-packet path. */
	if (now_ns >= haspd_port_read_ns) {
		struct dp_port_stats ps;
		if (port_stats_read(&haspd_dp.port, &ps) == 0)
			haspd_admin.port = ps;
		haspd_port_read_ns = now_ns + 1000000000ull;
	}
	did |= node_admin_work(&haspd_admin, now_ns, dpp, deadline_ns);
	return did;
}

int main(int argc, char **argv)
{
	char err[1024];
	/* Handlers first: a SIGUSR1 (stats) or SIGTERM during start-up must
	 * not kill the process with the default action. A stats request is
	 * served once the node runs; a stop request ends the start-up. */
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	signal(SIGUSR1, on_usr1);
	if (version_requested(argc, argv, "haspd"))
		return 0;
	signal(SIGHUP, on_hup);
	int rc = node_config_load(&haspd_cfg, argc, argv, err, sizeof(err));

	if (rc == 1) {
		fputs(err, stdout);
		return 0;
	}
	if (rc != 0) {
		fprintf(stderr, "haspd: configuration error: %s\n", err);
		return EXIT_CONFIG;
	}
	const struct node_member *self = node_config_self(&haspd_cfg);

	/* Storage first: an unusable data dir is reported before any
	 * interface is created. io_uring creates no thread, so the rule
	 * "no thread before dp_init()" holds. */
	struct node_net net = { .send = net_send };
	rc = node_init(&haspd_node, &haspd_cfg, (struct storage_io){ 0 }, &net, clock_monotonic_ns(),
		       err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "haspd: %s\n", err);
		return rc == -HASP_ECONFIG ? EXIT_CONFIG : EXIT_DATA_DIR;
	}

	struct dp_config dcfg = {
		.eal_argc = haspd_cfg.eal_argc, .eal_argv = haspd_cfg.eal_argv,
		.port_name = haspd_cfg.port_name[0] ? haspd_cfg.port_name : NULL,
		.ip = haspd_cfg.ip, .prefix_len = haspd_cfg.prefix_len, .gateway = haspd_cfg.gateway,
		.idle = haspd_cfg.idle, .idle_spin = haspd_cfg.idle_spin,
		.rx_forward = true, /* the node core is single-threaded */
	};
	memcpy(dcfg.mac.bytes, haspd_cfg.mac, 6);
	rc = dp_init(&haspd_dp, &dcfg);
	if (rc == 0)
		dp_running = 1;
	if (rc != 0) {
		fprintf(stderr, "haspd: dataplane init failed (eal/port): %s\n", hasp_strerror(rc));
		node_deinit(&haspd_node);
		return rc == -HASP_EINVAL ? EXIT_CONFIG : EXIT_RUNTIME;
	}
	if (dp_udp_register(&haspd_dp, self->client_port, on_client, NULL) != 0 ||
	    dp_udp_register(&haspd_dp, self->peer_port, on_peer, NULL) != 0) {
		fprintf(stderr, "haspd: member: cannot register UDP ports %u/%u\n", self->client_port,
			self->peer_port);
		dp_deinit(&haspd_dp);
		node_deinit(&haspd_node);
		return EXIT_CONFIG;
	}
	dp_set_work(&haspd_dp, work, NULL);
	if (event_lanes_start() != 0) {
		dp_deinit(&haspd_dp);
		node_deinit(&haspd_node);
		return EXIT_RUNTIME;
	}
	/* After the lanes: the metrics have a row per lcore that sends. */
	char admin_path[NODE_PATH_SIZE + 16];
	if (haspd_cfg.admin_socket[0] != '\0')
		snprintf(admin_path, sizeof(admin_path), "%s", haspd_cfg.admin_socket);
	else
		snprintf(admin_path, sizeof(admin_path), "%s/admin.sock", haspd_cfg.data_dir);
	rc = node_admin_init(&haspd_admin, &haspd_node, admin_path, haspd_cfg.admin_addr);
	if (rc != 0) {
		fprintf(stderr, "haspd: admin: %s\n", hasp_strerror(rc));
		dp_deinit(&haspd_dp);
		node_deinit(&haspd_node);
		return EXIT_CONFIG;
	}
	int wake = node_wake_fd(&haspd_node);
	if (wake >= 0 && dp_add_wake_fd(&haspd_dp, wake) != 0)
		fprintf(stderr, "haspd: warning: storage ring fd not registered for wake-ups\n");
	if (dp_add_wake_fd(&haspd_dp, node_admin_wake_fd(&haspd_admin)) != 0)
		fprintf(stderr, "haspd: warning: admin eventfd not registered for wake-ups\n");

	/* The snapshot writer and the admin thread start after EAL init (no
	 * thread before it); the admin thread inherits the signal mask
	 * dp_init set, the writer blocks every signal. */
	if (node_start_threads(&haspd_node) != 0)
		fprintf(stderr, "haspd: warning: no snapshot writer thread yet (the first snapshot "
				"tries again, then saves on the lcore)\n");
	rc = node_admin_start(&haspd_admin);
	if (rc != 0) {
		fprintf(stderr, "haspd: admin: cannot listen on %s %s: %s\n", admin_path,
			haspd_cfg.admin_addr, hasp_strerror(rc));
		dp_deinit(&haspd_dp);
		node_admin_deinit(&haspd_admin);
		node_deinit(&haspd_node);
		return EXIT_CONFIG;
	}
	/* A stop requested during start-up, before dp_running was set, has
	 * no dp_stop() to end dp_run(): do it now. */
	if (stop_requested)
		dp_stop(&haspd_dp);
	fprintf(stderr, "haspd: ready node=%u pid=%d cluster=%llu client_port=%u peer_port=%u data_dir=%s admin=%s\n",
		haspd_cfg.node_id, (int)getpid(), (unsigned long long)haspd_cfg.cluster_id, self->client_port,
		self->peer_port, haspd_cfg.data_dir, admin_path);

	int run_rc = dp_run(&haspd_dp);
	/* SIGINT/SIGTERM ended the loop (dp_stop): take no more requests
	 * (nothing is received any more) and finish the in-flight WAL writes
	 * and hard-state saves before exiting. Sends are off from here. */
	haspd_lcore = NULL;
	node_admin_stop(&haspd_admin);
	node_stop(&haspd_node);
	int code = haspd_node.failed ? EXIT_RUNTIME : (run_rc == 0 ? 0 : EXIT_RUNTIME);
	dump_stats(true);
	haspd_lcore = NULL;
	dp_deinit(&haspd_dp);
	node_admin_deinit(&haspd_admin);
	node_deinit(&haspd_node);
	fprintf(stderr, "haspd: stopped node=%u exit=%d\n", haspd_cfg.node_id, code);
	return code;
}
