/*
 * Client requests on the node: decode, route, batch, and reply.
 *
 * A datagram is decoded once (hasp_wire_decode_request); a refusal is
 * counted by reason and answered only when the protocol says it may be
 * (never a reply, a truncated header or bad magic: no reflection). Then:
 *
 *   follower            -> NOT_LEADER with the leader's id, IPv4 and client
 *                          port from the member list (or "unknown")
 *   mutating command    -> encoded as a locks command stamped with the
 *                          leader's term and monotonic ms, into the batch
 *   read                -> a read slot; the batch's READ_INDEX decides when
 *                          it is linearizable (Raft §6.4)
 *   WATCH / UNWATCH     -> node-local table (notify.c), answered at once
 *
 * The batch closes at batch_max commands or batch_delay_us after its first
 * command and is proposed as one raft event; several batches may be in
 * flight (raft pipelines them). Each proposed client command leaves a
 * pending slot keyed by its log index; when the entry applies, the reply
 * comes from the state machine's result, which for a retried request is the
 * session cache's stored reply (exactly-once, Raft thesis §6.3). A slot whose
 * entry was replaced by another leader's simply finds a different
 * (session, seq) there and is dropped; the client retries.
 *
 * A retransmission of a command already applied here is not proposed again
 * (answer_from_cache): the same (session, seq) with the same request digest
 * whose reply is in the applied state's reply cache, or a SESSION_OPEN
 * whose nonce names a live session of the same owner, is answered at once
 * with that reply and counted (client_replies_from_cache). It is the answer
 * the duplicate entry's apply would give: a node applies only committed
 * entries, so the cached reply is committed and final (a deposed leader
 * answering from it tells the truth too), and applying a duplicate changes
 * nothing else that matters: no revision, deadline, lease, floor or token
 * moves; only log time advances, which every later entry and the leader's
 * TICKs do as well (docs/PROTOCOL.md, "Exactly once"). Anything else (a new
 * seq, another digest, a seq below the floor or not applied yet, an
 * unknown session or nonce, a record without a digest) is proposed as
 * before, and the state machine decides.
 *
 * Copies in flight. A retransmission of a command still in flight here (in
 * the open batch, or proposed and not yet applied) is not proposed either:
 * it is dropped unanswered and counted (client_retransmits_in_flight). The
 * original's reply goes to the original's address when its entry applies;
 * the client, which retransmits until it has a reply, gets it there, or
 * once the entry applied its next copy is answered from the cache (from
 * whatever address it comes: a copy from another address is dropped all
 * the same, since answering it would only duplicate the original's reply,
 * and proposing it would buy a log entry whose apply answers from the
 * cache). A copy is the same (session, seq) with the same request digest
 * (locks_cmd.digest): another digest under that seq is proposed and the
 * apply refuses it (request_mismatch) as before, and it leaves the first
 * command's mark in place. SESSION_OPEN copies (keyed by nonce, no
 * session) are out of scope: the apply deduplicates them by nonce.
 *
 * Where to find the command: n->inflight, a direct-mapped table keyed by a
 * hash of (session, seq), names where the command waits: its batch
 * position while collected, its log index once proposed (rewritten in
 * dispatch_flush). Nothing in it is trusted: a mark counts only when the
 * batch item or pending slot it names still holds the same session, seq
 * and digest, with the term the leader has now. So no mark can get stuck.
 * A batch refused (fail_batch) leaves no item behind its marks (the batch
 * is empty, and an item later at that position is another command or the
 * same one collected again); an applied entry frees its pending slot
 * (dispatch_applied), and from then on the cache answers; a pending slot
 * reused for a later index no longer has the index the mark names. A term
 * change (the node lost leadership, maybe won it back) ends every mark:
 * a leader never truncates its own log within its term (Raft §5.3), so an
 * entry it proposed in this term is in its log and will apply here if it
 * commits at all, while one from an earlier term may have been replaced
 * by another leader's entry that has not applied yet. The table is lossy:
 * two commands in one slot keep the later's mark, and a copy of the other
 * is proposed as before (the state machine decides, as without the mark).
 *
 * Cost: a new seq of a known session (every new request) is recognised by
 * the look-up that remembers the session's address anyway
 * (notify_session_seen(): a seq above every seq it saw), so it costs no
 * search, only one store of its mark when collected and one when
 * proposed. A seq seen before costs one table read and one pending slot or
 * batch item read. Nothing allocates. A session the session table has no room for is
 * looked up on every request (its copies are still told apart). A session
 * a lagging state machine does not know yet is not looked up (its command
 * is marked all the same): its copies are proposed, as before.
 */
#include "node/dispatch.h"

#include <string.h>

#include "common/alloc.h"
#include "common/assert.h"
#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/wire_auth.h"
#include "node/node_latency.h"
#include "node/notify.h"
#include "hasp/errors.h"

#define NS_PER_MS 1000000ull

