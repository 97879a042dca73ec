/*
 * Pushed events: waiters told of their grant, watchers told of changes.
 *
 * The node remembers, per session, the address of its most recent request
 * and the identity of the last event it sent there (PROTOCOL.md "Event
 * identity and gaps": each event names that one as its prev). This is not
 * replicated: a new leader learns addresses as requests arrive, and a
 * client that misses an event re-reads (LOCK_READ), which the client
 * library does on a timer while it waits. Only the leader pushes.
 *
 * A LOCK_GRANTED event for the new holder is sent at once, never
 * rate-limited: it is the answer a WAIT acquirer is waiting for. Watch
 * events pass a token bucket (watch_rate per second, watch_burst deep); an
 * event that finds no token is held in its watch, and a newer event for the
 * same watch replaces it (coalescing: a burst of releases becomes the last
 * state), marked so that the client reports the gap. Held events go out
 * from node_work() as tokens refill.
 *
 * Watches are node-local, in the registry of node/watch_index.c (capacity
 * watches_max, allocated at start): an event costs its matching watchers
 * (one lookup by name, one per prefix length in use), a session's end
 * costs its own watches, and held events wait on a FIFO, so nothing here
 * scans every watch. A new leader has none of them: the client library
 * re-registers its watches when it opens a new session or a new leader
 * answers, and a watcher re-reads on a gap (libhasp's RESYNC event).
 */
#include "node/notify.h"

#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/wire_auth.h"
#include "hasp/errors.h"

int node_set_event_lanes(struct node *n, const struct node_event_lanes *lanes)
{
	HASP_ASSERT(n != NULL && lanes != NULL);
	if (lanes->count == 0 || lanes->count > NODE_EVENT_LANES_MAX || lanes->send == NULL)
		return -HASP_EINVAL;
	n->lanes = *lanes;
	return 0;
}

/* A session's lane: a hash of its id (ids are allocated in sequence, so
 * a plain modulo would do too; the multiply keeps lanes even if not). */
static uint32_t event_lane(const struct node *n, uint64_t session_id)
{
	HASP_ASSERT(n->lanes.count > 0);
	return (uint32_t)(((session_id * 0x9e3779b97f4a7c15ull) >> 32) % n->lanes.count);
}

uint32_t node_event_lcore(const struct node *n, uint64_t session_id)
{
	return n->lanes.count == 0 ? 0 : 1 + event_lane(n, session_id);
}

/* Counts `count` watch events of session `session_id` with one outcome:
 * the node's total and the row of the lcore that sends its events. */
static void watch_count(struct node *n, uint64_t session_id, enum node_watch_outcome o, uint64_t count)
{
	uint64_t *total[NODE_WATCH_OUTCOMES] = {
		[NODE_WATCH_SENT] = &n->stats.watch_events_sent,
		[NODE_WATCH_DEFERRED] = &n->stats.watch_rate_limited,
		[NODE_WATCH_COALESCED] = &n->stats.watch_coalesced,
		[NODE_WATCH_DROPPED] = &n->stats.watch_dropped,
	};
	*total[o] += count;
	n->watch_by_lcore[node_event_lcore(n, session_id)].count[o] += count;
}

int notify_init(struct node *n)
{
	uint32_t want = n->cfg.locks.sessions_max * 2u;
	uint32_t size = 16;
	while (size < want)
		size <<= 1;
	n->sessions = hasp_calloc(size, sizeof(*n->sessions));
	n->sessions_mask = size - 1;
	if (n->sessions == NULL)
		return -HASP_ENOMEM;
	/* Keyed per node: watch names are client input. */
	int rc = watch_index_init(&n->watches, n->cfg.watches_max, prng_next(&n->prng));
	if (rc != 0)
		return rc;
	/* Open addressing needs a power of two kept at most half full. */
	HASP_ASSERT((size & (size - 1)) == 0 && size >= want);
	HASP_ASSERT(n->watches.count == 0);
	return 0;
}

void notify_deinit(struct node *n)
{
	hasp_free(n->sessions);
	n->sessions = NULL;
	watch_index_deinit(&n->watches);
}

