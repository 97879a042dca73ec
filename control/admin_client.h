/*
 * The client side of the admin protocol (control.h): connect to a node's
 * admin endpoint, send one request line, read one reply line and, when the
 * reply announces one, its attachment. Used by haspctl and the tests.
 *
 * Targets: a path (contains '/', or "unix:PATH") for the Unix socket, or
 * "IP:PORT" for the TCP management address. Blocking with timeouts; one
 * request at a time per client.
 */
#ifndef HASP_CONTROL_ADMIN_CLIENT_H
#define HASP_CONTROL_ADMIN_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "control/admin_auth.h"

#define ADMIN_CLIENT_REPLY_MAX (512u * 1024u)
#define CONTROL_SEALED_SIZE (4096u + ADMIN_AUTH_OVERHEAD + 1u)

struct admin_client {
	int fd;
	uint32_t timeout_ms;
	char *buf;       /* ADMIN_CLIENT_REPLY_MAX + 1 */
	size_t len;      /* bytes buffered */
	size_t consumed; /* bytes of buf handed out as the last reply */
	/* With an admin key (admin_client_set_key) every request is sealed
	 * (control/admin_auth.h) under the connection's nonce. */
	bool keyed;
	bool have_nonce;
	struct auth_key key;
	uint8_t nonce[ADMIN_AUTH_NONCE_SIZE];
	uint64_t seq;
	char sealed[CONTROL_SEALED_SIZE];
};

/* 0, -HASP_EINVAL (bad target), -HASP_ENOMEM, -HASP_ESYS (cannot connect;
 * errno says why), -HASP_ETIMEDOUT. */
int admin_client_open(struct admin_client *a, const char *target, uint32_t timeout_ms)
	__attribute__((warn_unused_result));
void admin_client_close(struct admin_client *a);

/* From now on the requests of `a` carry the admin credential: the first
 * call asks the connection's nonce (`auth.nonce`), each then goes as
 * `auth SEQ TAG LINE`. The client keeps a copy of the key (wiped on close). */
void admin_client_set_key(struct admin_client *a, const struct auth_key *key);

/* Sends `line` (no newline) and reads the reply line; *reply points into the
 * client (valid until the next call), NUL-terminated, without the newline.
 * 0, -HASP_ETOOBIG, -HASP_ESYS (connection lost), -HASP_ETIMEDOUT; with a
 * key also -HASP_ECORRUPT (the node sent no nonce: it is too old, or its
 * reply is the refusal, in *reply). */
int admin_client_call(struct admin_client *a, const char *line, const char **reply, size_t *reply_len)
	__attribute__((warn_unused_result));

/* Copies the `size` attachment bytes that follow the last reply into fd. */
int admin_client_attachment(struct admin_client *a, int fd, uint64_t size)
	__attribute__((warn_unused_result));

/* One HTTP GET: fills *status and the body (NUL-terminated, truncated to
 * body_size - 1). */
int admin_client_http_get(const char *target, const char *path, uint32_t timeout_ms, int *status,
			  char *body, size_t body_size) __attribute__((warn_unused_result));

#endif
