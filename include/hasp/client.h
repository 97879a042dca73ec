/*
 * libhasp: the C client of a hasp cluster, over ordinary kernel UDP sockets.
 *
 * One struct hasp_client speaks wire protocol v1 (docs/PROTOCOL.md) to a
 * cluster given as a list of ip:port addresses. It opens a session lazily on
 * the first request (SESSION_OPEN with a random client nonce; a retried open
 * carries the same nonce), numbers every request with the session's next
 * sequence number and retransmits a request with the SAME number and bytes
 * until a node answers, so that a retried mutation applies once
 * (exactly-once, PROTOCOL.md "Exactly once"). NOT_LEADER with a known leader
 * sends the request there at once; an unknown leader or a silent node makes
 * the client ask every node at once, again after each short backoff; the
 * last node that answered is remembered. docs/CLIENT.md explains each
 * behaviour ("Leader discovery", "Failover contract") and the CLI built on it.
 *
 * Return convention (every int-returning function of this header): 0 on
 * success, with the outcome in the out-parameters, or a negative -HASP_E*
 * code (include/hasp/errors.h; hasp_strerror() gives its message). A call
 * never returns a positive value. Errors come from three places:
 *   refused locally (nothing was sent):
 *     -HASP_EINVAL     a NULL or inconsistent argument, or a blocking call
 *                      on a client of a group ("client groups" below)
 *     -HASP_ENAME      a name, key or prefix that is not 1..128 bytes of 0x21..0x7e
 *     -HASP_ERANGE     a TTL outside 10 ms .. 1 day
 *     -HASP_ETOOBIG    a value over 1024 bytes, or a request over one datagram
 *     -HASP_EFULL      a client table is full (watches)
 *   refused by the cluster (a node answered; hasp_status_error() in
 *   types.h is the whole map, hasp_error_status() its reverse):
 *     -HASP_EBUSY      the lock is held (TRY mode; lock->token is the holder's)
 *     -HASP_ENOTHOLDER the token is not the current holder's
 *     -HASP_ENOENT     no such lock, key, lease or watch
 *     -HASP_ECOMPARE   a compare-and-set found another value or revision
 *     -HASP_ESESSION   the session expired (the next call opens a new one)
 *     -HASP_ELEASE     the lease expired, was revoked, or is unknown
 *     -HASP_EFORBIDDEN the identity may not do this on this name
 *     -HASP_EFULL      a capacity of the cluster is exhausted
 *     -HASP_EREFUSED   the cluster found the request malformed
 *   no usable answer:
 *     -HASP_ETIMEDOUT  no answer before the deadline (every node tried), or a
 *                      wait that did not end in a grant in time; the outcome
 *                      of a mutation is then unknown
 *     -HASP_ESYS       a socket call failed
 *     -HASP_ECORRUPT   a node broke the protocol (e.g. MORE with no entries)
 * NOT_LEADER, UNAVAILABLE and OVERLOADED are handled inside (redirect,
 * retry after a backoff) and reach the caller only as -HASP_ETIMEDOUT when
 * the deadline passes.
 *
 * Threads (the table per function: docs/CLIENT.md "Threads"): every
 * function may be called from several threads at once on one client,
 * except hasp_client_close (races nothing), hasp_client_process and
 * hasp_client_poll (one thread at a time each). A mutex guards the
 * client's state and is never held across a blocking socket call or a
 * callback; up to HASP_SESSION_INFLIGHT_MAX requests may be in flight at
 * once, and one waiting thread at a time reads the socket for all of them.
 * The keepalive helper thread (hasp_client_keepalive_start) is such a
 * caller. Event callbacks run on the thread in hasp_client_poll(),
 * completion callbacks on the thread in hasp_client_process(), lock loss
 * callbacks where the keepalive runs; none may call hasp_client_close().
 *
 * Ownership: the client copies every string and buffer it keeps; pointers
 * handed to callbacks are valid only during the call.
 *
 * Time: all deadlines and validity instants are CLOCK_MONOTONIC nanoseconds
 * (clock_gettime(CLOCK_MONOTONIC), as the application reads it too).
 */
#ifndef HASP_CLIENT_H
#define HASP_CLIENT_H

#include <netinet/in.h> /* struct sockaddr_in: hasp_client_group_io */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hasp/errors.h"
#include "hasp/types.h"

#define HASP_CLIENT_NODES_MAX 16u   /* addresses in a cluster, incl. learned leaders */
#define HASP_CLIENT_LEASES_MAX 16u  /* leases kept alive by one client */
#define HASP_CLIENT_WATCHES_MAX 32u /* watches re-registered after a new session */
#define HASP_CLIENT_EVENTS_MAX 64u  /* pushed events buffered until polled */
#define HASP_CLIENT_NAME_BUF 129u   /* a name of up to 128 bytes and its NUL */
#define HASP_CLIENT_VALUE_MAX 1024u /* the protocol's value limit */
#define HASP_CLIENT_KEPT_MAX 256u   /* locks watched for loss / renewed at once */

