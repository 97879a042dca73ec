/*
 * Authenticated framing of raft datagrams (node/peer_auth.h): a MAC and a
 * replay window around msg_codec's encoding, checked before the decoder.
 */
#include "node/peer_auth.h"

#include <string.h>

#include "common/assert.h"
#include "common/bytes.h"

size_t peer_auth_seal(const struct auth_key *key, struct peer_auth_tx *tx, uint8_t *buf, size_t msg_size,
		      size_t buf_size)
{
	HASP_ASSERT(key != NULL && tx != NULL && buf != NULL);
	HASP_ASSERT(msg_size > 0 && msg_size <= buf_size);
	if (buf_size - msg_size < PEER_AUTH_TRAILER_SIZE)
		return 0;
	tx->counter++;
	HASP_ASSERT(tx->counter != 0); /* 2^64 datagrams: never */
	put_u64le(buf + msg_size, tx->epoch);
	put_u64le(buf + msg_size + 8, tx->counter);
	auth_mac(key, buf, msg_size + 16, buf + msg_size + 16);
	return msg_size + PEER_AUTH_TRAILER_SIZE;
}

long peer_auth_open(const struct auth_key *key, const uint8_t *buf, size_t size, struct peer_auth_tag *tag)
{
	HASP_ASSERT(key != NULL && tag != NULL);
	HASP_ASSERT(buf != NULL || size == 0);
	if (size < PEER_AUTH_TRAILER_SIZE)
		return -1;
	size_t msg_size = size - PEER_AUTH_TRAILER_SIZE;
	if (!auth_verify(key, buf, msg_size + 16, buf + msg_size + 16))
		return -1;
	tag->epoch = get_u64le(buf + msg_size);
	tag->counter = get_u64le(buf + msg_size + 8);
	return (long)msg_size;
}

bool peer_auth_window_accept(struct peer_auth_window *w, uint32_t id, const struct peer_auth_tag *tag)
{
	HASP_ASSERT(w != NULL && tag != NULL && id != 0);
	if (w->id != id)
		*w = (struct peer_auth_window){ .id = id };
	if (tag->counter == 0 || tag->epoch < w->epoch)
		return false;
	if (tag->epoch > w->epoch) {
		/* The sender restarted (or this is its first datagram): a new
		 * epoch starts a new window. */
		w->epoch = tag->epoch;
		w->top = tag->counter;
		w->bitmap = 1;
		return true;
	}
	if (tag->counter > w->top) {
		uint64_t shift = tag->counter - w->top;
		w->bitmap = shift >= PEER_AUTH_WINDOW ? 1 : (w->bitmap << shift) | 1;
		w->top = tag->counter;
		return true;
	}
	uint64_t age = w->top - tag->counter;
	if (age >= PEER_AUTH_WINDOW || (w->bitmap & (1ull << age)) != 0)
		return false;
	w->bitmap |= 1ull << age;
	return true;
}
