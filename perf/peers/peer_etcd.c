/*
 * peer-etcd: the lock cycle against etcd v3 through its gRPC-gateway JSON
 * endpoint, over HTTP/1.1 keep-alive from C (one TCP connection per
 * thread, spread over the members like etcd's clients).
 *
 * Acquire is etcd's put-if-absent: a transaction that compares the key's
 * create revision with 0 and puts our token under this thread's lease (the
 * lease plays the lock's TTL; it is kept alive between cycles). Release is
 * owner-checked like the other systems': a transaction that deletes the
 * key only while it still holds our token. Both are linearizable writes
 * through Raft, fsynced by etcd's WAL (its default).
 *
 *   peer-etcd --endpoints 127.0.0.1:23791,127.0.0.1:23792,... [common options]
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/clock.h"
#include "perf/peers/peer_driver.h"

#define BUF_SIZE 16384

struct conn {
	int fd;
	char lease[32];
	uint32_t lease_ttl_s;
	uint64_t keepalive_due_ns;
	char token_b64[64];
	uint32_t thread;
	uint64_t counter;
	char buf[BUF_SIZE];
};

static void b64(const char *in, char *out)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(in), o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)(uint8_t)in[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)(uint8_t)in[i + 1] << 8;
		if (i + 2 < n)
			v |= (uint8_t)in[i + 2];
		out[o++] = tab[(v >> 18) & 63];
		out[o++] = tab[(v >> 12) & 63];
		out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? tab[v & 63] : '=';
	}
	out[o] = '\0';
}

static int read_some(struct conn *c, size_t *have)
{
	if (*have + 1 >= BUF_SIZE)
		return -1;
	ssize_t got = read(c->fd, c->buf + *have, BUF_SIZE - 1 - *have);
	if (got <= 0)
		return -1;
	*have += (size_t)got;
	c->buf[*have] = '\0';
	return 0;
}

/* POSTs `body` to `path` and leaves the response body, NUL-terminated, in
 * c->buf. Returns the HTTP status or -1. Handles Content-Length and
 * chunked bodies (small JSON either way). */
static int post(struct conn *c, const char *path, const char *body)
{
	char req[4096];
	int n = snprintf(req, sizeof(req),
			 "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\n\r\n%s",
			 path, strlen(body), body);
	if (n <= 0 || (size_t)n >= sizeof(req) || write(c->fd, req, (size_t)n) != n)
		return -1;
	size_t have = 0;
	char *end;
	c->buf[0] = '\0';
	while ((end = strstr(c->buf, "\r\n\r\n")) == NULL || have == 0) {
		if (read_some(c, &have) != 0)
			return -1;
	}
	int status = atoi(c->buf + 9);
	size_t head = (size_t)(end + 4 - c->buf);
	char *cl = strcasestr(c->buf, "Content-Length:");
	if (cl != NULL && cl < end) {
		size_t len = strtoul(cl + 15, NULL, 10);
		while (have < head + len)
			if (read_some(c, &have) != 0)
				return -1;
		memmove(c->buf, c->buf + head, len);
		c->buf[len] = '\0';
		return status;
	}
	/* Chunked: read until the terminating 0-size chunk, then strip sizes. */
	while (strstr(c->buf + head, "\r\n0\r\n\r\n") == NULL &&
	       strncmp(c->buf + head, "0\r\n\r\n", 5) != 0)
		if (read_some(c, &have) != 0)
			return -1;
	size_t out = 0;
	char *p = c->buf + head;
	while (true) {
		size_t size = strtoul(p, &end, 16);
		if (size == 0)
			break;
		p = strstr(end, "\r\n") + 2;
		memmove(c->buf + out, p, size);
		out += size;
		p += size + 2;
	}
	c->buf[out] = '\0';
	return status;
}

static int lease_grant(struct conn *c)
{
	char body[64];
	snprintf(body, sizeof(body), "{\"TTL\":%u}", c->lease_ttl_s);
	if (post(c, "/v3/lease/grant", body) != 200)
		return -1;
	char *id = strstr(c->buf, "\"ID\":\"");
	if (id == NULL)
		return -1;
	id += 6;
	size_t len = strcspn(id, "\"");
	if (len == 0 || len >= sizeof(c->lease))
		return -1;
	memcpy(c->lease, id, len);
	c->lease[len] = '\0';
	c->keepalive_due_ns = clock_monotonic_ns() + (uint64_t)c->lease_ttl_s * 1000000000u / 3u;
	return 0;
}

