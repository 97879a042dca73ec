/*
 * Latency and reply accounting (see node_latency.h). Times are the node's
 * lcore time (n->now_ns, taken once per received burst or work round), so
 * a request answered in the round it arrived in counts as 0; the apply
 * time alone is measured with the clock around the run.
 */
#include "node/node_latency.h"

#include "hasp/types.h"

void node_latency_reply(struct node *n, uint8_t op, uint16_t status, uint64_t arrival_ns)
{
	uint32_t o = op < NODE_OPS ? op : 0;
	if (status < HASP_STATUS_COUNT)
		n->stats.replies_by[o][status]++;
	node_hist_observe(&n->stats.request_latency[o],
			  n->now_ns > arrival_ns ? n->now_ns - arrival_ns : 0);
}

void node_latency_proposed(struct node *n, uint64_t index)
{
	if (n->commit_wait_count == NODE_LATENCY_RING) {
		n->stats.latency_ring_full++;
		return;
	}
	uint32_t tail = (n->commit_wait_head + n->commit_wait_count) % NODE_LATENCY_RING;
	n->commit_wait[tail] = (struct node_timed){ .index = index, .ns = n->now_ns };
	n->commit_wait_count++;
}

void node_latency_committed(struct node *n)
{
	while (n->commit_wait_count > 0) {
		const struct node_timed *t = &n->commit_wait[n->commit_wait_head];
		if (t->index > n->raft.commit)
			break;
		node_hist_observe(&n->stats.commit_latency, n->now_ns > t->ns ? n->now_ns - t->ns : 0);
		n->commit_wait_head = (n->commit_wait_head + 1) % NODE_LATENCY_RING;
		n->commit_wait_count--;
	}
}

void node_latency_step_down(struct node *n)
{
	n->commit_wait_head = 0;
	n->commit_wait_count = 0;
}

void node_latency_applied(struct node *n, uint64_t ns)
{
	node_hist_observe(&n->stats.apply_latency, ns);
}
