/*
 * The state machine's entry points: sizing and init, the apply dispatcher
 * (log time, exactly-once, per-op handlers), and the read-only queries.
 *
 * Apply is a pure function of (state, index, command): no clock, no I/O, no
 * allocation, no randomness (the hash seed only shapes the hash index,
 * which nothing observable iterates). Handlers live next to their data:
 * lock_table.c, lease.c, session.c, kv.c.
 */
#include "locks/locks.h"

#include "common/alloc.h"
#include "locks/zalloc.h"
#include "hasp/errors.h"
#include "locks/cmd_codec.h"
#include "locks/internal.h"
#include "locks/kv.h"
#include "locks/lease.h"
#include "locks/lock_table.h"
#include "locks/session.h"
#include "locks/waiters.h"

void locks_config_default(struct locks_config *cfg)
{
	*cfg = (struct locks_config){
		.locks_max = 4096,
		.leases_max = 8192,
		.sessions_max = 1024,
		.waiters_max = 4096,
		.kv_entries_max = 1024,
		.kv_bytes_max = 256 * 1024,
		.lock_name_bytes_max = 4096 * 32,
		.locks_per_lease_max = 256,
		.keys_per_lease_max = 64,
		.locks_per_session_max = 256,
		.session_window = 8,
		.hash_seed = 0x6861737068617370ull,
		.invariants_every = 1,
	};
}

#define LOCKS_PER_X_MAX (1u << 20)

int locks_config_check(const struct locks_config *cfg)
{
	const uint32_t table_max = SLOTS_CAPACITY_MAX; /* also the id slot bits */

	if (cfg->locks_max == 0 || cfg->locks_max > table_max || cfg->leases_max == 0 ||
	    cfg->leases_max > table_max || cfg->sessions_max == 0 || cfg->sessions_max > table_max ||
	    cfg->waiters_max == 0 || cfg->waiters_max > table_max || cfg->kv_entries_max == 0 ||
	    cfg->kv_entries_max > table_max)
		return -HASP_ECONFIG;
	if (cfg->kv_bytes_max == 0 || cfg->lock_name_bytes_max == 0)
		return -HASP_ECONFIG;
	if (cfg->locks_per_lease_max == 0 || cfg->locks_per_lease_max > LOCKS_PER_X_MAX ||
	    cfg->keys_per_lease_max == 0 || cfg->keys_per_lease_max > LOCKS_PER_X_MAX ||
	    cfg->locks_per_session_max == 0 || cfg->locks_per_session_max > LOCKS_PER_X_MAX)
		return -HASP_ECONFIG;
	if (cfg->invariants_every == 0)
		return -HASP_EINVAL;
	if (cfg->session_window == 0 || cfg->session_window > LOCKS_WINDOW_MAX)
		return -HASP_ECONFIG;
	if (arena_size_for(cfg->lock_name_bytes_max, cfg->locks_max) > UINT32_MAX ||
	    arena_size_for(cfg->kv_bytes_max, cfg->kv_entries_max) > UINT32_MAX)
		return -HASP_ECONFIG;
	return 0;
}

uint32_t locks_events_max(const struct locks_config *cfg)
{
	/* The largest fan-out of one command:
	 *   lease end: 2 per lock (RELEASED + GRANTED to the next waiter),
	 *              + 1 KV_DELETED per attached key;
	 *   anything else: at most 2 (a release with its handoff).
	 * A session's end emits nothing: it only drops waiters (silently) and
	 * leaves its locks to their leases. */
	uint32_t lease_end = 2 * cfg->locks_per_lease_max + cfg->keys_per_lease_max;

	return lease_end > 2 ? lease_end : 2;
}

