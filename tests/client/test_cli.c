/*
 * The `hasp` CLI: the argument parser as a function, exit-code mapping, and
 * the real binary (path in argv[1]) run against the scripted responder on
 * 127.0.0.1, including `hasp run` killing its command when the lock is lost
 * and passing the command's status through when it is not.
 *
 * Child processes are bounded: each is killed after 15 s at the latest.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/version.h"
#include "hasp/client.h"
#include "tests/client/responder.h"
#include "tests/test_util.h"
#include "tools/hasp_cli.h"

#define MS 1000000ull

static const char *hasp_path;

/* ---- parser ---- */

static int parse(struct hasp_cli_args *a, const char *env, const char *const *words)
{
	char *argv[32];
	char err[160];
	int argc = 0;

	argv[argc++] = (char *)"hasp";
	for (; *words != NULL && argc < 31; words++)
		argv[argc++] = (char *)*words;
	argv[argc] = NULL;
	return hasp_cli_parse(argc, argv, env, a, err, sizeof(err));
}

#define PARSE(a, env, ...) parse((a), (env), (const char *const[]){ __VA_ARGS__, NULL })

static void test_parse_acquire_options_and_defaults(void **state)
{
	struct hasp_cli_args a;
	(void)state;

	assert_int_equal(PARSE(&a, "10.0.0.1:7000", "acquire", "job"), 0);
	assert_int_equal(a.cmd, HASP_CLI_ACQUIRE);
	assert_string_equal(a.name, "job");
	assert_string_equal(a.cluster, "10.0.0.1:7000");
	assert_int_equal(a.ttl_ms, HASP_CLI_TTL_MS_DEFAULT);
	assert_false(a.wait);
	assert_false(a.json);

	/* Global options anywhere; --cluster beats the environment. */
	assert_int_equal(PARSE(&a, "env:1", "--json", "acquire", "job", "--ttl", "1500", "--wait",
			       "--cluster", "127.0.0.1:1", "--timeout", "250"),
			 0);
	assert_true(a.json);
	assert_true(a.wait);
	assert_int_equal(a.ttl_ms, 1500);
	assert_int_equal(a.timeout_ms, 250);
	assert_string_equal(a.cluster, "127.0.0.1:1");

	assert_int_equal(PARSE(&a, "c:1", "acquire", "job", "--lease", "99"), 0);
	assert_int_equal(a.lease_id, 99);
	assert_int_equal(a.ttl_ms, 0);
}

static void test_parse_refuses_bad_usage_with_exit_2(void **state)
{
	struct hasp_cli_args a;
	(void)state;

	assert_int_equal(PARSE(&a, NULL, "acquire", "job"), HASP_CLI_EXIT_USAGE); /* no cluster */
	assert_int_equal(PARSE(&a, "c:1", "acquire"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "acquire", "job", "--ttl", "5", "--lease", "3"),
			 HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "acquire", "job", "--ttl", "x"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "acquire", "job", "--ttl"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "acquire", "job", "--prefix"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "release", "job", "0"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "release", "job", "-3"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "release", "job", "1", "extra"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "frobnicate"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "kv"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "kv", "frob"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "kv", "cas", "k", "v"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "kv", "cas", "k", "v", "--rev", "1", "--expect", "o"),
			 HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "run", "job"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "read", "job", "--", "ls"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "--timeout", "0", "read", "job"), HASP_CLI_EXIT_USAGE);
}

