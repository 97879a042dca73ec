/*
 * common/auth: MAC sign/verify (tampering, wrong key, truncation) against
 * libsodium's keyed BLAKE2b, and key files (format, permissions, owner).
 */
#include "common/auth.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hasp/errors.h"
#include "tests/test_util.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/hasp_test_auth_XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	return auth_init();
}

static int teardown(void **state)
{
	(void)state;
	return rmdir(dir);
}

static void key_of(struct auth_key *k, uint8_t seed)
{
	for (uint32_t i = 0; i < AUTH_KEY_SIZE; i++)
		k->bytes[i] = (uint8_t)(seed + i);
}

/* Writes text into dir/name with mode; returns the path in path. */
static void write_file(char *path, const char *name, const char *text, size_t size, mode_t mode)
{
	snprintf(path, 128, "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, size), (ssize_t)size);
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(close(fd), 0);
}

static void test_auth_mac_verifies_and_any_flipped_bit_fails(void **state)
{
	(void)state;
	struct auth_key k;
	uint8_t msg[200], mac[AUTH_MAC_SIZE];

	key_of(&k, 1);
	for (uint32_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)(i * 7);
	auth_mac(&k, msg, sizeof(msg), mac);
	assert_true(auth_verify(&k, msg, sizeof(msg), mac));
	for (uint32_t i = 0; i < sizeof(msg); i++) {
		for (int b = 0; b < 8; b += 3) {
			msg[i] ^= (uint8_t)(1u << b);
			assert_false(auth_verify(&k, msg, sizeof(msg), mac));
			msg[i] ^= (uint8_t)(1u << b);
		}
	}
	for (uint32_t i = 0; i < AUTH_MAC_SIZE; i++) {
		mac[i] ^= 0x80;
		assert_false(auth_verify(&k, msg, sizeof(msg), mac));
		mac[i] ^= 0x80;
	}
	assert_true(auth_verify(&k, msg, sizeof(msg), mac));
}

static void test_auth_wrong_key_and_truncated_message_fail(void **state)
{
	(void)state;
	struct auth_key k, other;
	uint8_t msg[64] = { 0 }, mac[AUTH_MAC_SIZE];

	key_of(&k, 1);
	key_of(&other, 2);
	auth_mac(&k, msg, sizeof(msg), mac);
	assert_false(auth_verify(&other, msg, sizeof(msg), mac));
	for (size_t size = 0; size < sizeof(msg); size++)
		assert_false(auth_verify(&k, msg, size, mac));
}

static void test_auth_mac_is_keyed_blake2b_128(void **state)
{
	(void)state;
	struct auth_key k;
	uint8_t mac[AUTH_MAC_SIZE];
	/* BLAKE2b-128 keyed with bytes 0..31 over "abc", computed independently
	 * with Python's hashlib.blake2b(b"abc", key=bytes(range(32)),
	 * digest_size=16). */
	static const uint8_t want[AUTH_MAC_SIZE] = { 0x1a, 0x64, 0xbe, 0x47, 0xe4, 0x72, 0x9d, 0x95,
						     0x1c, 0x30, 0x2e, 0xe5, 0x43, 0xf9, 0x7c, 0xf3 };

	key_of(&k, 0);
	auth_mac(&k, "abc", 3, mac);
	assert_memory_equal(mac, want, sizeof(want));
}

static void test_auth_key_save_then_load_round_trips_with_mode_0600(void **state)
{
	(void)state;
	struct auth_key k, got;
	char path[128];
	struct stat st;

	auth_key_generate(&k);
	snprintf(path, sizeof(path), "%s/cluster.key", dir);
	assert_int_equal(auth_key_save(path, &k), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_size, AUTH_KEY_FILE_SIZE);
	assert_int_equal(auth_key_load(path, &got), 0);
	assert_memory_equal(got.bytes, k.bytes, AUTH_KEY_SIZE);
	assert_int_equal(auth_key_save(path, &k), -HASP_EEXIST);
	assert_int_equal(unlink(path), 0);
}

static void test_auth_key_load_refuses_group_or_other_bits(void **state)
{
	(void)state;
	char text[AUTH_KEY_FILE_SIZE + 1], path[128];
	struct auth_key got;
	const mode_t modes[] = { 0640, 0604, 0644, 0660, 0610, 0601 };

	memset(text, 'a', AUTH_KEY_SIZE * 2u);
	text[AUTH_KEY_SIZE * 2u] = '\n';
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		write_file(path, "k", text, AUTH_KEY_FILE_SIZE, modes[i]);
		memset(got.bytes, 0x55, AUTH_KEY_SIZE);
		assert_int_equal(auth_key_load(path, &got), -HASP_ECONFIG);
		for (uint32_t j = 0; j < AUTH_KEY_SIZE; j++)
			assert_int_equal(got.bytes[j], 0);
		assert_int_equal(unlink(path), 0);
	}
	write_file(path, "k", text, AUTH_KEY_FILE_SIZE, 0400);
	assert_int_equal(auth_key_load(path, &got), 0);
	assert_int_equal(got.bytes[0], 0xaa);
	assert_int_equal(unlink(path), 0);
}

