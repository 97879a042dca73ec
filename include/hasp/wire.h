/*
 * hasp wire protocol v1: the codec for client requests, server replies and
 * server-pushed events (docs/PROTOCOL.md is the contract; the tables below
 * and in common/wire.c and common/wire_body.c are the same tables).
 *
 * One message per UDP datagram of at most 1472 bytes (HASP_DATAGRAM_SIZE_MAX
 * in common/limits.h), all integers little-endian, a fixed 44-byte header and
 * a body whose layout depends on the opcode, the direction (the REPLY flag)
 * and, for replies, the status.
 *
 * Header (44 bytes):
 *
 *   offset size field
 *   0      4    magic 0x50534148 ("HASP" on the wire)
 *   4      1    version (1)
 *   5      1    opcode (enum hasp_op)
 *   6      2    flags (HASP_WIRE_F_*; unknown bits refused)
 *   8      8    session id (0 in SESSION_OPEN requests)
 *   16     8    sequence number (echoed in the reply; in EVENT the Raft index)
 *   24     2    body size (must equal the datagram size - 44)
 *   26     2    status (enum hasp_status; 0 in requests)
 *   28     16   authentication tag (v1: all zero; v2: the MAC,
 *               docs/PROTOCOL.md "Authentication")
 *
 * Ownership: decoding is zero-copy. Every struct hasp_wire_bytes in a decoded
 * message (names, keys, values, range entries) points INTO the caller's
 * datagram, with an explicit size and no NUL terminator; the message is
 * valid only as long as the caller keeps that datagram unchanged. Encoders
 * read the caller's message and write into the caller's buffer; they keep no
 * pointer. Nothing in this module allocates, logs or reads a clock.
 *
 * Errors: every function returning int returns a byte count (encoders), 0
 * (decoders) or a negative -HASP_E* code (include/hasp/errors.h). Each decode
 * failure has its own code so that the dataplane counts drops by reason:
 *
 *   -HASP_ETRUNCATED datagram shorter than the header
 *   -HASP_EMAGIC     bad magic
 *   -HASP_ETOOBIG    datagram over 1472 bytes, or a value over 1024 bytes
 *   -HASP_EVERSION   version other than 1 or 2
 *   -HASP_EFLAGS     unknown header or body flag bits, or the wrong direction
 *                    (a request where a reply is expected or vice versa)
 *   -HASP_EOPCODE    unknown opcode (or EVENT sent as a request)
 *   -HASP_ELENGTH    body size or an inner length disagrees with the data
 *   -HASP_ENOTSUP    non-zero authentication tag in a v1 datagram
 *   -HASP_ENAME      name, key or prefix bytes or size not allowed
 *   -HASP_ERANGE     TTL out of range (requests: 10 ms .. 1 day)
 *   -HASP_EINVAL     anything else inconsistent: unknown enum value, status
 *                    in a request, a body/status pair that cannot occur
 * Encoders check the same rules (so they never write what a peer refuses)
 * and add -HASP_ENOSPC when the caller's buffer is too small.
 */
#ifndef HASP_WIRE_H
#define HASP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hasp/types.h"

#define HASP_WIRE_MAGIC 0x50534148u /* bytes 'H' 'A' 'S' 'P' */
#define HASP_WIRE_VERSION 2u     /* newest: authenticated (docs/PROTOCOL.md) */
#define HASP_WIRE_VERSION_MIN 1u /* oldest version this build speaks */
#define HASP_WIRE_TAG_OFFSET 28u
#define HASP_WIRE_TAG_SIZE 16u
/* SESSION_OPEN v2: the identity that opens, 1..32 bytes of 0x21..0x7e. */
#define HASP_IDENTITY_SIZE_MAX 32u
#define HASP_WIRE_HEADER_SIZE 44u

/* Header flags. */
/* An EVENT whose prev is (0, HASP_WIRE_EVENT_PREV_GAP) follows events the
 * node dropped for this session (the watch rate limit coalesced them): the
 * client reports a gap. No real event has index 0. */
#define HASP_WIRE_EVENT_PREV_GAP 1u
#define HASP_WIRE_F_REPLY 0x0001u /* sent by a server: a reply or an EVENT */
/* Requests with a session: the client will send no lower sequence number of
 * this session again (it has their replies, or gave them up). The node drops
 * the replies it cached for them and refuses them from then on (BAD_REQUEST,
 * seq_too_old), so it keeps fewer replies per session (docs/PROTOCOL.md,
 * "Exactly once"). Optional: a request without it is answered the same. */
#define HASP_WIRE_F_SEQ_FLOOR 0x0002u
#define HASP_WIRE_F_KNOWN (HASP_WIRE_F_REPLY | HASP_WIRE_F_SEQ_FLOOR)

