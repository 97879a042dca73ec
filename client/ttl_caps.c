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
 * answered. A full table first makes room from the caps of ended sessions
 * (below), then folds into one cap on every lock of the session; it never
 * drops a cap.
 *
 * Sessions: a RENEW cap names its grant by token, and a lock with its own
 * TTL outlives the session that took it (CLIENT.md), so that cap binds in
 * every session and any session's answered RENEW or RELEASE of the token
 * ends it (the same order argument). An ACQUIRE cap and the fold do not
 * know the token they are about: while their session is the client's they
 * bind every lock of the name (of the session, for the fold). Once a new
 * session replaces it they must keep binding the old session's locks,
 * which live on, and must not bind the new session's grants (a false lock
 * loss). Tokens tell the two apart:
 *
 *   - fencing tokens are the revision of the grant, strictly increasing
 *     in apply order, cluster-wide;
 *   - every hasp_lock of the old session was taken from an answer (or a
 *     LOCK_GRANTED event) that arrived while it was the client's (those
 *     of another session are stray), so its grant was applied before the
 *     replacement;
 *   - every grant to a later session is applied after that session's
 *     first request, sent after the replacement.
 *
 * So every token answered before the replacement (ttl_tokens_seen_max,
 * kept by every answered lock request) is below every later session's
 * grant, and at least every token the application holds from the old
 * session. At the replacement that maximum becomes the ended bound
 * (ttl_tokens_ended_max), and the old session's ACQUIRE caps become
 * "ended": they bind the name's locks with a token up to it; its fold
 * joins the ended fold, every lock with a token up to it. An answer to
 * the old session taken in only later (it arrived before the change, and
 * its request was stepped after) raises the ended bound and these caps to
 * its token: it too was granted before the replacement. A request given
 * up after its session was replaced is noted as ended at once.
 *
 * Ended caps end as current ones do: an answered request on a grant they
 * bind (a RENEW or RELEASE of a token up to the bound, from any session),
 * first sent after the cap was made. They are not dropped by time: a lock
 * on a lease, or renewed by auto_renew, has no largest validity, and
 * dropping would raise what is reported for a lock that may be lost.
 * Instead a full table makes room from them (caps_compact): the ended caps
 * of one name become one, then every cap binding only tokens up to the
 * ended bound (ended caps, RENEW caps of old tokens) goes into the ended
 * fold. Each step binds what it bound before, no later, so no reported
 * validity goes up; it may cap an old session's other locks too (a false
 * loss, after more than 32 caps). The current session's grants are above
 * the ended bound: ended sessions never fill the table for them, and never
 * fold them (test_caps_of_ended_sessions_leave_room).
 */
#include <string.h>

#include "client/client_impl.h"
#include "common/assert.h"

/* Whether cap `t` binds a hasp_lock (name, token) of client `c`: a token
 * cap its grant in every session; a current ACQUIRE cap every lock of the
 * name while its session is the client's; an ended one the name's grants
 * up to its token bound. */
static bool cap_covers(const struct ttl_cap *t, uint64_t token, uint64_t session_id)
{
	if (t->token != 0)
		return t->token == token;
	if (t->ended)
		return token <= t->token_max;
	return t->session_id == session_id;
}

static bool cap_binds(const struct hasp_client *c, const struct ttl_cap *t, const char *name,
		      uint64_t token)
{
	return t->used && cap_covers(t, token, c->session_id) && strcmp(t->name, name) == 0;
}

/* Whether cap `t` is about the same grant as the new cap `n`, so that the
 * two are one entry (the earlier bound wins). */
static bool cap_same_grant(const struct ttl_cap *t, const struct ttl_cap *n)
{
	bool grant;

	if (n->token != 0)
		grant = t->token == n->token;
	else
		grant = t->token == 0 && t->ended == n->ended && t->session_id == n->session_id;
	return t->used && grant && strcmp(t->name, n->name) == 0;
}

/* Narrows `into` by `from`: it then binds what either bound, no later
 * than either. Only lowers a reported validity. */
static void cap_merge(struct ttl_cap *into, const struct ttl_cap *from)
{
	HASP_ASSERT(into->token == from->token && into->ended == from->ended);
	if (from->until_ns < into->until_ns)
		into->until_ns = from->until_ns;
	if (from->token_max > into->token_max)
		into->token_max = from->token_max;
	if (from->made_ns > into->made_ns)
		into->made_ns = from->made_ns;
}