struct hasp_client; /* opaque */

struct hasp_event {
	uint8_t type;      /* enum hasp_event_type; RESYNC: events may be lost, re-read */
	uint64_t revision; /* of the change; the fencing token for lock events */
	uint64_t seq;      /* identity: the Raft index of the change ... */
	uint32_t sub;      /* ... and its ordinal in that command (RESYNC: 0, 0) */
	char name[HASP_CLIENT_NAME_BUF];
	size_t value_size; /* KV_PUT only */
	uint8_t value[HASP_CLIENT_VALUE_MAX];
};

typedef void hasp_client_event_fn(const struct hasp_event *ev, void *arg);

/* A held lock whose validity can no longer be guaranteed (docs/CLIENT.md
 * "Lock loss"). Stop acting on the resource it guards; fencing with its
 * token still refuses a late write. */
struct hasp_lock_loss {
	char name[HASP_CLIENT_NAME_BUF];
	uint64_t token;
	uint64_t lease_id;
	uint64_t valid_until_ns; /* the last validity the client could vouch for */
	/* -HASP_ETIMEDOUT: no renew succeeded and the validity ends within
	 *                  lock_lost_margin_ms (or ended);
	 * -HASP_ENOTHOLDER: the cluster says the token no longer holds it
	 *                  (a renew refused, or a check after a session
	 *                  expiry or a gap in the event chain);
	 * -HASP_ELEASE:    its lease is gone. */
	int reason;
};

/* Called once per lost lock, on the thread that runs the keepalive
 * (hasp_client_keepalive, its helper thread, or hasp_client_process),
 * without the client's lock held; it must not close the client. */
typedef void hasp_client_lock_lost_fn(struct hasp_client *client,
				      const struct hasp_lock_loss *loss, void *arg);

struct hasp_client_config {
	/* "ip:port,ip:port,...", IPv4, any node of the cluster first. Required. */
	const char *cluster;
	uint32_t request_timeout_ms; /* silence before every node is asked (default 200) */
	uint32_t backoff_ms;         /* first backoff between rounds (default 20) */
	uint32_t backoff_max_ms;     /* backoff doubles up to this (default 100) */
	uint32_t deadline_ms;        /* overall deadline of one call (default 5000) */
	uint32_t session_ttl_ms;     /* requested session TTL (default 10000) */
	/* Clock-drift margin subtracted from every validity deadline:
	 * drift_margin_ms + ttl * drift_ppm / 10^6 (defaults 5 ms, 10000 ppm). */
	uint32_t drift_margin_ms;
	uint32_t drift_ppm;
	/* While queued in WAIT mode, re-read the lock this often in case the
	 * LOCK_GRANTED event was lost (default 500). */
	uint32_t wait_recheck_ms;
	hasp_client_event_fn *event_fn; /* optional; see hasp_client_poll */
	void *event_arg;
	uint64_t nonce_seed; /* 0: random nonces (getrandom); else deterministic, for tests */
	/* Authentication (docs/CLIENT.md "Identity", docs/SECURITY.md): the
	 * identity name and the path of its key file (64 hex digits, mode
	 * 0600). NULL: taken from the environment, HASP_ID and HASP_KEY_FILE
	 * (as libpq reads PGUSER); unset there too, or identity "": wire v1
	 * without authentication, for clusters run with client_auth = off. */
	const char *identity;
	const char *key_file;
	/* Lock loss (docs/CLIENT.md "Lock loss"): when set, every lock this
	 * client acquires is watched until it is released through it, and
	 * lock_lost_fn is called once when its validity can no longer be
	 * guaranteed, lock_lost_margin_ms before that validity ends (default
	 * 100). Up to HASP_CLIENT_KEPT_MAX locks are watched at once. */
	hasp_client_lock_lost_fn *lock_lost_fn;
	void *lock_lost_arg;
	uint32_t lock_lost_margin_ms;
};

/* A held lock, filled by hasp_client_acquire; the caller owns it. */
struct hasp_lock {
	char name[HASP_CLIENT_NAME_BUF];
	uint64_t token;    /* fencing token: pass it to every guarded resource */
	uint64_t lease_id; /* non-zero: the lock lives on this lease */
	uint32_t ttl_ms;
	/* Conservative local deadline for a lock with its own TTL: the SEND
	 * time of the first transmission of the granting request + ttl - drift
	 * margin. Read hasp_client_lock_valid_until(), which also follows the
	 * lease of a lease lock. */
	uint64_t valid_until_ns;
};

struct hasp_acquire_opts {
	uint32_t ttl_ms;   /* the lock's own TTL (10 ms .. 1 day) when lease_id is 0 */
	uint64_t lease_id; /* non-zero: put the lock on this lease (ttl_ms must be 0) */
	bool wait;         /* join the FIFO queue instead of answering BUSY */
	uint32_t wait_timeout_ms; /* wait mode only: 0 waits without limit */
	/* Renew the lock's own TTL while it is held (Redisson's watchdog):
	 * RENEW at every third of the TTL, by whoever runs the keepalive (its
	 * helper thread, hasp_client_keepalive, or the hasp_client_process
	 * loop), until it is released through this client or lost. A lease
	 * lock follows its lease instead. */
	bool auto_renew;
};

