/*
 * The clients of nodesim: real libhasp clients (client/) whose clock and
 * socket are the world's (struct client_io), driven through the
 * asynchronous API, one operation outstanding each (Jepsen's process), on
 * a few hot locks: TRY and WAIT acquires with random TTLs (a WAIT that
 * timed out is often re-issued at once with another TTL: issue 11's first
 * defect), renewals, releases, reads, GC pauses longer than the TTL and
 * deliberate overstays. A client writes to the fenced resource only while
 * hasp_client_lock_safe() says it may. Every operation and every decision
 * of the resource is a history record (tests/fault/checker.py's format)
 * and feeds the C checks.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "hasp/client.h"
#include "hasp/errors.h"
#include "tests/nodesim/nodesim_world.h"

#define NS_PER_MS 1000000ull
#define CLIENT_PORT 5000

static const char *lock_name(uint32_t l)
{
	static const char *names[NODESIM_LOCKS] = { "l0", "l1" };
	return names[l];
}

/* ---- the client_io seam: the world's clock and network ---- */

static uint64_t io_now(void *ctx)
{
	const struct sim_client *sc = ctx;
	return sc->w->now_ns;
}

static void io_send(void *ctx, const struct sockaddr_in *to, const void *data, size_t size)
{
	struct sim_client *sc = ctx;
	world_send(sc->w, world_client_ip(sc->index), CLIENT_PORT, ntohl(to->sin_addr.s_addr),
		   ntohs(to->sin_port), data, size);
}

static long io_recv(void *ctx, void *buf, size_t size, struct sockaddr_in *from)
{
	struct sim_client *sc = ctx;
	struct dgram *d = sc->inbox_head;

	if (d == NULL)
		return -1;
	sc->inbox_head = d->next;
	if (sc->inbox_head == NULL)
		sc->inbox_tail = NULL;
	memcpy(buf, d->data, d->size < size ? d->size : size);
	memset(from, 0, sizeof(*from));
	from->sin_family = AF_INET;
	from->sin_addr.s_addr = htonl(d->src_ip);
	from->sin_port = htons(d->src_port);
	long n = (long)d->size;
	hasp_free(d);
	return n;
}

/* A blocking call (the watcher's WATCH, its re-registrations after a new
 * leader, and hasp_client_close's SESSION_CLOSE): the network and the
 * nodes run meanwhile, the other clients wait. */
static void io_wait(void *ctx, uint64_t until_ns)
{
	struct sim_client *sc = ctx;
	world_run_nodes_until(sc->w, until_ns, sc);
}

void world_client_deliver(struct world *w, uint32_t k, struct dgram *d)
{
	struct sim_client *sc = &w->clients[k];

	d->next = NULL;
	if (sc->inbox_tail != NULL)
		sc->inbox_tail->next = d;
	else
		sc->inbox_head = d;
	sc->inbox_tail = d;
	if (sc->wake_ns > w->now_ns)
		sc->wake_ns = w->now_ns;
}

int world_clients_open(struct world *w, uint64_t seed)
{
	char cluster[256];
	size_t used = 0;

	for (uint32_t i = 0; i < w->node_count; i++)
		used += (size_t)snprintf(cluster + used, sizeof(cluster) - used, "%s10.0.0.%u:7000",
					 i ? "," : "", i + 1);
	for (uint32_t k = 0; k < w->client_count; k++) {
		struct sim_client *sc = &w->clients[k];
		struct hasp_client_config cfg;

		sc->w = w;
		sc->index = k;
		if (k == w->watcher)
			snprintf(sc->proc, sizeof(sc->proc), "w0");
		else
			snprintf(sc->proc, sizeof(sc->proc), "c%u", k);
		sc->io = (struct client_io){ .now_ns = io_now, .send = io_send, .recv = io_recv,
					     .wait = io_wait, .ctx = sc };
		hasp_client_config_default(&cfg);
		cfg.cluster = cluster;
		cfg.session_ttl_ms = 4000;
		cfg.nonce_seed = seed * 64 + k + 1;
		int rc = client_open_io(&sc->c, &cfg, &sc->io);
		if (rc != 0)
			return rc;
		sc->wake_ns = w->now_ns;
	}
	return 0;
}

