/*
 * The watch registry's indexes (node/watch_index.c) against a naive model:
 * seeded random adds, removals, session ends, holds and matches, where the
 * model answers every question by scanning all its watches. After every
 * step the index's own invariants hold and each answer equals the model's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/prng.h"
#include "node/watch_index.h"
#include "tests/test_util.h"

#define SESSIONS 8u
#define CAPACITY 64u

struct model_watch {
	bool used;
	uint64_t session;
	bool prefix;
	uint8_t len;
	uint8_t name[8];
	uint32_t index; /* in the index under test */
};

struct model {
	struct model_watch w[CAPACITY];
	uint32_t count;
	uint32_t held[CAPACITY]; /* FIFO of model slots */
	uint32_t held_count;
};

static bool model_matches(const struct model_watch *m, const uint8_t *name, uint8_t len)
{
	if (m->prefix)
		return len >= m->len && memcmp(name, m->name, m->len) == 0;
	return len == m->len && memcmp(name, m->name, len) == 0;
}

static int model_find(const struct model *m, uint64_t session, const uint8_t *name, uint8_t len,
		      bool prefix)
{
	for (uint32_t k = 0; k < CAPACITY; k++)
		if (m->w[k].used && m->w[k].session == session && m->w[k].prefix == prefix &&
		    m->w[k].len == len && memcmp(m->w[k].name, name, len) == 0)
			return (int)k;
	return -1;
}

static int model_of(const struct model *m, uint32_t index)
{
	for (uint32_t k = 0; k < CAPACITY; k++)
		if (m->w[k].used && m->w[k].index == index)
			return (int)k;
	return -1;
}

static void model_unhold(struct model *m, uint32_t k)
{
	for (uint32_t h = 0; h < m->held_count; h++)
		if (m->held[h] == k) {
			memmove(&m->held[h], &m->held[h + 1], (m->held_count - h - 1) * sizeof(m->held[0]));
			m->held_count--;
			return;
		}
}

static bool model_is_held(const struct model *m, uint32_t k)
{
	for (uint32_t h = 0; h < m->held_count; h++)
		if (m->held[h] == k)
			return true;
	return false;
}

/* Names from a small alphabet, so that prefixes and keys collide often. */
static uint8_t random_name(struct prng *p, uint8_t *name)
{
	uint8_t len = (uint8_t)prng_below(p, 6);
	for (uint8_t i = 0; i < len; i++)
		name[i] = (uint8_t)("ab/"[prng_below(p, 3)]);
	return len;
}

struct seen {
	uint32_t count;
	uint8_t hits[CAPACITY];
};

static void record(void *arg, struct watch_index *x, uint32_t i)
{
	struct seen *s = arg;
	assert_true(i < CAPACITY);
	assert_int_not_equal(x->w[i].session_id, 0);
	s->hits[i]++;
	s->count++;
}

static void check_against_model(struct watch_index *x, struct model *m, uint32_t *heads, struct prng *p)
{
	assert_true(watch_index_check(x));
	assert_int_equal(x->count, m->count);
	assert_int_equal(x->held_count, m->held_count);
	/* The held FIFO in the model's order. */
	uint32_t i = watch_index_held_first(x);
	for (uint32_t h = 0; h < m->held_count; h++, i = x->w[i].held_next)
		assert_int_equal(i, m->w[m->held[h]].index);
	assert_int_equal(i, WATCH_NONE);
	/* Each session's chain holds exactly its watches. */
	for (uint32_t s = 0; s < SESSIONS; s++) {
		uint32_t want = 0;
		for (uint32_t k = 0; k < CAPACITY; k++)
			want += m->w[k].used && m->w[k].session == s + 1;
		assert_int_equal(watch_index_session_count(x, heads[s]), want);
		for (uint32_t j = heads[s]; j != WATCH_NONE; j = x->w[j].sess_next)
			assert_int_equal(x->w[j].session_id, s + 1);
	}
	/* A few events: each matching watch visited once, nothing else. */
	for (int e = 0; e < 4; e++) {
		uint8_t name[8];
		uint8_t len = random_name(p, name);
		struct seen seen = { 0 };
		watch_index_match(x, name, len, record, &seen);
		uint32_t want = 0;
		for (uint32_t k = 0; k < CAPACITY; k++) {
			if (!m->w[k].used)
				continue;
			bool match = model_matches(&m->w[k], name, len);
			want += match;
			assert_int_equal(seen.hits[m->w[k].index], match ? 1 : 0);
		}
		assert_int_equal(seen.count, want);
	}
}

