/*
 * Tags, session keys and owner ids of wire v2 (see common/wire_auth.h).
 */
#include "common/wire_auth.h"

#include <sodium.h>
#include <string.h>

#include "common/assert.h"
#include "common/bytes.h"
#include "hasp/wire.h"

static const uint8_t session_context[] = "hasp session v2"; /* 15 bytes hashed */
static const uint8_t owner_context[] = "hasp owner v2";     /* 13 bytes hashed */

/* The tag of the datagram as if bytes 28..43 were zero, without copying it. */
static void tag_compute(const struct auth_key *key, const uint8_t *datagram, size_t size,
			uint8_t tag[HASP_WIRE_TAG_SIZE])
{
	static const uint8_t zeros[HASP_WIRE_TAG_SIZE];
	crypto_generichash_state st;

	HASP_ASSERT(size >= HASP_WIRE_HEADER_SIZE);
	int rc = crypto_generichash_init(&st, key->bytes, AUTH_KEY_SIZE, HASP_WIRE_TAG_SIZE);
	rc |= crypto_generichash_update(&st, datagram, HASP_WIRE_TAG_OFFSET);
	rc |= crypto_generichash_update(&st, zeros, sizeof(zeros));
	rc |= crypto_generichash_update(&st, datagram + HASP_WIRE_HEADER_SIZE,
					size - HASP_WIRE_HEADER_SIZE);
	rc |= crypto_generichash_final(&st, tag, HASP_WIRE_TAG_SIZE);
	HASP_ASSERT(rc == 0);
}

void hasp_wire_seal(const struct auth_key *key, uint8_t *datagram, size_t size)
{
	uint8_t tag[HASP_WIRE_TAG_SIZE];

	HASP_ASSERT(key != NULL && datagram != NULL);
	tag_compute(key, datagram, size, tag);
	memcpy(datagram + HASP_WIRE_TAG_OFFSET, tag, sizeof(tag));
}

bool hasp_wire_tag_ok(const struct auth_key *key, const uint8_t *datagram, size_t size)
{
	uint8_t want[HASP_WIRE_TAG_SIZE];

	HASP_ASSERT(key != NULL);
	if (datagram == NULL || size < HASP_WIRE_HEADER_SIZE)
		return false;
	tag_compute(key, datagram, size, want);
	bool ok = crypto_verify_16(want, datagram + HASP_WIRE_TAG_OFFSET) == 0;
	sodium_memzero(want, sizeof(want));
	return ok;
}

void hasp_session_key(const struct auth_key *identity_key, uint64_t session_id,
		      uint64_t client_nonce, struct auth_key *out)
{
	uint8_t input[sizeof(session_context) - 1 + 16];

	HASP_ASSERT(identity_key != NULL && out != NULL);
	memcpy(input, session_context, sizeof(session_context) - 1);
	put_u64le(input + sizeof(session_context) - 1, session_id);
	put_u64le(input + sizeof(session_context) - 1 + 8, client_nonce);
	int rc = crypto_generichash(out->bytes, AUTH_KEY_SIZE, input, sizeof(input),
				    identity_key->bytes, AUTH_KEY_SIZE);
	HASP_ASSERT(rc == 0);
}

uint64_t hasp_owner_id(const uint8_t *name, size_t size)
{
	crypto_generichash_state st;
	uint8_t out[8];

	HASP_ASSERT(name != NULL || size == 0);
	int rc = crypto_generichash_init(&st, NULL, 0, sizeof(out));
	rc |= crypto_generichash_update(&st, owner_context, sizeof(owner_context) - 1);
	rc |= crypto_generichash_update(&st, name, size);
	rc |= crypto_generichash_final(&st, out, sizeof(out));
	HASP_ASSERT(rc == 0);
	uint64_t id = get_u64le(out);
	return id <= HASP_OWNER_ANONYMOUS ? id + 2 : id;
}
