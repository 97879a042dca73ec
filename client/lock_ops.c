/*
 * libhasp lock operations: acquire (TRY and WAIT), release, renew, check,
 * read, and the local validity deadline of a held lock.
 *
 * Validity is computed from the SEND time of the first transmission of the
 * request that was granted, never from the time the reply arrived: the
 * cluster started the TTL somewhere between the two, and only the send time
 * is a bound that errs on the safe side (a late reply then shortens our
 * view of the lease instead of stretching it past the cluster's). A
 * clock-drift margin (hasp_client_config) is subtracted as well.
 *
 * WAIT mode: ACQUIRE(wait) answers QUEUED and the grant arrives later as a
 * pushed LOCK_GRANTED event. Events can be lost, and resending the same
 * ACQUIRE would only return the cached QUEUED reply, so while queued the
 * client re-reads the lock (LOCK_READ) on a timer and at once after a break
 * in the event chain; when the holder is our session, the token comes
 * from that read.
 */
#include <string.h>

#include "client/client_impl.h"
#include "common/assert.h"
#include "common/clock.h"
#include "hasp/client.h"

#define NS_PER_MS 1000000ull
/* Fresh ACQUIREs after the queued one vanished (session or lock gone). */
#define ACQUIRE_REISSUE_MAX 8
/* Internal: wait_for_grant wants a new ACQUIRE. */
#define WAIT_REISSUE 1000

static void lock_fill_name(struct hasp_lock *lock, const struct hasp_wire_bytes *name)
{
	/* client_name() checked it: 1..HASP_NAME_SIZE_MAX bytes, and the
	 * lock's buffer has room for those and a NUL. */
	HASP_ASSERT(name->size > 0 && name->size <= HASP_NAME_SIZE_MAX);
	HASP_ASSERT(name->size < sizeof(lock->name));
	memcpy(lock->name, name->data, name->size);
	lock->name[name->size] = '\0';
}

/* Removes a WAIT acquirer's entry from the client's list; it must be there
 * (linked once by hasp_client_acquire, unlinked once). */
static void waiter_unlink_locked(struct hasp_client *c, struct waiter *w)
{
	HASP_ASSERT(w != NULL);
	for (struct waiter **pp = &c->waiters; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			w->next = NULL;
			return;
		}
	}
	HASP_UNREACHABLE();
}

/* LOCK_READ with an overall deadline (0: the configured one). */
static int lock_read_raw(struct hasp_client *c, const struct hasp_wire_bytes *name,
			 uint64_t deadline_ns, struct client_call *call)
{
	HASP_ASSERT(name->size > 0 && name->size <= HASP_NAME_SIZE_MAX);
	memset(call, 0, sizeof(*call));
	call->req.hdr.opcode = HASP_OP_LOCK_READ;
	call->req.body.lock_read.name = *name;
	call->deadline_ns = deadline_ns;
	return client_call(c, call);
}

/* Waits for our grant after QUEUED. Returns GRANTED (lock token and
 * deadline set), WAIT_REISSUE, or -HASP_ETIMEDOUT at wait_deadline_ns. */
static int wait_for_grant(struct hasp_client *c, struct waiter *w,
			  const struct hasp_wire_bytes *name, uint64_t session_id, uint64_t acquire_send_ns, uint64_t wait_deadline_ns,
			  struct hasp_lock *lock)
{
	/* The grant happened after this instant on the cluster: the ACQUIRE's
	 * send, raised by every re-read that still showed another holder. */
	uint64_t granted_after_ns = acquire_send_ns;
	uint64_t recheck_ns = (uint64_t)c->cfg.wait_recheck_ms * NS_PER_MS;
	uint64_t next_check_ns = clock_monotonic_ns() + recheck_ns;

