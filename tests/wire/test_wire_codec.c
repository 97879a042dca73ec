/*
 * Wire protocol v1 codec (common/wire.c): every body round-trips, golden
 * bytes pin the tables of docs/PROTOCOL.md, and the strict decoder refuses
 * each kind of bad datagram with its own error. Decoding always happens on
 * an exact-size heap copy, so ASan catches any read past the datagram.
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/bytes.h"
#include "common/limits.h"
#include "common/prng.h"
#include "hasp/errors.h"
#include "hasp/wire.h"
#include "tests/test_util.h"
#include "tests/wire/wire_samples.h"

static struct wire_sample samples[WIRE_SAMPLES_MAX];
static size_t sample_count;

/* Decodes `size` bytes from an exact-size heap copy (any direction). */
static int decode_exact(const uint8_t *data, size_t size, struct hasp_wire_msg *m,
			int (*fn)(const void *, size_t, struct hasp_wire_msg *))
{
	uint8_t *copy = hasp_alloc(size > 0 ? size : 1);
	int rc;

	assert_non_null(copy);
	if (size > 0)
		memcpy(copy, data, size);
	rc = fn(copy, size, m);
	/* The decoded message points into copy: poison nothing we still use. */
	hasp_free(copy);
	return rc;
}

static int decode_any(const uint8_t *data, size_t size)
{
	struct hasp_wire_msg m;
	return decode_exact(data, size, &m, hasp_wire_decode);
}

/* The index of the sample called `label`. */
static size_t sample(const char *label)
{
	for (size_t i = 0; i < sample_count; i++) {
		if (strcmp(samples[i].label, label) == 0)
			return i;
	}
	fail_msg("no sample %s", label);
	return 0;
}

/* The sample's encoded length, at least a header. The failure branch is
 * explicit (not assert_true) so that the compiler sees the bound: at -O3 it
 * otherwise assumes a negative length can reach the callers' memcpy. */
static int encode_sample(size_t i, uint8_t *buf)
{
	int n = hasp_wire_encode(&samples[i].msg, buf, HASP_DATAGRAM_SIZE_MAX);
	if (n < (int)HASP_WIRE_HEADER_SIZE) {
		fail_msg("sample %s: encode returned %d (%s)", samples[i].label, n,
			 n < 0 ? hasp_strerror(n) : "shorter than a header");
		return (int)HASP_WIRE_HEADER_SIZE; /* not reached: fail_msg ends the test */
	}
	return n;
}

static void assert_bytes_equal(struct hasp_wire_bytes a, struct hasp_wire_bytes b)
{
	assert_int_equal(a.size, b.size);
	if (a.size > 0)
		assert_memory_equal(a.data, b.data, a.size);
}

