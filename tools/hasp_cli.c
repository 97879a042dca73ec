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

#include <arpa/inet.h>
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
#include "common/duration.h"
#include "common/limits.h"
#include "common/resolve.h"
#include "common/version.h"
#include "hasp/client.h"
#include "hasp/errors.h"

#define NS_PER_MS 1000000ull

/* One command a line, its arguments from column 20 (a continuation there
 * too): help2man renders each line as a tagged paragraph of its own, so the
 * man page lists one command per line (tests/client/install_test.sh). */
static const char usage_text[] =
	"usage: hasp [--cluster host:port,...] [--json] [--timeout DURATION] <command> [args]\n"
	"  acquire          <name> [--ttl DURATION | --lease ID] [--wait]\n"
	"  release          <name> <token>\n"
	"  renew            <name> <token> [--ttl DURATION]\n"
	"  check            <name> <token>\n"
	"  read             <name>\n"
	"  watch            <name> [--prefix] [--count N]\n"
	"  lease grant      <ttl>\n"
	"  lease keepalive  <id>\n"
	"  lease revoke     <id>\n"
	"  kv put           <key> <value> [--lease ID]\n"
	"  kv get           <key>\n"
	"  kv delete        <key>\n"
	"  kv cas           <key> <value> (--rev N | --expect OLD-VALUE) [--lease ID]\n"
	"  kv range         [prefix] [--limit N]\n"
	"  run              <name> [--try] [--ttl DURATION] [--grace DURATION]\n"
	"                   [--conflict-exit-code N] -- <command> [args...]\n"
	"`hasp <command> --help` describes one command; `hasp --version` the release;\n"
	"--dry-run checks a command line and sends nothing.\n"
	"The cluster defaults to $HASP_CLUSTER. A DURATION is 500ms, 5s, 2m or 1h; a\n"
	"bare number is milliseconds. A name or key is 1..128 bytes of 0x21..0x7e.\n"
	"Exit: 0 ok, 1 refused, 2 usage, 3 unavailable or timed out, 4 lock lost\n"
	"during run (docs/CLIENT.md \"The hasp CLI\").\n";

/* ---- parsing ---- */

/* The input as an error message may quote it: at most 32 bytes, control
 * and non-ASCII bytes as \xNN, and the full length when cut. */
static const char *quoted(const char *s, char *buf, size_t size)
{
	size_t len = strlen(s);
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < len && i < 32 && o + 8 < size; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch < 0x20 || ch >= 0x7f)
			o += (size_t)snprintf(buf + o, size - o, "\\x%02x", ch);
		else
			buf[o++] = (char)ch;
		buf[o] = '\0';
	}
	if (len > 32)
		snprintf(buf + o, size - o, "... (%zu bytes)", len);
	return buf;
}

/* A usage error of our own words (nothing the user typed in it). */
static int fail_text(char *err, size_t err_size, const char *text)
{
	snprintf(err, err_size, "%s", text);
	return HASP_CLI_EXIT_USAGE;
}

/* A usage error quoting what the user typed. */
static int fail(char *err, size_t err_size, const char *fmt, const char *what)
{
	char q[160];

	snprintf(err, err_size, fmt, quoted(what, q, sizeof(q)));
	return HASP_CLI_EXIT_USAGE;
}

