/*
 * Wire protocol v1 codec (include/hasp/wire.h, docs/PROTOCOL.md): the
 * header, the entry points and the reply helpers. The body layouts and their
 * checks live in common/wire_body.c.
 *
 * Each body layout is written exactly once, in a codec function that runs
 * in both directions: decoding reads fields into the struct, encoding writes
 * them from it. The semantic checks (names, TTLs, value sizes, enum values)
 * are likewise one function on the struct, run after decoding and before
 * encoding. So the encoder can never emit what the decoder refuses, and
 * anything the decoder accepts re-encodes to the same bytes: every byte of a
 * datagram lands in a field of the message and the checks leave no two
 * encodings for one message (no padding, no reserved bytes, no free lengths).
 *
 * The decoder trusts nothing: it reads through a bounded byte_reader, checks
 * that the body size equals the datagram remainder and that inner lengths
 * consume the body exactly.
 */
#include "hasp/wire.h"

#include <string.h>

#include "common/assert.h"
#include "common/bytes.h"
#include "common/limits.h"
#include "common/wire_body.h"
#include "hasp/errors.h"

static_assert(HASP_WIRE_HEADER_SIZE == 28 + HASP_AUTH_TAG_SIZE, "header table below");
static_assert(HASP_DATAGRAM_SIZE_MAX - HASP_WIRE_HEADER_SIZE <= UINT16_MAX,
	      "the body size travels as u16");
static_assert(HASP_NAME_SIZE_MAX <= UINT8_MAX, "name sizes travel as u8");
static_assert(HASP_VALUE_SIZE_MAX <= UINT16_MAX, "value sizes travel as u16");
static_assert(HASP_STATUS_COUNT <= UINT16_MAX, "statuses travel as u16");
static_assert(HASP_WIRE_HEADER_SIZE + 11 + HASP_NAME_SIZE_MAX + HASP_VALUE_SIZE_MAX <=
		      HASP_DATAGRAM_SIZE_MAX,
	      "the largest KV_PUT and KV_GET reply fit one datagram");

/*
 * Header, 44 bytes (docs/PROTOCOL.md "Header"):
 *
 *   offset size field
 *   0      4    magic 0x50534148 ("HASP")
 *   4      1    version
 *   5      1    opcode
 *   6      2    flags
 *   8      8    session id
 *   16     8    sequence number
 *   24     2    body size
 *   26     2    status
 *   28     16   authentication tag (zero in v1)
 *
 * Bytes 0..23 keep this meaning in every version, so that a server can
 * answer a version it does not speak with BAD_VERSION.
 */
enum {
	OFF_MAGIC = 0,
	OFF_VERSION = 4,
	OFF_OPCODE = 5,
	OFF_FLAGS = 6,
	OFF_SESSION = 8,
	OFF_SEQ = 16,
	OFF_BODY_SIZE = 24,
	OFF_STATUS = 26,
	OFF_AUTH_TAG = 28,
};

/* Which direction a caller accepts. */
enum direction { DIR_ANY, DIR_REQUEST, DIR_REPLY };

static bool opcode_known(uint8_t opcode)
{
	switch (opcode) {
	case HASP_OP_SESSION_OPEN:
	case HASP_OP_SESSION_KEEPALIVE:
	case HASP_OP_SESSION_CLOSE:
	case HASP_OP_LEASE_GRANT:
	case HASP_OP_LEASE_KEEPALIVE:
	case HASP_OP_LEASE_REVOKE:
	case HASP_OP_ACQUIRE:
	case HASP_OP_RELEASE:
	case HASP_OP_RENEW:
	case HASP_OP_CHECK:
	case HASP_OP_LOCK_READ:
	case HASP_OP_CANCEL:
	case HASP_OP_WATCH:
	case HASP_OP_UNWATCH:
	case HASP_OP_EVENT:
	case HASP_OP_WATCH_COUNT:
	case HASP_OP_WATCH_STATUS:
	case HASP_OP_KV_PUT:
	case HASP_OP_KV_GET:
	case HASP_OP_KV_DELETE:
	case HASP_OP_KV_CAS:
	case HASP_OP_KV_RANGE:
		return true;
	default:
		return false;
	}
}

/* The header rules after magic and version, shared by both directions of
 * the codec. */