uint64_t locks_memory_size(const struct locks_config *cfg)
{
	/* Every byte the state machine will ever use, allocated once:
	 *   records, one per capacity unit,                                  */
	uint64_t size = (uint64_t)cfg->locks_max * sizeof(struct locks_lock)
		      + (uint64_t)cfg->leases_max * sizeof(struct locks_lease)
		      + (uint64_t)cfg->sessions_max * sizeof(struct locks_session)
		      + (uint64_t)cfg->waiters_max * sizeof(struct locks_waiter)
		      + (uint64_t)cfg->kv_entries_max * sizeof(struct locks_kv)
		/* the exactly-once reply windows,                                    */
		      + (uint64_t)cfg->sessions_max * cfg->session_window *
				sizeof(struct locks_cached_reply)
		/* lowest-free slot bitmaps (about 1 bit per slot),                   */
		      + slots_memory_size(cfg->locks_max) + slots_memory_size(cfg->leases_max)
		      + slots_memory_size(cfg->sessions_max) + slots_memory_size(cfg->waiters_max)
		      + slots_memory_size(cfg->kv_entries_max)
		/* which reply records changed since the last copy (locks_copy),     */
		      + dirty_memory_size((uint64_t)cfg->sessions_max * cfg->session_window)
		/* hash indexes (4 bytes per bucket, load <= 3/4): lock names, KV
		 * keys, and open nonces (4..8 bytes per session; the nonce and the
		 * open's deadline are 16 more bytes in each session record),         */
		      + hindex_bucket_count(cfg->locks_max) * sizeof(uint32_t)
		      + hindex_bucket_count(cfg->kv_entries_max) * sizeof(uint32_t)
		      + hindex_bucket_count(cfg->sessions_max) * sizeof(uint32_t)
		/* live sessions per owner: a record, a slot bit and a bucket per
		 * possible owner (at most one per session),                          */
		      + (uint64_t)cfg->sessions_max * sizeof(struct locks_owner)
		      + slots_memory_size(cfg->sessions_max)
		      + hindex_bucket_count(cfg->sessions_max) * sizeof(uint32_t)
		/* name and KV arenas (budget + 6-byte headers, + 1/2 slack),         */
		      + arena_size_for(cfg->lock_name_bytes_max, cfg->locks_max)
		      + arena_size_for(cfg->kv_bytes_max, cfg->kv_entries_max)
		/* deadline heaps (4 bytes per lease and per session).                */
		      + (uint64_t)cfg->leases_max * sizeof(uint32_t)
		      + (uint64_t)cfg->sessions_max * sizeof(uint32_t);
	return size;
}

void locks_reset(struct locks *sm)
{
	sm->revision = 0;
	sm->applied_index = 0;
	sm->log_time_ms = 0;
	sm->last_term = 0;
	sm->time_offset_ms = 0;
	sm->id_counter = 0;
	sm->lock_name_bytes = 0;
	sm->kv_bytes = 0;
	slots_clear(&sm->lock_slots);
	slots_clear(&sm->lease_slots);
	slots_clear(&sm->session_slots);
	slots_clear(&sm->waiter_slots);
	slots_clear(&sm->kv_slots);
	hindex_clear(&sm->lock_index);
	hindex_clear(&sm->kv_index);
	hindex_clear(&sm->nonce_index);
	slots_clear(&sm->owner_slots);
	hindex_clear(&sm->owner_index);
	arena_clear(&sm->lock_names);
	arena_clear(&sm->kv_bytes_arena);
	dheap_clear(&sm->lease_heap);
	dheap_clear(&sm->session_heap);
	/* Records of free slots are all-zero (every free path zeroes them), so
	 * snapshots never see stale bytes; start from that state too. */
	memset(sm->locks, 0, (size_t)sm->cfg.locks_max * sizeof(*sm->locks));
	memset(sm->leases, 0, (size_t)sm->cfg.leases_max * sizeof(*sm->leases));
	memset(sm->sessions, 0, (size_t)sm->cfg.sessions_max * sizeof(*sm->sessions));
	memset(sm->waiters, 0, (size_t)sm->cfg.waiters_max * sizeof(*sm->waiters));
	memset(sm->kvs, 0, (size_t)sm->cfg.kv_entries_max * sizeof(*sm->kvs));
	memset(sm->owners, 0, (size_t)sm->cfg.sessions_max * sizeof(*sm->owners));
	memset(sm->replies, 0,
	       (size_t)sm->cfg.sessions_max * sm->cfg.session_window * sizeof(*sm->replies));
	sm->replies_unrecorded = true;
	sm->copy_of = NULL;
}

/* Copies records [0, max(src's, dst's high water)) of one table: src's
 * used ones, and zeros over dst's older records past src's high water
 * (the records of free slots are all-zero: see locks_reset). */
static void copy_records(void *dst, const void *src, size_t record_size, uint32_t dst_high,
			 uint32_t src_high)
{
	memcpy(dst, src, (size_t)src_high * record_size);
	if (dst_high > src_high)
		memset((uint8_t *)dst + (size_t)src_high * record_size, 0,
		       (size_t)(dst_high - src_high) * record_size);
}

#define COPY_TABLE(dst, src, table, slots)                                                      \
	copy_records((dst)->table, (src)->table, sizeof(*(src)->table),                          \
		     slots_high_water(&(dst)->slots), slots_high_water(&(src)->slots))

struct reply_copy {
	struct locks_cached_reply *dst;
	const struct locks_cached_reply *src;
};

