/*
 * Command encoding for Raft entries (see cmd_codec.h). Little-endian:
 *
 * | offset | size | field                                              |
 * |--------|------|----------------------------------------------------|
 * | 0      | 1    | version (3; 2 is still read)                       |
 * | 1      | 1    | op (enum locks_op)                                 |
 * | 2      | 1    | mode (enum hasp_acquire_mode)                      |
 * | 3      | 1    | flags: bit 0 CAS_VALUE (KV_CAS only), bit 1        |
 * |        |      | OWNER_RELEASE (SESSION_OPEN only), bit 2 SEQ_FLOOR |
 * |        |      | (commands with a seq), others 0                    |
 * | 4      | 4    | ttl_ms                                             |
 * | 8      | 8    | term                                               |
 * | 16     | 8    | now_ms (leader monotonic clock)                    |
 * | 24     | 8    | session_id                                         |
 * | 32     | 8    | seq                                                |
 * | 40     | 8    | lease_id                                           |
 * | 48     | 8    | token (RELEASE, RENEW); expected mod revision      |
 * |        |      | (KV_CAS); client nonce (SESSION_OPEN); with        |
 * |        |      | CAS_VALUE: the expected value's size e (0..1024)   |
 * | 56     | 2    | name_len (0..128)                                  |
 * | 58     | 2    | value_len (0..1024)                                |
 * | 60     | 8    | client commands: request digest; SESSION_OPEN:     |
 * |        |      | owner (identity); else 0                           |
 * | 68     | 4    | SESSION_OPEN: the owner's session quota; else 0    |
 * | 72     | n    | name bytes, [e expected-value bytes with          |
 * |        |      | CAS_VALUE], then value bytes; nothing after them   |
 *
 * A fixed header keeps the decoder trivial to audit and to fuzz; at 60
 * bytes it is small next to a WAL record's framing and a datagram. No
 * opcode uses both a token and a nonce, so the open's nonce shares the
 * token's 8 bytes rather than growing every entry by 8 (version 2).
 * A CAS by value has no expected revision, so the slot carries the
 * expected value's size; entries without the flag read as before.
 * Version 3 added bytes 60..71 (client authentication, docs/SECURITY.md);
 * a version 2 entry decodes with them zero, so a log written before still
 * replays. Flag bit 2 (SEQ_FLOOR) came later within version 3: a node
 * built before it refuses such an entry (-HASP_EFLAGS) rather than apply it
 * differently, so a cluster is upgraded as a whole (docs/STATE_MACHINE.md).
 */
#include "locks/cmd_codec.h"

#include "common/bytes.h"
#include "hasp/errors.h"

uint32_t locks_cmd_fields(uint8_t op)
{
	const uint32_t client = LOCKS_FIELD_SESSION | LOCKS_FIELD_SEQ;

	switch (op) {
	case LOCKS_OP_SESSION_OPEN:
		return LOCKS_FIELD_TTL | LOCKS_FIELD_NONCE;
	case LOCKS_OP_SESSION_KEEPALIVE:
	case LOCKS_OP_SESSION_CLOSE:
		return client;
	case LOCKS_OP_LEASE_GRANT:
		return client | LOCKS_FIELD_TTL;
	case LOCKS_OP_LEASE_KEEPALIVE:
	case LOCKS_OP_LEASE_REVOKE:
		return client | LOCKS_FIELD_LEASE;
	case LOCKS_OP_ACQUIRE:
		return client | LOCKS_FIELD_MODE | LOCKS_FIELD_TTL | LOCKS_FIELD_LEASE | LOCKS_FIELD_NAME;
	case LOCKS_OP_RELEASE:
		return client | LOCKS_FIELD_TOKEN | LOCKS_FIELD_NAME;
	case LOCKS_OP_CANCEL:
		return client | LOCKS_FIELD_NAME;
	case LOCKS_OP_RENEW:
		return client | LOCKS_FIELD_TOKEN | LOCKS_FIELD_TTL | LOCKS_FIELD_NAME;
	case LOCKS_OP_KV_PUT:
		return client | LOCKS_FIELD_NAME | LOCKS_FIELD_VALUE | LOCKS_FIELD_LEASE;
	case LOCKS_OP_KV_DELETE:
		return client | LOCKS_FIELD_NAME;
	case LOCKS_OP_KV_CAS:
		return client | LOCKS_FIELD_NAME | LOCKS_FIELD_VALUE | LOCKS_FIELD_LEASE |
		       LOCKS_FIELD_TOKEN;
	case LOCKS_OP_TICK:
		return 0;
	case LOCKS_OP_LEASE_EXPIRE:
		return LOCKS_FIELD_LEASE;
	case LOCKS_OP_SESSION_EXPIRE:
		return LOCKS_FIELD_SESSION;
	case LOCKS_OP_FORCE_RELEASE:
		return LOCKS_FIELD_NAME;
	default:
		return LOCKS_FIELD_INVALID;
	}
}

