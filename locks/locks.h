/*
 * The replicated lock state machine of hasp: locks with fencing tokens, FIFO
 * waiter queues, leases (private per lock, or shared etcd-style), a KV store
 * with revisions, and client sessions with exactly-once replies.
 *
 * It is a pure step function (docs/STYLE.md §1): locks_apply() takes one committed
 * command at a log index and fills a caller-owned result (the reply and the
 * events for the watch layer). It never reads a clock, does no I/O, never
 * logs and never allocates after locks_init(); time arrives inside each
 * command as (leader term, leader monotonic ms) and becomes "log time"
 * (docs/STATE_MACHINE.md, "Lease time"). Replicas that apply the same
 * commands reach byte-identical snapshots and give identical replies.
 *
 * Expiry is never decided here on our own: the leader asks the queries below
 * which leases and sessions are due, proposes EXPIRE / SESSION_EXPIRE, and
 * apply re-checks the deadline in log time (a keepalive committed in between
 * wins and the EXPIRE becomes a no-op).
 *
 * Ownership: the caller owns `struct locks` (init in place), every command
 * and the bytes its name/value point at (apply copies what it keeps), and the
 * result's event array, which must hold locks_events_max() events. Pointers
 * returned by queries point into the state machine and stay valid until the
 * next apply, restore or deinit.
 *
 * Not thread-safe: one thread applies and queries. A struct locks must not
 * be moved or copied after locks_init() (its tables call back into it).
 */
#ifndef HASP_LOCKS_LOCKS_H
#define HASP_LOCKS_LOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "hasp/types.h"
#include "locks/arena.h"
#include "locks/dheap.h"
#include "locks/dirty.h"
#include "locks/hindex.h"
#include "locks/slots.h"

#define LOCKS_NONE UINT32_MAX
#define LOCKS_DEADLINE_NONE UINT64_MAX

/* Commands. Client commands reuse the wire opcodes of hasp/types.h; the
 * leader's and the operator's commands are numbered above them. */
enum locks_op {
	LOCKS_OP_SESSION_OPEN = HASP_OP_SESSION_OPEN,
	LOCKS_OP_SESSION_KEEPALIVE = HASP_OP_SESSION_KEEPALIVE,
	LOCKS_OP_SESSION_CLOSE = HASP_OP_SESSION_CLOSE,
	LOCKS_OP_LEASE_GRANT = HASP_OP_LEASE_GRANT,
	LOCKS_OP_LEASE_KEEPALIVE = HASP_OP_LEASE_KEEPALIVE,
	LOCKS_OP_LEASE_REVOKE = HASP_OP_LEASE_REVOKE,
	LOCKS_OP_ACQUIRE = HASP_OP_ACQUIRE,
	LOCKS_OP_RELEASE = HASP_OP_RELEASE,
	LOCKS_OP_RENEW = HASP_OP_RENEW,
	LOCKS_OP_CANCEL = HASP_OP_CANCEL,
	LOCKS_OP_KV_PUT = HASP_OP_KV_PUT,
	LOCKS_OP_KV_DELETE = HASP_OP_KV_DELETE,
	LOCKS_OP_KV_CAS = HASP_OP_KV_CAS,
	LOCKS_OP_TICK = 64,           /* leader: carries time only */
	LOCKS_OP_LEASE_EXPIRE = 65,   /* leader: lease_id is past its deadline */
	LOCKS_OP_SESSION_EXPIRE = 66, /* leader: session_id is idle past its deadline */
	LOCKS_OP_FORCE_RELEASE = 67,  /* operator: release `name` whoever holds it */
};

