/*
 * The watchdog of held locks, and the keepalives of the asynchronous loop.
 *
 * A lock is watched from its grant until it is released through this
 * client (cfg.lock_lost_fn set, or acquired with auto_renew). Whoever runs
 * the keepalive (hasp_client_keepalive, its helper thread, or
 * hasp_client_process when no helper runs) calls client_watchdog, which
 *   - renews an auto_renew lock's own TTL at every third of it (a lease
 *     lock follows its lease's keepalives);
 *   - checks every watched lock with CHECK after a break in the event
 *     chain or a session expiry (a forced release may have gone unseen);
 *   - calls lock_lost_fn once for a lock whose validity can no longer be
 *     guaranteed: a refused renew or check (-HASP_ENOTHOLDER), a lease
 *     gone (-HASP_ELEASE), or a validity that ends within
 *     lock_lost_margin_ms with no renew answered in time (-HASP_ETIMEDOUT).
 * RENEW, CHECK and RELEASE results reach the table through ops.c, whoever
 * sent them (docs/CLIENT.md "Lock loss").
 */
#include <string.h>

#include "client/client_impl.h"
#include "common/alloc.h"
#include "common/assert.h"
#include "common/clock.h"

#define NS_PER_MS 1000000ull
/* Renews, checks and losses handled per watchdog run; the rest next run. */
#define WATCHDOG_BATCH 16

static struct kept_lock *kept_find_locked(struct hasp_client *c, const char *name, uint64_t token)
{
	if (c->kept == NULL)
		return NULL;
	for (uint32_t i = 0; i < HASP_CLIENT_KEPT_MAX; i++) {
		struct kept_lock *k = &c->kept[i];
		if (k->used && k->token == token && strcmp(k->name, name) == 0)
			return k;
	}
	return NULL;
}

void client_kept_add_locked(struct hasp_client *c, const struct hasp_lock *lock, bool renew)
{
	struct kept_lock *k = kept_find_locked(c, lock->name, lock->token);

	if (c->kept == NULL) {
		c->kept = hasp_calloc(HASP_CLIENT_KEPT_MAX, sizeof(*c->kept));
		if (c->kept == NULL) {
			c->stats.locks_unwatched++;
			return;
		}
	}
	for (uint32_t i = 0; k == NULL && i < HASP_CLIENT_KEPT_MAX; i++) {
		if (!c->kept[i].used) {
			k = &c->kept[i];
			memset(k, 0, sizeof(*k));
			k->used = true;
			c->kept_count++;
		}
	}
	if (k == NULL) {
		c->stats.locks_unwatched++; /* the table is full */
		return;
	}
	memcpy(k->name, lock->name, sizeof(k->name));
	k->token = lock->token;
	k->lease_id = lock->lease_id;
	k->ttl_ms = lock->ttl_ms;
	k->valid_until_ns = lock->valid_until_ns;
	/* The validity counts from a send before the grant: renew a third of
	 * the TTL after that instant at the latest. */
	uint64_t ttl_ns = (uint64_t)lock->ttl_ms * NS_PER_MS;
	k->renewed_send_ns = lock->valid_until_ns > ttl_ns ? lock->valid_until_ns - ttl_ns : 0;
	k->renew = renew && lock->lease_id == 0;
}

static void kept_drop(struct hasp_client *c, struct kept_lock *k)
{
	HASP_ASSERT(k->used && c->kept_count > 0);
	k->used = false;
	c->kept_count--;
}

void client_kept_forget_locked(struct hasp_client *c, const char *name, uint64_t token)
{
	struct kept_lock *k = kept_find_locked(c, name, token);

	if (k != NULL)
		kept_drop(c, k);
}

/* A loss noticed by a reply: the next watchdog run reports it. */
static void kept_mark_lost(struct kept_lock *k)
{
	k->valid_until_ns = 0;
	k->renew = false;
	k->verify = false;
}

