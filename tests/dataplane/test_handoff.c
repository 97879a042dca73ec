/*
 * The hand-offs between lcores: RX lcore -> lcore 0 (dataplane/rx_forward.h)
 * and lcore 0 -> the lcores that send events (dataplane/tx_post.h), on a
 * minimal EAL (no hugepages, no PCI, no port): rte_mempool needs the EAL's
 * memory, so this test brings one up in-process; the rings and pools it
 * checks are the ones haspd uses. Both sides run on this thread: the SPSC
 * contract is about which lcore calls which function, not about threads.
 */
#include "dataplane/rx_forward.h"
#include "dataplane/tx_post.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "common/limits.h"
#include "hasp/errors.h"
#include "tests/test_util.h"

#define PAYLOAD_MAX HASP_DATAGRAM_SIZE_MAX

static struct rx_forward_msg hdr_for(uint32_t i)
{
	struct rx_forward_msg h;
	memset(&h, 0, sizeof(h));
	h.src_ip = 0x0a4d0001u + i;
	h.dst_ip = 0x0a4d000bu;
	h.src_port = (uint16_t)(40000 + i);
	h.dst_port = 7000;
	h.payload_size = (uint16_t)(i % PAYLOAD_MAX + 1);
	h.port_index = (uint8_t)(i % 2);
	h.src_mac.bytes[0] = 0x02;
	h.src_mac.bytes[5] = (uint8_t)i;
	return h;
}

static void fill(uint8_t *buf, uint32_t i, uint16_t size)
{
	for (uint16_t k = 0; k < size; k++)
		buf[k] = (uint8_t)(i * 7 + k);
}

static void test_rx_forward_hands_over_every_field_in_order(void **state)
{
	(void)state;
	struct rx_forward f;
	struct dp_stats st = { 0 };
	uint8_t payload[PAYLOAD_MAX];
	assert_int_equal(rx_forward_init(&f, 3, PAYLOAD_MAX), 0);
	assert_false(rx_forward_pending(&f));
	for (uint32_t i = 0; i < 100; i++) {
		struct rx_forward_msg h = hdr_for(i);
		fill(payload, i, h.payload_size);
		assert_true(rx_forward_push(&f, 1 + i % 2, &h, payload, &st));
	}
	assert_true(rx_forward_pending(&f));
	assert_int_equal(st.rx_forwarded, 100);
	/* Per ring, FIFO; each message as pushed, stamped with its RX lcore. */
	for (uint32_t ring = 1; ring <= 2; ring++) {
		uint32_t next = ring - 1, n;
		struct rx_forward_msg *m[RX_FORWARD_BURST];
		while ((n = rx_forward_take(&f, ring, m, RX_FORWARD_BURST)) > 0) {
			for (uint32_t k = 0; k < n; k++, next += 2) {
				struct rx_forward_msg h = hdr_for(next);
				fill(payload, next, h.payload_size);
				assert_int_equal(m[k]->rx_index, ring);
				assert_int_equal(m[k]->src_ip, h.src_ip);
				assert_int_equal(m[k]->dst_ip, h.dst_ip);
				assert_int_equal(m[k]->src_port, h.src_port);
				assert_int_equal(m[k]->dst_port, h.dst_port);
				assert_int_equal(m[k]->port_index, h.port_index);
				assert_memory_equal(m[k]->src_mac.bytes, h.src_mac.bytes, 6);
				assert_int_equal(m[k]->payload_size, h.payload_size);
				assert_memory_equal(m[k]->payload, payload, h.payload_size);
			}
			rx_forward_put(&f, m, n);
		}
		assert_int_equal(next, 100 + ring - 1);
	}
	assert_false(rx_forward_pending(&f));
	rx_forward_deinit(&f);
}

