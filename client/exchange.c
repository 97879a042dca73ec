/*
 * The request engine of libhasp: one UDP socket, a window of 32 request
 * slots, retransmission with the same sequence number, leader redirects,
 * and the dispatch of every received datagram.
 *
 * Shape: callers are ordinary blocking threads. A caller encodes its request,
 * takes the next sequence number and its slot, sends, and then waits. One
 * waiting thread at a time (`receiving`) drops the mutex, polls the socket,
 * and dispatches each datagram under the mutex: a reply is copied into the
 * request waiting in the slot whose (session, seq, opcode) it matches, and
 * the owner is woken; an
 * EVENT goes to a WAIT-mode acquirer or to the event ring; anything else is
 * counted and dropped. So several threads can each have a request in flight
 * (at most HASP_SESSION_INFLIGHT_MAX), a keepalive thread never waits behind
 * a long call, and no datagram is lost to the wrong reader.
 *
 * Exactly once (PROTOCOL.md): a retransmission sends the same bytes with the
 * same sequence number, whether it follows a timeout, a NOT_LEADER redirect
 * or an UNAVAILABLE answer, so the cluster applies a mutation at most once
 * and answers a duplicate from its reply cache. A request given up at its
 * deadline keeps its slot (ABANDONED) until a late reply frees it; if the
 * window wraps onto it, the session is dropped and a new one opened, because
 * sending s requires the replies to everything up to s - 32.
 */
#include "client/client_impl.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <stddef.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "common/wire_auth.h"
#include "hasp/errors.h"

#define NS_PER_MS 1000000ull
/* Datagrams read per turn as receiver: bounds the time the mutex is held. */
#define RX_BATCH_MAX 64
#define RX_MMSG 8 /* datagrams per recvmmsg(2) */

static struct timespec ns_to_timespec(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };
	return ts;
}

uint64_t client_deadline(const struct hasp_client *c)
{
	uint32_t deadline_ms = __atomic_load_n(&c->cfg.deadline_ms, __ATOMIC_RELAXED);

	return client_now(c) + (uint64_t)deadline_ms * NS_PER_MS;
}

uint64_t client_valid_until(const struct hasp_client *c, uint64_t send_ns, uint32_t ttl_ms)
{
	/* Fixed margin for scheduling and a rate term for the two clocks
	 * running at different speeds over the TTL. */
	uint64_t margin_ns = (uint64_t)c->cfg.drift_margin_ms * NS_PER_MS +
			     (uint64_t)ttl_ms * c->cfg.drift_ppm; /* ms * ppm = ns */
	uint64_t ttl_ns = (uint64_t)ttl_ms * NS_PER_MS;

	if (margin_ns >= ttl_ns)
		return send_ns;
	return send_ns + ttl_ns - margin_ns;
}

static int node_index_of(const struct hasp_client *c, const struct sockaddr_in *a)
{
	for (uint32_t i = 0; i < c->node_count; i++) {
		if (c->nodes[i].sin_addr.s_addr == a->sin_addr.s_addr &&
		    c->nodes[i].sin_port == a->sin_port)
			return (int)i;
	}
	return -1;
}

/* The index of node `a`, added to the list if new (up to the limit; then
 * the last learned slot is reused). */
static uint32_t node_learn_addr(struct hasp_client *c, const struct sockaddr_in *a)
{
	int idx = node_index_of(c, a);

	if (idx >= 0)
		return (uint32_t)idx;
	if (c->node_count < HASP_CLIENT_NODES_MAX)
		c->node_count++;
	c->nodes[c->node_count - 1] = *a;
	return c->node_count - 1;
}

/* The node a NOT_LEADER reply names (node_learn_addr). */
static uint32_t node_learn(struct hasp_client *c, const struct hasp_wire_not_leader *nl)
{
	struct sockaddr_in a = { .sin_family = AF_INET };

	memcpy(&a.sin_addr.s_addr, nl->ipv4, 4); /* dotted order is network order */
	a.sin_port = htons(nl->port);
	return node_learn_addr(c, &a);
}

static bool name_matches_watch(const struct hasp_client *c, const char *name, size_t size)
{
	for (uint32_t i = 0; i < HASP_CLIENT_WATCHES_MAX; i++) {
		const struct watch_entry *w = &c->watches[i];
		size_t wsize;

		if (!w->used)
			continue;
		wsize = strlen(w->name);
		if (w->prefix ? (wsize <= size && memcmp(w->name, name, wsize) == 0)
			      : (wsize == size && memcmp(w->name, name, size) == 0))
			return true;
	}
	return false;
}

/* True when the event buffer has room for one more; allocates it at the
 * first event. */
static bool event_room_locked(struct hasp_client *c)
{
	if (c->events == NULL)
		c->events = hasp_calloc(HASP_CLIENT_EVENTS_MAX, sizeof(*c->events));
	return c->events != NULL && c->event_count < HASP_CLIENT_EVENTS_MAX;
}

/* Queues a RESYNC for the application: events may have been lost, re-read
 * what you watch. Owed until the buffer has room. */
void client_event_resync_locked(struct hasp_client *c)
{
	if (!event_room_locked(c)) {
		c->event_resync_owed = true;
		return;
	}
	struct hasp_event *ev = &c->events[(c->event_head + c->event_count) % HASP_CLIENT_EVENTS_MAX];
	c->event_count++;
	ev->type = HASP_EVENT_RESYNC;
	ev->revision = 0;
	ev->seq = 0;
	ev->sub = 0;
	ev->name[0] = '\0';
	ev->value_size = 0;
	c->event_resync_owed = false;
}

static void event_push_locked(struct hasp_client *c, const struct hasp_wire_msg *m)
{
	struct hasp_event *ev;

	if (c->event_resync_owed)
		client_event_resync_locked(c);
	if (!event_room_locked(c)) {
		/* Dropping an event (the buffer full, or none to be had) is a
		 * gap the application must hear of. */
		c->stats.events_dropped++;
		c->event_resync_owed = true;
		return;
	}
	ev = &c->events[(c->event_head + c->event_count) % HASP_CLIENT_EVENTS_MAX];
	c->event_count++;
	ev->type = m->body.event.type;
	ev->revision = m->body.event.revision;
	ev->seq = m->hdr.seq;
	ev->sub = m->body.event.sub;
	HASP_ASSERT(m->body.event.name.size < sizeof(ev->name));
	memcpy(ev->name, m->body.event.name.data, m->body.event.name.size);
	ev->name[m->body.event.name.size] = '\0';
	HASP_ASSERT(m->body.event.value.size <= sizeof(ev->value));
	ev->value_size = m->body.event.value.size;
	if (ev->value_size > 0)
		memcpy(ev->value, m->body.event.value.data, ev->value_size);
}

/* Events may have been lost, maybe a grant: tell the application (RESYNC),
 * and every waiter re-reads its lock. */
