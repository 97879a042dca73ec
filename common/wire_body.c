/*
 * The bodies of wire protocol v1 (common/wire.c has the header and the entry
 * points): codec_request and codec_reply hold each body layout once and walk
 * it in both directions; request_check and reply_check hold the semantic
 * rules, run on a decoded message and on one about to be encoded. The
 * layout tables here are the ones of docs/PROTOCOL.md.
 */
#include "common/wire_body.h"

#include "common/assert.h"
#include "common/limits.h"
#include "hasp/errors.h"

static void c_u8(struct wire_codec *c, uint8_t *v)
{
	if (c->encode)
		byte_writer_u8(&c->w, *v);
	else
		*v = byte_reader_u8(&c->r);
}

static void c_u16(struct wire_codec *c, uint16_t *v)
{
	if (c->encode)
		byte_writer_u16(&c->w, *v);
	else
		*v = byte_reader_u16(&c->r);
}

static void c_u32(struct wire_codec *c, uint32_t *v)
{
	if (c->encode)
		byte_writer_u32(&c->w, *v);
	else
		*v = byte_reader_u32(&c->r);
}

static void c_u64(struct wire_codec *c, uint64_t *v)
{
	if (c->encode)
		byte_writer_u64(&c->w, *v);
	else
		*v = byte_reader_u64(&c->r);
}

static void c_bytes(struct wire_codec *c, uint8_t *v, size_t size)
{
	if (c->encode)
		byte_writer_copy(&c->w, v, size);
	else
		byte_reader_copy(&c->r, v, size);
}

/* Size prefixes. The checks ran before encoding, so sizes fit their field. */
static void c_size8(struct wire_codec *c, struct hasp_wire_bytes *b)
{
	uint8_t v = (uint8_t)b->size;

	HASP_ASSERT(!c->encode || b->size <= UINT8_MAX);
	c_u8(c, &v);
	b->size = v;
}

static void c_size16(struct wire_codec *c, struct hasp_wire_bytes *b)
{
	uint16_t v = (uint16_t)b->size;

	HASP_ASSERT(!c->encode || b->size <= UINT16_MAX);
	c_u16(c, &v);
	b->size = v;
}

/* The bytes of a string whose size was read before (zero-copy). */
static void c_data(struct wire_codec *c, struct hasp_wire_bytes *b)
{
	if (c->encode) {
		byte_writer_copy(&c->w, b->data, b->size);
	} else {
		b->data = byte_reader_take(&c->r, b->size);
		if (b->data == NULL)
			b->size = 0;
	}
}

/* The rest of the body (range entries, validated by the checks). */
static void c_rest(struct wire_codec *c, struct hasp_wire_bytes *b)
{
	if (!c->encode)
		b->size = c->r.left;
	c_data(c, b);
}

/*
 * Request bodies (docs/PROTOCOL.md "Request bodies"); n = name size, k = key size,
 * v = value size, e = expected value size.
 *
 * SESSION_OPEN (12)          0 u64 client nonce, 8 u32 ttl_ms
 *   v2 (13+i)                then 12 u8 i, 13 identity (1..32 name bytes)
 * SESSION_KEEPALIVE (0), SESSION_CLOSE (0), WATCH_COUNT (0), WATCH_STATUS (0)
 * LEASE_GRANT (4)            0 u32 ttl_ms
 * LEASE_KEEPALIVE (8), LEASE_REVOKE (8)
 *                            0 u64 lease id
 * ACQUIRE (14+n)             0 u64 lease id, 8 u32 ttl_ms, 12 u8 mode,
 *                            13 u8 n, 14 name
 * RELEASE (9+n), CHECK (9+n) 0 u64 token, 8 u8 n, 9 name
 * RENEW (13+n)               0 u64 token, 8 u32 ttl_ms, 12 u8 n, 13 name
 * LOCK_READ, KV_GET, KV_DELETE (1+n)
 *                            0 u8 n, 1 name
 * WATCH, UNWATCH (2+n)       0 u8 flags, 1 u8 n, 2 name
 * KV_PUT (11+k+v)            0 u64 lease id, 8 u8 k, 9 u16 v, 11 key, value
 * KV_CAS (22+k+e+v)          0 u64 expected revision, 8 u64 lease id,
 *                            16 u8 flags, 17 u8 k, 18 u16 e, 20 u16 v,
 *                            22 key, expected value, new value
 * KV_RANGE (4+p+s)           0 u16 limit, 2 u8 p, 3 u8 s, 4 prefix,
 *                            start-after key
 */