void world_clients_close(struct world *w)
{
	for (uint32_t k = 0; k < w->client_count; k++) {
		struct sim_client *sc = &w->clients[k];
		if (w->verbose) {
			struct hasp_client_stats st;
			hasp_client_stats_get(sc->c, &st);
			fprintf(stderr,
				"nodesim: %s: %llu requests, %llu retransmits, %llu replies, %llu redirects, "
				"%llu timeouts, %llu sessions, %llu events, %llu malformed, %llu unknown source\n",
				sc->proc, (unsigned long long)st.tx_requests,
				(unsigned long long)st.tx_retransmits, (unsigned long long)st.rx_replies,
				(unsigned long long)st.redirects, (unsigned long long)st.timeouts,
				(unsigned long long)st.session_opens, (unsigned long long)st.events,
				(unsigned long long)st.rx_malformed, (unsigned long long)st.rx_unknown_source);
		}
		hasp_client_close(sc->c);
		sc->c = NULL;
	}
	/* Only now: a later client's close runs the nodes, which may still
	 * push to a client closed before it. */
	for (uint32_t k = 0; k < w->client_count; k++) {
		struct sim_client *sc = &w->clients[k];
		while (sc->inbox_head != NULL) {
			struct dgram *d = sc->inbox_head;
			sc->inbox_head = d->next;
			hasp_free(d);
		}
		sc->inbox_tail = NULL;
	}
}

uint64_t world_clients_next(const struct world *w)
{
	uint64_t next = UINT64_MAX;
	for (uint32_t k = 0; k < w->client_count; k++) {
		const struct sim_client *sc = &w->clients[k];
		uint64_t t = sc->wake_ns;
		if (k != w->watcher && !sc->busy && w->workload_on && sc->act_ns < t)
			t = sc->act_ns;
		if (sc->paused_until_ns > t)
			t = sc->paused_until_ns;
		next = t < next ? t : next;
	}
	return next;
}

uint32_t world_clients_busy(const struct world *w)
{
	uint32_t n = 0;
	for (uint32_t k = 0; k < w->client_count; k++)
		n += w->clients[k].busy;
	return n;
}

/* ---- operations and their records ---- */

static void invoke(struct sim_client *sc, const char *f, uint32_t lock, uint64_t token)
{
	struct world *w = sc->w;

	HASP_ASSERT(!sc->busy);
	sc->busy = true;
	sc->op_f = f;
	sc->op_lock = lock;
	sc->op_token = token;
	sc->op_invoke_ns = w->now_ns;
	if (token != 0)
		nodesim_history_add(w->hist, w->now_ns, sc->proc,
				    "\"f\": \"%s\", \"type\": \"invoke\", \"lock\": \"%s\", \"token\": %llu",
				    f, lock_name(lock), (unsigned long long)token);
	else
		nodesim_history_add(w->hist, w->now_ns, sc->proc,
				    "\"f\": \"%s\", \"type\": \"invoke\", \"lock\": \"%s\"", f,
				    lock_name(lock));
}

/* Jepsen's completion types: ok, fail (certainly did not happen), info. */
static const char *outcome(int rc, bool certain_fail)
{
	return rc == 0 ? "ok" : certain_fail ? "fail" : "info";
}

