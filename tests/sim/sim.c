/*
 * The simulated world: nodes (raft core + state machine + disk), the
 * network, clients, the fault schedule, and the checker. One thread, one
 * PRNG, time in milliseconds. Each node's loop follows the order of the
 * real node: persist (disk) -> send (network) -> apply (state machine) ->
 * reply (clients).
 *
 * Checks, after every step:
 *   - at most one leader per term (election safety, §3.6.3);
 *   - log matching: two logs with an entry of the same index and term hold
 *     the same bytes and agree on the previous term (§3.5);
 *   - leader completeness: a new leader holds every committed entry (§3.6);
 *   - state machine safety: every node applies the same entry, with the same
 *     result, at each index;
 *   - lock safety: no two clients are ever told they hold the same lock at
 *     overlapping times, judged by acknowledged grants and the committed
 *     releases and expiries in commit order; fencing tokens of acknowledged
 *     grants strictly increase per lock;
 *   - ReadIndex: a read is released at an index covering every command
 *     acknowledged before it was requested;
 * and at the end, after the faults heal (liveness): a leader is elected,
 * every client's pending command completes, and every member applied the
 * leader's commit within a bounded simulated time; no acknowledged command
 * was lost.
 */
#include "tests/sim/sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/crc32c.h"
#include "common/prng.h"
#include "raft/msg_codec.h"
#include "raft/raft.h"

#define SIM_NODES_MAX 7
#define SIM_CLIENTS 4
#define SIM_LOCKS 3
#define SIM_INDEX_MAX 8192
#define SIM_ENTRY_MAX 96
#define SIM_SNAP_MAX 16384
#define SIM_PACKETS 8192
#define SIM_WHEEL 1024
#define SIM_MTU_MAX 1500
#define SIM_ENDPOINTS (SIM_NODES_MAX + SIM_CLIENTS)
#define SIM_TERMS_MAX 65536
#define SIM_GRANTS_MAX 1024
#define SIM_READS_MAX 64
#define SIM_TICK_MS 10
#define SIM_SEQ_MAX 4096

enum packet_kind {
	PKT_RAFT = 1,
	PKT_CLIENT_REQ = 2,
	PKT_CLIENT_RESP = 3,
};

struct packet {
	struct packet *next;
	uint8_t kind;
	uint8_t from_slot;
	uint8_t to_slot;
	uint32_t to_id; /* node incarnation, 0 for clients */
	uint16_t size;
	uint8_t data[SIM_MTU_MAX];
};

struct disk_entry {
	uint64_t term;
	uint8_t type;
	uint8_t size;
	uint8_t data[SIM_ENTRY_MAX];
};

/* A disk on which the log is written in order: `written` is what the node
 * wrote, `durable` what a crash keeps. Hard state and snapshots are written
 * synchronously (the real node fsyncs them before sending). */
struct sim_disk {
	uint64_t term;
	uint32_t vote;
	uint64_t snap_index;
	uint64_t snap_term;
	struct raft_conf snap_conf;
	uint8_t snap[2][SIM_SNAP_MAX];
	uint32_t snap_size;
	uint32_t snap_cur;
	struct disk_entry *durable;
	struct disk_entry *written;
	uint64_t durable_last;
	uint64_t written_last;
	uint64_t dirty_from;
	bool sync_scheduled;
	uint64_t sync_at;
};

struct lease {
	uint64_t token;
	uint64_t deadline_tick;
	uint64_t expire_sent_tick;
};

struct sim_node {
	uint32_t id;      /* 0: free slot */
	bool alive;
	bool retired;     /* removed from the cluster: never restarts */
	bool raft_up;
	uint64_t restart_at;
	struct raft raft;
	struct prng prng;
	struct sim_disk disk;
	void *sm;
	uint64_t sm_applied;
	uint32_t tick_ms;
	uint64_t next_tick;
	uint64_t ticks;
	uint8_t recv_snap[SIM_SNAP_MAX];
	struct sim_cmd batch[16];     /* stamped and encoded at the flush */
	uint8_t batch_client[16];     /* client slot + 1, 0: the leader's own */
	uint32_t batch_count;
	uint8_t *pending_client;      /* by index % SIM_INDEX_MAX: who to answer */
	struct lease leases[SIM_LOCKS];
	uint64_t expire_lease[8];     /* `due` expiries proposed lately */
	uint64_t expire_tick[8];
	int64_t clock_offset_ms;
	bool report_snapshot; /* installed one: pass its bytes back to raft */
	bool retire_after;    /* applied its own removal */
	bool was_member;      /* in a committed configuration */
};

struct sim_client {
	uint64_t nonce;
	uint64_t session;  /* 0 until OPEN succeeded */
	uint64_t seq;
	bool busy;
	struct sim_cmd cmd;
	uint64_t resend_at;
	bool hinted;
	uint32_t target;  /* node slot */
	uint64_t next_op_at;
	uint64_t holding[SIM_LOCKS];
	uint64_t done_since_heal;
};

struct record {
	bool set;
	uint64_t term;
	uint64_t commit_term; /* term of the first node to apply it (>= the
			       * term in which it was committed) */
	uint32_t hash;
	uint8_t type;
	struct sim_result res;
};

struct grant {
	uint64_t index;
	uint64_t token;
	uint64_t end; /* index of the committed release/expiry, 0 unknown */
};

struct pending_read {
	uint64_t ctx;
	uint64_t floor;   /* highest acknowledged index when requested */
	uint32_t node_id;
};

struct sim {
	struct sim_options opt;
	struct sim_stats *stats;
	struct prng prng;
	uint64_t now;
	bool healed;
	bool failed;
	struct raft_config cfg;
	struct sim_node nodes[SIM_NODES_MAX];
	uint32_t next_id;
	/* network */
	struct packet *pool;
	struct packet *free_list;
	struct packet *wheel[SIM_WHEEL];
	uint32_t drop_ppm;
	uint32_t dup_ppm;
	uint32_t delay_max;
	bool blocked[SIM_NODES_MAX][SIM_NODES_MAX];
	uint32_t disk_latency_max;
	/* clients */
	struct sim_client clients[SIM_CLIENTS];
	/* checker */
	struct record *rec;
	uint64_t rec_max;
	uint32_t *leader_of_term;
	struct grant grants[SIM_LOCKS][SIM_GRANTS_MAX];
	uint32_t grant_count[SIM_LOCKS];
	uint64_t acked_max;
	struct pending_read reads[SIM_READS_MAX];
	uint32_t read_count;
	uint64_t read_ctx;
	uint64_t conf_seen_index;
	uint64_t executed_session[SIM_CLIENTS];
	uint64_t executed_seq[SIM_CLIENTS];
	uint64_t (*exec_index)[SIM_SEQ_MAX]; /* [client][seq]: index of its execution */
	/* scratch */
	struct raft_entry *restore_entries;
	struct raft_entry decode_entries[128];
};

static struct sim S;

static void sim_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void sim_fail(const char *fmt, ...)
{
	va_list ap;

	if (S.failed)
		return;
	S.failed = true;
	fprintf(stderr, "sim: FAILED at t=%llums: ", (unsigned long long)S.now);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
}

static void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void vlog(const char *fmt, ...)
{
	va_list ap;

	if (!S.opt.verbose)
		return;
	fprintf(stderr, "%6llu ", (unsigned long long)S.now);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
}

