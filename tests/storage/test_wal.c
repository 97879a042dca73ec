/*
 * WAL behaviour over the simulated disk: append and recover, group commit,
 * in-order durability with out-of-order completion, segment rollover,
 * truncation, compaction, reset, torn tails, corruption refusal, and the
 * failed state on -EIO/-ENOSPC.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "hasp/errors.h"
#include "storage/simdisk.h"
#include "storage/storage.h"
#include "storage/wal.h"
#include "tests/test_util.h"

#define BLOCK HASP_WAL_BLOCK_SIZE

struct fixture {
	struct simdisk *disk;
	struct wal_config cfg;
	struct wal wal;
};

static struct fixture *fixture_new(uint64_t seed)
{
	struct simdisk_config dc;
	struct fixture *f = calloc(1, sizeof(*f));

	simdisk_config_default(&dc, seed);
	f->disk = simdisk_create(&dc);
	wal_config_default(&f->cfg, simdisk_io(f->disk));
	f->cfg.segment_size = 8 * BLOCK;
	f->cfg.write_size_max = 2 * BLOCK;
	f->cfg.writes_inflight_max = 4;
	f->cfg.segment_count_max = 256;
	return f;
}

static void fixture_free(struct fixture *f)
{
	wal_close(&f->wal);
	simdisk_destroy(f->disk);
	free(f);
}

static void payload(uint8_t *buf, uint64_t index, uint32_t size)
{
	for (uint32_t i = 0; i < size; i++)
		buf[i] = (uint8_t)(index * 31 + i);
}

static void append_range(struct wal *w, uint64_t from, uint64_t to, uint64_t term, uint32_t size)
{
	uint8_t buf[4000];

	for (uint64_t i = from; i <= to; i++) {
		struct wal_entry e = { i, term, 7, size, buf };
		int rc;
		payload(buf, i, size);
		while ((rc = wal_append(w, &e)) == -HASP_EFULL)
			(void)wal_poll(w, true);
		assert_int_equal(rc, 0);
	}
}

/* One write per entry, each durable before the next: the low-concurrency
 * pattern where packing applies. */
static void append_drained(struct wal *w, uint64_t from, uint64_t to, uint32_t size)
{
	for (uint64_t i = from; i <= to; i++) {
		append_range(w, i, i, 1, size);
		assert_int_equal(wal_drain(w), 0);
	}
}

struct collected {
	uint64_t first, last, count;
	uint64_t terms[4096];
	bool payload_ok;
};

static int collect(void *arg, const struct wal_entry *e)
{
	struct collected *c = arg;
	uint8_t buf[4000];

	if (c->count == 0)
		c->first = e->index;
	c->last = e->index;
	c->count++;
	c->terms[e->index % 4096] = e->term;
	payload(buf, e->index, e->size);
	if (e->type != 7 || memcmp(buf, e->data, e->size) != 0)
		c->payload_ok = false;
	return 0;
}

static void replay(struct wal *w, struct collected *c)
{
	memset(c, 0, sizeof(*c));
	c->payload_ok = true;
	assert_int_equal(wal_replay(w, collect, c), 0);
	assert_true(c->payload_ok);
}

static void reopen(struct fixture *f)
{
	wal_close(&f->wal);
	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
}

/* The offset of the batch whose first entry is `index` in a segment. */
static uint64_t batch_offset_of(struct simdisk *d, const char *name, uint64_t index)
{
	uint64_t size;
	const uint8_t *data = simdisk_file_data(d, name, &size);
	struct wal_batch_header b;

	assert_non_null(data);
	for (uint64_t at = BLOCK; at + WAL_BATCH_HEADER_SIZE <= size; at += WAL_RECORD_ALIGN) {
		if (wal_batch_header_decode(data + at, &b) == 0 && b.first_index == index)
			return at;
	}
	fail_msg("no batch starts at index %llu", (unsigned long long)index);
	return 0;
}

