/*
 * Client groups (include/hasp/client.h "client groups", docs/CLIENT.md
 * "Client groups"): many clients, each its own session, on one UDP socket
 * driven by one loop.
 *
 * Only the transport is shared, and the leader (below). Each client keeps
 * its own session, window, retransmission, leader finding, keepalives,
 * watches and event chain (the code of exchange.c and ops.c); a grouped
 * client's sends come here (client_group_send) and the group's loop hands
 * it what it reads (client_dispatch_locked), where the client checks the source, the
 * version and the authentication tag as it does on a socket of its own.
 *
 * Routing: a reply echoes the request's session id and sequence number. A
 * datagram naming a session goes to the member whose current session it
 * is; a SESSION_OPEN reply (session id 0) to the member whose open used
 * that sequence number, which the group hands out (unique in the group).
 * Anything else is dropped and counted: never given to another client.
 *
 * The leader is the one thing members share of what they learn: watches
 * live on the leader, and a member that sends only keepalives would learn
 * of a new one up to a third of its session TTL late, its events lost
 * until then. So the node of any member's final answer is the group's
 * leader; when it changes, the members with registered watches (a list
 * kept for this, not a walk of every member) are woken and, at their
 * next pass, forget those registrations and register them with the new
 * leader, and every member sends its next requests there first. Nodes
 * are compared by address: members may list them in different orders.
 * Members may even use different clusters: only a member that knows the
 * group's leader moves it, and only members that know a node follow it.
 *
 * The transport is the group's UDP socket, or the application's own
 * (hasp_client_group_new_io: a DPDK or other user-space stack): then the
 * group has no socket, the application hands it what it receives
 * (hasp_client_group_input, routed as a datagram read off the socket)
 * and the group's sends go to the application's send function. The
 * clients cannot tell the difference.
 *
 * Threads: the loop thread owns the member table, the routing keys, the
 * send queue and the members' due times; the ready list (clients
 * that must be processed: an op started, a cancel) is guarded by `mu`,
 * taken after a client's mutex, since *_async calls and cancels may come
 * from other threads.
 */
#include "hasp/client.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/client_impl.h"
#include "common/alloc.h"
#include "common/assert.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "hasp/wire.h"

#define NS_PER_MS 1000000ull
#define GROUP_RX_MMSG 32      /* datagrams per recvmmsg(2) */
#define GROUP_RX_BATCH_MAX 512 /* datagrams read per process call */
#define GROUP_TX_MAX 64        /* datagrams per sendmmsg(2) */
#define GROUP_ROUNDS 4         /* passes for clients woken during a pass */
#define GROUP_MEMBERS_MIN 16
#define GROUP_SOCKET_BUFFER (8 << 20) /* SO_RCVBUF asked for (capped by the kernel) */

/* Header fields the router reads (docs/PROTOCOL.md "Header"). */
#define WIRE_OFF_OPCODE 5
#define WIRE_OFF_SESSION 8
#define WIRE_OFF_SEQ 16

struct group_tx {
	struct sockaddr_in to;
	size_t size;
	uint8_t data[HASP_DATAGRAM_SIZE_MAX];
};

struct group_rx {
	uint8_t data[HASP_DATAGRAM_SIZE_MAX + 1]; /* +1: see an oversized one */
	struct sockaddr_in from;
};

struct hasp_client_group {
	int fd;       /* the shared UDP socket; -1 on the application's datagrams */
	struct hasp_client_group_io io; /* send NULL: the socket */
	int wake_fd;  /* eventfd: a client needs the loop */
	int epoll_fd; /* fd + wake_fd: what hasp_client_group_fd hands out */

	/* The loop thread's. */
	struct hasp_client **members;
	uint64_t *member_session; /* the member's current session id (0: none) */
	uint64_t *member_open_seq; /* the seq of its latest SESSION_OPEN */
	/* When the loop must process the member next (UINT64_MAX: nothing in
	 * progress), dense, so that finding the due ones reads 8 bytes a
	 * member, not a cache line of each client. */
	uint64_t *member_due;
	/* At most the least of member_due (member_due_set keeps it so, a
	 * full pass of group_run_due makes it exact): when it lies ahead, a
	 * process call and the timeout need not read any member's. */
	uint64_t due_min;
	uint32_t member_count;
	uint32_t member_cap;
	/* Members with a session, by session id: open addressing, linear
	 * probing, at most half full (by_session_mask + 1 >= 2 * member_cap),
	 * so that routing a reply costs O(1), not a walk over every member
	 * (a group is meant for thousands of sessions). */
	struct hasp_client **by_session;
	uint32_t by_session_mask;
	bool processing; /* in hasp_client_group_process: sends are queued */
	struct group_tx *tx;
	uint32_t tx_count;
	struct group_rx *rx;
	/* recvmmsg(2)'s vectors over rx, made once: only each name's length
	 * is reset per call (the kernel writes it back). */
	struct iovec rx_iov[GROUP_RX_MMSG];
	struct mmsghdr rx_msgs[GROUP_RX_MMSG];
	struct hasp_client_group_stats stats;

