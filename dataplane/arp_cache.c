/*
 * ARP cache (see arp_cache.h): linear probing with backward-shift deletion,
 * so lookups never meet tombstones and the table never degrades. Each slot
 * carries its parked-datagram FIFO; a shift moves the FIFO with the entry.
 */
#include "dataplane/arp_cache.h"

#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "hasp/errors.h"

enum arp_state {
	ARP_FREE = 0,
	ARP_INCOMPLETE,
	ARP_REACHABLE,
	ARP_PROBE,
};

struct arp_entry {
	uint32_t ip;
	uint8_t state;
	uint8_t requests_sent;
	uint16_t pending_count;
	uint16_t pending_head;
	struct eth_addr mac;
	uint64_t deadline_ns; /* REACHABLE: expiry; INCOMPLETE/PROBE: next retry */
};

static uint32_t arp_slot_home(const struct arp_cache *c, uint32_t ip)
{
	/* Fibonacci hashing: neighbouring addresses spread over the table. */
	return (uint32_t)(ip * 2654435761u) & (c->cfg.entry_count - 1);
}

static void **arp_pending_of(struct arp_cache *c, uint32_t slot)
{
	return c->pending + (size_t)slot * c->cfg.pending_max;
}

static bool arp_cache_ok(const struct arp_cache *c)
{
	uint32_t used = 0;
	for (uint32_t i = 0; i < c->cfg.entry_count; i++) {
		const struct arp_entry *e = &c->entries[i];
		if (e->state == ARP_FREE)
			continue;
		used++;
		if (e->pending_count > c->cfg.pending_max)
			return false;
		if (e->state != ARP_INCOMPLETE && e->pending_count != 0)
			return false;
		if (e->deadline_ns < c->next_deadline_ns)
			return false;
	}
	return used == c->used_count;
}

int arp_cache_init(struct arp_cache *c, const struct arp_cache_config *cfg,
		   const struct arp_cache_ops *ops)
{
	HASP_ASSERT(c != NULL && cfg != NULL);
	HASP_ASSERT(ops != NULL && ops->send_request != NULL && ops->release != NULL);
	memset(c, 0, sizeof(*c));
	if (cfg->entry_count < 4 || (cfg->entry_count & (cfg->entry_count - 1)) != 0 ||
	    cfg->pending_max == 0 || cfg->pending_max > ARP_CACHE_PENDING_MAX || cfg->request_max == 0 ||
	    cfg->request_max > UINT8_MAX || cfg->retry_ns == 0 || cfg->reachable_ns == 0)
		return -HASP_EINVAL;
	c->cfg = *cfg;
	c->ops = *ops;
	c->entries = hasp_calloc(cfg->entry_count, sizeof(*c->entries));
	c->pending = hasp_calloc((size_t)cfg->entry_count * cfg->pending_max, sizeof(void *));
	if (c->entries == NULL || c->pending == NULL) {
		hasp_free(c->entries);
		hasp_free(c->pending);
		c->entries = NULL;
		c->pending = NULL;
		return -HASP_ENOMEM;
	}
	c->next_deadline_ns = UINT64_MAX;
	return 0;
}

static void arp_release_all(struct arp_cache *c, uint32_t slot, const struct eth_addr *mac)
{
	struct arp_entry *e = &c->entries[slot];
	void **fifo = arp_pending_of(c, slot);

	/* Detach the FIFO first: release() may call back into the cache (a
	 * send that resolves through it) and must see a consistent entry. */
	uint16_t count = e->pending_count;
	uint16_t head = e->pending_head;
	void *items[ARP_CACHE_PENDING_MAX];
	for (uint16_t i = 0; i < count; i++)
		items[i] = fifo[(head + i) % c->cfg.pending_max];
	e->pending_count = 0;
	e->pending_head = 0;
	for (uint16_t i = 0; i < count; i++) {
		if (mac != NULL)
			c->stats.released++;
		else
			c->stats.failed++;
		c->ops.release(c->ops.arg, items[i], mac);
	}
}