struct hasp_lock_info { /* LOCK_READ */
	uint64_t holder_session_id;
	uint64_t token;
	uint64_t lease_id;
	uint32_t ttl_remaining_ms;
	uint32_t waiter_count;
	bool ours; /* held by this client's current session */
};

struct hasp_lease {
	uint64_t lease_id;
	uint32_t ttl_ms;
	uint64_t valid_until_ns; /* send time of the granting request + ttl - drift */
};

struct hasp_kv_value {
	uint64_t revision; /* of the key's last change */
	uint64_t lease_id;
	size_t value_size;
	uint8_t value[HASP_CLIENT_VALUE_MAX]; /* value_size bytes; the rest unspecified */
};

struct hasp_kv_cas {
	bool compare_value;         /* compare the value, else the revision */
	uint64_t expected_revision; /* 0: the key must not exist */
	const void *expected_value; /* compare_value only */
	size_t expected_value_size;
	const void *value; /* the new value */
	size_t value_size;
	uint64_t lease_id; /* of the new value; 0: none */
};

/* One KV_RANGE entry, valid during the callback only. key is NUL-terminated. */
struct hasp_kv_entry {
	const char *key;
	const uint8_t *value;
	size_t value_size;
	uint64_t revision;
};

/* Returns 0 to continue, anything else to stop the range early. */
typedef int hasp_client_range_fn(const struct hasp_kv_entry *entry, void *arg);

/* The outcome of an asynchronous call (hasp_client_*_async), handed to its
 * completion callback and valid during the call only. rc is exactly what
 * the blocking call returns; the member its op fills is named. */
struct hasp_result {
	uint64_t id; /* as the starting call returned it */
	uint8_t op;  /* enum hasp_op of the call: ACQUIRE, RELEASE, ... */
	int rc;      /* 0 or -HASP_E* */
	struct hasp_lock lock;      /* ACQUIRE (-HASP_EBUSY: token is the holder's), RENEW */
	struct hasp_lock_info info; /* LOCK_READ */
	struct hasp_lease lease;    /* LEASE_GRANT, LEASE_KEEPALIVE */
	uint64_t revision;          /* KV_PUT, KV_DELETE, KV_CAS */
	struct hasp_kv_value value; /* KV_GET */
};

/* A completion callback: runs on the thread in hasp_client_process(),
 * without the client's lock; it may start more calls (async or blocking)
 * but must not close the client. */
typedef void hasp_client_done_fn(struct hasp_client *client, const struct hasp_result *res,
				 void *arg);

/* Counters: nothing is logged per datagram. */
struct hasp_client_stats {
	uint64_t tx_requests;       /* first transmissions */
	uint64_t tx_retransmits;    /* same seq sent again (timeout or redirect) */
	uint64_t rx_replies;        /* replies matched to a waiting request */
	uint64_t rx_duplicates;     /* replies to a request already answered */
	uint64_t rx_late;           /* replies to a request given up on */
	uint64_t rx_stray;          /* another session, or a seq never sent */
	uint64_t rx_malformed;      /* refused by hasp_wire_decode_reply, or another version */
	uint64_t rx_auth_bad;       /* authentication tag missing or wrong: dropped */
	uint64_t rx_unknown_source; /* not from a cluster address */
	uint64_t redirects;         /* NOT_LEADER answers */
	uint64_t timeouts;          /* requests that hit their deadline */
	uint64_t session_opens;     /* sessions opened (1 + reopens) */
	uint64_t events;            /* events received */
	uint64_t events_dropped;    /* event buffer full (or out of memory for it) */
	uint64_t events_gaps;       /* breaks in the event chain (lost events): RESYNCs */
	uint64_t wait_rechecks;     /* LOCK_READs sent while queued */
	uint64_t wait_cancels;      /* CANCELs sent for WAITs given up */
	uint64_t wait_grants_released; /* grants that came as a WAIT was given up, released */
	uint64_t lock_renews;       /* automatic RENEWs sent (auto_renew) */
	uint64_t lock_checks;       /* CHECKs of watched locks after a gap or session expiry */
	uint64_t locks_lost;        /* lock_lost_fn calls */
	uint64_t locks_unwatched;   /* acquired while the watch table was full: not watched */
};

/* Fills `cfg` with the defaults above and no cluster. */
void hasp_client_config_default(struct hasp_client_config *cfg);

/* Allocates a client, parses cfg->cluster and opens a UDP socket. No
 * datagram is sent. Returns 0, -HASP_ECONFIG (bad cluster list or option),
 * -HASP_ENOMEM or -HASP_ESYS. The caller keeps cfg. */
