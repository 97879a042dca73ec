/*
 * libhasp's operations and its asynchronous core.
 *
 * Every call of the API is an op (struct client_op): one request, or for a
 * WAIT acquire a small state machine of them (ACQUIRE, then LOCK_GRANTED or
 * a LOCK_READ recheck, and on giving up CANCEL, LOCK_READ, RELEASE). An op
 * moves on only in op_advance_locked, which never waits: it advances its
 * request (exchange.c: numbering, retransmission, redirects, leader
 * finding) and reacts to what came back. Two drivers call it:
 *
 *   - a blocking call runs its op on the caller's stack and waits for
 *     datagrams between steps (client_op_run);
 *   - hasp_client_*_async put a heap op on the client's list, and the
 *     application's loop advances every such op in hasp_client_process(),
 *     woken by hasp_client_fd() and hasp_client_timeout_ms() (the shape of
 *     c-ares and libcurl's multi interface), and runs the completion
 *     callbacks.
 *
 * So there is one implementation of the exchange, the WAIT fallback and
 * lease validity, whichever way a call is made (docs/CLIENT.md "The
 * asynchronous loop").
 */
#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client/client_impl.h"
#include "common/alloc.h"
#include "common/assert.h"
#include "common/clock.h"
#include "hasp/client.h"

#define NS_PER_MS 1000000ull
/* Fresh ACQUIREs after the queued one vanished (session or lock gone). */
#define ACQUIRE_REISSUE_MAX 8

/* Appends: the list runs oldest first, so a pass hands freed window slots
 * to the oldest waiting op and finished ops come back in start order. */
static void op_link_locked(struct hasp_client *c, struct client_op *op)
{
	op->next = NULL;
	*c->ops_tail = op;
	c->ops_tail = &op->next;
}

/* Takes out the op *pp points at (pp: &c->ops or a predecessor's next). */
static void op_unlink_at_locked(struct hasp_client *c, struct client_op **pp)
{
	struct client_op *op = *pp;

	*pp = op->next;
	if (c->ops_tail == &op->next)
		c->ops_tail = pp;
	op->next = NULL;
}

/* Removes `node` from the singly linked list at `head` (linked through
 * ->next); it must be there. */
#define LIST_UNLINK(head, node)                                              \
	do {                                                                 \
		__typeof__(node) *pp_ = (head);                              \
		while (*pp_ != NULL && *pp_ != (node))                       \
			pp_ = &(*pp_)->next;                                 \
		HASP_ASSERT(*pp_ == (node));                                 \
		*pp_ = (node)->next;                                         \
		(node)->next = NULL;                                         \
	} while (0)

static void op_unlink_locked(struct hasp_client *c, struct client_op *op)
{
	struct client_op **pp = &c->ops;

	while (*pp != NULL && *pp != op)
		pp = &(*pp)->next;
	HASP_ASSERT(*pp == op);
	op_unlink_at_locked(c, pp);
}

static void waiter_unlink_locked(struct hasp_client *c, struct waiter *w)
{
	LIST_UNLINK(&c->waiters, w);
}

static void op_finish_locked(struct hasp_client *c, struct client_op *op, int rc)
{
	op->res.rc = rc;
	op->phase = PH_DONE;
	/* A grant answered to a request sent after an unanswered TTL change
	 * on this lock was applied after it: that cap is over (ttl_caps.c). */
	if (op->kind == OP_ACQUIRE && rc == 0)
		client_ttl_cap_clear_locked(c, op->res.lock.name, op->res.lock.token,
					    op->acquire_send_ns != 0 ? op->acquire_send_ns
								     : op->req.first_send_ns,
					    op->req.session_id);
	/* A granted lock is watched for loss (and renewed) from now on. */
	if (op->kind == OP_ACQUIRE && rc == 0 &&
	    (op->opts.auto_renew || c->lock_lost_set))
		client_kept_add_locked(c, &op->res.lock, op->opts.auto_renew);
	if (op->w_linked) {
		waiter_unlink_locked(c, &op->w);
		op->w_linked = false;
	}
}

/* Starts the next request of an op: `msg` with the given deadline. */
static void op_request_locked(struct hasp_client *c, struct client_op *op, uint8_t phase,
			      struct hasp_wire_msg *msg, uint64_t deadline_ns)
{
	int rc = client_req_init(c, &op->req, msg, deadline_ns);

	/* Every request here was encoded once already, or is a fixed-size
	 * body with a name checked by client_name(). */
	HASP_ASSERT(rc == 0);
	op->phase = phase;
}

static void msg_name(struct hasp_wire_msg *m, uint8_t opcode, const struct client_op *op)
{
	memset(m, 0, sizeof(*m));
	m->hdr.opcode = opcode;
	/* LOCK_READ, CANCEL, ACQUIRE, RELEASE start with the name. */
	struct hasp_wire_bytes n = { (const uint8_t *)op->res.lock.name, op->w.name_size };
	switch (opcode) {
	case HASP_OP_LOCK_READ:
		m->body.lock_read.name = n;
		break;
	case HASP_OP_CANCEL:
		m->body.cancel.name = n;
		break;
	case HASP_OP_RELEASE:
		m->body.release.name = n;
		break;
	default:
		HASP_ASSERT(opcode == HASP_OP_ACQUIRE);
		m->body.acquire.name = n;
		m->body.acquire.lease_id = op->opts.lease_id;
		m->body.acquire.ttl_ms = op->opts.ttl_ms;
		m->body.acquire.mode = op->opts.wait ? HASP_ACQUIRE_WAIT : HASP_ACQUIRE_TRY;
		break;
	}
}

/* The deadline of one ACQUIRE or recheck: the call deadline, bounded by the
 * wait's own. */
