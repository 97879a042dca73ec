/*
 * libhasp leases, watches with their pushed events, and KV operations.
 *
 * Leases granted through this client are remembered (up to
 * HASP_CLIENT_LEASES_MAX) so hasp_client_keepalive can renew them and so a
 * lease lock's validity follows its lease. Watches are remembered (up to
 * HASP_CLIENT_WATCHES_MAX) because they belong to a session: a new session
 * registers them again. Events wait in a bounded ring until polled; a full
 * ring drops and counts (events carry a counter, so the gap is visible).
 */
#include <string.h>

#include "client/client_impl.h"
#include "common/alloc.h"
#include "common/assert.h"
#include "common/clock.h"
#include "hasp/client.h"

#define NS_PER_MS 1000000ull

/* ---- leases ---- */

static void lease_forget(struct hasp_client *c, uint64_t lease_id)
{
	pthread_mutex_lock(&c->mu);
	struct lease_entry *l = client_lease_find_locked(c, lease_id);
	if (l != NULL) {
		l->used = false;
		c->leases_used--;
	}
	pthread_mutex_unlock(&c->mu);
}

/* Runs a prepared op on this thread, or hands it to the loop when fn is
 * set (then op is a heap op, freed on error). */
static int run_or_start(struct hasp_client *c, struct client_op *op, int prepared,
			hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	if (fn != NULL)
		return client_op_start(c, op, prepared, fn, arg, id);
	return prepared != 0 ? prepared : client_op_run(c, op);
}

/* The op of a blocking call lives on the caller's stack; an async one on
 * the heap. 0, or -HASP_EINVAL (no client) or -HASP_ENOMEM. */
static int op_get(struct hasp_client *c, hasp_client_done_fn *fn, struct client_op *stack_op,
		  struct client_op **op)
{
	if (c == NULL)
		return -HASP_EINVAL;
	*op = fn == NULL ? stack_op : client_op_new(c);
	return *op == NULL ? -HASP_ENOMEM : 0;
}

static int lease_grant(struct hasp_client *c, uint32_t ttl_ms, struct client_op *op)
{
	struct hasp_wire_msg m;

	if (ttl_ms < HASP_TTL_MS_MIN || ttl_ms > HASP_TTL_MS_MAX)
		return -HASP_ERANGE;
	memset(&m, 0, sizeof(m));
	m.hdr.opcode = HASP_OP_LEASE_GRANT;
	m.body.lease_grant.ttl_ms = ttl_ms;
	return client_op_prepare(c, op, &m);
}

static int lease_id_op(struct hasp_client *c, uint8_t opcode, uint64_t lease_id,
		       struct client_op *op)
{
	struct hasp_wire_msg m;
	int rc;

	if (lease_id == 0)
		return -HASP_EINVAL;
	memset(&m, 0, sizeof(m));
	m.hdr.opcode = opcode;
	if (opcode == HASP_OP_LEASE_KEEPALIVE)
		m.body.lease_keepalive.lease_id = lease_id;
	else
		m.body.lease_revoke.lease_id = lease_id;
	rc = client_op_prepare(c, op, &m);
	op->res.lease.lease_id = lease_id;
	return rc;
}

static int lease_call(struct hasp_client *c, uint8_t opcode, uint64_t arg64,
		      struct hasp_lease *lease, hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	struct client_op stack_op;
	struct client_op *op;
	int rc;

	if ((rc = op_get(c, fn, &stack_op, &op)) != 0)
		return rc;
	if (opcode == HASP_OP_LEASE_GRANT)
		rc = lease_grant(c, (uint32_t)arg64, op);
	else
		rc = lease_id_op(c, opcode, arg64, op);
	if (rc == 0 && opcode == HASP_OP_LEASE_REVOKE) {
		/* Stop keeping it alive first: a keepalive racing the revoke
		 * must not find it. */
		lease_forget(c, arg64);
	}
	rc = run_or_start(c, op, rc, fn, arg, id);
	if (fn == NULL && rc == 0 && lease != NULL)
		*lease = op->res.lease;
	return rc;
}

int hasp_client_lease_grant(struct hasp_client *c, uint32_t ttl_ms, struct hasp_lease *lease)
{
	return lease_call(c, HASP_OP_LEASE_GRANT, ttl_ms, lease, NULL, NULL, NULL);
}