/* Field-by-field comparison of the body the header selects. */
static void assert_body_equal(const struct hasp_wire_msg *a, const struct hasp_wire_msg *b)
{
	assert_int_equal(a->hdr.opcode, b->hdr.opcode);
	assert_int_equal(a->hdr.flags, b->hdr.flags);
	assert_int_equal(a->hdr.status, b->hdr.status);
	assert_int_equal(a->hdr.session_id, b->hdr.session_id);
	assert_int_equal(a->hdr.seq, b->hdr.seq);
	if (!(a->hdr.flags & HASP_WIRE_F_REPLY)) {
		switch (a->hdr.opcode) {
		case HASP_OP_SESSION_OPEN:
			assert_int_equal(a->body.session_open.client_nonce,
					 b->body.session_open.client_nonce);
			assert_int_equal(a->body.session_open.ttl_ms, b->body.session_open.ttl_ms);
			break;
		case HASP_OP_LEASE_GRANT:
			assert_int_equal(a->body.lease_grant.ttl_ms, b->body.lease_grant.ttl_ms);
			break;
		case HASP_OP_LEASE_KEEPALIVE:
		case HASP_OP_LEASE_REVOKE:
			assert_int_equal(a->body.lease_revoke.lease_id, b->body.lease_revoke.lease_id);
			break;
		case HASP_OP_ACQUIRE:
			assert_bytes_equal(a->body.acquire.name, b->body.acquire.name);
			assert_int_equal(a->body.acquire.lease_id, b->body.acquire.lease_id);
			assert_int_equal(a->body.acquire.ttl_ms, b->body.acquire.ttl_ms);
			assert_int_equal(a->body.acquire.mode, b->body.acquire.mode);
			break;
		case HASP_OP_RELEASE:
		case HASP_OP_CHECK:
			assert_bytes_equal(a->body.check.name, b->body.check.name);
			assert_int_equal(a->body.check.token, b->body.check.token);
			break;
		case HASP_OP_RENEW:
			assert_bytes_equal(a->body.renew.name, b->body.renew.name);
			assert_int_equal(a->body.renew.token, b->body.renew.token);
			assert_int_equal(a->body.renew.ttl_ms, b->body.renew.ttl_ms);
			break;
		case HASP_OP_LOCK_READ:
		case HASP_OP_CANCEL:
		case HASP_OP_KV_GET:
		case HASP_OP_KV_DELETE:
			assert_bytes_equal(a->body.kv_get.name, b->body.kv_get.name);
			break;
		case HASP_OP_WATCH:
		case HASP_OP_UNWATCH:
			assert_bytes_equal(a->body.watch.name, b->body.watch.name);
			assert_int_equal(a->body.watch.flags, b->body.watch.flags);
			break;
		case HASP_OP_KV_PUT:
			assert_bytes_equal(a->body.kv_put.key, b->body.kv_put.key);
			assert_bytes_equal(a->body.kv_put.value, b->body.kv_put.value);
			assert_int_equal(a->body.kv_put.lease_id, b->body.kv_put.lease_id);
			break;
		case HASP_OP_KV_CAS:
			assert_bytes_equal(a->body.kv_cas.key, b->body.kv_cas.key);
			assert_bytes_equal(a->body.kv_cas.expected_value,
					   b->body.kv_cas.expected_value);
			assert_bytes_equal(a->body.kv_cas.value, b->body.kv_cas.value);
			assert_int_equal(a->body.kv_cas.expected_revision,
					 b->body.kv_cas.expected_revision);
			assert_int_equal(a->body.kv_cas.lease_id, b->body.kv_cas.lease_id);
			assert_int_equal(a->body.kv_cas.flags, b->body.kv_cas.flags);
			break;
		case HASP_OP_KV_RANGE:
			assert_bytes_equal(a->body.kv_range.prefix, b->body.kv_range.prefix);
			assert_bytes_equal(a->body.kv_range.start_after, b->body.kv_range.start_after);
			assert_int_equal(a->body.kv_range.limit, b->body.kv_range.limit);
			break;
		}
		return;
	}
	switch (a->hdr.status) {
	case HASP_STATUS_GRANTED:
		assert_int_equal(a->body.granted.token, b->body.granted.token);
		assert_int_equal(a->body.granted.lease_id, b->body.granted.lease_id);
		assert_int_equal(a->body.granted.ttl_ms, b->body.granted.ttl_ms);
		return;
	case HASP_STATUS_QUEUED:
		assert_int_equal(a->body.queued.position, b->body.queued.position);
		return;
	case HASP_STATUS_BUSY:
		assert_int_equal(a->body.busy.holder_token, b->body.busy.holder_token);
		return;
	case HASP_STATUS_NOT_LEADER:
		assert_memory_equal(&a->body.not_leader.ipv4, &b->body.not_leader.ipv4, 4);
		assert_int_equal(a->body.not_leader.leader_id, b->body.not_leader.leader_id);
		assert_int_equal(a->body.not_leader.port, b->body.not_leader.port);
		assert_int_equal(a->body.not_leader.known, b->body.not_leader.known);
		return;
	case HASP_STATUS_BAD_VERSION:
		assert_int_equal(a->body.bad_version.version_min, b->body.bad_version.version_min);
		assert_int_equal(a->body.bad_version.version_max, b->body.bad_version.version_max);
		return;
	case HASP_STATUS_OK:
		break;
	default:
		return;
	}
	switch (a->hdr.opcode) {
	case HASP_OP_SESSION_OPEN:
		assert_int_equal(a->body.session_opened.session_id, b->body.session_opened.session_id);
		assert_int_equal(a->body.session_opened.ttl_ms, b->body.session_opened.ttl_ms);
		break;
	case HASP_OP_SESSION_KEEPALIVE:
		assert_int_equal(a->body.session_alive.ttl_ms, b->body.session_alive.ttl_ms);
		break;
	case HASP_OP_WATCH_COUNT:
		assert_int_equal(a->body.watch_count.count, b->body.watch_count.count);
		break;
	case HASP_OP_WATCH_STATUS:
		assert_memory_equal(&a->body.watch_status, &b->body.watch_status,
				    sizeof(a->body.watch_status));
		break;
	case HASP_OP_LEASE_GRANT:
	case HASP_OP_LEASE_KEEPALIVE:
		assert_int_equal(a->body.lease_ok.lease_id, b->body.lease_ok.lease_id);
		assert_int_equal(a->body.lease_ok.ttl_ms, b->body.lease_ok.ttl_ms);
		break;
	case HASP_OP_LOCK_READ:
		assert_memory_equal(&a->body.lock_info, &b->body.lock_info,
				    sizeof(a->body.lock_info));
		break;
	case HASP_OP_KV_PUT:
	case HASP_OP_KV_DELETE:
	case HASP_OP_KV_CAS:
		assert_int_equal(a->body.kv_revision.revision, b->body.kv_revision.revision);
		break;
	case HASP_OP_KV_GET:
		assert_bytes_equal(a->body.kv_value.value, b->body.kv_value.value);
		assert_int_equal(a->body.kv_value.revision, b->body.kv_value.revision);
		assert_int_equal(a->body.kv_value.lease_id, b->body.kv_value.lease_id);
		break;
	case HASP_OP_KV_RANGE:
		assert_bytes_equal(a->body.kv_entries.entries, b->body.kv_entries.entries);
		assert_int_equal(a->body.kv_entries.entry_count, b->body.kv_entries.entry_count);
		assert_int_equal(a->body.kv_entries.flags, b->body.kv_entries.flags);
		break;
	case HASP_OP_EVENT:
		assert_bytes_equal(a->body.event.name, b->body.event.name);
		assert_bytes_equal(a->body.event.value, b->body.event.value);
		assert_int_equal(a->body.event.revision, b->body.event.revision);
		assert_int_equal(a->body.event.type, b->body.event.type);
		assert_int_equal(a->body.event.lease_id, b->body.event.lease_id);
		assert_int_equal(a->body.event.ttl_ms, b->body.event.ttl_ms);
		break;
	}
}

static void test_wire_every_body_round_trips(void **state)
{
	(void)state;
	for (size_t i = 0; i < sample_count; i++) {
		uint8_t buf[HASP_DATAGRAM_SIZE_MAX], again[HASP_DATAGRAM_SIZE_MAX];
		struct hasp_wire_msg m;
		bool reply = samples[i].msg.hdr.flags & HASP_WIRE_F_REPLY;
		int n = encode_sample(i, buf);

		assert_int_equal(hasp_wire_decode(buf, (size_t)n, &m), 0);
		assert_int_equal(m.hdr.version, samples[i].msg.hdr.version == 2 ? 2 : 1);
		assert_int_equal(m.hdr.body_size, n - (int)HASP_WIRE_HEADER_SIZE);
		assert_body_equal(&samples[i].msg, &m);
		assert_int_equal(hasp_wire_encode(&m, again, sizeof(again)), n);
		assert_memory_equal(buf, again, (size_t)n);
		/* The direction-specific decoders agree with the flag. */
		assert_int_equal(hasp_wire_decode_request(buf, (size_t)n, &m),
				 reply ? -HASP_EFLAGS : 0);
		assert_int_equal(hasp_wire_decode_reply(buf, (size_t)n, &m),
				 reply ? 0 : -HASP_EFLAGS);
	}
}

/* Golden bytes pin the header and acquire tables of docs/PROTOCOL.md: the
 * round trip alone would not notice two fields swapped in both directions. */