static void random_steps(uint64_t seed)
{
	struct prng p;
	prng_seed(&p, seed);
	struct watch_index x;
	assert_int_equal(watch_index_init(&x, CAPACITY, prng_next(&p)), 0);
	struct model m;
	memset(&m, 0, sizeof(m));
	uint32_t heads[SESSIONS];
	for (uint32_t s = 0; s < SESSIONS; s++)
		heads[s] = WATCH_NONE;

	for (int step = 0; step < 4000; step++) {
		uint32_t s = (uint32_t)prng_below(&p, SESSIONS);
		uint8_t name[8];
		uint8_t len = random_name(&p, name);
		bool prefix = prng_chance(&p, 500000);
		uint32_t op = (uint32_t)prng_below(&p, 100);
		if (op < 45) { /* WATCH */
			int k = model_find(&m, s + 1, name, len, prefix);
			uint32_t found = watch_index_session_find(&x, heads[s], name, len, prefix);
			assert_int_equal(found, k < 0 ? WATCH_NONE : m.w[k].index);
			if (k >= 0)
				continue;
			uint32_t i = watch_index_add(&x, &heads[s], s + 1, name, len, prefix);
			if (m.count == CAPACITY) {
				assert_int_equal(i, WATCH_NONE);
				continue;
			}
			assert_true(i < CAPACITY);
			assert_int_equal(model_of(&m, i), -1); /* not in use twice */
			uint32_t slot = 0;
			while (m.w[slot].used)
				slot++;
			m.w[slot] = (struct model_watch){ .used = true, .session = s + 1, .prefix = prefix,
							  .len = len, .index = i };
			memcpy(m.w[slot].name, name, len);
			m.count++;
		} else if (op < 70) { /* UNWATCH */
			int k = model_find(&m, s + 1, name, len, prefix);
			uint32_t found = watch_index_session_find(&x, heads[s], name, len, prefix);
			assert_int_equal(found, k < 0 ? WATCH_NONE : m.w[k].index);
			if (k < 0)
				continue;
			watch_index_remove(&x, &heads[s], found);
			model_unhold(&m, (uint32_t)k);
			m.w[k].used = false;
			m.count--;
		} else if (op < 75) { /* the session ends */
			uint32_t held = 0;
			for (uint32_t k = 0; k < CAPACITY; k++)
				if (m.w[k].used && m.w[k].session == s + 1) {
					held += model_is_held(&m, k);
					model_unhold(&m, k);
					m.w[k].used = false;
					m.count--;
				}
			assert_int_equal(watch_index_remove_session(&x, &heads[s]), held);
			assert_int_equal(heads[s], WATCH_NONE);
		} else if (op < 90 && m.count > 0) { /* an event held for a random watch */
			uint32_t k = (uint32_t)prng_below(&p, CAPACITY);
			while (!m.w[k].used)
				k = (k + 1) % CAPACITY;
			watch_index_hold(&x, m.w[k].index);
			if (!model_is_held(&m, k))
				m.held[m.held_count++] = k;
		} else if (m.held_count > 0) { /* the oldest held event sent */
			uint32_t i = watch_index_held_first(&x);
			assert_int_equal(i, m.w[m.held[0]].index);
			watch_index_unhold(&x, i);
			model_unhold(&m, m.held[0]);
		}
		check_against_model(&x, &m, heads, &p);
	}
	watch_index_deinit(&x);
}

static void test_watch_index_matches_a_naive_model(void **state)
{
	(void)state;
	uint64_t seed = test_util_seed(20261125);
	for (uint64_t k = 0; k < 8; k++)
		random_steps(seed + k);
}

static void count_visit(void *arg, struct watch_index *x, uint32_t i)
{
	(void)x;
	(void)i;
	(*(uint32_t *)arg)++;
}

/* 100,000 watches in one node's registry: 10,000 sessions with ten each
 * (a shared lock, a key of their own, a shared prefix and seven more of
 * their own), found by event in O(matching), removed by session. */