static uint64_t op_wait_bounded_deadline(const struct hasp_client *c, const struct client_op *op)
{
	uint64_t d = client_deadline(c);

	return d < op->wait_deadline_ns ? d : op->wait_deadline_ns;
}

static void acquire_send_locked(struct hasp_client *c, struct client_op *op)
{
	struct hasp_wire_msg m;

	msg_name(&m, HASP_OP_ACQUIRE, op);
	op->w.granted = false;
	op->w.recheck = false;
	op_request_locked(c, op, PH_MAIN, &m, op->opts.wait ? op_wait_bounded_deadline(c, op)
							  : client_deadline(c));
}

/* The caller gives up a WAIT (its deadline passed, or a cancel): drop our
 * queue entry on the cluster with CANCEL, so that the lock is never handed
 * to a session that no longer waits. */
static void acquire_give_up_locked(struct hasp_client *c, struct client_op *op, int rc)
{
	struct hasp_wire_msg m;

	op->give_up_rc = rc;
	msg_name(&m, HASP_OP_CANCEL, op);
	op_request_locked(c, op, PH_CANCEL, &m, client_deadline(c));
}

static void lease_note_from_reply_locked(struct hasp_client *c, struct client_op *op,
					 const struct hasp_wire_msg *m, bool granted)
{
	const struct hasp_wire_lease_ok *ok = &m->body.lease_ok;

	client_lease_note_locked(c, ok->lease_id, ok->ttl_ms, op->req.first_send_ns, granted);
	op->res.lease.lease_id = ok->lease_id;
	op->res.lease.ttl_ms = ok->ttl_ms;
	op->res.lease.valid_until_ns = client_valid_until(c, op->req.first_send_ns, ok->ttl_ms);
}

static void lease_forget_locked(struct hasp_client *c, uint64_t lease_id)
{
	struct lease_entry *l = client_lease_find_locked(c, lease_id);

	if (l != NULL) {
		l->used = false;
		c->leases_used--; /* the count that spares the loop its walk */
	}
}

/* The watchdog follows every RENEW, CHECK and RELEASE of a watched lock,
 * whoever sent it (watchdog.c). */
static void kept_note_locked(struct hasp_client *c, const struct client_op *op)
{
	const struct hasp_lock *l = &op->res.lock;

	if (c->kept_count == 0)
		return;
	switch (op->res.op) {
	case HASP_OP_RENEW:
		client_kept_renewed_locked(c, l->name, l->token, op->res.rc, l->ttl_ms,
					   l->valid_until_ns);
		break;
	case HASP_OP_CHECK:
		client_kept_checked_locked(c, l->name, l->token, op->res.rc);
		break;
	case HASP_OP_RELEASE:
		/* The application lets the lock go, whatever the answer: one
		 * that never came must not leave it renewed (and watched) for
		 * ever. Unapplied, the lock ends at its TTL. A cancelled
		 * release is the application changing its mind. */
		if (op->res.rc != -HASP_ECANCELED)
			client_kept_forget_locked(c, l->name, l->token);
		break;
	default:
		break;
	}
}

/* A one-request op ended: its outcome into op->res. */
static void simple_done_locked(struct hasp_client *c, struct client_op *op)
{
	struct hasp_wire_msg m;
	int status = op->req.rc;

	if (op->res.op == HASP_OP_WATCH || op->res.op == HASP_OP_UNWATCH)
		client_watch_done_locked(c, op, status);
	if (status < 0) {
		op_finish_locked(c, op, status);
		kept_note_locked(c, op);
		return;
	}
	/* A RELEASE's outcome is its status (req.rc): the hot path of a lock
	 * cycle skips a third decode of the same reply. */
	if (op->res.op != HASP_OP_RELEASE) {
		int drc = hasp_wire_decode_reply(op->req.reply, op->req.reply_size, &m);
		HASP_ASSERT(drc == 0);
	}
	switch (op->res.op) {
	case HASP_OP_RENEW:
		if (status == HASP_STATUS_GRANTED) {
			op->res.lock.ttl_ms = m.body.granted.ttl_ms;
			op->res.lock.valid_until_ns =
				client_valid_until(c, op->req.first_send_ns, op->res.lock.ttl_ms);
			HASP_ASSERT(op->res.lock.valid_until_ns >= op->req.first_send_ns);
			client_ttl_cap_clear_locked(c, op->res.lock.name, op->res.lock.token,
						    op->req.first_send_ns, op->req.session_id);
		}
		break;
	case HASP_OP_RELEASE:
		if (status == HASP_STATUS_OK)
			client_ttl_cap_clear_locked(c, op->res.lock.name, op->res.lock.token,
						    op->req.first_send_ns, op->req.session_id);
		break;
	case HASP_OP_LOCK_READ:
		if (status == HASP_STATUS_OK) {
			const struct hasp_wire_lock_info *li = &m.body.lock_info;
			op->res.info.holder_session_id = li->holder_session_id;
			op->res.info.token = li->token;
			op->res.info.lease_id = li->lease_id;
			op->res.info.ttl_remaining_ms = li->ttl_remaining_ms;
			op->res.info.waiter_count = li->waiter_count;
			op->res.info.ours = li->holder_session_id == op->req.session_id;
		}
		break;
	case HASP_OP_LEASE_GRANT:
		if (status == HASP_STATUS_OK)
			lease_note_from_reply_locked(c, op, &m, true);
		break;
	case HASP_OP_LEASE_KEEPALIVE:
		if (status == HASP_STATUS_OK)
			lease_note_from_reply_locked(c, op, &m, false);
		else if (status == HASP_STATUS_LEASE_EXPIRED || status == HASP_STATUS_NOT_FOUND)
			lease_forget_locked(c, op->res.lease.lease_id); /* its locks and keys are gone */
		break;
	case HASP_OP_KV_PUT:
	case HASP_OP_KV_DELETE:
	case HASP_OP_KV_CAS:
		/* COMPARE_FAILED carries the key's current mod revision (0: absent). */
		if (status == HASP_STATUS_OK || status == HASP_STATUS_COMPARE_FAILED)
			op->res.revision = m.body.kv_revision.revision;
		break;
	case HASP_OP_KV_GET:
		if (status == HASP_STATUS_OK) {
			const struct hasp_wire_kv_value *v = &m.body.kv_value;
			HASP_ASSERT(v->value.size <= sizeof(op->res.value.value)); /* decoder checked */
			op->res.value.revision = v->revision;
			op->res.value.lease_id = v->lease_id;
			op->res.value.value_size = v->value.size;
			if (v->value.size > 0)
				memcpy(op->res.value.value, v->value.data, v->value.size);
		}
		break;
	case HASP_OP_SESSION_KEEPALIVE:
		if (status == HASP_STATUS_OK && c->session_id == op->req.session_id)
			c->session_ttl_ms = m.body.session_alive.ttl_ms;
		break;
	case HASP_OP_SESSION_CLOSE:
		/* hasp_client_close_async: the cluster ended the session, its
		 * locks, waits and watches (an expired one is handled with
		 * every request's SESSION_EXPIRED). */
		if (status == HASP_STATUS_OK && c->session_id == op->req.session_id)
			c->session_state = SESSION_NONE;
		break;
	case HASP_OP_WATCH_COUNT:
	case HASP_OP_WATCH_STATUS:
		client_watch_query_seen_locked(c, op->req.session_id, op->res.op, status, &m);
		break;
	default:
		break;
	}
	op_finish_locked(c, op, client_result(status));
	kept_note_locked(c, op);
}