/* Finer detail behind a status, for clients, counters and tests. */
enum locks_reason {
	LOCKS_REASON_NONE = 0,
	LOCKS_REASON_SEQ_TOO_OLD = 1,     /* seq fell out of the session's reply window */
	LOCKS_REASON_SEQ_INVALID = 2,     /* seq 0 */
	LOCKS_REASON_NO_LOCK = 3,         /* the lock is not held by anyone */
	LOCKS_REASON_TOKEN_MISMATCH = 4,  /* held, but this is not the current token */
	LOCKS_REASON_SELF_HELD = 5,       /* this session already holds the lock */
	LOCKS_REASON_ALREADY_QUEUED = 6,  /* this session already waits for the lock */
	LOCKS_REASON_PRIVATE_LEASE = 7,   /* a lock's own TTL lease is not addressable */
	LOCKS_REASON_NOT_DUE = 8,         /* expiry re-check: deadline not reached */
	LOCKS_REASON_LOCKS_FULL = 9,
	LOCKS_REASON_LEASES_FULL = 10,
	LOCKS_REASON_SESSIONS_FULL = 11,
	LOCKS_REASON_WAITERS_FULL = 12,
	LOCKS_REASON_NAMES_FULL = 13,     /* lock name bytes */
	LOCKS_REASON_KV_FULL = 14,        /* KV entries */
	LOCKS_REASON_KV_BYTES_FULL = 15,
	LOCKS_REASON_LEASE_ITEMS_FULL = 16, /* locks_per_lease_max or keys_per_lease_max */
	LOCKS_REASON_SESSION_LOCKS_FULL = 17, /* locks_per_session_max */
	LOCKS_REASON_BAD_FIELDS = 18,     /* fields inconsistent with the opcode */
	LOCKS_REASON_STALE_TERM = 19,     /* command from a term older than one applied */
	LOCKS_REASON_QUEUED_OTHER_LEASE = 20, /* re-issued WAIT names another lease than its entry */
	LOCKS_REASON_KV_MISSING = 21,     /* CAS: the key does not exist */
	LOCKS_REASON_KV_MISMATCH = 22,    /* CAS: the key exists, its revision/value differs */
	LOCKS_REASON_NOT_OWNER = 23,      /* right token, but neither the holder's session
					   * nor (where allowed) its identity */
	LOCKS_REASON_REQUEST_MISMATCH = 24, /* a seq reused with different request bytes */
	LOCKS_REASON_SEQ_JUMP = 25,       /* seq too far ahead of the session's highest */
	LOCKS_REASON_NONCE_IN_USE = 26,   /* open nonce of a live session of another owner */
	LOCKS_REASON_OWNER_SESSIONS_FULL = 27, /* the owner's session quota */
};
#define LOCKS_REASON_COUNT 28u

/* The reason's name for counters and logs ("seq_jump"), "unknown" outside
 * the enum. */
const char *locks_reason_name(uint32_t reason);

/* One command. Fields an opcode does not use must be zero (the codec
 * enforces it; apply answers BAD_REQUEST otherwise). */
struct locks_cmd {
	uint8_t op;          /* enum locks_op */
	uint8_t mode;        /* ACQUIRE: enum hasp_acquire_mode */
	uint32_t ttl_ms;     /* SESSION_OPEN, LEASE_GRANT, ACQUIRE with own TTL, RENEW */
	uint64_t term;       /* proposing leader's term */
	uint64_t now_ms;     /* proposing leader's monotonic clock */
	uint64_t session_id; /* client commands; SESSION_EXPIRE target */
	uint64_t seq;        /* client commands: 1, 2, 3... per session */
	uint64_t lease_id;   /* ACQUIRE on a shared lease, LEASE_*, KV_PUT/CAS attach */
	uint64_t token;      /* RELEASE, RENEW: fencing token; KV_CAS: expected mod revision */
	uint64_t nonce;      /* SESSION_OPEN: client nonce (a retried open gets the same
			      * session while it lives); 0: no deduplication */
	const uint8_t *name; /* lock name or KV key; caller-owned */
	const uint8_t *value; /* KV value; caller-owned */
	uint16_t name_len;
	uint16_t value_len;
	/* KV_CAS only: LOCKS_CMD_CAS_VALUE compares the key's value with
	 * `expect` (and token must be 0); without it expect_len is 0. */
	uint8_t flags;
	uint16_t expect_len;
	const uint8_t *expect; /* caller-owned */
	/* Client commands: a digest of the request as sent (its MAC tag, or a
	 * checksum in insecure mode); a retransmission must carry the same
	 * one to get the cached reply. 0: not checked (older entries). */
	uint64_t digest;
	/* SESSION_OPEN: the identity that opens (0: none, older entries), the
	 * identity's session quota (0: no quota) and, in flags,
	 * LOCKS_CMD_OWNER_RELEASE. Chosen by the node, replicated. */
	uint64_t owner;
	uint32_t owner_sessions_max;
};

/* How far ahead of the session's highest applied seq a request may be.
 * Reads take sequence numbers too and never apply, so the gap between
 * two mutations is legitimately large; the bound only keeps one datagram
 * from moving seq_max to the end of the number space. */
#define LOCKS_SEQ_JUMP_MAX (1ull << 24)

