/*
 * The admin thread: listeners, connections, the admin line protocol and the
 * HTTP endpoint (see control.h for both protocols).
 *
 * One thread multiplexes every connection with poll(): a request that waits
 * for the lcore parks its connection (no thread sleeps on it), so one slow
 * or timed-out lcore command never delays `health` or a metrics scrape on
 * another connection. The lcore signals a completion on done_fd (one
 * non-blocking eventfd write per admin request, operator rate); while any
 * request waits the loop also wakes every 10 ms to enforce timeouts.
 *
 * Every buffer is allocated in control_init (server_alloc): per connection
 * an input line, a result and an output buffer. A request line longer than
 * CONTROL_REQUEST_SIZE_MAX is answered ETOOBIG and the connection closed (we
 * cannot find the next request boundary reliably in an unbounded line),
 * after draining what the client still sends.
 */
#include "control/control_impl.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/clock.h"
#include "common/log.h"
#include "control/admin_auth.h"
#include "hasp/errors.h"

LOG_TOPIC_DEFINE(control);

#define HTTP_HEADER_ROOM 512u

struct control_conn {
	int fd;                  /* -1: free */
	bool http;
	bool close_after;        /* close once the output is sent */
	bool waiting;            /* a request waits for the lcore */
	bool draining;           /* reply sent, write side shut: discard input until EOF */
	bool tcp;                /* privileged commands only as sealed lines */
	uint8_t nonce[ADMIN_AUTH_NONCE_SIZE]; /* this connection's challenge */
	uint64_t auth_seq;       /* sealed requests accepted on it */
	uint64_t drained;
	char in[CONTROL_REQUEST_SIZE_MAX + 2];
	size_t in_len;
	struct control_request req;
	struct control_call call;
	char *result;
	char *out;
	size_t out_len, out_off;
	int attach_fd;
	uint64_t attach_left;
};

static size_t out_size(const struct control *c)
{
	return c->cfg.reply_size_max + HTTP_HEADER_ROOM + 1024u;
}

int server_alloc(struct control *c)
{
	c->conns = hasp_calloc(c->cfg.clients_max, sizeof(*c->conns));
	if (c->conns == NULL)
		return -HASP_ENOMEM;
	for (uint32_t i = 0; i < c->cfg.clients_max; i++) {
		struct control_conn *k = &c->conns[i];
		k->fd = -1;
		k->attach_fd = -1;
		k->result = hasp_alloc(c->cfg.reply_size_max);
		k->out = hasp_alloc(out_size(c));
		if (k->result == NULL || k->out == NULL)
			return -HASP_ENOMEM;
	}
	return 0;
}

void server_free(struct control *c)
{
	if (c->conns == NULL)
		return;
	for (uint32_t i = 0; i < c->cfg.clients_max; i++) {
		hasp_free(c->conns[i].result);
		hasp_free(c->conns[i].out);
	}
	hasp_free(c->conns);
	c->conns = NULL;
}

/* ---- connections ---- */

static void conn_close(struct control *c, struct control_conn *k)
{
	if (k->waiting) {
		/* Let the slot time out normally so the lcore's side stays
		 * consistent; only the reply is lost. */
		while (!control_call_poll(c, &k->call, UINT64_MAX))
			;
		k->waiting = false;
	}
	if (k->attach_fd >= 0)
		close(k->attach_fd);
	close(k->fd);
	k->fd = -1;
	k->attach_fd = -1;
}

