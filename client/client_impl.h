/*
 * Internal to libhasp (the .c files of client/): the client struct and the request
 * engine shared by the operation files. Not part of the public API
 * (include/hasp/client.h is).
 *
 * Locking: every field below is guarded by `mu` except `fd` (set at open,
 * used by any thread: a UDP socket is safe to send on concurrently), `cfg`
 * (read-only after open, except deadline_ms: an atomic word) and the node
 * list's first `config_node_count` entries (read-only after
 * open). `receiving` elects one thread at a time to read the socket; it
 * drops `mu` across poll(2) and dispatches what it reads under `mu`.
 */
#ifndef HASP_CLIENT_CLIENT_IMPL_H
#define HASP_CLIENT_CLIENT_IMPL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/auth.h"
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

/* One request slot of the exactly-once window: sequence number s lives in
 * slots[s % HASP_SESSION_INFLIGHT_MAX], so s can only be sent once s - 32
 * was answered (PROTOCOL.md "Exactly once"). */
struct pending {
	uint64_t session_id; /* the session seq belongs to */
	uint64_t seq;
	uint8_t opcode;
	uint8_t state;         /* enum pending_state */
	uint32_t from_index;   /* node the reply came from */
	size_t reply_size;
	uint8_t reply[HASP_DATAGRAM_SIZE_MAX];
};

/* Event identities remembered for duplicate detection. */
#define CLIENT_EVENTS_RECENT 16u

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
};

struct lease_entry {
	bool used;
	uint64_t lease_id;
	uint32_t ttl_ms;
	uint64_t valid_until_ns;
	uint64_t last_ok_send_ns; /* first send of the last answered grant/keepalive */
};

struct watch_entry {
	bool used;
	bool prefix;
	uint64_t session_id; /* registered in this session (0: not yet) */
	char name[HASP_CLIENT_NAME_BUF];
};

enum session_state { SESSION_NONE = 0, SESSION_OPENING, SESSION_OPEN };

struct hasp_client {
	struct hasp_client_config cfg; /* cfg.cluster is NULL: parsed into nodes */
	int fd;

	pthread_mutex_t mu;
	pthread_cond_t cv; /* slot done, receiver role free, session state */
	bool receiving;

	struct sockaddr_in nodes[HASP_CLIENT_NODES_MAX];
	uint32_t node_count;        /* configured + learned from NOT_LEADER */
	uint32_t config_node_count; /* the configured ones, read-only */
	uint32_t target;            /* node believed to lead */

	/* Wire v2 (cfg identity set): the identity key seals opens, the
	 * session key everything of the open session. */
	bool auth;
	uint8_t identity[HASP_IDENTITY_SIZE_MAX];
	uint8_t identity_size;
	struct auth_key identity_key;
	struct auth_key session_key;
	uint64_t open_nonce; /* of the open in flight or of the open session */

	uint8_t session_state; /* enum session_state */
	uint64_t session_id;
	uint32_t session_ttl_ms;
	uint64_t session_last_ok_send_ns;
	uint64_t next_seq;
	uint64_t open_count; /* SESSION_OPEN carries it as its seq */
	bool watches_stale;  /* a new session or leader must re-send WATCHes */
	/* The node of the last final answer (valid once answered_any): another
	 * node answering means a new leader, which has none of our watches. */
	uint32_t answered_by;
	bool answered_any;
	struct prng prng;

	struct pending slots[HASP_SESSION_INFLIGHT_MAX];
	struct pending open_slot;

	/* The event chain (docs/PROTOCOL.md "Event identity"): the identity of
	 * the last event received, and the last few for telling a duplicate
	 * from a gap when events arrive out of order. */
	uint64_t event_last_index;
	uint32_t event_last_sub;
	uint64_t event_recent_index[CLIENT_EVENTS_RECENT];
	uint32_t event_recent_sub[CLIENT_EVENTS_RECENT];
	uint32_t event_recent_next;
	bool event_resync_owed; /* a RESYNC could not be queued yet (buffer full) */
	struct hasp_event *events; /* ring of HASP_CLIENT_EVENTS_MAX */
	uint32_t event_head;
	uint32_t event_count;
	struct waiter *waiters;

	struct lease_entry leases[HASP_CLIENT_LEASES_MAX];
	struct watch_entry watches[HASP_CLIENT_WATCHES_MAX];

	struct hasp_client_stats stats;

	pthread_t ka_thread;
	pthread_cond_t ka_cv;
	bool ka_running;
	bool ka_stop;
};

/* One request/reply exchange. The caller fills `req` (opcode and body; the
 * header's session and seq are set by client_call) and `deadline_ns`. */
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

/* Waits for datagrams until `until_ns` or until woken, reading the socket if
 * no other thread is. Called and returns with c->mu held. */
void client_wait_io_locked(struct hasp_client *c, uint64_t until_ns);

/* Opens a session if none is open. Called with c->mu held. */
int client_session_ensure_locked(struct hasp_client *c, uint64_t deadline_ns)
	__attribute__((warn_unused_result));

/* The public return convention (client.h): a reply status or -HASP_E*
 * from client_call becomes 0 or -HASP_E*. */
static inline int client_result(int rc)
{
	return rc < 0 ? rc : hasp_status_error((uint32_t)rc);
}

/* The absolute deadline for a call starting now. */
uint64_t client_deadline(const struct hasp_client *c);

/* send_ns + ttl - drift margin (never before send_ns). */
uint64_t client_valid_until(const struct hasp_client *c, uint64_t send_ns, uint32_t ttl_ms);

/* Copies a C string name into wire bytes after checking it; -HASP_ENAME. */
int client_name(const char *name, struct hasp_wire_bytes *out) __attribute__((warn_unused_result));

/* Lease table (locked). */
struct lease_entry *client_lease_find_locked(struct hasp_client *c, uint64_t lease_id);
void client_lease_note_locked(struct hasp_client *c, uint64_t lease_id, uint32_t ttl_ms,
			      uint64_t send_ns);

/* Re-sends every registered WATCH (after a new session). Unlocked. */
/* Queues a RESYNC event for the application (events may have been lost;
 * owed until the buffer has room). Caller holds c->mu. */
void client_event_resync_locked(struct hasp_client *c);
void client_watches_resend(struct hasp_client *c);

/* Parses "ip:port,ip:port" into nodes; -HASP_ECONFIG. */
int client_nodes_parse(const char *list, struct sockaddr_in *nodes, uint32_t nodes_max,
		       uint32_t *count) __attribute__((warn_unused_result));

#endif