/* CAS_VALUE belongs to KV_CAS, OWNER_RELEASE to SESSION_OPEN, SEQ_FLOOR to
 * the commands of a session (they carry a seq). */
static bool locks_cmd_flags_ok(uint8_t op, uint8_t flags)
{
	if (flags & ~(LOCKS_CMD_CAS_VALUE | LOCKS_CMD_OWNER_RELEASE | LOCKS_CMD_SEQ_FLOOR))
		return false;
	if ((flags & LOCKS_CMD_SEQ_FLOOR) && !(locks_cmd_fields(op) & LOCKS_FIELD_SEQ))
		return false;
	if ((flags & LOCKS_CMD_CAS_VALUE) && op != LOCKS_OP_KV_CAS)
		return false;
	return !(flags & LOCKS_CMD_OWNER_RELEASE) || op == LOCKS_OP_SESSION_OPEN;
}

bool locks_cmd_fields_ok(const struct locks_cmd *cmd)
{
	uint32_t f = locks_cmd_fields(cmd->op);

	if (f & LOCKS_FIELD_INVALID)
		return false;
	if (!locks_cmd_flags_ok(cmd->op, cmd->flags))
		return false;
	if (cmd->digest != 0 && !(f & LOCKS_FIELD_SEQ))
		return false;
	if ((cmd->owner != 0 || cmd->owner_sessions_max != 0) && !(f & LOCKS_FIELD_NONCE))
		return false;
	if ((cmd->flags & LOCKS_CMD_CAS_VALUE) ? cmd->token != 0 : cmd->expect_len != 0)
		return false;
	return (cmd->mode == 0 || (f & LOCKS_FIELD_MODE)) &&
	       (cmd->ttl_ms == 0 || (f & LOCKS_FIELD_TTL)) &&
	       (cmd->session_id == 0 || (f & LOCKS_FIELD_SESSION)) &&
	       (cmd->seq == 0 || (f & LOCKS_FIELD_SEQ)) &&
	       (cmd->lease_id == 0 || (f & LOCKS_FIELD_LEASE)) &&
	       (cmd->token == 0 || (f & LOCKS_FIELD_TOKEN)) &&
	       (cmd->nonce == 0 || (f & LOCKS_FIELD_NONCE)) &&
	       (cmd->name_len == 0 || (f & LOCKS_FIELD_NAME)) &&
	       (cmd->value_len == 0 || (f & LOCKS_FIELD_VALUE));
}

size_t locks_cmd_encoded_size(const struct locks_cmd *cmd)
{
	return LOCKS_CMD_HEADER_SIZE + (size_t)cmd->name_len + cmd->expect_len + cmd->value_len;
}

int locks_cmd_encode(const struct locks_cmd *cmd, uint8_t *buf, size_t buf_size)
{
	struct byte_writer w;

	if (!locks_cmd_fields_ok(cmd) || cmd->name_len > HASP_NAME_SIZE_MAX ||
	    cmd->value_len > HASP_VALUE_SIZE_MAX || cmd->expect_len > HASP_VALUE_SIZE_MAX ||
	    (cmd->name_len > 0 && cmd->name == NULL) || (cmd->value_len > 0 && cmd->value == NULL) ||
	    (cmd->expect_len > 0 && cmd->expect == NULL))
		return -HASP_EINVAL;
	if ((locks_cmd_fields(cmd->op) & LOCKS_FIELD_NAME) && !locks_name_valid(cmd->name, cmd->name_len))
		return -HASP_EINVAL;
	byte_writer_init(&w, buf, buf_size);
	byte_writer_u8(&w, LOCKS_CMD_VERSION);
	byte_writer_u8(&w, cmd->op);
	byte_writer_u8(&w, cmd->mode);
	byte_writer_u8(&w, cmd->flags);
	byte_writer_u32(&w, cmd->ttl_ms);
	byte_writer_u64(&w, cmd->term);
	byte_writer_u64(&w, cmd->now_ms);
	byte_writer_u64(&w, cmd->session_id);
	byte_writer_u64(&w, cmd->seq);
	byte_writer_u64(&w, cmd->lease_id);
	/* The token/nonce slot: at most one of them is non-zero (fields_ok). */
	if (locks_cmd_fields(cmd->op) & LOCKS_FIELD_NONCE)
		byte_writer_u64(&w, cmd->nonce);
	else if (cmd->flags & LOCKS_CMD_CAS_VALUE)
		byte_writer_u64(&w, cmd->expect_len);
	else
		byte_writer_u64(&w, cmd->token);
	byte_writer_u16(&w, cmd->name_len);
	byte_writer_u16(&w, cmd->value_len);
	byte_writer_u64(&w, cmd->op == LOCKS_OP_SESSION_OPEN ? cmd->owner : cmd->digest);
	byte_writer_u32(&w, cmd->owner_sessions_max);
	byte_writer_copy(&w, cmd->name, cmd->name_len);
	byte_writer_copy(&w, cmd->expect, cmd->expect_len);
	byte_writer_copy(&w, cmd->value, cmd->value_len);
	if (w.failed)
		return -HASP_ETOOBIG;
	return (int)w.written;
}

