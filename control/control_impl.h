/*
 * Internals shared by control.c (registry, slots, status) and server.c
 * (sockets and protocols). Not for the node.
 */
#ifndef HASP_CONTROL_CONTROL_IMPL_H
#define HASP_CONTROL_CONTROL_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/control.h"

/* Slot states. FREE -> FILLING (admin claims) -> QUEUED (admin) ->
 * TAKEN (lcore) -> DONE (lcore) -> FREE (admin copies the reply).
 * Timeouts: QUEUED -> FREE (admin, the lcore never saw it) or
 * TAKEN -> ABANDONED (admin) -> FREE (lcore, when it finishes). */
enum control_slot_state {
	SLOT_FREE = 0,
	SLOT_FILLING = 1,
	SLOT_QUEUED = 2,
	SLOT_TAKEN = 3,
	SLOT_DONE = 4,
	SLOT_ABANDONED = 5,
};

struct control_slot {
	struct control_request req;  /* first: control_request_done() casts back */
	struct control *owner;
	const struct control_command *cmd;
	char *result_buf;
	size_t result_size;
};

/* One request in progress on the admin thread. */
struct control_call {
	struct control_request *req;  /* the caller's (result copied back into it) */
	struct control_slot *slot;    /* NULL: complete */
	uint64_t deadline_ns;
};

/* Parses the line and runs or queues it. Returns true when complete.
 * `trusted`: the caller may run privileged commands (the Unix socket, or a
 * sealed line that verified); otherwise they are refused EPERM. */
bool control_call_start(struct control *c, struct control_call *call, const char *line, size_t len,
			struct control_request *req, char *result, size_t result_size, uint64_t now_ns,
			bool trusted)
	__attribute__((warn_unused_result));
/* Returns true once the queued request completed or timed out. */
bool control_call_poll(struct control *c, struct control_call *call, uint64_t now_ns);

/* server.c */
int server_start(struct control *c) __attribute__((warn_unused_result));
void server_stop(struct control *c);
int server_alloc(struct control *c) __attribute__((warn_unused_result));
void server_free(struct control *c);
/* Fuzzing only (control not started): `data` arrives on connection 0 as
 * the server would receive it (in reads of at most the input buffer);
 * each reply it would send goes to `sink` in order (`http`: an HTTP
 * response). `tcp`: the connection is a TCP one (privileged commands need
 * the credential). Returns when the connection would close or wait for more. */
typedef void server_sink_fn(void *arg, const char *out, size_t n, bool http);
void server_feed(struct control *c, const char *data, size_t len, bool tcp, server_sink_fn *sink,
		 void *arg);
/* A request answered without a command (server.c: auth.nonce, credential
 * refusals): resets req for `name` with the result buffer. */
void control_request_local(struct control_request *req, char *result, size_t result_size,
			   const char *name);

#endif
