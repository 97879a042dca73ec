/*
 * KV entries with revisions (see kv.h), and the prefix range query.
 */
#include "locks/kv.h"

#include "locks/internal.h"
#include "locks/lease.h"

struct kv_key {
	const struct locks *sm;
	const uint8_t *key;
	uint32_t key_len;
	uint32_t hash;
};

static bool kv_eq(const void *ctx, uint32_t slot)
{
	const struct kv_key *k = ctx;
	const struct locks_kv *e = &k->sm->kvs[slot];

	return e->hash == k->hash && e->key_len == k->key_len &&
	       memcmp(arena_data(&k->sm->kv_bytes_arena, e->off), k->key, k->key_len) == 0;
}

uint32_t kv_hash_of(const void *ctx, uint32_t slot)
{
	const struct locks *sm = ctx;
	return sm->kvs[slot].hash;
}

void kv_blob_moved(void *ctx, uint32_t owner, uint32_t offset)
{
	struct locks *sm = ctx;
	sm->kvs[owner].off = offset;
}

static uint32_t kv_lookup(const struct locks *sm, const uint8_t *key, uint32_t key_len, uint32_t hash)
{
	struct kv_key k = { .sm = sm, .key = key, .key_len = key_len, .hash = hash };
	uint32_t slot = hindex_find(&sm->kv_index, hash, kv_eq, &k);

	return slot == HINDEX_NONE ? LOCKS_NONE : slot;
}

uint32_t kv_find(const struct locks *sm, const uint8_t *key, uint32_t key_len)
{
	if (!locks_name_valid(key, key_len))
		return LOCKS_NONE;
	return kv_lookup(sm, key, key_len, hindex_hash_bytes(sm->cfg.hash_seed, key, key_len));
}

void kv_info_fill(const struct locks *sm, uint32_t e, struct locks_kv_info *info)
{
	const struct locks_kv *k = &sm->kvs[e];
	const uint8_t *blob = arena_data(&sm->kv_bytes_arena, k->off);

	*info = (struct locks_kv_info){
		.key = blob,
		.value = blob + k->key_len,
		.key_len = k->key_len,
		.value_len = k->value_len,
		.create_revision = k->create_revision,
		.mod_revision = k->mod_revision,
		.version = k->version,
		.lease_id = k->lease != LOCKS_NONE ? sm->leases[k->lease].id : 0,
	};
}

static void kv_lease_detach(struct locks *sm, uint32_t e)
{
	struct locks_kv *k = &sm->kvs[e];

	if (k->lease == LOCKS_NONE)
		return;
	LIST_UNLINK(sm->leases[k->lease].kv_head, sm->kvs, e, lease_next, lease_prev);
	sm->leases[k->lease].kv_count--;
	k->lease = LOCKS_NONE;
}

void kv_delete_entry(struct locks *sm, uint32_t e)
{
	struct locks_kv *k = &sm->kvs[e];

	HASP_ASSERT(sm->bumped);
	struct locks_event *ev = locks_event_push(sm, HASP_EVENT_KV_DELETED,
						  arena_data(&sm->kv_bytes_arena, k->off), k->key_len);
	ev->revision = sm->revision;
	kv_lease_detach(sm, e);
	hindex_remove(&sm->kv_index, k->hash, e, kv_hash_of, sm);
	arena_free(&sm->kv_bytes_arena, k->off);
	sm->kv_bytes -= (uint64_t)k->key_len + k->value_len;
	memset(k, 0, sizeof(*k)); /* free records are all-zero, padding too */
	slots_free(&sm->kv_slots, e);
}

/* Common validation of PUT and CAS. Returns the lease slot to attach
 * (LOCKS_NONE for none) through `ls`, or false after replying. */
static bool kv_put_valid(struct locks *sm, const struct locks_cmd *cmd, uint32_t *ls)
{
	if (!locks_name_valid(cmd->name, cmd->name_len)) {
		locks_reply_set(sm, HASP_STATUS_BAD_NAME, LOCKS_REASON_NONE);
		return false;
	}
	if (cmd->value_len > HASP_VALUE_SIZE_MAX) {
		locks_reply_set(sm, HASP_STATUS_TOO_LARGE, LOCKS_REASON_NONE);
		return false;
	}
	if (cmd->value_len > 0 && cmd->value == NULL) {
		locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_BAD_FIELDS);
		return false;
	}
	*ls = LOCKS_NONE;
	if (cmd->lease_id != 0) {
		*ls = lease_find(sm, cmd->lease_id);
		if (*ls == LOCKS_NONE) {
			locks_reply_set(sm, HASP_STATUS_LEASE_EXPIRED, LOCKS_REASON_NONE);
			return false;
		}
		if (sm->leases[*ls].flags & LEASE_FLAG_PRIVATE) {
			locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_PRIVATE_LEASE);
			return false;
		}
	}
	return true;
}