	/* A QUEUED reply answered a request sent in a session, at a time. */
	HASP_ASSERT(session_id != 0);
	HASP_ASSERT(acquire_send_ns != 0 && acquire_send_ns <= clock_monotonic_ns());
	HASP_ASSERT(w->name == lock->name && w->name_size == name->size);
	pthread_mutex_lock(&c->mu);
	for (;;) {
		uint64_t now = clock_monotonic_ns();

		if (w->granted) {
			/* The grant's own TTL, from the event: the queue entry
			 * may be older than this request (a re-issued WAIT). */
			lock->token = w->token;
			lock->lease_id = w->lease_id;
			lock->ttl_ms = w->ttl_ms;
			pthread_mutex_unlock(&c->mu);
			lock->valid_until_ns = client_valid_until(c, granted_after_ns, lock->ttl_ms);
			/* Validity counts from a send before the grant. */
			HASP_ASSERT(granted_after_ns >= acquire_send_ns);
			HASP_ASSERT(lock->valid_until_ns >= granted_after_ns);
			return HASP_STATUS_GRANTED;
		}
		if (c->session_state != SESSION_OPEN || c->session_id != session_id) {
			/* The queue entry went with the old session. */
			pthread_mutex_unlock(&c->mu);
			return WAIT_REISSUE;
		}
		if (now >= wait_deadline_ns) {
			pthread_mutex_unlock(&c->mu);
			return -HASP_ETIMEDOUT;
		}
		if (w->recheck || now >= next_check_ns) {
			struct client_call call;
			uint64_t read_deadline_ns = client_deadline(c);
			int rc;

			w->recheck = false;
			c->stats.wait_rechecks++;
			pthread_mutex_unlock(&c->mu);
			/* The wait's own deadline bounds the read too. */
			if (read_deadline_ns > wait_deadline_ns)
				read_deadline_ns = wait_deadline_ns;
			rc = lock_read_raw(c, name, read_deadline_ns, &call);
			if (rc == HASP_STATUS_OK &&
			    call.reply.body.lock_info.holder_session_id == session_id) {
				const struct hasp_wire_lock_info *li = &call.reply.body.lock_info;
				lock->token = li->token;
				lock->valid_until_ns =
					client_valid_until(c, call.first_send_ns, li->ttl_remaining_ms);
				HASP_ASSERT(call.first_send_ns != 0);
				HASP_ASSERT(lock->valid_until_ns >= call.first_send_ns);
				return HASP_STATUS_GRANTED;
			}
			if (rc == HASP_STATUS_OK && call.first_send_ns > granted_after_ns)
				granted_after_ns = call.first_send_ns;
			HASP_ASSERT(granted_after_ns >= acquire_send_ns); /* only moves later */
			/* Free while we are queued: our entry is gone (a lock
			 * with waiters always has a holder). */
			if (rc == HASP_STATUS_NOT_FOUND)
				return WAIT_REISSUE;
			pthread_mutex_lock(&c->mu);
			next_check_ns = clock_monotonic_ns() + recheck_ns;
			continue;
		}
		client_wait_io_locked(c, next_check_ns < wait_deadline_ns ? next_check_ns
									  : wait_deadline_ns);
	}
}

/* The caller gives up a WAIT (its deadline passed): drop our queue entry on
 * the cluster with CANCEL, so that the lock is never handed to a session
 * that no longer waits. NOT_FOUND means there is no entry: none was queued,
 * or it was granted meanwhile; if the lock is now ours, release that grant,
 * which nobody will use. Best effort within the configured deadline: if
 * the cluster does not answer, the entry stays until the session ends. */
static void wait_give_up(struct hasp_client *c, const struct hasp_wire_bytes *name)
{
	struct client_call call;
	HASP_ASSERT(name->size > 0 && name->size <= HASP_NAME_SIZE_MAX);
	memset(&call, 0, sizeof(call));
	call.req.hdr.opcode = HASP_OP_CANCEL;
	call.req.body.cancel.name = *name;
	int rc = client_call(c, &call);
	pthread_mutex_lock(&c->mu);
	c->stats.wait_cancels++;
	pthread_mutex_unlock(&c->mu);
	if (rc != HASP_STATUS_NOT_FOUND)
		return;
	rc = lock_read_raw(c, name, 0, &call);
	if (rc != HASP_STATUS_OK || call.reply.body.lock_info.holder_session_id != call.session_id)
		return;
	uint64_t token = call.reply.body.lock_info.token;
	memset(&call, 0, sizeof(call));
	call.req.hdr.opcode = HASP_OP_RELEASE;
	call.req.body.release.name = *name;
	call.req.body.release.token = token;
	rc = client_call(c, &call);
	pthread_mutex_lock(&c->mu);
	c->stats.wait_grants_released += rc == HASP_STATUS_OK;
	pthread_mutex_unlock(&c->mu);
}

