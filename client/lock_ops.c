/*
 * libhasp lock operations: acquire (TRY and WAIT), release, renew, check,
 * read, blocking and asynchronous, and the local validity deadline of a
 * held lock. The requests and the WAIT machine are ops (ops.c).
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
#include "common/alloc.h"
#include "common/assert.h"
#include "common/clock.h"
#include "hasp/client.h"

#define NS_PER_MS 1000000ull

int hasp_client_acquire(struct hasp_client *c, const char *name,
			const struct hasp_acquire_opts *opts, struct hasp_lock *lock)
{
	struct client_op op;
	int rc;

	if (c == NULL || lock == NULL)
		return -HASP_EINVAL;
	if ((rc = client_op_prepare_acquire(c, &op, name, opts)) != 0)
		return rc;
	rc = client_op_run(c, &op);
	*lock = op.res.lock;
	if (rc == 0)
		HASP_ASSERT(lock->token != 0 || lock->valid_until_ns != 0);
	return rc;
}

int hasp_client_acquire_async(struct hasp_client *c, const char *name,
			      const struct hasp_acquire_opts *opts, hasp_client_done_fn *fn,
			      void *arg, uint64_t *id)
{
	struct client_op *op;

	if (c == NULL || fn == NULL)
		return -HASP_EINVAL;
	op = client_op_new(c);
	return client_op_start(c, op, op ? client_op_prepare_acquire(c, op, name, opts) : 0, fn,
			       arg, id);
}

/* RELEASE and CHECK share a body layout (struct hasp_wire_name_token);
 * RENEW adds a TTL. */
static int prepare_name_token(struct hasp_client *c, struct client_op *op, uint8_t opcode,
			      const char *name, uint64_t token, uint32_t ttl_ms)
{
	struct hasp_wire_msg m;
	int rc;

	struct hasp_wire_bytes n;

	/* The name's bytes and RENEW's TTL range (-HASP_ERANGE, 0 keeps the
	 * lock's current TTL) are the encoder's checks, name first
	 * (wire_body.c, request_check). */
	if ((rc = client_name_sized(name, &n)) != 0)
		return rc;
	memset(&m, 0, sizeof(m));
	m.hdr.opcode = opcode;
	if (opcode == HASP_OP_RENEW) {
		m.body.renew.name = n;
		m.body.renew.token = token;
		m.body.renew.ttl_ms = ttl_ms;
	} else if (opcode == HASP_OP_LOCK_READ) {
		m.body.lock_read.name = n;
	} else {
		HASP_ASSERT(opcode == HASP_OP_RELEASE || opcode == HASP_OP_CHECK);
		m.body.release.name = n;
		m.body.release.token = token;
	}
	if ((rc = client_op_prepare(c, op, &m)) != 0)
		return rc;
	memcpy(op->res.lock.name, n.data, n.size); /* checked: fits */
	op->res.lock.name[n.size] = '\0';
	op->res.lock.token = token;
	return 0;
}

static int run_name_token(struct hasp_client *c, uint8_t opcode, const char *name,
			  uint64_t token, uint32_t ttl_ms, struct client_op *op)
{
	int rc;

	if (c == NULL)
		return -HASP_EINVAL;
	if ((rc = prepare_name_token(c, op, opcode, name, token, ttl_ms)) != 0)
		return rc;
	return client_op_run(c, op);
}

static int start_name_token(struct hasp_client *c, uint8_t opcode, const char *name,
			    uint64_t token, uint32_t ttl_ms, hasp_client_done_fn *fn, void *arg,
			    uint64_t *id)
{
	struct client_op *op;

	if (c == NULL || fn == NULL)
		return -HASP_EINVAL;
	op = client_op_new(c);
	return client_op_start(c, op, op ? prepare_name_token(c, op, opcode, name, token, ttl_ms) : 0,
			       fn, arg, id);
}

