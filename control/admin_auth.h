/*
 * The admin credential over TCP (docs/SECURITY.md 4.8): a per-connection
 * challenge and a MAC on every privileged request, under the operator's
 * admin key (`admin_key_file` on the node, `haspctl --admin-key` on the
 * client; the key file format of common/auth.h).
 *
 * On a connection the client first asks `auth.nonce`; the node answers 32
 * random bytes, fresh for that connection. Each request is then sent as
 *
 *   auth SEQ TAG LINE
 *
 * SEQ the decimal number of the request on this connection (1, 2, ...,
 * exactly one more than the last accepted), TAG 32 hex digits: keyed
 * BLAKE2b-128 under the admin key of "hasp admin v1\0" || nonce || SEQ (u64
 * LE) || LINE. The key never travels; a captured request cannot be
 * replayed (another connection has another nonce, this one wants the next
 * SEQ) nor changed (the tag covers the line).
 */
#ifndef HASP_CONTROL_ADMIN_AUTH_H
#define HASP_CONTROL_ADMIN_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"

#define ADMIN_AUTH_NONCE_SIZE 32u
#define ADMIN_AUTH_NONCE_HEX_SIZE (2u * ADMIN_AUTH_NONCE_SIZE + 1u)
/* "auth " + 20 digits + " " + 32 hex + " ": what sealing adds to a line. */
#define ADMIN_AUTH_OVERHEAD (5u + 20u + 1u + 2u * AUTH_MAC_SIZE + 1u)

/* The tag of `line[0..len)` as the seq-th request on a connection with
 * `nonce`. */
void admin_auth_tag(const struct auth_key *key, const uint8_t *nonce, uint64_t seq, const char *line,
		    size_t len, uint8_t *tag);

/* Writes "auth SEQ TAG LINE" (no newline) into out; its length, or 0 when
 * it does not fit in out_size (with the NUL). */
size_t admin_auth_seal(const struct auth_key *key, const uint8_t *nonce, uint64_t seq, const char *line,
		       char *out, size_t out_size) __attribute__((warn_unused_result));

/* True when line[0..len) starts with the word "auth". */
bool admin_auth_is_sealed(const char *line, size_t len);

/* Checks a sealed line[0..len) (no newline) against the nonce and the
 * expected seq. 0 and the inner line in *inner / *inner_len; -HASP_EINVAL
 * when it is not of the form above; -HASP_EPERM when the tag or the seq is
 * wrong. Nothing of the inner line is looked at before the tag verifies. */
int admin_auth_open(const struct auth_key *key, const uint8_t *nonce, uint64_t seq, const char *line,
		    size_t len, const char **inner, size_t *inner_len) __attribute__((warn_unused_result));

/* Hex of the nonce (lowercase, NUL-terminated) and back. */
void admin_auth_nonce_hex(const uint8_t *nonce, char *hex);
bool admin_auth_nonce_parse(const char *hex, size_t len, uint8_t *nonce) __attribute__((warn_unused_result));

#endif