static int locks_cmd_decode_fields(const uint8_t *buf, size_t size, struct locks_cmd *cmd)
{
	struct byte_reader r;

	if (size < LOCKS_CMD_HEADER_SIZE_V2)
		return -HASP_ETRUNCATED;
	byte_reader_init(&r, buf, size);
	uint8_t version = byte_reader_u8(&r);
	if (version != LOCKS_CMD_VERSION && version != 2)
		return -HASP_EVERSION;
	uint8_t op = byte_reader_u8(&r);
	if (locks_cmd_fields(op) & LOCKS_FIELD_INVALID)
		return -HASP_EOPCODE;
	uint8_t mode = byte_reader_u8(&r);
	uint8_t flags = byte_reader_u8(&r);
	if (!locks_cmd_flags_ok(op, flags) || (version == 2 && (flags & LOCKS_CMD_OWNER_RELEASE)))
		return -HASP_EFLAGS;
	cmd->op = op;
	cmd->mode = mode;
	cmd->flags = flags;
	cmd->ttl_ms = byte_reader_u32(&r);
	cmd->term = byte_reader_u64(&r);
	cmd->now_ms = byte_reader_u64(&r);
	cmd->session_id = byte_reader_u64(&r);
	cmd->seq = byte_reader_u64(&r);
	cmd->lease_id = byte_reader_u64(&r);
	if (locks_cmd_fields(op) & LOCKS_FIELD_NONCE)
		cmd->nonce = byte_reader_u64(&r);
	else
		cmd->token = byte_reader_u64(&r);
	uint64_t expect_len = 0;
	if (flags & LOCKS_CMD_CAS_VALUE) {
		expect_len = cmd->token;
		cmd->token = 0;
	}
	uint16_t name_len = byte_reader_u16(&r);
	uint16_t value_len = byte_reader_u16(&r);
	if (version >= 3) {
		uint64_t aux = byte_reader_u64(&r);
		if (op == LOCKS_OP_SESSION_OPEN)
			cmd->owner = aux;
		else
			cmd->digest = aux;
		cmd->owner_sessions_max = byte_reader_u32(&r);
	}
	if (r.failed)
		return -HASP_ETRUNCATED;
	if (name_len > HASP_NAME_SIZE_MAX || value_len > HASP_VALUE_SIZE_MAX ||
	    expect_len > HASP_VALUE_SIZE_MAX)
		return -HASP_ETOOBIG;
	size_t want = (size_t)name_len + (size_t)expect_len + value_len;
	if (r.left != want)
		return r.left < want ? -HASP_ETRUNCATED : -HASP_ELENGTH;
	cmd->name_len = name_len;
	cmd->value_len = value_len;
	cmd->expect_len = (uint16_t)expect_len;
	cmd->name = name_len > 0 ? byte_reader_take(&r, name_len) : NULL;
	cmd->expect = expect_len > 0 ? byte_reader_take(&r, (size_t)expect_len) : NULL;
	cmd->value = value_len > 0 ? byte_reader_take(&r, value_len) : NULL;
	if (mode > HASP_ACQUIRE_WAIT || !locks_cmd_fields_ok(cmd))
		return -HASP_EINVAL;
	if ((locks_cmd_fields(op) & LOCKS_FIELD_NAME) && !locks_name_valid(cmd->name, name_len))
		return -HASP_ENAME;
	return 0;
}

int locks_cmd_decode(const uint8_t *buf, size_t size, struct locks_cmd *cmd)
{
	*cmd = (struct locks_cmd){ 0 };
	int rc = locks_cmd_decode_fields(buf, size, cmd);
	/* A refused input leaves nothing half-decoded behind. */
	if (rc != 0)
		*cmd = (struct locks_cmd){ 0 };
	return rc;
}
