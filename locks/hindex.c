/*
 * Linear probing with backward-shift deletion (see hindex.h).
 */
#include "locks/hindex.h"

#include <string.h>

#include "locks/zalloc.h"
#include "common/assert.h"
#include "hasp/errors.h"

uint64_t hindex_bucket_count(uint32_t entries_max)
{
	uint64_t want = (uint64_t)entries_max + entries_max / 3u + 1u;
	uint64_t n = 8;

	while (n < want)
		n <<= 1;
	return n;
}

int hindex_init(struct hindex *h, uint32_t entries_max)
{
	uint64_t n = hindex_bucket_count(entries_max);

	*h = (struct hindex){ 0 };
	HASP_ASSERT(n <= (1ull << 31));
	h->buckets = locks_zalloc((size_t)n, sizeof(uint32_t));
	if (h->buckets == NULL)
		return -HASP_ENOMEM;
	h->mask = (uint32_t)(n - 1);
	hindex_clear(h);
	return 0;
}

void hindex_deinit(struct hindex *h)
{
	hasp_free(h->buckets);
	h->buckets = NULL;
}

void hindex_copy(struct hindex *dst, const struct hindex *src)
{
	HASP_ASSERT(dst->mask == src->mask);
	memcpy(dst->buckets, src->buckets, ((size_t)src->mask + 1) * sizeof(uint32_t));
	dst->count = src->count;
}

void hindex_clear(struct hindex *h)
{
	memset(h->buckets, 0xff, ((size_t)h->mask + 1) * sizeof(uint32_t));
	h->count = 0;
}

uint32_t hindex_find(const struct hindex *h, uint32_t hash, hindex_eq_fn *eq, const void *ctx)
{
	for (uint32_t i = hash & h->mask;; i = (i + 1) & h->mask) {
		uint32_t slot = h->buckets[i];
		if (slot == HINDEX_NONE)
			return HINDEX_NONE;
		if (eq(ctx, slot))
			return slot;
	}
}

void hindex_insert(struct hindex *h, uint32_t hash, uint32_t slot)
{
	HASP_ASSERT(slot != HINDEX_NONE);
	HASP_ASSERT(h->count < h->mask); /* at least one empty bucket remains */
	uint32_t i = hash & h->mask;
	while (h->buckets[i] != HINDEX_NONE)
		i = (i + 1) & h->mask;
	h->buckets[i] = slot;
	h->count++;
}

void hindex_remove(struct hindex *h, uint32_t hash, uint32_t slot, hindex_hash_fn *hash_of,
		   const void *ctx)
{
	uint32_t i = hash & h->mask;

	while (h->buckets[i] != slot) {
		HASP_ASSERT(h->buckets[i] != HINDEX_NONE);
		i = (i + 1) & h->mask;
	}
	/* Backward shift: pull later entries of the run into the hole unless
	 * their home bucket lies cyclically after the hole. */
	uint32_t hole = i;
	for (uint32_t j = (i + 1) & h->mask; h->buckets[j] != HINDEX_NONE; j = (j + 1) & h->mask) {
		uint32_t home = hash_of(ctx, h->buckets[j]) & h->mask;
		bool movable = ((j - home) & h->mask) >= ((j - hole) & h->mask);
		if (movable) {
			h->buckets[hole] = h->buckets[j];
			hole = j;
		}
	}
	h->buckets[hole] = HINDEX_NONE;
	h->count--;
}

uint32_t hindex_hash_bytes(uint64_t seed, const uint8_t *data, uint32_t size)
{
	uint64_t x = seed ^ (0x9e3779b97f4a7c15ull * (size + 1u));

	while (size >= 8) {
		uint64_t w;
		memcpy(&w, data, 8);
		x = (x ^ w) * 0xbf58476d1ce4e5b9ull;
		x ^= x >> 31;
		data += 8;
		size -= 8;
	}
	uint64_t tail = 0;
	for (uint32_t k = 0; k < size; k++)
		tail |= (uint64_t)data[k] << (8 * k);
	x = (x ^ tail) * 0x94d049bb133111ebull;
	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 32;
	return (uint32_t)x;
}
