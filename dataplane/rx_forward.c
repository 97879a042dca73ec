/*
 * RX lcore -> raft lcore hand-off (see rx_forward.h) on lcore_rings.h: the
 * ring of lcore i is RX lcore i's to fill and lcore 0's to empty.
 */
#include "dataplane/rx_forward.h"

#include <string.h>

#include "common/assert.h"
#include "hasp/errors.h"

_Static_assert(RX_FORWARD_BURST <= LCORE_RINGS_BURST_MAX, "a burst is one take");

int rx_forward_init(struct rx_forward *f, uint32_t lcore_count, uint32_t payload_max)
{
	HASP_ASSERT(f != NULL);
	memset(f, 0, sizeof(*f));
	if (lcore_count < 2 || payload_max == 0 || payload_max > UINT16_MAX)
		return -HASP_EINVAL;
	f->payload_max = payload_max;
	uint32_t rx_lcores = lcore_count - 1;
	/* Messages in existence at once (rx_forward.h): */
	uint32_t msg_count = rx_lcores * RX_FORWARD_RING_SIZE /* every ring full */
			   + rx_lcores                        /* one in an RX lcore's hand */
			   + RX_FORWARD_BURST;                /* lcore 0's dequeued burst */
	/* One producer per ring (RX lcore i), one consumer (lcore 0). */
	return lcore_rings_init(&f->r, "hasp_fwd", lcore_count,
				(uint32_t)sizeof(struct rx_forward_msg) + payload_max, RX_FORWARD_RING_SIZE,
				msg_count);
}

void rx_forward_deinit(struct rx_forward *f)
{
	HASP_ASSERT(f != NULL);
	lcore_rings_deinit(&f->r);
	memset(f, 0, sizeof(*f));
}

bool rx_forward_push(struct rx_forward *f, uint32_t rx_index, const struct rx_forward_msg *hdr,
		     const uint8_t *payload, struct dp_stats *stats)
{
	HASP_ASSERT(f != NULL && hdr != NULL && stats != NULL);
	HASP_ASSERT(rx_index >= 1 && rx_index < f->r.lcore_count);
	/* The classifier bounds datagrams by the MTU we sized for. */
	struct rx_forward_msg *m =
		hdr->payload_size <= f->payload_max ? lcore_rings_get(&f->r) : NULL;
	if (m == NULL) {
		stats->rx_forward_no_msg++;
		return false;
	}
	*m = *hdr;
	m->rx_index = (uint8_t)rx_index;
	memcpy(m->payload, payload, hdr->payload_size);
	if (!lcore_rings_enqueue(&f->r, rx_index, m)) {
		lcore_rings_put(&f->r, (void **)&m, 1);
		stats->rx_ring_full++;
		return false;
	}
	stats->rx_forwarded++;
	return true;
}

uint32_t rx_forward_take(struct rx_forward *f, uint32_t rx_index, struct rx_forward_msg **msgs,
			 uint32_t max)
{
	HASP_ASSERT(f != NULL && max <= RX_FORWARD_BURST);
	return lcore_rings_take(&f->r, rx_index, (void **)msgs, max);
}

void rx_forward_put(struct rx_forward *f, struct rx_forward_msg **msgs, uint32_t count)
{
	HASP_ASSERT(f != NULL);
	lcore_rings_put(&f->r, (void **)msgs, count);
}

bool rx_forward_pending(const struct rx_forward *f)
{
	HASP_ASSERT(f != NULL);
	for (uint32_t i = 1; i < f->r.lcore_count; i++)
		if (lcore_rings_pending(&f->r, i))
			return true;
	return false;
}
