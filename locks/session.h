/*
 * Client sessions and exactly-once replies (Raft thesis §6.3).
 *
 * A client opens a session (the id comes from replicated state, so every
 * replica assigns the same one), then numbers its requests 1, 2, 3... Each
 * session keeps the replies of its last `session_window` requests in a ring
 * indexed by seq % window; a retried request finds its reply there and gets
 * it back byte for byte, and the state machine changes nothing. A pipelining
 * client may have up to `session_window` requests in flight, even reordered.
 * A seq older than the window can no longer be answered and gets
 * BAD_REQUEST / LOCKS_REASON_SEQ_TOO_OLD.
 *
 * A client that has every reply below a seq says so on the request
 * (LOCKS_CMD_SEQ_FLOOR): the session then drops those replies and refuses
 * those seqs (SEQ_TOO_OLD, as if they had left the window), so a session
 * whose client waits for each reply keeps one cached reply, not 32. The
 * floor is what makes the drop safe: without it a late duplicate would find
 * an empty slot and be applied a second time.
 *
 * SESSION_OPEN has no session (and no seq) yet; it is deduplicated by the
 * client's nonce instead (docs/PROTOCOL.md): while the session an open
 * created lives, an open with the same non-zero nonce gets that open's reply
 * again, byte for byte, and changes nothing. A hash index keyed by nonce
 * (derived state, rebuilt on restore) finds it. Nonce 0 opts out.
 *
 * Idle sessions end only by a SESSION_EXPIRE command from the leader,
 * re-checked here against log time; any command of the session pushes its
 * deadline out (ZooKeeper-style: requests are heartbeats). A session is for
 * exactly-once replies and wait queues, not for ownership: its end drops its
 * waiters (and their pending private leases) but leaves the locks it holds
 * to their tokens and leases (docs/STATE_MACHINE.md, "Sessions").
 */
#ifndef HASP_LOCKS_SESSION_H
#define HASP_LOCKS_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "locks/locks.h"

struct locks_session {
	uint64_t id;
	uint64_t deadline_ms;      /* log time */
	uint64_t seq_max;          /* highest seq applied */
	uint64_t seq_floor;        /* lower seqs are refused; 0: none (<= seq_max) */
	uint64_t nonce;            /* client nonce of the open; 0: none */
	uint64_t open_deadline_ms; /* the open's reply, for a retried open */
	uint64_t owner;            /* identity that opened it (0: none) */
	uint32_t ttl_ms;
	uint32_t heap_pos;
	uint32_t waiter_head;      /* waiters (via locks_waiter.session_next) */
	uint32_t lock_count;       /* locks it acquired that are still held */
	uint32_t waiter_count;
	uint8_t flags;             /* LOCKS_CMD_OWNER_RELEASE */
};

/* An owner with live sessions (derived state: sm->owners). */
struct locks_owner {
	uint64_t owner;
	uint32_t sessions; /* > 0 while the record is used */
	uint32_t reserved;
};

/* Counts a session in or out of its owner's record (which comes and goes
 * with the owner's first and last live session). */
void session_owner_add(struct locks *sm, uint64_t owner);
void session_owner_remove(struct locks *sm, uint64_t owner);
/* The slot of the owner's record, or LOCKS_NONE (no live session). */
uint32_t session_owner_find(const struct locks *sm, uint64_t owner);
/* The owner's live sessions: O(1), not a scan of the session table. */
uint32_t session_owner_count(const struct locks *sm, uint64_t owner);
uint32_t session_owner_hash_of(const void *ctx, uint32_t slot);

struct locks_cached_reply {
	uint64_t seq; /* 0: empty */
	uint64_t digest; /* of the request (locks_cmd.digest); 0: not checked */
	struct locks_reply reply;
};

enum session_seq_verdict {
	SESSION_SEQ_NEW,
	SESSION_SEQ_DUPLICATE,
	SESSION_SEQ_TOO_OLD,
	SESSION_SEQ_JUMP,     /* more than LOCKS_SEQ_JUMP_MAX ahead: refused */
	SESSION_SEQ_MISMATCH, /* an applied seq, but other request bytes */
};


/* The slot of live session `id`, or LOCKS_NONE. */
uint32_t session_find(const struct locks *sm, uint64_t id);

/* The slot of the live session opened with non-zero `nonce`, or LOCKS_NONE. */
uint32_t session_find_nonce(const struct locks *sm, uint64_t nonce);
/* Hash of a nonce in sm->nonce_index, and its hindex callback. */
uint32_t session_nonce_hash(const struct locks *sm, uint64_t nonce);
uint32_t session_nonce_hash_of(const void *ctx, uint32_t slot);

/* Classifies `seq` (> 0) with request `digest` for session slot `s`; for a
 * duplicate, `*cached` points at the stored record (its reply and digest). */
enum session_seq_verdict session_seq_check(const struct locks *sm, uint32_t s, uint64_t seq,
					   uint64_t digest, const struct locks_cached_reply **cached);
/* Stores the reply and digest of a new `seq`; pushes the idle deadline out. */
void session_seq_record(struct locks *sm, uint32_t s, uint64_t seq, uint64_t digest,
			const struct locks_reply *reply);

/* The client will send no seq below `seq` again (LOCKS_CMD_SEQ_FLOOR): drops
 * the cached replies below it, and session_seq_check refuses those seqs. */
void session_seq_floor(struct locks *sm, uint32_t s, uint64_t seq);

/* Command handlers; the dispatcher in locks.c did the session and seq checks
 * for the ones that take a session. */
void session_cmd_open(struct locks *sm, const struct locks_cmd *cmd);
/* Fills `r` (all zero before) with the reply of the open that created
 * session slot `s`, which a retried open (same nonce) gets again. */
void session_open_reply_fill(const struct locks *sm, uint32_t s, struct locks_reply *r);
void session_cmd_keepalive(struct locks *sm, uint32_t s);
void session_cmd_close(struct locks *sm, uint32_t s);
void session_cmd_expire(struct locks *sm, const struct locks_cmd *cmd);

uint64_t session_heap_key(const void *ctx, uint32_t slot);
void session_heap_set_pos(void *ctx, uint32_t slot, uint32_t pos);

#endif