/* The WAIT machine reacts to the request that just ended (or, in PH_WAIT,
 * to the waiter's state). Returns true when it moved on (look again). */
static bool acquire_react_locked(struct hasp_client *c, struct client_op *op, uint64_t now,
				 uint64_t *wake_ns)
{
	struct hasp_lock *lock = &op->res.lock;
	struct hasp_wire_msg m;
	int rc = op->req.rc;

	/* A grant's body came decoded with the reply (struct client_req,
	 * `granted`): the usual outcome of an ACQUIRE is not decoded twice. */
	if (op->phase != PH_WAIT && rc >= 0 && !(op->phase == PH_MAIN && rc == HASP_STATUS_GRANTED)) {
		int drc = hasp_wire_decode_reply(op->req.reply, op->req.reply_size, &m);
		HASP_ASSERT(drc == 0);
	}
	switch (op->phase) {
	case PH_MAIN:
		if (rc == HASP_STATUS_GRANTED) {
			const struct hasp_wire_granted *g = &op->req.granted;
			lock->token = g->token;
			lock->lease_id = g->lease_id;
			lock->ttl_ms = g->ttl_ms;
			lock->valid_until_ns = client_valid_until(c, op->req.first_send_ns, g->ttl_ms);
			/* An answered request was sent at least once, and the
			 * validity never starts before that send. */
			HASP_ASSERT(op->req.first_send_ns != 0);
			HASP_ASSERT(lock->valid_until_ns >= op->req.first_send_ns);
			op_finish_locked(c, op, 0);
		} else if (rc == HASP_STATUS_BUSY) {
			lock->token = m.body.busy.holder_token;
			op_finish_locked(c, op, -HASP_EBUSY);
		} else if (rc == HASP_STATUS_QUEUED && op->opts.wait) {
			lock->lease_id = op->opts.lease_id;
			lock->ttl_ms = op->opts.ttl_ms;
			op->acquire_session_id = op->req.session_id;
			op->acquire_send_ns = op->req.first_send_ns;
			/* The grant happened after this instant on the cluster:
			 * the ACQUIRE's send, raised by every re-read that still
			 * showed another holder. */
			op->granted_after_ns = op->req.first_send_ns;
			op->next_check_ns = now + (uint64_t)c->cfg.wait_recheck_ms * NS_PER_MS;
			/* Read the lock at once: its holder's token is the floor
			 * that tells this wait's grant from a late event of an
			 * older grant (struct waiter). */
			op->w.recheck = true;
			op->phase = PH_WAIT;
		} else if (rc == -HASP_ETIMEDOUT && op->opts.wait) {
			acquire_give_up_locked(c, op, -HASP_ETIMEDOUT);
		} else {
			op_finish_locked(c, op, client_result(rc));
		}
		return true;
	case PH_WAIT:
		if (op->w.granted && op->w.floor_known && op->w.token <= op->w.floor_token) {
			/* An older grant's event, come late (found by nodesim):
			 * believing it would hold a lock another session holds. */
			op->w.granted = false;
			c->wait_grants_stale++;
		}
		if (op->w.granted && op->w.floor_known) {
			/* The grant's own TTL, from the event: the queue entry
			 * may be older than this request (a re-issued WAIT). */
			lock->token = op->w.token;
			lock->lease_id = op->w.lease_id;
			lock->ttl_ms = op->w.ttl_ms;
			lock->valid_until_ns = client_valid_until(c, op->granted_after_ns, lock->ttl_ms);
			HASP_ASSERT(op->granted_after_ns >= op->acquire_send_ns);
			HASP_ASSERT(lock->valid_until_ns >= op->granted_after_ns);
			op_finish_locked(c, op, 0);
			return true;
		}
		if (c->session_state != SESSION_OPEN || c->session_id != op->acquire_session_id) {
			/* The queue entry went with the old session. */
			if (++op->attempts > ACQUIRE_REISSUE_MAX)
				acquire_give_up_locked(c, op, -HASP_ETIMEDOUT);
			else
				acquire_send_locked(c, op);
			return true;
		}
		if (op->cancel) {
			acquire_give_up_locked(c, op, -HASP_ECANCELED);
			return true;
		}
		if (now >= op->wait_deadline_ns) {
			acquire_give_up_locked(c, op, -HASP_ETIMEDOUT);
			return true;
		}
		if (op->w.recheck || now >= op->next_check_ns) {
			op->w.recheck = false;
			c->stats.wait_rechecks++;
			msg_name(&m, HASP_OP_LOCK_READ, op);
			/* The wait's own deadline bounds the read too. */
			op_request_locked(c, op, PH_READ, &m, op_wait_bounded_deadline(c, op));
			return true;
		}
		if (op->next_check_ns < *wake_ns)
			*wake_ns = op->next_check_ns;
		if (op->wait_deadline_ns < *wake_ns)
			*wake_ns = op->wait_deadline_ns;
		return false;
	case PH_READ:
		if (rc == HASP_STATUS_OK && m.body.lock_info.holder_session_id == op->acquire_session_id) {
			const struct hasp_wire_lock_info *li = &m.body.lock_info;
			lock->token = li->token;
			lock->valid_until_ns =
				client_valid_until(c, op->req.first_send_ns, li->ttl_remaining_ms);
			HASP_ASSERT(op->req.first_send_ns != 0);
			HASP_ASSERT(lock->valid_until_ns >= op->req.first_send_ns);
			op_finish_locked(c, op, 0);
			return true;
		}
		if (rc == HASP_STATUS_OK && op->req.first_send_ns > op->granted_after_ns)
			op->granted_after_ns = op->req.first_send_ns;
		if (rc == HASP_STATUS_OK) {
			/* Another session holds it: our grant, if any comes, has a
			 * higher token. */
			if (m.body.lock_info.token > op->w.floor_token)
				op->w.floor_token = m.body.lock_info.token;
			op->w.floor_known = true;
		}
		HASP_ASSERT(op->granted_after_ns >= op->acquire_send_ns); /* only moves later */
		if (rc == HASP_STATUS_NOT_FOUND) {
			/* Free while we are queued: our entry is gone (a lock
			 * with waiters always has a holder). */
			if (++op->attempts > ACQUIRE_REISSUE_MAX)
				acquire_give_up_locked(c, op, -HASP_ETIMEDOUT);
			else
				acquire_send_locked(c, op);
			return true;
		}
		op->next_check_ns = now + (uint64_t)c->cfg.wait_recheck_ms * NS_PER_MS;
		op->phase = PH_WAIT;
		return true;
	case PH_CANCEL:
		c->stats.wait_cancels++;
		/* NOT_FOUND: no entry; none was queued, or it was granted
		 * meanwhile: if the lock is now ours, release that grant. Best
		 * effort: unanswered, the entry stays until the session ends. */
		if (rc != HASP_STATUS_NOT_FOUND) {
			op_finish_locked(c, op, op->give_up_rc);
			return true;
		}
		msg_name(&m, HASP_OP_LOCK_READ, op);
		op_request_locked(c, op, PH_CANCEL_READ, &m, client_deadline(c));
		return true;
	case PH_CANCEL_READ:
		if (rc != HASP_STATUS_OK || m.body.lock_info.holder_session_id != op->req.session_id) {
			op_finish_locked(c, op, op->give_up_rc);
			return true;
		}
		uint64_t token = m.body.lock_info.token;
		msg_name(&m, HASP_OP_RELEASE, op);
		m.body.release.token = token;
		op_request_locked(c, op, PH_CANCEL_RELEASE, &m, client_deadline(c));
		return true;
	case PH_CANCEL_RELEASE:
		c->stats.wait_grants_released += rc == HASP_STATUS_OK;
		op_finish_locked(c, op, op->give_up_rc);
		return true;
	default:
		HASP_UNREACHABLE();
	}
	return false;
}

