/*
 * haspctl: every command is one admin request (control.h protocol) to one
 * node, printed as a human table or, with --json, as the node's reply line
 * exactly (one JSON object per line on stdout, errors included).
 *
 * Where a command runs (docs/CONTROL.md "Followers and the leader"):
 * status, health, metrics, log levels, members list and the lock, lease
 * and session listings are answered by the node asked, from its own
 * applied state. Membership changes, leader transfer and forced release
 * must run on the leader: a follower answers ENOTLEADER with the leader's
 * id, and haspctl retries once on that node when --nodes names it
 * (redirect, not forwarding: nodes never call each other's admin
 * endpoints, so a wedged peer cannot stall an operator's command).
 *
 * `snapshot restore` is offline: hasp-snapshot (tools/) checks a saved
 * snapshot and writes it into a new data directory for a node to boot
 * from; haspctl runs it (control/ does not link storage/).
 */
#include "control/haspctl_cli.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <limits.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/auth.h"
#include "common/dirsync.h"
#include "common/duration.h"
#include "common/version.h"
#include "control/admin_client.h"
#include "control/json.h"
#include "hasp/errors.h"

#define NODES_MAX 9u
#define HASPCTL_DRY_RUN 100 /* request() in --dry-run: nothing sent, exit 0 */
#define TOKENS_MAX 65536u
#define TARGET_SIZE 256u

/* One command a line, its arguments from column 20 (a continuation there
 * too): help2man renders each line as a tagged paragraph of its own, so the
 * man page lists one command per line (tests/client/install_test.sh). */
static const char usage_text[] =
	"usage: haspctl [--socket PATH | --addr HOST:PORT] [--nodes ID=TARGET,... | --config FILE]\n"
	"               [--admin-key FILE] [--json] [--timeout MS] <command>\n"
	"  status            [--cluster]  node state; --cluster asks every node in --nodes\n"
	"  health            exit 0 healthy, 5 unhealthy, 6 degraded\n"
	"  members list      every member's id, role and addresses\n"
	"  members add       <id> <ip> <peer-port> <client-port> <public-key>  (joins as a learner)\n"
	"  members promote   <id>\n"
	"  members remove    <id>\n"
	"  leader transfer   <id>\n"
	"  snapshot save     <file>\n"
	"  snapshot restore  <file> <new-data-dir> [--members ID,ID,...]\n"
	"                    (offline: runs hasp-snapshot)\n"
	"  locks list        [--prefix P] [--after CURSOR] [--limit N]\n"
	"  locks show        <name>\n"
	"  locks release     --force <name>\n"
	"  leases list       [--after CURSOR] [--limit N]\n"
	"  sessions list     [--after CURSOR] [--limit N]\n"
	"  metrics | stats   every counter, gauge and histogram\n"
	"  log list          every log topic and its level\n"
	"  log level         <topic|all> <off|error|warn|info|debug>\n"
	"  help              the node's command registry\n"
	"  raw               <command> [args...]  send one admin request as is\n"
	"TARGET is a Unix socket path or HOST:PORT (an IPv4 address or a host name); the\n"
	"default is $HASP_ADMIN. --nodes defaults to $HASP_NODES; --config reads one\n"
	"ID=TARGET per line (# comments).\n"
	"--timeout takes a duration (500ms, 5s, 2m; a bare number is ms; default 10s).\n"
	"`haspctl <command> --help` describes one command; `haspctl --version` the release;\n"
	"--dry-run prints the requests a command line would send and sends nothing.\n"
	"--admin-key FILE (default $HASP_ADMIN_KEY_FILE): the node's admin key, for the privileged\n"
	"commands over TCP (docs/SECURITY.md 4.8); a Unix socket needs none.\n"
	"Exit: 0 ok, 1 refused, 2 usage, 3 unreachable, 4 not leader, 5 unhealthy, 6 degraded.\n";

/* One help entry per command: the words that name it, its synopsis and
 * what it does (docs/CONTROL.md has the details). */
struct cmd_help {
	const char *words;
	const char *usage;
	const char *help;
};

static const struct cmd_help cmd_helps[] = {
	{ "status", "status [--cluster]",
	  "The node's role, term, indexes and members. --cluster asks every node of\n"
	  "--nodes and prints one row each (exit 5 when one is unreachable or unhealthy).\n" },
	{ "health", "health", "Exit 0 healthy, 5 unhealthy, 6 degraded; one line saying why.\n" },
	{ "members", "members list|add|promote|remove ...", "Cluster membership (see each subcommand).\n" },
	{ "members list", "members list", "The configuration: every member's id, role and addresses.\n" },
	{ "members add", "members add <id> <ip> <peer-port> <client-port> <public-key>",
	  "Adds a node as a learner (runs on the leader; every node in --nodes learns the\n"
	  "address and the node's public key first: hasp-keygen --public KEYFILE prints it;\n"
	  "the key may be left out only with peer_auth = off). Refused: already a member,\n"
	  "configuration full (7 members), another change not committed yet.\n" },
	{ "members promote", "members promote <id>",
	  "Makes a caught-up learner a voter (leader). Refused: no such member, already a\n"
	  "voter, not caught up yet (retry).\n" },
	{ "members remove", "members remove <id>",
	  "Removes a voter or learner (leader). Refused: no such member, the last voter.\n" },
	{ "leader", "leader transfer <id>", "Hands leadership to voter <id> (runs on the leader).\n" },
	{ "leader transfer", "leader transfer <id>", "Hands leadership to voter <id> (runs on the leader).\n" },
	{ "snapshot", "snapshot save <file> | snapshot restore <file> <new-data-dir> [--members ID,...]",
	  "Backup and offline restore (docs/CONTROL.md \"Backup and restore\").\n" },
	{ "snapshot save", "snapshot save <file>", "Writes the node's latest snapshot to <file> (durably).\n" },
	{ "snapshot restore", "snapshot restore <file> <new-data-dir> [--members ID,ID,...]",
	  "Offline: checks <file> and writes a data directory a node can boot from\n"
	  "(runs hasp-snapshot).\n" },
	{ "locks", "locks list|show|release ...", "The lock table (see each subcommand).\n" },
	{ "locks list", "locks list [--prefix P] [--after CURSOR] [--limit N]",
	  "Held locks, a page at a time (the reply's next is the cursor to continue).\n" },
	{ "locks show", "locks show <name>", "One lock: holder, token, lease, remaining TTL, waiters.\n" },
	{ "locks release", "locks release --force <name>",
	  "Releases a lock on the leader whoever holds it; the holder's token becomes stale.\n" },
	{ "leases", "leases list [--after CURSOR] [--limit N]", "Live leases, a page at a time.\n" },
	{ "leases list", "leases list [--after CURSOR] [--limit N]", "Live leases, a page at a time.\n" },
	{ "sessions", "sessions list [--after CURSOR] [--limit N]", "Client sessions, a page at a time.\n" },
	{ "sessions list", "sessions list [--after CURSOR] [--limit N]", "Client sessions, a page at a time.\n" },
	{ "metrics", "metrics", "Every counter, gauge and histogram of the node.\n" },
	{ "stats", "stats", "The same as metrics.\n" },
	{ "log", "log list | log level <topic|all> <off|error|warn|info|debug>", "Log topics and levels.\n" },
	{ "log list", "log list", "Every log topic and its level.\n" },
	{ "log level", "log level <topic|all> <off|error|warn|info|debug>", "Sets a topic's level.\n" },
	{ "help", "help", "The node's admin command registry (every request `raw` can send).\n" },
	{ "raw", "raw <command> [args...]", "Sends one admin request line as is; prints the reply.\n" },
};

