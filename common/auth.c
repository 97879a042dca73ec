/*
 * Thin wrapper of libsodium: MAC sign/verify and key files (common/auth.h).
 *
 * Kept apart from hasp_common so that only what needs libsodium links it.
 * The MAC is crypto_generichash (BLAKE2b) keyed with a 32-byte key and cut
 * to 16 bytes: a 128-bit tag leaves a forger a 2^-128 chance per try, and
 * BLAKE2b is about as fast as HMAC-SHA256 is slow (docs/SECURITY.md has the
 * measured ns per datagram).
 */
#include "common/auth.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/assert.h"
#include "hasp/errors.h"

static_assert(AUTH_KEY_SIZE == crypto_generichash_KEYBYTES, "a key is one BLAKE2b key");
static_assert(AUTH_MAC_SIZE >= crypto_generichash_BYTES_MIN, "BLAKE2b output is at least 16 bytes");
static_assert(AUTH_MAC_SIZE == 16, "auth_verify uses crypto_verify_16");

int auth_init(void)
{
	/* sodium_init() returns 1 when already initialised, -1 on failure. */
	return sodium_init() < 0 ? -HASP_ESYS : 0;
}

void auth_mac(const struct auth_key *key, const void *data, size_t size, uint8_t *mac)
{
	HASP_ASSERT(key != NULL && mac != NULL);
	HASP_ASSERT(data != NULL || size == 0);
	int rc = crypto_generichash(mac, AUTH_MAC_SIZE, data, size, key->bytes, AUTH_KEY_SIZE);
	HASP_ASSERT(rc == 0);
}

bool auth_verify(const struct auth_key *key, const void *data, size_t size, const uint8_t *mac)
{
	uint8_t want[AUTH_MAC_SIZE];

	HASP_ASSERT(mac != NULL);
	auth_mac(key, data, size, want);
	bool ok = crypto_verify_16(want, mac) == 0;
	sodium_memzero(want, sizeof(want));
	return ok;
}

void auth_key_generate(struct auth_key *key)
{
	HASP_ASSERT(key != NULL);
	randombytes_buf(key->bytes, sizeof(key->bytes));
}

void auth_key_wipe(struct auth_key *key)
{
	HASP_ASSERT(key != NULL);
	sodium_memzero(key->bytes, sizeof(key->bytes));
}

static_assert(AUTH_PUBLIC_SIZE == crypto_kx_PUBLICKEYBYTES, "a public key is an X25519 point");
static_assert(AUTH_KEY_SIZE == crypto_kx_SECRETKEYBYTES, "a key file holds an X25519 secret");
static_assert(AUTH_KEY_SIZE == crypto_kx_SESSIONKEYBYTES, "a crypto_kx session key is a MAC key");

int auth_public_key(const struct auth_key *secret, uint8_t pub[AUTH_PUBLIC_SIZE])
{
	HASP_ASSERT(secret != NULL && pub != NULL);
	if (crypto_scalarmult_base(pub, secret->bytes) != 0 || sodium_is_zero(pub, AUTH_PUBLIC_SIZE)) {
		sodium_memzero(pub, AUTH_PUBLIC_SIZE);
		return -HASP_EINVAL;
	}
	return 0;
}

int auth_public_parse(const char *text, uint8_t pub[AUTH_PUBLIC_SIZE])
{
	size_t bin_size = 0;
	const char *end = NULL;

	HASP_ASSERT(text != NULL && pub != NULL);
	if (strlen(text) != AUTH_PUBLIC_SIZE * 2u ||
	    sodium_hex2bin(pub, AUTH_PUBLIC_SIZE, text, AUTH_PUBLIC_SIZE * 2u, NULL, &bin_size, &end) != 0 ||
	    bin_size != AUTH_PUBLIC_SIZE || end != text + AUTH_PUBLIC_SIZE * 2u ||
	    sodium_is_zero(pub, AUTH_PUBLIC_SIZE)) {
		memset(pub, 0, AUTH_PUBLIC_SIZE);
		return -HASP_EINVAL;
	}
	return 0;
}

