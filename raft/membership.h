/*
 * Membership changes one server at a time (§4.1): a configuration is a log
 * entry, and every server uses the latest configuration in its log, committed
 * or not. A leader accepts a new change only once the previous one is
 * committed. New servers join as non-voting learners and are promoted once
 * caught up (§4.2.1); a leader that removes itself keeps leading until the
 * removal commits, without counting itself, then steps down (§4.2.2).
 *
 * Encoding of a RAFT_ENTRY_CONF payload (little-endian):
 *
 *   | offset | size | field                                   |
 *   |--------|------|-----------------------------------------|
 *   | 0      | 1    | version (1)                             |
 *   | 1      | 1    | member count (<= RAFT_CONF_MEMBERS_MAX) |
 *   | 2      | 5n   | members: id u32, role u8 (1 voter, 2 learner) |
 */
#ifndef HASP_RAFT_MEMBERSHIP_H
#define HASP_RAFT_MEMBERSHIP_H

#include <stddef.h>
#include <stdint.h>

#include "raft/raft.h"

#define MEMBERSHIP_CONF_VERSION 1u
#define MEMBERSHIP_CONF_SIZE_MAX (2u + 5u * RAFT_CONF_MEMBERS_MAX)

/* Encodes conf; returns the size (<= MEMBERSHIP_CONF_SIZE_MAX). */
uint32_t membership_conf_encode(const struct raft_conf *conf, uint8_t *buf);

/* Decodes and validates (unique non-zero ids, known roles). 0 or
 * -HASP_ETRUNCATED, -HASP_ELENGTH, -HASP_EVERSION, -HASP_ECORRUPT. */
int membership_conf_decode(struct raft_conf *conf, const void *data, size_t size)
	__attribute__((warn_unused_result));

/* Makes conf (from the entry at index) the current configuration. */
void membership_set(struct raft *r, const struct raft_conf *conf, uint64_t index);

/* A CONF entry was appended to the log: it takes effect at once. */
void membership_on_append(struct raft *r, const struct raft_entry *e);

/* Entries from `from` on were truncated: fall back to the latest
 * configuration left in the log, or the snapshot's. */
void membership_on_truncate(struct raft *r, uint64_t from);

/* The configuration in effect at `index` (snapshot's if none logged). */
void membership_conf_at(const struct raft *r, uint64_t index, struct raft_conf *conf);

/* The leader's commit advanced: a committed removal of the leader makes it
 * step down (§4.2.2). */
void membership_on_commit(struct raft *r);

/* RAFT_EVENT_CONF_CHANGE on the leader. */
void membership_change(struct raft *r, uint8_t op, uint32_t id);

/* The configuration is well-formed for peers_max. */
bool membership_conf_valid(const struct raft_conf *conf, uint32_t peers_max);

#endif