int dispatch_init(struct node *n)
{
	n->batch = hasp_calloc(n->cfg.batch_max + 2u * NODE_EXPIRE_IDS_MAX + 1, sizeof(*n->batch));
	n->batch_bufs = hasp_calloc(n->cfg.batch_max + 2u * NODE_EXPIRE_IDS_MAX + 1,
				    sizeof(*n->batch_bufs));
	n->batch_buf = hasp_alloc((size_t)(n->cfg.batch_max + 2u * NODE_EXPIRE_IDS_MAX + 1) *
				  LOCKS_CMD_SIZE_MAX);
	/* Pending replies by index: the leader holds at most log_window / 2
	 * uncommitted entries (raft refuses more), so a ring of log_window
	 * slots never reuses a slot whose entry may still commit. */
	n->pending_count = n->cfg.log_window;
	n->pending = hasp_calloc(n->pending_count, sizeof(*n->pending));
	/* Marks of commands in flight: at most log_window / 2 proposed and
	 * not applied, plus a batch; twice that many slots keep the chance
	 * that a command finds its slot taken below one half. */
	uint64_t inflight_max = n->pending_count / 2u                          /* proposed */
			      + n->cfg.batch_max + 2u * NODE_EXPIRE_IDS_MAX + 1u; /* the batch */
	uint64_t inflight_size = 16;
	while (inflight_size < 2u * inflight_max)
		inflight_size <<= 1;
	n->inflight_mask = (uint32_t)(inflight_size - 1);
	n->inflight = hasp_calloc(inflight_size, sizeof(*n->inflight));
	n->reads_max = n->raft.cfg.reads_max;
	n->reads = hasp_calloc(n->reads_max, sizeof(*n->reads));
	if (n->batch == NULL || n->batch_bufs == NULL || n->batch_buf == NULL || n->pending == NULL ||
	    n->inflight == NULL || n->reads == NULL)
		return -HASP_ENOMEM;
	HASP_ASSERT(n->pending_count > 0 && n->reads_max > 0);
	HASP_ASSERT(((uint64_t)n->inflight_mask & (n->inflight_mask + 1ull)) == 0);
	HASP_ASSERT(n->batch_count == 0 && n->reads_collected == 0);
	return 0;
}

void dispatch_deinit(struct node *n)
{
	hasp_free(n->batch);
	hasp_free(n->batch_bufs);
	hasp_free(n->batch_buf);
	hasp_free(n->pending);
	hasp_free(n->inflight);
	hasp_free(n->reads);
	n->batch = NULL;
	n->batch_bufs = NULL;
	n->batch_buf = NULL;
	n->pending = NULL;
	n->inflight = NULL;
	n->reads = NULL;
}

/* The key that seals a reply: `key` with client_auth = on, else none. */
static const struct auth_key *reply_key(const struct node *n, const struct auth_key *key)
{
	return n->cfg.client_auth ? key : NULL;
}

/* Encodes and sends a reply to a request that arrived at arrival_ns. With
 * client_auth = on every reply is wire v2 and sealed with `key` (NULL with
 * auth on: nothing is sent, never an unauthenticated answer); with it off,
 * v1 and no tag. A reply sent is counted by opcode and status and timed. */
static void send_reply(struct node *n, uint32_t ip, uint16_t port, const struct hasp_wire_msg *msg,
		       const struct auth_key *key, uint64_t arrival_ns)
{
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg m = *msg;

	if (n->cfg.client_auth && key == NULL) {
		n->stats.client_unanswered++;
		return;
	}
	m.hdr.version = n->cfg.client_auth ? 2 : 1;
	int size = hasp_wire_encode(&m, buf, sizeof(buf));
	if (size <= 0) {
		/* The body we built broke a wire rule: answer the status alone
		 * rather than nothing, so the client is not left waiting. */
		struct hasp_wire_msg bare;
		hasp_wire_reply_init(&bare, &m.hdr, HASP_STATUS_BAD_REQUEST);
		size = hasp_wire_encode(&bare, buf, sizeof(buf));
		if (size <= 0) {
			n->stats.client_unanswered++; /* e.g. a non-OK EVENT */
			return;
		}
		m.hdr.status = HASP_STATUS_BAD_REQUEST;
	}
	if (key != NULL)
		hasp_wire_seal(key, buf, (size_t)size);
	n->loop.client_send(n, ip, port, buf, (size_t)size);
	n->stats.client_replies++;
	node_latency_reply(n, m.hdr.opcode, m.hdr.status, arrival_ns);
}

/* dispatch_reply_status for a request that waited since arrival_ns. */
static void reply_status_at(struct node *n, uint32_t ip, uint16_t port,
			    const struct hasp_wire_header *hdr, enum hasp_status status,
			    const struct auth_key *key, uint64_t arrival_ns)
{
	struct hasp_wire_msg reply;
	hasp_wire_reply_init(&reply, hdr, status);
	if (status == HASP_STATUS_BAD_VERSION) {
		reply.body.bad_version.version_min = HASP_WIRE_VERSION_MIN;
		reply.body.bad_version.version_max = HASP_WIRE_VERSION;
	}
	send_reply(n, ip, port, &reply, reply_key(n, key), arrival_ns);
}

void dispatch_reply_status(struct node *n, uint32_t ip, uint16_t port,
			   const struct hasp_wire_header *hdr, enum hasp_status status,
			   const struct auth_key *key)
{
	reply_status_at(n, ip, port, hdr, status, key, n->now_ns);
}

static void reply_not_leader(struct node *n, uint32_t ip, uint16_t port,
			     const struct hasp_wire_header *hdr, const struct auth_key *key,
			     uint64_t arrival_ns)
{
	struct hasp_wire_msg reply;
	const struct node_member *m = NULL;

	hasp_wire_reply_init(&reply, hdr, HASP_STATUS_NOT_LEADER);
	if (n->leader_id != 0 && n->leader_id != n->cfg.node_id)
		m = node_config_member(&n->cfg, n->leader_id);
	if (m != NULL) {
		reply.body.not_leader.leader_id = m->id;
		reply.body.not_leader.ipv4[0] = (uint8_t)(m->ip >> 24);
		reply.body.not_leader.ipv4[1] = (uint8_t)(m->ip >> 16);
		reply.body.not_leader.ipv4[2] = (uint8_t)(m->ip >> 8);
		reply.body.not_leader.ipv4[3] = (uint8_t)m->ip;
		reply.body.not_leader.port = m->client_port;
		reply.body.not_leader.known = 1;
	}
	n->stats.client_not_leader++;
	send_reply(n, ip, port, &reply, reply_key(n, key), arrival_ns);
}

/* ---- batches ---- */