#define LOCKS_CMD_CAS_VALUE 0x01u
/* SESSION_OPEN: the session may release and renew locks that another
 * session of the same owner acquired. */
#define LOCKS_CMD_OWNER_RELEASE 0x02u
/* Client commands: the client will send no lower seq of this session again
 * (it holds their replies or gave them up; the wire header's
 * HASP_WIRE_F_SEQ_FLOOR). The session drops the cached replies below this
 * seq and refuses those seqs from then on, so an idle session keeps one
 * reply instead of its window's worth (docs/PROTOCOL.md, "Exactly once"). */
#define LOCKS_CMD_SEQ_FLOOR 0x04u

/* The reply to one command; memcmp-comparable (all padding zero), which is
 * what "a duplicate returns the identical reply" is checked with. */
struct locks_reply {
	uint8_t status;       /* enum hasp_status */
	uint8_t reason;       /* enum locks_reason */
	uint16_t reserved;
	uint32_t position;    /* QUEUED: 1-based place in the FIFO queue */
	uint32_t ttl_ms;      /* granted/renewed lease TTL, session TTL */
	uint32_t reserved2;
	uint64_t token;       /* GRANTED/renew: our token; BUSY: the holder's */
	uint64_t id;          /* SESSION_OPEN: session id; LEASE_GRANT, GRANTED: lease id */
	uint64_t revision;    /* KV: mod revision (current one on COMPARE_FAILED) */
	uint64_t deadline_ms; /* lease or session deadline in log time */
};

/* Why a lock was released (LOCK_RELEASED events). */
enum locks_release_cause {
	LOCKS_CAUSE_NONE = 0,
	LOCKS_CAUSE_RELEASE = 1,
	LOCKS_CAUSE_EXPIRE = 2,
	LOCKS_CAUSE_REVOKE = 3,
	LOCKS_CAUSE_FORCE = 4,
	/* Not emitted since locks outlive their session (a session's end only
	 * drops its waiters); the value stays reserved. */
	LOCKS_CAUSE_SESSION_END = 5,
};

/* How a lock was granted (the cause of a GRANTED event). */
enum locks_grant_cause {
	LOCKS_GRANT_DIRECT = 1,  /* an ACQUIRE of a free lock: the reply tells the acquirer */
	LOCKS_GRANT_HANDOFF = 2, /* to the head waiter: only this event tells it */
};

/* One event for the watch layer. The name is copied in, so events stay valid
 * after the state machine moves on. */
struct locks_event {
	uint8_t type;         /* enum hasp_event_type */
	uint8_t cause;        /* enum locks_release_cause (RELEASED), locks_grant_cause (GRANTED), else 0 */
	uint8_t name_len;
	uint8_t reserved;
	uint32_t ttl_ms;      /* GRANTED: the TTL of the new grant's lease */
	uint64_t session_id;  /* RELEASED: session that acquired it (may have ended);
			       * GRANTED: new holder */
	uint64_t token;       /* RELEASED: the ended grant's token; GRANTED: the new one */
	uint64_t lease_id;    /* GRANTED: the shared lease of the new grant, 0 for its own TTL */
	uint64_t revision;    /* revision of the command (KV: the key's mod revision) */
	uint64_t deadline_ms; /* GRANTED: lease deadline in log time */
	uint8_t name[HASP_NAME_SIZE_MAX];
};

/* Filled by locks_apply(). The caller sets `events` and `event_count_max`
 * (>= locks_events_max()) before the call. */
struct locks_result {
	struct locks_reply reply;
	bool duplicate;          /* reply came from the session's reply cache, or
				  * is a retried SESSION_OPEN's (same nonce) */
	uint64_t revision;       /* the state machine's revision after the command */
	uint64_t log_time_ms;    /* log time after the command */
	struct locks_event *events;
	uint32_t event_count_max;
	uint32_t event_count;
};

/*
 * Capacities. Every table is sized from these in locks_init(); "full" is the
 * typed reply HASP_STATUS_FULL with a reason, never a crash or an allocation.
 * locks_config_default() fills modest values; locks_memory_size() gives the
 * bytes they cost (the sizing sum lives in locks.c).
 */
#define LOCKS_WINDOW_MAX 1024u /* the largest session_window */

