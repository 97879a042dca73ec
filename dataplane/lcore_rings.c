/*
 * Per-lcore SPSC rings of messages from one pool (see lcore_rings.h).
 */
#include "dataplane/lcore_rings.h"

#include <stdio.h>
#include <string.h>

#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "hasp/errors.h"

int lcore_rings_init(struct lcore_rings *r, const char *name, uint32_t lcore_count, uint32_t msg_size,
		     uint32_t ring_size, uint32_t msg_count)
{
	char ring_name[RTE_RING_NAMESIZE];

	HASP_ASSERT(r != NULL && name != NULL && lcore_count >= 2 && msg_size > 0);
	HASP_ASSERT(ring_size >= 2 && (ring_size & (ring_size - 1)) == 0);
	memset(r, 0, sizeof(*r));
	r->lcore_count = lcore_count;
	r->rings = hasp_calloc(lcore_count, sizeof(*r->rings));
	if (r->rings == NULL)
		return -HASP_ENOMEM;
	snprintf(ring_name, sizeof(ring_name), "%s_pool", name);
	r->pool = rte_mempool_create(ring_name, msg_count, msg_size, 0, 0, NULL, NULL, NULL, NULL,
				     (int)rte_socket_id(), 0);
	if (r->pool == NULL)
		goto fail;
	for (uint32_t i = 1; i < lcore_count; i++) {
		snprintf(ring_name, sizeof(ring_name), "%s_%u", name, i);
		r->rings[i] = rte_ring_create(ring_name, ring_size, (int)rte_socket_id(),
					      RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (r->rings[i] == NULL)
			goto fail;
	}
	return 0;
fail:
	lcore_rings_deinit(r);
	return -HASP_ENOMEM;
}

void lcore_rings_deinit(struct lcore_rings *r)
{
	HASP_ASSERT(r != NULL);
	for (uint32_t i = 0; r->rings != NULL && i < r->lcore_count; i++) {
		void *m[LCORE_RINGS_BURST_MAX];
		uint32_t n;
		if (r->rings[i] == NULL)
			continue;
		while ((n = lcore_rings_take(r, i, m, LCORE_RINGS_BURST_MAX)) > 0)
			lcore_rings_put(r, m, n);
		rte_ring_free(r->rings[i]);
	}
	rte_mempool_free(r->pool);
	hasp_free(r->rings);
	memset(r, 0, sizeof(*r));
}

void *lcore_rings_get(struct lcore_rings *r)
{
	void *obj;

	HASP_ASSERT(r != NULL && r->pool != NULL);
	return rte_mempool_get(r->pool, &obj) == 0 ? obj : NULL;
}

bool lcore_rings_enqueue(struct lcore_rings *r, uint32_t index, void *m)
{
	HASP_ASSERT(r != NULL && m != NULL);
	HASP_ASSERT(index >= 1 && index < r->lcore_count);
	return rte_ring_sp_enqueue(r->rings[index], m) == 0;
}

uint32_t lcore_rings_take(struct lcore_rings *r, uint32_t index, void **msgs, uint32_t max)
{
	HASP_ASSERT(r != NULL && msgs != NULL);
	HASP_ASSERT(index < r->lcore_count && max <= LCORE_RINGS_BURST_MAX);
	if (r->rings[index] == NULL)
		return 0;
	return rte_ring_sc_dequeue_burst(r->rings[index], msgs, max, NULL);
}

void lcore_rings_put(struct lcore_rings *r, void **msgs, uint32_t count)
{
	HASP_ASSERT(r != NULL && msgs != NULL);
	HASP_ASSERT(count <= LCORE_RINGS_BURST_MAX);
	if (count > 0)
		rte_mempool_put_bulk(r->pool, msgs, count);
}

bool lcore_rings_pending(const struct lcore_rings *r, uint32_t index)
{
	HASP_ASSERT(r != NULL && r->rings != NULL);
	HASP_ASSERT(index >= 1 && index < r->lcore_count);
	return !rte_ring_empty(r->rings[index]);
}