/* The slot of (session, seq) in n->inflight (see "Copies in flight"). */
static uint32_t inflight_slot(const struct node *n, uint64_t session_id, uint64_t seq)
{
	uint64_t h = (session_id ^ (seq * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
	return (uint32_t)(h >> 32) & n->inflight_mask;
}

/* The command of `session_id` and `seq` in flight in this term: the batch
 * item or pending slot its mark names, if that still holds it; else NULL.
 * The caller compares the digest. */
static const struct node_pending *inflight_find(const struct node *n, uint64_t session_id,
						uint64_t seq)
{
	uint64_t where = n->inflight[inflight_slot(n, session_id, seq)];
	const struct node_pending *p;

	HASP_ASSERT(session_id != 0);
	if (where & NODE_INFLIGHT_BATCH) {
		uint64_t pos = where & ~NODE_INFLIGHT_BATCH;
		if (pos >= n->batch_count || !n->batch[pos].has_client)
			return NULL; /* the batch it was in is gone */
		p = &n->batch[pos].p;
	} else {
		if (where == 0)
			return NULL;
		p = &n->pending[where % n->pending_count];
		if (p->index != where)
			return NULL; /* applied, or the slot serves a later index */
	}
	if (p->session_id != session_id || p->seq != seq || p->term != n->term)
		return NULL;
	HASP_ASSERT(p->op != HASP_OP_SESSION_OPEN && p->digest != 0);
	return p;
}

static bool batch_has_room(const struct node *n)
{
	return n->batch_count < n->cfg.batch_max + 2u * NODE_EXPIRE_IDS_MAX;
}

static void batch_add(struct node *n, const struct locks_cmd *cmd, const struct node_pending *p)
{
	if (!batch_has_room(n))
		dispatch_flush(n);
	HASP_ASSERT(batch_has_room(n));
	struct node_batch_item *it = &n->batch[n->batch_count];
	int size = locks_cmd_encode(cmd, n->batch_buf + n->batch_used, LOCKS_CMD_SIZE_MAX);
	HASP_ASSERT(size > 0); /* built from a decoded request: always valid */
	if (n->batch_count == 0 && n->reads_collected == 0)
		n->batch_open_ns = n->now_ns;
	it->offset = n->batch_used;
	it->size = (uint32_t)size;
	it->has_client = p != NULL;
	it->marked = false;
	if (p != NULL)
		it->p = *p;
	n->batch_used += (uint32_t)size;
	n->batch_count++;
	HASP_ASSERT(n->batch_used <= (n->cfg.batch_max + 2u * NODE_EXPIRE_IDS_MAX + 1) *
					  LOCKS_CMD_SIZE_MAX);
}

/* Marks the batch's last item, a client command with a session, as the
 * one in flight under its (session, seq). */
static void batch_mark_last(struct node *n)
{
	HASP_ASSERT(n->batch_count > 0);
	struct node_batch_item *it = &n->batch[n->batch_count - 1];
	HASP_ASSERT(it->has_client && it->p.digest != 0);
	n->inflight[inflight_slot(n, it->p.session_id, it->p.seq)] =
		NODE_INFLIGHT_BATCH | (n->batch_count - 1);
	it->marked = true;
}

/* A marked batch item at `pos` was proposed as pending `p`: its mark
 * follows it from the batch to the log, unless another took the slot. */
static void inflight_mark_proposed(struct node *n, const struct node_pending *p, uint32_t pos)
{
	uint64_t *mark = &n->inflight[inflight_slot(n, p->session_id, p->seq)];
	HASP_ASSERT(p->index != 0 && (p->index & NODE_INFLIGHT_BATCH) == 0);
	if (*mark == (NODE_INFLIGHT_BATCH | pos))
		*mark = p->index;
}

void dispatch_add_leader_cmd(struct node *n, const struct locks_cmd *cmd)
{
	struct locks_cmd c = *cmd;
	c.term = n->term;
	c.now_ms = n->now_ns / NS_PER_MS;
	/* Counts as a proposal for the idle-TICK timer from now on, so the
	 * timer does not add another TICK before this batch closes. */
	n->last_propose_ns = n->now_ns;
	batch_add(n, &c, NULL);
}

static void fail_batch(struct node *n, enum hasp_status status)
{
	for (uint32_t i = 0; i < n->batch_count; i++) {
		const struct node_batch_item *it = &n->batch[i];
		if (!it->has_client)
			continue;
		struct hasp_wire_header hdr = { .opcode = it->p.op, .session_id = it->p.session_id,
						.seq = it->p.seq };
		if (status == HASP_STATUS_NOT_LEADER)
			reply_not_leader(n, it->p.ip, it->p.port, &hdr, &it->p.key, it->p.arrival_ns);
		else
			reply_status_at(n, it->p.ip, it->p.port, &hdr, status, &it->p.key,
					it->p.arrival_ns);
		if (status == HASP_STATUS_OVERLOADED)
			n->stats.client_overloaded++;
	}
	n->batch_count = 0;
	n->batch_used = 0;
}

/* Closes the reads collected since the last batch: one READ_INDEX for all
 * of them (Raft §6.4), or their refusal. */
static void flush_reads(struct node *n)
{
	if (n->reads_collected == 0)
		return;
	uint64_t ctx = ++n->read_ctx;
	struct raft_event ev = { .type = RAFT_EVENT_READ_INDEX, .read = { .ctx = ctx } };
	raft_step(&n->raft, &ev, &n->up);
	bool ok = n->up.reject == RAFT_OK;
	for (uint32_t i = 0; i < n->reads_max; i++) {
		struct node_read *r = &n->reads[i];
		if (r->state != NODE_READ_COLLECTED)
			continue;
		if (ok) {
			r->state = NODE_READ_ASKED;
			r->ctx = ctx;
		} else {
			struct hasp_wire_header hdr = { .opcode = r->op, .session_id = r->session_id,
							.seq = r->seq };
			if (n->up.reject == RAFT_NOT_LEADER)
				reply_not_leader(n, r->ip, r->port, &hdr, &r->key, r->arrival_ns);
			else {
				reply_status_at(n, r->ip, r->port, &hdr, HASP_STATUS_OVERLOADED, &r->key,
						r->arrival_ns);
				n->stats.client_overloaded++;
			}
			r->state = NODE_READ_FREE;
		}
	}
	n->reads_collected = 0;
	n->loop.raft_updated(n); /* a single-node group may answer the read at once */
	HASP_ASSERT(n->reads_ready <= n->reads_max);
}

void dispatch_flush(struct node *n)
{
	if (n->batch_count > 0) {
		for (uint32_t i = 0; i < n->batch_count; i++)
			n->batch_bufs[i] = (struct raft_buf){ .data = n->batch_buf + n->batch[i].offset,
							      .size = n->batch[i].size };
		struct raft_event ev = { .type = RAFT_EVENT_PROPOSE,
					 .propose = { .bufs = n->batch_bufs, .count = n->batch_count } };
		raft_step(&n->raft, &ev, &n->up);
		if (n->up.reject == RAFT_OK) {
			HASP_ASSERT(n->up.propose_count == n->batch_count);
			if (n->batch_count == n->cfg.batch_max)
				n->stats.batch_full_flushes++;
			for (uint32_t i = 0; i < n->batch_count; i++) {
				const struct node_batch_item *it = &n->batch[i];
				uint64_t index = n->up.propose_index + i;
				struct node_pending *p = &n->pending[index % n->pending_count];
				HASP_ASSERT(index > n->applied); /* not applied yet */
				if (it->has_client) {
					*p = it->p;
					p->index = index;
					if (it->marked)
						inflight_mark_proposed(n, p, i);
				} else if (p->index != 0 && p->index <= index) {
					p->index = 0;
				}
			}
			node_latency_proposed(n, n->up.propose_index + n->batch_count - 1);
			n->stats.proposals += n->batch_count;
			n->stats.batches++;
			n->last_propose_ns = n->now_ns;
			n->batch_count = 0;
			n->batch_used = 0;
		} else {
			fail_batch(n, n->up.reject == RAFT_NOT_LEADER ? HASP_STATUS_NOT_LEADER
								      : HASP_STATUS_OVERLOADED);
		}
		/* The propose step's update (entries to the WAL, appends to the
		 * followers) is handled like any other. */
		n->loop.raft_updated(n);
	}
	flush_reads(n);
	/* Everything collected left: proposed, read-indexed or refused. */
	HASP_ASSERT(n->batch_count == 0 && n->batch_used == 0);
	HASP_ASSERT(n->reads_collected == 0);
}

/* ---- replies from applied commands ---- */

static void build_reply(struct node *n, const struct node_pending *p, const struct locks_cmd *cmd,
			const struct locks_result *res, struct hasp_wire_msg *msg)
{
	const struct locks_reply *r = &res->reply;
	struct hasp_wire_header hdr = { .opcode = p->op, .session_id = p->session_id, .seq = p->seq };
	enum hasp_status status = (enum hasp_status)r->status;

	/* The wire answers a successful RENEW with GRANTED and its token. */
	if (p->op == HASP_OP_RENEW && status == HASP_STATUS_OK)
		status = HASP_STATUS_GRANTED;
	hasp_wire_reply_init(msg, &hdr, status);
	switch (status) {
	case HASP_STATUS_OK:
		switch (p->op) {
		case HASP_OP_SESSION_OPEN:
			msg->body.session_opened.session_id = r->id;
			msg->body.session_opened.ttl_ms = r->ttl_ms;
			break;
		case HASP_OP_SESSION_KEEPALIVE: {
			struct locks_session_info si;
			msg->body.session_alive.ttl_ms =
				locks_session_read(&n->sm, cmd->session_id, &si) ? si.ttl_ms : r->ttl_ms;
			break;
		}
		case HASP_OP_LEASE_GRANT:
			msg->body.lease_ok.lease_id = r->id;
			msg->body.lease_ok.ttl_ms = r->ttl_ms;
			break;
		case HASP_OP_LEASE_KEEPALIVE: {
			struct locks_lease_info li;
			msg->body.lease_ok.lease_id = cmd->lease_id;
			msg->body.lease_ok.ttl_ms =
				locks_lease_read(&n->sm, cmd->lease_id, &li) ? li.ttl_ms : r->ttl_ms;
			break;
		}
		case HASP_OP_KV_PUT:
		case HASP_OP_KV_DELETE:
		case HASP_OP_KV_CAS:
			msg->body.kv_revision.revision = r->revision;
			break;
		default:
			break;
		}
		break;
	case HASP_STATUS_GRANTED: {
		uint32_t ttl = r->ttl_ms;
		if (ttl == 0) {
			struct locks_lock_info li;
			if (locks_lock_read(&n->sm, cmd->name, cmd->name_len, &li))
				ttl = li.ttl_ms;
		}
		msg->body.granted.token = r->token;
		msg->body.granted.lease_id = p->lease_id;
		msg->body.granted.ttl_ms = ttl > HASP_TTL_MS_MAX ? HASP_TTL_MS_MAX : ttl;
		break;
	}
	case HASP_STATUS_QUEUED:
		msg->body.queued.position = r->position;
		break;
	case HASP_STATUS_BUSY:
		msg->body.busy.holder_token = r->token;
		break;
	case HASP_STATUS_COMPARE_FAILED:
		msg->body.kv_revision.revision = r->revision;
		break;
	default:
		break;
	}
}

/* Answers the client of `p` with the state machine's result for `cmd`:
 * an applied entry's, or a cached reply (answer_from_cache). */
static void reply_result(struct node *n, const struct node_pending *p, const struct locks_cmd *cmd,
			 const struct locks_result *res)
{
	if (p->op == HASP_OP_SESSION_OPEN && res->reply.status == HASP_STATUS_OK)
		(void)notify_session_seen(n, res->reply.id, 0, p->ip, p->port);
	struct hasp_wire_msg msg;
	build_reply(n, p, cmd, res, &msg);
	send_reply(n, p->ip, p->port, &msg, reply_key(n, &p->key), p->arrival_ns);
}

void dispatch_applied(struct node *n, uint64_t index, const struct locks_cmd *cmd,
		      const struct locks_result *res)
{
	struct node_pending *p = &n->pending[index % n->pending_count];

	HASP_ASSERT(index != 0 && index <= n->applied);
	if (p->index != index)
		return; /* no client waits here (a leader command or a follower) */
	p->index = 0;
	/* Another leader's entry at our index: not our client's command. */
	if (p->op != cmd->op || (p->op != HASP_OP_SESSION_OPEN &&
				 (p->session_id != cmd->session_id || p->seq != cmd->seq))) {
		n->stats.pending_lost++;
		return;
	}
	reply_result(n, p, cmd, res);
}

/* ---- reads ---- */

static void serve_read(struct node *n, const struct node_read *r)
{
	struct hasp_wire_header hdr = { .opcode = r->op, .session_id = r->session_id, .seq = r->seq };
	struct hasp_wire_msg msg;

	switch (r->op) {
	case HASP_OP_LOCK_READ: {
		struct locks_lock_info li;
		if (!locks_lock_read(&n->sm, r->name, r->name_len, &li)) {
			hasp_wire_reply_init(&msg, &hdr, HASP_STATUS_NOT_FOUND);
			break;
		}
		uint64_t t = locks_log_time(&n->sm, n->term, n->now_ns / NS_PER_MS);
		uint64_t left = li.deadline_ms > t ? li.deadline_ms - t : 0;
		hasp_wire_reply_init(&msg, &hdr, HASP_STATUS_OK);
		/* Who holds a lock is shown to its own identity only
		 * (docs/SECURITY.md 4.5); others see the token and TTL. */
		if (!n->cfg.client_auth || r->owner == li.holder_owner)
			msg.body.lock_info.holder_session_id = li.holder_session_id;
		msg.body.lock_info.token = li.token;
		msg.body.lock_info.lease_id = li.private_lease ? 0 : li.lease_id;
		msg.body.lock_info.ttl_remaining_ms = left > HASP_TTL_MS_MAX ? HASP_TTL_MS_MAX : (uint32_t)left;
		msg.body.lock_info.waiter_count = li.waiter_count;
		break;
	}
	case HASP_OP_CHECK:
		hasp_wire_reply_init(&msg, &hdr,
				     locks_check(&n->sm, r->name, r->name_len, r->token)
					     ? HASP_STATUS_OK : HASP_STATUS_NOT_HOLDER);
		break;
	case HASP_OP_KV_GET: {
		struct locks_kv_info kv;
		if (!locks_kv_get(&n->sm, r->name, r->name_len, &kv)) {
			hasp_wire_reply_init(&msg, &hdr, HASP_STATUS_NOT_FOUND);
			break;
		}
		hasp_wire_reply_init(&msg, &hdr, HASP_STATUS_OK);
		msg.body.kv_value.value = (struct hasp_wire_bytes){ kv.value, kv.value_len };
		msg.body.kv_value.revision = kv.mod_revision;
		msg.body.kv_value.lease_id = kv.lease_id;
		break;
	}
	case HASP_OP_KV_RANGE: {
		uint32_t want = r->limit == 0 || r->limit > NODE_RANGE_MAX ? NODE_RANGE_MAX : r->limit;
		uint32_t got = locks_kv_range(&n->sm, r->name, r->name_len, r->start_len ? r->start : NULL,
					      r->start_len, n->range, want + 1);
		struct hasp_wire_kv_entry entries[NODE_RANGE_MAX];
		uint32_t count = got > want ? want : got;
		for (uint32_t i = 0; i < count; i++)
			entries[i] = (struct hasp_wire_kv_entry){
				.key = { n->range[i].key, n->range[i].key_len },
				.value = { n->range[i].value, n->range[i].value_len },
				.revision = n->range[i].mod_revision,
			};
		struct hasp_wire_header rh = hdr;
		rh.flags = HASP_WIRE_F_REPLY;
		uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
		size_t packed = 0;
		/* MORE: entries remain after the last one sent (PROTOCOL.md),
		 * whether the client's limit or the node's stopped it. */
		bool more = got > want;
		rh.version = n->cfg.client_auth ? 2 : 1;
		int size = hasp_wire_encode_kv_range_reply(&rh, entries, count, more, buf, sizeof(buf),
							   &packed);
		if (size > 0 && n->cfg.client_auth)
			hasp_wire_seal(&r->key, buf, (size_t)size);
		if (size > 0) {
			n->loop.client_send(n, r->ip, r->port, buf, (size_t)size);
			n->stats.client_replies++;
		}
		n->stats.reads++;
		return;
	}
	default:
		HASP_UNREACHABLE();
	}
	n->stats.reads++;
	send_reply(n, r->ip, r->port, &msg, reply_key(n, &r->key), r->arrival_ns);
}

void dispatch_reads_ready(struct node *n, const struct raft_read *reads, uint32_t count)
{
	for (uint32_t k = 0; k < count; k++)
		for (uint32_t i = 0; i < n->reads_max; i++) {
			struct node_read *r = &n->reads[i];
			if (r->state == NODE_READ_ASKED && r->ctx == reads[k].ctx) {
				r->state = NODE_READ_READY;
				r->index = reads[k].index;
				n->reads_ready++;
			}
		}
	HASP_ASSERT(n->reads_ready <= n->reads_max);
}

uint32_t dispatch_serve_reads(struct node *n)
{
	uint32_t served = 0;
	if (n->reads_ready == 0)
		return 0; /* the common case: no scan per loop iteration */
	for (uint32_t i = 0; i < n->reads_max; i++) {
		struct node_read *r = &n->reads[i];
		/* Raft §6.4: serve once the state machine applied the read
		 * index, so every write acknowledged before the read is seen. */
		if (r->state == NODE_READ_READY && r->index <= n->applied) {
			serve_read(n, r);
			r->state = NODE_READ_FREE;
			n->reads_ready--;
			served++;
		}
	}
	HASP_ASSERT(served <= n->reads_max);
	return served;
}

void dispatch_step_down(struct node *n)
{
	enum hasp_status st = n->stopping ? HASP_STATUS_UNAVAILABLE : HASP_STATUS_NOT_LEADER;
	if (n->batch_count > 0)
		fail_batch(n, st);
	for (uint32_t i = 0; i < n->reads_max; i++) {
		struct node_read *r = &n->reads[i];
		if (r->state == NODE_READ_FREE)
			continue;
		struct hasp_wire_header hdr = { .opcode = r->op, .session_id = r->session_id, .seq = r->seq };
		if (st == HASP_STATUS_NOT_LEADER)
			reply_not_leader(n, r->ip, r->port, &hdr, &r->key, r->arrival_ns);
		else
			reply_status_at(n, r->ip, r->port, &hdr, st, &r->key, r->arrival_ns);
		r->state = NODE_READ_FREE;
		n->stats.reads_dropped++;
	}
	n->reads_collected = 0;
	n->reads_ready = 0;
	node_latency_step_down(n);
	HASP_ASSERT(n->batch_count == 0 && n->batch_used == 0);
	/* Pending replies stay: if the entries commit under the next leader
	 * the clients retry there and get the cached reply; if they are
	 * replaced, dispatch_applied finds another command and drops them. */
	notify_clear(n);
}

/* ---- requests ---- */

/* Who sent an authenticated request: the key its reply is sealed with and
 * its identity (client_auth = on), or nothing (off). */
struct sender {
	const struct auth_key *key;
	const struct client_identity *id;
};

static bool add_read(struct node *n, uint32_t ip, uint16_t port, const struct hasp_wire_msg *m,
		     const struct sender *who)
{
	struct node_read *r = NULL;
	for (uint32_t i = 0; i < n->reads_max; i++)
		if (n->reads[i].state == NODE_READ_FREE) {
			r = &n->reads[i];
			break;
		}
	if (r == NULL)
		return false;
	memset(r, 0, sizeof(*r));
	r->op = m->hdr.opcode;
	r->arrival_ns = n->now_ns;
	r->ip = ip;
	r->port = port;
	r->session_id = m->hdr.session_id;
	r->seq = m->hdr.seq;
	if (who->key != NULL) {
		r->key = *who->key;
		r->owner = who->id->owner;
	}
	const struct hasp_wire_bytes *name = NULL;
	switch (m->hdr.opcode) {
	case HASP_OP_LOCK_READ: name = &m->body.lock_read.name; break;
	case HASP_OP_KV_GET: name = &m->body.kv_get.name; break;
	case HASP_OP_CHECK:
		name = &m->body.check.name;
		r->token = m->body.check.token;
		break;
	case HASP_OP_KV_RANGE:
		name = &m->body.kv_range.prefix;
		r->limit = m->body.kv_range.limit;
		r->start_len = (uint8_t)m->body.kv_range.start_after.size;
		memcpy(r->start, m->body.kv_range.start_after.data, r->start_len);
		break;
	default: HASP_UNREACHABLE();
	}
	HASP_ASSERT(name != NULL);
	HASP_ASSERT(name->size <= HASP_NAME_SIZE_MAX);
	r->name_len = (uint8_t)name->size;
	memcpy(r->name, name->data, name->size);
	r->state = NODE_READ_COLLECTED;
	if (n->batch_count == 0 && n->reads_collected == 0)
		n->batch_open_ns = n->now_ns;
	n->reads_collected++;
	return true;
}

/* Translates a decoded request into a locks command (pointers into the
 * datagram: encoded into the batch before the datagram goes away). */
static void request_cmd(const struct hasp_wire_msg *m, struct locks_cmd *c)
{
	memset(c, 0, sizeof(*c));
	c->op = m->hdr.opcode;
	c->session_id = m->hdr.session_id;
	c->seq = m->hdr.seq;
	switch (m->hdr.opcode) {
	case HASP_OP_SESSION_OPEN:
		c->session_id = 0;
		c->seq = 0;
		c->ttl_ms = m->body.session_open.ttl_ms;
		/* The state machine deduplicates opens by nonce: a retried open
		 * (also one proposed twice) gets the same session. */
		c->nonce = m->body.session_open.client_nonce;
		break;
	case HASP_OP_SESSION_KEEPALIVE:
	case HASP_OP_SESSION_CLOSE:
		break;
	case HASP_OP_LEASE_GRANT: c->ttl_ms = m->body.lease_grant.ttl_ms; break;
	case HASP_OP_LEASE_KEEPALIVE: c->lease_id = m->body.lease_keepalive.lease_id; break;
	case HASP_OP_LEASE_REVOKE: c->lease_id = m->body.lease_revoke.lease_id; break;
	case HASP_OP_ACQUIRE:
		c->name = m->body.acquire.name.data;
		c->name_len = (uint16_t)m->body.acquire.name.size;
		c->mode = m->body.acquire.mode;
		c->ttl_ms = m->body.acquire.ttl_ms;
		c->lease_id = m->body.acquire.lease_id;
		break;
	case HASP_OP_RELEASE:
		c->name = m->body.release.name.data;
		c->name_len = (uint16_t)m->body.release.name.size;
		c->token = m->body.release.token;
		break;
	case HASP_OP_CANCEL:
		c->name = m->body.cancel.name.data;
		c->name_len = (uint16_t)m->body.cancel.name.size;
		break;
	case HASP_OP_RENEW:
		c->name = m->body.renew.name.data;
		c->name_len = (uint16_t)m->body.renew.name.size;
		c->token = m->body.renew.token;
		c->ttl_ms = m->body.renew.ttl_ms;
		break;
	case HASP_OP_KV_PUT:
		c->name = m->body.kv_put.key.data;
		c->name_len = (uint16_t)m->body.kv_put.key.size;
		c->value = m->body.kv_put.value.data;
		c->value_len = (uint16_t)m->body.kv_put.value.size;
		c->lease_id = m->body.kv_put.lease_id;
		break;
	case HASP_OP_KV_DELETE:
		c->name = m->body.kv_delete.name.data;
		c->name_len = (uint16_t)m->body.kv_delete.name.size;
		break;
	case HASP_OP_KV_CAS:
		c->name = m->body.kv_cas.key.data;
		c->name_len = (uint16_t)m->body.kv_cas.key.size;
		c->value = m->body.kv_cas.value.data;
		c->value_len = (uint16_t)m->body.kv_cas.value.size;
		c->lease_id = m->body.kv_cas.lease_id;
		c->token = m->body.kv_cas.expected_revision;
		if (m->body.kv_cas.flags & HASP_WIRE_CAS_VALUE) {
			/* One comparison per request: the decoder refused a
			 * non-zero expected revision with VALUE. */
			c->flags = LOCKS_CMD_CAS_VALUE;
			c->token = 0;
			c->expect = m->body.kv_cas.expected_value.data;
			c->expect_len = (uint16_t)m->body.kv_cas.expected_value.size;
		}
		break;
	default:
		HASP_UNREACHABLE();
	}
	/* The codec let the flag through only on requests with a session. */
	if (m->hdr.flags & HASP_WIRE_F_SEQ_FLOOR)
		c->flags |= LOCKS_CMD_SEQ_FLOOR;
}

/* A retransmission of a command the state machine applied: answered with
 * the reply its duplicate entry's apply would return (the cached one,
 * committed state), without a Raft entry. False: not one of those (a new
 * seq, another digest, below the floor, not applied yet, unknown session
 * or nonce), and the command is proposed as before. See the top comment
 * and docs/PROTOCOL.md "Exactly once" for why this is the same answer. */
static bool answer_from_cache(struct node *n, const struct locks_cmd *c, const struct node_pending *p)
{
	struct locks_result res = { .duplicate = true };
	bool found = c->op == LOCKS_OP_SESSION_OPEN
			     ? locks_open_reply_find(&n->sm, c->nonce, c->owner, &res.reply)
			     : locks_cached_reply_find(&n->sm, c->session_id, c->seq, c->digest,
						       &res.reply);
	if (!found)
		return false;
	HASP_ASSERT(c->op == p->op);
	n->stats.client_replies_from_cache++;
	reply_result(n, p, c, &res);
	return true;
}

/* client_auth = on: the tag of the datagram is checked before anything
 * else, under the session key (requests with a session) or the identity
 * key (SESSION_OPEN). False: drop it, counted, unanswered (no reply to
 * what is not authenticated: no reflection, no enumeration). */
static bool authenticate(struct node *n, const uint8_t *payload, size_t size, int rc,
			 const struct hasp_wire_msg *m, struct sender *who)
{
	if (rc == -HASP_ETRUNCATED || rc == -HASP_EMAGIC || m->hdr.version != 2) {
		n->stats.client_auth_version++;
		return false;
	}
	if (m->hdr.session_id != 0) {
		who->key = client_auth_session_key(&n->client_auth, &n->sm, m->hdr.session_id, &who->id);
	} else if (rc == 0 && m->hdr.opcode == HASP_OP_SESSION_OPEN) {
		const struct hasp_wire_bytes *name = &m->body.session_open.identity;
		who->id = client_auth_identity(&n->client_auth, name->data, name->size);
		who->key = who->id != NULL ? &who->id->key : NULL;
	}
	if (who->key == NULL) {
		n->stats.client_auth_unknown++;
		return false;
	}
	if (!hasp_wire_tag_ok(who->key, payload, size)) {
		n->stats.client_auth_bad++;
		return false;
	}
	return true;
}

/* The request digest the reply cache compares (locks_cmd.digest): the tag
 * with authentication, else a checksum of the bytes; never 0 (unchecked). */
static uint64_t request_digest(const struct node *n, const struct hasp_wire_msg *m,
			       const uint8_t *payload, size_t size)
{
	uint64_t d = n->cfg.client_auth ? get_u64le(m->hdr.tag) : crc32c(payload, size);
	return d != 0 ? d : 1;
}

void dispatch_request(struct node *n, uint32_t ip, uint16_t port, const uint8_t *payload, size_t size)
{
	struct hasp_wire_msg m;
	struct sender who = { 0 };
	int rc = hasp_wire_decode_request(payload, size, &m);

	if (n->cfg.client_auth) {
		if (!authenticate(n, payload, size, rc, &m, &who))
			return;
	} else if (rc == 0 && m.hdr.version != 1) {
		rc = -HASP_EVERSION; /* insecure mode speaks v1 only */
	}
	if (rc != 0) {
		n->stats.client_bad++;
		n->stats.client_bad_reason[(unsigned)(-rc) & 31u]++;
		if (hasp_wire_error_answerable(rc, &m.hdr))
			dispatch_reply_status(n, ip, port, &m.hdr, hasp_wire_error_status(rc), who.key);
		else
			n->stats.client_unanswered++;
		return;
	}
	if (n->stopping || n->failed) {
		n->stats.client_unavailable++;
		dispatch_reply_status(n, ip, port, &m.hdr, HASP_STATUS_UNAVAILABLE, who.key);
		return;
	}
	if (!node_is_leader(n)) {
		reply_not_leader(n, ip, port, &m.hdr, who.key, n->now_ns);
		return;
	}
	if (who.id != NULL && !client_auth_allows(who.id, &m)) {
		n->stats.client_forbidden++;
		dispatch_reply_status(n, ip, port, &m.hdr, HASP_STATUS_FORBIDDEN, who.key);
		return;
	}
	/* Remember where a session is (for its events) only if the state
	 * machine knows it (and, with authentication, only after its tag
	 * verified): random or forged ids must not move anyone's events, and
	 * only for a seq not seen before: nor must a replayed datagram. */
	struct locks_session_info si;
	bool session_known = m.hdr.session_id != 0 && locks_session_read(&n->sm, m.hdr.session_id, &si);
	bool seq_new = !session_known || notify_session_seen(n, m.hdr.session_id, m.hdr.seq, ip, port);
	/* A new leader's state machine lags until it applied its term's first
	 * entry (a restarted node has applied nothing past its snapshot): a
	 * session it does not know yet may be alive, and SESSION_EXPIRED
	 * would end it for the client. */
	bool sm_current = n->applied >= n->raft.term_start;
	/* A mutation of an unknown session would only be refused by the
	 * state machine: answer it here rather than spend a Raft entry, once
	 * the state machine is current; before, the entry decides. */
	if (!session_known && sm_current && m.hdr.opcode != HASP_OP_SESSION_OPEN &&
	    hasp_wire_op_is_command(m.hdr.opcode)) {
		n->stats.client_no_session++;
		dispatch_reply_status(n, ip, port, &m.hdr, HASP_STATUS_SESSION_EXPIRED, who.key);
		return;
	}

	switch (m.hdr.opcode) {
	case HASP_OP_LOCK_READ:
	case HASP_OP_CHECK:
	case HASP_OP_KV_GET:
	case HASP_OP_KV_RANGE:
		if (!add_read(n, ip, port, &m, &who)) {
			n->stats.client_overloaded++;
			dispatch_reply_status(n, ip, port, &m.hdr, HASP_STATUS_OVERLOADED, who.key);
		}
		break;
	case HASP_OP_WATCH:
	case HASP_OP_UNWATCH:
		/* Unknown to a lagging state machine: ask again shortly. */
		n->stats.client_unavailable += !session_known && !sm_current;
		dispatch_reply_status(n, ip, port, &m.hdr,
				      session_known ? notify_watch(n, m.hdr.session_id, &m.body.watch,
								   m.hdr.opcode == HASP_OP_WATCH)
				      : sm_current  ? HASP_STATUS_SESSION_EXPIRED
						    : HASP_STATUS_UNAVAILABLE,
				      who.key);
		return;
	case HASP_OP_WATCH_COUNT:
	case HASP_OP_WATCH_STATUS:
		/* Watches are node-local: a restarted node, or one that was
		 * not the leader when they were sent, has none, and without
		 * this count a client whose leader restarted between two of
		 * its requests could not tell (docs/PROTOCOL.md "Watches are
		 * node-local"). Events are not acknowledged: the last one sent
		 * tells a client that lost it (the last of a burst is not
		 * followed by one whose prev would show the gap). */
		if (!session_known) {
			n->stats.client_unavailable += !sm_current;
			dispatch_reply_status(n, ip, port, &m.hdr,
					      sm_current ? HASP_STATUS_SESSION_EXPIRED
							 : HASP_STATUS_UNAVAILABLE,
					      who.key);
			return;
		}
		struct hasp_wire_msg count;
		hasp_wire_reply_init(&count, &m.hdr, HASP_STATUS_OK);
		struct hasp_wire_watch_status st;
		notify_watch_status(n, m.hdr.session_id, &st);
		if (m.hdr.opcode == HASP_OP_WATCH_STATUS)
			count.body.watch_status = st;
		else
			count.body.watch_count.count = st.count;
		send_reply(n, ip, port, &count, reply_key(n, who.key), n->now_ns);
		return;
	default: {
		struct locks_cmd c;
		request_cmd(&m, &c);
		c.term = n->term;
		c.now_ms = n->now_ns / NS_PER_MS;
		if (m.hdr.opcode == HASP_OP_SESSION_OPEN) {
			/* The node decides who owns the session: the verified
			 * identity, or the one anonymous owner of insecure
			 * mode (every v1 session may release by token). */
			c.owner = who.id != NULL ? who.id->owner : HASP_OWNER_ANONYMOUS;
			c.flags = who.id == NULL || who.id->release_identity ? LOCKS_CMD_OWNER_RELEASE : 0;
			c.owner_sessions_max = who.id != NULL ? who.id->sessions_max : 0;
			if (c.ttl_ms > n->cfg.session_ttl_max_ms)
				c.ttl_ms = n->cfg.session_ttl_max_ms;
		} else {
			c.digest = request_digest(n, &m, payload, size);
		}
		struct node_pending p = {
			.session_id = m.hdr.session_id, .seq = m.hdr.seq, .ip = ip, .port = port,
			.op = m.hdr.opcode, .arrival_ns = n->now_ns,
			.lease_id = m.hdr.opcode == HASP_OP_ACQUIRE ? m.body.acquire.lease_id : 0,
			.term = n->term, .digest = c.digest,
		};
		if (who.key != NULL)
			p.key = *who.key;
		/* A seq above the session's highest applied one (every new
		 * request: the common case) cannot have a cached reply: no
		 * second session lookup for it. */
		bool maybe_retransmission = m.hdr.opcode == HASP_OP_SESSION_OPEN ||
					    (session_known && m.hdr.seq <= si.seq_max);
		if (maybe_retransmission && answer_from_cache(n, &c, &p))
			break;
		/* Nor can a seq this node never saw from the session be in
		 * flight here: no look-up for it either ("Copies in flight"). */
		const struct node_pending *q = NULL;
		if (m.hdr.opcode != HASP_OP_SESSION_OPEN && !seq_new)
			q = inflight_find(n, c.session_id, c.seq);
		if (q != NULL && q->digest == c.digest) {
			n->stats.client_retransmits_in_flight++;
			break;
		}
		batch_add(n, &c, &p);
		/* Another digest under a seq in flight keeps the first mark. */
		if (m.hdr.opcode != HASP_OP_SESSION_OPEN && q == NULL)
			batch_mark_last(n);
		break;
	}
	}
	/* Close the batch at once when it is full, or when nothing is in
	 * flight (no uncommitted entry): waiting for company only pays when
	 * earlier batches are still being replicated (Nagle, inverted). */
	if (n->batch_count >= n->cfg.batch_max ||
	    (n->batch_count > 0 && n->raft.commit >= raft_last_index(&n->raft)))
		dispatch_flush(n);
}