	/* The node of the latest final answer to any member (by address),
	 * how often it changed, and the members with registered watches,
	 * woken when it changes (c->group_watcher_pos is a place + 1). */
	struct sockaddr_in leader;
	bool leader_known;
	uint64_t leader_changes;
	struct hasp_client **watchers; /* member_cap entries */
	uint32_t watcher_count;

	uint64_t open_seq; /* atomic: the last SESSION_OPEN seq handed out */

	pthread_mutex_t mu; /* guards what follows */
	struct hasp_client **ready; /* member_cap entries */
	uint32_t ready_count;
	/* The window (below): its size (0: no bound), the places taken, and
	 * the clients waiting for one, first come first woken. */
	uint32_t window;
	uint32_t inflight;
	struct hasp_client *credit_head, *credit_tail;
	uint64_t credit_waits;
	bool wake_pending; /* wake_fd written, not read yet */
	bool loop_busy;    /* the loop processes: it looks at `ready` again */
};

static void credit_wake_waiters(struct hasp_client_group *g);
static void credit_waiter_remove(struct hasp_client_group *g, struct hasp_client *c);

static void group_rx_vectors_init(struct hasp_client_group *g)
{
	for (int i = 0; i < GROUP_RX_MMSG; i++) {
		struct group_rx *x = &g->rx[i];
		g->rx_iov[i] = (struct iovec){ .iov_base = x->data, .iov_len = sizeof(x->data) };
		g->rx_msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_name = &x->from,
							       .msg_namelen = sizeof(x->from),
							       .msg_iov = &g->rx_iov[i],
							       .msg_iovlen = 1 } };
	}
}

/* Sets when member i is due; keeps the group's due_min a lower bound. */
static inline void member_due_set(struct hasp_client_group *g, uint32_t i, uint64_t due)
{
	g->member_due[i] = due;
	if (due < g->due_min)
		g->due_min = due;
}

/* A group on its own socket (io NULL) or on the application's datagrams. */
static int group_new(struct hasp_client_group **group, const struct hasp_client_group_io *io)
{
	struct hasp_client_group *g;
	struct epoll_event ev = { .events = EPOLLIN };

	if (group == NULL)
		return -HASP_EINVAL;
	*group = NULL;
	if (io != NULL && io->send == NULL)
		return -HASP_EINVAL;
	g = hasp_calloc(1, sizeof(*g));
	if (g == NULL)
		return -HASP_ENOMEM;
	g->fd = g->wake_fd = g->epoll_fd = -1;
	g->due_min = UINT64_MAX; /* no members */
	g->tx = hasp_calloc(GROUP_TX_MAX, sizeof(*g->tx));
	g->rx = hasp_calloc(GROUP_RX_MMSG, sizeof(*g->rx));
	if (g->tx == NULL || g->rx == NULL) {
		hasp_free(g->tx);
		hasp_free(g->rx);
		hasp_free(g);
		return -HASP_ENOMEM;
	}
	group_rx_vectors_init(g);
	pthread_mutex_init(&g->mu, NULL);
	g->window = HASP_CLIENT_GROUP_WINDOW_DEFAULT;
	g->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	g->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (g->wake_fd < 0 || g->epoll_fd < 0)
		goto fail;
	ev.data.fd = g->wake_fd;
	if (epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, g->wake_fd, &ev) != 0)
		goto fail;
	if (io != NULL) {
		g->io = *io;
		*group = g;
		return 0;
	}
	g->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (g->fd < 0)
		goto fail;
	/* One socket takes every member's replies and events: a release
	 * burst to thousands of watchers overflowed the default 208 KiB
	 * (hasp-bench's 20,000-lock storm on libhasp: 176,114 datagrams lost,
	 * docs/PERFORMANCE.md "Release storm"). The kernel caps the request
	 * at net.core.rmem_max; best effort. */
	int buf_size = GROUP_SOCKET_BUFFER;
	(void)setsockopt(g->fd, SOL_SOCKET, SO_RCVBUF, &buf_size, sizeof(buf_size));
	ev.data.fd = g->fd;
	if (epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, g->fd, &ev) != 0)
		goto fail;
	*group = g;
	return 0;
fail:
	hasp_client_group_free(g);
	return -HASP_ESYS;
}