static void cap_free(struct hasp_client *c, struct ttl_cap *t)
{
	HASP_ASSERT(t->used && c->ttl_caps_used > 0);
	t->used = false;
	c->ttl_caps_used--;
}

/* Every lock with a token up to `token_max` is capped at `until_ns`. */
static void fold_ended(struct hasp_client *c, uint64_t until_ns, uint64_t token_max)
{
	HASP_ASSERT(token_max <= c->ttl_tokens_ended_max);
	if (!c->ttl_cap_ended_all || until_ns < c->ttl_cap_ended_all_ns)
		c->ttl_cap_ended_all_ns = until_ns;
	c->ttl_cap_ended_all = true;
	if (token_max > c->ttl_cap_ended_all_token_max)
		c->ttl_cap_ended_all_token_max = token_max;
}

static struct ttl_cap *cap_free_entry(struct hasp_client *c)
{
	for (uint32_t i = 0; c->ttl_caps_used < CLIENT_TTL_CAPS && i < CLIENT_TTL_CAPS; i++)
		if (!c->ttl_caps[i].used)
			return &c->ttl_caps[i];
	return NULL;
}

/* A full table makes room from the caps of ended sessions, so that they
 * never fold the current session's locks: first the ended caps of one
 * name become one, then every cap that binds only grants to ended
 * sessions (ended caps, token caps up to the ended bound) goes into the
 * ended fold. Both only lower what is reported. */
static void caps_compact(struct hasp_client *c)
{
	for (uint32_t i = 0; i < CLIENT_TTL_CAPS; i++) {
		struct ttl_cap *t = &c->ttl_caps[i];
		for (uint32_t j = i + 1; t->used && t->ended && j < CLIENT_TTL_CAPS; j++) {
			struct ttl_cap *u = &c->ttl_caps[j];
			if (u->used && u->ended && strcmp(u->name, t->name) == 0) {
				cap_merge(t, u);
				cap_free(c, u);
			}
		}
	}
	if (c->ttl_caps_used < CLIENT_TTL_CAPS)
		return;
	for (uint32_t i = 0; i < CLIENT_TTL_CAPS; i++) {
		struct ttl_cap *t = &c->ttl_caps[i];
		if (t->used && t->ended) {
			fold_ended(c, t->until_ns, t->token_max);
			cap_free(c, t);
		} else if (t->used && t->token != 0 && t->token <= c->ttl_tokens_ended_max) {
			fold_ended(c, t->until_ns, t->token);
			cap_free(c, t);
		}
	}
}

void client_ttl_cap_note_locked(struct hasp_client *c, const struct client_req *r, uint64_t now_ns)
{
	if (r->ttl_change_ms == 0 || !r->sent)
		return;
	/* An ACQUIRE of a session replaced while it was under way: its
	 * grants are all below the ended bound ("Sessions" above). */
	bool ended = r->ttl_token == 0 && r->session_id != c->session_id;
	struct ttl_cap n = { .used = true, .ended = ended, .session_id = r->session_id,
			     .token = r->ttl_token,
			     .token_max = ended ? c->ttl_tokens_ended_max : 0,
			     .until_ns = client_valid_until(c, r->first_send_ns, r->ttl_change_ms),
			     .made_ns = now_ns };
	struct hasp_wire_msg m;
	const struct hasp_wire_bytes *name;

	/* The name from the request's own datagram (encoded, so valid; the
	 * session and seq patched in and a tag added do not change the body). */
	int drc = hasp_wire_decode_request(r->bytes, r->size, &m);
	HASP_ASSERT(drc == 0);
	name = m.hdr.opcode == HASP_OP_RENEW ? &m.body.renew.name : &m.body.acquire.name;
	HASP_ASSERT(m.hdr.opcode == HASP_OP_RENEW || m.hdr.opcode == HASP_OP_ACQUIRE);
	HASP_ASSERT(name->size < sizeof(n.name));
	memcpy(n.name, name->data, name->size);
	n.name[name->size] = '\0';

	for (uint32_t i = 0; c->ttl_caps_used > 0 && i < CLIENT_TTL_CAPS; i++) {
		struct ttl_cap *t = &c->ttl_caps[i];
		if (cap_same_grant(t, &n)) {
			cap_merge(t, &n);
			return;
		}
	}
	struct ttl_cap *t = cap_free_entry(c);
	if (t == NULL) {
		caps_compact(c);
		t = cap_free_entry(c);
	}
	if (t != NULL) {
		*t = n;
		c->ttl_caps_used++;
		return;
	}
	/* Full of caps that bind current grants. An ended session's cap
	 * joins the ended fold; otherwise every lock of the session is
	 * capped at the earliest bound. */
	if (ended) {
		fold_ended(c, n.until_ns, n.token_max);
		return;
	}
	if (c->ttl_cap_all_ns == 0 || n.until_ns < c->ttl_cap_all_ns)
		c->ttl_cap_all_ns = n.until_ns;
	c->ttl_cap_all_session = r->session_id;
}

