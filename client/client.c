/*
 * libhasp lifecycle: configuration, open and close, the session keepalive
 * and the optional keepalive thread, counters.
 *
 * Opening a client sends nothing: the session opens on the first request,
 * so that a bad configuration (-HASP_ECONFIG at open) is told apart from an
 * unreachable cluster (-HASP_ETIMEDOUT on the first call). Everything the
 * client needs is allocated here, once: the struct with its 32 request slots
 * and the event ring.
 */
#include "hasp/client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/client_impl.h"
#include "common/alloc.h"
#include "common/assert.h"
#include "common/clock.h"

#define NS_PER_MS 1000000ull

void hasp_client_config_default(struct hasp_client_config *cfg)
{
	HASP_ASSERT(cfg != NULL);
	memset(cfg, 0, sizeof(*cfg));
	cfg->request_timeout_ms = 200;
	cfg->backoff_ms = 20;
	cfg->backoff_max_ms = 100;
	cfg->deadline_ms = 5000;
	cfg->session_ttl_ms = 10000;
	cfg->drift_margin_ms = 5;
	cfg->drift_ppm = 10000;
	cfg->wait_recheck_ms = 500;
	cfg->lock_lost_margin_ms = 100;
}

int client_nodes_parse(const char *list, struct sockaddr_in *nodes, uint32_t nodes_max,
		       uint32_t *count)
{
	const char *p = list;

	*count = 0;
	if (list == NULL || *list == '\0')
		return -HASP_ECONFIG;
	while (*p != '\0') {
		const char *end = strchr(p, ',');
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
		char item[32];
		char *colon;
		char *port_end;
		unsigned long port;
		struct sockaddr_in a = { .sin_family = AF_INET };

		if (len == 0 || len >= sizeof(item) || *count == nodes_max)
			return -HASP_ECONFIG;
		memcpy(item, p, len);
		item[len] = '\0';
		colon = strrchr(item, ':');
		if (colon == NULL)
			return -HASP_ECONFIG;
		*colon = '\0';
		errno = 0;
		port = strtoul(colon + 1, &port_end, 10);
		if (errno != 0 || port_end == colon + 1 || *port_end != '\0' || port == 0 ||
		    port > 65535)
			return -HASP_ECONFIG;
		if (inet_pton(AF_INET, item, &a.sin_addr) != 1)
			return -HASP_ECONFIG;
		a.sin_port = htons((uint16_t)port);
		nodes[(*count)++] = a;
		p += len;
		if (*p == ',')
			p++;
		if (*p == '\0' && end != NULL)
			return -HASP_ECONFIG; /* trailing comma */
	}
	return 0;
}

int client_name(const char *name, struct hasp_wire_bytes *out)
{
	size_t size;

	if (name == NULL)
		return -HASP_EINVAL;
	size = strnlen(name, HASP_NAME_SIZE_MAX + 1);
	if (!hasp_name_valid(name, size))
		return -HASP_ENAME;
	out->data = (const uint8_t *)name;
	out->size = size;
	return 0;
}

int client_name_sized(const char *name, struct hasp_wire_bytes *out)
{
	size_t size;

	if (name == NULL)
		return -HASP_EINVAL;
	size = strnlen(name, HASP_NAME_SIZE_MAX + 1);
	if (size == 0 || size > HASP_NAME_SIZE_MAX)
		return -HASP_ENAME;
	out->data = (const uint8_t *)name;
	out->size = size;
	return 0;
}

static int config_check(const struct hasp_client_config *cfg)
{
	if (cfg->request_timeout_ms == 0 || cfg->deadline_ms == 0 || cfg->wait_recheck_ms == 0)
		return -HASP_ECONFIG;
	if (cfg->backoff_max_ms < cfg->backoff_ms)
		return -HASP_ECONFIG;
	if (cfg->session_ttl_ms < HASP_TTL_MS_MIN || cfg->session_ttl_ms > HASP_TTL_MS_MAX)
		return -HASP_ECONFIG;
	if (cfg->drift_ppm >= 1000000u)
		return -HASP_ECONFIG;
	return 0;
}

static uint64_t random_seed(void)
{
	uint64_t seed = 0;

	/* Nonces only need to differ between clients; the clock and pid are
	 * a fallback when getrandom is unavailable. */
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
		seed = clock_realtime_ns() ^ ((uint64_t)getpid() << 32) ^ clock_monotonic_ns();
	return seed;
}

/* Sets up wire v2 from the configuration or the environment (client.h).
 * The key never leaves the client struct and is wiped at close. */