/* "<what> <value>: <rule>", the value quoted. */
static int fail_value(char *err, size_t err_size, const char *what, const char *value, const char *rule)
{
	char q[160];

	snprintf(err, err_size, "%s %s: %s", what, quoted(value, q, sizeof(q)), rule);
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

static bool parse_duration(const char *s, uint64_t min_ms, uint64_t max_ms, uint32_t *out)
{
	uint64_t v;

	if (s == NULL || duration_parse_ms(s, max_ms, &v) != 0 || v < min_ms)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* A lock name or key as the protocol takes it (common/limits.h). */
static bool name_valid(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > HASP_NAME_SIZE_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < HASP_NAME_BYTE_MIN || (unsigned char)s[i] > HASP_NAME_BYTE_MAX)
			return false;
	return true;
}

struct cmd_name {
	const char *group; /* NULL: top level */
	const char *word;
	enum hasp_cli_cmd cmd;
	int positionals; /* required positional arguments after the words */
	int optional;    /* optional positionals */
	const char *usage;
	const char *help;
};

static const struct cmd_name commands[] = {
	{ NULL, "acquire", HASP_CLI_ACQUIRE, 1, 0, "acquire <name> [--ttl DURATION | --lease ID] [--wait]",
	  "Takes the lock and prints its fencing token. The lock lives on its own TTL\n"
	  "(default 30s, 10ms..24h) or on a lease; it stays held after hasp exits.\n"
	  "BUSY exits 1 at once; --wait queues (FIFO) until granted or --timeout.\n" },
	{ NULL, "release", HASP_CLI_RELEASE, 2, 0, "release <name> <token>",
	  "Releases the lock if <token> is still its holder's token (from any process).\n" },
	{ NULL, "renew", HASP_CLI_RENEW, 2, 0, "renew <name> <token> [--ttl DURATION]",
	  "Restarts the lock's TTL (default 30s, 10ms..24h); NOT_HOLDER exits 1.\n" },
	{ NULL, "check", HASP_CLI_CHECK, 2, 0, "check <name> <token>",
	  "Exits 0 when <token> is the lock's current token, 1 when it is stale.\n" },
	{ NULL, "read", HASP_CLI_READ, 1, 0, "read <name>",
	  "Prints the holder, token, lease, remaining TTL and waiters; exit 1 when free.\n" },
	{ NULL, "watch", HASP_CLI_WATCH, 1, 0, "watch <name> [--prefix] [--count N]",
	  "Prints one line per event (lock released or granted, key put or deleted)\n"
	  "until --count events or --timeout (exit 3 when fewer came).\n" },
	{ NULL, "run", HASP_CLI_RUN, 1, 0,
	  "run <name> [--try] [--ttl DURATION] [--grace DURATION] [--conflict-exit-code N]\n"
	  "         -- <command> [args...]",
	  "Waits for the lock (like flock(1)), runs the command with $HASP_FENCE and\n"
	  "$HASP_LOCK set, renews the lock every ttl/3 (default ttl 10s) and releases it\n"
	  "when the command ends; exits with the command's status. --try gives up at once\n"
	  "when the lock is busy, --timeout after that long; both then exit with\n"
	  "--conflict-exit-code (default 1). A lost lock stops the command (SIGTERM, then\n"
	  "SIGKILL after --grace, default 5s) and exits 4. SIGHUP, SIGINT and SIGTERM are\n"
	  "passed to the command; other signals are ignored while the lock is held.\n" },
	{ "lease", "grant", HASP_CLI_LEASE_GRANT, 1, 0, "lease grant <ttl>",
	  "Creates a lease of <ttl> (a DURATION, 10ms..24h) and prints its id.\n" },
	{ "lease", "keepalive", HASP_CLI_LEASE_KEEPALIVE, 1, 0, "lease keepalive <id>",
	  "Restarts the lease's TTL once.\n" },
	{ "lease", "revoke", HASP_CLI_LEASE_REVOKE, 1, 0, "lease revoke <id>",
	  "Ends the lease: its locks are released and its keys deleted.\n" },
	{ "kv", "put", HASP_CLI_KV_PUT, 2, 0, "kv put <key> <value> [--lease ID]",
	  "Stores <value> (0..1024 bytes) under <key>; prints the new revision.\n" },
	{ "kv", "get", HASP_CLI_KV_GET, 1, 0, "kv get <key>",
	  "Prints the value (with --json also its revision and lease); exit 1 when absent.\n" },
	{ "kv", "delete", HASP_CLI_KV_DELETE, 1, 0, "kv delete <key>", "Deletes <key>.\n" },
	{ "kv", "cas", HASP_CLI_KV_CAS, 2, 0,
	  "kv cas <key> <value> (--rev N | --expect OLD-VALUE) [--lease ID]",
	  "Stores <value> only if the key's revision is N (0: absent) or its value is\n"
	  "OLD-VALUE; COMPARE_FAILED exits 1.\n" },
	{ "kv", "range", HASP_CLI_KV_RANGE, 0, 1, "kv range [prefix] [--limit N]",
	  "Prints the keys under the prefix (all keys without one), one per line.\n" },
};

#define COMMAND_COUNT (sizeof(commands) / sizeof(commands[0]))

static const struct cmd_name *command_of(enum hasp_cli_cmd cmd)
{
	for (size_t k = 0; k < COMMAND_COUNT; k++)
		if (commands[k].cmd == cmd)
			return &commands[k];
	return NULL;
}

void hasp_cli_help(enum hasp_cli_cmd cmd, FILE *out)
{
	const struct cmd_name *c = command_of(cmd);

	if (c == NULL) {
		fputs(usage_text, out);
		return;
	}
	fprintf(out, "usage: hasp [--cluster host:port,...] [--json] [--timeout DURATION] %s\n%s", c->usage,
		c->help);
}

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
	if (strcmp(opt, "--grace") == 0 || strcmp(opt, "--try") == 0 ||
	    strcmp(opt, "--conflict-exit-code") == 0)
		return cmd == HASP_CLI_RUN;
	return false;
}