static void trace_line(void *arg, const char *line)
{
	(void)arg;
	vlog("%s", line);
}

static uint32_t entry_hash(uint8_t type, const uint8_t *data, uint32_t size)
{
	uint32_t h = crc32c(&type, 1);
	return crc32c_extend(h, data, size);
}

static int slot_of_id(uint32_t id)
{
	for (int i = 0; i < SIM_NODES_MAX; i++)
		if (S.nodes[i].id == id && id != 0)
			return i;
	return -1;
}

/* ---------------------------------------------------------------- network */

static void net_send(uint8_t kind, int from_slot, int to_slot, uint32_t to_id, const void *data,
		     size_t size)
{
	HASP_ASSERT(size <= SIM_MTU_MAX);
	if (from_slot < SIM_NODES_MAX && to_slot < SIM_NODES_MAX && from_slot >= 0 &&
	    S.blocked[from_slot][to_slot])
		return;
	uint32_t copies = 1 + prng_chance(&S.prng, S.dup_ppm);
	for (uint32_t c = 0; c < copies; c++) {
		if (prng_chance(&S.prng, S.drop_ppm))
			continue;
		struct packet *p = S.free_list;
		if (p == NULL)
			return; /* the network is full: a loss */
		S.free_list = p->next;
		p->kind = kind;
		p->from_slot = (uint8_t)from_slot;
		p->to_slot = (uint8_t)to_slot;
		p->to_id = to_id;
		p->size = (uint16_t)size;
		memcpy(p->data, data, size);
		uint64_t at = S.now + prng_range(&S.prng, 1, S.delay_max);
		struct packet **bucket = &S.wheel[at % SIM_WHEEL];
		p->next = *bucket;
		*bucket = p;
	}
}

/* ------------------------------------------------------------------- disk */

static uint64_t disk_term_at(const struct sim_disk *d, const struct disk_entry *log, uint64_t index)
{
	return index == d->snap_index ? d->snap_term : log[index].term;
}

static void disk_write(struct sim_node *n, const struct raft_update *up)
{
	struct sim_disk *d = &n->disk;
	uint64_t first = up->entries[0].index;

	HASP_ASSERT(first <= d->written_last + 1);
	HASP_ASSERT(first > d->snap_index);
	if (first + up->entry_count >= SIM_INDEX_MAX) {
		sim_fail("simulation index capacity exceeded");
		return;
	}
	for (uint32_t i = 0; i < up->entry_count; i++) {
		const struct raft_entry *e = &up->entries[i];
		struct disk_entry *de = &d->written[e->index];
		HASP_ASSERT(e->index == first + i);
		HASP_ASSERT(e->size <= SIM_ENTRY_MAX);
		de->term = e->term;
		de->type = e->type;
		de->size = (uint8_t)e->size;
		memcpy(de->data, e->data, e->size);
	}
	d->written_last = first + up->entry_count - 1;
	if (first < d->dirty_from)
		d->dirty_from = first;
	if (!d->sync_scheduled) {
		d->sync_scheduled = true;
		d->sync_at = S.now + prng_below(&S.prng, S.disk_latency_max + 1);
	}
}

static void disk_flush(struct sim_disk *d, uint64_t through)
{
	for (uint64_t i = d->dirty_from; i <= through; i++)
		d->durable[i] = d->written[i];
	d->durable_last = through;
	d->dirty_from = UINT64_MAX;
}

static void disk_crash(struct sim_disk *d)
{
	/* A crash keeps what was synced; an in-order disk may also have
	 * flushed a prefix of pure appends (a torn tail at entry granularity). */
	if (d->dirty_from != UINT64_MAX && d->dirty_from > d->durable_last &&
	    d->written_last > d->durable_last && prng_chance(&S.prng, 500000)) {
		uint64_t keep = prng_range(&S.prng, d->durable_last, d->written_last);
		if (keep > d->durable_last)
			disk_flush(d, keep);
	}
	for (uint64_t i = d->durable_last + 1; i <= d->written_last && i < SIM_INDEX_MAX; i++)
		d->written[i] = d->durable[i];
	if (d->dirty_from != UINT64_MAX)
		for (uint64_t i = d->dirty_from; i <= d->durable_last; i++)
			d->written[i] = d->durable[i];
	d->written_last = d->durable_last;
	d->dirty_from = UINT64_MAX;
	d->sync_scheduled = false;
}

/* ------------------------------------------------------------------ nodes */

static void node_step(struct sim_node *n, const struct raft_event *ev, struct raft_update *up);

static void check_log_matching(struct sim_node *n, const struct raft_update *up)
{
	for (uint32_t k = 0; k < up->entry_count; k++) {
		const struct raft_entry *e = &up->entries[k];
		for (int s = 0; s < SIM_NODES_MAX; s++) {
			struct sim_node *o = &S.nodes[s];
			if (o == n || !o->alive || !o->raft_up)
				continue;
			const struct raft_entry *oe = raft_entry_at(&o->raft, e->index);
			if (oe == NULL || oe->term != e->term)
				continue;
			if (oe->type != e->type ||
			    entry_hash(oe->type, oe->data, oe->size) != entry_hash(e->type, e->data, e->size))
				sim_fail("log matching: n%u and n%u differ at index %llu term %llu", n->id,
					 o->id, (unsigned long long)e->index, (unsigned long long)e->term);
			uint64_t a = raft_term_at(&n->raft, e->index - 1);
			uint64_t b = raft_term_at(&o->raft, e->index - 1);
			if (a != 0 && b != 0 && a != b)
				sim_fail("log matching: n%u and n%u agree at %llu but not before", n->id,
					 o->id, (unsigned long long)e->index);
		}
	}
}

static void check_leader_completeness(struct sim_node *n)
{
	const struct raft *r = &n->raft;

	if (S.leader_of_term[r->term % SIM_TERMS_MAX] != 0 &&
	    S.leader_of_term[r->term % SIM_TERMS_MAX] != n->id)
		sim_fail("two leaders in term %llu: n%u and n%u", (unsigned long long)r->term,
			 S.leader_of_term[r->term % SIM_TERMS_MAX], n->id);
	S.leader_of_term[r->term % SIM_TERMS_MAX] = n->id;
	S.stats->elections++;
	/* §3.6: "if a log entry is committed in a given term, then that entry
	 * will be present in the logs of the leaders for all higher-numbered
	 * terms". A leader of an older term elected late (its votes were in
	 * flight) may lack entries committed in newer terms. */
	for (uint64_t i = r->log.snap_index + 1; i <= S.rec_max; i++) {
		if (S.rec[i].commit_term >= r->term)
			continue;
		const struct raft_entry *e = raft_entry_at(r, i);
		if (e == NULL || e->term != S.rec[i].term ||
		    entry_hash(e->type, e->data, e->size) != S.rec[i].hash) {
			sim_fail("leader completeness: n%u (term %llu) lacks committed index %llu",
				 n->id, (unsigned long long)r->term, (unsigned long long)i);
			return;
		}
	}
}