static uint32_t session_hash(uint64_t id)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	return (uint32_t)id;
}

static struct node_session *session_find(struct node *n, uint64_t id)
{
	HASP_ASSERT(id != 0); /* 0 marks a free slot */
	for (uint32_t i = session_hash(id) & n->sessions_mask, k = 0; k <= n->sessions_mask;
	     i = (i + 1) & n->sessions_mask, k++) {
		if (n->sessions[i].id == id)
			return &n->sessions[i];
		if (n->sessions[i].id == 0)
			return NULL;
	}
	return NULL;
}

bool notify_session_seen(struct node *n, uint64_t id, uint64_t seq, uint32_t ip, uint16_t port)
{
	HASP_ASSERT(id != 0);
	struct node_session *s = session_find(n, id);
	if (s == NULL) {
		/* Kept at most half full (sized 2 x sessions_max), so probes
		 * stay short; sessions the state machine no longer has are
		 * removed when they end. */
		uint32_t i = session_hash(id) & n->sessions_mask;
		uint32_t k = 0;
		while (n->sessions[i].id != 0 && k++ <= n->sessions_mask)
			i = (i + 1) & n->sessions_mask;
		if (n->sessions[i].id != 0) {
			n->stats.session_table_full++;
			return false;
		}
		s = &n->sessions[i];
		s->id = id;
		s->last_event_index = 0;
		s->last_event_sub = 0;
		s->watch_head = WATCH_NONE;
	} else if (seq <= s->seen_seq) {
		if (s->ip != ip || s->port != port)
			n->stats.session_address_kept++;
		return false;
	}
	HASP_ASSERT(s->id == id);
	s->seen_seq = seq;
	s->ip = ip;
	s->port = port;
	HASP_ASSERT(s->seen_seq == seq);
	return true;
}

/* Linear-probing delete with backward shift (no tombstones). */
void notify_session_end(struct node *n, uint64_t id)
{
	struct node_session *s = session_find(n, id);
	if (s == NULL)
		return;
	/* Its watches go with it (and their held events). */
	watch_count(n, id, NODE_WATCH_DROPPED, watch_index_remove_session(&n->watches, &s->watch_head));
	uint32_t i = (uint32_t)(s - n->sessions);
	n->sessions[i].id = 0;
	for (uint32_t j = (i + 1) & n->sessions_mask; n->sessions[j].id != 0;
	     j = (j + 1) & n->sessions_mask) {
		uint32_t home = session_hash(n->sessions[j].id) & n->sessions_mask;
		/* Move j back to the hole i when its home is not in (i, j]. */
		bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!stays) {
			n->sessions[i] = n->sessions[j];
			n->sessions[j].id = 0;
			i = j;
		}
	}
	HASP_DASSERT(session_find(n, id) == NULL);
}

void notify_sessions_prune(struct node *n)
{
	/* A delete shifts a later entry back into slot i (or one from the
	 * table's start, past the wrap, to the end): look at slot i again
	 * until it holds a live session or nothing. */
	for (uint32_t i = 0; i <= n->sessions_mask; i++) {
		struct locks_session_info si;
		while (n->sessions[i].id != 0 && !locks_session_read(&n->sm, n->sessions[i].id, &si)) {
			notify_session_end(n, n->sessions[i].id);
			n->stats.sessions_pruned++;
		}
	}
}

/* The identity and content of one event to push. */
struct push {
	uint64_t index; /* Raft index of the command that caused it */
	uint32_t sub;   /* its ordinal among that command's events */
	bool after_gap; /* events for this session were dropped before it */
	uint8_t type;
	uint8_t name_len;
	uint64_t revision;
	const uint8_t *name;
	uint64_t lease_id; /* a waiter's LOCK_GRANTED: its lease and TTL */
	uint32_t ttl_ms;
};

/* Sends one EVENT to the session's address, chained to the last event sent
 * there (docs/PROTOCOL.md "Event identity"). The same event is sent to a
 * session once even when several of its waits and watches match it. */
