/*
 * The command codec: round trips of every opcode, strict rejection of
 * malformed bytes with typed errors, and a decoder that never reads past
 * its buffer (each prefix of a valid encoding is tried from its own
 * exact-size allocation, so ASan sees any overread).
 */
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "hasp/errors.h"
#include "locks/cmd_codec.h"
#include "tests/test_util.h"

static struct locks_cmd sample(uint8_t op)
{
	static const uint8_t name[] = "lock/0000042";
	static const uint8_t value[] = "some value bytes";
	uint32_t f = locks_cmd_fields(op);
	struct locks_cmd c = { .op = op, .term = 7, .now_ms = 123456789 };

	if (f & LOCKS_FIELD_MODE)
		c.mode = HASP_ACQUIRE_WAIT;
	if (f & LOCKS_FIELD_TTL)
		c.ttl_ms = 30000;
	if (f & LOCKS_FIELD_SESSION)
		c.session_id = 0x1000001;
	if (f & LOCKS_FIELD_SEQ)
		c.seq = 42;
	if (f & LOCKS_FIELD_LEASE)
		c.lease_id = 0x2000003;
	if (f & LOCKS_FIELD_TOKEN)
		c.token = 99;
	if (f & LOCKS_FIELD_NONCE)
		c.nonce = 0x8badf00dcafe0001ull;
	if (f & LOCKS_FIELD_NAME) {
		c.name = name;
		c.name_len = sizeof(name) - 1;
	}
	if (f & LOCKS_FIELD_VALUE) {
		c.value = value;
		c.value_len = sizeof(value) - 1;
	}
	return c;
}

static const uint8_t all_ops[] = {
	LOCKS_OP_SESSION_OPEN, LOCKS_OP_SESSION_KEEPALIVE, LOCKS_OP_SESSION_CLOSE,
	LOCKS_OP_LEASE_GRANT,  LOCKS_OP_LEASE_KEEPALIVE,  LOCKS_OP_LEASE_REVOKE,
	LOCKS_OP_ACQUIRE,      LOCKS_OP_RELEASE,          LOCKS_OP_RENEW,
	LOCKS_OP_KV_PUT,       LOCKS_OP_KV_DELETE,        LOCKS_OP_KV_CAS,
	LOCKS_OP_TICK,         LOCKS_OP_LEASE_EXPIRE,     LOCKS_OP_SESSION_EXPIRE,
	LOCKS_OP_FORCE_RELEASE,
};

static void assert_cmd_equal(const struct locks_cmd *a, const struct locks_cmd *b)
{
	assert_int_equal(a->op, b->op);
	assert_int_equal(a->mode, b->mode);
	assert_int_equal(a->ttl_ms, b->ttl_ms);
	assert_int_equal(a->term, b->term);
	assert_int_equal(a->now_ms, b->now_ms);
	assert_int_equal(a->session_id, b->session_id);
	assert_int_equal(a->seq, b->seq);
	assert_int_equal(a->lease_id, b->lease_id);
	assert_int_equal(a->token, b->token);
	assert_int_equal(a->nonce, b->nonce);
	assert_int_equal(a->name_len, b->name_len);
	assert_int_equal(a->value_len, b->value_len);
	if (a->name_len > 0)
		assert_memory_equal(a->name, b->name, a->name_len);
	if (a->value_len > 0)
		assert_memory_equal(a->value, b->value, a->value_len);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->expect_len, b->expect_len);
	if (a->expect_len > 0)
		assert_memory_equal(a->expect, b->expect, a->expect_len);
}

static void test_codec_round_trips_every_op(void **state)
{
	(void)state;
	uint8_t buf[LOCKS_CMD_SIZE_MAX];

	for (size_t i = 0; i < sizeof(all_ops); i++) {
		struct locks_cmd c = sample(all_ops[i]), d;
		int n = locks_cmd_encode(&c, buf, sizeof(buf));
		assert_true(n > 0);
		assert_int_equal((size_t)n, locks_cmd_encoded_size(&c));
		assert_int_equal(locks_cmd_decode(buf, (size_t)n, &d), 0);
		assert_cmd_equal(&c, &d);
		/* Too small a target buffer is an error, not an overflow. */
		assert_int_equal(locks_cmd_encode(&c, buf, (size_t)n - 1), -HASP_ETOOBIG);
	}
}