static int codec_request(struct wire_codec *c, uint8_t opcode, struct hasp_wire_msg *m)
{
	switch (opcode) {
	case HASP_OP_SESSION_OPEN:
		c_u64(c, &m->body.session_open.client_nonce);
		c_u32(c, &m->body.session_open.ttl_ms);
		if (m->hdr.version == 2) {
			c_size8(c, &m->body.session_open.identity);
			c_data(c, &m->body.session_open.identity);
		}
		return 0;
	case HASP_OP_SESSION_KEEPALIVE:
	case HASP_OP_SESSION_CLOSE:
	case HASP_OP_WATCH_COUNT:
	case HASP_OP_WATCH_STATUS:
		return 0;
	case HASP_OP_LEASE_GRANT:
		c_u32(c, &m->body.lease_grant.ttl_ms);
		return 0;
	case HASP_OP_LEASE_KEEPALIVE:
		c_u64(c, &m->body.lease_keepalive.lease_id);
		return 0;
	case HASP_OP_LEASE_REVOKE:
		c_u64(c, &m->body.lease_revoke.lease_id);
		return 0;
	case HASP_OP_ACQUIRE: {
		struct hasp_wire_acquire *b = &m->body.acquire;
		c_u64(c, &b->lease_id);
		c_u32(c, &b->ttl_ms);
		c_u8(c, &b->mode);
		c_size8(c, &b->name);
		c_data(c, &b->name);
		return 0;
	}
	case HASP_OP_RELEASE:
	case HASP_OP_CHECK: {
		/* release and check share one layout and one union slot type. */
		struct hasp_wire_name_token *b =
			opcode == HASP_OP_RELEASE ? &m->body.release : &m->body.check;
		c_u64(c, &b->token);
		c_size8(c, &b->name);
		c_data(c, &b->name);
		return 0;
	}
	case HASP_OP_RENEW: {
		struct hasp_wire_renew *b = &m->body.renew;
		c_u64(c, &b->token);
		c_u32(c, &b->ttl_ms);
		c_size8(c, &b->name);
		c_data(c, &b->name);
		return 0;
	}
	case HASP_OP_LOCK_READ:
	case HASP_OP_CANCEL:
	case HASP_OP_KV_GET:
	case HASP_OP_KV_DELETE: {
		struct hasp_wire_name_only *b = opcode == HASP_OP_LOCK_READ ? &m->body.lock_read
					      : opcode == HASP_OP_CANCEL    ? &m->body.cancel
					      : opcode == HASP_OP_KV_GET    ? &m->body.kv_get
									    : &m->body.kv_delete;
		c_size8(c, &b->name);
		c_data(c, &b->name);
		return 0;
	}
	case HASP_OP_WATCH:
	case HASP_OP_UNWATCH: {
		struct hasp_wire_watch *b =
			opcode == HASP_OP_WATCH ? &m->body.watch : &m->body.unwatch;
		c_u8(c, &b->flags);
		c_size8(c, &b->name);
		c_data(c, &b->name);
		return 0;
	}
	case HASP_OP_KV_PUT: {
		struct hasp_wire_kv_put *b = &m->body.kv_put;
		c_u64(c, &b->lease_id);
		c_size8(c, &b->key);
		c_size16(c, &b->value);
		c_data(c, &b->key);
		c_data(c, &b->value);
		return 0;
	}
	case HASP_OP_KV_CAS: {
		struct hasp_wire_kv_cas *b = &m->body.kv_cas;
		c_u64(c, &b->expected_revision);
		c_u64(c, &b->lease_id);
		c_u8(c, &b->flags);
		c_size8(c, &b->key);
		c_size16(c, &b->expected_value);
		c_size16(c, &b->value);
		c_data(c, &b->key);
		c_data(c, &b->expected_value);
		c_data(c, &b->value);
		return 0;
	}
	case HASP_OP_KV_RANGE: {
		struct hasp_wire_kv_range *b = &m->body.kv_range;
		c_u16(c, &b->limit);
		c_size8(c, &b->prefix);
		c_size8(c, &b->start_after);
		c_data(c, &b->prefix);
		c_data(c, &b->start_after);
		return 0;
	}
	default:
		return -HASP_EOPCODE;
	}
}