static int header_check(const struct hasp_wire_header *h, enum direction dir)
{
	bool reply = (h->flags & HASP_WIRE_F_REPLY) != 0;

	if ((h->flags & ~HASP_WIRE_F_KNOWN) != 0)
		return -HASP_EFLAGS;
	if ((dir == DIR_REQUEST && reply) || (dir == DIR_REPLY && !reply))
		return -HASP_EFLAGS;
	if (!reply) {
		/* Clients never send events. */
		if (!opcode_known(h->opcode) || h->opcode == HASP_OP_EVENT)
			return -HASP_EOPCODE;
		if (h->status != 0)
			return -HASP_EINVAL;
		/* The server assigns the session id in the reply. */
		if (h->opcode == HASP_OP_SESSION_OPEN && h->session_id != 0)
			return -HASP_EINVAL;
		/* A floor needs a session whose numbers it bounds. */
		if (h->opcode == HASP_OP_SESSION_OPEN && (h->flags & HASP_WIRE_F_SEQ_FLOOR))
			return -HASP_EFLAGS;
		return 0;
	}
	if (h->flags & HASP_WIRE_F_SEQ_FLOOR)
		return -HASP_EFLAGS; /* a request's flag */
	if (h->status >= HASP_STATUS_COUNT)
		return -HASP_EINVAL;
	/* These two answer requests this server could not parse, so they echo
	 * an opcode that may be unknown here (from a newer client). */
	if (h->status == HASP_STATUS_BAD_OPCODE || h->status == HASP_STATUS_BAD_VERSION)
		return 0;
	return opcode_known(h->opcode) ? 0 : -HASP_EOPCODE;
}

static int decode(const void *datagram, size_t size, struct hasp_wire_msg *m, enum direction dir)
{
	const uint8_t *p = datagram;
	struct wire_codec c = { .encode = false };
	int rc;

	HASP_ASSERT(m != NULL);
	HASP_ASSERT(datagram != NULL || size == 0);
	memset(m, 0, sizeof(*m));
	if (size < HASP_WIRE_HEADER_SIZE)
		return -HASP_ETRUNCATED;
	if (get_u32le(p + OFF_MAGIC) != HASP_WIRE_MAGIC)
		return -HASP_EMAGIC;
	/* Fill the header first: an answerable error needs session and seq. */
	m->hdr.version = p[OFF_VERSION];
	m->hdr.opcode = p[OFF_OPCODE];
	m->hdr.flags = get_u16le(p + OFF_FLAGS);
	m->hdr.session_id = get_u64le(p + OFF_SESSION);
	m->hdr.seq = get_u64le(p + OFF_SEQ);
	m->hdr.body_size = get_u16le(p + OFF_BODY_SIZE);
	m->hdr.status = get_u16le(p + OFF_STATUS);
	if (size > HASP_DATAGRAM_SIZE_MAX)
		return -HASP_ETOOBIG;
	if (m->hdr.version < HASP_WIRE_VERSION_MIN || m->hdr.version > HASP_WIRE_VERSION)
		return -HASP_EVERSION;
	if ((rc = header_check(&m->hdr, dir)) != 0)
		return rc;
	if (m->hdr.body_size != size - HASP_WIRE_HEADER_SIZE)
		return -HASP_ELENGTH;
	memcpy(m->hdr.tag, p + OFF_AUTH_TAG, HASP_AUTH_TAG_SIZE);
	/* v1 has no authentication: a tag there means the sender expected a
	 * check that v1 cannot do. v2's tag is checked by the caller, who
	 * knows the key (common/wire_auth.h). */
	for (size_t i = 0; m->hdr.version == 1 && i < HASP_AUTH_TAG_SIZE; i++) {
		if (p[OFF_AUTH_TAG + i] != 0)
			return -HASP_ENOTSUP;
	}

	byte_reader_init(&c.r, p + HASP_WIRE_HEADER_SIZE, m->hdr.body_size);
	if ((rc = wire_body_codec(&c, m)) != 0)
		return rc;
	if (c.r.failed || c.r.left != 0)
		return -HASP_ELENGTH;
	return wire_body_check(m);
}

int hasp_wire_decode(const void *datagram, size_t size, struct hasp_wire_msg *msg)
{
	return decode(datagram, size, msg, DIR_ANY);
}

int hasp_wire_decode_request(const void *datagram, size_t size, struct hasp_wire_msg *msg)
{
	return decode(datagram, size, msg, DIR_REQUEST);
}