int hasp_client_lease_grant_async(struct hasp_client *c, uint32_t ttl_ms, hasp_client_done_fn *fn,
				  void *arg, uint64_t *id)
{
	if (fn == NULL)
		return -HASP_EINVAL;
	return lease_call(c, HASP_OP_LEASE_GRANT, ttl_ms, NULL, fn, arg, id);
}

int hasp_client_lease_keepalive(struct hasp_client *c, uint64_t lease_id, struct hasp_lease *lease)
{
	return lease_call(c, HASP_OP_LEASE_KEEPALIVE, lease_id, lease, NULL, NULL, NULL);
}

int hasp_client_lease_keepalive_async(struct hasp_client *c, uint64_t lease_id,
				      hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	if (fn == NULL)
		return -HASP_EINVAL;
	return lease_call(c, HASP_OP_LEASE_KEEPALIVE, lease_id, NULL, fn, arg, id);
}

int hasp_client_lease_revoke(struct hasp_client *c, uint64_t lease_id)
{
	return lease_call(c, HASP_OP_LEASE_REVOKE, lease_id, NULL, NULL, NULL, NULL);
}

int hasp_client_lease_revoke_async(struct hasp_client *c, uint64_t lease_id,
				   hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	if (fn == NULL)
		return -HASP_EINVAL;
	return lease_call(c, HASP_OP_LEASE_REVOKE, lease_id, NULL, fn, arg, id);
}

/* ---- watches and events ---- */

static struct watch_entry *watch_find_locked(struct hasp_client *c, const char *name,
					     size_t name_size, bool prefix)
{
	for (uint32_t i = 0; i < HASP_CLIENT_WATCHES_MAX; i++) {
		struct watch_entry *w = &c->watches[i];
		if (w->used && w->prefix == prefix && strlen(w->name) == name_size &&
		    memcmp(w->name, name, name_size) == 0)
			return w;
	}
	return NULL;
}

/* A WATCH or UNWATCH op. A WATCH is remembered before it leaves: events
 * may arrive before the OK does, and a grant to a watched name must not
 * be mistaken for our own. An UNWATCH forgets it at once. */
static int watch_prepare(struct hasp_client *c, struct client_op *op, uint8_t opcode,
			 const char *name, bool prefix, bool resend)
{
	struct hasp_wire_bytes n;
	struct hasp_wire_msg m;
	struct watch_entry *w;
	int rc;

	if ((rc = client_name(name, &n)) != 0)
		return rc;
	memset(&m, 0, sizeof(m));
	m.hdr.opcode = opcode;
	m.body.watch.name = n;
	m.body.watch.flags = prefix ? HASP_WIRE_WATCH_PREFIX : 0;
	if ((rc = client_op_prepare(c, op, &m)) != 0)
		return rc;
	HASP_ASSERT(n.size < sizeof(op->res.lock.name));
	memcpy(op->res.lock.name, n.data, n.size);
	op->res.lock.name[n.size] = '\0';
	op->watch_prefix = prefix;
	op->watch_resend = resend;
	pthread_mutex_lock(&c->mu);
	w = watch_find_locked(c, op->res.lock.name, n.size, prefix);
	if (resend && w == NULL) {
		/* Unwatched since the loop chose to register it again. */
		pthread_mutex_unlock(&c->mu);
		return -HASP_ENOENT;
	}
	if (opcode == HASP_OP_UNWATCH) {
		if (w != NULL)
			w->used = false;
		pthread_mutex_unlock(&c->mu);
		return 0;
	}
	for (uint32_t i = 0; w == NULL && i < HASP_CLIENT_WATCHES_MAX; i++) {
		if (!c->watches[i].used) {
			w = &c->watches[i];
			w->used = true;
			w->prefix = prefix;
			w->session_id = 0;
			memcpy(w->name, n.data, n.size);
			w->name[n.size] = '\0';
		}
	}
	pthread_mutex_unlock(&c->mu);
	return w == NULL ? -HASP_EFULL : 0;
}