void client_kept_renewed_locked(struct hasp_client *c, const char *name, uint64_t token, int rc,
				uint32_t ttl_ms, uint64_t valid_until_ns)
{
	struct kept_lock *k = kept_find_locked(c, name, token);

	if (k == NULL)
		return;
	k->busy = false;
	if (rc == 0) {
		/* Answers may come out of order: keep the later validity. */
		if (valid_until_ns > k->valid_until_ns) {
			k->valid_until_ns = valid_until_ns;
			k->ttl_ms = ttl_ms;
			k->renewed_send_ns = valid_until_ns - (valid_until_ns > (uint64_t)ttl_ms * NS_PER_MS
							       ? (uint64_t)ttl_ms * NS_PER_MS
							       : valid_until_ns);
		}
	} else if (rc == -HASP_ENOTHOLDER) {
		kept_mark_lost(k);
	}
	/* Anything else (timed out, session expired): tried again next run;
	 * the validity deadline decides meanwhile. */
}

void client_kept_checked_locked(struct hasp_client *c, const char *name, uint64_t token, int rc)
{
	struct kept_lock *k = kept_find_locked(c, name, token);

	if (k == NULL)
		return;
	k->busy = false;
	if (rc == -HASP_ENOTHOLDER)
		kept_mark_lost(k);
	else if (rc != 0)
		k->verify = true; /* not answered: check again */
}

void client_kept_verify_locked(struct hasp_client *c)
{
	if (c->kept == NULL)
		return;
	for (uint32_t i = 0; i < HASP_CLIENT_KEPT_MAX; i++)
		if (c->kept[i].used)
			c->kept[i].verify = true;
}

/* The validity the client vouches for: its own, or its lease's (0: the
 * lease is gone). */
static uint64_t kept_valid_until_locked(struct hasp_client *c, const struct kept_lock *k,
					int *reason)
{
	*reason = -HASP_ENOTHOLDER;
	if (k->valid_until_ns == 0)
		return 0; /* marked lost by a reply */
	if (k->lease_id != 0) {
		const struct lease_entry *l = client_lease_find_locked(c, k->lease_id);
		*reason = -HASP_ELEASE;
		/* A lease this client does not keep: the grant's validity. */
		if (l == NULL)
			return k->valid_until_ns;
		*reason = -HASP_ETIMEDOUT;
		return l->valid_until_ns;
	}
	*reason = -HASP_ETIMEDOUT;
	return k->valid_until_ns;
}

static uint64_t kept_renew_due(const struct kept_lock *k)
{
	return k->renewed_send_ns + (uint64_t)k->ttl_ms * NS_PER_MS / 3;
}

uint64_t client_watchdog_next_locked(struct hasp_client *c)
{
	uint64_t next = UINT64_MAX;

	if (c->kept_count == 0)
		return next; /* nothing watched: one hot field read, not the table */
	uint64_t margin = (uint64_t)c->cfg.lock_lost_margin_ms * NS_PER_MS;
	for (uint32_t i = 0; i < HASP_CLIENT_KEPT_MAX; i++) {
		const struct kept_lock *k = &c->kept[i];
		int reason;
		if (!k->used)
			continue;
		uint64_t until = kept_valid_until_locked(c, k, &reason);
		uint64_t loss = until > margin ? until - margin : 0;
		if (loss < next)
			next = loss;
		if (!k->busy && k->verify)
			next = 0;
		if (!k->busy && k->renew && kept_renew_due(k) < next)
			next = kept_renew_due(k);
	}
	return next;
}

struct watchdog_work {
	char name[HASP_CLIENT_NAME_BUF];
	uint64_t token;
	bool check; /* else renew */
};

static void watchdog_async_done(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	/* The results reached the table in ops.c already. */
	(void)c;
	(void)res;
	(void)arg;
}

