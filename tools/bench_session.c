/*
 * hasp-bench's client sessions (tools/bench_engine_impl.h): addresses and
 * redirects, the session table, encoding requests, the per-client state
 * machine of every workload, replies and pushed events, and the timers
 * (retransmit with the same sequence number, LOCK_READ while queued,
 * keepalives, giving up). Each client has at most one request in flight
 * (c->opcode != 0), so its sequence numbers advance one at a time and a
 * reply is matched by (session id, seq, opcode); SESSION_OPEN replies by
 * their seq, which is the client's index + 1.
 */
#include "tools/bench_engine_impl.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/wire_auth.h"
#include "hasp/errors.h"
#include "hasp/wire.h"

/* ---- addresses ---- */

int bench_session_parse_cluster(struct bench_engine *e, const char *list)
{
	const char *p = list;

	while (*p != '\0') {
		char one[64];
		size_t len = strcspn(p, ",");
		if (len == 0 || len >= sizeof(one) || e->node_count == NODES_MAX)
			return -HASP_ECONFIG;
		memcpy(one, p, len);
		one[len] = '\0';
		char *colon = strrchr(one, ':');
		if (colon == NULL)
			return -HASP_ECONFIG;
		*colon = '\0';
		char *end;
		unsigned long port = strtoul(colon + 1, &end, 10);
		struct sockaddr_in *a = &e->nodes[e->node_count];
		memset(a, 0, sizeof(*a));
		a->sin_family = AF_INET;
		if (*end != '\0' || port == 0 || port > 65535 || inet_pton(AF_INET, one, &a->sin_addr) != 1)
			return -HASP_ECONFIG;
		a->sin_port = htons((uint16_t)port);
		e->node_count++;
		p += len;
		if (*p == ',')
			p++;
	}
	return e->node_count > 0 ? 0 : -HASP_ECONFIG;
}

static uint16_t node_find_or_add(struct bench_engine *e, const uint8_t ipv4[4], uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	memcpy(&a.sin_addr.s_addr, ipv4, 4); /* dotted order is network order */
	for (uint32_t i = 0; i < e->node_count; i++)
		if (e->nodes[i].sin_addr.s_addr == a.sin_addr.s_addr && e->nodes[i].sin_port == a.sin_port)
			return (uint16_t)i;
	if (e->node_count == NODES_MAX)
		return e->leader_hint;
	e->nodes[e->node_count] = a;
	return (uint16_t)e->node_count++;
}

/* A new leader drops the watches registered on the old one (they are
 * node-local, node/notify.c): counting leader changes lets the burst
 * coordinator register its watchers again. */
static void set_leader_hint(struct bench_engine *e, uint16_t node)
{
	if (node != e->leader_hint)
		e->leader_epoch++;
	e->leader_hint = node;
}

/* ---- session table ---- */

static void hash_put(struct bench_engine *e, uint64_t session_id, uint32_t index)
{
	uint32_t h = (uint32_t)(session_id * 0x9e3779b97f4a7c15ull >> 32) & e->hash_mask;
	while (e->hash_keys[h] != 0 && e->hash_keys[h] != session_id)
		h = (h + 1u) & e->hash_mask;
	e->hash_keys[h] = session_id;
	e->hash_vals[h] = index + 1u;
}

/* Returns the client index or -1. A reopened client leaves its old id in
 * the table pointing at it; a late reply to the old id is then not the
 * request in flight and counts as stray. */
static int64_t hash_get(const struct bench_engine *e, uint64_t session_id)
{
	if (session_id == 0)
		return -1;
	uint32_t h = (uint32_t)(session_id * 0x9e3779b97f4a7c15ull >> 32) & e->hash_mask;
	while (e->hash_keys[h] != 0) {
		if (e->hash_keys[h] == session_id)
			return (int64_t)e->hash_vals[h] - 1;
		h = (h + 1u) & e->hash_mask;
	}
	return -1;
}

/* ---- names and requests ---- */

static size_t key_name(const struct bench_engine *e, uint32_t key, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/k%u", e->cfg->prefix, key);
	HASP_ASSERT(n > 0 && (size_t)n < size);
	return (size_t)n;
}

/* Encodes client c's request in flight. Deterministic: a retransmission
 * produces the same bytes. */
