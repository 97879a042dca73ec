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

#endif
