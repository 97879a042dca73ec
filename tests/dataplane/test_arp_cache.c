/*
 * ARP cache: miss -> request -> park -> reply releases in order; bounded
 * FIFO and table are counted drops; retries, give-up, probe and expiry run
 * on the time passed in; deletion keeps every entry findable; a randomized
 * model check against a plain array.
 */
#include "dataplane/arp_cache.h"

#include <string.h>

#include "common/alloc.h"
#include "common/prng.h"
#include "hasp/errors.h"
#include "tests/test_util.h"

#define MS 1000000ull

struct fake {
	uint32_t requests[256];
	unsigned request_count;
	uintptr_t sent[256];
	unsigned sent_count;
	uintptr_t dropped[256];
	unsigned dropped_count;
	struct eth_addr last_mac;
};

static void fake_request(void *arg, uint32_t ip)
{
	struct fake *f = arg;
	f->requests[f->request_count++ % 256] = ip;
}

static void fake_release(void *arg, void *item, const struct eth_addr *mac)
{
	struct fake *f = arg;
	if (mac != NULL) {
		f->sent[f->sent_count++ % 256] = (uintptr_t)item;
		f->last_mac = *mac;
	} else {
		f->dropped[f->dropped_count++ % 256] = (uintptr_t)item;
	}
}

static const struct arp_cache_config cfg = {
	.entry_count = 8, .pending_max = 3, .reachable_ns = 60000 * MS,
	.retry_ns = 1000 * MS, .request_max = 3,
};

static void setup_cache(struct arp_cache *c, struct fake *f)
{
	struct arp_cache_ops ops = { fake_request, fake_release, f };
	memset(f, 0, sizeof(*f));
	assert_int_equal(arp_cache_init(c, &cfg, &ops), 0);
}

static const struct eth_addr mac_a = { { 0x02, 0, 0, 0, 0, 0xa } };
static const struct eth_addr mac_b = { { 0x02, 0, 0, 0, 0, 0xb } };
#define ITEM(n) ((void *)(uintptr_t)(n))

static void test_arp_cache_miss_requests_once_parks_and_reply_releases_in_order(void **state)
{
	(void)state;
	struct arp_cache c;
	struct fake f;
	struct eth_addr mac;
	setup_cache(&c, &f);

	assert_int_equal(arp_cache_resolve(&c, 10, 0, ITEM(1), &mac), ARP_CACHE_QUEUED);
	assert_int_equal(arp_cache_resolve(&c, 10, 1, ITEM(2), &mac), ARP_CACHE_QUEUED);
	assert_int_equal(arp_cache_resolve(&c, 10, 2, ITEM(3), &mac), ARP_CACHE_QUEUED);
	assert_int_equal(f.request_count, 1);
	assert_int_equal(f.requests[0], 10);
	/* The FIFO holds three: the fourth is a counted drop. */
	assert_int_equal(arp_cache_resolve(&c, 10, 3, ITEM(4), &mac), ARP_CACHE_DROPPED);
	assert_int_equal(c.stats.queue_full, 1);

	arp_cache_update(&c, 10, &mac_a, 5, false);
	assert_int_equal(f.sent_count, 3);
	assert_int_equal(f.sent[0], 1);
	assert_int_equal(f.sent[1], 2);
	assert_int_equal(f.sent[2], 3);
	assert_true(eth_addr_equal(&f.last_mac, &mac_a));
	assert_int_equal(arp_cache_resolve(&c, 10, 6, ITEM(5), &mac), ARP_CACHE_HIT);
	assert_true(eth_addr_equal(&mac, &mac_a));
	assert_int_equal(f.sent_count, 3);
	arp_cache_deinit(&c);
	assert_int_equal(f.dropped_count, 0);
}

static void test_arp_cache_update_creates_only_when_asked(void **state)
{
	(void)state;
	struct arp_cache c;
	struct fake f;
	struct eth_addr mac;
	setup_cache(&c, &f);
	arp_cache_update(&c, 20, &mac_a, 0, false);
	assert_int_equal(arp_cache_count(&c), 0);
	arp_cache_update(&c, 20, &mac_a, 0, true);
	assert_int_equal(arp_cache_resolve(&c, 20, 1, ITEM(1), &mac), ARP_CACHE_HIT);
	arp_cache_update(&c, 20, &mac_b, 2, false); /* merge: refresh the MAC */
	assert_int_equal(arp_cache_resolve(&c, 20, 3, ITEM(1), &mac), ARP_CACHE_HIT);
	assert_true(eth_addr_equal(&mac, &mac_b));
	assert_int_equal(f.request_count, 0);
	arp_cache_deinit(&c);
}