/* A WATCH that never left (its op could not start): forget it. */
static void watch_forget(struct hasp_client *c, const char *name, bool prefix)
{
	pthread_mutex_lock(&c->mu);
	struct watch_entry *w = watch_find_locked(c, name, strlen(name), prefix);
	if (w != NULL && w->session_id == 0)
		w->used = false;
	pthread_mutex_unlock(&c->mu);
}

void client_watch_done_locked(struct hasp_client *c, const struct client_op *op, int status)
{
	const char *name = op->res.lock.name;

	if (op->res.op != HASP_OP_WATCH)
		return; /* UNWATCH forgot it when it started */
	struct watch_entry *w = watch_find_locked(c, name, strlen(name), op->watch_prefix);
	if (w == NULL)
		return; /* unwatched meanwhile */
	if (status == HASP_STATUS_OK) {
		w->session_id = op->req.session_id;
		if (c->group != NULL)
			client_group_watching_locked(c); /* woken at a leader change */
	} else if (op->watch_resend)
		c->watch_resend_failed = true; /* the application's watch stays */
	else
		w->used = false;
}

/* fn NULL: the blocking call; else the async one (async: fn required). */
static int watch_call(struct hasp_client *c, uint8_t opcode, const char *name, bool prefix,
		      bool async, hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	struct client_op stack_op;
	struct client_op *op;
	int rc;

	if (async != (fn != NULL))
		return -HASP_EINVAL;
	if ((rc = op_get(c, fn, &stack_op, &op)) != 0)
		return rc;
	int prepared = watch_prepare(c, op, opcode, name, prefix, false);
	rc = run_or_start(c, op, prepared, fn, arg, id);
	if (async && prepared == 0 && rc != 0 && opcode == HASP_OP_WATCH)
		watch_forget(c, name, prefix);
	return rc;
}

int hasp_client_watch(struct hasp_client *c, const char *name, bool prefix)
{
	return watch_call(c, HASP_OP_WATCH, name, prefix, false, NULL, NULL, NULL);
}

int hasp_client_watch_async(struct hasp_client *c, const char *name, bool prefix,
			    hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	return watch_call(c, HASP_OP_WATCH, name, prefix, true, fn, arg, id);
}

int hasp_client_unwatch(struct hasp_client *c, const char *name, bool prefix)
{
	return watch_call(c, HASP_OP_UNWATCH, name, prefix, false, NULL, NULL, NULL);
}

int hasp_client_unwatch_async(struct hasp_client *c, const char *name, bool prefix,
			      hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	return watch_call(c, HASP_OP_UNWATCH, name, prefix, true, fn, arg, id);
}

/* One WATCH of the re-registration, blocking; the table is the caller's. */
static int watch_register(struct hasp_client *c, const struct hasp_wire_bytes *name, bool prefix,
			  uint64_t *session_id)
{
	struct client_call call;
	int rc;

	memset(&call, 0, sizeof(call));
	call.req.hdr.opcode = HASP_OP_WATCH;
	call.req.body.watch.name = *name;
	call.req.body.watch.flags = prefix ? HASP_WIRE_WATCH_PREFIX : 0;
	rc = client_call(c, &call);
	*session_id = call.session_id;
	return rc;
}

void client_watches_resend(struct hasp_client *c)
{
	/* The watches were gone (a new leader, a new session) for a while:
	 * events in between are lost, and no later event may come to reveal
	 * it. Tell the application with a RESYNC, but only once every watch
	 * is registered again: a re-read the application does on RESYNC must
	 * come after the registration, or a change between the two is in
	 * neither (the fault suite's events check caught a grant lost so).
	 * The new leader's chain starts fresh, so its first event (prev
	 * (0, 0)) is in order. */
	pthread_mutex_lock(&c->mu);
	bool any = false;
	for (uint32_t i = 0; i < HASP_CLIENT_WATCHES_MAX; i++)
		any |= c->watches[i].used;
	if (any) {
		c->event_last_index = 0;
		c->event_last_sub = 0;
	}
	pthread_mutex_unlock(&c->mu);
	for (uint32_t i = 0; i < HASP_CLIENT_WATCHES_MAX; i++) {
		struct hasp_wire_bytes n;
		char name[HASP_CLIENT_NAME_BUF];
		uint64_t session_id;
		bool prefix;
		bool used;

		pthread_mutex_lock(&c->mu);
		/* Skip watches already registered in the current session (a
		 * WATCH call that raced the new session did it). */
		used = c->watches[i].used && c->watches[i].session_id != c->session_id;
		prefix = c->watches[i].prefix;
		memcpy(name, c->watches[i].name, sizeof(name));
		pthread_mutex_unlock(&c->mu);
		if (!used)
			continue;
		n.data = (const uint8_t *)name;
		n.size = strlen(name);
		int rc = watch_register(c, &n, prefix, &session_id);
		pthread_mutex_lock(&c->mu);
		if (rc < 0)
			c->watches_stale = true; /* try again after the next call */
		else if (rc == HASP_STATUS_OK && c->watches[i].used)
			c->watches[i].session_id = session_id;
		pthread_mutex_unlock(&c->mu);
		if (rc < 0)
			return; /* watches_stale: the next resend tells the RESYNC */
	}
	if (any) {
		pthread_mutex_lock(&c->mu);
		client_event_resync_locked(c);
		pthread_mutex_unlock(&c->mu);
	}
}

