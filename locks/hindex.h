/*
 * An open-addressing hash index from a 32-bit hash to a record slot.
 *
 * The index stores only slot numbers (4 bytes per bucket); the owner table
 * keeps each record's full hash and key and answers equality through a
 * callback. Linear probing with backward-shift deletion keeps lookups short
 * without tombstones. The layout depends on insertion history, which is why
 * nothing observable (replies, snapshots) ever iterates it.
 *
 * Buckets: the power of two >= 4/3 of the entry capacity, so the load factor
 * stays <= 0.75.
 */
#ifndef HASP_LOCKS_HINDEX_H
#define HASP_LOCKS_HINDEX_H

#include <stdbool.h>
#include <stdint.h>

#define HINDEX_NONE UINT32_MAX

/* True when record `slot` has the key the caller is looking for. */
typedef bool hindex_eq_fn(const void *ctx, uint32_t slot);
/* The stored hash of record `slot`. */
typedef uint32_t hindex_hash_fn(const void *ctx, uint32_t slot);

struct hindex {
	uint32_t *buckets;
	uint32_t mask;
	uint32_t count;
};

uint64_t hindex_bucket_count(uint32_t entries_max);
int hindex_init(struct hindex *h, uint32_t entries_max) __attribute__((warn_unused_result));
void hindex_deinit(struct hindex *h);
void hindex_clear(struct hindex *h);
/* Makes dst equal to src; both sized for the same entries_max. */
void hindex_copy(struct hindex *dst, const struct hindex *src);

/* The slot whose record matches, or HINDEX_NONE. */
uint32_t hindex_find(const struct hindex *h, uint32_t hash, hindex_eq_fn *eq, const void *ctx);
/* Adds `slot` (its key must be absent). */
void hindex_insert(struct hindex *h, uint32_t hash, uint32_t slot);
/* Removes `slot`, which must be present under `hash`. */
void hindex_remove(struct hindex *h, uint32_t hash, uint32_t slot, hindex_hash_fn *hash_of,
		   const void *ctx);

/* A keyed 32-bit hash of a byte string. Not cryptographic; the seed (random
 * per node) keeps an attacker from choosing colliding names offline. */
uint32_t hindex_hash_bytes(uint64_t seed, const uint8_t *data, uint32_t size);

#endif
