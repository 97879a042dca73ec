/*
 * The state machine seam of the simulator: the simulator drives any lock
 * state machine through this table, so that the small model in
 * sim_lockmodel.c and the real locks/ state machine run under the same
 * network, disk and checker.
 *
 * Commands are described by struct sim_cmd; each state machine encodes
 * them into its own bytes (the raft entries) and reports what applying one
 * did in struct sim_result, which the checker judges.
 */
#ifndef HASP_TESTS_SIM_SIM_SM_H
#define HASP_TESTS_SIM_SIM_SM_H

#include <stdbool.h>
#include <stdint.h>

enum sim_cmd_kind {
	SIM_CMD_ACQUIRE = 1, /* try-acquire lock for the session */
	SIM_CMD_RELEASE = 2, /* release with a token */
	SIM_CMD_EXPIRE = 3,  /* the leader expires the holder with this token */
	SIM_CMD_OPEN = 4,    /* open a session (nonce: retried opens get the same) */
};

enum sim_status {
	SIM_ST_NONE = 0,     /* no reply (stale duplicate, no-op) */
	SIM_ST_GRANTED = 1,
	SIM_ST_BUSY = 2,
	SIM_ST_RELEASED = 3,
	SIM_ST_NOT_HOLDER = 4,
	SIM_ST_EXPIRED = 5,
	SIM_ST_OPENED = 6,
	SIM_ST_REFUSED = 7,  /* any other reply (full, bad request): the client moves on */
};

struct sim_cmd {
	uint8_t kind;
	uint8_t lock;        /* 0 .. SIM_LOCKS - 1 */
	uint32_t ttl_ms;     /* ACQUIRE */
	uint64_t session;    /* the id OPEN returned; 0 for OPEN and EXPIRE */
	uint64_t seq;        /* per-session request number */
	uint64_t token;      /* RELEASE; EXPIRE (model) */
	uint64_t lease_id;   /* EXPIRE (state machines with lease ids) */
	uint64_t nonce;      /* OPEN */
	uint64_t term;       /* stamped by the proposing leader */
	uint64_t now_ms;     /* the proposing leader's monotonic clock */
};

struct sim_result {
	uint8_t kind;        /* what was applied (a sim_cmd_kind) */
	uint8_t lock;
	uint8_t status;      /* enum sim_status */
	uint64_t session;    /* OPEN: the new session id */
	uint64_t nonce;      /* OPEN */
	uint64_t seq;
	uint64_t cmd_token;  /* the token the command named */
	uint64_t token;      /* GRANTED: the fencing token */
	uint64_t index;      /* log index of the execution; 0 for a cached reply */
	bool duplicate;      /* answered from the session cache */
};

struct sim_held {
	uint8_t lock;
	uint64_t token;
	uint32_t ttl_ms;
};

struct sim_sm_ops {
	const char *name;
	void *(*create)(void);
	void (*destroy)(void *sm);
	void (*reset)(void *sm);
	uint32_t (*encode)(const struct sim_cmd *cmd, uint8_t *buf, uint32_t cap);
	void (*apply)(void *sm, uint64_t index, const uint8_t *data, uint32_t size,
		      struct sim_result *res);
	uint32_t (*snapshot)(void *sm, uint8_t *buf, uint32_t cap);
	bool (*restore)(void *sm, const uint8_t *buf, uint32_t size);
	/* Expiry, decided by the leader: either the state machine lists the
	 * expiry commands due at the leader's (term, clock) (`due`), or it
	 * lists the held locks and the node keeps the countdowns (`held`). */
	uint32_t (*due)(void *sm, uint64_t term, uint64_t now_ms, struct sim_cmd *out, uint32_t max);
	uint32_t (*held)(void *sm, struct sim_held *out, uint32_t max);
};

extern const struct sim_sm_ops sim_lockmodel_ops;
extern const struct sim_sm_ops sim_locks_ops; /* the real locks/ state machine */

#endif
