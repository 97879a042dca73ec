/*
 * The real lock state machine (locks/) behind the simulator's state machine
 * seam (sim_sm.h): sim commands become struct locks_cmd entries encoded by
 * locks_cmd_encode(), and each applied result (reply, duplicate flag,
 * LOCK_RELEASED events) is translated back into a struct sim_result for the
 * checker. Lock i is named "lock<i>"; ACQUIRE uses its own TTL (a private
 * lease); expiry is the leader's LEASE_EXPIRE of what locks_leases_due()
 * reports at its (term, clock); sessions get a one-day TTL so that they
 * outlive the run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "locks/cmd_codec.h"
#include "locks/locks.h"
#include "locks/snapshot.h"
#include "tests/sim/sim_sm.h"

struct sim_locks {
	struct locks sm;
	struct locks_config cfg;
	struct locks_event *events;
	uint32_t events_max;
};

static void config(struct locks_config *cfg)
{
	locks_config_default(cfg);
	cfg->locks_max = 16;
	cfg->leases_max = 32;
	cfg->sessions_max = 16;
	cfg->waiters_max = 16;
	cfg->kv_entries_max = 4;
	cfg->kv_bytes_max = 1024;
	cfg->lock_name_bytes_max = 256;
	cfg->locks_per_lease_max = 4;
	cfg->keys_per_lease_max = 4;
	cfg->locks_per_session_max = 8;
	cfg->session_window = 4;
}

static void *sl_create(void)
{
	struct sim_locks *s = calloc(1, sizeof(*s));
	if (s == NULL)
		abort();
	config(&s->cfg);
	if (locks_init(&s->sm, &s->cfg) != 0)
		abort();
	s->events_max = locks_events_max(&s->cfg);
	s->events = calloc(s->events_max, sizeof(*s->events));
	if (s->events == NULL)
		abort();
	return s;
}

static void sl_destroy(void *p)
{
	struct sim_locks *s = p;
	locks_deinit(&s->sm);
	free(s->events);
	free(s);
}

static void sl_reset(void *p)
{
	struct sim_locks *s = p;
	locks_deinit(&s->sm);
	if (locks_init(&s->sm, &s->cfg) != 0)
		abort();
}

static uint16_t lock_name(uint8_t lock, uint8_t *name)
{
	return (uint16_t)snprintf((char *)name, 16, "lock%u", lock);
}

static int lock_index(const uint8_t *name, uint32_t len)
{
	if (len < 5 || len > 7 || memcmp(name, "lock", 4) != 0)
		return -1;
	int v = 0;
	for (uint32_t i = 4; i < len; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		v = v * 10 + (name[i] - '0');
	}
	return v;
}

static uint32_t sl_encode(const struct sim_cmd *c, uint8_t *buf, uint32_t cap)
{
	struct locks_cmd cmd;
	uint8_t name[16];

	memset(&cmd, 0, sizeof(cmd));
	cmd.term = c->term;
	cmd.now_ms = c->now_ms;
	switch (c->kind) {
	case SIM_CMD_OPEN:
		cmd.op = LOCKS_OP_SESSION_OPEN;
		cmd.ttl_ms = HASP_TTL_MS_MAX;
		cmd.nonce = c->nonce;
		break;
	case SIM_CMD_ACQUIRE:
		cmd.op = LOCKS_OP_ACQUIRE;
		cmd.mode = HASP_ACQUIRE_TRY;
		cmd.ttl_ms = c->ttl_ms < HASP_TTL_MS_MIN ? HASP_TTL_MS_MIN : c->ttl_ms;
		cmd.session_id = c->session;
		cmd.seq = c->seq;
		cmd.name = name;
		cmd.name_len = lock_name(c->lock, name);
		break;
	case SIM_CMD_RELEASE:
		cmd.op = LOCKS_OP_RELEASE;
		cmd.session_id = c->session;
		cmd.seq = c->seq;
		cmd.token = c->token;
		cmd.name = name;
		cmd.name_len = lock_name(c->lock, name);
		break;
	case SIM_CMD_EXPIRE:
		cmd.op = LOCKS_OP_LEASE_EXPIRE;
		cmd.lease_id = c->lease_id;
		break;
	default:
		return 0;
	}
	int n = locks_cmd_encode(&cmd, buf, cap);
	return n > 0 ? (uint32_t)n : 0;
}

static void sl_apply(void *p, uint64_t index, const uint8_t *data, uint32_t size,
		     struct sim_result *res)
{
	struct sim_locks *s = p;
	struct locks_cmd cmd;
	struct locks_result lr;

	memset(res, 0, sizeof(*res));
	if (locks_cmd_decode(data, size, &cmd) != 0)
		return; /* the checker sees no result: every node agrees */
	memset(&lr, 0, sizeof(lr));
	lr.events = s->events;
	lr.event_count_max = s->events_max;
	locks_apply(&s->sm, index, &cmd, &lr);
	res->seq = cmd.seq;
	res->session = cmd.session_id;
	res->duplicate = lr.duplicate;
	res->index = lr.duplicate ? 0 : index;
	res->cmd_token = cmd.token;
	int lock = cmd.name_len > 0 ? lock_index(cmd.name, cmd.name_len) : -1;
	res->lock = lock >= 0 ? (uint8_t)lock : 0;
	uint8_t st = lr.reply.status;
	switch (cmd.op) {
	case LOCKS_OP_SESSION_OPEN:
		res->kind = SIM_CMD_OPEN;
		res->nonce = cmd.nonce;
		res->session = lr.reply.id;
		res->status = st == HASP_STATUS_OK ? SIM_ST_OPENED : SIM_ST_REFUSED;
		break;
	case LOCKS_OP_ACQUIRE:
		res->kind = SIM_CMD_ACQUIRE;
		res->token = lr.reply.token;
		res->status = st == HASP_STATUS_GRANTED ? SIM_ST_GRANTED :
			      st == HASP_STATUS_BUSY ? SIM_ST_BUSY : SIM_ST_REFUSED;
		break;
	case LOCKS_OP_RELEASE:
		res->kind = SIM_CMD_RELEASE;
		res->status = st == HASP_STATUS_OK ? SIM_ST_RELEASED :
			      st == HASP_STATUS_NOT_HOLDER ? SIM_ST_NOT_HOLDER : SIM_ST_REFUSED;
		break;
	case LOCKS_OP_LEASE_EXPIRE:
		res->kind = SIM_CMD_EXPIRE;
		res->status = SIM_ST_NONE;
		for (uint32_t i = 0; i < lr.event_count; i++) {
			const struct locks_event *ev = &lr.events[i];
			if (ev->type != HASP_EVENT_LOCK_RELEASED || ev->cause != LOCKS_CAUSE_EXPIRE)
				continue;
			lock = lock_index(ev->name, ev->name_len);
			res->lock = lock >= 0 ? (uint8_t)lock : 0;
			res->cmd_token = ev->token;
			res->status = SIM_ST_EXPIRED;
		}
		break;
	default:
		break;
	}
	/* A retry whose seq fell out of the reply window gets no answer: the
	 * client has long moved on. */
	if (st == HASP_STATUS_BAD_REQUEST && lr.reply.reason == LOCKS_REASON_SEQ_TOO_OLD)
		res->status = SIM_ST_NONE;
}

