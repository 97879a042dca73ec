/*
 * The Raft message codec (format tables in msg_codec.h). Encoding is
 * straight-line; decoding reads through a bounded byte_reader and checks
 * `failed` where a length must be trusted, so no input can make it read
 * past the buffer.
 */
#include "raft/msg_codec.h"

#include <string.h>

#include "common/assert.h"
#include "common/bytes.h"
#include "hasp/errors.h"

static uint16_t flags_allowed(uint8_t type)
{
	switch (type) {
	case RAFT_MSG_VOTE:
	case RAFT_MSG_PRE_VOTE:
		return MSG_CODEC_FLAG_TRANSFER;
	case RAFT_MSG_VOTE_RESP:
	case RAFT_MSG_PRE_VOTE_RESP:
		return MSG_CODEC_FLAG_REJECT | MSG_CODEC_FLAG_NOT_MEMBER;
	case RAFT_MSG_APPEND_RESP:
		return MSG_CODEC_FLAG_REJECT;
	case RAFT_MSG_SNAPSHOT:
	case RAFT_MSG_SNAPSHOT_RESP:
		return MSG_CODEC_FLAG_DONE;
	default:
		return 0;
	}
}

size_t msg_codec_size(const struct raft_msg *m)
{
	size_t size = MSG_CODEC_HEADER_SIZE;

	switch (m->type) {
	case RAFT_MSG_VOTE:
	case RAFT_MSG_PRE_VOTE:
		return size + 16;
	case RAFT_MSG_VOTE_RESP:
	case RAFT_MSG_PRE_VOTE_RESP:
		return size + (m->not_member ? 8 : 0);
	case RAFT_MSG_APPEND:
		size += MSG_CODEC_APPEND_FIXED_SIZE;
		for (uint32_t i = 0; i < m->entry_count; i++)
			size += MSG_CODEC_ENTRY_HEADER_SIZE + m->entries[i].size;
		return size;
	case RAFT_MSG_APPEND_RESP:
		return size + 32;
	case RAFT_MSG_SNAPSHOT:
		return size + 32 + 1 + (size_t)m->snap_conf.count * 5 + 4 + m->chunk_size;
	case RAFT_MSG_SNAPSHOT_RESP:
		return size + 16;
	default:
		return size;
	}
}

int msg_codec_encode(const struct raft_msg *m, void *buf, size_t buf_size)
{
	struct byte_writer w;
	uint16_t flags = 0;

	HASP_ASSERT(m->type >= RAFT_MSG_VOTE && m->type < RAFT_MSG_TYPE_COUNT);
	HASP_ASSERT(m->entry_count <= UINT16_MAX);
	if (msg_codec_size(m) > buf_size)
		return -HASP_ETOOBIG;
	flags |= m->transfer ? MSG_CODEC_FLAG_TRANSFER : 0;
	flags |= m->reject ? MSG_CODEC_FLAG_REJECT : 0;
	flags |= m->done ? MSG_CODEC_FLAG_DONE : 0;
	flags |= m->not_member ? MSG_CODEC_FLAG_NOT_MEMBER : 0;
	flags &= flags_allowed(m->type);
	HASP_ASSERT(!m->not_member || (m->reject && (flags & MSG_CODEC_FLAG_NOT_MEMBER) != 0));

	byte_writer_init(&w, buf, buf_size);
	byte_writer_u8(&w, MSG_CODEC_VERSION);
	byte_writer_u8(&w, m->type);
	byte_writer_u16(&w, flags);
	byte_writer_u64(&w, m->cluster_id);
	byte_writer_u32(&w, m->from);
	byte_writer_u32(&w, m->to);
	byte_writer_u64(&w, m->term);
	switch (m->type) {
	case RAFT_MSG_VOTE:
	case RAFT_MSG_PRE_VOTE:
		byte_writer_u64(&w, m->last_index);
		byte_writer_u64(&w, m->last_term);
		break;
	case RAFT_MSG_VOTE_RESP:
	case RAFT_MSG_PRE_VOTE_RESP:
		if (m->not_member)
			byte_writer_u64(&w, m->index);
		break;
	case RAFT_MSG_APPEND:
		byte_writer_u64(&w, m->prev_index);
		byte_writer_u64(&w, m->prev_term);
		byte_writer_u64(&w, m->commit);
		byte_writer_u64(&w, m->read_seq);
		byte_writer_u16(&w, (uint16_t)m->entry_count);
		for (uint32_t i = 0; i < m->entry_count; i++) {
			const struct raft_entry *e = &m->entries[i];
			byte_writer_u64(&w, e->term);
			byte_writer_u8(&w, e->type);
			byte_writer_u32(&w, e->size);
			byte_writer_copy(&w, e->data, e->size);
		}
		break;
	case RAFT_MSG_APPEND_RESP:
		byte_writer_u64(&w, m->index);
		byte_writer_u64(&w, m->hint_index);
		byte_writer_u64(&w, m->hint_term);
		byte_writer_u64(&w, m->read_seq);
		break;
	case RAFT_MSG_SNAPSHOT:
		HASP_ASSERT(m->snap_conf.count <= RAFT_CONF_MEMBERS_MAX);
		byte_writer_u64(&w, m->snap_index);
		byte_writer_u64(&w, m->snap_term);
		byte_writer_u64(&w, m->snap_size);
		byte_writer_u64(&w, m->offset);
		byte_writer_u8(&w, (uint8_t)m->snap_conf.count);
		for (uint32_t i = 0; i < m->snap_conf.count; i++) {
			byte_writer_u32(&w, m->snap_conf.members[i].id);
			byte_writer_u8(&w, m->snap_conf.members[i].role);
		}
		byte_writer_u32(&w, m->chunk_size);
		byte_writer_copy(&w, m->chunk, m->chunk_size);
		break;
	case RAFT_MSG_SNAPSHOT_RESP:
		byte_writer_u64(&w, m->snap_index);
		byte_writer_u64(&w, m->offset);
		break;
	default:
		break;
	}
	HASP_ASSERT(!w.failed);
	HASP_ASSERT(w.written == msg_codec_size(m));
	return (int)w.written;
}