struct locks_config {
	uint32_t locks_max;             /* held locks (a lock exists while held) */
	uint32_t leases_max;            /* shared leases + one private lease per TTL lock or TTL waiter */
	uint32_t sessions_max;
	uint32_t waiters_max;           /* waiters over all queues */
	uint32_t kv_entries_max;
	uint32_t kv_bytes_max;          /* key + value bytes over all entries */
	uint32_t lock_name_bytes_max;   /* lock name bytes over all locks */
	uint32_t locks_per_lease_max;   /* locks + waiters on one shared lease */
	uint32_t keys_per_lease_max;    /* KV entries attached to one lease */
	uint32_t locks_per_session_max; /* locks held + waited for by one live session */
	uint32_t session_window;        /* cached replies per session (pipelining depth), <= LOCKS_WINDOW_MAX */
	uint64_t hash_seed;             /* may differ per node: hash layout is never observable */
	/* Debug builds (HASP_DEBUG_ASSERTS) walk every table to check every
	 * invariant after each `invariants_every`th applied command: 1 in the
	 * simulators and unit tests; a node with full-size tables uses a
	 * larger period, or the walk (milliseconds) starves its loop. */
	uint32_t invariants_every;
};

/* Counters (not replicated, not in snapshots): what happened, for haspctl. */
struct locks_stats {
	uint64_t applied;
	uint64_t duplicates;        /* cached replies, and retried opens (same nonce) */
	uint64_t seq_too_old;
	uint64_t not_owner;         /* RELEASE/RENEW with the token from a non-holder */
	uint64_t bad_requests;
	uint64_t full;
	uint64_t expire_noop;       /* EXPIRE / SESSION_EXPIRE that lost to a keepalive */
	uint64_t stale_term;        /* commands whose term went backwards */
	uint64_t grants;
	uint64_t handoffs;          /* grants to a waiter inside another command */
	/* Replies that carry a reason (refusals, CAS mismatches), by reason:
	 * which BAD_REQUEST, FULL or NOT_HOLDER it was. */
	uint64_t by_reason[LOCKS_REASON_COUNT];
};

struct locks_lock;
struct locks_lease;
struct locks_session;
struct locks_waiter;
struct locks_kv;
struct locks_cached_reply;

struct locks {
	struct locks_config cfg;
	uint32_t applies_unchecked; /* since the last invariant walk (debug builds) */

	/* Replicated state (all of it goes into snapshots). */
	uint64_t revision;       /* bumped once by every command that changes state */
	uint64_t applied_index;  /* log index of the last applied command */
	uint64_t log_time_ms;    /* never goes backwards */
	uint64_t last_term;      /* term of the last applied command */
	int64_t time_offset_ms;  /* log time = leader now + offset, within last_term */
	uint64_t id_counter;     /* source of session and lease ids */
	uint64_t lock_name_bytes; /* logical bytes of lock names */
	uint64_t kv_bytes;       /* logical bytes of keys + values */

	struct locks_lock *locks;
	struct locks_lease *leases;
	struct locks_session *sessions;
	struct locks_waiter *waiters;
	struct locks_kv *kvs;
	struct locks_cached_reply *replies; /* sessions_max * session_window */

	struct slots lock_slots, lease_slots, session_slots, waiter_slots, kv_slots;

	/* Derived state, rebuilt on restore. */
	struct hindex lock_index, kv_index;
	struct hindex nonce_index; /* live sessions by non-zero open nonce */
	/* Live sessions per owner (identity), for the quota check of an open:
	 * one record per owner with a live session, found by owner_index. */
	struct locks_owner *owners;
	struct slots owner_slots;
	struct hindex owner_index;
	struct arena lock_names, kv_bytes_arena;
	struct dheap lease_heap, session_heap;
	uint32_t events_max;

	/* Per-apply scratch. */
	struct locks_result *res;
	bool bumped;

	/* What locks_copy needs to copy only the reply records that changed
	 * (neither replicated nor derived: nothing else reads it). As a source:
	 * the records written since the last copy from this machine, unless
	 * some writes went unrecorded (a reset, or being a copy's destination);
	 * a count of copies made from it. As a destination: the machine and
	 * copy this one still equals, or NULL once anything has written it. */
	struct dirty_set replies_written;
	bool replies_unrecorded;
	uint64_t copy_generation;
	const struct locks *copy_of;
	uint64_t copy_of_generation;

	struct locks_stats stats;
};

/* Modest capacities for tests and small deployments. */
void locks_config_default(struct locks_config *cfg);

/* 0 or -HASP_ECONFIG when a capacity is zero or out of range. */
int locks_config_check(const struct locks_config *cfg) __attribute__((warn_unused_result));