static struct grant *grant_end_check(uint8_t lock, uint32_t at)
{
	/* Grants on one lock, sorted by index: the one before must have ended
	 * (in commit order) before this one was granted. */
	struct grant *g = &S.grants[lock][at];
	if (at == 0)
		return g;
	struct grant *p = &S.grants[lock][at - 1];
	if (p->token >= g->token)
		sim_fail("fencing: lock %u token %llu at index %llu not above token %llu at %llu", lock,
			 (unsigned long long)g->token, (unsigned long long)g->index,
			 (unsigned long long)p->token, (unsigned long long)p->index);
	if (p->end == 0) {
		for (uint64_t j = p->index + 1; j < g->index; j++) {
			const struct sim_result *res = &S.rec[j].res;
			if (!S.rec[j].set)
				sim_fail("checker: index %llu not recorded", (unsigned long long)j);
			if ((res->kind == SIM_CMD_RELEASE || res->kind == SIM_CMD_EXPIRE) &&
			    res->lock == lock && res->cmd_token == p->token &&
			    (res->status == SIM_ST_RELEASED || res->status == SIM_ST_EXPIRED) &&
			    !res->duplicate) {
				p->end = j;
				break;
			}
		}
	}
	if (p->end == 0 || p->end > g->index)
		sim_fail("lock %u: two clients told they hold it: token %llu (index %llu) and "
			 "token %llu (index %llu) overlap", lock, (unsigned long long)p->token,
			 (unsigned long long)p->index, (unsigned long long)g->token,
			 (unsigned long long)g->index);
	return g;
}

static void record_grant(uint8_t lock, uint64_t index, uint64_t token)
{
	uint32_t n = S.grant_count[lock];

	for (uint32_t i = 0; i < n; i++)
		if (S.grants[lock][i].index == index || S.grants[lock][i].token == token)
			return; /* the same grant acknowledged twice (a retry), or
				 * its holder acquiring again (GRANTED, same token,
				 * docs/STATE_MACHINE.md): one grant, not two */
	if (n >= SIM_GRANTS_MAX)
		return;
	uint32_t at = n;
	while (at > 0 && S.grants[lock][at - 1].index > index) {
		S.grants[lock][at] = S.grants[lock][at - 1];
		at--;
	}
	S.grants[lock][at].index = index;
	S.grants[lock][at].token = token;
	S.grants[lock][at].end = 0;
	S.grant_count[lock] = n + 1;
	grant_end_check(lock, at);
	if (at + 1 < S.grant_count[lock])
		grant_end_check(lock, at + 1);
}

static void send_client_resp(struct sim_node *n, uint32_t c, const struct sim_result *res,
			     uint8_t status, uint32_t leader)
{
	uint8_t buf[sizeof(struct sim_result) + sizeof(uint32_t)];

	HASP_ASSERT(c < SIM_CLIENTS);
	struct sim_result r = *res;
	r.status = status;
	memcpy(buf, &r, sizeof(r));
	memcpy(buf + sizeof(r), &leader, sizeof(leader));
	net_send(PKT_CLIENT_RESP, (int)(n - S.nodes), SIM_NODES_MAX + (int)c, 0, buf,
		 sizeof(r) + sizeof(leader));
}

static void apply_entry(struct sim_node *n, const struct raft_entry *e)
{
	struct sim_result res;
	struct record *rec = &S.rec[e->index];

	if (e->index != n->sm_applied + 1) {
		sim_fail("n%u applies index %llu after %llu", n->id, (unsigned long long)e->index,
			 (unsigned long long)n->sm_applied);
		return;
	}
	n->sm_applied = e->index;
	memset(&res, 0, sizeof(res));
	if (e->type == RAFT_ENTRY_COMMAND)
		S.opt.sm->apply(n->sm, e->index, e->data, e->size, &res);
	uint32_t hash = entry_hash(e->type, e->data, e->size);
	if (!rec->set) {
		rec->set = true;
		rec->term = e->term;
		rec->commit_term = n->raft.term;
		rec->hash = hash;
		rec->type = e->type;
		rec->res = res;
		if (e->index > S.rec_max)
			S.rec_max = e->index;
		/* Exactly once (§6.3): a session's commands execute in sequence
		 * order, each once; a retry is answered from the cache. */
		if (res.status == SIM_ST_EXPIRED)
			S.stats->expired++;
		if (res.kind == SIM_CMD_OPEN && res.status == SIM_ST_OPENED && !res.duplicate &&
		    res.nonce >= 1 && res.nonce <= SIM_CLIENTS)
			S.executed_session[res.nonce - 1] = res.session;
		int who = -1;
		for (int c = 0; c < SIM_CLIENTS; c++)
			if (res.session != 0 && S.executed_session[c] == res.session)
				who = c;
		if (who >= 0 && res.kind != SIM_CMD_OPEN && res.status != SIM_ST_NONE &&
		    !res.duplicate) {
			if (res.seq <= S.executed_seq[who])
				sim_fail("session %llu: command %llu executed again at index %llu",
					 (unsigned long long)res.session, (unsigned long long)res.seq,
					 (unsigned long long)e->index);
			S.executed_seq[who] = res.seq;
			if (res.seq < SIM_SEQ_MAX)
				S.exec_index[who][res.seq] = e->index;
		}
		S.stats->commits = S.rec_max;
	} else if (rec->term != e->term || rec->hash != hash ||
		   memcmp(&rec->res, &res, sizeof(res)) != 0) {
		sim_fail("state machine safety: n%u applied a different entry or result at index %llu",
			 n->id, (unsigned long long)e->index);
		return;
	}
	/* Answer the client whose request this leader proposed at this index. */
	uint8_t client = n->pending_client[e->index % SIM_INDEX_MAX];
	n->pending_client[e->index % SIM_INDEX_MAX] = 0;
	if (e->type == RAFT_ENTRY_COMMAND && res.status != SIM_ST_NONE && client != 0 &&
	    n->raft.role == RAFT_LEADER)
		send_client_resp(n, client - 1, &res, res.status, n->id);
}

static void retire(struct sim_node *o)
{
	vlog("retire n%u", o->id);
	o->alive = false;
	o->retired = true;
}

/* A committed configuration newer than any seen: members it dropped leave
 * the simulation for good (their ids are never reused). Only nodes that were
 * members of a committed configuration can be dropped; a joiner whose
 * addition is still pending is not. */
static void observe_conf(struct sim_node *n)
{
	const struct raft *r = &n->raft;

	if (r->conf_index > r->commit || r->conf_index <= S.conf_seen_index || r->conf.count == 0)
		return;
	S.conf_seen_index = r->conf_index;
	for (int s = 0; s < SIM_NODES_MAX; s++) {
		struct sim_node *o = &S.nodes[s];
		bool member = false;
		if (o->id == 0 || o->retired)
			continue;
		for (uint32_t m = 0; m < r->conf.count; m++)
			member |= r->conf.members[m].id == o->id;
		if (member) {
			o->was_member = true;
		} else if (o->was_member) {
			if (o == n)
				n->retire_after = true;
			else
				retire(o);
		}
	}
}

