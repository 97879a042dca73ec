/*
 * A small deterministic lock state machine for the simulator: try-acquire,
 * release by token, expiry by token, exactly-once sessions (thesis §6.3:
 * the last reply of each session is cached and returned to a retry), and
 * fencing tokens equal to the apply revision (one per applied command).
 *
 * It is the stand-in until locks/ lands; the simulator drives either through
 * struct sim_sm_ops.
 */
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "tests/sim/sim_sm.h"

#define MODEL_LOCKS 8
#define MODEL_SESSIONS 16

struct model_lock {
	uint32_t holder;     /* session, 0: free */
	uint32_t ttl_ms;
	uint64_t token;
};

struct model_session {
	uint64_t last_seq;
	struct sim_result last;
};

struct model {
	uint64_t revision;
	struct model_lock locks[MODEL_LOCKS];
	struct model_session sessions[MODEL_SESSIONS + 1];
};

static void *model_create(void)
{
	return calloc(1, sizeof(struct model));
}

static void model_destroy(void *sm)
{
	free(sm);
}

static void model_reset(void *sm)
{
	memset(sm, 0, sizeof(struct model));
}

static uint32_t model_encode(const struct sim_cmd *cmd, uint8_t *buf, uint32_t cap)
{
	struct byte_writer w;

	byte_writer_init(&w, buf, cap);
	byte_writer_u8(&w, cmd->kind);
	byte_writer_u8(&w, cmd->lock);
	byte_writer_u64(&w, cmd->kind == SIM_CMD_OPEN ? cmd->nonce : cmd->session);
	byte_writer_u64(&w, cmd->seq);
	byte_writer_u64(&w, cmd->token);
	byte_writer_u32(&w, cmd->ttl_ms);
	return w.failed ? 0 : (uint32_t)w.written;
}

static void model_apply(void *sm, uint64_t index, const uint8_t *data, uint32_t size,
			struct sim_result *res)
{
	struct model *m = sm;
	struct byte_reader rd;
	struct sim_cmd c;

	memset(res, 0, sizeof(*res));
	byte_reader_init(&rd, data, size);
	c.kind = byte_reader_u8(&rd);
	c.lock = byte_reader_u8(&rd);
	c.session = byte_reader_u64(&rd);
	c.seq = byte_reader_u64(&rd);
	c.token = byte_reader_u64(&rd);
	c.ttl_ms = byte_reader_u32(&rd);
	if (rd.failed || rd.left != 0 || c.lock >= MODEL_LOCKS || c.session > MODEL_SESSIONS)
		return;
	m->revision++;
	if (c.kind == SIM_CMD_OPEN) {
		/* Sessions are numbered by the client's nonce: a retried open
		 * gets the same session. */
		res->kind = c.kind;
		res->session = c.session;
		res->nonce = c.session;
		res->index = index;
		res->status = c.session >= 1 && c.session <= MODEL_SESSIONS ? SIM_ST_OPENED : SIM_ST_REFUSED;
		return;
	}
	res->kind = c.kind;
	res->lock = c.lock;
	res->session = c.session;
	res->seq = c.seq;
	res->cmd_token = c.token;
	res->index = index;
	if (c.session != 0) {
		struct model_session *s = &m->sessions[c.session];
		if (c.seq < s->last_seq) {
			res->status = SIM_ST_NONE; /* a stale duplicate: nobody waits */
			return;
		}
		if (c.seq == s->last_seq) {
			*res = s->last;
			res->duplicate = true;
			return;
		}
	}
	struct model_lock *l = &m->locks[c.lock];
	switch (c.kind) {
	case SIM_CMD_ACQUIRE:
		if (l->holder == 0) {
			l->holder = c.session;
			l->token = m->revision;
			l->ttl_ms = c.ttl_ms;
			res->status = SIM_ST_GRANTED;
			res->token = l->token;
		} else {
			res->status = SIM_ST_BUSY;
			res->token = l->token;
		}
		break;
	case SIM_CMD_RELEASE:
	case SIM_CMD_EXPIRE:
		if (l->holder != 0 && l->token == c.token) {
			l->holder = 0;
			res->status = c.kind == SIM_CMD_RELEASE ? SIM_ST_RELEASED : SIM_ST_EXPIRED;
		} else {
			res->status = SIM_ST_NOT_HOLDER;
		}
		break;
	default:
		res->status = SIM_ST_NONE;
		break;
	}
	if (c.session != 0) {
		m->sessions[c.session].last_seq = c.seq;
		m->sessions[c.session].last = *res;
	}
}

static uint32_t model_snapshot(void *sm, uint8_t *buf, uint32_t cap)
{
	if (cap < sizeof(struct model))
		return 0;
	memcpy(buf, sm, sizeof(struct model));
	return sizeof(struct model);
}

static bool model_restore(void *sm, const uint8_t *buf, uint32_t size)
{
	if (size != sizeof(struct model))
		return false;
	memcpy(sm, buf, size);
	return true;
}

static uint32_t model_held(void *sm, struct sim_held *out, uint32_t max)
{
	struct model *m = sm;
	uint32_t n = 0;

	for (uint32_t i = 0; i < MODEL_LOCKS && n < max; i++) {
		if (m->locks[i].holder == 0)
			continue;
		out[n].lock = (uint8_t)i;
		out[n].token = m->locks[i].token;
		out[n].ttl_ms = m->locks[i].ttl_ms;
		n++;
	}
	return n;
}

const struct sim_sm_ops sim_lockmodel_ops = {
	.name = "model",
	.create = model_create,
	.destroy = model_destroy,
	.reset = model_reset,
	.encode = model_encode,
	.apply = model_apply,
	.snapshot = model_snapshot,
	.restore = model_restore,
	.due = NULL,
	.held = model_held,
};
