/*
 * RX lcore -> raft lcore hand-off (see rx_forward.h): an rte_mempool of
 * fixed-size messages and one SPSC rte_ring of message pointers per RX
 * lcore. The pool has no per-lcore cache: gets happen on the RX lcores and
 * puts on lcore 0, so a cache would only park messages on the wrong side
 * and add a term to the sizing sum.
 */
#include "dataplane/rx_forward.h"

#include <stdio.h>
#include <string.h>

#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "hasp/errors.h"

int rx_forward_init(struct rx_forward *f, uint32_t lcore_count, uint32_t payload_max)
{
	char name[RTE_RING_NAMESIZE];

	HASP_ASSERT(f != NULL);
	HASP_ASSERT((RX_FORWARD_RING_SIZE & (RX_FORWARD_RING_SIZE - 1)) == 0);
	memset(f, 0, sizeof(*f));
	if (lcore_count < 2 || payload_max == 0 || payload_max > UINT16_MAX)
		return -HASP_EINVAL;
	f->lcore_count = lcore_count;
	f->payload_max = payload_max;
	f->rings = hasp_calloc(lcore_count, sizeof(*f->rings));
	if (f->rings == NULL)
		return -HASP_ENOMEM;
	uint32_t rx_lcores = lcore_count - 1;
	/* Messages in existence at once (rx_forward.h): */
	f->msg_count = rx_lcores * RX_FORWARD_RING_SIZE /* every ring full */
		     + rx_lcores                        /* one in an RX lcore's hand */
		     + RX_FORWARD_BURST;                /* lcore 0's dequeued burst */
	f->pool = rte_mempool_create("hasp_fwd_pool", f->msg_count,
				     (unsigned)(sizeof(struct rx_forward_msg) + payload_max), 0, 0,
				     NULL, NULL, NULL, NULL, (int)rte_socket_id(), 0);
	if (f->pool == NULL)
		goto fail;
	for (uint32_t i = 1; i < lcore_count; i++) {
		snprintf(name, sizeof(name), "hasp_fwd_%u", i);
		/* One producer (RX lcore i), one consumer (lcore 0). */
		f->rings[i] = rte_ring_create(name, RX_FORWARD_RING_SIZE, (int)rte_socket_id(),
					      RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (f->rings[i] == NULL)
			goto fail;
	}
	return 0;
fail:
	rx_forward_deinit(f);
	return -HASP_ENOMEM;
}

void rx_forward_deinit(struct rx_forward *f)
{
	HASP_ASSERT(f != NULL);
	for (uint32_t i = 0; f->rings != NULL && i < f->lcore_count; i++) {
		struct rx_forward_msg *m[RX_FORWARD_BURST];
		uint32_t n;
		if (f->rings[i] == NULL)
			continue;
		while ((n = rx_forward_take(f, i, m, RX_FORWARD_BURST)) > 0)
			rx_forward_put(f, m, n);
		rte_ring_free(f->rings[i]);
	}
	rte_mempool_free(f->pool);
	hasp_free(f->rings);
	memset(f, 0, sizeof(*f));
}

bool rx_forward_push(struct rx_forward *f, uint32_t rx_index, const struct rx_forward_msg *hdr,
		     const uint8_t *payload, struct dp_stats *stats)
{
	void *obj;

	HASP_ASSERT(f != NULL && hdr != NULL && stats != NULL);
	HASP_ASSERT(rx_index >= 1 && rx_index < f->lcore_count);
	if (hdr->payload_size > f->payload_max) {
		/* The classifier bounds datagrams by the MTU we sized for. */
		stats->rx_forward_no_msg++;
		return false;
	}
	if (rte_mempool_get(f->pool, &obj) != 0) {
		stats->rx_forward_no_msg++;
		return false;
	}
	struct rx_forward_msg *m = obj;
	*m = *hdr;
	m->rx_index = (uint8_t)rx_index;
	memcpy(m->payload, payload, hdr->payload_size);
	if (rte_ring_sp_enqueue(f->rings[rx_index], m) != 0) {
		rte_mempool_put(f->pool, m);
		stats->rx_ring_full++;
		return false;
	}
	stats->rx_forwarded++;
	return true;
}

uint32_t rx_forward_take(struct rx_forward *f, uint32_t rx_index, struct rx_forward_msg **msgs,
			 uint32_t max)
{
	HASP_ASSERT(f != NULL && msgs != NULL);
	HASP_ASSERT(rx_index < f->lcore_count && max <= RX_FORWARD_BURST);
	if (f->rings[rx_index] == NULL)
		return 0;
	return rte_ring_sc_dequeue_burst(f->rings[rx_index], (void **)msgs, max, NULL);
}

void rx_forward_put(struct rx_forward *f, struct rx_forward_msg **msgs, uint32_t count)
{
	HASP_ASSERT(f != NULL && msgs != NULL);
	HASP_ASSERT(count <= RX_FORWARD_BURST);
	if (count > 0)
		rte_mempool_put_bulk(f->pool, (void **)msgs, count);
}

bool rx_forward_pending(const struct rx_forward *f)
{
	HASP_ASSERT(f != NULL && f->rings != NULL);
	for (uint32_t i = 1; i < f->lcore_count; i++)
		if (!rte_ring_empty(f->rings[i]))
			return true;
	return false;
}