static void test_wal_append_is_durable_after_poll_and_survives_reopen(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(1);
	struct collected c;

	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	assert_int_equal(wal_first_index(&f->wal), 1);
	assert_int_equal(wal_last_index(&f->wal), 0);
	append_range(&f->wal, 1, 50, 1, 100);
	assert_int_equal(wal_durable_index(&f->wal), 0); /* nothing synced yet */
	assert_int_equal(wal_drain(&f->wal), 0);
	assert_int_equal(wal_durable_index(&f->wal), 50);
	reopen(f);
	assert_int_equal(wal_last_index(&f->wal), 50);
	assert_int_equal(wal_durable_index(&f->wal), 50);
	replay(&f->wal, &c);
	assert_int_equal(c.first, 1);
	assert_int_equal(c.last, 50);
	assert_int_equal(c.count, 50);
	/* Appends continue after recovery; replay is for the recovered log. */
	append_range(&f->wal, 51, 60, 2, 10);
	assert_int_equal(wal_replay(&f->wal, collect, &c), -HASP_ESTATE);
	assert_int_equal(wal_drain(&f->wal), 0);
	reopen(f);
	replay(&f->wal, &c);
	assert_int_equal(c.last, 60);
	assert_int_equal(c.terms[60], 2);
	fixture_free(f);
}

static void test_wal_append_refuses_a_gap_or_an_internal_type(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(2);
	struct wal_entry e = { 2, 1, 0, 0, NULL };

	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	assert_int_equal(wal_append(&f->wal, &e), -HASP_EINVAL);
	e.index = 1;
	e.type = WAL_TYPE_TRUNCATE;
	assert_int_equal(wal_append(&f->wal, &e), -HASP_EINVAL);
	e.type = 0;
	e.size = 2 * BLOCK; /* larger than one write */
	uint8_t big[2 * BLOCK] = { 0 };
	e.data = big;
	assert_int_equal(wal_append(&f->wal, &e), -HASP_ETOOBIG);
	fixture_free(f);
}

static void test_wal_group_commit_joins_appends_while_writes_are_in_flight(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(3);

	f->cfg.writes_inflight_max = 1;
	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	append_range(&f->wal, 1, 1, 1, 10);
	assert_int_equal(wal_submit(&f->wal), 0);
	/* The first segment's header is written first; the write follows. */
	while (wal_inflight(&f->wal) == 0)
		(void)wal_poll(&f->wal, true);
	assert_int_equal(wal_inflight(&f->wal), 1);
	/* While the one write is in flight, these all join the next write. */
	append_range(&f->wal, 2, 20, 1, 10);
	assert_int_equal(wal_submit(&f->wal), 0);
	assert_int_equal(f->wal.stats.writes, 1);
	assert_int_equal(wal_drain(&f->wal), 0);
	/* Two writes of entries, then one empty watermark write on going idle. */
	assert_int_equal(f->wal.stats.writes - f->wal.stats.watermark_writes, 2);
	assert_int_equal(f->wal.stats.watermark_writes, 1);
	assert_int_equal(wal_durable_index(&f->wal), 20);
	fixture_free(f);
}

static void test_wal_reports_durability_in_order_when_completions_are_not(void **state)
{
	(void)state;
	struct simdisk_config dc;
	struct fixture *f = fixture_new(4);
	uint64_t seen_out_of_order = 0;

	simdisk_destroy(f->disk);
	simdisk_config_default(&dc, 4);
	dc.complete_per_million = 300000; /* ops complete in random order */
	dc.short_write_per_million = 0;
	dc.again_per_million = 0;
	f->disk = simdisk_create(&dc);
	f->cfg.io = simdisk_io(f->disk);
	f->cfg.writes_inflight_max = 8;
	f->cfg.write_size_max = BLOCK;
	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	for (uint64_t i = 1; i <= 200; i++) {
		append_range(&f->wal, i, i, 1, 500);
		assert_int_equal(wal_submit(&f->wal), 0);
		uint64_t before = wal_durable_index(&f->wal);
		(void)wal_poll(&f->wal, false);
		uint64_t after = wal_durable_index(&f->wal);
		assert_true(after >= before);
		/* A later write done before an earlier one shows as DONE slots
		 * behind a slot still in flight. */
		for (uint32_t k = 0; k + 1 < f->wal.write_used; k++) {
			const struct wal_write *a = &f->wal.writes[(f->wal.write_head + k) %
								 f->wal.write_count];
			const struct wal_write *b = &f->wal.writes[(f->wal.write_head + k + 1) %
								 f->wal.write_count];
			seen_out_of_order += a->state == WAL_WRITE_INFLIGHT && b->state == WAL_WRITE_DONE;
			if (a->state == WAL_WRITE_INFLIGHT)
				assert_true(wal_durable_index(&f->wal) < a->first_index);
		}
	}
	assert_int_equal(wal_drain(&f->wal), 0);
	assert_int_equal(wal_durable_index(&f->wal), 200);
	assert_true(seen_out_of_order > 0);
	fixture_free(f);
}