static void event_gap_locked(struct hasp_client *c)
{
	for (struct waiter *w = c->waiters; w != NULL; w = w->next)
		w->recheck = true;
	/* A forced release of a held lock may be among them. */
	client_kept_verify_locked(c);
	client_event_resync_locked(c);
}

static bool event_received_locked(const struct hasp_client *c, uint64_t index, uint32_t sub)
{
	for (uint32_t i = 0; i < c->event_recent_count; i++)
		if (c->event_recent_index[i] == index && c->event_recent_sub[i] == sub)
			return true;
	return false;
}

/* The chain moves to (index, sub), which is remembered: a copy of it that
 * comes later is dropped. */
static void event_chain_to_locked(struct hasp_client *c, uint64_t index, uint32_t sub)
{
	c->event_last_index = index;
	c->event_last_sub = sub;
	c->event_recent_index[c->event_recent_next] = index;
	c->event_recent_sub[c->event_recent_next] = sub;
	c->event_recent_next = (c->event_recent_next + 1) % CLIENT_EVENTS_RECENT;
	if (c->event_recent_count < CLIENT_EVENTS_RECENT)
		c->event_recent_count++;
}

static void dispatch_event_locked(struct hasp_client *c, const struct hasp_wire_msg *m)
{
	const struct hasp_wire_event *e = &m->body.event;
	bool watched = name_matches_watch(c, (const char *)e->name.data, e->name.size);
	bool taken = false;

	if (c->session_state != SESSION_OPEN || m->hdr.session_id != c->session_id) {
		c->stats.rx_stray++;
		return;
	}
	c->stats.events++;
	/* A duplicate: an event we received recently (the network doubled
	 * it). Its identity is its Raft index and ordinal, the same from any
	 * node, so this also holds across leader changes. */
	if (event_received_locked(c, m->hdr.seq, e->sub)) {
		c->stats.rx_duplicates++;
		return;
	}
	bool after_gap = e->prev_index == 0 && e->prev_sub == HASP_WIRE_EVENT_PREV_GAP;
	if (after_gap || e->prev_index != c->event_last_index || e->prev_sub != c->event_last_sub) {
		/* The node sent something in between that we did not get, or
		 * another node sends now (a new leader does not know what the
		 * old one sent). */
		c->stats.events_gaps++;
		event_gap_locked(c);
	}
	event_chain_to_locked(c, m->hdr.seq, e->sub);

	if (e->type == HASP_EVENT_LOCK_GRANTED) {
		for (struct waiter *w = c->waiters; w != NULL; w = w->next) {
			if (w->name_size != e->name.size ||
			    memcmp(w->name, e->name.data, e->name.size) != 0)
				continue;
			/* Only a waiter and the watchers of the name are told
			 * of a grant. Without a watch it is ours; with one it
			 * may be another's, so confirm with LOCK_READ. */
			if (watched)
				w->recheck = true;
			else if (!w->granted || e->revision > w->token) {
				/* Tokens only grow: of two grants, the later one. */
				w->granted = true;
				w->token = e->revision;
				w->lease_id = e->lease_id;
				w->ttl_ms = e->ttl_ms;
			}
			taken = true;
		}
	}
	if (watched || !taken)
		event_push_locked(c, m);
}

/* True for a reply that sends the request elsewhere or later. */
static bool status_redirects(uint8_t status)
{
	return status == HASP_STATUS_NOT_LEADER || status == HASP_STATUS_UNAVAILABLE ||
	       status == HASP_STATUS_OVERLOADED;
}

/* A final answer replaces a redirect its waiter has not read yet: when
 * every node was asked at once, the leader's answer may come right after
 * a follower's NOT_LEADER (docs/CLIENT.md, "Leader discovery"). */
static bool reply_supersedes(const struct pending *p, const struct hasp_wire_msg *m)
{
	return !status_redirects(m->hdr.status) && status_redirects(p->status);
}

/* Matches one reply to the slot waiting for it. */
static void dispatch_reply_locked(struct hasp_client *c, const struct hasp_wire_msg *m,
				  const uint8_t *data, size_t size, uint32_t from)
{
	struct pending *p;

	if (m->hdr.session_id == 0 && m->hdr.opcode == HASP_OP_SESSION_OPEN) {
		p = &c->open_slot;
	} else if (c->session_state == SESSION_OPEN && m->hdr.session_id == c->session_id) {
		p = &c->slots[m->hdr.seq % HASP_SESSION_INFLIGHT_MAX];
	} else {
		c->stats.rx_stray++;
		return;
	}
	if (p->seq != m->hdr.seq || p->opcode != m->hdr.opcode || p->state == PENDING_FREE ||
	    p->session_id != m->hdr.session_id) {
		/* Answered and consumed already, or never sent. */
		uint64_t sent_below = p == &c->open_slot ? c->open_count + 1 : c->next_seq;
		if (m->hdr.seq < sent_below)
			c->stats.rx_duplicates++;
		else
			c->stats.rx_stray++;
		return;
	}
	if (p->state == PENDING_DONE && !reply_supersedes(p, m)) {
		c->stats.rx_duplicates++;
		return;
	}
	if (p->state == PENDING_ABANDONED) {
		/* The window may move past it now. */
		c->stats.rx_late++;
		pending_state_set(c, p, PENDING_FREE);
		return;
	}
	HASP_ASSERT(p->state == PENDING_WAITING || p->state == PENDING_DONE);
	/* Into the request's own buffer: it is the only copy of the reply
	 * (struct pending). Its owner reads it under mu, or after DONE. */
	HASP_ASSERT(p->req != NULL);
	HASP_ASSERT(size <= sizeof(p->req->reply));
	memcpy(p->req->reply, data, size);
	p->req->reply_size = size;
	if (m->hdr.status == HASP_STATUS_GRANTED)
		p->req->granted = m->body.granted;
	p->from_index = from;
	p->status = m->hdr.status;
	pending_state_set(c, p, PENDING_DONE);
	c->stats.rx_replies++;
}

void client_dispatch_locked(struct hasp_client *c, const uint8_t *data, size_t size,
			    const struct sockaddr_in *from)
{
	struct hasp_wire_msg m;
	int idx = node_index_of(c, from);

	if (idx < 0) {
		c->stats.rx_unknown_source++;
		return;
	}
	if (hasp_wire_decode_reply(data, size, &m) != 0 || m.hdr.version != (c->auth ? 2 : 1)) {
		c->stats.rx_malformed++;
		return;
	}
	/* Wire v2: only what verifies under our keys is looked at. Replies
	 * to an open carry the identity key, everything else the session
	 * key of the session it names (ours, or it is not for us). */
	if (c->auth) {
		const struct auth_key *key = NULL;
		if (m.hdr.session_id == 0 && m.hdr.opcode == HASP_OP_SESSION_OPEN)
			key = &c->identity_key;
		else if (c->session_state == SESSION_OPEN && m.hdr.session_id == c->session_id)
			key = &c->session_key;
		if (key == NULL || !hasp_wire_tag_ok(key, data, size)) {
			c->stats.rx_auth_bad++;
			return;
		}
	}
	if (m.hdr.opcode == HASP_OP_EVENT)
		dispatch_event_locked(c, &m);
	else
		dispatch_reply_locked(c, &m, data, size, (uint32_t)idx);
}

