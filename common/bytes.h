/*
 * Bounded little-endian readers and writers for every codec in hasp (wire
 * protocol, Raft messages, WAL records, snapshots, command encoding).
 *
 * A reader never reads past its end: the first short read sets `failed`,
 * returns zeros from then on, and the decoder checks `failed` once at the end
 * (or where a length must be trusted). A writer likewise never writes past
 * its end and sets `failed` instead. All multi-byte integers are
 * little-endian on disk and on the wire.
 */
#ifndef HASP_COMMON_BYTES_H
#define HASP_COMMON_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void put_u16le(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void put_u32le(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put_u64le(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t get_u16le(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t get_u32le(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static inline uint64_t get_u64le(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

struct byte_reader {
	const uint8_t *pos;
	size_t left;
	bool failed;
};

static inline void byte_reader_init(struct byte_reader *r, const void *data, size_t size)
{
	r->pos = data;
	r->left = size;
	r->failed = false;
}

/* Returns a pointer to the next `size` bytes and consumes them, or NULL (and
 * sets failed) when fewer remain. */
static inline const uint8_t *byte_reader_take(struct byte_reader *r, size_t size)
{
	if (r->failed || size > r->left) {
		r->failed = true;
		return NULL;
	}
	const uint8_t *p = r->pos;
	r->pos += size;
	r->left -= size;
	return p;
}

static inline uint8_t byte_reader_u8(struct byte_reader *r)
{
	const uint8_t *p = byte_reader_take(r, 1);
	return p ? p[0] : 0;
}

static inline uint16_t byte_reader_u16(struct byte_reader *r)
{
	const uint8_t *p = byte_reader_take(r, 2);
	return p ? get_u16le(p) : 0;
}

static inline uint32_t byte_reader_u32(struct byte_reader *r)
{
	const uint8_t *p = byte_reader_take(r, 4);
	return p ? get_u32le(p) : 0;
}

static inline uint64_t byte_reader_u64(struct byte_reader *r)
{
	const uint8_t *p = byte_reader_take(r, 8);
	return p ? get_u64le(p) : 0;
}

/* Copies `size` bytes out; on a short read the target is zeroed. */
static inline void byte_reader_copy(struct byte_reader *r, void *target, size_t size)
{
	const uint8_t *p = byte_reader_take(r, size);
	if (p != NULL)
		memcpy(target, p, size);
	else if (size > 0)
		memset(target, 0, size);
}

struct byte_writer {
	uint8_t *pos;
	size_t left;
	size_t written;
	bool failed;
};

static inline void byte_writer_init(struct byte_writer *w, void *data, size_t size)
{
	w->pos = data;
	w->left = size;
	w->written = 0;
	w->failed = false;
}

/* Reserves the next `size` bytes and returns them for the caller to fill,
 * or NULL (and sets failed) when they do not fit. */
static inline uint8_t *byte_writer_reserve(struct byte_writer *w, size_t size)
{
	if (w->failed || size > w->left) {
		w->failed = true;
		return NULL;
	}
	uint8_t *p = w->pos;
	w->pos += size;
	w->left -= size;
	w->written += size;
	return p;
}

static inline void byte_writer_u8(struct byte_writer *w, uint8_t v)
{
	uint8_t *p = byte_writer_reserve(w, 1);
	if (p != NULL)
		p[0] = v;
}

static inline void byte_writer_u16(struct byte_writer *w, uint16_t v)
{
	uint8_t *p = byte_writer_reserve(w, 2);
	if (p != NULL)
		put_u16le(p, v);
}

static inline void byte_writer_u32(struct byte_writer *w, uint32_t v)
{
	uint8_t *p = byte_writer_reserve(w, 4);
	if (p != NULL)
		put_u32le(p, v);
}

static inline void byte_writer_u64(struct byte_writer *w, uint64_t v)
{
	uint8_t *p = byte_writer_reserve(w, 8);
	if (p != NULL)
		put_u64le(p, v);
}

static inline void byte_writer_copy(struct byte_writer *w, const void *source, size_t size)
{
	uint8_t *p = byte_writer_reserve(w, size);
	if (p != NULL && size > 0)
		memcpy(p, source, size);
}

#endif