static void test_parse_subcommands(void **state)
{
	struct hasp_cli_args a;
	(void)state;

	assert_int_equal(PARSE(&a, "c:1", "renew", "job", "17"), 0);
	assert_int_equal(a.cmd, HASP_CLI_RENEW);
	assert_int_equal(a.token, 17);
	assert_int_equal(a.ttl_ms, HASP_CLI_TTL_MS_DEFAULT);
	assert_int_equal(PARSE(&a, "c:1", "watch", "svc/", "--prefix", "--count", "3"), 0);
	assert_true(a.prefix);
	assert_int_equal(a.count, 3);
	assert_int_equal(PARSE(&a, "c:1", "lease", "grant", "5000"), 0);
	assert_int_equal(a.cmd, HASP_CLI_LEASE_GRANT);
	assert_int_equal(a.ttl_ms, 5000);
	assert_int_equal(PARSE(&a, "c:1", "lease", "revoke", "12"), 0);
	assert_int_equal(a.cmd, HASP_CLI_LEASE_REVOKE);
	assert_int_equal(a.lease_id, 12);
	assert_int_equal(PARSE(&a, "c:1", "kv", "cas", "k", "new", "--expect", "old"), 0);
	assert_int_equal(a.cmd, HASP_CLI_KV_CAS);
	assert_true(a.cas_value);
	assert_string_equal(a.expected_value, "old");
	assert_string_equal(a.value, "new");
	assert_int_equal(PARSE(&a, "c:1", "kv", "range"), 0);
	assert_null(a.name);
	assert_int_equal(PARSE(&a, "c:1", "kv", "range", "svc/", "--limit", "10"), 0);
	assert_string_equal(a.name, "svc/");
	assert_int_equal(a.limit, 10);

	/* run: everything after -- is the command, options included. */
	assert_int_equal(PARSE(&a, "c:1", "run", "job", "--ttl", "600", "--", "sh", "-c",
			       "echo --ttl"),
			 0);
	assert_int_equal(a.cmd, HASP_CLI_RUN);
	assert_int_equal(a.ttl_ms, 600);
	assert_int_equal(a.command_count, 3);
	assert_string_equal(a.command[0], "sh");
	assert_string_equal(a.command[2], "echo --ttl");
	assert_int_equal(PARSE(&a, "c:1", "run", "job", "--", "true"), 0);
	assert_int_equal(a.ttl_ms, HASP_CLI_RUN_TTL_MS_DEFAULT);
	assert_int_equal(a.grace_ms, HASP_CLI_GRACE_MS_DEFAULT);
}

static void test_parse_durations_with_units_and_ttl_range(void **state)
{
	struct hasp_cli_args a;
	(void)state;

	assert_int_equal(PARSE(&a, "c:1", "acquire", "job", "--ttl", "5s"), 0);
	assert_int_equal(a.ttl_ms, 5000);
	assert_int_equal(PARSE(&a, "c:1", "acquire", "job", "--ttl", "2m", "--timeout", "500ms"), 0);
	assert_int_equal(a.ttl_ms, 120000);
	assert_int_equal(a.timeout_ms, 500);
	assert_int_equal(PARSE(&a, "c:1", "acquire", "job", "--ttl", "1500"), 0); /* bare: ms */
	assert_int_equal(a.ttl_ms, 1500);
	assert_int_equal(PARSE(&a, "c:1", "lease", "grant", "1h"), 0);
	assert_int_equal(a.ttl_ms, 3600000);
	assert_int_equal(PARSE(&a, "c:1", "run", "job", "--grace", "2s", "--", "true"), 0);
	assert_int_equal(a.grace_ms, 2000);
	/* The TTL range is the protocol's: 10 ms .. 24 h. */
	assert_int_equal(PARSE(&a, "c:1", "acquire", "job", "--ttl", "9ms"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "acquire", "job", "--ttl", "25h"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "acquire", "job", "--ttl", "5x"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "acquire", "job", "--ttl", "s"), HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "lease", "grant", "99999999999999999999h"), HASP_CLI_EXIT_USAGE);
}

/* The error states the rule, and long input is not echoed whole. */
static void test_parse_errors_state_the_input_rules(void **state)
{
	char *argv[8] = { (char *)"hasp", (char *)"acquire", NULL, (char *)"--ttl", (char *)"1d", NULL };
	char name[300];
	char err[320];
	struct hasp_cli_args a;
	(void)state;

	argv[2] = (char *)"bad name";
	assert_int_equal(hasp_cli_parse(3, argv, "c:1", &a, err, sizeof(err)), HASP_CLI_EXIT_USAGE);
	assert_non_null(strstr(err, "invalid name \"bad name\" (8 bytes): want 1..128 bytes of 0x21..0x7e"));
	memset(name, 'x', 200);
	name[200] = '\0';
	argv[2] = name;
	assert_int_equal(hasp_cli_parse(3, argv, "c:1", &a, err, sizeof(err)), HASP_CLI_EXIT_USAGE);
	assert_non_null(strstr(err, "... (200 bytes)"));
	assert_true(strlen(err) < 200);
	argv[2] = (char *)"job";
	assert_int_equal(hasp_cli_parse(5, argv, "c:1", &a, err, sizeof(err)), HASP_CLI_EXIT_USAGE);
	assert_non_null(strstr(err, "--ttl 1d: want a TTL of 10ms..24h"));
	argv[1] = (char *)"frob\x01";
	assert_int_equal(hasp_cli_parse(2, argv, "c:1", &a, err, sizeof(err)), HASP_CLI_EXIT_USAGE);
	assert_string_equal(err, "unknown command: frob\\x01");
}