int hasp_client_open(struct hasp_client **client, const struct hasp_client_config *cfg)
	__attribute__((warn_unused_result));

/* Stops the keepalive thread, sends SESSION_CLOSE once without waiting long
 * (best effort) and frees the client. Locks with their own TTL or on a lease
 * stay held until they expire or are released with their token. */
void hasp_client_close(struct hasp_client *client);

/* Changes the overall deadline of each later call (cfg.deadline_ms), e.g.
 * to bound a renew by the lock's remaining validity. 0 is refused
 * (-HASP_EINVAL). */
int hasp_client_set_deadline(struct hasp_client *client, uint32_t deadline_ms)
	__attribute__((warn_unused_result));

/* Opens the session now (otherwise the first request does). 0 or -HASP_E*. */
int hasp_client_connect(struct hasp_client *client) __attribute__((warn_unused_result));
/* The current session id, 0 when none is open. */
uint64_t hasp_client_session_id(struct hasp_client *client);
void hasp_client_stats_get(struct hasp_client *client, struct hasp_client_stats *stats);

/* ---- locks ---- */

/* 0: granted, `lock` filled. -HASP_EBUSY (TRY mode): held by another,
 * lock->token is the holder's token. In WAIT mode the call returns 0 when
 * the grant arrives (LOCK_GRANTED event, or seen by the periodic LOCK_READ)
 * or -HASP_ETIMEDOUT after wait_timeout_ms. A WAIT given up is cancelled on the
 * cluster (CANCEL; a grant that arrived meanwhile is released) before the
 * call returns, within one more deadline (docs/CLIENT.md). A WAIT cancelled
 * from another thread (hasp_client_cancel_wait) returns -HASP_ECANCELED the
 * same way. */
int hasp_client_acquire(struct hasp_client *client, const char *name,
			const struct hasp_acquire_opts *opts, struct hasp_lock *lock)
	__attribute__((warn_unused_result));
/* 0: released; -HASP_ENOTHOLDER: `token` does not hold it (any more). */
int hasp_client_release(struct hasp_client *client, const char *name, uint64_t token)
	__attribute__((warn_unused_result));
/* 0 (renewed) or -HASP_ENOTHOLDER. `ttl_ms` 0 keeps the lock's current TTL. When
 * `lock` is not NULL its TTL and validity deadline are refreshed from
 * this renew's send time and the TTL the node answered. */
int hasp_client_renew(struct hasp_client *client, const char *name, uint64_t token,
		      uint32_t ttl_ms, struct hasp_lock *lock) __attribute__((warn_unused_result));
/* 0 when `token` is the current holder's, else -HASP_ENOTHOLDER. */
int hasp_client_check(struct hasp_client *client, const char *name, uint64_t token)
	__attribute__((warn_unused_result));
/* 0 (info filled) or -HASP_ENOENT (the lock is free). */
int hasp_client_lock_read(struct hasp_client *client, const char *name,
			  struct hasp_lock_info *info) __attribute__((warn_unused_result));

/* The conservative monotonic deadline (ns) until which `lock` is ours: its
 * own valid_until_ns (or the later one its automatic renewals reached), or
 * for a lease lock the lease's current deadline as
 * kept by this client (0 when this client does not know the lease). */
uint64_t hasp_client_lock_valid_until(struct hasp_client *client, const struct hasp_lock *lock)
	__attribute__((warn_unused_result));
/* True when the lock is still valid `work_ms` from now: act on the guarded
 * resource only then, and still fence the act with lock->token. */
bool hasp_client_lock_safe(struct hasp_client *client, const struct hasp_lock *lock,
			   uint32_t work_ms) __attribute__((warn_unused_result));

/* ---- leases ---- */

/* 0: `lease` filled (may be NULL) and kept alive by hasp_client_keepalive. */
int hasp_client_lease_grant(struct hasp_client *client, uint32_t ttl_ms,
			    struct hasp_lease *lease) __attribute__((warn_unused_result));
/* 0 (lease may be NULL) or -HASP_ELEASE / -HASP_ENOENT (gone: forgotten).
 * Also works on a lease this client did not grant (it is not kept alive
 * for it afterwards: only a grant puts a lease on the keepalive list, and
 * an answer arriving after a revoke does not put it back). */
int hasp_client_lease_keepalive(struct hasp_client *client, uint64_t lease_id,
				struct hasp_lease *lease) __attribute__((warn_unused_result));
/* 0 or -HASP_E*; the lease is forgotten either way. */
int hasp_client_lease_revoke(struct hasp_client *client, uint64_t lease_id)
	__attribute__((warn_unused_result));

/* Sends what is due: SESSION_KEEPALIVE when a third of the session TTL
 * passed since the last answered request, LEASE_KEEPALIVE for each lease
 * granted by this client when a third of its TTL passed. Returns 0 or the
 * first -HASP_E* (a lease answered LEASE_EXPIRED is dropped and counted as
 * 0). Call it at least every ttl/6, or start the helper thread. */