static void test_codec_rejects_malformed_bytes(void **state)
{
	(void)state;
	uint8_t buf[LOCKS_CMD_SIZE_MAX + 8];
	struct locks_cmd c = sample(LOCKS_OP_KV_PUT), d;
	int n = locks_cmd_encode(&c, buf, sizeof(buf));
	assert_true(n > 0);

	/* Every truncation, each from an exact-size copy. */
	for (int len = 0; len < n; len++) {
		uint8_t *copy = malloc(len > 0 ? (size_t)len : 1);
		memcpy(copy, buf, (size_t)len);
		assert_int_equal(locks_cmd_decode(copy, (size_t)len, &d), -HASP_ETRUNCATED);
		assert_int_equal(d.op, 0); /* nothing half-decoded */
		free(copy);
	}
	/* Trailing bytes. */
	buf[n] = 0;
	assert_int_equal(locks_cmd_decode(buf, (size_t)n + 1, &d), -HASP_ELENGTH);

	uint8_t bad[LOCKS_CMD_SIZE_MAX];
	memcpy(bad, buf, (size_t)n);
	bad[0] = 1; /* version 1 had no nonce */
	assert_int_equal(locks_cmd_decode(bad, (size_t)n, &d), -HASP_EVERSION);
	bad[0] = 4;
	assert_int_equal(locks_cmd_decode(bad, (size_t)n, &d), -HASP_EVERSION);
	memcpy(bad, buf, (size_t)n);
	bad[1] = 99;
	assert_int_equal(locks_cmd_decode(bad, (size_t)n, &d), -HASP_EOPCODE);
	memcpy(bad, buf, (size_t)n);
	bad[3] = 1;
	assert_int_equal(locks_cmd_decode(bad, (size_t)n, &d), -HASP_EFLAGS);
	memcpy(bad, buf, (size_t)n);
	bad[2] = 1; /* mode on a KV put */
	assert_int_equal(locks_cmd_decode(bad, (size_t)n, &d), -HASP_EINVAL);
	memcpy(bad, buf, (size_t)n);
	bad[48] = 1; /* token on a KV put */
	assert_int_equal(locks_cmd_decode(bad, (size_t)n, &d), -HASP_EINVAL);
	memcpy(bad, buf, (size_t)n);
	bad[LOCKS_CMD_HEADER_SIZE] = ' '; /* a name byte out of range */
	assert_int_equal(locks_cmd_decode(bad, (size_t)n, &d), -HASP_ENAME);
	memcpy(bad, buf, (size_t)n);
	bad[56] = 200; /* name_len over 128 */
	assert_int_equal(locks_cmd_decode(bad, (size_t)n, &d), -HASP_ETOOBIG);
	memcpy(bad, buf, (size_t)n);
	bad[56] = 1; /* lengths disagree with the buffer */
	assert_int_equal(locks_cmd_decode(bad, (size_t)n, &d), -HASP_ELENGTH);

	/* An acquire with mode 2 and an encode of a name breaking the rules. */
	struct locks_cmd acq = sample(LOCKS_OP_ACQUIRE);
	n = locks_cmd_encode(&acq, buf, sizeof(buf));
	buf[2] = 2;
	assert_int_equal(locks_cmd_decode(buf, (size_t)n, &d), -HASP_EINVAL);
	acq.name = (const uint8_t *)"has space";
	acq.name_len = 9;
	assert_int_equal(locks_cmd_encode(&acq, buf, sizeof(buf)), -HASP_EINVAL);
	struct locks_cmd tick = { .op = LOCKS_OP_TICK, .seq = 1 };
	assert_int_equal(locks_cmd_encode(&tick, buf, sizeof(buf)), -HASP_EINVAL);
}

/* SESSION_OPEN carries the client nonce in bytes 48..55 (the token's place:
 * no opcode has both); other opcodes refuse a nonce, and an open refuses a
 * token. */
/* A CAS by value carries its expected value in the entry (issue 11 item 5);
 * the flag is refused on any other op, and with a token. */