/* Writes key/value into entry `e` (existing or LOCKS_NONE), attached to
 * lease `ls`. All checks passed except the capacities, checked here. */
static void kv_write(struct locks *sm, const struct locks_cmd *cmd, uint32_t e, uint32_t hash,
		     uint32_t ls)
{
	struct locks_reply *r = &sm->res->reply;
	uint64_t old_size = e != LOCKS_NONE ? (uint64_t)sm->kvs[e].key_len + sm->kvs[e].value_len : 0;
	uint64_t new_size = (uint64_t)cmd->name_len + cmd->value_len;
	uint8_t reason = LOCKS_REASON_NONE;

	if (e == LOCKS_NONE && sm->kv_slots.used_count == sm->kv_slots.capacity)
		reason = LOCKS_REASON_KV_FULL;
	else if (sm->kv_bytes - old_size + new_size > sm->cfg.kv_bytes_max)
		reason = LOCKS_REASON_KV_BYTES_FULL;
	else if (ls != LOCKS_NONE && (e == LOCKS_NONE || sm->kvs[e].lease != ls) &&
		 sm->leases[ls].kv_count >= sm->cfg.keys_per_lease_max)
		reason = LOCKS_REASON_LEASE_ITEMS_FULL;
	if (reason != LOCKS_REASON_NONE) {
		locks_reply_set(sm, HASP_STATUS_FULL, reason);
		return;
	}

	locks_bump(sm);
	if (e == LOCKS_NONE) {
		e = slots_alloc(&sm->kv_slots);
		HASP_ASSERT(e != SLOTS_NONE);
		sm->kvs[e] = (struct locks_kv){
			.create_revision = sm->revision,
			.hash = hash,
			.lease = LOCKS_NONE,
			.key_len = (uint8_t)cmd->name_len,
		};
		hindex_insert(&sm->kv_index, hash, e);
	} else {
		/* Free the old blob first: the budget was checked net of it. */
		arena_free(&sm->kv_bytes_arena, sm->kvs[e].off);
		sm->kv_bytes -= old_size;
	}
	struct locks_kv *k = &sm->kvs[e];
	/* The blob is key then value, written in two steps through the arena
	 * so that the command's two buffers need not be contiguous. */
	uint8_t blob[HASP_NAME_SIZE_MAX + HASP_VALUE_SIZE_MAX];
	memcpy(blob, cmd->name, cmd->name_len);
	if (cmd->value_len > 0)
		memcpy(blob + cmd->name_len, cmd->value, cmd->value_len);
	k->off = arena_append(&sm->kv_bytes_arena, e, blob, (uint32_t)new_size);
	k->value_len = cmd->value_len;
	sm->kv_bytes += new_size;
	k->mod_revision = sm->revision;
	k->version++;
	/* etcd: a put without a lease detaches the key from its old lease. */
	if (k->lease != ls) {
		kv_lease_detach(sm, e);
		if (ls != LOCKS_NONE) {
			LIST_PUSH_FRONT(sm->leases[ls].kv_head, sm->kvs, e, lease_next, lease_prev);
			sm->leases[ls].kv_count++;
			k->lease = ls;
		}
	}
	struct locks_event *ev = locks_event_push(sm, HASP_EVENT_KV_PUT, cmd->name, cmd->name_len);
	ev->revision = k->mod_revision;
	ev->lease_id = ls != LOCKS_NONE ? sm->leases[ls].id : 0;
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
	r->revision = k->mod_revision;
	r->id = ev->lease_id;
}

void kv_cmd_put(struct locks *sm, const struct locks_cmd *cmd)
{
	uint32_t ls;

	if (!kv_put_valid(sm, cmd, &ls))
		return;
	uint32_t hash = hindex_hash_bytes(sm->cfg.hash_seed, cmd->name, cmd->name_len);
	kv_write(sm, cmd, kv_lookup(sm, cmd->name, cmd->name_len, hash), hash, ls);
}