static void test_parse_help_and_version_need_no_cluster(void **state)
{
	struct hasp_cli_args a;
	(void)state;

	assert_int_equal(PARSE(&a, NULL, "acquire", "--help"), 0);
	assert_int_equal(a.cmd, HASP_CLI_HELP);
	assert_int_equal(a.help_for, HASP_CLI_ACQUIRE);
	assert_int_equal(PARSE(&a, NULL, "kv", "cas", "-h"), 0);
	assert_int_equal(a.help_for, HASP_CLI_KV_CAS);
	assert_int_equal(PARSE(&a, NULL, "help", "lease", "grant"), 0);
	assert_int_equal(a.cmd, HASP_CLI_HELP);
	assert_int_equal(a.help_for, HASP_CLI_LEASE_GRANT);
	assert_int_equal(PARSE(&a, NULL, "--help"), 0);
	assert_int_equal(a.help_for, HASP_CLI_HELP);
	assert_int_equal(PARSE(&a, NULL, "frob", "--version"), 0);
	assert_int_equal(a.cmd, HASP_CLI_VERSION);
	/* A lock named "help" is a name; --help after "--" is the command's. */
	assert_int_equal(PARSE(&a, "c:1", "acquire", "help"), 0);
	assert_int_equal(a.cmd, HASP_CLI_ACQUIRE);
	assert_int_equal(PARSE(&a, "c:1", "run", "job", "--", "ls", "--help"), 0);
	assert_int_equal(a.cmd, HASP_CLI_RUN);
}

/* run blocks by default (like flock); --try and --conflict-exit-code. */
static void test_parse_run_blocks_unless_try(void **state)
{
	struct hasp_cli_args a;
	(void)state;

	assert_int_equal(PARSE(&a, "c:1", "run", "job", "--", "true"), 0);
	assert_true(a.wait);
	assert_int_equal(a.conflict_exit_code, 1);
	assert_int_equal(PARSE(&a, "c:1", "run", "job", "--try", "--conflict-exit-code", "75", "--", "true"), 0);
	assert_false(a.wait);
	assert_int_equal(a.conflict_exit_code, 75);
	assert_int_equal(PARSE(&a, "c:1", "--timeout", "2s", "run", "job", "--", "true"), 0);
	assert_true(a.wait);
	assert_int_equal(a.timeout_ms, 2000);
	assert_int_equal(PARSE(&a, "c:1", "run", "job", "--try", "--timeout", "1s", "--", "true"),
			 HASP_CLI_EXIT_USAGE);
	assert_int_equal(PARSE(&a, "c:1", "run", "job", "--conflict-exit-code", "256", "--", "true"),
			 HASP_CLI_EXIT_USAGE);
}

static void test_cluster_host_names_are_resolved(void **state)
{
	char out[256];
	char err[256];
	(void)state;

	assert_int_equal(hasp_cli_resolve_cluster("localhost:7000,10.0.0.1:7001", out, sizeof(out), err,
						  sizeof(err)),
			 0);
	assert_string_equal(out, "127.0.0.1:7000,10.0.0.1:7001");
	assert_int_equal(hasp_cli_resolve_cluster("no-such-host.invalid:7000", out, sizeof(out), err,
						  sizeof(err)),
			 HASP_CLI_EXIT_USAGE);
	assert_non_null(strstr(err, "cannot resolve the host name \"no-such-host.invalid\""));
	assert_int_equal(hasp_cli_resolve_cluster("10.0.0.1", out, sizeof(out), err, sizeof(err)),
			 HASP_CLI_EXIT_USAGE);
	assert_non_null(strstr(err, "want host:port"));
}

