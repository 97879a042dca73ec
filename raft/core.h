/*
 * Helpers shared by the protocol files of raft/: role transitions, term
 * handling, the outgoing message slots of the current update, quorum
 * arithmetic over the configuration and trace lines. Internal to raft/.
 */
#ifndef HASP_RAFT_CORE_H
#define HASP_RAFT_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raft/raft.h"

/* Emits one trace line "n<id> t<term> <text>" when tracing is on. */
void core_trace(struct raft *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A cleared outgoing message of `type` to `to` with the header filled, or
 * NULL when this update's message slots are full (the message is then
 * dropped and counted, as the network might have dropped it). */
struct raft_msg *core_msg(struct raft *r, uint8_t type, uint32_t to);

/* Becomes a follower of `leader` (0: unknown) at `term` >= r->term; a
 * higher term clears the vote (§3.3). */
void core_become_follower(struct raft *r, uint64_t term, uint32_t leader);

/* Draws a new randomized election timeout in [election_ticks,
 * 2 * election_ticks) and restarts the count (§3.4). */
void core_reset_election_timer(struct raft *r);

/* The progress slot of member `id`, NULL if not a member. */
struct raft_progress *core_progress(struct raft *r, uint32_t id);

const struct raft_member *core_member(const struct raft *r, uint32_t id);
bool core_is_voter(const struct raft *r, uint32_t id);
uint32_t core_voter_count(const struct raft *r);

/* The largest value that a majority of the voters has reached, given each
 * voter's value by `value_of` (§3.6.2 commit, §6.4 read acks). */
uint64_t core_quorum_value(const struct raft *r, uint64_t (*value_of)(const struct raft *r,
								      const struct raft_progress *pr));

uint64_t core_last_term(const struct raft *r);

/* Zeroed array from hasp_alloc() for raft_init(); NULL on overflow or
 * failure. (tests/check_seam.sh forbids the calloc spelling in raft/.) */
void *core_zalloc(size_t count, size_t size);

#endif
