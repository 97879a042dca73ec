/*
 * Lcore 0 -> other lcores hand-off of datagrams to send (see tx_post.h) on
 * lcore_rings.h: the ring of lcore i is lcore 0's to fill and lcore i's to
 * empty.
 */
#include "dataplane/tx_post.h"

#include <string.h>

#include "common/assert.h"
#include "hasp/errors.h"

_Static_assert(TX_POST_BURST <= LCORE_RINGS_BURST_MAX, "a burst is one take");

int tx_post_init(struct tx_post *p, uint32_t lcore_count, uint32_t payload_max)
{
	HASP_ASSERT(p != NULL);
	memset(p, 0, sizeof(*p));
	if (lcore_count < 2 || payload_max == 0 || payload_max > UINT16_MAX)
		return -HASP_EINVAL;
	p->payload_max = payload_max;
	uint32_t targets = lcore_count - 1;
	/* Messages in existence at once (tx_post.h): */
	uint32_t msg_count = targets * TX_POST_RING_SIZE /* every ring full */
			   + 1                           /* one in lcore 0's hand */
			   + targets * TX_POST_BURST;    /* each target's dequeued burst */
	/* One producer (lcore 0), one consumer per ring (lcore i). */
	return lcore_rings_init(&p->r, "hasp_post", lcore_count,
				(uint32_t)sizeof(struct tx_post_msg) + payload_max, TX_POST_RING_SIZE,
				msg_count);
}

void tx_post_deinit(struct tx_post *p)
{
	HASP_ASSERT(p != NULL);
	lcore_rings_deinit(&p->r);
	memset(p, 0, sizeof(*p));
}

bool tx_post_push(struct tx_post *p, uint32_t target, const struct tx_post_msg *hdr,
		  const uint8_t *payload, struct dp_stats *stats)
{
	HASP_ASSERT(p != NULL && hdr != NULL && stats != NULL);
	HASP_ASSERT(target >= 1 && target < p->r.lcore_count);
	/* Bigger than the MTU we sized for (the sender's error, as
	 * dp_udp_send() would refuse it), or the sum is wrong. */
	struct tx_post_msg *m = hdr->payload_size <= p->payload_max ? lcore_rings_get(&p->r) : NULL;
	if (m == NULL) {
		stats->post_no_msg++;
		return false;
	}
	*m = *hdr;
	memcpy(m->payload, payload, hdr->payload_size);
	if (!lcore_rings_enqueue(&p->r, target, m)) {
		/* aux may be a key (haspd's): not left in a free message. */
		memset(m->aux, 0, sizeof(m->aux));
		lcore_rings_put(&p->r, (void **)&m, 1);
		stats->post_ring_full++;
		return false;
	}
	stats->post_queued++;
	return true;
}

uint32_t tx_post_take(struct tx_post *p, uint32_t target, struct tx_post_msg **msgs, uint32_t max)
{
	HASP_ASSERT(p != NULL && max <= TX_POST_BURST);
	return lcore_rings_take(&p->r, target, (void **)msgs, max);
}

void tx_post_put(struct tx_post *p, struct tx_post_msg **msgs, uint32_t count)
{
	HASP_ASSERT(p != NULL);
	lcore_rings_put(&p->r, (void **)msgs, count);
}

bool tx_post_pending(const struct tx_post *p, uint32_t target)
{
	HASP_ASSERT(p != NULL);
	return lcore_rings_pending(&p->r, target);
}