int hasp_client_release(struct hasp_client *c, const char *name, uint64_t token)
{
	struct client_op op;

	return run_name_token(c, HASP_OP_RELEASE, name, token, 0, &op);
}

int hasp_client_release_async(struct hasp_client *c, const char *name, uint64_t token,
			      hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	return start_name_token(c, HASP_OP_RELEASE, name, token, 0, fn, arg, id);
}

int hasp_client_check(struct hasp_client *c, const char *name, uint64_t token)
{
	struct client_op op;

	return run_name_token(c, HASP_OP_CHECK, name, token, 0, &op);
}

int hasp_client_check_async(struct hasp_client *c, const char *name, uint64_t token,
			    hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	return start_name_token(c, HASP_OP_CHECK, name, token, 0, fn, arg, id);
}

int hasp_client_renew(struct hasp_client *c, const char *name, uint64_t token, uint32_t ttl_ms,
		      struct hasp_lock *lock)
{
	struct client_op op;
	int rc = run_name_token(c, HASP_OP_RENEW, name, token, ttl_ms, &op);

	if (rc == 0 && lock != NULL) {
		lock->ttl_ms = op.res.lock.ttl_ms;
		lock->valid_until_ns = op.res.lock.valid_until_ns;
	}
	return rc;
}

int hasp_client_renew_async(struct hasp_client *c, const char *name, uint64_t token,
			    uint32_t ttl_ms, hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	return start_name_token(c, HASP_OP_RENEW, name, token, ttl_ms, fn, arg, id);
}

int hasp_client_lock_read(struct hasp_client *c, const char *name, struct hasp_lock_info *info)
{
	struct client_op op;
	int rc;

	if (info == NULL)
		return -HASP_EINVAL;
	memset(info, 0, sizeof(*info));
	rc = run_name_token(c, HASP_OP_LOCK_READ, name, 0, 0, &op);
	if (rc == 0)
		*info = op.res.info;
	return rc;
}

int hasp_client_lock_read_async(struct hasp_client *c, const char *name, hasp_client_done_fn *fn,
				void *arg, uint64_t *id)
{
	return start_name_token(c, HASP_OP_LOCK_READ, name, 0, 0, fn, arg, id);
}

uint64_t hasp_client_lock_valid_until(struct hasp_client *c, const struct hasp_lock *lock)
{
	uint64_t until;

	HASP_ASSERT(c != NULL);
	HASP_ASSERT(lock != NULL);
	until = lock->valid_until_ns;
	pthread_mutex_lock(&c->mu);
	/* Renewed by the watchdog (auto_renew): its deadline is fresher. */
	for (uint32_t i = 0; c->kept != NULL && i < HASP_CLIENT_KEPT_MAX; i++) {
		const struct kept_lock *k = &c->kept[i];
		if (k->used && k->token == lock->token && k->valid_until_ns > until &&
		    strcmp(k->name, lock->name) == 0)
			until = k->valid_until_ns;
	}
	if (lock->lease_id != 0) {
		/* A lease lock lives as long as its lease, which keepalives
		 * extend; follow the lease when this client keeps it. */
		const struct lease_entry *l = client_lease_find_locked(c, lock->lease_id);
		HASP_ASSERT(l == NULL || (l->used && l->lease_id == lock->lease_id));
		if (l != NULL)
			until = l->valid_until_ns;
	}
	/* An unanswered TTL change may have shortened the lease. */
	until = client_ttl_cap_apply_locked(c, lock->name, lock->token, until);
	pthread_mutex_unlock(&c->mu);
	return until;
}

bool hasp_client_lock_safe(struct hasp_client *c, const struct hasp_lock *lock, uint32_t work_ms)
{
	HASP_ASSERT(c != NULL);
	HASP_ASSERT(lock != NULL);
	uint64_t until = hasp_client_lock_valid_until(c, lock);

	if (lock->token == 0)
		return false;
	return client_now(c) + (uint64_t)work_ms * NS_PER_MS < until;
}
