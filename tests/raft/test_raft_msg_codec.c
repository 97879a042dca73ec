/*
 * The Raft message codec: every type round-trips, and the decoder refuses
 * every malformed input with its typed error without reading past the
 * buffer (each truncation of each message is tried).
 */
#include "hasp/errors.h"
#include "raft/membership.h"
#include "tests/raft/raft_harness.h"

static void fill(struct raft_msg *m, uint8_t type, struct raft_entry *entries)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->cluster_id = 0x0102030405060708ull;
	m->from = 3;
	m->to = 5;
	m->term = 77;
	switch (type) {
	case RAFT_MSG_VOTE:
	case RAFT_MSG_PRE_VOTE:
		m->last_index = 1000;
		m->last_term = 76;
		m->transfer = true;
		break;
	case RAFT_MSG_VOTE_RESP:
		/* A removal notice (issue 11 item 6): carries an index. */
		m->reject = true;
		m->not_member = true;
		m->index = 52;
		break;
	case RAFT_MSG_PRE_VOTE_RESP:
		m->reject = true;
		break;
	case RAFT_MSG_APPEND:
		m->prev_index = 41;
		m->prev_term = 70;
		m->commit = 40;
		m->read_seq = 9;
		entries[0] = (struct raft_entry){ .term = 71, .index = 42, .type = RAFT_ENTRY_COMMAND,
						  .data = (const uint8_t *)"hello", .size = 5 };
		entries[1] = (struct raft_entry){ .term = 77, .index = 43, .type = RAFT_ENTRY_NOOP,
						  .data = NULL, .size = 0 };
		m->entries = entries;
		m->entry_count = 2;
		break;
	case RAFT_MSG_APPEND_RESP:
		m->reject = true;
		m->index = 41;
		m->hint_index = 30;
		m->hint_term = 60;
		m->read_seq = 9;
		break;
	case RAFT_MSG_SNAPSHOT:
		m->snap_index = 500;
		m->snap_term = 70;
		m->snap_size = 10;
		m->offset = 4;
		m->chunk = (const uint8_t *)"abcdef";
		m->chunk_size = 6;
		m->done = true;
		m->snap_conf.count = 2;
		m->snap_conf.members[0] = (struct raft_member){ 1, RAFT_VOTER };
		m->snap_conf.members[1] = (struct raft_member){ 9, RAFT_LEARNER };
		break;
	case RAFT_MSG_SNAPSHOT_RESP:
		m->snap_index = 500;
		m->offset = 10;
		m->done = true;
		break;
	default:
		break;
	}
}

static void test_codec_every_type_round_trips(void **state)
{
	struct raft_entry in_entries[2], out_entries[4];
	struct raft_msg in, out;
	uint8_t buf[1500];
	(void)state;
	for (uint8_t type = RAFT_MSG_VOTE; type < RAFT_MSG_TYPE_COUNT; type++) {
		fill(&in, type, in_entries);
		int size = msg_codec_encode(&in, buf, sizeof(buf));
		assert_int_equal(size, (int)msg_codec_size(&in));
		assert_int_equal(msg_codec_decode(&out, out_entries, 4, buf, (size_t)size), 0);
		assert_int_equal(out.type, type);
		assert_int_equal(out.cluster_id, in.cluster_id);
		assert_int_equal(out.from, 3);
		assert_int_equal(out.to, 5);
		assert_int_equal(out.term, 77);
		assert_int_equal(out.last_index, in.last_index);
		assert_int_equal(out.transfer, in.transfer);
		assert_int_equal(out.reject, in.reject);
		assert_int_equal(out.not_member, in.not_member);
		assert_int_equal(out.prev_index, in.prev_index);
		assert_int_equal(out.commit, in.commit);
		assert_int_equal(out.read_seq, in.read_seq);
		assert_int_equal(out.index, in.index);
		assert_int_equal(out.hint_index, in.hint_index);
		assert_int_equal(out.hint_term, in.hint_term);
		assert_int_equal(out.entry_count, in.entry_count);
		for (uint32_t i = 0; i < in.entry_count; i++) {
			assert_int_equal(out.entries[i].index, in.entries[i].index);
			assert_int_equal(out.entries[i].term, in.entries[i].term);
			assert_int_equal(out.entries[i].type, in.entries[i].type);
			assert_int_equal(out.entries[i].size, in.entries[i].size);
			if (in.entries[i].size > 0)
				assert_memory_equal(out.entries[i].data, in.entries[i].data,
						    in.entries[i].size);
		}
		assert_int_equal(out.snap_index, in.snap_index);
		assert_int_equal(out.snap_size, in.snap_size);
		assert_int_equal(out.offset, in.offset);
		assert_int_equal(out.done, in.done);
		assert_int_equal(out.chunk_size, in.chunk_size);
		assert_int_equal(out.snap_conf.count, in.snap_conf.count);
		if (in.chunk_size > 0)
			assert_memory_equal(out.chunk, in.chunk, in.chunk_size);
	}
}

