/*
 * Host names where an address is taken (docs/CLIENT.md, "The `hasp` CLI"):
 * "host:port" with host an IPv4 address or a name that getaddrinfo(3)
 * resolves to one (AF_INET; the first address). One helper for hasp,
 * haspctl, hasp-load and hasp-bench.
 */
#ifndef HASP_COMMON_RESOLVE_H
#define HASP_COMMON_RESOLVE_H

#include <netinet/in.h>
#include <stddef.h>

enum resolve_status {
	RESOLVE_OK = 0,
	RESOLVE_MALFORMED = -1,	  /* not host:port, port not 1..65535, too long */
	RESOLVE_UNKNOWN = -2,	  /* the name does not exist or has no IPv4 address */
	RESOLVE_UNAVAILABLE = -3, /* the resolver could not answer (try again) */
};

/* Resolves "host:port" into *out. Returns a resolve_status; on failure a
 * one-line reason (the input quoted, cut when long) goes into err. */
int resolve_hostport(const char *hostport, struct sockaddr_in *out, char *err, size_t err_size)
	__attribute__((warn_unused_result));

/* Rewrites a list "host:port,..." with every host resolved to its dotted
 * IPv4 address, into out. Returns a resolve_status (RESOLVE_MALFORMED also
 * for an empty item or a result longer than out_size - 1), err as above. */
int resolve_cluster(const char *list, char *out, size_t out_size, char *err, size_t err_size)
	__attribute__((warn_unused_result));

#endif
