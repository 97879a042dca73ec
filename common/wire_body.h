/*
 * Internal to the wire codec (common/wire.c, common/wire_body.c): the body
 * layouts and checks of protocol v1. Not part of the public API.
 *
 * A wire_codec walks one body in either direction: decoding reads fields
 * into the message (names and values then point into the datagram),
 * encoding writes them out of it. One function per layout keeps the two
 * directions from drifting apart.
 */
#ifndef HASP_COMMON_WIRE_BODY_H
#define HASP_COMMON_WIRE_BODY_H

#include <stdbool.h>

#include "common/bytes.h"
#include "hasp/wire.h"

struct wire_codec {
	bool encode;          /* true: write w from the message; false: read r */
	struct byte_reader r; /* decoding: the body bytes */
	struct byte_writer w; /* encoding: the space after the header */
};

/* Walks the body selected by msg->hdr (direction, opcode, status). Returns
 * 0, or -HASP_EOPCODE for a request opcode without a body layout. A short
 * read or write is left in c->r.failed / c->w.failed for the caller. When
 * encoding, wire_body_check must have accepted the message. */
int wire_body_codec(struct wire_codec *c, struct hasp_wire_msg *msg) __attribute__((warn_unused_result));

/* The semantic checks of a body (names, TTLs, value sizes, enum values,
 * status/opcode pairs): 0 or -HASP_ENAME, -HASP_ERANGE, -HASP_ETOOBIG,
 * -HASP_EFLAGS, -HASP_ELENGTH (range entries), -HASP_EINVAL. */
int wire_body_check(const struct hasp_wire_msg *msg) __attribute__((warn_unused_result));

/* A valid lock name or key (hasp_name_valid on a hasp_wire_bytes). */
bool wire_body_name_ok(const struct hasp_wire_bytes *b) __attribute__((warn_unused_result));

/* A value of at most 1024 bytes: 0, -HASP_ETOOBIG, or -HASP_EINVAL for a
 * non-empty value without data. */
int wire_body_value_check(const struct hasp_wire_bytes *b) __attribute__((warn_unused_result));

#endif