static void test_wire_acquire_matches_documented_layout(void **state)
{
	(void)state;
	static const uint8_t golden[] = {
		'H', 'A', 'S', 'P', 1, HASP_OP_ACQUIRE, 0, 0,  /* magic version op flags */
		8, 7, 6, 5, 4, 3, 2, 1,                        /* session id */
		0x2a, 0, 0, 0, 0, 0, 0, 0,                     /* seq 42 */
		17, 0, 0, 0,                                   /* body size 17, status 0 */
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* auth tag */
		0, 0, 0, 0, 0, 0, 0, 0,                        /* lease id 0 */
		0xb8, 0x0b, 0, 0,                              /* ttl 3000 ms */
		1, 3, 'a', '/', 'b',                           /* mode wait, name */
	};
	struct hasp_wire_msg m = { 0 };
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];

	m.hdr.opcode = HASP_OP_ACQUIRE;
	m.hdr.session_id = 0x0102030405060708ull;
	m.hdr.seq = 42;
	m.body.acquire.name = wire_str("a/b");
	m.body.acquire.ttl_ms = 3000;
	m.body.acquire.mode = HASP_ACQUIRE_WAIT;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), sizeof(golden));
	assert_memory_equal(buf, golden, sizeof(golden));
}

static void test_wire_granted_and_not_leader_match_documented_layout(void **state)
{
	(void)state;
	struct hasp_wire_msg m;
	struct hasp_wire_header req = { .opcode = HASP_OP_ACQUIRE, .session_id = 9, .seq = 10 };
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	const uint8_t *body = buf + HASP_WIRE_HEADER_SIZE;

	hasp_wire_reply_init(&m, &req, HASP_STATUS_GRANTED);
	m.body.granted.token = 0x1111;
	m.body.granted.lease_id = 0x2222;
	m.body.granted.ttl_ms = 0x3333;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), HASP_WIRE_HEADER_SIZE + 20);
	assert_int_equal(get_u16le(buf + 6), HASP_WIRE_F_REPLY);
	assert_int_equal(get_u64le(buf + 8), 9);
	assert_int_equal(get_u64le(buf + 16), 10);
	assert_int_equal(get_u16le(buf + 26), HASP_STATUS_GRANTED);
	assert_int_equal(get_u64le(body), 0x1111);
	assert_int_equal(get_u64le(body + 8), 0x2222);
	assert_int_equal(get_u32le(body + 16), 0x3333);

	hasp_wire_reply_init(&m, &req, HASP_STATUS_NOT_LEADER);
	m.body.not_leader = (struct hasp_wire_not_leader){ 3, { 10, 77, 0, 3 }, 7700, 1 };
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), HASP_WIRE_HEADER_SIZE + 11);
	assert_int_equal(get_u32le(body), 3);
	assert_memory_equal(body + 4, ((uint8_t[]){ 10, 77, 0, 3 }), 4);
	assert_int_equal(get_u16le(body + 8), 7700);
	assert_int_equal(body[10], 1);
}

static void test_wire_rejects_truncated_datagrams_at_every_length(void **state)
{
	(void)state;
	for (size_t i = 0; i < sample_count; i++) {
		uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
		int n = encode_sample(i, buf);

		for (size_t len = 0; len < (size_t)n; len++) {
			int rc = decode_any(buf, len);
			assert_int_equal(rc, len < HASP_WIRE_HEADER_SIZE ? -HASP_ETRUNCATED
									 : -HASP_ELENGTH);
		}
		assert_int_equal(decode_any(buf, (size_t)n), 0);
	}
}

/* A KV_PUT whose key and value sizes the caller picks, encoded by hand so
 * that sizes the encoder refuses can be built. Returns the datagram size. */
static size_t craft_kv_put(uint8_t *buf, size_t key_size, uint8_t key_byte, size_t value_size)
{
	size_t body = 11 + key_size + value_size;
	struct hasp_wire_msg m = { 0 };

	m.hdr.opcode = HASP_OP_KV_PUT;
	m.hdr.session_id = 1;
	m.body.kv_put.key = wire_str("k");
	assert_true(hasp_wire_encode(&m, buf, HASP_DATAGRAM_SIZE_MAX) > 0);
	put_u16le(buf + 24, (uint16_t)body);
	uint8_t *b = buf + HASP_WIRE_HEADER_SIZE;
	b[8] = (uint8_t)key_size;
	put_u16le(b + 9, (uint16_t)value_size);
	memset(b + 11, key_byte, key_size);
	memset(b + 11 + key_size, 0xee, value_size);
	return HASP_WIRE_HEADER_SIZE + body;
}

static void test_wire_rejects_oversized_datagrams(void **state)
{
	(void)state;
	uint8_t *buf = hasp_calloc(1, HASP_DATAGRAM_SIZE_MAX + 1);
	struct hasp_wire_msg m = { 0 };
	static uint8_t big[HASP_VALUE_SIZE_MAX];
	char key[HASP_NAME_SIZE_MAX + 1];

	assert_non_null(buf);
	/* The largest KV_PUT fits; one more byte of datagram does not. */
	size_t n = craft_kv_put(buf, HASP_NAME_SIZE_MAX, 'k', HASP_VALUE_SIZE_MAX);
	assert_int_equal(decode_any(buf, n), 0);
	n = craft_kv_put(buf, HASP_NAME_SIZE_MAX, 'k', HASP_DATAGRAM_SIZE_MAX + 1 - 11 - 128 - 44);
	assert_int_equal(n, HASP_DATAGRAM_SIZE_MAX + 1);
	assert_int_equal(decode_any(buf, n), -HASP_ETOOBIG);

	/* A CAS with two full values cannot fit: the encoder refuses it. */
	memset(key, 'k', HASP_NAME_SIZE_MAX);
	m.hdr.opcode = HASP_OP_KV_CAS;
	m.body.kv_cas.key = (struct hasp_wire_bytes){ (uint8_t *)key, HASP_NAME_SIZE_MAX };
	m.body.kv_cas.flags = HASP_WIRE_CAS_VALUE;
	m.body.kv_cas.expected_value = (struct hasp_wire_bytes){ big, sizeof(big) };
	m.body.kv_cas.value = (struct hasp_wire_bytes){ big, sizeof(big) };
	assert_int_equal(hasp_wire_encode(&m, buf, HASP_DATAGRAM_SIZE_MAX + 1), -HASP_ETOOBIG);
	hasp_free(buf);
}

static void test_wire_encoder_refuses_small_buffer(void **state)
{
	(void)state;
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	const struct hasp_wire_msg *m = &samples[sample("req_acquire_ttl")].msg;
	int n = hasp_wire_encode(m, buf, sizeof(buf));

	assert_true(n > (int)HASP_WIRE_HEADER_SIZE);
	for (int size = 0; size < n; size++)
		assert_int_equal(hasp_wire_encode(m, buf, (size_t)size), -HASP_ENOSPC);
	assert_int_equal(hasp_wire_encode(m, buf, (size_t)n), n);
}

