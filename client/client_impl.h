/*
 * Internal to libhasp (the .c files of client/): the client struct and the request
 * engine shared by the operation files. Not part of the public API
 * (include/hasp/client.h is).
 *
 * Locking: every field below is guarded by `mu` except `fd` (set at open,
 * used by any thread: a UDP socket is safe to send on concurrently), `cfg`
 * and `lock_lost_set` (read-only after open, except cfg.deadline_ms: an
 * atomic word) and the node
 * list's first `config_node_count` entries (read-only after
 * open). `receiving` elects one thread at a time to read the socket; it
 * drops `mu` across poll(2) and dispatches what it reads under `mu`.
 */
#ifndef HASP_CLIENT_CLIENT_IMPL_H
#define HASP_CLIENT_CLIENT_IMPL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/prng.h"
#include "hasp/client.h"
#include "hasp/wire.h"

enum pending_state {
	PENDING_FREE = 0,
	PENDING_WAITING,   /* sent, no final reply yet */
	PENDING_DONE,      /* reply copied in, owner has not looked yet */
	PENDING_ABANDONED, /* owner gave up at its deadline; a late reply frees it */
};

struct client_req;

/* One request slot of the exactly-once window: sequence number s lives in
 * slots[s % HASP_SESSION_INFLIGHT_MAX], so s can only be sent once s - 32
 * was answered (PROTOCOL.md "Exactly once"). A reply goes straight into
 * its request's own buffer (`req`, set while WAITING or DONE): a slot has
 * no reply buffer of its own, so the window is 32 small records, not 32
 * datagrams a busy client drags through its cache (docs/PERFORMANCE.md,
 * "session 10"). An ABANDONED slot has no request any more (it may be
 * gone, or reused for its op's next request): its late reply is dropped. */
struct pending {
	uint64_t session_id; /* the session seq belongs to */
	uint64_t seq;
	struct client_req *req; /* WAITING, DONE: the request the reply is copied into */
	uint8_t opcode;
	uint8_t state;       /* enum pending_state */
	uint8_t status;      /* the reply's status (DONE): read without decoding it again */
	uint32_t from_index; /* node the reply came from */
};

/* Event identities remembered for duplicate detection. */
/* A node that was paused (or cut off) past a leader change sends, when it
 * resumes, the events it had queued: older ones the new leader already
 * delivered. 16 remembered identities let such a burst through as new
 * events (a fault run saw one delivered twice, some 70 events later);
 * 1024 cover seconds of events at the rates a watcher sees. */
#define CLIENT_EVENTS_RECENT 1024u

/* A thread blocked in a WAIT-mode acquire, linked on the caller's stack. */
struct waiter {
	struct waiter *next;
	const char *name;
	size_t name_size;
	bool granted;  /* a LOCK_GRANTED event for `name` was ours */
	uint64_t token;
	uint64_t lease_id; /* of that grant: its shared lease, 0 for its own TTL */
	uint32_t ttl_ms;   /* of that grant's lease, from the event */
	bool recheck;  /* an event may have been lost: LOCK_READ now */
	/* A grant to this wait has a token above every token the lock had
	 * while it waited. floor_token is the highest such token a LOCK_READ
	 * showed (another holder's); a LOCK_GRANTED event at or below it is an
	 * older grant to this session whose event came late (a wait given up
	 * and its grant released, or a grant learned by a read). No event is
	 * believed before one read has set the floor (floor_known). */
	uint64_t floor_token;
	bool floor_known;
};

/* Leader finding for one request (exchange.c, docs/CLIENT.md "Leader
 * discovery"). */
enum timer_kind { TIMER_SEND, TIMER_SILENCE };

struct finder {
	uint32_t target;      /* directed mode: the node asked */
	bool probing;         /* every node is asked */
	uint32_t silent;      /* bit i: node i let this request go unanswered */
	uint32_t silent_ever; /* bit i: ... at some point (never cleared) */
	uint32_t redirects;   /* hints followed, bounded by the node count */
	uint64_t backoff_ns;  /* the next backoff, before jitter */
	uint64_t backoff_max_ns;
};

enum req_state {
	REQ_IDLE = 0, /* encoded, no sequence number yet (no session or slot) */
	REQ_SENT,     /* has its number and slot; sent at least once */
	REQ_DONE,     /* rc set: a final reply (status >= 0) or -HASP_E* */
};

/* One request to a final reply: the one implementation of numbering,
 * retransmission, redirects and leader finding (exchange.c). Blocking
 * calls and the asynchronous loop both advance it with req_advance_locked;
 * it owns its bytes, so it may outlive the caller's arguments. */
/* A TTL change whose answer never came: the lock's validity is capped at
 * its first send + TTL - drift (ttl_caps.c). */
