/*
 * The KV store, etcd-flavoured: every entry records the revision that
 * created it, the revision of its last change, and how many puts it has
 * seen; compare-and-set compares the mod revision. An entry may be attached
 * to a lease and is deleted when the lease ends.
 *
 * Keys follow the lock-name rules (1..128 bytes of 0x21..0x7e); values are
 * 0..HASP_VALUE_SIZE_MAX bytes. Key and value share one blob in a compacting
 * arena, budgeted by kv_bytes_max (logical bytes: FULL never depends on
 * fragmentation).
 */
#ifndef HASP_LOCKS_KV_H
#define HASP_LOCKS_KV_H

#include <stdint.h>

#include "locks/locks.h"

struct locks_kv {
	uint64_t create_revision;
	uint64_t mod_revision;
	uint64_t version;
	uint32_t hash;
	uint32_t off;        /* key then value in sm->kv_bytes_arena */
	uint32_t lease;      /* lease slot or LOCKS_NONE */
	uint32_t lease_next, lease_prev;
	uint16_t value_len;
	uint8_t key_len;
};

/* Deletes entry `e`, emitting KV_DELETED. Revision already bumped. */
void kv_delete_entry(struct locks *sm, uint32_t e);

void kv_cmd_put(struct locks *sm, const struct locks_cmd *cmd);
void kv_cmd_delete(struct locks *sm, const struct locks_cmd *cmd);
void kv_cmd_cas(struct locks *sm, const struct locks_cmd *cmd);

uint32_t kv_find(const struct locks *sm, const uint8_t *key, uint32_t key_len);
void kv_info_fill(const struct locks *sm, uint32_t e, struct locks_kv_info *info);

void kv_blob_moved(void *ctx, uint32_t owner, uint32_t offset);
uint32_t kv_hash_of(const void *ctx, uint32_t slot);

#endif