static void copy_reply_run(void *ctx, uint64_t first, uint64_t count)
{
	struct reply_copy *c = ctx;

	memcpy(&c->dst[first], &c->src[first], (size_t)count * sizeof(*c->src));
}

/* dst's reply records made equal to src's: only those src wrote since the
 * copy dst still is, or all of them. Before slots_copy: the whole copy
 * reads dst's extent from its bitmap. */
static uint64_t copy_replies(struct locks *dst, struct locks *src)
{
	uint64_t window = src->cfg.session_window;

	if (dst->copy_of == src && dst->copy_of_generation == src->copy_generation &&
	    !src->replies_unrecorded) {
		struct reply_copy c = { .dst = dst->replies, .src = src->replies };
		return dirty_drain(&src->replies_written, copy_reply_run, &c);
	}
	uint32_t src_high = slots_high_water(&src->session_slots);
	copy_records(dst->replies, src->replies, sizeof(*src->replies) * window,
		     slots_high_water(&dst->session_slots), src_high);
	(void)dirty_drain(&src->replies_written, NULL, NULL);
	src->replies_unrecorded = false;
	return (uint64_t)src_high * window;
}

uint64_t locks_copy(struct locks *dst, struct locks *src)
{
	/* The same shape; the bitmaps, indexes, arenas and heaps assert theirs. */
	HASP_ASSERT(dst->cfg.session_window == src->cfg.session_window &&
		    dst->cfg.locks_max == src->cfg.locks_max &&
		    dst->cfg.leases_max == src->cfg.leases_max &&
		    dst->cfg.sessions_max == src->cfg.sessions_max &&
		    dst->cfg.waiters_max == src->cfg.waiters_max &&
		    dst->cfg.kv_entries_max == src->cfg.kv_entries_max &&
		    dst->cfg.hash_seed == src->cfg.hash_seed);
	/* Before the bitmaps: each table's extent in dst is read from them. */
	COPY_TABLE(dst, src, locks, lock_slots);
	COPY_TABLE(dst, src, leases, lease_slots);
	COPY_TABLE(dst, src, waiters, waiter_slots);
	COPY_TABLE(dst, src, kvs, kv_slots);
	COPY_TABLE(dst, src, sessions, session_slots);
	COPY_TABLE(dst, src, owners, owner_slots);
	/* A session's reply window lives at its slot * session_window. */
	uint64_t replies_copied = copy_replies(dst, src);
	src->copy_generation++;
	dst->copy_of = src;
	dst->copy_of_generation = src->copy_generation;
	dst->replies_unrecorded = true; /* what the copy wrote, dst's own set lacks */

	slots_copy(&dst->lock_slots, &src->lock_slots);
	slots_copy(&dst->lease_slots, &src->lease_slots);
	slots_copy(&dst->session_slots, &src->session_slots);
	slots_copy(&dst->waiter_slots, &src->waiter_slots);
	slots_copy(&dst->kv_slots, &src->kv_slots);
	slots_copy(&dst->owner_slots, &src->owner_slots);
	hindex_copy(&dst->lock_index, &src->lock_index);
	hindex_copy(&dst->kv_index, &src->kv_index);
	hindex_copy(&dst->nonce_index, &src->nonce_index);
	hindex_copy(&dst->owner_index, &src->owner_index);
	arena_copy(&dst->lock_names, &src->lock_names);
	arena_copy(&dst->kv_bytes_arena, &src->kv_bytes_arena);
	dheap_copy(&dst->lease_heap, &src->lease_heap);
	dheap_copy(&dst->session_heap, &src->session_heap);

	dst->revision = src->revision;
	dst->applied_index = src->applied_index;
	dst->log_time_ms = src->log_time_ms;
	dst->last_term = src->last_term;
	dst->time_offset_ms = src->time_offset_ms;
	dst->id_counter = src->id_counter;
	dst->lock_name_bytes = src->lock_name_bytes;
	dst->kv_bytes = src->kv_bytes;
	dst->stats = src->stats;
	return replies_copied;
}

/* Rewrites one byte in every 4 KiB of [p, p + size) with itself: enough to
 * touch every page whatever the page size (4 KiB or more). */
static void touch_pages(void *p, size_t size)
{
	volatile uint8_t *b = p;

	for (size_t i = 0; i < size; i += 4096)
		b[i] = b[i];
	if (size > 0)
		b[size - 1] = b[size - 1];
}

static void touch_slots(struct slots *s)
{
	for (uint32_t l = 0; l < s->level_count; l++)
		touch_pages(s->levels[l], (size_t)s->level_words[l] * sizeof(uint64_t));
}