int hasp_client_acquire(struct hasp_client *c, const char *name,
			const struct hasp_acquire_opts *opts, struct hasp_lock *lock)
{
	struct hasp_wire_bytes n;
	struct waiter w;
	uint64_t wait_deadline_ns = UINT64_MAX;
	int rc;

	if (c == NULL || opts == NULL || lock == NULL)
		return -HASP_EINVAL;
	if ((rc = client_name(name, &n)) != 0)
		return rc;
	if (opts->lease_id == 0 && (opts->ttl_ms < HASP_TTL_MS_MIN || opts->ttl_ms > HASP_TTL_MS_MAX))
		return -HASP_ERANGE;
	if (opts->lease_id != 0 && opts->ttl_ms != 0)
		return -HASP_EINVAL;
	memset(lock, 0, sizeof(*lock));
	lock_fill_name(lock, &n);
	if (opts->wait && opts->wait_timeout_ms != 0)
		wait_deadline_ns = clock_monotonic_ns() + (uint64_t)opts->wait_timeout_ms * NS_PER_MS;

	/* Registered before the ACQUIRE leaves, so that a grant event that
	 * overtakes the QUEUED reply is not missed. */
	memset(&w, 0, sizeof(w));
	w.name = lock->name;
	w.name_size = n.size;
	if (opts->wait) {
		pthread_mutex_lock(&c->mu);
		w.next = c->waiters;
		c->waiters = &w;
		pthread_mutex_unlock(&c->mu);
	}

	for (int attempt = 0; attempt <= ACQUIRE_REISSUE_MAX; attempt++) {
		struct client_call call;

		memset(&call, 0, sizeof(call));
		call.req.hdr.opcode = HASP_OP_ACQUIRE;
		call.req.body.acquire.name = n;
		call.req.body.acquire.lease_id = opts->lease_id;
		call.req.body.acquire.ttl_ms = opts->ttl_ms;
		call.req.body.acquire.mode = opts->wait ? HASP_ACQUIRE_WAIT : HASP_ACQUIRE_TRY;
		if (opts->wait && wait_deadline_ns != UINT64_MAX) {
			uint64_t d = client_deadline(c);
			call.deadline_ns = d < wait_deadline_ns ? d : wait_deadline_ns;
			/* The wait's deadline bounds every ACQUIRE it sends. */
			HASP_ASSERT(call.deadline_ns != 0 && call.deadline_ns <= wait_deadline_ns);
		}
		rc = client_call(c, &call);
		if (rc == HASP_STATUS_GRANTED) {
			const struct hasp_wire_granted *g = &call.reply.body.granted;
			lock->token = g->token;
			lock->lease_id = g->lease_id;
			lock->ttl_ms = g->ttl_ms;
			lock->valid_until_ns = client_valid_until(c, call.first_send_ns, g->ttl_ms);
			/* An answered request was sent at least once, and the
			 * validity never starts before that send. */
			HASP_ASSERT(call.first_send_ns != 0);
			HASP_ASSERT(lock->valid_until_ns >= call.first_send_ns);
			break;
		}
		if (rc == HASP_STATUS_BUSY) {
			lock->token = call.reply.body.busy.holder_token;
			break;
		}
		if (rc != HASP_STATUS_QUEUED || !opts->wait)
			break;
		lock->lease_id = opts->lease_id;
		lock->ttl_ms = opts->ttl_ms;
		rc = wait_for_grant(c, &w, &n, call.session_id, call.first_send_ns,
				    wait_deadline_ns, lock);
		if (rc != WAIT_REISSUE)
			break;
		pthread_mutex_lock(&c->mu);
		w.granted = false;
		w.recheck = false;
		pthread_mutex_unlock(&c->mu);
		rc = -HASP_ETIMEDOUT;
	}
	if (opts->wait) {
		pthread_mutex_lock(&c->mu);
		waiter_unlink_locked(c, &w);
		pthread_mutex_unlock(&c->mu);
		HASP_ASSERT(w.next == NULL);
		if (rc == -HASP_ETIMEDOUT)
			wait_give_up(c, &n);
	}
	if (rc == HASP_STATUS_GRANTED)
		HASP_ASSERT(lock->token != 0 || lock->valid_until_ns != 0);
	return client_result(rc);
}

