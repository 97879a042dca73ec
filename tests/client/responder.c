/*
 * The scripted UDP responder (tests/client/responder.h): sockets on
 * 127.0.0.1 only, one thread, a bounded log, a script callback per test.
 */
#include "tests/client/responder.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"

#define TICK_MS 5

static void log_rx(struct responder *r, int node, const uint8_t *data, size_t size,
		   const struct hasp_wire_msg *m, int rc)
{
	struct responder_rx *x;

	r->rx_total++;
	if (r->log_count == RESPONDER_LOG_MAX)
		return;
	x = &r->log[r->log_count++];
	x->node = node;
	x->at_ns = clock_monotonic_ns();
	x->decode_rc = rc;
	x->hdr = m->hdr;
	x->nonce = rc == 0 && m->hdr.opcode == HASP_OP_SESSION_OPEN
			   ? m->body.session_open.client_nonce
			   : 0;
	x->size = size < sizeof(x->data) ? size : sizeof(x->data);
	memcpy(x->data, data, x->size);
}

static void *responder_main(void *arg)
{
	struct responder *r = arg;
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX + 1];

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd pfds[RESPONDER_NODES_MAX];
		int n;

		for (int i = 0; i < r->node_count; i++) {
			pfds[i].fd = r->fds[i];
			pfds[i].events = POLLIN;
			pfds[i].revents = 0;
		}
		n = poll(pfds, (nfds_t)r->node_count, TICK_MS);
		for (int i = 0; n > 0 && i < r->node_count; i++) {
			if (!(pfds[i].revents & POLLIN))
				continue;
			struct sockaddr_in from;
			socklen_t from_size = sizeof(from);
			ssize_t got = recvfrom(r->fds[i], buf, sizeof(buf), MSG_DONTWAIT,
					       (struct sockaddr *)&from, &from_size);
			if (got < 0)
				continue;
			struct hasp_wire_msg m;
			int rc = hasp_wire_decode_request(buf, (size_t)got, &m);
			pthread_mutex_lock(&r->mu);
			log_rx(r, i, buf, (size_t)got, &m, rc);
			if (rc == 0) {
				r->client = from;
				r->client_known = true;
			}
			pthread_mutex_unlock(&r->mu);
			if (rc == 0)
				r->fn(r, i, &m, &from, r->arg);
		}
		r->fn(r, -1, NULL, NULL, r->arg);
	}
	return NULL;
}

/* The responder of the running test, for responder_teardown. */
static struct responder *responder_live;

int responder_start(struct responder *r, int node_count, responder_fn *fn, void *arg)
{
	memset(r, 0, sizeof(*r));
	if (node_count < 1 || node_count > RESPONDER_NODES_MAX)
		return -1;
	r->log = calloc(RESPONDER_LOG_MAX, sizeof(*r->log));
	if (r->log == NULL)
		return -1;
	r->node_count = node_count;
	r->fn = fn;
	r->arg = arg;
	r->next_session_id = 0x5e55000000000001ull;
	pthread_mutex_init(&r->mu, NULL);
	for (int i = 0; i < node_count; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		socklen_t size = sizeof(a);

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		r->fds[i] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (r->fds[i] < 0 || bind(r->fds[i], (struct sockaddr *)&a, sizeof(a)) != 0 ||
		    getsockname(r->fds[i], (struct sockaddr *)&a, &size) != 0)
			return -1;
		r->ports[i] = ntohs(a.sin_port);
	}
	if (pthread_create(&r->thread, NULL, responder_main, r) != 0)
		return -1;
	r->running = true;
	responder_live = r;
	return 0;
}

int responder_teardown(void **state)
{
	(void)state;
	if (responder_live != NULL && responder_live->running)
		responder_stop(responder_live);
	responder_live = NULL;
	return 0;
}

void responder_stop(struct responder *r)
{
	if (!r->running)
		return;
	r->running = false;
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	pthread_join(r->thread, NULL);
	for (int i = 0; i < r->node_count; i++)
		close(r->fds[i]);
	pthread_mutex_destroy(&r->mu);
	free(r->log);
	r->log = NULL;
}

void responder_cluster(const struct responder *r, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int i = 0; i < r->node_count; i++)
		used += (size_t)snprintf(buf + used, size - used, "%s127.0.0.1:%u", i ? "," : "",
					 r->ports[i]);
}

void responder_lock(struct responder *r)
{
	pthread_mutex_lock(&r->mu);
}

void responder_unlock(struct responder *r)
{
	pthread_mutex_unlock(&r->mu);
}

uint32_t responder_count(struct responder *r, uint8_t opcode, int node)
{
	uint32_t count = 0;

	pthread_mutex_lock(&r->mu);
	for (uint32_t i = 0; i < r->log_count; i++) {
		const struct responder_rx *x = &r->log[i];
		if ((opcode == 0 || (x->decode_rc == 0 && x->hdr.opcode == opcode)) &&
		    (node < 0 || x->node == node))
			count++;
	}
	pthread_mutex_unlock(&r->mu);
	return count;
}

