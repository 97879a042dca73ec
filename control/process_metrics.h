/*
 * The standard process_* series of a Prometheus client (the names and
 * units every Prometheus user's dashboards expect): CPU seconds, resident
 * and virtual memory, open and maximum file descriptors, start time; and
 * the file system of the node's data directory (hasp_storage_*_bytes).
 * Read from /proc/self and statvfs(3) by the admin thread just before each
 * scrape (the series' one writer), so the lcore pays nothing.
 */
#ifndef HASP_CONTROL_PROCESS_METRICS_H
#define HASP_CONTROL_PROCESS_METRICS_H

#include "control/metrics.h"

struct process_metrics {
	struct metric *cpu_ticks;     /* process_cpu_seconds_total (clock ticks, scaled) */
	struct metric *resident;      /* process_resident_memory_bytes */
	struct metric *virtual_bytes; /* process_virtual_memory_bytes */
	struct metric *open_fds;      /* process_open_fds */
	struct metric *max_fds;       /* process_max_fds */
	struct metric *start_ms;      /* process_start_time_seconds (ms since the epoch, scaled) */
	struct metric *read_errors;   /* hasp_process_read_errors_total */
	struct metric *disk_avail;    /* hasp_storage_available_bytes (NULL: no directory) */
	struct metric *disk_size;     /* hasp_storage_capacity_bytes */
	char dir[256];
	long page_size;
	long ticks_per_second;
};

/* Registers the series. 0, or -HASP_EFULL when the registry is full. */
int process_metrics_register(struct process_metrics *pm, struct metrics *m)
	__attribute__((warn_unused_result));

/* Adds hasp_storage_available_bytes and hasp_storage_capacity_bytes for
 * the file system holding `dir` (the data directory), before the admin
 * thread starts. 0, -HASP_EFULL, or -HASP_EINVAL (path too long). */
int process_metrics_watch_dir(struct process_metrics *pm, struct metrics *m, const char *dir)
	__attribute__((warn_unused_result));

/* Refreshes them from /proc/self (admin thread). A /proc file that cannot
 * be read or parsed leaves the values as they were and raises
 * hasp_process_read_errors_total. */
void process_metrics_update(struct process_metrics *pm);

#endif