struct node_target {
	uint32_t id;
	char target[TARGET_SIZE];
};

struct ctl {
	FILE *out, *err;
	bool json;
	bool cluster;
	uint32_t timeout_ms;
	char target[TARGET_SIZE];
	struct node_target nodes[NODES_MAX];
	uint32_t node_count;
	struct json_token *toks;
	bool quiet; /* status --cluster: one row per node instead of messages */
	bool dry_run; /* --dry-run: print each request instead of sending it */
	char last_error[32];   /* why the last request() got no reply */
	char last_message[320];
	bool admin_keyed;
	struct auth_key admin_key;
};

/* One parsed reply. */
struct reply {
	char *text;        /* hasp_alloc'd copy of the line */
	size_t len;
	int count;         /* tokens */
	int result;        /* token of "result", -1 on error */
	bool ok;
	char error[32];
	char message[256];
	uint64_t leader_id;
	int64_t attachment;
	char target[TARGET_SIZE]; /* the node that answered */
};

/* A JSON string of our own message or a target (short: the escaped text
 * fits the buffer). */
static void json_string_out(FILE *out, const char *s)
{
	char buf[2048];
	struct json_writer w;
	json_init(&w, buf, sizeof(buf));
	json_string(&w, s);
	json_finish(&w);
	fputs(w.overflow ? "\"\"" : buf, out);
}

/* A failure of haspctl itself (no node reply to print): a line on stderr,
 * or with --json one object on stdout {"ok":false,"error","message"[,"node"]}.
 * Returns `code`. */
__attribute__((format(printf, 5, 6)))
static int local_fail(struct ctl *c, int code, const char *error, const char *node, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->last_message, sizeof(c->last_message), fmt, ap);
	va_end(ap);
	snprintf(c->last_error, sizeof(c->last_error), "%s", error);
	if (c->quiet)
		return code;
	if (c->json) {
		fprintf(c->out, "{\"ok\":false,\"error\":");
		json_string_out(c->out, error);
		fprintf(c->out, ",\"message\":");
		json_string_out(c->out, c->last_message);
		if (node != NULL) {
			fprintf(c->out, ",\"node\":");
			json_string_out(c->out, node);
		}
		fprintf(c->out, ",\"exit\":%d}\n", code);
	} else if (node != NULL) {
		fprintf(c->err, "haspctl: %s: %s\n", node, c->last_message);
	} else {
		fprintf(c->err, "haspctl: %s\n", c->last_message);
	}
	return code;
}

/* A usage error: the reason and a pointer to --help, not the whole usage
 * (that is printed only when asked for). */
static int usage(struct ctl *c, const char *why)
{
	local_fail(c, HASPCTL_EXIT_USAGE, "EUSAGE", NULL, "%s", why != NULL ? why : "no command given");
	if (!c->json)
		fprintf(c->err, "haspctl: see haspctl --help\n");
	return HASPCTL_EXIT_USAGE;
}

/* Prints the help of the command named by the words of argv (the longest
 * known prefix), or the whole usage. */
static void help_for(FILE *out, int argc, char **argv)
{
	const struct cmd_help *best = NULL;
	char words[64] = "";
	for (int i = 0; i < argc && i < 2; i++) {
		if (argv[i][0] == '-')
			break;
		size_t o = strlen(words);
		snprintf(words + o, sizeof(words) - o, "%s%s", o ? " " : "", argv[i]);
		for (size_t k = 0; k < sizeof(cmd_helps) / sizeof(cmd_helps[0]); k++)
			if (strcmp(cmd_helps[k].words, words) == 0)
				best = &cmd_helps[k];
	}
	if (best == NULL) {
		fputs(usage_text, out);
		return;
	}
	fprintf(out, "usage: haspctl [--socket PATH | --addr HOST:PORT] [--nodes ID=TARGET,...] [--json] %s\n%s",
		best->usage, best->help);
}

static int parse_u32(const char *s, uint32_t *v)
{
	char *end;
	errno = 0;
	unsigned long x = strtoul(s, &end, 10);
	if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0 || x > UINT32_MAX)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