/* One WATCH of the loop's re-registration completed. */
static void watch_resend_done(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	(void)res;
	(void)arg;
	pthread_mutex_lock(&c->mu);
	HASP_ASSERT(c->watch_resends > 0);
	if (--c->watch_resends == 0) {
		if (c->watch_resend_failed) {
			/* Asked again after the loop's next turn; no RESYNC
			 * before every watch is back (client_watches_resend). */
			c->watch_resend_failed = false;
			c->watches_stale = true;
			client_wake_loop_locked(c);
		} else {
			client_event_resync_locked(c);
		}
	}
	pthread_mutex_unlock(&c->mu);
}

void client_watches_resend_async(struct hasp_client *c)
{
	char names[HASP_CLIENT_WATCHES_MAX][HASP_CLIENT_NAME_BUF];
	bool prefixes[HASP_CLIENT_WATCHES_MAX];
	uint32_t k = 0;

	pthread_mutex_lock(&c->mu);
	if (!c->watches_stale || c->session_state != SESSION_OPEN || c->watch_resends > 0) {
		pthread_mutex_unlock(&c->mu);
		return;
	}
	c->watches_stale = false;
	bool any = false;
	for (uint32_t i = 0; i < HASP_CLIENT_WATCHES_MAX; i++) {
		struct watch_entry *w = &c->watches[i];
		any |= w->used;
		if (!w->used || w->session_id == c->session_id)
			continue; /* registered in this session already */
		memcpy(names[k], w->name, sizeof(names[k]));
		prefixes[k++] = w->prefix;
	}
	if (any) { /* as client_watches_resend: the new chain starts fresh */
		c->event_last_index = 0;
		c->event_last_sub = 0;
	}
	if (k == 0) {
		if (any)
			client_event_resync_locked(c);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	c->watch_resends = k; /* before any can complete */
	c->watch_resend_failed = false;
	pthread_mutex_unlock(&c->mu);
	for (uint32_t i = 0; i < k; i++) {
		struct client_op *op = client_op_new(c);
		int prepared = op == NULL ? -HASP_ENOMEM : watch_prepare(c, op, HASP_OP_WATCH, names[i],
									  prefixes[i], true);
		if (client_op_start(c, op, prepared, watch_resend_done, NULL, NULL) != 0) {
			/* Not started (client_op_start freed it): counted as a
			 * failed one, so that the last completion retries. */
			pthread_mutex_lock(&c->mu);
			c->watch_resend_failed = true;
			bool last = --c->watch_resends == 0;
			if (last) {
				c->watch_resend_failed = false;
				c->watches_stale = true;
			}
			pthread_mutex_unlock(&c->mu);
		}
	}
}

int hasp_client_next_event(struct hasp_client *c, struct hasp_event *ev, uint32_t timeout_ms)
{
	uint64_t until;

	if (c == NULL || ev == NULL)
		return -HASP_EINVAL;
	if (c->group != NULL && timeout_ms > 0)
		return -HASP_EINVAL; /* would wait on the group's socket */
	until = client_now(c) + (uint64_t)timeout_ms * NS_PER_MS;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		if (c->event_count > 0) {
			*ev = c->events[c->event_head];
			c->event_head = (c->event_head + 1) % HASP_CLIENT_EVENTS_MAX;
			c->event_count--;
			pthread_mutex_unlock(&c->mu);
			return 0;
		}
		if (client_now(c) >= until)
			break;
		client_wait_io_locked(c, until);
	}
	pthread_mutex_unlock(&c->mu);
	return -HASP_ETIMEDOUT;
}