void client_watchdog(struct hasp_client *c, bool async)
{
	struct hasp_lock_loss lost[WATCHDOG_BATCH];
	struct watchdog_work work[WATCHDOG_BATCH];
	uint32_t lost_count = 0;
	uint32_t work_count = 0;
	uint64_t margin = (uint64_t)c->cfg.lock_lost_margin_ms * NS_PER_MS;

	pthread_mutex_lock(&c->mu);
	uint64_t now = client_now(c);
	for (uint32_t i = 0; c->kept != NULL && i < HASP_CLIENT_KEPT_MAX; i++) {
		struct kept_lock *k = &c->kept[i];
		int reason;

		if (!k->used)
			continue;
		uint64_t until = kept_valid_until_locked(c, k, &reason);
		if (until == 0 || now + margin >= until) {
			if (lost_count == WATCHDOG_BATCH)
				continue;
			struct hasp_lock_loss *l = &lost[lost_count++];
			memcpy(l->name, k->name, sizeof(l->name));
			l->token = k->token;
			l->lease_id = k->lease_id;
			l->valid_until_ns = until;
			l->reason = reason;
			c->stats.locks_lost++;
			kept_drop(c, k);
			continue;
		}
		if (k->busy || work_count == WATCHDOG_BATCH)
			continue;
		if (k->verify || (k->renew && now >= kept_renew_due(k))) {
			struct watchdog_work *w = &work[work_count++];
			memcpy(w->name, k->name, sizeof(w->name));
			w->token = k->token;
			w->check = k->verify;
			k->verify = false;
			k->busy = true;
			if (w->check)
				c->stats.lock_checks++;
			else
				c->stats.lock_renews++;
		}
	}
	pthread_mutex_unlock(&c->mu);

	for (uint32_t i = 0; i < lost_count; i++)
		if (c->cfg.lock_lost_fn != NULL)
			c->cfg.lock_lost_fn(c, &lost[i], c->cfg.lock_lost_arg);
	for (uint32_t i = 0; i < work_count; i++) {
		const struct watchdog_work *w = &work[i];
		int rc;

		/* 0 keeps the lock's TTL. The results reach the table through
		 * ops.c (RENEW and CHECK of a watched lock). */
		if (async && w->check)
			rc = hasp_client_check_async(c, w->name, w->token, watchdog_async_done, NULL, NULL);
		else if (async)
			rc = hasp_client_renew_async(c, w->name, w->token, 0, watchdog_async_done, NULL,
						     NULL);
		else if (w->check)
			rc = hasp_client_check(c, w->name, w->token);
		else
			rc = hasp_client_renew(c, w->name, w->token, 0, NULL);
		if (async && rc != 0) {
			/* Not started: try again on the next run. */
			pthread_mutex_lock(&c->mu);
			struct kept_lock *k = kept_find_locked(c, w->name, w->token);
			if (k != NULL) {
				k->busy = false;
				k->verify |= w->check;
			}
			pthread_mutex_unlock(&c->mu);
		}
	}
}

/* ---- the loop's keepalives ---- */

static void session_keepalive_done(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	(void)res;
	(void)arg;
	pthread_mutex_lock(&c->mu);
	c->session_ka_busy = false;
	pthread_mutex_unlock(&c->mu);
}

/* After each answered keepalive, a client with watches asks the leader how
 * many of them it holds: a leader that restarted between two keepalives
 * (a whole-cluster restart can elect the same node again) answers like
 * before but has none, and no event would ever come to tell (docs/CLIENT.md,
 * "Watches follow the leader"). The answer is handled with the other
 * replies (ops.c), and the end of hasp_client_process() registers them
 * again. */
static void session_alive_done(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct hasp_wire_msg m;
	struct client_op *op;

	pthread_mutex_lock(&c->mu);
	bool watching = client_watches_registered_locked(c) > 0;
	pthread_mutex_unlock(&c->mu);
	if (res->rc != 0 || !watching || (op = client_op_new(c)) == NULL) {
		session_keepalive_done(c, res, arg);
		return;
	}
	memset(&m, 0, sizeof(m));
	pthread_mutex_lock(&c->mu);
	m.hdr.opcode = client_watch_query_op_locked(c);
	pthread_mutex_unlock(&c->mu);
	if (client_op_start(c, op, client_op_prepare(c, op, &m), session_keepalive_done, NULL, NULL) != 0)
		session_keepalive_done(c, res, arg);
}