void kv_cmd_cas(struct locks *sm, const struct locks_cmd *cmd)
{
	uint32_t ls;

	if (!kv_put_valid(sm, cmd, &ls))
		return;
	uint32_t hash = hindex_hash_bytes(sm->cfg.hash_seed, cmd->name, cmd->name_len);
	uint32_t e = kv_lookup(sm, cmd->name, cmd->name_len, hash);
	uint64_t current = e != LOCKS_NONE ? sm->kvs[e].mod_revision : 0;
	bool match;
	if (cmd->flags & LOCKS_CMD_CAS_VALUE) {
		/* etcd's value compare: a missing key has no value, so it
		 * never matches (not even an empty expected value). */
		match = e != LOCKS_NONE && sm->kvs[e].value_len == cmd->expect_len &&
			(cmd->expect_len == 0 ||
			 memcmp((const uint8_t *)arena_data(&sm->kv_bytes_arena, sm->kvs[e].off) +
					 sm->kvs[e].key_len,
				 cmd->expect, cmd->expect_len) == 0);
	} else {
		/* Expected mod revision 0 means "create only if absent". */
		match = current == cmd->token;
	}
	if (!match) {
		locks_reply_set(sm, HASP_STATUS_COMPARE_FAILED,
				e == LOCKS_NONE ? LOCKS_REASON_KV_MISSING : LOCKS_REASON_KV_MISMATCH);
		sm->res->reply.revision = current;
		return;
	}
	kv_write(sm, cmd, e, hash, ls);
}

void kv_cmd_delete(struct locks *sm, const struct locks_cmd *cmd)
{
	if (!locks_name_valid(cmd->name, cmd->name_len)) {
		locks_reply_set(sm, HASP_STATUS_BAD_NAME, LOCKS_REASON_NONE);
		return;
	}
	uint32_t e = kv_find(sm, cmd->name, cmd->name_len);
	if (e == LOCKS_NONE) {
		locks_reply_set(sm, HASP_STATUS_NOT_FOUND, LOCKS_REASON_NONE);
		return;
	}
	locks_bump(sm);
	kv_delete_entry(sm, e);
	locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
	sm->res->reply.revision = sm->revision;
}

/* Bytewise order; a proper prefix sorts first. */
static int kv_key_cmp(const uint8_t *a, uint32_t a_len, const uint8_t *b, uint32_t b_len)
{
	uint32_t n = a_len < b_len ? a_len : b_len;
	int c = n > 0 ? memcmp(a, b, n) : 0;

	if (c != 0)
		return c;
	return a_len < b_len ? -1 : a_len > b_len ? 1 : 0;
}

uint32_t locks_kv_range(const struct locks *sm, const uint8_t *prefix, uint32_t prefix_len,
			const uint8_t *start_after, uint32_t start_after_len,
			struct locks_kv_info *out, uint32_t max)
{
	uint32_t count = 0;

	if (max == 0)
		return 0;
	/* One pass over the live entries keeping the `max` smallest matches in
	 * `out`, sorted (insertion; ranges are for config and discovery, and
	 * the scan is O(entries) anyway). */
	for (uint32_t e = 0; e < sm->cfg.kv_entries_max; e++) {
		if (!slots_used(&sm->kv_slots, e))
			continue;
		const struct locks_kv *k = &sm->kvs[e];
		const uint8_t *key = arena_data(&sm->kv_bytes_arena, k->off);
		if (k->key_len < prefix_len || (prefix_len > 0 && memcmp(key, prefix, prefix_len) != 0))
			continue;
		if (start_after_len > 0 && kv_key_cmp(key, k->key_len, start_after, start_after_len) <= 0)
			continue;
		if (count == max &&
		    kv_key_cmp(key, k->key_len, out[max - 1].key, out[max - 1].key_len) >= 0)
			continue;
		uint32_t i = count < max ? count++ : max - 1;
		while (i > 0 && kv_key_cmp(key, k->key_len, out[i - 1].key, out[i - 1].key_len) < 0) {
			out[i] = out[i - 1];
			i--;
		}
		kv_info_fill(sm, e, &out[i]);
	}
	return count;
}