int hasp_client_group_new(struct hasp_client_group **group)
{
	return group_new(group, NULL);
}

int hasp_client_group_new_io(struct hasp_client_group **group, const struct hasp_client_group_io *io)
{
	return io == NULL ? -HASP_EINVAL : group_new(group, io);
}

void hasp_client_group_free(struct hasp_client_group *g)
{
	if (g == NULL)
		return;
	HASP_ASSERT(g->member_count == 0); /* client.h: close the clients first */
	if (g->fd >= 0)
		close(g->fd);
	if (g->wake_fd >= 0)
		close(g->wake_fd);
	if (g->epoll_fd >= 0)
		close(g->epoll_fd);
	pthread_mutex_destroy(&g->mu);
	hasp_free(g->members);
	hasp_free(g->member_session);
	hasp_free(g->member_open_seq);
	hasp_free(g->member_due);
	hasp_free(g->by_session);
	hasp_free(g->ready);
	hasp_free(g->watchers);
	hasp_free(g->tx);
	hasp_free(g->rx);
	hasp_free(g);
}

/* ---- the session index ---- */

static uint32_t session_home(const struct hasp_client_group *g, uint64_t session)
{
	return (uint32_t)((session * 0x9e3779b97f4a7c15ull) >> 32) & g->by_session_mask;
}

static uint64_t session_of(const struct hasp_client_group *g, const struct hasp_client *c)
{
	return g->member_session[c->group_index];
}

/* Indexes c under its session (not 0, not indexed yet). */
static void session_index_add(struct hasp_client_group *g, struct hasp_client *c)
{
	uint32_t i = session_home(g, session_of(g, c));

	while (g->by_session[i] != NULL)
		i = (i + 1) & g->by_session_mask;
	g->by_session[i] = c;
}

/* Takes c (indexed under its session) out, moving back the entries after
 * it that it pushed past their home slot, so every lookup still meets
 * its entry before an empty slot. */
static void session_index_remove(struct hasp_client_group *g, struct hasp_client *c)
{
	uint32_t mask = g->by_session_mask;
	uint32_t i = session_home(g, session_of(g, c));

	while (g->by_session[i] != c) {
		HASP_ASSERT(g->by_session[i] != NULL);
		i = (i + 1) & mask;
	}
	for (uint32_t j = (i + 1) & mask; g->by_session[j] != NULL; j = (j + 1) & mask) {
		uint32_t home = session_home(g, session_of(g, g->by_session[j]));
		/* j's entry may fill the hole at i unless its home lies
		 * cyclically in (i, j]. */
		bool home_between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!home_between) {
			g->by_session[i] = g->by_session[j];
			i = j;
		}
	}
	g->by_session[i] = NULL;
}

/* Of the members holding `session`, the one whose cluster `from` is in:
 * session ids are unique in a cluster, not across the clusters a group's
 * members may use (each counts its own from 1). NULL if none knows it. */
static struct hasp_client *session_owner_by_sender(const struct hasp_client_group *g,
						   uint64_t session, const struct sockaddr_in *from)
{
	for (uint32_t i = session_home(g, session); g->by_session[i] != NULL;
	     i = (i + 1) & g->by_session_mask) {
		struct hasp_client *c = g->by_session[i];
		if (session_of(g, c) != session)
			continue;
		pthread_mutex_lock(&c->mu); /* its node list grows as it learns leaders */
		bool knows = client_knows_node_locked(c, from);
		pthread_mutex_unlock(&c->mu);
		if (knows)
			return c;
	}
	return NULL;
}

/* The member a reply for `session` from `from` is for: the one member
 * holding that session, as a rule; when two or more do (members of
 * different clusters), the one that knows the sender. */
static struct hasp_client *session_index_find(const struct hasp_client_group *g, uint64_t session,
					      const struct sockaddr_in *from)
{
	struct hasp_client *first = NULL;

	for (uint32_t i = session_home(g, session); g->by_session[i] != NULL;
	     i = (i + 1) & g->by_session_mask) {
		if (session_of(g, g->by_session[i]) != session)
			continue;
		if (first != NULL)
			return session_owner_by_sender(g, session, from);
		first = g->by_session[i];
	}
	return first;
}

/* Grows the member table (and the ready list, which holds at most every
 * member once, and the session index) to `cap`. */