static int auth_setup(struct hasp_client *c, const struct hasp_client_config *cfg)
{
	const char *id = cfg->identity != NULL ? cfg->identity : getenv("HASP_ID");
	const char *key_file = cfg->identity != NULL ? cfg->key_file : getenv("HASP_KEY_FILE");

	if (id == NULL || id[0] == '\0')
		return 0; /* wire v1: a cluster with client_auth = off */
	size_t size = strlen(id);
	if (size > HASP_IDENTITY_SIZE_MAX || !hasp_name_valid(id, size))
		return -HASP_ENAME;
	if (key_file == NULL || key_file[0] == '\0')
		return -HASP_ECONFIG;
	if (auth_init() != 0)
		return -HASP_ESYS;
	int rc = auth_key_load(key_file, &c->identity_key);
	if (rc != 0)
		return rc;
	memcpy(c->identity, id, size);
	c->identity_size = (uint8_t)size;
	c->auth = true;
	return 0;
}

int hasp_client_open(struct hasp_client **client, const struct hasp_client_config *cfg)
{
	return client_open_io(client, cfg, NULL);
}

/* The common part of the opens: io (simulated), group (the group's
 * socket) or neither (a socket of its own). */
static int client_open_common(struct hasp_client **client, const struct hasp_client_config *cfg,
			      const struct client_io *io, struct hasp_client_group *group);

int client_open_io(struct hasp_client **client, const struct hasp_client_config *cfg,
		   const struct client_io *io)
{
	return client_open_common(client, cfg, io, NULL);
}

int hasp_client_open_in_group(struct hasp_client **client, const struct hasp_client_config *cfg,
			      struct hasp_client_group *group)
{
	if (client != NULL)
		*client = NULL;
	if (group == NULL)
		return -HASP_EINVAL;
	return client_open_common(client, cfg, NULL, group);
}

static int client_open_common(struct hasp_client **client, const struct hasp_client_config *cfg,
			      const struct client_io *io, struct hasp_client_group *group)
{
	struct hasp_client *c;
	pthread_condattr_t attr;
	int rc;

	if (client == NULL || cfg == NULL)
		return -HASP_EINVAL;
	*client = NULL;
	if ((rc = config_check(cfg)) != 0)
		return rc;
	c = hasp_calloc(1, sizeof(*c));
	if (c == NULL)
		return -HASP_ENOMEM;
	/* No event buffer yet: it comes with the first event
	 * (client_events_ready_locked). */
	rc = client_nodes_parse(cfg->cluster, c->nodes, HASP_CLIENT_NODES_MAX, &c->node_count);
	if (rc != 0)
		goto fail_key;
	c->config_node_count = c->node_count;
	c->cfg = *cfg;
	c->cfg.cluster = NULL; /* the caller keeps the string */
	c->lock_lost_set = cfg->lock_lost_fn != NULL;
	c->cfg.identity = NULL;
	c->cfg.key_file = NULL;
	if ((rc = auth_setup(c, cfg)) != 0)
		goto fail_key;
	prng_seed(&c->prng, cfg->nonce_seed != 0 ? cfg->nonce_seed : random_seed());

	c->io = io;
	c->fd = -1;
	c->intr_fd = -1;
	if (io == NULL && group == NULL) {
		c->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0) {
			rc = -HASP_ESYS;
			goto fail_key;
		}
		c->intr_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (c->intr_fd < 0) {
			close(c->fd);
			rc = -HASP_ESYS;
			goto fail_key;
		}
	}
	c->wake_fd = -1; /* the asynchronous loop's, made on first use */
	c->epoll_fd = -1;
	c->ops_tail = &c->ops;
	pthread_mutex_init(&c->mu, NULL);
	/* Deadlines are monotonic: so are the condition variables. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &attr);
	pthread_cond_init(&c->ka_cv, &attr);
	pthread_condattr_destroy(&attr);
	if (group != NULL && (rc = client_group_join(group, c)) != 0) {
		pthread_cond_destroy(&c->ka_cv);
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
		goto fail_key;
	}
	*client = c;
	HASP_ASSERT(c->node_count > 0);
	HASP_ASSERT(c->session_state == SESSION_NONE);
	return 0;

fail_key:
	auth_key_wipe(&c->identity_key);
	hasp_free(c);
	return rc;
}

void hasp_client_close(struct hasp_client *c)
{
	if (c == NULL)
		return;
	hasp_client_keepalive_stop(c);
	pthread_mutex_lock(&c->mu);
	bool open = c->session_state == SESSION_OPEN;
	if (c->group != NULL) {
		/* The loop's thread must not wait: SESSION_CLOSE goes once,
		 * unanswered it ends at its TTL (client.h "client groups"). */
		client_session_close_nowait_locked(c);
		open = false;
	}
	pthread_mutex_unlock(&c->mu);
	if (c->group != NULL)
		client_group_leave(c);
	if (open) {
		/* Best effort and short: the session expires anyway. */
		struct client_call call;
		memset(&call, 0, sizeof(call));
		call.req.hdr.opcode = HASP_OP_SESSION_CLOSE;
		call.deadline_ns = client_now(c) +
				   (uint64_t)c->cfg.request_timeout_ms * NS_PER_MS;
		int rc = client_call(c, &call);
		(void)rc; /* unanswered: the session expires on its own */
	}
	/* Asynchronous calls still in progress end here, without their
	 * callbacks (client.h). Blocking calls must not race close. */
	while (c->ops != NULL) {
		struct client_op *op = c->ops;
		c->ops = op->next;
		HASP_ASSERT(op->async);
		hasp_free(op);
	}
	hasp_free(c->op_spare);
	if (c->fd >= 0)
		close(c->fd);
	if (c->intr_fd >= 0)
		close(c->intr_fd);
	if (c->epoll_fd >= 0)
		close(c->epoll_fd);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	pthread_cond_destroy(&c->ka_cv);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	auth_key_wipe(&c->identity_key);
	auth_key_wipe(&c->session_key);
	hasp_free(c->kept);
	hasp_free(c->events);
	hasp_free(c);
}