int hasp_wire_decode_reply(const void *datagram, size_t size, struct hasp_wire_msg *msg)
{
	return decode(datagram, size, msg, DIR_REPLY);
}

/* Writes the header with body size `body_size` into buf (44 bytes). */
static void header_write(const struct hasp_wire_header *h, uint16_t body_size, uint8_t *buf)
{
	put_u32le(buf + OFF_MAGIC, HASP_WIRE_MAGIC);
	buf[OFF_VERSION] = h->version == 2 ? 2 : 1;
	buf[OFF_OPCODE] = h->opcode;
	put_u16le(buf + OFF_FLAGS, h->flags);
	put_u64le(buf + OFF_SESSION, h->session_id);
	put_u64le(buf + OFF_SEQ, h->seq);
	put_u16le(buf + OFF_BODY_SIZE, body_size);
	put_u16le(buf + OFF_STATUS, h->status);
	memset(buf + OFF_AUTH_TAG, 0, HASP_AUTH_TAG_SIZE);
}

int hasp_wire_encode(const struct hasp_wire_msg *msg, void *buf, size_t buf_size)
{
	struct wire_codec c = { .encode = true };
	/* The codec walks a mutable message in both directions; encoding only
	 * reads it, so work on a copy rather than cast const away. */
	struct hasp_wire_msg m = *msg;
	size_t limit = buf_size < HASP_DATAGRAM_SIZE_MAX ? buf_size : HASP_DATAGRAM_SIZE_MAX;
	int rc;

	m.hdr.version = m.hdr.version == 2 ? 2 : 1;
	HASP_ASSERT(buf != NULL || buf_size == 0);
	if ((rc = header_check(&m.hdr, DIR_ANY)) != 0)
		return rc;
	if ((rc = wire_body_check(&m)) != 0)
		return rc;
	if (limit < HASP_WIRE_HEADER_SIZE)
		return -HASP_ENOSPC;
	byte_writer_init(&c.w, (uint8_t *)buf + HASP_WIRE_HEADER_SIZE,
			 limit - HASP_WIRE_HEADER_SIZE);
	rc = wire_body_codec(&c, &m);
	HASP_ASSERT(rc == 0); /* header_check accepted the opcode */
	if (c.w.failed) {
		/* Too big for a datagram is the message's fault; too big for
		 * a small buffer is the caller's. */
		return buf_size < HASP_DATAGRAM_SIZE_MAX ? -HASP_ENOSPC : -HASP_ETOOBIG;
	}
	HASP_ASSERT(c.w.written <= HASP_DATAGRAM_SIZE_MAX - HASP_WIRE_HEADER_SIZE);
	header_write(&m.hdr, (uint16_t)c.w.written, buf);
	return (int)(HASP_WIRE_HEADER_SIZE + c.w.written);
}

int hasp_wire_encode_kv_range_reply(const struct hasp_wire_header *hdr,
				    const struct hasp_wire_kv_entry *entries, size_t entry_count,
				    bool more_after, void *buf, size_t buf_size,
				    size_t *packed_count)
{
	size_t limit = buf_size < HASP_DATAGRAM_SIZE_MAX ? buf_size : HASP_DATAGRAM_SIZE_MAX;
	uint8_t *out = buf;
	struct hasp_wire_header h = *hdr;
	struct byte_writer w;
	size_t packed = 0;
	uint8_t flags;

	HASP_ASSERT(packed_count != NULL);
	HASP_ASSERT(entries != NULL || entry_count == 0);
	*packed_count = 0;
	h.opcode = HASP_OP_KV_RANGE;
	h.flags = HASP_WIRE_F_REPLY;
	h.status = HASP_STATUS_OK;
	if (limit < HASP_WIRE_HEADER_SIZE + 3)
		return -HASP_ENOSPC;
	byte_writer_init(&w, out + HASP_WIRE_HEADER_SIZE + 3, limit - HASP_WIRE_HEADER_SIZE - 3);
	/* Pack whole entries in order until the next one does not fit: the
	 * client continues with start-after = the last key it got. */
	for (; packed < entry_count && packed < UINT16_MAX; packed++) {
		const struct hasp_wire_kv_entry *e = &entries[packed];
		if (!wire_body_name_ok(&e->key))
			return -HASP_ENAME;
		int rc = wire_body_value_check(&e->value);
		if (rc != 0)
			return rc;
		if (HASP_WIRE_KV_ENTRY_FIXED_SIZE + e->key.size + e->value.size > w.left)
			break;
		byte_writer_u64(&w, e->revision);
		byte_writer_u8(&w, (uint8_t)e->key.size);
		byte_writer_u16(&w, (uint16_t)e->value.size);
		byte_writer_copy(&w, e->key.data, e->key.size);
		byte_writer_copy(&w, e->value.data, e->value.size);
	}
	HASP_ASSERT(!w.failed);
	flags = (packed < entry_count || more_after) ? HASP_WIRE_RANGE_MORE : 0;
	put_u16le(out + HASP_WIRE_HEADER_SIZE, (uint16_t)packed);
	out[HASP_WIRE_HEADER_SIZE + 2] = flags;
	header_write(&h, (uint16_t)(3 + w.written), out);
	*packed_count = packed;
#ifdef HASP_DEBUG_ASSERTS
	{
		struct hasp_wire_msg check;
		HASP_DASSERT(hasp_wire_decode_reply(out, HASP_WIRE_HEADER_SIZE + 3 + w.written,
						    &check) == 0);
	}
#endif
	return (int)(HASP_WIRE_HEADER_SIZE + 3 + w.written);
}