/* Bytes all tables take for `cfg` (the sizing sum in locks.c). */
uint64_t locks_memory_size(const struct locks_config *cfg);

/* Events one command can emit at most: the size of locks_result.events. */
uint32_t locks_events_max(const struct locks_config *cfg);

/* Sizes every table (the only allocation of the module). Returns 0,
 * -HASP_ECONFIG or -HASP_ENOMEM (nothing left allocated). */
int locks_init(struct locks *sm, const struct locks_config *cfg) __attribute__((warn_unused_result));
void locks_deinit(struct locks *sm);

/* Makes dst an exact copy of src's state (replicated and derived: dst is a
 * state machine that would apply the same next command alike), for a
 * snapshot written from the copy while src goes on applying commands
 * (docs/STORAGE.md "Snapshots off the lcore"). dst must have been
 * initialised with src's configuration (asserted) and may hold an older
 * copy. Allocates nothing. Cost: the records up to each table's highest
 * used slot, the bitmaps, indexes and heaps, the arenas' used bytes (about
 * 1.4 ms for 100,000 locks on their own leases and 1,000 sessions:
 * docs/PERFORMANCE.md), and the cached replies: when dst is still the last
 * copy made from src, only the reply records src wrote since; otherwise
 * every live session's window. Changes src's copy bookkeeping only.
 * Returns the reply records copied. */
uint64_t locks_copy(struct locks *dst, struct locks *src);

/* Writes every page of sm's tables once (each byte it writes keeps its
 * value), so that later writes, locks_copy's included, take no page fault:
 * on a VM a first touch can cost tens of microseconds a page
 * (docs/PERFORMANCE.md, "Snapshots off the lcore"). For right after
 * locks_init; changes no state. */
void locks_prefault(struct locks *sm);

/* Applies one committed command at log `index` (> every earlier index).
 * Deterministic; fills `res` (reply, events, revision, log time). */
void locks_apply(struct locks *sm, uint64_t index, const struct locks_cmd *cmd,
		 struct locks_result *res);

/* The O(n) invariant checker, called through HASP_DASSERT after each apply. */
bool locks_invariants_ok(const struct locks *sm) __attribute__((warn_unused_result));

/* --- Leader-side time queries (docs/STATE_MACHINE.md, "Lease time") --- */

/* The log time a command proposed now by the leader of `term` would get:
 * leader_now_ms rebased onto log time, never before the last log time. */
uint64_t locks_log_time(const struct locks *sm, uint64_t term, uint64_t leader_now_ms);

/* The earliest lease or session deadline in log time, or LOCKS_DEADLINE_NONE. */
uint64_t locks_deadline_min(const struct locks *sm);

/* Up to `max` ids of leases (or sessions) whose deadline is <= log_time_ms;
 * the leader proposes LEASE_EXPIRE (SESSION_EXPIRE) for each. */
uint32_t locks_leases_due(const struct locks *sm, uint64_t log_time_ms, uint64_t *ids, uint32_t max);
uint32_t locks_sessions_due(const struct locks *sm, uint64_t log_time_ms, uint64_t *ids,
			    uint32_t max);

/* --- Retransmissions answered before they are proposed ---
 *
 * A duplicate's apply returns a stored reply and changes nothing but log
 * time (docs/PROTOCOL.md, "Exactly once"), and that reply is committed
 * state: so the leader may answer a retransmission from these queries
 * instead of proposing it. Each answers true only where locks_apply() would
 * answer the command from the cache, and copies that reply; false where
 * the apply must decide. Pure, O(1), change nothing.
 */

/* True when seq (> 0) of live session `session_id` was applied and its
 * reply is still cached with the same non-zero request `digest`
 * (locks_cmd.digest): `*reply` gets it. False for an unknown session, seq
 * 0, a seq below the session's floor, out of its window or not applied
 * yet, another digest, and a record without a digest (older entries). */
bool locks_cached_reply_find(const struct locks *sm, uint64_t session_id, uint64_t seq,
			     uint64_t digest, struct locks_reply *reply)
	__attribute__((warn_unused_result));

/* True when a live session was opened with non-zero `nonce` by `owner`
 * (locks_cmd.owner of the open): `*reply` gets that open's reply, which a
 * retried SESSION_OPEN with the nonce would get. False for nonce 0, a nonce
 * no live session has, and one of another owner's session. */