int hasp_client_poll(struct hasp_client *c, uint32_t timeout_ms, uint32_t *delivered)
{
	struct hasp_event ev;
	uint32_t n = 0;
	uint32_t wait_ms = timeout_ms;

	if (delivered != NULL)
		*delivered = 0;
	if (c == NULL || c->cfg.event_fn == NULL)
		return -HASP_EINVAL;
	/* Wait for the first event only; then drain what is buffered. The
	 * callback runs without the client's mutex held. */
	while (n < HASP_CLIENT_EVENTS_MAX && hasp_client_next_event(c, &ev, wait_ms) == 0) {
		c->cfg.event_fn(&ev, c->cfg.event_arg);
		n++;
		wait_ms = 0;
	}
	if (delivered != NULL)
		*delivered = n;
	return 0;
}

/* ---- KV ---- */

static int kv_prepare(struct hasp_client *c, struct client_op *op, uint8_t opcode, const char *key,
		      const void *value, size_t value_size, uint64_t lease_id,
		      const struct hasp_kv_cas *cas)
{
	struct hasp_wire_msg m;
	int rc;

	memset(&m, 0, sizeof(m));
	m.hdr.opcode = opcode;
	switch (opcode) {
	case HASP_OP_KV_PUT:
		if (value == NULL && value_size > 0)
			return -HASP_EINVAL;
		if (value_size > HASP_VALUE_SIZE_MAX)
			return -HASP_ETOOBIG;
		if ((rc = client_name(key, &m.body.kv_put.key)) != 0)
			return rc;
		m.body.kv_put.value.data = value;
		m.body.kv_put.value.size = value_size;
		m.body.kv_put.lease_id = lease_id;
		break;
	case HASP_OP_KV_GET:
		if ((rc = client_name(key, &m.body.kv_get.name)) != 0)
			return rc;
		break;
	case HASP_OP_KV_DELETE:
		if ((rc = client_name(key, &m.body.kv_delete.name)) != 0)
			return rc;
		break;
	default: {
		struct hasp_wire_kv_cas *b = &m.body.kv_cas;
		HASP_ASSERT(opcode == HASP_OP_KV_CAS);
		if (cas == NULL || (cas->value == NULL && cas->value_size > 0) ||
		    (cas->expected_value == NULL && cas->expected_value_size > 0))
			return -HASP_EINVAL;
		if (cas->value_size > HASP_VALUE_SIZE_MAX ||
		    cas->expected_value_size > HASP_VALUE_SIZE_MAX)
			return -HASP_ETOOBIG;
		if (!cas->compare_value && cas->expected_value_size > 0)
			return -HASP_EINVAL;
		if ((rc = client_name(key, &b->key)) != 0)
			return rc;
		b->flags = cas->compare_value ? HASP_WIRE_CAS_VALUE : 0;
		b->expected_revision = cas->compare_value ? 0 : cas->expected_revision;
		b->expected_value.data = cas->expected_value;
		b->expected_value.size = cas->compare_value ? cas->expected_value_size : 0;
		b->value.data = cas->value;
		b->value.size = cas->value_size;
		b->lease_id = cas->lease_id;
		break;
	}
	}
	return client_op_prepare(c, op, &m);
}

static int kv_call(struct hasp_client *c, uint8_t opcode, const char *key, const void *value,
		   size_t value_size, uint64_t lease_id, const struct hasp_kv_cas *cas,
		   uint64_t *revision, struct hasp_kv_value *out, hasp_client_done_fn *fn, void *arg,
		   uint64_t *id)
{
	struct client_op stack_op;
	struct client_op *op;
	int rc;

	if ((rc = op_get(c, fn, &stack_op, &op)) != 0)
		return rc;
	rc = run_or_start(c, op, kv_prepare(c, op, opcode, key, value, value_size, lease_id, cas), fn,
			  arg, id);
	if (fn != NULL)
		return rc;
	/* COMPARE_FAILED carries the key's current revision too. */
	if ((rc == 0 || rc == -HASP_ECOMPARE) && revision != NULL)
		*revision = op->res.revision;
	if (rc == 0 && out != NULL)
		*out = op->res.value;
	return rc;
}

