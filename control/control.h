/*
 * The control plane inside a node: an admin endpoint served by its own
 * pthread, a command registry (DPDK telemetry style: name, handler, help
 * line, structured JSON replies), the metrics registry, and the health and
 * status the node publishes. docs/CONTROL.md is the operator's view.
 *
 * Threads. The admin thread owns the sockets (a Unix socket, and a TCP
 * management address when configured) and runs everything that needs no
 * node state: help, status, health, metrics, log levels. The dataplane
 * lcore never blocks on it; state crosses two ways only:
 *
 *  - lcore -> admin: metrics (relaxed atomic fields, one writer each) and
 *    the status block, published with a seqlock (control_status_publish);
 *    the writer never waits, readers retry.
 *  - admin -> lcore: commands that must run on the node's thread (member
 *    changes, transfer, force release, snapshot save, lock listings) go into
 *    a bounded array of preallocated request slots. The lcore drains them
 *    in its work hook with control_poll(), which runs the registered handler
 *    there; the admin thread waits for the reply up to timeout_ms and
 *    answers ETIMEDOUT otherwise (the slot is reclaimed when the lcore
 *    finishes it or, if it never took it, at once). A full queue is a
 *    designed state: the client gets EBUSY and a counter moves.
 *
 * Life cycle (node's main thread): control_init -> register commands and
 * metrics -> control_start (binds, spawns the thread) -> ... ->
 * control_stop -> control_deinit. Registration is closed once started.
 *
 * Protocol on the sockets (both protocols on every listener; the first
 * bytes decide):
 *  - admin: one request line `name [arg ...]\n` (args separated by single
 *    spaces, printable ASCII, at most CONTROL_REQUEST_SIZE_MAX bytes), one
 *    reply line `{"ok":true,"command":...,"result":<value>}\n` or
 *    `{"ok":false,"error":"ENOENT","message":"...","leader_id":N}\n`. A reply
 *    with "attachment":N is followed by exactly N raw bytes (snapshot save).
 *    The connection stays open for more requests.
 *  - HTTP/1.1 GET: /metrics (Prometheus text format 0.0.4), /health (200
 *    "ok" or 503 with the reason), /status (JSON). One request, then close.
 *    Read-only, on every listener.
 *
 * Access: on the Unix socket every command; on TCP the CONTROL_OPEN ones,
 * and the privileged ones only as sealed lines (control/admin_auth.h:
 * `auth.nonce`, then `auth SEQ TAG LINE`) under the configured admin key.
 * A refusal is EPERM with a message, and counted.
 */
#ifndef HASP_CONTROL_CONTROL_H
#define HASP_CONTROL_CONTROL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "control/json.h"
#include "control/metrics.h"
#include "control/process_metrics.h"

#define CONTROL_REQUEST_SIZE_MAX 4096u
#define CONTROL_ARGS_MAX 16u
#define CONTROL_COMMANDS_MAX 64u
#define CONTROL_NAME_SIZE 48u
#define CONTROL_MESSAGE_SIZE 256u
#define CONTROL_PATH_SIZE 512u
#define CONTROL_MEMBERS_MAX 9u

struct control_config {
	char unix_path[CONTROL_PATH_SIZE]; /* "" : no Unix socket */
	char tcp_addr[64];                 /* "ip:port" management address; "": none */
	uint32_t node_id;                  /* for status replies */
	char node_address[64];             /* the client address, for status */
	uint32_t clients_max;              /* 0: 16 concurrent connections */
	uint32_t slots;                    /* 0: 8 lcore request slots */
	uint32_t reply_size_max;           /* 0: 256 KiB per reply */
	uint32_t timeout_ms;               /* 0: 5000, wait for the lcore */
	uint32_t stall_ms;                 /* 0: 3000, status older than this: unhealthy */
	uint32_t metrics_max;              /* 0: 512 series */
	/* The admin credential for privileged commands over TCP
	 * (control/admin_auth.h); without it they are served only on the
	 * Unix socket. */
	bool admin_key_set;
	struct auth_key admin_key;
};

/* Where a command runs. */
enum control_where {
	CONTROL_ON_ADMIN = 0, /* the admin thread: must not touch node state */
	CONTROL_ON_LCORE = 1, /* the node's lcore, through the request slots */
};

