/*
 * peer-zookeeper: the lock cycle against a ZooKeeper ensemble through its
 * C client (libzookeeper_mt, synchronous calls), with the standard lock
 * recipe: create an EPHEMERAL|SEQUENCE child "lock-" under the lock's
 * node, list the children, and hold the lock when ours has the lowest
 * sequence number; release deletes our child. In TRY mode (as here) a
 * child that is not the lowest is deleted again and the acquire answers
 * busy. The lock lives as long as the client's session (its TTL).
 * ZooKeeper acknowledges a write after a quorum has it in its fsynced
 * transaction log (forceSync=yes, its default).
 *
 *   peer-zookeeper --endpoints 127.0.0.1:21811,127.0.0.1:21812,... [common options]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zookeeper/zookeeper.h>

#include "perf/peers/peer_driver.h"

struct conn {
	zhandle_t *zh;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int state;
	char node[512]; /* our sequential child while held */
};

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	struct conn *c = ctx;
	(void)zh;
	(void)path;
	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&c->mu);
	c->state = state;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void zk_path(const char *key, char *out, size_t size)
{
	snprintf(out, size, "/%s", key);
}

static void *zk_connect(const struct peer_args *a, uint32_t thread, char **keys, uint32_t key_count)
{
	struct conn *c = calloc(1, sizeof(*c));
	(void)thread;

	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	c->zh = zookeeper_init(a->endpoints, watcher, (int)(a->ttl_ms < 4000 ? 4000 : a->ttl_ms), NULL, c, 0);
	if (c->zh == NULL)
		goto fail;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&c->mu);
	while (c->state != ZOO_CONNECTED_STATE &&
	       pthread_cond_timedwait(&c->cv, &c->mu, &until) == 0)
		;
	int state = c->state;
	pthread_mutex_unlock(&c->mu);
	if (state != ZOO_CONNECTED_STATE)
		goto fail;
	/* The lock nodes (persistent parents), created once; another thread
	 * may have made the prefix node already. */
	char path[512];
	snprintf(path, sizeof(path), "/%s", a->prefix);
	int rc = zoo_create(c->zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
	if (rc != ZOK && rc != ZNODEEXISTS)
		goto fail;
	for (uint32_t k = 0; k < key_count; k++) {
		zk_path(keys[k], path, sizeof(path));
		rc = zoo_create(c->zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
		if (rc != ZOK && rc != ZNODEEXISTS)
			goto fail;
	}
	return c;
fail:
	if (c->zh != NULL)
		zookeeper_close(c->zh);
	free(c);
	return NULL;
}

static enum peer_outcome zk_acquire(void *conn, const char *key, uint32_t ttl_ms)
{
	struct conn *c = conn;
	char parent[512], child[600];
	(void)ttl_ms; /* the session timeout is the TTL */

	zk_path(key, parent, sizeof(parent));
	snprintf(child, sizeof(child), "%s/lock-", parent);
	int rc = zoo_create(c->zh, child, "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL | ZOO_SEQUENCE,
			    c->node, sizeof(c->node));
	if (rc != ZOK)
		return PEER_ERROR;
	struct String_vector kids = { 0, NULL };
	rc = zoo_get_children(c->zh, parent, 0, &kids);
	if (rc != ZOK)
		return PEER_ERROR;
	const char *ours = strrchr(c->node, '/') + 1;
	bool lowest = true;
	for (int32_t i = 0; i < kids.count; i++)
		if (strcmp(kids.data[i], ours) < 0)
			lowest = false; /* same prefix and 10-digit sequence: bytewise order */
	deallocate_String_vector(&kids);
	if (lowest)
		return PEER_GRANTED;
	(void)zoo_delete(c->zh, c->node, -1);
	return PEER_BUSY;
}

static enum peer_outcome zk_release(void *conn, const char *key)
{
	struct conn *c = conn;
	(void)key;
	return zoo_delete(c->zh, c->node, -1) == ZOK ? PEER_GRANTED : PEER_ERROR;
}

static void zk_close(void *conn)
{
	struct conn *c = conn;
	zookeeper_close(c->zh);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}

int main(int argc, char **argv)
{
	static const struct peer_ops ops = {
		.system = "zookeeper",
		.connect = zk_connect,
		.acquire = zk_acquire,
		.release = zk_release,
		.close = zk_close,
	};
	return peer_main(argc, argv, &ops);
}