static void test_wal_short_writes_and_eagain_are_continued(void **state)
{
	(void)state;
	struct simdisk_config dc;
	struct fixture *f = fixture_new(8);
	struct simdisk_stats st;
	struct collected c;

	simdisk_destroy(f->disk);
	simdisk_config_default(&dc, 8);
	dc.short_write_per_million = 300000;
	dc.again_per_million = 200000;
	f->disk = simdisk_create(&dc);
	for (enum wal_sync_mode m = WAL_SYNC_LINKED; m <= WAL_SYNC_DRAIN; m++) {
		f->cfg.io = simdisk_io(f->disk);
		f->cfg.sync_mode = m;
		assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
		uint64_t from = wal_last_index(&f->wal) + 1;
		append_range(&f->wal, from, from + 99, 1, 700);
		assert_int_equal(wal_drain(&f->wal), 0);
		assert_int_equal(wal_durable_index(&f->wal), from + 99);
		assert_true(f->wal.stats.short_writes > 0);
		assert_true(f->wal.stats.retries > 0);
		/* Every spare got all its zeros, short writes continued. */
		assert_int_equal(f->wal.spare_state, WAL_SPARE_READY);
		assert_int_equal(f->wal.stats.fill_bytes,
				 (f->wal.stats.rollovers + 1) * f->cfg.segment_size);
		reopen(f);
		replay(&f->wal, &c);
		assert_int_equal(c.last, from + 99);
		wal_close(&f->wal);
	}
	simdisk_stats_get(f->disk, &st);
	assert_true(st.short_writes > 0 && st.agains > 0);
	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	fixture_free(f);
}

static void test_wal_segment_rollover_keeps_the_log_whole(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(6);
	struct collected c;

	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	append_range(&f->wal, 1, 300, 1, 500);
	assert_int_equal(wal_drain(&f->wal), 0);
	assert_true(f->wal.segment_count > 4);
	assert_int_equal(f->wal.stats.rollovers, f->wal.segment_count);
	reopen(f);
	replay(&f->wal, &c);
	assert_int_equal(c.first, 1);
	assert_int_equal(c.last, 300);
	assert_int_equal(c.count, 300);
	fixture_free(f);
}

/* A spare is filled with zeros through the ring, a chunk at a time, and
 * becomes ready (usable by a rollover) only after its fsyncs, which follow
 * the last chunk. segment_fill allocate writes none. */
static void test_wal_spare_is_filled_with_zeros_before_it_is_ready(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(11);
	struct collected c;

	f->cfg.segment_size = 2 * (WAL_FILL_CHUNK / BLOCK) * BLOCK + 4 * BLOCK; /* three chunks */
	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	/* wal_open fills its spare before returning. */
	assert_int_equal(f->wal.spare_state, WAL_SPARE_READY);
	assert_int_equal(f->wal.stats.fill_bytes, f->cfg.segment_size);
	append_range(&f->wal, 1, 1, 1, 100);
	/* The first append took the spare; the next one is being filled. */
	assert_int_equal(f->wal.stats.rollovers, 1);
	assert_int_equal(f->wal.spare_state, WAL_SPARE_FILLING);
	assert_int_equal(f->wal.spare_ops_pending, 1);
	uint64_t chunks = 0, filled = f->wal.stats.fill_bytes;
	while (f->wal.spare_state == WAL_SPARE_FILLING) {
		(void)wal_poll(&f->wal, true);
		if (f->wal.stats.fill_bytes > filled)
			chunks++;
		assert_true(f->wal.stats.fill_bytes - filled <= f->cfg.segment_size);
		filled = f->wal.stats.fill_bytes;
	}
	assert_int_equal(chunks, 3);
	assert_int_equal(f->wal.stats.fill_bytes, 2 * f->cfg.segment_size);
	assert_int_equal(f->wal.spare_state, WAL_SPARE_SYNCING);
	assert_int_equal(wal_drain(&f->wal), 0);
	assert_int_equal(f->wal.spare_state, WAL_SPARE_READY);
	reopen(f);
	replay(&f->wal, &c);
	assert_int_equal(c.last, 1);
	wal_close(&f->wal);

	f->cfg.segment_fill = WAL_FILL_ALLOCATE;
	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	assert_null(f->wal.fill_buf);
	append_range(&f->wal, 2, 2, 1, 100);
	assert_int_equal(wal_drain(&f->wal), 0);
	assert_int_equal(f->wal.stats.fill_bytes, 0);
	fixture_free(f);
}