int hasp_client_keepalive(struct hasp_client *client) __attribute__((warn_unused_result));
/* Starts a thread that calls hasp_client_keepalive on time until
 * hasp_client_keepalive_stop or close. Returns 0, -HASP_ESTATE (already
 * running) or -HASP_ESYS. */
int hasp_client_keepalive_start(struct hasp_client *client) __attribute__((warn_unused_result));
void hasp_client_keepalive_stop(struct hasp_client *client);

/* ---- watches and events ---- */

/* 0 or -HASP_E*. Watches are re-sent when a new session opens. */
int hasp_client_watch(struct hasp_client *client, const char *name, bool prefix)
	__attribute__((warn_unused_result));
/* 0 or -HASP_ENOENT. */
int hasp_client_unwatch(struct hasp_client *client, const char *name, bool prefix)
	__attribute__((warn_unused_result));
/* Asks the leader now what the keepalive asks after each answer while the
 * client watches (etcd's RequestProgress): does it still hold this
 * session's watches, and which event did it send the session last? Events
 * are not acknowledged, and a lost event shows in the next one's chain,
 * so the last of a burst, lost, shows only here. Lost watches are
 * registered again, and an event that was sent but not received becomes
 * a RESYNC (hasp_client_next_event), queued before this returns (before
 * the callback runs). Returns 0 when the leader answered, or -HASP_E*
 * (-HASP_ESESSION: no session; -HASP_EOPCODE: the leader is older than the
 * question, and later calls only ask it how many watches it holds). Call
 * it when the application must know that it has seen everything up to
 * now, e.g. after the last change it expects. Since libhasp 1.4. */
int hasp_client_watch_progress(struct hasp_client *client) __attribute__((warn_unused_result));
/* Takes the next pushed event, waiting up to timeout_ms (0: do not wait).
 * Returns 0 (ev filled), -HASP_ETIMEDOUT or -HASP_ESYS. */
int hasp_client_next_event(struct hasp_client *client, struct hasp_event *ev,
			   uint32_t timeout_ms) __attribute__((warn_unused_result));
/* Waits up to timeout_ms for events and passes each buffered one to
 * cfg->event_fn on this thread; *delivered (may be NULL) is their count,
 * 0 when none came in time. Returns 0, or -HASP_EINVAL when no event_fn
 * was configured. */
int hasp_client_poll(struct hasp_client *client, uint32_t timeout_ms, uint32_t *delivered)
	__attribute__((warn_unused_result));

/* ---- the asynchronous core ----
 *
 * Each *_async call checks its arguments (the same -HASP_E* as the
 * blocking call, nothing started then), starts the operation and returns
 * 0 at once with its id in *id (may be NULL). The operation completes
 * through `fn`, called from hasp_client_process() with a struct
 * hasp_result whose rc is what the blocking call would have returned. The
 * application's loop drives everything:
 *
 *     int fd = hasp_client_fd(c);          // poll it for POLLIN
 *     for (;;) {
 *         poll(&(struct pollfd){ fd, POLLIN }, 1, hasp_client_timeout_ms(c));
 *         hasp_client_process(c, NULL);    // sends, retransmits, completes
 *     }
 *
 * One client holds up to 32 requests in flight at once (the session's
 * window; more wait for a slot); one thread may drive any number of
 * clients, each with its own session. Blocking calls may be made on the
 * same client from other threads meanwhile. The loop also runs the
 * keepalives (hasp_client_keepalive) when hasp_client_keepalive_start was
 * not called. */

/* The file descriptor to wait on for POLLIN (an epoll set of the socket
 * and a wake-up eventfd; the client owns and closes it). >= 0, or
 * -HASP_ESYS. Thread-safe. */
int hasp_client_fd(struct hasp_client *client) __attribute__((warn_unused_result));
/* Milliseconds until hasp_client_process must run even without POLLIN
 * (a retransmission, a recheck, a deadline): 0 now, -1 when nothing
 * asynchronous is in progress (wait on the fd alone). Thread-safe. */
int hasp_client_timeout_ms(struct hasp_client *client) __attribute__((warn_unused_result));
/* Reads what arrived, moves every asynchronous operation on, and calls the
 * callbacks of those that ended (*completed, may be NULL, counts them).
 * Never waits for the network. Returns 0 or -HASP_EINVAL. Call it from one
 * thread at a time per client. */
int hasp_client_process(struct hasp_client *client, uint32_t *completed)
	__attribute__((warn_unused_result));
/* Stops the asynchronous operation `id`: it completes with -HASP_ECANCELED
 * through its callback at the next hasp_client_process. A WAIT acquire
 * first removes its queue entry on the cluster (CANCEL; a grant that came
 * meanwhile is released); one whose grant arrived before the cancel
 * completes with 0 and the lock is the caller's. Any other request stops at
 * once, its outcome unknown (as after -HASP_ETIMEDOUT), unless its answer
 * was received before the cancel: then it completes with that answer (a
 * TRY acquire granted is the caller's lock). Returns 0, or
 * -HASP_ENOENT (no such operation in progress). Thread-safe. */