static int parse_nodes(struct ctl *c, const char *list)
{
	char buf[2048];
	snprintf(buf, sizeof(buf), "%s", list);
	char *save = NULL;
	for (char *item = strtok_r(buf, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		if (eq == NULL || c->node_count == NODES_MAX)
			return -1;
		*eq = '\0';
		struct node_target *n = &c->nodes[c->node_count];
		if (parse_u32(item, &n->id) != 0 || n->id == 0 || strlen(eq + 1) >= TARGET_SIZE ||
		    eq[1] == '\0')
			return -1;
		snprintf(n->target, sizeof(n->target), "%s", eq + 1);
		c->node_count++;
	}
	return c->node_count > 0 ? 0 : -1;
}

/* A cluster file: one ID=TARGET per line, blank lines and # comments. */
static int parse_nodes_file(struct ctl *c, const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[512];
	if (f == NULL)
		return -1;
	int rc = 0;
	while (rc == 0 && fgets(buf, sizeof(buf), f) != NULL) {
		char *p = buf;
		while (*p == ' ' || *p == '\t')
			p++;
		p[strcspn(p, "#\r\n")] = '\0';
		for (size_t n = strlen(p); n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'); n--)
			p[n - 1] = '\0';
		if (*p != '\0')
			rc = strchr(p, ',') == NULL ? parse_nodes(c, p) : -1;
	}
	fclose(f);
	return rc == 0 && c->node_count > 0 ? 0 : -1;
}

static const char *node_target_of(const struct ctl *c, uint64_t id)
{
	for (uint32_t i = 0; i < c->node_count; i++)
		if (c->nodes[i].id == id)
			return c->nodes[i].target;
	return NULL;
}

/* ---- one request ---- */

static void reply_free(struct reply *r)
{
	hasp_free(r->text);
	r->text = NULL;
}

/* Sends `line` to `target`; on success *r holds the parsed reply (ok or
 * not). With attach_fd >= 0 an attachment is copied there. Returns 0 or an
 * exit code. */
static int request(struct ctl *c, const char *target, const char *line, struct reply *r,
		   int attach_fd)
{
	struct admin_client a;
	const char *text;
	size_t len;
	memset(r, 0, sizeof(*r));
	r->result = -1;
	r->attachment = -1;
	snprintf(r->target, sizeof(r->target), "%s", target);
	if (c->dry_run) {
		fprintf(c->out, "haspctl: dry run: would send to %s: %s\n", target, line);
		return HASPCTL_DRY_RUN;
	}
	errno = 0;
	int rc = admin_client_open(&a, target, c->timeout_ms);
	if (rc != 0) {
		/* A failed system call says which (refused, no such socket). */
		const char *why = rc == -HASP_ESYS && errno != 0 ? strerror(errno) : hasp_strerror(rc);
		return local_fail(c, HASPCTL_EXIT_UNREACHABLE, hasp_strerror_name(rc), target,
				  "cannot connect: %s%s", why,
				  rc == -HASP_ETIMEDOUT ? " (--timeout to wait longer)" : "");
	}
	if (c->admin_keyed)
		admin_client_set_key(&a, &c->admin_key);
	rc = admin_client_call(&a, line, &text, &len);
	if (rc != 0) {
		admin_client_close(&a);
		return local_fail(c, HASPCTL_EXIT_UNREACHABLE, hasp_strerror_name(rc), target,
				  "connected, but no reply: %s", hasp_strerror(rc));
	}
	r->text = hasp_alloc(len + 1);
	if (r->text == NULL) {
		admin_client_close(&a);
		return HASPCTL_EXIT_FAILED;
	}
	memcpy(r->text, text, len + 1);
	r->len = len;
	r->count = json_parse(r->text, len, c->toks, TOKENS_MAX);
	bool okv = false;
	if (r->count <= 0 || c->toks[0].type != JSON_OBJECT ||
	    !json_tok_bool(r->text, c->toks, json_get(r->text, c->toks, 0, "ok"), &okv)) {
		admin_client_close(&a);
		reply_free(r);
		return local_fail(c, HASPCTL_EXIT_UNREACHABLE, "ECORRUPT", target,
				  "malformed reply (not a JSON object with \"ok\")");
	}
	r->ok = okv;
	r->result = json_get(r->text, c->toks, 0, "result");
	json_tok_str(r->text, c->toks, json_get(r->text, c->toks, 0, "error"), r->error, sizeof(r->error));
	json_tok_str(r->text, c->toks, json_get(r->text, c->toks, 0, "message"), r->message,
		     sizeof(r->message));
	(void)json_tok_u64(r->text, c->toks, json_get(r->text, c->toks, 0, "leader_id"), &r->leader_id);
	(void)json_tok_i64(r->text, c->toks, json_get(r->text, c->toks, 0, "attachment"), &r->attachment);
	if (r->ok && r->attachment >= 0) {
		rc = attach_fd >= 0 ? admin_client_attachment(&a, attach_fd, (uint64_t)r->attachment)
				    : -HASP_EINVAL;
		if (rc != 0) {
			admin_client_close(&a);
			reply_free(r);
			return local_fail(c, HASPCTL_EXIT_UNREACHABLE, hasp_strerror_name(rc), target,
					  "attachment: %s", hasp_strerror(rc));
		}
	}
	admin_client_close(&a);
	return 0;
}

/* Runs `line` and follows one ENOTLEADER redirect through --nodes. */
static int request_leader(struct ctl *c, const char *line, struct reply *r, int attach_fd)
{
	int rc = request(c, c->target, line, r, attach_fd);
	if (rc != 0 || r->ok || strcmp(r->error, "ENOTLEADER") != 0)
		return rc;
	const char *leader = r->leader_id != 0 ? node_target_of(c, r->leader_id) : NULL;
	if (leader == NULL) {
		/* This node knows no leader (it is joining, or cut off): ask the
		 * other nodes of --nodes until one leads or names the leader. */
		for (uint32_t i = 0; i < c->node_count && leader == NULL; i++) {
			if (strcmp(c->nodes[i].target, c->target) == 0)
				continue;
			struct reply other;
			if (request(c, c->nodes[i].target, line, &other, attach_fd) != 0)
				continue;
			if (other.ok || strcmp(other.error, "ENOTLEADER") != 0) {
				reply_free(r);
				*r = other;
				return 0;
			}
			/* Keep the newest reply: its tokens are the parsed ones. */
			leader = other.leader_id != 0 ? node_target_of(c, other.leader_id) : NULL;
			reply_free(r);
			*r = other;
		}
		if (leader == NULL)
			return 0;
	}
	if (!c->json)
		fprintf(c->err, "haspctl: redirected to the leader, node %" PRIu64 " (%s)\n", r->leader_id,
			leader);
	reply_free(r);
	return request(c, leader, line, r, attach_fd);
}

/* ---- human output ---- */

static void tok_text(const struct ctl *c, const char *text, int t, char *out, size_t n)
{
	const struct json_token *k = &c->toks[t];
	if (k->type == JSON_OBJECT)
		snprintf(out, n, "{%u}", k->size);
	else if (k->type == JSON_ARRAY && k->size == 0)
		snprintf(out, n, "(none)");
	else if (k->type == JSON_ARRAY)
		snprintf(out, n, "[%u items]", k->size);
	else
		json_tok_str(text, c->toks, t, out, n);
}

static bool array_of_objects(const struct ctl *c, int t)
{
	return t >= 0 && c->toks[t].type == JSON_ARRAY && c->toks[t].size > 0 &&
	       c->toks[t + 1].type == JSON_OBJECT;
}

#define COLS_MAX 16u

/* Columns are the keys of the first row; a cell is the value's text. */
static void print_table(struct ctl *c, const char *text, int arr)
{
	int first = arr + 1;
	uint32_t ncol = c->toks[first].size < COLS_MAX ? c->toks[first].size : COLS_MAX;
	char names[COLS_MAX][32];
	size_t width[COLS_MAX];
	int k = first + 1;
	for (uint32_t i = 0; i < ncol; i++) {
		json_tok_str(text, c->toks, k, names[i], sizeof(names[i]));
		for (char *p = names[i]; *p; p++)
			*p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
		width[i] = strlen(names[i]);
		k = (int)c->toks[k + 1].next;
	}
	char cell[160];
	for (uint32_t r = 0; r < c->toks[arr].size; r++) {
		int row = json_at(c->toks, arr, r);
		int kk = first + 1;
		for (uint32_t i = 0; i < ncol; i++) {
			char kname[64];
			json_tok_str(text, c->toks, kk, kname, sizeof(kname));
			int v = json_get(text, c->toks, row, kname);
			cell[0] = '\0';
			if (v >= 0)
				tok_text(c, text, v, cell, sizeof(cell));
			if (strlen(cell) > width[i])
				width[i] = strlen(cell);
			kk = (int)c->toks[kk + 1].next;
		}
	}
	/* The last column is not padded: no trailing blanks. */
	for (uint32_t i = 0; i < ncol; i++)
		fprintf(c->out, "%-*s%s", i + 1 < ncol ? (int)width[i] : 0, names[i], i + 1 < ncol ? "  " : "\n");
	for (uint32_t r = 0; r < c->toks[arr].size; r++) {
		int row = json_at(c->toks, arr, r);
		int kk = first + 1;
		for (uint32_t i = 0; i < ncol; i++) {
			char kname[64];
			json_tok_str(text, c->toks, kk, kname, sizeof(kname));
			int v = json_get(text, c->toks, row, kname);
			cell[0] = '\0';
			if (v >= 0)
				tok_text(c, text, v, cell, sizeof(cell));
			fprintf(c->out, "%-*s%s", i + 1 < ncol ? (int)width[i] : 0, cell, i + 1 < ncol ? "  " : "\n");
			kk = (int)c->toks[kk + 1].next;
		}
	}
}

/* Objects: scalars as `key: value`, then each array of objects as a table. */
static void print_value(struct ctl *c, const char *text, int t)
{
	char buf[256];
	if (t < 0)
		return;
	if (array_of_objects(c, t)) {
		print_table(c, text, t);
		return;
	}
	if (c->toks[t].type != JSON_OBJECT) {
		tok_text(c, text, t, buf, sizeof(buf));
		fprintf(c->out, "%s\n", buf);
		return;
	}
	int k = t + 1;
	for (uint32_t i = 0; i < c->toks[t].size; i++) {
		int v = k + 1;
		char key[64];
		json_tok_str(text, c->toks, k, key, sizeof(key));
		if (!array_of_objects(c, v)) {
			tok_text(c, text, v, buf, sizeof(buf));
			fprintf(c->out, "%s: %s\n", key, buf);
		}
		k = (int)c->toks[v].next;
	}
	k = t + 1;
	for (uint32_t i = 0; i < c->toks[t].size; i++) {
		int v = k + 1;
		if (array_of_objects(c, v)) {
			char key[64];
			json_tok_str(text, c->toks, k, key, sizeof(key));
			fprintf(c->out, "\n%s:\n", key);
			print_table(c, text, v);
		}
		k = (int)c->toks[v].next;
	}
}

/* Prints the reply and maps it to an exit code. */
static int finish(struct ctl *c, struct reply *r, void (*human)(struct ctl *, struct reply *))
{
	int code = HASPCTL_EXIT_OK;
	if (!r->ok)
		code = strcmp(r->error, "ENOTLEADER") == 0 ? HASPCTL_EXIT_NOT_LEADER :
		       strcmp(r->error, "ETIMEDOUT") == 0 ? HASPCTL_EXIT_UNREACHABLE : HASPCTL_EXIT_FAILED;
	if (c->json) {
		fprintf(c->out, "%s\n", r->text);
	} else if (!r->ok) {
		fprintf(c->err, "haspctl: %s: %s: %s", r->target, r->error, r->message);
		if (r->leader_id != 0)
			fprintf(c->err, " (leader is node %" PRIu64 "; pass --nodes to follow it)", r->leader_id);
		fputc('\n', c->err);
	} else if (human != NULL) {
		human(c, r);
	} else {
		print_value(c, r->text, r->result);
	}
	reply_free(r);
	return code;
}

static int simple(struct ctl *c, const char *line, bool leader,
		  void (*human)(struct ctl *, struct reply *))
{
	struct reply r;
	int rc = leader ? request_leader(c, line, &r, -1) : request(c, c->target, line, &r, -1);
	if (rc != 0)
		return rc;
	return finish(c, &r, human);
}

/* ---- commands ---- */

static void human_metrics(struct ctl *c, struct reply *r)
{
	const char *t = r->text;
	for (uint32_t i = 0; i < c->toks[r->result].size; i++) {
		int s = json_at(c->toks, r->result, i);
		char name[80], type[16], labels[160] = "", val[40];
		json_tok_str(t, c->toks, json_get(t, c->toks, s, "name"), name, sizeof(name));
		json_tok_str(t, c->toks, json_get(t, c->toks, s, "type"), type, sizeof(type));
		int l = json_get(t, c->toks, s, "labels");
		int k = l + 1;
		size_t o = 0;
		for (uint32_t j = 0; j < c->toks[l].size; j++) {
			char kn[48], kv[48];
			json_tok_str(t, c->toks, k, kn, sizeof(kn));
			json_tok_str(t, c->toks, k + 1, kv, sizeof(kv));
			o += (size_t)snprintf(labels + o, sizeof(labels) - o, "%s%s=%s", j ? "," : "{", kn, kv);
			k = (int)c->toks[k + 1].next;
		}
		if (o > 0)
			snprintf(labels + o, sizeof(labels) - o, "}");
		if (strcmp(type, "histogram") == 0) {
			char cnt[24], sum[40];
			json_tok_str(t, c->toks, json_get(t, c->toks, s, "count"), cnt, sizeof(cnt));
			json_tok_str(t, c->toks, json_get(t, c->toks, s, "sum"), sum, sizeof(sum));
			fprintf(c->out, "%-56s count=%s sum=%s\n", strcat(name, labels), cnt, sum);
		} else {
			json_tok_str(t, c->toks, json_get(t, c->toks, s, "value"), val, sizeof(val));
			fprintf(c->out, "%-56s %s\n", strcat(name, labels), val);
		}
	}
}

static void human_health(struct ctl *c, struct reply *r)
{
	char reason[64];
	bool healthy = false;
	json_tok_bool(r->text, c->toks, json_get(r->text, c->toks, r->result, "healthy"), &healthy);
	json_tok_str(r->text, c->toks, json_get(r->text, c->toks, r->result, "reason"), reason,
		     sizeof(reason));
	if (healthy && strncmp(reason, "degraded", 8) == 0)
		fprintf(c->out, "%s\n", reason);
	else
		fprintf(c->out, healthy ? "healthy\n" : "unhealthy: %s\n", reason);
}

static int cmd_health(struct ctl *c)
{
	struct reply r;
	int rc = request(c, c->target, "health", &r, -1);
	if (rc != 0)
		return rc;
	bool healthy = false, degraded = false;
	if (r.ok) {
		json_tok_bool(r.text, c->toks, json_get(r.text, c->toks, r.result, "healthy"), &healthy);
		json_tok_bool(r.text, c->toks, json_get(r.text, c->toks, r.result, "degraded"), &degraded);
	}
	rc = finish(c, &r, human_health);
	if (rc == 0 && !healthy)
		return HASPCTL_EXIT_UNHEALTHY;
	return rc == 0 && degraded ? HASPCTL_EXIT_DEGRADED : rc;
}

static int cmd_status_cluster(struct ctl *c)
{
	if (c->node_count == 0) {
		fprintf(c->err, "haspctl: status --cluster needs --nodes ID=TARGET,...\n");
		return HASPCTL_EXIT_USAGE;
	}
	if (c->dry_run) {
		for (uint32_t i = 0; i < c->node_count; i++)
			fprintf(c->out, "haspctl: dry run: would send to %s: status\n", c->nodes[i].target);
		return HASPCTL_EXIT_OK;
	}
	int code = HASPCTL_EXIT_OK;
	uint64_t leader_commit = 0;
	struct row {
		bool up, healthy;
		char role[16], address[64], health[32], why[360];
		uint64_t term, leader, commit, applied;
	} rows[NODES_MAX];
	if (c->json)
		fprintf(c->out, "{\"ok\":true,\"command\":\"status\",\"nodes\":[");
	for (uint32_t i = 0; i < c->node_count; i++) {
		struct row *w = &rows[i];
		struct reply r;
		memset(w, 0, sizeof(*w));
		c->quiet = true; /* one row per node below instead */
		int rc = request(c, c->nodes[i].target, "status", &r, -1);
		c->quiet = false;
		if (rc == 0 && !r.ok) {
			snprintf(c->last_error, sizeof(c->last_error), "%s", r.error);
			snprintf(c->last_message, sizeof(c->last_message), "refused: %s", r.message);
		}
		snprintf(w->why, sizeof(w->why), "%s: %s", c->last_error, c->last_message);
		if (c->json) {
			/* A missing reply says why: "error" (a hasp error name)
			 * and "message". */
			fprintf(c->out, "%s{\"id\":%u,\"target\":", i ? "," : "", c->nodes[i].id);
			json_string_out(c->out, c->nodes[i].target);
			fprintf(c->out, ",\"reply\":%s", rc == 0 ? r.text : "null");
			if (rc != 0) {
				fprintf(c->out, ",\"error\":");
				json_string_out(c->out, c->last_error);
				fprintf(c->out, ",\"message\":");
				json_string_out(c->out, c->last_message);
			}
			fputc('}', c->out);
		}
		if (rc != 0 || !r.ok) {
			if (rc == 0)
				reply_free(&r);
			code = HASPCTL_EXIT_UNHEALTHY;
			continue;
		}
		const char *t = r.text;
		int res = r.result;
		w->up = true;
		json_tok_str(t, c->toks, json_get(t, c->toks, res, "role"), w->role, sizeof(w->role));
		json_tok_str(t, c->toks, json_get(t, c->toks, res, "address"), w->address, sizeof(w->address));
		json_tok_str(t, c->toks, json_get(t, c->toks, res, "health"), w->health, sizeof(w->health));
		json_tok_bool(t, c->toks, json_get(t, c->toks, res, "healthy"), &w->healthy);
		json_tok_u64(t, c->toks, json_get(t, c->toks, res, "term"), &w->term);
		json_tok_u64(t, c->toks, json_get(t, c->toks, res, "leader_id"), &w->leader);
		json_tok_u64(t, c->toks, json_get(t, c->toks, res, "commit_index"), &w->commit);
		json_tok_u64(t, c->toks, json_get(t, c->toks, res, "applied_index"), &w->applied);
		if (strcmp(w->role, "leader") == 0)
			leader_commit = w->commit;
		if (!w->healthy)
			code = HASPCTL_EXIT_UNHEALTHY;
		reply_free(&r);
	}
	if (c->json) {
		fprintf(c->out, "]}\n");
		return code;
	}
	fprintf(c->out, "%-4s %-21s %-13s %-6s %-6s %-10s %-10s %-8s %s\n", "ID", "ADDRESS", "ROLE",
		"TERM", "LEADER", "COMMIT", "APPLIED", "LAG", "HEALTH");
	for (uint32_t i = 0; i < c->node_count; i++) {
		const struct row *w = &rows[i];
		if (!w->up) {
			fprintf(c->out, "%-4u %-21s unreachable (%s)\n", c->nodes[i].id, c->nodes[i].target, w->why);
			continue;
		}
		/* Lag against the leader's commit index: what this node has
		 * still to apply to catch up with the cluster. */
		uint64_t ref = leader_commit != 0 ? leader_commit : w->commit;
		fprintf(c->out, "%-4u %-21s %-13s %-6" PRIu64 " %-6" PRIu64 " %-10" PRIu64 " %-10" PRIu64
			" %-8" PRIu64 " %s\n", c->nodes[i].id, w->address, w->role, w->term, w->leader,
			w->commit, w->applied, ref > w->applied ? ref - w->applied : 0, w->health);
	}
	return code;
}

static int cmd_snapshot_save(struct ctl *c, const char *file)
{
	char tmp[TARGET_SIZE + 8];
	if (c->dry_run) {
		fprintf(c->out, "haspctl: dry run: would send to %s: snapshot.save (into %s)\n", c->target, file);
		return HASPCTL_EXIT_OK;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(c->err, "haspctl: cannot create %s: %s\n", tmp, strerror(errno));
		return HASPCTL_EXIT_FAILED;
	}
	struct reply r;
	int rc = request(c, c->target, "snapshot.save", &r, fd);
	if (rc == 0 && r.ok && r.attachment < 0) {
		fprintf(c->err, "haspctl: the node sent no snapshot bytes\n");
		rc = HASPCTL_EXIT_FAILED;
		reply_free(&r);
	}
	/* Durable before it has the final name: a backup that exists is whole;
	 * the directory fsync makes the name itself survive a power cut. */
	int dir_rc = 0;
	if (rc == 0 && r.ok &&
	    (fsync(fd) != 0 || rename(tmp, file) != 0 || (dir_rc = dirsync_parent(file)) != 0)) {
		fprintf(c->err, "haspctl: cannot write %s: %s\n", file,
			strerror(dir_rc != 0 ? -dir_rc : errno));
		rc = HASPCTL_EXIT_FAILED;
		reply_free(&r);
	}
	close(fd);
	if (rc != 0 || !r.ok)
		unlink(tmp);
	if (rc != 0)
		return rc;
	if (r.ok && !c->json) {
		uint64_t index = 0, term = 0;
		json_tok_u64(r.text, c->toks, json_get(r.text, c->toks, r.result, "index"), &index);
		json_tok_u64(r.text, c->toks, json_get(r.text, c->toks, r.result, "term"), &term);
		fprintf(c->out, "saved snapshot index=%" PRIu64 " term=%" PRIu64 " bytes=%" PRId64 " to %s\n",
			index, term, r.attachment, file);
		reply_free(&r);
		return HASPCTL_EXIT_OK;
	}
	return finish(c, &r, NULL);
}

/*
 * `snapshot restore` is offline work on storage files, and control/ links
 * neither storage/ nor the node (docs/ARCHITECTURE.md): hasp-snapshot in
 * tools/ does it. haspctl runs the program named by $HASP_SNAPSHOT, else
 * the hasp-snapshot beside the running haspctl, else the first on PATH,
 * and passes its output and exit code through, so the operator's command
 * and its --json output stay as they were.
 */
static void snapshot_tool_path(char *path, size_t size)
{
	const char *env = getenv("HASP_SNAPSHOT");
	if (env != NULL && env[0] != '\0' && strlen(env) < size) {
		snprintf(path, size, "%s", env);
		return;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash != NULL) {
			slash[1] = '\0';
			if ((size_t)snprintf(path, size, "%shasp-snapshot", self) < size &&
			    access(path, X_OK) == 0)
				return;
		}
	}
	snprintf(path, size, "hasp-snapshot");
}

/* Copies what the child writes on `fds` (stdout, stderr) to c->out and
 * c->err until both close. */
static void relay(struct ctl *c, int fds[2])
{
	FILE *to[2] = { c->out, c->err };
	bool open_[2] = { true, true };
	while (open_[0] || open_[1]) {
		struct pollfd p[2];
		nfds_t count = 0;
		int which[2];
		for (int k = 0; k < 2; k++)
			if (open_[k]) {
				p[count] = (struct pollfd){ .fd = fds[k], .events = POLLIN };
				which[count++] = k;
			}
		if (poll(p, count, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (nfds_t i = 0; i < count; i++) {
			if (p[i].revents == 0)
				continue;
			char buf[4096];
			ssize_t got = read(p[i].fd, buf, sizeof(buf));
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0)
				open_[which[i]] = false;
			else
				fwrite(buf, 1, (size_t)got, to[which[i]]);
		}
	}
}

static int cmd_snapshot_restore(struct ctl *c, int argc, char **argv)
{
	char path[PATH_MAX];
	char **args = hasp_calloc((size_t)argc + 4, sizeof(*args));
	int out_pipe[2] = { -1, -1 }, err_pipe[2] = { -1, -1 };
	int code = HASPCTL_EXIT_FAILED;

	if (args == NULL)
		return HASPCTL_EXIT_FAILED;
	if (c->dry_run) {
		fprintf(c->out, "haspctl: dry run: would run hasp-snapshot restore\n");
		hasp_free(args);
		return argc >= 2 ? HASPCTL_EXIT_OK : usage(c, "snapshot restore <file> <new-data-dir> [--members ID,...]");
	}
	snapshot_tool_path(path, sizeof(path));
	int k = 0;
	args[k++] = path;
	if (c->json)
		args[k++] = (char *)"--json";
	args[k++] = (char *)"restore";
	for (int i = 0; i < argc; i++)
		args[k++] = argv[i];
	args[k] = NULL;
	HASP_ASSERT(k <= argc + 3);

	posix_spawn_file_actions_t fa;
	bool fa_ok = false;
	if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
	    posix_spawn_file_actions_init(&fa) != 0) {
		fprintf(c->err, "haspctl: cannot run %s: %s\n", path, strerror(errno));
		goto out;
	}
	fa_ok = true;
	pid_t pid;
	int rc = posix_spawn_file_actions_adddup2(&fa, out_pipe[1], STDOUT_FILENO);
	if (rc == 0)
		rc = posix_spawn_file_actions_adddup2(&fa, err_pipe[1], STDERR_FILENO);
	if (rc == 0)
		rc = posix_spawnp(&pid, path, &fa, NULL, args, environ);
	if (rc != 0) {
		fprintf(c->err, "haspctl: cannot run %s: %s (snapshot restore is done by hasp-snapshot: "
			"install it beside haspctl or name it in $HASP_SNAPSHOT)\n", path, strerror(rc));
		goto out;
	}
	close(out_pipe[1]);
	close(err_pipe[1]);
	out_pipe[1] = err_pipe[1] = -1;
	int fds[2] = { out_pipe[0], err_pipe[0] };
	relay(c, fds);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			fprintf(c->err, "haspctl: waiting for %s: %s\n", path, strerror(errno));
			goto out;
		}
	if (WIFEXITED(status) && WEXITSTATUS(status) <= HASPCTL_EXIT_USAGE)
		code = WEXITSTATUS(status);
	else
		fprintf(c->err, "haspctl: %s ended abnormally (status %d)\n", path, status);
out:
	if (fa_ok)
		posix_spawn_file_actions_destroy(&fa);
	for (int i = 0; i < 2; i++) {
		if (out_pipe[i] >= 0)
			close(out_pipe[i]);
		if (err_pipe[i] >= 0)
			close(err_pipe[i]);
	}
	hasp_free(args);
	return code;
}

