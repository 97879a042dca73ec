/*
 * peer_seal: seals raft messages as one member would for another (test
 * helper of itest_peer_forge.sh and itest_peer_keys.sh; docs/SECURITY.md
 * 3.5). It plays an attacker who holds one member's key file and tries to
 * speak as another, or a removed member that still holds its old key.
 *
 *   peer_seal KEYFILE SELF_ID PEER_ID PEER_PUBLIC_HEX EPOCH < in > out
 *
 * in: records of u16 LE length + a raft message; out: the same records,
 * each message followed by the 32-byte trailer (node/peer_auth.h) under the
 * pair key of (SELF_ID, PEER_ID), counters 1, 2, ... in EPOCH. Exit 0, or 1
 * with a message (the key itself is never printed).
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/auth.h"
#include "node/peer_auth.h"

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: peer_seal KEYFILE SELF_ID PEER_ID PEER_PUBLIC_HEX EPOCH\n");
		return 1;
	}
	struct auth_key sk, tx, rx;
	uint8_t self_pub[AUTH_PUBLIC_SIZE], peer_pub[AUTH_PUBLIC_SIZE];
	uint32_t self_id = (uint32_t)strtoul(argv[2], NULL, 10), peer_id = (uint32_t)strtoul(argv[3], NULL, 10);
	struct peer_auth_tx seq = { .epoch = strtoull(argv[5], NULL, 10) };
	if (auth_init() != 0 || auth_key_load(argv[1], &sk) != 0 || auth_public_key(&sk, self_pub) != 0 ||
	    auth_public_parse(argv[4], peer_pub) != 0 ||
	    auth_pair_keys(self_id, &sk, self_pub, peer_id, peer_pub, &tx, &rx) != 0) {
		fprintf(stderr, "peer_seal: cannot derive the pair key (key file, ids or public key)\n");
		return 1;
	}
	auth_key_wipe(&sk);
	uint8_t len_le[2], buf[2048];
	while (fread(len_le, 1, 2, stdin) == 2) {
		size_t n = (size_t)len_le[0] | (size_t)len_le[1] << 8;
		if (n == 0 || n + PEER_AUTH_TRAILER_SIZE > sizeof(buf) || fread(buf, 1, n, stdin) != n) {
			fprintf(stderr, "peer_seal: bad record\n");
			return 1;
		}
		size_t sealed = peer_auth_seal(&tx, &seq, buf, n, sizeof(buf));
		uint8_t out_le[2] = { (uint8_t)sealed, (uint8_t)(sealed >> 8) };
		if (sealed == 0 || fwrite(out_le, 1, 2, stdout) != 2 || fwrite(buf, 1, sealed, stdout) != sealed)
			return 1;
	}
	auth_key_wipe(&tx);
	auth_key_wipe(&rx);
	return fflush(stdout) == 0 ? 0 : 1;
}