static void conn_reply(struct control *c, struct control_conn *k)
{
	int64_t attach = -1;
	if (k->req.error == 0 && k->req.attach_path[0] != '\0') {
		int fd = open(k->req.attach_path, O_RDONLY | O_CLOEXEC);
		struct stat sb;
		if (fd >= 0 && fstat(fd, &sb) == 0) {
			k->attach_fd = fd;
			k->attach_left = (uint64_t)sb.st_size;
			attach = sb.st_size;
		} else {
			if (fd >= 0)
				close(fd);
			control_request_fail(&k->req, -HASP_EIO, "cannot read %s: %s", k->req.attach_path,
					     strerror(errno));
		}
	}
	k->out_len = control_reply_render(&k->req, attach, k->out, out_size(c));
	HASP_ASSERT(k->out_len > 0); /* out has room for any result plus the envelope */
	k->out_off = 0;
	metric_inc(c->counters.requests);
	if (k->req.error != 0)
		metric_inc(c->counters.errors);
}

static void http_respond(struct control_conn *k, int code, const char *ctype, const char *body,
			 size_t body_len, size_t cap, bool head)
{
	const char *text = code == 200 ? "OK" : code == 404 ? "Not Found" : code == 405 ?
		"Method Not Allowed" : code == 500 ? "Internal Server Error" : code == 503 ?
		"Service Unavailable" : "Bad Request";
	int n = snprintf(k->out, cap,
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 code, text, ctype, body_len);
	HASP_ASSERT(n > 0 && (size_t)n + body_len <= cap);
	if (!head)
		memcpy(k->out + n, body, body_len);
	k->out_len = (size_t)n + (head ? 0 : body_len);
	k->out_off = 0;
	k->close_after = true;
}

static void http_request(struct control *c, struct control_conn *k)
{
	char method[8] = "", path[256] = "";
	metric_inc(c->counters.http);
	if (sscanf(k->in, "%7s %255s", method, path) != 2) {
		http_respond(k, 400, "text/plain", "bad request\n", 12, out_size(c), false);
		return;
	}
	bool head = strcmp(method, "HEAD") == 0;
	if (!head && strcmp(method, "GET") != 0) {
		http_respond(k, 405, "text/plain", "only GET\n", 9, out_size(c), false);
		return;
	}
	char *q = strchr(path, '?');
	if (q != NULL)
		*q = '\0';
	if (strcmp(path, "/metrics") == 0) {
		process_metrics_update(&c->process);
		size_t n = metrics_expose(&c->metrics, k->result, c->cfg.reply_size_max);
		if (n == 0) {
			http_respond(k, 500, "text/plain", "metrics do not fit\n", 19, out_size(c), head);
			return;
		}
		http_respond(k, 200, "text/plain; version=0.0.4; charset=utf-8", k->result, n,
			     out_size(c), head);
	} else if (strcmp(path, "/health") == 0) {
		char reason[64], body[80];
		bool ok = control_health(c, clock_monotonic_ns(), reason, sizeof(reason));
		int n = snprintf(body, sizeof(body), "%s\n", reason);
		http_respond(k, ok ? 200 : 503, "text/plain", body, (size_t)n, out_size(c), head);
	} else if (strcmp(path, "/status") == 0) {
		struct control_call call;
		bool done = control_call_start(c, &call, "status", 6, &k->req, k->result,
					       c->cfg.reply_size_max, clock_monotonic_ns(), true);
		HASP_ASSERT(done); /* an admin-thread command */
		size_t n = control_reply_render(&k->req, -1, k->out + HTTP_HEADER_ROOM,
						out_size(c) - HTTP_HEADER_ROOM);
		/* Render into the tail first, then move it behind the header. */
		char *body = k->out + HTTP_HEADER_ROOM;
		char hdr[HTTP_HEADER_ROOM];
		int h = snprintf(hdr, sizeof(hdr),
				 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				 "Content-Length: %zu\r\nConnection: close\r\n\r\n", n);
		memmove(k->out + h, body, head ? 0 : n);
		memcpy(k->out, hdr, (size_t)h);
		k->out_len = (size_t)h + (head ? 0 : n);
		k->out_off = 0;
		k->close_after = true;
	} else {
		http_respond(k, 404, "text/plain", "not found (try /metrics, /health, /status)\n", 43,
			     out_size(c), head);
	}
}

/* A request that is answered here, not by a command: an error (EPERM for
 * a credential) or the connection's nonce. */