static bool push_event(struct node *n, uint64_t session_id, const struct push *e)
{
	/* Every event has an identity: the index of an applied command. */
	HASP_ASSERT(e->index != 0 && e->index <= n->applied);
	struct node_session *s = session_find(n, session_id);
	if (s == NULL) {
		n->stats.events_no_address++;
		return false;
	}
	if (s->last_event_index == e->index && s->last_event_sub == e->sub) {
		n->stats.events_deduplicated++;
		return false;
	}
	/* A stalled leader not yet confirmed (node.c node_clock()) sends
	 * nothing: the session's next event names no predecessor, so the
	 * client reports the gap (libhasp: RESYNC) and re-reads. */
	if (n->lead_unconfirmed) {
		n->stats.events_unconfirmed++;
		s->last_event_index = 0;
		s->last_event_sub = HASP_WIRE_EVENT_PREV_GAP;
		return false;
	}
	/* With authentication an event is sealed with its session's key, like
	 * a reply; a session the node cannot key (ended, identity removed)
	 * gets nothing. */
	const struct auth_key *key = NULL;
	if (n->cfg.client_auth) {
		const struct client_identity *who;
		key = client_auth_session_key(&n->client_auth, &n->sm, session_id, &who);
		if (key == NULL) {
			n->stats.events_no_address++;
			return false;
		}
	}
	uint8_t type = e->type;
	uint64_t revision = e->revision;
	const uint8_t *name = e->name;
	uint8_t name_len = e->name_len;
	struct hasp_wire_msg msg;
	memset(&msg, 0, sizeof(msg));
	msg.hdr.version = n->cfg.client_auth ? 2 : 1;
	msg.hdr.opcode = HASP_OP_EVENT;
	msg.hdr.flags = HASP_WIRE_F_REPLY;
	msg.hdr.status = HASP_STATUS_OK;
	msg.hdr.session_id = session_id;
	msg.hdr.seq = e->index;
	msg.body.event.sub = e->sub;
	msg.body.event.prev_index = e->after_gap ? 0 : s->last_event_index;
	msg.body.event.prev_sub = e->after_gap ? HASP_WIRE_EVENT_PREV_GAP : s->last_event_sub;
	msg.body.event.type = type;
	msg.body.event.revision = revision;
	msg.body.event.lease_id = e->lease_id;
	msg.body.event.ttl_ms = e->ttl_ms;
	msg.body.event.name = (struct hasp_wire_bytes){ name, name_len };
	struct locks_kv_info kv;
	if (type == HASP_EVENT_KV_PUT && locks_kv_get(&n->sm, name, name_len, &kv) &&
	    kv.mod_revision == revision)
		msg.body.event.value = (struct hasp_wire_bytes){ kv.value, kv.value_len };
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	int size = hasp_wire_encode(&msg, buf, sizeof(buf));
	if (size <= 0)
		return false;
	s->last_event_index = e->index;
	s->last_event_sub = e->sub;
	HASP_ASSERT(s->id == session_id);
	/* Sealed and sent on the lane's lcore. When its ring is full the
	 * event leaves from here instead, sent rather than lost; it may
	 * overtake the session's events still queued there, which the client
	 * sees as it sees reordering on the wire (the prev chain). */
	bool posted = n->lanes.count > 0 &&
		      n->lanes.send(n->lanes.ctx, event_lane(n, session_id), s->ip, s->port,
				    n->self->client_port, key, buf, (size_t)size);
	if (!posted) {
		n->stats.events_lane_overflow += n->lanes.count > 0;
		if (key != NULL)
			hasp_wire_seal(key, buf, (size_t)size);
		n->loop.client_send(n, s->ip, s->port, buf, (size_t)size);
	}
	n->stats.events_pushed++;
	return true;
}

static void refill(struct node *n)
{
	HASP_ASSERT(n->now_ns >= n->watch_refill_ns); /* CLOCK_MONOTONIC */
	uint64_t dt = n->now_ns - n->watch_refill_ns;
	n->watch_refill_ns = n->now_ns;
	n->watch_tokens += (double)dt * n->cfg.watch_rate / 1e9;
	if (n->watch_tokens > n->cfg.watch_burst)
		n->watch_tokens = n->cfg.watch_burst;
	HASP_ASSERT(n->watch_tokens >= 0.0 && n->watch_tokens <= n->cfg.watch_burst);
}

