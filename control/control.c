/*
 * The control plane's registry, request slots, published status and
 * built-in commands (see control.h for the threads and the protocol).
 *
 * The request slots are a fixed array scanned by the lcore rather than a
 * ring: requests finish out of order (a member change waits for its commit
 * while a lock listing returns at once), a timed-out request must be
 * reclaimable without the lcore's help, and with 8 slots the lcore's scan is
 * 8 relaxed loads per work iteration. Every transition is one compare-and-
 * swap, so neither side ever waits for the other.
 */
#include "control/control.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/clock.h"
#include "common/log.h"
#include "control/control_impl.h"
#include "hasp/errors.h"

#define NS_PER_MS 1000000ull

static bool cas_state(uint32_t *state, uint32_t from, uint32_t to)
{
	return __atomic_compare_exchange_n(state, &from, to, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static uint32_t load_state(const uint32_t *state)
{
	return __atomic_load_n(state, __ATOMIC_ACQUIRE);
}

/* ---- status (seqlock) ---- */

#define STATUS_WORDS (sizeof(struct control_status) / sizeof(uint64_t))
static_assert(sizeof(struct control_status) % sizeof(uint64_t) == 0, "status is made of words");

void control_status_publish(struct control *c, const struct control_status *st)
{
	HASP_ASSERT(st->member_count <= CONTROL_MEMBERS_MAX);
	uint64_t seq = c->status_seq;
	HASP_ASSERT(seq % 2 == 0);
	__atomic_store_n(&c->status_seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	const uint64_t *src = (const uint64_t *)st;
	uint64_t *dst = (uint64_t *)&c->status;
	for (size_t i = 0; i < STATUS_WORDS; i++)
		__atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
	__atomic_store_n(&c->status_seq, seq + 2, __ATOMIC_RELEASE);
}

void control_status_read(const struct control *c, struct control_status *st)
{
	uint64_t *dst = (uint64_t *)st;
	const uint64_t *src = (const uint64_t *)&c->status;
	for (;;) {
		uint64_t s1 = __atomic_load_n(&c->status_seq, __ATOMIC_ACQUIRE);
		if (s1 % 2 != 0)
			continue;
		for (size_t i = 0; i < STATUS_WORDS; i++)
			dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&c->status_seq, __ATOMIC_RELAXED) == s1)
			break;
	}
	HASP_ASSERT(st->member_count <= CONTROL_MEMBERS_MAX);
}

const char *control_role_name(uint64_t role)
{
	static const char *const names[] = { "follower", "pre_candidate", "candidate", "leader",
					     "learner", "removed" };
	return role < sizeof(names) / sizeof(names[0]) ? names[role] : "unknown";
}

bool control_health(const struct control *c, uint64_t now_ns, char *reason, size_t reason_size)
{
	struct control_status st;
	const char *why = NULL;
	control_status_read(c, &st);
	if (__atomic_load_n(&c->status_seq, __ATOMIC_ACQUIRE) == 0)
		why = "starting";
	else if (now_ns > st.published_ns &&
		 now_ns - st.published_ns > (uint64_t)c->cfg.stall_ms * NS_PER_MS)
		why = "dataplane stalled";
	else if (st.storage_failed)
		why = "storage failed";
	else if (st.role == CONTROL_ROLE_REMOVED)
		why = "removed";
	else if (st.leader_id == 0)
		why = "no leader";
	else if (!st.can_commit)
		why = "cannot commit";
	st.degraded[sizeof(st.degraded) - 1] = 0;
	if (why == NULL && st.degraded[0] != 0)
		snprintf(reason, reason_size, "degraded: %s", st.degraded);
	else
		snprintf(reason, reason_size, "%s", why != NULL ? why : "ok");
	return why == NULL;
}

/* ---- requests ---- */

void control_request_fail(struct control_request *req, int code, const char *fmt, ...)
{
	HASP_ASSERT(code < 0);
	req->error = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(req->message, sizeof(req->message), fmt, ap);
	va_end(ap);
}

bool control_parse_u64(const char *s, uint64_t *v)
{
	/* Decimal digits only: strtoull would take leading blanks, a sign,
	 * and with base 0 read "010" as 8 and "0x10" as 16, and it saturates
	 * on overflow; an operator's typo must not name another node. */
	uint64_t x = 0;
	if (s == NULL || *s == '\0')
		return false;
	for (const char *p = s; *p != '\0'; p++) {
		if (*p < '0' || *p > '9')
			return false;
		uint64_t d = (uint64_t)(*p - '0');
		if (x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	/* A leading zero is refused too ("07001" is not a port), except 0. */
	if (s[0] == '0' && s[1] != '\0')
		return false;
	*v = x;
	return true;
}

bool control_arg_u64(struct control_request *req, uint32_t i, const char *what, uint64_t *v)
{
	if (i >= req->argc) {
		control_request_fail(req, -HASP_EINVAL, "missing argument: %s", what);
		return false;
	}
	if (!control_parse_u64(req->argv[i], v)) {
		control_request_fail(req, -HASP_EINVAL, "%s: not a decimal number below 2^64: %s", what,
				     req->argv[i]);
		return false;
	}
	return true;
}

static const struct control_command *command_find(const struct control *c, const char *name)
{
	for (uint32_t i = 0; i < c->command_count; i++)
		if (strcmp(c->commands[i].name, name) == 0)
			return &c->commands[i];
	return NULL;
}

/* Splits req->line in place on single spaces. Returns false (and fails the
 * request) for empty lines, control bytes or too many arguments. */
static bool request_parse(struct control_request *req, const char *line, size_t len)
{
	while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	req->name = "";
	req->argc = 0;
	if (len > CONTROL_REQUEST_SIZE_MAX) {
		control_request_fail(req, -HASP_ETOOBIG, "request longer than %u bytes",
				     CONTROL_REQUEST_SIZE_MAX);
		return false;
	}
	memcpy(req->line, line, len);
	req->line[len] = '\0';
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)req->line[i];
		if (ch < 0x20 || ch > 0x7e) {
			control_request_fail(req, -HASP_EINVAL, "request has a control or non-ASCII byte");
			return false;
		}
	}
	char *save = NULL;
	char *tok = strtok_r(req->line, " ", &save);
	if (tok == NULL) {
		control_request_fail(req, -HASP_EINVAL, "empty request");
		return false;
	}
	req->name = tok;
	while ((tok = strtok_r(NULL, " ", &save)) != NULL) {
		if (req->argc == CONTROL_ARGS_MAX) {
			control_request_fail(req, -HASP_EINVAL, "more than %u arguments", CONTROL_ARGS_MAX);
			return false;
		}
		req->argv[req->argc++] = tok;
	}
	return true;
}

static void request_reset(struct control_request *req, char *result, size_t result_size)
{
	req->error = 0;
	req->message[0] = '\0';
	req->leader_id = 0;
	req->attach_path[0] = '\0';
	req->result = result;
	req->result_size = result_size;
	json_init(&req->out, result, result_size);
}

void control_request_local(struct control_request *req, char *result, size_t result_size,
			   const char *name)
{
	request_reset(req, result, result_size);
	req->name = name;
}

/* After the handler: a result that overflowed, or that the handler left
 * empty, becomes an error or null so the envelope is always valid JSON. */
static void request_seal(struct control_request *req)
{
	if (req->error != 0)
		return;
	if (req->out.len == 0 && !req->out.overflow) {
		json_null(&req->out);
	}
	if (json_finish(&req->out) == 0)
		control_request_fail(req, -HASP_ETOOBIG, "reply larger than %zu bytes", req->result_size);
}

bool control_call_start(struct control *c, struct control_call *call, const char *line, size_t len,
			struct control_request *req, char *result, size_t result_size, uint64_t now_ns,
			bool trusted)
{
	HASP_ASSERT(result != NULL && result_size > 1);
	request_reset(req, result, result_size);
	call->req = req;
	call->slot = NULL;
	if (!request_parse(req, line, len))
		return true;
	const struct control_command *cmd = command_find(c, req->name);
	if (cmd == NULL) {
		control_request_fail(req, -HASP_ENOENT, "unknown command: %s (try help)", req->name);
		return true;
	}
	if (!trusted && cmd->access != CONTROL_OPEN) {
		metric_inc(c->counters.refused_no_credential);
		control_request_fail(req, -HASP_EPERM,
				     "%s is privileged: over TCP it needs the admin credential "
				     "(haspctl --admin-key FILE; the node's admin_key_file), or use "
				     "the Unix socket",
				     req->name);
		return true;
	}
	if (cmd->where == CONTROL_ON_ADMIN) {
		bool done = cmd->fn(req, cmd->arg);
		HASP_ASSERT(done); /* admin handlers complete at once */
		request_seal(req);
		return true;
	}
	for (uint32_t i = 0; i < c->slot_count; i++) {
		struct control_slot *s = &c->slots[i];
		if (!cas_state(&s->req.state, SLOT_FREE, SLOT_FILLING))
			continue;
		request_reset(&s->req, s->result_buf, s->result_size);
		bool ok = request_parse(&s->req, line, len);
		HASP_ASSERT(ok); /* parsed above already */
		s->cmd = cmd;
		call->slot = s;
		call->deadline_ns = now_ns + (uint64_t)c->cfg.timeout_ms * NS_PER_MS;
		__atomic_store_n(&s->req.state, SLOT_QUEUED, __ATOMIC_RELEASE);
		/* Wake the lcore if it sleeps; one eventfd write per request. */
		__atomic_store_n(&c->wake_pending, 1, __ATOMIC_RELEASE);
		uint64_t one = 1;
		if (c->wake_fd >= 0 && write(c->wake_fd, &one, sizeof(one)) < 0) {
			/* EAGAIN: the counter is saturated, the fd readable: fine. */
		}
		return false;
	}
	control_request_fail(req, -HASP_EBUSY, "admin request queue full (%u in flight)", c->slot_count);
	return true;
}

bool control_call_poll(struct control *c, struct control_call *call, uint64_t now_ns)
{
	struct control_slot *s = call->slot;
	struct control_request *req = call->req;
	if (s == NULL)
		return true;
	if (load_state(&s->req.state) == SLOT_DONE) {
		/* The lcore is finished with the slot: copy out, then free it. */
		req->error = s->req.error;
		memcpy(req->message, s->req.message, sizeof(req->message));
		req->leader_id = s->req.leader_id;
		memcpy(req->attach_path, s->req.attach_path, sizeof(req->attach_path));
		size_t n = s->req.out.len < req->result_size ? s->req.out.len : req->result_size - 1;
		memcpy(req->result, s->req.result, n);
		req->result[n] = '\0';
		req->out.len = n;
		__atomic_store_n(&s->req.state, SLOT_FREE, __ATOMIC_RELEASE);
		call->slot = NULL;
		return true;
	}
	if (now_ns < call->deadline_ns)
		return false;
	/* Timed out: reclaim the slot if the lcore never took it, else leave it
	 * to the lcore to free when it finishes. */
	if (!cas_state(&s->req.state, SLOT_QUEUED, SLOT_FREE) &&
	    !cas_state(&s->req.state, SLOT_TAKEN, SLOT_ABANDONED)) {
		/* It became DONE between the two checks. */
		return control_call_poll(c, call, 0);
	}
	metric_inc(c->counters.timeouts);
	control_request_fail(req, -HASP_ETIMEDOUT, "the node did not answer within %u ms",
			     c->cfg.timeout_ms);
	call->slot = NULL;
	return true;
}

void control_execute(struct control *c, const char *line, size_t len, struct control_request *req,
		     char *result, size_t result_size)
{
	struct control_call call;
	if (control_call_start(c, &call, line, len, req, result, result_size, clock_monotonic_ns(),
			       true))
		return;
	while (!control_call_poll(c, &call, clock_monotonic_ns())) {
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
}

static void slot_complete(struct control *c, struct control_slot *s)
{
	request_seal(&s->req);
	if (!cas_state(&s->req.state, SLOT_TAKEN, SLOT_DONE)) {
		/* The admin gave up on it: nobody will read the reply. */
		HASP_ASSERT(load_state(&s->req.state) == SLOT_ABANDONED);
		__atomic_store_n(&s->req.state, SLOT_FREE, __ATOMIC_RELEASE);
		return;
	}
	uint64_t one = 1;
	if (c->done_fd >= 0 && write(c->done_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: saturated, already readable. The admin thread also
		 * rechecks on its own timer. */
	}
}

void control_request_done(struct control_request *req)
{
	HASP_ASSERT(req != NULL);
	/* req is the first member of its slot, and the slot knows its
	 * control (set when the admin thread queued it). */
	struct control_slot *s = (struct control_slot *)(void *)req;
	HASP_ASSERT(s->owner != NULL);
	slot_complete(s->owner, s);
}

int control_wake_fd(const struct control *c)
{
	return c->wake_fd;
}

uint32_t control_poll(struct control *c, uint32_t max)
{
	uint32_t taken = 0;
	/* Drain the wake fd before scanning, so a request queued after the
	 * scan writes it again and the next idle wait returns at once. */
	if (__atomic_load_n(&c->wake_pending, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&c->wake_pending, 0, __ATOMIC_ACQ_REL)) {
		uint64_t count;
		if (c->wake_fd >= 0 && read(c->wake_fd, &count, sizeof(count)) < 0) {
			/* EAGAIN: already drained. */
		}
	}
	for (uint32_t k = 0; k < c->slot_count && taken < max; k++) {
		uint32_t i = (c->lcore_next + k) % c->slot_count;
		struct control_slot *s = &c->slots[i];
		if (__atomic_load_n(&s->req.state, __ATOMIC_RELAXED) != SLOT_QUEUED ||
		    !cas_state(&s->req.state, SLOT_QUEUED, SLOT_TAKEN))
			continue;
		taken++;
		if (s->cmd->fn(&s->req, s->cmd->arg))
			slot_complete(c, s);
	}
	if (c->slot_count > 0)
		c->lcore_next = (c->lcore_next + 1) % c->slot_count;
	return taken;
}

size_t control_reply_render(const struct control_request *req, int64_t attachment_size, char *out,
			    size_t size)
{
	struct json_writer w;
	json_init(&w, out, size);
	json_object_begin(&w);
	json_kv_bool(&w, "ok", req->error == 0);
	json_kv_str(&w, "command", req->name);
	if (req->error == 0) {
		json_key(&w, "result");
		json_raw(&w, req->result, req->out.len);
		if (attachment_size >= 0)
			json_kv_i64(&w, "attachment", attachment_size);
	} else {
		json_kv_str(&w, "error", hasp_strerror_name(req->error));
		json_kv_str(&w, "message", req->message[0] ? req->message : hasp_strerror(req->error));
		if (req->leader_id != 0)
			json_kv_u64(&w, "leader_id", req->leader_id);
	}
	json_object_end(&w);
	size_t n = json_finish(&w);
	if (n == 0 || n + 1 >= size)
		return 0;
	out[n] = '\n';
	out[n + 1] = '\0';
	return n + 1;
}

/* ---- built-in commands (admin thread) ---- */

/* Commands without arguments refuse stray words rather than ignore them. */
static bool no_args(struct control_request *req)
{
	if (req->argc == 0)
		return true;
	control_request_fail(req, -HASP_EINVAL, "usage: %s (no arguments)", req->name);
	return false;
}

static bool cmd_help(struct control_request *req, void *arg)
{
	struct control *c = arg;
	if (!no_args(req))
		return true;
	struct json_writer *w = &req->out;
	json_array_begin(w);
	for (uint32_t i = 0; i < c->command_count; i++) {
		const struct control_command *cmd = &c->commands[i];
		json_object_begin(w);
		json_kv_str(w, "name", cmd->name);
		json_kv_str(w, "usage", cmd->usage ? cmd->usage : "");
		json_kv_str(w, "help", cmd->help);
		json_kv_str(w, "runs_on", cmd->where == CONTROL_ON_ADMIN ? "admin" : "lcore");
		json_kv_str(w, "access", cmd->access == CONTROL_OPEN ? "open" : "privileged");
		json_object_end(w);
	}
	json_array_end(w);
	return true;
}

static void ip_text(uint64_t ip, char *b, size_t n)
{
	snprintf(b, n, "%u.%u.%u.%u", (unsigned)(ip >> 24) & 255, (unsigned)(ip >> 16) & 255,
		 (unsigned)(ip >> 8) & 255, (unsigned)ip & 255);
}

static void members_json(struct json_writer *w, const struct control_status *st)
{
	json_array_begin(w);
	for (uint64_t i = 0; i < st->member_count; i++) {
		const struct control_member *m = &st->members[i];
		char ip[16];
		ip_text(m->ip, ip, sizeof(ip));
		json_object_begin(w);
		json_kv_u64(w, "id", m->id);
		json_kv_str(w, "role", m->role == 1 ? "voter" : m->role == 2 ? "learner" : "unknown");
		json_kv_str(w, "ip", ip);
		json_kv_u64(w, "peer_port", m->peer_port);
		json_kv_u64(w, "client_port", m->client_port);
		if (st->role == 3) {
			json_kv_u64(w, "match_index", m->match_index);
			json_kv_u64(w, "lag", st->last_index > m->match_index ? st->last_index - m->match_index : 0);
			json_kv_double(w, "rtt_seconds", (double)m->rtt_ns / 1e9);
			json_kv_bool(w, "active", m->active != 0);
		}
		json_object_end(w);
	}
	json_array_end(w);
}

static bool cmd_status(struct control_request *req, void *arg)
{
	struct control *c = arg;
	if (!no_args(req))
		return true;
	struct control_status st;
	char reason[64];
	bool healthy = control_health(c, clock_monotonic_ns(), reason, sizeof(reason));
	control_status_read(c, &st);
	struct json_writer *w = &req->out;
	json_object_begin(w);
	json_kv_u64(w, "id", c->cfg.node_id);
	json_kv_str(w, "address", c->cfg.node_address);
	json_kv_str(w, "role", control_role_name(st.role));
	json_kv_u64(w, "term", st.term);
	json_kv_u64(w, "leader_id", st.leader_id);
	json_kv_u64(w, "commit_index", st.commit_index);
	json_kv_u64(w, "applied_index", st.applied_index);
	json_kv_u64(w, "last_index", st.last_index);
	json_kv_u64(w, "snapshot_index", st.snapshot_index);
	json_kv_u64(w, "lag", st.commit_index > st.applied_index ? st.commit_index - st.applied_index : 0);
	json_kv_bool(w, "healthy", healthy);
	json_kv_str(w, "health", reason);
	json_key(w, "members");
	members_json(w, &st);
	json_object_end(w);
	return true;
}

static bool cmd_health(struct control_request *req, void *arg)
{
	struct control *c = arg;
	if (!no_args(req))
		return true;
	char reason[64];
	bool healthy = control_health(c, clock_monotonic_ns(), reason, sizeof(reason));
	json_object_begin(&req->out);
	json_kv_bool(&req->out, "healthy", healthy);
	json_kv_bool(&req->out, "degraded", strncmp(reason, "degraded", 8) == 0);
	json_kv_str(&req->out, "reason", reason);
	json_object_end(&req->out);
	return true;
}

static bool cmd_metrics(struct control_request *req, void *arg)
{
	struct control *c = arg;
	if (!no_args(req))
		return true;
	process_metrics_update(&c->process);
	metrics_json(&c->metrics, &req->out);
	return true;
}

static bool cmd_members_list(struct control_request *req, void *arg)
{
	struct control *c = arg;
	if (!no_args(req))
		return true;
	struct control_status st;
	control_status_read(c, &st);
	json_object_begin(&req->out);
	json_kv_u64(&req->out, "leader_id", st.leader_id);
	json_key(&req->out, "members");
	members_json(&req->out, &st);
	json_object_end(&req->out);
	return true;
}

static void log_visit(const struct log_topic *t, void *arg)
{
	struct json_writer *w = arg;
	json_object_begin(w);
	json_kv_str(w, "topic", t->name);
	json_kv_str(w, "level", log_level_name(t->level));
	json_object_end(w);
}

static bool cmd_log_list(struct control_request *req, void *arg)
{
	(void)arg;
	if (!no_args(req))
		return true;
	json_array_begin(&req->out);
	log_topics_visit(log_visit, &req->out);
	json_array_end(&req->out);
	return true;
}

static bool cmd_log_level(struct control_request *req, void *arg)
{
	(void)arg;
	if (req->argc != 2) {
		control_request_fail(req, -HASP_EINVAL, "usage: log.level <topic|all> <level>");
		return true;
	}
	int level = log_level_parse(req->argv[1]);
	if (level < 0) {
		control_request_fail(req, -HASP_EINVAL, "unknown level %s (off error warn info debug)",
				     req->argv[1]);
		return true;
	}
	if (log_set_level(req->argv[0], (enum log_level)level) != 0) {
		control_request_fail(req, -HASP_ENOENT, "no log topic %s (see log.list)", req->argv[0]);
		return true;
	}
	json_object_begin(&req->out);
	json_kv_str(&req->out, "topic", req->argv[0]);
	json_kv_str(&req->out, "level", log_level_name((enum log_level)level));
	json_object_end(&req->out);
	return true;
}

/* ---- registry and life cycle ---- */

static bool command_name_valid(const char *name)
{
	size_t n = name != NULL ? strlen(name) : 0;
	if (n == 0 || n >= CONTROL_NAME_SIZE)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || name[i] == '.' || name[i] == '_'))
			return false;
	return true;
}

int control_register(struct control *c, const struct control_command *cmd)
{
	HASP_ASSERT(!c->started);
	HASP_ASSERT(cmd->fn != NULL && cmd->help != NULL);
	if (!command_name_valid(cmd->name))
		return -HASP_EINVAL;
	if (command_find(c, cmd->name) != NULL)
		return -HASP_EEXIST;
	if (c->command_count == CONTROL_COMMANDS_MAX)
		return -HASP_EFULL;
	c->commands[c->command_count++] = *cmd;
	return 0;
}

struct metrics *control_metrics(struct control *c)
{
	return &c->metrics;
}

static int register_builtins(struct control *c)
{
	const struct control_command builtins[] = {
		{ "help", "", "list the commands with their usage", CONTROL_ON_ADMIN, cmd_help, c,
		  CONTROL_OPEN },
		{ "status", "", "this node: role, term, leader, indexes, lag, members", CONTROL_ON_ADMIN,
		  cmd_status, c, CONTROL_OPEN },
		{ "health", "", "healthy when a leader is known and this node can commit",
		  CONTROL_ON_ADMIN, cmd_health, c, CONTROL_OPEN },
		{ "metrics", "", "every metric series with its value", CONTROL_ON_ADMIN, cmd_metrics, c,
		  CONTROL_OPEN },
		{ "members.list", "", "the configuration as this node sees it", CONTROL_ON_ADMIN,
		  cmd_members_list, c, CONTROL_OPEN },
		{ "log.list", "", "log topics and their levels", CONTROL_ON_ADMIN, cmd_log_list, c,
		  CONTROL_OPEN },
		{ "log.level", "<topic|all> <off|error|warn|info|debug>", "set a log topic's level",
		  CONTROL_ON_ADMIN, cmd_log_level, c },
	};
	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++) {
		int rc = control_register(c, &builtins[i]);
		if (rc != 0)
			return rc;
	}
	struct metrics *m = &c->metrics;
	c->counters.requests = metrics_counter(m, "hasp_admin_requests_total",
					       "Admin requests answered.", NULL, 0);
	c->counters.errors = metrics_counter(m, "hasp_admin_errors_total",
					     "Admin requests answered with an error.", NULL, 0);
	c->counters.timeouts = metrics_counter(m, "hasp_admin_timeouts_total",
					       "Admin requests the node thread did not answer in time.",
					       NULL, 0);
	c->counters.rejected = metrics_counter(m, "hasp_admin_rejected_total",
					       "Admin connections or requests refused (too many, too big).",
					       NULL, 0);
	c->counters.http = metrics_counter(m, "hasp_admin_http_requests_total",
					   "HTTP requests (/metrics, /health, /status).", NULL, 0);
	static const struct metrics_label no_credential[] = { { "reason", "no_credential" } };
	static const struct metrics_label bad_credential[] = { { "reason", "bad_credential" } };
	static const struct metrics_label not_configured[] = { { "reason", "not_configured" } };
	static const char refused_help[] =
		"Privileged admin requests refused over TCP (no, wrong or unconfigured credential).";
	c->counters.refused_no_credential = metrics_counter(m, "hasp_admin_refused_total", refused_help,
							     no_credential, 1);
	c->counters.refused_bad_credential = metrics_counter(m, "hasp_admin_refused_total",
							      refused_help, bad_credential, 1);
	c->counters.refused_not_configured = metrics_counter(m, "hasp_admin_refused_total",
							      refused_help, not_configured, 1);
	if (c->counters.refused_no_credential == NULL || c->counters.refused_bad_credential == NULL ||
	    c->counters.refused_not_configured == NULL)
		return -HASP_EFULL;
	if (c->counters.requests == NULL || c->counters.errors == NULL ||
	    c->counters.timeouts == NULL || c->counters.rejected == NULL || c->counters.http == NULL)
		return -HASP_EFULL;
	return process_metrics_register(&c->process, m);
}

