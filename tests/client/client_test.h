/*
 * Helpers shared by the libhasp tests against the scripted responder
 * (test_client.c, test_async.c): a fast test configuration, a client on
 * the responder's nodes, and the plain replies.
 */
#ifndef HASP_TESTS_CLIENT_CLIENT_TEST_H
#define HASP_TESTS_CLIENT_CLIENT_TEST_H

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

#endif