void locks_prefault(struct locks *sm)
{
	const struct locks_config *c = &sm->cfg;

	touch_pages(sm->locks, (size_t)c->locks_max * sizeof(*sm->locks));
	touch_pages(sm->leases, (size_t)c->leases_max * sizeof(*sm->leases));
	touch_pages(sm->sessions, (size_t)c->sessions_max * sizeof(*sm->sessions));
	touch_pages(sm->waiters, (size_t)c->waiters_max * sizeof(*sm->waiters));
	touch_pages(sm->kvs, (size_t)c->kv_entries_max * sizeof(*sm->kvs));
	touch_pages(sm->replies, (size_t)c->sessions_max * c->session_window * sizeof(*sm->replies));
	touch_pages(sm->replies_written.words, sm->replies_written.word_count * sizeof(uint64_t));
	touch_pages(sm->replies_written.summary,
		    sm->replies_written.summary_count * sizeof(uint64_t));
	touch_slots(&sm->lock_slots);
	touch_slots(&sm->lease_slots);
	touch_slots(&sm->session_slots);
	touch_slots(&sm->waiter_slots);
	touch_slots(&sm->kv_slots);
	touch_slots(&sm->owner_slots);
	touch_pages(sm->owners, (size_t)c->sessions_max * sizeof(*sm->owners));
	touch_pages(sm->owner_index.buckets, ((size_t)sm->owner_index.mask + 1) * sizeof(uint32_t));
	touch_pages(sm->lock_index.buckets, ((size_t)sm->lock_index.mask + 1) * sizeof(uint32_t));
	touch_pages(sm->kv_index.buckets, ((size_t)sm->kv_index.mask + 1) * sizeof(uint32_t));
	touch_pages(sm->nonce_index.buckets, ((size_t)sm->nonce_index.mask + 1) * sizeof(uint32_t));
	touch_pages(sm->lock_names.base, sm->lock_names.size);
	touch_pages(sm->kv_bytes_arena.base, sm->kv_bytes_arena.size);
	touch_pages(sm->lease_heap.items, (size_t)sm->lease_heap.capacity * sizeof(uint32_t));
	touch_pages(sm->session_heap.items, (size_t)sm->session_heap.capacity * sizeof(uint32_t));
}

int locks_init(struct locks *sm, const struct locks_config *cfg)
{
	int rc = locks_config_check(cfg);

	memset(sm, 0, sizeof(*sm));
	if (rc != 0)
		return rc;
	sm->cfg = *cfg;
	sm->events_max = locks_events_max(cfg);
	rc = -HASP_ENOMEM;
	sm->locks = locks_zalloc(cfg->locks_max, sizeof(*sm->locks));
	sm->leases = locks_zalloc(cfg->leases_max, sizeof(*sm->leases));
	sm->sessions = locks_zalloc(cfg->sessions_max, sizeof(*sm->sessions));
	sm->waiters = locks_zalloc(cfg->waiters_max, sizeof(*sm->waiters));
	sm->kvs = locks_zalloc(cfg->kv_entries_max, sizeof(*sm->kvs));
	sm->replies = locks_zalloc((size_t)cfg->sessions_max * cfg->session_window,
				  sizeof(*sm->replies));
	sm->owners = locks_zalloc(cfg->sessions_max, sizeof(*sm->owners));
	if (sm->locks == NULL || sm->leases == NULL || sm->sessions == NULL ||
	    sm->waiters == NULL || sm->kvs == NULL || sm->replies == NULL || sm->owners == NULL)
		goto fail;
	if ((rc = dirty_init(&sm->replies_written,
			     (uint64_t)cfg->sessions_max * cfg->session_window)) != 0 ||
	    (rc = slots_init(&sm->lock_slots, cfg->locks_max)) != 0 ||
	    (rc = slots_init(&sm->lease_slots, cfg->leases_max)) != 0 ||
	    (rc = slots_init(&sm->session_slots, cfg->sessions_max)) != 0 ||
	    (rc = slots_init(&sm->waiter_slots, cfg->waiters_max)) != 0 ||
	    (rc = slots_init(&sm->kv_slots, cfg->kv_entries_max)) != 0 ||
	    (rc = hindex_init(&sm->lock_index, cfg->locks_max)) != 0 ||
	    (rc = hindex_init(&sm->kv_index, cfg->kv_entries_max)) != 0 ||
	    (rc = hindex_init(&sm->nonce_index, cfg->sessions_max)) != 0 ||
	    (rc = slots_init(&sm->owner_slots, cfg->sessions_max)) != 0 ||
	    (rc = hindex_init(&sm->owner_index, cfg->sessions_max)) != 0 ||
	    (rc = arena_init(&sm->lock_names, arena_size_for(cfg->lock_name_bytes_max, cfg->locks_max),
			     lock_table_name_moved, sm)) != 0 ||
	    (rc = arena_init(&sm->kv_bytes_arena, arena_size_for(cfg->kv_bytes_max, cfg->kv_entries_max),
			     kv_blob_moved, sm)) != 0 ||
	    (rc = dheap_init(&sm->lease_heap, cfg->leases_max, lease_heap_key, lease_heap_set_pos,
			     sm)) != 0 ||
	    (rc = dheap_init(&sm->session_heap, cfg->sessions_max, session_heap_key,
			     session_heap_set_pos, sm)) != 0)
		goto fail;
	locks_reset(sm);
	HASP_DASSERT(locks_invariants_ok(sm));
	return 0;
fail:
	locks_deinit(sm);
	return rc;
}