/* SEQ_FLOOR is a request's flag and needs a session: it decodes on a
 * request with one and is refused on SESSION_OPEN and on a reply. */
static void test_wire_seq_floor_only_on_requests_with_a_session(void **state)
{
	(void)state;
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg m;
	int n = encode_sample(sample("req_acquire_ttl"), buf);

	put_u16le(buf + 6, HASP_WIRE_F_SEQ_FLOOR);
	assert_int_equal(decode_exact(buf, (size_t)n, &m, hasp_wire_decode), 0);
	assert_int_equal(m.hdr.flags, HASP_WIRE_F_SEQ_FLOOR);
	struct hasp_wire_msg with = samples[sample("req_acquire_ttl")].msg;
	with.hdr.flags = HASP_WIRE_F_SEQ_FLOOR;
	uint8_t again[HASP_DATAGRAM_SIZE_MAX];
	assert_int_equal(hasp_wire_encode(&with, again, sizeof(again)), n);
	assert_memory_equal(again, buf, (size_t)n);

	n = encode_sample(sample("req_session_open"), buf);
	put_u16le(buf + 6, HASP_WIRE_F_SEQ_FLOOR);
	assert_int_equal(decode_any(buf, (size_t)n), -HASP_EFLAGS);
	n = encode_sample(sample("rep_granted"), buf);
	put_u16le(buf + 6, HASP_WIRE_F_REPLY | HASP_WIRE_F_SEQ_FLOOR);
	assert_int_equal(decode_any(buf, (size_t)n), -HASP_EFLAGS);
}

static void test_wire_rejects_bad_magic_version_opcode_flags(void **state)
{
	(void)state;
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	int n = encode_sample(sample("req_acquire_ttl"), buf);
	uint8_t bad[HASP_DATAGRAM_SIZE_MAX];
	static const uint8_t bad_ops[] = { 0, 4, 7, 22, 29, 31, 37, 255, HASP_OP_EVENT };
	static const uint16_t bad_flags[] = { 0x0004, 0x0100, 0x8000, 0xffff };

	memcpy(bad, buf, (size_t)n);
	bad[0] ^= 0x01;
	assert_int_equal(decode_any(bad, (size_t)n), -HASP_EMAGIC);

	for (unsigned v = 0; v < 256; v++) {
		memcpy(bad, buf, (size_t)n);
		bad[4] = (uint8_t)v;
		/* The sample is a v1 message without a tag; read as v2 it is the
		 * same message (its SESSION_OPEN body aside). */
		int want = v == 1 || (v == 2 && bad[5] != HASP_OP_SESSION_OPEN) ? 0 : -HASP_EVERSION;
		assert_int_equal(decode_any(bad, (size_t)n), want);
	}
	for (size_t i = 0; i < sizeof(bad_ops); i++) {
		memcpy(bad, buf, (size_t)n);
		bad[5] = bad_ops[i];
		assert_int_equal(decode_any(bad, (size_t)n), -HASP_EOPCODE);
	}
	for (size_t i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++) {
		memcpy(bad, buf, (size_t)n);
		put_u16le(bad + 6, bad_flags[i]);
		assert_int_equal(decode_any(bad, (size_t)n), -HASP_EFLAGS);
	}
	/* A status in a request is refused; so is an unknown status in a reply. */
	memcpy(bad, buf, (size_t)n);
	put_u16le(bad + 26, HASP_STATUS_GRANTED);
	assert_int_equal(decode_any(bad, (size_t)n), -HASP_EINVAL);
	put_u16le(bad + 6, HASP_WIRE_F_REPLY);
	put_u16le(bad + 26, HASP_STATUS_COUNT);
	assert_int_equal(decode_any(bad, (size_t)n), -HASP_EINVAL);
}

static void test_wire_rejects_unknown_body_flags(void **state)
{
	(void)state;
	struct hasp_wire_msg m = { 0 };
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	int n;

	m.hdr.opcode = HASP_OP_WATCH;
	m.body.watch.name = wire_str("a");
	m.body.watch.flags = 0x02;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_EFLAGS);
	m.body.watch.flags = HASP_WIRE_WATCH_PREFIX;
	n = hasp_wire_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	buf[HASP_WIRE_HEADER_SIZE] = 0x81;
	assert_int_equal(decode_any(buf, (size_t)n), -HASP_EFLAGS);

	for (size_t i = 0; i < sample_count; i++) {
		if (strcmp(samples[i].label, "rep_kv_range") != 0)
			continue;
		n = encode_sample(i, buf);
		buf[HASP_WIRE_HEADER_SIZE + 2] |= 0x04;
		assert_int_equal(decode_any(buf, (size_t)n), -HASP_EFLAGS);
	}
}

static void test_wire_rejects_nonzero_auth_tag(void **state)
{
	(void)state;
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	int n = encode_sample(sample("req_session_open"), buf);

	for (size_t i = 0; i < HASP_AUTH_TAG_SIZE; i++) {
		buf[28 + i] = 0x10;
		assert_int_equal(decode_any(buf, (size_t)n), -HASP_ENOTSUP);
		buf[28 + i] = 0;
	}
	assert_int_equal(decode_any(buf, (size_t)n), 0);
}

static void test_wire_rejects_lying_lengths(void **state)
{
	(void)state;
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX + 8];
	/* Acquire "jobs/leader": the name size is at body offset 13. */
	int n = encode_sample(sample("req_acquire_ttl"), buf);
	uint8_t *body = buf + HASP_WIRE_HEADER_SIZE;
	uint16_t body_size = get_u16le(buf + 24);

	/* The body size must equal the datagram remainder, both ways. */
	put_u16le(buf + 24, (uint16_t)(body_size + 1));
	assert_int_equal(decode_any(buf, (size_t)n), -HASP_ELENGTH);
	put_u16le(buf + 24, (uint16_t)(body_size - 1));
	assert_int_equal(decode_any(buf, (size_t)n), -HASP_ELENGTH);
	put_u16le(buf + 24, 0xffff);
	assert_int_equal(decode_any(buf, (size_t)n), -HASP_ELENGTH);
	put_u16le(buf + 24, body_size);
	/* Trailing bytes after a well-formed body, counted in the body size. */
	buf[n] = 'x';
	put_u16le(buf + 24, (uint16_t)(body_size + 1));
	assert_int_equal(decode_any(buf, (size_t)n + 1), -HASP_ELENGTH);
	put_u16le(buf + 24, body_size);

	/* An inner name size that runs past the body or stops short of it. */
	body[13] = (uint8_t)(body[13] + 1);
	assert_int_equal(decode_any(buf, (size_t)n), -HASP_ELENGTH);
	body[13] = (uint8_t)(body[13] - 2);
	assert_int_equal(decode_any(buf, (size_t)n), -HASP_ELENGTH);
	body[13] = 255;
	assert_int_equal(decode_any(buf, (size_t)n), -HASP_ELENGTH);

	/* A value size that lies, in a KV_PUT. */
	size_t m = craft_kv_put(buf, 3, 'k', 10);
	put_u16le(body + 9, 11);
	assert_int_equal(decode_any(buf, m), -HASP_ELENGTH);
	put_u16le(body + 9, 9);
	assert_int_equal(decode_any(buf, m), -HASP_ELENGTH);
	put_u16le(body + 9, 10);
	assert_int_equal(decode_any(buf, m), 0);
}