/* Reads what is queued on the socket: recvmmsg(2) batches of RX_MMSG, so
 * one datagram (a client's usual load) costs one call, not a second one
 * that answers EAGAIN. */
static void rx_batch_locked(struct hasp_client *c)
{
	uint8_t bufs[RX_MMSG][HASP_DATAGRAM_SIZE_MAX + 1]; /* +1: see an oversized one */
	struct sockaddr_in from[RX_MMSG];
	struct iovec iov[RX_MMSG];
	struct mmsghdr msgs[RX_MMSG];

	if (c->group != NULL)
		return; /* the group's loop reads the shared socket (group.c) */
	if (c->io != NULL) {
		/* The simulation's transport (tests/nodesim): one at a time. */
		for (int i = 0; i < RX_BATCH_MAX; i++) {
			struct sockaddr_in src;
			ssize_t n = (ssize_t)c->io->recv(c->io->ctx, bufs[0], sizeof(bufs[0]), &src);
			if (n < 0)
				return;
			size_t got = (size_t)n < sizeof(bufs[0]) ? (size_t)n : sizeof(bufs[0]);
			client_dispatch_locked(c, bufs[0], got, &src);
		}
		return;
	}
	for (int done = 0; done < RX_BATCH_MAX;) {
		for (int i = 0; i < RX_MMSG; i++) {
			iov[i] = (struct iovec){ .iov_base = bufs[i], .iov_len = sizeof(bufs[i]) };
			msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_name = &from[i],
								 .msg_namelen = sizeof(from[i]),
								 .msg_iov = &iov[i],
								 .msg_iovlen = 1 } };
		}
		int got = recvmmsg(c->fd, msgs, RX_MMSG, MSG_DONTWAIT, NULL);
		if (got <= 0)
			return;
		for (int i = 0; i < got; i++) {
			size_t n = msgs[i].msg_len;
			if (msgs[i].msg_hdr.msg_namelen != sizeof(from[i]) ||
			    from[i].sin_family != AF_INET) {
				c->stats.rx_unknown_source++;
				continue;
			}
			/* A datagram over the buffer is cut and flagged: the
			 * decoder refuses anything over 1472 bytes as too big. */
			if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
				n = sizeof(bufs[i]);
			client_dispatch_locked(c, bufs[i], n < sizeof(bufs[i]) ? n : sizeof(bufs[i]),
					       &from[i]);
		}
		done += got;
		if (got < RX_MMSG)
			return; /* the queue is empty */
	}
}

/* Interrupts the thread in poll(2) for everyone (it waits for datagrams
 * only), once until it reads intr_fd. */
static void receiver_interrupt_locked(struct hasp_client *c)
{
	uint64_t one = 1;

	if (c->receiving && !c->intr_pending && c->intr_fd >= 0) {
		(void)!write(c->intr_fd, &one, sizeof(one));
		c->intr_pending = true;
	}
}

void client_wake_locked(struct hasp_client *c)
{
	c->progress++;
	if (c->cv_waiters > 0) /* the cv's own cache line only when it has a waiter */
		pthread_cond_broadcast(&c->cv);
	/* The receiver may be a blocking call waiting for what changed (a
	 * window slot the loop freed, a session another thread opened), and
	 * no datagram may come to wake it. */
	receiver_interrupt_locked(c);
	client_wake_loop_locked(c);
}

void client_wake_loop_locked(struct hasp_client *c)
{
	uint64_t one = 1;

	/* The application's loop, unless it is the caller (it looks again
	 * before it returns). */
	if (c->processing) {
		c->wake_missed = true; /* the loop looks again before it returns */
		return;
	}
	if (c->group != NULL) {
		client_group_wake_locked(c); /* the group's ready list and eventfd */
		return;
	}
	/* Also for events alone: another thread (the keepalive helper, a
	 * blocking call) may have read them off the socket, which then no
	 * longer makes the loop's fd readable. */
	if ((c->async_count > 0 || c->event_count > 0) && c->wake_fd >= 0 && !c->wake_pending) {
		(void)!write(c->wake_fd, &one, sizeof(one));
		c->wake_pending = true; /* one write until the loop reads it */
	}
}

void client_interrupt_locked(struct hasp_client *c)
{
	client_wake_locked(c); /* the receiver too */
}

void client_read_nowait_locked(struct hasp_client *c)
{
	if (c->receiving)
		return; /* that thread dispatches for everyone */
	rx_batch_locked(c);
}

void client_wait_io_locked(struct hasp_client *c, uint64_t until_ns)
{
	uint64_t now = client_now(c);
	struct pollfd pfd[2] = { { .fd = c->fd, .events = POLLIN },
				 { .fd = c->intr_fd, .events = POLLIN } };
	int timeout_ms;

	/* A grouped client's blocking calls are refused before they get
	 * here: the group's loop alone reads the shared socket. */
	HASP_ASSERT(c->group == NULL);
	if (now >= until_ns)
		return;
	if (c->io != NULL) {
		/* Simulated: one thread, no poll(2); time passes in the world. */
		c->io->wait(c->io->ctx, until_ns);
		rx_batch_locked(c);
		return;
	}
	if (c->receiving) {
		struct timespec ts = ns_to_timespec(until_ns);
		c->cv_waiters++;
		int rc = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
		c->cv_waiters--;
		HASP_ASSERT(rc == 0 || rc == ETIMEDOUT);
		return;
	}
	c->receiving = true;
	uint64_t wait_ms = (until_ns - now + NS_PER_MS - 1) / NS_PER_MS;
	timeout_ms = wait_ms > INT_MAX ? INT_MAX : (int)wait_ms;
	pthread_mutex_unlock(&c->mu);
	(void)poll(pfd, 2, timeout_ms); /* EINTR: the caller loops */
	bool interrupted = (pfd[1].revents & POLLIN) != 0;
	if (interrupted) {
		uint64_t count;
		(void)!read(c->intr_fd, &count, sizeof(count)); /* a cancel or a wake-up */
	}
	pthread_mutex_lock(&c->mu);
	if (interrupted)
		c->intr_pending = false;
	rx_batch_locked(c);
	c->receiving = false;
	if (c->cv_waiters > 0)
		pthread_cond_broadcast(&c->cv);
	/* What it read may complete the application loop's requests. */
	client_wake_loop_locked(c);
}

