/*
 * Helpers shared by the libhasp tests against the scripted responder
 * (test_client.c, test_async.c): a fast test configuration, a client on
 * the responder's nodes, and the plain replies.
 */
#ifndef HASP_TESTS_CLIENT_CLIENT_TEST_H
#define HASP_TESTS_CLIENT_CLIENT_TEST_H

#include <stdio.h>
#include <string.h>

#include "hasp/client.h"
#include "tests/client/responder.h"
#include "tests/test_util.h"

#define MS 1000000ull

static inline void test_config(struct hasp_client_config *cfg, const char *cluster)
{
	hasp_client_config_default(cfg);
	cfg->cluster = cluster;
	cfg->request_timeout_ms = 50;
	cfg->backoff_ms = 5;
	cfg->backoff_max_ms = 20;
	cfg->deadline_ms = 3000;
	cfg->nonce_seed = test_util_seed(0x5eed);
}

static inline struct hasp_client *client_on(struct responder *r, struct hasp_client_config *cfg,
					    char *cluster, size_t cluster_size)
{
	struct hasp_client *c = NULL;

	responder_cluster(r, cluster, cluster_size);
	cfg->cluster = cluster;
	assert_int_equal(hasp_client_open(&c, cfg), 0);
	return c;
}

static inline void reply_status(struct responder *r, int node, const struct hasp_wire_msg *req,
				const struct sockaddr_in *from, enum hasp_status status)
{
	struct hasp_wire_msg rep;

	responder_reply_init(&rep, req, status);
	responder_send(r, node, from, &rep);
}

static inline void reply_granted(struct responder *r, int node, const struct hasp_wire_msg *req,
				 const struct sockaddr_in *from, uint64_t token)
{
	struct hasp_wire_msg rep;

	responder_reply_init(&rep, req, HASP_STATUS_GRANTED);
	rep.body.granted.token = token;
	rep.body.granted.ttl_ms = req->hdr.opcode == HASP_OP_ACQUIRE ? req->body.acquire.ttl_ms
								     : req->body.renew.ttl_ms;
	responder_send(r, node, from, &rep);
}

/* KV_RANGE: five keys, two per datagram with MORE (the walk's pages). */
static const char *const range_keys[] = { "k1", "k2", "k3", "k4", "k5" };

static inline void script_kv_range_two_per_datagram(struct responder *r, int node,
						    const struct hasp_wire_msg *req,
						    const struct sockaddr_in *from, void *arg)
{
	struct hasp_wire_kv_entry entries[5];
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	size_t count = 0;
	size_t packed;
	(void)arg;

	if (req == NULL || responder_answer_session(r, node, req, from))
		return;
	if (req->hdr.opcode != HASP_OP_KV_RANGE) {
		reply_status(r, node, req, from, HASP_STATUS_BAD_OPCODE);
		return;
	}
	const struct hasp_wire_bytes *after = &req->body.kv_range.start_after;
	for (size_t i = 0; i < 5; i++) {
		const char *k = range_keys[i];
		if (after->size > 0 && strncmp(k, (const char *)after->data, after->size) <= 0)
			continue;
		entries[count].key.data = (const uint8_t *)k;
		entries[count].key.size = strlen(k);
		entries[count].value.data = (const uint8_t *)"v";
		entries[count].value.size = 1;
		entries[count].revision = 100 + i;
		count++;
	}
	size_t send = count < 2 ? count : 2;
	if (req->body.kv_range.limit != 0 && send > req->body.kv_range.limit)
		send = req->body.kv_range.limit;
	int size = hasp_wire_encode_kv_range_reply(&req->hdr, entries, send, count > send, buf,
						   sizeof(buf), &packed);
	if (size > 0)
		responder_send_raw(r, node, from, buf, (size_t)size);
}

struct range_seen {
	int count;
	char keys[8][8];
	uint64_t revisions[8];
};

static inline int range_collect(const struct hasp_kv_entry *e, void *arg)
{
	struct range_seen *s = arg;

	if (s->count < 8) {
		snprintf(s->keys[s->count], sizeof(s->keys[0]), "%s", e->key);
		s->revisions[s->count] = e->revision;
	}
	s->count++;
	return 0;
}

#endif