static void test_codec_header_is_little_endian_and_versioned(void **state)
{
	struct raft_msg m;
	uint8_t buf[64];
	(void)state;
	fill(&m, RAFT_MSG_TIMEOUT_NOW, NULL);
	assert_int_equal(msg_codec_encode(&m, buf, sizeof(buf)), MSG_CODEC_HEADER_SIZE);
	assert_int_equal(buf[0], 1);
	assert_int_equal(buf[1], RAFT_MSG_TIMEOUT_NOW);
	assert_int_equal(buf[4], 0x08); /* cluster id, low byte first */
	assert_int_equal(buf[11], 0x01);
	assert_int_equal(buf[12], 3);
	assert_int_equal(buf[20], 77);
}

static void test_codec_refuses_every_truncation(void **state)
{
	struct raft_entry in_entries[2], out_entries[4];
	struct raft_msg in, out;
	uint8_t buf[1500];
	(void)state;
	for (uint8_t type = RAFT_MSG_VOTE; type < RAFT_MSG_TYPE_COUNT; type++) {
		fill(&in, type, in_entries);
		int size = msg_codec_encode(&in, buf, sizeof(buf));
		for (int len = 0; len < size; len++) {
			/* Copy to an exact-size heap buffer so ASan sees overreads. */
			uint8_t *copy = malloc(len > 0 ? (size_t)len : 1);
			memcpy(copy, buf, (size_t)len);
			assert_int_equal(msg_codec_decode(&out, out_entries, 4, copy, (size_t)len),
					 -HASP_ETRUNCATED);
			free(copy);
		}
		buf[size] = 0;
		assert_int_equal(msg_codec_decode(&out, out_entries, 4, buf, (size_t)size + 1),
				 -HASP_ELENGTH);
	}
}

static void test_codec_refuses_bad_version_type_and_flags(void **state)
{
	struct raft_msg in, out;
	struct raft_entry e[4];
	uint8_t buf[256];
	(void)state;
	fill(&in, RAFT_MSG_VOTE, NULL);
	int size = msg_codec_encode(&in, buf, sizeof(buf));
	buf[0] = 2;
	assert_int_equal(msg_codec_decode(&out, e, 4, buf, (size_t)size), -HASP_EVERSION);
	buf[0] = 1;
	buf[1] = 0;
	assert_int_equal(msg_codec_decode(&out, e, 4, buf, (size_t)size), -HASP_EOPCODE);
	buf[1] = RAFT_MSG_TYPE_COUNT;
	assert_int_equal(msg_codec_decode(&out, e, 4, buf, (size_t)size), -HASP_EOPCODE);
	buf[1] = RAFT_MSG_VOTE;
	buf[2] = MSG_CODEC_FLAG_DONE; /* not a flag of VOTE */
	assert_int_equal(msg_codec_decode(&out, e, 4, buf, (size_t)size), -HASP_EFLAGS);
	buf[2] = 0x80;
	assert_int_equal(msg_codec_decode(&out, e, 4, buf, (size_t)size), -HASP_EFLAGS);

	/* A removal notice is a refusal: not-member without reject is refused. */
	fill(&in, RAFT_MSG_VOTE_RESP, NULL);
	size = msg_codec_encode(&in, buf, sizeof(buf));
	assert_int_equal(size, MSG_CODEC_HEADER_SIZE + 8);
	assert_int_equal(buf[2], MSG_CODEC_FLAG_REJECT | MSG_CODEC_FLAG_NOT_MEMBER);
	buf[2] = MSG_CODEC_FLAG_NOT_MEMBER;
	assert_int_equal(msg_codec_decode(&out, e, 4, buf, (size_t)size), -HASP_EFLAGS);
}