static void test_wire_range_entry_count_must_match_entries(void **state)
{
	(void)state;
	for (size_t i = 0; i < sample_count; i++) {
		uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
		if (strcmp(samples[i].label, "rep_kv_range") != 0)
			continue;
		int n = encode_sample(i, buf);
		uint8_t *body = buf + HASP_WIRE_HEADER_SIZE;
		put_u16le(body, 3);
		assert_int_equal(decode_any(buf, (size_t)n), -HASP_ELENGTH);
		put_u16le(body, 1);
		assert_int_equal(decode_any(buf, (size_t)n), -HASP_ELENGTH);
		put_u16le(body, 2);
		body[3 + 8] = 2; /* first key size runs into the next entry */
		assert_int_equal(decode_any(buf, (size_t)n), -HASP_ELENGTH);
		body[3 + 8] = 1;
		body[3 + 11] = ' '; /* a key with a space */
		assert_int_equal(decode_any(buf, (size_t)n), -HASP_ENAME);
	}
}

static void test_wire_name_bytes_and_sizes(void **state)
{
	(void)state;
	static const uint8_t forbidden[] = { 0x20, 0x7f, 0x00, 0x80, 0x9f, 0xff, '\n', 0x1f };
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	char name[HASP_NAME_SIZE_MAX + 1];

	memset(name, 'n', sizeof(name));
	assert_true(hasp_name_valid("!", 1));
	assert_true(hasp_name_valid("~", 1));
	assert_true(hasp_name_valid(name, HASP_NAME_SIZE_MAX));
	assert_false(hasp_name_valid(name, HASP_NAME_SIZE_MAX + 1));
	assert_false(hasp_name_valid(name, 0));
	assert_false(hasp_name_valid(NULL, 3));

	/* Through the decoder: forbidden bytes anywhere in the key. */
	for (size_t i = 0; i < sizeof(forbidden); i++) {
		assert_false(hasp_name_valid(&forbidden[i], 1));
		size_t n = craft_kv_put(buf, 5, 'a', 0);
		buf[HASP_WIRE_HEADER_SIZE + 11 + i % 5] = forbidden[i];
		assert_int_equal(decode_any(buf, n), -HASP_ENAME);
	}
	assert_int_equal(decode_any(buf, craft_kv_put(buf, 0, 'a', 4)), -HASP_ENAME);
	assert_int_equal(decode_any(buf, craft_kv_put(buf, 129, 'a', 4)), -HASP_ENAME);
	assert_int_equal(decode_any(buf, craft_kv_put(buf, 128, 'a', 4)), 0);
	assert_int_equal(decode_any(buf, craft_kv_put(buf, 1, '!', 4)), 0);

	/* And through the encoder. */
	struct hasp_wire_msg m = { 0 };
	m.hdr.opcode = HASP_OP_LOCK_READ;
	m.body.lock_read.name = (struct hasp_wire_bytes){ (uint8_t *)name, 129 };
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_ENAME);
	m.body.lock_read.name = wire_str("");
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_ENAME);
	m.body.lock_read.name = wire_str("a b");
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_ENAME);

	/* A range prefix may be empty, but not contain a forbidden byte. */
	m.hdr.opcode = HASP_OP_KV_RANGE;
	memset(&m.body, 0, sizeof(m.body));
	assert_true(hasp_wire_encode(&m, buf, sizeof(buf)) > 0);
	m.body.kv_range.start_after = wire_str("a\x7f");
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_ENAME);
}

/* Encodes an acquire with the given TTL; patches the TTL into the bytes
 * too, since the encoder refuses what the decoder must be shown. */
static void check_acquire_ttl(uint32_t ttl_ms, int expect)
{
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg m = samples[sample("req_acquire_ttl")].msg;

	m.body.acquire.ttl_ms = ttl_ms;
	int rc = hasp_wire_encode(&m, buf, sizeof(buf));
	assert_int_equal(rc < 0 ? rc : 0, expect);
	m.body.acquire.ttl_ms = 1000;
	int n = hasp_wire_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	put_u32le(buf + HASP_WIRE_HEADER_SIZE + 8, ttl_ms);
	assert_int_equal(decode_any(buf, (size_t)n), expect);
}

static void test_wire_ttl_range_is_enforced(void **state)
{
	(void)state;
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg m = { 0 };

	check_acquire_ttl(0, -HASP_ERANGE);
	check_acquire_ttl(9, -HASP_ERANGE);
	check_acquire_ttl(86400001, -HASP_ERANGE);
	check_acquire_ttl(UINT32_MAX, -HASP_ERANGE);
	check_acquire_ttl(10, 0);
	check_acquire_ttl(86400000, 0);

	m.hdr.opcode = HASP_OP_LEASE_GRANT;
	m.body.lease_grant.ttl_ms = 9;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_ERANGE);
	m.hdr.opcode = HASP_OP_SESSION_OPEN;
	m.body.session_open.ttl_ms = 86400001;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_ERANGE);
	memset(&m, 0, sizeof(m));
	m.hdr.opcode = HASP_OP_RENEW;
	m.body.renew.name = wire_str("a");
	m.body.renew.ttl_ms = 0; /* keeps the lock's TTL */
	assert_true(hasp_wire_encode(&m, buf, sizeof(buf)) > 0);
	m.body.renew.ttl_ms = 9;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_ERANGE);

	/* A lease-backed acquire carries no TTL of its own. */
	m = samples[sample("req_acquire_lease")].msg;
	assert_int_equal(m.body.acquire.ttl_ms, 0);
	assert_true(hasp_wire_encode(&m, buf, sizeof(buf)) > 0);
	m.body.acquire.ttl_ms = 1000;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_EINVAL);
}

