/*
 * Fuzz target for every storage decoder: the input is taken as a WAL
 * segment image (segment header, then batches walked as recovery does), as
 * a hard-state slot and as a snapshot file. Nothing may crash, read out of
 * bounds or accept bytes whose checksums do not match; a batch that is
 * accepted must re-encode to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/bytes.h"
#include "storage/hardstate.h"
#include "storage/snapshot.h"
#include "storage/wal_format.h"
#include "storage/wal_scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_record(void *arg, uint64_t offset, const struct wal_record_header *r,
			const uint8_t *payload)
{
	const uint8_t *image = arg;
	uint8_t *again = malloc(wal_record_size(r->payload_size));

	HASP_ASSERT(again != NULL);
	wal_record_encode(again, r, payload);
	HASP_ASSERT(memcmp(again, image + offset, wal_record_size(r->payload_size)) == 0);
	free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wal_segment_header sh;
	struct wal_batch_header b;
	uint64_t image_size = wal_block_round_up(size ? size : 1);
	uint8_t *image = hasp_alloc_aligned(HASP_WAL_BLOCK_SIZE, image_size);

	if (image == NULL)
		return 0;
	memset(image, 0, image_size);
	memcpy(image, data, size);
	if (size >= WAL_SEGMENT_HEADER_SIZE && wal_segment_header_decode(image, &sh) == 0) {
		uint8_t again[WAL_SEGMENT_HEADER_SIZE];
		wal_segment_header_encode(again, &sh);
		HASP_ASSERT(get_u32le(again + 60) == get_u32le(image + 60));
	}
	uint64_t expected = size >= 16 ? (data[8] | 1u) : 1, first = expected, next;
	for (uint64_t at = 0; at + HASP_WAL_BLOCK_SIZE <= image_size; at += HASP_WAL_BLOCK_SIZE) {
		uint64_t seq = size > 32 ? image[at + 32] : 0;
		if (wal_scan_batch(image, image_size, at, seq, &first, &expected, &b, &next,
				   fuzz_record, image) == 0) {
			HASP_ASSERT(next > at && next % WAL_RECORD_ALIGN == 0);
			HASP_ASSERT(next <= image_size);
		}
	}
	if (size >= HARDSTATE_SLOT_SIZE) {
		struct hard_state hs;
		uint64_t seq;
		if (hardstate_slot_decode(image, &seq, &hs) == 0) {
			static uint8_t again[HARDSTATE_SLOT_SIZE];
			hardstate_slot_encode(again, seq, &hs);
			HASP_ASSERT(memcmp(again, image, 44) == 0);
		}
	}
	struct snapshot_meta m;
	if (snapshot_decode(data, size, &m) == 0)
		HASP_ASSERT(SNAPSHOT_HEADER_SIZE + (uint64_t)m.membership_size + m.data_size == size);
	hasp_free(image);
	return 0;
}