void locks_deinit(struct locks *sm)
{
	dheap_deinit(&sm->session_heap);
	dheap_deinit(&sm->lease_heap);
	arena_deinit(&sm->kv_bytes_arena);
	arena_deinit(&sm->lock_names);
	hindex_deinit(&sm->owner_index);
	slots_deinit(&sm->owner_slots);
	hindex_deinit(&sm->nonce_index);
	hindex_deinit(&sm->kv_index);
	hindex_deinit(&sm->lock_index);
	slots_deinit(&sm->kv_slots);
	slots_deinit(&sm->waiter_slots);
	slots_deinit(&sm->session_slots);
	slots_deinit(&sm->lease_slots);
	slots_deinit(&sm->lock_slots);
	dirty_deinit(&sm->replies_written);
	hasp_free(sm->owners);
	hasp_free(sm->replies);
	hasp_free(sm->kvs);
	hasp_free(sm->waiters);
	hasp_free(sm->sessions);
	hasp_free(sm->leases);
	hasp_free(sm->locks);
	memset(sm, 0, sizeof(*sm));
}

bool locks_name_valid(const uint8_t *name, uint32_t name_len)
{
	if (name == NULL || name_len == 0 || name_len > HASP_NAME_SIZE_MAX)
		return false;
	for (uint32_t i = 0; i < name_len; i++)
		if (name[i] < HASP_NAME_BYTE_MIN || name[i] > HASP_NAME_BYTE_MAX)
			return false;
	return true;
}

/*
 * Log time (docs/STATE_MACHINE.md, "Lease time"): within one term it follows
 * the leader's monotonic clock; the first command of a newer term rebases
 * the new leader's clock onto the last log time, so log time never goes
 * backwards and a failover neither shortens nor resets any deadline (etcd
 * issues 9395 and 9888 show what each of those mistakes costs). Returns
 * false for a command whose term went backwards, which a Raft log never
 * holds: it is refused and changes nothing.
 */
static bool locks_time_advance(struct locks *sm, const struct locks_cmd *cmd)
{
	if (cmd->term < sm->last_term) {
		sm->stats.stale_term++;
		return false;
	}
	uint64_t now = cmd->now_ms < LOCKS_TIME_MS_MAX ? cmd->now_ms : LOCKS_TIME_MS_MAX;
	if (cmd->term > sm->last_term) {
		sm->last_term = cmd->term;
		sm->time_offset_ms = (int64_t)sm->log_time_ms - (int64_t)now;
		return true;
	}
	int64_t t = (int64_t)now + sm->time_offset_ms;
	if (t > (int64_t)LOCKS_TIME_MS_MAX)
		t = (int64_t)LOCKS_TIME_MS_MAX;
	if (t > (int64_t)sm->log_time_ms)
		sm->log_time_ms = (uint64_t)t;
	return true;
}

uint64_t locks_log_time(const struct locks *sm, uint64_t term, uint64_t leader_now_ms)
{
	if (term != sm->last_term)
		return sm->log_time_ms; /* a new leader's clock starts at the last log time */
	uint64_t now = leader_now_ms < LOCKS_TIME_MS_MAX ? leader_now_ms : LOCKS_TIME_MS_MAX;
	int64_t t = (int64_t)now + sm->time_offset_ms;
	return t > (int64_t)sm->log_time_ms ? (uint64_t)t : sm->log_time_ms;
}

/* Client commands: the session must be live and the seq new; a duplicate
 * gets its cached reply back and changes nothing. */