static void test_wal_truncate_suffix_drops_entries_and_new_ones_replace_them(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(7);
	struct collected c;

	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	append_range(&f->wal, 1, 100, 1, 200);
	assert_int_equal(wal_drain(&f->wal), 0);
	assert_int_equal(wal_truncate_suffix(&f->wal, 101), -HASP_EINVAL);
	assert_int_equal(wal_truncate_suffix(&f->wal, 60), 0);
	assert_int_equal(wal_last_index(&f->wal), 60);
	assert_int_equal(wal_durable_index(&f->wal), 60);
	append_range(&f->wal, 61, 70, 2, 50);
	assert_int_equal(wal_drain(&f->wal), 0);
	assert_int_equal(wal_durable_index(&f->wal), 70);
	reopen(f);
	replay(&f->wal, &c);
	assert_int_equal(c.last, 70);
	assert_int_equal(c.count, 70);
	assert_int_equal(c.terms[60], 1);
	assert_int_equal(c.terms[61], 2);
	assert_int_equal(c.terms[70], 2);
	/* A cut with nothing after it is durable too. */
	assert_int_equal(wal_truncate_suffix(&f->wal, 65), 0);
	assert_int_equal(wal_drain(&f->wal), 0);
	reopen(f);
	replay(&f->wal, &c);
	assert_int_equal(c.last, 65);
	fixture_free(f);
}

static void test_wal_truncate_while_writes_are_in_flight_clamps_durability(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(8);

	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	append_range(&f->wal, 1, 40, 1, 300);
	assert_int_equal(wal_submit(&f->wal), 0);
	assert_int_equal(wal_truncate_suffix(&f->wal, 10), 0);
	while (wal_inflight(&f->wal) > 0) {
		(void)wal_poll(&f->wal, true);
		assert_true(wal_durable_index(&f->wal) <= 10);
	}
	assert_int_equal(wal_drain(&f->wal), 0);
	assert_int_equal(wal_durable_index(&f->wal), 10);
	fixture_free(f);
}

static void test_wal_compact_drops_whole_segments_below_the_index(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(9);
	struct collected c;

	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	append_range(&f->wal, 1, 300, 1, 300);
	assert_int_equal(wal_drain(&f->wal), 0);
	uint32_t before = f->wal.segment_count;
	uint64_t second_first = f->wal.segments[1].first_index;
	char oldest[sizeof(f->wal.segments[0].name)];
	memcpy(oldest, f->wal.segments[0].name, sizeof(oldest));
	/* Nothing below the second segment's first entry minus one: keep. */
	assert_int_equal(wal_compact(&f->wal, second_first - 2), 0);
	int dropped = wal_compact(&f->wal, 150);
	assert_int_equal(dropped, (int)(before - f->wal.segment_count));
	assert_true(f->wal.segment_count < before);
	/* The names are gone at once; the files stay open until their blocks
	 * are freed, a paced step at a time (one each here: 32 KiB). */
	uint64_t size;
	assert_null(simdisk_file_data(f->disk, oldest, &size));
	assert_int_equal(f->wal.retiring_count, dropped < (int)WAL_RETIRING_MAX ? dropped : (int)WAL_RETIRING_MAX);
	uint64_t now = 1000, deadline = UINT64_MAX, steps = 0;
	while (f->wal.retiring_count > 0) {
		assert_true(wal_retire_step(&f->wal, now, &deadline));
		steps++;
		/* Paced: nothing more at the same time, and the next step's
		 * time is the deadline. */
		deadline = UINT64_MAX;
		assert_false(wal_retire_step(&f->wal, now, &deadline));
		if (f->wal.retiring_count > 0)
			assert_int_equal(deadline, now + WAL_RETIRE_PACE_NS);
		now += WAL_RETIRE_PACE_NS;
	}
	assert_int_equal(steps, dropped < (int)WAL_RETIRING_MAX ? dropped : (int)WAL_RETIRING_MAX);
	assert_int_equal(f->wal.stats.retire_steps, steps);
	assert_true(wal_first_index(&f->wal) <= 151);
	assert_true(wal_first_index(&f->wal) > 1);
	uint64_t first = wal_first_index(&f->wal);
	/* Never the active segment, whatever the index. */
	assert_true(wal_compact(&f->wal, 1000) >= 0);
	assert_int_equal(f->wal.segment_count, 1);
	reopen(f);
	replay(&f->wal, &c);
	assert_true(c.first >= first);
	assert_int_equal(c.last, 300);
	assert_int_equal(c.count, 300 - c.first + 1);
	fixture_free(f);
}