static void handle_update(struct sim_node *n, struct raft_update *up)
{
	struct sim_disk *d = &n->disk;
	int slot = (int)(n - S.nodes);
	uint8_t buf[SIM_MTU_MAX];

	S.stats->steps++;
	/* 1. persist: hard state and snapshots synchronously, entries in order
	 * (durable at the next sync). */
	if (up->hard_state_changed) {
		d->term = up->term;
		d->vote = up->vote;
	}
	if (up->snap_chunk_size > 0) {
		if (up->snap_chunk_offset + up->snap_chunk_size > SIM_SNAP_MAX) {
			sim_fail("snapshot chunk beyond buffer");
			return;
		}
		memcpy(n->recv_snap + up->snap_chunk_offset, up->snap_chunk, up->snap_chunk_size);
	}
	if (up->snap_install) {
		uint32_t next = 1 - d->snap_cur;
		/* A snapshot becomes durable only after every log write before
		 * it: a crash must not pair it with a stale log tail that a
		 * truncation had already replaced (simulator seed 182297). */
		if (d->dirty_from != UINT64_MAX)
			disk_flush(d, d->written_last);
		memcpy(d->snap[next], n->recv_snap, up->snap_size);
		d->snap_cur = next;
		d->snap_size = (uint32_t)up->snap_size;
		d->snap_index = up->snap_index;
		d->snap_term = up->snap_term;
		d->snap_conf = up->snap_conf;
		if (up->snap_log_reset) {
			d->written_last = up->snap_index;
			d->durable_last = up->snap_index;
			d->dirty_from = UINT64_MAX;
		}
		if (!S.opt.sm->restore(n->sm, d->snap[d->snap_cur], d->snap_size))
			sim_fail("n%u cannot restore snapshot %llu", n->id,
				 (unsigned long long)up->snap_index);
		n->sm_applied = up->snap_index;
		n->report_snapshot = true;
		S.stats->snapshots++;
	}
	if (up->entry_count > 0) {
		disk_write(n, up);
		check_log_matching(n, up);
	}
	/* 2. send */
	for (uint32_t i = 0; i < up->msg_count; i++) {
		const struct raft_msg *m = &up->msgs[i];
		int size = msg_codec_encode(m, buf, sizeof(buf));
		HASP_ASSERT(size > 0);
		HASP_ASSERT((uint32_t)size <= S.cfg.mtu - RAFT_DATAGRAM_OVERHEAD);
		int to = slot_of_id(m->to);
		if (to >= 0)
			net_send(PKT_RAFT, slot, to, m->to, buf, (size_t)size);
	}
	/* 3. apply */
	for (uint32_t i = 0; i < up->apply_count && !S.failed; i++)
		apply_entry(n, &up->apply[i]);
	observe_conf(n);
	/* 4. reply */
	for (uint32_t i = 0; i < up->read_count; i++) {
		for (uint32_t k = 0; k < S.read_count; k++) {
			if (S.reads[k].ctx != up->reads[i].ctx)
				continue;
			if (up->reads[i].index < S.reads[k].floor)
				sim_fail("ReadIndex %llu below acknowledged index %llu",
					 (unsigned long long)up->reads[i].index,
					 (unsigned long long)S.reads[k].floor);
			S.reads[k] = S.reads[--S.read_count];
			S.stats->reads++;
			break;
		}
	}
	if (up->role_changed && up->role == RAFT_LEADER) {
		check_leader_completeness(n);
		memset(n->leases, 0, sizeof(n->leases)); /* full TTL again */
	}
	if (up->snapshot_wanted && !n->report_snapshot) {
		uint32_t next = 1 - d->snap_cur;
		if (d->dirty_from != UINT64_MAX)
			disk_flush(d, d->written_last); /* log writes first, as above */
		uint32_t size = S.opt.sm->snapshot(n->sm, d->snap[next], SIM_SNAP_MAX);
		struct raft_event ev = { .type = RAFT_EVENT_SNAPSHOT };
		struct raft_update up2;
		if (size == 0) {
			sim_fail("snapshot too large");
			return;
		}
		ev.snapshot.index = n->sm_applied;
		ev.snapshot.data = d->snap[next];
		ev.snapshot.size = size;
		uint64_t term = raft_term_at(&n->raft, n->sm_applied);
		node_step(n, &ev, &up2);
		if (up2.reject == RAFT_OK) {
			d->snap_cur = next;
			d->snap_size = size;
			d->snap_index = ev.snapshot.index;
			d->snap_term = term;
			d->snap_conf = n->raft.snap_conf;
			S.stats->snapshots++;
		}
	}
	if (n->report_snapshot) {
		struct raft_event ev = { .type = RAFT_EVENT_SNAPSHOT };
		struct raft_update up2;
		n->report_snapshot = false;
		ev.snapshot.index = d->snap_index;
		ev.snapshot.data = d->snap[d->snap_cur];
		ev.snapshot.size = d->snap_size;
		node_step(n, &ev, &up2);
	}
}

static void node_step(struct sim_node *n, const struct raft_event *ev, struct raft_update *up)
{
	HASP_ASSERT(n->alive && n->raft_up);
	uint64_t invalid = n->raft.counters.msg_dropped_invalid;
	raft_step(&n->raft, ev, up);
	/* Every peer here is honest: a message raft finds invalid is a bug in
	 * the sender (or in the check). */
	if (n->raft.counters.msg_dropped_invalid != invalid)
		sim_fail("n%u dropped an invalid message from an honest peer", n->id);
	handle_update(n, up);
	if (n->retire_after && n->alive) {
		n->retire_after = false;
		retire(n);
	}
}

static void node_start(struct sim_node *n)
{
	struct sim_disk *d = &n->disk;
	struct raft_config cfg = S.cfg;
	struct raft_persisted_state ps;
	uint32_t count = 0;

	if (n->raft_up)
		raft_deinit(&n->raft);
	n->raft_up = false;
	cfg.id = n->id;
	prng_seed(&n->prng, prng_next(&S.prng));
	if (raft_init(&n->raft, &cfg, &n->prng) != 0) {
		sim_fail("raft_init failed");
		return;
	}
	/* The snapshot covers a log that had not reached the disk yet: the
	 * log restarts after it. */
	if (d->durable_last < d->snap_index) {
		d->durable_last = d->snap_index;
		d->written_last = d->snap_index;
		d->dirty_from = UINT64_MAX;
	}
	for (uint64_t i = d->snap_index + 1; i <= d->durable_last; i++) {
		struct raft_entry *e = &S.restore_entries[count++];
		e->index = i;
		e->term = d->durable[i].term;
		e->type = d->durable[i].type;
		e->size = d->durable[i].size;
		e->data = d->durable[i].data;
	}
	memset(&ps, 0, sizeof(ps));
	ps.term = d->term;
	ps.vote = d->vote;
	ps.snap_index = d->snap_index;
	ps.snap_term = d->snap_term;
	ps.snap_conf = d->snap_conf;
	ps.snap_data = d->snap_size > 0 ? d->snap[d->snap_cur] : NULL;
	ps.snap_size = d->snap_size;
	ps.entries = S.restore_entries;
	ps.entry_count = count;
	int rc = raft_restore(&n->raft, &ps);
	if (rc != 0) {
		sim_fail("n%u raft_restore failed: %d (entries %u)", n->id, rc, count);
		fprintf(stderr, "term=%llu snap=%llu/%llu entries:", (unsigned long long)ps.term,
			(unsigned long long)ps.snap_index, (unsigned long long)ps.snap_term);
		for (uint32_t i = 0; i < count; i++)
			fprintf(stderr, " %llu/%llu", (unsigned long long)S.restore_entries[i].index,
				(unsigned long long)S.restore_entries[i].term);
		fprintf(stderr, "\n");
		return;
	}
	n->raft_up = true;
	n->alive = true;
	S.opt.sm->reset(n->sm);
	if (d->snap_size > 0 && !S.opt.sm->restore(n->sm, d->snap[d->snap_cur], d->snap_size))
		sim_fail("n%u cannot restore its snapshot", n->id);
	n->sm_applied = d->snap_index;
	n->next_tick = S.now + prng_range(&S.prng, 1, n->tick_ms);
	n->batch_count = 0;
	memset(n->pending_client, 0, SIM_INDEX_MAX);
	memset(n->expire_lease, 0, sizeof(n->expire_lease));
	n->clock_offset_ms = (int64_t)prng_below(&S.prng, 1000000);
	n->report_snapshot = false;
	n->retire_after = false;
	memset(n->leases, 0, sizeof(n->leases));
}