static void locks_apply_client(struct locks *sm, const struct locks_cmd *cmd)
{
	struct locks_result *res = sm->res;
	const struct locks_cached_reply *cached = NULL;
	uint32_t s = session_find(sm, cmd->session_id);

	if (s == LOCKS_NONE) {
		locks_reply_set(sm, HASP_STATUS_SESSION_EXPIRED, LOCKS_REASON_NONE);
		return;
	}
	if (cmd->seq == 0) {
		locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_SEQ_INVALID);
		return;
	}
	switch (session_seq_check(sm, s, cmd->seq, cmd->digest, &cached)) {
	case SESSION_SEQ_DUPLICATE:
		res->reply = cached->reply;
		res->duplicate = true;
		sm->stats.duplicates++;
		return;
	case SESSION_SEQ_TOO_OLD:
		sm->stats.seq_too_old++;
		locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_SEQ_TOO_OLD);
		return;
	case SESSION_SEQ_JUMP:
		locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_SEQ_JUMP);
		return;
	case SESSION_SEQ_MISMATCH:
		locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_REQUEST_MISMATCH);
		return;
	case SESSION_SEQ_NEW:
		break;
	}

	switch (cmd->op) {
	case LOCKS_OP_SESSION_KEEPALIVE:
		session_cmd_keepalive(sm, s);
		break;
	case LOCKS_OP_SESSION_CLOSE:
		/* The session and its reply window are gone: a retried close
		 * gets SESSION_EXPIRED, which the client treats as done. */
		session_cmd_close(sm, s);
		return;
	case LOCKS_OP_LEASE_GRANT:
		lease_cmd_grant(sm, cmd);
		break;
	case LOCKS_OP_LEASE_KEEPALIVE:
		lease_cmd_keepalive(sm, cmd);
		break;
	case LOCKS_OP_LEASE_REVOKE:
		lease_cmd_revoke(sm, cmd);
		break;
	case LOCKS_OP_ACQUIRE:
		lock_table_cmd_acquire(sm, s, cmd);
		break;
	case LOCKS_OP_RELEASE:
		lock_table_cmd_release(sm, s, cmd);
		break;
	case LOCKS_OP_RENEW:
		lock_table_cmd_renew(sm, s, cmd);
		break;
	case LOCKS_OP_CANCEL:
		lock_table_cmd_cancel(sm, s, cmd);
		break;
	case LOCKS_OP_KV_PUT:
		kv_cmd_put(sm, cmd);
		break;
	case LOCKS_OP_KV_DELETE:
		kv_cmd_delete(sm, cmd);
		break;
	case LOCKS_OP_KV_CAS:
		kv_cmd_cas(sm, cmd);
		break;
	default:
		HASP_UNREACHABLE();
	}
	/* The session still exists here (only CLOSE ends it, above). */
	session_seq_record(sm, s, cmd->seq, cmd->digest, &res->reply);
	if (cmd->flags & LOCKS_CMD_SEQ_FLOOR)
		session_seq_floor(sm, s, cmd->seq);
}

static void locks_dispatch(struct locks *sm, const struct locks_cmd *cmd)
{
	if (locks_cmd_fields(cmd->op) & LOCKS_FIELD_INVALID) {
		locks_reply_set(sm, HASP_STATUS_BAD_OPCODE, LOCKS_REASON_NONE);
		return;
	}
	if (!locks_cmd_fields_ok(cmd)) {
		locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_BAD_FIELDS);
		return;
	}
	switch (cmd->op) {
	case LOCKS_OP_TICK:
		locks_reply_set(sm, HASP_STATUS_OK, LOCKS_REASON_NONE);
		return;
	case LOCKS_OP_SESSION_OPEN:
		session_cmd_open(sm, cmd);
		return;
	case LOCKS_OP_LEASE_EXPIRE:
		lease_cmd_expire(sm, cmd);
		return;
	case LOCKS_OP_SESSION_EXPIRE:
		session_cmd_expire(sm, cmd);
		return;
	case LOCKS_OP_FORCE_RELEASE:
		lock_table_cmd_force_release(sm, cmd);
		return;
	default:
		locks_apply_client(sm, cmd);
		return;
	}
}

void locks_apply(struct locks *sm, uint64_t index, const struct locks_cmd *cmd,
		 struct locks_result *res)
{
	HASP_ASSERT(index > sm->applied_index);
	HASP_ASSERT(res->events != NULL);
	HASP_ASSERT(res->event_count_max >= sm->events_max);

	memset(&res->reply, 0, sizeof(res->reply));
	res->duplicate = false;
	res->event_count = 0;
	sm->res = res;
	sm->bumped = false;
	sm->applied_index = index;
	sm->stats.applied++;

