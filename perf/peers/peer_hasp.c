/*
 * peer-hasp: the lock cycle against hasp through libhasp, as a service
 * uses it: one struct hasp_client per thread (one blocking call at a
 * time), ACQUIRE in TRY mode with the lock's own TTL, then RELEASE with
 * the fencing token. The other rows of perf/peers/run use their systems'
 * usual blocking clients the same way; hasp-bench's batched engine (one
 * socket, sendmmsg) is reported beside it (docs/PERFORMANCE.md).
 *
 *   peer-hasp --endpoints ip:port,ip:port,... [common options, peer_driver.h]
 *
 * Identity and key come from HASP_ID and HASP_KEY_FILE (scripts/cluster
 * exec sets both), as for every libhasp program.
 */
#include <stdlib.h>
#include <string.h>

#include "hasp/client.h"
#include "perf/peers/peer_driver.h"

struct conn {
	struct hasp_client *client;
	uint64_t token; /* of the lock acquired last; released next */
};

static void *hasp_connect(const struct peer_args *a, uint32_t thread, char **keys,
			  uint32_t key_count)
{
	struct hasp_client_config cfg;
	(void)thread;
	(void)keys;
	(void)key_count;

	hasp_client_config_default(&cfg);
	cfg.cluster = a->endpoints;
	/* The node may be saturated: do not feed it retransmissions at the
	 * 200 ms default (hasp-bench's --timeout 1000 in perf/peers/run). */
	cfg.request_timeout_ms = 1000;
	struct conn *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	if (hasp_client_open(&c->client, &cfg) != 0) {
		free(c);
		return NULL;
	}
	if (hasp_client_connect(c->client) != 0) {
		hasp_client_close(c->client);
		free(c);
		return NULL;
	}
	return c;
}

static enum peer_outcome hasp_acquire(void *conn, const char *key, uint32_t ttl_ms)
{
	struct conn *c = conn;
	const struct hasp_acquire_opts opts = { .ttl_ms = ttl_ms };
	struct hasp_lock lock;

	/* libhasp's one convention (client.h): 0 when granted, the outcome
	 * in `lock`; -HASP_EBUSY when another holds it. */
	int rc = hasp_client_acquire(c->client, key, &opts, &lock);
	if (rc == 0) {
		c->token = lock.token;
		return PEER_GRANTED;
	}
	return rc == -HASP_EBUSY ? PEER_BUSY : PEER_ERROR;
}

static enum peer_outcome hasp_release(void *conn, const char *key)
{
	struct conn *c = conn;

	return hasp_client_release(c->client, key, c->token) == 0 ? PEER_GRANTED : PEER_ERROR;
}

static void hasp_close(void *conn)
{
	struct conn *c = conn;
	hasp_client_close(c->client);
	free(c);
}

int main(int argc, char **argv)
{
	static const struct peer_ops ops = {
		.system = "hasp-libhasp",
		.connect = hasp_connect,
		.acquire = hasp_acquire,
		.release = hasp_release,
		.close = hasp_close,
	};
	return peer_main(argc, argv, &ops);
}