static int group_grow(struct hasp_client_group *g, uint32_t cap)
{
	uint32_t slots = 1;
	while (slots < 2 * cap)
		slots *= 2;
	struct hasp_client **members = hasp_calloc(cap, sizeof(*members));
	uint64_t *session = hasp_calloc(cap, sizeof(*session));
	uint64_t *open_seq = hasp_calloc(cap, sizeof(*open_seq));
	uint64_t *due = hasp_calloc(cap, sizeof(*due));
	struct hasp_client **ready = hasp_calloc(cap, sizeof(*ready));
	struct hasp_client **by_session = hasp_calloc(slots, sizeof(*by_session));
	struct hasp_client **watchers = hasp_calloc(cap, sizeof(*watchers));

	if (members == NULL || session == NULL || open_seq == NULL || due == NULL || ready == NULL ||
	    by_session == NULL || watchers == NULL) {
		hasp_free(watchers);
		hasp_free(members);
		hasp_free(session);
		hasp_free(open_seq);
		hasp_free(due);
		hasp_free(ready);
		hasp_free(by_session);
		return -HASP_ENOMEM;
	}
	if (g->member_count > 0) {
		memcpy(members, g->members, g->member_count * sizeof(*members));
		memcpy(session, g->member_session, g->member_count * sizeof(*session));
		memcpy(open_seq, g->member_open_seq, g->member_count * sizeof(*open_seq));
		memcpy(due, g->member_due, g->member_count * sizeof(*due));
	}
	if (g->watcher_count > 0)
		memcpy(watchers, g->watchers, g->watcher_count * sizeof(*watchers));
	hasp_free(g->watchers);
	g->watchers = watchers;
	hasp_free(g->members);
	hasp_free(g->member_session);
	hasp_free(g->member_open_seq);
	hasp_free(g->member_due);
	g->members = members;
	g->member_due = due;
	g->member_session = session;
	g->member_open_seq = open_seq;
	hasp_free(g->by_session);
	g->by_session = by_session;
	g->by_session_mask = slots - 1;
	for (uint32_t i = 0; i < g->member_count; i++)
		if (session[i] != 0)
			session_index_add(g, members[i]);
	pthread_mutex_lock(&g->mu);
	if (g->ready_count > 0)
		memcpy(ready, g->ready, g->ready_count * sizeof(*ready));
	hasp_free(g->ready);
	g->ready = ready;
	pthread_mutex_unlock(&g->mu);
	g->member_cap = cap;
	return 0;
}

int client_group_join(struct hasp_client_group *g, struct hasp_client *c)
{
	if (g->member_count == g->member_cap) {
		uint32_t cap = g->member_cap * 2;
		int rc = group_grow(g, cap < GROUP_MEMBERS_MIN ? GROUP_MEMBERS_MIN : cap);
		if (rc != 0)
			return rc;
	}
	c->group = g;
	c->group_index = g->member_count;
	g->members[g->member_count] = c;
	g->member_session[g->member_count] = 0;
	g->member_open_seq[g->member_count] = 0;
	g->member_due[g->member_count] = UINT64_MAX; /* nothing in progress yet */
	g->member_count++;
	c->group_leader_changes = 0; /* its first pass follows a leader known */
	c->group_watcher_pos = 0;
	return 0;
}

static void watchers_remove(struct hasp_client_group *g, struct hasp_client *c)
{
	uint32_t i = c->group_watcher_pos - 1;
	struct hasp_client *last = g->watchers[--g->watcher_count];

	HASP_ASSERT(c->group_watcher_pos != 0 && g->watchers[i] == c);
	g->watchers[i] = last;
	last->group_watcher_pos = i + 1;
	c->group_watcher_pos = 0;
}

void client_group_leave(struct hasp_client *c)
{
	struct hasp_client_group *g = c->group;
	uint32_t i = c->group_index;
	uint32_t last = g->member_count - 1;

	HASP_ASSERT(i < g->member_count && g->members[i] == c);
	HASP_ASSERT(!g->processing); /* client.h: not from a callback */
	/* Its SESSION_CLOSE may wait in the queue (sent outside process
	 * it went at once; this covers a close the queue still holds). */
	pthread_mutex_lock(&g->mu);
	for (uint32_t r = 0; r < g->ready_count; r++) {
		if (g->ready[r] == c) {
			g->ready[r] = g->ready[--g->ready_count];
			break;
		}
	}
	credit_waiter_remove(g, c);
	/* Whatever it still had in flight ends with it (closed, their
	 * callbacks never run): its places go to the waiters. */
	HASP_ASSERT(g->inflight >= c->group_credits);
	g->inflight -= c->group_credits;
	c->group_credits = 0;
	credit_wake_waiters(g);
	pthread_mutex_unlock(&g->mu);
	if (g->member_session[i] != 0)
		session_index_remove(g, c);
	if (c->group_watcher_pos != 0)
		watchers_remove(g, c);
	g->members[i] = g->members[last];
	g->member_session[i] = g->member_session[last];
	g->member_open_seq[i] = g->member_open_seq[last];
	g->member_due[i] = g->member_due[last];
	g->members[i]->group_index = i;
	g->member_count--;
	c->group = NULL;
}