static void send_to(struct hasp_client *c, uint32_t target, const uint8_t *req, size_t size)
{
	struct sockaddr_in to = c->nodes[target];

	/* A failed send is a lost datagram: the retransmit timer covers it. */
	if (c->group != NULL) {
		client_group_send(c, &to, req, size);
		return;
	}
	if (c->io != NULL) {
		c->io->send(c->io->ctx, &to, req, size);
		return;
	}
	(void)sendto(c->fd, req, size, 0, (const struct sockaddr *)&to, sizeof(to));
}

/*
 * Leader finding for one request (docs/CLIENT.md, "Leader discovery").
 *
 * Directed: the request goes to one node (the last one that answered, or
 * the leader a NOT_LEADER named) and waits request_timeout_ms for it.
 * Probing: after that node fell silent, or when the node asked does not
 * know the leader, the same bytes go to every node at once, again after
 * each backoff (short, doubling up to backoff_max_ms, jittered), until
 * some node gives a final answer. A NOT_LEADER hint is followed at once
 * unless it names a node that let this request go unanswered: followers
 * name the old leader until their own election timeout, so after a crash
 * the hint is stale exactly when it matters. Sending one sequence number
 * to several nodes is safe: it is one request (PROTOCOL.md, exactly once).
 */
_Static_assert(HASP_CLIENT_NODES_MAX <= 32, "struct finder keeps a 32-bit node mask");

/* Probe rounds are at least this far apart, whatever backoff_ms says (0
 * is a valid backoff): a round goes to every node, so none may spin. */
#define PROBE_INTERVAL_MIN_NS (5 * NS_PER_MS)

static void finder_init(const struct hasp_client *c, struct finder *f)
{
	f->target = c->target < c->node_count ? c->target : 0;
	f->probing = false;
	f->silent = 0;
	f->silent_ever = 0;
	f->redirects = 0;
	f->backoff_ns = (uint64_t)c->cfg.backoff_ms * NS_PER_MS;
	f->backoff_max_ns = (uint64_t)c->cfg.backoff_max_ms * NS_PER_MS;
}

/* The next wait: the current backoff with "equal jitter" (between half
 * and all of it, so that clients failed over together do not probe in
 * step), then the backoff doubles up to its bound. */
static uint64_t finder_backoff(struct hasp_client *c, struct finder *f)
{
	uint64_t b = f->backoff_ns;
	uint64_t wait = b / 2 + (b / 2 > 0 ? prng_below(&c->prng, b / 2 + 1) : 0);

	f->backoff_ns = b * 2 < f->backoff_max_ns ? b * 2 : f->backoff_max_ns;
	return wait;
}

/* A node answered (anything): it is not silent. */
static void finder_heard(struct finder *f, uint32_t from)
{
	f->silent &= ~(1u << from);
}

/* The directed node said nothing for request_timeout_ms. */
static void finder_silence(struct finder *f)
{
	f->silent |= 1u << f->target;
	f->silent_ever |= 1u << f->target;
	f->probing = true;
}

/* A NOT_LEADER hint worth following at once: a leader named, not the
 * node that answered, not one that was silent to this request, and not
 * followed round in circles. Learns the address; returns its index or -1. */
static int finder_hint(struct hasp_client *c, struct finder *f, const struct hasp_wire_not_leader *nl,
		       uint32_t from)
{
	bool usable = nl->known && nl->port != 0 &&
		      (nl->ipv4[0] | nl->ipv4[1] | nl->ipv4[2] | nl->ipv4[3]) != 0;
	uint32_t idx;

	if (!usable || f->redirects >= c->node_count)
		return -1;
	idx = node_learn(c, nl);
	if (idx == from || (f->silent & (1u << idx)) != 0)
		return -1;
	f->redirects++;
	return (int)idx;
}

/* Sends the request as the mode says; returns the datagrams sent. In
 * probing mode the nodes not known to be silent go first, starting after
 * the directed one, then the silent ones (maybe only slow). */
static uint32_t finder_send(struct hasp_client *c, const struct finder *f, const uint8_t *req,
			    size_t size)
{
	uint32_t n = 0;

	if (!f->probing) {
		send_to(c, f->target, req, size);
		return 1;
	}
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t k = 1; k <= c->node_count; k++) {
			uint32_t i = (f->target + k) % c->node_count;
			bool silent = (f->silent & (1u << i)) != 0;
			if (silent == (pass == 1)) {
				send_to(c, i, req, size);
				n++;
			}
		}
	}
	return n;
}

/* A new session: every watch registered in the old one must be sent again. */
static void watches_mark_stale_locked(struct hasp_client *c)
{
	for (uint32_t i = 0; i < HASP_CLIENT_WATCHES_MAX; i++)
		c->watches_stale |= c->watches[i].used && c->watches[i].session_id != 0;
}

/* A new leader: it has none of our watches, in this session or any. */
static void watches_forget_registrations_locked(struct hasp_client *c)
{
	for (uint32_t i = 0; i < HASP_CLIENT_WATCHES_MAX; i++) {
		if (c->watches[i].used) {
			c->watches[i].session_id = 0;
			c->watches_stale = true;
		}
	}
}

uint32_t client_watches_registered_locked(const struct hasp_client *c)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < HASP_CLIENT_WATCHES_MAX; i++)
		n += c->watches[i].used && c->session_state == SESSION_OPEN &&
		     c->watches[i].session_id == c->session_id;
	return n;
}

bool client_knows_node_locked(const struct hasp_client *c, const struct sockaddr_in *node)
{
	return node_index_of(c, node) >= 0;
}

void client_leader_learned_locked(struct hasp_client *c, const struct sockaddr_in *leader,
				  uint64_t now)
{
	int known = node_index_of(c, leader);

	/* Not one of its nodes: a group may hold clients of other clusters,
	 * and this client never sends to a node it was not given or told
	 * of. */
	if (known < 0)
		return;
	uint32_t idx = (uint32_t)known;

	/* Registered watches live on the node that answered last: one that
	 * is not the leader has dropped them, or will when it learns. As
	 * when this client's own answer comes from a new node
	 * (req_step_sent_locked), they are registered again, with `idx`:
	 * answered_by names it, so that the answer to that WATCH is not
	 * taken for one more change. Never answered: nothing registered. */
	if (c->answered_any && c->answered_by != idx) {
		watches_forget_registrations_locked(c);
		c->answered_by = idx;
	}
	c->target = idx; /* the next requests go there first */
	/* Requests waiting for another node's answer go to the leader now,
	 * with the same bytes, as a NOT_LEADER naming it would send them:
	 * the old node may be gone, and its silence would cost each one
	 * request_timeout_ms before it asked every node. Probing ones ask
	 * every node already; one the leader let go unanswered stays, as it
	 * would with a hint naming it (finder_hint). */
	for (struct client_op *op = c->ops; op != NULL; op = op->next) {
		struct client_req *r = &op->req;

		if (r->state != REQ_SENT || r->p == &c->open_slot || r->f.probing ||
		    r->f.target == idx || r->p->state != PENDING_WAITING ||
		    (r->f.silent & (1u << idx)) != 0)
			continue;
		r->f.target = idx;
		r->timer_kind = TIMER_SEND;
		r->timer_ns = now;
	}
}

