/*
 * Per-pair MAC keys of the peer port: derived once per member, revoked by
 * a committed configuration (node/peer_keys.h).
 */
#include "node/peer_keys.h"

#include "common/assert.h"
#include "hasp/errors.h"

int peer_keys_derive(struct peer_keys *pk, const struct node_config *cfg, const struct node_member *m)
{
	HASP_ASSERT(pk != NULL && cfg != NULL && m != NULL);
	peer_keys_revoke(pk);
	if (!cfg->node_key_loaded || !m->has_pub || m->id == cfg->node_id)
		return -HASP_EINVAL;
	int rc = auth_pair_keys(cfg->node_id, &cfg->node_key, cfg->node_pub, m->id, m->pub, &pk->tx, &pk->rx);
	if (rc != 0)
		return rc;
	pk->keyed = true;
	return 0;
}

void peer_keys_revoke(struct peer_keys *pk)
{
	HASP_ASSERT(pk != NULL);
	auth_key_wipe(&pk->tx);
	auth_key_wipe(&pk->rx);
	pk->keyed = false;
	pk->removed = false;
}

uint32_t peer_keys_follow(struct peer_keys *table, const struct node_config *cfg, const uint32_t *ids,
			  uint32_t id_count)
{
	uint32_t revoked = 0;

	HASP_ASSERT(table != NULL && cfg != NULL && (ids != NULL || id_count == 0));
	for (uint32_t k = 0; k < cfg->member_count; k++) {
		uint32_t id = cfg->members[k].id;
		if (id == cfg->node_id)
			continue;
		bool listed = false;
		for (uint32_t i = 0; i < id_count && !listed; i++)
			listed = ids[i] == id;
		if (listed) {
			table[k].seen = true;
		} else if (table[k].seen && table[k].keyed) {
			table[k].keyed = false;
			table[k].removed = true;
			revoked++;
		}
	}
	return revoked;
}
