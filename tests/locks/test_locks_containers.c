/*
 * The containers under the lock state machine: lowest-free slots, the
 * compacting arena, the hash index with backward-shift deletion, and the
 * deadline heap, each against a brute-force reference.
 */
#include <stdlib.h>
#include <string.h>

#include "common/prng.h"
#include "locks/arena.h"
#include "locks/dheap.h"
#include "locks/dirty.h"
#include "locks/hindex.h"
#include "locks/slots.h"
#include "tests/test_util.h"

struct dirty_runs {
	const bool *marked;
	uint64_t bits;
	uint64_t next;   /* every index below it has been accounted for */
	uint64_t visited;
};

/* Each run must be maximal, in order, and exactly the marked indices. */
static void dirty_check_run(void *ctx, uint64_t first, uint64_t count)
{
	struct dirty_runs *r = ctx;

	assert_true(count > 0);
	assert_true(first >= r->next);
	for (uint64_t i = r->next; i < first; i++)
		assert_false(r->marked[i]);
	if (first > 0)
		assert_false(r->marked[first - 1]); /* else the run was not maximal */
	for (uint64_t i = first; i < first + count; i++)
		assert_true(r->marked[i]);
	assert_true(first + count == r->bits || !r->marked[first + count]);
	r->next = first + count;
	r->visited += count;
}

static void test_dirty_drains_exactly_what_was_marked(void **state)
{
	(void)state;
	struct dirty_set d;
	struct prng p;
	const uint64_t bits = 64 * 64 * 3 + 100; /* summary of several words, a part word */
	bool *marked = calloc(bits, sizeof(bool));

	assert_non_null(marked);
	assert_int_equal(dirty_init(&d, bits), 0);
	prng_seed(&p, 11);
	for (int round = 0; round < 300; round++) {
		uint64_t expect = 0;
		memset(marked, 0, bits * sizeof(bool));
		/* Sparse single marks, dense ones, and ranges over word edges. */
		uint64_t marks = prng_below(&p, round % 3 == 0 ? 4000 : 40);
		for (uint64_t k = 0; k < marks; k++) {
			if (prng_chance(&p, 300000)) {
				uint64_t first = prng_below(&p, bits);
				uint64_t count = prng_range(&p, 0, bits - first < 200 ? bits - first : 200);
				for (uint64_t i = first; i < first + count; i++) {
					dirty_mark(&d, i);
					marked[i] = true;
				}
			} else {
				uint64_t i = prng_below(&p, bits);
				dirty_mark(&d, i);
				marked[i] = true;
			}
		}
		if (round == 5) { /* everything */
			for (uint64_t i = 0; i < bits; i++) {
				dirty_mark(&d, i);
				marked[i] = true;
			}
		}
		for (uint64_t i = 0; i < bits; i++)
			expect += marked[i];
		struct dirty_runs r = { .marked = marked, .bits = bits };
		assert_int_equal(dirty_drain(&d, dirty_check_run, &r), expect);
		assert_int_equal(r.visited, expect);
		for (uint64_t i = r.next; i < bits; i++)
			assert_false(marked[i]);
		/* Drained means empty. */
		assert_int_equal(dirty_drain(&d, NULL, NULL), 0);
	}
	dirty_deinit(&d);
	free(marked);
}

static void test_slots_always_hand_out_lowest_free(void **state)
{
	(void)state;
	struct slots s;
	struct prng p;
	const uint32_t cap = 64 * 64 + 77; /* three levels, padded words */
	bool *used = calloc(cap, sizeof(bool));

	assert_int_equal(slots_init(&s, cap), 0);
	prng_seed(&p, 7);
	for (int i = 0; i < 200000; i++) {
		if (prng_chance(&p, 550000)) {
			uint32_t want = 0;
			while (want < cap && used[want])
				want++;
			uint32_t got = slots_alloc(&s);
			assert_int_equal(got, want < cap ? want : SLOTS_NONE);
			if (got != SLOTS_NONE)
				used[got] = true;
		} else {
			uint32_t k = (uint32_t)prng_below(&p, cap);
			if (used[k]) {
				slots_free(&s, k);
				used[k] = false;
			}
		}
	}
	uint32_t n = 0;
	for (uint32_t k = 0; k < cap; k++) {
		n += used[k];
		assert_int_equal(slots_used(&s, k), used[k]);
	}
	assert_int_equal(n, s.used_count);
	slots_clear(&s);
	assert_int_equal(slots_alloc(&s), 0);
	slots_take(&s, cap - 1);
	assert_true(slots_used(&s, cap - 1));
	expect_assert_failure(slots_free(&s, 5));
	slots_deinit(&s);
	free(used);
}

struct owners {
	uint32_t off[64];
	uint8_t len[64];
	uint8_t fill[64];
};

static void owners_moved(void *ctx, uint32_t owner, uint32_t offset)
{
	struct owners *o = ctx;
	o->off[owner] = offset;
}

