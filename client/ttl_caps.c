/*
 * Caps on a lock's validity after a TTL change whose answer never came.
 *
 * An ACQUIRE by the session that already holds the lock, and a RENEW with
 * a TTL, re-arm the lease with the TTL they carry (locks/lock_table.c),
 * shorter or longer. When the client gives up on such a request without an
 * answer, the cluster may have applied it: the lease may now end at the
 * request's apply time plus its TTL, which is no earlier than its first
 * send plus that TTL. The validity the application holds (from an earlier
 * grant with a longer TTL) can then outlast the lease, and another client
 * be granted the lock while this one still believes it safe (found by the
 * node simulation, tests/nodesim, `--shrink`). So the client remembers, per
 * lock name (and token for RENEW), the bound "first send + TTL - drift"
 * and hasp_client_lock_valid_until() never reports more than it.
 *
 * A cap ends when the same lock is renewed or acquired again with an
 * answer, by a request first sent after the cap was made (that request was
 * applied after the unanswered one: it set the lease the application now
 * holds), or when the lock is released with an answer. This assumes, as
 * the rest of libhasp does, that the network does not deliver a datagram
 * after the client gave it up and a later request on the same lock was
 * answered. A full table folds into one cap on every lock of the session,
 * never drops one.
 *
 * Sessions: a RENEW cap names its grant by token, and a lock with its own
 * TTL outlives the session that took it (CLIENT.md), so that cap binds in
 * every session and any session's answered RENEW or RELEASE of the token
 * ends it (the same order argument). An ACQUIRE cap and the fold bind
 * only while their session is the client's (apply below): once a new
 * session replaces it they bind nothing, and are dropped then (session ids
 * are never reused), so that ended sessions do not fill the table. Not
 * covered: a lock the old session still holds outlives it, and its
 * hasp_lock is then no longer capped by that session's ACQUIRE cap or
 * fold (a handle carries no session to match).
 */
#include <string.h>

#include "client/client_impl.h"
#include "common/assert.h"

/* Whether cap `t` is about the grant a request on (name, token) in
 * `session_id` names: a token names one grant whatever the session; token
 * 0 (an ACQUIRE) means the name's grant held by that session. */
static bool cap_same_grant(const struct ttl_cap *t, const char *name, uint64_t token,
			   uint64_t session_id)
{
	bool grant = t->token == 0 ? token == 0 && t->session_id == session_id : t->token == token;
	return grant && strcmp(t->name, name) == 0;
}

void client_ttl_cap_note_locked(struct hasp_client *c, const struct client_req *r, uint64_t now_ns)
{
	if (r->ttl_change_ms == 0 || !r->sent)
		return;
	uint64_t until = client_valid_until(c, r->first_send_ns, r->ttl_change_ms);
	for (uint32_t i = 0; c->ttl_caps_used > 0 && i < CLIENT_TTL_CAPS; i++) {
		struct ttl_cap *t = &c->ttl_caps[i];
		if (t->used && cap_same_grant(t, r->ttl_name, r->ttl_token, r->session_id)) {
			if (until < t->until_ns)
				t->until_ns = until;
			t->made_ns = now_ns;
			return;
		}
	}
	for (uint32_t i = 0; i < CLIENT_TTL_CAPS; i++) {
		struct ttl_cap *t = &c->ttl_caps[i];
		if (!t->used) {
			*t = (struct ttl_cap){ .used = true, .session_id = r->session_id,
					       .token = r->ttl_token, .until_ns = until,
					       .made_ns = now_ns };
			memcpy(t->name, r->ttl_name, sizeof(t->name));
			c->ttl_caps_used++;
			return;
		}
	}
	/* Full: every lock of the session is capped at the earliest bound. */
	if (c->ttl_cap_all_ns == 0 || until < c->ttl_cap_all_ns)
		c->ttl_cap_all_ns = until;
	c->ttl_cap_all_session = r->session_id;
}

void client_ttl_cap_clear_locked(struct hasp_client *c, const char *name, uint64_t token,
				 uint64_t sent_ns, uint64_t session_id)
{
	/* Once per lock reply: the count spares the walk over 32 entries
	 * (5 KiB) in the common case of no cap at all. */
	for (uint32_t i = 0; c->ttl_caps_used > 0 && i < CLIENT_TTL_CAPS; i++) {
		struct ttl_cap *t = &c->ttl_caps[i];
		/* An answer with the token also ends the session's ACQUIRE
		 * cap on the name: the lock the re-ACQUIRE would re-arm. */
		bool ends = t->token == 0 ? t->session_id == session_id : t->token == token;
		if (t->used && ends && t->made_ns < sent_ns && strcmp(t->name, name) == 0) {
			t->used = false;
			c->ttl_caps_used--;
		}
	}
}

uint64_t client_ttl_cap_apply_locked(const struct hasp_client *c, const char *name, uint64_t token,
				     uint64_t until_ns)
{
	for (uint32_t i = 0; c->ttl_caps_used > 0 && i < CLIENT_TTL_CAPS; i++) {
		const struct ttl_cap *t = &c->ttl_caps[i];
		/* A cap for any grant of the name (an ACQUIRE) binds only the
		 * session that sent it; one for a token binds that grant. */
		bool ours = t->token == 0 ? t->session_id == c->session_id : t->token == token;
		if (t->used && ours && t->until_ns < until_ns && strcmp(t->name, name) == 0)
			until_ns = t->until_ns;
	}
	if (c->ttl_cap_all_ns != 0 && c->ttl_cap_all_session == c->session_id &&
	    c->ttl_cap_all_ns < until_ns)
		until_ns = c->ttl_cap_all_ns;
	return until_ns;
}

void client_ttl_caps_session_replaced_locked(struct hasp_client *c)
{
	for (uint32_t i = 0; c->ttl_caps_used > 0 && i < CLIENT_TTL_CAPS; i++) {
		struct ttl_cap *t = &c->ttl_caps[i];
		if (t->used && t->token == 0 && t->session_id != c->session_id) {
			t->used = false;
			c->ttl_caps_used--;
		}
	}
	if (c->ttl_cap_all_session != c->session_id) {
		c->ttl_cap_all_ns = 0;
		c->ttl_cap_all_session = 0;
	}
}