/* Joins words into one request line ("name a b"); false if too long or a
 * word has a space (the protocol splits on spaces). */
static bool line_build(char *line, size_t size, const char *name, int argc, char **argv)
{
	size_t o = (size_t)snprintf(line, size, "%s", name);
	for (int i = 0; i < argc; i++) {
		if (argv[i][0] == '\0' || strchr(argv[i], ' ') != NULL)
			return false;
		int n = snprintf(line + o, size - o, " %s", argv[i]);
		if (n < 0 || (size_t)n >= size - o)
			return false;
		o += (size_t)n;
	}
	return true;
}

static int cmd_words(struct ctl *c, const char *name, int argc, char **argv, int want, bool leader)
{
	char line[4096];
	if (want >= 0 && argc != want)
		return usage(c, "wrong number of arguments");
	if (!line_build(line, sizeof(line), name, argc, argv))
		return usage(c, "arguments must be non-empty and without spaces");
	return simple(c, line, leader, NULL);
}

/* Listings: options become key=value words (--prefix only for locks). */
static int cmd_list(struct ctl *c, const char *name, int argc, char **argv, bool prefix)
{
	char *words[3];
	char buf[3][300];
	int n = 0;
	for (int i = 0; i < argc; i++) {
		const char *key = prefix && strcmp(argv[i], "--prefix") == 0 ? "prefix" :
				  strcmp(argv[i], "--after") == 0		 ? "after" :
				  strcmp(argv[i], "--limit") == 0		 ? "limit" : NULL;
		if (key == NULL || i + 1 == argc || n == 3)
			return usage(c, prefix ? "locks list [--prefix P] [--after CURSOR] [--limit N]"
					       : "leases|sessions list [--after CURSOR] [--limit N]");
		snprintf(buf[n], sizeof(buf[n]), "%s=%s", key, argv[++i]);
		words[n] = buf[n];
		n++;
	}
	return cmd_words(c, name, n, words, -1, false);
}

