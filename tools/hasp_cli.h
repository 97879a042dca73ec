/*
 * The `hasp` command-line client (tools/hasp.c is its main): argument
 * parsing, output and the commands, split out so that tests can call the
 * parser as a function and run commands in-process.
 *
 * Exit codes are a contract for scripts (docs/CLIENT.md):
 *   0  success
 *   1  refused by the cluster (BUSY, NOT_HOLDER, NOT_FOUND, COMPARE_FAILED, ...)
 *   2  usage or configuration error (nothing was sent)
 *   3  cluster unavailable or timed out (outcome unknown for mutations)
 *   4  `hasp run`: the lock was lost while the command ran (it was killed)
 * `hasp run` otherwise exits with the command's status (128 + signal when a
 * signal ended it, 127 when it could not be executed), or, when the lock
 * stayed busy (--try, or --timeout ran out), with --conflict-exit-code
 * (default 1).
 */
#ifndef HASP_TOOLS_HASP_CLI_H
#define HASP_TOOLS_HASP_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HASP_CLI_EXIT_OK 0
#define HASP_CLI_EXIT_REFUSED 1
#define HASP_CLI_EXIT_USAGE 2
#define HASP_CLI_EXIT_UNAVAILABLE 3
#define HASP_CLI_EXIT_LOCK_LOST 4

#define HASP_CLI_TTL_MS_DEFAULT 30000u     /* acquire, renew */
#define HASP_CLI_RUN_TTL_MS_DEFAULT 10000u /* run: renewed every ttl/3 */
#define HASP_CLI_GRACE_MS_DEFAULT 5000u    /* run: SIGTERM to SIGKILL */
#define HASP_CLI_TIMEOUT_MS_DEFAULT 5000u  /* per request */
#define HASP_CLI_CLUSTER_SIZE_MAX 1024u    /* the --cluster text */

enum hasp_cli_cmd {
	HASP_CLI_HELP = 0, /* --help: help_for says of which command */
	HASP_CLI_VERSION,
	HASP_CLI_ACQUIRE,
	HASP_CLI_RELEASE,
	HASP_CLI_RENEW,
	HASP_CLI_CHECK,
	HASP_CLI_READ,
	HASP_CLI_WATCH,
	HASP_CLI_LEASE_GRANT,
	HASP_CLI_LEASE_KEEPALIVE,
	HASP_CLI_LEASE_REVOKE,
	HASP_CLI_KV_PUT,
	HASP_CLI_KV_GET,
	HASP_CLI_KV_DELETE,
	HASP_CLI_KV_CAS,
	HASP_CLI_KV_RANGE,
	HASP_CLI_RUN,
};

/* Parsed arguments. Strings point into argv (not copied). */
struct hasp_cli_args {
	enum hasp_cli_cmd cmd;
	enum hasp_cli_cmd help_for; /* HASP_CLI_HELP: the whole usage */
	const char *cluster; /* --cluster, else $HASP_CLUSTER */
	bool json;
	bool dry_run; /* --dry-run: parse, say what would be done, send nothing */
	uint32_t timeout_ms; /* --timeout; 0 when not given */
	const char *name;    /* lock name, key, or prefix */
	uint64_t token;
	uint32_t ttl_ms; /* --ttl (or the lease grant's TTL); defaults filled */
	bool ttl_given;
	uint64_t lease_id; /* --lease, or the lease command's id */
	bool wait;
	bool prefix;
	uint32_t count; /* watch --count; 0: unbounded */
	uint32_t limit; /* kv range --limit */
	const char *value;
	bool cas_value; /* kv cas --expect (compare value) vs --rev */
	uint64_t expected_revision;
	const char *expected_value;
	uint32_t grace_ms;
	bool try_only;          /* run --try: BUSY ends it at once */
	int conflict_exit_code; /* run: the exit code when the lock stays busy */
	char **command; /* run: argv after "--", NULL-terminated */
	int command_count;
};

/* Parses argv[1..argc) (argv[0] is the program). `env_cluster` is the
 * value of $HASP_CLUSTER or NULL. Returns 0, or HASP_CLI_EXIT_USAGE with a
 * one-line reason in err. */
int hasp_cli_parse(int argc, char **argv, const char *env_cluster, struct hasp_cli_args *args,
		   char *err, size_t err_size) __attribute__((warn_unused_result));

/* Prints the help of one command (HASP_CLI_HELP: the whole usage). */
void hasp_cli_help(enum hasp_cli_cmd cmd, FILE *out);

/* Rewrites a cluster list "host:port,..." with every host name resolved to
 * an IPv4 address (getaddrinfo, AF_INET; the first address). Returns 0, or
 * an exit code with a one-line reason in err: HASP_CLI_EXIT_USAGE for a
 * malformed entry or a name that does not exist, HASP_CLI_EXIT_UNAVAILABLE
 * when the resolver could not answer. */
int hasp_cli_resolve_cluster(const char *cluster, char *out, size_t out_size, char *err,
			     size_t err_size) __attribute__((warn_unused_result));

/* Runs a parsed command, printing to stdout (results, JSON) and stderr
 * (human-readable errors). Returns the exit code. */
int hasp_cli_execute(const struct hasp_cli_args *args);

/* The whole program: parse, execute, usage on error. */
int hasp_cli_main(int argc, char **argv);

/* Maps a libhasp result (status >= 0 or -HASP_E*) to an exit code, given
 * the status that means success for the command. */
int hasp_cli_exit_code(int rc, int ok_status);

#endif