/* WATCH/UNWATCH body flags. */
#define HASP_WIRE_WATCH_PREFIX 0x01u /* the name is a prefix, not one key */
/* KV_CAS body flags. */
#define HASP_WIRE_CAS_VALUE 0x01u /* compare the value, not the revision */
/* KV_RANGE reply body flags. */
#define HASP_WIRE_RANGE_MORE 0x01u /* more entries after the last one here */

/* A run of bytes inside a datagram (decoded) or the caller's memory
 * (encoding). Not NUL-terminated. */
struct hasp_wire_bytes {
	const uint8_t *data;
	size_t size;
};

struct hasp_wire_header {
	uint8_t version;    /* 1 or 2; encoders write 1 for 0 */
	uint8_t opcode;     /* enum hasp_op */
	uint16_t flags;     /* HASP_WIRE_F_* */
	uint16_t status;    /* enum hasp_status; 0 in requests */
	uint16_t body_size; /* set by decode; encoders compute it */
	uint64_t session_id;
	uint64_t seq;
	/* Set by decode (v2: the MAC as received); encoders write zeros, and
	 * hasp_wire_seal (common/wire_auth.h) puts the MAC in place. */
	uint8_t tag[HASP_WIRE_TAG_SIZE];
};

/* ---- request bodies ---- */

struct hasp_wire_session_open {
	uint64_t client_nonce; /* random per open: a retried open gets the same session */
	uint32_t ttl_ms;       /* requested session TTL; the server may clamp it */
	struct hasp_wire_bytes identity; /* v2 only: who opens (1..32 name bytes) */
};

struct hasp_wire_lease_grant {
	uint32_t ttl_ms;
};

struct hasp_wire_lease_ref { /* LEASE_KEEPALIVE, LEASE_REVOKE */
	uint64_t lease_id;
};

struct hasp_wire_acquire {
	struct hasp_wire_bytes name;
	uint64_t lease_id; /* non-zero: the lock lives on this lease, ttl_ms is 0 */
	uint32_t ttl_ms;   /* lease_id zero: the lock's own TTL */
	uint8_t mode;      /* enum hasp_acquire_mode */
};

struct hasp_wire_name_token { /* RELEASE, CHECK */
	struct hasp_wire_bytes name;
	uint64_t token;
};

struct hasp_wire_renew {
	struct hasp_wire_bytes name;
	uint64_t token;
	uint32_t ttl_ms;
};

struct hasp_wire_name_only { /* LOCK_READ, KV_GET, KV_DELETE */
	struct hasp_wire_bytes name;
};

struct hasp_wire_watch { /* WATCH, UNWATCH */
	struct hasp_wire_bytes name; /* a key, or a prefix with HASP_WIRE_WATCH_PREFIX */
	uint8_t flags;
};

struct hasp_wire_kv_put {
	struct hasp_wire_bytes key;
	struct hasp_wire_bytes value; /* 0..1024 bytes */
	uint64_t lease_id;            /* 0: no lease */
};

struct hasp_wire_kv_cas {
	struct hasp_wire_bytes key;
	struct hasp_wire_bytes expected_value; /* with HASP_WIRE_CAS_VALUE, else empty */
	struct hasp_wire_bytes value;          /* the new value */
	uint64_t expected_revision; /* without CAS_VALUE; 0: the key must not exist */
	uint64_t lease_id;          /* of the new value; 0: no lease */
	uint8_t flags;
};

struct hasp_wire_kv_range {
	struct hasp_wire_bytes prefix;      /* 0..128 name bytes; empty: every key */
	struct hasp_wire_bytes start_after; /* 0..128 name bytes; empty: from the first */
	uint16_t limit;                     /* 0: as many as fit one datagram */
};

/* ---- reply bodies ---- */

struct hasp_wire_granted { /* status GRANTED, to ACQUIRE or RENEW */
	uint64_t token;    /* fencing token */
	uint64_t lease_id; /* the lease the lock lives on, 0 for its own TTL */
	uint32_t ttl_ms;
};

struct hasp_wire_queued { /* status QUEUED, to ACQUIRE in WAIT mode */
	uint32_t position; /* 1: next in line */
};

struct hasp_wire_busy { /* status BUSY, to ACQUIRE in TRY mode */
	uint64_t holder_token;
};

struct hasp_wire_not_leader { /* status NOT_LEADER, to any request */
	uint32_t leader_id;
	uint8_t ipv4[4]; /* in dotted order: 10.0.0.1 is { 10, 0, 0, 1 } */
	uint16_t port;
	uint8_t known; /* 0: leader unknown, every other field 0 */
};

struct hasp_wire_bad_version { /* status BAD_VERSION, to any request */
	uint8_t version_min;
	uint8_t version_max;
};

struct hasp_wire_session_opened { /* OK to SESSION_OPEN */
	uint64_t session_id; /* non-zero */
	uint32_t ttl_ms;
};