/* OP_CONNECT: the session open, as client_session_ensure_locked runs it
 * but without waiting. A cancel stops the op, not the open (another
 * request would need it anyway). */
static bool connect_advance_locked(struct hasp_client *c, struct client_op *op, uint64_t now,
				   uint64_t *wake_ns)
{
	const uint64_t deadline_ns = op->req.deadline_ns;

	if (op->cancel) {
		op_finish_locked(c, op, -HASP_ECANCELED);
		return true;
	}
	for (;;) {
		int rc = client_session_advance_locked(c, deadline_ns, now, wake_ns);

		if (rc == -HASP_ETIMEDOUT && now < deadline_ns)
			continue; /* an open with an earlier deadline ended: start ours */
		if (rc == -HASP_EAGAIN && now >= deadline_ns)
			rc = -HASP_ETIMEDOUT; /* the open goes on for whoever started it */
		if (rc == -HASP_EAGAIN) {
			if (deadline_ns < *wake_ns)
				*wake_ns = deadline_ns;
			return false;
		}
		op_finish_locked(c, op, rc);
		return true;
	}
}

/* OP_RANGE: a page answered. OK: its entries go to the application
 * outside the lock (range_page_deliver); anything else ends the walk. */
static void range_reply_locked(struct hasp_client *c, struct client_op *op)
{
	if (op->req.rc == HASP_STATUS_OK)
		op->phase = PH_PAGE;
	else
		op_finish_locked(c, op, client_result(op->req.rc));
}

/* Moves op on as far as it goes without waiting. True when done (or, for
 * OP_RANGE, a page is ready: PH_PAGE); otherwise *wake_ns is lowered to
 * when it needs another look. */