uint64_t client_group_open_seq_locked(struct hasp_client *c)
{
	struct hasp_client_group *g = c->group;
	uint64_t seq = __atomic_add_fetch(&g->open_seq, 1, __ATOMIC_RELAXED);

	g->member_open_seq[c->group_index] = seq;
	return seq;
}

void client_group_session_locked(struct hasp_client *c)
{
	struct hasp_client_group *g = c->group;

	if (session_of(g, c) != 0)
		session_index_remove(g, c);
	g->member_session[c->group_index] = c->session_id;
	if (c->session_id != 0)
		session_index_add(g, c);
}

void client_group_watching_locked(struct hasp_client *c)
{
	struct hasp_client_group *g = c->group;

	if (c->group_watcher_pos != 0)
		return;
	HASP_ASSERT(g->watcher_count < g->member_cap); /* each member once */
	g->watchers[g->watcher_count++] = c;
	c->group_watcher_pos = g->watcher_count;
}

static bool same_node(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

void client_group_leader_seen_locked(struct hasp_client *c, const struct sockaddr_in *node)
{
	struct hasp_client_group *g = c->group;

	if (g->leader_known && !same_node(&g->leader, node) &&
	    !client_knows_node_locked(c, &g->leader)) {
		/* A client of another cluster than the group's leader (or
		 * one that never heard of that node): its answers must not
		 * move the members of that cluster, nor flip the leader to
		 * and fro, waking every watcher, per answer of each. */
		return;
	}
	if (!g->leader_known || !same_node(&g->leader, node)) {
		g->leader = *node;
		g->leader_known = true;
		g->leader_changes++;
		/* The members whose watches may be on the old leader follow
		 * at their next pass, this process call's next round: on
		 * the ready list (c's mutex is held: the group's is taken
		 * after it, as everywhere). Members without watches follow
		 * whenever they next run. */
		pthread_mutex_lock(&g->mu);
		for (uint32_t i = 0; i < g->watcher_count; i++) {
			struct hasp_client *w = g->watchers[i];
			if (w != c && !w->group_ready) {
				w->group_ready = true;
				g->ready[g->ready_count++] = w;
			}
		}
		pthread_mutex_unlock(&g->mu);
	}
	/* Its own answer: it knows this leader (req_step_sent_locked).
	 * Written only when it changes: this runs for every answer. */
	if (c->group_leader_changes != g->leader_changes)
		c->group_leader_changes = g->leader_changes;
}

void client_group_leader_follow_locked(struct hasp_client *c, uint64_t now)
{
	struct hasp_client_group *g = c->group;
	bool watching = false;

	if (c->group_leader_changes == g->leader_changes)
		return; /* the usual pass: nothing learned meanwhile */
	c->group_leader_changes = g->leader_changes;
	client_leader_learned_locked(c, &g->leader, now);
	if (c->group_watcher_pos == 0)
		return;
	/* Off the list once it has no watch left (an UNWATCH takes one out
	 * without the loop's knowledge): it joins again at its next WATCH. */
	for (uint32_t i = 0; i < HASP_CLIENT_WATCHES_MAX && !watching; i++)
		watching = c->watches[i].used;
	if (!watching)
		watchers_remove(g, c);
}

/* Puts c on the ready list (under g->mu). */
static void ready_add(struct hasp_client_group *g, struct hasp_client *c)
{
	uint64_t one = 1;

	if (!c->group_ready) {
		c->group_ready = true;
		g->ready[g->ready_count++] = c;
	}
	/* The loop in process looks at the list before it returns; a loop
	 * waiting in poll(2) needs the eventfd, once until it reads it. */
	if (!g->loop_busy && !g->wake_pending) {
		(void)!write(g->wake_fd, &one, sizeof(one));
		g->wake_pending = true;
	}
}

void client_group_wake_locked(struct hasp_client *c)
{
	struct hasp_client_group *g = c->group;

	pthread_mutex_lock(&g->mu);
	ready_add(g, c);
	pthread_mutex_unlock(&g->mu);
}

/*
 * The window: a group bounds the requests its clients have in flight
 * together (hasp_client_group_set_window). Without a bound, thousands of
 * clients that start at once send thousands of datagrams in one pass, the
 * answers overflow the group's socket, every client retransmits, and the
 * answers to the retransmissions overflow it again (docs/PERFORMANCE.md,
 * "A fill of 100,000 sessions"). A request takes a place when it gets its
 * sequence number (a SESSION_OPEN when it starts) and gives it back when
 * it ends, however it ends (req_finish); a client's places go back when
 * it leaves the group. Retransmissions take none. A client that finds the
 * window full waits on a list, first come first woken, and is put on the
 * ready list when a place frees. All under g->mu.
 */
static void credit_wake_waiters(struct hasp_client_group *g)
{
	uint32_t free_places = g->window == 0		  ? UINT32_MAX
			       : g->inflight >= g->window ? 0
							  : g->window - g->inflight;

	for (; free_places > 0 && g->credit_head != NULL; free_places--) {
		struct hasp_client *w = g->credit_head;
		g->credit_head = w->group_credit_next;
		if (g->credit_head == NULL)
			g->credit_tail = NULL;
		w->group_credit_next = NULL;
		w->group_credit_waiting = false;
		ready_add(g, w);
	}
}

static void credit_waiter_remove(struct hasp_client_group *g, struct hasp_client *c)
{
	struct hasp_client *prev = NULL;

	if (!c->group_credit_waiting)
		return;
	for (struct hasp_client *w = g->credit_head; w != NULL; prev = w, w = w->group_credit_next) {
		if (w != c)
			continue;
		if (prev == NULL)
			g->credit_head = c->group_credit_next;
		else
			prev->group_credit_next = c->group_credit_next;
		if (g->credit_tail == c)
			g->credit_tail = prev;
		break;
	}
	c->group_credit_next = NULL;
	c->group_credit_waiting = false;
}

bool client_group_credit_take_locked(struct hasp_client *c)
{
	struct hasp_client_group *g = c->group;
	bool taken;

	pthread_mutex_lock(&g->mu);
	taken = g->window == 0 || g->inflight < g->window;
	if (taken) {
		g->inflight++;
		c->group_credits++;
	} else if (!c->group_credit_waiting) {
		c->group_credit_waiting = true;
		c->group_credit_next = NULL;
		if (g->credit_tail != NULL)
			g->credit_tail->group_credit_next = c;
		else
			g->credit_head = c;
		g->credit_tail = c;
		g->credit_waits++;
	}
	pthread_mutex_unlock(&g->mu);
	return taken;
}

void client_group_credit_return_locked(struct hasp_client *c)
{
	struct hasp_client_group *g = c->group;

	pthread_mutex_lock(&g->mu);
	HASP_ASSERT(c->group_credits > 0 && g->inflight > 0);
	c->group_credits--;
	g->inflight--;
	credit_wake_waiters(g);
	pthread_mutex_unlock(&g->mu);
}

uint64_t client_group_credit_waits(const struct hasp_client_group *g)
{
	return g->credit_waits; /* read by tests after the loop's calls */
}

int hasp_client_group_set_window(struct hasp_client_group *g, uint32_t requests)
{
	if (g == NULL)
		return -HASP_EINVAL;
	pthread_mutex_lock(&g->mu);
	g->window = requests;
	credit_wake_waiters(g);
	pthread_mutex_unlock(&g->mu);
	return 0;
}

/* One datagram to the application's send function; one it refuses is
 * lost, as on a full socket (the request's timer resends it). */
static void group_io_send(struct hasp_client_group *g, const struct sockaddr_in *to,
			  const uint8_t *data, size_t size)
{
	g->stats.tx_batches++;
	if (g->io.send(g->io.arg, to, data, size) == 0)
		g->stats.tx_datagrams++;
}

/* Sends the queued datagrams: one sendmmsg(2) per GROUP_TX_MAX (a group
 * on the application's datagrams queues none: client_group_send). */
static void group_flush(struct hasp_client_group *g)
{
	struct mmsghdr msgs[GROUP_TX_MAX];
	struct iovec iov[GROUP_TX_MAX];
	uint32_t sent = 0;

	for (uint32_t i = 0; i < g->tx_count; i++) {
		iov[i] = (struct iovec){ .iov_base = g->tx[i].data, .iov_len = g->tx[i].size };
		msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_name = &g->tx[i].to,
							 .msg_namelen = sizeof(g->tx[i].to),
							 .msg_iov = &iov[i],
							 .msg_iovlen = 1 } };
	}
	while (sent < g->tx_count) {
		int n = sendmmsg(g->fd, msgs + sent, g->tx_count - sent, MSG_DONTWAIT);
		g->stats.tx_batches++;
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			/* A full socket buffer or an unreachable node: the first
			 * datagram is lost (the retransmit timer covers it) and
			 * the rest still go. */
			sent++;
			continue;
		}
		g->stats.tx_datagrams += (uint64_t)n;
		sent += (uint32_t)n;
	}
	g->tx_count = 0;
}