int bench_session_encode(struct bench_engine *e, uint32_t index, uint8_t *buf)
{
	struct client *c = &e->clients[index];
	struct hasp_wire_msg m;
	char name[HASP_NAME_SIZE_MAX + 1];
	size_t name_size = key_name(e, c->key, name, sizeof(name));
	struct hasp_wire_bytes nb = { (const uint8_t *)name, name_size };

	memset(&m, 0, sizeof(m));
	m.hdr.version = e->cfg->auth ? 2 : 1;
	m.hdr.opcode = c->opcode;
	m.hdr.session_id = c->session_id;
	m.hdr.seq = c->seq;
	/* One request in flight: every lower number was answered or given up
	 * and is never sent again, so the node may drop their cached replies
	 * (docs/PROTOCOL.md, "Exactly once"). */
	if (c->opcode != HASP_OP_SESSION_OPEN)
		m.hdr.flags = HASP_WIRE_F_SEQ_FLOOR;
	switch (c->opcode) {
	case HASP_OP_SESSION_OPEN:
		m.hdr.session_id = 0;
		m.body.session_open.client_nonce = c->nonce;
		m.body.session_open.ttl_ms = e->cfg->session_ttl_ms;
		m.body.session_open.identity =
			(struct hasp_wire_bytes){ e->cfg->identity, e->cfg->identity_size };
		break;
	case HASP_OP_SESSION_KEEPALIVE:
	case HASP_OP_SESSION_CLOSE:
	case HASP_OP_WATCH_STATUS:
		break;
	case HASP_OP_ACQUIRE:
		m.body.acquire.name = nb;
		m.body.acquire.ttl_ms = e->cfg->lock_ttl_ms;
		m.body.acquire.mode = (e->cfg->wait || (e->cfg->workload == BENCH_WL_BURST && !c->hold) ||
				       (e->cfg->workload == BENCH_WL_STORM &&
					storm_role(e, index) == STORM_WAITER))
					      ? HASP_ACQUIRE_WAIT
					      : HASP_ACQUIRE_TRY;
		break;
	case HASP_OP_RELEASE:
		m.body.release.name = nb;
		m.body.release.token = c->token;
		break;
	case HASP_OP_LOCK_READ:
		m.body.lock_read.name = nb;
		break;
	case HASP_OP_WATCH:
		m.body.watch.name = nb;
		break;
	case HASP_OP_KV_PUT:
		m.body.kv_put.key = nb;
		m.body.kv_put.value.data = e->value;
		m.body.kv_put.value.size = e->cfg->value_size;
		break;
	case HASP_OP_KV_GET:
		m.body.kv_get.name = nb;
		break;
	default:
		HASP_UNREACHABLE();
	}
	int size = hasp_wire_encode(&m, buf, HASP_DATAGRAM_SIZE_MAX);
	if (size > 0 && e->cfg->auth)
		hasp_wire_seal(c->opcode == HASP_OP_SESSION_OPEN ? &e->cfg->identity_key : &c->session_key,
			       buf, (size_t)size);
	return size;
}

static void queue_send(struct bench_engine *e, uint32_t index)
{
	struct client *c = &e->clients[index];

	if (c->in_send_queue)
		return;
	HASP_ASSERT(e->send_len < e->client_count);
	e->send_queue[(e->send_head + e->send_len) % e->client_count] = index;
	e->send_len++;
	c->in_send_queue = true;
}

/* Starts a new request (next sequence number) on client `index`. */
void bench_session_request(struct bench_engine *e, uint32_t index, uint8_t opcode)
{
	struct client *c = &e->clients[index];

	HASP_ASSERT(c->opcode == 0);
	c->opcode = opcode;
	if (opcode == HASP_OP_SESSION_OPEN)
		c->seq = (uint64_t)index + 1u;
	else
		c->seq++;
	c->req_first_ns = 0; /* set by the first send */
	c->redirects = 0;
	c->req_due_ns = e->now;
	c->background = false;
	queue_send(e, index);
}

void bench_session_open(struct bench_engine *e, uint32_t index)
{
	struct client *c = &e->clients[index];

	c->session_id = 0;
	c->nonce = prng_next(&e->nonce_prng) | 1u;
	c->state = C_OPENING;
	/* Start where the last answer came from: during start-up every session
	 * would otherwise be redirected on its own. */
	c->node = e->leader_hint;
	c->opcode = 0;
	bench_session_request(e, index, HASP_OP_SESSION_OPEN);
}

/* ---- operations ---- */