static bool op_advance_locked(struct hasp_client *c, struct client_op *op, uint64_t now,
			      uint64_t *wake_ns)
{
	if (op->kind == OP_CONNECT && op->phase != PH_DONE)
		return connect_advance_locked(c, op, now, wake_ns);
	for (;;) {
		if (op->phase == PH_DONE || op->phase == PH_PAGE)
			return true;
		if (op->phase != PH_WAIT && op->req.state != REQ_DONE) {
			/* Not a WAIT: stop at once, the outcome unknown; but
			 * a request whose answer came before the cancel
			 * completes with it (a TRY acquire's grant is the
			 * caller's lock, not one nobody owns). */
			if (op->cancel && (op->kind != OP_ACQUIRE || !op->opts.wait) &&
			    client_req_abandon_locked(c, &op->req)) {
				op_finish_locked(c, op, -HASP_ECANCELED);
				return true;
			}
			if (!client_req_advance_locked(c, &op->req, now, wake_ns))
				return false;
		}
		if (op->kind == OP_SIMPLE) {
			simple_done_locked(c, op);
			return true;
		}
		if (op->kind == OP_RANGE) {
			range_reply_locked(c, op);
			continue;
		}
		if (!acquire_react_locked(c, op, now, wake_ns))
			return false;
	}
}

/* ---- preparing ops ---- */

/* Only what an op of its kind reads: the fields of every op and the
 * outcome's fixed part (op_clear), the kind's own block (op_clear_acquire,
 * op_clear_range), and the request's header (client_req_init). Not the
 * buffers read only up to a size or a NUL written with them: the request's
 * datagrams, a KV_GET value's bytes, a range walk's two strings. Each
 * cache line written here is one a busy loop misses on again when the
 * reply comes (docs/PERFORMANCE.md, "session 10"). */
static void op_clear(struct client_op *op)
{
	memset(op, 0, offsetof(struct client_op, opts));
	memset(&op->res, 0, offsetof(struct hasp_result, value.value));
}
_Static_assert(offsetof(struct hasp_result, value.value) + HASP_CLIENT_VALUE_MAX ==
		       sizeof(struct hasp_result),
	       "op_clear: a value's bytes end struct hasp_result");
_Static_assert(offsetof(struct client_op, opts) < offsetof(struct client_op, range_fn) &&
		       offsetof(struct client_op, range_fn) < offsetof(struct client_op, req) &&
		       offsetof(struct client_op, req) < offsetof(struct client_op, res),
	       "op_clear: every op's fields, the acquire block, the range block, the request");

static void op_clear_acquire(struct client_op *op)
{
	memset(&op->opts, 0, offsetof(struct client_op, range_fn) - offsetof(struct client_op, opts));
}

static void op_clear_range(struct client_op *op)
{
	memset(&op->range_fn, 0, offsetof(struct client_op, req) - offsetof(struct client_op, range_fn));
}

int client_op_prepare(struct hasp_client *c, struct client_op *op, struct hasp_wire_msg *msg)
{
	op_clear(op);
	op->kind = OP_SIMPLE;
	op->res.op = msg->hdr.opcode;
	return client_req_init(c, &op->req, msg, client_deadline(c));
}

int client_op_prepare_acquire(struct hasp_client *c, struct client_op *op, const char *name,
			      const struct hasp_acquire_opts *opts)
{
	struct hasp_wire_bytes n;
	struct hasp_wire_msg m;
	int rc;

	if (opts == NULL)
		return -HASP_EINVAL;
	/* The name's bytes, the TTL's range (-HASP_ERANGE) and a TTL with a
	 * lease (-HASP_EINVAL) are the encoder's checks below, in this order
	 * (wire_body.c, request_check): nothing is sent or kept before. */
	if ((rc = client_name_sized(name, &n)) != 0)
		return rc;
	op_clear(op);
	op_clear_acquire(op);
	op->kind = OP_ACQUIRE;
	op->res.op = HASP_OP_ACQUIRE;
	op->opts = *opts;
	op->wait_deadline_ns = UINT64_MAX;
	if (opts->wait && opts->wait_timeout_ms != 0)
		op->wait_deadline_ns = client_now(c) + (uint64_t)opts->wait_timeout_ms * NS_PER_MS;
	HASP_ASSERT(n.size < sizeof(op->res.lock.name));
	memcpy(op->res.lock.name, n.data, n.size);
	op->res.lock.name[n.size] = '\0';
	op->w.name = op->res.lock.name;
	op->w.name_size = n.size;
	msg_name(&m, HASP_OP_ACQUIRE, op);
	rc = client_req_init(c, &op->req, &m,
			     opts->wait ? op_wait_bounded_deadline(c, op) : client_deadline(c));
	op->phase = PH_MAIN;
	return rc;
}

void client_op_prepare_connect(struct hasp_client *c, struct client_op *op)
{
	op_clear(op);
	op->kind = OP_CONNECT;
	op->res.op = HASP_OP_SESSION_OPEN;
	memset(&op->req, 0, offsetof(struct client_req, size));
	op->req.deadline_ns = client_deadline(c);
}

/* The next page's KV_RANGE: after the last key delivered, at most what the
 * limit leaves, within the walk's deadline. */
static int range_request(struct hasp_client *c, struct client_op *op)
{
	struct hasp_wire_msg m;
	uint32_t left = op->range_limit == 0 ? 0 : op->range_limit - op->range_delivered;

	memset(&m, 0, sizeof(m));
	m.hdr.opcode = HASP_OP_KV_RANGE;
	m.body.kv_range.prefix.data = (const uint8_t *)op->range_prefix;
	m.body.kv_range.prefix.size = strlen(op->range_prefix);
	m.body.kv_range.start_after.data = (const uint8_t *)op->range_after;
	m.body.kv_range.start_after.size = strlen(op->range_after);
	m.body.kv_range.limit = left > UINT16_MAX ? UINT16_MAX : (uint16_t)left;
	op->phase = PH_MAIN;
	return client_req_init(c, &op->req, &m, op->range_deadline_ns);
}