void client_group_send(struct hasp_client *c, const struct sockaddr_in *to, const uint8_t *data,
		       size_t size)
{
	struct hasp_client_group *g = c->group;

	HASP_ASSERT(size <= HASP_DATAGRAM_SIZE_MAX);
	if (g->io.send != NULL) {
		/* At once, in or outside the loop: the application's send
		 * copies the datagram into its own buffer, and no system call
		 * is saved by queueing it here first. */
		group_io_send(g, to, data, size);
		return;
	}
	if (!g->processing) {
		/* Outside the loop (a close): at once. */
		g->stats.tx_batches++;
		if (sendto(g->fd, data, size, MSG_DONTWAIT, (const struct sockaddr *)to,
			   sizeof(*to)) == (ssize_t)size)
			g->stats.tx_datagrams++;
		return;
	}
	if (g->tx_count == GROUP_TX_MAX)
		group_flush(g);
	struct group_tx *t = &g->tx[g->tx_count++];
	t->to = *to;
	t->size = size;
	memcpy(t->data, data, size);
}

/* The member a datagram from `from` is for, or NULL. Only the header is
 * read here (and the sender, where a session id is held twice); the
 * client checks everything else (source, version, tag). */
static struct hasp_client *group_route(const struct hasp_client_group *g, const uint8_t *data,
				       size_t size, const struct sockaddr_in *from)
{
	if (size < HASP_WIRE_HEADER_SIZE)
		return NULL;
	uint64_t session = get_u64le(data + WIRE_OFF_SESSION);
	uint64_t seq = get_u64le(data + WIRE_OFF_SEQ);

	if (session == 0) {
		if (data[WIRE_OFF_OPCODE] != HASP_OP_SESSION_OPEN || seq == 0)
			return NULL;
		for (uint32_t i = 0; i < g->member_count; i++)
			if (g->member_open_seq[i] == seq)
				return g->members[i];
		return NULL;
	}
	return session_index_find(g, session, from);
}

