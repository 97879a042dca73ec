/*
 * Message authentication and key files, on top of libsodium.
 *
 * hasp writes no cryptography of its own: a MAC is keyed BLAKE2b
 * (crypto_generichash) cut to 16 bytes and compared in constant time
 * (crypto_verify_16); keys are 32 random bytes from randombytes_buf().
 * docs/SECURITY.md says why these primitives and how keys are handed out.
 *
 * Key file format (one key per file): exactly 64 lowercase or uppercase
 * hex digits followed by one newline, 65 bytes, nothing else. The file must
 * be a regular file owned by the reading user with no group or other
 * permission bits (0600 or 0400); anything else is refused. Keys are never
 * logged, not even in part.
 */
#ifndef HASP_COMMON_AUTH_H
#define HASP_COMMON_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUTH_KEY_SIZE 32u
#define AUTH_MAC_SIZE 16u
#define AUTH_KEY_FILE_SIZE (AUTH_KEY_SIZE * 2u + 1u)

struct auth_key {
	uint8_t bytes[AUTH_KEY_SIZE];
};

/* Initialises libsodium once per process; safe to call again and from
 * several threads. Returns 0 or -HASP_ESYS. */
int auth_init(void) __attribute__((warn_unused_result));

/* Writes the MAC of data[0..size) under key into mac[AUTH_MAC_SIZE].
 * Requires auth_init(). */
void auth_mac(const struct auth_key *key, const void *data, size_t size, uint8_t *mac);

/* True when mac is the MAC of data[0..size) under key. The comparison takes
 * the same time whatever the bytes are. */
bool auth_verify(const struct auth_key *key, const void *data, size_t size, const uint8_t *mac)
	__attribute__((warn_unused_result));

/* Fills key with fresh random bytes. */
void auth_key_generate(struct auth_key *key);

/* Loads a key file (format above). Returns 0, -HASP_ESYS (cannot open or
 * stat), -HASP_ECONFIG (not a regular file, wrong owner or permissions
 * wider than 0600), -HASP_ELENGTH (not exactly 65 bytes) or -HASP_ECORRUPT
 * (not hex). On error key is zeroed; the error never contains key bytes. */
int auth_key_load(const char *path, struct auth_key *key) __attribute__((warn_unused_result));

/* Creates path with mode 0600 (refusing to overwrite an existing file) and
 * writes key in the file format. Returns 0, -HASP_EEXIST or -HASP_ESYS. */
int auth_key_save(const char *path, const struct auth_key *key) __attribute__((warn_unused_result));

/* Zeroes key in a way the compiler cannot drop. */
void auth_key_wipe(struct auth_key *key);

/*
 * Per-node static key pairs (docs/SECURITY.md 3.5). A node's secret key is
 * an ordinary key file: any 32 random bytes are an X25519 secret key.
 */
#define AUTH_PUBLIC_SIZE 32u
#define AUTH_PUBLIC_HEX_SIZE (AUTH_PUBLIC_SIZE * 2u + 1u) /* with the NUL */

/* The X25519 public key of secret (crypto_scalarmult_base). Returns 0, or
 * -HASP_EINVAL for a secret whose public key would be all zero. */
int auth_public_key(const struct auth_key *secret, uint8_t pub[AUTH_PUBLIC_SIZE])
	__attribute__((warn_unused_result));

/* Parses exactly 64 hex digits (text is NUL-terminated) into pub. Returns
 * 0 or -HASP_EINVAL (wrong length, not hex, or the all-zero key). */
int auth_public_parse(const char *text, uint8_t pub[AUTH_PUBLIC_SIZE]) __attribute__((warn_unused_result));

/* Writes pub as 64 lowercase hex digits and a NUL into text. */
void auth_public_format(const uint8_t pub[AUTH_PUBLIC_SIZE], char text[AUTH_PUBLIC_HEX_SIZE]);

/* The two directional MAC keys a node shares with one peer, from libsodium's
 * crypto_kx (X25519 then BLAKE2b-512 over the shared point and both public
 * keys): tx for what self sends to the peer, rx for what it receives from
 * it. The node with the smaller id plays crypto_kx's client, so both ends
 * compute the same two keys, crossed. Returns 0, or -HASP_EINVAL when the
 * peer's public key is unusable (a low-order point) or the ids are equal;
 * tx and rx are then zero. Computed once per peer, never per datagram. */
int auth_pair_keys(uint32_t self_id, const struct auth_key *self_secret, const uint8_t self_pub[AUTH_PUBLIC_SIZE],
		   uint32_t peer_id, const uint8_t peer_pub[AUTH_PUBLIC_SIZE], struct auth_key *tx,
		   struct auth_key *rx) __attribute__((warn_unused_result));

#endif