int hasp_client_set_deadline(struct hasp_client *c, uint32_t deadline_ms)
{
	HASP_ASSERT(c != NULL);
	if (deadline_ms == 0)
		return -HASP_EINVAL;
	/* Read without the mutex by client_deadline(): one atomic word. */
	__atomic_store_n(&c->cfg.deadline_ms, deadline_ms, __ATOMIC_RELAXED);
	return 0;
}

int hasp_client_connect(struct hasp_client *c)
{
	int rc;

	HASP_ASSERT(c != NULL);
	pthread_mutex_lock(&c->mu);
	rc = client_session_ensure_locked(c, client_deadline(c));
	pthread_mutex_unlock(&c->mu);
	return client_result(rc);
}

int hasp_client_connect_async(struct hasp_client *c, hasp_client_done_fn *fn, void *arg,
			      uint64_t *id)
{
	struct client_op *op;

	if (c == NULL || fn == NULL)
		return -HASP_EINVAL;
	if ((op = client_op_new(c)) == NULL)
		return -HASP_ENOMEM;
	client_op_prepare_connect(c, op);
	return client_op_start(c, op, 0, fn, arg, id);
}

/* Starts a request of the session with an empty body. Its answer is taken
 * as the loop's own (ops.c, simple_done_locked): a keepalive's renews the
 * session's TTL, a watch query's is compared with what was received. */
static int session_op_start(struct hasp_client *c, uint8_t opcode, hasp_client_done_fn *fn,
			    void *arg, uint64_t *id)
{
	struct hasp_wire_msg m;
	struct client_op *op;

	memset(&m, 0, sizeof(m));
	m.hdr.opcode = opcode;
	op = client_op_new(c);
	return client_op_start(c, op, op ? client_op_prepare(c, op, &m) : 0, fn, arg, id);
}

int hasp_client_close_async(struct hasp_client *c, hasp_client_done_fn *fn, void *arg,
			    uint64_t *id)
{
	if (c == NULL || fn == NULL)
		return -HASP_EINVAL;
	/* client_op_start sets c->closing as it starts it (a second close
	 * is refused -HASP_ESTATE, as every later call). */
	return session_op_start(c, HASP_OP_SESSION_CLOSE, fn, arg, id);
}

int hasp_client_session_keepalive_async(struct hasp_client *c, hasp_client_done_fn *fn, void *arg,
					uint64_t *id)
{
	if (c == NULL || fn == NULL)
		return -HASP_EINVAL;
	return session_op_start(c, HASP_OP_SESSION_KEEPALIVE, fn, arg, id);
}

uint64_t hasp_client_session_id(struct hasp_client *c)
{
	uint64_t id;

	HASP_ASSERT(c != NULL);
	pthread_mutex_lock(&c->mu);
	id = c->session_state == SESSION_OPEN ? c->session_id : 0;
	pthread_mutex_unlock(&c->mu);
	return id;
}