static void test_codec_refuses_bad_entries_and_configurations(void **state)
{
	struct raft_entry in_entries[2], out_entries[4];
	struct raft_msg in, out;
	uint8_t buf[512];
	(void)state;
	fill(&in, RAFT_MSG_APPEND, in_entries);
	int size = msg_codec_encode(&in, buf, sizeof(buf));
	assert_int_equal(msg_codec_decode(&out, out_entries, 1, buf, (size_t)size), -HASP_ETOOBIG);
	/* First entry's type byte: header + fixed + term. */
	buf[MSG_CODEC_HEADER_SIZE + MSG_CODEC_APPEND_FIXED_SIZE + 8] = 9;
	assert_int_equal(msg_codec_decode(&out, out_entries, 4, buf, (size_t)size), -HASP_ECORRUPT);

	fill(&in, RAFT_MSG_SNAPSHOT, NULL);
	in.snap_conf.members[1].id = 1; /* duplicate member */
	size = msg_codec_encode(&in, buf, sizeof(buf));
	assert_int_equal(msg_codec_decode(&out, out_entries, 4, buf, (size_t)size), -HASP_ECORRUPT);
}

static void test_codec_encode_refuses_small_buffer(void **state)
{
	struct raft_entry in_entries[2];
	struct raft_msg in;
	uint8_t buf[64];
	(void)state;
	fill(&in, RAFT_MSG_APPEND, in_entries);
	assert_int_equal(msg_codec_encode(&in, buf, sizeof(buf)), -HASP_ETOOBIG);
}

static void test_conf_payload_round_trips_and_is_checked(void **state)
{
	struct raft_conf in, out;
	uint8_t buf[MEMBERSHIP_CONF_SIZE_MAX];
	(void)state;
	memset(&in, 0, sizeof(in));
	in.count = 3;
	in.members[0] = (struct raft_member){ 1, RAFT_VOTER };
	in.members[1] = (struct raft_member){ 2, RAFT_VOTER };
	in.members[2] = (struct raft_member){ 7, RAFT_LEARNER };
	uint32_t size = membership_conf_encode(&in, buf);
	assert_int_equal(size, 2 + 15);
	assert_int_equal(membership_conf_decode(&out, buf, size), 0);
	assert_memory_equal(&in, &out, sizeof(in));
	assert_int_equal(membership_conf_decode(&out, buf, size - 1), -HASP_ETRUNCATED);
	assert_int_equal(membership_conf_decode(&out, buf, size + 0 - 5 + 4), -HASP_ETRUNCATED);
	buf[0] = 9;
	assert_int_equal(membership_conf_decode(&out, buf, size), -HASP_EVERSION);
	buf[0] = 1;
	buf[2 + 4] = 3; /* role */
	assert_int_equal(membership_conf_decode(&out, buf, size), -HASP_ECORRUPT);
}

static void test_append_entries_limit_per_mtu(void **state)
{
	(void)state;
	/* 1500 - 28 - 28 - 34 = 1410 bytes for entries of 13 + size bytes. */
	assert_int_equal(msg_codec_entries_max(1500), 108);
	assert_int_equal(msg_codec_entries_max(9000), (9000 - 28 - 28 - 34) / 13);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codec_every_type_round_trips),
		cmocka_unit_test(test_codec_header_is_little_endian_and_versioned),
		cmocka_unit_test(test_codec_refuses_every_truncation),
		cmocka_unit_test(test_codec_refuses_bad_version_type_and_flags),
		cmocka_unit_test(test_codec_refuses_bad_entries_and_configurations),
		cmocka_unit_test(test_codec_encode_refuses_small_buffer),
		cmocka_unit_test(test_conf_payload_round_trips_and_is_checked),
		cmocka_unit_test(test_append_entries_limit_per_mtu),
	};
	test_util_install_assert_handler();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