struct ttl_cap {
	bool used;
	/* An ACQUIRE cap whose session is no longer the client's: it binds
	 * the name's grants with a token up to token_max (ttl_caps.c). */
	bool ended;
	uint64_t session_id;
	uint64_t token;     /* 0: any grant of the name by the session (ACQUIRE) */
	uint64_t token_max; /* ended: the largest token it binds */
	uint64_t until_ns;  /* the cap */
	uint64_t made_ns;   /* when the request was given up */
	char name[HASP_CLIENT_NAME_BUF];
};
#define CLIENT_TTL_CAPS 32u

struct client_req {
	uint8_t state; /* enum req_state */
	uint8_t opcode;
	uint8_t timer_kind; /* enum timer_kind */
	bool sent;
	int rc;
	struct pending *p;
	struct finder f;
	uint64_t timer_ns;
	uint64_t deadline_ns;
	uint64_t first_send_ns; /* first transmission (validity counts from it) */
	uint64_t session_id;    /* the session it was numbered in */
	/* A TTL the request sets on a held lock (RENEW with a TTL, ACQUIRE
	 * with its own): unanswered, it caps the lock's validity. The
	 * lock's name is read back from `bytes` then (ttl_caps.c), not
	 * copied here for every request that might need it. */
	uint32_t ttl_change_ms;
	uint64_t ttl_token; /* RENEW's token; 0 for ACQUIRE */
	bool group_credit; /* holds a place in its group's window (group.c) */
	/* Last, in this order: client_req_init zeroes everything before
	 * `size` and leaves the buffers as they are (read only up to the
	 * size written with them), so a request writes the few cache lines
	 * of its header and datagram, not 3 KB. */
	size_t size;
	uint8_t bytes[HASP_DATAGRAM_SIZE_MAX];
	/* The reply its slot's dispatch copied in, and its size (both
	 * unset before the first reply): a redirect while SENT (read by the
	 * step), the final reply once DONE with rc >= 0. A GRANTED reply's
	 * body as dispatch decoded it (set with the reply, read only when
	 * the reply's status is GRANTED): an ACQUIRE's grant is not decoded
	 * a second time (docs/PERFORMANCE.md, "fewer instructions per
	 * request"). */
	struct hasp_wire_granted granted;
	size_t reply_size;
	uint8_t reply[HASP_DATAGRAM_SIZE_MAX];
};
_Static_assert(offsetof(struct client_req, bytes) == offsetof(struct client_req, size) + sizeof(size_t),
	       "client_req_init: the header, then the datagram right after it");

enum op_kind {
	OP_SIMPLE = 0,
	OP_ACQUIRE,
	OP_CONNECT, /* the session open alone (hasp_client_connect) */
	OP_RANGE,   /* KV_RANGE pages, following MORE (hasp_client_kv_range) */
};
enum op_phase {
	PH_MAIN = 0,       /* the op's request (ACQUIRE for an acquire) */
	PH_WAIT,           /* queued: waiting for LOCK_GRANTED or the recheck timer */
	PH_READ,           /* queued: LOCK_READ in case the grant event was lost */
	PH_CANCEL,         /* giving up a WAIT: CANCEL */
	PH_CANCEL_READ,    /* CANCEL said NOT_FOUND: was it granted meanwhile? */
	PH_CANCEL_RELEASE, /* it was: release the grant nobody will use */
	PH_PAGE,           /* OP_RANGE: a page arrived, its entries go out without mu */
	PH_DONE,
};

/* One operation of the API, blocking or asynchronous: a request, or for a
 * WAIT acquire a sequence of them (ops.c). The blocking calls run one on
 * the caller's stack; hasp_client_*_async allocate one and the
 * application's loop (hasp_client_process) runs it. */
struct client_op {
	/* Every op: zeroed by op_clear, with the kind's block below. */
	struct client_op *next; /* c->ops while in progress */
	uint64_t id;
	uint8_t kind;  /* enum op_kind */
	uint8_t phase; /* enum op_phase */
	bool async;
	bool cancel;       /* asked to stop (hasp_client_cancel, _cancel_wait) */
	bool w_linked;     /* OP_ACQUIRE: w is on c->waiters */
	/* WATCH, UNWATCH: the name is res.lock.name */
	bool watch_prefix;
	bool watch_resend; /* the loop registering a watch again: a failure
			    * keeps the watch (stale), it does not drop it */
	int give_up_rc;    /* what a given-up WAIT ends with */
	hasp_client_done_fn *fn;
	void *arg;
	uint64_t wake_ns; /* async: when process() must look again */
	/* OP_ACQUIRE only (zeroed for it alone; nothing reads it otherwise) */
	struct hasp_acquire_opts opts;
	struct waiter w;
	int attempts;
	uint64_t wait_deadline_ns;
	uint64_t next_check_ns;
	uint64_t granted_after_ns;
	uint64_t acquire_session_id;
	uint64_t acquire_send_ns;
	/* OP_RANGE only: one deadline for the whole walk */
	hasp_client_range_fn *range_fn;
	void *range_arg;
	uint32_t range_limit;
	uint32_t range_delivered;
	uint64_t range_deadline_ns;
	/* The request (its header right after the blocks above, so that a
	 * request's zeroing and its datagram share cache lines), the outcome,
	 * and OP_RANGE's strings, set by client_op_prepare_range alone. */
	struct client_req req;
	struct hasp_result res;
	char range_prefix[HASP_CLIENT_NAME_BUF];
	char range_after[HASP_CLIENT_NAME_BUF];
};

