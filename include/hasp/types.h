/*
 * The vocabulary shared by the wire protocol, the state machine and the
 * client library: opcodes, reply statuses, acquire modes and watch events.
 *
 * Values are part of wire protocol v1 (docs/PROTOCOL.md): never renumber,
 * only append.
 */
#ifndef HASP_TYPES_H
#define HASP_TYPES_H

#include <stdint.h>

enum hasp_op {
	HASP_OP_SESSION_OPEN = 1,
	HASP_OP_SESSION_KEEPALIVE = 2,
	HASP_OP_SESSION_CLOSE = 3,

	HASP_OP_LEASE_GRANT = 8,
	HASP_OP_LEASE_KEEPALIVE = 9,
	HASP_OP_LEASE_REVOKE = 10,

	HASP_OP_ACQUIRE = 16,
	HASP_OP_RELEASE = 17,
	HASP_OP_RENEW = 18,
	HASP_OP_CHECK = 19,
	HASP_OP_LOCK_READ = 20,
	HASP_OP_CANCEL = 21, /* drop this session's WAIT entry on a lock */

	HASP_OP_WATCH = 24,
	HASP_OP_UNWATCH = 25,
	HASP_OP_EVENT = 26, /* server to client push */
	HASP_OP_WATCH_COUNT = 27, /* how many of this session's watches the node holds */
	/* WATCH_COUNT and the last event the node sent the session */
	HASP_OP_WATCH_STATUS = 28,

	HASP_OP_KV_PUT = 32,
	HASP_OP_KV_GET = 33,
	HASP_OP_KV_DELETE = 34,
	HASP_OP_KV_CAS = 35,
	HASP_OP_KV_RANGE = 36,
};

enum hasp_status {
	HASP_STATUS_OK = 0,
	HASP_STATUS_GRANTED = 1,         /* body: fencing token, lease deadline */
	HASP_STATUS_QUEUED = 2,          /* body: position in the FIFO queue */
	HASP_STATUS_BUSY = 3,            /* body: the holder's token */
	HASP_STATUS_NOT_HOLDER = 4,      /* token is not the current holder's */
	HASP_STATUS_NOT_LEADER = 5,      /* body: leader id and address, if known */
	HASP_STATUS_NOT_FOUND = 6,       /* no such lock, key, lease */
	HASP_STATUS_COMPARE_FAILED = 7,  /* KV compare-and-set mismatch */
	HASP_STATUS_SESSION_EXPIRED = 8, /* unknown or expired session */
	HASP_STATUS_LEASE_EXPIRED = 9,   /* unknown, revoked or expired lease */
	HASP_STATUS_FULL = 10,           /* a configured capacity is exhausted */
	HASP_STATUS_BAD_REQUEST = 11,    /* malformed or inconsistent request */
	HASP_STATUS_BAD_VERSION = 12,
	HASP_STATUS_BAD_OPCODE = 13,
	HASP_STATUS_BAD_NAME = 14,
	HASP_STATUS_BAD_TTL = 15,
	HASP_STATUS_TOO_LARGE = 16,
	HASP_STATUS_UNAVAILABLE = 17,    /* no quorum or shutting down: retry */
	HASP_STATUS_OVERLOADED = 18,     /* queue full: back off and retry */
	HASP_STATUS_FORBIDDEN = 19,      /* the identity may not do this on this name */
	HASP_STATUS_COUNT
};

/* Acquire modes. */
enum hasp_acquire_mode {
	HASP_ACQUIRE_TRY = 0,  /* grant now or reply BUSY */
	HASP_ACQUIRE_WAIT = 1, /* grant now or join the FIFO queue (QUEUED) */
};

/* Events pushed to watchers and waiters. */
enum hasp_event_type {
	HASP_EVENT_LOCK_RELEASED = 1, /* by release, expiry, revoke or force */
	HASP_EVENT_LOCK_GRANTED = 2,  /* to a waiter, or observed by a watcher */
	HASP_EVENT_KV_PUT = 3,
	HASP_EVENT_KV_DELETED = 4,
	/* Never on the wire: libhasp's notice that events may have been lost
	 * (a gap in the event chain, e.g. across a leader change, or its own
	 * buffer overflowed). Re-read what you watch. */
	HASP_EVENT_RESYNC = 5,
};

/* The name of a status ("GRANTED"); "?" for unknown values. */
const char *hasp_status_name(uint32_t status);

/* libhasp's return convention (include/hasp/client.h): the value a call
 * returns for a final reply status. 0 for OK and GRANTED, else a negative
 * -HASP_E* code (include/hasp/errors.h):
 *   BUSY -HASP_EBUSY, NOT_HOLDER -HASP_ENOTHOLDER, NOT_FOUND -HASP_ENOENT,
 *   COMPARE_FAILED -HASP_ECOMPARE, SESSION_EXPIRED -HASP_ESESSION,
 *   LEASE_EXPIRED -HASP_ELEASE, FULL -HASP_EFULL, FORBIDDEN -HASP_EFORBIDDEN,
 *   BAD_REQUEST -HASP_EREFUSED, BAD_VERSION -HASP_EVERSION,
 *   BAD_OPCODE -HASP_EOPCODE, BAD_NAME -HASP_ENAME, BAD_TTL -HASP_ERANGE,
 *   TOO_LARGE -HASP_ETOOBIG, NOT_LEADER -HASP_ENOTLEADER,
 *   QUEUED, UNAVAILABLE and OVERLOADED -HASP_EAGAIN,
 *   anything else -HASP_ECORRUPT. */
int hasp_status_error(uint32_t status);

/* The reverse, for tools that print the cluster's word ("BUSY"): the status
 * a cluster refusal came from, or -1 when `error` (given as -HASP_E* or
 * HASP_E*) is not one of EBUSY, ENOTHOLDER, ENOENT, ECOMPARE, ESESSION,
 * ELEASE, EFULL, EFORBIDDEN, EREFUSED. 0 gives OK. */
int hasp_error_status(int error);

#endif