static void done(struct hasp_client *c, const struct hasp_result *res, void *arg)
{
	struct sim_client *sc = arg;
	struct world *w = sc->w;
	const char *f = sc->op_f;
	const char *lock = lock_name(sc->op_lock);
	int rc = res->rc;

	(void)c;
	HASP_ASSERT(sc->busy);
	sc->busy = false;
	sc->act_ns = w->now_ns + world_rand(w, 30) * NS_PER_MS;
	if (strcmp(f, "acquire") == 0) {
		if (rc == 0) {
			nodesim_history_add(w->hist, w->now_ns, sc->proc,
					    "\"f\": \"acquire\", \"type\": \"ok\", \"lock\": \"%s\", "
					    "\"token\": %llu, \"valid_until\": %llu",
					    lock, (unsigned long long)res->lock.token,
					    (unsigned long long)res->lock.valid_until_ns);
			nodesim_check_grant(w->check, sc->op_lock, res->lock.token, sc->index,
					    sc->op_invoke_ns, w->now_ns, res->lock.valid_until_ns);
			sc->holding = true;
			sc->held_lock = sc->op_lock;
			sc->held = res->lock;
			w->res->grants++;
		} else if (sc->holding && sc->held_lock == sc->op_lock && rc != -HASP_EBUSY) {
			/* The holder's ACQUIRE re-arms the lease with its TTL:
			 * unanswered, the library caps the held lock's validity. */
			uint64_t until = hasp_client_lock_valid_until(sc->c, &sc->held);
			nodesim_history_add(w->hist, w->now_ns, sc->proc,
					    "\"f\": \"acquire\", \"type\": \"info\", \"lock\": \"%s\", \"rc\": %d, "
					    "\"token\": %llu, \"valid_until\": %llu",
					    lock, rc, (unsigned long long)sc->held.token, (unsigned long long)until);
			nodesim_check_validity_cap(w->check, sc->op_lock, sc->held.token, until);
		} else {
			nodesim_history_add(w->hist, w->now_ns, sc->proc,
					    "\"f\": \"acquire\", \"type\": \"%s\", \"lock\": \"%s\", \"rc\": %d",
					    outcome(rc, rc == -HASP_EBUSY), lock, rc);
			/* A WAIT given up is often asked again at once, with
			 * another TTL (issue 11, item 1). */
			if (rc == -HASP_ETIMEDOUT && world_rand(w, 2) == 0)
				sc->act_ns = w->now_ns;
		}
	} else if (strcmp(f, "release") == 0) {
		nodesim_history_add(w->hist, w->now_ns, sc->proc,
				    "\"f\": \"release\", \"type\": \"%s\", \"lock\": \"%s\", \"token\": %llu",
				    outcome(rc, rc == -HASP_ENOTHOLDER), lock,
				    (unsigned long long)sc->op_token);
		w->res->releases += rc == 0;
	} else if (strcmp(f, "renew") == 0) {
		if (rc == 0) {
			nodesim_history_add(w->hist, w->now_ns, sc->proc,
					    "\"f\": \"renew\", \"type\": \"ok\", \"lock\": \"%s\", "
					    "\"token\": %llu, \"valid_until\": %llu",
					    lock, (unsigned long long)sc->op_token,
					    (unsigned long long)res->lock.valid_until_ns);
			nodesim_check_renew_ok(w->check, sc->op_lock, sc->op_token,
					       res->lock.valid_until_ns);
			if (sc->holding && sc->held.token == sc->op_token) {
				sc->held.ttl_ms = res->lock.ttl_ms;
				sc->held.valid_until_ns = res->lock.valid_until_ns;
			}
			w->res->renews++;
		} else {
			bool refused = rc == -HASP_ENOTHOLDER;
			bool ours = sc->holding && sc->held.token == sc->op_token;
			/* Unanswered, it may have shortened the lease: the
			 * library's validity after it bounds the hold. */
			if (!refused && ours) {
				uint64_t until = hasp_client_lock_valid_until(sc->c, &sc->held);
				nodesim_history_add(w->hist, w->now_ns, sc->proc,
						    "\"f\": \"renew\", \"type\": \"info\", \"lock\": \"%s\", "
						    "\"token\": %llu, \"rc\": %d, \"valid_until\": %llu",
						    lock, (unsigned long long)sc->op_token, rc,
						    (unsigned long long)until);
				nodesim_check_validity_cap(w->check, sc->op_lock, sc->op_token, until);
			} else {
				nodesim_history_add(w->hist, w->now_ns, sc->proc,
						    "\"f\": \"renew\", \"type\": \"%s\", \"lock\": \"%s\", "
						    "\"token\": %llu, \"rc\": %d",
						    outcome(rc, refused), lock, (unsigned long long)sc->op_token, rc);
			}
			if (refused) {
				nodesim_check_renew_refused(w->check, sc->op_lock, sc->op_token, w->now_ns);
				if (sc->holding && sc->held.token == sc->op_token)
					sc->holding = false;
			}
		}
	} else {
		HASP_ASSERT(strcmp(f, "read") == 0);
		if (rc == 0) {
			uint64_t holder = res->info.holder_session_id != 0 ? res->info.token : 0;
			nodesim_history_add(w->hist, w->now_ns, sc->proc,
					    "\"f\": \"read\", \"type\": \"ok\", \"lock\": \"%s\", "
					    "\"holder_token\": %llu",
					    lock, (unsigned long long)holder);
			w->res->reads++;
		} else {
			nodesim_history_add(w->hist, w->now_ns, sc->proc,
					    "\"f\": \"read\", \"type\": \"info\", \"lock\": \"%s\", \"rc\": %d",
					    lock, rc);
		}
	}
}

/* A call refused before anything was sent: certainly did not happen. */
static void start_failed(struct sim_client *sc, int rc)
{
	struct world *w = sc->w;
	nodesim_history_add(w->hist, w->now_ns, sc->proc,
			    "\"f\": \"%s\", \"type\": \"fail\", \"lock\": \"%s\", \"rc\": %d", sc->op_f,
			    lock_name(sc->op_lock), rc);
	sc->busy = false;
	sc->act_ns = w->now_ns + 10 * NS_PER_MS;
}