void client_watch_count_seen_locked(struct hasp_client *c, uint64_t session_id, uint32_t count)
{
	/* More on the node is an UNWATCH still in flight; fewer is a loss. */
	if (session_id != c->session_id || count >= client_watches_registered_locked(c))
		return;
	c->watch_counts_short++;
	watches_forget_registrations_locked(c);
}

uint8_t client_watch_query_op_locked(const struct hasp_client *c)
{
	return c->watch_status_unknown ? HASP_OP_WATCH_COUNT : HASP_OP_WATCH_STATUS;
}

void client_watch_query_seen_locked(struct hasp_client *c, uint64_t session_id, uint8_t op,
				    int status, const struct hasp_wire_msg *reply)
{
	if (op == HASP_OP_WATCH_STATUS && status == HASP_STATUS_BAD_OPCODE) {
		c->watch_status_unknown = true; /* a node older than the opcode */
		return;
	}
	if (status != HASP_STATUS_OK || session_id != c->session_id)
		return;
	if (op == HASP_OP_WATCH_COUNT) {
		client_watch_count_seen_locked(c, session_id, reply->body.watch_count.count);
		return;
	}
	const struct hasp_wire_watch_status *st = &reply->body.watch_status;
	client_watch_count_seen_locked(c, session_id, st->count);
	/* (0, 0): this node sent the session nothing (a new leader: the
	 * watch count above and the chain's first event tell the rest). */
	if (st->last_event_index == 0 && st->last_event_sub == 0)
		return;
	/* (0, 1): it dropped events for the session (a stalled leader); else
	 * the last one it sent must be one we received. One still in flight
	 * behind this answer (an event lane overtaken) also reads as lost:
	 * a RESYNC too many, never one too few. */
	bool dropped = st->last_event_index == 0 && st->last_event_sub == HASP_WIRE_EVENT_PREV_GAP;
	if (!dropped && event_received_locked(c, st->last_event_index, st->last_event_sub))
		return;
	c->stats.events_gaps++; /* a gap no later event showed */
	event_gap_locked(c);
	/* The RESYNC covers it: the chain goes on from it, and a late copy is
	 * dropped as a duplicate. */
	if (!dropped)
		event_chain_to_locked(c, st->last_event_index, st->last_event_sub);
}

/* Gives back r's place in its group's window, if it holds one. */
static void req_credit_release(struct hasp_client *c, struct client_req *r)
{
	if (r->group_credit) {
		r->group_credit = false;
		client_group_credit_return_locked(c);
	}
}

/* Takes a place in the group's window for a request (or an open) whose
 * deadline is deadline_ns; true without a group. False: the window is
 * full, and the client waits on the group's list, woken when a place
 * frees or at the deadline. */
static bool group_place_take_locked(struct hasp_client *c, uint64_t deadline_ns, uint64_t *wake_ns)
{
	if (c->group == NULL || client_group_credit_take_locked(c))
		return true;
	if (deadline_ns < *wake_ns)
		*wake_ns = deadline_ns;
	return false;
}

static void req_finish(struct hasp_client *c, struct client_req *r, int rc)
{
	req_credit_release(c, r);
	r->state = REQ_DONE;
	r->rc = rc;
}

/*
 * One step of a SENT request (the exchange): takes a reply that arrived,
 * follows NOT_LEADER, asks every node after silence or an unknown leader
 * (struct finder), backs off on UNAVAILABLE and OVERLOADED, always with the
 * same bytes, and times out at the deadline (the slot then stays
 * ABANDONED until a late reply frees it). Returns true when DONE.
 */