/* A watch missed events when the node stopped leading since it was last
 * told something (or registered): its epoch is an older one. */
static bool watch_missed(const struct watch_index *x, const struct watch *w)
{
	return w->epoch != x->epoch;
}

static void watch_push(struct node *n, struct watch *w, const struct push *e)
{
	w->epoch = n->watches.epoch;
	if (push_event(n, w->session_id, e))
		watch_count(n, w->session_id, NODE_WATCH_SENT, 1);
}

struct watch_visit {
	struct node *n;
	const struct push *e;
};

/* One event for watch i (watch_visit_fn): sent while tokens last, else
 * held, replacing an event already held (coalescing). */
static void watch_event(void *arg, struct watch_index *x, uint32_t i)
{
	const struct watch_visit *v = arg;
	struct node *n = v->n;
	const struct push *e = v->e;
	struct watch *w = &x->w[i];
	HASP_ASSERT(w->session_id != 0);
	HASP_ASSERT(e->name_len <= sizeof(w->held_name));
	if (!w->queued && n->watch_tokens >= 1.0 && !n->lead_unconfirmed) {
		n->watch_tokens -= 1.0;
		struct push p = *e;
		p.after_gap = p.after_gap || watch_missed(x, w);
		watch_push(n, w, &p);
		return;
	}
	/* Held: no token, or a stalled leader not yet confirmed (it goes
	 * out when confirmed, or is dropped by the step-down). */
	if (n->lead_unconfirmed)
		n->stats.events_unconfirmed++;
	else
		watch_count(n, w->session_id, NODE_WATCH_DEFERRED, 1);
	if (watch_missed(x, w)) {
		w->held_gap = true;
		w->epoch = x->epoch;
	}
	if (w->queued) {
		/* One slot per watch: the newer event replaces the held one,
		 * and the watcher is told it missed something (a RESYNC in
		 * libhasp) rather than losing it silently. */
		watch_count(n, w->session_id, NODE_WATCH_COALESCED, 1);
		w->held_gap = true;
	}
	w->held_type = e->type;
	w->held_revision = e->revision;
	w->held_index = e->index;
	w->held_sub = e->sub;
	w->held_name_len = e->name_len;
	memcpy(w->held_name, e->name, e->name_len);
	watch_index_hold(x, i);
	HASP_ASSERT(w->queued);
}

void notify_events(struct node *n, uint64_t index, const struct locks_event *ev, uint32_t count)
{
	HASP_ASSERT(index != 0);
	HASP_ASSERT(count <= n->events_max);
	if (!node_is_leader(n) || count == 0)
		return;
	refill(n);
	for (uint32_t i = 0; i < count; i++) {
		struct push e = {
			.index = index, .sub = i, .type = ev[i].type, .name_len = ev[i].name_len,
			.name = ev[i].name,
			.revision = ev[i].type == HASP_EVENT_LOCK_GRANTED ||
						    ev[i].type == HASP_EVENT_LOCK_RELEASED
					    ? ev[i].token : ev[i].revision,
		};
		/* A waiter learns of its grant at once (not rate-limited),
		 * with the grant's lease and TTL; a direct acquirer has its
		 * reply. */
		if (ev[i].type == HASP_EVENT_LOCK_GRANTED && ev[i].cause == LOCKS_GRANT_HANDOFF) {
			struct push g = e;
			g.lease_id = ev[i].lease_id;
			g.ttl_ms = ev[i].ttl_ms;
			push_event(n, ev[i].session_id, &g);
		}
		struct watch_visit v = { n, &e };
		watch_index_match(&n->watches, ev[i].name, ev[i].name_len, watch_event, &v);
	}
}