static void test_arp_cache_retries_then_gives_up_and_drops_parked(void **state)
{
	(void)state;
	struct arp_cache c;
	struct fake f;
	struct eth_addr mac;
	setup_cache(&c, &f);

	assert_int_equal(arp_cache_resolve(&c, 30, 0, ITEM(7), &mac), ARP_CACHE_QUEUED);
	assert_int_equal(arp_cache_next_deadline(&c), 1000 * MS);
	arp_cache_tick(&c, 999 * MS);
	assert_int_equal(f.request_count, 1);
	arp_cache_tick(&c, 1000 * MS);
	assert_int_equal(f.request_count, 2);
	arp_cache_tick(&c, 2000 * MS);
	assert_int_equal(f.request_count, 3);
	assert_int_equal(f.dropped_count, 0);
	arp_cache_tick(&c, 3000 * MS);
	assert_int_equal(f.request_count, 3);
	assert_int_equal(f.dropped_count, 1);
	assert_int_equal(f.dropped[0], 7);
	assert_int_equal(arp_cache_count(&c), 0);
	assert_int_equal(arp_cache_next_deadline(&c), UINT64_MAX);
	assert_int_equal(c.stats.failed, 1);
	arp_cache_deinit(&c);
}

static void test_arp_cache_stale_entry_is_probed_used_and_expired(void **state)
{
	(void)state;
	struct arp_cache c;
	struct fake f;
	struct eth_addr mac;
	setup_cache(&c, &f);

	arp_cache_update(&c, 40, &mac_a, 0, true);
	arp_cache_tick(&c, 60000 * MS); /* reachable time is over: probe */
	assert_int_equal(f.request_count, 1);
	assert_int_equal(arp_cache_resolve(&c, 40, 60001 * MS, ITEM(1), &mac), ARP_CACHE_HIT);
	arp_cache_tick(&c, 61000 * MS);
	arp_cache_tick(&c, 62000 * MS);
	assert_int_equal(f.request_count, 3);
	arp_cache_tick(&c, 63000 * MS);
	assert_int_equal(arp_cache_count(&c), 0);
	assert_int_equal(c.stats.expired, 1);
	/* An answered probe keeps the entry. */
	arp_cache_update(&c, 41, &mac_a, 0, true);
	arp_cache_tick(&c, 60000 * MS);
	arp_cache_update(&c, 41, &mac_b, 60000 * MS + 5, false);
	arp_cache_tick(&c, 63000 * MS);
	assert_int_equal(arp_cache_resolve(&c, 41, 63000 * MS, NULL, &mac), ARP_CACHE_HIT);
	assert_true(eth_addr_equal(&mac, &mac_b));
	arp_cache_deinit(&c);
}

static void test_arp_cache_full_table_is_a_counted_drop(void **state)
{
	(void)state;
	struct arp_cache c;
	struct fake f;
	struct eth_addr mac;
	setup_cache(&c, &f);
	for (uint32_t ip = 1; ip <= 6; ip++) /* 3/4 of 8 */
		arp_cache_update(&c, ip, &mac_a, 0, true);
	assert_int_equal(arp_cache_count(&c), 6);
	assert_int_equal(arp_cache_resolve(&c, 99, 0, ITEM(1), &mac), ARP_CACHE_DROPPED);
	assert_int_equal(c.stats.table_full, 1);
	for (uint32_t ip = 1; ip <= 6; ip++)
		assert_int_equal(arp_cache_resolve(&c, ip, 0, NULL, &mac), ARP_CACHE_HIT);
	arp_cache_deinit(&c);
}

static void test_arp_cache_deinit_drops_every_parked_item(void **state)
{
	(void)state;
	struct arp_cache c;
	struct fake f;
	struct eth_addr mac;
	setup_cache(&c, &f);
	assert_int_equal(arp_cache_resolve(&c, 1, 0, ITEM(1), &mac), ARP_CACHE_QUEUED);
	assert_int_equal(arp_cache_resolve(&c, 2, 0, ITEM(2), &mac), ARP_CACHE_QUEUED);
	assert_int_equal(arp_cache_resolve(&c, 2, 0, ITEM(3), &mac), ARP_CACHE_QUEUED);
	arp_cache_deinit(&c);
	assert_int_equal(f.dropped_count, 3);
	assert_int_equal(f.sent_count, 0);
}

