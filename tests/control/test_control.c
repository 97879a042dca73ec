/*
 * The admin server over a Unix socket in a temp dir, with test commands on
 * both sides of the thread boundary: admin-thread commands, lcore commands
 * drained by a fake lcore thread with control_poll(), deferred completion,
 * timeouts when the lcore does not answer, a full request queue, too many
 * connections, oversized requests, attachments, HTTP /metrics, /health and
 * /status, and the seqlock-published status.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "control/admin_auth.h"
#include "control/admin_client.h"
#include "control/control.h"
#include "control/control_impl.h"
#include "control/json.h"
#include "hasp/errors.h"
#include "tests/test_util.h"

struct fixture {
	char dir[64];
	char sock[128];
	char file[128];
	struct control c;
	pthread_t lcore;
	pthread_t lcore_tid;
	volatile bool stop;
	volatile bool paused;
	struct control_request *later; /* deferred by lc.later */
	uint64_t later_due_ms;
	uint32_t later_delay_ms;
	uint64_t lcore_calls;
	bool wrong_thread;
	char tcp[64]; /* "127.0.0.1:PORT" of setup_tcp */
};

static struct fixture *fx;

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* ---- test commands ---- */

static bool cmd_echo(struct control_request *req, void *arg)
{
	(void)arg;
	json_object_begin(&req->out);
	json_key(&req->out, "args");
	json_array_begin(&req->out);
	for (uint32_t i = 0; i < req->argc; i++)
		json_string(&req->out, req->argv[i]);
	json_array_end(&req->out);
	json_object_end(&req->out);
	return true;
}

static bool cmd_add(struct control_request *req, void *arg)
{
	struct fixture *f = arg;
	uint64_t a, b;
	if (!pthread_equal(pthread_self(), f->lcore_tid))
		f->wrong_thread = true;
	f->lcore_calls++;
	if (!control_arg_u64(req, 0, "a", &a) || !control_arg_u64(req, 1, "b", &b))
		return true;
	json_object_begin(&req->out);
	json_kv_u64(&req->out, "sum", a + b);
	json_object_end(&req->out);
	return true;
}

static bool cmd_later(struct control_request *req, void *arg)
{
	struct fixture *f = arg;
	f->later = req;
	f->later_due_ms = clock_monotonic_ms() + f->later_delay_ms;
	return false; /* completed by the lcore loop below */
}

static bool cmd_big(struct control_request *req, void *arg)
{
	(void)arg;
	json_array_begin(&req->out);
	for (int i = 0; i < 100000; i++)
		json_string(&req->out, "0123456789");
	json_array_end(&req->out);
	return true;
}

static bool cmd_notleader(struct control_request *req, void *arg)
{
	(void)arg;
	control_request_fail(req, -HASP_ENOTLEADER, "ask node 3");
	req->leader_id = 3;
	return true;
}

static bool cmd_file(struct control_request *req, void *arg)
{
	struct fixture *f = arg;
	snprintf(req->attach_path, sizeof(req->attach_path), "%s", f->file);
	json_object_begin(&req->out);
	json_kv_str(&req->out, "file", "data");
	json_object_end(&req->out);
	return true;
}

static void *lcore_main(void *arg)
{
	struct fixture *f = arg;
	while (!f->stop) {
		if (!f->paused)
			control_poll(&f->c, 4);
		if (f->later != NULL && clock_monotonic_ms() >= f->later_due_ms) {
			json_object_begin(&f->later->out);
			json_kv_bool(&f->later->out, "late", true);
			json_object_end(&f->later->out);
			control_request_done(f->later);
			f->later = NULL;
		}
		sleep_ms(1);
	}
	return NULL;
}

