/*
 * The byte encoding of struct locks_cmd, for Raft log entries.
 *
 * Versioned, fixed header plus the name and value bytes; strict: unknown
 * versions, opcodes and flag bits, fields an opcode does not use, names out
 * of the name rules and lengths that disagree with the buffer are all
 * refused with a typed error, and the decoder never reads past the buffer.
 * The format table is in cmd_codec.c and docs/STATE_MACHINE.md.
 */
#ifndef HASP_LOCKS_CMD_CODEC_H
#define HASP_LOCKS_CMD_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "locks/locks.h"

/* 2: bytes 48..55 of SESSION_OPEN carry the client nonce (v1 had none).
 * Version 1 entries are refused (-HASP_EVERSION). */
#define LOCKS_CMD_VERSION 3u
#define LOCKS_CMD_HEADER_SIZE 72u
#define LOCKS_CMD_HEADER_SIZE_V2 60u /* entries written before owners and digests */
#define LOCKS_CMD_SIZE_MAX (LOCKS_CMD_HEADER_SIZE + HASP_NAME_SIZE_MAX + 2u * HASP_VALUE_SIZE_MAX)

/* Which fields an opcode uses (the rest must be zero). */
enum locks_cmd_field {
	LOCKS_FIELD_MODE = 1u << 0,
	LOCKS_FIELD_TTL = 1u << 1,
	LOCKS_FIELD_SESSION = 1u << 2,
	LOCKS_FIELD_SEQ = 1u << 3,
	LOCKS_FIELD_LEASE = 1u << 4,
	LOCKS_FIELD_TOKEN = 1u << 5,
	LOCKS_FIELD_NAME = 1u << 6,
	LOCKS_FIELD_VALUE = 1u << 7,
	LOCKS_FIELD_NONCE = 1u << 8,
	LOCKS_FIELD_INVALID = 1u << 31, /* not an opcode */
};

/* The LOCKS_FIELD_* mask of `op`, or LOCKS_FIELD_INVALID. */
uint32_t locks_cmd_fields(uint8_t op);

/* True when every field `cmd->op` does not use is zero (and the op exists). */
bool locks_cmd_fields_ok(const struct locks_cmd *cmd);

/* Bytes locks_cmd_encode() writes for `cmd`. */
size_t locks_cmd_encoded_size(const struct locks_cmd *cmd);

/* Encodes `cmd` into `buf`; returns the size written, or -HASP_ETOOBIG when
 * it does not fit, -HASP_EINVAL when cmd breaks the rules decode enforces. */
int locks_cmd_encode(const struct locks_cmd *cmd, uint8_t *buf, size_t buf_size)
	__attribute__((warn_unused_result));

/* Decodes `buf` into `cmd`. cmd->name and cmd->value then point into `buf`
 * (the caller keeps it alive while using cmd); on error *cmd is zeroed.
 * Returns 0 or -HASP_ETRUNCATED,
 * -HASP_EVERSION, -HASP_EOPCODE, -HASP_EFLAGS, -HASP_ELENGTH, -HASP_ETOOBIG,
 * -HASP_ENAME, -HASP_EINVAL (a field the opcode does not use is set). */
int locks_cmd_decode(const uint8_t *buf, size_t size, struct locks_cmd *cmd)
	__attribute__((warn_unused_result));

#endif