static void lease_keepalive_done(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&c->mu);
	struct lease_entry *l = client_lease_find_locked(c, res->lease.lease_id);
	if (l != NULL)
		l->busy = false;
	pthread_mutex_unlock(&c->mu);
}

/* The session ended (a node answered SESSION_EXPIRED, to the keepalive or
 * to any request) while the client watches: a watcher makes no other
 * call, and its watches come back (registered again, then a RESYNC) only
 * in a session, so the loop opens the next one, as hasp_client_keepalive
 * does. */
static bool session_reopen_due_locked(const struct hasp_client *c)
{
	if (c->session_state != SESSION_NONE || c->session_ka_busy || c->closing)
		return false;
	for (uint32_t i = 0; i < HASP_CLIENT_WATCHES_MAX; i++) {
		if (c->watches[i].used)
			return true;
	}
	return false;
}

uint64_t client_keepalive_next_locked(const struct hasp_client *c)
{
	uint64_t next = UINT64_MAX;

	/* A third of the TTL: two more tries fit before the node expires it. */
	if (c->session_state == SESSION_OPEN && !c->session_ka_busy)
		next = c->session_last_ok_send_ns + (uint64_t)c->session_ttl_ms * NS_PER_MS / 3;
	if (session_reopen_due_locked(c))
		next = 0; /* now */
	for (uint32_t i = 0; c->leases_used > 0 && i < HASP_CLIENT_LEASES_MAX; i++) {
		const struct lease_entry *l = &c->leases[i];
		uint64_t due = l->last_ok_send_ns + (uint64_t)l->ttl_ms * NS_PER_MS / 3;
		if (l->used && !l->busy && due < next)
			next = due;
	}
	return next;
}

void client_keepalive_async(struct hasp_client *c)
{
	uint64_t leases[HASP_CLIENT_LEASES_MAX];
	uint32_t lease_count = 0;
	bool session, reopen;

	pthread_mutex_lock(&c->mu);
	uint64_t now = client_now(c);
	session = c->session_state == SESSION_OPEN && !c->session_ka_busy &&
		  now >= c->session_last_ok_send_ns + (uint64_t)c->session_ttl_ms * NS_PER_MS / 3;
	reopen = session_reopen_due_locked(c);
	c->session_ka_busy |= session || reopen;
	/* Once per process call of every client of a group: the count
	 * spares the walk (12 cache lines) when the client keeps no lease. */
	for (uint32_t i = 0; c->leases_used > 0 && i < HASP_CLIENT_LEASES_MAX; i++) {
		struct lease_entry *l = &c->leases[i];
		if (l->used && !l->busy &&
		    now >= l->last_ok_send_ns + (uint64_t)l->ttl_ms * NS_PER_MS / 3) {
			l->busy = true;
			leases[lease_count++] = l->lease_id;
		}
	}
	pthread_mutex_unlock(&c->mu);

	if (session || reopen) {
		struct client_op *op = client_op_new(c);
		struct hasp_wire_msg m;
		int rc;

		memset(&m, 0, sizeof(m));
		m.hdr.opcode = HASP_OP_SESSION_KEEPALIVE;
		if (reopen && op != NULL)
			client_op_prepare_connect(c, op);
		rc = client_op_start(c, op, op && !reopen ? client_op_prepare(c, op, &m) : 0,
				     reopen ? session_keepalive_done : session_alive_done, NULL, NULL);
		if (rc != 0) {
			pthread_mutex_lock(&c->mu);
			c->session_ka_busy = false;
			pthread_mutex_unlock(&c->mu);
		}
	}
	for (uint32_t i = 0; i < lease_count; i++) {
		if (hasp_client_lease_keepalive_async(c, leases[i], lease_keepalive_done, NULL, NULL) != 0) {
			pthread_mutex_lock(&c->mu);
			struct lease_entry *l = client_lease_find_locked(c, leases[i]);
			if (l != NULL)
				l->busy = false;
			pthread_mutex_unlock(&c->mu);
		}
	}
}
