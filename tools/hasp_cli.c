/*
 * The `hasp` CLI: a thin layer over libhasp for shells and scripts.
 *
 * Every command opens a client, does one thing and closes it; a process
 * that exits ends its session. So a lock taken by `hasp acquire` lives on
 * its own TTL (or a lease) and stays held after the process exits until
 * the TTL ends, the lease ends, or `hasp release <name> <token>` (from any
 * process: release checks the token, not the session). `hasp run` is the
 * exception: it holds the lock for as long as its command runs.
 *
 * Output: human key=value lines by default (errors on stderr), or with
 * --json exactly one JSON object per line on stdout for every result and
 * error. Exit codes: see tools/hasp_cli.h.
 */
#include "tools/hasp_cli.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/clock.h"
#include "hasp/client.h"
#include "hasp/errors.h"

#define NS_PER_MS 1000000ull

static const char usage_text[] =
	"usage: hasp [--cluster ip:port,...] [--json] [--timeout ms] <command>\n"
	"  acquire <name> [--ttl ms | --lease id] [--wait]\n"
	"  release <name> <token>\n"
	"  renew <name> <token> [--ttl ms]\n"
	"  check <name> <token>\n"
	"  read <name>\n"
	"  watch <name> [--prefix] [--count n]\n"
	"  lease grant <ttl-ms> | lease keepalive <id> | lease revoke <id>\n"
	"  kv put <key> <value> [--lease id]\n"
	"  kv get <key> | kv delete <key>\n"
	"  kv cas <key> <value> (--rev n | --expect old-value) [--lease id]\n"
	"  kv range [prefix] [--limit n]\n"
	"  run <name> [--ttl ms] [--wait] [--grace ms] -- <command> [args...]\n"
	"The cluster defaults to $HASP_CLUSTER. Exit: 0 ok, 1 refused, 2 usage,\n"
	"3 unavailable or timed out, 4 lock lost during run.\n";

/* ---- parsing ---- */

static int fail(char *err, size_t err_size, const char *fmt, const char *what)
{
	snprintf(err, err_size, fmt, what);
	return HASP_CLI_EXIT_USAGE;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (s == NULL || *s == '\0' || *s == '-' || *s == '+')
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*out = v;
	return true;
}