static void conn_answer(struct control *c, struct control_conn *k, const char *name, int error,
			const char *message)
{
	control_request_local(&k->req, k->result, c->cfg.reply_size_max, name);
	if (error != 0) {
		control_request_fail(&k->req, error, "%s", message);
	} else {
		char hex[ADMIN_AUTH_NONCE_HEX_SIZE];
		admin_auth_nonce_hex(k->nonce, hex);
		json_object_begin(&k->req.out);
		json_key(&k->req.out, "nonce");
		json_string(&k->req.out, hex);
		json_key(&k->req.out, "seq");
		json_u64(&k->req.out, k->auth_seq);
		json_object_end(&k->req.out);
		size_t n = json_finish(&k->req.out);
		HASP_ASSERT(n > 0); /* a nonce fits any result buffer */
	}
	conn_reply(c, k);
}

/* Starts the request line in[0..line_len) (with its newline): `auth.nonce`
 * and sealed lines (control/admin_auth.h) here, the rest through the
 * registry, privileged commands only from the Unix socket or sealed. */
static void conn_start_line(struct control *c, struct control_conn *k, size_t line_len)
{
	const char *line = k->in;
	size_t len = line_len - 1;
	bool trusted = !k->tcp;
	bool done = true;

	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len == 10 && memcmp(line, "auth.nonce", 10) == 0) {
		conn_answer(c, k, "auth.nonce", 0, NULL);
	} else if (admin_auth_is_sealed(line, len)) {
		const char *inner;
		size_t inner_len;
		int rc = c->cfg.admin_key_set ? admin_auth_open(&c->cfg.admin_key, k->nonce,
								k->auth_seq + 1, line, len, &inner,
								&inner_len) : -HASP_ENOTSUP;
		if (rc == 0) {
			k->auth_seq++;
			/* The inner line moves to the front, with its newline. */
			memmove(k->in, inner, inner_len);
			k->in[inner_len] = '\n';
			done = control_call_start(c, &k->call, k->in, inner_len + 1, &k->req, k->result,
						  c->cfg.reply_size_max, clock_monotonic_ns(), true);
			if (done)
				conn_reply(c, k);
		} else if (rc == -HASP_ENOTSUP) {
			metric_inc(c->counters.refused_not_configured);
			conn_answer(c, k, "auth", -HASP_EPERM,
				    "this node has no admin_key_file: privileged commands only on its "
				    "Unix socket");
		} else {
			/* Wrong key, replayed or reordered seq, or not the form:
			 * the connection ends (no guessing on it). */
			metric_inc(c->counters.refused_bad_credential);
			conn_answer(c, k, "auth", -HASP_EPERM,
				    "bad admin credential (wrong key, or a request out of sequence: "
				    "ask auth.nonce, then seal with seq 1, 2, ...)");
			k->close_after = true;
		}
	} else {
		done = control_call_start(c, &k->call, k->in, line_len, &k->req, k->result,
					  c->cfg.reply_size_max, clock_monotonic_ns(), trusted);
		if (done)
			conn_reply(c, k);
	}
	memmove(k->in, k->in + line_len, k->in_len - line_len);
	k->in_len -= line_len;
	if (!done)
		k->waiting = true;
}

/* Handles what is buffered: starts at most one request (replies go out in
 * order, one at a time). */