static void test_rx_forward_full_ring_drops_and_counts_without_draining_the_pool(void **state)
{
	(void)state;
	struct rx_forward f;
	struct dp_stats st = { 0 };
	uint8_t payload[PAYLOAD_MAX] = { 0 };
	struct rx_forward_msg h = hdr_for(1);
	assert_int_equal(rx_forward_init(&f, 3, PAYLOAD_MAX), 0);
	/* Both RX lcores fill their rings (size - 1 usable) and keep pushing. */
	for (uint32_t ring = 1; ring <= 2; ring++)
		for (uint32_t i = 0; i < RX_FORWARD_RING_SIZE + 10; i++)
			(void)rx_forward_push(&f, ring, &h, payload, &st);
	assert_int_equal(st.rx_forwarded, 2 * (RX_FORWARD_RING_SIZE - 1));
	assert_int_equal(st.rx_ring_full, 2 * 11);
	/* The sizing sum: full rings never exhaust the pool. */
	assert_int_equal(st.rx_forward_no_msg, 0);
	assert_true(rte_mempool_avail_count(f.r.pool) >= RX_FORWARD_BURST);
	/* Lcore 0 takes a burst, the RX lcore can queue again. */
	struct rx_forward_msg *m[RX_FORWARD_BURST];
	uint32_t n = rx_forward_take(&f, 1, m, RX_FORWARD_BURST);
	assert_int_equal(n, RX_FORWARD_BURST);
	assert_true(rx_forward_push(&f, 1, &h, payload, &st));
	rx_forward_put(&f, m, n);
	/* Deinit returns what is still queued and frees everything. */
	rx_forward_deinit(&f);
	assert_null(f.r.pool);
}

static void test_rx_forward_refuses_oversized_payload_and_bad_config(void **state)
{
	(void)state;
	struct rx_forward f;
	struct dp_stats st = { 0 };
	uint8_t payload[PAYLOAD_MAX + 1] = { 0 };
	assert_int_equal(rx_forward_init(&f, 1, PAYLOAD_MAX), -HASP_EINVAL);
	assert_int_equal(rx_forward_init(&f, 2, 0), -HASP_EINVAL);
	assert_int_equal(rx_forward_init(&f, 2, 512), 0);
	struct rx_forward_msg h = hdr_for(0);
	h.payload_size = 513;
	assert_false(rx_forward_push(&f, 1, &h, payload, &st));
	assert_int_equal(st.rx_forward_no_msg, 1);
	assert_false(rx_forward_pending(&f));
	/* Lcore 0 has no ring of its own; pushing to it is a programming error. */
	h.payload_size = 1;
	expect_assert_failure(rx_forward_push(&f, 0, &h, payload, &st));
	expect_assert_failure(rx_forward_push(&f, 2, &h, payload, &st));
	rx_forward_deinit(&f);
}

/* Lcore 0 posts to lcores 1 and 2: each gets its own datagrams in order,
 * every field and the aux bytes (haspd's sealing key) intact. */
static void test_tx_post_hands_each_target_its_datagrams_in_order(void **state)
{
	(void)state;
	struct tx_post p;
	struct dp_stats st = { 0 };
	uint8_t payload[PAYLOAD_MAX];
	assert_int_equal(tx_post_init(&p, 3, PAYLOAD_MAX), 0);
	assert_false(tx_post_pending(&p, 1));
	for (uint32_t i = 0; i < 100; i++) {
		struct tx_post_msg h = { .dst_ip = 0x0a4d0100u + i, .dst_port = (uint16_t)(50000 + i),
					 .src_port = 7000, .payload_size = (uint16_t)(i % PAYLOAD_MAX + 1),
					 .has_aux = i % 3 == 0 };
		memset(h.aux, (int)i, sizeof(h.aux));
		fill(payload, i, h.payload_size);
		assert_true(tx_post_push(&p, 1 + i % 2, &h, payload, &st));
	}
	assert_int_equal(st.post_queued, 100);
	for (uint32_t target = 1; target <= 2; target++) {
		uint32_t next = target - 1, n;
		struct tx_post_msg *m[TX_POST_BURST];
		assert_true(tx_post_pending(&p, target));
		while ((n = tx_post_take(&p, target, m, TX_POST_BURST)) > 0) {
			for (uint32_t k = 0; k < n; k++, next += 2) {
				uint8_t aux[TX_POST_AUX_SIZE];
				memset(aux, (int)next, sizeof(aux));
				fill(payload, next, m[k]->payload_size);
				assert_int_equal(m[k]->dst_ip, 0x0a4d0100u + next);
				assert_int_equal(m[k]->dst_port, 50000 + next);
				assert_int_equal(m[k]->src_port, 7000);
				assert_int_equal(m[k]->payload_size, next % PAYLOAD_MAX + 1);
				assert_int_equal(m[k]->has_aux, next % 3 == 0);
				assert_memory_equal(m[k]->aux, aux, sizeof(aux));
				assert_memory_equal(m[k]->payload, payload, m[k]->payload_size);
			}
			tx_post_put(&p, m, n);
		}
		assert_int_equal(next, 100 + target - 1);
		assert_false(tx_post_pending(&p, target));
	}
	tx_post_deinit(&p);
}

