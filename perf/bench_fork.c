/*
 * bench_fork: what fork() costs a process on this machine, the reason the
 * node snapshots from a copy instead of a forked child (docs/STORAGE.md,
 * "Snapshots off the lcore"). A benchmark, not a test.
 *
 *   build/perf/perf/bench_fork [MiB] [rounds]      (default 100 MiB, 5)
 *
 * Touches MiB of private anonymous memory, then per round: fork() a child
 * that exits at once (how long fork() blocked the parent), reap it, and
 * rewrite the whole region: fork() write-protected every page, so each
 * first write after it is a fault, even with the child gone. The same with
 * the region kept out of children (MADV_DONTFORK), and the rewrite without
 * any fork, give the fault-free costs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int round_trip(unsigned char *p, size_t size, int value, double *fork_ms, double *rewrite_ms)
{
	double t0 = now_ms();
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	double t1 = now_ms();
	if (child < 0 || waitpid(child, NULL, 0) != child)
		return -1;
	double t2 = now_ms();
	memset(p, value, size);
	*fork_ms = t1 - t0;
	*rewrite_ms = now_ms() - t2;
	return 0;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 100;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	if (mib == 0 || mib > 4096 || rounds < 1 || rounds > 100) {
		fprintf(stderr, "usage: bench_fork [MiB 1..4096] [rounds 1..100]\n");
		return 2;
	}
	size_t size = mib << 20;
	unsigned char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return perror("mmap"), 1;
	memset(p, 1, size);
	double t0 = now_ms();
	memset(p, 2, size);
	printf("bench_fork: %zu MiB touched; rewrite without fork %.2f ms\n", mib, now_ms() - t0);
	for (int keep_out = 0; keep_out <= 1; keep_out++) {
		if (keep_out && madvise(p, size, MADV_DONTFORK) != 0)
			return perror("madvise"), 1;
		for (int r = 0; r < rounds; r++) {
			double f, w;
			if (round_trip(p, size, 3 + r, &f, &w) != 0)
				return perror("fork"), 1;
			printf("bench_fork: %s: fork %.2f ms, rewrite after it %.2f ms (%.1f us a page)\n",
			       keep_out ? "MADV_DONTFORK" : "in the child", f, w, w * 1e3 / (double)(size / 4096));
		}
	}
	munmap(p, size);
	return 0;
}