int control_init(struct control *c, const struct control_config *cfg)
{
	memset(c, 0, sizeof(*c));
	c->cfg = *cfg;
	c->listen_fds[0] = c->listen_fds[1] = -1;
	c->stop_fd = -1;
	c->wake_fd = -1;
	c->done_fd = -1;
	if (auth_init() != 0) /* the connections' nonces (control/admin_auth.h) */
		return -HASP_ESYS;
	struct control_config *k = &c->cfg;
	if (k->clients_max == 0)
		k->clients_max = 16;
	if (k->slots == 0)
		k->slots = 8;
	if (k->reply_size_max == 0)
		k->reply_size_max = 256u * 1024u;
	if (k->timeout_ms == 0)
		k->timeout_ms = 5000;
	if (k->stall_ms == 0)
		k->stall_ms = 3000;
	if (k->metrics_max == 0)
		k->metrics_max = 512;
	if (k->reply_size_max < 4096 || k->clients_max > 1024 || k->slots > 256)
		return -HASP_ECONFIG;

	int rc = metrics_init(&c->metrics, k->metrics_max);
	if (rc != 0)
		return rc;
	/* Slots: one result buffer each, the size of the largest reply. */
	c->slots = hasp_calloc(k->slots, sizeof(*c->slots));
	if (c->slots == NULL)
		goto nomem;
	c->slot_count = k->slots;
	for (uint32_t i = 0; i < k->slots; i++) {
		c->slots[i].owner = c;
		c->slots[i].result_buf = hasp_alloc(k->reply_size_max);
		if (c->slots[i].result_buf == NULL)
			goto nomem;
		c->slots[i].result_size = k->reply_size_max;
	}
	c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	c->done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->wake_fd < 0 || c->done_fd < 0) {
		rc = -HASP_ESYS;
		goto fail;
	}
	rc = server_alloc(c);
	if (rc != 0)
		goto fail;
	rc = register_builtins(c);
	if (rc != 0)
		goto fail;
	return 0;
nomem:
	rc = -HASP_ENOMEM;
fail:
	control_deinit(c);
	return rc;
}

void control_deinit(struct control *c)
{
	auth_key_wipe(&c->cfg.admin_key);
	HASP_ASSERT(!c->started);
	server_free(c);
	if (c->slots != NULL) {
		for (uint32_t i = 0; i < c->slot_count; i++)
			hasp_free(c->slots[i].result_buf);
		hasp_free(c->slots);
	}
	metrics_deinit(&c->metrics);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	if (c->done_fd >= 0)
		close(c->done_fd);
	c->wake_fd = c->done_fd = -1;
	c->slots = NULL;
	c->slot_count = 0;
}

int control_start(struct control *c)
{
	HASP_ASSERT(!c->started);
	int rc = server_start(c);
	if (rc == 0)
		c->started = true;
	return rc;
}

void control_stop(struct control *c)
{
	if (!c->started)
		return;
	server_stop(c);
	c->started = false;
}