int client_op_prepare_range(struct hasp_client *c, struct client_op *op, const char *prefix,
			    uint32_t limit, hasp_client_range_fn *fn, void *arg)
{
	struct hasp_wire_bytes p = { NULL, 0 };
	int rc;

	if (fn == NULL)
		return -HASP_EINVAL;
	if (prefix != NULL && prefix[0] != '\0' && (rc = client_name(prefix, &p)) != 0)
		return rc;
	op_clear(op);
	op_clear_range(op);
	op->kind = OP_RANGE;
	op->res.op = HASP_OP_KV_RANGE;
	op->range_fn = fn;
	op->range_arg = arg;
	op->range_limit = limit;
	HASP_ASSERT(p.size < sizeof(op->range_prefix));
	if (p.size > 0)
		memcpy(op->range_prefix, p.data, p.size);
	op->range_prefix[p.size] = '\0';
	op->range_after[0] = '\0';
	/* One deadline for the whole walk, so a node that keeps saying MORE
	 * cannot hold the caller forever. */
	op->range_deadline_ns = client_deadline(c);
	return range_request(c, op);
}

/* True when `key` sorts bytewise after `after` ("" sorts first). */
static bool key_after(const struct hasp_wire_bytes *key, const char *after)
{
	size_t after_size = strlen(after);
	size_t common = key->size < after_size ? key->size : after_size;
	int cmp = memcmp(key->data, after, common);

	return cmp > 0 || (cmp == 0 && key->size > after_size);
}

/* Hands a page's entries to range_fn, without the client's lock (range_fn
 * may call the client). True when the walk ended (op->res.rc set);
 * false when the next page's request is prepared. */
static bool range_page_deliver(struct hasp_client *c, struct client_op *op)
{
	struct hasp_wire_msg m;
	struct hasp_wire_kv_iter it;
	struct hasp_wire_kv_entry e;
	char key[HASP_CLIENT_NAME_BUF];
	int rc;

	HASP_ASSERT(op->phase == PH_PAGE);
	op->phase = PH_DONE;
	op->res.rc = 0;
	rc = hasp_wire_decode_reply(op->req.reply, op->req.reply_size, &m);
	HASP_ASSERT(rc == 0);
	const struct hasp_wire_kv_entries *es = &m.body.kv_entries;
	hasp_wire_kv_iter_init(&it, es);
	while (hasp_wire_kv_iter_next(&it, &e)) {
		struct hasp_kv_entry out;

		/* Keys come back in order; one that does not move forward
		 * would loop the walk. */
		if (e.key.size >= sizeof(key) || !key_after(&e.key, op->range_after)) {
			op->res.rc = -HASP_ECORRUPT;
			return true;
		}
		memcpy(key, e.key.data, e.key.size);
		key[e.key.size] = '\0';
		out.key = key;
		out.value = e.value.data;
		out.value_size = e.value.size;
		out.revision = e.revision;
		memcpy(op->range_after, key, e.key.size + 1);
		op->range_delivered++;
		if (op->range_fn(&out, op->range_arg) != 0)
			return true;
		if (op->range_limit != 0 && op->range_delivered >= op->range_limit)
			return true;
	}
	if (!(es->flags & HASP_WIRE_RANGE_MORE))
		return true;
	if (es->entry_count == 0) {
		op->res.rc = -HASP_ECORRUPT; /* MORE with nothing: no progress */
		return true;
	}
	rc = range_request(c, op);
	HASP_ASSERT(rc == 0); /* the first page's request encoded */
	return false;
}

int client_op_run_range(struct hasp_client *c, struct client_op *op)
{
	do {
		(void)client_op_run(c, op);
	} while (op->phase == PH_PAGE && !range_page_deliver(c, op));
	return op->res.rc;
}

/* Registered before the ACQUIRE leaves, so that a grant event that
 * overtakes the QUEUED reply is not missed. */
static void op_begin_locked(struct hasp_client *c, struct client_op *op)
{
	op_link_locked(c, op);
	if (op->kind == OP_ACQUIRE && op->opts.wait) {
		op->w.next = c->waiters;
		c->waiters = &op->w;
		op->w_linked = true;
	}
}

int client_op_run(struct hasp_client *c, struct client_op *op)
{
	if (c->group != NULL) {
		/* It would wait on the group's socket, which only the group's
		 * loop reads (client.h "client groups"). */
		op->phase = PH_DONE;
		op->res.rc = -HASP_EINVAL;
		return op->res.rc;
	}
	pthread_mutex_lock(&c->mu);
	if (c->closing) { /* hasp_client_close_async */
		pthread_mutex_unlock(&c->mu);
		op->phase = PH_DONE;
		op->res.rc = -HASP_ESTATE;
		return op->res.rc;
	}
	op_begin_locked(c, op);
	for (;;) {
		uint64_t wake = UINT64_MAX;
		if (op_advance_locked(c, op, client_now(c), &wake))
			break;
		client_wait_io_locked(c, wake);
	}
	op_unlink_locked(c, op);
	pthread_mutex_unlock(&c->mu);
	HASP_ASSERT(!op->w_linked);
	/* A new session or leader has none of our watches. */
	client_watches_resend_if_stale(c);
	return op->res.rc;
}

/* ---- the asynchronous loop ---- */

struct client_op *client_op_new(struct hasp_client *c)
{
	/* Not zeroed here: every op is started through one of the prepare
	 * calls above, each of which clears it (op_clear, and client_req_init
	 * or prepare_connect for the request), and a failed prepare frees it
	 * unread (client_op_start). Zeroing it twice, and its two datagram
	 * buffers at all (read only up to the size written with them),
	 * evicted the loop's working set (docs/PERFORMANCE.md, "hasp-bench on
	 * libhasp's async core"). The spare is the op the loop finished last:
	 * its lines are the likeliest to be in the cache still. */
	struct client_op *op = __atomic_exchange_n(&c->op_spare, NULL, __ATOMIC_ACQUIRE);