	if (locks_time_advance(sm, cmd))
		locks_dispatch(sm, cmd);
	else
		locks_reply_set(sm, HASP_STATUS_BAD_REQUEST, LOCKS_REASON_STALE_TERM);

	res->revision = sm->revision;
	res->log_time_ms = sm->log_time_ms;
	sm->res = NULL;
	HASP_ASSERT(res->event_count <= sm->events_max);
#ifdef HASP_DEBUG_ASSERTS
	if (++sm->applies_unchecked >= sm->cfg.invariants_every) {
		sm->applies_unchecked = 0;
		HASP_ASSERT(locks_invariants_ok(sm));
	}
#endif
}

/* --- Leader-side queries --- */

uint64_t locks_deadline_min(const struct locks *sm)
{
	uint64_t d = LOCKS_DEADLINE_NONE;
	uint32_t ls = dheap_min(&sm->lease_heap);
	uint32_t s = dheap_min(&sm->session_heap);

	if (ls != DHEAP_NONE)
		d = sm->leases[ls].deadline_ms;
	if (s != DHEAP_NONE && sm->sessions[s].deadline_ms < d)
		d = sm->sessions[s].deadline_ms;
	return d;
}

/* dheap_due() writes slots into a u32 scratch in the upper half of the
 * caller's u64 array (bytes 4*max..8*max), then they become ids in place:
 * ids[i] covers bytes 8i..8i+7, which only overlaps scratch entries
 * 2i-max and 2i-max+1, both <= i and so already read. */
static uint32_t locks_due(const struct dheap *h, uint64_t limit, uint64_t *ids, uint32_t max,
			  const void *table, size_t stride)
{
	uint32_t *scratch = (uint32_t *)(void *)ids + max;
	uint32_t n = dheap_due(h, limit, scratch, max);

	for (uint32_t i = 0; i < n; i++) {
		uint64_t id;
		memcpy(&id, (const uint8_t *)table + (size_t)scratch[i] * stride, sizeof(id));
		ids[i] = id;
	}
	return n;
}

uint32_t locks_leases_due(const struct locks *sm, uint64_t log_time_ms, uint64_t *ids, uint32_t max)
{
	return locks_due(&sm->lease_heap, log_time_ms, ids, max, sm->leases, sizeof(*sm->leases));
}

uint32_t locks_sessions_due(const struct locks *sm, uint64_t log_time_ms, uint64_t *ids,
			    uint32_t max)
{
	return locks_due(&sm->session_heap, log_time_ms, ids, max, sm->sessions,
			 sizeof(*sm->sessions));
}

/* --- Retransmissions --- */

bool locks_cached_reply_find(const struct locks *sm, uint64_t session_id, uint64_t seq,
			     uint64_t digest, struct locks_reply *reply)
{
	const struct locks_cached_reply *c = NULL;
	uint32_t s = session_find(sm, session_id);

	if (s == LOCKS_NONE || seq == 0 || digest == 0)
		return false;
	/* The apply's own classification, so that the two cannot disagree;
	 * stricter on the digest: a record without one is left to the apply. */
	if (session_seq_check(sm, s, seq, digest, &c) != SESSION_SEQ_DUPLICATE || c->digest != digest)
		return false;
	HASP_ASSERT(c->seq == seq);
	HASP_ASSERT(seq >= sm->sessions[s].seq_floor);
	*reply = c->reply;
	return true;
}

bool locks_open_reply_find(const struct locks *sm, uint64_t nonce, uint64_t owner,
			   struct locks_reply *reply)
{
	if (nonce == 0)
		return false;
	uint32_t s = session_find_nonce(sm, nonce);
	/* Another owner's nonce is refused at apply (NONCE_IN_USE). */
	if (s == LOCKS_NONE || sm->sessions[s].owner != owner)
		return false;
	memset(reply, 0, sizeof(*reply));
	session_open_reply_fill(sm, s, reply);
	return true;
}

/* --- Read-only queries --- */

bool locks_lock_read(const struct locks *sm, const uint8_t *name, uint32_t name_len,
		     struct locks_lock_info *info)
{
	uint32_t lk = lock_table_find(sm, name, name_len);