/* Hands one received datagram to the member it names, which is then due
 * for processing, or drops and counts it. */
static void group_deliver(struct hasp_client_group *g, const uint8_t *data, size_t size,
			  const struct sockaddr_in *from)
{
	struct hasp_client *c = group_route(g, data, size, from);

	if (c == NULL) {
		g->stats.rx_unrouted++;
		return;
	}
	pthread_mutex_lock(&c->mu);
	client_dispatch_locked(c, data, size, from);
	pthread_mutex_unlock(&c->mu);
	member_due_set(g, c->group_index, 0);
}

/* Reads one recvmmsg(2) batch and hands each datagram to its client,
 * which is then due for processing. Returns the datagrams read (0 on the
 * application's datagrams: hasp_client_group_input hands them over). */
static uint32_t group_receive(struct hasp_client_group *g)
{
	struct mmsghdr *msgs = g->rx_msgs;

	if (g->fd < 0)
		return 0;

	for (int i = 0; i < GROUP_RX_MMSG; i++)
		msgs[i].msg_hdr.msg_namelen = sizeof(g->rx[i].from);
	int got = recvmmsg(g->fd, msgs, GROUP_RX_MMSG, MSG_DONTWAIT, NULL);
	if (got <= 0)
		return 0;
	g->stats.rx_batches++;
	g->stats.rx_datagrams += (uint64_t)got;
	for (int i = 0; i < got; i++) {
		size_t n = msgs[i].msg_len;
		if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
			n = sizeof(g->rx[i].data); /* refused by the decoder */
		if (n > sizeof(g->rx[i].data))
			n = sizeof(g->rx[i].data);
		if (msgs[i].msg_hdr.msg_namelen == sizeof(g->rx[i].from) &&
		    g->rx[i].from.sin_family == AF_INET)
			group_deliver(g, g->rx[i].data, n, &g->rx[i].from);
		else
			g->stats.rx_unrouted++;
	}
	return (uint32_t)got;
}

int hasp_client_group_input(struct hasp_client_group *g, const void *data, size_t size,
			    const struct sockaddr_in *from)
{
	if (g == NULL || (data == NULL && size > 0) || from == NULL)
		return -HASP_EINVAL;
	if (g->io.send == NULL)
		return -HASP_ESTATE; /* the group reads its own socket */
	g->stats.rx_batches++;
	g->stats.rx_datagrams++;
	if (from->sin_family != AF_INET) {
		g->stats.rx_unrouted++;
		return 0;
	}
	/* The client's checks read at most HASP_DATAGRAM_SIZE_MAX + 1 bytes,
	 * as off the socket: a longer datagram is refused as oversized. */
	group_deliver(g, data, size > HASP_DATAGRAM_SIZE_MAX ? HASP_DATAGRAM_SIZE_MAX + 1 : size, from);
	return 0;
}