static void *etcd_connect(const struct peer_args *a, uint32_t thread, char **keys,
			  uint32_t key_count)
{
	char list[512], *save = NULL;
	uint32_t count = 0;
	char *eps[16];
	(void)keys;
	(void)key_count;

	snprintf(list, sizeof(list), "%s", a->endpoints);
	for (char *t = strtok_r(list, ",", &save); t != NULL && count < 16;
	     t = strtok_r(NULL, ",", &save))
		eps[count++] = t;
	if (count == 0)
		return NULL;
	char *ep = eps[thread % count];
	char *colon = strrchr(ep, ':');
	if (colon == NULL)
		return NULL;
	*colon = '\0';
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1)) };
	if (inet_pton(AF_INET, ep, &sa.sin_addr) != 1)
		return NULL;
	struct conn *c = calloc(1, sizeof(*c));
	c->thread = thread;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	struct timeval tv = { 5, 0 };
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	c->lease_ttl_s = a->ttl_ms / 1000u < 5u ? 5u : a->ttl_ms / 1000u;
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    lease_grant(c) != 0) {
		if (c->fd >= 0)
			close(c->fd);
		free(c);
		return NULL;
	}
	return c;
}

static enum peer_outcome etcd_acquire(void *conn, const char *key, uint32_t ttl_ms)
{
	struct conn *c = conn;
	char key_b64[256], token[48], body[1024];
	(void)ttl_ms; /* the lease carries the TTL */

	if (clock_monotonic_ns() >= c->keepalive_due_ns) {
		char ka[96];
		snprintf(ka, sizeof(ka), "{\"ID\":\"%s\"}", c->lease);
		if (post(c, "/v3/lease/keepalive", ka) != 200)
			return PEER_ERROR;
		c->keepalive_due_ns = clock_monotonic_ns() + (uint64_t)c->lease_ttl_s * 1000000000u / 3u;
	}
	b64(key, key_b64);
	snprintf(token, sizeof(token), "%u-%llu", c->thread, (unsigned long long)++c->counter);
	b64(token, c->token_b64);
	snprintf(body, sizeof(body),
		 "{\"compare\":[{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":\"CREATE\","
		 "\"create_revision\":\"0\"}],\"success\":[{\"request_put\":{\"key\":\"%s\","
		 "\"value\":\"%s\",\"lease\":\"%s\"}}]}",
		 key_b64, key_b64, c->token_b64, c->lease);
	if (post(c, "/v3/kv/txn", body) != 200)
		return PEER_ERROR;
	return strstr(c->buf, "\"succeeded\":true") != NULL ? PEER_GRANTED : PEER_BUSY;
}

static enum peer_outcome etcd_release(void *conn, const char *key)
{
	struct conn *c = conn;
	char key_b64[256], body[1024];

	b64(key, key_b64);
	snprintf(body, sizeof(body),
		 "{\"compare\":[{\"key\":\"%s\",\"result\":\"EQUAL\",\"target\":\"VALUE\","
		 "\"value\":\"%s\"}],\"success\":[{\"request_delete_range\":{\"key\":\"%s\"}}]}",
		 key_b64, c->token_b64, key_b64);
	if (post(c, "/v3/kv/txn", body) != 200)
		return PEER_ERROR;
	return strstr(c->buf, "\"succeeded\":true") != NULL ? PEER_GRANTED : PEER_ERROR;
}

static void etcd_close(void *conn)
{
	struct conn *c = conn;
	char body[96];

	snprintf(body, sizeof(body), "{\"ID\":\"%s\"}", c->lease);
	(void)post(c, "/v3/lease/revoke", body);
	close(c->fd);
	free(c);
}

int main(int argc, char **argv)
{
	static const struct peer_ops ops = {
		.system = "etcd",
		.connect = etcd_connect,
		.acquire = etcd_acquire,
		.release = etcd_release,
		.close = etcd_close,
	};
	return peer_main(argc, argv, &ops);
}