static void write_resource(struct sim_client *sc)
{
	struct world *w = sc->w;
	uint32_t l = sc->held_lock;
	bool accepted = sc->held.token >= w->resource_highest[l];

	if (accepted)
		w->resource_highest[l] = sc->held.token;
	nodesim_history_add(w->hist, w->now_ns, "resource",
			    "\"f\": \"write\", \"lock\": \"%s\", \"token\": %llu, \"accepted\": %s, "
			    "\"client\": \"%s\"",
			    lock_name(l), (unsigned long long)sc->held.token,
			    accepted ? "true" : "false", sc->proc);
	w->res->writes++;
	w->res->writes_refused += !accepted;
}

static void act_holding(struct sim_client *sc)
{
	struct world *w = sc->w;
	uint32_t r = world_rand(w, 100);
	uint64_t id;
	int rc;

	if (!hasp_client_lock_safe(sc->c, &sc->held, 0)) {
		sc->holding = false; /* expired by the client's own reckoning */
		return;
	}
	if (r < 45) {
		if (hasp_client_lock_safe(sc->c, &sc->held, 1))
			write_resource(sc);
		sc->act_ns = w->now_ns + world_rand(w, 50) * NS_PER_MS;
	} else if (r < 60) {
		/* Never shorter (unless --shrink): a renewal whose answer is
		 * lost leaves the client with its old validity (checker.py's
		 * rule), which a shorter TTL on the cluster undercuts. */
		uint32_t ttl = sc->held.ttl_ms + world_rand(w, 2000);
		if (w->shrink)
			ttl = 100 + world_rand(w, 2900);
		invoke(sc, "renew", sc->held_lock, sc->held.token);
		if ((rc = hasp_client_renew_async(sc->c, sc->held.name, sc->held.token, ttl, done, sc,
						  &id)) != 0)
			start_failed(sc, rc);
	} else if (r < 85) {
		/* The hold ends when the release starts (checker.py's holds). */
		nodesim_check_release_start(w->check, sc->held_lock, sc->held.token, w->now_ns);
		invoke(sc, "release", sc->held_lock, sc->held.token);
		sc->holding = false;
		if ((rc = hasp_client_release_async(sc->c, sc->held.name, sc->held.token, done, sc,
						    &id)) != 0)
			start_failed(sc, rc);
	} else if (r < 92) {
		/* A GC pause longer than the lease: nothing of this process
		 * runs; afterwards it asks libhasp again before writing. */
		sc->paused_until_ns = w->now_ns + ((uint64_t)sc->held.ttl_ms + world_rand(w, 1000)) *
							  NS_PER_MS;
		sc->act_ns = sc->paused_until_ns;
	} else {
		/* Overstay: the lease runs out on its own. Not asked for again
		 * before it has (with --shrink it is): an ACQUIRE by the holder
		 * re-arms the lock with the new TTL like a RENEW, and when its
		 * answer is lost, the validity of the old grant is no bound. */
		sc->holding = false;
		if (!w->shrink)
			sc->shunned_until_ns[sc->held_lock] = sc->held.valid_until_ns;
	}
}

static void act_idle(struct sim_client *sc)
{
	struct world *w = sc->w;
	uint32_t l = world_rand(w, NODESIM_LOCKS);
	uint64_t id;
	int rc;

	if (sc->shunned_until_ns[l] > w->now_ns)
		l = (l + 1) % NODESIM_LOCKS;
	if (sc->shunned_until_ns[l] > w->now_ns) {
		sc->act_ns = w->now_ns + 10 * NS_PER_MS;
		return;
	}

	if (world_rand(w, 100) < 15) {
		invoke(sc, "read", l, 0);
		if ((rc = hasp_client_lock_read_async(sc->c, lock_name(l), done, sc, &id)) != 0)
			start_failed(sc, rc);
		return;
	}
	struct hasp_acquire_opts o = {
		.ttl_ms = 100 + world_rand(w, 2900),
		.wait = world_rand(w, 2) == 0,
	};
	if (o.wait)
		o.wait_timeout_ms = 50 + world_rand(w, 2000);
	invoke(sc, "acquire", l, 0);
	if ((rc = hasp_client_acquire_async(sc->c, lock_name(l), &o, done, sc, &id)) != 0)
		start_failed(sc, rc);
}