static void test_exit_codes_map_statuses_and_errors(void **state)
{
	(void)state;
	assert_int_equal(hasp_cli_exit_code(HASP_STATUS_GRANTED, HASP_STATUS_GRANTED), 0);
	assert_int_equal(hasp_cli_exit_code(HASP_STATUS_BUSY, HASP_STATUS_GRANTED), 1);
	assert_int_equal(hasp_cli_exit_code(HASP_STATUS_NOT_HOLDER, HASP_STATUS_OK), 1);
	assert_int_equal(hasp_cli_exit_code(HASP_STATUS_NOT_FOUND, HASP_STATUS_OK), 1);
	assert_int_equal(hasp_cli_exit_code(-HASP_ETIMEDOUT, HASP_STATUS_OK), 3);
	assert_int_equal(hasp_cli_exit_code(-HASP_ESYS, HASP_STATUS_OK), 3);
	assert_int_equal(hasp_cli_exit_code(-HASP_ENAME, HASP_STATUS_OK), 2);
	assert_int_equal(hasp_cli_exit_code(-HASP_ECONFIG, HASP_STATUS_OK), 2);
}

/* ---- the binary against the responder ---- */

enum renew_mode { RENEW_GRANT, RENEW_REFUSE, RENEW_DROP };

struct cli_script {
	bool busy;
	enum renew_mode renew;
	int renews;
	int releases;
	uint64_t released_token;
};

static void script_cli(struct responder *r, int node, const struct hasp_wire_msg *req,
		       const struct sockaddr_in *from, void *arg)
{
	struct cli_script *s = arg;
	struct hasp_wire_msg rep;

	if (req == NULL || responder_answer_session(r, node, req, from))
		return;
	switch (req->hdr.opcode) {
	case HASP_OP_ACQUIRE:
		if (s->busy) {
			responder_reply_init(&rep, req, HASP_STATUS_BUSY);
			rep.body.busy.holder_token = 41;
		} else {
			responder_reply_init(&rep, req, HASP_STATUS_GRANTED);
			rep.body.granted.token = 42;
			rep.body.granted.ttl_ms = req->body.acquire.ttl_ms;
		}
		break;
	case HASP_OP_RENEW:
		responder_lock(r);
		s->renews++;
		responder_unlock(r);
		if (s->renew == RENEW_DROP)
			return;
		if (s->renew == RENEW_REFUSE) {
			responder_reply_init(&rep, req, HASP_STATUS_NOT_HOLDER);
		} else {
			responder_reply_init(&rep, req, HASP_STATUS_GRANTED);
			rep.body.granted.token = req->body.renew.token;
			rep.body.granted.ttl_ms = req->body.renew.ttl_ms;
		}
		break;
	case HASP_OP_RELEASE:
		responder_lock(r);
		s->releases++;
		s->released_token = req->body.release.token;
		responder_unlock(r);
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		break;
	case HASP_OP_LOCK_READ:
		responder_reply_init(&rep, req, HASP_STATUS_NOT_FOUND);
		break;
	case HASP_OP_WATCH:
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		responder_send(r, node, from, &rep);
		responder_push_event(r, node, HASP_EVENT_KV_PUT, "svc/a", 5, "x\"y", 3);
		responder_push_event(r, node, HASP_EVENT_LOCK_RELEASED, "svc/b", 6, NULL, 0);
		return;
	default:
		responder_reply_init(&rep, req, HASP_STATUS_OK);
	}
	responder_send(r, node, from, &rep);
}

/* Reads a script counter under the responder's lock (the script runs on
 * the responder thread). */
static uint64_t script_read(struct responder *r, const void *field, size_t size)
{
	uint64_t v = 0;

	responder_lock(r);
	if (size == sizeof(int))
		v = (uint64_t)*(const int *)field;
	else
		v = *(const uint64_t *)field;
	responder_unlock(r);
	return v;
}