static bool parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;

	if (!parse_u64(s, &v) || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

struct cmd_name {
	const char *group; /* NULL: top level */
	const char *word;
	enum hasp_cli_cmd cmd;
	int positionals; /* required positional arguments after the words */
	int optional;    /* optional positionals */
};

static const struct cmd_name commands[] = {
	{ NULL, "acquire", HASP_CLI_ACQUIRE, 1, 0 },
	{ NULL, "release", HASP_CLI_RELEASE, 2, 0 },
	{ NULL, "renew", HASP_CLI_RENEW, 2, 0 },
	{ NULL, "check", HASP_CLI_CHECK, 2, 0 },
	{ NULL, "read", HASP_CLI_READ, 1, 0 },
	{ NULL, "watch", HASP_CLI_WATCH, 1, 0 },
	{ NULL, "run", HASP_CLI_RUN, 1, 0 },
	{ "lease", "grant", HASP_CLI_LEASE_GRANT, 1, 0 },
	{ "lease", "keepalive", HASP_CLI_LEASE_KEEPALIVE, 1, 0 },
	{ "lease", "revoke", HASP_CLI_LEASE_REVOKE, 1, 0 },
	{ "kv", "put", HASP_CLI_KV_PUT, 2, 0 },
	{ "kv", "get", HASP_CLI_KV_GET, 1, 0 },
	{ "kv", "delete", HASP_CLI_KV_DELETE, 1, 0 },
	{ "kv", "cas", HASP_CLI_KV_CAS, 2, 0 },
	{ "kv", "range", HASP_CLI_KV_RANGE, 0, 1 },
};

/* Options that take a value, and the commands they apply to (0: all). */
static bool option_allowed(const char *opt, enum hasp_cli_cmd cmd)
{
	if (strcmp(opt, "--ttl") == 0)
		return cmd == HASP_CLI_ACQUIRE || cmd == HASP_CLI_RENEW || cmd == HASP_CLI_RUN;
	if (strcmp(opt, "--lease") == 0)
		return cmd == HASP_CLI_ACQUIRE || cmd == HASP_CLI_KV_PUT || cmd == HASP_CLI_KV_CAS;
	if (strcmp(opt, "--wait") == 0)
		return cmd == HASP_CLI_ACQUIRE || cmd == HASP_CLI_RUN;
	if (strcmp(opt, "--prefix") == 0 || strcmp(opt, "--count") == 0)
		return cmd == HASP_CLI_WATCH;
	if (strcmp(opt, "--limit") == 0)
		return cmd == HASP_CLI_KV_RANGE;
	if (strcmp(opt, "--rev") == 0 || strcmp(opt, "--expect") == 0)
		return cmd == HASP_CLI_KV_CAS;
	if (strcmp(opt, "--grace") == 0)
		return cmd == HASP_CLI_RUN;
	return false;
}

int hasp_cli_parse(int argc, char **argv, const char *env_cluster, struct hasp_cli_args *a,
		   char *err, size_t err_size)
{
	const char *pos[4];
	int pos_count = 0;
	const char *words[2] = { NULL, NULL };
	int word_count = 0;
	const struct cmd_name *cn = NULL;
	bool rev_given = false;

	memset(a, 0, sizeof(*a));
	err[0] = '\0';
	a->cluster = env_cluster;
	a->grace_ms = HASP_CLI_GRACE_MS_DEFAULT;

	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(s, "--") == 0) {
			if (cn == NULL || cn->cmd != HASP_CLI_RUN)
				return fail(err, err_size, "%s: only `run` takes a command", s);
			a->command = &argv[i + 1];
			a->command_count = argc - i - 1;
			break;
		}
		if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
			a->cmd = HASP_CLI_HELP;
			return 0;
		}
		if (strcmp(s, "--json") == 0) {
			a->json = true;
			continue;
		}
		if (strcmp(s, "--cluster") == 0) {
			if (v == NULL)
				return fail(err, err_size, "%s needs ip:port,...", s);
			a->cluster = v;
			i++;
			continue;
		}
		if (strcmp(s, "--timeout") == 0) {
			if (!parse_u32(v, &a->timeout_ms) || a->timeout_ms == 0)
				return fail(err, err_size, "%s needs milliseconds > 0", s);
			i++;
			continue;
		}
		if (s[0] == '-' && s[1] == '-') {
			if (cn == NULL || !option_allowed(s, cn->cmd))
				return fail(err, err_size, "unknown option here: %s", s);
			if (strcmp(s, "--wait") == 0) {
				a->wait = true;
				continue;
			}
			if (strcmp(s, "--prefix") == 0) {
				a->prefix = true;
				continue;
			}
			if (v == NULL)
				return fail(err, err_size, "%s needs a value", s);
			i++;
			bool ok = true;
			if (strcmp(s, "--ttl") == 0) {
				ok = parse_u32(v, &a->ttl_ms);
				a->ttl_given = true;
			} else if (strcmp(s, "--lease") == 0) {
				ok = parse_u64(v, &a->lease_id) && a->lease_id != 0;
			} else if (strcmp(s, "--count") == 0) {
				ok = parse_u32(v, &a->count) && a->count != 0;
			} else if (strcmp(s, "--limit") == 0) {
				ok = parse_u32(v, &a->limit);
			} else if (strcmp(s, "--rev") == 0) {
				ok = parse_u64(v, &a->expected_revision);
				rev_given = true;
			} else if (strcmp(s, "--expect") == 0) {
				a->cas_value = true;
				a->expected_value = v;
			} else if (strcmp(s, "--grace") == 0) {
				ok = parse_u32(v, &a->grace_ms);
			}
			if (!ok)
				return fail(err, err_size, "bad value for %s", s);
			continue;
		}
		if (cn == NULL) {
			words[word_count++] = s;
			for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++) {
				const struct cmd_name *c = &commands[k];
				if (word_count == 1 && c->group == NULL && strcmp(c->word, s) == 0)
					cn = c;
				if (word_count == 2 && c->group != NULL &&
				    strcmp(c->group, words[0]) == 0 && strcmp(c->word, s) == 0)
					cn = c;
			}
			if (cn == NULL && (word_count == 2 || (strcmp(s, "lease") != 0 &&
							       strcmp(s, "kv") != 0)))
				return fail(err, err_size, "unknown command: %s", s);
			continue;
		}
		if (pos_count == cn->positionals + cn->optional)
			return fail(err, err_size, "unexpected argument: %s", s);
		pos[pos_count++] = s;
	}

	if (cn == NULL)
		return fail(err, err_size, "%s", word_count ? "lease or kv needs a subcommand"
							    : "no command given");
	if (pos_count < cn->positionals)
		return fail(err, err_size, "%s: missing arguments", cn->word);
	a->cmd = cn->cmd;
	if (a->cluster == NULL || a->cluster[0] == '\0')
		return fail(err, err_size, "%s", "no cluster: use --cluster or set HASP_CLUSTER");

	switch (a->cmd) {
	case HASP_CLI_ACQUIRE:
		a->name = pos[0];
		if (a->ttl_given && a->lease_id != 0)
			return fail(err, err_size, "%s", "--ttl and --lease exclude each other");
		if (!a->ttl_given && a->lease_id == 0)
			a->ttl_ms = HASP_CLI_TTL_MS_DEFAULT;
		break;
	case HASP_CLI_RELEASE:
	case HASP_CLI_RENEW:
	case HASP_CLI_CHECK:
		a->name = pos[0];
		if (!parse_u64(pos[1], &a->token) || a->token == 0)
			return fail(err, err_size, "bad token: %s", pos[1]);
		if (a->cmd == HASP_CLI_RENEW && !a->ttl_given)
			a->ttl_ms = HASP_CLI_TTL_MS_DEFAULT;
		break;
	case HASP_CLI_READ:
	case HASP_CLI_WATCH:
	case HASP_CLI_KV_GET:
	case HASP_CLI_KV_DELETE:
		a->name = pos[0];
		break;
	case HASP_CLI_RUN:
		a->name = pos[0];
		if (!a->ttl_given)
			a->ttl_ms = HASP_CLI_RUN_TTL_MS_DEFAULT;
		if (a->command_count == 0)
			return fail(err, err_size, "%s", "run needs -- <command> [args...]");
		break;
	case HASP_CLI_LEASE_GRANT:
		if (!parse_u32(pos[0], &a->ttl_ms))
			return fail(err, err_size, "bad ttl: %s", pos[0]);
		break;
	case HASP_CLI_LEASE_KEEPALIVE:
	case HASP_CLI_LEASE_REVOKE:
		if (!parse_u64(pos[0], &a->lease_id) || a->lease_id == 0)
			return fail(err, err_size, "bad lease id: %s", pos[0]);
		break;
	case HASP_CLI_KV_PUT:
		a->name = pos[0];
		a->value = pos[1];
		break;
	case HASP_CLI_KV_CAS:
		a->name = pos[0];
		a->value = pos[1];
		if (rev_given == a->cas_value)
			return fail(err, err_size, "%s", "kv cas needs exactly one of --rev, --expect");
		break;
	case HASP_CLI_KV_RANGE:
		a->name = pos_count > 0 ? pos[0] : NULL;
		break;
	case HASP_CLI_HELP:
		break;
	}
	return 0;
}

