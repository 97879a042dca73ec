/*
 * The node's latency and reply accounting (node_latency.c): what the
 * histograms and per-opcode counters of docs/CONTROL.md "Metrics" are made
 * of. Each call is a few adds on the lcore (struct node_hist): no
 * allocation, no lock, no system call.
 */
#ifndef HASP_NODE_NODE_LATENCY_H
#define HASP_NODE_NODE_LATENCY_H

#include <stdint.h>

#include "node/node.h"

/* A reply to a request that arrived at arrival_ns left now (n->now_ns). */
void node_latency_reply(struct node *n, uint8_t op, uint16_t status, uint64_t arrival_ns);

/* The leader proposed a batch whose last entry is `index`. */
void node_latency_proposed(struct node *n, uint64_t index);

/* After a raft step: batches whose last index is committed are timed. */
void node_latency_committed(struct node *n);

/* Leadership lost: the batches still waiting may never commit as ours. */
void node_latency_step_down(struct node *n);

/* One run of committed entries took `ns` to apply. */
void node_latency_applied(struct node *n, uint64_t ns);

#endif