static void node_crash(struct sim_node *n)
{
	vlog("crash n%u (%s)", n->id, raft_role_name(n->raft.role));
	n->alive = false;
	disk_crash(&n->disk);
	S.stats->crashes++;
	n->restart_at = S.now + prng_range(&S.prng, 5, 300);
}

static void node_create(struct sim_node *n, uint32_t id, const struct raft_conf *conf)
{
	struct sim_disk *d = &n->disk;
	struct disk_entry *durable = d->durable, *written = d->written;
	void *sm = n->sm;
	uint8_t *pending = n->pending_client;

	if (n->raft_up)
		raft_deinit(&n->raft);
	memset(n, 0, sizeof(*n));
	d->durable = durable;
	d->written = written;
	d->dirty_from = UINT64_MAX;
	n->sm = sm;
	n->pending_client = pending;
	n->id = id;
	n->tick_ms = (uint32_t)prng_range(&S.prng, SIM_TICK_MS - 2, SIM_TICK_MS + 3); /* drift */
	if (conf != NULL)
		d->snap_conf = *conf;
	node_start(n);
}

/* ---------------------------------------------------------------- clients */

static void client_send(struct sim_client *c)
{
	uint8_t buf[sizeof(struct sim_cmd)];
	int idx = (int)(c - S.clients);

	memcpy(buf, &c->cmd, sizeof(c->cmd));
	c->resend_at = S.now + 40;
	c->hinted = false;
	net_send(PKT_CLIENT_REQ, SIM_NODES_MAX + idx, (int)c->target, S.nodes[c->target].id, buf,
		 sizeof(buf));
}

static uint32_t random_node_slot(void)
{
	for (int tries = 0; tries < 32; tries++) {
		uint32_t s = (uint32_t)prng_below(&S.prng, SIM_NODES_MAX);
		if (S.nodes[s].id != 0 && !S.nodes[s].retired)
			return s;
	}
	return 0;
}

static void client_tick(struct sim_client *c)
{
	if (c->busy) {
		if (S.now >= c->resend_at) {
			if (!c->hinted)
				c->target = random_node_slot();
			client_send(c);
		}
		return;
	}
	if (S.now < c->next_op_at)
		return;
	memset(&c->cmd, 0, sizeof(c->cmd));
	c->busy = true;
	if (c->session == 0) {
		/* First a session; a retried open (same nonce) gets the same. */
		c->cmd.kind = SIM_CMD_OPEN;
		c->cmd.nonce = c->nonce;
		client_send(c);
		return;
	}
	c->cmd.session = c->session;
	c->cmd.seq = ++c->seq;
	uint8_t lock = (uint8_t)prng_below(&S.prng, SIM_LOCKS);
	if (c->holding[lock] != 0 && prng_chance(&S.prng, 700000)) {
		c->cmd.kind = SIM_CMD_RELEASE;
		c->cmd.token = c->holding[lock];
	} else {
		c->cmd.kind = SIM_CMD_ACQUIRE;
		c->cmd.ttl_ms = (uint32_t)prng_range(&S.prng, 30, 400);
	}
	c->cmd.lock = lock;
	client_send(c);
}

static void client_recv(struct sim_client *c, const struct packet *p)
{
	struct sim_result res;
	uint32_t leader;

	memcpy(&res, p->data, sizeof(res));
	memcpy(&leader, p->data + sizeof(res), sizeof(leader));
	if (!c->busy)
		return; /* a late duplicate */
	if (c->cmd.kind == SIM_CMD_OPEN ? res.nonce != c->nonce
					: (res.session != c->session || res.seq != c->cmd.seq))
		return; /* the answer to an earlier request */
	if (res.kind == 0) {
		/* NOT_LEADER: follow the hint, or try another node. */
		int s = slot_of_id(leader);
		c->target = s >= 0 ? (uint32_t)s : random_node_slot();
		c->resend_at = S.now + 2;
		c->hinted = true;
		return;
	}
	if (res.kind != c->cmd.kind || (res.kind != SIM_CMD_OPEN && res.lock != c->cmd.lock)) {
		sim_fail("client %llu: reply for another command", (unsigned long long)c->nonce);
		return;
	}
	c->busy = false;
	c->next_op_at = S.now + prng_below(&S.prng, 20);
	if (S.healed)
		c->done_since_heal++;
	S.stats->acked++;
	if (res.index == 0 && res.kind != SIM_CMD_OPEN && res.seq < SIM_SEQ_MAX)
		res.index = S.exec_index[c->nonce - 1][res.seq]; /* a cached reply */
	if (res.kind == SIM_CMD_OPEN) {
		if (res.status == SIM_ST_OPENED)
			c->session = res.session;
		return;
	}
	if (res.index > S.acked_max)
		S.acked_max = res.index;
	if (res.index == 0 || res.index > S.rec_max || !S.rec[res.index].set) {
		sim_fail("client %llu acknowledged index %llu that was never applied",
			 (unsigned long long)c->nonce, (unsigned long long)res.index);
		return;
	}
	switch (res.status) {
	case SIM_ST_GRANTED:
		c->holding[res.lock] = res.token;
		S.stats->granted++;
		record_grant(res.lock, res.index, res.token);
		break;
	case SIM_ST_RELEASED:
	case SIM_ST_NOT_HOLDER:
		c->holding[res.lock] = 0;
		break;
	default:
		break;
	}
}

/* ------------------------------------------------------------ node input */

/* The node's monotonic clock: it runs at its own (drifting) tick rate and
 * starts anywhere after a restart. */
static uint64_t node_clock_ms(const struct sim_node *n)
{
	return (uint64_t)((int64_t)(S.now * SIM_TICK_MS / n->tick_ms) + n->clock_offset_ms);
}

static void node_flush_batch(struct sim_node *n)
{
	struct raft_event ev = { .type = RAFT_EVENT_PROPOSE };
	struct raft_update up;
	struct raft_buf bufs[16];
	uint8_t data[16][SIM_ENTRY_MAX];

	if (n->batch_count == 0 || !n->alive)
		return;
	if (n->raft.role != RAFT_LEADER) {
		n->batch_count = 0; /* lost leadership: the clients retry */
		return;
	}
	/* Stamp every command with this leader's term and clock now, as the
	 * real node does when it closes a batch. */
	for (uint32_t i = 0; i < n->batch_count; i++) {
		n->batch[i].term = n->raft.term;
		n->batch[i].now_ms = node_clock_ms(n);
		bufs[i].data = data[i];
		bufs[i].size = S.opt.sm->encode(&n->batch[i], data[i], SIM_ENTRY_MAX);
		HASP_ASSERT(bufs[i].size > 0);
	}
	ev.propose.bufs = bufs;
	ev.propose.count = n->batch_count;
	uint32_t count = n->batch_count;
	n->batch_count = 0;
	node_step(n, &ev, &up);
	if (up.reject == RAFT_OK && n->alive)
		for (uint32_t i = 0; i < count; i++)
			n->pending_client[(up.propose_index + i) % SIM_INDEX_MAX] = n->batch_client[i];
	/* Refused proposals are dropped: the clients retry. */
}

