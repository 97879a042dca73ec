/*
 * Per-pair MAC keys of the peer port (docs/SECURITY.md 3.5).
 *
 * Every node has a static X25519 key pair (node_key_file; public key on its
 * member line). For each other member the node derives, once, the two
 * directional MAC keys of that pair (common/auth.h, auth_pair_keys):
 * datagrams to the member are sealed with tx, datagrams from it are opened
 * with rx. A member is keyed from its member line at start or from
 * `members add` (members.address), and revoked (keys wiped) when a
 * committed configuration no longer lists it.
 *
 * Pure bookkeeping over caller-owned tables: no allocation, clock or log.
 */
#ifndef HASP_NODE_PEER_KEYS_H
#define HASP_NODE_PEER_KEYS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/auth.h"
#include "node/node_config.h"

/* What a node keeps of one member, by its slot in cfg->members. */
struct peer_keys {
	struct auth_key tx; /* seals what we send to it */
	struct auth_key rx; /* opens what it sends to us */
	bool keyed;         /* a member: tx and rx hold its pair's keys */
	bool removed;       /* revoked by a committed configuration: tx and rx kept
			     * only to tell it so (node_peer_rx), nothing else */
	bool seen;          /* listed by a configuration we applied (or a member line at start) */
};

/* Derives the pair keys of member m (its public key) with this node's key
 * pair in cfg. Returns 0, or -HASP_EINVAL (no or unusable public key, or m
 * is this node): pk is then not keyed. */
int peer_keys_derive(struct peer_keys *pk, const struct node_config *cfg, const struct node_member *m)
	__attribute__((warn_unused_result));

/* Wipes the pair keys: nothing from or to that member authenticates any
 * more, until peer_keys_derive() again. */
void peer_keys_revoke(struct peer_keys *pk);

/* Applies a committed configuration: members listed become seen; members
 * seen before and no longer listed are revoked: no longer keyed, but
 * marked removed with their keys kept, so that the node can still answer
 * a removed member's vote request with the news of its removal (and
 * nothing else). This node's own slot is never touched. ids: the
 * configuration's member ids. Returns how many were revoked. */
uint32_t peer_keys_follow(struct peer_keys *table, const struct node_config *cfg, const uint32_t *ids,
			  uint32_t id_count);

#endif