static void test_auth_key_load_refuses_bad_length_and_bad_hex(void **state)
{
	(void)state;
	char text[AUTH_KEY_FILE_SIZE + 2], path[128];
	struct auth_key got;

	memset(text, '0', sizeof(text));
	text[AUTH_KEY_SIZE * 2u] = '\n';
	/* short, no newline, one byte too many */
	write_file(path, "k", text, AUTH_KEY_FILE_SIZE - 1, 0600);
	assert_int_equal(auth_key_load(path, &got), -HASP_ELENGTH);
	assert_int_equal(unlink(path), 0);
	text[AUTH_KEY_SIZE * 2u] = '0';
	write_file(path, "k", text, AUTH_KEY_FILE_SIZE, 0600);
	assert_int_equal(auth_key_load(path, &got), -HASP_ELENGTH);
	assert_int_equal(unlink(path), 0);
	text[AUTH_KEY_SIZE * 2u] = '\n';
	text[AUTH_KEY_FILE_SIZE] = '\n';
	write_file(path, "k", text, AUTH_KEY_FILE_SIZE + 1, 0600);
	assert_int_equal(auth_key_load(path, &got), -HASP_ELENGTH);
	assert_int_equal(unlink(path), 0);
	write_file(path, "k", "", 0, 0600);
	assert_int_equal(auth_key_load(path, &got), -HASP_ELENGTH);
	assert_int_equal(unlink(path), 0);
	/* right length, not hex */
	text[5] = 'g';
	write_file(path, "k", text, AUTH_KEY_FILE_SIZE, 0600);
	assert_int_equal(auth_key_load(path, &got), -HASP_ECORRUPT);
	assert_int_equal(unlink(path), 0);
	text[5] = ' ';
	write_file(path, "k", text, AUTH_KEY_FILE_SIZE, 0600);
	assert_int_equal(auth_key_load(path, &got), -HASP_ECORRUPT);
	assert_int_equal(unlink(path), 0);
}

static void test_auth_key_load_refuses_missing_file_and_directory(void **state)
{
	(void)state;
	struct auth_key got;
	char path[128];

	snprintf(path, sizeof(path), "%s/absent", dir);
	assert_int_equal(auth_key_load(path, &got), -HASP_ESYS);
	assert_int_equal(auth_key_load(dir, &got), -HASP_ECONFIG);
}

/* Per-node key pairs (docs/SECURITY.md 3.5): both ends of a pair derive the
 * same two keys, crossed; a third node's pair keys differ from both. */