static void conn_process(struct control *c, struct control_conn *k)
{
	if (k->waiting || k->out_len > k->out_off || k->attach_fd >= 0 || k->close_after)
		return;
	if (k->in_len == 0)
		return;
	k->in[k->in_len] = '\0';
	if (!k->http && (strncmp(k->in, "GET ", 4) == 0 || strncmp(k->in, "HEAD ", 5) == 0 ||
			 strncmp(k->in, "POST ", 5) == 0 || strncmp(k->in, "PUT ", 4) == 0))
		k->http = true;
	if (k->http) {
		if (strstr(k->in, "\r\n\r\n") == NULL && strstr(k->in, "\n\n") == NULL) {
			if (k->in_len >= CONTROL_REQUEST_SIZE_MAX) {
				metric_inc(c->counters.rejected);
				http_respond(k, 400, "text/plain", "request too large\n", 18, out_size(c),
					     false);
			}
			return;
		}
		http_request(c, k);
		return;
	}
	char *nl = memchr(k->in, '\n', k->in_len);
	if (nl == NULL) {
		if (k->in_len > CONTROL_REQUEST_SIZE_MAX) {
			metric_inc(c->counters.rejected);
			request_too_big:
			memset(&k->req.name, 0, sizeof(k->req.name));
			k->req.name = "";
			k->req.error = 0;
			control_request_fail(&k->req, -HASP_ETOOBIG, "request longer than %u bytes",
					     CONTROL_REQUEST_SIZE_MAX);
			k->req.out.len = 0;
			conn_reply(c, k);
			k->close_after = true;
			k->in_len = 0;
		}
		return;
	}
	size_t line_len = (size_t)(nl - k->in) + 1;
	if (line_len - 1 > CONTROL_REQUEST_SIZE_MAX) {
		metric_inc(c->counters.rejected);
		goto request_too_big;
	}
	conn_start_line(c, k, line_len);
}