static void test_wire_rejects_value_of_1025_bytes(void **state)
{
	(void)state;
	static uint8_t value[HASP_VALUE_SIZE_MAX + 1];
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg m = { 0 };

	assert_int_equal(decode_any(buf, craft_kv_put(buf, 3, 'k', 1025)), -HASP_ETOOBIG);
	assert_int_equal(decode_any(buf, craft_kv_put(buf, 3, 'k', 1024)), 0);
	m.hdr.opcode = HASP_OP_KV_PUT;
	m.body.kv_put.key = wire_str("k");
	m.body.kv_put.value = (struct hasp_wire_bytes){ value, sizeof(value) };
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_ETOOBIG);
	m.body.kv_put.value.size = HASP_VALUE_SIZE_MAX;
	assert_true(hasp_wire_encode(&m, buf, sizeof(buf)) > 0);
}

static void test_wire_client_rejects_request_and_server_rejects_reply(void **state)
{
	(void)state;
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg m;
	int n = encode_sample(sample("req_acquire_ttl"), buf);

	assert_int_equal(decode_exact(buf, (size_t)n, &m, hasp_wire_decode_reply), -HASP_EFLAGS);
	assert_int_equal(decode_exact(buf, (size_t)n, &m, hasp_wire_decode_request), 0);
	/* Flip the REPLY bit: the server refuses it; a client reads an OK
	 * reply to ACQUIRE, which has no body of this size. */
	buf[6] |= HASP_WIRE_F_REPLY;
	assert_int_equal(decode_exact(buf, (size_t)n, &m, hasp_wire_decode_request), -HASP_EFLAGS);
	assert_int_equal(decode_exact(buf, (size_t)n, &m, hasp_wire_decode_reply), -HASP_ELENGTH);
	/* With an empty body it parses, but OK is not an answer to ACQUIRE. */
	put_u16le(buf + 24, 0);
	assert_int_equal(decode_exact(buf, HASP_WIRE_HEADER_SIZE, &m, hasp_wire_decode_reply),
			 -HASP_EINVAL);
}

static void test_wire_reply_status_must_fit_the_opcode(void **state)
{
	(void)state;
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg m = { 0 };

	m.hdr.flags = HASP_WIRE_F_REPLY;
	m.hdr.opcode = HASP_OP_KV_GET;
	m.hdr.status = HASP_STATUS_GRANTED;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_EINVAL);
	m.hdr.status = HASP_STATUS_QUEUED;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_EINVAL);
	m.hdr.opcode = HASP_OP_EVENT;
	m.hdr.status = HASP_STATUS_NOT_FOUND;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_EINVAL);
	/* An unknown opcode may only be echoed by BAD_OPCODE and BAD_VERSION. */
	m.hdr.opcode = 99;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_EOPCODE);
	m.hdr.status = HASP_STATUS_BAD_OPCODE;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), (int)HASP_WIRE_HEADER_SIZE);
	/* NOT_LEADER "unknown" has exactly one encoding. */
	m.hdr.opcode = HASP_OP_ACQUIRE;
	m.hdr.status = HASP_STATUS_NOT_LEADER;
	m.body.not_leader.port = 1;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_EINVAL);
	m.body.not_leader.known = 2;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_EINVAL);
	/* Only KV_PUT events carry a value. */
	memset(&m.body, 0, sizeof(m.body));
	m.hdr.opcode = HASP_OP_EVENT;
	m.hdr.status = HASP_STATUS_OK;
	m.body.event.type = HASP_EVENT_LOCK_RELEASED;
	m.body.event.name = wire_str("a");
	m.body.event.value = wire_str("v");
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_EINVAL);
	m.body.event.type = 0;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_EINVAL);
	/* A session open request carries no session id yet. */
	memset(&m, 0, sizeof(m));
	m.hdr.opcode = HASP_OP_SESSION_OPEN;
	m.hdr.session_id = 5;
	m.body.session_open.ttl_ms = 1000;
	assert_int_equal(hasp_wire_encode(&m, buf, sizeof(buf)), -HASP_EINVAL);
}

static void fill_entries(struct hasp_wire_kv_entry *e, size_t count, char *keys,
			 size_t key_size, const uint8_t *value, size_t value_size)
{
	for (size_t i = 0; i < count; i++) {
		char *k = keys + i * key_size;
		memset(k, 'a' + (int)(i % 26), key_size);
		e[i].key = (struct hasp_wire_bytes){ (uint8_t *)k, key_size };
		e[i].value = (struct hasp_wire_bytes){ value, value_size };
		e[i].revision = 100 + i;
	}
}