bool locks_open_reply_find(const struct locks *sm, uint64_t nonce, uint64_t owner,
			   struct locks_reply *reply) __attribute__((warn_unused_result));

/* --- Read-only queries (linearizable when the node serves them after a
 * ReadIndex or under the leader lease) --- */

struct locks_lock_info {
	uint64_t holder_session_id; /* the session that acquired it; it may have ended
				     * (a lock outlives its session until its lease ends) */
	uint64_t holder_owner;      /* that session's identity (0: none) */
	uint64_t token;
	uint64_t lease_id;
	uint64_t deadline_ms;  /* log time */
	uint32_t ttl_ms;
	uint32_t waiter_count;
	bool private_lease;    /* the lock's own TTL, not a shared lease */
};

/* True when `name` is held; fills `info`. */
bool locks_lock_read(const struct locks *sm, const uint8_t *name, uint32_t name_len,
		     struct locks_lock_info *info) __attribute__((warn_unused_result));

/* True when `token` is the current holder's token of `name`. */
bool locks_check(const struct locks *sm, const uint8_t *name, uint32_t name_len, uint64_t token) __attribute__((warn_unused_result));

struct locks_kv_info {
	const uint8_t *key;    /* into the state machine */
	const uint8_t *value;
	uint32_t key_len;
	uint32_t value_len;
	uint64_t create_revision;
	uint64_t mod_revision;
	uint64_t version;      /* puts since creation, 1 for a new key */
	uint64_t lease_id;     /* 0: none */
};

bool locks_kv_get(const struct locks *sm, const uint8_t *key, uint32_t key_len,
		  struct locks_kv_info *info) __attribute__((warn_unused_result));

/* Keys with `prefix`, strictly after `start_after` (NULL/0: from the start),
 * in ascending bytewise order (a shorter key sorts before its extensions), at
 * most `max` of them. Returns the count; O(kv entries * log max). */
uint32_t locks_kv_range(const struct locks *sm, const uint8_t *prefix, uint32_t prefix_len,
			const uint8_t *start_after, uint32_t start_after_len,
			struct locks_kv_info *out, uint32_t max);

struct locks_lease_info {
	uint64_t deadline_ms;
	uint32_t ttl_ms;
	uint32_t lock_count;
	uint32_t waiter_count;
	uint32_t key_count;
	bool private_lease;
};
bool locks_lease_read(const struct locks *sm, uint64_t lease_id, struct locks_lease_info *info) __attribute__((warn_unused_result));

struct locks_session_info {
	uint64_t owner;        /* the identity that opened it (0: none) */
	uint64_t nonce;        /* its open's client nonce */
	uint64_t deadline_ms;
	uint64_t seq_max;
	uint64_t seq_floor;    /* lower seqs are refused (LOCKS_CMD_SEQ_FLOOR) */
	uint32_t ttl_ms;
	uint32_t lock_count;   /* held (acquired by it and not yet released) */
	uint32_t waiter_count; /* waiting */
};
bool locks_session_read(const struct locks *sm, uint64_t session_id,
			struct locks_session_info *info) __attribute__((warn_unused_result));

/*
 * Listing, for the control plane: each call finds the next live record at
 * slot *cursor or later (start with 0), fills its identity and info, and
 * moves *cursor past it; false when none is left. Slot order is stable
 * while no command is applied, so an operator pages with the cursor; it is
 * not sorted by name. A whole walk is O(capacity) and allocates nothing.
 * Names point into the state machine and are valid until the next apply.
 */
bool locks_lock_next(const struct locks *sm, uint32_t *cursor, const uint8_t **name,
		     uint32_t *name_len, struct locks_lock_info *info);
/* Visits private leases (a lock's own TTL) too: see info->private_lease. */
bool locks_lease_next(const struct locks *sm, uint32_t *cursor, uint64_t *lease_id,
		      struct locks_lease_info *info);
bool locks_session_next(const struct locks *sm, uint32_t *cursor, uint64_t *session_id,
			struct locks_session_info *info);

/* Live counts, for stats and the benchmark. */
struct locks_counts {
	uint32_t locks, leases, sessions, waiters, kv_entries;
};
void locks_counts_get(const struct locks *sm, struct locks_counts *counts);

/* True when `name` is 1..HASP_NAME_SIZE_MAX bytes of 0x21..0x7e. */
bool locks_name_valid(const uint8_t *name, uint32_t name_len) __attribute__((warn_unused_result));

#endif