#define SCRIPT_READ(r, field) script_read((r), &(field), sizeof(field))

struct run_result {
	int exit_code; /* -1: did not exit in time */
	char out[2048];
};

/* Runs `hasp words...` with HASP_CLUSTER=cluster, capturing stdout. */
static void run_hasp(const char *cluster, const char *const *words, struct run_result *res)
{
	char *argv[32];
	int argc = 0;
	int fds[2];
	size_t used = 0;
	int status = 0;
	uint64_t t0 = clock_monotonic_ns();

	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	argv[argc++] = (char *)hasp_path;
	for (; *words != NULL && argc < 31; words++)
		argv[argc++] = (char *)*words;
	argv[argc] = NULL;
	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		setenv("HASP_CLUSTER", cluster, 1);
		execv(hasp_path, argv);
		_exit(126);
	}
	close(fds[1]);
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	for (;;) {
		struct pollfd p = { .fd = fds[0], .events = POLLIN };
		(void)poll(&p, 1, 20);
		ssize_t n = read(fds[0], res->out + used, sizeof(res->out) - 1 - used);
		if (n > 0)
			used += (size_t)n;
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		if (clock_monotonic_ns() - t0 > 15000 * MS) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			close(fds[0]);
			res->exit_code = -1; /* still running: no exit code matches */
			return;
		}
	}
	for (int i = 0; i < 10; i++) {
		ssize_t n = read(fds[0], res->out + used, sizeof(res->out) - 1 - used);
		if (n <= 0)
			break;
		used += (size_t)n;
	}
	close(fds[0]);
	res->out[used] = '\0';
	res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define RUN_HASP(cluster, res, ...) run_hasp((cluster), (const char *const[]){ __VA_ARGS__, NULL }, (res))

static void test_binary_acquire_prints_token_and_exit_codes(void **state)
{
	static struct cli_script s = { 0 };
	static struct responder r;
	struct run_result res;
	char cluster[128];
	(void)state;

	assert_int_equal(responder_start(&r, 1, script_cli, &s), 0);
	responder_cluster(&r, cluster, sizeof(cluster));

	RUN_HASP(cluster, &res, "acquire", "job", "--ttl", "60000");
	assert_int_equal(res.exit_code, 0);
	assert_non_null(strstr(res.out, "GRANTED name=job token=42 "));
	assert_non_null(strstr(res.out, "ttl_ms=60000"));

	RUN_HASP(cluster, &res, "--json", "release", "job", "42");
	assert_int_equal(res.exit_code, 0);
	assert_string_equal(res.out, "{\"status\":\"RELEASED\",\"name\":\"job\",\"token\":42}\n");
	assert_int_equal(SCRIPT_READ(&r, s.released_token), 42);

	responder_lock(&r);
	s.busy = true;
	responder_unlock(&r);
	RUN_HASP(cluster, &res, "--json", "acquire", "job");
	assert_int_equal(res.exit_code, HASP_CLI_EXIT_REFUSED);
	assert_string_equal(res.out, "{\"status\":\"BUSY\",\"name\":\"job\",\"holder_token\":41}\n");

	RUN_HASP(cluster, &res, "read", "job");
	assert_int_equal(res.exit_code, HASP_CLI_EXIT_REFUSED); /* NOT_FOUND: free */

	RUN_HASP(cluster, &res, "--json", "watch", "svc/", "--prefix", "--count", "2");
	assert_int_equal(res.exit_code, 0);
	assert_string_equal(res.out,
			    "{\"event\":\"KV_PUT\",\"name\":\"svc/a\",\"revision\":5,"
			    "\"value\":\"x\\\"y\"}\n"
			    "{\"event\":\"LOCK_RELEASED\",\"name\":\"svc/b\",\"revision\":6}\n");

	RUN_HASP(cluster, &res, "acquire", "bad name");
	assert_int_equal(res.exit_code, HASP_CLI_EXIT_USAGE);
	/* --json: a usage error is a JSON object on stdout too. */
	RUN_HASP(cluster, &res, "--json", "acquire", "bad name");
	assert_int_equal(res.exit_code, HASP_CLI_EXIT_USAGE);
	assert_non_null(strstr(res.out, "{\"error\":\"EUSAGE\",\"message\":\"invalid name"));
	RUN_HASP(cluster, &res, "--version");
	assert_int_equal(res.exit_code, 0);
	assert_string_equal(res.out, "hasp " HASP_VERSION "\n");
	RUN_HASP(cluster, &res, "run", "--help");
	assert_int_equal(res.exit_code, 0);
	assert_non_null(strstr(res.out, "--conflict-exit-code N"));

	/* run --try on a busy lock: the conflict exit code, the command not
	 * run. */
	RUN_HASP(cluster, &res, "run", "job", "--try", "--", "echo", "ran");
	assert_int_equal(res.exit_code, 1);
	assert_null(strstr(res.out, "ran"));
	RUN_HASP(cluster, &res, "--json", "run", "job", "--try", "--conflict-exit-code", "75", "--", "echo",
		 "ran");
	assert_int_equal(res.exit_code, 75);
	assert_non_null(strstr(res.out, "\"status\":\"BUSY\""));
	assert_null(strstr(res.out, "ran"));
	responder_stop(&r);

	/* Nobody listens any more: unavailable (it gives up: RUN_HASP fails a
	 * run that is still going after 15 s). */
	RUN_HASP(cluster, &res, "--timeout", "300", "check", "job", "42");
	assert_int_equal(res.exit_code, HASP_CLI_EXIT_UNAVAILABLE);
}

