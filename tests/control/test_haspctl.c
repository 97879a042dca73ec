/*
 * haspctl against two real admin servers in this process (node 1 a
 * follower, node 2 the leader) whose lcore commands are played by a fake
 * node thread: argument parsing, human and --json output, exit codes,
 * redirect to the leader through --nodes, status --cluster, snapshot save
 * (attachment to a file) and the offline snapshot restore into a new data
 * directory (haspctl runs tools/hasp-snapshot) read back with storage/.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/version.h"
#include "control/control.h"
#include "control/haspctl_cli.h"
#include "control/json.h"
#include "hasp/errors.h"
#include "storage/hardstate.h"
#include "storage/snapshot.h"
#include "storage/uring.h"
#include "tests/fsync_spy.h"
#include "tests/test_util.h"

struct fake_node {
	uint32_t id;
	uint32_t addresses; /* members.address calls */
	bool leader;
	char sock[160];
	struct control c;
};

static char dir[64];
static char snap_dir[128];
static char snap_file[256];
static struct fake_node nodes[2];
static pthread_t lcore;
static volatile bool stop;
/* A follower that knows no leader (a node joining, or cut off). */
static volatile bool followers_know_no_leader;

/* ---- the fake node's lcore commands ---- */

static bool leader_only(struct fake_node *n, struct control_request *req)
{
	if (n->leader)
		return true;
	control_request_fail(req, -HASP_ENOTLEADER, "not the leader");
	req->leader_id = followers_know_no_leader ? 0 : 2;
	return false;
}

static bool cmd_member(struct control_request *req, void *arg)
{
	struct fake_node *n = arg;
	uint64_t id;
	if (!leader_only(n, req) || !control_arg_u64(req, 0, "id", &id))
		return true;
	json_object_begin(&req->out);
	json_kv_str(&req->out, "op", req->name);
	json_kv_u64(&req->out, "id", id);
	json_kv_u64(&req->out, "argc", req->argc);
	json_kv_u64(&req->out, "node", n->id);
	json_object_end(&req->out);
	return true;
}

static bool cmd_address(struct control_request *req, void *arg)
{
	struct fake_node *n = arg;
	n->addresses++;
	json_object_begin(&req->out);
	json_kv_u64(&req->out, "argc", req->argc);
	json_object_end(&req->out);
	return true;
}

static const char *const lock_names[] = { "alpha", "alpine", "beta" };

static bool cmd_locks_list(struct control_request *req, void *arg)
{
	(void)arg;
	const char *prefix = "";
	for (uint32_t i = 0; i < req->argc; i++)
		if (strncmp(req->argv[i], "prefix=", 7) == 0)
			prefix = req->argv[i] + 7;
	json_object_begin(&req->out);
	json_kv_u64(&req->out, "applied_index", 10);
	json_key(&req->out, "locks");
	json_array_begin(&req->out);
	for (int i = 0; i < 3; i++) {
		if (strncmp(lock_names[i], prefix, strlen(prefix)) != 0)
			continue;
		json_object_begin(&req->out);
		json_kv_str(&req->out, "name", lock_names[i]);
		json_kv_u64(&req->out, "holder", 100 + (uint64_t)i);
		json_kv_u64(&req->out, "token", 7 + (uint64_t)i);
		json_kv_u64(&req->out, "waiters", (uint64_t)i);
		json_object_end(&req->out);
	}
	json_array_end(&req->out);
	json_kv_bool(&req->out, "truncated", false);
	json_object_end(&req->out);
	return true;
}

static bool cmd_locks_show(struct control_request *req, void *arg)
{
	(void)arg;
	if (req->argc != 1 || strcmp(req->argv[0], "alpha") != 0) {
		control_request_fail(req, -HASP_ENOENT, "lock %s is not held",
				     req->argc ? req->argv[0] : "");
		return true;
	}
	json_object_begin(&req->out);
	json_kv_str(&req->out, "name", "alpha");
	json_kv_u64(&req->out, "token", 7);
	json_kv_u64(&req->out, "remaining_ms", 900);
	json_object_end(&req->out);
	return true;
}

