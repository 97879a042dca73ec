/*
 * bench_crypto: the cost of peer authentication per raft datagram
 * (docs/SECURITY.md, "Measured cost"). Not a test: it never gates
 * anything.
 *
 * For each datagram size it times, over many iterations, the sender's
 * peer_auth_seal() (keyed BLAKE2b-128 over the message, epoch and counter)
 * and the receiver's peer_auth_open() plus the replay window, and for
 * scale a crc32c of the same bytes (what hasp already spends per WAL
 * record). Then the same for client datagrams of wire v2
 * (common/wire_auth.h): hasp_wire_seal() and hasp_wire_tag_ok() on a
 * typical request size, what the node and the client each pay per
 * request and reply. Five rounds each; the median round is printed.
 *
 *   bench_crypto [iterations]      (default 200000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/auth.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/wire_auth.h"
#include "hasp/wire.h"
#include "node/peer_auth.h"

#define ROUNDS 5

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v)
{
	qsort(v, ROUNDS, sizeof(*v), cmp_double);
	return v[ROUNDS / 2];
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 36, 64, 128, 512, 1024, 1400 };
	static uint8_t buf[1500 + PEER_AUTH_TRAILER_SIZE];
	long iterations = argc > 1 ? atol(argv[1]) : 200000;
	struct auth_key key;
	volatile uint64_t sink = 0;

	if (iterations < 1000 || iterations > 100000000 || auth_init() != 0) {
		fprintf(stderr, "usage: bench_crypto [iterations 1000..1e8]\n");
		return 2;
	}
	auth_key_generate(&key);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 13);
	printf("bench_crypto iterations=%ld rounds=%d (median round)\n", iterations, ROUNDS);
	printf("%8s %10s %10s %10s %10s\n", "bytes", "seal_ns", "open_ns", "both_ns", "crc32c_ns");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t size = sizes[s];
		double seal_ns[ROUNDS], open_ns[ROUNDS], crc_ns[ROUNDS];
		for (int r = 0; r < ROUNDS; r++) {
			struct peer_auth_tx tx = { .epoch = 1 };
			struct peer_auth_window w = { 0 };
			struct peer_auth_tag tag;
			size_t sealed = 0;

			uint64_t t0 = clock_monotonic_ns();
			for (long i = 0; i < iterations; i++) {
				sealed = peer_auth_seal(&key, &tx, buf, size, sizeof(buf));
				sink += buf[size + 20];
			}
			uint64_t t1 = clock_monotonic_ns();
			/* The same sealed datagram each time: the MAC is checked
			 * in full; the window sees a fresh counter via the tag. */
			for (long i = 0; i < iterations; i++) {
				long msg = peer_auth_open(&key, buf, sealed, &tag);
				tag.counter = (uint64_t)i + 1;
				sink += (uint64_t)msg + peer_auth_window_accept(&w, 2, &tag);
			}
			uint64_t t2 = clock_monotonic_ns();
			for (long i = 0; i < iterations; i++) {
				buf[0] = (uint8_t)i;
				sink += crc32c(buf, size);
			}
			uint64_t t3 = clock_monotonic_ns();
			seal_ns[r] = (double)(t1 - t0) / (double)iterations;
			open_ns[r] = (double)(t2 - t1) / (double)iterations;
			crc_ns[r] = (double)(t3 - t2) / (double)iterations;
		}
		double a = median(seal_ns), b = median(open_ns);
		printf("%8zu %10.1f %10.1f %10.1f %10.1f\n", size, a, b, a + b, median(crc_ns));
	}
	/* Client wire v2: 68 bytes is an ACQUIRE of a 10-byte name, 64 a
	 * GRANTED reply, 300 a KV_PUT of a 200-byte value. */
	static const size_t client_sizes[] = { 64, 68, 300, 1472 };
	printf("client wire v2 (tag over the datagram, zeroed tag field)\n");
	printf("%8s %10s %10s %10s\n", "bytes", "seal_ns", "verify_ns", "both_ns");
	for (size_t s = 0; s < sizeof(client_sizes) / sizeof(client_sizes[0]); s++) {
		size_t size = client_sizes[s];
		double seal_ns[ROUNDS], verify_ns[ROUNDS];
		for (int r = 0; r < ROUNDS; r++) {
			uint64_t t0 = clock_monotonic_ns();
			for (long i = 0; i < iterations; i++) {
				buf[HASP_WIRE_HEADER_SIZE] = (uint8_t)i;
				hasp_wire_seal(&key, buf, size);
				sink += buf[HASP_WIRE_TAG_OFFSET];
			}
			uint64_t t1 = clock_monotonic_ns();
			for (long i = 0; i < iterations; i++)
				sink += hasp_wire_tag_ok(&key, buf, size);
			uint64_t t2 = clock_monotonic_ns();
			seal_ns[r] = (double)(t1 - t0) / (double)iterations;
			verify_ns[r] = (double)(t2 - t1) / (double)iterations;
		}
		double a = median(seal_ns), b = median(verify_ns);
		printf("%8zu %10.1f %10.1f %10.1f\n", size, a, b, a + b);
	}
	return sink == 42 ? 1 : 0;
}
