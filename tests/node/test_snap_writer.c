/*
 * Snapshots off the lcore (node/snap_writer.c): the lcore copies the state
 * machine (locks_copy) and a writer thread serializes the copy and saves
 * it while the lcore keeps applying commands. The snapshot on disk (and in
 * the buffer raft sends) must be exactly the state at the index of the
 * copy, whatever the lcore applied meanwhile; one job runs at a time, its
 * result comes back, and the thread runs off the lcore's CPU.
 */
#include <ftw.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hasp/errors.h"
#include "locks/locks.h"
#include "locks/snapshot.h"
#include "node/snap_writer.h"
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
	const struct locks *sm;
	struct storage_io io;
	uint8_t *buf;
	size_t buf_size;
	uint64_t index;
};

static int job_run(void *arg, uint64_t *written)
{
	struct job *j = arg;
	size_t out = 0;

	if (locks_snapshot_write(j->sm, j->buf, j->buf_size, &out) != 0)
		return -HASP_ETOOBIG;
	*written = out;
	struct snapshot_meta meta = { .last_index = j->index, .last_term = 1, .membership_size = 3,
				      .data_size = out };
	return snapshot_save(j->io, &meta, "abc", j->buf, 2, NULL);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void test_snapshot_from_a_copy_is_the_state_at_its_index(void **state)
{
	(void)state;
	char dir[] = "/tmp/hasp-snapwriter-test-XXXXXX";
	struct storage st;
	struct storage_config scfg = { 0 };
	struct hard_state hs;
	struct snap_writer w;
	struct sm live, ref;
	struct locks copy;
	struct snapshot snap;

	assert_non_null(mkdtemp(dir));
	scfg.dir = dir;
	assert_int_equal(storage_open(&st, &scfg, &hs), 0);
	assert_int_equal(snap_writer_init(&w, NULL), 0);
	sm_init(&live);
	sm_init(&ref);
	assert_int_equal(locks_init(&copy, &live.sm.cfg), 0);
	for (uint32_t k = 0; k < 400; k++) {
		sm_step(&live, k);
		sm_step(&ref, k);
	}
	/* What the node's lcore does: copy, hand the copy to the thread. */
	locks_copy(&copy, &live.sm);
	struct job j = { &copy, st.io, NULL, 4u << 20, live.index };
	j.buf = snap_buf_alloc(j.buf_size);
	assert_non_null(j.buf);

	assert_int_equal(snap_writer_start(&w, job_run, &j), 0);
	assert_int_equal(snap_writer_start(&w, job_run, &j), -HASP_EBUSY); /* one at a time */
	/* The lcore goes on applying while the thread serializes and writes. */
	for (uint32_t k = 400; k < 800; k++)
		sm_step(&live, k);
	int rc = -1;
	uint64_t written = 0;
	assert_true(snap_writer_done(&w, true, &rc, &written));
	assert_int_equal(rc, 0);
	assert_false(snap_writer_running(&w));
	assert_false(snap_writer_done(&w, true, &rc, &written)); /* nothing runs now */
	assert_int_equal(w.jobs, 1);

	size_t ref_size, live_size;
	uint8_t *want = serialize(&ref.sm, &ref_size);
	uint8_t *now = serialize(&live.sm, &live_size);
	/* The state moved on... */
	assert_true(live_size != ref_size || memcmp(now, want, ref_size) != 0);
	/* ...and the snapshot is the state at its index: in the buffer (what
	 * raft sends to followers) and on disk. */
	assert_int_equal(written, ref_size);
	assert_memory_equal(j.buf, want, ref_size);
	assert_int_equal(snapshot_load(st.io, &snap), 0);
	assert_int_equal(snap.meta.last_index, j.index);
	assert_int_equal(snap.meta.data_size, ref_size);
	assert_memory_equal(snap.data, want, ref_size);
	snapshot_release(&snap);

	free(want);
	free(now);
	snap_buf_free(j.buf, j.buf_size);
	snap_writer_deinit(&w);
	locks_deinit(&copy);
	sm_deinit(&live);
	sm_deinit(&ref);
	storage_close(&st);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A job that runs until the test lets it end, then reports its result. */
struct gate {
	atomic_bool open;
	atomic_int ran;
	cpu_set_t cpus; /* the thread's affinity, as it saw it */
	char name[16];  /* the thread's name, as it saw it */
};

static int job_gated(void *arg, uint64_t *written)
{
	struct gate *g = arg;

	(void)pthread_getaffinity_np(pthread_self(), sizeof(g->cpus), &g->cpus);
	(void)pthread_getname_np(pthread_self(), g->name, sizeof(g->name));
	while (!atomic_load(&g->open))
		sched_yield();
	atomic_fetch_add(&g->ran, 1);
	*written = 77;
	return -HASP_EIO;
}

static void test_one_job_at_a_time_and_its_result_comes_back(void **state)
{
	(void)state;
	struct snap_writer w;
	struct gate g = { 0 };
	int rc = 0;
	uint64_t written = 0;

	assert_int_equal(snap_writer_init(&w, NULL), 0);
	assert_false(snap_writer_done(&w, false, &rc, &written)); /* none started */
	for (int round = 1; round <= 2; round++) { /* the thread is reused */
		atomic_store(&g.open, false);
		assert_int_equal(snap_writer_start(&w, job_gated, &g), 0);
		assert_true(snap_writer_running(&w));
		assert_false(snap_writer_done(&w, false, &rc, &written)); /* still gated */
		assert_int_equal(snap_writer_start(&w, job_gated, &g), -HASP_EBUSY);
		atomic_store(&g.open, true);
		assert_true(snap_writer_done(&w, true, &rc, &written));
		assert_int_equal(rc, -HASP_EIO);
		assert_int_equal(written, 77);
		assert_int_equal(atomic_load(&g.ran), round);
	}
	assert_int_equal(w.jobs, 2);
	assert_int_equal(w.thread_failures, 0);
	snap_writer_deinit(&w);
	/* Named, so that its CPU shows apart from the lcores' (checked after
	 * the thread is gone: a failed assertion must not leave it behind). */
	assert_string_equal(g.name, SNAP_WRITER_THREAD_NAME);
}

/* The thread runs on the recorded CPUs minus the caller's, as DPDK's
 * control threads do: never on the lcore's CPU while another exists. */
static void test_the_writer_runs_off_the_callers_cpu(void **state)
{
	(void)state;
	cpu_set_t all, one, before;
	struct snap_writer w;
	struct gate g = { 0 };
	int rc;
	uint64_t written;

	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof(before), &before), 0);
	int first = -1;
	for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
		if (CPU_ISSET(c, &all))
			first = c;
	assert_true(first >= 0);
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	/* This thread plays the lcore, pinned to one CPU. */
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
	assert_int_equal(snap_writer_init(&w, &all), 0);
	atomic_store(&g.open, true);
	assert_int_equal(snap_writer_start(&w, job_gated, &g), 0);
	assert_true(snap_writer_done(&w, true, &rc, &written));
	if (CPU_COUNT(&all) > 1) {
		assert_false(CPU_ISSET(first, &g.cpus));
		assert_int_equal(CPU_COUNT(&g.cpus), CPU_COUNT(&all) - 1);
	} else {
		assert_true(CPU_EQUAL(&g.cpus, &all)); /* nothing else to run on */
	}
	snap_writer_deinit(&w);
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(before), &before), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_snapshot_from_a_copy_is_the_state_at_its_index),
		cmocka_unit_test(test_one_job_at_a_time_and_its_result_comes_back),
		cmocka_unit_test(test_the_writer_runs_off_the_callers_cpu),
	};
	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