/* ---- output ---- */

static void json_string(FILE *f, const void *data, size_t size)
{
	const uint8_t *p = data;

	fputc('"', f);
	for (size_t i = 0; i < size; i++) {
		if (p[i] == '"' || p[i] == '\\')
			fprintf(f, "\\%c", p[i]);
		else if (p[i] < 0x20 || p[i] >= 0x7f)
			fprintf(f, "\\u%04x", p[i]);
		else
			fputc(p[i], f);
	}
	fputc('"', f);
}

static void json_cstr(FILE *f, const char *s)
{
	json_string(f, s, strlen(s));
}

int hasp_cli_exit_code(int rc, int ok_status)
{
	if (rc == ok_status)
		return HASP_CLI_EXIT_OK;
	if (rc >= 0)
		return HASP_CLI_EXIT_REFUSED;
	switch (-rc) {
	case HASP_ETIMEDOUT:
	case HASP_ESYS:
	case HASP_ECORRUPT:
	case HASP_EAGAIN:
		return HASP_CLI_EXIT_UNAVAILABLE;
	default:
		return HASP_CLI_EXIT_USAGE; /* refused locally: nothing was sent */
	}
}

/* Reports a result that is not the command's success: a status the
 * cluster answered, or a local error. Returns the exit code. */
static int report_failure(const struct hasp_cli_args *a, const char *what, int rc, int ok_status)
{
	if (a->json) {
		if (rc >= 0) {
			printf("{\"status\":");
			json_cstr(stdout, hasp_status_name((uint32_t)rc));
		} else {
			printf("{\"error\":");
			json_cstr(stdout, hasp_strerror_name(rc));
			printf(",\"message\":");
			json_cstr(stdout, hasp_strerror(rc));
		}
		printf(",\"command\":");
		json_cstr(stdout, what);
		if (a->name != NULL) {
			printf(",\"name\":");
			json_cstr(stdout, a->name);
		}
		printf("}\n");
	} else if (rc >= 0) {
		fprintf(stderr, "hasp: %s%s%s: %s\n", what, a->name ? " " : "", a->name ? a->name : "",
			hasp_status_name((uint32_t)rc));
	} else {
		fprintf(stderr, "hasp: %s%s%s: %s\n", what, a->name ? " " : "", a->name ? a->name : "",
			hasp_strerror(rc));
	}
	return hasp_cli_exit_code(rc, ok_status);
}