static void test_wal_reset_starts_after_a_snapshot_index(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(10);
	struct collected c;

	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	append_range(&f->wal, 1, 20, 1, 100);
	assert_int_equal(wal_reset(&f->wal, 1000), 0);
	assert_int_equal(wal_first_index(&f->wal), 1001);
	assert_int_equal(wal_last_index(&f->wal), 1000);
	append_range(&f->wal, 1001, 1010, 3, 100);
	assert_int_equal(wal_drain(&f->wal), 0);
	reopen(f);
	replay(&f->wal, &c);
	assert_int_equal(c.first, 1001);
	assert_int_equal(c.last, 1010);
	fixture_free(f);
}

static void test_wal_recover_truncates_torn_tail(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(11);
	struct collected c;
	uint64_t size;
	uint8_t junk[700];

	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	append_range(&f->wal, 1, 10, 1, 100);
	assert_int_equal(wal_drain(&f->wal), 0);
	/* What a crash in the middle of the next write leaves: part of a batch
	 * (here garbage) at the frontier, never reported durable. */
	uint64_t tail = f->wal.write_offset;
	memset(junk, 0x3c, sizeof(junk));
	wal_close(&f->wal);
	assert_true(simdisk_poke(f->disk, "wal-0000000000000001.seg", tail, junk, sizeof(junk)));
	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	assert_int_equal(wal_last_index(&f->wal), 10);
	assert_int_equal(f->wal.stats.recovered_torn_tails, 1);
	replay(&f->wal, &c);
	assert_int_equal(c.last, 10);
	/* The cut is durable: the torn bytes are gone, appends go there. */
	const uint8_t *data = simdisk_file_data(f->disk, "wal-0000000000000001.seg", &size);
	assert_true(wal_bytes_zero(data + tail, BLOCK));
	append_range(&f->wal, 11, 11, 2, 10);
	assert_int_equal(wal_drain(&f->wal), 0);
	reopen(f);
	assert_int_equal(wal_last_index(&f->wal), 11);
	fixture_free(f);
}

static void test_wal_refuses_bad_record_followed_by_writes_that_prove_it_durable(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(12);
	uint64_t size;

	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	for (uint64_t i = 1; i <= 5; i++) {
		append_range(&f->wal, i, i, 1, 100);
		assert_int_equal(wal_drain(&f->wal), 0); /* one durable batch each */
	}
	/* Flip a bit in entry 2: the batches after it carry watermarks >= 2. */
	uint64_t at = batch_offset_of(f->disk, "wal-0000000000000001.seg", 2);
	const uint8_t *data = simdisk_file_data(f->disk, "wal-0000000000000001.seg", &size);
	uint8_t b = data[at + WAL_BATCH_HEADER_SIZE + 40] ^ 1;
	assert_true(simdisk_poke(f->disk, "wal-0000000000000001.seg", at + WAL_BATCH_HEADER_SIZE + 40,
				 &b, 1));
	wal_close(&f->wal);
	assert_int_equal(wal_open(&f->wal, &f->cfg), -HASP_ECORRUPT);
	/* Nothing was repaired: the data is still there for the operator. */
	data = simdisk_file_data(f->disk, "wal-0000000000000001.seg", &size);
	assert_false(wal_bytes_zero(data + at + WAL_BATCH_HEADER_SIZE + wal_record_size(100),
				    WAL_BATCH_HEADER_SIZE));
	assert_non_null(simdisk_file_data(f->disk, "wal-0000000000000002.seg", &size));
	fixture_free(f);
}

/* The newest batch has no later write to vouch for it, except the empty
 * watermark batch written when the WAL went idle: with it, damage to the
 * newest durable entries is refused rather than cut as a torn write. */