static uint32_t sl_snapshot(void *p, uint8_t *buf, uint32_t cap)
{
	struct sim_locks *s = p;
	size_t written = 0;
	if (locks_snapshot_write(&s->sm, buf, cap, &written) != 0)
		return 0;
	return (uint32_t)written;
}

static bool sl_restore(void *p, const uint8_t *buf, uint32_t size)
{
	struct sim_locks *s = p;
	return locks_snapshot_restore(&s->sm, buf, size) == 0;
}

static uint32_t sl_due(void *p, uint64_t term, uint64_t now_ms, struct sim_cmd *out, uint32_t max)
{
	struct sim_locks *s = p;
	uint64_t ids[8];

	if (max > 8)
		max = 8;
	uint64_t log_time = locks_log_time(&s->sm, term, now_ms);
	uint32_t n = locks_leases_due(&s->sm, log_time, ids, max);
	for (uint32_t i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].kind = SIM_CMD_EXPIRE;
		out[i].lease_id = ids[i];
	}
	return n;
}

const struct sim_sm_ops sim_locks_ops = {
	.name = "locks",
	.create = sl_create,
	.destroy = sl_destroy,
	.reset = sl_reset,
	.encode = sl_encode,
	.apply = sl_apply,
	.snapshot = sl_snapshot,
	.restore = sl_restore,
	.due = sl_due,
	.held = NULL,
};
