/*
 * Pushed events (notify.c): the session -> address table (not
 * replicated), LOCK_GRANTED to new holders, and node-local watches with a
 * token-bucket rate limit and per-watch coalescing. Leader only; lcore only.
 * Sends through n->loop.client_send (struct node_loop), never into node.c.
 */
#ifndef HASP_NODE_NOTIFY_H
#define HASP_NODE_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "node/node.h"
#include "hasp/wire.h"

int notify_init(struct node *n) __attribute__((warn_unused_result));
void notify_deinit(struct node *n);
/* Where session_id's events go: the address of its open (seq 0), then of
 * each request with a seq above every seq that moved it before. A replay
 * of an earlier datagram (valid tag, old seq) from elsewhere moves
 * nothing; a client whose address changed moves it with its next request. */
/* Returns true when seq is above every seq the table saw from the session
 * (or the session was not in it yet): no request of that seq came here
 * before. False: one may have (also when the table is full). */
bool notify_session_seen(struct node *n, uint64_t session_id, uint64_t seq, uint32_t ip, uint16_t port);
void notify_session_end(struct node *n, uint64_t session_id);
/* Ends every entry whose session the state machine no longer has (after
 * an InstallSnapshot replaced it: the ends inside it were never applied
 * here). O(table size); counts stats.sessions_pruned. */
void notify_sessions_prune(struct node *n);
/* Events of one applied command (the leader pushes; followers only track). */
/* Pushes the events of the command applied at Raft index `index` (leader
 * only): a waiter's grant at once, watchers' events through the rate
 * limit. Each event's identity is (index, its position in `events`). */
void notify_events(struct node *n, uint64_t index, const struct locks_event *events, uint32_t count);
/* WATCH / UNWATCH: a status. */
enum hasp_status notify_watch(struct node *n, uint64_t session_id, const struct hasp_wire_watch *w,
			      bool add) __attribute__((warn_unused_result));
/* WATCH_STATUS (and WATCH_COUNT, its count alone): how many watches this
 * node holds for the session, and the identity of the last event it sent
 * the session ((0, 0) none, (0, 1) some were dropped since). */
void notify_watch_status(struct node *n, uint64_t session_id, struct hasp_wire_watch_status *st);
/* Sends held watch events while tokens last; lowers *deadline_ns. */
bool notify_flush(struct node *n, uint64_t *deadline_ns);
/* Leadership lost: held events go, the watches stay, each marked so that
 * its next event carries the gap marker (see notify.c). */
void notify_clear(struct node *n);

#endif
