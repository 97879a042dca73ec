/*
 * bench_wal: durable append throughput and latency of the io_uring WAL
 * against a plain pwrite + fdatasync loop, measured in the same run on the
 * same filesystem (ratios, not absolute numbers, are what compare across
 * machines). Not a test: it never gates anything.
 *
 * Load: a closed loop keeps `window` appends outstanding (appended, not yet
 * reported durable); each one's latency runs from its append to the poll
 * that reports it durable. The baseline does the same with a blocking loop:
 * it takes every outstanding record, writes them with one pwrite and calls
 * fdatasync (group commit without pipelining).
 *
 *   bench_wal [-d dir] [-t seconds_per_case] [-m linked|dsync|drain|all|compare]
 *
 * Defaults: -d /tmp (the disk filesystem here), -t 0.7, -m all (the three
 * sync modes on the 512 B cases, then the WAL's default mode, linked, on the
 * full matrix); compare runs only the first part, a mode name only the
 * second.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "hasp/errors.h"
#include "storage/storage.h"
#include "storage/uring.h"

#define SAMPLES_MAX (4u << 20)
#define WINDOW_MAX 64u

struct result {
	double appends_per_s;
	double p50_us, p99_us, p999_us;
	uint64_t count;
	double space_factor; /* log bytes used / record bytes */
	bool direct;
};

static uint64_t *samples;
static uint64_t *append_ns;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void summarize(struct result *r, uint64_t n, uint64_t elapsed_ns)
{
	qsort(samples, n, sizeof(samples[0]), cmp_u64);
	r->count = n;
	r->appends_per_s = n ? (double)n * 1e9 / (double)elapsed_ns : 0;
	r->p50_us = n ? (double)samples[n / 2] / 1e3 : 0;
	r->p99_us = n ? (double)samples[n * 99 / 100] / 1e3 : 0;
	r->p999_us = n ? (double)samples[n * 999 / 1000] / 1e3 : 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int run_wal(const char *dir, enum wal_sync_mode mode, uint32_t size, uint32_t window,
		   double seconds, struct result *r, char *fs, size_t fs_size)
{
	struct storage s;
	struct storage_config cfg = { .dir = dir, .sync_mode = mode };
	struct hard_state hs;
	static uint8_t payload[4096];
	uint64_t n = 0, next = 1, durable = 0;
	int rc;

	mkdir(dir, 0755);
	if ((rc = storage_open(&s, &cfg, &hs)) != 0) {
		fprintf(stderr, "storage_open %s: %s\n", dir, hasp_strerror(rc));
		return rc;
	}
	snprintf(fs, fs_size, "%s", uring_io_fs_name(s.uring));
	memset(payload, 0x5a, sizeof(payload));
	uint64_t start = clock_monotonic_ns(), end = start + (uint64_t)(seconds * 1e9);
	uint64_t now = start;
	while (now < end && n < SAMPLES_MAX) {
		while (next - 1 - durable < window) {
			struct wal_entry e = { next, 1, 0, size, payload };
			rc = wal_append(&s.wal, &e);
			if (rc == -HASP_EFULL)
				break;
			if (rc != 0) {
				fprintf(stderr, "append: %s\n", hasp_strerror(rc));
				storage_close(&s);
				return rc;
			}
			append_ns[next % SAMPLES_MAX] = now;
			next++;
		}
		if ((rc = wal_submit(&s.wal)) != 0)
			break;
		(void)storage_poll(&s, true);
		now = clock_monotonic_ns();
		for (uint64_t d = wal_durable_index(&s.wal); durable < d && n < SAMPLES_MAX;)
			samples[n++] = now - append_ns[++durable % SAMPLES_MAX];
		if (storage_failed(&s)) {
			fprintf(stderr, "wal failed\n");
			break;
		}
	}
	summarize(r, n, now - start);
	r->direct = wal_direct_io(&s.wal);
	r->space_factor = s.wal.stats.records_bytes
				  ? (double)(s.wal.stats.records_bytes + s.wal.stats.padding_bytes) /
					    (double)s.wal.stats.records_bytes
				  : 0;
	rc = wal_drain(&s.wal);
	storage_close(&s);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}

/* The baseline: blocking group commit with pwrite + fdatasync, buffered,
 * into a preallocated file, records framed like the WAL's (32-byte header). */
static int run_plain(const char *dir, uint32_t size, uint32_t window, double seconds,
		     struct result *r)
{
	char path[600];
	uint32_t rsize = 32 + ((size + 7) & ~7u);
	uint8_t *buf = hasp_alloc((size_t)rsize * WINDOW_MAX);
	uint64_t n = 0, off = 0, file_size = 256ull << 20;
	int fd;

	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/plain.log", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || buf == NULL || fallocate(fd, 0, 0, (off_t)file_size) != 0) {
		fprintf(stderr, "plain: %s\n", strerror(errno));
		return -1;
	}
	memset(buf, 0x5a, (size_t)rsize * WINDOW_MAX);
	uint64_t start = clock_monotonic_ns(), end = start + (uint64_t)(seconds * 1e9), now = start;
	while (now < end && n + window < SAMPLES_MAX) {
		/* Every outstanding record was enqueued when the previous sync
		 * returned; write them all, sync once. */
		uint64_t enq = now;
		size_t len = (size_t)rsize * window;
		if (off + len > file_size)
			off = 0;
		if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len || fdatasync(fd) != 0) {
			fprintf(stderr, "plain: %s\n", strerror(errno));
			break;
		}
		off += len;
		now = clock_monotonic_ns();
		for (uint32_t i = 0; i < window; i++)
			samples[n++] = now - enq;
	}
	summarize(r, n, now - start);
	close(fd);
	hasp_free(buf);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

