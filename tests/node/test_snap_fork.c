/*
 * Snapshots off the lcore (node/snap_fork.c): the job runs in a forked
 * child while the parent keeps applying commands. The snapshot on disk
 * (and in the shared buffer) must be exactly the state at the index the
 * fork was taken at, whatever the parent applied meanwhile; a child that
 * dies is reported, not waited for forever.
 */
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hasp/errors.h"
#include "locks/locks.h"
#include "locks/snapshot.h"
#include "node/snap_fork.h"
#include "storage/snapshot.h"
#include "storage/storage.h"
#include "tests/test_util.h"

#define SESSIONS 8u

struct sm {
	struct locks sm;
	struct locks_result res;
	uint64_t index;
	uint64_t session_ids[SESSIONS];
	uint64_t seqs[SESSIONS];
};

static void sm_init(struct sm *m)
{
	struct locks_config cfg;

	memset(m, 0, sizeof(*m));
	locks_config_default(&cfg);
	cfg.hash_seed = 7;
	assert_int_equal(locks_init(&m->sm, &cfg), 0);
	m->res.event_count_max = locks_events_max(&cfg);
	m->res.events = calloc(m->res.event_count_max, sizeof(*m->res.events));
	assert_non_null(m->res.events);
	for (uint32_t s = 0; s < SESSIONS; s++) {
		struct locks_cmd c = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 3600000, .term = 1,
				       .now_ms = 1000 };
		locks_apply(&m->sm, ++m->index, &c, &m->res);
		assert_int_equal(m->res.reply.status, HASP_STATUS_OK);
		m->session_ids[s] = m->res.reply.id;
	}
}

static void sm_deinit(struct sm *m)
{
	locks_deinit(&m->sm);
	free(m->res.events);
}

/* Command k of a fixed sequence: acquire lock/k, release every third. */
static void sm_step(struct sm *m, uint32_t k)
{
	char name[32];
	uint32_t s = k % SESSIONS;
	int len = snprintf(name, sizeof(name), "lock/%u", k % 100);
	struct locks_cmd c = { .op = k % 3 == 2 ? LOCKS_OP_RELEASE : LOCKS_OP_ACQUIRE,
			       .session_id = m->session_ids[s], .seq = ++m->seqs[s],
			       .name = (const uint8_t *)name, .name_len = (uint16_t)len,
			       .ttl_ms = 60000, .term = 1, .now_ms = 1000 + k };
	locks_apply(&m->sm, ++m->index, &c, &m->res);
}

static uint8_t *serialize(const struct locks *sm, size_t *size)
{
	size_t cap = locks_snapshot_size(sm);
	uint8_t *buf = malloc(cap);
	assert_non_null(buf);
	assert_int_equal(locks_snapshot_write(sm, buf, cap, size), 0);
	return buf;
}

struct job {
	struct sm *m;
	struct storage_io io;
	uint8_t *shared;
	size_t shared_size;
	uint64_t index;
};

static int job_run(void *arg, uint64_t *written)
{
	struct job *j = arg;
	size_t out = 0;

	if (locks_snapshot_write(&j->m->sm, j->shared, j->shared_size, &out) != 0)
		return -HASP_ETOOBIG;
	*written = out;
	struct snapshot_meta meta = { .last_index = j->index, .last_term = 1, .membership_size = 3,
				      .data_size = out };
	return snapshot_save(j->io, &meta, "abc", j->shared, 2);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void test_snapshot_in_a_child_is_the_state_at_its_index(void **state)
{
	(void)state;
	char dir[] = "/tmp/hasp-snapfork-test-XXXXXX";
	struct storage st;
	struct storage_config scfg = { 0 };
	struct hard_state hs;
	struct snap_fork f;
	struct sm live, ref;
	struct snapshot snap;

	assert_non_null(mkdtemp(dir));
	scfg.dir = dir;
	assert_int_equal(storage_open(&st, &scfg, &hs), 0);
	assert_int_equal(snap_fork_init(&f), 0);
	sm_init(&live);
	sm_init(&ref);
	for (uint32_t k = 0; k < 400; k++) {
		sm_step(&live, k);
		sm_step(&ref, k);
	}
	struct job j = { &live, st.io, NULL, 4u << 20, live.index };
	j.shared = snap_shared_alloc(j.shared_size);
	assert_non_null(j.shared);

	assert_int_equal(snap_fork_start(&f, job_run, &j), 0);
	assert_int_equal(snap_fork_start(&f, job_run, &j), -HASP_EBUSY); /* one at a time */
	/* The lcore goes on applying while the child serializes and writes. */
	for (uint32_t k = 400; k < 800; k++)
		sm_step(&live, k);
	int rc = -1;
	uint64_t written = 0;
	assert_true(snap_fork_done(&f, true, &rc, &written));
	assert_int_equal(rc, 0);
	assert_false(snap_fork_running(&f));
	assert_int_equal(f.forks, 1);

	size_t ref_size, live_size;
	uint8_t *want = serialize(&ref.sm, &ref_size);
	uint8_t *now = serialize(&live.sm, &live_size);
	/* The state moved on... */
	assert_true(live_size != ref_size || memcmp(now, want, ref_size) != 0);
	/* ...and the snapshot is the state at its index: in the shared buffer
	 * (what raft sends to followers) and on disk. */
	assert_int_equal(written, ref_size);
	assert_memory_equal(j.shared, want, ref_size);
	assert_int_equal(snapshot_load(st.io, &snap), 0);
	assert_int_equal(snap.meta.last_index, j.index);
	assert_int_equal(snap.meta.data_size, ref_size);
	assert_memory_equal(snap.data, want, ref_size);
	snapshot_release(&snap);

	free(want);
	free(now);
	snap_shared_free(j.shared, j.shared_size);
	snap_fork_deinit(&f);
	sm_deinit(&live);
	sm_deinit(&ref);
	storage_close(&st);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int job_hang(void *arg, uint64_t *written)
{
	(void)arg;
	*written = 0;
	pause();
	return 0;
}

static void test_a_writer_that_dies_is_reported(void **state)
{
	(void)state;
	struct snap_fork f;
	int rc = 0;
	uint64_t written = 1;

	assert_int_equal(snap_fork_init(&f), 0);
	assert_int_equal(snap_fork_start(&f, job_hang, NULL), 0);
	assert_false(snap_fork_done(&f, false, &rc, &written) && rc == 0);
	assert_int_equal(kill(f.pid, SIGKILL), 0);
	assert_true(snap_fork_done(&f, true, &rc, &written));
	assert_int_equal(rc, -HASP_EIO);
	assert_int_equal(written, 0);
	assert_int_equal(f.children_died, 1);
	snap_fork_deinit(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_snapshot_in_a_child_is_the_state_at_its_index),
		cmocka_unit_test(test_a_writer_that_dies_is_reported),
	};
	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