static void node_batch_add(struct sim_node *n, const struct sim_cmd *cmd, uint8_t client)
{
	if (n->batch_count == 16)
		node_flush_batch(n);
	n->batch[n->batch_count] = *cmd;
	n->batch_client[n->batch_count] = client;
	n->batch_count++;
}

static void node_recv_client(struct sim_node *n, const struct packet *p)
{
	struct sim_cmd cmd;
	uint32_t c = p->from_slot - SIM_NODES_MAX;

	HASP_ASSERT(c < SIM_CLIENTS);
	memcpy(&cmd, p->data, sizeof(cmd));
	if (n->raft.role != RAFT_LEADER) {
		struct sim_result res;
		memset(&res, 0, sizeof(res));
		res.session = cmd.session;
		res.seq = cmd.seq;
		res.nonce = cmd.nonce;
		send_client_resp(n, c, &res, 0, n->raft.leader_id);
		return;
	}
	node_batch_add(n, &cmd, (uint8_t)(c + 1));
}

static void expire_model(struct sim_node *n)
{
	/* The node keeps the countdowns (the model has no time): a lock's TTL
	 * runs on this leader's ticks from when it saw the grant; a new leader
	 * restarts every countdown. */
	struct sim_held held[SIM_LOCKS];
	uint32_t count = S.opt.sm->held(n->sm, held, SIM_LOCKS);
	for (uint32_t i = 0; i < count; i++) {
		struct lease *l = &n->leases[held[i].lock % SIM_LOCKS];
		if (l->token != held[i].token) {
			l->token = held[i].token;
			l->deadline_tick = n->ticks + held[i].ttl_ms / SIM_TICK_MS + 1;
			l->expire_sent_tick = 0;
			continue;
		}
		if (n->ticks < l->deadline_tick ||
		    (l->expire_sent_tick != 0 && n->ticks < l->expire_sent_tick + 10))
			continue;
		struct sim_cmd cmd;
		memset(&cmd, 0, sizeof(cmd));
		cmd.kind = SIM_CMD_EXPIRE;
		cmd.lock = held[i].lock;
		cmd.token = held[i].token;
		l->expire_sent_tick = n->ticks;
		node_batch_add(n, &cmd, 0);
	}
}

static void expire_due(struct sim_node *n)
{
	/* The state machine says what is due at this leader's (term, clock);
	 * an expiry is proposed again only if still due 10 ticks later. */
	struct sim_cmd due[8];
	uint32_t count = S.opt.sm->due(n->sm, n->raft.term, node_clock_ms(n), due, 8);
	for (uint32_t i = 0; i < count; i++) {
		int slot = -1;
		for (int k = 0; k < 8; k++) {
			if (n->expire_lease[k] == due[i].lease_id)
				slot = k;
		}
		if (slot >= 0 && n->ticks < n->expire_tick[slot] + 10)
			continue;
		if (slot < 0)
			slot = (int)(n->ticks % 8);
		n->expire_lease[slot] = due[i].lease_id;
		n->expire_tick[slot] = n->ticks;
		node_batch_add(n, &due[i], 0);
	}
}

static void node_tick(struct sim_node *n)
{
	struct raft_event ev = { .type = RAFT_EVENT_TICK };
	struct raft_update up;

	n->ticks++;
	node_step(n, &ev, &up);
	if (!n->alive || n->raft.role != RAFT_LEADER)
		return;
	/* Lease expiry is the leader's decision on its own clock, replicated
	 * as a command. */
	if (S.opt.sm->due != NULL)
		expire_due(n);
	else
		expire_model(n);
	/* ReadIndex now and then, checked against acknowledged writes. */
	if (!S.healed && S.read_count < SIM_READS_MAX && prng_chance(&S.prng, 100000)) {
		struct raft_event rev = { .type = RAFT_EVENT_READ_INDEX };
		rev.read.ctx = ++S.read_ctx;
		S.reads[S.read_count].ctx = rev.read.ctx;
		S.reads[S.read_count].floor = S.acked_max;
		S.reads[S.read_count].node_id = n->id;
		S.read_count++;
		node_step(n, &rev, &up);
		if (up.reject != RAFT_OK)
			S.read_count--;
	}
}

static void node_recv_raft(struct sim_node *n, const struct packet *p)
{
	struct raft_msg m;
	struct raft_event ev = { .type = RAFT_EVENT_RECEIVE };
	struct raft_update up;

	int rc = msg_codec_decode(&m, S.decode_entries, 128, p->data, p->size);
	if (rc != 0) {
		sim_fail("n%u cannot decode a message: %d", n->id, rc);
		return;
	}
	ev.msg = &m;
	node_step(n, &ev, &up);
}

static void disk_sync(struct sim_node *n)
{
	struct sim_disk *d = &n->disk;
	struct raft_event ev = { .type = RAFT_EVENT_PERSISTED };
	struct raft_update up;

	d->sync_scheduled = false;
	if (d->dirty_from != UINT64_MAX)
		disk_flush(d, d->written_last);
	d->durable_last = d->written_last;
	ev.persisted.index = d->written_last;
	ev.persisted.term = disk_term_at(d, d->durable, d->written_last);
	node_step(n, &ev, &up);
}

/* ----------------------------------------------------------------- faults */

static struct sim_node *find_leader(void)
{
	struct sim_node *best = NULL;
	for (int s = 0; s < SIM_NODES_MAX; s++) {
		struct sim_node *n = &S.nodes[s];
		if (n->alive && n->raft.role == RAFT_LEADER &&
		    (best == NULL || n->raft.term > best->raft.term))
			best = n;
	}
	return best;
}

static void fault_partition(void)
{
	memset(S.blocked, 0, sizeof(S.blocked));
	uint32_t kind = (uint32_t)prng_below(&S.prng, 3);
	if (kind == 0) {
		/* isolate one node */
		uint32_t x = random_node_slot();
		for (int s = 0; s < SIM_NODES_MAX; s++)
			S.blocked[x][s] = S.blocked[s][x] = s != (int)x;
		vlog("partition: isolate n%u", S.nodes[x].id);
	} else if (kind == 1) {
		/* two groups */
		uint32_t mask = (uint32_t)prng_next(&S.prng);
		for (int a = 0; a < SIM_NODES_MAX; a++)
			for (int b = 0; b < SIM_NODES_MAX; b++)
				S.blocked[a][b] = ((mask >> a) & 1) != ((mask >> b) & 1);
		vlog("partition: split mask=%x", mask & 0x7f);
	} else {
		/* asymmetric: some directions only */
		for (int a = 0; a < SIM_NODES_MAX; a++)
			for (int b = 0; b < SIM_NODES_MAX; b++)
				S.blocked[a][b] = a != b && prng_chance(&S.prng, 300000);
		vlog("partition: asymmetric");
	}
}