void arp_cache_deinit(struct arp_cache *c)
{
	HASP_ASSERT(c != NULL);
	if (c->entries != NULL) {
		for (uint32_t i = 0; i < c->cfg.entry_count; i++)
			if (c->entries[i].state != ARP_FREE)
				arp_release_all(c, i, NULL);
	}
	hasp_free(c->entries);
	hasp_free(c->pending);
	c->entries = NULL;
	c->pending = NULL;
}

/* Returns the slot holding `ip`, or UINT32_MAX. */
static uint32_t arp_find(const struct arp_cache *c, uint32_t ip)
{
	uint32_t mask = c->cfg.entry_count - 1;
	for (uint32_t i = arp_slot_home(c, ip), n = 0; n < c->cfg.entry_count; i = (i + 1) & mask, n++) {
		if (c->entries[i].state == ARP_FREE)
			return UINT32_MAX;
		if (c->entries[i].ip == ip)
			return i;
	}
	return UINT32_MAX;
}

/* Claims a free slot for `ip` (not present), or UINT32_MAX when at 3/4. */
static uint32_t arp_insert(struct arp_cache *c, uint32_t ip)
{
	uint32_t mask = c->cfg.entry_count - 1;

	if (c->used_count >= c->cfg.entry_count / 4 * 3)
		return UINT32_MAX;
	uint32_t i = arp_slot_home(c, ip);
	while (c->entries[i].state != ARP_FREE)
		i = (i + 1) & mask;
	memset(&c->entries[i], 0, sizeof(c->entries[i]));
	c->entries[i].ip = ip;
	c->used_count++;
	return i;
}

/* Removes slot `hole` and shifts later members of its probe run back, so
 * that every entry stays reachable from its home slot without tombstones. */
static void arp_remove(struct arp_cache *c, uint32_t hole)
{
	uint32_t mask = c->cfg.entry_count - 1;

	HASP_ASSERT(c->entries[hole].state != ARP_FREE);
	HASP_ASSERT(c->entries[hole].pending_count == 0);
	c->entries[hole].state = ARP_FREE;
	c->used_count--;
	for (uint32_t j = (hole + 1) & mask; c->entries[j].state != ARP_FREE; j = (j + 1) & mask) {
		uint32_t home = arp_slot_home(c, c->entries[j].ip);
		/* Move j into the hole unless its home lies cyclically in
		 * (hole, j]: then it is still reachable where it is. */
		bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
		if (stays)
			continue;
		c->entries[hole] = c->entries[j];
		memcpy(arp_pending_of(c, hole), arp_pending_of(c, j),
		       c->cfg.pending_max * sizeof(void *));
		c->entries[j].state = ARP_FREE;
		c->entries[j].pending_count = 0;
		hole = j;
	}
}

static void arp_note_deadline(struct arp_cache *c, uint64_t deadline_ns)
{
	if (deadline_ns < c->next_deadline_ns)
		c->next_deadline_ns = deadline_ns;
}

static void arp_request(struct arp_cache *c, struct arp_entry *e, uint64_t now_ns)
{
	e->requests_sent++;
	e->deadline_ns = now_ns + c->cfg.retry_ns;
	arp_note_deadline(c, e->deadline_ns);
	c->stats.requests++;
	c->ops.send_request(c->ops.arg, e->ip);
}

static enum arp_cache_lookup arp_park(struct arp_cache *c, uint32_t slot, void *item)
{
	struct arp_entry *e = &c->entries[slot];

	if (item == NULL)
		return ARP_CACHE_QUEUED;
	if (e->pending_count == c->cfg.pending_max) {
		c->stats.queue_full++;
		return ARP_CACHE_DROPPED;
	}
	arp_pending_of(c, slot)[(e->pending_head + e->pending_count) % c->cfg.pending_max] = item;
	e->pending_count++;
	c->stats.queued++;
	return ARP_CACHE_QUEUED;
}