enum hasp_status notify_watch(struct node *n, uint64_t session_id, const struct hasp_wire_watch *w,
			      bool add)
{
	bool prefix = (w->flags & HASP_WIRE_WATCH_PREFIX) != 0;
	struct watch_index *x = &n->watches;

	/* The wire decoder bounds names (hasp_wire_decode_request). */
	HASP_ASSERT(w->name.size <= HASP_NAME_SIZE_MAX);

	if (session_id == 0)
		return HASP_STATUS_SESSION_EXPIRED;
	/* A session's watches hang off its address entry: one the node could
	 * not remember (session_table_full) cannot watch. */
	struct node_session *s = session_find(n, session_id);
	if (s == NULL) {
		n->stats.watch_full++;
		return HASP_STATUS_FULL;
	}
	uint8_t len = (uint8_t)w->name.size;
	uint32_t i = watch_index_session_find(x, s->watch_head, w->name.data, len, prefix);
	if (i != WATCH_NONE) {
		if (add) {
			/* Registered again: the client re-reads itself. */
			x->w[i].epoch = x->epoch;
		} else {
			watch_count(n, session_id, NODE_WATCH_DROPPED, x->w[i].queued);
			watch_index_remove(x, &s->watch_head, i);
		}
		return HASP_STATUS_OK;
	}
	if (!add)
		return HASP_STATUS_NOT_FOUND;
	/* Bounded per session too, so that one client cannot take every
	 * watch of the node. */
	if (x->count >= x->capacity ||
	    watch_index_session_count(x, s->watch_head) >= n->cfg.watches_per_session_max) {
		n->stats.watch_full++;
		return HASP_STATUS_FULL;
	}
	i = watch_index_add(x, &s->watch_head, session_id, w->name.data, len, prefix);
	HASP_ASSERT(i != WATCH_NONE);
	return HASP_STATUS_OK;
}

void notify_watch_status(struct node *n, uint64_t session_id, struct hasp_wire_watch_status *st)
{
	const struct node_session *s = session_find(n, session_id);

	*st = (struct hasp_wire_watch_status){ 0 };
	if (s == NULL)
		return;
	st->count = watch_index_session_count(&n->watches, s->watch_head);
	st->last_event_index = s->last_event_index;
	st->last_event_sub = s->last_event_sub;
}

bool notify_flush(struct node *n, uint64_t *deadline_ns)
{
	bool did = false;
	struct watch_index *x = &n->watches;
	HASP_ASSERT(deadline_ns != NULL);
	if (x->held_count == 0 || n->lead_unconfirmed)
		return false;
	refill(n);
	/* Oldest held first. */
	uint32_t i;
	while ((i = watch_index_held_first(x)) != WATCH_NONE && n->watch_tokens >= 1.0) {
		struct watch *w = &x->w[i];
		n->watch_tokens -= 1.0;
		watch_index_unhold(x, i);
		struct push e = { .index = w->held_index, .sub = w->held_sub, .type = w->held_type,
				  .name_len = w->held_name_len, .revision = w->held_revision,
				  .name = w->held_name, .after_gap = w->held_gap };
		w->held_gap = false;
		watch_push(n, w, &e);
		did = true;
	}
	if (x->held_count > 0) {
		uint64_t at = n->now_ns + 1000000000ull / n->cfg.watch_rate + 1;
		if (at < *deadline_ns)
			*deadline_ns = at;
	}
	HASP_ASSERT(n->watch_tokens >= 0.0);
	return did;
}

void notify_clear(struct node *n)
{
	struct watch_index *x = &n->watches;
	if (x->w == NULL)
		return;
	/* The watches stay: a client whose node leads again without another
	 * leader in between (a flapping election: same node, next term)
	 * sees no new leader and would not register them again. What was
	 * applied while this node did not lead was not pushed, so the next
	 * event of each watch carries the gap marker (libhasp: RESYNC),
	 * unless the client registers the watch again first: a new epoch
	 * marks every watch at once. A held event is dropped the same way.
	 * Watches of ended sessions go with them (notify_session_end). */
	watch_index_new_epoch(x);
	uint32_t i;
	while ((i = watch_index_held_first(x)) != WATCH_NONE) {
		x->w[i].held_gap = false;
		watch_index_unhold(x, i);
		watch_count(n, x->w[i].session_id, NODE_WATCH_DROPPED, 1);
	}
}