static int cmd_locks(struct ctl *c, int argc, char **argv)
{
	if (argc < 1)
		return usage(c, "locks needs a subcommand: list, show, release");
	if (strcmp(argv[0], "show") == 0)
		return cmd_words(c, "locks.show", argc - 1, argv + 1, 1, false);
	if (strcmp(argv[0], "release") == 0) {
		if (argc != 3 || strcmp(argv[1], "--force") != 0)
			return usage(c, "locks release --force <name> (the holder's token becomes stale)");
		return cmd_words(c, "locks.release_force", 1, argv + 2, 1, true);
	}
	if (strcmp(argv[0], "list") != 0)
		return local_fail(c, HASPCTL_EXIT_USAGE, "EUSAGE", NULL,
				  "unknown locks command: %.40s (list, show, release)", argv[0]);
	return cmd_list(c, "locks.list", argc - 1, argv + 1, true);
}

static int cmd_members(struct ctl *c, int argc, char **argv)
{
	if (argc < 1)
		return usage(c, "members needs a subcommand: list, add, promote, remove");
	if (strcmp(argv[0], "list") == 0)
		return cmd_words(c, "members.list", argc - 1, argv + 1, 0, false);
	if (strcmp(argv[0], "add") == 0) {
		if (argc != 5 && argc != 6)
			return usage(c, "members add <id> <ip> <peer-port> <client-port> <public-key>");
		/* Every node must know the new member's address before any of
		 * them may lead it (a configuration entry carries only ids):
		 * tell each node in --nodes first, then ask the leader. */
		char line[512];
		if (!line_build(line, sizeof(line), "members.address", argc - 1, argv + 1))
			return usage(c, "arguments must be non-empty and without spaces");
		for (uint32_t i = 0; i < c->node_count; i++) {
			struct reply r;
			if (request(c, c->nodes[i].target, line, &r, -1) != 0)
				continue; /* unreachable: it learns the address when it rejoins */
			if (!r.ok)
				fprintf(c->err, "haspctl: node %u: %s: %s\n", c->nodes[i].id, r.error, r.message);
			reply_free(&r);
		}
		return cmd_words(c, "members.add", argc - 1, argv + 1, argc - 1, true);
	}
	if (strcmp(argv[0], "remove") == 0)
		return cmd_words(c, "members.remove", argc - 1, argv + 1, 1, true);
	if (strcmp(argv[0], "promote") == 0)
		return cmd_words(c, "members.promote", argc - 1, argv + 1, 1, true);
	return local_fail(c, HASPCTL_EXIT_USAGE, "EUSAGE", NULL,
			  "unknown members command: %.40s (list, add, promote, remove)", argv[0]);
}