struct hasp_wire_session_alive { /* OK to SESSION_KEEPALIVE */
	uint32_t ttl_ms;
};

struct hasp_wire_watch_count { /* OK to WATCH_COUNT */
	uint32_t count; /* this session's watches on the answering node */
};

/* OK to WATCH_STATUS: the watch count and the identity of the last event
 * the answering node sent the session ((0, 0) none; (0, 1) it dropped
 * some: docs/PROTOCOL.md "Event identity and gaps"). */
struct hasp_wire_watch_status {
	uint32_t count;
	uint32_t last_event_sub;
	uint64_t last_event_index;
};

struct hasp_wire_lease_ok { /* OK to LEASE_GRANT, LEASE_KEEPALIVE */
	uint64_t lease_id;
	uint32_t ttl_ms;
};

struct hasp_wire_lock_info { /* OK to LOCK_READ (a free lock is NOT_FOUND) */
	uint64_t holder_session_id;
	uint64_t token;
	uint64_t lease_id;
	uint32_t ttl_remaining_ms;
	uint32_t waiter_count;
};

struct hasp_wire_kv_revision { /* OK to KV_PUT, KV_DELETE, KV_CAS */
	uint64_t revision;
};

struct hasp_wire_kv_value { /* OK to KV_GET */
	struct hasp_wire_bytes value;
	uint64_t revision; /* of the last change of the key */
	uint64_t lease_id;
};

/* OK to KV_RANGE: entry_count validated entries packed in `entries`; read
 * them with hasp_wire_kv_iter_*. */
struct hasp_wire_kv_entries {
	struct hasp_wire_bytes entries;
	uint16_t entry_count;
	uint8_t flags; /* HASP_WIRE_RANGE_MORE */
};

struct hasp_wire_kv_entry {
	struct hasp_wire_bytes key;
	struct hasp_wire_bytes value;
	uint64_t revision;
};

struct hasp_wire_event { /* opcode EVENT, REPLY flag, status OK */
	struct hasp_wire_bytes name;
	struct hasp_wire_bytes value; /* KV_PUT events only; else empty */
	uint64_t revision;            /* the fencing token for lock events */
	uint64_t lease_id;            /* LOCK_GRANTED: the grant's lease; else 0 */
	uint32_t ttl_ms;              /* LOCK_GRANTED: that lease's TTL; else 0 */
	/* The event's identity is (header seq = the Raft index of the command
	 * that caused it, sub = its ordinal among that command's events); prev
	 * names the event this node sent to the session before it ((0, 0):
	 * none). A client that did not receive prev last missed something. */
	uint32_t sub;
	uint32_t prev_sub;
	uint64_t prev_index; /* (0, HASP_WIRE_EVENT_PREV_GAP): events were dropped before this one */
	uint8_t type;                 /* enum hasp_event_type */
};

/*
 * A message: the header and the body selected by (direction, opcode,
 * status). Requests: the member named after the opcode (SESSION_KEEPALIVE,
 * SESSION_CLOSE have none). Replies: GRANTED -> granted, QUEUED -> queued,
 * BUSY -> busy, NOT_LEADER -> not_leader, BAD_VERSION -> bad_version; OK ->
 * session_opened, session_alive, lease_ok (LEASE_GRANT, LEASE_KEEPALIVE),
 * lock_info, kv_revision (PUT, DELETE, CAS), kv_value, kv_entries, event; any
 * other status or opcode: no body.
 */
struct hasp_wire_msg {
	struct hasp_wire_header hdr;
	union {
		struct hasp_wire_session_open session_open;
		struct hasp_wire_lease_grant lease_grant;
		struct hasp_wire_lease_ref lease_keepalive;
		struct hasp_wire_lease_ref lease_revoke;
		struct hasp_wire_acquire acquire;
		struct hasp_wire_name_token release;
		struct hasp_wire_renew renew;
		struct hasp_wire_name_token check;
		struct hasp_wire_name_only lock_read;
		struct hasp_wire_name_only cancel;
		struct hasp_wire_watch watch;
		struct hasp_wire_watch unwatch;
		struct hasp_wire_kv_put kv_put;
		struct hasp_wire_name_only kv_get;
		struct hasp_wire_name_only kv_delete;
		struct hasp_wire_kv_cas kv_cas;
		struct hasp_wire_kv_range kv_range;

		struct hasp_wire_granted granted;
		struct hasp_wire_queued queued;
		struct hasp_wire_busy busy;
		struct hasp_wire_not_leader not_leader;
		struct hasp_wire_bad_version bad_version;
		struct hasp_wire_session_opened session_opened;
		struct hasp_wire_session_alive session_alive;
		struct hasp_wire_watch_count watch_count;
		struct hasp_wire_watch_status watch_status;
		struct hasp_wire_lease_ok lease_ok;
		struct hasp_wire_lock_info lock_info;
		struct hasp_wire_kv_revision kv_revision;
		struct hasp_wire_kv_value kv_value;
		struct hasp_wire_kv_entries kv_entries;
		struct hasp_wire_event event;
	} body;
};