static void test_run_kills_command_when_renew_is_refused(void **state)
{
	static struct cli_script s = { .renew = RENEW_REFUSE };
	static struct responder r;
	struct run_result res;
	char cluster[128];
	(void)state;

	assert_int_equal(responder_start(&r, 1, script_cli, &s), 0);
	responder_cluster(&r, cluster, sizeof(cluster));
	/* Renewed every 100 ms; the first renew is refused. The command
	 * ignores nothing, so SIGTERM ends it: its status says it was killed
	 * (it would have slept past RUN_HASP's 15 s limit otherwise). */
	RUN_HASP(cluster, &res, "--json", "run", "job", "--ttl", "300", "--", "sleep", "60");
	assert_int_equal(res.exit_code, HASP_CLI_EXIT_LOCK_LOST);
	/* 128 + SIGTERM; 128 + SIGKILL if a loaded machine let the grace
	 * period pass before sleep died: killed either way. */
	assert_true(strstr(res.out, "\"command_status\":143") != NULL ||
		    strstr(res.out, "\"command_status\":137") != NULL);
	assert_int_equal(SCRIPT_READ(&r, s.renews), 1);
	assert_int_equal(SCRIPT_READ(&r, s.releases), 0); /* not ours any more */
	responder_stop(&r);
}

static void test_run_kills_command_when_validity_passes_without_renew(void **state)
{
	static struct cli_script s = { .renew = RENEW_DROP };
	static struct responder r;
	struct run_result res;
	char cluster[128];
	(void)state;

	assert_int_equal(responder_start(&r, 1, script_cli, &s), 0);
	responder_cluster(&r, cluster, sizeof(cluster));
	/* Renews go unanswered; the command ignores SIGTERM (inherited by
	 * sleep), so SIGKILL follows after the 200 ms grace. */
	RUN_HASP(cluster, &res, "--json", "run", "job", "--ttl", "300", "--grace", "200", "--",
		 "sh", "-c", "trap '' TERM; sleep 60");
	assert_int_equal(res.exit_code, HASP_CLI_EXIT_LOCK_LOST);
	assert_true(SCRIPT_READ(&r, s.renews) >= 1);
	assert_non_null(strstr(res.out, "\"status\":\"LOCK_LOST\""));
	assert_non_null(strstr(res.out, "\"command_status\":137")); /* 128 + SIGKILL */
	responder_stop(&r);
}