void hasp_wire_kv_iter_init(struct hasp_wire_kv_iter *it, const struct hasp_wire_kv_entries *e)
{
	HASP_ASSERT(it != NULL);
	HASP_ASSERT(e != NULL);
	it->pos = e->entries.data;
	it->left = e->entries.size;
	it->entries_left = e->entry_count;
}

bool hasp_wire_kv_iter_next(struct hasp_wire_kv_iter *it, struct hasp_wire_kv_entry *entry)
{
	struct byte_reader r;

	if (it->entries_left == 0)
		return false;
	byte_reader_init(&r, it->pos, it->left);
	entry->revision = byte_reader_u64(&r);
	entry->key.size = byte_reader_u8(&r);
	entry->value.size = byte_reader_u16(&r);
	entry->key.data = byte_reader_take(&r, entry->key.size);
	entry->value.data = byte_reader_take(&r, entry->value.size);
	/* The decoder validated every entry; a failure here is a caller that
	 * built the iterator from an unvalidated message. */
	HASP_ASSERT(!r.failed);
	it->pos = r.pos;
	it->left = r.left;
	it->entries_left--;
	return true;
}

void hasp_wire_reply_init(struct hasp_wire_msg *reply, const struct hasp_wire_header *request,
			  enum hasp_status status)
{
	HASP_ASSERT(reply != NULL);
	HASP_ASSERT(request != NULL);
	memset(reply, 0, sizeof(*reply));
	/* A BAD_VERSION answer to an unknown version is written in v1. */
	reply->hdr.version = request->version == 2 ? 2 : 1;
	reply->hdr.opcode = request->opcode;
	reply->hdr.flags = HASP_WIRE_F_REPLY;
	reply->hdr.status = (uint16_t)status;
	reply->hdr.session_id = request->session_id;
	reply->hdr.seq = request->seq;
}

enum hasp_status hasp_wire_error_status(int err)
{
	switch (err) {
	case -HASP_EVERSION:
		return HASP_STATUS_BAD_VERSION;
	case -HASP_EOPCODE:
		return HASP_STATUS_BAD_OPCODE;
	case -HASP_ENAME:
		return HASP_STATUS_BAD_NAME;
	case -HASP_ERANGE:
		return HASP_STATUS_BAD_TTL;
	case -HASP_ETOOBIG:
		return HASP_STATUS_TOO_LARGE;
	default:
		return HASP_STATUS_BAD_REQUEST;
	}
}

bool hasp_wire_op_is_command(uint8_t opcode)
{
	switch (opcode) {
	case HASP_OP_LOCK_READ:
	case HASP_OP_CHECK:
	case HASP_OP_KV_GET:
	case HASP_OP_KV_RANGE:
	case HASP_OP_WATCH:
	case HASP_OP_UNWATCH:
	case HASP_OP_WATCH_COUNT:
	case HASP_OP_WATCH_STATUS:
		return false;
	default:
		return true;
	}
}

bool hasp_wire_error_answerable(int err, const struct hasp_wire_header *hdr)
{
	HASP_ASSERT(err < 0);
	HASP_ASSERT(hdr != NULL);
	if (err == -HASP_ETRUNCATED || err == -HASP_EMAGIC)
		return false;
	return (hdr->flags & HASP_WIRE_F_REPLY) == 0;
}