static void test_arp_cache_init_refuses_bad_config_and_survives_alloc_failure(void **state)
{
	(void)state;
	struct arp_cache c;
	struct fake f;
	struct arp_cache_ops ops = { fake_request, fake_release, &f };
	struct arp_cache_config bad = cfg;
	bad.entry_count = 12;
	assert_int_equal(arp_cache_init(&c, &bad, &ops), -HASP_EINVAL);
	bad = cfg;
	bad.pending_max = ARP_CACHE_PENDING_MAX + 1;
	assert_int_equal(arp_cache_init(&c, &bad, &ops), -HASP_EINVAL);
	hasp_alloc_fail_after(1);
	assert_int_equal(arp_cache_init(&c, &cfg, &ops), -HASP_ENOMEM);
	hasp_alloc_fail_never();
}

/* Model check: random learn/expire/lookup traffic on a small table agrees
 * with a plain array, which exercises backward-shift deletion across the
 * wrap of the table. */
static void test_arp_cache_agrees_with_a_model_under_random_churn(void **state)
{
	(void)state;
	struct arp_cache c;
	struct fake f;
	struct prng p;
	struct eth_addr mac;
	uint64_t seed = test_util_seed(11);
	struct arp_cache_config small = { .entry_count = 16, .pending_max = 1,
		.reachable_ns = 10, .retry_ns = 1, .request_max = 1 };
	struct arp_cache_ops ops = { fake_request, fake_release, &f };
	uint64_t model_expiry[64] = { 0 }; /* 0: absent */

	print_message("seed=%llu\n", (unsigned long long)seed);
	prng_seed(&p, seed);
	memset(&f, 0, sizeof(f));
	assert_int_equal(arp_cache_init(&c, &small, &ops), 0);
	uint64_t now = 1;
	for (int step = 0; step < 20000; step++) {
		uint32_t ip = (uint32_t)prng_below(&p, 64) + 1;
		now += prng_below(&p, 3);
		if (prng_chance(&p, 500000)) {
			uint64_t full_before = c.stats.table_full;
			arp_cache_update(&c, ip, &mac_a, now, true);
			if (c.stats.table_full == full_before)
				model_expiry[ip - 1] = now + 10;
		}
		arp_cache_tick(&c, now);
		/* REACHABLE until expiry; then one probe (sent at the first tick
		 * at or after expiry, at most 2 later) and removal one retry
		 * after it: gone for sure 5 after expiry. */
		unsigned sure = 0, maybe = 0;
		for (uint32_t i = 1; i <= 64; i++) {
			uint64_t expiry = model_expiry[i - 1];
			if (expiry != 0 && now >= expiry + 5)
				model_expiry[i - 1] = expiry = 0;
			if (expiry == 0)
				continue;
			maybe++;
			if (now < expiry) {
				sure++;
				assert_int_equal(arp_cache_resolve(&c, i, now, NULL, &mac), ARP_CACHE_HIT);
			}
		}
		assert_true(arp_cache_count(&c) >= sure);
		assert_true(arp_cache_count(&c) <= maybe);
	}
	assert_true(c.stats.expired > 100);
	arp_cache_deinit(&c);
}

int main(void)
{
	test_util_install_assert_handler();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arp_cache_miss_requests_once_parks_and_reply_releases_in_order),
		cmocka_unit_test(test_arp_cache_update_creates_only_when_asked),
		cmocka_unit_test(test_arp_cache_retries_then_gives_up_and_drops_parked),
		cmocka_unit_test(test_arp_cache_stale_entry_is_probed_used_and_expired),
		cmocka_unit_test(test_arp_cache_full_table_is_a_counted_drop),
		cmocka_unit_test(test_arp_cache_deinit_drops_every_parked_item),
		cmocka_unit_test(test_arp_cache_init_refuses_bad_config_and_survives_alloc_failure),
		cmocka_unit_test(test_arp_cache_agrees_with_a_model_under_random_churn),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