static void print_lock(const struct hasp_cli_args *a, const char *status,
		       const struct hasp_lock *lock)
{
	if (a->json)
		printf("{\"status\":\"%s\",\"name\":", status);
	else
		printf("%s name=%s", status, lock->name);
	if (a->json) {
		json_cstr(stdout, lock->name);
		printf(",\"token\":%" PRIu64 ",\"lease_id\":%" PRIu64 ",\"ttl_ms\":%u}\n",
		       lock->token, lock->lease_id, lock->ttl_ms);
	} else {
		printf(" token=%" PRIu64 " lease_id=%" PRIu64 " ttl_ms=%u\n", lock->token,
		       lock->lease_id, lock->ttl_ms);
	}
}

static void print_ok(const struct hasp_cli_args *a, const char *status, const char *extra_key,
		     uint64_t extra)
{
	if (a->json) {
		printf("{\"status\":\"%s\"", status);
		if (a->name != NULL) {
			printf(",\"name\":");
			json_cstr(stdout, a->name);
		}
		if (extra_key != NULL)
			printf(",\"%s\":%" PRIu64, extra_key, extra);
		printf("}\n");
	} else {
		printf("%s", status);
		if (a->name != NULL)
			printf(" name=%s", a->name);
		if (extra_key != NULL)
			printf(" %s=%" PRIu64, extra_key, extra);
		printf("\n");
	}
}

static const char *event_type_name(uint8_t type)
{
	switch (type) {
	case HASP_EVENT_LOCK_RELEASED:
		return "LOCK_RELEASED";
	case HASP_EVENT_LOCK_GRANTED:
		return "LOCK_GRANTED";
	case HASP_EVENT_KV_PUT:
		return "KV_PUT";
	case HASP_EVENT_KV_DELETED:
		return "KV_DELETED";
	default:
		return "?";
	}
}

static void print_value_human(const uint8_t *value, size_t size)
{
	fwrite(value, 1, size, stdout);
}

/* libhasp returns 0 or -HASP_E* (client.h); the commands speak the
 * cluster's statuses (exit codes, BUSY / NOT_HOLDER output). Maps 0 to the
 * command's success status and a cluster refusal back to its status. */
static int cli_status(int rc, int ok_status)
{
	int status = hasp_error_status(rc);

	if (rc == 0)
		return ok_status;
	return status >= 0 ? status : rc;
}

/* ---- commands ---- */

static int cmd_acquire(struct hasp_client *c, const struct hasp_cli_args *a)
{
	struct hasp_acquire_opts opts = { .ttl_ms = a->lease_id ? 0 : a->ttl_ms,
					  .lease_id = a->lease_id,
					  .wait = a->wait,
					  .wait_timeout_ms = a->timeout_ms };
	struct hasp_lock lock;
	int rc = cli_status(hasp_client_acquire(c, a->name, &opts, &lock), HASP_STATUS_GRANTED);

	if (rc == HASP_STATUS_GRANTED) {
		print_lock(a, "GRANTED", &lock);
		return HASP_CLI_EXIT_OK;
	}
	if (rc == HASP_STATUS_BUSY) {
		if (a->json) {
			printf("{\"status\":\"BUSY\",\"name\":");
			json_cstr(stdout, a->name);
			printf(",\"holder_token\":%" PRIu64 "}\n", lock.token);
		} else {
			fprintf(stderr, "hasp: acquire %s: BUSY (holder token %" PRIu64 ")\n",
				a->name, lock.token);
		}
		return HASP_CLI_EXIT_REFUSED;
	}
	return report_failure(a, "acquire", rc, HASP_STATUS_GRANTED);
}