static void conn_read(struct control *c, struct control_conn *k)
{
	if (k->draining) {
		char sink[4096];
		ssize_t d = recv(k->fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (d > 0)
			k->drained += (uint64_t)d;
		if (d == 0 || (d < 0 && errno != EAGAIN && errno != EINTR) || k->drained > (1u << 20))
			conn_close(c, k);
		return;
	}
	size_t room = sizeof(k->in) - 1 - k->in_len;
	if (room == 0) {
		conn_process(c, k);
		return;
	}
	ssize_t n = recv(k->fd, k->in + k->in_len, room, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		conn_close(c, k);
		return;
	}
	if (n > 0)
		k->in_len += (size_t)n;
	conn_process(c, k);
}

static void conn_write(struct control *c, struct control_conn *k)
{
	if (k->out_off < k->out_len) {
		ssize_t n = send(k->fd, k->out + k->out_off, k->out_len - k->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				conn_close(c, k);
			return;
		}
		k->out_off += (size_t)n;
		if (k->out_off < k->out_len)
			return;
	}
	if (k->attach_fd >= 0) {
		if (k->attach_left > 0) {
			ssize_t n = sendfile(k->fd, k->attach_fd, NULL, k->attach_left);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			if (n <= 0) {
				conn_close(c, k); /* the client sees a short attachment */
				return;
			}
			k->attach_left -= (uint64_t)n;
			if (k->attach_left > 0)
				return;
		}
		close(k->attach_fd);
		k->attach_fd = -1;
	}
	k->out_len = k->out_off = 0;
	if (k->close_after && !k->http) {
		/* Closing with unread input would reset the connection and
		 * could destroy our reply before the client reads it: shut the
		 * write side and discard what still arrives until EOF. */
		shutdown(k->fd, SHUT_WR);
		k->draining = true;
		k->drained = 0;
		return;
	}
	if (k->close_after) {
		conn_close(c, k);
		return;
	}
	conn_process(c, k); /* a pipelined request */
}

/* A fresh challenge for a new connection. */
static void conn_auth_reset(struct control_conn *k, bool tcp)
{
	struct auth_key nonce;

	static_assert(sizeof(nonce.bytes) == ADMIN_AUTH_NONCE_SIZE, "a nonce is a key's size");
	auth_key_generate(&nonce);
	memcpy(k->nonce, nonce.bytes, sizeof(k->nonce));
	auth_key_wipe(&nonce);
	k->tcp = tcp;
	k->auth_seq = 0;
}

static void accept_one(struct control *c, int lfd, bool tcp)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	for (uint32_t i = 0; i < c->cfg.clients_max; i++) {
		struct control_conn *k = &c->conns[i];
		if (k->fd >= 0)
			continue;
		k->fd = fd;
		k->http = k->close_after = k->waiting = k->draining = false;
		k->in_len = k->out_len = k->out_off = 0;
		k->attach_fd = -1;
		conn_auth_reset(k, tcp);
		return;
	}
	/* Full: a designed state with a reply and a counter. */
	static const char busy[] =
		"{\"ok\":false,\"command\":\"\",\"error\":\"EBUSY\",\"message\":\"too many admin connections\"}\n";
	(void)send(fd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	close(fd);
	metric_inc(c->counters.rejected);
}

static void *server_main(void *arg)
{
	struct control *c = arg;
	uint32_t n_fds = 2 + 2 + c->cfg.clients_max;
	struct pollfd fds[n_fds];
	for (;;) {
		uint32_t n = 0;
		bool any_waiting = false;
		fds[n++] = (struct pollfd){ .fd = c->stop_fd, .events = POLLIN };
		fds[n++] = (struct pollfd){ .fd = c->done_fd, .events = POLLIN };
		for (int i = 0; i < 2; i++)
			fds[n++] = (struct pollfd){ .fd = c->listen_fds[i], .events = POLLIN };
		for (uint32_t i = 0; i < c->cfg.clients_max; i++) {
			struct control_conn *k = &c->conns[i];
			short ev = 0;
			if (k->fd >= 0) {
				bool sending = k->out_off < k->out_len || k->attach_fd >= 0;
				ev = sending ? POLLOUT : k->waiting ? 0 : POLLIN;
				any_waiting |= k->waiting;
			}
			fds[n++] = (struct pollfd){ .fd = k->fd, .events = ev };
		}
		/* The lcore signals completions on done_fd; the short timeout
		 * while waiting only bounds a lost wake-up and the timeouts. */
		int rc = poll(fds, n, any_waiting ? 10 : 500);
		if (rc < 0 && errno != EINTR) {
			LOG_ERROR(control, "poll failed errno=%d", errno);
			break;
		}
		if (fds[0].revents & POLLIN)
			break;
		if (fds[1].revents & POLLIN) {
			uint64_t count;
			if (read(c->done_fd, &count, sizeof(count)) < 0) {
				/* EAGAIN: drained already */
			}
		}
		for (int i = 0; i < 2; i++)
			if (fds[2 + i].revents & POLLIN)
				accept_one(c, c->listen_fds[i], i == 1);
		uint64_t now = clock_monotonic_ns();
		for (uint32_t i = 0; i < c->cfg.clients_max; i++) {
			struct control_conn *k = &c->conns[i];
			short re = fds[4 + i].revents;
			if (k->fd < 0 || fds[4 + i].fd != k->fd)
				continue;
			if (k->waiting && control_call_poll(c, &k->call, now)) {
				k->waiting = false;
				conn_reply(c, k);
			}
			if (re & (POLLERR | POLLNVAL)) {
				conn_close(c, k);
				continue;
			}
			if (re & POLLOUT)
				conn_write(c, k);
			else if (re & (POLLIN | POLLHUP))
				conn_read(c, k);
			if (k->fd >= 0 && k->out_off < k->out_len && !(re & POLLOUT))
				conn_write(c, k); /* try at once; poll again if it blocks */
		}
	}
	for (uint32_t i = 0; i < c->cfg.clients_max; i++)
		if (c->conns[i].fd >= 0)
			conn_close(c, &c->conns[i]);
	return NULL;
}

/* ---- listeners ---- */

static int listen_unix(const char *path, int *out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return -HASP_EINVAL;
	strcpy(sa.sun_path, path);
	/* A socket file left by a crashed node would make bind fail; replace
	 * it, but never a file of another kind. */
	struct stat sb;
	if (lstat(path, &sb) == 0 && S_ISSOCK(sb.st_mode))
		unlink(path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -HASP_ESYS;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0600) != 0 ||
	    listen(fd, 64) != 0) {
		LOG_ERROR(control, "admin socket path=%s errno=%d", path, errno);
		close(fd);
		return -HASP_ESYS;
	}
	*out = fd;
	return 0;
}

