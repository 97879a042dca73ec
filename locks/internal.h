/*
 * Helpers shared by the modules of locks/ (not part of the public API):
 * revision bumps, replies, events, and the id scheme of sessions and leases.
 *
 * Ids: a session or lease id is (counter << 24) | slot, where the counter is
 * replicated state that only grows. The slot makes lookup O(1) without a hash
 * table (8 bytes per lease saved); the counter makes an id unique forever, so
 * a client holding the id of an ended lease can never touch a new lease that
 * reuses the slot.
 */
#ifndef HASP_LOCKS_INTERNAL_H
#define HASP_LOCKS_INTERNAL_H

#include <string.h>

#include "common/assert.h"
#include "locks/locks.h"

#define LOCKS_ID_SLOT_BITS 24u
#define LOCKS_ID_SLOT_MASK ((1u << LOCKS_ID_SLOT_BITS) - 1u)
/* Log time saturates here; leaves room to add any TTL without overflow. */
#define LOCKS_TIME_MS_MAX (1ull << 62)

/* Back to the empty state locks_init() leaves, keeping the allocations
 * (snapshot restore). */
void locks_reset(struct locks *sm);

static inline uint64_t locks_id_make(struct locks *sm, uint32_t slot)
{
	HASP_ASSERT(slot <= LOCKS_ID_SLOT_MASK);
	sm->id_counter++;
	return (sm->id_counter << LOCKS_ID_SLOT_BITS) | slot;
}

static inline uint32_t locks_id_slot(uint64_t id)
{
	return (uint32_t)(id & LOCKS_ID_SLOT_MASK);
}

/* Moves the revision once per command, before the first change it makes:
 * every grant of this command gets the same token, which is still strictly
 * larger than any earlier grant of any lock. */
static inline void locks_bump(struct locks *sm)
{
	if (!sm->bumped) {
		sm->revision++;
		sm->bumped = true;
	}
}

static inline void locks_reply_set(struct locks *sm, uint8_t status, uint8_t reason)
{
	sm->res->reply.status = status;
	sm->res->reply.reason = reason;
	if (reason != LOCKS_REASON_NONE && reason < LOCKS_REASON_COUNT)
		sm->stats.by_reason[reason]++;
	if (status == HASP_STATUS_FULL)
		sm->stats.full++;
	else if (status == HASP_STATUS_BAD_REQUEST || status == HASP_STATUS_BAD_NAME ||
		 status == HASP_STATUS_BAD_TTL || status == HASP_STATUS_TOO_LARGE)
		sm->stats.bad_requests++;
}

/* The next event slot; the bound is locks_events_max() (asserted). */
static inline struct locks_event *locks_event_push(struct locks *sm, uint8_t type,
						   const uint8_t *name, uint32_t name_len)
{
	struct locks_result *res = sm->res;

	HASP_ASSERT(res->event_count < res->event_count_max);
	HASP_ASSERT(name_len <= HASP_NAME_SIZE_MAX);
	struct locks_event *ev = &res->events[res->event_count++];
	memset(ev, 0, sizeof(*ev));
	ev->type = type;
	ev->revision = sm->revision;
	ev->name_len = (uint8_t)name_len;
	memcpy(ev->name, name, name_len);
	return ev;
}

static inline bool locks_ttl_valid(uint32_t ttl_ms)
{
	return ttl_ms >= HASP_TTL_MS_MIN && ttl_ms <= HASP_TTL_MS_MAX;
}

/* Doubly-linked intrusive lists over u32 slots: the links live in the
 * records; these macros keep every list operation written once. */
#define LIST_PUSH_FRONT(head, table, idx, nextf, prevf)        \
	do {                                                   \
		uint32_t h_ = (head);                          \
		(table)[idx].nextf = h_;                       \
		(table)[idx].prevf = LOCKS_NONE;               \
		if (h_ != LOCKS_NONE)                          \
			(table)[h_].prevf = (idx);             \
		(head) = (idx);                                \
	} while (0)

#define LIST_UNLINK(head, table, idx, nextf, prevf)                 \
	do {                                                        \
		uint32_t n_ = (table)[idx].nextf;                   \
		uint32_t p_ = (table)[idx].prevf;                   \
		if (p_ != LOCKS_NONE)                               \
			(table)[p_].nextf = n_;                     \
		else                                                \
			(head) = n_;                                \
		if (n_ != LOCKS_NONE)                               \
			(table)[n_].prevf = p_;                     \
		(table)[idx].nextf = LOCKS_NONE;                    \
		(table)[idx].prevf = LOCKS_NONE;                    \
	} while (0)

#endif
