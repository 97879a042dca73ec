/*
 * Blocking client of the admin protocol (see admin_client.h). Timeouts are
 * per call, with poll() before every read and write, so a node that stops
 * answering costs the operator timeout_ms, never a hang.
 */
#include "control/admin_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/clock.h"
#include "common/resolve.h"
#include "hasp/errors.h"

static int wait_fd(int fd, short ev, uint64_t deadline_ms)
{
	for (;;) {
		uint64_t now = clock_monotonic_ms();
		if (now >= deadline_ms)
			return -HASP_ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = ev };
		int rc = poll(&p, 1, (int)(deadline_ms - now));
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -HASP_ESYS;
	}
}

static int connect_target(const char *target, uint32_t timeout_ms, int *out)
{
	int fd;
	int rc;
	if (strncmp(target, "unix:", 5) == 0 || strchr(target, '/') != NULL) {
		const char *path = strncmp(target, "unix:", 5) == 0 ? target + 5 : target;
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		if (strlen(path) >= sizeof(sa.sun_path))
			return -HASP_EINVAL;
		strcpy(sa.sun_path, path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -HASP_ESYS;
		rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	} else {
		/* host:port, host an IPv4 address or a name (common/resolve.h). */
		struct sockaddr_in sa;
		char why[320];
		rc = resolve_hostport(target, &sa, why, sizeof(why));
		if (rc == RESOLVE_UNKNOWN)
			return -HASP_ENOENT; /* "not found" */
		if (rc == RESOLVE_UNAVAILABLE)
			return -HASP_EAGAIN; /* the resolver: "try again" */
		if (rc != RESOLVE_OK)
			return -HASP_EINVAL;
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return -HASP_ESYS;
		rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		if (rc != 0 && errno == EINPROGRESS) {
			int err = 0;
			socklen_t len = sizeof(err);
			rc = wait_fd(fd, POLLOUT, clock_monotonic_ms() + timeout_ms);
			if (rc == 0 && (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) {
				errno = err; /* the caller may say why (refused, unreachable) */
				rc = -1;
			}
			if (rc == -HASP_ETIMEDOUT) {
				close(fd);
				return rc;
			}
		}
	}
	if (rc != 0) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -HASP_ESYS;
	}
	*out = fd;
	return 0;
}

int admin_client_open(struct admin_client *a, const char *target, uint32_t timeout_ms)
{
	HASP_ASSERT(target != NULL);
	HASP_ASSERT(timeout_ms > 0);
	memset(a, 0, sizeof(*a));
	a->fd = -1;
	a->timeout_ms = timeout_ms;
	a->buf = hasp_alloc(ADMIN_CLIENT_REPLY_MAX + 1);
	if (a->buf == NULL)
		return -HASP_ENOMEM;
	int rc = connect_target(target, timeout_ms, &a->fd);
	if (rc != 0) {
		hasp_free(a->buf);
		a->buf = NULL;
	}
	return rc;
}

void admin_client_set_key(struct admin_client *a, const struct auth_key *key)
{
	a->key = *key;
	a->keyed = true;
	a->have_nonce = false;
	a->seq = 0;
}

void admin_client_close(struct admin_client *a)
{
	auth_key_wipe(&a->key);
	if (a->fd >= 0)
		close(a->fd);
	hasp_free(a->buf);
	a->fd = -1;
	a->buf = NULL;
}

static int send_all(int fd, const char *p, size_t n, uint64_t deadline_ms)
{
	while (n > 0) {
		int rc = wait_fd(fd, POLLOUT, deadline_ms);
		if (rc != 0)
			return rc;
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (w <= 0)
			return -HASP_ESYS;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads more bytes into buf; 0, or an error (ESYS on EOF). */
static int fill(struct admin_client *a, uint64_t deadline_ms)
{
	if (a->len == ADMIN_CLIENT_REPLY_MAX)
		return -HASP_ETOOBIG;
	int rc = wait_fd(a->fd, POLLIN, deadline_ms);
	if (rc != 0)
		return rc;
	ssize_t r = recv(a->fd, a->buf + a->len, ADMIN_CLIENT_REPLY_MAX - a->len, MSG_DONTWAIT);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (r <= 0)
		return -HASP_ESYS;
	a->len += (size_t)r;
	return 0;
}

static void drop_consumed(struct admin_client *a)
{
	memmove(a->buf, a->buf + a->consumed, a->len - a->consumed);
	a->len -= a->consumed;
	a->consumed = 0;
}

static int call_plain(struct admin_client *a, const char *line, const char **reply, size_t *reply_len)
{
	uint64_t deadline = clock_monotonic_ms() + a->timeout_ms;
	drop_consumed(a);
	int rc = send_all(a->fd, line, strlen(line), deadline);
	if (rc == 0)
		rc = send_all(a->fd, "\n", 1, deadline);
	if (rc != 0)
		return rc;
	for (;;) {
		char *nl = memchr(a->buf, '\n', a->len);
		if (nl != NULL) {
			*nl = '\0';
			*reply = a->buf;
			*reply_len = (size_t)(nl - a->buf);
			a->consumed = *reply_len + 1;
			return 0;
		}
		rc = fill(a, deadline);
		if (rc != 0)
			return rc;
	}
}

/* Asks the connection's nonce: {"ok":true,...,"result":{"nonce":"<hex>",...}}. */
static int nonce_ask(struct admin_client *a, const char **reply, size_t *reply_len)
{
	int rc = call_plain(a, "auth.nonce", reply, reply_len);
	if (rc != 0)
		return rc;
	const char *p = strstr(*reply, "\"nonce\":\"");
	if (strncmp(*reply, "{\"ok\":true", 10) != 0 || p == NULL ||
	    !admin_auth_nonce_parse(p + 9, 2 * ADMIN_AUTH_NONCE_SIZE, a->nonce))
		return -HASP_ECORRUPT;
	a->have_nonce = true;
	a->seq = 0;
	return 0;
}

int admin_client_call(struct admin_client *a, const char *line, const char **reply, size_t *reply_len)
{
	if (!a->keyed)
		return call_plain(a, line, reply, reply_len);
	if (!a->have_nonce) {
		int rc = nonce_ask(a, reply, reply_len);
		if (rc != 0)
			return rc;
	}
	if (admin_auth_seal(&a->key, a->nonce, a->seq + 1, line, a->sealed, sizeof(a->sealed)) == 0)
		return -HASP_ETOOBIG;
	a->seq++;
	return call_plain(a, a->sealed, reply, reply_len);
}

int admin_client_attachment(struct admin_client *a, int fd, uint64_t size)
{
	uint64_t deadline = clock_monotonic_ms() + a->timeout_ms;
	drop_consumed(a);
	while (size > 0) {
		if (a->len == 0) {
			int rc = fill(a, deadline);
			if (rc != 0)
				return rc;
			deadline = clock_monotonic_ms() + a->timeout_ms; /* progress resets it */
			continue;
		}
		size_t n = a->len < size ? a->len : (size_t)size;
		for (size_t off = 0; off < n;) {
			ssize_t w = write(fd, a->buf + off, n - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return -HASP_EIO;
			off += (size_t)w;
		}
		a->consumed = n;
		drop_consumed(a);
		size -= n;
	}
	return 0;
}

int admin_client_http_get(const char *target, const char *path, uint32_t timeout_ms, int *status,
			  char *body, size_t body_size)
{
	struct admin_client a;
	char req[512];
	int rc = admin_client_open(&a, target, timeout_ms);
	if (rc != 0)
		return rc;
	uint64_t deadline = clock_monotonic_ms() + timeout_ms;
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: hasp\r\nConnection: close\r\n\r\n", path);
	rc = send_all(a.fd, req, strlen(req), deadline);
	while (rc == 0)
		rc = fill(&a, deadline);
	/* EOF (ESYS) ends the response. */
	if (rc != -HASP_ESYS) {
		admin_client_close(&a);
		return rc;
	}
	a.buf[a.len] = '\0';
	rc = -HASP_ECORRUPT;
	const char *hdr_end = strstr(a.buf, "\r\n\r\n");
	if (hdr_end != NULL && sscanf(a.buf, "HTTP/1.1 %d", status) == 1) {
		snprintf(body, body_size, "%s", hdr_end + 4);
		rc = 0;
	}
	admin_client_close(&a);
	return rc;
}