/* Takes the ready list: its clients are due now. True if it was not empty. */
static bool group_take_ready(struct hasp_client_group *g)
{
	bool any;

	pthread_mutex_lock(&g->mu);
	any = g->ready_count > 0;
	for (uint32_t i = 0; i < g->ready_count; i++) {
		g->ready[i]->group_ready = false;
		member_due_set(g, g->ready[i]->group_index, 0);
	}
	g->ready_count = 0;
	pthread_mutex_unlock(&g->mu);
	return any;
}

/* Runs the members that are due (a reply, a wake-up, a timer) and then
 * those a callback started an op on. Returns the ops completed. */
static uint32_t group_run_due(struct hasp_client_group *g)
{
	uint32_t n = 0;

	(void)group_take_ready(g);
	for (uint32_t round = 0; round < GROUP_ROUNDS; round++) {
		uint64_t now = clock_monotonic_ns();
		if (g->due_min > now)
			break; /* no member is due, none was readied */
		/* The pass sees every member (those a callback lowers behind it
		 * lower due_min themselves): it rebuilds the least due time. */
		g->due_min = UINT64_MAX;
		/* By index: a callback may open a client into the group. */
		for (uint32_t i = 0; i < g->member_count; i++) {
			struct hasp_client *c = g->members[i];
			uint32_t done = 0;
			if (g->member_due[i] > now) {
				if (g->member_due[i] < g->due_min)
					g->due_min = g->member_due[i];
				continue;
			}
			/* Not assigned in one expression: a callback that opens a
			 * client into the group may move member_due. */
			uint64_t due = client_process(c, &done);
			member_due_set(g, i, due);
			n += done;
		}
		/* Clients a callback started an op on (another client's
		 * callback, or after its own passes): one more round. */
		if (!group_take_ready(g))
			break;
	}
	return n;
}

int hasp_client_group_process(struct hasp_client_group *g, uint32_t *completed)
{
	uint32_t n = 0;

	if (completed != NULL)
		*completed = 0;
	if (g == NULL)
		return -HASP_EINVAL;
	pthread_mutex_lock(&g->mu);
	g->loop_busy = true;
	if (g->wake_pending) { /* no read(2) when nothing was written */
		uint64_t count;
		(void)!read(g->wake_fd, &count, sizeof(count));
		g->wake_pending = false;
	}
	pthread_mutex_unlock(&g->mu);
	g->processing = true;
	/* One received batch at a time, its replies' follow-up requests sent
	 * before the next batch is read: reading everything first held the
	 * first replies' next requests back while the rest were read and
	 * processed, and the cluster then answered in ever larger bursts. */
	for (uint32_t read = 0;;) {
		uint32_t got = group_receive(g);
		read += got;
		n += group_run_due(g);
		group_flush(g);
		if (got < GROUP_RX_MMSG || read >= GROUP_RX_BATCH_MAX)
			break; /* the queue is empty, or enough for one call */
	}
	g->processing = false;
	pthread_mutex_lock(&g->mu);
	g->loop_busy = false;
	if (g->ready_count > 0 && !g->wake_pending) {
		/* Woken during the last round: the next wait ends at once
		 * (hasp_client_group_timeout_ms says 0 as well). */
		uint64_t one = 1;
		(void)!write(g->wake_fd, &one, sizeof(one));
		g->wake_pending = true;
	}
	pthread_mutex_unlock(&g->mu);
	if (completed != NULL)
		*completed = n;
	return 0;
}

int hasp_client_group_fd(struct hasp_client_group *g)
{
	return g == NULL ? -HASP_EINVAL : g->epoll_fd;
}

int hasp_client_group_timeout_ms(struct hasp_client_group *g)
{
	uint64_t wake;

	if (g == NULL)
		return -HASP_EINVAL;
	pthread_mutex_lock(&g->mu);
	bool ready = g->ready_count > 0;
	pthread_mutex_unlock(&g->mu);
	if (ready)
		return 0;
	/* A lower bound: at worst the loop wakes early once, and the pass
	 * that finds nothing due makes it exact. */
	wake = g->due_min;
	if (wake == UINT64_MAX)
		return -1;
	uint64_t now = clock_monotonic_ns();
	if (wake <= now)
		return 0;
	uint64_t ms = (wake - now + NS_PER_MS - 1) / NS_PER_MS;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

void hasp_client_group_stats_get(struct hasp_client_group *g, struct hasp_client_group_stats *stats)
{
	HASP_ASSERT(g != NULL);
	HASP_ASSERT(stats != NULL);
	*stats = g->stats;
}
