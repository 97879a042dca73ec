/*
 * Lowest-free slot allocation over a hierarchical bitmap (see slots.h).
 *
 * Bits past `capacity` in the leaf level, and past the live words in upper
 * levels, are set from the start: they look used, so the search never
 * returns them and fullness propagates as if the table were a power of 64.
 */
#include "locks/slots.h"

#include <string.h>

#include "locks/zalloc.h"
#include "common/assert.h"
#include "hasp/errors.h"

static uint32_t slots_words(uint32_t bits)
{
	return (bits + 63u) / 64u;
}

/* The level shape for a capacity: word counts until one word covers all. */
static uint32_t slots_shape(uint32_t capacity, uint32_t words[SLOTS_LEVELS_MAX])
{
	uint32_t bits = capacity;
	uint32_t count = 0;

	do {
		HASP_ASSERT(count < SLOTS_LEVELS_MAX);
		words[count] = slots_words(bits);
		bits = words[count];
		count++;
	} while (words[count - 1] > 1);
	return count;
}

uint64_t slots_memory_size(uint32_t capacity)
{
	uint32_t words[SLOTS_LEVELS_MAX];
	uint32_t count = slots_shape(capacity, words);
	uint64_t size = 0;

	for (uint32_t i = 0; i < count; i++)
		size += (uint64_t)words[i] * sizeof(uint64_t);
	return size;
}

void slots_clear(struct slots *s)
{
	uint32_t bits = s->capacity;

	for (uint32_t l = 0; l < s->level_count; l++) {
		uint64_t *w = s->levels[l];
		for (uint32_t i = 0; i < s->level_words[l]; i++)
			w[i] = 0;
		/* Padding bits past the last real bit of this level look used. */
		if (bits % 64u != 0)
			w[s->level_words[l] - 1] = ~0ull << (bits % 64u);
		bits = s->level_words[l];
	}
	/* A padded word that is entirely padding cannot occur (words are
	 * ceil(bits/64)), so no fullness needs propagating here. */
	s->used_count = 0;
}

uint32_t slots_high_water(const struct slots *s)
{
	const uint64_t *leaf = s->levels[0];
	uint32_t words = s->level_words[0];

	if (s->used_count == 0)
		return 0;
	for (uint32_t i = words; i-- > 0;) {
		uint64_t w = leaf[i];
		/* The padding bits past capacity look used: mask them off. */
		if (i == words - 1 && s->capacity % 64u != 0)
			w &= ~(~0ull << (s->capacity % 64u));
		if (w != 0)
			return i * 64u + (64u - (uint32_t)__builtin_clzll(w));
	}
	return 0;
}

void slots_copy(struct slots *dst, const struct slots *src)
{
	HASP_ASSERT(dst->capacity == src->capacity && dst->level_count == src->level_count);
	for (uint32_t l = 0; l < src->level_count; l++)
		memcpy(dst->levels[l], src->levels[l], (size_t)src->level_words[l] * sizeof(uint64_t));
	dst->used_count = src->used_count;
}

int slots_init(struct slots *s, uint32_t capacity)
{
	HASP_ASSERT(capacity > 0);
	HASP_ASSERT(capacity <= SLOTS_CAPACITY_MAX);

	*s = (struct slots){ .capacity = capacity };
	s->level_count = slots_shape(capacity, s->level_words);
	for (uint32_t l = 0; l < s->level_count; l++) {
		s->levels[l] = locks_zalloc(s->level_words[l], sizeof(uint64_t));
		if (s->levels[l] == NULL) {
			slots_deinit(s);
			return -HASP_ENOMEM;
		}
	}
	slots_clear(s);
	return 0;
}

void slots_deinit(struct slots *s)
{
	for (uint32_t l = 0; l < SLOTS_LEVELS_MAX; l++) {
		hasp_free(s->levels[l]);
		s->levels[l] = NULL;
	}
	s->level_count = 0;
}

/* Sets the leaf bit and marks full words in the parents. */
static void slots_mark(struct slots *s, uint32_t index)
{
	uint32_t i = index;

	for (uint32_t l = 0; l < s->level_count; l++) {
		uint64_t *w = &s->levels[l][i / 64u];
		*w |= 1ull << (i % 64u);
		if (*w != ~0ull)
			break;
		i /= 64u;
	}
	s->used_count++;
}

uint32_t slots_alloc(struct slots *s)
{
	uint32_t i = 0;

	if (s->used_count == s->capacity)
		return SLOTS_NONE;
	for (uint32_t l = s->level_count; l-- > 0;) {
		uint64_t w = s->levels[l][i];
		HASP_ASSERT(w != ~0ull);
		i = i * 64u + (uint32_t)__builtin_ctzll(~w);
	}
	HASP_ASSERT(i < s->capacity);
	slots_mark(s, i);
	return i;
}

void slots_take(struct slots *s, uint32_t index)
{
	HASP_ASSERT(index < s->capacity);
	HASP_ASSERT(!slots_used(s, index));
	slots_mark(s, index);
}

void slots_free(struct slots *s, uint32_t index)
{
	uint32_t i = index;

	HASP_ASSERT(index < s->capacity);
	HASP_ASSERT(slots_used(s, index));
	for (uint32_t l = 0; l < s->level_count; l++) {
		uint64_t *w = &s->levels[l][i / 64u];
		bool was_full = *w == ~0ull;
		*w &= ~(1ull << (i % 64u));
		if (!was_full)
			break;
		i /= 64u;
	}
	s->used_count--;
}

bool slots_used(const struct slots *s, uint32_t index)
{
	HASP_ASSERT(index < s->capacity);
	return (s->levels[0][index / 64u] >> (index % 64u)) & 1u;
}