void auth_public_format(const uint8_t pub[AUTH_PUBLIC_SIZE], char text[AUTH_PUBLIC_HEX_SIZE])
{
	HASP_ASSERT(pub != NULL && text != NULL);
	sodium_bin2hex(text, AUTH_PUBLIC_HEX_SIZE, pub, AUTH_PUBLIC_SIZE);
}

int auth_pair_keys(uint32_t self_id, const struct auth_key *self_secret, const uint8_t self_pub[AUTH_PUBLIC_SIZE],
		   uint32_t peer_id, const uint8_t peer_pub[AUTH_PUBLIC_SIZE], struct auth_key *tx,
		   struct auth_key *rx)
{
	HASP_ASSERT(self_secret != NULL && self_pub != NULL && peer_pub != NULL && tx != NULL && rx != NULL);
	int rc = self_id == peer_id ? -1
		 : self_id < peer_id
			 ? crypto_kx_client_session_keys(rx->bytes, tx->bytes, self_pub, self_secret->bytes, peer_pub)
			 : crypto_kx_server_session_keys(rx->bytes, tx->bytes, self_pub, self_secret->bytes, peer_pub);
	if (rc != 0) {
		auth_key_wipe(tx);
		auth_key_wipe(rx);
		return -HASP_EINVAL;
	}
	return 0;
}

int auth_key_load(const char *path, struct auth_key *key)
{
	char text[AUTH_KEY_FILE_SIZE + 1]; /* one more byte shows a longer file */
	struct stat st;
	int rc = 0;

	HASP_ASSERT(path != NULL && key != NULL);
	auth_key_wipe(key);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -HASP_ESYS;
	if (fstat(fd, &st) != 0) {
		rc = -HASP_ESYS;
		goto out_close;
	}
	/* Owner-only, like ssh's private keys: a key others can read is no key. */
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
		rc = -HASP_ECONFIG;
		goto out_close;
	}
	size_t got = 0;
	while (got < sizeof(text)) {
		ssize_t n = read(fd, text + got, sizeof(text) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -HASP_ESYS;
			goto out_wipe;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got != AUTH_KEY_FILE_SIZE || text[AUTH_KEY_FILE_SIZE - 1] != '\n') {
		rc = -HASP_ELENGTH;
		goto out_wipe;
	}
	size_t bin_size = 0;
	const char *end = NULL;
	if (sodium_hex2bin(key->bytes, sizeof(key->bytes), text, AUTH_KEY_SIZE * 2u, NULL, &bin_size,
			   &end) != 0 ||
	    bin_size != AUTH_KEY_SIZE || end != text + AUTH_KEY_SIZE * 2u) {
		auth_key_wipe(key);
		rc = -HASP_ECORRUPT;
	}
out_wipe:
	sodium_memzero(text, sizeof(text));
out_close:
	close(fd);
	return rc;
}

int auth_key_save(const char *path, const struct auth_key *key)
{
	char text[AUTH_KEY_FILE_SIZE + 1];
	int rc = 0;

	HASP_ASSERT(path != NULL && key != NULL);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return errno == EEXIST ? -HASP_EEXIST : -HASP_ESYS;
	sodium_bin2hex(text, AUTH_KEY_SIZE * 2u + 1u, key->bytes, AUTH_KEY_SIZE);
	text[AUTH_KEY_SIZE * 2u] = '\n';
	/* The umask may have taken bits away, never added: still force 0600. */
	if (fchmod(fd, 0600) != 0) {
		rc = -HASP_ESYS;
		goto out;
	}
	size_t done = 0;
	while (done < AUTH_KEY_FILE_SIZE) {
		ssize_t n = write(fd, text + done, AUTH_KEY_FILE_SIZE - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = -HASP_ESYS;
			goto out;
		}
		done += (size_t)n;
	}
	if (fsync(fd) != 0)
		rc = -HASP_ESYS;
out:
	sodium_memzero(text, sizeof(text));
	close(fd);
	if (rc != 0)
		unlink(path);
	return rc;
}
