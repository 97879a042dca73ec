/*
 * The authenticated client protocol (wire v2) on top of common/auth.h:
 * the tag of a datagram, the session key both sides derive, and the owner
 * id of an identity. docs/PROTOCOL.md "Authentication" is the contract and
 * docs/SECURITY.md section 4 the design; this is the only code that knows
 * which bytes a tag covers.
 */
#ifndef HASP_COMMON_WIRE_AUTH_H
#define HASP_COMMON_WIRE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"

/* Writes the tag of datagram[0..size) (an encoded v2 message, size >= the
 * 44-byte header) under key into its bytes 28..43. */
void hasp_wire_seal(const struct auth_key *key, uint8_t *datagram, size_t size);

/* True when bytes 28..43 of datagram[0..size) are its tag under key.
 * Constant time in the tag's bytes; the datagram is not changed. False for
 * a datagram shorter than the header. */
bool hasp_wire_tag_ok(const struct auth_key *key, const uint8_t *datagram, size_t size)
	__attribute__((warn_unused_result));

/* The session key: BLAKE2b-256 keyed with the identity key over
 * "hasp session v2" || session_id || client_nonce (u64 LE each). */
void hasp_session_key(const struct auth_key *identity_key, uint64_t session_id,
		      uint64_t client_nonce, struct auth_key *out);

/* The owner id the state machine stores for identity `name`: the first 8
 * bytes (LE) of BLAKE2b-64("hasp owner v2" || name), never 0 or 1 (1 is
 * the one anonymous owner of insecure mode). */
uint64_t hasp_owner_id(const uint8_t *name, size_t size);

/* The owner of every session in insecure mode (client_auth = off). */
#define HASP_OWNER_ANONYMOUS 1u

#endif
