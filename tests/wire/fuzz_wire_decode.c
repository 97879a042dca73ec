/*
 * libFuzzer target for the wire decoder (common/wire.c).
 *
 * Decodes the input in every direction. Whatever is accepted must re-encode
 * to the identical bytes (one encoding per message; a v2 tag is carried
 * over, the sealer writes it) and belong to exactly one direction. The input buffer is exactly the datagram, so ASan flags
 * any read past it. Without libFuzzer, tests/fuzz_replay_main.c replays the
 * corpus in tests/wire/corpus_wire/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "hasp/errors.h"
#include "hasp/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Re-encodes an accepted message and aborts unless the bytes are the input. */
static void check_reencode(const uint8_t *data, size_t size, const struct hasp_wire_msg *m)
{
	uint8_t again[HASP_DATAGRAM_SIZE_MAX];
	int n = hasp_wire_encode(m, again, sizeof(again));

	/* The encoder writes a zero tag; a v2 tag is the sealer's
	 * (common/wire_auth.h), so compare it as decoded. */
	if (n >= (int)HASP_WIRE_HEADER_SIZE && m->hdr.version == 2)
		memcpy(again + HASP_WIRE_TAG_OFFSET, m->hdr.tag, HASP_WIRE_TAG_SIZE);
	if (n < 0 || (size_t)n != size || memcmp(again, data, size) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hasp_wire_msg any, request, reply;
	int rc_any = hasp_wire_decode(data, size, &any);
	int rc_request = hasp_wire_decode_request(data, size, &request);
	int rc_reply = hasp_wire_decode_reply(data, size, &reply);

	if (rc_any == 0) {
		check_reencode(data, size, &any);
		/* Exactly one of the direction-specific decoders agrees. */
		if ((rc_request == 0) == (rc_reply == 0))
			abort();
	} else if (rc_request == 0 || rc_reply == 0) {
		abort();
	}
	if (rc_request == 0)
		check_reencode(data, size, &request);
	if (rc_reply == 0) {
		struct hasp_wire_kv_iter it;
		struct hasp_wire_kv_entry e;
		check_reencode(data, size, &reply);
		if (reply.hdr.opcode == HASP_OP_KV_RANGE && reply.hdr.status == HASP_STATUS_OK) {
			uint32_t count = 0;
			hasp_wire_kv_iter_init(&it, &reply.body.kv_entries);
			while (hasp_wire_kv_iter_next(&it, &e)) {
				if (!hasp_name_valid(e.key.data, e.key.size))
					abort();
				count++;
			}
			if (count != reply.body.kv_entries.entry_count || it.left != 0)
				abort();
		}
	}
	/* Every refusal maps to a status a server can send. */
	if (rc_any < 0 && hasp_wire_error_status(rc_any) >= HASP_STATUS_COUNT)
		abort();
	return 0;
}