int hasp_client_kv_put(struct hasp_client *c, const char *key, const void *value,
		       size_t value_size, uint64_t lease_id, uint64_t *revision)
{
	return kv_call(c, HASP_OP_KV_PUT, key, value, value_size, lease_id, NULL, revision, NULL,
		       NULL, NULL, NULL);
}

int hasp_client_kv_put_async(struct hasp_client *c, const char *key, const void *value,
			     size_t value_size, uint64_t lease_id, hasp_client_done_fn *fn,
			     void *arg, uint64_t *id)
{
	if (fn == NULL)
		return -HASP_EINVAL;
	return kv_call(c, HASP_OP_KV_PUT, key, value, value_size, lease_id, NULL, NULL, NULL, fn,
		       arg, id);
}

int hasp_client_kv_get(struct hasp_client *c, const char *key, struct hasp_kv_value *out)
{
	if (out == NULL)
		return -HASP_EINVAL;
	memset(out, 0, sizeof(*out));
	return kv_call(c, HASP_OP_KV_GET, key, NULL, 0, 0, NULL, NULL, out, NULL, NULL, NULL);
}

int hasp_client_kv_get_async(struct hasp_client *c, const char *key, hasp_client_done_fn *fn,
			     void *arg, uint64_t *id)
{
	if (fn == NULL)
		return -HASP_EINVAL;
	return kv_call(c, HASP_OP_KV_GET, key, NULL, 0, 0, NULL, NULL, NULL, fn, arg, id);
}

int hasp_client_kv_delete(struct hasp_client *c, const char *key, uint64_t *revision)
{
	return kv_call(c, HASP_OP_KV_DELETE, key, NULL, 0, 0, NULL, revision, NULL, NULL, NULL,
		       NULL);
}

int hasp_client_kv_delete_async(struct hasp_client *c, const char *key, hasp_client_done_fn *fn,
				void *arg, uint64_t *id)
{
	if (fn == NULL)
		return -HASP_EINVAL;
	return kv_call(c, HASP_OP_KV_DELETE, key, NULL, 0, 0, NULL, NULL, NULL, fn, arg, id);
}

int hasp_client_kv_cas(struct hasp_client *c, const char *key, const struct hasp_kv_cas *cas,
		       uint64_t *revision)
{
	return kv_call(c, HASP_OP_KV_CAS, key, NULL, 0, 0, cas, revision, NULL, NULL, NULL, NULL);
}

int hasp_client_kv_cas_async(struct hasp_client *c, const char *key, const struct hasp_kv_cas *cas,
			     hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	if (fn == NULL)
		return -HASP_EINVAL;
	return kv_call(c, HASP_OP_KV_CAS, key, NULL, 0, 0, cas, NULL, NULL, fn, arg, id);
}

static int range_call(struct hasp_client *c, const char *prefix, uint32_t limit,
		      hasp_client_range_fn *range_fn, void *range_arg, hasp_client_done_fn *fn,
		      void *arg, uint64_t *id)
{
	struct client_op stack_op;
	struct client_op *op;
	int rc;

	if ((rc = op_get(c, fn, &stack_op, &op)) != 0)
		return rc;
	rc = client_op_prepare_range(c, op, prefix, limit, range_fn, range_arg);
	if (fn != NULL)
		return client_op_start(c, op, rc, fn, arg, id);
	return rc != 0 ? rc : client_op_run_range(c, op);
}

int hasp_client_kv_range(struct hasp_client *c, const char *prefix, uint32_t limit,
			 hasp_client_range_fn *fn, void *arg)
{
	return range_call(c, prefix, limit, fn, arg, NULL, NULL, NULL);
}

int hasp_client_kv_range_async(struct hasp_client *c, const char *prefix, uint32_t limit,
			       hasp_client_range_fn *range_fn, void *range_arg,
			       hasp_client_done_fn *fn, void *arg, uint64_t *id)
{
	if (fn == NULL)
		return -HASP_EINVAL;
	return range_call(c, prefix, limit, range_fn, range_arg, fn, arg, id);
}