/*
 * Reply bodies (docs/PROTOCOL.md "Reply bodies"), chosen by status, then by
 * opcode for OK:
 *
 * GRANTED (20)      0 u64 token, 8 u64 lease id, 16 u32 ttl_ms
 * QUEUED (4)        0 u32 position
 * BUSY (8)          0 u64 holder token
 * NOT_LEADER (11)   0 u32 leader id, 4 u8[4] IPv4, 8 u16 UDP port, 10 u8 known
 * BAD_VERSION (2)   0 u8 lowest version, 1 u8 highest version
 * OK to SESSION_OPEN (12)          0 u64 session id, 8 u32 ttl_ms
 * OK to SESSION_KEEPALIVE (4)      0 u32 ttl_ms
 * OK to WATCH_COUNT (4)            0 u32 watch count
 * OK to WATCH_STATUS (16)          0 u32 watch count, 4 u32 last event sub,
 *                                  8 u64 last event index
 * OK to LEASE_GRANT, LEASE_KEEPALIVE (12)
 *                                  0 u64 lease id, 8 u32 ttl_ms
 * OK to LOCK_READ (32)             0 u64 holder session, 8 u64 token,
 *                                  16 u64 lease id, 24 u32 remaining ttl_ms,
 *                                  28 u32 waiter count
 * OK to KV_PUT, KV_DELETE, KV_CAS (8)
 *                                  0 u64 revision
 * OK to KV_GET (18+v)              0 u64 revision, 8 u64 lease id, 16 u16 v,
 *                                  18 value
 * OK to KV_RANGE (3+entries)       0 u16 entry count, 2 u8 flags, 3 entries;
 *                                  entry: 0 u64 revision, 8 u8 k, 9 u16 v,
 *                                  11 key, value
 * EVENT (40+n+v)                   0 u64 revision or token, 8 u8 event type,
 *                                  9 u8 n, 10 u16 v, 12 u64 lease id,
 *                                  20 u32 ttl_ms, 24 u32 sub, 28 u32 prev sub,
 *                                  32 u64 prev index, 40 name, value
 * Every other status: empty body.
 */
static int codec_reply(struct wire_codec *c, uint8_t opcode, uint16_t status,
		       struct hasp_wire_msg *m)
{
	switch (status) {
	case HASP_STATUS_GRANTED:
		c_u64(c, &m->body.granted.token);
		c_u64(c, &m->body.granted.lease_id);
		c_u32(c, &m->body.granted.ttl_ms);
		return 0;
	case HASP_STATUS_QUEUED:
		c_u32(c, &m->body.queued.position);
		return 0;
	case HASP_STATUS_BUSY:
		c_u64(c, &m->body.busy.holder_token);
		return 0;
	case HASP_STATUS_COMPARE_FAILED: /* the key's mod revision, 0: absent */
		c_u64(c, &m->body.kv_revision.revision);
		return 0;
	case HASP_STATUS_NOT_LEADER:
		c_u32(c, &m->body.not_leader.leader_id);
		c_bytes(c, m->body.not_leader.ipv4, 4);
		c_u16(c, &m->body.not_leader.port);
		c_u8(c, &m->body.not_leader.known);
		return 0;
	case HASP_STATUS_BAD_VERSION:
		c_u8(c, &m->body.bad_version.version_min);
		c_u8(c, &m->body.bad_version.version_max);
		return 0;
	case HASP_STATUS_OK:
		break;
	default:
		return 0;
	}
	switch (opcode) {
	case HASP_OP_SESSION_OPEN:
		c_u64(c, &m->body.session_opened.session_id);
		c_u32(c, &m->body.session_opened.ttl_ms);
		return 0;
	case HASP_OP_SESSION_KEEPALIVE:
		c_u32(c, &m->body.session_alive.ttl_ms);
		return 0;
	case HASP_OP_WATCH_COUNT:
		c_u32(c, &m->body.watch_count.count);
		return 0;
	case HASP_OP_WATCH_STATUS:
		c_u32(c, &m->body.watch_status.count);
		c_u32(c, &m->body.watch_status.last_event_sub);
		c_u64(c, &m->body.watch_status.last_event_index);
		return 0;
	case HASP_OP_LEASE_GRANT:
	case HASP_OP_LEASE_KEEPALIVE:
		c_u64(c, &m->body.lease_ok.lease_id);
		c_u32(c, &m->body.lease_ok.ttl_ms);
		return 0;
	case HASP_OP_LOCK_READ: {
		struct hasp_wire_lock_info *b = &m->body.lock_info;
		c_u64(c, &b->holder_session_id);
		c_u64(c, &b->token);
		c_u64(c, &b->lease_id);
		c_u32(c, &b->ttl_remaining_ms);
		c_u32(c, &b->waiter_count);
		return 0;
	}
	case HASP_OP_KV_PUT:
	case HASP_OP_KV_DELETE:
	case HASP_OP_KV_CAS:
		c_u64(c, &m->body.kv_revision.revision);
		return 0;
	case HASP_OP_KV_GET: {
		struct hasp_wire_kv_value *b = &m->body.kv_value;
		c_u64(c, &b->revision);
		c_u64(c, &b->lease_id);
		c_size16(c, &b->value);
		c_data(c, &b->value);
		return 0;
	}
	case HASP_OP_KV_RANGE: {
		struct hasp_wire_kv_entries *b = &m->body.kv_entries;
		c_u16(c, &b->entry_count);
		c_u8(c, &b->flags);
		c_rest(c, &b->entries);
		return 0;
	}
	case HASP_OP_EVENT: {
		struct hasp_wire_event *b = &m->body.event;
		c_u64(c, &b->revision);
		c_u8(c, &b->type);
		c_size8(c, &b->name);
		c_size16(c, &b->value);
		c_u64(c, &b->lease_id);
		c_u32(c, &b->ttl_ms);
		c_u32(c, &b->sub);
		c_u32(c, &b->prev_sub);
		c_u64(c, &b->prev_index);
		c_data(c, &b->name);
		c_data(c, &b->value);
		return 0;
	}
	default:
		return 0; /* OK with an empty body */
	}
}