static int cmd_read(struct hasp_client *c, const struct hasp_cli_args *a)
{
	struct hasp_lock_info info;
	int rc = cli_status(hasp_client_lock_read(c, a->name, &info), HASP_STATUS_OK);

	if (rc != HASP_STATUS_OK)
		return report_failure(a, "read", rc, HASP_STATUS_OK);
	if (a->json) {
		printf("{\"status\":\"OK\",\"name\":");
		json_cstr(stdout, a->name);
		printf(",\"holder_session_id\":%" PRIu64 ",\"token\":%" PRIu64
		       ",\"lease_id\":%" PRIu64 ",\"ttl_remaining_ms\":%u,\"waiter_count\":%u}\n",
		       info.holder_session_id, info.token, info.lease_id, info.ttl_remaining_ms,
		       info.waiter_count);
	} else {
		printf("HELD name=%s token=%" PRIu64 " holder_session_id=%" PRIu64
		       " lease_id=%" PRIu64 " ttl_remaining_ms=%u waiter_count=%u\n",
		       a->name, info.token, info.holder_session_id, info.lease_id,
		       info.ttl_remaining_ms, info.waiter_count);
	}
	return HASP_CLI_EXIT_OK;
}

static int cmd_watch(struct hasp_client *c, const struct hasp_cli_args *a)
{
	uint64_t deadline_ns = a->timeout_ms ? clock_monotonic_ns() + a->timeout_ms * NS_PER_MS
					     : UINT64_MAX;
	uint32_t seen = 0;
	int rc = cli_status(hasp_client_watch(c, a->name, a->prefix), HASP_STATUS_OK);

	if (rc != HASP_STATUS_OK)
		return report_failure(a, "watch", rc, HASP_STATUS_OK);
	rc = hasp_client_keepalive_start(c);
	if (rc != 0)
		return report_failure(a, "watch", rc, HASP_STATUS_OK);
	while (a->count == 0 || seen < a->count) {
		struct hasp_event ev;
		uint64_t now = clock_monotonic_ns();
		if (now >= deadline_ns)
			break;
		uint64_t left_ms = deadline_ns == UINT64_MAX ? 1000 : (deadline_ns - now) / NS_PER_MS;
		if (hasp_client_next_event(c, &ev, (uint32_t)(left_ms > 1000 ? 1000 : left_ms)) != 0)
			continue;
		seen++;
		if (a->json) {
			printf("{\"event\":\"%s\",\"name\":", event_type_name(ev.type));
			json_cstr(stdout, ev.name);
			printf(",\"revision\":%" PRIu64, ev.revision);
			if (ev.type == HASP_EVENT_KV_PUT) {
				printf(",\"value\":");
				json_string(stdout, ev.value, ev.value_size);
			}
			printf("}\n");
		} else {
			printf("%s name=%s revision=%" PRIu64, event_type_name(ev.type), ev.name,
			       ev.revision);
			if (ev.type == HASP_EVENT_KV_PUT) {
				printf(" value=");
				print_value_human(ev.value, ev.value_size);
			}
			printf("\n");
		}
		fflush(stdout);
	}
	/* A bounded watch that saw fewer events than asked for timed out. */
	if (a->count != 0 && seen < a->count)
		return report_failure(a, "watch", -HASP_ETIMEDOUT, HASP_STATUS_OK);
	return HASP_CLI_EXIT_OK;
}

static int cmd_lease(struct hasp_client *c, const struct hasp_cli_args *a)
{
	struct hasp_lease lease;
	int rc;

	switch (a->cmd) {
	case HASP_CLI_LEASE_GRANT:
		rc = cli_status(hasp_client_lease_grant(c, a->ttl_ms, &lease), HASP_STATUS_OK);
		break;
	case HASP_CLI_LEASE_KEEPALIVE:
		rc = cli_status(hasp_client_lease_keepalive(c, a->lease_id, &lease), HASP_STATUS_OK);
		break;
	default:
		rc = cli_status(hasp_client_lease_revoke(c, a->lease_id), HASP_STATUS_OK);
		if (rc == HASP_STATUS_OK)
			print_ok(a, "OK", "lease_id", a->lease_id);
		return rc == HASP_STATUS_OK ? HASP_CLI_EXIT_OK
					    : report_failure(a, "lease revoke", rc, HASP_STATUS_OK);
	}
	if (rc != HASP_STATUS_OK)
		return report_failure(a, "lease", rc, HASP_STATUS_OK);
	if (a->json)
		printf("{\"status\":\"OK\",\"lease_id\":%" PRIu64 ",\"ttl_ms\":%u}\n",
		       lease.lease_id, lease.ttl_ms);
	else
		printf("OK lease_id=%" PRIu64 " ttl_ms=%u\n", lease.lease_id, lease.ttl_ms);
	return HASP_CLI_EXIT_OK;
}