static uint32_t pick_key(struct bench_engine *e, uint32_t index)
{
	return bench_key_pick(e->cfg, &e->zipf, &e->prng, index, e->client_count);
}

void bench_session_start_op(struct bench_engine *e, uint32_t index, uint64_t intended_ns)
{
	struct client *c = &e->clients[index];
	const struct bench_config *cfg = e->cfg;

	HASP_ASSERT(c->state == C_IDLE || c->state == C_WATCHING);
	c->op_start_ns = intended_ns;
	/* Burst and storm rounds are measured by their coordinator, not per client. */
	c->measured = intended_ns >= e->measure_start_ns && cfg->workload != BENCH_WL_BURST &&
		      cfg->workload != BENCH_WL_STORM;
	c->reacquires = 0;
	e->res->ops_started++;
	switch (cfg->workload) {
	case BENCH_WL_CYCLE:
	case BENCH_WL_BURST:
	case BENCH_WL_STORM:
		c->key = pick_key(e, index);
		c->state = C_ACQUIRE;
		c->acq_first_ns = 0;
		break;
	case BENCH_WL_KEEPALIVE:
		c->state = C_OP;
		break;
	case BENCH_WL_KV:
		c->key = pick_key(e, index);
		c->put = prng_below(&e->prng, 100) < cfg->put_percent;
		c->state = C_OP;
		break;
	}
	if (c->opcode != 0) {
		/* A background keepalive is in flight: the operation's first
		 * request goes out when it completes (see complete_request). */
		return;
	}
	switch (cfg->workload) {
	case BENCH_WL_CYCLE:
	case BENCH_WL_BURST:
	case BENCH_WL_STORM:
		bench_session_request(e, index, HASP_OP_ACQUIRE);
		break;
	case BENCH_WL_KEEPALIVE:
		bench_session_request(e, index, HASP_OP_SESSION_KEEPALIVE);
		break;
	case BENCH_WL_KV:
		bench_session_request(e, index, c->put ? HASP_OP_KV_PUT : HASP_OP_KV_GET);
		break;
	}
}

/* The operation's first request, when start_op found the client busy. */
static void start_pending_request(struct bench_engine *e, uint32_t index)
{
	struct client *c = &e->clients[index];

	if (c->state == C_ACQUIRE)
		bench_session_request(e, index, HASP_OP_ACQUIRE);
	else if (c->state == C_RELEASE)
		bench_session_request(e, index, HASP_OP_RELEASE);
	else if (c->state == C_OP && e->cfg->workload == BENCH_WL_KEEPALIVE)
		bench_session_request(e, index, HASP_OP_SESSION_KEEPALIVE);
	else if (c->state == C_OP)
		bench_session_request(e, index, c->put ? HASP_OP_KV_PUT : HASP_OP_KV_GET);
}

/* A sample that started at start_ns and ends now (e->now). */
void bench_session_record(struct bench_engine *e, bool measured, enum bench_lat l, uint64_t start_ns)
{
	if (measured)
		bench_record(e->cfg, e->res, l, start_ns, e->now);
}

void bench_session_make_idle(struct bench_engine *e, uint32_t index)
{
	struct client *c = &e->clients[index];

	c->state = bench_is_watcher(e, index) ? C_WATCHING : C_IDLE;
	if (e->cfg->workload == BENCH_WL_BURST || e->cfg->workload == BENCH_WL_STORM)
		return; /* the round coordinator starts their operations */
	/* Open loop: a waiting arrival takes this client at once. */
	if (e->cfg->rate > 0.0 && e->backlog.len > 0 && e->admitting) {
		bench_session_start_op(e, index, bench_backlog_pop(&e->backlog));
		return;
	}
	e->idle[e->idle_len++] = index;
	HASP_ASSERT(e->idle_len <= e->client_count);
}

static void op_done(struct bench_engine *e, uint32_t index, bool ok)
{
	struct client *c = &e->clients[index];

	if (c->measured) {
		e->res->ops++;
		bench_session_record(e, true, BENCH_LAT_OP, c->op_start_ns);
		if (e->now > e->last_done_ns)
			e->last_done_ns = e->now;
		if (!ok)
			e->res->err.failed_ops++;
	}
	c->hold = false;
	bench_session_make_idle(e, index);
}