static const char *mode_name(enum wal_sync_mode m)
{
	return m == WAL_SYNC_LINKED ? "linked" : m == WAL_SYNC_DSYNC ? "dsync" : "drain";
}

int main(int argc, char **argv)
{
	const char *base = "/tmp";
	double seconds = 0.7;
	const char *modes = "all";
	char dir[512], fs[32] = "?";
	struct utsname un;
	static const uint32_t sizes[] = { 64, 512, 4096 };
	static const uint32_t windows[] = { 1, 16, 64 };

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-d") == 0 && i + 1 < argc)
			base = argv[++i];
		else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
			modes = argv[++i];
		else {
			fprintf(stderr, "usage: bench_wal [-d dir] [-t seconds_per_case] "
					"[-m linked|dsync|drain|all|compare]\n");
			return 1;
		}
	}
	samples = hasp_calloc(SAMPLES_MAX, sizeof(uint64_t));
	append_ns = hasp_calloc(SAMPLES_MAX, sizeof(uint64_t));
	if (samples == NULL || append_ns == NULL)
		return 1;
	if (log_set_level("storage", LOG_LEVEL_ERROR) != 0) {
		fprintf(stderr, "bench_wal: no log topic \"storage\"\n");
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/hasp-bench-wal-%d", base, (int)getpid());
	uname(&un);

	printf("# bench_wal");
	for (int i = 1; i < argc; i++)
		printf(" %s", argv[i]);
	printf("\n# kernel %s, %.2f s per case, dir %s\n", un.release, seconds, base);

	/* Sync modes compared on 512 B records. */
	if (strcmp(modes, "all") == 0 || strcmp(modes, "compare") == 0) {
		printf("\n## sync mode (512 B records)\n");
		printf("%-7s %7s %12s %10s %10s\n", "mode", "window", "appends/s", "p50_us", "p99_us");
		for (enum wal_sync_mode m = WAL_SYNC_LINKED; m <= WAL_SYNC_DRAIN; m++) {
			for (uint32_t w = 0; w < 3; w++) {
				struct result r;
				if (run_wal(dir, m, 512, windows[w], seconds, &r, fs, sizeof(fs)) != 0)
					return 1;
				printf("%-7s %7u %12.0f %10.1f %10.1f\n", mode_name(m), windows[w],
				       r.appends_per_s, r.p50_us, r.p99_us);
			}
		}
	}
	if (strcmp(modes, "compare") == 0)
		return 0;
	enum wal_sync_mode mode = WAL_SYNC_LINKED; /* the WAL's default */
	if (strcmp(modes, "dsync") == 0)
		mode = WAL_SYNC_DSYNC;
	else if (strcmp(modes, "drain") == 0)
		mode = WAL_SYNC_DRAIN;
	struct result first = { 0 };
	printf("\n## wal (%s) vs pwrite+fdatasync loop\n", mode_name(mode));
	printf("%6s %6s | %11s %9s %9s %6s | %11s %9s %9s | %7s\n", "size", "window", "wal/s",
	       "p50_us", "p99_us", "space", "plain/s", "p50_us", "p99_us", "ratio");
	for (uint32_t si = 0; si < 3; si++) {
		for (uint32_t w = 0; w < 3; w++) {
			struct result a, b;
			if (run_wal(dir, mode, sizes[si], windows[w], seconds, &a, fs, sizeof(fs)) != 0 ||
			    run_plain(dir, sizes[si], windows[w], seconds, &b) != 0)
				return 1;
			if (si == 0 && w == 0)
				first = a;
			printf("%6u %6u | %11.0f %9.1f %9.1f %5.2fx | %11.0f %9.1f %9.1f | %6.2fx\n",
			       sizes[si], windows[w], a.appends_per_s, a.p50_us, a.p99_us,
			       a.space_factor, b.appends_per_s, b.p50_us, b.p99_us,
			       b.appends_per_s > 0 ? a.appends_per_s / b.appends_per_s : 0);
		}
	}
	printf("\n# filesystem %s, O_DIRECT %s; space = log bytes per record byte "
	       "(batch headers, block rest left behind; packed, format version 2)\n",
	       fs, first.direct ? "yes" : "no (buffered fallback)");
	hasp_free(samples);
	hasp_free(append_ns);
	return 0;
}