bool hasp_name_valid(const void *name, size_t size)
{
	const uint8_t *p = name;

	if (size == 0 || size > HASP_NAME_SIZE_MAX || p == NULL)
		return false;
	for (size_t i = 0; i < size; i++) {
		if (p[i] < HASP_NAME_BYTE_MIN || p[i] > HASP_NAME_BYTE_MAX)
			return false;
	}
	return true;
}

/* A name that may be empty: range prefixes and start-after keys. */
static bool name_or_empty_valid(const struct hasp_wire_bytes *b)
{
	return b->size == 0 || hasp_name_valid(b->data, b->size);
}

bool wire_body_name_ok(const struct hasp_wire_bytes *b)
{
	return hasp_name_valid(b->data, b->size);
}

/* A value's bytes are arbitrary; only its size is limited. An encoder's
 * caller may leave data NULL only for an empty value. */
int wire_body_value_check(const struct hasp_wire_bytes *b)
{
	if (b->size > HASP_VALUE_SIZE_MAX)
		return -HASP_ETOOBIG;
	if (b->size > 0 && b->data == NULL)
		return -HASP_EINVAL;
	return 0;
}

/* Requests carry TTLs a client chooses: the whole range is enforced. */
static bool ttl_ok(uint32_t ttl_ms)
{
	return ttl_ms >= HASP_TTL_MS_MIN && ttl_ms <= HASP_TTL_MS_MAX;
}

/* Walks packed KV_RANGE entries: exactly `count` well-formed entries that
 * fill `raw` to its end. */
static int kv_entries_check(const struct hasp_wire_bytes *raw, uint16_t count)
{
	struct byte_reader r;

	if (raw->size > 0 && raw->data == NULL)
		return -HASP_EINVAL;
	byte_reader_init(&r, raw->data, raw->size);
	for (uint32_t i = 0; i < count; i++) {
		struct hasp_wire_bytes key, value;
		(void)byte_reader_u64(&r);
		key.size = byte_reader_u8(&r);
		value.size = byte_reader_u16(&r);
		key.data = byte_reader_take(&r, key.size);
		value.data = byte_reader_take(&r, value.size);
		if (r.failed)
			return -HASP_ELENGTH;
		if (!wire_body_name_ok(&key))
			return -HASP_ENAME;
		if (value.size > HASP_VALUE_SIZE_MAX)
			return -HASP_ETOOBIG;
	}
	return r.left == 0 ? 0 : -HASP_ELENGTH;
}