/* Who may run a command (docs/SECURITY.md 4.8). The Unix socket (file
 * permissions: the node's user) may run everything; a TCP connection only
 * CONTROL_OPEN commands, and the others with the admin credential. The
 * zero value is the safe one: a command that says nothing is privileged. */
enum control_access {
	CONTROL_PRIVILEGED = 0, /* changes the node, or shows client data (names, sessions) */
	CONTROL_OPEN = 1,       /* the node's own read-only view: status, health, metrics */
};

/* One request as a handler sees it. */
struct control_request {
	const char *name;
	uint32_t argc;
	const char *argv[CONTROL_ARGS_MAX]; /* argv[0] is the first argument */
	struct json_writer out;             /* write the result value here */
	/* Set by the handler on failure (control_request_fail). */
	int error;                          /* 0 or -HASP_E* */
	char message[CONTROL_MESSAGE_SIZE];
	uint32_t leader_id;                 /* with -HASP_ENOTLEADER: who is, 0 unknown */
	char attach_path[CONTROL_PATH_SIZE]; /* stream this file after the reply */

	/* Internal. */
	uint32_t state;
	char line[CONTROL_REQUEST_SIZE_MAX + 1];
	char *result;
	size_t result_size;
};

/* Returns true when the request is complete. An lcore handler may return
 * false and keep `req` to finish later (e.g. a member change that must
 * commit) with control_request_done() from the lcore; it must do so before
 * control_stop(). Admin handlers always return true. */
typedef bool control_handler_fn(struct control_request *req, void *arg);

struct control_command {
	const char *name;  /* [a-z.]+, static */
	const char *usage; /* arguments, e.g. "<name>"; static */
	const char *help;  /* one line; static */
	enum control_where where;
	control_handler_fn *fn;
	void *arg;
	enum control_access access;
};

/* What the node publishes about itself (all words, so the seqlock copy is
 * per-word atomic). Roles use raft's numbering: 0 follower, 1 pre-candidate,
 * 2 candidate, 3 leader; then CONTROL_ROLE_LEARNER (a follower that is a
 * learner) and CONTROL_ROLE_REMOVED (knows it was removed); member roles
 * 1 voter, 2 learner. */
#define CONTROL_ROLE_LEARNER 4u
#define CONTROL_ROLE_REMOVED 5u
struct control_member {
	uint64_t id;
	uint64_t role;
	uint64_t ip;          /* IPv4, host order */
	uint64_t peer_port;
	uint64_t client_port;
	uint64_t match_index; /* leader only: replicated through here */
	uint64_t rtt_ns;      /* leader only: last heartbeat round trip, 0 unknown */
	uint64_t active;      /* leader only: heard from recently */
};

struct control_status {
	uint64_t published_ns;  /* CLOCK_MONOTONIC of the lcore when published */
	uint64_t role;
	uint64_t term;
	uint64_t leader_id;     /* 0: unknown */
	uint64_t commit_index;
	uint64_t applied_index;
	uint64_t last_index;
	uint64_t snapshot_index;
	uint64_t can_commit;    /* leader: a quorum answered within the election
				 * timeout; follower: the leader was heard within it */
	uint64_t storage_failed;
	/* Works, but not fully (node_degraded()): "" when not; health says
	 * "degraded: <this>" and stays healthy. A multiple of 8 bytes. */
	char degraded[56];
	uint64_t member_count;
	struct control_member members[CONTROL_MEMBERS_MAX];
};

struct control_slot;
struct control_conn;

struct control_admin_counters {
	struct metric *requests;   /* admin requests answered */
	struct metric *errors;     /* answered with ok:false */
	struct metric *timeouts;   /* the lcore did not answer in time */
	struct metric *rejected;   /* connection refused (full), request too big or malformed */
	struct metric *http;       /* HTTP requests */
	/* Privileged requests refused (docs/SECURITY.md 4.8), by reason. */
	struct metric *refused_no_credential;  /* over TCP without a credential */
	struct metric *refused_bad_credential; /* wrong tag, seq or form: the connection closes */
	struct metric *refused_not_configured; /* sealed, but the node has no admin key */
};

struct control {
	struct control_config cfg;
	struct control_command commands[CONTROL_COMMANDS_MAX];
	uint32_t command_count;
	struct metrics metrics;
	struct control_admin_counters counters;
	struct process_metrics process; /* process_*: refreshed before each scrape */