static void test_run_passes_fence_and_propagates_exit_status(void **state)
{
	static struct cli_script s = { .renew = RENEW_GRANT };
	static struct responder r;
	struct run_result res;
	char cluster[128];
	(void)state;

	assert_int_equal(responder_start(&r, 1, script_cli, &s), 0);
	responder_cluster(&r, cluster, sizeof(cluster));
	RUN_HASP(cluster, &res, "run", "job", "--ttl", "300", "--", "sh", "-c",
		 "sleep 0.5; test \"$HASP_FENCE\" = 42 && test \"$HASP_LOCK\" = job && exit 7");
	assert_int_equal(res.exit_code, 7);
	assert_true(SCRIPT_READ(&r, s.renews) >= 2); /* every 100 ms for 500 ms */
	assert_int_equal(SCRIPT_READ(&r, s.releases), 1);
	assert_int_equal(SCRIPT_READ(&r, s.released_token), 42);

	RUN_HASP(cluster, &res, "run", "job", "--", "/nonexistent/command");
	assert_int_equal(res.exit_code, 127);
	responder_stop(&r);
}

/* True when `pid` has exited (gone, or a zombie waiting for its reaper). */
static bool process_gone(pid_t pid)
{
	char path[64];
	char buf[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return true;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *paren = strrchr(buf, ')');
	return paren != NULL && paren[1] == ' ' && paren[2] == 'Z';
}

static void test_run_command_is_stopped_when_hasp_dies(void **state)
{
	static struct cli_script s = { .renew = RENEW_GRANT };
	static struct responder r;
	char cluster[128];
	char pidfile[] = "/tmp/hasp-test-run-XXXXXX";
	char script[160];
	int fd = mkstemp(pidfile);
	pid_t cmd_pid = 0;
	(void)state;

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(responder_start(&r, 1, script_cli, &s), 0);
	responder_cluster(&r, cluster, sizeof(cluster));
	snprintf(script, sizeof(script), "echo $$ > %s; exec sleep 10", pidfile);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("HASP_CLUSTER", cluster, 1);
		execl(hasp_path, hasp_path, "run", "job", "--", "sh", "-c", script, (char *)NULL);
		_exit(126);
	}
	/* Wait for the command to write its pid (bounded: 5 s). */
	for (int i = 0; i < 500 && cmd_pid <= 0; i++) {
		FILE *f = fopen(pidfile, "r");
		int v = 0;
		if (f != NULL) {
			if (fscanf(f, "%d", &v) != 1)
				v = 0;
			fclose(f);
		}
		cmd_pid = v;
		if (cmd_pid <= 0)
			usleep(10 * 1000);
	}
	assert_true(cmd_pid > 0);
	assert_false(process_gone(cmd_pid));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	bool gone = false;
	for (int i = 0; i < 300 && !gone; i++) {
		gone = process_gone(cmd_pid);
		if (!gone)
			usleep(10 * 1000);
	}
	if (!gone)
		kill(cmd_pid, SIGKILL); /* do not leave it behind */
	unlink(pidfile);
	assert_true(gone);
	responder_stop(&r);
}

int main(int argc, char **argv)
{
	test_util_install_assert_handler();
	if (argc < 2) {
		fprintf(stderr, "usage: test_cli <path to hasp>\n");
		return 2;
	}
	hasp_path = argv[1];
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_acquire_options_and_defaults),
		cmocka_unit_test(test_parse_refuses_bad_usage_with_exit_2),
		cmocka_unit_test(test_parse_subcommands),
		cmocka_unit_test(test_parse_durations_with_units_and_ttl_range),
		cmocka_unit_test(test_parse_errors_state_the_input_rules),
		cmocka_unit_test(test_parse_help_and_version_need_no_cluster),
		cmocka_unit_test(test_parse_run_blocks_unless_try),
		cmocka_unit_test(test_cluster_host_names_are_resolved),
		cmocka_unit_test(test_exit_codes_map_statuses_and_errors),
		cmocka_unit_test(test_binary_acquire_prints_token_and_exit_codes),
		cmocka_unit_test_teardown(test_run_kills_command_when_renew_is_refused, responder_teardown),
		cmocka_unit_test_teardown(test_run_kills_command_when_validity_passes_without_renew, responder_teardown),
		cmocka_unit_test_teardown(test_run_passes_fence_and_propagates_exit_status, responder_teardown),
		cmocka_unit_test_teardown(test_run_command_is_stopped_when_hasp_dies, responder_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
