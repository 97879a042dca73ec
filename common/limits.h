/*
 * Sizing limits of hasp, in one place, tied together by static_asserts.
 *
 * Wire limits are part of the protocol contract (docs/PROTOCOL.md): the
 * decoder enforces them and a client library built against another set would
 * be refused. Capacities of the state machine are configuration, not limits;
 * they live in struct locks_config.
 */
#ifndef HASP_COMMON_LIMITS_H
#define HASP_COMMON_LIMITS_H

#include <assert.h>

/* One request or reply per UDP datagram, never fragmented at MTU 1500:
 * 1500 - 20 (IPv4) - 8 (UDP). */
#define HASP_DATAGRAM_SIZE_MAX 1472u

/* Lock names and KV keys: 1..128 bytes of printable ASCII 0x21..0x7e. */
#define HASP_NAME_SIZE_MAX 128u
#define HASP_NAME_BYTE_MIN 0x21u
#define HASP_NAME_BYTE_MAX 0x7eu

/* KV values: 0..1024 arbitrary bytes. */
#define HASP_VALUE_SIZE_MAX 1024u

/* Lease and lock TTLs in milliseconds. The floor keeps a TTL above a few
 * commit round trips; the ceiling keeps deadlines inside 32 bits of ms. */
#define HASP_TTL_MS_MIN 10u
#define HASP_TTL_MS_MAX 86400000u /* one day */

/* The reserved authentication tag in every header (unused in v1: zero). */
#define HASP_AUTH_TAG_SIZE 16u

/* Raft and peer transport: one AppendEntries per datagram at this MTU. */
#define HASP_MTU_DEFAULT 1500u
#define HASP_MTU_JUMBO 9000u

static_assert(HASP_NAME_SIZE_MAX + HASP_VALUE_SIZE_MAX + 256u <= HASP_DATAGRAM_SIZE_MAX,
	      "a KV put with the largest key and value must fit one datagram with headers");
static_assert(HASP_TTL_MS_MAX <= 0xffffffffu, "TTLs travel as 32-bit milliseconds");

/* Wire protocol v1 exactly-once window (docs/PROTOCOL.md "Exactly once"): a
 * client sends sequence number s only after it has the replies to every
 * number <= s - HASP_SESSION_INFLIGHT_MAX, so the server caches the replies
 * of the last HASP_SESSION_INFLIGHT_MAX numbers of a session and no more. */
#define HASP_SESSION_INFLIGHT_MAX 32u

#endif

/* ---- storage (storage/, docs/STORAGE.md) ---- */

/* The WAL writes whole blocks with O_DIRECT; every group-commit write starts
 * on a block boundary and is padded to one. */
#define HASP_WAL_BLOCK_SIZE 4096u
static_assert(HASP_WAL_BLOCK_SIZE % 4096u == 0, "O_DIRECT needs 4 KiB alignment");