static bool req_step_sent_locked(struct hasp_client *c, struct client_req *r, uint64_t now,
				 uint64_t *wake_ns)
{
	struct pending *p = r->p;
	bool open = p == &c->open_slot;

	HASP_ASSERT(r->state == REQ_SENT);
	for (;;) {
		if (!open && p->state == PENDING_WAITING &&
		    (c->session_state != SESSION_OPEN || c->session_id != p->session_id)) {
			/* Another thread replaced the session (it expired, or
			 * the window wrapped): no answer can come any more,
			 * and the outcome is unknown, as after a timeout. */
			pending_state_set(c, p, PENDING_FREE);
			p->req = NULL;
			c->stats.timeouts++;
			client_ttl_cap_note_locked(c, r, now);
			req_finish(c, r, -HASP_ETIMEDOUT);
			return true;
		}
		if (p->state == PENDING_DONE) {
			/* The status alone (dispatch decoded and kept it): only
			 * a redirect's body is read here. */
			uint8_t status = p->status;

			if (status == HASP_STATUS_NOT_LEADER) {
				struct hasp_wire_msg m;
				int rc = hasp_wire_decode_reply(r->reply, r->reply_size, &m);

				HASP_ASSERT(rc == 0); /* dispatch decoded it already */
				c->stats.redirects++;
				pending_state_set(c, p, PENDING_WAITING);
				finder_heard(&r->f, p->from_index);
				int hinted = finder_hint(c, &r->f, &m.body.not_leader, p->from_index);
				if (hinted >= 0) {
					/* Straight to the named leader, same seq. */
					r->f.probing = false;
					r->f.target = (uint32_t)hinted;
					c->target = r->f.target;
					r->timer_kind = TIMER_SEND;
					r->timer_ns = now;
				} else if (!r->f.probing) {
					/* Unknown leader (an election), or a hint
					 * to a silent node: ask everyone now, then
					 * after each backoff. */
					r->f.probing = true;
					r->f.target = p->from_index;
					r->timer_kind = TIMER_SEND;
					r->timer_ns = now;
				}
				/* Probing already: the next round is due. */
				continue;
			}
			if (status == HASP_STATUS_UNAVAILABLE ||
			    status == HASP_STATUS_OVERLOADED) {
				/* Retry the same seq after a backoff; a node
				 * without quorum may be in the minority, so
				 * UNAVAILABLE moves on to the next node, and
				 * while probing, the round covers it. */
				pending_state_set(c, p, PENDING_WAITING);
				finder_heard(&r->f, p->from_index);
				if (status == HASP_STATUS_UNAVAILABLE && r->f.probing)
					continue;
				r->f.probing = false;
				r->f.target = p->from_index;
				if (status == HASP_STATUS_UNAVAILABLE)
					r->f.target = (p->from_index + 1) % c->node_count;
				r->timer_kind = TIMER_SEND;
				r->timer_ns = now + finder_backoff(c, &r->f);
				continue;
			}
			/* A final answer: this node serves us; remember it.
			 * Watches are node-local and a node drops them when it
			 * steps down, so when another node answers (a new
			 * leader) register them again after this call (WATCH
			 * is idempotent per session and name on a node). Any
			 * node may answer SESSION_OPEN: it does not count. */
			if (!open) {
				/* A node that first let this request go unanswered
				 * may have restarted meanwhile (a whole-cluster
				 * restart can elect the same node again), and a
				 * restart loses its watch table: register again
				 * (the RESYNC tells the application). */
				bool restarted = (r->f.silent_ever & (1u << p->from_index)) != 0;
				if (c->answered_any && (c->answered_by != p->from_index || restarted))
					watches_forget_registrations_locked(c);
				c->answered_by = p->from_index;
				c->answered_any = true;
				if (c->group != NULL) /* the other members learn it too */
					client_group_leader_seen_locked(c, &c->nodes[p->from_index]);
			}
			c->target = p->from_index;
			pending_state_set(c, p, PENDING_FREE); /* the reply is in r->reply already */
			p->req = NULL;
			req_finish(c, r, status);
			if (!open) {
				if (status == HASP_STATUS_SESSION_EXPIRED) {
					/* Every lock and watch of the session is
					 * gone on the cluster; the next call opens
					 * a new one. */
					if (c->session_id == r->session_id) {
						c->session_state = SESSION_NONE;
						client_kept_verify_locked(c);
					}
				} else if (r->first_send_ns > c->session_last_ok_send_ns &&
					   c->session_id == r->session_id &&
					   hasp_wire_op_is_command(r->opcode)) {
					/* Only a committed command renewed the
					 * session on the cluster: a read, a watch
					 * or a watch query must not put the
					 * keepalive off (a waiter re-reading its
					 * lock every 500 ms lost its session). */
					c->session_last_ok_send_ns = r->first_send_ns;
				}
				client_wake_locked(c); /* a slot freed */
			}
			return true;
		}
		/* Send at least once: a number taken is a request made. */
		if (now >= r->deadline_ns && r->sent) {
			pending_state_set(c, p, PENDING_ABANDONED);
			p->req = NULL; /* a late reply frees the slot, unread */
			c->stats.timeouts++;
			client_ttl_cap_note_locked(c, r, now);
			req_finish(c, r, -HASP_ETIMEDOUT);
			return true;
		}
		if (now >= r->timer_ns) {
			if (r->timer_kind == TIMER_SEND) {
				uint32_t n = finder_send(c, &r->f, r->bytes, r->size);
				if (!r->sent) {
					r->first_send_ns = now;
					c->stats.tx_requests++;
					c->stats.tx_retransmits += n - 1;
					r->sent = true;
				} else {
					c->stats.tx_retransmits += n;
				}
				/* Probing: the next round after a backoff
				 * (replies still count meanwhile). Directed:
				 * wait for this node. */
				if (r->f.probing) {
					uint64_t wait = finder_backoff(c, &r->f);
					r->timer_ns = now + (wait > PROBE_INTERVAL_MIN_NS ? wait : PROBE_INTERVAL_MIN_NS);
				} else {
					r->timer_kind = TIMER_SILENCE;
					r->timer_ns = now + (uint64_t)c->cfg.request_timeout_ms * NS_PER_MS;
				}
			} else {
				/* Silence: the node may be down or partitioned
				 * away. Ask every node at once, still
				 * listening for a late reply from this one. */
				finder_silence(&r->f);
				r->timer_kind = TIMER_SEND;
				r->timer_ns = now;
			}
			continue;
		}
		uint64_t wake = r->timer_ns < r->deadline_ns ? r->timer_ns : r->deadline_ns;
		if (wake < *wake_ns)
			*wake_ns = wake;
		return false;
	}
}

static uint64_t nonce_next(struct hasp_client *c)
{
	uint64_t n;

	do {
		n = prng_next(&c->prng);
	} while (n == 0);
	return n;
}

/* Starts a SESSION_OPEN in c->open_req. One nonce per open; its
 * retransmissions carry the same bytes, so a node that saw the first one
 * returns the same session. */
static void session_open_start_locked(struct hasp_client *c, uint64_t deadline_ns)
{
	struct hasp_wire_msg req;
	struct client_req *r = &c->open_req;
	int size;

	memset(&req, 0, sizeof(req));
	req.hdr.opcode = HASP_OP_SESSION_OPEN;
	/* Grouped: the reply, which has no session id yet, finds its client
	 * in the group by this number (echoed), so the group hands them out. */
	req.hdr.seq = c->group != NULL ? client_group_open_seq_locked(c) : c->open_count + 1;
	c->open_count = req.hdr.seq;
	req.body.session_open.client_nonce = nonce_next(c);
	req.body.session_open.ttl_ms = c->cfg.session_ttl_ms;
	c->open_nonce = req.body.session_open.client_nonce;
	if (c->auth) {
		req.hdr.version = 2;
		req.body.session_open.identity =
			(struct hasp_wire_bytes){ c->identity, c->identity_size };
	}
	memset(r, 0, offsetof(struct client_req, size));
	size = hasp_wire_encode(&req, r->bytes, sizeof(r->bytes));
	HASP_ASSERT(size > 0); /* the TTL and identity were checked at open */
	if (c->auth)
		hasp_wire_seal(&c->identity_key, r->bytes, (size_t)size);
	r->size = (size_t)size;
	r->opcode = HASP_OP_SESSION_OPEN;
	r->deadline_ns = deadline_ns;
	r->state = REQ_SENT;
	r->p = &c->open_slot;
	r->timer_kind = TIMER_SEND;
	r->timer_ns = 0;
	finder_init(c, &r->f);

	c->session_state = SESSION_OPENING;
	c->open_slot.session_id = 0;
	c->open_slot.seq = req.hdr.seq;
	c->open_slot.opcode = HASP_OP_SESSION_OPEN;
	pending_state_set(c, &c->open_slot, PENDING_WAITING);
	c->open_slot.req = r;
}

/* The open was answered OK: the session is ours. */
static void session_open_finish_locked(struct hasp_client *c, const struct hasp_wire_msg *rep)
{
	c->session_id = rep->body.session_opened.session_id;
	c->session_ttl_ms = rep->body.session_opened.ttl_ms;
	if (c->auth)
		hasp_session_key(&c->identity_key, c->session_id, c->open_nonce, &c->session_key);
	c->session_last_ok_send_ns = c->open_req.first_send_ns;
	c->next_seq = 1; /* PROTOCOL.md: the first request after SESSION_OPEN */
	/* A new session's chain starts empty (its events name prev (0, 0)). */
	c->event_last_index = 0;
	c->event_last_sub = 0;
	/* Emptied by its count: zeroing its 12 KB cost every session open
	 * 192 cache lines written (docs/PERFORMANCE.md, "session 10"). */
	c->event_recent_count = 0;
	c->event_recent_next = 0;
	/* Abandoned slots of the old session can never be answered now.
	 * Waiting ones belong to requests that will notice the new session
	 * and free them; slot taking waits for those. */
	for (uint32_t i = 0; i < HASP_SESSION_INFLIGHT_MAX; i++) {
		if (c->slots[i].state == PENDING_ABANDONED)
			pending_state_set(c, &c->slots[i], PENDING_FREE);
	}
	client_ttl_caps_session_replaced_locked(c);
	c->session_state = SESSION_OPEN;
	c->stats.session_opens++;
	if (c->group != NULL)
		client_group_session_locked(c); /* replies find it by this id */
	watches_mark_stale_locked(c);
	HASP_ASSERT(c->session_id != 0);
}

