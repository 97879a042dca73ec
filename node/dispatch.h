/*
 * Client requests on the node (dispatch.c): decode, route (NOT_LEADER,
 * batch, ReadIndex read, watch), batches, pending replies by log index,
 * replies built from the state machine's results. Runs on the node's lcore
 * only; the state lives in struct node (node.h). It reaches the node loop
 * only through n->loop (struct node_loop: send a datagram, carry out a raft
 * update), never by calling into node.c.
 */
#ifndef HASP_NODE_DISPATCH_H
#define HASP_NODE_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "node/node.h"

int dispatch_init(struct node *n) __attribute__((warn_unused_result));
void dispatch_deinit(struct node *n);
void dispatch_request(struct node *n, uint32_t ip, uint16_t port, const uint8_t *payload,
		      size_t size);
/* Adds a leader command (TICK, expiries) to the batch. */
void dispatch_add_leader_cmd(struct node *n, const struct locks_cmd *cmd);
/* Closes the batch: proposes its commands and asks for the reads' index. */
void dispatch_flush(struct node *n);
/* After locks_apply() of a command at `index`: the waiting client's reply. */
void dispatch_applied(struct node *n, uint64_t index, const struct locks_cmd *cmd,
		      const struct locks_result *res);
void dispatch_reads_ready(struct node *n, const struct raft_read *reads, uint32_t count);
/* Serves reads whose index is applied; returns how many. */
uint32_t dispatch_serve_reads(struct node *n);
/* Leadership lost: drop the batch, pending replies and reads (answered
 * NOT_LEADER where a client waits). */
void dispatch_step_down(struct node *n);
/* Answers `hdr` with a bare status; with client_auth = on sealed with
 * `key` (NULL: not answered). */
void dispatch_reply_status(struct node *n, uint32_t ip, uint16_t port,
			   const struct hasp_wire_header *hdr, enum hasp_status status,
			   const struct auth_key *key);

#endif
