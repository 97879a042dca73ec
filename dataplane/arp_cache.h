/*
 * The ARP cache: IPv4 next hop -> MAC, for datagrams the node initiates
 * (Raft peers, watch notifications, a gateway). Replies to a request never
 * need it: they go back to the Ethernet source of the request.
 *
 * Fixed capacity, allocated once in arp_cache_init() (docs/STYLE.md §6): an open
 * addressing table of `entry_count` slots (a power of two, kept at most 3/4
 * full) and, per slot, a bounded FIFO of `pending_max` datagrams waiting for
 * resolution. A full FIFO or a full table is a designed state: the caller
 * gets ARP_CACHE_DROPPED and counts it. Pure: time is a parameter (now_ns),
 * requests and releases go out through the ops callbacks, no clock reads, no
 * allocation after init.
 *
 * Entry life: INCOMPLETE (request sent, datagrams parked; re-requested every
 * retry_ns, given up after request_max requests: parked datagrams released
 * with mac == NULL) -> REACHABLE for reachable_ns after a reply -> PROBE
 * (still used, re-requested like INCOMPLETE; removed if nobody answers).
 *
 * Ownership: a datagram passed to arp_cache_resolve() that returns QUEUED
 * belongs to the cache until ops.release() hands it back, exactly once.
 */
#ifndef HASP_DATAPLANE_ARP_CACHE_H
#define HASP_DATAPLANE_ARP_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "dataplane/eth.h"

/* Upper bound of pending_max: release() copies a FIFO onto the stack. */
#define ARP_CACHE_PENDING_MAX 64u

struct arp_cache_config {
	uint32_t entry_count;  /* slots, a power of two; 3/4 usable */
	uint32_t pending_max;  /* parked datagrams per unresolved entry, >= 1 */
	uint64_t reachable_ns; /* trust a reply this long (e.g. 60 s) */
	uint64_t retry_ns;     /* between requests (e.g. 1 s) */
	uint32_t request_max;  /* requests before giving up, >= 1 */
};

struct arp_cache_ops {
	/* Send an ARP request for `ip` now. */
	void (*send_request)(void *arg, uint32_t ip);
	/* Take back a parked datagram: send it to `mac`, or drop it when mac is
	 * NULL (resolution failed, or the cache is being torn down). */
	void (*release)(void *arg, void *item, const struct eth_addr *mac);
	void *arg;
};

struct arp_cache_stats {
	uint64_t hits;
	uint64_t misses;        /* lookups that created an INCOMPLETE entry */
	uint64_t queued;        /* datagrams parked */
	uint64_t queue_full;    /* datagrams refused: entry FIFO full */
	uint64_t table_full;    /* datagrams refused: no free slot */
	uint64_t requests;      /* requests asked of ops.send_request */
	uint64_t learned;       /* entries created or refreshed by a reply */
	uint64_t released;      /* parked datagrams sent after resolution */
	uint64_t failed;        /* parked datagrams dropped (no answer) */
	uint64_t expired;       /* entries removed after unanswered probes */
};

struct arp_entry;

struct arp_cache {
	struct arp_cache_config cfg;
	struct arp_cache_ops ops;
	struct arp_entry *entries; /* entry_count slots */
	void **pending;            /* entry_count * pending_max items */
	uint32_t used_count;
	uint64_t next_deadline_ns;
	struct arp_cache_stats stats;
};

enum arp_cache_lookup {
	ARP_CACHE_HIT = 0, /* *mac filled; the item was not taken */
	ARP_CACHE_QUEUED,  /* the cache owns the item until release() */
	ARP_CACHE_DROPPED, /* the item was not taken; caller drops and counts */
};

/* Returns 0, -HASP_EINVAL for a bad config, -HASP_ENOMEM. */
int arp_cache_init(struct arp_cache *c, const struct arp_cache_config *cfg,
		   const struct arp_cache_ops *ops) __attribute__((warn_unused_result));
/* Releases every parked item with mac == NULL, then frees the tables. */
void arp_cache_deinit(struct arp_cache *c);

/* Finds the MAC of `ip`. On a miss, parks `item` (which may be NULL to only
 * start resolution) and sends a request when none is outstanding. */
enum arp_cache_lookup arp_cache_resolve(struct arp_cache *c, uint32_t ip, uint64_t now_ns,
					void *item, struct eth_addr *mac);

/* Feeds an observed (ip, mac) pair from ARP. Refreshes an existing entry
 * and releases its parked items to `mac` in FIFO order; creates a REACHABLE
 * entry only if `create` (RFC 826: when we were the target). */
void arp_cache_update(struct arp_cache *c, uint32_t ip, const struct eth_addr *mac,
		      uint64_t now_ns, bool create);

/* Runs the timers due at `now_ns` (retries, give-ups, probes). Cheap when
 * nothing is due: one comparison. */
void arp_cache_tick(struct arp_cache *c, uint64_t now_ns);

/* The earliest time arp_cache_tick() has work, UINT64_MAX when none. */
uint64_t arp_cache_next_deadline(const struct arp_cache *c);

/* Entries in use (all states). */
uint32_t arp_cache_count(const struct arp_cache *c);

#endif
