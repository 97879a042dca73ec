/*
 * The storage facade (see storage.h): one ring shared by the WAL and the
 * hard state, completions dispatched on the owner byte of user_data.
 */
#include "storage/storage.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/log.h"
#include "hasp/errors.h"
#include "storage/uring.h"

LOG_TOPIC_DECLARE(storage);

/* Ring entries: each WAL write is at most two ops (write + sync), the hard
 * state one write + one sync, the spare segment's and the new segment's
 * ops, and a margin for resubmissions. */
static unsigned storage_queue_depth(uint32_t writes_inflight_max)
{
	unsigned need = 2 * (writes_inflight_max + 2) /* WAL writes and their syncs */
			+ 2                           /* hard-state write and sync */
			+ 3                           /* a spare's zeros, or its two fsyncs;
						       * a new segment's header */
			+ 8;                          /* retries in the same poll */
	unsigned depth = 1;
	while (depth < need)
		depth *= 2;
	return depth;
}

int storage_open(struct storage *s, const struct storage_config *cfg, struct hard_state *hs)
{
	struct wal_config wc;
	int rc;

	memset(s, 0, sizeof(*s));
	uint32_t inflight = cfg->writes_inflight_max ? cfg->writes_inflight_max : 16;
	if (cfg->io.ops != NULL) {
		s->io = cfg->io;
	} else {
		if (cfg->dir == NULL)
			return -HASP_EINVAL;
		rc = uring_io_open(&s->uring, cfg->dir, storage_queue_depth(inflight));
		if (rc != 0) {
			s->open_failed = "directory";
			return rc;
		}
		/* Name a read-only or unwritable directory before the first
		 * create fails as a bare I/O error. */
		struct statvfs vfs;
		int err = 0;
		if (statvfs(cfg->dir, &vfs) == 0 && (vfs.f_flag & ST_RDONLY) != 0)
			err = EROFS;
		else if (access(cfg->dir, W_OK) != 0)
			err = errno;
		if (err != 0) {
			const char *name = strerrorname_np(err);
			LOG_ERROR(storage, "data dir=%s is not writable: %s (%s)", cfg->dir, strerror(err),
				  name != NULL ? name : "?");
			uring_io_close(s->uring);
			s->uring = NULL;
			s->open_failed = "directory";
			errno = err;
			return -HASP_ESYS;
		}
		s->io = uring_io_ops(s->uring);
	}
	wal_config_default(&wc, s->io);
	if (cfg->segment_size)
		wc.segment_size = cfg->segment_size;
	if (cfg->write_size_max)
		wc.write_size_max = cfg->write_size_max;
	else if (wc.write_size_max > wc.segment_size / 4)
		wc.write_size_max = (uint32_t)(wc.segment_size / 4); /* small segments: 4 writes each */
	wc.writes_inflight_max = inflight;
	if (cfg->segment_count_max)
		wc.segment_count_max = cfg->segment_count_max;
	wc.sync_mode = cfg->sync_mode;
	wc.segment_fill = cfg->segment_fill;
	if ((rc = hardstate_open(&s->hs, s->io, hs)) != 0) {
		s->open_failed = "hard state file " HARDSTATE_FILE;
		goto fail_io;
	}
	if ((rc = wal_open(&s->wal, &wc)) != 0) {
		s->open_failed = "WAL";
		goto fail_hs;
	}
	return 0;

fail_hs:
	hardstate_close(&s->hs);
fail_io:
	uring_io_close(s->uring);
	s->uring = NULL;
	return rc;
}

void storage_close(struct storage *s)
{
	if (s->uring != NULL) {
		/* The kernel reads the WAL's buffers until each op completes:
		 * reap everything still in flight before freeing them. */
		struct storage_cqe cqes[32];
		while (s->io.ops->reap(s->io.ctx, cqes, 32, true) > 0)
			;
	}
	wal_close(&s->wal);
	hardstate_close(&s->hs);
	uring_io_close(s->uring);
	memset(s, 0, sizeof(*s));
}

unsigned storage_poll(struct storage *s, bool wait)
{
	struct storage_cqe cqes[32];
	unsigned n = s->io.ops->reap(s->io.ctx, cqes, 32, wait);

	for (unsigned i = 0; i < n; i++) {
		switch (cqes[i].user_data >> 56) {
		case WAL_USER_DATA_OWNER:
			wal_io_done(&s->wal, &cqes[i]);
			break;
		case HARDSTATE_USER_DATA_OWNER:
			hardstate_io_done(&s->hs, &cqes[i]);
			break;
		default:
			HASP_UNREACHABLE();
		}
	}
	if (!s->wal.failed)
		{
		int submit_rc = wal_submit(&s->wal);
		(void)submit_rc; /* a failure is recorded in the wal */
	}
	return n;
}

int storage_check_hard_state(const struct storage *s, const struct hard_state *hs,
			     uint64_t snap_index, uint64_t snap_term, uint64_t last_log_term,
			     char *err, size_t err_size)
{
	uint64_t last = wal_last_index(&s->wal);

	if (hardstate_durable_seq(&s->hs) == 0 && (snap_index > 0 || last > 0)) {
		snprintf(err, err_size,
			 "hard state file %s is %s but the %s reaches index %llu: the node's "
			 "term and vote are lost; refusing to start (docs/STORAGE.md, \"Hard state "
			 "damage\")",
			 HARDSTATE_FILE, s->hs.created ? "missing" : "blank",
			 snap_index > 0 ? "snapshot" : "WAL",
			 (unsigned long long)(snap_index > last ? snap_index : last));
		return -HASP_ECORRUPT;
	}
	if (hs->term < snap_term || hs->term < last_log_term) {
		snprintf(err, err_size,
			 "hard state file %s holds term %llu, below the %s term %llu: a newer "
			 "term and vote were lost; refusing to start (docs/STORAGE.md, \"Hard state "
			 "damage\")",
			 HARDSTATE_FILE, (unsigned long long)hs->term,
			 hs->term < snap_term ? "snapshot's" : "last log entry's",
			 (unsigned long long)(hs->term < snap_term ? snap_term : last_log_term));
		return -HASP_ECORRUPT;
	}
	return 0;
}
