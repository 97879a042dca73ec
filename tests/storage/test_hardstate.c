/*
 * Hard-state slots over the simulated disk: saves become durable through
 * the poll loop, slots alternate, a damaged slot refuses the open (it may
 * have held the newest vote), saves coalesce while one is in flight, a crash never loses a save
 * that was reported durable, and -EIO puts the store into a failed state.
 */
#include <errno.h>
#include <string.h>

#include "common/prng.h"
#include "hasp/errors.h"
#include "storage/hardstate.h"
#include "storage/simdisk.h"
#include "tests/test_util.h"

static void pump(struct simdisk *d, struct hardstate *h, bool wait)
{
	struct storage_cqe cqes[8];
	struct storage_io io = simdisk_io(d);
	unsigned n = io.ops->reap(io.ctx, cqes, 8, wait);

	for (unsigned i = 0; i < n; i++)
		hardstate_io_done(h, &cqes[i]);
}

static void settle(struct simdisk *d, struct hardstate *h)
{
	while (simdisk_inflight(d) > 0)
		pump(d, h, true);
}

static struct simdisk *disk_new(uint64_t seed, bool faults)
{
	struct simdisk_config dc;

	simdisk_config_default(&dc, seed);
	if (!faults)
		dc.short_write_per_million = dc.again_per_million = 0;
	return simdisk_create(&dc);
}

static void test_hardstate_new_node_loads_zero(void **state)
{
	(void)state;
	struct simdisk *d = disk_new(1, false);
	struct hardstate h;
	struct hard_state hs = { 9, 9 };

	assert_int_equal(hardstate_open(&h, simdisk_io(d), &hs), 0);
	assert_int_equal(hs.term, 0);
	assert_int_equal(hs.vote, 0);
	assert_int_equal(hardstate_durable_seq(&h), 0);
	hardstate_close(&h);
	simdisk_destroy(d);
}

static void test_hardstate_save_is_durable_after_poll_and_reloads(void **state)
{
	(void)state;
	struct simdisk *d = disk_new(2, true);
	struct hardstate h;
	struct hard_state hs, loaded;

	assert_int_equal(hardstate_open(&h, simdisk_io(d), &hs), 0);
	for (uint64_t t = 1; t <= 20; t++) {
		hs = (struct hard_state){ t, t % 3 };
		int64_t seq = hardstate_save(&h, &hs);
		assert_true(seq > 0);
		assert_true(hardstate_durable_seq(&h) < (uint64_t)seq);
		settle(d, &h);
		assert_int_equal(hardstate_durable_seq(&h), seq);
		assert_int_equal(hardstate_durable(&h).term, t);
		/* The slots alternate. */
		assert_int_equal(h.durable_slot, (uint32_t)(t % 2));
	}
	hardstate_close(&h);
	simdisk_crash(d);
	assert_int_equal(hardstate_open(&h, simdisk_io(d), &loaded), 0);
	assert_int_equal(loaded.term, 20);
	assert_int_equal(loaded.vote, 20 % 3);
	hardstate_close(&h);
	simdisk_destroy(d);
}

static void save_settled(struct simdisk *d, struct hardstate *h, uint64_t term, uint64_t vote)
{
	struct hard_state hs = { term, vote };
	assert_true(hardstate_save(h, &hs) > 0);
	settle(d, h);
	assert_int_equal(hardstate_durable(h).term, term);
}

static void test_hardstate_damaged_slot_refuses_to_start(void **state)
{
	/* Either slot may be the one holding the newest vote: a damaged slot
	 * (bytes of its record changed, or the slot zeroed) refuses the open
	 * instead of falling back to the other slot's older vote. */
	(void)state;
	for (int which = 0; which < 2; which++) {
		for (int zeroed = 0; zeroed < 2; zeroed++) {
			struct simdisk *d = disk_new(3, false);
			struct hardstate h;
			struct hard_state hs;
			uint8_t junk[HARDSTATE_SLOT_SIZE];

			assert_int_equal(hardstate_open(&h, simdisk_io(d), &hs), 0);
			/* Three saves: slots hold sequences 2 and 3. (Only a
			 * zeroed slot 0 next to sequence 1 in slot 1 cannot be
			 * told from a single save; the check against the log's
			 * terms covers what that loses.) */
			save_settled(d, &h, 3, 3);
			save_settled(d, &h, 4, 1);
			save_settled(d, &h, 5, 2);
			uint32_t newest = h.durable_slot;
			uint32_t slot = which == 0 ? newest : 1u - newest;
			hardstate_close(&h);
			memset(junk, zeroed ? 0 : 0xa5, sizeof(junk));
			assert_true(simdisk_poke(d, HARDSTATE_FILE, slot * HARDSTATE_SLOT_SIZE + 20,
						 junk, zeroed ? HARDSTATE_SLOT_SIZE - 20 : 10));
			if (zeroed)
				assert_true(simdisk_poke(d, HARDSTATE_FILE, slot * HARDSTATE_SLOT_SIZE,
							 junk, 20));
			hs = (struct hard_state){ 99, 99 };
			assert_int_equal(hardstate_open(&h, simdisk_io(d), &hs), -HASP_ECORRUPT);
			/* Nothing was loaded, nothing was written over the evidence. */
			assert_int_equal(hs.term, 99);
			simdisk_destroy(d);
		}
	}
}