/* An answer to a request of a session the client left, taken in only now:
 * its token is still below every grant to the current session, and the
 * caps of ended sessions must bind it as they bind the grants seen before
 * the change. */
static void caps_raise_ended(struct hasp_client *c, const char *name, uint64_t token)
{
	if (token > c->ttl_tokens_ended_max)
		c->ttl_tokens_ended_max = token;
	for (uint32_t i = 0; c->ttl_caps_used > 0 && i < CLIENT_TTL_CAPS; i++) {
		struct ttl_cap *t = &c->ttl_caps[i];
		if (t->used && t->ended && token > t->token_max && strcmp(t->name, name) == 0)
			t->token_max = token;
	}
	if (c->ttl_cap_ended_all && token > c->ttl_cap_ended_all_token_max)
		c->ttl_cap_ended_all_token_max = token;
}

void client_ttl_cap_clear_locked(struct hasp_client *c, const char *name, uint64_t token,
				 uint64_t sent_ns, uint64_t session_id)
{
	if (token > c->ttl_tokens_seen_max)
		c->ttl_tokens_seen_max = token;
	if (session_id != c->session_id)
		caps_raise_ended(c, name, token);
	/* Once per lock reply: the count spares the walk over 32 entries
	 * (5 KiB) in the common case of no cap at all. */
	for (uint32_t i = 0; c->ttl_caps_used > 0 && i < CLIENT_TTL_CAPS; i++) {
		struct ttl_cap *t = &c->ttl_caps[i];
		/* An answer with the token also ends the session's ACQUIRE
		 * cap on the name: the lock the re-ACQUIRE would re-arm; for
		 * an ended session, an answer on a grant it binds. */
		if (t->used && cap_covers(t, token, session_id) && t->made_ns < sent_ns &&
		    strcmp(t->name, name) == 0)
			cap_free(c, t);
	}
}

uint64_t client_ttl_cap_apply_locked(const struct hasp_client *c, const char *name, uint64_t token,
				     uint64_t until_ns)
{
	for (uint32_t i = 0; c->ttl_caps_used > 0 && i < CLIENT_TTL_CAPS; i++) {
		const struct ttl_cap *t = &c->ttl_caps[i];
		if (t->until_ns < until_ns && cap_binds(c, t, name, token))
			until_ns = t->until_ns;
	}
	if (c->ttl_cap_all_ns != 0 && c->ttl_cap_all_session == c->session_id &&
	    c->ttl_cap_all_ns < until_ns)
		until_ns = c->ttl_cap_all_ns;
	if (c->ttl_cap_ended_all && token <= c->ttl_cap_ended_all_token_max &&
	    c->ttl_cap_ended_all_ns < until_ns)
		until_ns = c->ttl_cap_ended_all_ns;
	return until_ns;
}

void client_ttl_caps_session_replaced_locked(struct hasp_client *c)
{
	/* Every token answered so far was granted before the new session
	 * could ask for anything. */
	if (c->ttl_tokens_seen_max > c->ttl_tokens_ended_max)
		c->ttl_tokens_ended_max = c->ttl_tokens_seen_max;
	for (uint32_t i = 0; c->ttl_caps_used > 0 && i < CLIENT_TTL_CAPS; i++) {
		struct ttl_cap *t = &c->ttl_caps[i];
		if (t->used && t->token == 0 && !t->ended && t->session_id != c->session_id) {
			t->ended = true;
			t->token_max = c->ttl_tokens_ended_max;
		}
	}
	if (c->ttl_cap_all_ns != 0 && c->ttl_cap_all_session != c->session_id) {
		fold_ended(c, c->ttl_cap_all_ns, c->ttl_tokens_ended_max);
		c->ttl_cap_all_ns = 0;
		c->ttl_cap_all_session = 0;
	}
}
