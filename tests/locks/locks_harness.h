/*
 * A small driver for the lock state machine in tests: it owns the machine,
 * the event array and the log index, stamps commands with a term and a
 * leader clock the test moves, and offers one-line helpers per command.
 */
#ifndef HASP_TESTS_LOCKS_HARNESS_H
#define HASP_TESTS_LOCKS_HARNESS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "locks/locks.h"
#include "locks/snapshot.h"
#include "tests/test_util.h"

struct harness {
	struct locks sm;
	struct locks_result res;
	struct locks_event *events;
	uint64_t index;
	uint64_t term;
	uint64_t now_ms;
};

static inline void harness_init_cfg(struct harness *h, const struct locks_config *cfg)
{
	memset(h, 0, sizeof(*h));
	HASP_ASSERT(locks_init(&h->sm, cfg) == 0);
	h->events = calloc(locks_events_max(cfg), sizeof(*h->events));
	HASP_ASSERT(h->events != NULL);
	h->term = 1;
	h->now_ms = 1000;
}

static inline void harness_init(struct harness *h)
{
	struct locks_config cfg;
	locks_config_default(&cfg);
	harness_init_cfg(h, &cfg);
}

static inline void harness_deinit(struct harness *h)
{
	locks_deinit(&h->sm);
	free(h->events);
}

/* Applies `cmd` stamped with the harness's term and clock; returns the reply. */
static inline const struct locks_reply *harness_apply(struct harness *h, struct locks_cmd *cmd)
{
	cmd->term = h->term;
	cmd->now_ms = h->now_ms;
	h->res.events = h->events;
	h->res.event_count_max = locks_events_max(&h->sm.cfg);
	locks_apply(&h->sm, ++h->index, cmd, &h->res);
	return &h->res.reply;
}

static inline uint64_t harness_session(struct harness *h, uint32_t ttl_ms)
{
	struct locks_cmd c = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = ttl_ms };
	const struct locks_reply *r = harness_apply(h, &c);
	HASP_ASSERT(r->status == HASP_STATUS_OK);
	return r->id;
}

/* Opens a session of `owner` (an identity), flags LOCKS_CMD_OWNER_RELEASE
 * or 0, and an owner quota (0: none); returns the whole reply. */
static inline const struct locks_reply *harness_open_owned(struct harness *h, uint32_t ttl_ms,
							   uint64_t nonce, uint64_t owner,
							   uint8_t flags, uint32_t quota)
{
	struct locks_cmd c = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = ttl_ms, .nonce = nonce,
			       .owner = owner, .flags = flags, .owner_sessions_max = quota };
	return harness_apply(h, &c);
}

/* Opens a session with a client nonce; returns the whole reply. */
static inline const struct locks_reply *harness_open(struct harness *h, uint32_t ttl_ms, uint64_t nonce)
{
	struct locks_cmd c = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = ttl_ms, .nonce = nonce };
	return harness_apply(h, &c);
}

static inline struct locks_cmd harness_cmd(uint8_t op, uint64_t session, uint64_t seq, const char *name)
{
	struct locks_cmd c = { .op = op, .session_id = session, .seq = seq };
	if (name != NULL) {
		c.name = (const uint8_t *)name;
		c.name_len = (uint16_t)strlen(name);
	}
	return c;
}

static inline const struct locks_reply *harness_acquire(struct harness *h, uint64_t session, uint64_t seq,
							 const char *name, uint8_t mode, uint32_t ttl_ms,
							 uint64_t lease_id)
{
	struct locks_cmd c = harness_cmd(LOCKS_OP_ACQUIRE, session, seq, name);
	c.mode = mode;
	c.ttl_ms = ttl_ms;
	c.lease_id = lease_id;
	return harness_apply(h, &c);
}

static inline const struct locks_reply *harness_release(struct harness *h, uint64_t session, uint64_t seq,
							 const char *name, uint64_t token)
{
	struct locks_cmd c = harness_cmd(LOCKS_OP_RELEASE, session, seq, name);
	c.token = token;
	return harness_apply(h, &c);
}

static inline const struct locks_reply *harness_renew(struct harness *h, uint64_t session, uint64_t seq,
						       const char *name, uint64_t token, uint32_t ttl_ms)
{
	struct locks_cmd c = harness_cmd(LOCKS_OP_RENEW, session, seq, name);
	c.token = token;
	c.ttl_ms = ttl_ms;
	return harness_apply(h, &c);
}

static inline const struct locks_reply *harness_lease_op(struct harness *h, uint8_t op, uint64_t session,
							  uint64_t seq, uint64_t lease_id, uint32_t ttl_ms)
{
	struct locks_cmd c = harness_cmd(op, session, seq, NULL);
	c.lease_id = lease_id;
	c.ttl_ms = ttl_ms;
	return harness_apply(h, &c);
}

static inline const struct locks_reply *harness_expire(struct harness *h, uint64_t lease_id)
{
	struct locks_cmd c = { .op = LOCKS_OP_LEASE_EXPIRE, .lease_id = lease_id };
	return harness_apply(h, &c);
}

static inline const struct locks_reply *harness_tick(struct harness *h)
{
	struct locks_cmd c = { .op = LOCKS_OP_TICK };
	return harness_apply(h, &c);
}

static inline const struct locks_reply *harness_put(struct harness *h, uint64_t session, uint64_t seq,
						     const char *key, const char *value, uint64_t lease_id)
{
	struct locks_cmd c = harness_cmd(LOCKS_OP_KV_PUT, session, seq, key);
	c.value = (const uint8_t *)value;
	c.value_len = (uint16_t)strlen(value);
	c.lease_id = lease_id;
	return harness_apply(h, &c);
}

/* Events of the last apply of a given type. */
static inline uint32_t harness_event_count(const struct harness *h, uint8_t type)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < h->res.event_count; i++)
		n += h->res.events[i].type == type;
	return n;
}

static inline const struct locks_event *harness_event(const struct harness *h, uint8_t type, uint32_t nth)
{
	for (uint32_t i = 0; i < h->res.event_count; i++)
		if (h->res.events[i].type == type && nth-- == 0)
			return &h->res.events[i];
	return NULL;
}

/* a and b serialize to the same bytes. */
static inline void assert_same_snapshot(const struct locks *a, const struct locks *b)
{
	size_t size_a = locks_snapshot_size(a), size_b = locks_snapshot_size(b), wa, wb;
	uint8_t *ba = malloc(size_a), *bb = malloc(size_b);

	assert_non_null(ba);
	assert_non_null(bb);
	assert_int_equal(size_a, size_b);
	assert_int_equal(locks_snapshot_write(a, ba, size_a, &wa), 0);
	assert_int_equal(locks_snapshot_write(b, bb, size_b, &wb), 0);
	assert_int_equal(wa, wb);
	assert_memory_equal(ba, bb, wa);
	free(ba);
	free(bb);
}

#endif