bool responder_find(struct responder *r, uint8_t opcode, uint32_t index, struct responder_rx *out)
{
	bool found = false;

	pthread_mutex_lock(&r->mu);
	for (uint32_t i = 0; i < r->log_count && !found; i++) {
		const struct responder_rx *x = &r->log[i];
		if (x->decode_rc == 0 && x->hdr.opcode == opcode && index-- == 0) {
			*out = *x;
			found = true;
		}
	}
	pthread_mutex_unlock(&r->mu);
	return found;
}

void responder_send_raw(struct responder *r, int node, const struct sockaddr_in *to,
			const void *data, size_t size)
{
	/* Only ever to the loopback client that wrote to us. */
	if (to->sin_addr.s_addr != htonl(INADDR_LOOPBACK))
		abort();
	(void)sendto(r->fds[node], data, size, 0, (const struct sockaddr *)to, sizeof(*to));
}

void responder_send(struct responder *r, int node, const struct sockaddr_in *to,
		    const struct hasp_wire_msg *m)
{
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	int size = hasp_wire_encode(m, buf, sizeof(buf));

	if (size < 0) {
		fprintf(stderr, "responder: encode failed: %d\n", size);
		abort();
	}
	responder_send_raw(r, node, to, buf, (size_t)size);
}

void responder_reply_init(struct hasp_wire_msg *reply, const struct hasp_wire_msg *req,
			  enum hasp_status status)
{
	hasp_wire_reply_init(reply, &req->hdr, status);
}

bool responder_answer_session(struct responder *r, int node, const struct hasp_wire_msg *req,
			      const struct sockaddr_in *from)
{
	struct hasp_wire_msg rep;

	switch (req->hdr.opcode) {
	case HASP_OP_SESSION_OPEN:
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		pthread_mutex_lock(&r->mu);
		/* Deduplicated by nonce, as the protocol requires. */
		if (req->body.session_open.client_nonce != r->last_nonce) {
			r->last_nonce = req->body.session_open.client_nonce;
			r->last_session_id = r->next_session_id++;
			r->event_seq = 0;
		}
		rep.body.session_opened.session_id = r->last_session_id;
		r->session_ttl_ms = req->body.session_open.ttl_ms;
		pthread_mutex_unlock(&r->mu);
		rep.body.session_opened.ttl_ms = req->body.session_open.ttl_ms;
		responder_send(r, node, from, &rep);
		return true;
	case HASP_OP_SESSION_KEEPALIVE:
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		pthread_mutex_lock(&r->mu);
		rep.body.session_alive.ttl_ms = r->session_ttl_ms;
		pthread_mutex_unlock(&r->mu);
		responder_send(r, node, from, &rep);
		return true;
	case HASP_OP_SESSION_CLOSE:
		responder_reply_init(&rep, req, HASP_STATUS_OK);
		responder_send(r, node, from, &rep);
		return true;
	default:
		return false;
	}
}

/* Sends one EVENT to the client of the last session. index 0: the next of
 * the responder's own counter. prev_index UINT64_MAX: index - 1, as if every
 * index before was sent (an unbroken chain). */
static void push(struct responder *r, int node, uint64_t index, uint64_t prev_index,
		 const struct hasp_wire_event *body)
{
	struct hasp_wire_msg ev;
	struct sockaddr_in to;

	memset(&ev, 0, sizeof(ev));
	pthread_mutex_lock(&r->mu);
	to = r->client;
	ev.hdr.session_id = r->last_session_id;
	if (index == 0)
		index = ++r->event_seq;
	else if (index > r->event_seq)
		r->event_seq = index;
	pthread_mutex_unlock(&r->mu);
	ev.hdr.opcode = HASP_OP_EVENT;
	ev.hdr.flags = HASP_WIRE_F_REPLY;
	ev.hdr.status = HASP_STATUS_OK;
	ev.hdr.seq = index;
	ev.body.event = *body;
	ev.body.event.prev_index = prev_index == UINT64_MAX ? index - 1 : prev_index;
	responder_send(r, node, &to, &ev);
}

static struct hasp_wire_event event_body(uint8_t type, const char *name, uint64_t revision)
{
	return (struct hasp_wire_event){
		.type = type,
		.name = { (const uint8_t *)name, strlen(name) },
		.revision = revision,
	};
}

void responder_push_event_seq(struct responder *r, int node, uint64_t seq, uint8_t type,
			      const char *name, uint64_t revision)
{
	struct hasp_wire_event b = event_body(type, name, revision);
	push(r, node, seq, UINT64_MAX, &b);
}

void responder_push_event(struct responder *r, int node, uint8_t type, const char *name,
			  uint64_t revision, const void *value, size_t value_size)
{
	struct hasp_wire_event b = event_body(type, name, revision);
	b.value = (struct hasp_wire_bytes){ value, value_size };
	push(r, node, 0, UINT64_MAX, &b);
}

void responder_push_grant(struct responder *r, int node, const char *name, uint64_t token,
			  uint32_t ttl_ms)
{
	struct hasp_wire_event b = event_body(HASP_EVENT_LOCK_GRANTED, name, token);
	b.ttl_ms = ttl_ms;
	push(r, node, 0, UINT64_MAX, &b);
}

void responder_push_event_chain(struct responder *r, int node, uint64_t index, uint64_t prev_index,
				uint8_t type, const char *name, uint64_t revision)
{
	struct hasp_wire_event b = event_body(type, name, revision);
	push(r, node, index, prev_index, &b);
}