static int listen_tcp(const char *addr, int *out)
{
	char host[64];
	const char *colon = strrchr(addr, ':');
	if (colon == NULL || (size_t)(colon - addr) >= sizeof(host))
		return -HASP_EINVAL;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (*end != '\0' || port > 65535 || inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -HASP_EINVAL;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -HASP_ESYS;
	int one = 1;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 64) != 0) {
		LOG_ERROR(control, "admin tcp addr=%s errno=%d", addr, errno);
		close(fd);
		return -HASP_ESYS;
	}
	*out = fd;
	return 0;
}

int server_start(struct control *c)
{
	int rc = 0;
	c->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->stop_fd < 0)
		return -HASP_ESYS;
	if (c->cfg.unix_path[0] != '\0')
		rc = listen_unix(c->cfg.unix_path, &c->listen_fds[0]);
	if (rc == 0 && c->cfg.tcp_addr[0] != '\0')
		rc = listen_tcp(c->cfg.tcp_addr, &c->listen_fds[1]);
	if (rc == 0 && pthread_create(&c->thread, NULL, server_main, c) != 0)
		rc = -HASP_ESYS;
	if (rc != 0) {
		for (int i = 0; i < 2; i++)
			if (c->listen_fds[i] >= 0)
				close(c->listen_fds[i]);
		if (c->listen_fds[0] >= 0)
			unlink(c->cfg.unix_path);
		c->listen_fds[0] = c->listen_fds[1] = -1;
		close(c->stop_fd);
		c->stop_fd = -1;
	}
	return rc;
}

void server_stop(struct control *c)
{
	uint64_t one = 1;
	ssize_t n = write(c->stop_fd, &one, sizeof(one));
	HASP_ASSERT(n == (ssize_t)sizeof(one));
	pthread_join(c->thread, NULL);
	for (int i = 0; i < 2; i++)
		if (c->listen_fds[i] >= 0)
			close(c->listen_fds[i]);
	if (c->listen_fds[0] >= 0)
		unlink(c->cfg.unix_path);
	c->listen_fds[0] = c->listen_fds[1] = -1;
	close(c->stop_fd);
	c->stop_fd = -1;
}

/* ---- for the fuzzer ---- */

void server_feed(struct control *c, const char *data, size_t len, bool tcp, server_sink_fn *sink,
		 void *arg)
{
	HASP_ASSERT(!c->started && c->cfg.clients_max >= 1);
	struct control_conn *k = &c->conns[0];
	k->fd = -1;
	k->http = k->close_after = k->waiting = k->draining = false;
	k->in_len = k->out_len = k->out_off = 0;
	k->attach_fd = -1;
	conn_auth_reset(k, tcp);
	size_t off = 0;
	for (;;) {
		/* What conn_read does after recv, then conn_write after a send. */
		size_t room = sizeof(k->in) - 1 - k->in_len;
		size_t n = len - off < room ? len - off : room;
		memcpy(k->in + k->in_len, data + off, n);
		k->in_len += n;
		off += n;
		conn_process(c, k);
		if (k->out_len > k->out_off) {
			sink(arg, k->out, k->out_len, k->http);
			k->out_len = k->out_off = 0;
			if (k->attach_fd >= 0) {
				close(k->attach_fd);
				k->attach_fd = -1;
			}
			if (k->close_after)
				return;
			continue;
		}
		/* Waiting for the lcore (none here) or for more bytes. A full
		 * input buffer with no reply would make the server's poll loop
		 * spin on POLLIN: never. */
		HASP_ASSERT(k->waiting || k->in_len < sizeof(k->in) - 1);
		if (k->waiting || off == len)
			return;
	}
}