static void test_wal_refuses_damage_to_the_newest_durable_batch_after_idle(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(16);
	uint64_t size;

	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	append_range(&f->wal, 1, 8, 1, 100);
	assert_int_equal(wal_submit(&f->wal), 0);
	while (wal_durable_index(&f->wal) < 8)
		(void)wal_poll(&f->wal, true);
	assert_int_equal(f->wal.stats.watermark_writes, 0);
	/* The node is about to sleep: the WAL vouches for entries 1..8. */
	assert_int_equal(wal_idle(&f->wal), 0);
	assert_int_equal(f->wal.stats.watermark_writes, 1);
	assert_int_equal(wal_drain(&f->wal), 0);
	assert_int_equal(wal_idle(&f->wal), 0); /* nothing new to vouch for */
	assert_int_equal(f->wal.stats.watermark_writes, 1);
	uint64_t at = batch_offset_of(f->disk, "wal-0000000000000001.seg", 1);
	const uint8_t *data = simdisk_file_data(f->disk, "wal-0000000000000001.seg", &size);
	uint8_t b = data[at + WAL_BATCH_HEADER_SIZE + 7 * wal_record_size(100) + 50] ^ 0x20;
	assert_true(simdisk_poke(f->disk, "wal-0000000000000001.seg",
				 at + WAL_BATCH_HEADER_SIZE + 7 * wal_record_size(100) + 50, &b, 1));
	wal_close(&f->wal);
	assert_int_equal(wal_open(&f->wal, &f->cfg), -HASP_ECORRUPT);
	fixture_free(f);
}

/* EIO, ENOSPC, and EROFS (a file system turned read-only under the open
 * WAL: an ext4 error with errors=remount-ro, as the fault suite's
 * read-only nemesis does) on a write or its fdatasync. */
static void test_wal_eio_fails_loudly_and_stops_durability(void **state)
{
	(void)state;
	const struct { enum simdisk_op_kind kind; int err; } cases[] = {
		{ SIMDISK_OP_WRITE, EIO }, { SIMDISK_OP_FSYNC, ENOSPC },
		{ SIMDISK_OP_WRITE, EROFS }, { SIMDISK_OP_FSYNC, EROFS },
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct fixture *f = fixture_new(13);
		enum simdisk_op_kind kind = cases[c].kind;
		int err = cases[c].err;

		assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
		append_range(&f->wal, 1, 10, 1, 100);
		assert_int_equal(wal_drain(&f->wal), 0);
		simdisk_fail_nth(f->disk, kind, 0, err);
		append_range(&f->wal, 11, 20, 1, 100);
		int rc = wal_drain(&f->wal);
		assert_int_equal(rc, err == ENOSPC ? -HASP_ENOSPC : -HASP_EIO);
		assert_true(wal_failed(&f->wal));
		assert_int_equal(wal_durable_index(&f->wal), 10);
		struct wal_entry e = { 21, 1, 0, 0, NULL };
		assert_int_equal(wal_append(&f->wal, &e), rc);
		assert_int_equal(wal_submit(&f->wal), rc);
		assert_int_equal(wal_durable_index(&f->wal), 10);
		/* A restart recovers at least what was reported durable. */
		reopen(f);
		assert_true(wal_last_index(&f->wal) >= 10);
		fixture_free(f);
	}
}

static void test_wal_full_is_reported_not_grown(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(14);
	uint8_t buf[3000] = { 0 };
	int rc = 0;
	uint64_t i;

	f->cfg.writes_inflight_max = 1;
	f->cfg.write_size_max = BLOCK;
	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	for (i = 1; i < 100 && rc == 0; i++) {
		struct wal_entry e = { i, 1, 0, sizeof(buf), buf };
		rc = wal_append(&f->wal, &e);
	}
	/* 3 slots (1 in flight + 2) of one block each hold one entry each. */
	assert_int_equal(rc, -HASP_EFULL);
	assert_int_equal(i - 2, 3);
	assert_int_equal(f->wal.stats.full, 1);
	assert_int_equal(wal_drain(&f->wal), 0);
	struct wal_entry e = { 4, 1, 0, sizeof(buf), buf };
	assert_int_equal(wal_append(&f->wal, &e), 0);
	fixture_free(f);
}

/* Low concurrency: one small entry per write, each drained (durable, then an
 * idle watermark). Packed, a write takes its batch's bytes, not a block. */
static void test_wal_packs_small_writes_behind_durable_ones(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(17);
	struct collected c;
	const uint64_t per_entry = 2 * WAL_BATCH_HEADER_SIZE + wal_record_size(100);

	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	append_drained(&f->wal, 1, 20, 100);
	/* Every write after the first packed behind the one before it: 20
	 * entry batches and 20 watermark batches in 232 bytes per entry. */
	assert_int_equal(f->wal.stats.packed_writes, 39);
	assert_int_equal(f->wal.stats.records_bytes, 20 * wal_record_size(100));
	assert_int_equal(f->wal.stats.records_bytes + f->wal.stats.padding_bytes, 20 * per_entry);
	assert_int_equal(f->wal.write_offset, BLOCK + wal_block_round_up(20 * per_entry));
	/* O_DIRECT writes whole blocks: the device still sees 4 KiB per write
	 * (two where a batch crosses a block boundary). */
	assert_true(f->wal.stats.device_bytes >= 40 * BLOCK);
	reopen(f);
	replay(&f->wal, &c);
	assert_int_equal(c.first, 1);
	assert_int_equal(c.last, 20);
	/* After recovery the next write starts on a fresh block, then packs. */
	append_drained(&f->wal, 21, 22, 100);
	assert_int_equal(f->wal.stats.packed_writes, 3);
	reopen(f);
	replay(&f->wal, &c);
	assert_int_equal(c.last, 22);
	fixture_free(f);
}

