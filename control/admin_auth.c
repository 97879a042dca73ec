/*
 * The admin credential over TCP (control/admin_auth.h).
 */
#include "control/admin_auth.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "common/assert.h"
#include "control/control.h"
#include "hasp/errors.h"

static const char admin_context[] = "hasp admin v1"; /* with its NUL: 14 bytes */

void admin_auth_tag(const struct auth_key *key, const uint8_t *nonce, uint64_t seq, const char *line,
		    size_t len, uint8_t *tag)
{
	uint8_t msg[sizeof(admin_context) + ADMIN_AUTH_NONCE_SIZE + 8u + CONTROL_REQUEST_SIZE_MAX];
	size_t off = 0;

	HASP_ASSERT(len <= CONTROL_REQUEST_SIZE_MAX);
	memcpy(msg, admin_context, sizeof(admin_context));
	off += sizeof(admin_context);
	memcpy(msg + off, nonce, ADMIN_AUTH_NONCE_SIZE);
	off += ADMIN_AUTH_NONCE_SIZE;
	for (int i = 0; i < 8; i++)
		msg[off++] = (uint8_t)(seq >> (8 * i));
	memcpy(msg + off, line, len);
	off += len;
	auth_mac(key, msg, off, tag);
}

size_t admin_auth_seal(const struct auth_key *key, const uint8_t *nonce, uint64_t seq, const char *line,
		       char *out, size_t out_size)
{
	uint8_t tag[AUTH_MAC_SIZE];
	char hex[2 * AUTH_MAC_SIZE + 1];
	size_t len = strlen(line);

	if (len > CONTROL_REQUEST_SIZE_MAX)
		return 0;
	admin_auth_tag(key, nonce, seq, line, len, tag);
	sodium_bin2hex(hex, sizeof(hex), tag, sizeof(tag));
	int n = snprintf(out, out_size, "auth %llu %s %s", (unsigned long long)seq, hex, line);
	return n > 0 && (size_t)n < out_size ? (size_t)n : 0;
}

bool admin_auth_is_sealed(const char *line, size_t len)
{
	return len >= 4 && memcmp(line, "auth", 4) == 0 && (len == 4 || line[4] == ' ');
}

int admin_auth_open(const struct auth_key *key, const uint8_t *nonce, uint64_t seq, const char *line,
		    size_t len, const char **inner, size_t *inner_len)
{
	uint8_t tag[AUTH_MAC_SIZE], want[AUTH_MAC_SIZE];
	char num[24];
	size_t got = 0;

	if (!admin_auth_is_sealed(line, len) || len < 5)
		return -HASP_EINVAL;
	const char *p = line + 5, *end = line + len;
	const char *sp = memchr(p, ' ', (size_t)(end - p));
	if (sp == NULL || sp == p || (size_t)(sp - p) >= sizeof(num))
		return -HASP_EINVAL;
	memcpy(num, p, (size_t)(sp - p));
	num[sp - p] = '\0';
	uint64_t got_seq;
	if (!control_parse_u64(num, &got_seq))
		return -HASP_EINVAL;
	p = sp + 1;
	if ((size_t)(end - p) < 2 * AUTH_MAC_SIZE + 2 || p[2 * AUTH_MAC_SIZE] != ' ' ||
	    sodium_hex2bin(tag, sizeof(tag), p, 2 * AUTH_MAC_SIZE, NULL, &got, NULL) != 0 ||
	    got != AUTH_MAC_SIZE)
		return -HASP_EINVAL;
	p += 2 * AUTH_MAC_SIZE + 1;
	/* The tag first, under the seq we expect: a wrong seq fails it too. */
	admin_auth_tag(key, nonce, seq, p, (size_t)(end - p), want);
	bool ok = sodium_memcmp(tag, want, sizeof(tag)) == 0;
	sodium_memzero(want, sizeof(want));
	if (!ok || got_seq != seq)
		return -HASP_EPERM;
	*inner = p;
	*inner_len = (size_t)(end - p);
	return 0;
}

void admin_auth_nonce_hex(const uint8_t *nonce, char *hex)
{
	sodium_bin2hex(hex, ADMIN_AUTH_NONCE_HEX_SIZE, nonce, ADMIN_AUTH_NONCE_SIZE);
}

bool admin_auth_nonce_parse(const char *hex, size_t len, uint8_t *nonce)
{
	size_t got = 0;

	return len == 2 * ADMIN_AUTH_NONCE_SIZE &&
	       sodium_hex2bin(nonce, ADMIN_AUTH_NONCE_SIZE, hex, len, NULL, &got, NULL) == 0 &&
	       got == ADMIN_AUTH_NONCE_SIZE;
}