static int range_print(const struct hasp_kv_entry *e, void *arg)
{
	const struct hasp_cli_args *a = arg;

	if (a->json) {
		printf("{\"key\":");
		json_cstr(stdout, e->key);
		printf(",\"value\":");
		json_string(stdout, e->value, e->value_size);
		printf(",\"revision\":%" PRIu64 "}\n", e->revision);
	} else {
		printf("%s ", e->key);
		print_value_human(e->value, e->value_size);
		printf("\n");
	}
	return 0;
}

static int cmd_kv(struct hasp_client *c, const struct hasp_cli_args *a)
{
	uint64_t revision = 0;
	int rc;

	switch (a->cmd) {
	case HASP_CLI_KV_PUT:
		rc = cli_status(hasp_client_kv_put(c, a->name, a->value, strlen(a->value), a->lease_id,
					&revision), HASP_STATUS_OK);
		break;
	case HASP_CLI_KV_DELETE:
		rc = cli_status(hasp_client_kv_delete(c, a->name, &revision), HASP_STATUS_OK);
		break;
	case HASP_CLI_KV_CAS: {
		struct hasp_kv_cas cas = {
			.compare_value = a->cas_value,
			.expected_revision = a->expected_revision,
			.expected_value = a->expected_value,
			.expected_value_size = a->expected_value ? strlen(a->expected_value) : 0,
			.value = a->value,
			.value_size = strlen(a->value),
			.lease_id = a->lease_id,
		};
		rc = cli_status(hasp_client_kv_cas(c, a->name, &cas, &revision), HASP_STATUS_OK);
		if (rc == HASP_STATUS_COMPARE_FAILED) {
			/* Say why: the key is absent (revision 0) or differs. */
			if (a->json)
				printf("{\"status\":\"COMPARE_FAILED\",\"command\":\"kv cas\","
				       "\"revision\":%" PRIu64 ",\"exists\":%s}\n",
				       revision, revision != 0 ? "true" : "false");
			else
				fprintf(stderr, "hasp: kv cas %s: COMPARE_FAILED (%s, revision %" PRIu64 ")\n",
					a->name, revision != 0 ? "the key differs" : "the key does not exist",
					revision);
			return hasp_cli_exit_code(rc, HASP_STATUS_OK);
		}
		break;
	}
	case HASP_CLI_KV_GET: {
		struct hasp_kv_value v;
		rc = cli_status(hasp_client_kv_get(c, a->name, &v), HASP_STATUS_OK);
		if (rc != HASP_STATUS_OK)
			return report_failure(a, "kv get", rc, HASP_STATUS_OK);
		if (a->json) {
			printf("{\"status\":\"OK\",\"key\":");
			json_cstr(stdout, a->name);
			printf(",\"value\":");
			json_string(stdout, v.value, v.value_size);
			printf(",\"revision\":%" PRIu64 ",\"lease_id\":%" PRIu64 "}\n", v.revision,
			       v.lease_id);
		} else {
			print_value_human(v.value, v.value_size);
			printf("\n");
		}
		return HASP_CLI_EXIT_OK;
	}
	default:
		rc = cli_status(hasp_client_kv_range(c, a->name, a->limit, range_print, (void *)a), HASP_STATUS_OK);
		return rc == HASP_STATUS_OK ? HASP_CLI_EXIT_OK
					    : report_failure(a, "kv range", rc, HASP_STATUS_OK);
	}
	if (rc != HASP_STATUS_OK)
		return report_failure(a, "kv", rc, HASP_STATUS_OK);
	print_ok(a, "OK", "revision", revision);
	return HASP_CLI_EXIT_OK;
}

/* ---- run ---- */

static volatile sig_atomic_t run_signal;

static void run_on_signal(int sig)
{
	run_signal = sig;
}

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL); /* EINTR (SIGCHLD, a forwarded signal) just ends it early */
}

/* SIGTERM to the command's process group, SIGKILL after the grace period.
 * Returns its wait status. */
static int run_stop_child(pid_t pid, uint32_t grace_ms)
{
	uint64_t kill_at = clock_monotonic_ns() + (uint64_t)grace_ms * NS_PER_MS;
	int status = 0;
	bool killed = false;

	kill(-pid, SIGTERM);
	for (;;) {
		pid_t got = waitpid(pid, &status, WNOHANG);
		if (got == pid)
			return status;
		if (got < 0 && errno != EINTR)
			return status;
		if (!killed && clock_monotonic_ns() >= kill_at) {
			kill(-pid, SIGKILL);
			killed = true;
		}
		sleep_ms(10);
	}
}

