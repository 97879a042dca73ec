/*
 * The node's watch registry (watch_index.c): every registered watch in one
 * preallocated array, indexed three ways so that no operation scans it:
 *
 *   by key     a hash of (name, exact|prefix) whose slot names the first
 *              watch of that key; the key's watchers are chained from it.
 *              An event finds its exact watchers with one lookup and its
 *              prefix watchers with one lookup per prefix length that some
 *              prefix watch uses (a per-length count says which).
 *   by session a chain per session, its head kept by the caller (notify.c
 *              keeps it in the session's address entry), so that an
 *              UNWATCH, a duplicate check and a session's end cost the
 *              session's watches, not the node's.
 *   held       a FIFO of the watches whose event waits for a token.
 *
 * Capacity is fixed at init (watches_max); nothing allocates afterwards.
 * The index knows nothing of events or sessions beyond their ids: the
 * held event and the gap flags are notify.c's fields in struct watch.
 */
#ifndef HASP_NODE_WATCH_INDEX_H
#define HASP_NODE_WATCH_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

#define WATCH_NONE UINT32_MAX

/* One watch and its held-back event (notify.c owns the held fields). */
struct watch {
	uint64_t session_id; /* 0: free */
	uint32_t hash;       /* of (name, prefix) under the index's seed */
	uint32_t key_next, key_prev;   /* the same key's watches (prev NONE: the head) */
	uint32_t sess_next, sess_prev; /* the same session's watches */
	uint32_t held_next, held_prev; /* the held FIFO */
	uint32_t epoch;      /* the index's epoch when events last reached it */
	bool prefix;
	bool queued;         /* on the held FIFO */
	uint8_t name_len;
	/* notify.c: the held event */
	bool held_gap;       /* the watcher missed an event before the held one */
	uint8_t held_type;
	uint8_t held_name_len;
	uint32_t held_sub;
	uint64_t held_revision;
	uint64_t held_index; /* the held event's identity */
	uint8_t name[HASP_NAME_SIZE_MAX];
	uint8_t held_name[HASP_NAME_SIZE_MAX];
};

struct watch_index {
	struct watch *w;     /* capacity entries */
	uint32_t *table;     /* key hash: index of the key's first watch, or NONE */
	uint32_t mask;       /* table size - 1 (a power of two >= 2 x capacity) */
	uint32_t capacity;
	uint32_t count;      /* watches registered */
	uint32_t keys;       /* distinct keys (table slots in use) */
	uint32_t top;        /* entries [0, top) have been used at least once */
	uint32_t free_head;  /* freed entries, chained through key_next */
	uint32_t held_head, held_tail, held_count;
	uint32_t epoch;      /* raised by watch_index_new_epoch() */
	uint64_t seed;
	/* Prefix keys by prefix length: a lookup tries only lengths in use. */
	uint32_t prefix_keys[HASP_NAME_SIZE_MAX + 1];
	uint32_t prefix_lens_used; /* lengths with prefix_keys[len] > 0 */
};

/* Allocates capacity entries and a table of 2 x capacity rounded up to a
 * power of two; seed keys the hash (names are client input). */
int watch_index_init(struct watch_index *x, uint32_t capacity, uint64_t seed)
	__attribute__((warn_unused_result));
void watch_index_deinit(struct watch_index *x);
/* Bytes reserved per watch of capacity (entry and table share). */
size_t watch_index_bytes_per_watch(const struct watch_index *x);

/* The session's watch on (name, prefix), or NONE; walks the session's chain. */
uint32_t watch_index_session_find(const struct watch_index *x, uint32_t session_head,
				  const uint8_t *name, uint8_t len, bool prefix);
/* The number of watches on the session's chain. */
uint32_t watch_index_session_count(const struct watch_index *x, uint32_t session_head);
/* Registers a watch and puts it at the head of the session's chain
 * (*session_head); returns its index, or NONE when the index is full. The
 * new watch's epoch is the current one and it holds nothing. */
uint32_t watch_index_add(struct watch_index *x, uint32_t *session_head, uint64_t session_id,
			 const uint8_t *name, uint8_t len, bool prefix)
	__attribute__((warn_unused_result));
/* Removes watch i (and its held event) from every chain. */
void watch_index_remove(struct watch_index *x, uint32_t *session_head, uint32_t i);
/* Removes every watch of the session's chain; returns how many held an
 * event. */
uint32_t watch_index_remove_session(struct watch_index *x, uint32_t *session_head);

/* Calls visit for every watch matching an event on name: exact watches of
 * name, and prefix watches of every prefix of name (the empty one too).
 * visit may hold or unhold, not add or remove. */
typedef void watch_visit_fn(void *arg, struct watch_index *x, uint32_t i);
void watch_index_match(struct watch_index *x, const uint8_t *name, uint8_t len,
		       watch_visit_fn *visit, void *arg);

/* The held FIFO: appends i (no-op when queued), takes i off it, and the
 * oldest (NONE when empty). */
void watch_index_hold(struct watch_index *x, uint32_t i);
void watch_index_unhold(struct watch_index *x, uint32_t i);
static inline uint32_t watch_index_held_first(const struct watch_index *x)
{
	return x->held_head;
}

/* A new epoch: every watch's epoch is now an old one (notify.c: the node
 * stopped leading, so each watch missed events). O(1). */
void watch_index_new_epoch(struct watch_index *x);

/* Checks every invariant of the three indexes (O(capacity + table)); for
 * tests and debug assertions. */
bool watch_index_check(const struct watch_index *x);

#endif