static void granted(struct bench_engine *e, uint32_t index, uint64_t token)
{
	struct client *c = &e->clients[index];

	c->token = token;
	bench_session_record(e, c->measured, BENCH_LAT_ACQUIRE, c->acq_first_ns);
	if (c->hold) {
		c->state = C_HOLDING;
		if (e->cfg->workload == BENCH_WL_STORM)
			bench_storm_granted(e, index);
		return;
	}
	if (e->cfg->workload == BENCH_WL_BURST && !c->told) {
		c->told = true;
		e->round_told++;
		e->round_last_told_ns = e->now;
	}
	c->state = C_RELEASE;
	if (c->opcode == 0)
		bench_session_request(e, index, HASP_OP_RELEASE);
}

/* ---- replies ---- */

static void handle_reply(struct bench_engine *e, uint32_t index, const struct hasp_wire_msg *m)
{
	struct client *c = &e->clients[index];
	const struct bench_config *cfg = e->cfg;
	uint8_t opcode = c->opcode;
	uint16_t status = m->hdr.status;
	bool background = c->background;

	/* Statuses that mean "send the same request again". */
	if (status == HASP_STATUS_NOT_LEADER) {
		e->res->err.redirects++;
		if (c->redirects < 255)
			c->redirects++;
		if (m->body.not_leader.known) {
			c->node = node_find_or_add(e, m->body.not_leader.ipv4, m->body.not_leader.port);
			set_leader_hint(e, c->node);
			/* At once the first times; then back off, so stale hints
			 * during an election cannot bounce a request in a loop. */
			c->req_due_ns = c->redirects <= 2 ? e->now : e->now + BACKOFF_NS;
		} else {
			c->node = (uint16_t)((c->node + 1u) % e->node_count);
			c->req_due_ns = e->now + BACKOFF_NS;
		}
		if (c->req_due_ns <= e->now)
			queue_send(e, index);
		return;
	}
	if (status == HASP_STATUS_UNAVAILABLE || status == HASP_STATUS_OVERLOADED) {
		if (status == HASP_STATUS_UNAVAILABLE)
			c->node = (uint16_t)((c->node + 1u) % e->node_count);
		c->req_due_ns = e->now + BACKOFF_NS;
		return;
	}

	c->opcode = 0;
	/* Only a committed command renewed the session on the node: a read or
	 * a watch query must not put the keepalive off (a waiter re-reading
	 * its lock, a storm watcher asking WATCH_STATUS round after round,
	 * would lose its session). */
	if (hasp_wire_op_is_command(opcode))
		c->renewed_ns = e->now;
	set_leader_hint(e, c->node);
	if (status == HASP_STATUS_SESSION_EXPIRED) {
		/* Everything this session held is gone; its operation failed. */
		e->res->err.session_reopens++;
		if (c->state == C_CLOSING)
			c->state = C_DONE; /* closed by its expiry */
		if (c->state != C_OPENING && c->state != C_DONE) {
			if (c->measured)
				e->res->err.failed_ops++;
			bench_session_open(e, index);
		}
		return;
	}

	switch (opcode) {
	case HASP_OP_SESSION_OPEN:
		if (status != HASP_STATUS_OK) {
			c->state = C_DONE;
			e->res->err.sessions_failed++;
			return;
		}
		c->session_id = m->body.session_opened.session_id;
		c->seq = 0;
		if (cfg->auth)
			hasp_session_key(&cfg->identity_key, c->session_id, c->nonce, &c->session_key);
		hash_put(e, c->session_id, index);
		if (bench_is_watcher(e, index)) {
			c->state = C_IDLE;
			bench_session_request(e, index, HASP_OP_WATCH);
			return;
		}
		bench_session_make_idle(e, index);
		return;
	case HASP_OP_WATCH:
		c->state = C_WATCHING;
		c->watch_epoch = e->leader_epoch;
		return;
	case HASP_OP_SESSION_CLOSE:
		c->state = C_DONE;
		return;
	case HASP_OP_SESSION_KEEPALIVE:
		if (background) {
			start_pending_request(e, index);
			return;
		}
		bench_session_record(e, c->measured, BENCH_LAT_KEEPALIVE, c->req_first_ns);
		op_done(e, index, status == HASP_STATUS_OK);
		return;
	case HASP_OP_KV_PUT:
	case HASP_OP_KV_GET:
		bench_session_record(e, c->measured, opcode == HASP_OP_KV_PUT ? BENCH_LAT_PUT : BENCH_LAT_GET,
				     c->req_first_ns);
		op_done(e, index, status == HASP_STATUS_OK || status == HASP_STATUS_NOT_FOUND);
		return;
	case HASP_OP_ACQUIRE:
		if (status == HASP_STATUS_GRANTED) {
			granted(e, index, m->body.granted.token);
		} else if (status == HASP_STATUS_QUEUED) {
			c->state = C_WAITING;
			c->wait_since_ns = e->now;
		} else if (status == HASP_STATUS_BUSY) {
			if (c->measured)
				e->res->busy++;
			op_done(e, index, true);
		} else {
			op_done(e, index, false);
		}
		return;
	case HASP_OP_WATCH_STATUS:
		bench_storm_watch_status(e, index, status, &m->body.watch_status);
		return;
	case HASP_OP_LOCK_READ:
		if (c->state == C_WATCHING) {
			bench_storm_watch_read(e, index, status, &m->body.lock_info);
			return;
		}
		if (c->state != C_WAITING) {
			/* The grant event won the race: send what it left pending. */
			start_pending_request(e, index);
			return;
		}
		if (status == HASP_STATUS_OK && m->body.lock_info.holder_session_id == c->session_id) {
			granted(e, index, m->body.lock_info.token);
		} else if (status == HASP_STATUS_NOT_FOUND && c->reacquires < REACQUIRE_MAX) {
			/* Free with us still waiting: our entry is gone; ask again. */
			c->reacquires++;
			c->state = C_ACQUIRE;
			bench_session_request(e, index, HASP_OP_ACQUIRE);
		}
		return;
	case HASP_OP_RELEASE:
		bench_session_record(e, c->measured, BENCH_LAT_RELEASE, c->req_first_ns);
		if (status == HASP_STATUS_OK && c->measured)
			e->res->cycles++;
		if (cfg->workload == BENCH_WL_BURST && index == 0) {
			/* The holder's release: start of the notify clock. */
			c->state = C_IDLE;
			return;
		}
		if (cfg->workload == BENCH_WL_STORM) {
			/* A holder's release in the window (told: it was
			 * accepted), or a waiter's after the verdict. */
			c->state = C_IDLE;
			c->hold = false;
			if (storm_role(e, index) == STORM_HOLDER)
				c->told = status == HASP_STATUS_OK;
			return;
		}
		op_done(e, index, status == HASP_STATUS_OK);
		return;
	default:
		HASP_UNREACHABLE();
	}
}

