/*
 * A scripted UDP responder on 127.0.0.1: the test double of a hasp cluster
 * for libhasp and CLI tests. It is NOT a lock engine.
 *
 * responder_start() binds one socket per simulated node on 127.0.0.1 with
 * a kernel-chosen port and runs a thread that records every datagram it
 * receives (node, time, bytes, decoded header) and hands each decoded
 * request to the test's script function, which answers (or not) with the
 * helpers below: reply, drop, duplicate, delay, push events, send garbage.
 * The script is also called every ~5 ms with req == NULL (a tick), so it
 * can push events on a timer. It runs on the responder thread; state it
 * shares with the test body goes through responder->mu (responder_lock).
 *
 * Everything is bounded: the log keeps the first RESPONDER_LOG_MAX
 * datagrams and counts the rest; the thread stops within one tick.
 */
#ifndef HASP_TESTS_CLIENT_RESPONDER_H
#define HASP_TESTS_CLIENT_RESPONDER_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "hasp/wire.h"

#define RESPONDER_NODES_MAX 5
#define RESPONDER_LOG_MAX 1024

struct responder_rx {
	int node;
	uint64_t at_ns;
	int decode_rc; /* of hasp_wire_decode_request */
	struct hasp_wire_header hdr;
	uint64_t nonce; /* SESSION_OPEN */
	size_t size;
	uint8_t data[HASP_DATAGRAM_SIZE_MAX];
};

struct responder;

/* req is NULL on a tick; else the decoded request (pointing into the
 * received datagram) from `from` to `node`. */
typedef void responder_fn(struct responder *r, int node, const struct hasp_wire_msg *req,
			  const struct sockaddr_in *from, void *arg);

struct responder {
	int node_count;
	int fds[RESPONDER_NODES_MAX];
	uint16_t ports[RESPONDER_NODES_MAX];
	pthread_t thread;
	int stop; /* atomic */
	bool running;
	pthread_mutex_t mu;
	responder_fn *fn;
	void *arg;

	/* Guarded by mu. */
	struct responder_rx *log;
	uint32_t log_count;
	uint32_t rx_total;
	struct sockaddr_in client; /* source of the latest request */
	bool client_known;
	uint64_t next_session_id;
	uint64_t last_nonce;
	uint64_t last_session_id;
	uint32_t session_ttl_ms;
	uint64_t event_seq;
};

/* Returns 0 or -1; the test asserts it. */
int responder_start(struct responder *r, int node_count, responder_fn *fn, void *arg);
void responder_stop(struct responder *r);

/* A cmocka teardown: stops the responder a failed test left running (its
 * struct must be static, so that it outlives the test's stack frame). */
int responder_teardown(void **state);

/* "127.0.0.1:p0,127.0.0.1:p1,..." of every node. */
void responder_cluster(const struct responder *r, char *buf, size_t size);

void responder_lock(struct responder *r);
void responder_unlock(struct responder *r);

/* Counts logged requests with this opcode (0: all), from any node or one
 * (node < 0: any). Takes the lock. */
uint32_t responder_count(struct responder *r, uint8_t opcode, int node);
/* Copies the index-th logged request with this opcode; false if none. */
bool responder_find(struct responder *r, uint8_t opcode, uint32_t index,
		    struct responder_rx *out);

/* ---- for script functions (responder thread) ---- */

/* Sends `m` from `node` to `to`. */
void responder_send(struct responder *r, int node, const struct sockaddr_in *to,
		    const struct hasp_wire_msg *m);
void responder_send_raw(struct responder *r, int node, const struct sockaddr_in *to,
			const void *data, size_t size);
/* Starts a reply to req (see hasp_wire_reply_init). */
void responder_reply_init(struct hasp_wire_msg *reply, const struct hasp_wire_msg *req,
			  enum hasp_status status);
/* The plain answers of a healthy leader to session requests: SESSION_OPEN
 * (same nonce, same session id), SESSION_KEEPALIVE, SESSION_CLOSE. Returns
 * true when it answered. */
bool responder_answer_session(struct responder *r, int node, const struct hasp_wire_msg *req,
			      const struct sockaddr_in *from);
/* Pushes an EVENT to the last client address seen, in its session. */
void responder_push_event(struct responder *r, int node, uint8_t type, const char *name,
			  uint64_t revision, const void *value, size_t value_size);
/* Pushes an event with an explicit event counter (to make gaps). */
/* Pushes a waiter's LOCK_GRANTED for `name` with the grant's token and TTL
 * (next event seq), as a node hands a lock to the head of its queue. */
void responder_push_grant(struct responder *r, int node, const char *name, uint64_t token,
			  uint32_t ttl_ms);
/* Pushes an event with identity (index, 0) chained to (prev_index, 0), from
 * node `node`: a new leader names prev 0, the old one its last event. */
void responder_push_event_chain(struct responder *r, int node, uint64_t index, uint64_t prev_index,
				uint8_t type, const char *name, uint64_t revision);
void responder_push_event_seq(struct responder *r, int node, uint64_t seq, uint8_t type,
			      const char *name, uint64_t revision);

#endif