/* --help and --version win over everything else on the line (before a
 * lone "--"): help names the command when the words before it name one. */
static bool parse_help(int argc, char **argv, struct hasp_cli_args *a)
{
	const char *first = NULL;
	bool help = false;
	int words = 0;

	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *s = argv[i];
		if (strcmp(s, "--version") == 0) {
			a->cmd = HASP_CLI_VERSION;
			return true;
		}
		if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0 ||
		    (words == 0 && strcmp(s, "help") == 0)) {
			help = true;
			continue;
		}
		if (s[0] == '-')
			continue;
		words++;
		for (size_t k = 0; k < COMMAND_COUNT && a->help_for == HASP_CLI_HELP; k++) {
			const struct cmd_name *c = &commands[k];
			if (first == NULL && c->group == NULL && strcmp(c->word, s) == 0)
				a->help_for = c->cmd;
			if (first != NULL && c->group != NULL && strcmp(c->group, first) == 0 &&
			    strcmp(c->word, s) == 0)
				a->help_for = c->cmd;
		}
		if (first == NULL && (strcmp(s, "lease") == 0 || strcmp(s, "kv") == 0))
			first = s;
	}
	if (help)
		a->cmd = HASP_CLI_HELP;
	return help;
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
	char ttl_rule[96];
	const char *duration_rule = "want a duration (500ms, 5s, 2m, 1h; a bare number is ms)";

	memset(a, 0, sizeof(*a));
	err[0] = '\0';
	if (parse_help(argc, argv, a))
		return 0;
	a->cluster = env_cluster;
	a->grace_ms = HASP_CLI_GRACE_MS_DEFAULT;
	a->conflict_exit_code = HASP_CLI_EXIT_REFUSED;
	snprintf(ttl_rule, sizeof(ttl_rule), "want a TTL of %ums..%uh (500ms, 5s, 2m; a bare number is ms)",
		 HASP_TTL_MS_MIN, HASP_TTL_MS_MAX / 3600000u);

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
		if (strcmp(s, "--json") == 0) {
			a->json = true;
			continue;
		}
		if (strcmp(s, "--dry-run") == 0) {
			a->dry_run = true;
			continue;
		}
		if (strcmp(s, "--cluster") == 0) {
			if (v == NULL)
				return fail(err, err_size, "%s needs host:port,...", s);
			a->cluster = v;
			i++;
			continue;
		}
		if (strcmp(s, "--timeout") == 0) {
			if (v == NULL)
				return fail(err, err_size, "%s needs a value", s);
			if (!parse_duration(v, 1, UINT32_MAX, &a->timeout_ms))
				return fail_value(err, err_size, s, v,
						  "want a duration > 0 (500ms, 5s, 2m; a bare number is ms)");
			i++;
			continue;
		}
		if (s[0] == '-' && s[1] == '-') {
			if (cn == NULL || !option_allowed(s, cn->cmd))
				return fail(err, err_size,
					    cn == NULL ? "unknown option %s (before the command)"
						       : "unknown option for this command: %s", s);
			if (strcmp(s, "--wait") == 0) {
				a->wait = true;
				continue;
			}
			if (strcmp(s, "--try") == 0) {
				a->try_only = true;
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
			const char *rule = "bad value";
			if (strcmp(s, "--ttl") == 0) {
				ok = parse_duration(v, HASP_TTL_MS_MIN, HASP_TTL_MS_MAX, &a->ttl_ms);
				a->ttl_given = true;
				rule = ttl_rule;
			} else if (strcmp(s, "--lease") == 0) {
				ok = parse_u64(v, &a->lease_id) && a->lease_id != 0;
				rule = "want a lease id (a decimal number > 0)";
			} else if (strcmp(s, "--count") == 0) {
				ok = parse_u32(v, &a->count) && a->count != 0;
				rule = "want a count 1..4294967295";
			} else if (strcmp(s, "--limit") == 0) {
				ok = parse_u32(v, &a->limit);
				rule = "want a count 0..4294967295 (0: no limit)";
			} else if (strcmp(s, "--rev") == 0) {
				ok = parse_u64(v, &a->expected_revision);
				rev_given = true;
				rule = "want a revision (0: the key is absent)";
			} else if (strcmp(s, "--expect") == 0) {
				a->cas_value = true;
				a->expected_value = v;
			} else if (strcmp(s, "--grace") == 0) {
				ok = parse_duration(v, 0, UINT32_MAX, &a->grace_ms);
				rule = duration_rule;
			} else if (strcmp(s, "--conflict-exit-code") == 0) {
				uint32_t code = 0;
				ok = parse_u32(v, &code) && code <= 255;
				a->conflict_exit_code = (int)code;
				rule = "want an exit code 0..255";
			}
			if (!ok)
				return fail_value(err, err_size, s, v, rule);
			continue;
		}
		if (cn == NULL) {
			words[word_count++] = s;
			for (size_t k = 0; k < COMMAND_COUNT; k++) {
				const struct cmd_name *c = &commands[k];
				if (word_count == 1 && c->group == NULL && strcmp(c->word, s) == 0)
					cn = c;
				if (word_count == 2 && c->group != NULL &&
				    strcmp(c->group, words[0]) == 0 && strcmp(c->word, s) == 0)
					cn = c;
			}
			if (cn == NULL && word_count == 2)
				return fail(err, err_size, strcmp(words[0], "kv") == 0
						   ? "unknown kv command: %s (put, get, delete, cas, range)"
						   : "unknown lease command: %s (grant, keepalive, revoke)", s);
			if (cn == NULL && strcmp(s, "lease") != 0 && strcmp(s, "kv") != 0)
				return fail(err, err_size, "unknown command: %s", s);
			continue;
		}
		if (pos_count == cn->positionals + cn->optional)
			return fail(err, err_size, "unexpected argument: %s", s);
		pos[pos_count++] = s;
	}

	if (cn == NULL)
		return fail_text(err, err_size, word_count ? "lease or kv needs a subcommand"
							    : "no command given");
	if (pos_count < cn->positionals) {
		snprintf(err, err_size, "missing arguments: usage: hasp %s", cn->usage);
		return HASP_CLI_EXIT_USAGE;
	}
	a->cmd = cn->cmd;
	if (cn->positionals > 0 && a->cmd != HASP_CLI_LEASE_GRANT && a->cmd != HASP_CLI_LEASE_KEEPALIVE &&
	    a->cmd != HASP_CLI_LEASE_REVOKE && !name_valid(pos[0])) {
		char q[160];
		char len[32] = "";
		if (strlen(pos[0]) <= 32) /* a longer one is cut, and quoted() says its size */
			snprintf(len, sizeof(len), " (%zu bytes)", strlen(pos[0]));
		snprintf(err, err_size,
			 "invalid %s \"%s\"%s: want 1..%u bytes of 0x21..0x7e (printable ASCII, no spaces)",
			 a->cmd >= HASP_CLI_KV_PUT && a->cmd <= HASP_CLI_KV_RANGE ? "key" : "name",
			 quoted(pos[0], q, sizeof(q)), len, HASP_NAME_SIZE_MAX);
		return HASP_CLI_EXIT_USAGE;
	}
	if (a->cluster == NULL || a->cluster[0] == '\0')
		return fail_text(err, err_size, "no cluster: use --cluster or set HASP_CLUSTER");

	switch (a->cmd) {
	case HASP_CLI_ACQUIRE:
		a->name = pos[0];
		if (a->ttl_given && a->lease_id != 0)
			return fail_text(err, err_size, "--ttl and --lease exclude each other");
		if (!a->ttl_given && a->lease_id == 0)
			a->ttl_ms = HASP_CLI_TTL_MS_DEFAULT;
		break;
	case HASP_CLI_RELEASE:
	case HASP_CLI_RENEW:
	case HASP_CLI_CHECK:
		a->name = pos[0];
		if (!parse_u64(pos[1], &a->token) || a->token == 0)
			return fail_value(err, err_size, "token", pos[1], "want a decimal number > 0");
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
			return fail_text(err, err_size, "run needs -- <command> [args...]");
		if (a->try_only && a->timeout_ms != 0)
			return fail_text(err, err_size, "--try and --timeout exclude each other");
		a->wait = !a->try_only; /* blocks like flock(1) unless --try */
		break;
	case HASP_CLI_LEASE_GRANT:
		if (!parse_duration(pos[0], HASP_TTL_MS_MIN, HASP_TTL_MS_MAX, &a->ttl_ms))
			return fail_value(err, err_size, "ttl", pos[0], ttl_rule);
		break;
	case HASP_CLI_LEASE_KEEPALIVE:
	case HASP_CLI_LEASE_REVOKE:
		if (!parse_u64(pos[0], &a->lease_id) || a->lease_id == 0)
			return fail_value(err, err_size, "lease id", pos[0], "want a decimal number > 0");
		break;
	case HASP_CLI_KV_PUT:
		a->name = pos[0];
		a->value = pos[1];
		break;
	case HASP_CLI_KV_CAS:
		a->name = pos[0];
		a->value = pos[1];
		if (rev_given == a->cas_value)
			return fail_text(err, err_size, "kv cas needs exactly one of --rev, --expect");
		break;
	case HASP_CLI_KV_RANGE:
		a->name = pos_count > 0 ? pos[0] : NULL;
		break;
	case HASP_CLI_HELP:
	case HASP_CLI_VERSION:
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

static void run_on_other_signal(int sig)
{
	(void)sig;
}

/* Default action "terminate", "core" or "stop": ignored during run. */
static const int run_ignored[] = { SIGUSR1, SIGUSR2, SIGPIPE,	SIGALRM, SIGQUIT, SIGVTALRM, SIGPROF,
				   SIGXCPU, SIGXFSZ, SIGIO,	SIGPWR,	 SIGSTKFLT, SIGTSTP, SIGTTIN,
				   SIGTTOU };

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

	/* Signals that would kill hasp by default, other than the stop
	 * signals: ignored (a handler, so that the command gets them back at
	 * their defaults across exec) from here on. Dying with the lock held
	 * would leave the command running unowned; being stopped (SIGTSTP)
	 * would let the lock expire under it. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = run_on_other_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(run_ignored) / sizeof(run_ignored[0]); i++)
		sigaction(run_ignored[i], &sa, NULL);
	for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
		sigaction(sig, &sa, NULL);

	rc = cli_status(hasp_client_acquire(c, a->name, &opts, &lock), HASP_STATUS_GRANTED);
	if (rc == -HASP_ETIMEDOUT && a->wait && a->timeout_ms != 0) {
		/* The wait ran out: a conflict if the lock is held, the
		 * cluster's silence otherwise. */
		struct hasp_lock_info info;
		int set = hasp_client_set_deadline(c, HASP_CLI_TIMEOUT_MS_DEFAULT);
		HASP_ASSERT(set == 0);
		if (hasp_client_lock_read(c, a->name, &info) == 0) {
			rc = HASP_STATUS_BUSY;
			lock.token = info.token;
		}
	}
	if (rc == HASP_STATUS_BUSY) {
		const char *why = a->try_only ? "--try" : "--timeout ran out";
		if (a->json) {
			printf("{\"status\":\"BUSY\",\"name\":");
			json_cstr(stdout, a->name);
			printf(",\"holder_token\":%" PRIu64 ",\"reason\":", lock.token);
			json_cstr(stdout, why);
			printf("}\n");
		} else {
			fprintf(stderr, "hasp: run %s: BUSY (holder token %" PRIu64 "; %s): command not run\n",
				a->name, lock.token, why);
		}
		return a->conflict_exit_code;
	}
	if (rc != HASP_STATUS_GRANTED)
		return report_failure(a, "run", rc, HASP_STATUS_GRANTED);
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