static void test_wire_range_reply_fills_the_datagram(void **state)
{
	(void)state;
	static uint8_t value[HASP_VALUE_SIZE_MAX];
	static char keys[16 * HASP_NAME_SIZE_MAX];
	struct hasp_wire_kv_entry e[16], got;
	struct hasp_wire_header req = { .opcode = HASP_OP_KV_RANGE, .session_id = 4, .seq = 9 };
	struct hasp_wire_msg m;
	struct hasp_wire_kv_iter it;
	uint8_t buf[2 * HASP_DATAGRAM_SIZE_MAX];
	size_t packed;
	int n;

	/* Ten entries of 11 + 100 + 200 = 311 bytes: four fit in the 1425
	 * bytes after header and range fields, so MORE is set. */
	fill_entries(e, 10, keys, 100, value, 200);
	n = hasp_wire_encode_kv_range_reply(&req, e, 10, false, buf, sizeof(buf), &packed);
	assert_int_equal(packed, 4);
	assert_int_equal(n, HASP_WIRE_HEADER_SIZE + 3 + 4 * 311);
	assert_int_equal(decode_exact(buf, (size_t)n, &m, hasp_wire_decode_reply), 0);
	assert_int_equal(m.hdr.seq, 9);
	assert_int_equal(m.body.kv_entries.entry_count, 4);
	assert_int_equal(m.body.kv_entries.flags, HASP_WIRE_RANGE_MORE);

	/* Two entries that fill the datagram to its last byte. */
	fill_entries(e, 2, keys, 128, value, 0);
	e[0].value.size = HASP_VALUE_SIZE_MAX;
	e[1].key.size = 1;
	e[1].value.size = HASP_DATAGRAM_SIZE_MAX - HASP_WIRE_HEADER_SIZE - 3 - (11 + 128 + 1024) - 12;
	n = hasp_wire_encode_kv_range_reply(&req, e, 2, false, buf, sizeof(buf), &packed);
	assert_int_equal(n, HASP_DATAGRAM_SIZE_MAX);
	assert_int_equal(packed, 2);
	assert_int_equal(decode_exact(buf, (size_t)n, &m, hasp_wire_decode_reply), 0);
	assert_int_equal(hasp_wire_decode_reply(buf, (size_t)n, &m), 0);
	assert_int_equal(m.body.kv_entries.flags, 0);
	hasp_wire_kv_iter_init(&it, &m.body.kv_entries);
	for (size_t i = 0; i < 2; i++) {
		assert_true(hasp_wire_kv_iter_next(&it, &got));
		assert_int_equal(got.revision, 100 + i);
		assert_bytes_equal(got.key, e[i].key);
		assert_bytes_equal(got.value, e[i].value);
	}
	assert_false(hasp_wire_kv_iter_next(&it, &got));
	/* Re-encoding the decoded reply gives the same bytes. */
	uint8_t again[HASP_DATAGRAM_SIZE_MAX];
	assert_int_equal(hasp_wire_encode(&m, again, sizeof(again)), n);
	assert_memory_equal(buf, again, (size_t)n);

	/* One byte more and only the first entry fits. */
	e[1].value.size++;
	n = hasp_wire_encode_kv_range_reply(&req, e, 2, false, buf, sizeof(buf), &packed);
	assert_int_equal(packed, 1);
	assert_int_equal(decode_any(buf, (size_t)n), 0);
	assert_int_equal(buf[HASP_WIRE_HEADER_SIZE + 2], HASP_WIRE_RANGE_MORE);

	/* A smaller buffer limits the reply; more_after sets MORE alone. */
	n = hasp_wire_encode_kv_range_reply(&req, e, 0, true, buf, 47, &packed);
	assert_int_equal(n, 47);
	assert_int_equal(decode_exact(buf, (size_t)n, &m, hasp_wire_decode_reply), 0);
	assert_int_equal(m.body.kv_entries.flags, HASP_WIRE_RANGE_MORE);
	assert_int_equal(hasp_wire_encode_kv_range_reply(&req, e, 0, true, buf, 46, &packed),
			 -HASP_ENOSPC);
	/* Invalid entries are refused, not packed. */
	e[0].key.size = 0;
	assert_int_equal(hasp_wire_encode_kv_range_reply(&req, e, 2, false, buf, sizeof(buf),
							 &packed),
			 -HASP_ENAME);
}

static void test_wire_error_maps_to_reply_status(void **state)
{
	(void)state;
	struct hasp_wire_header req = { 0 }, rep = { .flags = HASP_WIRE_F_REPLY };

	assert_int_equal(hasp_wire_error_status(-HASP_EVERSION), HASP_STATUS_BAD_VERSION);
	assert_int_equal(hasp_wire_error_status(-HASP_EOPCODE), HASP_STATUS_BAD_OPCODE);
	assert_int_equal(hasp_wire_error_status(-HASP_ENAME), HASP_STATUS_BAD_NAME);
	assert_int_equal(hasp_wire_error_status(-HASP_ERANGE), HASP_STATUS_BAD_TTL);
	assert_int_equal(hasp_wire_error_status(-HASP_ETOOBIG), HASP_STATUS_TOO_LARGE);
	assert_int_equal(hasp_wire_error_status(-HASP_ELENGTH), HASP_STATUS_BAD_REQUEST);
	assert_int_equal(hasp_wire_error_status(-HASP_EFLAGS), HASP_STATUS_BAD_REQUEST);
	assert_int_equal(hasp_wire_error_status(-HASP_ENOTSUP), HASP_STATUS_BAD_REQUEST);
	assert_int_equal(hasp_wire_error_status(-HASP_EINVAL), HASP_STATUS_BAD_REQUEST);

	assert_false(hasp_wire_error_answerable(-HASP_ETRUNCATED, &req));
	assert_false(hasp_wire_error_answerable(-HASP_EMAGIC, &req));
	assert_true(hasp_wire_error_answerable(-HASP_EVERSION, &req));
	assert_true(hasp_wire_error_answerable(-HASP_ENAME, &req));
	assert_false(hasp_wire_error_answerable(-HASP_ENAME, &rep));
}

/* A newer client's request gets BAD_VERSION with the session and sequence
 * number echoed, which this decoder reads back as a v1 reply. */
static void test_wire_unknown_version_is_answered_with_bad_version(void **state)
{
	(void)state;
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg m, reply;
	int n = encode_sample(sample("req_acquire_ttl"), buf);

	buf[4] = 3;
	buf[5] = 77; /* an opcode no version knows yet */
	int rc = hasp_wire_decode_request(buf, (size_t)n, &m);
	assert_int_equal(rc, -HASP_EVERSION);
	assert_true(hasp_wire_error_answerable(rc, &m.hdr));
	hasp_wire_reply_init(&reply, &m.hdr, hasp_wire_error_status(rc));
	reply.body.bad_version.version_min = HASP_WIRE_VERSION_MIN;
	reply.body.bad_version.version_max = HASP_WIRE_VERSION;
	n = hasp_wire_encode(&reply, buf, sizeof(buf));
	assert_int_equal(n, HASP_WIRE_HEADER_SIZE + 2);
	assert_int_equal(decode_exact(buf, (size_t)n, &m, hasp_wire_decode_reply), 0);
	assert_int_equal(m.hdr.opcode, 77);
	assert_int_equal(m.hdr.session_id, samples[sample("req_acquire_ttl")].msg.hdr.session_id);
	assert_int_equal(m.hdr.seq, samples[sample("req_acquire_ttl")].msg.hdr.seq);
	assert_int_equal(m.hdr.version, 1); /* BAD_VERSION is always a v1 message */
	assert_int_equal(m.body.bad_version.version_max, 2);
}

/* Seeded mutation of valid encodings: flip bytes, truncate, extend. The
 * decoder reads only the exact-size copy (ASan would flag more); whatever
 * it accepts re-encodes to identical bytes and belongs to one direction. */
