#include "common/resolve.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The longest host:port item taken (a DNS name is at most 253 bytes). */
#define ITEM_MAX 272

/* s quoted, cut to 40 bytes, bytes outside 0x20..0x7e as \xNN: hostile
 * input is not echoed back whole or raw. */
static const char *quoted(const char *s, char *buf, size_t size)
{
	size_t o = 0;
	size_t i;

	o += (size_t)snprintf(buf, size, "\"");
	for (i = 0; s[i] != '\0' && i < 40 && o + 8 < size; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch < 0x20 || ch >= 0x7f)
			o += (size_t)snprintf(buf + o, size - o, "\\x%02x", ch);
		else
			buf[o++] = (char)ch;
	}
	snprintf(buf + o, size - o, "%s\"", s[i] != '\0' ? "..." : "");
	return buf;
}

int resolve_hostport(const char *hostport, struct sockaddr_in *out, char *err, size_t err_size)
{
	char item[ITEM_MAX];
	char q[200];
	char q2[200];
	char *colon;
	char *end;
	unsigned long port;

	if (strlen(hostport) >= sizeof(item)) {
		snprintf(err, err_size, "address %s: longer than %zu bytes", quoted(hostport, q, sizeof(q)),
			 sizeof(item) - 1);
		return RESOLVE_MALFORMED;
	}
	snprintf(item, sizeof(item), "%s", hostport);
	colon = strrchr(item, ':');
	if (colon == NULL || colon == item || colon[1] == '\0') {
		snprintf(err, err_size, "address %s: want host:port", quoted(hostport, q, sizeof(q)));
		return RESOLVE_MALFORMED;
	}
	*colon = '\0';
	port = strtoul(colon + 1, &end, 10);
	if (*end != '\0' || colon[1] < '0' || colon[1] > '9' || port == 0 || port > 65535) {
		snprintf(err, err_size, "address %s: port must be 1..65535", quoted(hostport, q, sizeof(q)));
		return RESOLVE_MALFORMED;
	}
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, item, &out->sin_addr) == 1)
		return RESOLVE_OK;

	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM };
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(item, NULL, &hints, &res);
	if (rc != 0 || res == NULL) {
		int absent = rc == EAI_NONAME || rc == EAI_FAIL || rc == EAI_NODATA || rc == EAI_ADDRFAMILY ||
			     rc == 0;
		snprintf(err, err_size, "address %s: cannot resolve the host name %s: %s",
			 quoted(hostport, q, sizeof(q)), quoted(item, q2, sizeof(q2)),
			 rc != 0 ? gai_strerror(rc) : "no IPv4 address");
		if (res != NULL)
			freeaddrinfo(res);
		return absent ? RESOLVE_UNKNOWN : RESOLVE_UNAVAILABLE;
	}
	out->sin_addr = ((const struct sockaddr_in *)res->ai_addr)->sin_addr;
	freeaddrinfo(res);
	return RESOLVE_OK;
}

int resolve_cluster(const char *list, char *out, size_t out_size, char *err, size_t err_size)
{
	const char *p = list;
	size_t o = 0;

	if (out_size == 0)
		return RESOLVE_MALFORMED;
	out[0] = '\0';
	do {
		char item[ITEM_MAX];
		char ip[INET_ADDRSTRLEN];
		char q[200];
		struct sockaddr_in sa;
		size_t len = strcspn(p, ",");

		if (len == 0 || len >= sizeof(item)) {
			snprintf(err, err_size, "cluster list %s: %s", quoted(list, q, sizeof(q)),
				 len == 0 ? "empty address" : "address too long");
			return RESOLVE_MALFORMED;
		}
		memcpy(item, p, len);
		item[len] = '\0';
		int rc = resolve_hostport(item, &sa, err, err_size);
		if (rc != RESOLVE_OK)
			return rc;
		inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
		int n = snprintf(out + o, out_size - o, "%s%s:%u", o ? "," : "", ip, (unsigned)ntohs(sa.sin_port));
		if (n < 0 || (size_t)n >= out_size - o) {
			snprintf(err, err_size, "cluster list longer than %zu bytes", out_size - 1);
			return RESOLVE_MALFORMED;
		}
		o += (size_t)n;
		p += len;
	} while (*p++ == ',');
	return RESOLVE_OK;
}