/* Behind a write still in flight a write starts on a fresh block: two
 * writes to one block are never in flight together. */
static void test_wal_does_not_pack_behind_a_write_in_flight(void **state)
{
	(void)state;
	struct simdisk_config dc;
	struct fixture *f = fixture_new(18);

	simdisk_destroy(f->disk);
	simdisk_config_default(&dc, 18);
	dc.complete_per_million = 0; /* nothing completes until drained */
	f->disk = simdisk_create(&dc);
	f->cfg.io = simdisk_io(f->disk);
	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	append_drained(&f->wal, 1, 1, 100);
	uint64_t packed = f->wal.stats.packed_writes;
	append_range(&f->wal, 2, 2, 1, 100);
	assert_int_equal(wal_submit(&f->wal), 0);
	assert_int_equal(wal_inflight(&f->wal), 1);
	assert_int_equal(f->wal.stats.packed_writes, packed + 1); /* behind a durable one */
	append_range(&f->wal, 3, 3, 1, 100);
	assert_int_equal(wal_submit(&f->wal), 0);
	assert_int_equal(wal_inflight(&f->wal), 2);
	assert_int_equal(f->wal.stats.packed_writes, packed + 1); /* not behind 2 */
	const struct wal *w = &f->wal;
	assert_int_equal(w->writes[(w->write_head + 1) % w->write_count].offset,
			 w->writes[w->write_head].offset + BLOCK);
	assert_int_equal(wal_drain(&f->wal), 0);
	assert_int_equal(wal_durable_index(&f->wal), 3);
	fixture_free(f);
}

/* A power cut while a packed write rewrites the tail block: every sector of
 * the block may be old, new or torn inside. Entries reported durable before
 * it survive every time; the new entry survives or is cut whole. */
static void test_wal_torn_rewrite_of_the_tail_block_keeps_durable_records(void **state)
{
	(void)state;
	uint32_t kept = 0, cut = 0;

	for (uint64_t seed = 1; seed <= 64; seed++) {
		struct simdisk_config dc;
		struct fixture *f = fixture_new(seed);
		struct collected c;

		simdisk_destroy(f->disk);
		simdisk_config_default(&dc, seed);
		dc.torn_sector_per_million = 500000;
		f->disk = simdisk_create(&dc);
		f->cfg.io = simdisk_io(f->disk);
		assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
		append_drained(&f->wal, 1, 3, 300);
		uint64_t packed = f->wal.stats.packed_writes;
		append_range(&f->wal, 4, 4, 1, 300);
		assert_int_equal(wal_submit(&f->wal), 0);
		assert_int_equal(f->wal.stats.packed_writes, packed + 1);
		if (seed % 2 == 0)
			(void)wal_poll(&f->wal, false); /* it may have landed, or not */
		wal_close(&f->wal);
		simdisk_crash(f->disk);
		assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
		replay(&f->wal, &c);
		assert_int_equal(c.first, 1);
		assert_true(c.last == 3 || c.last == 4);
		kept += c.last == 4;
		cut += c.last == 3;
		fixture_free(f);
	}
	/* Both outcomes happened: the cut really hit the rewrite. */
	assert_true(kept > 0 && cut > 0);
}

/* A log written in format version 1 (every write on a fresh block) is read
 * and continued: its segments are not packed, new segments are. */