static void test_hardstate_only_first_save_may_leave_slot_zero_empty(void **state)
{
	/* After one save only one slot is written: the other still zero is
	 * normal. */
	(void)state;
	struct simdisk *d = disk_new(6, false);
	struct hardstate h;
	struct hard_state hs;

	assert_int_equal(hardstate_open(&h, simdisk_io(d), &hs), 0);
	save_settled(d, &h, 1, 1);
	assert_int_equal(h.durable_slot, 1);
	hardstate_close(&h);
	assert_int_equal(hardstate_open(&h, simdisk_io(d), &hs), 0);
	assert_int_equal(hs.term, 1);
	assert_false(h.created);
	/* The next save goes into slot 0, not over the durable one. */
	save_settled(d, &h, 2, 0);
	assert_int_equal(h.durable_slot, 0);
	hardstate_close(&h);
	assert_int_equal(hardstate_open(&h, simdisk_io(d), &hs), 0);
	assert_int_equal(hs.term, 2);
	hardstate_close(&h);
	simdisk_destroy(d);
}

static void test_hardstate_saves_coalesce_while_one_is_in_flight(void **state)
{
	(void)state;
	struct simdisk *d = disk_new(4, false);
	struct hardstate h;
	struct hard_state hs;

	assert_int_equal(hardstate_open(&h, simdisk_io(d), &hs), 0);
	hs = (struct hard_state){ 1, 1 };
	int64_t a = hardstate_save(&h, &hs);
	hs = (struct hard_state){ 2, 0 };
	int64_t b = hardstate_save(&h, &hs);
	hs = (struct hard_state){ 2, 3 };
	int64_t c = hardstate_save(&h, &hs);
	assert_true(a < b && b < c);
	assert_true(hardstate_busy(&h));
	settle(d, &h);
	assert_false(hardstate_busy(&h));
	assert_int_equal(hardstate_durable_seq(&h), c);
	assert_int_equal(hardstate_durable(&h).vote, 3);
	struct simdisk_stats st;
	simdisk_stats_get(d, &st);
	assert_int_equal(st.writes, 2); /* a, then c; b was overtaken */
	hardstate_close(&h);
	simdisk_destroy(d);
}

static void test_hardstate_crash_never_loses_a_durable_save(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 500; seed++) {
		struct simdisk_config dc;
		simdisk_config_default(&dc, seed);
		/* Sector writes are atomic (hardstate.h): the simulated crash
		 * keeps or reverts each sector of an in-flight write, never
		 * tears one. */
		dc.torn_sector_per_million = 0;
		struct simdisk *d = simdisk_create(&dc);
		struct hardstate h;
		struct hard_state hs, loaded;
		struct prng p;
		uint64_t durable_term = 0, saved_max = 0;

		prng_seed(&p, seed);
		assert_int_equal(hardstate_open(&h, simdisk_io(d), &hs), 0);
		for (uint64_t t = 1, n = prng_range(&p, 1, 12); t <= n; t++) {
			hs = (struct hard_state){ t, t };
			assert_true(hardstate_save(&h, &hs) > 0);
			saved_max = t;
			for (uint64_t k = prng_below(&p, 4); k > 0; k--)
				pump(d, &h, false);
			durable_term = hardstate_durable(&h).term;
		}
		hardstate_close(&h);
		simdisk_crash(d);
		assert_int_equal(hardstate_open(&h, simdisk_io(d), &loaded), 0);
		/* Never older than what was durable, never newer than saved, and
		 * always a state that was saved (term == vote here). */
		assert_true(loaded.term >= durable_term);
		assert_true(loaded.term <= saved_max);
		assert_int_equal(loaded.term, loaded.vote);
		hardstate_close(&h);
		simdisk_destroy(d);
	}
}

/* A failed fsync (EIO), or a write on a file system turned read-only under
 * the node (EROFS: an ext4 error with errors=remount-ro, as the fault
 * suite's read-only nemesis does): the save fails, the durable term and
 * vote stay the last saved ones, and every later save is refused. */
static void test_hardstate_eio_fails_and_stops_durability(void **state)
{
	(void)state;
	const struct { enum simdisk_op_kind kind; int err; } cases[] = {
		{ SIMDISK_OP_FSYNC, EIO }, { SIMDISK_OP_WRITE, EROFS },
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct simdisk *d = disk_new(5 + c, false);
		struct hardstate h;
		struct hard_state hs;

		assert_int_equal(hardstate_open(&h, simdisk_io(d), &hs), 0);
		hs = (struct hard_state){ 1, 1 };
		assert_true(hardstate_save(&h, &hs) > 0);
		settle(d, &h);
		simdisk_fail_nth(d, cases[c].kind, 0, cases[c].err);
		hs = (struct hard_state){ 2, 2 };
		assert_true(hardstate_save(&h, &hs) > 0);
		settle(d, &h);
		assert_true(h.failed);
		assert_int_equal(hardstate_durable(&h).term, 1);
		assert_int_equal(hardstate_save(&h, &hs), -HASP_EIO);
		hardstate_close(&h);
		simdisk_destroy(d);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hardstate_new_node_loads_zero),
		cmocka_unit_test(test_hardstate_save_is_durable_after_poll_and_reloads),
		cmocka_unit_test(test_hardstate_damaged_slot_refuses_to_start),
		cmocka_unit_test(test_hardstate_only_first_save_may_leave_slot_zero_empty),
		cmocka_unit_test(test_hardstate_saves_coalesce_while_one_is_in_flight),
		cmocka_unit_test(test_hardstate_crash_never_loses_a_durable_save),
		cmocka_unit_test(test_hardstate_eio_fails_and_stops_durability),
	};

	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