int hasp_client_cancel(struct hasp_client *client, uint64_t id)
	__attribute__((warn_unused_result));
/* Cancels every WAIT acquire of `name` in progress on this client,
 * blocking (the hasp_client_acquire call returns -HASP_ECANCELED) or
 * asynchronous, as hasp_client_cancel does. Call it from any thread.
 * Returns 0 or -HASP_ENOENT (none waits). */
int hasp_client_cancel_wait(struct hasp_client *client, const char *name)
	__attribute__((warn_unused_result));

int hasp_client_acquire_async(struct hasp_client *client, const char *name,
			      const struct hasp_acquire_opts *opts, hasp_client_done_fn *fn,
			      void *arg, uint64_t *id) __attribute__((warn_unused_result));
int hasp_client_release_async(struct hasp_client *client, const char *name, uint64_t token,
			      hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
/* res->lock carries the new ttl_ms and valid_until_ns (name and token too). */
int hasp_client_renew_async(struct hasp_client *client, const char *name, uint64_t token,
			    uint32_t ttl_ms, hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
int hasp_client_check_async(struct hasp_client *client, const char *name, uint64_t token,
			    hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
int hasp_client_lock_read_async(struct hasp_client *client, const char *name,
				hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
int hasp_client_lease_grant_async(struct hasp_client *client, uint32_t ttl_ms,
				  hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
int hasp_client_lease_keepalive_async(struct hasp_client *client, uint64_t lease_id,
				      hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
int hasp_client_lease_revoke_async(struct hasp_client *client, uint64_t lease_id,
				   hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
/* Sends one SESSION_KEEPALIVE of the session now, whatever the schedule
 * (the loop, the helper thread or hasp_client_keepalive keep the session
 * on their own; this is for an application that wants to know now that
 * its session lives, and for load generators). res->op is
 * HASP_OP_SESSION_KEEPALIVE; rc 0, or -HASP_ESESSION when the session had
 * expired (the next call opens another). No session yet: one is opened
 * first. Since libhasp 1.3. */
int hasp_client_session_keepalive_async(struct hasp_client *client, hasp_client_done_fn *fn,
					void *arg, uint64_t *id) __attribute__((warn_unused_result));
/* Ends the session and waits for the cluster to say so, without blocking:
 * SESSION_CLOSE, resent like any request until answered or the deadline
 * (cfg.deadline_ms). The cluster then releases the session's locks (those
 * with their own TTL or on a lease stay, as after hasp_client_close),
 * removes its waits and watches. res->op is HASP_OP_SESSION_CLOSE; rc 0
 * (closed), -HASP_ESESSION (it had ended already, or none was open: none is
 * opened to be closed) or -HASP_ETIMEDOUT (unanswered: it ends at its
 * TTL). From the call on, the client is closing: every later call, a second
 * close too, returns -HASP_ESTATE and no session opens; calls already in
 * progress complete (those the cluster answers after the close with
 * -HASP_ESESSION). Free it with hasp_client_close, which sends nothing more
 * once the session is closed. The form for a grouped client, whose
 * hasp_client_close cannot wait; on a client of its own it equals
 * hasp_client_close's wait without blocking the thread. Since libhasp 1.7. */
int hasp_client_close_async(struct hasp_client *client, hasp_client_done_fn *fn, void *arg,
			    uint64_t *id) __attribute__((warn_unused_result));
/* hasp_client_watch_progress: res->op is HASP_OP_WATCH_STATUS
 * (HASP_OP_WATCH_COUNT from a node older than the opcode, which cannot
 * tell a lost last event), rc 0 when answered. Since libhasp 1.4. */
int hasp_client_watch_progress_async(struct hasp_client *client, hasp_client_done_fn *fn,
				     void *arg, uint64_t *id) __attribute__((warn_unused_result));
/* Opens the session (hasp_client_connect): res->op is HASP_OP_SESSION_OPEN,
 * rc 0 once it is open (hasp_client_session_id names it). A cancel ends the
 * call, not an open under way. */
int hasp_client_connect_async(struct hasp_client *client, hasp_client_done_fn *fn, void *arg,
			      uint64_t *id) __attribute__((warn_unused_result));
/* hasp_client_watch / hasp_client_unwatch: the watch is in the client's
 * table from the call on (events may overtake the OK), and leaves it if
 * the WATCH fails; an UNWATCH removes it at once. res->lock.name names it. */
int hasp_client_watch_async(struct hasp_client *client, const char *name, bool prefix,
			    hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
int hasp_client_unwatch_async(struct hasp_client *client, const char *name, bool prefix,
			      hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
/* hasp_client_kv_range: `range_fn` gets each entry (valid during its call
 * only) from hasp_client_process, page by page, without the client's lock;
 * then `fn` ends the walk (rc 0 also when range_fn stopped it). One
 * deadline bounds the whole walk. */
int hasp_client_kv_range_async(struct hasp_client *client, const char *prefix, uint32_t limit,
			       hasp_client_range_fn *range_fn, void *range_arg,
			       hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
/* The value and expected value are copied: the caller's buffers may go at
 * once. */
int hasp_client_kv_put_async(struct hasp_client *client, const char *key, const void *value,
			     size_t value_size, uint64_t lease_id, hasp_client_done_fn *fn,
			     void *arg, uint64_t *id) __attribute__((warn_unused_result));
int hasp_client_kv_get_async(struct hasp_client *client, const char *key,
			     hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
int hasp_client_kv_delete_async(struct hasp_client *client, const char *key,
				hasp_client_done_fn *fn, void *arg, uint64_t *id)
	__attribute__((warn_unused_result));
int hasp_client_kv_cas_async(struct hasp_client *client, const char *key,
			     const struct hasp_kv_cas *cas, hasp_client_done_fn *fn, void *arg,
			     uint64_t *id) __attribute__((warn_unused_result));

/* ---- client groups (libhasp 1.2) ----
 *
 * Many clients on one UDP socket and one loop (docs/CLIENT.md "Client
 * groups"): clients opened into a group send and receive through the
 * group's socket, and the group's fd / timeout / process drive them all.
 * One hasp_client_group_process reads what arrived in recvmmsg(2)
 * batches, hands each datagram to the client whose session it names (a
 * SESSION_OPEN reply by its sequence number, unique in the group; where
 * clients of different clusters hold the same session id, to the one
 * whose cluster sent it), moves
 * the clients that got something or whose timers ran out, and sends what
 * they sent in one sendmmsg(2). A datagram that names no client of the
 * group is dropped and counted (rx_unrouted), never handed to another.
 * The members share the leader: a new one that answers any member is
 * where the others send next, and the members with watches register them
 * there at once (then a RESYNC event), not at their own next request.
 *
 * A grouped client has the whole asynchronous API (*_async, cancel,
 * hasp_client_timeout_ms, hasp_client_next_event and hasp_client_poll
 * with timeout 0, stats). What would read the socket itself is refused
 * with -HASP_EINVAL: every blocking call (hasp_client_acquire,
 * hasp_client_connect, hasp_client_kv_get, hasp_client_keepalive, ...),
 * hasp_client_next_event / hasp_client_poll with a timeout above 0,
 * hasp_client_fd and hasp_client_process (use the group's);
 * hasp_client_keepalive_start returns -HASP_ESTATE (the group's loop keeps
 * the sessions). hasp_client_close sends SESSION_CLOSE once and does not
 * wait for its answer (the session ends at its TTL if it is lost);
 * hasp_client_close_async first waits for it through the loop.
 *
 * Threads: one thread drives a group: hasp_client_group_process,
 * hasp_client_open_in_group, hasp_client_close of its clients and
 * hasp_client_group_free are called on it (not from callbacks), and
 * hasp_client_group_timeout_ms and hasp_client_group_stats_get too. The
 * *_async calls, cancels, stats and session ids of its clients may come
 * from any thread, as on a client of its own. */
struct hasp_client_group; /* opaque */

struct hasp_client_group_stats {
	uint64_t rx_datagrams; /* read off the group's socket */
	uint64_t rx_unrouted;  /* naming no client of the group: dropped */
	uint64_t rx_batches;   /* recvmmsg(2) calls that returned datagrams */
	uint64_t tx_datagrams; /* sent through the group's socket */
	uint64_t tx_batches;   /* sendmmsg(2) and sendto(2) calls */
};

/* The window a new group starts with: requests of its clients in flight
 * together (hasp_client_group_set_window). */
#define HASP_CLIENT_GROUP_WINDOW_DEFAULT 1024u

/* A group with its UDP socket, wake-up eventfd and epoll set. 0,
 * -HASP_EINVAL, -HASP_ENOMEM or -HASP_ESYS. */
int hasp_client_group_new(struct hasp_client_group **group) __attribute__((warn_unused_result));
/* Frees the group; every client opened into it must be closed first. */
void hasp_client_group_free(struct hasp_client_group *group);
/* hasp_client_open, the client on the group's socket. Returns what
 * hasp_client_open returns, or -HASP_EINVAL (group NULL). */
int hasp_client_open_in_group(struct hasp_client **client, const struct hasp_client_config *cfg,
			      struct hasp_client_group *group) __attribute__((warn_unused_result));
/* The fd to wait on for POLLIN (an epoll set of the socket and the
 * eventfd that *_async calls and cancels write; the group owns it). */
int hasp_client_group_fd(struct hasp_client_group *group) __attribute__((warn_unused_result));
/* Milliseconds until hasp_client_group_process must run without POLLIN:
 * 0 now, -1 when no client of the group has anything in progress. */
int hasp_client_group_timeout_ms(struct hasp_client_group *group)
	__attribute__((warn_unused_result));
/* hasp_client_process for every client of the group (see above); never
 * waits for the network. *completed (may be NULL) counts the callbacks
 * run. Returns 0 or -HASP_EINVAL. */
int hasp_client_group_process(struct hasp_client_group *group, uint32_t *completed)
	__attribute__((warn_unused_result));
void hasp_client_group_stats_get(struct hasp_client_group *group,
				 struct hasp_client_group_stats *stats);
/* At most `requests` requests of the group's clients in flight together
 * (0: no bound; HASP_CLIENT_GROUP_WINDOW_DEFAULT at first). A request
 * holds a place from its first transmission (a SESSION_OPEN, which a
 * client's first request starts, holds one too) until it ends, however it
 * ends; its retransmissions take none. A request that finds the window
 * full waits, in the order they came, and still ends at its deadline.
 * Thousands of clients that start at once otherwise send thousands of
 * datagrams at once: the answers overflow the group's socket and every
 * client retransmits (docs/CLIENT.md, "Client groups"). Any thread; takes
 * effect at once (a larger window wakes the waiters). 0 or -HASP_EINVAL.
 * libhasp 1.5. */
int hasp_client_group_set_window(struct hasp_client_group *group, uint32_t requests);

/* ---- a group on the application's own datagrams (libhasp 1.6) ----
 *
 * For an application that moves its datagrams itself (a DPDK or other
 * user-space network stack, a simulator): the group has no socket. The
 * application hands it every datagram it receives from the cluster's
 * nodes (hasp_client_group_input) and sends what the group gives its
 * send function, as UDP from one address and port to the nodes' (the
 * nodes answer the address a request came from). All else is as on a
 * group with its own socket: the same routing, checks (source, version,
 * tag), window, leader sharing and API; hasp_client_group_process runs
 * the clients whose datagrams came or whose timers ran out and sends
 * what they send; hasp_client_group_fd is the eventfd's epoll set alone
 * (POLLIN: an *_async call or a cancel from another thread), and
 * hasp_client_group_timeout_ms says when process must run again. The
 * stats count each datagram handed in as one rx_batches, and each call
 * of the send function as one tx_batches (tx_datagrams: those it took). */
struct hasp_client_group_io {
	/* Sends one datagram of `size` bytes to `to` (network byte order),
	 * on the loop thread, from hasp_client_group_process or
	 * hasp_client_close. Returns 0 when it took the datagram; anything
	 * else loses it, as a full socket would (its request's timer resends
	 * it). The data is only valid during the call. */
	int (*send)(void *arg, const struct sockaddr_in *to, const void *data, size_t size);
	void *arg;
};

/* A group on the application's datagrams (io is copied; io->send
 * required). 0, -HASP_EINVAL, -HASP_ENOMEM or -HASP_ESYS (the eventfd). */
int hasp_client_group_new_io(struct hasp_client_group **group, const struct hasp_client_group_io *io)
	__attribute__((warn_unused_result));
/* One datagram the application received from `from` (a node's address
 * and port): handed at once to the client it names, or dropped and
 * counted (rx_unrouted). The client copies what it keeps; its follow-up
 * (callbacks, the next request) runs in the next
 * hasp_client_group_process. On the loop thread, not from a callback. 0,
 * -HASP_EINVAL, or -HASP_ESTATE for a group with its own socket. */
int hasp_client_group_input(struct hasp_client_group *group, const void *data, size_t size,
			    const struct sockaddr_in *from) __attribute__((warn_unused_result));

/* ---- KV ---- */

/* 0 (*revision set when not NULL) or -HASP_E*. */
int hasp_client_kv_put(struct hasp_client *client, const char *key, const void *value,
		       size_t value_size, uint64_t lease_id, uint64_t *revision)
	__attribute__((warn_unused_result));
/* 0 (out filled) or -HASP_ENOENT. */
int hasp_client_kv_get(struct hasp_client *client, const char *key, struct hasp_kv_value *out)
	__attribute__((warn_unused_result));
/* 0 or -HASP_ENOENT. */
int hasp_client_kv_delete(struct hasp_client *client, const char *key, uint64_t *revision)
	__attribute__((warn_unused_result));
/* 0 or -HASP_ECOMPARE; either way *revision (when not NULL) is the key's
 * revision after the call (0: absent). */
int hasp_client_kv_cas(struct hasp_client *client, const char *key,
		       const struct hasp_kv_cas *cas, uint64_t *revision)
	__attribute__((warn_unused_result));
/* Calls fn for each key with `prefix` ("" or NULL: every key) in key order,
 * at most `limit` of them (0: all), following the MORE flag across
 * datagrams with start-after = the last key received. Returns 0 when done
 * (or stopped by fn) or -HASP_E*. */
int hasp_client_kv_range(struct hasp_client *client, const char *prefix, uint32_t limit,
			 hasp_client_range_fn *fn, void *arg) __attribute__((warn_unused_result));

#endif