void hasp_client_stats_get(struct hasp_client *c, struct hasp_client_stats *stats)
{
	HASP_ASSERT(c != NULL);
	HASP_ASSERT(stats != NULL);
	pthread_mutex_lock(&c->mu);
	*stats = c->stats;
	pthread_mutex_unlock(&c->mu);
}

struct lease_entry *client_lease_find_locked(struct hasp_client *c, uint64_t lease_id)
{
	for (uint32_t i = 0; c->leases_used > 0 && i < HASP_CLIENT_LEASES_MAX; i++) {
		if (c->leases[i].used && c->leases[i].lease_id == lease_id)
			return &c->leases[i];
	}
	return NULL;
}

void client_lease_note_locked(struct hasp_client *c, uint64_t lease_id, uint32_t ttl_ms,
			      uint64_t send_ns, bool granted)
{
	struct lease_entry *l = client_lease_find_locked(c, lease_id);

	/* Only a grant adds a lease: a keepalive answered after this client
	 * revoked it (or forgot it as expired) must not bring it back, or the
	 * loop would renew a revoked lease, and read its locks' validity from
	 * it, from then on. */
	for (uint32_t i = 0; l == NULL && granted && i < HASP_CLIENT_LEASES_MAX; i++) {
		if (!c->leases[i].used) {
			l = &c->leases[i];
			memset(l, 0, sizeof(*l));
			l->used = true;
			l->lease_id = lease_id;
			c->leases_used++;
		}
	}
	if (l == NULL)
		return; /* table full: the caller keeps this one alive itself */
	/* Answers may arrive out of order between threads: keep the latest. */
	if (send_ns >= l->last_ok_send_ns) {
		l->ttl_ms = ttl_ms;
		l->last_ok_send_ns = send_ns;
		l->valid_until_ns = client_valid_until(c, send_ns, ttl_ms);
	}
}

/* Does the leader still hold the watches? One that restarted between two
 * keepalives answers like before but has none. And did this client get
 * the last event it sent? (session_alive_done in watchdog.c is the
 * asynchronous loop's twin.) After each answered keepalive while the
 * client watches, best effort: unanswered, the next keepalive asks again;
 * and on demand, hasp_client_watch_progress. */
static int watch_progress_check(struct hasp_client *c)
{
	struct client_call call;

	memset(&call, 0, sizeof(call));
	pthread_mutex_lock(&c->mu);
	call.req.hdr.opcode = client_watch_query_op_locked(c);
	pthread_mutex_unlock(&c->mu);
	int rc = client_call(c, &call);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&c->mu);
	client_watch_query_seen_locked(c, call.session_id, call.req.hdr.opcode, rc, &call.reply);
	pthread_mutex_unlock(&c->mu);
	client_watches_resend_if_stale(c);
	return client_result(rc);
}

int hasp_client_watch_progress(struct hasp_client *c)
{
	if (c == NULL)
		return -HASP_EINVAL;
	return watch_progress_check(c);
}

int hasp_client_watch_progress_async(struct hasp_client *c, hasp_client_done_fn *fn, void *arg,
				     uint64_t *id)
{
	if (c == NULL || fn == NULL)
		return -HASP_EINVAL;
	pthread_mutex_lock(&c->mu);
	uint8_t opcode = client_watch_query_op_locked(c);
	pthread_mutex_unlock(&c->mu);
	return session_op_start(c, opcode, fn, arg, id);
}