/* A target that does not keep up: its ring fills, posts to it are dropped
 * and counted, the pool never runs dry (the sizing sum), and the other
 * target still gets its datagrams. */
static void test_tx_post_full_ring_drops_and_counts(void **state)
{
	(void)state;
	struct tx_post p;
	struct dp_stats st = { 0 };
	uint8_t payload[PAYLOAD_MAX] = { 0 };
	struct tx_post_msg h = { .dst_ip = 1, .dst_port = 2, .src_port = 3, .payload_size = 64 };
	assert_int_equal(tx_post_init(&p, 3, PAYLOAD_MAX), 0);
	uint32_t queued = 0;
	for (uint32_t i = 0; i < TX_POST_RING_SIZE + 10; i++)
		queued += tx_post_push(&p, 1, &h, payload, &st);
	assert_int_equal(queued, TX_POST_RING_SIZE - 1); /* SPSC rings hold size - 1 */
	assert_int_equal(st.post_queued, TX_POST_RING_SIZE - 1);
	assert_int_equal(st.post_ring_full, 11);
	assert_int_equal(st.post_no_msg, 0);
	assert_true(tx_post_push(&p, 2, &h, payload, &st));
	struct tx_post_msg *m[TX_POST_BURST];
	uint32_t n = tx_post_take(&p, 1, m, TX_POST_BURST);
	assert_int_equal(n, TX_POST_BURST);
	assert_true(tx_post_push(&p, 1, &h, payload, &st));
	tx_post_put(&p, m, n);
	/* Too big for the MTU it was sized for: refused, counted. */
	h.payload_size = PAYLOAD_MAX + 1;
	assert_false(tx_post_push(&p, 2, &h, payload, &st));
	assert_int_equal(st.post_no_msg, 1);
	/* Lcore 0 has no ring; a target past the last is a programming error. */
	h.payload_size = 1;
	expect_assert_failure((void)!tx_post_push(&p, 0, &h, payload, &st));
	expect_assert_failure((void)!tx_post_push(&p, 3, &h, payload, &st));
	tx_post_deinit(&p);
	assert_null(p.r.pool);
	assert_int_equal(tx_post_init(&p, 1, PAYLOAD_MAX), -HASP_EINVAL);
	assert_int_equal(tx_post_init(&p, 2, 0), -HASP_EINVAL);
}

int main(void)
{
	/* Its own prefix, so that the runtime directory the EAL creates even
	 * with --no-shconf is ours to remove and never another process's. */
	char prefix[64], runtime_dir[96];
	snprintf(prefix, sizeof(prefix), "hasp-test-handoff-%d", (int)getpid());
	snprintf(runtime_dir, sizeof(runtime_dir), "/var/run/dpdk/%s", prefix);
	char *eal_argv[] = { "test_handoff", "-l", "0", "--no-huge", "-m", "32", "--no-pci",
			     "--no-shconf", "--no-telemetry", "--log-level=error", "--file-prefix",
			     prefix, NULL };
	test_util_install_assert_handler();
	if (rte_eal_init((int)(sizeof(eal_argv) / sizeof(eal_argv[0])) - 1, eal_argv) < 0) {
		if (geteuid() != 0) {
			printf("SKIP: EAL init needs root here\n");
			return 77;
		}
		printf("FAIL: rte_eal_init\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rx_forward_hands_over_every_field_in_order),
		cmocka_unit_test(test_rx_forward_full_ring_drops_and_counts_without_draining_the_pool),
		cmocka_unit_test(test_rx_forward_refuses_oversized_payload_and_bad_config),
		cmocka_unit_test(test_tx_post_hands_each_target_its_datagrams_in_order),
		cmocka_unit_test(test_tx_post_full_ring_drops_and_counts),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	(void)rte_eal_cleanup();
	(void)rmdir(runtime_dir);
	return rc;
}