static int name_token_call(struct hasp_client *c, uint8_t opcode, const char *name,
			   uint64_t token)
{
	struct client_call call;
	int rc;

	/* RELEASE and CHECK share a body layout (struct hasp_wire_name_token). */
	HASP_ASSERT(opcode == HASP_OP_RELEASE || opcode == HASP_OP_CHECK);
	if (c == NULL)
		return -HASP_EINVAL;
	memset(&call, 0, sizeof(call));
	if ((rc = client_name(name, &call.req.body.release.name)) != 0)
		return rc;
	HASP_ASSERT(call.req.body.release.name.size > 0);
	call.req.hdr.opcode = opcode;
	call.req.body.release.token = token;
	return client_result(client_call(c, &call));
}

int hasp_client_release(struct hasp_client *c, const char *name, uint64_t token)
{
	return name_token_call(c, HASP_OP_RELEASE, name, token);
}

int hasp_client_check(struct hasp_client *c, const char *name, uint64_t token)
{
	/* RELEASE and CHECK share a body layout (struct hasp_wire_name_token). */
	return name_token_call(c, HASP_OP_CHECK, name, token);
}

int hasp_client_renew(struct hasp_client *c, const char *name, uint64_t token, uint32_t ttl_ms,
		      struct hasp_lock *lock)
{
	struct client_call call;
	int rc;

	if (c == NULL)
		return -HASP_EINVAL;
	memset(&call, 0, sizeof(call));
	if ((rc = client_name(name, &call.req.body.renew.name)) != 0)
		return rc;
	/* 0 keeps the lock's current TTL (the reply says which). */
	if (ttl_ms != 0 && (ttl_ms < HASP_TTL_MS_MIN || ttl_ms > HASP_TTL_MS_MAX))
		return -HASP_ERANGE;
	call.req.hdr.opcode = HASP_OP_RENEW;
	call.req.body.renew.token = token;
	call.req.body.renew.ttl_ms = ttl_ms;
	rc = client_call(c, &call);
	if (rc == HASP_STATUS_GRANTED && lock != NULL) {
		lock->ttl_ms = call.reply.body.granted.ttl_ms;
		lock->valid_until_ns = client_valid_until(c, call.first_send_ns, lock->ttl_ms);
		HASP_ASSERT(call.first_send_ns != 0);
		HASP_ASSERT(lock->valid_until_ns >= call.first_send_ns);
	}
	return client_result(rc);
}

int hasp_client_lock_read(struct hasp_client *c, const char *name, struct hasp_lock_info *info)
{
	struct hasp_wire_bytes n;
	struct client_call call;
	int rc;

	if (c == NULL || info == NULL)
		return -HASP_EINVAL;
	if ((rc = client_name(name, &n)) != 0)
		return rc;
	memset(info, 0, sizeof(*info));
	rc = lock_read_raw(c, &n, 0, &call);
	if (rc == HASP_STATUS_OK) {
		const struct hasp_wire_lock_info *li = &call.reply.body.lock_info;
		info->holder_session_id = li->holder_session_id;
		info->token = li->token;
		info->lease_id = li->lease_id;
		info->ttl_remaining_ms = li->ttl_remaining_ms;
		info->waiter_count = li->waiter_count;
		info->ours = li->holder_session_id == call.session_id;
	}
	return client_result(rc);
}

uint64_t hasp_client_lock_valid_until(struct hasp_client *c, const struct hasp_lock *lock)
{
	uint64_t until;

	HASP_ASSERT(c != NULL);
	HASP_ASSERT(lock != NULL);
	until = lock->valid_until_ns;
	if (lock->lease_id != 0) {
		/* A lease lock lives as long as its lease, which keepalives
		 * extend; follow the lease when this client keeps it. */
		pthread_mutex_lock(&c->mu);
		const struct lease_entry *l = client_lease_find_locked(c, lock->lease_id);
		HASP_ASSERT(l == NULL || (l->used && l->lease_id == lock->lease_id));
		if (l != NULL)
			until = l->valid_until_ns;
		pthread_mutex_unlock(&c->mu);
	}
	return until;
}

bool hasp_client_lock_safe(struct hasp_client *c, const struct hasp_lock *lock, uint32_t work_ms)
{
	HASP_ASSERT(c != NULL);
	HASP_ASSERT(lock != NULL);
	uint64_t until = hasp_client_lock_valid_until(c, lock);

	if (lock->token == 0)
		return false;
	return clock_monotonic_ns() + (uint64_t)work_ms * NS_PER_MS < until;
}