/* Fills op for one request `msg` (its deadline: the configured one). */
int client_op_prepare(struct hasp_client *c, struct client_op *op, struct hasp_wire_msg *msg)
	__attribute__((warn_unused_result));
/* Fills op for an acquire (TRY or WAIT), arguments checked. */
int client_op_prepare_acquire(struct hasp_client *c, struct client_op *op, const char *name,
			      const struct hasp_acquire_opts *opts) __attribute__((warn_unused_result));
/* Fills op for opening the session (OP_CONNECT). */
void client_op_prepare_connect(struct hasp_client *c, struct client_op *op);
/* Fills op for a KV_RANGE walk (OP_RANGE), arguments checked. */
int client_op_prepare_range(struct hasp_client *c, struct client_op *op, const char *prefix,
			    uint32_t limit, hasp_client_range_fn *fn, void *arg)
	__attribute__((warn_unused_result));
/* Runs a prepared op to its end on this thread; returns op->res.rc. */
int client_op_run(struct hasp_client *c, struct client_op *op);
/* Runs an OP_RANGE walk on this thread, page by page; returns op->res.rc. */
int client_op_run_range(struct hasp_client *c, struct client_op *op);
/* WATCH or UNWATCH ended with `status` (or -HASP_E*): the watch table
 * follows (kv_ops.c). Caller holds c->mu. */
void client_watch_done_locked(struct hasp_client *c, const struct client_op *op, int status);
/* Hands a heap op (client_op_new, NULL: -HASP_ENOMEM) to the asynchronous
 * loop once `prepared`, its prepare's result, is 0; on any error the op is
 * freed and the error returned. */