static int dispatch(struct ctl *c, int argc, char **argv)
{
	const char *cmd = argv[0];
	const char *sub = argc > 1 ? argv[1] : "";
	if (strcmp(cmd, "snapshot") == 0 && strcmp(sub, "restore") == 0)
		return cmd_snapshot_restore(c, argc - 2, argv + 2);
	static const char *const known[] = { "status", "health", "metrics", "stats", "members", "leader",
					      "snapshot", "locks", "leases", "sessions", "log", "help", "raw" };
	bool is_known = false;
	for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
		is_known = is_known || strcmp(cmd, known[k]) == 0;
	if (!is_known)
		return local_fail(c, HASPCTL_EXIT_USAGE, "EUSAGE", NULL,
				  "unknown command: %.40s%s (haspctl --help lists them)", cmd, strlen(cmd) > 40 ? "..." : "");
	if (c->target[0] == '\0')
		return usage(c, "no node: give --socket, --addr or $HASP_ADMIN");
	if (strcmp(cmd, "status") == 0) {
		if (argc == 2 && strcmp(sub, "--cluster") == 0)
			return cmd_status_cluster(c);
		return cmd_words(c, "status", argc - 1, argv + 1, 0, false);
	}
	if (strcmp(cmd, "health") == 0)
		return argc == 1 ? cmd_health(c) : usage(c, "health takes no arguments");
	/* `stats` is the same: the counters (docs/STYLE.md §8 names it so). */
	if (strcmp(cmd, "metrics") == 0 || strcmp(cmd, "stats") == 0)
		return argc == 1 ? simple(c, "metrics", false, human_metrics) : usage(c, "metrics");
	if (strcmp(cmd, "members") == 0)
		return cmd_members(c, argc - 1, argv + 1);
	if (strcmp(cmd, "leader") == 0 && strcmp(sub, "transfer") == 0)
		return cmd_words(c, "leader.transfer", argc - 2, argv + 2, 1, true);
	if (strcmp(cmd, "snapshot") == 0 && strcmp(sub, "save") == 0)
		return argc == 3 ? cmd_snapshot_save(c, argv[2]) : usage(c, "snapshot save <file>");
	if (strcmp(cmd, "locks") == 0)
		return cmd_locks(c, argc - 1, argv + 1);
	if (strcmp(cmd, "leases") == 0 && strcmp(sub, "list") == 0)
		return cmd_list(c, "leases.list", argc - 2, argv + 2, false);
	if (strcmp(cmd, "sessions") == 0 && strcmp(sub, "list") == 0)
		return cmd_list(c, "sessions.list", argc - 2, argv + 2, false);
	if (strcmp(cmd, "log") == 0 && strcmp(sub, "level") == 0)
		return cmd_words(c, "log.level", argc - 2, argv + 2, 2, false);
	if (strcmp(cmd, "log") == 0 && strcmp(sub, "list") == 0)
		return cmd_words(c, "log.list", argc - 2, argv + 2, 0, false);
	if (strcmp(cmd, "help") == 0)
		return cmd_words(c, "help", argc - 1, argv + 1, 0, false);
	if (strcmp(cmd, "raw") == 0 && argc >= 2)
		return cmd_words(c, argv[1], argc - 2, argv + 2, -1, false);
	return local_fail(c, HASPCTL_EXIT_USAGE, "EUSAGE", NULL,
			  "unknown command: %.40s%s (haspctl --help lists them)", cmd, strlen(cmd) > 40 ? "..." : "");
}