static void test_wal_reads_and_continues_an_old_format_log(void **state)
{
	(void)state;
	struct fixture *f = fixture_new(19);
	struct collected c;

	f->cfg.format_version = 1;
	assert_int_equal(wal_open(&f->wal, &f->cfg), 0);
	append_drained(&f->wal, 1, 3, 100);
	assert_int_equal(f->wal.stats.packed_writes, 0);
	assert_int_equal(f->wal.segments[0].version, 1);
	f->cfg.format_version = 0;
	reopen(f);
	replay(&f->wal, &c);
	assert_int_equal(c.last, 3);
	/* The version 1 segment stays unpacked until the log rolls over. */
	uint32_t rollovers = 0;
	for (uint64_t i = 4; i <= 60; i++) {
		append_drained(&f->wal, i, i, 100);
		if (f->wal.segments[f->wal.segment_count - 1].version == 1)
			assert_int_equal(f->wal.stats.packed_writes, 0);
		rollovers = (uint32_t)f->wal.stats.rollovers;
	}
	assert_true(rollovers > 0);
	assert_int_equal(f->wal.segments[f->wal.segment_count - 1].version, WAL_FORMAT_VERSION);
	assert_true(f->wal.stats.packed_writes > 0);
	reopen(f);
	replay(&f->wal, &c);
	assert_int_equal(c.first, 1);
	assert_int_equal(c.last, 60);
	assert_int_equal(c.count, 60);
	fixture_free(f);
}

/* The facade over the simulated disk, as the Raft simulator uses it: what
 * was reported durable (entries and hard state) survives a power cut. */
static void test_storage_facade_over_simdisk_survives_a_crash(void **state)
{
	(void)state;
	struct simdisk_config dc;
	struct simdisk *d;
	struct storage s;
	struct storage_config cfg = { 0 };
	struct hard_state hs = { 0 }, loaded;
	struct collected c;

	simdisk_config_default(&dc, 15);
	d = simdisk_create(&dc);
	cfg.io = simdisk_io(d);
	cfg.segment_size = 16 * BLOCK;
	cfg.write_size_max = 2 * BLOCK;
	assert_int_equal(storage_open(&s, &cfg, &loaded), 0);
	hs = (struct hard_state){ 4, 3 };
	int64_t seq = hardstate_save(&s.hs, &hs);
	append_range(&s.wal, 1, 100, 4, 200);
	assert_int_equal(wal_submit(&s.wal), 0);
	while (wal_durable_index(&s.wal) < 60 || hardstate_durable_seq(&s.hs) < (uint64_t)seq)
		(void)storage_poll(&s, true);
	uint64_t durable = wal_durable_index(&s.wal);
	storage_close(&s);
	simdisk_crash(d);
	assert_int_equal(storage_open(&s, &cfg, &loaded), 0);
	assert_int_equal(loaded.term, 4);
	assert_int_equal(loaded.vote, 3);
	assert_true(wal_last_index(&s.wal) >= durable);
	replay(&s.wal, &c);
	assert_int_equal(c.first, 1);
	assert_true(c.last >= durable);
	storage_close(&s);
	simdisk_destroy(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wal_append_is_durable_after_poll_and_survives_reopen),
		cmocka_unit_test(test_wal_append_refuses_a_gap_or_an_internal_type),
		cmocka_unit_test(test_wal_group_commit_joins_appends_while_writes_are_in_flight),
		cmocka_unit_test(test_wal_reports_durability_in_order_when_completions_are_not),
		cmocka_unit_test(test_wal_short_writes_and_eagain_are_continued),
		cmocka_unit_test(test_wal_segment_rollover_keeps_the_log_whole),
		cmocka_unit_test(test_wal_truncate_suffix_drops_entries_and_new_ones_replace_them),
		cmocka_unit_test(test_wal_truncate_while_writes_are_in_flight_clamps_durability),
		cmocka_unit_test(test_wal_compact_drops_whole_segments_below_the_index),
		cmocka_unit_test(test_wal_reset_starts_after_a_snapshot_index),
		cmocka_unit_test(test_wal_recover_truncates_torn_tail),
		cmocka_unit_test(test_wal_refuses_bad_record_followed_by_writes_that_prove_it_durable),
		cmocka_unit_test(test_wal_refuses_damage_to_the_newest_durable_batch_after_idle),
		cmocka_unit_test(test_wal_eio_fails_loudly_and_stops_durability),
		cmocka_unit_test(test_wal_full_is_reported_not_grown),
		cmocka_unit_test(test_wal_packs_small_writes_behind_durable_ones),
		cmocka_unit_test(test_wal_spare_is_filled_with_zeros_before_it_is_ready),
		cmocka_unit_test(test_wal_does_not_pack_behind_a_write_in_flight),
		cmocka_unit_test(test_wal_torn_rewrite_of_the_tail_block_keeps_durable_records),
		cmocka_unit_test(test_wal_reads_and_continues_an_old_format_log),
		cmocka_unit_test(test_storage_facade_over_simdisk_survives_a_crash),
	};

	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