static void test_arena_compacts_and_keeps_contents(void **state)
{
	(void)state;
	struct arena a;
	struct owners o = { 0 };
	struct prng p;
	bool live[64] = { false };
	uint32_t live_bytes = 0;
	uint8_t buf[40];
	const uint32_t budget = 400; /* data bytes, at most 64 blobs */

	assert_int_equal(arena_init(&a, arena_size_for(budget, 64), owners_moved, &o), 0);
	prng_seed(&p, 11);
	for (int i = 0; i < 20000; i++) {
		uint32_t k = (uint32_t)prng_below(&p, 64);
		if (live[k]) {
			arena_free(&a, o.off[k]);
			live[k] = false;
			live_bytes -= o.len[k];
			continue;
		}
		uint8_t len = (uint8_t)prng_below(&p, sizeof(buf));
		if (live_bytes + len > budget)
			continue;
		memset(buf, (int)k + i, len);
		o.off[k] = arena_append(&a, k, buf, len);
		o.len[k] = len;
		o.fill[k] = (uint8_t)(k + i);
		live[k] = true;
		live_bytes += len;
		/* Every live blob still holds its bytes, wherever it moved. */
		for (uint32_t j = 0; j < 64; j++)
			for (uint32_t b = 0; live[j] && b < o.len[j]; b++)
				assert_int_equal(arena_data(&a, o.off[j])[b], o.fill[j]);
	}
	assert_true(a.compaction_count > 10);
	arena_deinit(&a);
}

struct keys {
	uint32_t hash[256];
	uint32_t key[256];
	uint32_t want;
};

static bool keys_eq(const void *ctx, uint32_t slot)
{
	const struct keys *k = ctx;
	return k->key[slot] == k->want;
}

static uint32_t keys_hash(const void *ctx, uint32_t slot)
{
	const struct keys *k = ctx;
	return k->hash[slot];
}

static void test_hindex_finds_everything_after_removals(void **state)
{
	(void)state;
	struct hindex h;
	struct keys k;
	struct prng p;
	bool in[256] = { false };

	assert_int_equal(hindex_init(&h, 256), 0);
	prng_seed(&p, 3);
	for (uint32_t i = 0; i < 256; i++) {
		k.key[i] = i * 7919u;
		k.hash[i] = (uint32_t)prng_below(&p, 16) * 37u; /* many collisions */
	}
	for (int step = 0; step < 50000; step++) {
		uint32_t i = (uint32_t)prng_below(&p, 256);
		if (in[i]) {
			hindex_remove(&h, k.hash[i], i, keys_hash, &k);
			in[i] = false;
		} else {
			hindex_insert(&h, k.hash[i], i);
			in[i] = true;
		}
		if (step % 97 == 0)
			for (uint32_t j = 0; j < 256; j++) {
				k.want = k.key[j];
				assert_int_equal(hindex_find(&h, k.hash[j], keys_eq, &k), in[j] ? j : HINDEX_NONE);
			}
	}
	assert_int_not_equal(hindex_hash_bytes(1, (const uint8_t *)"abc", 3),
			     hindex_hash_bytes(2, (const uint8_t *)"abc", 3));
	hindex_deinit(&h);
}

struct deadlines {
	uint64_t key[128];
	uint32_t pos[128];
};

static uint64_t dl_key(const void *ctx, uint32_t slot)
{
	return ((const struct deadlines *)ctx)->key[slot];
}

static void dl_set_pos(void *ctx, uint32_t slot, uint32_t pos)
{
	((struct deadlines *)ctx)->pos[slot] = pos;
}

static void test_dheap_min_and_due_match_brute_force(void **state)
{
	(void)state;
	struct dheap h;
	struct deadlines d;
	struct prng p;
	bool in[128] = { false };
	uint32_t due[128];

	assert_int_equal(dheap_init(&h, 128, dl_key, dl_set_pos, &d), 0);
	prng_seed(&p, 5);
	for (int step = 0; step < 20000; step++) {
		uint32_t i = (uint32_t)prng_below(&p, 128);
		uint64_t c = prng_below(&p, 3);
		if (!in[i]) {
			d.key[i] = prng_below(&p, 1000);
			dheap_insert(&h, i);
			in[i] = true;
		} else if (c == 0) {
			dheap_remove(&h, d.pos[i]);
			in[i] = false;
		} else {
			d.key[i] = prng_below(&p, 1000);
			dheap_update(&h, d.pos[i]);
		}
		uint64_t best = UINT64_MAX, limit = prng_below(&p, 1000);
		uint32_t expect_due = 0;
		for (uint32_t j = 0; j < 128; j++)
			if (in[j]) {
				best = d.key[j] < best ? d.key[j] : best;
				expect_due += d.key[j] <= limit;
			}
		uint32_t m = dheap_min(&h);
		assert_int_equal(m == DHEAP_NONE ? UINT64_MAX : d.key[m], best);
		uint32_t n = dheap_due(&h, limit, due, 128);
		assert_int_equal(n, expect_due);
		for (uint32_t j = 0; j < n; j++)
			assert_true(in[due[j]] && d.key[due[j]] <= limit);
	}
	dheap_deinit(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slots_always_hand_out_lowest_free),
		cmocka_unit_test(test_dirty_drains_exactly_what_was_marked),
		cmocka_unit_test(test_arena_compacts_and_keeps_contents),
		cmocka_unit_test(test_hindex_finds_everything_after_removals),
		cmocka_unit_test(test_dheap_min_and_due_match_brute_force),
	};

	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