int client_op_start(struct hasp_client *c, struct client_op *op, int prepared,
		    hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
/* A heap op for client_op_start: the client's spare record if it has one
 * (the last op its loop finished), else a new one. */
struct client_op *client_op_new(struct hasp_client *c);
/* An op that is no longer anybody's (callback returned, start refused):
 * kept as the client's spare, or freed when a spare is kept already. */
void client_op_free(struct hasp_client *c, struct client_op *op);

/* ---- the watchdog of held locks (watchdog.c) ---- */

/* An acquire granted `lock`: watch it (auto_renew: renew it too). */
void client_kept_add_locked(struct hasp_client *c, const struct hasp_lock *lock, bool renew);
/* A RELEASE of name/token answered (0 or NOT_HOLDER): stop watching. */
void client_kept_forget_locked(struct hasp_client *c, const char *name, uint64_t token);
/* A RENEW of name/token ended with rc (public convention); on 0 the new
 * TTL and validity. A refusal is a loss. */
void client_kept_renewed_locked(struct hasp_client *c, const char *name, uint64_t token, int rc,
				uint32_t ttl_ms, uint64_t valid_until_ns);
/* A CHECK of name/token ended with rc: -HASP_ENOTHOLDER is a loss. */
void client_kept_checked_locked(struct hasp_client *c, const char *name, uint64_t token, int rc);
/* Events may have been lost or the session expired: check every watched
 * lock with the cluster. */
void client_kept_verify_locked(struct hasp_client *c);
/* Does what is due: renews, checks, and lock_lost_fn calls; blocking
 * (keepalive) or as async ops (`async`: hasp_client_process). Takes mu. */
void client_watchdog(struct hasp_client *c, bool async);
/* The instant the watchdog next has something to do (UINT64_MAX: none). */
uint64_t client_watchdog_next_locked(struct hasp_client *c);
/* The loop's keepalives (no helper thread): session and lease keepalives
 * as async ops when due. Takes mu. */
void client_keepalive_async(struct hasp_client *c);
/* When the loop's keepalives are next due (UINT64_MAX: none). */
uint64_t client_keepalive_next_locked(const struct hasp_client *c);

struct lease_entry {
	bool used;
	uint64_t lease_id;
	uint32_t ttl_ms;
	uint64_t valid_until_ns;
	uint64_t last_ok_send_ns; /* first send of the last answered grant/keepalive */
	bool busy;                /* the loop's LEASE_KEEPALIVE is in flight */
};

/* A held lock watched for loss and maybe renewed (watchdog.c). */
struct kept_lock {
	bool used;
	bool renew;          /* auto_renew: RENEW at a third of the TTL */
	bool busy;           /* a RENEW or CHECK of it is in flight */
	bool verify;         /* CHECK it: a gap or a session expiry happened */
	uint64_t token;
	uint64_t lease_id;
	uint32_t ttl_ms;
	uint64_t valid_until_ns;
	uint64_t renewed_send_ns; /* validity counts from this send */
	char name[HASP_CLIENT_NAME_BUF];
};

struct watch_entry {
	bool used;
	bool prefix;
	uint64_t session_id; /* registered in this session (0: not yet) */
	char name[HASP_CLIENT_NAME_BUF];
};

enum session_state { SESSION_NONE = 0, SESSION_OPENING, SESSION_OPEN };

/*
 * The client's clock and datagram transport, for the deterministic
 * simulator (tests/nodesim/, docs/TESTING.md): with `io` set, every time
 * libhasp reads, every datagram it sends and receives go through these
 * callbacks instead of CLOCK_MONOTONIC and its UDP socket. NULL (what
 * hasp_client_open sets) is the real clock and socket. Single-threaded
 * use only (the asynchronous API: hasp_client_process); no helper thread.
 */
struct client_io {
	uint64_t (*now_ns)(void *ctx);
	/* Copies one datagram to `to` (dropping it is a lost datagram). */
	void (*send)(void *ctx, const struct sockaddr_in *to, const void *data, size_t size);
	/* The next datagram for this client without waiting: its full size
	 * (as recvfrom with MSG_TRUNC; the copy is cut to `size`), or -1
	 * when none. */
	long (*recv)(void *ctx, void *buf, size_t size, struct sockaddr_in *from);
	/* Lets simulated time pass until `until_ns` or a datagram arrives:
	 * what a blocking call does in poll(2). */
	void (*wait)(void *ctx, uint64_t until_ns);
	void *ctx;
};

struct hasp_client {
	/* First, from the mutex on, what every request of a busy loop reads
	 * or writes, packed by size into four cache lines, then the
	 * configuration and counters it reads, then the nodes: a 64-client
	 * hasp-bench run misses on every line of a client each request
	 * touches, since 64 clients' lines do not stay in L1
	 * (docs/PERFORMANCE.md, sessions 9 and 10). Fields by topic, with
	 * their explanations, follow the hot ones. */
	pthread_mutex_t mu;
	uint8_t session_state; /* enum session_state */
	bool watches_stale;    /* a new session or leader must re-send WATCHes */
	/* The node of the last final answer (valid once answered_any): another
	 * node answering means a new leader, which has none of our watches. */
	bool answered_any;
	bool processing; /* a thread is in hasp_client_process (holding mu, or in its callbacks) */
	bool wake_pending; /* wake_fd written and not yet read (under mu) */
	bool wake_missed;  /* a wake-up came while processing: look again */
	bool intr_pending; /* intr_fd written, not yet read by the receiver */
	bool ka_running;   /* the keepalive helper thread (ka_thread, below) runs */
	uint64_t session_id;
	uint64_t session_last_ok_send_ns;
	uint64_t next_seq;
	uint32_t session_ttl_ms;
	uint32_t answered_by;
	/* Bit i: slots[i] is WAITING or DONE (pending_state_set). Whether a
	 * lower number still waits for its reply, asked by every request, is
	 * then one read, not a walk of the 32 slots. */
	uint32_t slots_live;

	/* The asynchronous loop (ops.c): every op in progress, blocking or
	 * not (a cancel finds either), the wake-up eventfd and the epoll fd
	 * that hasp_client_fd() hands out (socket + eventfd). */
	struct client_op *ops;       /* oldest first */
	struct client_op **ops_tail; /* &last->next, or &ops when empty */
	uint64_t next_op_id;
	uint64_t progress; /* requests finished and sessions opened: a slot may be free */
	uint32_t async_count; /* async ops in progress or completed, not yet delivered */

	uint32_t leases_used; /* entries of `leases` with `used`: 0 skips the scans per process call */
	uint32_t kept_count;
	uint32_t ttl_caps_used; /* entries with `used`: 0 skips every scan (per reply) */

	/* A client opened into a group (group.c) has no socket of its own
	 * (fd and intr_fd are -1): it sends and receives through the group.
	 * group_index is its place in the group's member tables (which hold
	 * when the group must process it next); group_ready (under the
	 * group's mutex) that it is on the group's ready list. */
	struct hasp_client_group *group;
	uint32_t group_index;
	/* The group's leader changes this client followed (group.c,
	 * client_group_leader_follow_locked), and its place + 1 on the
	 * group's list of members with watches (0: not on it). Both the
	 * group loop's, as group_index. */
	uint64_t group_leader_changes;
	uint32_t group_watcher_pos;
	/* Requests of this client that hold a place in the group's window
	 * (under the group's mutex; group.c, "The window"), and whether it
	 * waits on the group's list for one. */
	uint32_t group_credits;
	bool group_credit_waiting;
	struct hasp_client *group_credit_next; /* the next waiter after it */
	uint32_t event_count; /* events in the ring (below) */
	struct waiter *waiters;
	const struct client_io *io; /* NULL: the real clock and socket */
	/* The largest token of an answered lock request, and a bound on the
	 * tokens of grants to ended sessions that every grant to the current
	 * session exceeds (ttl_caps.c, "Sessions"). */
	uint64_t ttl_tokens_seen_max;
	int fd; /* -1 with io */
	int wake_fd;
	int epoll_fd;
	int intr_fd; /* eventfd: interrupts the thread in poll(2) (a cancel, a slot freed) */
	uint32_t node_count; /* configured + learned from NOT_LEADER */
	uint32_t target;     /* node believed to lead */
	bool receiving;
	/* Wire v2 (cfg identity set): the identity key seals opens, the
	 * session key everything of the open session. */
	bool auth;
	bool session_ka_busy; /* the loop's SESSION_KEEPALIVE is in flight */
	/* hasp_client_close_async was called: no new call, no new session
	 * (and no reopen for watches); hasp_client_close frees it. */
	bool closing;
	bool group_ready;
	bool lock_lost_set; /* cfg.lock_lost_fn != NULL (read per grant) */
	uint32_t cv_waiters; /* threads in pthread_cond_timedwait on cv */
	struct auth_key session_key;
	/* Its first counters (tx_requests, rx_replies) share the line above. */
	struct hasp_client_stats stats;

	struct hasp_client_config cfg; /* cfg.cluster is NULL: parsed into nodes */
	struct sockaddr_in nodes[HASP_CLIENT_NODES_MAX];
	uint32_t config_node_count; /* the configured ones, read-only */

	/* The rest: what requests do not touch on the usual path. */
	uint64_t open_count; /* SESSION_OPEN carries it as its seq */
	struct prng prng;
	bool ka_stop; /* the keepalive helper thread is asked to stop */
	struct kept_lock *kept; /* HASP_CLIENT_KEPT_MAX, when lock_lost_fn or auto_renew used */
	/* kept_count (above): its entries with `used` */

	uint64_t ttl_cap_all_ns; /* the table overflowed: every lock of the session */
	uint64_t ttl_cap_all_session;
	/* Caps of ended sessions folded into one: every lock with a token up
	 * to ttl_cap_ended_all_token_max. */
	bool ttl_cap_ended_all;
	uint64_t ttl_cap_ended_all_ns;
	uint64_t ttl_cap_ended_all_token_max;
	uint64_t ttl_tokens_ended_max; /* with ttl_tokens_seen_max, above */

	/* The event chain (docs/PROTOCOL.md "Event identity"): the identity of
	 * the last event received; the last few (event_recent_*, with the
	 * arrays below) tell a duplicate from a gap when events arrive out of
	 * order. */
	uint64_t event_last_index;
	uint32_t event_last_sub;
	uint32_t event_recent_next;
	uint32_t event_recent_count; /* entries of event_recent_* in use (from 0 up) */
	bool event_resync_owed; /* a RESYNC could not be queued yet (buffer full) */
	/* Ring of HASP_CLIENT_EVENTS_MAX, allocated with the first event:
	 * 76 KB that most clients of a group never need. */
	struct hasp_event *events;
	uint32_t event_head;

	/* LOCK_GRANTED events of an older grant, come while a later WAIT of
	 * the lock waited, and not believed (struct waiter). Not in the
	 * public stats: that struct is fixed in the 1.1 ABI. */
	uint64_t wait_grants_stale;
	/* WATCH_COUNT answers below the watches registered: the leader had
	 * lost them (a restart between two keepalives). Internal, as above. */
	uint64_t watch_counts_short;
	/* The node answered WATCH_STATUS BAD_OPCODE (older than the opcode):
	 * ask WATCH_COUNT instead, which tells lost watches but not a lost
	 * last event. */
	bool watch_status_unknown;
	/* The loop's re-registration in progress (client_watches_resend_async):
	 * WATCH ops not yet complete, and whether one of them failed. */
	uint32_t watch_resends;
	bool watch_resend_failed;

	pthread_cond_t cv; /* slot done, receiver role free, session state */

	uint8_t identity[HASP_IDENTITY_SIZE_MAX]; /* wire v2, with auth above */
	uint8_t identity_size;
	struct auth_key identity_key;
	uint64_t open_nonce; /* of the open in flight or of the open session */

	/* The tables, after the fields above. */
	struct pending slots[HASP_SESSION_INFLIGHT_MAX];
	struct pending open_slot;
	struct client_req open_req; /* SESSION_OPEN, advanced by whoever waits */

	uint64_t event_recent_index[CLIENT_EVENTS_RECENT];
	uint32_t event_recent_sub[CLIENT_EVENTS_RECENT];
	struct lease_entry leases[HASP_CLIENT_LEASES_MAX];
	struct watch_entry watches[HASP_CLIENT_WATCHES_MAX];
	struct ttl_cap ttl_caps[CLIENT_TTL_CAPS];
	pthread_t ka_thread;
	pthread_cond_t ka_cv;

	/* One finished async op kept for the next one (client_op_new): a
	 * busy loop's request then costs no malloc and free of 4.9 KB
	 * (docs/PERFORMANCE.md, "fewer instructions per request"). An atomic
	 * exchange, not mu: ops are made and freed outside the lock. */
	struct client_op *op_spare;
};

/* One blocking request/reply exchange. The caller fills `req` (opcode and
 * body; the header's session and seq are set here) and `deadline_ns`. */
struct client_call {
	struct hasp_wire_msg req;
	uint64_t deadline_ns;    /* 0: now + cfg.deadline_ms */
	struct hasp_wire_msg reply; /* points into reply_buf */
	uint8_t reply_buf[HASP_DATAGRAM_SIZE_MAX];
	uint64_t first_send_ns;  /* first transmission of the answered request */
	uint64_t session_id;     /* the session it was sent in */
};

/* Sends call->req in the current session (opening one if needed), retrying
 * and redirecting until a final reply or the deadline. Returns the reply's
 * status or -HASP_E*. Takes and releases c->mu. */
int client_call(struct hasp_client *c, struct client_call *call)
	__attribute__((warn_unused_result));

/* Encodes `msg` into r (IDLE, deadline_ns). -HASP_E* when the codec
 * refuses it: then no number is ever taken. */
int client_req_init(struct hasp_client *c, struct client_req *r, struct hasp_wire_msg *msg,
		    uint64_t deadline_ns) __attribute__((warn_unused_result));

/* Moves r on as far as it goes without waiting: opens a session, takes a
 * number, sends, follows redirects, times out. Returns true when r is
 * DONE. *wake_ns is lowered to the instant r next needs a look. Caller
 * holds c->mu. A DONE request with rc >= 0 has freed its slot. */
bool client_req_advance_locked(struct hasp_client *c, struct client_req *r, uint64_t now,
			       uint64_t *wake_ns);

/* Gives up r (a cancel): it ends with -HASP_ECANCELED and its slot stays
 * reserved as after a timeout, until a late reply frees it; returns true.
 * Unless r's final reply was received already: then nothing changes and it
 * returns false, and r completes with that reply at its next advance (the
 * operation happened on the cluster; reading the reply frees the slot). */
bool client_req_abandon_locked(struct hasp_client *c, struct client_req *r)
	__attribute__((warn_unused_result));

/* Waits for datagrams until `until_ns` or until woken, reading the socket if
 * no other thread is. Called and returns with c->mu held. */
void client_wait_io_locked(struct hasp_client *c, uint64_t until_ns);

/* Reads what the socket holds without waiting and dispatches it. Caller
 * holds c->mu; returns at once when another thread is the receiver. */
void client_read_nowait_locked(struct hasp_client *c);

/* Something changed that a waiter may be waiting for (a slot freed, a
 * session opened, a reply for an async op): wakes blocked threads and the
 * asynchronous loop. Caller holds c->mu. */
void client_wake_locked(struct hasp_client *c);
/* Only the asynchronous loop's eventfd (not while it is in process()). */
void client_wake_loop_locked(struct hasp_client *c);
/* client_wake_locked, and the thread in poll(2) too (a cancel). */
void client_interrupt_locked(struct hasp_client *c);

/* Moves the session towards OPEN without waiting (exchange.c): 0 (open),
 * -HASP_EAGAIN (opening: look again by *wake_ns), or how the open failed. */
int client_session_advance_locked(struct hasp_client *c, uint64_t deadline_ns, uint64_t now,
				  uint64_t *wake_ns) __attribute__((warn_unused_result));

/* Opens a session if none is open, blocking until `deadline_ns`. Returns
 * 0, a status the open was refused with, or -HASP_E*. Called with c->mu held. */
int client_session_ensure_locked(struct hasp_client *c, uint64_t deadline_ns)
	__attribute__((warn_unused_result));

/* After a call: re-registers the watches if a new session or leader needs
 * them (blocking; takes c->mu). */
void client_watches_resend_if_stale(struct hasp_client *c);

/* How many watches are registered in the current session: what a
 * WATCH_COUNT answer is compared with. Called with c->mu held. */
uint32_t client_watches_registered_locked(const struct hasp_client *c);

/* A WATCH_COUNT answer for `session_id`: fewer watches on the leader than
 * registered means it lost them (it restarted, or another node led in
 * between), so they are registered again and a RESYNC follows. Called with
 * c->mu held. */
void client_watch_count_seen_locked(struct hasp_client *c, uint64_t session_id, uint32_t count);

/* The opcode that asks the leader after a keepalive (and for
 * hasp_client_watch_progress_async): WATCH_STATUS, or WATCH_COUNT from a
 * node that does not know it. Called with c->mu held. */
uint8_t client_watch_query_op_locked(const struct hasp_client *c);

/* The answer (status, body) to that query for `session_id`, from the
 * blocking or the asynchronous path: the watch count as above, and a
 * WATCH_STATUS's last event, which this client must have received, or it
 * lost an event no later one would show (a RESYNC follows). Called with
 * c->mu held. */
void client_watch_query_seen_locked(struct hasp_client *c, uint64_t session_id, uint8_t op,
				    int status, const struct hasp_wire_msg *reply);

/* The public return convention (client.h): a reply status or -HASP_E*
 * from client_call becomes 0 or -HASP_E*. */
static inline int client_result(int rc)
{
	return rc < 0 ? rc : hasp_status_error((uint32_t)rc);
}

static_assert(HASP_SESSION_INFLIGHT_MAX <= 32, "slots_live has a bit per slot");

/* Every change of a pending slot's state goes through here, so that the
 * session slots' bits in slots_live stay true (the open slot has none). */
static inline void pending_state_set(struct hasp_client *c, struct pending *p,
				     enum pending_state state)
{
	p->state = (uint8_t)state;
	if (p == &c->open_slot)
		return;
	uint32_t bit = 1u << (uint32_t)(p - c->slots);
	if (state == PENDING_WAITING || state == PENDING_DONE)
		c->slots_live |= bit;
	else
		c->slots_live &= ~bit;
}

/* The client's clock: CLOCK_MONOTONIC, or the simulated one (io). */
static inline uint64_t client_now(const struct hasp_client *c)
{
	return c->io == NULL ? clock_monotonic_ns() : c->io->now_ns(c->io->ctx);
}

/* hasp_client_open over a simulated clock and transport (struct
 * client_io, which must outlive the client); for the simulator only. */
int client_open_io(struct hasp_client **client, const struct hasp_client_config *cfg,
		   const struct client_io *io) __attribute__((warn_unused_result));

/* The absolute deadline for a call starting now. */
uint64_t client_deadline(const struct hasp_client *c);

/* send_ns + ttl - drift margin (never before send_ns). */
uint64_t client_valid_until(const struct hasp_client *c, uint64_t send_ns, uint32_t ttl_ms);

/* ttl_caps.c */
/* Request `r` ends unanswered: it caps the lock it may have re-armed. */
void client_ttl_cap_note_locked(struct hasp_client *c, const struct client_req *r, uint64_t now_ns);
/* A lock request on (name, token) of `session_id`, first sent at
 * `sent_ns`, was answered: ends the caps it supersedes and takes note of
 * the token (the bound of ended sessions' caps). */
void client_ttl_cap_clear_locked(struct hasp_client *c, const char *name, uint64_t token,
				 uint64_t sent_ns, uint64_t session_id);
/* `until_ns` lowered by every cap that binds the lock (name, token). */
uint64_t client_ttl_cap_apply_locked(const struct hasp_client *c, const char *name, uint64_t token,
				     uint64_t until_ns);
/* c->session_id was replaced: the old session's ACQUIRE caps and full-table
 * cap now bind its grants by token bound (they outlive it, as its locks do). */
void client_ttl_caps_session_replaced_locked(struct hasp_client *c);

/* Copies a C string name into wire bytes after checking it; -HASP_ENAME. */
int client_name(const char *name, struct hasp_wire_bytes *out) __attribute__((warn_unused_result));
/* The same with only NULL (-HASP_EINVAL) and the size (-HASP_ENAME)
 * checked: for a request whose encoding follows with nothing observable
 * in between, since hasp_wire_encode checks the name's bytes first, before
 * any other field, and refuses them with the same -HASP_ENAME (one check
 * per request instead of two, docs/PERFORMANCE.md "session 10"). */
int client_name_sized(const char *name, struct hasp_wire_bytes *out)
	__attribute__((warn_unused_result));

/* Lease table (locked). */
struct lease_entry *client_lease_find_locked(struct hasp_client *c, uint64_t lease_id);
/* A lease's answer sent at send_ns: a grant (granted) adds the lease to
 * the table the keepalive loop keeps; any answer updates an entry there. */
void client_lease_note_locked(struct hasp_client *c, uint64_t lease_id, uint32_t ttl_ms,
			      uint64_t send_ns, bool granted);

/* Queues a RESYNC event for the application (events may have been lost;
 * owed until the buffer has room). Caller holds c->mu. */
void client_event_resync_locked(struct hasp_client *c);
/* Re-sends every registered WATCH (after a new session or leader), then
 * queues the RESYNC. Blocking (a blocking call's end). Unlocked. */
void client_watches_resend(struct hasp_client *c);
/* The same for the asynchronous loop (hasp_client_process), which must
 * not wait: starts one WATCH op per watch; the last to complete queues the
 * RESYNC, or marks the watches stale again if one failed. Unlocked. */
void client_watches_resend_async(struct hasp_client *c);

/* ---- client groups (group.c) ---- */

/* Checks one received datagram and hands it to the client's state (a
 * reply to its slot, an event to its chain). Caller holds c->mu. */
void client_dispatch_locked(struct hasp_client *c, const uint8_t *data, size_t size,
			    const struct sockaddr_in *from);
/* Sends one datagram of a grouped client: queued for the group's
 * sendmmsg while the group processes, else sent at once. */
void client_group_send(struct hasp_client *c, const struct sockaddr_in *to, const uint8_t *data,
		       size_t size);
/* The sequence number of a grouped client's next SESSION_OPEN: unique in
 * the group, so that the reply (session id 0) finds its client. Caller
 * holds c->mu. */
uint64_t client_group_open_seq_locked(struct hasp_client *c);
/* A grouped client's session id changed: the group routes by it. Caller
 * holds c->mu. */
void client_group_session_locked(struct hasp_client *c);
/* The group must process c (an op started, a cancel, a wake-up). Caller
 * holds c->mu. */
void client_group_wake_locked(struct hasp_client *c);
/* The group's window (group.c, "The window"): true when one more request
 * of c may be sent (a place taken: the caller marks its request); false
 * when the window is full (c is woken when a place frees). */
bool client_group_credit_take_locked(struct hasp_client *c) __attribute__((warn_unused_result));
/* A request of c that held a place ended: the place goes to a waiter. */
void client_group_credit_return_locked(struct hasp_client *c);
/* Waits on the group's window so far (tests). */
uint64_t client_group_credit_waits(const struct hasp_client_group *g);
/* A grouped client's request got a final answer from `node` (its address:
 * members may list the nodes in different orders). A node other than the
 * group's leader is the new leader: the members with watches are woken to
 * follow it (client_group_leader_follow_locked). O(1) when it is the same
 * node, O(members with watches) when it changed. Caller holds c->mu, on
 * the group's loop. */
void client_group_leader_seen_locked(struct hasp_client *c, const struct sockaddr_in *node);
/* At a grouped client's process pass: if the group learned of a leader
 * since this client last looked, the client follows it
 * (client_leader_learned_locked). Caller holds c->mu. */
void client_group_leader_follow_locked(struct hasp_client *c, uint64_t now);
/* A WATCH of a grouped client was registered: the client goes on the
 * group's list of members to wake at a leader change. Caller holds c->mu. */
void client_group_watching_locked(struct hasp_client *c);
/* `node` is on c's node list (configured or learned). Caller holds c->mu. */
bool client_knows_node_locked(const struct hasp_client *c, const struct sockaddr_in *node);
/* Another node leads (a member of c's group learned it): if it is one of
 * c's nodes, c's next requests go to `leader` first, its requests waiting
 * for another node are sent there, and its watches, if registered with
 * another node, are registered again (client_watches_resend_async, then a
 * RESYNC). Caller holds c->mu. */
void client_leader_learned_locked(struct hasp_client *c, const struct sockaddr_in *leader,
				  uint64_t now);
/* Joins the group at open; -HASP_ENOMEM when its table cannot grow. */
int client_group_join(struct hasp_client_group *g, struct hasp_client *c)
	__attribute__((warn_unused_result));
/* Leaves the group (hasp_client_close). */
void client_group_leave(struct hasp_client *c);
/* Sends SESSION_CLOSE once, without waiting (a grouped client's close).
 * Caller holds c->mu. */
void client_session_close_nowait_locked(struct hasp_client *c);
/* hasp_client_process without the grouped check; returns what
 * client_next_wake_ns would say right after it. */
uint64_t client_process(struct hasp_client *c, uint32_t *completed);
/* The instant the loop must next process c (UINT64_MAX: nothing in
 * progress): what hasp_client_timeout_ms counts down to. */
uint64_t client_next_wake_ns(struct hasp_client *c);

/* Parses "ip:port,ip:port" into nodes; -HASP_ECONFIG. */
int client_nodes_parse(const char *list, struct sockaddr_in *nodes, uint32_t nodes_max,
		       uint32_t *count) __attribute__((warn_unused_result));

#endif