static void fault_membership(void)
{
	struct sim_node *l = find_leader();
	struct raft_event ev = { .type = RAFT_EVENT_CONF_CHANGE };
	struct raft_update up;

	if (l == NULL)
		return;
	uint32_t voters = 0;
	const struct raft_conf *conf = &l->raft.conf;
	for (uint32_t i = 0; i < conf->count; i++)
		voters += conf->members[i].role == RAFT_VOTER;
	uint32_t choice = (uint32_t)prng_below(&S.prng, 3);
	if (choice == 0 && voters < S.opt.nodes + 1) {
		/* promote a learner, or add one */
		for (uint32_t i = 0; i < conf->count; i++) {
			if (conf->members[i].role == RAFT_LEARNER) {
				ev.conf.op = RAFT_CONF_PROMOTE;
				ev.conf.id = conf->members[i].id;
				break;
			}
		}
		if (ev.conf.id == 0 && conf->count < S.cfg.peers_max) {
			int free_slot = -1;
			for (int s = 0; s < SIM_NODES_MAX; s++) {
				bool member = false;
				for (uint32_t i = 0; i < conf->count; i++)
					member |= conf->members[i].id == S.nodes[s].id;
				if (S.nodes[s].id != 0 && !S.nodes[s].retired && !member) {
					ev.conf.id = S.nodes[s].id; /* a joiner not yet added */
					break;
				}
				if ((S.nodes[s].id == 0 || S.nodes[s].retired) && free_slot < 0)
					free_slot = s;
			}
			if (ev.conf.id == 0 && free_slot >= 0) {
				struct raft_conf empty;
				memset(&empty, 0, sizeof(empty));
				node_create(&S.nodes[free_slot], S.next_id++, &empty);
				ev.conf.id = S.nodes[free_slot].id;
			}
			ev.conf.op = RAFT_CONF_ADD_LEARNER;
		}
	} else if (choice == 1 && voters > S.opt.nodes - 1) {
		uint32_t k = (uint32_t)prng_below(&S.prng, conf->count);
		ev.conf.op = RAFT_CONF_REMOVE;
		ev.conf.id = conf->members[k].id;
	} else if (choice == 2) {
		/* transfer leadership */
		uint32_t k = (uint32_t)prng_below(&S.prng, conf->count);
		struct raft_event tev = { .type = RAFT_EVENT_TRANSFER };
		tev.transfer.target = conf->members[k].id;
		if (tev.transfer.target != l->id) {
			vlog("transfer n%u -> n%u", l->id, tev.transfer.target);
			node_step(l, &tev, &up);
		}
		return;
	}
	if (ev.conf.id == 0)
		return;
	vlog("conf change op=%u n%u on leader n%u", ev.conf.op, ev.conf.id, l->id);
	node_step(l, &ev, &up);
	if (up.reject == RAFT_OK)
		S.stats->conf_changes++;
}

static void fault_tick(void)
{
	if (!prng_chance(&S.prng, 12000))
		return;
	uint32_t what = (uint32_t)prng_below(&S.prng, 100);
	if (what < 18) {
		fault_partition();
	} else if (what < 36) {
		memset(S.blocked, 0, sizeof(S.blocked));
		vlog("heal partitions");
	} else if (what < 56) {
		struct sim_node *victim = prng_chance(&S.prng, 500000) ? find_leader() : NULL;
		if (victim == NULL)
			victim = &S.nodes[random_node_slot()];
		if (victim->alive)
			node_crash(victim);
	} else if (what < 66) {
		S.drop_ppm = (uint32_t)prng_below(&S.prng, 4) * 50000;
		S.dup_ppm = prng_chance(&S.prng, 300000) ? 20000 : 0;
		S.delay_max = (uint32_t)prng_range(&S.prng, 1, 40);
		vlog("network drop=%u dup=%u delay<=%u", S.drop_ppm, S.dup_ppm, S.delay_max);
	} else if (what < 80) {
		fault_membership();
	}
}

static void heal_all(void)
{
	vlog("heal everything");
	S.healed = true;
	memset(S.blocked, 0, sizeof(S.blocked));
	S.drop_ppm = 0;
	S.dup_ppm = 0;
	S.delay_max = 5;
	for (int s = 0; s < SIM_NODES_MAX; s++)
		S.nodes[s].restart_at = S.now;
}

static bool live(void)
{
	struct sim_node *l = find_leader();

	if (l == NULL || l->raft.commit < l->raft.term_start)
		return false;
	for (uint32_t i = 0; i < l->raft.conf.count; i++) {
		int s = slot_of_id(l->raft.conf.members[i].id);
		if (s < 0 || !S.nodes[s].alive || S.nodes[s].sm_applied < l->raft.commit)
			return false;
	}
	for (int c = 0; c < SIM_CLIENTS; c++)
		if (S.clients[c].done_since_heal < 2)
			return false;
	return true;
}

/* ---------------------------------------------------------------- the run */

static void setup(const struct sim_options *opt, struct sim_stats *stats)
{
	struct raft_conf conf;

	if (S.pool == NULL) {
		S.pool = calloc(SIM_PACKETS, sizeof(*S.pool));
		S.rec = calloc(SIM_INDEX_MAX, sizeof(*S.rec));
		S.leader_of_term = calloc(SIM_TERMS_MAX, sizeof(*S.leader_of_term));
		S.restore_entries = calloc(SIM_INDEX_MAX, sizeof(*S.restore_entries));
		S.exec_index = calloc(SIM_CLIENTS, sizeof(*S.exec_index));
		for (int s = 0; s < SIM_NODES_MAX; s++) {
			S.nodes[s].disk.durable = calloc(SIM_INDEX_MAX, sizeof(struct disk_entry));
			S.nodes[s].disk.written = calloc(SIM_INDEX_MAX, sizeof(struct disk_entry));
			S.nodes[s].sm = opt->sm->create();
			S.nodes[s].pending_client = calloc(SIM_INDEX_MAX, 1);
		}
	} else {
		for (int s = 0; s < SIM_NODES_MAX; s++)
			if (S.nodes[s].raft_up)
				raft_deinit(&S.nodes[s].raft);
	}
	memset(S.rec, 0, sizeof(*S.rec) * (S.rec_max + 1));
	memset(S.leader_of_term, 0, sizeof(*S.leader_of_term) * SIM_TERMS_MAX);
	S.opt = *opt;
	S.stats = stats;
	memset(stats, 0, sizeof(*stats));
	prng_seed(&S.prng, opt->seed);
	S.now = 0;
	S.healed = false;
	S.failed = false;
	S.rec_max = 0;
	S.acked_max = 0;
	S.read_count = 0;
	S.read_ctx = 0;
	S.conf_seen_index = 0;
	memset(S.executed_seq, 0, sizeof(S.executed_seq));
	memset(S.executed_session, 0, sizeof(S.executed_session));
	memset(S.exec_index, 0, sizeof(*S.exec_index) * SIM_CLIENTS);
	memset(S.grant_count, 0, sizeof(S.grant_count));
	memset(S.wheel, 0, sizeof(S.wheel));
	S.free_list = NULL;
	for (int i = SIM_PACKETS - 1; i >= 0; i--) {
		S.pool[i].next = S.free_list;
		S.free_list = &S.pool[i];
	}
	memset(S.blocked, 0, sizeof(S.blocked));
	S.drop_ppm = (uint32_t)prng_below(&S.prng, 3) * 20000;
	S.dup_ppm = prng_chance(&S.prng, 300000) ? 10000 : 0;
	S.delay_max = (uint32_t)prng_range(&S.prng, 1, 20);
	S.disk_latency_max = (uint32_t)prng_range(&S.prng, 0, 10);

	raft_config_default(&S.cfg, 0x6861737000000001ull, 1);
	S.cfg.peers_max = SIM_NODES_MAX;
	S.cfg.election_ticks = 10;
	S.cfg.heartbeat_ticks = 2;
	S.cfg.inflight_max = (uint32_t)prng_range(&S.prng, 1, 6);
	S.cfg.inflight_bytes_max = 4096;
	S.cfg.entry_bytes_max = SIM_ENTRY_MAX;
	S.cfg.log_window = 128;
	S.cfg.snapshot_threshold = (uint32_t)prng_range(&S.prng, 8, 48);
	S.cfg.snapshot_trailing = (uint32_t)prng_range(&S.prng, 0, 16);
	S.cfg.snapshot_chunk_max = prng_chance(&S.prng, 500000) ? 100 : 0;
	S.cfg.mtu = prng_chance(&S.prng, 500000) ? 300 : 1500;
	S.cfg.reads_max = 8;
	S.cfg.pre_vote = prng_chance(&S.prng, 750000);
	S.cfg.check_quorum = prng_chance(&S.prng, 750000);
	S.cfg.trace = trace_line;

	memset(&conf, 0, sizeof(conf));
	for (uint32_t i = 0; i < opt->nodes; i++) {
		conf.members[i].id = i + 1;
		conf.members[i].role = RAFT_VOTER;
	}
	conf.count = opt->nodes;
	for (int s = 0; s < SIM_NODES_MAX; s++) {
		S.nodes[s].raft_up = false;
		S.nodes[s].id = 0;
		S.nodes[s].alive = false;
		S.nodes[s].retired = false;
	}
	S.next_id = opt->nodes + 1;
	for (uint32_t i = 0; i < opt->nodes; i++) {
		node_create(&S.nodes[i], i + 1, &conf);
		S.nodes[i].was_member = true;
	}
	for (int c = 0; c < SIM_CLIENTS; c++) {
		memset(&S.clients[c], 0, sizeof(S.clients[c]));
		S.clients[c].nonce = (uint64_t)c + 1;
		S.clients[c].target = random_node_slot();
		S.clients[c].next_op_at = prng_below(&S.prng, 50);
	}
	vlog("seed=%llu nodes=%u mtu=%u inflight=%u prevote=%d checkquorum=%d drop=%u dup=%u "
	     "delay<=%u disk<=%u snap=%u", (unsigned long long)opt->seed, opt->nodes, S.cfg.mtu,
	     S.cfg.inflight_max, S.cfg.pre_vote, S.cfg.check_quorum, S.drop_ppm, S.dup_ppm,
	     S.delay_max, S.disk_latency_max, S.cfg.snapshot_threshold);
}