static void handle_event(struct bench_engine *e, uint32_t index, const struct hasp_wire_msg *m)
{
	struct client *c = &e->clients[index];
	char name[HASP_NAME_SIZE_MAX + 1];
	size_t size = key_name(e, c->key, name, sizeof(name));
	const struct hasp_wire_event *ev = &m->body.event;

	e->res->events++;
	c->event_index = m->hdr.seq;
	c->event_sub = ev->sub;
	if (ev->name.size != size || memcmp(ev->name.data, name, size) != 0)
		return;
	if (e->cfg->workload == BENCH_WL_STORM && storm_role(e, index) == STORM_WATCHER) {
		bench_storm_watch_event(e, index, ev);
		return;
	}
	if (ev->type == HASP_EVENT_LOCK_GRANTED && c->state == C_WAITING) {
		granted(e, index, ev->revision);
		return;
	}
	if (ev->type == HASP_EVENT_LOCK_RELEASED && c->state == C_WATCHING &&
	    e->round_phase == R_RELEASED && !c->told && ev->revision >= e->clients[0].token) {
		c->told = true;
		e->round_told++;
		e->round_last_told_ns = e->now;
	}
}

void bench_session_receive(struct bench_engine *e, const uint8_t *data, size_t size)
{
	struct hasp_wire_msg m;
	int64_t index;

	if (hasp_wire_decode_reply(data, size, &m) != 0 || m.hdr.version != (e->cfg->auth ? 2 : 1)) {
		e->res->err.malformed++;
		return;
	}
	if (m.hdr.opcode == HASP_OP_SESSION_OPEN) {
		index = (int64_t)m.hdr.seq - 1;
		if (index < 0 || index >= (int64_t)e->client_count ||
		    e->clients[index].opcode != HASP_OP_SESSION_OPEN) {
			e->res->err.stray++;
			return;
		}
	} else {
		index = hash_get(e, m.hdr.session_id);
		if (index < 0 || e->clients[index].session_id != m.hdr.session_id) {
			e->res->err.stray++;
			return;
		}
	}
	struct client *c = &e->clients[index];
	/* Wire v2: nothing unverified is looked at (an open's reply under the
	 * identity key, the rest under the session's key). */
	if (e->cfg->auth &&
	    !hasp_wire_tag_ok(m.hdr.opcode == HASP_OP_SESSION_OPEN ? &e->cfg->identity_key : &c->session_key,
			      data, size)) {
		e->res->err.malformed++;
		return;
	}
	if (m.hdr.opcode == HASP_OP_EVENT) {
		handle_event(e, (uint32_t)index, &m);
		return;
	}
	if (c->opcode == 0 || m.hdr.opcode != c->opcode || m.hdr.seq != c->seq) {
		e->res->err.stray++; /* a duplicate, or a reply to a request given up */
		return;
	}
	if (m.hdr.status < HASP_STATUS_COUNT) {
		e->res->statuses[m.hdr.status]++;
		e->res->op_statuses[m.hdr.opcode % BENCH_OPCODE_LIMIT][m.hdr.status]++;
	}
	handle_reply(e, (uint32_t)index, &m);
}