static int request_check(uint8_t opcode, const struct hasp_wire_msg *m)
{
	int rc;

	switch (opcode) {
	case HASP_OP_SESSION_OPEN: {
		const struct hasp_wire_bytes *id = &m->body.session_open.identity;
		if (m->hdr.version == 2 ? id->size > HASP_IDENTITY_SIZE_MAX || !wire_body_name_ok(id)
					: id->size != 0)
			return -HASP_ENAME;
		return ttl_ok(m->body.session_open.ttl_ms) ? 0 : -HASP_ERANGE;
	}
	case HASP_OP_LEASE_GRANT:
		return ttl_ok(m->body.lease_grant.ttl_ms) ? 0 : -HASP_ERANGE;
	case HASP_OP_ACQUIRE: {
		const struct hasp_wire_acquire *b = &m->body.acquire;
		if (!wire_body_name_ok(&b->name))
			return -HASP_ENAME;
		if (b->mode != HASP_ACQUIRE_TRY && b->mode != HASP_ACQUIRE_WAIT)
			return -HASP_EINVAL;
		/* Either a lease or an own TTL, never both. */
		if (b->lease_id != 0)
			return b->ttl_ms == 0 ? 0 : -HASP_EINVAL;
		return ttl_ok(b->ttl_ms) ? 0 : -HASP_ERANGE;
	}
	case HASP_OP_RELEASE:
		return wire_body_name_ok(&m->body.release.name) ? 0 : -HASP_ENAME;
	case HASP_OP_CHECK:
		return wire_body_name_ok(&m->body.check.name) ? 0 : -HASP_ENAME;
	case HASP_OP_RENEW:
		if (!wire_body_name_ok(&m->body.renew.name))
			return -HASP_ENAME;
		/* 0: keep the lock's current TTL (STATE_MACHINE.md). */
		return m->body.renew.ttl_ms == 0 || ttl_ok(m->body.renew.ttl_ms) ? 0 : -HASP_ERANGE;
	case HASP_OP_LOCK_READ:
		return wire_body_name_ok(&m->body.lock_read.name) ? 0 : -HASP_ENAME;
	case HASP_OP_CANCEL:
		return wire_body_name_ok(&m->body.cancel.name) ? 0 : -HASP_ENAME;
	case HASP_OP_KV_GET:
		return wire_body_name_ok(&m->body.kv_get.name) ? 0 : -HASP_ENAME;
	case HASP_OP_KV_DELETE:
		return wire_body_name_ok(&m->body.kv_delete.name) ? 0 : -HASP_ENAME;
	case HASP_OP_WATCH:
	case HASP_OP_UNWATCH: {
		const struct hasp_wire_watch *b =
			opcode == HASP_OP_WATCH ? &m->body.watch : &m->body.unwatch;
		if ((b->flags & ~HASP_WIRE_WATCH_PREFIX) != 0)
			return -HASP_EFLAGS;
		return wire_body_name_ok(&b->name) ? 0 : -HASP_ENAME;
	}
	case HASP_OP_KV_PUT:
		if (!wire_body_name_ok(&m->body.kv_put.key))
			return -HASP_ENAME;
		return wire_body_value_check(&m->body.kv_put.value);
	case HASP_OP_KV_CAS: {
		const struct hasp_wire_kv_cas *b = &m->body.kv_cas;
		if ((b->flags & ~HASP_WIRE_CAS_VALUE) != 0)
			return -HASP_EFLAGS;
		if (!wire_body_name_ok(&b->key))
			return -HASP_ENAME;
		if ((rc = wire_body_value_check(&b->expected_value)) != 0)
			return rc;
		if ((rc = wire_body_value_check(&b->value)) != 0)
			return rc;
		/* One comparison per request, so the other operand must be unset. */
		if ((b->flags & HASP_WIRE_CAS_VALUE) ? b->expected_revision != 0
						     : b->expected_value.size != 0)
			return -HASP_EINVAL;
		return 0;
	}
	case HASP_OP_KV_RANGE:
		if (!name_or_empty_valid(&m->body.kv_range.prefix) ||
		    !name_or_empty_valid(&m->body.kv_range.start_after))
			return -HASP_ENAME;
		return 0;
	default:
		return 0;
	}
}

/* Reply TTLs may be anything up to the ceiling: a lock's remaining TTL can
 * be below the request floor. */
static int reply_ttl_check(uint32_t ttl_ms)
{
	return ttl_ms <= HASP_TTL_MS_MAX ? 0 : -HASP_ERANGE;
}