static void test_wire_mutated_encodings_decode_safely(void **state)
{
	(void)state;
	uint64_t seed = test_util_seed(0x5eed);
	struct prng p;
	unsigned accepted = 0, rejected = 0;
	const unsigned rounds = 1000000;

	printf("seed=%llu\n", (unsigned long long)seed);
	prng_seed(&p, seed);
	for (unsigned round = 0; round < rounds; round++) {
		uint8_t buf[HASP_DATAGRAM_SIZE_MAX + 16];
		size_t i = prng_below(&p, sample_count);
		size_t n = (size_t)encode_sample(i, buf);
		unsigned flips = (unsigned)prng_range(&p, 0, 4);

		for (unsigned f = 0; f < flips; f++) {
			size_t at = prng_below(&p, n);
			if (prng_chance(&p, 500000))
				buf[at] = (uint8_t)prng_next(&p);
			else
				buf[at] ^= (uint8_t)(1u << prng_below(&p, 8));
		}
		if (prng_chance(&p, 200000)) {
			n = prng_below(&p, n + 1);
		} else if (prng_chance(&p, 100000)) {
			size_t extra = prng_range(&p, 1, 16);
			for (size_t k = 0; k < extra; k++)
				buf[n + k] = (uint8_t)prng_next(&p);
			n += extra;
			/* Sometimes keep the body size honest so the body is parsed. */
			if (prng_chance(&p, 500000) && n >= HASP_WIRE_HEADER_SIZE)
				put_u16le(buf + 24, (uint16_t)(n - HASP_WIRE_HEADER_SIZE));
		}

		uint8_t *copy = hasp_alloc(n > 0 ? n : 1);
		struct hasp_wire_msg m, m2;
		assert_non_null(copy);
		memcpy(copy, buf, n);
		int rc = hasp_wire_decode(copy, n, &m);
		if (rc == 0) {
			uint8_t again[HASP_DATAGRAM_SIZE_MAX];
			accepted++;
			assert_int_equal(hasp_wire_encode(&m, again, sizeof(again)), (int)n);
			/* The encoder writes a zero tag; a v2 tag is the sealer's. */
			if (m.hdr.version == 2)
				memcpy(again + HASP_WIRE_TAG_OFFSET, m.hdr.tag, HASP_WIRE_TAG_SIZE);
			assert_memory_equal(copy, again, n);
			bool reply = m.hdr.flags & HASP_WIRE_F_REPLY;
			assert_int_equal(hasp_wire_decode_request(copy, n, &m2) == 0, !reply);
			assert_int_equal(hasp_wire_decode_reply(copy, n, &m2) == 0, reply);
		} else {
			rejected++;
			assert_int_equal(hasp_wire_decode_request(copy, n, &m2) == 0, false);
			assert_int_equal(hasp_wire_decode_reply(copy, n, &m2) == 0, false);
			assert_true(hasp_wire_error_status(rc) < HASP_STATUS_COUNT);
		}
		hasp_free(copy);
	}
	printf("mutations: %u accepted, %u rejected\n", accepted, rejected);
	/* Both outcomes must be common, or the mutations test nothing. */
	assert_true(accepted > rounds / 20);
	assert_true(rejected > rounds / 4);
}

/* What the node proposes (and what renews a session) against what the
 * leader answers from its own state: the node's short cut for unknown
 * sessions and hasp-bench's keepalive clock both ask this. */
static void test_wire_commands_are_told_from_leader_answers(void **state)
{
	static const uint8_t commands[] = { HASP_OP_SESSION_OPEN, HASP_OP_SESSION_KEEPALIVE,
					    HASP_OP_SESSION_CLOSE, HASP_OP_LEASE_GRANT,
					    HASP_OP_ACQUIRE, HASP_OP_RELEASE, HASP_OP_RENEW,
					    HASP_OP_CANCEL, HASP_OP_KV_PUT, HASP_OP_KV_CAS };
	static const uint8_t answers[] = { HASP_OP_LOCK_READ, HASP_OP_CHECK, HASP_OP_KV_GET,
					   HASP_OP_KV_RANGE, HASP_OP_WATCH, HASP_OP_UNWATCH,
					   HASP_OP_WATCH_COUNT, HASP_OP_WATCH_STATUS };
	(void)state;
	for (size_t i = 0; i < sizeof(commands); i++)
		assert_true(hasp_wire_op_is_command(commands[i]));
	for (size_t i = 0; i < sizeof(answers); i++)
		assert_false(hasp_wire_op_is_command(answers[i]));
}

int main(void)
{
	test_util_install_assert_handler();
	sample_count = wire_samples(samples);
	assert_true(sample_count <= WIRE_SAMPLES_MAX);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wire_every_body_round_trips),
		cmocka_unit_test(test_wire_commands_are_told_from_leader_answers),
		cmocka_unit_test(test_wire_acquire_matches_documented_layout),
		cmocka_unit_test(test_wire_granted_and_not_leader_match_documented_layout),
		cmocka_unit_test(test_wire_rejects_truncated_datagrams_at_every_length),
		cmocka_unit_test(test_wire_rejects_oversized_datagrams),
		cmocka_unit_test(test_wire_encoder_refuses_small_buffer),
		cmocka_unit_test(test_wire_rejects_bad_magic_version_opcode_flags),
		cmocka_unit_test(test_wire_seq_floor_only_on_requests_with_a_session),
		cmocka_unit_test(test_wire_rejects_unknown_body_flags),
		cmocka_unit_test(test_wire_rejects_nonzero_auth_tag),
		cmocka_unit_test(test_wire_rejects_lying_lengths),
		cmocka_unit_test(test_wire_range_entry_count_must_match_entries),
		cmocka_unit_test(test_wire_name_bytes_and_sizes),
		cmocka_unit_test(test_wire_ttl_range_is_enforced),
		cmocka_unit_test(test_wire_rejects_value_of_1025_bytes),
		cmocka_unit_test(test_wire_client_rejects_request_and_server_rejects_reply),
		cmocka_unit_test(test_wire_reply_status_must_fit_the_opcode),
		cmocka_unit_test(test_wire_range_reply_fills_the_datagram),
		cmocka_unit_test(test_wire_error_maps_to_reply_status),
		cmocka_unit_test(test_wire_unknown_version_is_answered_with_bad_version),
		cmocka_unit_test(test_wire_mutated_encodings_decode_safely),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