	return op != NULL ? op : hasp_alloc(sizeof(struct client_op));
}

void client_op_free(struct hasp_client *c, struct client_op *op)
{
	/* Whoever held the op last is done with it: no list, no id and no
	 * callback refer to it (a cancel finds ops by id on c->ops only). */
	hasp_free(__atomic_exchange_n(&c->op_spare, op, __ATOMIC_RELEASE));
}

/* The eventfd and the epoll set of hasp_client_fd(), made on first use so
 * that a blocking-only client has none. */
static int async_init_locked(struct hasp_client *c)
{
	struct epoll_event ev = { .events = EPOLLIN };

	if (c->epoll_fd >= 0 || c->io != NULL || c->group != NULL)
		return 0; /* made, or simulated (the simulator wakes the loop),
			   * or grouped (the group's fd) */
	c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->wake_fd < 0)
		return -HASP_ESYS;
	c->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (c->epoll_fd < 0)
		goto fail;
	ev.data.fd = c->fd;
	if (epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->fd, &ev) != 0)
		goto fail;
	ev.data.fd = c->wake_fd;
	if (epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->wake_fd, &ev) != 0)
		goto fail;
	return 0;
fail:
	if (c->epoll_fd >= 0)
		close(c->epoll_fd);
	close(c->wake_fd);
	c->epoll_fd = -1;
	c->wake_fd = -1;
	return -HASP_ESYS;
}

int client_op_start(struct hasp_client *c, struct client_op *op, int prepared,
		    hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	int rc;

	if (op == NULL)
		return -HASP_ENOMEM;
	if (prepared != 0) {
		client_op_free(c, op);
		return prepared;
	}
	pthread_mutex_lock(&c->mu);
	rc = c->closing ? -HASP_ESTATE : async_init_locked(c);
	if (rc != 0) {
		pthread_mutex_unlock(&c->mu);
		client_op_free(c, op);
		return rc;
	}
	/* Only hasp_client_close_async starts one: from here on nothing else
	 * starts, and no session opens. */
	if (op->res.op == HASP_OP_SESSION_CLOSE)
		c->closing = true;
	op->async = true;
	op->fn = fn;
	op->arg = arg;
	op->id = ++c->next_op_id;
	op->res.id = op->id;
	op->wake_ns = 0; /* the next process() sends it */
	op_begin_locked(c, op);
	c->async_count++;
	client_wake_loop_locked(c);
	pthread_mutex_unlock(&c->mu);
	if (id != NULL)
		*id = op->id;
	return 0;
}