enum arp_cache_lookup arp_cache_resolve(struct arp_cache *c, uint32_t ip, uint64_t now_ns,
					void *item, struct eth_addr *mac)
{
	HASP_ASSERT(c != NULL && c->entries != NULL);
	HASP_ASSERT(mac != NULL);
	uint32_t slot = arp_find(c, ip);
	if (slot != UINT32_MAX && c->entries[slot].state != ARP_INCOMPLETE) {
		/* PROBE still uses the old MAC: a peer that moved answers the
		 * probe; one that vanished is removed after request_max. */
		*mac = c->entries[slot].mac;
		c->stats.hits++;
		return ARP_CACHE_HIT;
	}
	if (slot == UINT32_MAX) {
		slot = arp_insert(c, ip);
		if (slot == UINT32_MAX) {
			c->stats.table_full++;
			return ARP_CACHE_DROPPED;
		}
		c->stats.misses++;
		c->entries[slot].state = ARP_INCOMPLETE;
		enum arp_cache_lookup r = arp_park(c, slot, item);
		HASP_ASSERT(r == ARP_CACHE_QUEUED);
		arp_request(c, &c->entries[slot], now_ns);
		HASP_DASSERT(arp_cache_ok(c));
		return r;
	}
	return arp_park(c, slot, item);
}

void arp_cache_update(struct arp_cache *c, uint32_t ip, const struct eth_addr *mac,
		      uint64_t now_ns, bool create)
{
	HASP_ASSERT(c != NULL && c->entries != NULL);
	HASP_ASSERT(mac != NULL);
	uint32_t slot = arp_find(c, ip);
	if (slot == UINT32_MAX) {
		if (!create)
			return;
		slot = arp_insert(c, ip);
		if (slot == UINT32_MAX) {
			c->stats.table_full++;
			return;
		}
	}
	struct arp_entry *e = &c->entries[slot];
	e->state = ARP_REACHABLE;
	e->mac = *mac;
	e->requests_sent = 0;
	e->deadline_ns = now_ns + c->cfg.reachable_ns;
	arp_note_deadline(c, e->deadline_ns);
	c->stats.learned++;
	arp_release_all(c, slot, mac);
	HASP_DASSERT(arp_cache_ok(c));
}

void arp_cache_tick(struct arp_cache *c, uint64_t now_ns)
{
	HASP_ASSERT(c != NULL && c->entries != NULL);
	if (now_ns < c->next_deadline_ns)
		return;
	c->next_deadline_ns = UINT64_MAX;
	for (uint32_t i = 0; i < c->cfg.entry_count;) {
		struct arp_entry *e = &c->entries[i];
		if (e->state == ARP_FREE || e->deadline_ns > now_ns) {
			if (e->state != ARP_FREE)
				arp_note_deadline(c, e->deadline_ns);
			i++;
			continue;
		}
		if (e->state == ARP_REACHABLE) {
			e->state = ARP_PROBE;
			e->requests_sent = 0;
			arp_request(c, e, now_ns);
			i++;
			continue;
		}
		if (e->requests_sent < c->cfg.request_max) {
			arp_request(c, e, now_ns);
			i++;
			continue;
		}
		/* Unanswered: give up. The shift may bring a later entry into
		 * slot i, so look at i again. */
		if (e->state == ARP_PROBE)
			c->stats.expired++;
		arp_release_all(c, i, NULL);
		arp_remove(c, i);
	}
	HASP_DASSERT(arp_cache_ok(c));
}

uint64_t arp_cache_next_deadline(const struct arp_cache *c)
{
	HASP_ASSERT(c != NULL);
	return c->next_deadline_ns;
}

uint32_t arp_cache_count(const struct arp_cache *c)
{
	HASP_ASSERT(c != NULL);
	return c->used_count;
}