int haspctl_main(int argc, char **argv, FILE *out, FILE *err)
{
	struct ctl c = { .out = out, .err = err, .timeout_ms = 10000 };
	const char *env = getenv("HASP_ADMIN");
	if (env != NULL)
		snprintf(c.target, sizeof(c.target), "%s", env);
	env = getenv("HASP_NODES");
	if (env != NULL && env[0] != '\0' && parse_nodes(&c, env) != 0)
		return usage(&c, "$HASP_NODES: ID=TARGET,...");
	/* --version and -h/--help anywhere (before a raw request's words)
	 * answer at once and send nothing. */
	for (int k = 1; k < argc && strcmp(argv[k], "raw") != 0; k++) {
		if (strcmp(argv[k], "--version") == 0) {
			fprintf(out, "haspctl %s\n", HASP_VERSION);
			return HASPCTL_EXIT_OK;
		}
		if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) {
			int first = 1;
			while (first < argc && argv[first][0] == '-') /* skip the global options */
				first += strcmp(argv[first], "--json") == 0 || strcmp(argv[first], "--dry-run") == 0 ||
						 first + 1 == argc
						 ? 1
						 : 2;
			help_for(out, argc - first, argv + first);
			return HASPCTL_EXIT_OK;
		}
	}
	const char *key_file = getenv("HASP_ADMIN_KEY_FILE");
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
		const char *o = argv[i];
		if (strcmp(o, "--json") == 0) {
			c.json = true;
			continue;
		}
		if (strcmp(o, "--dry-run") == 0) {
			c.dry_run = true;
			continue;
		}
		if (i + 1 == argc)
			return usage(&c, "option needs a value");
		const char *v = argv[++i];
		if ((strcmp(o, "--socket") == 0 || strcmp(o, "--addr") == 0) && strlen(v) < TARGET_SIZE) {
			snprintf(c.target, sizeof(c.target), "%s", v);
		} else if (strcmp(o, "--nodes") == 0) {
			c.node_count = 0;
			if (parse_nodes(&c, v) != 0)
				return usage(&c, "--nodes ID=TARGET,... (ids 1.., at most 9 nodes)");
		} else if (strcmp(o, "--config") == 0) {
			c.node_count = 0;
			if (parse_nodes_file(&c, v) != 0)
				return usage(&c, "--config FILE: one ID=TARGET per line (ids 1.., at most 9)");
		} else if (strcmp(o, "--admin-key") == 0) {
			key_file = v;
		} else if (strcmp(o, "--timeout") == 0) {
			uint64_t ms;
			if (duration_parse_ms(v, UINT32_MAX, &ms) != 0 || ms == 0)
				return usage(&c, "--timeout takes a duration > 0 (500ms, 5s, 2m; a bare number is ms)");
			c.timeout_ms = (uint32_t)ms;
		} else {
			return local_fail(&c, HASPCTL_EXIT_USAGE, "EUSAGE", NULL, "unknown option %.40s (haspctl --help)", o);
		}
	}
	if (i == argc)
		return usage(&c, NULL);
	if (key_file != NULL && key_file[0] != '\0') {
		int rc = auth_init();
		if (rc == 0)
			rc = auth_key_load(key_file, &c.admin_key);
		if (rc != 0) {
			fprintf(err, "haspctl: admin key %s: %s (64 hex digits and a newline, mode 0600)\n",
				key_file, hasp_strerror(rc));
			return HASPCTL_EXIT_FAILED;
		}
		c.admin_keyed = true;
	}
	/* Without a target, the first of --nodes is asked. */
	if (c.target[0] == '\0' && c.node_count > 0)
		snprintf(c.target, sizeof(c.target), "%s", c.nodes[0].target);
	c.toks = hasp_calloc(TOKENS_MAX, sizeof(*c.toks));
	if (c.toks == NULL) {
		auth_key_wipe(&c.admin_key);
		return HASPCTL_EXIT_FAILED;
	}
	int code = dispatch(&c, argc - i, argv + i);
	if (code == HASPCTL_DRY_RUN)
		code = HASPCTL_EXIT_OK;
	auth_key_wipe(&c.admin_key);
	hasp_free(c.toks);
	fflush(out);
	return code;
}
