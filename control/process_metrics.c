/*
 * process_* series from /proc/self (see process_metrics.h). The formats
 * are proc(5)'s: /proc/self/stat's fields after the command name (which
 * may hold spaces and parentheses, so parsing starts after the last ')'),
 * /proc/stat's btime, and getrlimit(RLIMIT_NOFILE) for the descriptor limit.
 * Available bytes are what an unprivileged writer may still use (f_bavail),
 * as node_exporter's node_filesystem_avail_bytes.
 */
#include "control/process_metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "hasp/errors.h"

int process_metrics_register(struct process_metrics *pm, struct metrics *m)
{
	memset(pm, 0, sizeof(*pm));
	pm->page_size = sysconf(_SC_PAGESIZE);
	pm->ticks_per_second = sysconf(_SC_CLK_TCK);
	if (pm->page_size <= 0)
		pm->page_size = 4096;
	if (pm->ticks_per_second <= 0)
		pm->ticks_per_second = 100;
	pm->cpu_ticks = metrics_counter_scaled(m, "process_cpu_seconds_total",
					       "Total user and system CPU time spent in seconds.", NULL, 0,
					       1.0 / (double)pm->ticks_per_second);
	pm->resident = metrics_gauge(m, "process_resident_memory_bytes", "Resident memory size in bytes.",
				     NULL, 0);
	pm->virtual_bytes = metrics_gauge(m, "process_virtual_memory_bytes",
					  "Virtual memory size in bytes.", NULL, 0);
	pm->open_fds = metrics_gauge(m, "process_open_fds", "Number of open file descriptors.", NULL, 0);
	pm->max_fds = metrics_gauge(m, "process_max_fds", "Maximum number of open file descriptors.",
				    NULL, 0);
	pm->start_ms = metrics_gauge_scaled(m, "process_start_time_seconds",
					    "Start time of the process since unix epoch in seconds.", NULL,
					    0, 1e-3);
	pm->read_errors = metrics_counter(m, "hasp_process_read_errors_total",
					  "Reads of /proc/self or statvfs of the data directory that failed (values kept).",
					  NULL, 0);
	if (pm->cpu_ticks == NULL || pm->resident == NULL || pm->virtual_bytes == NULL ||
	    pm->open_fds == NULL || pm->max_fds == NULL || pm->start_ms == NULL || pm->read_errors == NULL)
		return -HASP_EFULL;
	process_metrics_update(pm);
	return 0;
}

/* /proc/self/stat: utime, stime, starttime (ticks since boot), vsize, rss
 * (pages). False when it cannot be read or parsed. */
static bool read_stat(unsigned long long *ticks, unsigned long long *start,
		      unsigned long long *vsize, long long *rss)
{
	char buf[1024];
	FILE *f = fopen("/proc/self/stat", "re");
	if (f == NULL)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	if (p == NULL)
		return false;
	/* Fields 3.. after ") ": state(3) ... utime(14) stime(15) ...
	 * starttime(22) vsize(23) rss(24). */
	unsigned long long ut, st;
	int got = sscanf(p + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
			 "%llu %llu %lld",
			 &ut, &st, start, vsize, rss);
	if (got != 5)
		return false;
	*ticks = ut + st;
	return true;
}

/* The boot time in seconds since the epoch (/proc/stat btime). */
static bool read_btime(unsigned long long *btime)
{
	char line[256];
	FILE *f = fopen("/proc/stat", "re");
	if (f == NULL)
		return false;
	bool ok = false;
	while (!ok && fgets(line, sizeof(line), f) != NULL)
		ok = sscanf(line, "btime %llu", btime) == 1;
	fclose(f);
	return ok;
}

static bool count_fds(long long *count)
{
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		return false;
	long long c = 0;
	const struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			c++;
	closedir(d);
	*count = c - 1; /* the directory stream's own descriptor */
	return true;
}

int process_metrics_watch_dir(struct process_metrics *pm, struct metrics *m, const char *dir)
{
	if (strlen(dir) >= sizeof(pm->dir))
		return -HASP_EINVAL;
	snprintf(pm->dir, sizeof(pm->dir), "%s", dir);
	pm->disk_avail = metrics_gauge(m, "hasp_storage_available_bytes",
				       "Bytes still available to the node on its data directory's file system.",
				       NULL, 0);
	pm->disk_size = metrics_gauge(m, "hasp_storage_capacity_bytes",
				      "Size of the data directory's file system in bytes.", NULL, 0);
	if (pm->disk_avail == NULL || pm->disk_size == NULL)
		return -HASP_EFULL;
	process_metrics_update(pm);
	return 0;
}

void process_metrics_update(struct process_metrics *pm)
{
	struct statvfs fs;
	if (pm->disk_avail != NULL) {
		if (statvfs(pm->dir, &fs) == 0) {
			metric_set(pm->disk_avail, (int64_t)((uint64_t)fs.f_bavail * fs.f_frsize));
			metric_set(pm->disk_size, (int64_t)((uint64_t)fs.f_blocks * fs.f_frsize));
		} else {
			metric_inc(pm->read_errors);
		}
	}
	unsigned long long ticks, start, vsize, btime;
	long long rss, fds;
	bool ok = read_stat(&ticks, &start, &vsize, &rss) && read_btime(&btime) && count_fds(&fds);
	if (!ok) {
		metric_inc(pm->read_errors);
		return;
	}
	metric_set(pm->cpu_ticks, (int64_t)ticks);
	metric_set(pm->resident, rss * pm->page_size);
	metric_set(pm->virtual_bytes, (int64_t)vsize);
	metric_set(pm->open_fds, fds);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		metric_set(pm->max_fds, (int64_t)rl.rlim_cur);
	metric_set(pm->start_ms, (int64_t)(btime * 1000ull + start * 1000ull /
					   (unsigned long long)pm->ticks_per_second));
}