int hasp_client_fd(struct hasp_client *c)
{
	int rc;

	if (c == NULL || c->group != NULL)
		return -HASP_EINVAL; /* grouped: hasp_client_group_fd */
	pthread_mutex_lock(&c->mu);
	rc = async_init_locked(c);
	if (rc == 0)
		rc = c->epoll_fd;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* The loop keeps the session and the watched locks only with no helper
 * thread and when it has a loop (an fd, the simulator, or a group). */
static bool loop_keeps_locked(const struct hasp_client *c)
{
	return !c->ka_running && (c->epoll_fd >= 0 || c->io != NULL || c->group != NULL);
}

static uint64_t next_wake_locked(struct hasp_client *c)
{
	uint64_t wake = UINT64_MAX;

	for (const struct client_op *op = c->ops; op != NULL; op = op->next) {
		if (op->async && op->wake_ns < wake)
			wake = op->wake_ns;
	}
	if (loop_keeps_locked(c)) {
		uint64_t ka = client_keepalive_next_locked(c);
		uint64_t wd = client_watchdog_next_locked(c);
		wake = ka < wake ? ka : wake;
		wake = wd < wake ? wd : wake;
	}
	return wake;
}

uint64_t client_next_wake_ns(struct hasp_client *c)
{
	pthread_mutex_lock(&c->mu);
	uint64_t wake = next_wake_locked(c);
	pthread_mutex_unlock(&c->mu);
	return wake;
}

int hasp_client_timeout_ms(struct hasp_client *c)
{
	uint64_t wake;
	uint64_t now;

	if (c == NULL)
		return -HASP_EINVAL;
	wake = client_next_wake_ns(c);
	if (wake == UINT64_MAX)
		return -1;
	now = client_now(c);
	if (wake <= now)
		return 0;
	uint64_t ms = (wake - now + NS_PER_MS - 1) / NS_PER_MS;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* One pass: every async op moved on (sent, retransmitted, finished);
 * the finished ones are unlinked and returned in the order they were
 * started. Called with mu held. */
static struct client_op *process_pass_locked(struct hasp_client *c, uint64_t now)
{
	struct client_op *done = NULL;
	uint64_t progress;

	/* Again while a pass freed a slot or opened a session: an op looked
	 * at earlier in the pass may take it now (each pass that goes round
	 * again finished a request, so this ends). */
	do {
		progress = c->progress;
		for (struct client_op **pp = &c->ops; *pp != NULL;) {
			struct client_op *op = *pp;
			uint64_t wake = UINT64_MAX;

			if (!op->async || !op_advance_locked(c, op, now, &wake)) {
				op->wake_ns = wake;
				pp = &op->next;
				continue;
			}
			op_unlink_at_locked(c, pp);
			op->next = done;
			done = op;
			c->async_count--;
		}
	} while (c->progress != progress);
	struct client_op *ordered = NULL;
	while (done != NULL) {
		struct client_op *op = done;
		done = op->next;
		op->next = ordered;
		ordered = op;
	}
	return ordered;
}

#define PROCESS_ROUNDS 4 /* passes for ops the callbacks start */

int hasp_client_process(struct hasp_client *c, uint32_t *completed)
{
	if (completed != NULL)
		*completed = 0;
	if (c == NULL || c->group != NULL)
		return -HASP_EINVAL; /* grouped: hasp_client_group_process */
	client_process(c, completed);
	return 0;
}

uint64_t client_process(struct hasp_client *c, uint32_t *completed)
{
	uint32_t n = 0;

	/* One lock for the whole call unless something is due besides the
	 * ops: the keepalive and watchdog work (which start ops, so they run
	 * unlocked) only when their next instant has come, which is exactly
	 * when they would act (client_keepalive_next_locked and
	 * client_watchdog_next_locked say when). Each lock taken per call
	 * was a cost per request of a busy loop (docs/PERFORMANCE.md). */
	pthread_mutex_lock(&c->mu);
	/* One clock read for the checks and the first pass, another per pass
	 * after callbacks (which may take their time): a clock a few
	 * microseconds old only sends and times out that much early or late,
	 * and a send time taken early shortens validity, never stretches it. */
	uint64_t now = client_now(c);
	/* A leader another member of the group learned of: followed before
	 * anything is sent, and before the keepalives, which go there too. */
	if (c->group != NULL)
		client_group_leader_follow_locked(c, now);
	if (!c->ka_running) {
		/* No helper thread: the loop keeps the session, the leases
		 * and the watched locks (as async ops, sent below). */
		if (client_keepalive_next_locked(c) <= now || client_watchdog_next_locked(c) <= now) {
			pthread_mutex_unlock(&c->mu);
			client_keepalive_async(c);
			client_watchdog(c, true);
			pthread_mutex_lock(&c->mu);
			now = client_now(c);
		}
	}
	c->processing = true;
	if (c->wake_pending) { /* no read(2) when nothing was written */
		uint64_t count;
		(void)!read(c->wake_fd, &count, sizeof(count));
		c->wake_pending = false;
	}
	client_read_nowait_locked(c);
	/* A request a callback starts (the next step of the application's
	 * work: RELEASE after a grant) is sent by another pass here, at once,
	 * instead of by the next call after a wake-up through the eventfd:
	 * `processing` stays set through the callbacks, so starting it writes
	 * no wake-up. */
	for (uint32_t round = 0;; round++) {
		if (round > 0)
			now = client_now(c);
		struct client_op *ordered = process_pass_locked(c, now);
		c->wake_missed = false; /* this pass looked */
		if (ordered == NULL)
			break;
		uint64_t started = c->next_op_id;
		bool paged = false;
		pthread_mutex_unlock(&c->mu);
		/* Callbacks without the lock, in the order the ops were started. */
		while (ordered != NULL) {
			struct client_op *op = ordered;
			ordered = op->next;
			HASP_ASSERT(!op->w_linked);
			if (op->phase == PH_PAGE && !range_page_deliver(c, op)) {
				/* The next page: back on the list, sent by the
				 * next pass. */
				pthread_mutex_lock(&c->mu);
				op->wake_ns = 0;
				op_link_locked(c, op);
				c->async_count++;
				pthread_mutex_unlock(&c->mu);
				paged = true;
				continue;
			}
			if (op->fn != NULL)
				op->fn(c, &op->res, op->arg);
			client_op_free(c, op);
			n++;
		}
		pthread_mutex_lock(&c->mu);
		/* Only for ops started meanwhile: ops waiting for a window slot
		 * take no extra pass, which would starve blocking callers. */
		if ((c->next_op_id == started && !paged) || round + 1 == PROCESS_ROUNDS)
			break;
	}
	c->processing = false;
	if (c->wake_missed) {
		/* A wake-up asked for during the last callbacks (a cancel from
		 * another thread, an op left for the next call): ask the loop. */
		c->wake_missed = false;
		client_wake_loop_locked(c);
	}
	uint64_t wake = next_wake_locked(c);
	bool resend = c->watches_stale;
	pthread_mutex_unlock(&c->mu);
	/* Watches that a new session or leader needs again: registered by
	 * ops of this loop, not by blocking calls that would stall it (the
	 * ops it starts wake the loop, so `wake` needs no update). */
	if (resend)
		client_watches_resend_async(c);
	if (completed != NULL)
		*completed = n;
	return wake;
}

/* Marks the ops in progress that `name` (a WAIT acquire of it) or else
 * `id` (an async op) names; the drivers finish them. */
static int cancel_ops(struct hasp_client *c, uint64_t id, const struct hasp_wire_bytes *name)
{
	int rc = -HASP_ENOENT;

	pthread_mutex_lock(&c->mu);
	for (struct client_op *op = c->ops; op != NULL; op = op->next) {
		bool match = name != NULL ? op->kind == OP_ACQUIRE && op->opts.wait &&
						    op->w.name_size == name->size &&
						    memcmp(op->w.name, name->data, name->size) == 0
					  : op->async && op->id == id;
		if (match && op->phase != PH_DONE) {
			op->cancel = true;
			op->wake_ns = 0;
			rc = 0;
		}
	}
	if (rc == 0)
		client_interrupt_locked(c);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int hasp_client_cancel(struct hasp_client *c, uint64_t id)
{
	if (c == NULL || id == 0)
		return -HASP_EINVAL;
	return cancel_ops(c, id, NULL);
}

int hasp_client_cancel_wait(struct hasp_client *c, const char *name)
{
	struct hasp_wire_bytes n;
	int rc;

	if (c == NULL)
		return -HASP_EINVAL;
	if ((rc = client_name(name, &n)) != 0)
		return rc;
	return cancel_ops(c, 0, &n);
}