/* Moves the session towards OPEN without waiting: starts an open when none
 * is under way (bounded by `deadline_ns`), advances the one under way.
 * Returns 0 (open), -HASP_EAGAIN (opening: look again by *wake_ns), or how
 * the open this call saw end failed (-HASP_E*, a refusal mapped by
 * hasp_status_error). */
int client_session_advance_locked(struct hasp_client *c, uint64_t deadline_ns, uint64_t now,
				  uint64_t *wake_ns)
{
	struct hasp_wire_msg rep;
	int rc;

	if (c->session_state == SESSION_OPEN)
		return 0;
	if (c->session_state == SESSION_NONE) {
		if (c->closing)
			return -HASP_ESTATE; /* hasp_client_close_async: no new session */
		if (now >= deadline_ns)
			return -HASP_ETIMEDOUT;
		/* An open is a request in flight too (the group's window). */
		req_credit_release(c, &c->open_req);
		if (!group_place_take_locked(c, deadline_ns, wake_ns))
			return -HASP_EAGAIN;
		session_open_start_locked(c, deadline_ns);
		c->open_req.group_credit = c->group != NULL;
	}
	if (!req_step_sent_locked(c, &c->open_req, now, wake_ns))
		return -HASP_EAGAIN;
	c->session_state = SESSION_NONE;
	client_wake_locked(c);
	if (c->open_req.rc < 0)
		return c->open_req.rc;
	rc = hasp_wire_decode_reply(c->open_req.reply, c->open_req.reply_size, &rep);
	HASP_ASSERT(rc == 0);
	if (rep.hdr.status != HASP_STATUS_OK) {
		/* Refused (FORBIDDEN, FULL, ...): an error of the request that
		 * needed the session, never a status of its own reply. */
		rc = hasp_status_error(rep.hdr.status);
		return rc != 0 ? rc : -HASP_ECORRUPT;
	}
	session_open_finish_locked(c, &rep);
	return 0;
}

int client_session_ensure_locked(struct hasp_client *c, uint64_t deadline_ns)
{
	if (c->group != NULL)
		return -HASP_EINVAL; /* would wait on the group's socket */
	for (;;) {
		uint64_t now = client_now(c);
		uint64_t wake = deadline_ns;
		int rc = client_session_advance_locked(c, deadline_ns, now, &wake);

		if (rc == -HASP_ETIMEDOUT && now < deadline_ns)
			continue; /* an open with an earlier deadline: start ours */
		if (rc != -HASP_EAGAIN)
			return rc;
		if (now >= deadline_ns)
			return -HASP_ETIMEDOUT; /* the open goes on for whoever started it */
		client_wait_io_locked(c, wake);
	}
}

static bool any_waiting_locked(const struct hasp_client *c)
{
#ifdef HASP_DEBUG_ASSERTS
	uint32_t live = 0;
	for (uint32_t i = 0; i < HASP_SESSION_INFLIGHT_MAX; i++) {
		if (c->slots[i].state == PENDING_WAITING || c->slots[i].state == PENDING_DONE)
			live |= 1u << i;
	}
	HASP_ASSERT(live == c->slots_live);
#endif
	return c->slots_live != 0;
}

/* What a request would re-arm on a lock this session holds (ttl_caps.c;
 * the name stays in the datagram until a cap needs it). */
static void req_note_ttl_change(struct client_req *r, const struct hasp_wire_msg *msg)
{
	if (msg->hdr.opcode == HASP_OP_RENEW && msg->body.renew.ttl_ms != 0) {
		r->ttl_change_ms = msg->body.renew.ttl_ms;
		r->ttl_token = msg->body.renew.token;
	} else if (msg->hdr.opcode == HASP_OP_ACQUIRE && msg->body.acquire.lease_id == 0) {
		r->ttl_change_ms = msg->body.acquire.ttl_ms;
		r->ttl_token = 0;
	}
}

int client_req_init(struct hasp_client *c, struct client_req *r, struct hasp_wire_msg *msg,
		    uint64_t deadline_ns)
{
	int size;

	memset(r, 0, offsetof(struct client_req, size));
	/* Encode once before taking a sequence number: a request the codec
	 * refuses must not leave a gap in the session's numbering. The header's
	 * session and seq are patched in when the number is taken. */
	msg->hdr.flags = 0;
	msg->hdr.status = 0;
	msg->hdr.session_id = 1;
	msg->hdr.seq = 0;
	msg->hdr.version = c->auth ? 2 : 1;
	size = hasp_wire_encode(msg, r->bytes, sizeof(r->bytes));
	if (size < 0)
		return size;
	r->size = (size_t)size;
	r->opcode = msg->hdr.opcode;
	r->deadline_ns = deadline_ns;
	r->state = REQ_IDLE;
	req_note_ttl_change(r, msg);
	return 0;
}

/* Header offsets of the flags, the session id and the sequence number
 * (wire.h). */
#define WIRE_OFF_FLAGS 6
#define WIRE_OFF_SESSION 8
#define WIRE_OFF_SEQ 16

/* Whether the session's next number may be taken now: its slot (that of
 * the number 32 below) is free. An abandoned one that nothing else waits
 * beside ends the session instead: s - 32 was never answered, so s cannot
 * be sent in it, and the caller starts another. */
static bool req_slot_free_locked(struct hasp_client *c)
{
	const struct pending *p = &c->slots[c->next_seq % HASP_SESSION_INFLIGHT_MAX];

	HASP_ASSERT(c->session_state == SESSION_OPEN);
	if (p->state == PENDING_FREE)
		return true;
	if (p->state == PENDING_ABANDONED && !any_waiting_locked(c))
		c->session_state = SESSION_NONE;
	return false;
}