static int run_exit_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return HASP_CLI_EXIT_UNAVAILABLE;
}

static int cmd_run(struct hasp_client *c, const struct hasp_cli_args *a)
{
	struct hasp_acquire_opts opts = { .ttl_ms = a->ttl_ms,
					  .wait = a->wait,
					  .wait_timeout_ms = a->timeout_ms };
	struct hasp_lock lock;
	char token_text[24];
	uint64_t renew_every_ns = (uint64_t)a->ttl_ms * NS_PER_MS / 3;
	uint64_t next_renew_ns;
	struct sigaction sa;
	const char *lost_reason = NULL;
	int status = 0;
	pid_t parent;
	pid_t pid;
	int rc;

	rc = cli_status(hasp_client_acquire(c, a->name, &opts, &lock), HASP_STATUS_GRANTED);
	if (rc != HASP_STATUS_GRANTED) {
		if (rc == HASP_STATUS_BUSY && !a->json)
			fprintf(stderr, "hasp: run %s: BUSY (holder token %" PRIu64 ")\n", a->name,
				lock.token);
		return rc == HASP_STATUS_BUSY && !a->json
			       ? HASP_CLI_EXIT_REFUSED
			       : report_failure(a, "run", rc, HASP_STATUS_GRANTED);
	}
	if (hasp_client_keepalive_start(c) != 0) {
		int rel = hasp_client_release(c, a->name, lock.token);
		(void)rel;
		return report_failure(a, "run", -HASP_ESYS, HASP_STATUS_GRANTED);
	}
	snprintf(token_text, sizeof(token_text), "%" PRIu64, lock.token);
	fflush(stdout);
	fflush(stderr);

	/* Forward the usual stop signals to the command instead of dying with
	 * the lock held. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = run_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	parent = getpid();
	pid = fork();
	if (pid < 0) {
		int rel = hasp_client_release(c, a->name, lock.token);
		(void)rel;
		return report_failure(a, "run", -HASP_ESYS, HASP_STATUS_GRANTED);
	}
	if (pid == 0) {
		/* Its own process group, so that a lost lock stops the whole
		 * command, not just a shell in front of it. */
		setpgid(0, 0);
		/* If hasp itself dies (SIGKILL, OOM), nobody renews the lock
		 * any more: stop the command rather than let it run unowned. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(HASP_CLI_EXIT_LOCK_LOST);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		setenv("HASP_FENCE", token_text, 1);
		setenv("HASP_LOCK", a->name, 1);
		execvp(a->command[0], a->command);
		fprintf(stderr, "hasp: run: cannot execute %s: %s\n", a->command[0], strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid); /* both sides, so kill(-pid) works at once */

	next_renew_ns = clock_monotonic_ns() + renew_every_ns;
	for (;;) {
		pid_t got = waitpid(pid, &status, WNOHANG);
		if (got == pid)
			break;
		if (run_signal != 0) {
			kill(-pid, run_signal);
			run_signal = 0;
		}
		uint64_t now = clock_monotonic_ns();
		if (now >= hasp_client_lock_valid_until(c, &lock)) {
			lost_reason = "validity deadline passed without a successful renew";
			break;
		}
		if (now >= next_renew_ns) {
			/* A renew gives up by the validity deadline, so a
			 * silent cluster cannot keep the command running past
			 * it; the deadline check above then ends the lock. */
			uint64_t left_ms = (hasp_client_lock_valid_until(c, &lock) - now) / NS_PER_MS;
			uint64_t every_ms = renew_every_ns / NS_PER_MS;
			if (left_ms > every_ms)
				left_ms = every_ms;
			rc = hasp_client_set_deadline(c, left_ms > 0 ? (uint32_t)left_ms : 1);
			HASP_ASSERT(rc == 0);
			rc = cli_status(hasp_client_renew(c, a->name, lock.token, a->ttl_ms, &lock), HASP_STATUS_GRANTED);
			if (rc == HASP_STATUS_GRANTED) {
				next_renew_ns = clock_monotonic_ns() + renew_every_ns;
			} else if (rc >= 0) {
				lost_reason = hasp_status_name((uint32_t)rc);
				break;
			} else {
				/* Unanswered: try again soon; the validity
				 * deadline above decides when it is lost. */
				next_renew_ns = clock_monotonic_ns() + 100 * NS_PER_MS;
			}
		}
		sleep_ms(10);
	}

	if (lost_reason != NULL) {
		status = run_stop_child(pid, a->grace_ms);
		if (a->json) {
			printf("{\"status\":\"LOCK_LOST\",\"name\":");
			json_cstr(stdout, a->name);
			printf(",\"token\":%" PRIu64 ",\"reason\":", lock.token);
			json_cstr(stdout, lost_reason);
			printf(",\"command_status\":%d}\n", run_exit_status(status));
		} else {
			fprintf(stderr, "hasp: run %s: lock lost (%s); command stopped\n", a->name,
				lost_reason);
		}
		return HASP_CLI_EXIT_LOCK_LOST;
	}
	hasp_client_keepalive_stop(c);
	rc = cli_status(hasp_client_release(c, a->name, lock.token), HASP_STATUS_OK);
	if (rc != HASP_STATUS_OK && !a->json)
		fprintf(stderr, "hasp: run %s: release: %s\n", a->name,
			rc >= 0 ? hasp_status_name((uint32_t)rc) : hasp_strerror(rc));
	return run_exit_status(status);
}

