/*
 * Wire encoding of Raft messages: versioned, little-endian (common/bytes.h),
 * decoded strictly.
 *
 * Every message starts with a 28-byte header:
 *
 *   | offset | size | field                                        |
 *   |--------|------|----------------------------------------------|
 *   | 0      | 1    | version (1)                                  |
 *   | 1      | 1    | type (enum raft_msg_type)                    |
 *   | 2      | 2    | flags: 1 transfer, 2 reject, 4 done,         |
 *   |        |      | 8 not member                                 |
 *   | 4      | 8    | cluster id                                   |
 *   | 12     | 4    | from node id                                 |
 *   | 16     | 4    | to node id                                   |
 *   | 20     | 8    | term                                         |
 *
 * followed by the body of its type (all integers little-endian):
 *
 *   | type                 | body                                                   |
 *   |----------------------|--------------------------------------------------------|
 *   | VOTE, PRE_VOTE       | last_index u64, last_term u64                          |
 *   | *VOTE_RESP           | (none; reject flag); with the not-member flag (only   |
 *   |                      | with reject): index u64 of the sender's committed     |
 *   |                      | configuration entry                                    |
 *   | APPEND               | prev_index u64, prev_term u64, commit u64, read_seq    |
 *   |                      | u64, entry_count u16, entries: term u64, type u8,      |
 *   |                      | size u32, size bytes                                   |
 *   | APPEND_RESP          | index u64, hint_index u64, hint_term u64, read_seq u64 |
 *   | SNAPSHOT             | snap_index u64, snap_term u64, snap_size u64, offset   |
 *   |                      | u64, conf: count u8, count x (id u32, role u8),        |
 *   |                      | chunk_size u32, chunk bytes                            |
 *   | SNAPSHOT_RESP        | snap_index u64, offset u64 (done flag)                 |
 *   | TIMEOUT_NOW          | (none)                                                 |
 *
 * The decoder rejects, with a typed error and without reading past the
 * buffer: another version (-HASP_EVERSION), an unknown type (-HASP_EOPCODE),
 * flags not defined for the type (-HASP_EFLAGS), short input
 * (-HASP_ETRUNCATED), trailing bytes (-HASP_ELENGTH), more entries than the
 * caller's array (-HASP_ETOOBIG), a bad entry type or configuration
 * (-HASP_ECORRUPT). Protocol checks (terms, indexes, membership) are raft's.
 */
#ifndef HASP_RAFT_MSG_CODEC_H
#define HASP_RAFT_MSG_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "raft/raft.h"

#define MSG_CODEC_VERSION 1u
#define MSG_CODEC_HEADER_SIZE 28u
#define MSG_CODEC_APPEND_FIXED_SIZE 34u
#define MSG_CODEC_ENTRY_HEADER_SIZE 13u
#define MSG_CODEC_SNAPSHOT_FIXED_SIZE (32u + 1u + RAFT_CONF_MEMBERS_MAX * 5u + 4u)
#define MSG_CODEC_FLAG_TRANSFER 1u
#define MSG_CODEC_FLAG_REJECT 2u
#define MSG_CODEC_FLAG_DONE 4u
#define MSG_CODEC_FLAG_NOT_MEMBER 8u

/* Encoded size of m. */
size_t msg_codec_size(const struct raft_msg *m);

/* Encodes m into buf. Returns the bytes written, or -HASP_ETOOBIG when
 * buf is too small. */
int msg_codec_encode(const struct raft_msg *m, void *buf, size_t buf_size)
	__attribute__((warn_unused_result));

/* Decodes buf into m; entries are views into buf (the caller keeps buf while
 * it uses m) stored in the caller's array of entries_max. Returns 0 or a
 * -HASP_E* code (see above); m is unspecified on error. */
int msg_codec_decode(struct raft_msg *m, struct raft_entry *entries, uint32_t entries_max,
		     const void *buf, size_t buf_size) __attribute__((warn_unused_result));

/* Most entries one APPEND of an MTU can carry (empty entries). */
static inline uint32_t msg_codec_entries_max(uint32_t mtu)
{
	return (mtu - RAFT_DATAGRAM_OVERHEAD - MSG_CODEC_HEADER_SIZE - MSG_CODEC_APPEND_FIXED_SIZE) /
	       MSG_CODEC_ENTRY_HEADER_SIZE;
}

#endif
