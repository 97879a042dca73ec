/*
 * peer-redis: the lock cycle against Redis through hiredis, the usual
 * single-instance Redis lock: SET key token NX PX ttl to acquire, and an
 * owner-checked release (a Lua script that deletes the key only if it
 * still holds our token, loaded once and called with EVALSHA). The
 * durability setting is the server's (appendfsync always / everysec);
 * Redis is one process, not a replicated group.
 *
 *   peer-redis --endpoints 127.0.0.1:16379 [common options, peer_driver.h]
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/peers/peer_driver.h"

/* Deletes KEYS[1] only when its value is ARGV[1] (our token). */
static const char release_script[] =
	"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
	"else return 0 end";

struct conn {
	redisContext *ctx;
	char sha[48];
	char token[48];
	uint32_t thread;
	uint64_t counter;
};

static void *redis_connect(const struct peer_args *a, uint32_t thread, char **keys,
			   uint32_t key_count)
{
	char host[64];
	const char *colon = strrchr(a->endpoints, ':');
	(void)keys;
	(void)key_count;

	if (colon == NULL || (size_t)(colon - a->endpoints) >= sizeof(host))
		return NULL;
	memcpy(host, a->endpoints, (size_t)(colon - a->endpoints));
	host[colon - a->endpoints] = '\0';
	struct timeval tv = { 5, 0 };
	struct conn *c = calloc(1, sizeof(*c));
	c->thread = thread;
	c->ctx = redisConnectWithTimeout(host, atoi(colon + 1), tv);
	if (c->ctx == NULL || c->ctx->err) {
		if (c->ctx)
			redisFree(c->ctx);
		free(c);
		return NULL;
	}
	redisSetTimeout(c->ctx, tv);
	redisReply *r = redisCommand(c->ctx, "SCRIPT LOAD %s", release_script);
	if (r == NULL || r->type != REDIS_REPLY_STRING || r->len >= (int)sizeof(c->sha)) {
		if (r)
			freeReplyObject(r);
		redisFree(c->ctx);
		free(c);
		return NULL;
	}
	memcpy(c->sha, r->str, (size_t)r->len);
	freeReplyObject(r);
	return c;
}

static enum peer_outcome redis_acquire(void *conn, const char *key, uint32_t ttl_ms)
{
	struct conn *c = conn;

	snprintf(c->token, sizeof(c->token), "%u-%llu", c->thread,
		 (unsigned long long)++c->counter);
	redisReply *r = redisCommand(c->ctx, "SET %s %s NX PX %u", key, c->token, ttl_ms);
	if (r == NULL)
		return PEER_ERROR;
	enum peer_outcome o = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0 ? PEER_GRANTED
			      : r->type == REDIS_REPLY_NIL				 ? PEER_BUSY
											 : PEER_ERROR;
	freeReplyObject(r);
	return o;
}

static enum peer_outcome redis_release(void *conn, const char *key)
{
	struct conn *c = conn;
	redisReply *r = redisCommand(c->ctx, "EVALSHA %s 1 %s %s", c->sha, key, c->token);

	if (r == NULL)
		return PEER_ERROR;
	enum peer_outcome o = r->type == REDIS_REPLY_INTEGER && r->integer == 1 ? PEER_GRANTED
										: PEER_ERROR;
	freeReplyObject(r);
	return o;
}

static void redis_close(void *conn)
{
	struct conn *c = conn;
	redisFree(c->ctx);
	free(c);
}

int main(int argc, char **argv)
{
	static const struct peer_ops ops = {
		.system = "redis",
		.connect = redis_connect,
		.acquire = redis_acquire,
		.release = redis_release,
		.close = redis_close,
	};
	return peer_main(argc, argv, &ops);
}