/* Gives r the session's next number (req_slot_free_locked said it may). */
static void req_take_slot_locked(struct hasp_client *c, struct client_req *r)
{
	struct pending *p = &c->slots[c->next_seq % HASP_SESSION_INFLIGHT_MAX];

	HASP_ASSERT(c->session_state == SESSION_OPEN && p->state == PENDING_FREE);
	/* With no lower number of this session waiting for its reply, none is
	 * sent again (an abandoned one never is): the node may drop the
	 * replies it keeps for them (PROTOCOL.md, "Exactly once"). */
	uint16_t flags = any_waiting_locked(c) ? 0 : HASP_WIRE_F_SEQ_FLOOR;
	p->session_id = c->session_id;
	p->seq = c->next_seq++;
	p->opcode = r->opcode;
	pending_state_set(c, p, PENDING_WAITING);
	p->req = r;
	r->p = p;
	r->session_id = c->session_id;
	put_u16le(r->bytes + WIRE_OFF_FLAGS, flags);
	put_u64le(r->bytes + WIRE_OFF_SESSION, c->session_id);
	put_u64le(r->bytes + WIRE_OFF_SEQ, p->seq);
	if (c->auth)
		hasp_wire_seal(&c->session_key, r->bytes, r->size);
	r->state = REQ_SENT;
	r->timer_kind = TIMER_SEND;
	r->timer_ns = 0;
	finder_init(c, &r->f);
}

bool client_req_advance_locked(struct hasp_client *c, struct client_req *r, uint64_t now,
			       uint64_t *wake_ns)
{
	while (r->state == REQ_IDLE) {
		/* A session is never opened to be closed: none open (or the
		 * window wrapped, which ended it) is what the close wanted. */
		if (r->opcode == HASP_OP_SESSION_CLOSE && c->session_state != SESSION_OPEN) {
			req_finish(c, r, -HASP_ESESSION);
			return true;
		}
		/* The open first: one that reached its own deadline ends now. */
		int rc = client_session_advance_locked(c, r->deadline_ns, now, wake_ns);
		if (now >= r->deadline_ns) {
			req_finish(c, r, -HASP_ETIMEDOUT); /* before taking a number */
			return true;
		}
		if (rc == -HASP_EAGAIN)
			return false;
		if (rc == -HASP_ETIMEDOUT)
			continue; /* an open with an earlier deadline: start ours */
		if (rc != 0) {
			/* The open this request waited on failed; a later
			 * request starts another one. */
			req_finish(c, r, rc);
			return true;
		}
		/* The session's slot before the group's place: a request that
		 * waits for its own session (32 in flight) must not hold a
		 * place that another client's request could send with. */
		if (!req_slot_free_locked(c)) {
			if (c->session_state != SESSION_OPEN)
				continue; /* the window wrapped: a new session */
			if (r->deadline_ns < *wake_ns)
				*wake_ns = r->deadline_ns; /* woken when a slot frees */
			return false;
		}
		HASP_ASSERT(!r->group_credit); /* taken only with the slot, below */
		if (!group_place_take_locked(c, r->deadline_ns, wake_ns))
			return false;
		r->group_credit = c->group != NULL;
		req_take_slot_locked(c, r);
	}
	if (r->state == REQ_DONE)
		return true;
	return req_step_sent_locked(c, r, now, wake_ns);
}

bool client_req_abandon_locked(struct hasp_client *c, struct client_req *r)
{
	if (r->state == REQ_SENT) {
		struct pending *p = r->p;

		/* Its final answer is in already (a redirect is not one): no
		 * later reply would ever free an ABANDONED slot, and the
		 * operation happened, so the request completes with it at its
		 * next advance, which frees the slot (issue 17). */
		if (p->state == PENDING_DONE && !status_redirects(p->status))
			return false;
		pending_state_set(c, p, PENDING_ABANDONED);
		p->req = NULL; /* r may be reused or freed: a late reply is dropped */
		c->stats.timeouts++;
		client_ttl_cap_note_locked(c, r, client_now(c));
	}
	req_finish(c, r, -HASP_ECANCELED);
	return true;
}

int client_call(struct hasp_client *c, struct client_call *call)
{
	struct client_req *r;
	int rc;

	HASP_ASSERT(c != NULL);
	HASP_ASSERT(call != NULL);
	if (c->group != NULL)
		return -HASP_EINVAL; /* would wait on the group's socket */
	if (call->deadline_ns == 0)
		call->deadline_ns = client_deadline(c);
	if (client_now(c) >= call->deadline_ns)
		return -HASP_ETIMEDOUT; /* before taking a number */
	r = hasp_calloc(1, sizeof(*r));
	if (r == NULL)
		return -HASP_ENOMEM;
	rc = client_req_init(c, r, &call->req, call->deadline_ns);
	if (rc != 0) {
		hasp_free(r);
		return rc;
	}
	pthread_mutex_lock(&c->mu);
	for (;;) {
		uint64_t now = client_now(c);
		uint64_t wake = UINT64_MAX;
		if (client_req_advance_locked(c, r, now, &wake))
			break;
		client_wait_io_locked(c, wake);
	}
	pthread_mutex_unlock(&c->mu);
	rc = r->rc;
	call->session_id = r->session_id;
	call->first_send_ns = r->first_send_ns;
	if (rc >= 0) {
		HASP_ASSERT(r->reply_size >= HASP_WIRE_HEADER_SIZE);
		memcpy(call->reply_buf, r->reply, r->reply_size);
		int drc = hasp_wire_decode_reply(call->reply_buf, r->reply_size, &call->reply);
		HASP_ASSERT(drc == 0);
	}
	hasp_free(r);
	/* A new session has no watches: register them again (the WATCH calls
	 * find the flag clear, so this does not recurse). */
	client_watches_resend_if_stale(c);
	return rc;
}

void client_watches_resend_if_stale(struct hasp_client *c)
{
	pthread_mutex_lock(&c->mu);
	bool resend = c->watches_stale && c->session_state == SESSION_OPEN;
	if (resend)
		c->watches_stale = false;
	pthread_mutex_unlock(&c->mu);
	if (resend)
		client_watches_resend(c);
}

void client_session_close_nowait_locked(struct hasp_client *c)
{
	struct client_req *r;
	struct hasp_wire_msg m;

	if (c->session_state != SESSION_OPEN)
		return;
	r = hasp_calloc(1, sizeof(*r));
	if (r == NULL)
		return; /* best effort: the session expires at its TTL */
	memset(&m, 0, sizeof(m));
	m.hdr.opcode = HASP_OP_SESSION_CLOSE;
	if (client_req_init(c, r, &m, 0) == 0) {
		/* The next number, without a slot: nobody waits for the answer,
		 * and a window full of unanswered requests only means the node
		 * refuses it and the session ends at its TTL instead. */
		put_u64le(r->bytes + WIRE_OFF_SESSION, c->session_id);
		put_u64le(r->bytes + WIRE_OFF_SEQ, c->next_seq++);
		if (c->auth)
			hasp_wire_seal(&c->session_key, r->bytes, r->size);
		send_to(c, c->target, r->bytes, r->size);
		c->stats.tx_requests++;
	}
	hasp_free(r);
	c->session_state = SESSION_NONE;
}
