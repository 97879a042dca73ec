/*
 * Encoders and checkers of the WAL format (tables in wal_format.h). The
 * checkers treat the bytes as untrusted: a mismatch is an error code for the
 * recovery scan to classify, never an assertion.
 */
#include "storage/wal_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/bytes.h"
#include "common/crc32c.h"
#include "hasp/errors.h"

void wal_segment_header_encode(uint8_t *buf, const struct wal_segment_header *h)
{
	HASP_ASSERT(h->block_size == HASP_WAL_BLOCK_SIZE);
	HASP_ASSERT(h->segment_size % HASP_WAL_BLOCK_SIZE == 0);
	HASP_ASSERT(h->version >= WAL_FORMAT_VERSION_MIN && h->version <= WAL_FORMAT_VERSION);
	memset(buf, 0, WAL_SEGMENT_HEADER_SIZE);
	put_u64le(buf + 0, WAL_SEGMENT_MAGIC);
	put_u16le(buf + 8, h->version);
	put_u16le(buf + 10, WAL_SEGMENT_HEADER_SIZE);
	put_u32le(buf + 12, h->block_size);
	put_u64le(buf + 16, h->seq);
	put_u64le(buf + 24, h->first_index);
	put_u64le(buf + 32, h->segment_size);
	put_u32le(buf + 60, crc32c(buf, 60));
}

int wal_segment_header_decode(const uint8_t *buf, struct wal_segment_header *h)
{
	if (get_u64le(buf) != WAL_SEGMENT_MAGIC)
		return -HASP_EMAGIC;
	if (get_u32le(buf + 60) != crc32c(buf, 60))
		return -HASP_ECORRUPT;
	h->version = get_u16le(buf + 8);
	if (h->version < WAL_FORMAT_VERSION_MIN || h->version > WAL_FORMAT_VERSION ||
	    get_u16le(buf + 10) != WAL_SEGMENT_HEADER_SIZE)
		return -HASP_EVERSION;
	h->block_size = get_u32le(buf + 12);
	h->seq = get_u64le(buf + 16);
	h->first_index = get_u64le(buf + 24);
	h->segment_size = get_u64le(buf + 32);
	if (h->block_size != HASP_WAL_BLOCK_SIZE || h->segment_size % HASP_WAL_BLOCK_SIZE != 0 ||
	    h->segment_size < 2 * HASP_WAL_BLOCK_SIZE || h->first_index == 0 ||
	    !wal_bytes_zero(buf + 40, 20))
		return -HASP_ECORRUPT;
	return 0;
}

void wal_batch_header_encode(uint8_t *buf, const struct wal_batch_header *b)
{
	memset(buf, 0, WAL_BATCH_HEADER_SIZE);
	put_u32le(buf + 0, WAL_BATCH_MAGIC);
	put_u32le(buf + 4, b->records_size);
	put_u32le(buf + 8, b->record_count);
	put_u64le(buf + 16, b->first_index);
	put_u64le(buf + 24, b->watermark);
	put_u64le(buf + 32, b->segment_seq);
	put_u32le(buf + 44, crc32c(buf, 44));
}

int wal_batch_header_decode(const uint8_t *buf, struct wal_batch_header *b)
{
	if (get_u32le(buf) != WAL_BATCH_MAGIC)
		return -HASP_EMAGIC;
	if (get_u32le(buf + 44) != crc32c(buf, 44))
		return -HASP_ECORRUPT;
	b->records_size = get_u32le(buf + 4);
	b->record_count = get_u32le(buf + 8);
	b->first_index = get_u64le(buf + 16);
	b->watermark = get_u64le(buf + 24);
	b->segment_seq = get_u64le(buf + 32);
	if (get_u32le(buf + 12) != 0 || get_u32le(buf + 40) != 0)
		return -HASP_ECORRUPT;
	return 0;
}

void wal_record_encode(uint8_t *buf, const struct wal_record_header *r, const void *payload)
{
	uint32_t size = wal_record_size(r->payload_size);

	memset(buf, 0, WAL_RECORD_HEADER_SIZE);
	put_u32le(buf + 4, r->payload_size);
	put_u64le(buf + 8, r->term);
	put_u64le(buf + 16, r->index);
	put_u16le(buf + 24, r->type);
	if (r->payload_size > 0)
		memcpy(buf + WAL_RECORD_HEADER_SIZE, payload, r->payload_size);
	memset(buf + WAL_RECORD_HEADER_SIZE + r->payload_size, 0,
	       size - WAL_RECORD_HEADER_SIZE - r->payload_size);
	put_u32le(buf, crc32c(buf + 4, WAL_RECORD_HEADER_SIZE - 4 + r->payload_size));
}

int wal_record_decode(const uint8_t *buf, size_t left, struct wal_record_header *r,
		      const uint8_t **payload)
{
	if (left < WAL_RECORD_HEADER_SIZE)
		return -HASP_ETRUNCATED;
	r->payload_size = get_u32le(buf + 4);
	if (r->payload_size > left - WAL_RECORD_HEADER_SIZE ||
	    wal_record_size(r->payload_size) > left)
		return -HASP_ETRUNCATED;
	if (get_u32le(buf) != crc32c(buf + 4, WAL_RECORD_HEADER_SIZE - 4 + r->payload_size))
		return -HASP_ECORRUPT;
	r->term = get_u64le(buf + 8);
	r->index = get_u64le(buf + 16);
	r->type = get_u16le(buf + 24);
	if (get_u16le(buf + 26) != 0 || get_u32le(buf + 28) != 0)
		return -HASP_EFLAGS;
	*payload = buf + WAL_RECORD_HEADER_SIZE;
	return 0;
}

bool wal_bytes_zero(const uint8_t *buf, size_t size)
{
	for (size_t i = 0; i < size; i++) {
		if (buf[i] != 0)
			return false;
	}
	return true;
}

void wal_segment_name(char *buf, size_t size, uint64_t seq)
{
	snprintf(buf, size, "wal-%016llx.seg", (unsigned long long)seq);
}

bool wal_segment_name_parse(const char *name, uint64_t *seq)
{
	char *end;

	if (strlen(name) != 24 || strncmp(name, "wal-", 4) != 0 || strcmp(name + 20, ".seg") != 0)
		return false;
	for (int i = 4; i < 20; i++) {
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	}
	*seq = strtoull(name + 4, &end, 16);
	return end == name + 20;
}