static void deliver(uint64_t t)
{
	struct packet *p = S.wheel[t % SIM_WHEEL];

	S.wheel[t % SIM_WHEEL] = NULL;
	/* Delays are below SIM_WHEEL ms, so a bucket holds only packets due
	 * now; they are delivered in a random order (reordering within a
	 * millisecond, on top of the random delays). */
	while (p != NULL && !S.failed) {
		/* pick a random packet of the remaining list */
		uint32_t len = 0;
		for (struct packet *q = p; q != NULL; q = q->next)
			len++;
		uint32_t k = (uint32_t)prng_below(&S.prng, len);
		struct packet **pp = &p;
		while (k-- > 0)
			pp = &(*pp)->next;
		struct packet *x = *pp;
		*pp = x->next;
		if (x->to_slot >= SIM_NODES_MAX) {
			client_recv(&S.clients[x->to_slot - SIM_NODES_MAX], x);
		} else {
			struct sim_node *n = &S.nodes[x->to_slot];
			if (n->alive && n->id == x->to_id) {
				if (x->kind == PKT_RAFT)
					node_recv_raft(n, x);
				else
					node_recv_client(n, x);
			}
		}
		x->next = S.free_list;
		S.free_list = x;
	}
}

/* The state of every node, for a liveness failure report. */
static void dump_nodes(void)
{
	for (int s = 0; s < SIM_NODES_MAX; s++) {
		struct sim_node *n = &S.nodes[s];
		const struct raft *r = &n->raft;
		if (n->id == 0 || !n->raft_up)
			continue;
		fprintf(stderr, "n%u %s%s %s term=%llu vote=%u leader=%u commit=%llu applied=%llu "
			"last=%llu persisted=%llu snap=%llu conf_index=%llu voters:",
			n->id, n->alive ? "alive" : "down", n->retired ? " retired" : "",
			raft_role_name(r->role), (unsigned long long)r->term, r->vote, r->leader_id,
			(unsigned long long)r->commit, (unsigned long long)n->sm_applied,
			(unsigned long long)r->log.last, (unsigned long long)r->persisted,
			(unsigned long long)r->log.snap_index, (unsigned long long)r->conf_index);
		for (uint32_t m = 0; m < r->conf.count; m++)
			fprintf(stderr, " %c%u", r->conf.members[m].role == RAFT_VOTER ? 'n' : 'l',
				r->conf.members[m].id);
		fprintf(stderr, "\n");
		if (r->role != RAFT_LEADER)
			continue;
		for (uint32_t i = 0; i < r->cfg.peers_max; i++) {
			const struct raft_progress *pr = &r->progress[i];
			if (pr->id == 0)
				continue;
			fprintf(stderr, "   progress n%u state=%u match=%llu next=%llu inflight=%u "
				"probe_sent=%d active=%d\n", pr->id, pr->state,
				(unsigned long long)pr->match, (unsigned long long)pr->next,
				pr->inflight_count, pr->probe_sent, pr->recent_active);
		}
	}
}

bool sim_run(const struct sim_options *opt, struct sim_stats *stats)
{
	setup(opt, stats);
	uint64_t end = opt->fault_ms + opt->liveness_ms;
	bool ok = false;

	for (S.now = 1; S.now <= end && !S.failed; S.now++) {
		if (!S.healed && S.now >= opt->fault_ms)
			heal_all();
		deliver(S.now);
		for (int s = 0; s < SIM_NODES_MAX && !S.failed; s++) {
			struct sim_node *n = &S.nodes[s];
			if (n->id == 0 || n->retired)
				continue;
			if (!n->alive) {
				if (S.now >= n->restart_at) {
					vlog("restart n%u", n->id);
					node_start(n);
				}
				continue;
			}
			if (n->disk.sync_scheduled && S.now >= n->disk.sync_at)
				disk_sync(n);
			if (n->alive && S.now >= n->next_tick) {
				n->next_tick += n->tick_ms;
				node_tick(n);
			}
			if (n->alive)
				node_flush_batch(n);
		}
		for (int c = 0; c < SIM_CLIENTS && !S.failed; c++)
			client_tick(&S.clients[c]);
		if (!S.healed)
			fault_tick();
		if (S.healed && live()) {
			/* No acknowledged command was lost: the final leader has
			 * committed (and every member applied, with the same bytes
			 * and results as when it was acknowledged) every index a
			 * client was told about. */
			struct sim_node *l = find_leader();
			if (S.acked_max > l->raft.commit)
				sim_fail("acknowledged index %llu lost: leader n%u commit %llu",
					 (unsigned long long)S.acked_max, l->id,
					 (unsigned long long)l->raft.commit);
			ok = true;
			break;
		}
	}
	stats->sim_ms = S.now;
	if (!ok && !S.failed)
		dump_nodes();
	if (!ok && !S.failed)
		sim_fail("liveness: no stable leader with every client served %u ms after healing",
			 opt->liveness_ms);
	return !S.failed;
}