/* The watcher: WATCHes both locks once, then records every event libhasp
 * hands it and every gap it reports (fault_client.c's watcher). */
static void watcher_run(struct sim_client *sc)
{
	struct world *w = sc->w;
	struct hasp_client_stats st;
	struct hasp_event ev;

	if (!sc->watching && w->workload_on) {
		sc->watching = true;
		for (uint32_t l = 0; l < NODESIM_LOCKS; l++) {
			nodesim_history_add(w->hist, w->now_ns, sc->proc,
					    "\"f\": \"watch\", \"type\": \"invoke\", \"lock\": \"%s\"",
					    lock_name(l));
			int rc = hasp_client_watch(sc->c, lock_name(l), false);
			nodesim_history_add(w->hist, w->now_ns, sc->proc,
					    "\"f\": \"watch\", \"type\": \"%s\", \"lock\": \"%s\", \"rc\": %d",
					    outcome(rc, false), lock_name(l), rc);
		}
	}
	for (;;) {
		int rc = hasp_client_next_event(sc->c, &ev, 0);
		hasp_client_stats_get(sc->c, &st);
		if (st.events_gaps != sc->gaps) {
			sc->gaps = st.events_gaps;
			nodesim_history_add(w->hist, w->now_ns, sc->proc,
					    "\"f\": \"event\", \"kind\": \"resync\", \"id\": \"gap-%llu\"",
					    (unsigned long long)sc->gaps);
		}
		if (rc != 0)
			break;
		if (ev.type == HASP_EVENT_RESYNC) {
			nodesim_history_add(w->hist, w->now_ns, sc->proc,
					    "\"f\": \"event\", \"kind\": \"resync\", \"id\": \"resync-%llu\"",
					    (unsigned long long)sc->gaps);
			continue;
		}
		const char *kind = ev.type == HASP_EVENT_LOCK_GRANTED ? "granted" :
				   ev.type == HASP_EVENT_LOCK_RELEASED ? "released" :
				   ev.type == HASP_EVENT_KV_PUT ? "put" : "delete";
		/* Its identity is what changed, whatever numbered it. */
		nodesim_history_add(w->hist, w->now_ns, sc->proc,
				    "\"f\": \"event\", \"kind\": \"%s\", \"lock\": \"%s\", \"token\": %llu, "
				    "\"id\": \"%s:%s:%llu\"",
				    kind, ev.name, (unsigned long long)ev.revision, kind, ev.name,
				    (unsigned long long)ev.revision);
	}
}

void world_watcher_end(struct world *w)
{
	nodesim_history_add(w->hist, w->now_ns, w->clients[w->watcher].proc, "\"f\": \"watch_end\"");
}

void world_clients_run(struct world *w)
{
	for (uint32_t k = 0; k < w->client_count; k++) {
		struct sim_client *sc = &w->clients[k];
		if (sc->paused_until_ns > w->now_ns)
			continue;
		if (k == w->watcher) {
			if (sc->wake_ns > w->now_ns)
				continue;
			int prc = hasp_client_process(sc->c, NULL);
			HASP_ASSERT(prc >= 0);
			watcher_run(sc);
			int t = hasp_client_timeout_ms(sc->c);
			sc->wake_ns = w->now_ns + (t >= 0 && t < 20 ? (t > 0 ? (uint64_t)t * NS_PER_MS : 100000u)
								    : 20 * NS_PER_MS);
			continue;
		}
		bool act = !sc->busy && w->workload_on && sc->act_ns <= w->now_ns;
		if (sc->wake_ns > w->now_ns && !act)
			continue;
		int prc = hasp_client_process(sc->c, NULL);
		HASP_ASSERT(prc >= 0);
		if (!sc->busy && w->workload_on && sc->act_ns <= w->now_ns) {
			if (sc->holding)
				act_holding(sc);
			else
				act_idle(sc);
			if (sc->busy) /* sends what was just started */
				HASP_ASSERT(hasp_client_process(sc->c, NULL) >= 0);
		}
		/* libhasp's own next instant (retransmits, WAIT rechecks,
		 * keepalives), and a look at least every 20 ms. */
		int t = hasp_client_timeout_ms(sc->c);
		uint64_t next = w->now_ns + 20 * NS_PER_MS;
		if (t >= 0 && (uint64_t)t < 20)
			next = w->now_ns + (t > 0 ? (uint64_t)t * NS_PER_MS : 100000u);
		sc->wake_ns = next;
	}
}
