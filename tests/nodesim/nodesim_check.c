/*
 * The node simulation's checks, in C so that a seed costs no Python: the
 * mutual exclusion and fencing properties of tests/fault/checker.py over
 * the same operations, with the same rules (check_mutual_exclusion, holds,
 * check_fencing). The meson test also runs checker.py itself over the
 * histories of its seeds, so the two are held to the same verdicts.
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "tests/nodesim/nodesim.h"

void nodesim_check_deinit(struct nodesim_check *k)
{
	hasp_free(k->holds);
	memset(k, 0, sizeof(*k));
}

static struct nodesim_hold *find(struct nodesim_check *k, uint32_t lock, uint64_t token)
{
	for (uint32_t i = 0; i < k->count; i++)
		if (k->holds[i].lock == lock && k->holds[i].token == token)
			return &k->holds[i];
	return NULL;
}

void nodesim_check_grant(struct nodesim_check *k, uint32_t lock, uint64_t token, uint32_t proc,
			 uint64_t invoke_ns, uint64_t ack_ns, uint64_t valid_until)
{
	struct nodesim_hold *h = find(k, lock, token);
	if (h != NULL) {
		/* The same grant acknowledged again (a retried request); to
		 * another client it is a fencing violation. */
		if (h->proc != proc) {
			if (k->fence_violations++ == 0)
				snprintf(k->fence_msg, sizeof(k->fence_msg),
					 "fencing: lock l%u: token %llu granted to two clients (c%u, c%u)",
					 lock, (unsigned long long)token, h->proc, proc);
			return;
		}
		/* The holder acquired it again: that re-arms the lease with
		 * the request's TTL, so the later acknowledgement's validity
		 * is the one the holder goes by (checker.py, holds()). */
		h->start = ack_ns < h->start ? ack_ns : h->start;
		if (ack_ns >= h->last_ack_ns) {
			h->last_ack_ns = ack_ns;
			h->end = valid_until;
		}
		return;
	}
	nodesim_grow((void **)&k->holds, k->count, &k->size, sizeof(*k->holds), 256);
	k->holds[k->count++] = (struct nodesim_hold){ .lock = lock, .proc = proc, .token = token,
					      .invoke_ns = invoke_ns, .ack_ns = ack_ns, .last_ack_ns = ack_ns,
					      .start = ack_ns, .end = valid_until };
}

void nodesim_check_renew_ok(struct nodesim_check *k, uint32_t lock, uint64_t token,
			    uint64_t valid_until)
{
	struct nodesim_hold *h = find(k, lock, token);
	if (h != NULL)
		h->end = valid_until; /* a renew may shrink the lease as well */
}

void nodesim_check_validity_cap(struct nodesim_check *k, uint32_t lock, uint64_t token,
				uint64_t valid_until)
{
	struct nodesim_hold *h = find(k, lock, token);
	if (h != NULL && valid_until < h->end)
		h->end = valid_until; /* an unanswered TTL change (checker.py) */
}

void nodesim_check_renew_refused(struct nodesim_check *k, uint32_t lock, uint64_t token,
				 uint64_t at_ns)
{
	struct nodesim_hold *h = find(k, lock, token);
	if (h != NULL && at_ns < h->end)
		h->end = at_ns;
}

void nodesim_check_release_start(struct nodesim_check *k, uint32_t lock, uint64_t token,
				 uint64_t at_ns)
{
	struct nodesim_hold *h = find(k, lock, token);
	if (h != NULL && at_ns < h->end)
		h->end = at_ns;
}

uint32_t nodesim_check_run(struct nodesim_check *k, char *msg, size_t size)
{
	uint32_t bad = k->fence_violations;

	msg[0] = '\0';
	if (bad)
		snprintf(msg, size, "%s", k->fence_msg);
	for (uint32_t i = 0; i < k->count; i++) {
		const struct nodesim_hold *a = &k->holds[i];
		for (uint32_t j = 0; j < k->count; j++) {
			const struct nodesim_hold *b = &k->holds[j];
			if (i == j || a->lock != b->lock)
				continue;
			/* Mutual exclusion: b starts inside a (both non-empty). */
			if (b->start >= a->start && (b->start > a->start || j > i) && b->start < a->end &&
			    b->end > b->start && a->end > a->start) {
				if (bad++ == 0)
					snprintf(msg, size,
						 "mutual_exclusion: lock l%u: token %llu (c%u) held until %llu "
						 "overlaps token %llu (c%u) from %llu",
						 a->lock, (unsigned long long)a->token, a->proc,
						 (unsigned long long)a->end, (unsigned long long)b->token,
						 b->proc, (unsigned long long)b->start);
			}
			/* Fencing in real time: a grant acknowledged before b was
			 * asked for has the smaller token. */
			if (a->ack_ns < b->invoke_ns && b->token < a->token) {
				if (bad++ == 0)
					snprintf(msg, size,
						 "fencing: lock l%u: token %llu granted after token %llu "
						 "was acknowledged",
						 a->lock, (unsigned long long)b->token,
						 (unsigned long long)a->token);
			}
		}
	}
	return bad;
}
