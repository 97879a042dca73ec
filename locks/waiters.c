/*
 * The FIFO waiter queues (see waiters.h). Grants to waiters happen in
 * lock_table.c (lock_table_release), always to the head, always inside the
 * command that freed the lock: one GRANTED event, no herd (the ZooKeeper
 * lock recipe's "watch only your predecessor", done by the server).
 */
#include "locks/waiters.h"

#include "locks/internal.h"
#include "locks/lease.h"
#include "locks/lock_table.h"
#include "locks/session.h"

uint32_t waiters_enqueue(struct locks *sm, uint32_t lock, uint32_t session, uint32_t lease)
{
	uint32_t w = slots_alloc(&sm->waiter_slots);
	HASP_ASSERT(w != SLOTS_NONE);
	struct locks_waiter *wt = &sm->waiters[w];
	struct locks_lock *lk = &sm->locks[lock];

	wt->lock = lock;
	wt->session = session;
	wt->lease = lease;
	/* Tail append keeps the queue FIFO. */
	wt->next = LOCKS_NONE;
	wt->prev = lk->waiter_tail;
	if (lk->waiter_tail != LOCKS_NONE)
		sm->waiters[lk->waiter_tail].next = w;
	else
		lk->waiter_head = w;
	lk->waiter_tail = w;
	lk->waiter_count++;

	LIST_PUSH_FRONT(sm->sessions[session].waiter_head, sm->waiters, w, session_next, session_prev);
	sm->sessions[session].waiter_count++;
	LIST_PUSH_FRONT(sm->leases[lease].waiter_head, sm->waiters, w, lease_next, lease_prev);
	sm->leases[lease].waiter_count++;
	return w;
}

void waiters_unlink(struct locks *sm, uint32_t w)
{
	struct locks_waiter *wt = &sm->waiters[w];
	struct locks_lock *lk = &sm->locks[wt->lock];
	struct locks_session *s = &sm->sessions[wt->session];
	struct locks_lease *ls = &sm->leases[wt->lease];

	HASP_ASSERT(lk->waiter_count > 0);
	if (wt->prev != LOCKS_NONE)
		sm->waiters[wt->prev].next = wt->next;
	else
		lk->waiter_head = wt->next;
	if (wt->next != LOCKS_NONE)
		sm->waiters[wt->next].prev = wt->prev;
	else
		lk->waiter_tail = wt->prev;
	lk->waiter_count--;

	LIST_UNLINK(s->waiter_head, sm->waiters, w, session_next, session_prev);
	s->waiter_count--;
	LIST_UNLINK(ls->waiter_head, sm->waiters, w, lease_next, lease_prev);
	ls->waiter_count--;
	memset(wt, 0, sizeof(*wt)); /* free records are all-zero, padding too */
	slots_free(&sm->waiter_slots, w);
}

void waiters_drop(struct locks *sm, uint32_t w)
{
	uint32_t lease = sm->waiters[w].lease;

	waiters_unlink(sm, w);
	if (sm->leases[lease].flags & LEASE_FLAG_PRIVATE)
		lease_destroy(sm, lease);
}

uint32_t waiters_find(const struct locks *sm, uint32_t lock, uint32_t session, uint32_t *position)
{
	uint32_t pos = 1;

	for (uint32_t w = sm->locks[lock].waiter_head; w != LOCKS_NONE; w = sm->waiters[w].next) {
		if (sm->waiters[w].session == session) {
			*position = pos;
			return w;
		}
		pos++;
	}
	return LOCKS_NONE;
}