int hasp_cli_execute(const struct hasp_cli_args *a)
{
	struct hasp_client_config cfg;
	struct hasp_client *c = NULL;
	int code;
	int rc;

	if (a->cmd == HASP_CLI_HELP) {
		fputs(usage_text, stdout);
		return HASP_CLI_EXIT_OK;
	}
	hasp_client_config_default(&cfg);
	cfg.cluster = a->cluster;
	if (a->timeout_ms != 0 && a->cmd != HASP_CLI_WATCH && !(a->wait))
		cfg.deadline_ms = a->timeout_ms;
	rc = hasp_client_open(&c, &cfg);
	if (rc != 0)
		return report_failure(a, "open", rc, 0);

	switch (a->cmd) {
	case HASP_CLI_ACQUIRE:
		code = cmd_acquire(c, a);
		break;
	case HASP_CLI_RELEASE:
		rc = cli_status(hasp_client_release(c, a->name, a->token), HASP_STATUS_OK);
		if (rc == HASP_STATUS_OK)
			print_ok(a, "RELEASED", "token", a->token);
		code = rc == HASP_STATUS_OK ? HASP_CLI_EXIT_OK
					    : report_failure(a, "release", rc, HASP_STATUS_OK);
		break;
	case HASP_CLI_RENEW: {
		struct hasp_lock lock = { .token = a->token };
		snprintf(lock.name, sizeof(lock.name), "%s", a->name);
		rc = cli_status(hasp_client_renew(c, a->name, a->token, a->ttl_ms, &lock), HASP_STATUS_GRANTED);
		if (rc == HASP_STATUS_GRANTED) {
			print_lock(a, "GRANTED", &lock);
			code = HASP_CLI_EXIT_OK;
		} else {
			code = report_failure(a, "renew", rc, HASP_STATUS_GRANTED);
		}
		break;
	}
	case HASP_CLI_CHECK:
		rc = cli_status(hasp_client_check(c, a->name, a->token), HASP_STATUS_OK);
		if (rc == HASP_STATUS_OK)
			print_ok(a, "CURRENT", "token", a->token);
		code = rc == HASP_STATUS_OK ? HASP_CLI_EXIT_OK
					    : report_failure(a, "check", rc, HASP_STATUS_OK);
		break;
	case HASP_CLI_READ:
		code = cmd_read(c, a);
		break;
	case HASP_CLI_WATCH:
		code = cmd_watch(c, a);
		break;
	case HASP_CLI_LEASE_GRANT:
	case HASP_CLI_LEASE_KEEPALIVE:
	case HASP_CLI_LEASE_REVOKE:
		code = cmd_lease(c, a);
		break;
	case HASP_CLI_RUN:
		code = cmd_run(c, a);
		break;
	default:
		code = cmd_kv(c, a);
		break;
	}
	fflush(stdout);
	hasp_client_close(c);
	return code;
}

int hasp_cli_main(int argc, char **argv)
{
	struct hasp_cli_args args;
	char err[160];
	int rc = hasp_cli_parse(argc, argv, getenv("HASP_CLUSTER"), &args, err, sizeof(err));

	if (rc != 0) {
		fprintf(stderr, "hasp: %s (hasp --help for usage)\n", err);
		return rc;
	}
	return hasp_cli_execute(&args);
}