static void test_auth_pair_keys_agree_crossed_and_differ_per_pair(void **state)
{
	(void)state;
	struct auth_key sk[3], tx[3][3], rx[3][3];
	uint8_t pub[3][AUTH_PUBLIC_SIZE];
	for (int i = 0; i < 3; i++) {
		auth_key_generate(&sk[i]);
		assert_int_equal(auth_public_key(&sk[i], pub[i]), 0);
	}
	for (uint32_t a = 0; a < 3; a++)
		for (uint32_t b = 0; b < 3; b++)
			if (a != b)
				assert_int_equal(auth_pair_keys(a + 1, &sk[a], pub[a], b + 1, pub[b], &tx[a][b],
								&rx[a][b]),
						 0);
	/* 1 -> 2 and 2 <- 1 are one key, the other direction another. */
	assert_memory_equal(tx[0][1].bytes, rx[1][0].bytes, AUTH_KEY_SIZE);
	assert_memory_equal(rx[0][1].bytes, tx[1][0].bytes, AUTH_KEY_SIZE);
	assert_memory_not_equal(tx[0][1].bytes, rx[0][1].bytes, AUTH_KEY_SIZE);
	/* Node 3 holds keys for its own pairs only. */
	for (uint32_t b = 0; b < 2; b++) {
		assert_memory_not_equal(tx[2][b].bytes, tx[0][1].bytes, AUTH_KEY_SIZE);
		assert_memory_not_equal(tx[2][b].bytes, tx[1][0].bytes, AUTH_KEY_SIZE);
	}
	assert_memory_not_equal(tx[2][0].bytes, tx[2][1].bytes, AUTH_KEY_SIZE);
	/* A MAC under 2 -> 1 verifies under 1's rx key from 2, and not under
	 * the key node 3 shares with node 1. */
	uint8_t mac[AUTH_MAC_SIZE];
	auth_mac(&tx[1][0], "raft", 4, mac);
	assert_true(auth_verify(&rx[0][1], "raft", 4, mac));
	assert_false(auth_verify(&rx[0][2], "raft", 4, mac));
	/* The same public key twice (equal ids) is no pair. */
	assert_int_equal(auth_pair_keys(1, &sk[0], pub[0], 1, pub[1], &tx[0][0], &rx[0][0]), -HASP_EINVAL);
}

/* Hostile public keys: a low-order point gives no key (and the outputs are
 * zeroed); bad hex, the wrong length and the all-zero key do not parse. */
static void test_auth_public_keys_hostile_input_refused(void **state)
{
	(void)state;
	struct auth_key sk, tx, rx;
	uint8_t pub[AUTH_PUBLIC_SIZE], bad[AUTH_PUBLIC_SIZE] = { 1 }; /* the point of order 1: u = 1 */
	static const struct auth_key zero;
	auth_key_generate(&sk);
	assert_int_equal(auth_public_key(&sk, pub), 0);
	assert_int_equal(auth_pair_keys(1, &sk, pub, 2, bad, &tx, &rx), -HASP_EINVAL);
	assert_memory_equal(tx.bytes, zero.bytes, AUTH_KEY_SIZE);
	assert_memory_equal(rx.bytes, zero.bytes, AUTH_KEY_SIZE);

	char hex[AUTH_PUBLIC_HEX_SIZE], text[AUTH_PUBLIC_HEX_SIZE + 2];
	uint8_t back[AUTH_PUBLIC_SIZE];
	auth_public_format(pub, hex);
	assert_int_equal(strlen(hex), 64);
	assert_int_equal(auth_public_parse(hex, back), 0);
	assert_memory_equal(back, pub, AUTH_PUBLIC_SIZE);
	snprintf(text, sizeof(text), "%s", hex);
	text[5] = 'g';
	assert_int_equal(auth_public_parse(text, back), -HASP_EINVAL);
	assert_int_equal(auth_public_parse(hex + 2, back), -HASP_EINVAL); /* 62 digits */
	snprintf(text, sizeof(text), "%s0", hex);
	assert_int_equal(auth_public_parse(text, back), -HASP_EINVAL); /* 65 */
	assert_int_equal(auth_public_parse("", back), -HASP_EINVAL);
	memset(text, '0', 64);
	text[64] = '\0';
	assert_int_equal(auth_public_parse(text, back), -HASP_EINVAL); /* all zero */
	snprintf(text, sizeof(text), " %.63s", hex);
	assert_int_equal(auth_public_parse(text, back), -HASP_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auth_mac_verifies_and_any_flipped_bit_fails),
		cmocka_unit_test(test_auth_wrong_key_and_truncated_message_fail),
		cmocka_unit_test(test_auth_mac_is_keyed_blake2b_128),
		cmocka_unit_test(test_auth_key_save_then_load_round_trips_with_mode_0600),
		cmocka_unit_test(test_auth_key_load_refuses_group_or_other_bits),
		cmocka_unit_test(test_auth_key_load_refuses_bad_length_and_bad_hex),
		cmocka_unit_test(test_auth_key_load_refuses_missing_file_and_directory),
		cmocka_unit_test(test_auth_pair_keys_agree_crossed_and_differ_per_pair),
		cmocka_unit_test(test_auth_public_keys_hostile_input_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