static int reply_check(uint8_t opcode, uint16_t status, const struct hasp_wire_msg *m)
{
	switch (status) {
	case HASP_STATUS_GRANTED:
		if (opcode != HASP_OP_ACQUIRE && opcode != HASP_OP_RENEW)
			return -HASP_EINVAL;
		return reply_ttl_check(m->body.granted.ttl_ms);
	case HASP_STATUS_QUEUED:
	case HASP_STATUS_BUSY:
		return opcode == HASP_OP_ACQUIRE ? 0 : -HASP_EINVAL;
	case HASP_STATUS_COMPARE_FAILED:
		return opcode == HASP_OP_KV_CAS ? 0 : -HASP_EINVAL;
	case HASP_STATUS_NOT_LEADER: {
		const struct hasp_wire_not_leader *b = &m->body.not_leader;
		if (b->known > 1)
			return -HASP_EINVAL;
		/* "Unknown" has one encoding, so re-encoding is exact. */
		if (!b->known && (b->leader_id != 0 || b->port != 0 ||
				  (b->ipv4[0] | b->ipv4[1] | b->ipv4[2] | b->ipv4[3]) != 0))
			return -HASP_EINVAL;
		return 0;
	}
	case HASP_STATUS_BAD_VERSION:
		return m->body.bad_version.version_min <= m->body.bad_version.version_max
			       ? 0
			       : -HASP_EINVAL;
	case HASP_STATUS_OK:
		break;
	case HASP_STATUS_BAD_OPCODE:
		return 0; /* also the answer to an EVENT sent as a request */
	default:
		return opcode == HASP_OP_EVENT ? -HASP_EINVAL : 0;
	}
	switch (opcode) {
	case HASP_OP_ACQUIRE:
	case HASP_OP_RENEW:
		return -HASP_EINVAL; /* they succeed with GRANTED or QUEUED */
	case HASP_OP_SESSION_OPEN:
		if (m->body.session_opened.session_id == 0)
			return -HASP_EINVAL;
		return reply_ttl_check(m->body.session_opened.ttl_ms);
	case HASP_OP_SESSION_KEEPALIVE:
		return reply_ttl_check(m->body.session_alive.ttl_ms);
	case HASP_OP_LEASE_GRANT:
	case HASP_OP_LEASE_KEEPALIVE:
		return reply_ttl_check(m->body.lease_ok.ttl_ms);
	case HASP_OP_LOCK_READ:
		return reply_ttl_check(m->body.lock_info.ttl_remaining_ms);
	case HASP_OP_KV_GET:
		return wire_body_value_check(&m->body.kv_value.value);
	case HASP_OP_KV_RANGE: {
		const struct hasp_wire_kv_entries *b = &m->body.kv_entries;
		if ((b->flags & ~HASP_WIRE_RANGE_MORE) != 0)
			return -HASP_EFLAGS;
		return kv_entries_check(&b->entries, b->entry_count);
	}
	case HASP_OP_EVENT: {
		const struct hasp_wire_event *b = &m->body.event;
		int rc;
		if (b->type < HASP_EVENT_LOCK_RELEASED || b->type > HASP_EVENT_KV_DELETED)
			return -HASP_EINVAL;
		if (!wire_body_name_ok(&b->name))
			return -HASP_ENAME;
		if ((rc = wire_body_value_check(&b->value)) != 0)
			return rc;
		/* Only a grant has a lease: a waiter bounds its validity by it. */
		/* The chain runs forward: prev is older than the event. */
		if (b->prev_index > m->hdr.seq ||
		    (b->prev_index == m->hdr.seq && b->prev_index != 0 && b->prev_sub >= b->sub))
			return -HASP_EINVAL;
		if (b->type == HASP_EVENT_LOCK_GRANTED ? b->ttl_ms > HASP_TTL_MS_MAX
						       : b->lease_id != 0 || b->ttl_ms != 0)
			return -HASP_EINVAL;
		return b->type == HASP_EVENT_KV_PUT || b->value.size == 0 ? 0 : -HASP_EINVAL;
	}
	default:
		return 0;
	}
}

int wire_body_codec(struct wire_codec *c, struct hasp_wire_msg *m)
{
	if (m->hdr.flags & HASP_WIRE_F_REPLY)
		return codec_reply(c, m->hdr.opcode, m->hdr.status, m);
	return codec_request(c, m->hdr.opcode, m);
}

int wire_body_check(const struct hasp_wire_msg *m)
{
	if (m->hdr.flags & HASP_WIRE_F_REPLY)
		return reply_check(m->hdr.opcode, m->hdr.status, m);
	return request_check(m->hdr.opcode, m);
}