	if (lk == LOCKS_NONE)
		return false;
	const struct locks_lock *l = &sm->locks[lk];
	const struct locks_lease *ls = &sm->leases[l->lease];
	*info = (struct locks_lock_info){
		.holder_session_id = l->holder_session_id,
		.holder_owner = l->holder_owner,
		.token = l->token,
		.lease_id = ls->id,
		.deadline_ms = ls->deadline_ms,
		.ttl_ms = ls->ttl_ms,
		.waiter_count = l->waiter_count,
		.private_lease = (ls->flags & LEASE_FLAG_PRIVATE) != 0,
	};
	return true;
}

bool locks_check(const struct locks *sm, const uint8_t *name, uint32_t name_len, uint64_t token)
{
	uint32_t lk = lock_table_find(sm, name, name_len);

	return lk != LOCKS_NONE && token != 0 && sm->locks[lk].token == token;
}

bool locks_kv_get(const struct locks *sm, const uint8_t *key, uint32_t key_len,
		  struct locks_kv_info *info)
{
	uint32_t e = kv_find(sm, key, key_len);

	if (e == LOCKS_NONE)
		return false;
	kv_info_fill(sm, e, info);
	return true;
}

bool locks_lease_read(const struct locks *sm, uint64_t lease_id, struct locks_lease_info *info)
{
	uint32_t ls = lease_find(sm, lease_id);

	if (ls == LOCKS_NONE)
		return false;
	const struct locks_lease *l = &sm->leases[ls];
	*info = (struct locks_lease_info){
		.deadline_ms = l->deadline_ms,
		.ttl_ms = l->ttl_ms,
		.lock_count = l->lock_count,
		.waiter_count = l->waiter_count,
		.key_count = l->kv_count,
		.private_lease = (l->flags & LEASE_FLAG_PRIVATE) != 0,
	};
	return true;
}

bool locks_session_read(const struct locks *sm, uint64_t session_id, struct locks_session_info *info)
{
	uint32_t s = session_find(sm, session_id);

	if (s == LOCKS_NONE)
		return false;
	const struct locks_session *ss = &sm->sessions[s];
	*info = (struct locks_session_info){
		.owner = ss->owner,
		.nonce = ss->nonce,
		.deadline_ms = ss->deadline_ms,
		.seq_max = ss->seq_max,
		.seq_floor = ss->seq_floor,
		.ttl_ms = ss->ttl_ms,
		.lock_count = ss->lock_count,
		.waiter_count = ss->waiter_count,
	};
	return true;
}

/* The first used slot at or after *cursor, below `end`; moves *cursor past
 * it. LOCKS_NONE when there is none. */
static uint32_t locks_slot_next(const struct slots *table, uint32_t end, uint32_t *cursor)
{
	for (uint32_t i = *cursor; i < end; i++) {
		if (slots_used(table, i)) {
			*cursor = i + 1;
			return i;
		}
	}
	*cursor = end;
	return LOCKS_NONE;
}

bool locks_lock_next(const struct locks *sm, uint32_t *cursor, const uint8_t **name,
		     uint32_t *name_len, struct locks_lock_info *info)
{
	uint32_t lk = locks_slot_next(&sm->lock_slots, sm->cfg.locks_max, cursor);

	if (lk == LOCKS_NONE)
		return false;
	const struct locks_lock *l = &sm->locks[lk];
	*name = arena_data(&sm->lock_names, l->name_off);
	*name_len = l->name_len;
	bool found = locks_lock_read(sm, *name, *name_len, info);
	HASP_ASSERT(found);
	return true;
}

bool locks_lease_next(const struct locks *sm, uint32_t *cursor, uint64_t *lease_id,
		      struct locks_lease_info *info)
{
	uint32_t ls = locks_slot_next(&sm->lease_slots, sm->cfg.leases_max, cursor);

	if (ls == LOCKS_NONE)
		return false;
	*lease_id = sm->leases[ls].id;
	bool found = locks_lease_read(sm, *lease_id, info);
	HASP_ASSERT(found);
	return true;
}

bool locks_session_next(const struct locks *sm, uint32_t *cursor, uint64_t *session_id,
			struct locks_session_info *info)
{
	uint32_t s = locks_slot_next(&sm->session_slots, sm->cfg.sessions_max, cursor);

	if (s == LOCKS_NONE)
		return false;
	*session_id = sm->sessions[s].id;
	bool found = locks_session_read(sm, *session_id, info);
	HASP_ASSERT(found);
	return true;
}

void locks_counts_get(const struct locks *sm, struct locks_counts *counts)
{
	*counts = (struct locks_counts){
		.locks = sm->lock_slots.used_count,
		.leases = sm->lease_slots.used_count,
		.sessions = sm->session_slots.used_count,
		.waiters = sm->waiter_slots.used_count,
		.kv_entries = sm->kv_slots.used_count,
	};
}