int hasp_client_keepalive(struct hasp_client *c)
{
	uint64_t due_ids[HASP_CLIENT_LEASES_MAX];
	uint32_t due_count = 0;
	uint64_t now = client_now(c);
	bool session_due;
	int first_err = 0;

	HASP_ASSERT(c != NULL);
	pthread_mutex_lock(&c->mu);
	/* A third of the TTL: two more tries fit before the node expires it. */
	session_due = c->session_state == SESSION_OPEN &&
		      now - c->session_last_ok_send_ns >=
			      (uint64_t)c->session_ttl_ms * NS_PER_MS / 3;
	for (uint32_t i = 0; i < HASP_CLIENT_LEASES_MAX; i++) {
		const struct lease_entry *l = &c->leases[i];
		if (l->used && now - l->last_ok_send_ns >= (uint64_t)l->ttl_ms * NS_PER_MS / 3)
			due_ids[due_count++] = l->lease_id;
	}
	pthread_mutex_unlock(&c->mu);

	if (session_due) {
		struct client_call call;
		int rc;

		memset(&call, 0, sizeof(call));
		call.req.hdr.opcode = HASP_OP_SESSION_KEEPALIVE;
		rc = client_call(c, &call);
		if (rc < 0)
			first_err = rc;
		else if (rc == HASP_STATUS_OK) {
			pthread_mutex_lock(&c->mu);
			if (c->session_id == call.session_id)
				c->session_ttl_ms = call.reply.body.session_alive.ttl_ms;
			bool watching = client_watches_registered_locked(c) > 0;
			pthread_mutex_unlock(&c->mu);
			if (watching)
				(void)watch_progress_check(c); /* best effort (above) */
		} else if (rc == HASP_STATUS_SESSION_EXPIRED) {
			/* Open the next one now so watches come back. */
			rc = hasp_client_connect(c);
			if (rc < 0)
				first_err = rc;
		}
	}
	for (uint32_t i = 0; i < due_count; i++) {
		int rc = hasp_client_lease_keepalive(c, due_ids[i], NULL);
		/* An expired lease is forgotten: not an error of this call. */
		if (rc < 0 && rc != -HASP_ELEASE && rc != -HASP_ENOENT && first_err == 0)
			first_err = rc;
	}
	/* Watched locks: renewals, checks, lock_lost_fn (watchdog.c). */
	client_watchdog(c, false);
	return first_err;
}

/* How often the keepalive thread looks: a sixth of the shortest TTL it
 * keeps, between 5 ms and 1 s. */
static uint64_t keepalive_tick_ns(struct hasp_client *c)
{
	uint64_t ttl_ms = c->session_state == SESSION_OPEN ? c->session_ttl_ms : 1000;

	for (uint32_t i = 0; i < HASP_CLIENT_LEASES_MAX; i++) {
		if (c->leases[i].used && c->leases[i].ttl_ms < ttl_ms)
			ttl_ms = c->leases[i].ttl_ms;
	}
	if (c->kept != NULL) {
		for (uint32_t i = 0; i < HASP_CLIENT_KEPT_MAX; i++) {
			if (c->kept[i].used && c->kept[i].ttl_ms < ttl_ms)
				ttl_ms = c->kept[i].ttl_ms;
		}
	}
	ttl_ms /= 6;
	/* A watched lock's loss is told lock_lost_margin_ms early: look at
	 * least twice within that margin. */
	if (c->kept_count > 0 && c->cfg.lock_lost_margin_ms / 2 < ttl_ms)
		ttl_ms = c->cfg.lock_lost_margin_ms / 2;
	if (ttl_ms < 5)
		ttl_ms = 5;
	if (ttl_ms > 1000)
		ttl_ms = 1000;
	return ttl_ms * NS_PER_MS;
}

static void *keepalive_main(void *arg)
{
	struct hasp_client *c = arg;

	pthread_mutex_lock(&c->mu);
	while (!c->ka_stop) {
		uint64_t until = clock_monotonic_ns() + keepalive_tick_ns(c); /* the cv's clock */
		struct timespec ts = { .tv_sec = (time_t)(until / 1000000000ull),
				       .tv_nsec = (long)(until % 1000000000ull) };

		(void)pthread_cond_timedwait(&c->ka_cv, &c->mu, &ts);
		if (c->ka_stop)
			break;
		pthread_mutex_unlock(&c->mu);
		/* Errors are retried on the next tick; the counters show them. */
		int rc = hasp_client_keepalive(c);
		(void)rc;
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int hasp_client_keepalive_start(struct hasp_client *c)
{
	int rc;

	HASP_ASSERT(c != NULL);
	pthread_mutex_lock(&c->mu);
	/* Simulated (one thread) or grouped: the loop keeps the session. */
	if (c->ka_running || c->io != NULL || c->group != NULL) {
		pthread_mutex_unlock(&c->mu);
		return -HASP_ESTATE;
	}
	c->ka_stop = false;
	rc = pthread_create(&c->ka_thread, NULL, keepalive_main, c);
	c->ka_running = rc == 0;
	pthread_mutex_unlock(&c->mu);
	return rc == 0 ? 0 : -HASP_ESYS;
}

void hasp_client_keepalive_stop(struct hasp_client *c)
{
	bool running;

	HASP_ASSERT(c != NULL);
	pthread_mutex_lock(&c->mu);
	running = c->ka_running;
	c->ka_stop = true;
	pthread_cond_broadcast(&c->ka_cv);
	pthread_mutex_unlock(&c->mu);
	if (running) {
		pthread_join(c->ka_thread, NULL);
		pthread_mutex_lock(&c->mu);
		c->ka_running = false;
		pthread_mutex_unlock(&c->mu);
	}
}