/* True when `name` is a valid lock name or KV key: 1..128 bytes, each
 * 0x21..0x7e (printable ASCII without space). */
bool hasp_name_valid(const void *name, size_t size);

/* Decodes one datagram of either direction into `msg`. Returns 0 or a
 * -HASP_E* code (see the top of this file). On failure `msg->hdr` holds what
 * was read before the failure (see hasp_wire_error_answerable) and the body
 * is unspecified. The caller keeps `datagram`; msg points into it. */
int hasp_wire_decode(const void *datagram, size_t size, struct hasp_wire_msg *msg)
	__attribute__((warn_unused_result));

/* As hasp_wire_decode, for a server: a message with the REPLY flag is
 * refused with -HASP_EFLAGS. */
int hasp_wire_decode_request(const void *datagram, size_t size, struct hasp_wire_msg *msg)
	__attribute__((warn_unused_result));

/* As hasp_wire_decode, for a client: replies and EVENTs only; a request is
 * refused with -HASP_EFLAGS. */
int hasp_wire_decode_reply(const void *datagram, size_t size, struct hasp_wire_msg *msg)
	__attribute__((warn_unused_result));

/* Encodes `msg` into `buf` (at most buf_size bytes). Returns the datagram
 * size or -HASP_E*: the decoder's checks; -HASP_ETOOBIG when the message
 * exceeds 1472 bytes and buf_size >= 1472; -HASP_ENOSPC when it exceeds a
 * smaller buf_size. hdr.version 2 writes version 2 (with its SESSION_OPEN
 * body), anything else version 1; hdr.body_size and hdr.tag are ignored
 * (the real size and a zero tag are written). */
int hasp_wire_encode(const struct hasp_wire_msg *msg, void *buf, size_t buf_size)
	__attribute__((warn_unused_result));

/* Encodes the OK reply to KV_RANGE: the header fields of `hdr` (opcode
 * KV_RANGE, REPLY flag and status OK are forced) and as many of
 * entries[0 .. entry_count) as fit in min(buf_size, 1472) bytes, in order.
 * Sets *packed_count; the MORE flag is set when not all fit or more_after.
 * Returns the datagram size or -HASP_ENAME/-HASP_ETOOBIG for an invalid
 * entry, -HASP_ENOSPC when buf cannot hold even an empty reply. */
int hasp_wire_encode_kv_range_reply(const struct hasp_wire_header *hdr,
				    const struct hasp_wire_kv_entry *entries, size_t entry_count,
				    bool more_after, void *buf, size_t buf_size,
				    size_t *packed_count) __attribute__((warn_unused_result));

/* KV_RANGE reply entry layout: revision u64, key size u8, value size u16,
 * key, value (11 bytes + key + value). */
#define HASP_WIRE_KV_ENTRY_FIXED_SIZE 11u

/* Iterates the entries of a decoded KV_RANGE reply (already validated by the
 * decoder, so iteration cannot fail). Entries point into the datagram. */
struct hasp_wire_kv_iter {
	const uint8_t *pos;
	size_t left;
	uint32_t entries_left;
};

void hasp_wire_kv_iter_init(struct hasp_wire_kv_iter *it, const struct hasp_wire_kv_entries *e);
/* Fills *entry and returns true, or returns false after the last entry. */
bool hasp_wire_kv_iter_next(struct hasp_wire_kv_iter *it, struct hasp_wire_kv_entry *entry);

/* Starts a reply to `request`: same version, opcode, session id and
 * sequence number, REPLY flag, the given status, zeroed body. */
void hasp_wire_reply_init(struct hasp_wire_msg *reply, const struct hasp_wire_header *request,
			  enum hasp_status status);

/* The status a server answers a refused request with: BAD_VERSION,
 * BAD_OPCODE, BAD_NAME, BAD_TTL, TOO_LARGE or BAD_REQUEST. */
enum hasp_status hasp_wire_error_status(int err);

/* True when a server should answer a datagram that decode refused with
 * `err`, its header as left in `hdr`: the header was readable (not
 * -HASP_ETRUNCATED or -HASP_EMAGIC) and the datagram is not itself a reply
 * (never answer a reply: no loops, no reflection). Otherwise drop and count. */
bool hasp_wire_error_answerable(int err, const struct hasp_wire_header *hdr);

/* True when a request with this opcode is proposed as a Raft command and
 * answered once committed; false for what the leader answers from its own
 * state (reads, watches, the watch queries). Only a command changes the
 * state machine, and only a command renews its session's TTL. */
bool hasp_wire_op_is_command(uint8_t opcode);

#endif
