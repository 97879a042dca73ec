/*
 * Fuzz target: the ARP cache driven by a byte program. Each 4-byte step is
 * (op, ip, time advance, flag) over a small address space and a small table,
 * so probe runs wrap and backward-shift deletion is exercised constantly.
 * Checks ownership: every parked item comes back through release() exactly
 * once (sent or dropped), by the end of arp_cache_deinit() at the latest,
 * and never an item that was not parked. The cache's own invariant check
 * (HASP_DASSERT(arp_cache_ok)) runs after every change in fuzz builds.
 */
#include <stdint.h>
#include <string.h>

#include "common/assert.h"
#include "dataplane/arp_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ITEMS_MAX 4096u

struct owner {
	uint8_t state[ITEMS_MAX]; /* 0 never parked, 1 parked, 2 returned */
	uint32_t parked;
	uint32_t returned;
};

static void fuzz_request(void *arg, uint32_t ip)
{
	(void)arg;
	HASP_ASSERT(ip >= 1 && ip <= 32);
}

static void fuzz_release(void *arg, void *item, const struct eth_addr *mac)
{
	struct owner *o = arg;
	uintptr_t id = (uintptr_t)item;
	(void)mac;
	HASP_ASSERT(id >= 1 && id < ITEMS_MAX);
	HASP_ASSERT(o->state[id] == 1); /* parked, and returned only once */
	o->state[id] = 2;
	o->returned++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct owner o;
	struct arp_cache c;
	const struct arp_cache_config cfg = {
		.entry_count = 8, .pending_max = 2, .reachable_ns = 40,
		.retry_ns = 5, .request_max = 2,
	};
	const struct arp_cache_ops ops = { fuzz_request, fuzz_release, &o };
	uint64_t now = 0;
	uintptr_t next_item = 1;

	memset(&o, 0, sizeof(o));
	if (arp_cache_init(&c, &cfg, &ops) != 0)
		return 0;
	for (size_t i = 0; i + 4 <= size && next_item < ITEMS_MAX; i += 4) {
		uint32_t ip = (uint32_t)(data[i + 1] % 32) + 1;
		struct eth_addr mac = { { 0x02, 0, 0, 0, 0, data[i + 3] } };
		now += data[i + 2] % 16;
		switch (data[i] % 4) {
		case 0: {
			struct eth_addr got;
			void *item = (data[i + 3] & 1) ? (void *)next_item : NULL;
			enum arp_cache_lookup r = arp_cache_resolve(&c, ip, now, item, &got);
			if (item != NULL && r == ARP_CACHE_QUEUED) {
				o.state[next_item] = 1;
				o.parked++;
			}
			if (item != NULL)
				next_item++;
			break;
		}
		case 1:
			arp_cache_update(&c, ip, &mac, now, (data[i + 3] & 1) != 0);
			break;
		default:
			arp_cache_tick(&c, now);
			break;
		}
		HASP_ASSERT(arp_cache_count(&c) <= cfg.entry_count / 4 * 3);
	}
	arp_cache_deinit(&c);
	HASP_ASSERT(o.returned == o.parked);
	return 0;
}