static int decode_conf(struct byte_reader *rd, struct raft_conf *conf)
{
	uint8_t count = byte_reader_u8(rd);

	if (rd->failed)
		return -HASP_ETRUNCATED;
	if (count > RAFT_CONF_MEMBERS_MAX)
		return -HASP_ECORRUPT;
	conf->count = count;
	for (uint32_t i = 0; i < count; i++) {
		conf->members[i].id = byte_reader_u32(rd);
		conf->members[i].role = byte_reader_u8(rd);
		if (rd->failed)
			return -HASP_ETRUNCATED;
		if (conf->members[i].id == 0 ||
		    (conf->members[i].role != RAFT_VOTER && conf->members[i].role != RAFT_LEARNER))
			return -HASP_ECORRUPT;
		for (uint32_t j = 0; j < i; j++)
			if (conf->members[j].id == conf->members[i].id)
				return -HASP_ECORRUPT;
	}
	return 0;
}

int msg_codec_decode(struct raft_msg *m, struct raft_entry *entries, uint32_t entries_max,
		     const void *buf, size_t buf_size)
{
	struct byte_reader rd;
	uint16_t flags;
	int rc;

	memset(m, 0, sizeof(*m));
	byte_reader_init(&rd, buf, buf_size);
	uint8_t version = byte_reader_u8(&rd);
	m->type = byte_reader_u8(&rd);
	flags = byte_reader_u16(&rd);
	m->cluster_id = byte_reader_u64(&rd);
	m->from = byte_reader_u32(&rd);
	m->to = byte_reader_u32(&rd);
	m->term = byte_reader_u64(&rd);
	if (rd.failed)
		return -HASP_ETRUNCATED;
	if (version != MSG_CODEC_VERSION)
		return -HASP_EVERSION;
	if (m->type < RAFT_MSG_VOTE || m->type >= RAFT_MSG_TYPE_COUNT)
		return -HASP_EOPCODE;
	if ((flags & ~flags_allowed(m->type)) != 0)
		return -HASP_EFLAGS;
	m->transfer = (flags & MSG_CODEC_FLAG_TRANSFER) != 0;
	m->reject = (flags & MSG_CODEC_FLAG_REJECT) != 0;
	m->done = (flags & MSG_CODEC_FLAG_DONE) != 0;
	m->not_member = (flags & MSG_CODEC_FLAG_NOT_MEMBER) != 0;
	if (m->not_member && !m->reject)
		return -HASP_EFLAGS;

	switch (m->type) {
	case RAFT_MSG_VOTE:
	case RAFT_MSG_PRE_VOTE:
		m->last_index = byte_reader_u64(&rd);
		m->last_term = byte_reader_u64(&rd);
		break;
	case RAFT_MSG_VOTE_RESP:
	case RAFT_MSG_PRE_VOTE_RESP:
		if (m->not_member)
			m->index = byte_reader_u64(&rd);
		break;
	case RAFT_MSG_APPEND:
		m->prev_index = byte_reader_u64(&rd);
		m->prev_term = byte_reader_u64(&rd);
		m->commit = byte_reader_u64(&rd);
		m->read_seq = byte_reader_u64(&rd);
		m->entry_count = byte_reader_u16(&rd);
		if (rd.failed)
			return -HASP_ETRUNCATED;
		if (m->entry_count > entries_max)
			return -HASP_ETOOBIG;
		for (uint32_t i = 0; i < m->entry_count; i++) {
			struct raft_entry *e = &entries[i];
			e->term = byte_reader_u64(&rd);
			e->type = byte_reader_u8(&rd);
			e->size = byte_reader_u32(&rd);
			e->index = m->prev_index + 1 + i;
			if (rd.failed)
				return -HASP_ETRUNCATED;
			if (e->type < RAFT_ENTRY_COMMAND || e->type > RAFT_ENTRY_CONF)
				return -HASP_ECORRUPT;
			e->data = byte_reader_take(&rd, e->size);
			if (rd.failed)
				return -HASP_ETRUNCATED;
		}
		m->entries = entries;
		break;
	case RAFT_MSG_APPEND_RESP:
		m->index = byte_reader_u64(&rd);
		m->hint_index = byte_reader_u64(&rd);
		m->hint_term = byte_reader_u64(&rd);
		m->read_seq = byte_reader_u64(&rd);
		break;
	case RAFT_MSG_SNAPSHOT:
		m->snap_index = byte_reader_u64(&rd);
		m->snap_term = byte_reader_u64(&rd);
		m->snap_size = byte_reader_u64(&rd);
		m->offset = byte_reader_u64(&rd);
		rc = decode_conf(&rd, &m->snap_conf);
		if (rc != 0)
			return rc;
		m->chunk_size = byte_reader_u32(&rd);
		if (rd.failed)
			return -HASP_ETRUNCATED;
		m->chunk = byte_reader_take(&rd, m->chunk_size);
		break;
	case RAFT_MSG_SNAPSHOT_RESP:
		m->snap_index = byte_reader_u64(&rd);
		m->offset = byte_reader_u64(&rd);
		break;
	default:
		break;
	}
	if (rd.failed)
		return -HASP_ETRUNCATED;
	if (rd.left != 0)
		return -HASP_ELENGTH;
	return 0;
}