static void test_codec_cas_by_value(void **state)
{
	(void)state;
	uint8_t buf[LOCKS_CMD_SIZE_MAX];
	struct locks_cmd c = sample(LOCKS_OP_KV_CAS), d;
	c.token = 0;
	c.flags = LOCKS_CMD_CAS_VALUE;
	c.expect = (const uint8_t *)"expected";
	c.expect_len = 8;
	int n = locks_cmd_encode(&c, buf, sizeof(buf));
	assert_int_equal((size_t)n, locks_cmd_encoded_size(&c));
	assert_int_equal(locks_cmd_decode(buf, (size_t)n, &d), 0);
	assert_cmd_equal(&c, &d);
	assert_int_equal(locks_cmd_decode(buf, (size_t)n - 1, &d), -HASP_ETRUNCATED);

	c.token = 5; /* one comparison per command */
	assert_int_equal(locks_cmd_encode(&c, buf, sizeof(buf)), -HASP_EINVAL);
	struct locks_cmd put = sample(LOCKS_OP_KV_PUT);
	put.flags = LOCKS_CMD_CAS_VALUE;
	assert_int_equal(locks_cmd_encode(&put, buf, sizeof(buf)), -HASP_EINVAL);
	put.flags = 0;
	n = locks_cmd_encode(&put, buf, sizeof(buf));
	assert_true(n > 0);
	buf[3] = LOCKS_CMD_CAS_VALUE;
	assert_int_equal(locks_cmd_decode(buf, (size_t)n, &d), -HASP_EFLAGS);
}

/* SEQ_FLOOR rides on a command with a seq, with CAS_VALUE too, and is
 * refused on a command without one (SESSION_OPEN, TICK). */
static void test_codec_seq_floor_only_with_a_seq(void **state)
{
	(void)state;
	uint8_t buf[LOCKS_CMD_SIZE_MAX];
	struct locks_cmd c = sample(LOCKS_OP_KV_CAS), d;
	c.token = 0;
	c.flags = LOCKS_CMD_CAS_VALUE | LOCKS_CMD_SEQ_FLOOR;
	c.expect = (const uint8_t *)"expected";
	c.expect_len = 8;
	int n = locks_cmd_encode(&c, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(locks_cmd_decode(buf, (size_t)n, &d), 0);
	assert_cmd_equal(&c, &d);

	struct locks_cmd open = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 5000, .flags = LOCKS_CMD_SEQ_FLOOR };
	assert_int_equal(locks_cmd_encode(&open, buf, sizeof(buf)), -HASP_EINVAL);
	struct locks_cmd tick = { .op = LOCKS_OP_TICK };
	n = locks_cmd_encode(&tick, buf, sizeof(buf));
	assert_true(n > 0);
	buf[3] = LOCKS_CMD_SEQ_FLOOR;
	assert_int_equal(locks_cmd_decode(buf, (size_t)n, &d), -HASP_EFLAGS);
}

static void test_codec_session_open_carries_nonce(void **state)
{
	(void)state;
	uint8_t buf[LOCKS_CMD_SIZE_MAX];
	struct locks_cmd open = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 5000, .nonce = 0x0102030405060708ull };
	struct locks_cmd d;

	int n = locks_cmd_encode(&open, buf, sizeof(buf));
	assert_int_equal(n, LOCKS_CMD_HEADER_SIZE);
	assert_int_equal(buf[0], LOCKS_CMD_VERSION);
	assert_int_equal(get_u64le(buf + 48), open.nonce);
	assert_int_equal(locks_cmd_decode(buf, (size_t)n, &d), 0);
	assert_int_equal(d.nonce, open.nonce);
	assert_int_equal(d.token, 0);

	/* The same bytes under another opcode are a token, not a nonce. */
	struct locks_cmd rel = sample(LOCKS_OP_RELEASE);
	n = locks_cmd_encode(&rel, buf, sizeof(buf));
	assert_int_equal(locks_cmd_decode(buf, (size_t)n, &d), 0);
	assert_int_equal(d.token, rel.token);
	assert_int_equal(d.nonce, 0);

	/* Misplaced fields are refused on both sides. */
	rel.nonce = 5;
	assert_false(locks_cmd_fields_ok(&rel));
	assert_int_equal(locks_cmd_encode(&rel, buf, sizeof(buf)), -HASP_EINVAL);
	open.token = 5;
	assert_int_equal(locks_cmd_encode(&open, buf, sizeof(buf)), -HASP_EINVAL);
	struct locks_cmd tick = { .op = LOCKS_OP_TICK, .nonce = 1 };
	assert_int_equal(locks_cmd_encode(&tick, buf, sizeof(buf)), -HASP_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codec_round_trips_every_op),
		cmocka_unit_test(test_codec_rejects_malformed_bytes),
		cmocka_unit_test(test_codec_seq_floor_only_with_a_seq),
		cmocka_unit_test(test_codec_session_open_carries_nonce),
		cmocka_unit_test(test_codec_cas_by_value),
	};

	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