int hasp_cli_resolve_cluster(const char *cluster, char *out, size_t out_size, char *err, size_t err_size)
{
	switch (resolve_cluster(cluster, out, out_size, err, err_size)) {
	case RESOLVE_OK:
		return 0;
	case RESOLVE_UNAVAILABLE:
		return HASP_CLI_EXIT_UNAVAILABLE;
	default:
		return HASP_CLI_EXIT_USAGE;
	}
}

int hasp_cli_execute(const struct hasp_cli_args *a)
{
	struct hasp_client_config cfg;
	struct hasp_client *c = NULL;
	int code;
	int rc;

	if (a->cmd == HASP_CLI_HELP) {
		hasp_cli_help(a->help_for, stdout);
		return HASP_CLI_EXIT_OK;
	}
	if (a->cmd == HASP_CLI_VERSION) {
		printf("hasp %s\n", HASP_VERSION);
		return HASP_CLI_EXIT_OK;
	}
	if (a->dry_run) {
		const struct cmd_name *cn = command_of(a->cmd);
		printf("hasp: dry run: %s%s%s%s%s parses; nothing sent\n", cn->group ? cn->group : "",
		       cn->group ? " " : "", cn->word, a->name ? " " : "", a->name ? a->name : "");
		return HASP_CLI_EXIT_OK;
	}
	char cluster[HASP_CLI_CLUSTER_SIZE_MAX];
	char err[256];
	code = hasp_cli_resolve_cluster(a->cluster, cluster, sizeof(cluster), err, sizeof(err));
	if (code != 0) {
		if (a->json) {
			printf("{\"error\":\"%s\",\"message\":", code == HASP_CLI_EXIT_USAGE ? "ECONFIG" : "EAGAIN");
			json_cstr(stdout, err);
			printf("}\n");
		} else {
			fprintf(stderr, "hasp: %s\n", err);
		}
		return code;
	}
	hasp_client_config_default(&cfg);
	cfg.cluster = cluster;
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
	char err[320];
	int rc = hasp_cli_parse(argc, argv, getenv("HASP_CLUSTER"), &args, err, sizeof(err));

	if (rc != 0) {
		bool json = false;
		for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
			json = json || strcmp(argv[i], "--json") == 0;
		if (json) {
			printf("{\"error\":\"EUSAGE\",\"message\":");
			json_cstr(stdout, err);
			printf("}\n");
		} else {
			fprintf(stderr, "hasp: %s (hasp --help for usage)\n", err);
		}
		return rc;
	}
	return hasp_cli_execute(&args);
}