static void test_watch_index_holds_100k_watches(void **state)
{
	(void)state;
	enum { N_SESS = 10000, PER = 10 };
	struct watch_index x;
	assert_int_equal(watch_index_init(&x, N_SESS * PER, 99), 0);
	uint32_t *heads = malloc(N_SESS * sizeof(*heads));
	assert_non_null(heads);
	for (uint32_t s = 0; s < N_SESS; s++) {
		heads[s] = WATCH_NONE;
		char name[32];
		assert_int_not_equal(watch_index_add(&x, &heads[s], s + 1, (const uint8_t *)"lock/hot", 8, false),
				     WATCH_NONE);
		assert_int_not_equal(watch_index_add(&x, &heads[s], s + 1, (const uint8_t *)"jobs/", 5, true),
				     WATCH_NONE);
		for (uint32_t k = 0; k < PER - 2; k++) {
			int len = snprintf(name, sizeof(name), "own/%u/%u", s, k);
			assert_int_not_equal(watch_index_add(&x, &heads[s], s + 1, (const uint8_t *)name,
							     (uint8_t)len, k == 0),
					     WATCH_NONE);
		}
	}
	assert_int_equal(x.count, N_SESS * PER);
	/* Full: one more is refused and nothing changes. */
	uint32_t spare = WATCH_NONE;
	assert_int_equal(watch_index_add(&x, &spare, 1, (const uint8_t *)"x", 1, false), WATCH_NONE);
	assert_int_equal(x.count, N_SESS * PER);
	assert_true(watch_index_check(&x));

	uint32_t visits = 0;
	watch_index_match(&x, (const uint8_t *)"lock/hot", 8, count_visit, &visits);
	assert_int_equal(visits, N_SESS);
	visits = 0;
	watch_index_match(&x, (const uint8_t *)"jobs/42", 7, count_visit, &visits);
	assert_int_equal(visits, N_SESS);
	/* own/7/0 is a prefix watch of session 7 (and an exact name). */
	visits = 0;
	watch_index_match(&x, (const uint8_t *)"own/7/0/x", 9, count_visit, &visits);
	assert_int_equal(visits, 1);
	visits = 0;
	watch_index_match(&x, (const uint8_t *)"own/7/3", 7, count_visit, &visits);
	assert_int_equal(visits, 1);
	visits = 0;
	watch_index_match(&x, (const uint8_t *)"nobody", 6, count_visit, &visits);
	assert_int_equal(visits, 0);

	/* Bytes per watch: the entry plus its share of the table. */
	size_t per = watch_index_bytes_per_watch(&x);
	assert_true(per >= sizeof(struct watch) && per <= sizeof(struct watch) + 16);

	for (uint32_t s = 0; s < N_SESS; s += 2)
		assert_int_equal(watch_index_remove_session(&x, &heads[s]), 0);
	assert_int_equal(x.count, N_SESS / 2 * PER);
	visits = 0;
	watch_index_match(&x, (const uint8_t *)"lock/hot", 8, count_visit, &visits);
	assert_int_equal(visits, N_SESS / 2);
	assert_true(watch_index_check(&x));
	free(heads);
	watch_index_deinit(&x);
}

/* Every key of the table (exact and prefix, every length 0..128). */
static void test_watch_index_every_prefix_length(void **state)
{
	(void)state;
	struct watch_index x;
	assert_int_equal(watch_index_init(&x, 2 * (HASP_NAME_SIZE_MAX + 1), 5), 0);
	uint8_t name[HASP_NAME_SIZE_MAX];
	memset(name, 'z', sizeof(name));
	uint32_t head = WATCH_NONE;
	for (uint32_t l = 0; l <= HASP_NAME_SIZE_MAX; l++) {
		assert_int_not_equal(watch_index_add(&x, &head, 1, name, (uint8_t)l, true), WATCH_NONE);
		assert_int_not_equal(watch_index_add(&x, &head, 1, name, (uint8_t)l, false), WATCH_NONE);
	}
	assert_int_equal(x.prefix_lens_used, HASP_NAME_SIZE_MAX + 1);
	uint32_t visits = 0;
	watch_index_match(&x, name, (uint8_t)HASP_NAME_SIZE_MAX, count_visit, &visits);
	assert_int_equal(visits, HASP_NAME_SIZE_MAX + 2); /* 129 prefixes and the exact name */
	visits = 0;
	watch_index_match(&x, name, 0, count_visit, &visits);
	assert_int_equal(visits, 2); /* the empty prefix and the empty name */
	assert_int_equal(watch_index_remove_session(&x, &head), 0);
	assert_int_equal(x.prefix_lens_used, 0);
	assert_int_equal(x.keys, 0);
	assert_true(watch_index_check(&x));
	watch_index_deinit(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_watch_index_matches_a_naive_model),
		cmocka_unit_test(test_watch_index_holds_100k_watches),
		cmocka_unit_test(test_watch_index_every_prefix_length),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