/* Retransmits, wait re-reads, background keepalives, given-up requests. */
void bench_session_scan_timers(struct bench_engine *e)
{
	const struct bench_config *cfg = e->cfg;
	uint64_t deadline_ns = (uint64_t)cfg->request_deadline_ms * 1000000u;
	uint64_t recheck_ns = (uint64_t)cfg->wait_recheck_ms * 1000000u;
	uint64_t keepalive_ns = (uint64_t)cfg->session_ttl_ms * 1000000u / 3u;

	for (uint32_t i = 0; i < e->client_count; i++) {
		struct client *c = &e->clients[i];
		if (c->opcode != 0) {
			if (c->in_send_queue || e->now < c->req_due_ns)
				continue;
			if (c->req_first_ns != 0 && e->now - c->req_first_ns >= deadline_ns) {
				/* Given up: the outcome is unknown and the slot in the
				 * window stays unanswered, so start a new session. */
				e->res->err.timeouts++;
				uint8_t state = c->state;
				bool measured = c->measured && state != C_OPENING && state != C_CLOSING;
				c->opcode = 0;
				if (state == C_CLOSING) {
					e->res->err.closes_unanswered++;
					c->state = C_DONE;
					continue;
				}
				if (state == C_OPENING) {
					c->state = C_DONE;
					e->res->err.sessions_failed++;
					continue;
				}
				if (measured)
					e->res->err.failed_ops++;
				e->res->err.session_reopens++;
				bench_session_open(e, i);
				continue;
			}
			if (c->req_first_ns != 0) {
				e->res->err.retransmits++;
				if (e->node_count > 1 && e->now - c->req_first_ns >= 2u *
				    (uint64_t)cfg->request_timeout_ms * 1000000u)
					c->node = (uint16_t)((c->node + 1u) % e->node_count);
			}
			queue_send(e, i);
			continue;
		}
		if (c->state == C_WAITING && cfg->workload == BENCH_WL_STORM &&
		    storm_holder_of(e, i)->state == C_HOLDING) {
			/* A storm waiter waits for its holder's release, which
			 * may be a whole set-up away: its re-read clock and its
			 * patience start there, not at its ACQUIRE (20,000
			 * LOCK_READs every 500 ms would be the load). */
			c->wait_since_ns = e->now;
			c->acq_first_ns = e->now;
		}
		if (c->state == C_WAITING && e->now - c->wait_since_ns >= recheck_ns) {
			uint64_t waited = e->now - c->acq_first_ns;
			if (cfg->request_deadline_ms > 0 && waited >= 2u * deadline_ns) {
				e->res->err.wait_timeouts++;
				op_done(e, i, false);
				continue;
			}
			e->res->err.wait_rereads++;
			c->wait_since_ns = e->now;
			bench_session_request(e, i, HASP_OP_LOCK_READ);
			continue;
		}
		if ((c->state == C_IDLE || c->state == C_WAITING || c->state == C_WATCHING ||
		     c->state == C_HOLDING) &&
		    e->now - c->renewed_ns >= keepalive_ns) {
			bench_session_request(e, i, HASP_OP_SESSION_KEEPALIVE);
			c->background = true;
		}
	}
}