static bool cmd_release_force(struct control_request *req, void *arg)
{
	struct fake_node *n = arg;
	if (!leader_only(n, req))
		return true;
	json_object_begin(&req->out);
	json_kv_str(&req->out, "name", req->argv[0]);
	json_kv_u64(&req->out, "released_token", 7);
	json_object_end(&req->out);
	return true;
}

static bool cmd_snapshot_save(struct control_request *req, void *arg)
{
	(void)arg;
	snprintf(req->attach_path, sizeof(req->attach_path), "%s", snap_file);
	json_object_begin(&req->out);
	json_kv_u64(&req->out, "index", 42);
	json_kv_u64(&req->out, "term", 3);
	json_object_end(&req->out);
	return true;
}

static void *lcore_main(void *arg)
{
	(void)arg;
	while (!stop) {
		for (int i = 0; i < 2; i++)
			control_poll(&nodes[i].c, 4);
		struct timespec ts = { 0, 500000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void publish(struct fake_node *n, bool healthy)
{
	struct control_status st = {
		.published_ns = clock_monotonic_ns(), .role = n->leader ? 3 : 0, .term = 4,
		.leader_id = healthy ? 2 : 0, .commit_index = 50, .applied_index = n->leader ? 50 : 45,
		.last_index = 50, .can_commit = healthy, .member_count = 1,
	};
	st.members[0] = (struct control_member){ .id = 1, .role = 1, .ip = 0x0a4d000b,
						 .peer_port = 7001, .client_port = 7000 };
	control_status_publish(&n->c, &st);
}

static void write_snapshot(void)
{
	/* A real snapshot file, written by storage/ like the node does. */
	struct uring_io *u;
	uint8_t membership[] = { 1, 1, 0, 0, 0, 1 };
	uint8_t data[3000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	struct snapshot_meta meta = { .last_index = 42, .last_term = 3,
				      .membership_size = sizeof(membership), .data_size = sizeof(data) };
	assert_int_equal(uring_io_open(&u, snap_dir, 8), 0);
	assert_int_equal(snapshot_save(uring_io_ops(u), &meta, membership, data, 1, NULL), 0);
	uring_io_close(u);
	char name[64];
	snapshot_name(name, sizeof(name), 42, 3);
	snprintf(snap_file, sizeof(snap_file), "%s/%s", snap_dir, name);
}

static int group_setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/hasp-ctl-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(snap_dir, sizeof(snap_dir), "%s/snaps", dir);
	write_snapshot();
	for (int i = 0; i < 2; i++) {
		struct fake_node *n = &nodes[i];
		n->id = (uint32_t)i + 1;
		n->leader = i == 1;
		snprintf(n->sock, sizeof(n->sock), "%s/n%u.sock", dir, n->id);
		struct control_config cfg = { .node_id = n->id, .timeout_ms = 2000 };
		snprintf(cfg.unix_path, sizeof(cfg.unix_path), "%s", n->sock);
		snprintf(cfg.node_address, sizeof(cfg.node_address), "10.77.0.1%u:7000", n->id);
		if (control_init(&n->c, &cfg) != 0)
			return -1;
		const struct control_command cmds[] = {
			{ "members.add", "<id> <ip> <peer> <client>", "add", CONTROL_ON_LCORE, cmd_member, n },
			{ "members.remove", "<id>", "remove", CONTROL_ON_LCORE, cmd_member, n },
			{ "members.address", "<id> <ip> <peer> <client>", "address", CONTROL_ON_LCORE, cmd_address, n },
			{ "members.promote", "<id>", "promote", CONTROL_ON_LCORE, cmd_member, n },
			{ "leader.transfer", "<id>", "transfer", CONTROL_ON_LCORE, cmd_member, n },
			{ "locks.list", "[prefix=P]", "list", CONTROL_ON_LCORE, cmd_locks_list, n },
			{ "locks.show", "<name>", "show", CONTROL_ON_LCORE, cmd_locks_show, n },
			{ "locks.release_force", "<name>", "force", CONTROL_ON_LCORE, cmd_release_force, n },
			{ "snapshot.save", "", "save", CONTROL_ON_LCORE, cmd_snapshot_save, n },
		};
		for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++)
			if (control_register(&n->c, &cmds[k]) != 0)
				return -1;
		if (control_start(&n->c) != 0)
			return -1;
	}
	return pthread_create(&lcore, NULL, lcore_main, NULL);
}

static int group_teardown(void **state)
{
	(void)state;
	stop = true;
	pthread_join(lcore, NULL);
	for (int i = 0; i < 2; i++) {
		control_stop(&nodes[i].c);
		control_deinit(&nodes[i].c);
	}
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- running haspctl ---- */

struct run {
	int code;
	char *out;
	char *err;
};

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* Runs haspctl with a NULL-terminated list of words. */
static struct run ctl(const char *first, ...)
{
	char *argv[32];
	int argc = 0;
	argv[argc++] = (char *)"haspctl";
	va_list ap;
	va_start(ap, first);
	for (const char *a = first; a != NULL; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	struct run r;
	size_t on, en;
	FILE *out = open_memstream(&r.out, &on);
	FILE *err = open_memstream(&r.err, &en);
	r.code = haspctl_main(argc, argv, out, err);
	fclose(out);
	fclose(err);
	return r;
}

static void expect(struct run r, int code, const char *in_out, const char *in_err)
{
	if (r.code != code || (in_out && !strstr(r.out, in_out)) || (in_err && !strstr(r.err, in_err)))
		fail_msg("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", r.code, code, r.out, r.err);
	run_free(&r);
}

#define N1 nodes[0].sock
#define N2 nodes[1].sock

/* ---- tests ---- */

static void test_haspctl_usage_errors_exit_2(void **state)
{
	(void)state;
	unsetenv("HASP_ADMIN");
	/* A usage error says what is wrong and points at --help: the long
	 * usage is printed only when asked for. */
	struct run r = ctl(NULL);
	assert_int_equal(r.code, 2);
	assert_non_null(strstr(r.err, "no command given"));
	assert_non_null(strstr(r.err, "haspctl --help"));
	assert_null(strstr(r.err, "usage:"));
	run_free(&r);
	expect(ctl("status", NULL), 2, NULL, "no node");
	/* An unknown command is named, before any node is needed. */
	expect(ctl("frobnicate", NULL), 2, NULL, "unknown command: frobnicate");
	expect(ctl("--socket", N1, "members", "frob", NULL), 2, NULL, "unknown members command: frob");
	/* --json: a usage error is a JSON object on stdout too. */
	expect(ctl("--json", "--socket", N1, "frobnicate", NULL), 2,
	       "{\"ok\":false,\"error\":\"EUSAGE\",\"message\":\"unknown command: frobnicate", NULL);
	/* Durations with units; a bad one is refused. */
	expect(ctl("--socket", N1, "--timeout", "2s", "status", NULL), 0, "role:", NULL);
	expect(ctl("--socket", N1, "--timeout", "5parsecs", "status", NULL), 2, NULL, "--timeout takes a duration");
	expect(ctl("--socket", N1, "--timeout", "soon", "status", NULL), 2, NULL, "--timeout");
	expect(ctl("--socket", N1, "locks", "release", "alpha", NULL), 2, NULL, "--force");
	expect(ctl("--socket", N1, "members", "add", "4", NULL), 2, NULL, "members add <id>");
	expect(ctl("--socket", N1, "members", "remove", NULL), 2, NULL, "wrong number");
	expect(ctl("--nodes", "1=", "status", NULL), 2, NULL, "--nodes");
	expect(ctl("--bogus", "x", "status", NULL), 2, NULL, "unknown option");
	expect(ctl("--help", NULL), 0, "Exit: 0 ok", NULL);
}

/* -h/--help anywhere describes the command named before it and sends
 * nothing (no node is given: a request would fail with exit 2 or 3);
 * --version answers the release. */
static void test_haspctl_help_per_command_and_version(void **state)
{
	(void)state;
	unsetenv("HASP_ADMIN");
	expect(ctl("members", "add", "--help", NULL), 0,
	       "members add <id> <ip> <peer-port> <client-port> <public-key>\n",
	       NULL);
	expect(ctl("--json", "locks", "release", "-h", NULL), 0, "usage: haspctl", NULL);
	expect(ctl("status", "--help", NULL), 0, "status [--cluster]", NULL);
	expect(ctl("--addr", "127.0.0.1:1", "frob", "--help", NULL), 0, "Exit: 0 ok", NULL);
	expect(ctl("--version", NULL), 0, "haspctl " HASP_VERSION "\n", NULL);
	expect(ctl("--addr", "127.0.0.1:1", "status", "--version", NULL), 0, "haspctl ", NULL);
}

/* A failure without a node reply says which node and why; with --json it
 * is one JSON object on stdout. */
static void test_haspctl_failures_name_the_node_and_print_json(void **state)
{
	(void)state;
	struct run r = ctl("--json", "--socket", "/nonexistent/admin.sock", "status", NULL);
	assert_int_equal(r.code, 3);
	struct json_token t[64];
	assert_true(json_parse(r.out, strlen(r.out), t, 64) > 0);
	assert_true(json_tok_eq(r.out, t, json_get(r.out, t, 0, "node"), "/nonexistent/admin.sock"));
	assert_true(json_tok_eq(r.out, t, json_get(r.out, t, 0, "error"), "ESYS"));
	char msg[160];
	json_tok_str(r.out, t, json_get(r.out, t, 0, "message"), msg, sizeof(msg));
	assert_non_null(strstr(msg, "No such file or directory"));
	run_free(&r);
	/* A refusal names the node that refused. */
	expect(ctl("--socket", N1, "locks", "show", "nope", NULL), 1, NULL, ": ENOENT: lock nope is not held");
	r = ctl("--socket", N1, "locks", "show", "nope", NULL);
	assert_non_null(strstr(r.err, N1));
	run_free(&r);
}

static void test_haspctl_unreachable_node_exits_3(void **state)
{
	(void)state;
	expect(ctl("--socket", "/nonexistent/admin.sock", "status", NULL), 3, NULL, "cannot connect");
	expect(ctl("--addr", "127.0.0.1:1", "health", NULL), 3, NULL, "cannot connect");
}

/* A TCP target may name its host (common/resolve.h): "localhost" is
 * resolved and connected to (nothing listens on port 1: refused, not an
 * invalid address); a name that does not exist is said to be not found. */
static void test_haspctl_tcp_target_takes_a_host_name(void **state)
{
	(void)state;
	expect(ctl("--addr", "localhost:1", "health", NULL), 3, NULL, "cannot connect: Connection refused");
	expect(ctl("--addr", "no-such-host.invalid:7070", "health", NULL), 3, NULL, "cannot connect: not found");
	expect(ctl("--addr", "localhost:0", "health", NULL), 3, NULL, "cannot connect: invalid argument");
}

static void test_haspctl_status_human_and_json(void **state)
{
	(void)state;
	publish(&nodes[1], true);
	expect(ctl("--socket", N2, "status", NULL), 0, "role: leader\n", NULL);
	expect(ctl("--socket", N2, "status", NULL), 0, "members:\nID  ROLE   IP          PEER_PORT", NULL);
	struct run r = ctl("--socket", N2, "--json", "status", NULL);
	assert_int_equal(r.code, 0);
	/* Exactly one JSON object per line: the node's reply. */
	struct json_token t[256];
	size_t len = strlen(r.out);
	assert_true(len > 0 && r.out[len - 1] == '\n');
	assert_true(json_parse(r.out, len - 1, t, 256) > 0);
	assert_true(json_tok_eq(r.out, t, json_get(r.out, t, 0, "command"), "status"));
	uint64_t term;
	assert_true(json_tok_u64(r.out, t, json_get(r.out, t, json_get(r.out, t, 0, "result"), "term"), &term));
	assert_int_equal(term, 4);
	run_free(&r);
	/* $HASP_ADMIN is the default target. */
	setenv("HASP_ADMIN", N2, 1);
	expect(ctl("status", NULL), 0, "id: 2\n", NULL);
	unsetenv("HASP_ADMIN");
}

static void test_haspctl_health_exit_codes(void **state)
{
	(void)state;
	publish(&nodes[0], false);
	expect(ctl("--socket", N1, "health", NULL), 5, "unhealthy: no leader", NULL);
	publish(&nodes[0], true);
	expect(ctl("--socket", N1, "health", NULL), 0, "healthy", NULL);
	expect(ctl("--socket", N1, "--json", "health", NULL), 0, "\"healthy\":true", NULL);
}

static void test_haspctl_leader_commands_redirect_through_nodes(void **state)
{
	(void)state;
	/* Without --nodes, a follower's refusal names the leader: exit 4. */
	expect(ctl("--socket", N1, "members", "add", "4", "10.77.0.14", "7001", "7000", NULL), 4, NULL,
	       "leader is node 2");
	char nodes_arg[512];
	snprintf(nodes_arg, sizeof(nodes_arg), "1=%s,2=%s", N1, N2);
	expect(ctl("--socket", N1, "--nodes", nodes_arg, "members", "add", "4", "10.77.0.14", "7001",
		   "7000", NULL), 0, "node: 2\n", "redirected to the leader, node 2");
	/* Every node listed learned the new member's address first. */
	assert_int_equal(nodes[0].addresses, 1);
	assert_int_equal(nodes[1].addresses, 1);
	expect(ctl("--nodes", nodes_arg, "members", "promote", "4", NULL), 0, "op: members.promote", NULL);
	expect(ctl("--nodes", nodes_arg, "members", "remove", "4", NULL), 0, "op: members.remove", NULL);
	expect(ctl("--nodes", nodes_arg, "leader", "transfer", "1", NULL), 0, "op: leader.transfer", NULL);
	expect(ctl("--nodes", nodes_arg, "--json", "locks", "release", "--force", "alpha", NULL), 0,
	       "\"released_token\":7", NULL);
	/* In JSON mode the refusal is the reply line itself. */
	expect(ctl("--socket", N1, "--json", "leader", "transfer", "1", NULL), 4,
	       "\"error\":\"ENOTLEADER\"", NULL);
	/* The first node of --nodes knows no leader (the fault suite's
	 * re-added node 1): haspctl asks the others rather than giving up. */
	followers_know_no_leader = true;
	expect(ctl("--nodes", nodes_arg, "members", "promote", "4", NULL), 0, "op: members.promote", NULL);
	followers_know_no_leader = false;
}

static void test_haspctl_locks_tables_and_errors(void **state)
{
	(void)state;
	struct run r = ctl("--socket", N1, "locks", "list", "--prefix", "al", NULL);
	if (r.code != 0 || !strstr(r.out, "applied_index: 10\n") ||
	    !strstr(r.out, "NAME    HOLDER  TOKEN  WAITERS\n") || !strstr(r.out, "alpha   100     7      0\n") ||
	    !strstr(r.out, "alpine  101     8      1\n") || strstr(r.out, "beta"))
		fail_msg("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err);
	run_free(&r);
	expect(ctl("--socket", N1, "locks", "show", "alpha", NULL), 0, "remaining_ms: 900\n", NULL);
	expect(ctl("--socket", N1, "locks", "show", "nope", NULL), 1, NULL, "ENOENT: lock nope is not held");
	expect(ctl("--socket", N1, "leases", "list", NULL), 1, NULL, "unknown command: leases.list");
	expect(ctl("--socket", N1, "locks", "list", "--limit", NULL), 2, NULL, "locks list");
	expect(ctl("--socket", N1, "sessions", "list", "--prefix", "x", NULL), 2, NULL, "sessions list");
	expect(ctl("--socket", N1, "--json", "locks", "list", "--prefix", "be", "--limit", "5", NULL), 0,
	       "\"name\":\"beta\"", NULL);
}

static void test_haspctl_metrics_log_help_and_raw(void **state)
{
	(void)state;
	expect(ctl("--socket", N1, "metrics", NULL), 0, "hasp_admin_requests_total", NULL);
	expect(ctl("--socket", N1, "log", "level", "control", "warn", NULL), 0, "level: warn", NULL);
	expect(ctl("--socket", N1, "log", "list", NULL), 0, "control  warn", NULL);
	expect(ctl("--socket", N1, "log", "level", "control", "chatty", NULL), 1, NULL, "EINVAL");
	expect(ctl("--socket", N1, "help", NULL), 0, "locks.release_force", NULL);
	expect(ctl("--socket", N1, "raw", "members.list", NULL), 0, "members:", NULL);
}

static void test_haspctl_status_cluster_table_and_unreachable_node(void **state)
{
	(void)state;
	publish(&nodes[0], true);
	publish(&nodes[1], true);
	char nodes_arg[512];
	snprintf(nodes_arg, sizeof(nodes_arg), "1=%s,2=%s", N1, N2);
	struct run r = ctl("--nodes", nodes_arg, "status", "--cluster", NULL);
	assert_int_equal(r.code, 0);
	assert_non_null(strstr(r.out, "ID   ADDRESS               ROLE          TERM   LEADER"));
	assert_non_null(strstr(r.out, "1    10.77.0.11:7000       follower      4      2      50         45         5        ok\n"));
	assert_non_null(strstr(r.out, "2    10.77.0.12:7000       leader"));
	run_free(&r);
	/* A node that does not answer makes the cluster unhealthy (exit 5). */
	snprintf(nodes_arg, sizeof(nodes_arg), "1=%s,2=%s,3=%s/n3.sock", N1, N2, dir);
	expect(ctl("--nodes", nodes_arg, "status", "--cluster", NULL), 5,
	       "unreachable (ESYS: cannot connect: No such file or directory)", NULL);
	r = ctl("--nodes", nodes_arg, "--json", "status", "--cluster", NULL);
	assert_int_equal(r.code, 5);
	struct json_token t[1024];
	assert_true(json_parse(r.out, strlen(r.out), t, 1024) > 0);
	int list = json_get(r.out, t, 0, "nodes");
	assert_int_equal(t[list].size, 3);
	assert_true(json_tok_eq(r.out, t, json_get(r.out, t, json_at(t, list, 2), "reply"), "null"));
	/* ... and says why it is missing. */
	assert_true(json_tok_eq(r.out, t, json_get(r.out, t, json_at(t, list, 2), "error"), "ESYS"));
	char why[160];
	json_tok_str(r.out, t, json_get(r.out, t, json_at(t, list, 2), "message"), why, sizeof(why));
	assert_non_null(strstr(why, "cannot connect: No such file or directory"));
	run_free(&r);
	expect(ctl("--socket", N1, "status", "--cluster", NULL), 2, NULL, "--nodes");
	/* The node list from a file or from $HASP_NODES. */
	char path[256];
	snprintf(path, sizeof(path), "%s/cluster.conf", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "# the test cluster\n1=%s\n\n  2=%s   # leader\n", N1, N2);
	fclose(f);
	expect(ctl("--config", path, "status", "--cluster", NULL), 0, "2    10.77.0.12:7000       leader", NULL);
	snprintf(nodes_arg, sizeof(nodes_arg), "1=%s,2=%s", N1, N2);
	setenv("HASP_NODES", nodes_arg, 1);
	expect(ctl("status", "--cluster", NULL), 0, "1    10.77.0.11:7000       follower", NULL);
	unsetenv("HASP_NODES");
	expect(ctl("--config", "/nonexistent", "status", NULL), 2, NULL, "--config FILE");
}

static void test_haspctl_snapshot_save_then_restore_offline(void **state)
{
	(void)state;
	char out[256], restored[256], cmd[600];
	snprintf(out, sizeof(out), "%s/backup.snap", dir);
	fsync_spy_reset();
	expect(ctl("--socket", N1, "snapshot", "save", out, NULL), 0, "saved snapshot index=42 term=3", NULL);
	/* The renamed backup's name is durable: its directory was synced
	 * (issue 11 item 15; it was not before). */
	assert_true(fsync_spy_dir_synced(dir));
	snprintf(cmd, sizeof(cmd), "cmp -s %s %s", out, snap_file);
	assert_int_equal(system(cmd), 0);
	struct stat sb;
	char tmp[300];
	snprintf(tmp, sizeof(tmp), "%s.tmp", out);
	assert_int_not_equal(stat(tmp, &sb), 0);

	/* Restore into a new data dir with a new voter set. */
	snprintf(restored, sizeof(restored), "%s/newdata", dir);
	expect(ctl("snapshot", "restore", out, restored, "--members", "1,2,3", NULL), 0,
	       "restored snapshot index=42 term=3", NULL);
	struct uring_io *u;
	struct snapshot snap;
	assert_int_equal(uring_io_open(&u, restored, 8), 0);
	assert_int_equal(snapshot_load(uring_io_ops(u), &snap), 0);
	uring_io_close(u);
	assert_int_equal(snap.meta.last_index, 42);
	assert_int_equal(snap.meta.last_term, 3);
	assert_int_equal(snap.meta.data_size, 3000);
	assert_int_equal(snap.meta.membership_size, 16);
	assert_int_equal(snap.membership[0], 3);
	assert_int_equal(snap.membership[1 + 2 * 5], 3); /* third id */
	assert_int_equal(snap.membership[1 + 2 * 5 + 4], 1); /* voter */
	for (int i = 0; i < 3000; i++)
		assert_int_equal(snap.data[i], (uint8_t)(i * 7));
	snapshot_release(&snap);
	/* The hard state starts at the snapshot's term, with no vote. */
	struct hardstate hsf;
	struct hard_state hs;
	assert_int_equal(uring_io_open(&u, restored, 8), 0);
	assert_int_equal(hardstate_open(&hsf, uring_io_ops(u), &hs), 0);
	assert_int_equal(hs.term, 3);
	assert_int_equal(hs.vote, 0);
	hardstate_close(&hsf);
	uring_io_close(u);

	/* Never into a directory that already holds something. */
	expect(ctl("snapshot", "restore", out, restored, NULL), 1, NULL, "not empty");
	/* A damaged file is refused. */
	int fd = open(out, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "X", 1, 100), 1);
	close(fd);
	snprintf(restored, sizeof(restored), "%s/newdata2", dir);
	expect(ctl("snapshot", "restore", out, restored, NULL), 1, NULL, "not a valid snapshot");
	expect(ctl("snapshot", "restore", out, NULL), 2, NULL, "snapshot restore");

	/* haspctl runs hasp-snapshot (tools/) for the restore: --json passes
	 * through, and a missing program is a clear failure, not a crash. */
	snprintf(restored, sizeof(restored), "%s/newdata3", dir);
	expect(ctl("--json", "snapshot", "restore", snap_file, restored, NULL), 0,
	       "{\"ok\":true,\"command\":\"snapshot.restore\",\"result\":{\"index\":42,\"term\":3", NULL);
	const char *tool = getenv("HASP_SNAPSHOT");
	assert_non_null(tool);
	char saved[512];
	snprintf(saved, sizeof(saved), "%s", tool);
	setenv("HASP_SNAPSHOT", "/nonexistent/hasp-snapshot", 1);
	snprintf(restored, sizeof(restored), "%s/newdata4", dir);
	expect(ctl("snapshot", "restore", snap_file, restored, NULL), 1, NULL, "cannot run");
	setenv("HASP_SNAPSHOT", saved, 1);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_haspctl_usage_errors_exit_2),
		cmocka_unit_test(test_haspctl_unreachable_node_exits_3),
		cmocka_unit_test(test_haspctl_tcp_target_takes_a_host_name),
		cmocka_unit_test(test_haspctl_help_per_command_and_version),
		cmocka_unit_test(test_haspctl_failures_name_the_node_and_print_json),
		cmocka_unit_test(test_haspctl_status_human_and_json),
		cmocka_unit_test(test_haspctl_health_exit_codes),
		cmocka_unit_test(test_haspctl_leader_commands_redirect_through_nodes),
		cmocka_unit_test(test_haspctl_locks_tables_and_errors),
		cmocka_unit_test(test_haspctl_metrics_log_help_and_raw),
		cmocka_unit_test(test_haspctl_status_cluster_table_and_unreachable_node),
		cmocka_unit_test(test_haspctl_snapshot_save_then_restore_offline),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
