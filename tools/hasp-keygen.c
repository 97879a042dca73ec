/*
 * hasp-keygen: writes a new random key file for hasp (docs/SECURITY.md).
 *
 *   hasp-keygen FILE
 *
 * The file is created with mode 0600 and never overwritten (remove the old
 * key yourself when you rotate it); it holds 64 hex digits and a newline,
 * the format common/auth.h reads. The key is never printed. Exit 0 on
 * success, 1 when the file exists or cannot be written, 2 on bad usage.
 */
#include <stdio.h>
#include <string.h>

#include "common/auth.h"
#include "hasp/errors.h"

int main(int argc, char **argv)
{
	struct auth_key key;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: hasp-keygen FILE  (writes a new 0600 key file; never overwrites)\n");
		return 2;
	}
	if (auth_init() != 0) {
		fprintf(stderr, "hasp-keygen: libsodium failed to initialise\n");
		return 1;
	}
	auth_key_generate(&key);
	int rc = auth_key_save(argv[1], &key);
	auth_key_wipe(&key);
	if (rc != 0) {
		fprintf(stderr, "hasp-keygen: %s: %s\n", argv[1],
			rc == -HASP_EEXIST ? "exists (remove it first to rotate the key)" : hasp_strerror(rc));
		return 1;
	}
	return 0;
}
