/*
 * Writes the seed corpus of fuzz_wire_decode: one file per sample message
 * of tests/wire/wire_samples.h (every request and reply body) plus a few
 * invalid datagrams. Run by hand when the protocol changes:
 *   build/tests/wire/gen_wire_corpus tests/wire/corpus_wire
 */
#include <stdio.h>
#include <string.h>

#include "common/limits.h"
#include "hasp/errors.h"
#include "hasp/wire.h"
#include "tests/wire/wire_samples.h"

static int write_file(const char *dir, const char *name, const uint8_t *data, size_t size)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (f == NULL) {
		perror(path);
		return 1;
	}
	if (fwrite(data, 1, size, f) != size) {
		fclose(f);
		return 1;
	}
	return fclose(f) != 0;
}

int main(int argc, char **argv)
{
	static struct wire_sample s[WIRE_SAMPLES_MAX];
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	size_t count = wire_samples(s);
	int rc = 0, n = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < count; i++) {
		n = hasp_wire_encode(&s[i].msg, buf, sizeof(buf));
		if (n < 0) {
			fprintf(stderr, "%s: %s\n", s[i].label, hasp_strerror(n));
			return 1;
		}
		rc |= write_file(argv[1], s[i].label, buf, (size_t)n);
	}
	/* Invalid ones: a bare header, and the last sample with a bad version. */
	rc |= write_file(argv[1], "bad_truncated", buf, HASP_WIRE_HEADER_SIZE - 1);
	buf[4] = 2;
	rc |= write_file(argv[1], "bad_version", buf, (size_t)n);
	return rc;
}
