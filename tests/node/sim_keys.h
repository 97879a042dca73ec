/*
 * Test key pairs for simulated nodes (docs/SECURITY.md 3.5): node id N's
 * secret key is a fixed function of N, so every test config can list every
 * member's public key, and a test can seal a datagram as any pair would.
 */
#ifndef HASP_TESTS_NODE_SIM_KEYS_H
#define HASP_TESTS_NODE_SIM_KEYS_H

#include "common/assert.h"
#include "common/auth.h"
#include "node/node_config.h"

static inline void sim_node_secret(uint32_t id, struct auth_key *k)
{
	for (uint32_t i = 0; i < AUTH_KEY_SIZE; i++)
		k->bytes[i] = (uint8_t)(0x40 + i + 0x31 * id);
}

/* This node's key pair, and every member line's public key. */
static inline void sim_peer_keys(struct node_config *c)
{
	HASP_ASSERT(auth_init() == 0);
	for (uint32_t k = 0; k < c->member_count; k++) {
		struct auth_key sk;
		sim_node_secret(c->members[k].id, &sk);
		HASP_ASSERT(auth_public_key(&sk, c->members[k].pub) == 0);
		c->members[k].has_pub = true;
	}
	sim_node_secret(c->node_id, &c->node_key);
	HASP_ASSERT(auth_public_key(&c->node_key, c->node_pub) == 0);
	c->node_key_loaded = true;
}

/* Node id's public key in hex, as a member line or `members add` gives it. */
static inline void sim_pub_hex(uint32_t id, char hex[AUTH_PUBLIC_HEX_SIZE])
{
	struct auth_key sk;
	uint8_t pub[AUTH_PUBLIC_SIZE];
	HASP_ASSERT(auth_init() == 0);
	sim_node_secret(id, &sk);
	HASP_ASSERT(auth_public_key(&sk, pub) == 0);
	auth_public_format(pub, hex);
}

/* The key node `from` seals its datagrams to node `to` with. */
static inline void sim_pair_tx(uint32_t from, uint32_t to, struct auth_key *tx)
{
	struct auth_key sk, rx;
	uint8_t pub_from[AUTH_PUBLIC_SIZE], pub_to[AUTH_PUBLIC_SIZE];
	HASP_ASSERT(auth_init() == 0);
	sim_node_secret(to, &sk);
	HASP_ASSERT(auth_public_key(&sk, pub_to) == 0);
	sim_node_secret(from, &sk);
	HASP_ASSERT(auth_public_key(&sk, pub_from) == 0);
	HASP_ASSERT(auth_pair_keys(from, &sk, pub_from, to, pub_to, tx, &rx) == 0);
}

#endif