	/* Seqlock-published status: odd while the lcore writes. */
	uint64_t status_seq;
	struct control_status status;

	struct control_slot *slots;
	uint32_t slot_count;
	uint32_t lcore_next;       /* lcore: where the next poll scan starts */
	/* Wakes an idle lcore when a request is queued: an eventfd the node
	 * adds to its idle wait (dp_add_wake_fd); the admin thread writes it,
	 * the lcore drains it in control_poll() only when wake_pending says
	 * there is something to drain (no syscall on an ordinary iteration). */
	int wake_fd;
	uint32_t wake_pending;
	/* The reverse: the lcore writes it when it completes a request, so
	 * the admin thread answers within microseconds instead of polling.
	 * One non-blocking write per admin request (operator rate). */
	int done_fd;

	/* Admin thread. */
	struct control_conn *conns;
	int listen_fds[2];
	int stop_fd;               /* eventfd */
	pthread_t thread;
	bool started;
};

/* Fills defaults for zero fields; sizes the slots, the connections and the
 * metrics registry (the only allocations); registers the built-in commands
 * and the admin's own counters. Returns 0, -HASP_ECONFIG, -HASP_ENOMEM. */
int control_init(struct control *c, const struct control_config *cfg) __attribute__((warn_unused_result));
void control_deinit(struct control *c);

/* Before control_start. -HASP_EEXIST, -HASP_EFULL, -HASP_EINVAL (name). */
int control_register(struct control *c, const struct control_command *cmd)
	__attribute__((warn_unused_result));

struct metrics *control_metrics(struct control *c);

/* Binds the listeners (the Unix socket path is replaced if stale) and starts
 * the admin thread. Returns 0, -HASP_ESYS (bind/listen; errno logged), or
 * -HASP_EINVAL (bad tcp_addr). */
int control_start(struct control *c) __attribute__((warn_unused_result));
/* Stops the thread, closes every socket and removes the Unix socket. */
void control_stop(struct control *c);

/* ---- on the lcore ---- */

/* Publishes the status (seqlock writer; never blocks). */
void control_status_publish(struct control *c, const struct control_status *st);
/* Runs up to `max` queued lcore commands; returns how many it took. */
uint32_t control_poll(struct control *c, uint32_t max);
/* The eventfd that becomes readable when a request is queued for the
 * lcore; the node adds it to the fds its idle lcore waits on. */
int control_wake_fd(const struct control *c);
/* Completes a request whose handler returned false. */
void control_request_done(struct control_request *req);

/* ---- for handlers ---- */

void control_request_fail(struct control_request *req, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A decimal number: digits only, no sign, blank, leading zero (except "0"),
 * base prefix or overflow past 2^64 - 1. False (v untouched) otherwise. */
bool control_parse_u64(const char *s, uint64_t *v) __attribute__((warn_unused_result));
/* Argument i as an unsigned decimal number (control_parse_u64); false (and
 * the request failed with EINVAL naming it) when missing or not one. */
bool control_arg_u64(struct control_request *req, uint32_t i, const char *what, uint64_t *v);

/* ---- readers (any thread) ---- */

void control_status_read(const struct control *c, struct control_status *st);
/* True when healthy at now_ns (CLOCK_MONOTONIC); otherwise `reason` says
 * why: "starting", "dataplane stalled", "storage failed", "removed", "no
 * leader", "cannot commit". */
bool control_health(const struct control *c, uint64_t now_ns, char *reason, size_t reason_size)
	__attribute__((warn_unused_result));
const char *control_role_name(uint64_t role);

/* Runs one request line as the server does (for tests and the server):
 * parses it into `req` (whose result buffer the caller provides), runs an
 * admin command at once or queues an lcore command and waits up to the
 * timeout (polling). Returns when the request is complete. Runs as from
 * the Unix socket: privileged commands too. */
void control_execute(struct control *c, const char *line, size_t len, struct control_request *req,
		     char *result, size_t result_size);

/* Renders the reply envelope of a complete request into out; attachment
 * size or -1. Returns the length including the final newline, 0 if it
 * does not fit. */
size_t control_reply_render(const struct control_request *req, int64_t attachment_size, char *out,
			    size_t size);

#endif