static int setup_with(struct control_config *cfg)
{
	fx = calloc(1, sizeof(*fx));
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/hasp-ctl-XXXXXX");
	if (mkdtemp(fx->dir) == NULL)
		return -1;
	snprintf(fx->sock, sizeof(fx->sock), "%s/admin.sock", fx->dir);
	snprintf(fx->file, sizeof(fx->file), "%s/blob", fx->dir);
	snprintf(cfg->unix_path, sizeof(cfg->unix_path), "%s", fx->sock);
	cfg->node_id = 1;
	snprintf(cfg->node_address, sizeof(cfg->node_address), "10.77.0.11:7000");
	if (control_init(&fx->c, cfg) != 0)
		return -1;
	const struct control_command cmds[] = {
		{ "echo", "[args]", "echo the arguments", CONTROL_ON_ADMIN, cmd_echo, fx },
		{ "lc.add", "<a> <b>", "add on the lcore", CONTROL_ON_LCORE, cmd_add, fx },
		{ "lc.later", "", "finish later", CONTROL_ON_LCORE, cmd_later, fx },
		{ "lc.big", "", "too big a reply", CONTROL_ON_LCORE, cmd_big, fx },
		{ "lc.notleader", "", "refuse", CONTROL_ON_LCORE, cmd_notleader, fx },
		{ "lc.file", "", "a reply with an attachment", CONTROL_ON_LCORE, cmd_file, fx },
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (control_register(&fx->c, &cmds[i]) != 0)
			return -1;
	if (control_start(&fx->c) != 0)
		return -1;
	if (pthread_create(&fx->lcore, NULL, lcore_main, fx) != 0)
		return -1;
	fx->lcore_tid = fx->lcore;
	return 0;
}

static int setup(void **state)
{
	(void)state;
	struct control_config cfg = { .timeout_ms = 1000, .reply_size_max = 64 * 1024 };
	return setup_with(&cfg);
}

static int teardown(void **state)
{
	(void)state;
	fx->stop = true;
	pthread_join(fx->lcore, NULL);
	control_stop(&fx->c);
	struct stat sb;
	/* The socket file is removed by control_stop. */
	int gone = stat(fx->sock, &sb) != 0;
	control_deinit(&fx->c);
	unlink(fx->file);
	rmdir(fx->dir);
	free(fx);
	return gone ? 0 : -1;
}

/* ---- helpers ---- */

struct parsed_reply {
	char text[ADMIN_CLIENT_REPLY_MAX];
	struct json_token t[4096];
	int n;
};

static int call(struct admin_client *a, const char *line, struct parsed_reply *r)
{
	const char *text;
	size_t len;
	int rc = admin_client_call(a, line, &text, &len);
	if (rc != 0)
		return rc;
	memcpy(r->text, text, len + 1);
	r->n = json_parse(r->text, len, r->t, 4096);
	assert_true(r->n > 0);
	return 0;
}

static bool reply_ok(struct parsed_reply *r)
{
	bool ok = false;
	assert_true(json_tok_bool(r->text, r->t, json_get(r->text, r->t, 0, "ok"), &ok));
	return ok;
}

static void reply_error(struct parsed_reply *r, char *err, size_t n)
{
	assert_false(reply_ok(r));
	assert_true(json_tok_str(r->text, r->t, json_get(r->text, r->t, 0, "error"), err, n));
}

static uint64_t result_u64(struct parsed_reply *r, const char *key)
{
	uint64_t v = 0;
	assert_true(json_tok_u64(r->text, r->t, json_get(r->text, r->t, json_get(r->text, r->t, 0, "result"), key), &v));
	return v;
}

static struct admin_client *open_client(void)
{
	struct admin_client *a = calloc(1, sizeof(*a));
	assert_int_equal(admin_client_open(a, fx->sock, 5000), 0);
	return a;
}

static void close_client(struct admin_client *a)
{
	admin_client_close(a);
	free(a);
}

/* ---- tests ---- */

static void test_admin_answers_admin_and_lcore_commands(void **state)
{
	(void)state;
	struct admin_client *a = open_client();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	assert_int_equal(call(a, "echo x y", r), 0);
	assert_true(reply_ok(r));
	int args = json_get(r->text, r->t, json_get(r->text, r->t, 0, "result"), "args");
	assert_int_equal(r->t[args].size, 2);
	assert_true(json_tok_eq(r->text, r->t, json_at(r->t, args, 1), "y"));
	/* The same connection carries more requests. */
	assert_int_equal(call(a, "lc.add 40 2", r), 0);
	assert_true(reply_ok(r));
	assert_int_equal(result_u64(r, "sum"), 42);
	assert_true(json_tok_eq(r->text, r->t, json_get(r->text, r->t, 0, "command"), "lc.add"));
	/* Handler-level refusals come back as typed errors. */
	char err[32];
	assert_int_equal(call(a, "lc.add 1 x", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "EINVAL");
	assert_false(fx->wrong_thread); /* lcore commands ran on the lcore thread */
	free(r);
	close_client(a);
}

static void test_admin_unknown_command_is_enoent_and_keeps_the_connection(void **state)
{
	(void)state;
	struct admin_client *a = open_client();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	char err[32];
	assert_int_equal(call(a, "no.such.command", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "ENOENT");
	assert_int_equal(call(a, "echo", r), 0);
	assert_true(reply_ok(r));
	free(r);
	close_client(a);
}

static void test_admin_oversized_request_is_refused_and_closed(void **state)
{
	(void)state;
	struct admin_client *a = open_client();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	char *line = malloc(CONTROL_REQUEST_SIZE_MAX + 100);
	memset(line, 'a', CONTROL_REQUEST_SIZE_MAX + 99);
	memcpy(line, "echo ", 5);
	line[CONTROL_REQUEST_SIZE_MAX + 99] = '\0';
	char err[32];
	assert_int_equal(call(a, line, r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "ETOOBIG");
	assert_true(call(a, "echo", r) != 0); /* the server closed the connection */
	close_client(a);
	/* A request of exactly the maximum is fine. */
	a = open_client();
	line[CONTROL_REQUEST_SIZE_MAX] = '\0';
	assert_int_equal(call(a, line, r), 0);
	assert_true(reply_ok(r));
	close_client(a);
	assert_true(metric_value(fx->c.counters.rejected) >= 1);
	free(line);
	free(r);
}

static void test_admin_bad_bytes_and_empty_lines_are_einval(void **state)
{
	(void)state;
	struct admin_client *a = open_client();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	char err[32];
	assert_int_equal(call(a, "echo \x01", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "EINVAL");
	assert_int_equal(call(a, "", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "EINVAL");
	/* Commands without arguments refuse stray words, and numbers are
	 * plain decimal: no octal, hex, sign, blank or overflow. */
	static const char *const bad[] = { "status x", "help me", "health now", "metrics all",
					   "members.list 1", "log.list x", "lc.add 1 0x2", "lc.add 010 1",
					   "lc.add 1 -1", "lc.add 18446744073709551616 1", "lc.add 1 1x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(call(a, bad[i], r), 0);
		reply_error(r, err, sizeof(err));
		if (strcmp(err, "EINVAL") != 0)
			fail_msg("%s: want EINVAL: %s", bad[i], r->text);
	}
	assert_int_equal(call(a, "lc.add 18446744073709551615 0", r), 0);
	assert_int_equal(result_u64(r, "sum"), UINT64_MAX);
	free(r);
	close_client(a);
}

static void test_admin_reply_too_big_is_etoobig(void **state)
{
	(void)state;
	struct admin_client *a = open_client();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	char err[32];
	assert_int_equal(call(a, "lc.big", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "ETOOBIG");
	assert_int_equal(call(a, "lc.notleader", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "ENOTLEADER");
	uint64_t leader = 0;
	assert_true(json_tok_u64(r->text, r->t, json_get(r->text, r->t, 0, "leader_id"), &leader));
	assert_int_equal(leader, 3);
	free(r);
	close_client(a);
}

struct worker {
	int index;
	int failures;
};

static void *concurrent_client(void *arg)
{
	struct worker *w = arg;
	struct admin_client a;
	if (admin_client_open(&a, fx->sock, 5000) != 0) {
		w->failures++;
		return NULL;
	}
	for (int i = 0; i < 100; i++) {
		char line[64], expect[64];
		const char *text;
		size_t len;
		snprintf(line, sizeof(line), "lc.add %d %d", w->index * 1000, i);
		snprintf(expect, sizeof(expect), "\"sum\":%d", w->index * 1000 + i);
		if (admin_client_call(&a, line, &text, &len) != 0 || strstr(text, expect) == NULL)
			w->failures++;
	}
	admin_client_close(&a);
	return NULL;
}

static void test_admin_concurrent_clients_each_get_their_own_replies(void **state)
{
	(void)state;
	enum { N = 8 };
	pthread_t t[N];
	struct worker w[N];
	for (int i = 0; i < N; i++) {
		w[i] = (struct worker){ .index = i + 1 };
		assert_int_equal(pthread_create(&t[i], NULL, concurrent_client, &w[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].failures, 0);
	}
	assert_true(fx->lcore_calls >= N * 100);
}

static void test_admin_times_out_when_the_lcore_does_not_answer(void **state)
{
	(void)state;
	struct admin_client *a = open_client(), *b = open_client();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	char err[32];
	fx->paused = true;
	/* While one request waits for the stuck lcore, admin-thread commands
	 * on another connection are still served. */
	const char *line = "lc.add 1 2\n";
	assert_int_equal(send(a->fd, line, strlen(line), 0), (ssize_t)strlen(line));
	uint64_t t0 = clock_monotonic_ms();
	assert_int_equal(call(b, "health", r), 0);
	assert_true(reply_ok(r));
	/* ...before the stuck one timed out: an order of events, not a
	 * stopwatch reading. */
	assert_int_equal(metric_value(fx->c.counters.timeouts), 0);
	const char *text;
	size_t len;
	assert_int_equal(admin_client_call(a, "", &text, &len), 0); /* reads the pending reply */
	assert_non_null(strstr(text, "\"error\":\"ETIMEDOUT\""));
	assert_true(clock_monotonic_ms() - t0 >= 1000);
	/* Drain the reply to the empty line sent above. */
	assert_int_equal(call(a, "echo", r), 0);
	fx->paused = false;
	/* Every slot came back: more requests than slots all succeed. */
	for (int i = 0; i < 20; i++) {
		assert_int_equal(call(a, "lc.add 2 2", r), 0);
		assert_true(reply_ok(r));
	}
	assert_true(metric_value(fx->c.counters.timeouts) >= 1);
	(void)err;
	free(r);
	close_client(a);
	close_client(b);
}

static void test_admin_abandoned_request_frees_its_slot_when_the_lcore_finishes(void **state)
{
	(void)state;
	struct admin_client *a = open_client();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	char err[32];
	fx->later_delay_ms = 1300; /* longer than the 1000 ms timeout */
	assert_int_equal(call(a, "lc.later", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "ETIMEDOUT");
	/* The slot stays taken until the lcore finishes, then frees itself. */
	bool all_free = false;
	for (int tries = 0; tries < 500 && !all_free; tries++) {
		sleep_ms(10);
		all_free = fx->later == NULL;
		for (uint32_t i = 0; i < fx->c.slot_count; i++)
			all_free &= __atomic_load_n(&fx->c.slots[i].req.state, __ATOMIC_ACQUIRE) == SLOT_FREE;
	}
	assert_true(all_free);
	/* A deferred request finished in time is answered normally. */
	fx->later_delay_ms = 20;
	assert_int_equal(call(a, "lc.later", r), 0);
	assert_true(reply_ok(r));
	assert_non_null(strstr(r->text, "\"late\":true"));
	free(r);
	close_client(a);
}

static void test_admin_full_queue_answers_ebusy(void **state)
{
	(void)state;
	struct admin_client *w[8];
	struct parsed_reply *r = calloc(1, sizeof(*r));
	char err[32];
	fx->paused = true;
	/* Fill every slot from its own connection, then one more. */
	for (uint32_t i = 0; i < fx->c.slot_count; i++) {
		w[i] = open_client();
		assert_int_equal(send(w[i]->fd, "lc.add 1 1\n", 11, 0), 11);
	}
	/* Wait until the server queued all of them. */
	for (int tries = 0; tries < 500; tries++) {
		uint32_t queued = 0;
		for (uint32_t i = 0; i < fx->c.slot_count; i++)
			queued += __atomic_load_n(&fx->c.slots[i].req.state, __ATOMIC_ACQUIRE) == SLOT_QUEUED;
		if (queued == fx->c.slot_count)
			break;
		sleep_ms(10);
	}
	struct admin_client *extra = open_client();
	assert_int_equal(call(extra, "lc.add 1 1", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "EBUSY");
	fx->paused = false;
	for (uint32_t i = 0; i < fx->c.slot_count; i++) {
		const char *text;
		size_t len;
		/* The queued ones complete once the lcore runs again (an empty
		 * line after them only provokes an EINVAL we ignore). */
		assert_int_equal(admin_client_call(w[i], "", &text, &len), 0);
		assert_non_null(strstr(text, "\"sum\":2"));
		close_client(w[i]);
	}
	close_client(extra);
	free(r);
}

static void test_admin_refuses_connections_beyond_clients_max(void **state)
{
	(void)state;
	struct admin_client *a = open_client(), *b = open_client(), *c3;
	struct parsed_reply *r = calloc(1, sizeof(*r));
	char err[32];
	assert_int_equal(call(a, "echo", r), 0);
	assert_int_equal(call(b, "echo", r), 0);
	c3 = open_client();
	/* The refusal arrives unasked, then the server closes. */
	char buf[512];
	size_t got = 0;
	ssize_t n;
	while ((n = recv(c3->fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	assert_non_null(strstr(buf, "\"error\":\"EBUSY\""));
	(void)err;
	close_client(c3);
	close_client(a);
	/* A freed connection slot is reused (once the server saw the close). */
	bool served = false;
	for (int tries = 0; tries < 200 && !served; tries++) {
		c3 = open_client();
		served = call(c3, "echo", r) == 0 && reply_ok(r);
		close_client(c3);
		if (!served)
			sleep_ms(10);
	}
	assert_true(served);
	close_client(b);
	free(r);
}

static int setup_two_clients(void **state)
{
	(void)state;
	struct control_config cfg = { .clients_max = 2, .timeout_ms = 1000 };
	return setup_with(&cfg);
}

static void test_admin_streams_an_attachment_after_the_reply(void **state)
{
	(void)state;
	FILE *f = fopen(fx->file, "w");
	assert_non_null(f);
	for (int i = 0; i < 100000; i++)
		fprintf(f, "%08d", i);
	fclose(f);
	struct admin_client *a = open_client();
	const char *text;
	size_t len;
	assert_int_equal(admin_client_call(a, "lc.file", &text, &len), 0);
	assert_non_null(strstr(text, "\"attachment\":800000"));
	char out[128];
	snprintf(out, sizeof(out), "%s/copy", fx->dir);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(admin_client_attachment(a, fd, 800000), 0);
	close(fd);
	/* The connection is usable after the attachment. */
	assert_int_equal(admin_client_call(a, "echo z", &text, &len), 0);
	assert_non_null(strstr(text, "\"args\":[\"z\"]"));
	close_client(a);
	char cmp[300];
	snprintf(cmp, sizeof(cmp), "cmp -s %s %s", fx->file, out);
	assert_int_equal(system(cmp), 0);
	unlink(out);
}

static void publish(uint64_t leader, bool can_commit, uint64_t published_ns)
{
	struct control_status st = {
		.published_ns = published_ns, .role = leader == 1 ? 3 : 0, .term = 5,
		.leader_id = leader, .commit_index = 100, .applied_index = 97, .last_index = 101,
		.can_commit = can_commit, .member_count = 2,
	};
	st.members[0] = (struct control_member){ .id = 1, .role = 1, .ip = 0x0a4d000b, .peer_port = 7001,
						 .client_port = 7000, .match_index = 101, .active = 1 };
	st.members[1] = (struct control_member){ .id = 2, .role = 2, .ip = 0x0a4d000c, .peer_port = 7001,
						 .client_port = 7000, .match_index = 90, .rtt_ns = 250000 };
	control_status_publish(&fx->c, &st);
}

static void test_http_health_follows_the_published_status(void **state)
{
	(void)state;
	int code;
	char body[256];
	assert_int_equal(admin_client_http_get(fx->sock, "/health", 2000, &code, body, sizeof(body)), 0);
	assert_int_equal(code, 503);
	assert_string_equal(body, "starting\n");
	publish(0, false, clock_monotonic_ns());
	assert_int_equal(admin_client_http_get(fx->sock, "/health", 2000, &code, body, sizeof(body)), 0);
	assert_int_equal(code, 503);
	assert_string_equal(body, "no leader\n");
	publish(2, false, clock_monotonic_ns());
	assert_int_equal(admin_client_http_get(fx->sock, "/health", 2000, &code, body, sizeof(body)), 0);
	assert_string_equal(body, "cannot commit\n");
	publish(2, true, clock_monotonic_ns());
	assert_int_equal(admin_client_http_get(fx->sock, "/health", 2000, &code, body, sizeof(body)), 0);
	assert_int_equal(code, 200);
	assert_string_equal(body, "ok\n");
	/* A lcore that stopped publishing makes the node unhealthy. */
	publish(2, true, clock_monotonic_ns() - 10ull * 1000000000ull);
	assert_int_equal(admin_client_http_get(fx->sock, "/health", 2000, &code, body, sizeof(body)), 0);
	assert_int_equal(code, 503);
	assert_string_equal(body, "dataplane stalled\n");
	assert_int_equal(admin_client_http_get(fx->sock, "/nope", 2000, &code, body, sizeof(body)), 0);
	assert_int_equal(code, 404);
}

static void test_http_metrics_and_status(void **state)
{
	(void)state;
	int code;
	static char body[65536];
	struct admin_client *a = open_client();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	assert_int_equal(call(a, "echo", r), 0);
	close_client(a);
	/* No wait: the admin thread counts a request before it sends the
	 * reply (server.c), so the answer we read is the synchronization. */
	assert_int_equal(admin_client_http_get(fx->sock, "/metrics", 2000, &code, body, sizeof(body)), 0);
	assert_int_equal(code, 200);
	assert_non_null(strstr(body, "# TYPE hasp_admin_requests_total counter\n"));
	assert_non_null(strstr(body, "\nhasp_admin_requests_total 1\n"));
	publish(1, true, clock_monotonic_ns());
	assert_int_equal(admin_client_http_get(fx->sock, "/status", 2000, &code, body, sizeof(body)), 0);
	assert_int_equal(code, 200);
	r->n = json_parse(body, strlen(body), r->t, 4096);
	assert_true(r->n > 0);
	int res = json_get(body, r->t, 0, "result");
	assert_true(json_tok_eq(body, r->t, json_get(body, r->t, res, "role"), "leader"));
	assert_true(json_tok_eq(body, r->t, json_get(body, r->t, res, "address"), "10.77.0.11:7000"));
	int members = json_get(body, r->t, res, "members");
	assert_int_equal(r->t[members].size, 2);
	int m2 = json_at(r->t, members, 1);
	assert_true(json_tok_eq(body, r->t, json_get(body, r->t, m2, "role"), "learner"));
	assert_true(json_tok_eq(body, r->t, json_get(body, r->t, m2, "ip"), "10.77.0.12"));
	uint64_t lag;
	assert_true(json_tok_u64(body, r->t, json_get(body, r->t, m2, "lag"), &lag));
	assert_int_equal(lag, 11);
	free(r);
}

/* One raw HTTP exchange on the Unix socket: sends `request`, reads until
 * the server closes (bounded by a 5 s deadline). Returns the bytes read. */
static size_t http_raw(const char *request, char *out, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	assert_true(strlen(fx->sock) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, fx->sock, strlen(fx->sock) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, request, strlen(request), MSG_NOSIGNAL), (ssize_t)strlen(request));
	size_t n = 0;
	uint64_t deadline = clock_monotonic_ms() + 5000;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = clock_monotonic_ms();
		assert_true(now < deadline);
		if (poll(&p, 1, (int)(deadline - now)) <= 0)
			continue;
		ssize_t r = recv(fd, out + n, size - 1 - n, 0);
		assert_true(r >= 0);
		if (r == 0)
			break;
		n += (size_t)r;
		assert_true(n < size - 1);
	}
	out[n] = '\0';
	close(fd);
	return n;
}

static unsigned long long content_length(const char *resp)
{
	const char *cl = strstr(resp, "\r\nContent-Length: ");
	assert_non_null(cl);
	return strtoull(cl + 18, NULL, 10);
}

/* HEAD answers the headers GET would (the same Content-Length) and no
 * body; /status once announced a length of 0. */
static void test_http_head_has_the_get_headers_and_no_body(void **state)
{
	(void)state;
	static char get[65536], head[65536];
	publish(1, true, clock_monotonic_ns());
	static const char *const paths[] = { "/status", "/health", "/nope" };
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char req[128];
		snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\n\r\n", paths[i]);
		size_t g = http_raw(req, get, sizeof(get));
		snprintf(req, sizeof(req), "HEAD %s HTTP/1.1\r\n\r\n", paths[i]);
		size_t h = http_raw(req, head, sizeof(head));
		const char *body = strstr(get, "\r\n\r\n");
		assert_non_null(body);
		assert_int_equal(content_length(get), g - (size_t)(body + 4 - get));
		assert_int_equal(content_length(head), content_length(get));
		assert_non_null(strstr(head, "\r\n\r\n"));
		assert_int_equal(h, (size_t)(strstr(head, "\r\n\r\n") + 4 - head));
	}
}

static void test_admin_status_health_help_and_log_commands(void **state)
{
	(void)state;
	struct admin_client *a = open_client();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	char err[32];
	publish(2, true, clock_monotonic_ns());
	assert_int_equal(call(a, "status", r), 0);
	assert_int_equal(result_u64(r, "term"), 5);
	assert_int_equal(result_u64(r, "leader_id"), 2);
	assert_int_equal(result_u64(r, "lag"), 3);
	assert_int_equal(result_u64(r, "id"), 1);
	assert_int_equal(call(a, "help", r), 0);
	assert_non_null(strstr(r->text, "{\"name\":\"lc.add\",\"usage\":\"<a> <b>\",\"help\":\"add on the lcore\",\"runs_on\":\"lcore\",\"access\":\"privileged\"}"));
	assert_non_null(strstr(r->text, "\"name\":\"health\""));
	assert_non_null(strstr(r->text, "\"runs_on\":\"admin\",\"access\":\"open\""));
	assert_int_equal(call(a, "log.level control debug", r), 0);
	assert_true(reply_ok(r));
	assert_int_equal(call(a, "log.list", r), 0);
	assert_non_null(strstr(r->text, "{\"topic\":\"control\",\"level\":\"debug\"}"));
	assert_int_equal(call(a, "log.level control info", r), 0);
	assert_int_equal(call(a, "log.level control loud", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "EINVAL");
	assert_int_equal(call(a, "log.level nosuchtopic info", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "ENOENT");
	assert_int_equal(call(a, "metrics", r), 0);
	assert_non_null(strstr(r->text, "\"name\":\"hasp_admin_requests_total\""));
	free(r);
	close_client(a);
}

/* A queued lcore request makes the wake fd readable (an idle lcore waits
 * on it); control_poll() drains it. */

/* ---- TCP and the admin credential (docs/SECURITY.md 4.8) ---- */

static struct auth_key admin_key(uint8_t fill)
{
	struct auth_key k;
	memset(k.bytes, fill, sizeof(k.bytes));
	return k;
}

/* A free loopback port is found by trying: bind fails on a used one. */
static int setup_tcp_with(bool keyed)
{
	for (int attempt = 0; attempt < 50; attempt++) {
		struct control_config cfg = { .timeout_ms = 1000, .reply_size_max = 64 * 1024 };
		unsigned port = 20000u + (unsigned)((getpid() * 7 + attempt * 131) % 30000);
		snprintf(cfg.tcp_addr, sizeof(cfg.tcp_addr), "127.0.0.1:%u", port);
		if (keyed) {
			cfg.admin_key = admin_key(0x5a);
			cfg.admin_key_set = true;
		}
		if (setup_with(&cfg) == 0) {
			snprintf(fx->tcp, sizeof(fx->tcp), "%s", cfg.tcp_addr);
			return 0;
		}
		if (fx != NULL) {
			control_deinit(&fx->c);
			rmdir(fx->dir);
			free(fx);
			fx = NULL;
		}
	}
	return -1;
}

static int setup_tcp(void **state)
{
	(void)state;
	return setup_tcp_with(true);
}

static int setup_tcp_no_key(void **state)
{
	(void)state;
	return setup_tcp_with(false);
}

static struct admin_client *open_tcp(void)
{
	struct admin_client *a = calloc(1, sizeof(*a));
	assert_int_equal(admin_client_open(a, fx->tcp, 5000), 0);
	return a;
}

static double refused(const char *reason)
{
	struct metric *m = strcmp(reason, "no_credential") == 0 ? fx->c.counters.refused_no_credential :
			   strcmp(reason, "bad_credential") == 0 ? fx->c.counters.refused_bad_credential :
								    fx->c.counters.refused_not_configured;
	return metric_value(m);
}

static void test_tcp_serves_open_commands_and_http_without_a_credential(void **state)
{
	(void)state;
	struct admin_client *a = open_tcp();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	assert_int_equal(call(a, "status", r), 0);
	assert_true(reply_ok(r));
	assert_int_equal(call(a, "help", r), 0);
	assert_true(reply_ok(r));
	assert_int_equal(call(a, "metrics", r), 0);
	assert_true(reply_ok(r));
	char *body = calloc(1, 256 * 1024);
	int status = 0;
	assert_int_equal(admin_client_http_get(fx->tcp, "/metrics", 5000, &status, body, 256 * 1024), 0);
	assert_int_equal(status, 200);
	assert_non_null(strstr(body, "hasp_admin_refused_total{reason=\"no_credential\"} 0"));
	assert_int_equal(admin_client_http_get(fx->tcp, "/status", 5000, &status, body, 256 * 1024), 0);
	assert_int_equal(status, 200);
	assert_true(refused("no_credential") == 0);
	free(body);
	free(r);
	close_client(a);
}

static void test_tcp_refuses_privileged_commands_without_a_credential(void **state)
{
	(void)state;
	struct admin_client *a = open_tcp();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	char err[32];
	/* An lcore command and an admin-thread one: neither runs. */
	assert_int_equal(call(a, "lc.add 1 2", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "EPERM");
	assert_non_null(strstr(r->text, "admin credential"));
	assert_int_equal(call(a, "echo x", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "EPERM");
	assert_int_equal(fx->lcore_calls, 0);
	assert_true(refused("no_credential") == 2);
	/* The connection stays usable for what is open. */
	assert_int_equal(call(a, "status", r), 0);
	assert_true(reply_ok(r));
	/* The Unix socket runs them as before. */
	struct admin_client *u = open_client();
	assert_int_equal(call(u, "lc.add 1 2", r), 0);
	assert_true(reply_ok(r));
	assert_int_equal(fx->lcore_calls, 1);
	close_client(u);
	free(r);
	close_client(a);
}

static void test_tcp_runs_privileged_commands_with_the_right_key(void **state)
{
	(void)state;
	struct admin_client *a = open_tcp();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	struct auth_key k = admin_key(0x5a);
	admin_client_set_key(a, &k);
	for (uint64_t i = 1; i <= 3; i++) {
		assert_int_equal(call(a, "lc.add 40 2", r), 0);
		assert_true(reply_ok(r));
		assert_int_equal(result_u64(r, "sum"), 42);
		assert_int_equal(fx->lcore_calls, i);
	}
	assert_int_equal(call(a, "echo x", r), 0);
	assert_true(reply_ok(r));
	assert_true(refused("no_credential") == 0 && refused("bad_credential") == 0);
	free(r);
	close_client(a);
}

/* A TCP client with the key filled with `fill` sends lc.add: refused
 * EPERM with `says` in the message, and the command did not run. */
static struct admin_client *keyed_call_refused(uint8_t fill, const char *says)
{
	struct admin_client *a = open_tcp();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	struct auth_key k = admin_key(fill);
	char err[32];
	admin_client_set_key(a, &k);
	assert_int_equal(call(a, "lc.add 1 2", r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "EPERM");
	assert_non_null(strstr(r->text, says));
	assert_int_equal(fx->lcore_calls, 0);
	free(r);
	return a;
}

static void test_tcp_wrong_key_is_refused_and_the_connection_closed(void **state)
{
	(void)state;
	struct admin_client *a = keyed_call_refused(0x5b, "bad admin credential");
	assert_true(refused("bad_credential") == 1);
	/* No second guess on this connection. */
	const char *text;
	size_t len;
	assert_int_not_equal(admin_client_call(a, "status", &text, &len), 0);
	close_client(a);
}

/* Asks the connection's nonce and seals "lc.add 1 2" as its first request. */
static void seal_first(struct admin_client *a, struct parsed_reply *r, const struct auth_key *k,
		       char *sealed)
{
	char hex[ADMIN_AUTH_NONCE_HEX_SIZE];
	uint8_t nonce[ADMIN_AUTH_NONCE_SIZE];
	assert_int_equal(call(a, "auth.nonce", r), 0);
	assert_true(reply_ok(r));
	assert_true(json_tok_str(r->text, r->t,
				 json_get(r->text, r->t, json_get(r->text, r->t, 0, "result"), "nonce"), hex,
				 sizeof(hex)));
	assert_true(admin_auth_nonce_parse(hex, strlen(hex), nonce));
	assert_true(admin_auth_seal(k, nonce, 1, "lc.add 1 2", sealed, CONTROL_SEALED_SIZE) > 0);
}

/* A captured sealed line is worth nothing: not again on its connection
 * (the seq moved on), not on another (another nonce), not changed. */
static void test_tcp_sealed_line_cannot_be_replayed_or_changed(void **state)
{
	(void)state;
	struct admin_client *a = open_tcp();
	struct parsed_reply *r = calloc(1, sizeof(*r));
	struct auth_key k = admin_key(0x5a);
	char err[32], sealed[CONTROL_SEALED_SIZE], changed[CONTROL_SEALED_SIZE];
	seal_first(a, r, &k, sealed);
	assert_int_equal(call(a, sealed, r), 0);
	assert_true(reply_ok(r));
	assert_int_equal(fx->lcore_calls, 1);
	/* Replayed on the same connection. */
	assert_int_equal(call(a, sealed, r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "EPERM");
	close_client(a);
	/* Replayed on a new connection, and changed (same tag, other line). */
	a = open_tcp();
	assert_int_equal(call(a, sealed, r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "EPERM");
	close_client(a);
	a = open_tcp();
	seal_first(a, r, &k, sealed);
	snprintf(changed, sizeof(changed), "%.*s9 9", (int)(strlen(sealed) - 3), sealed);
	assert_int_equal(call(a, changed, r), 0);
	reply_error(r, err, sizeof(err));
	assert_string_equal(err, "EPERM");
	assert_int_equal(fx->lcore_calls, 1);
	assert_true(refused("bad_credential") == 3);
	free(r);
	close_client(a);
}

static void test_tcp_without_an_admin_key_refuses_sealed_lines(void **state)
{
	(void)state;
	struct admin_client *a = keyed_call_refused(0x5a, "admin_key_file");
	assert_true(refused("not_configured") == 1);
	close_client(a);
}

static void test_admin_auth_open_checks_form_tag_and_seq(void **state)
{
	(void)state;
	struct auth_key k = admin_key(7), other = admin_key(8);
	uint8_t nonce[ADMIN_AUTH_NONCE_SIZE] = { 1 }, nonce2[ADMIN_AUTH_NONCE_SIZE] = { 2 };
	char sealed[CONTROL_SEALED_SIZE];
	const char *inner;
	size_t inner_len;
	assert_int_equal(auth_init(), 0);
	size_t n = admin_auth_seal(&k, nonce, 5, "members.remove 3", sealed, sizeof(sealed));
	assert_true(n > 0);
	assert_int_equal(admin_auth_open(&k, nonce, 5, sealed, n, &inner, &inner_len), 0);
	assert_int_equal(inner_len, 16);
	assert_memory_equal(inner, "members.remove 3", 16);
	assert_int_equal(admin_auth_open(&k, nonce, 6, sealed, n, &inner, &inner_len), -HASP_EPERM);
	assert_int_equal(admin_auth_open(&other, nonce, 5, sealed, n, &inner, &inner_len), -HASP_EPERM);
	assert_int_equal(admin_auth_open(&k, nonce2, 5, sealed, n, &inner, &inner_len), -HASP_EPERM);
	/* Every byte of the line matters. */
	for (size_t i = 0; i < n; i++) {
		char copy[CONTROL_SEALED_SIZE];
		memcpy(copy, sealed, n);
		copy[i] ^= 1;
		assert_true(admin_auth_open(&k, nonce, 5, copy, n, &inner, &inner_len) != 0);
	}
	static const char *const bad[] = { "auth", "auth ", "auth 5", "auth x 00 l", "auth 5 00 l",
					   "authx 5 00112233445566778899aabbccddeeff l" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(admin_auth_open(&k, nonce, 5, bad[i], strlen(bad[i]), &inner, &inner_len),
				 -HASP_EINVAL);
	assert_false(admin_auth_is_sealed("authx", 5));
	assert_true(admin_auth_is_sealed("auth 1", 6));
}

static void test_control_queued_request_wakes_the_lcore(void **state)
{
	(void)state;
	struct control c;
	struct control_config cfg = { .timeout_ms = 1000 };
	assert_int_equal(control_init(&c, &cfg), 0);
	struct control_command cmd = { "lc.x", "", "h", CONTROL_ON_LCORE, cmd_echo, NULL };
	assert_int_equal(control_register(&c, &cmd), 0);
	struct pollfd p = { .fd = control_wake_fd(&c), .events = POLLIN };
	assert_int_equal(poll(&p, 1, 0), 0);
	static struct control_request req;
	static char result[4096];
	struct control_call call;
	assert_false(control_call_start(&c, &call, "lc.x a", 6, &req, result, sizeof(result), 0, true));
	assert_int_equal(poll(&p, 1, 0), 1);
	assert_int_equal(control_poll(&c, 4), 1);
	assert_int_equal(poll(&p, 1, 0), 0);
	assert_true(control_call_poll(&c, &call, 0));
	assert_int_equal(req.error, 0);
	assert_string_equal(result, "{\"args\":[\"a\"]}");
	/* Nothing queued: polling does not touch the fd. */
	assert_int_equal(control_poll(&c, 4), 0);
	control_deinit(&c);
}

static void test_control_register_refuses_duplicates_and_bad_names(void **state)
{
	(void)state;
	struct control c;
	struct control_config cfg = { 0 };
	assert_int_equal(control_init(&c, &cfg), 0);
	struct control_command cmd = { "x.y", "", "h", CONTROL_ON_ADMIN, cmd_echo, NULL };
	assert_int_equal(control_register(&c, &cmd), 0);
	assert_int_equal(control_register(&c, &cmd), -HASP_EEXIST);
	cmd.name = "Bad Name";
	assert_int_equal(control_register(&c, &cmd), -HASP_EINVAL);
	cmd.name = "status";
	assert_int_equal(control_register(&c, &cmd), -HASP_EEXIST); /* built-in */
	control_deinit(&c);
}

/* The seqlock: a reader never sees a half-written status. */
struct seq_race {
	struct control *c;
	volatile bool stop;
};

static void *status_writer(void *arg)
{
	struct seq_race *s = arg;
	struct control_status st;
	for (uint64_t i = 1; !s->stop; i++) {
		uint64_t *w = (uint64_t *)&st;
		for (size_t k = 0; k < sizeof(st) / 8; k++)
			w[k] = i;
		st.member_count = i % (CONTROL_MEMBERS_MAX + 1);
		control_status_publish(s->c, &st);
	}
	return NULL;
}

static void test_control_status_reader_never_sees_a_torn_status(void **state)
{
	(void)state;
	struct control c;
	struct control_config cfg = { 0 };
	assert_int_equal(control_init(&c, &cfg), 0);
	struct seq_race s = { .c = &c };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, status_writer, &s), 0);
	for (int n = 0; n < 200000; n++) {
		struct control_status st;
		control_status_read(&c, &st);
		uint64_t *w = (uint64_t *)&st;
		for (size_t k = 0; k < sizeof(st) / 8; k++) {
			if (&w[k] == &st.member_count)
				assert_int_equal(st.member_count, w[0] % (CONTROL_MEMBERS_MAX + 1));
			else if (w[k] != w[0])
				fail_msg("torn status: word %zu is %llu, word 0 is %llu", k,
					 (unsigned long long)w[k], (unsigned long long)w[0]);
		}
	}
	s.stop = true;
	pthread_join(t, NULL);
	control_deinit(&c);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_admin_answers_admin_and_lcore_commands, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_unknown_command_is_enoent_and_keeps_the_connection, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_oversized_request_is_refused_and_closed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_bad_bytes_and_empty_lines_are_einval, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_reply_too_big_is_etoobig, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_concurrent_clients_each_get_their_own_replies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_times_out_when_the_lcore_does_not_answer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_abandoned_request_frees_its_slot_when_the_lcore_finishes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_full_queue_answers_ebusy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_refuses_connections_beyond_clients_max, setup_two_clients, teardown),
		cmocka_unit_test_setup_teardown(test_admin_streams_an_attachment_after_the_reply, setup, teardown),
		cmocka_unit_test_setup_teardown(test_http_health_follows_the_published_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_http_metrics_and_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_http_head_has_the_get_headers_and_no_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_status_health_help_and_log_commands, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_serves_open_commands_and_http_without_a_credential, setup_tcp, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_refuses_privileged_commands_without_a_credential, setup_tcp, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_runs_privileged_commands_with_the_right_key, setup_tcp, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_wrong_key_is_refused_and_the_connection_closed, setup_tcp, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_sealed_line_cannot_be_replayed_or_changed, setup_tcp, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_without_an_admin_key_refuses_sealed_lines, setup_tcp_no_key, teardown),
		cmocka_unit_test(test_admin_auth_open_checks_form_tag_and_seq),
		cmocka_unit_test(test_control_queued_request_wakes_the_lcore),
		cmocka_unit_test(test_control_register_refuses_duplicates_and_bad_names),
		cmocka_unit_test(test_control_status_reader_never_sees_a_torn_status),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
