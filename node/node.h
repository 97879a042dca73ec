/*
 * The node core of haspd: one Raft group, one lock state machine, one
 * storage directory, driven by datagrams and a work hook.
 *
 * It knows nothing of DPDK: datagrams come in through node_client_rx() and
 * node_peer_rx(), leave through the caller's `struct node_net` (haspd binds
 * it to dp_udp_send on the lcore; the unit tests to an in-memory network),
 * and time arrives as a CLOCK_MONOTONIC nanosecond argument. Storage is
 * io_uring on a directory, or any storage_io (the tests use the simulated
 * disk). So the whole node, raft, WAL and state machine included, runs in
 * unit tests without a NIC.
 *
 * Single-threaded: every function runs on the node's one lcore. Everything
 * is allocated in node_init(); afterwards nothing allocates (snapshot file
 * loading at start excepted).
 *
 * The order of side effects of each raft update is written once, in
 * node_update() in node.c: persist -> send -> apply -> reply.
 */
#ifndef HASP_NODE_NODE_H
#define HASP_NODE_NODE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "common/prng.h"
#include "node/node_config.h"
#include "node/client_auth.h"
#include "node/node_hist.h"
#include "node/peer_auth.h"
#include "node/peer_keys.h"
#include "node/snap_writer.h"
#include "node/watch_index.h"
#include "hasp/wire.h"
#include "locks/cmd_codec.h"
#include "locks/locks.h"
#include "raft/raft.h"
#include "storage/storage.h"

/* How datagrams leave the node. `send` copies the payload. */
struct node_net {
	void (*send)(void *ctx, uint32_t dst_ip, uint16_t dst_port, uint16_t src_port,
		     const void *payload, size_t size);
	void *ctx;
};

/* Event lanes (node_set_event_lanes()): where pushed events leave when the
 * node has lcores besides its own. Each session's events go to one lane
 * (a hash of its id), so they leave in the order the node made them.
 * `send` takes the encoded event unsealed, with the session's key when
 * clients authenticate (NULL otherwise), copies both and returns whether
 * the datagram was queued; the lane seals and sends it. When it was not
 * (the lane's queue full), the node sends it itself, as without lanes.
 * haspd binds lane i to lcore 1 + i (docs/OPERATIONS.md, "More lcores"). */
#define NODE_EVENT_LANES_MAX 7u
struct auth_key;
struct node_event_lanes {
	uint32_t count; /* 0: events leave through node_net like replies */
	bool (*send)(void *ctx, uint32_t lane, uint32_t dst_ip, uint16_t dst_port, uint16_t src_port,
		     const struct auth_key *key, const void *payload, size_t size);
	void *ctx;
};

/* Outcomes of a watch event (hasp_watch_events_total{outcome}): pushed,
 * held back by the rate limit, replaced while held, discarded while held
 * (step-down, UNWATCH, the session's end). */
#define NODE_WATCH_OUTCOME_TABLE(X) \
	X(NODE_WATCH_SENT, "sent") \
	X(NODE_WATCH_DEFERRED, "deferred") \
	X(NODE_WATCH_COALESCED, "coalesced") \
	X(NODE_WATCH_DROPPED, "dropped")

enum node_watch_outcome {
#define NODE_WATCH_ENUM(name, text) name,
	NODE_WATCH_OUTCOME_TABLE(NODE_WATCH_ENUM)
#undef NODE_WATCH_ENUM
	NODE_WATCH_OUTCOMES
};

/* Watch event outcomes counted per lcore that sends the watch's events:
 * index 0 is the node's own lcore, 1 + i event lane i. The rate limit is
 * the node's, so deferred, coalesced and dropped happen on the node's
 * lcore; they are counted against the watch's lane all the same, so that
 * one row tells what became of the events that lane carries. */
struct node_watch_lcore {
	uint64_t count[NODE_WATCH_OUTCOMES];
};

/* Opcodes index replies_by and request_latency directly (enum hasp_op is
 * below 64 and sparse; 0 collects the opcodes the protocol does not know). */
#define NODE_OPS (HASP_OP_KV_RANGE + 1)

/* Counters (docs/STYLE.md §8): everything dropped, refused or throttled. */
struct node_stats {
	uint64_t client_rx;            /* datagrams on the client port */
	uint64_t client_bad;           /* refused by the wire decoder (all reasons) */
	uint64_t client_bad_reason[32]; /* by -HASP_E* code */
	uint64_t client_unanswered;    /* refused and not answerable (no reply sent) */
	/* client_auth = on: dropped before anything else, never answered. */
	uint64_t client_auth_version;  /* not wire v2 (or undecodable) */
	uint64_t client_auth_unknown;  /* unknown session or identity */
	uint64_t client_auth_bad;      /* tag does not verify */
	uint64_t client_forbidden;     /* answered FORBIDDEN */
	uint64_t identities_reloaded;  /* identities file reloaded (SIGHUP, identities.reload) */
	uint64_t identities_reload_failed; /* a reload refused: the file was bad, the old set stays */
	uint64_t client_no_session;    /* mutation for an unknown session: SESSION_EXPIRED, not proposed */
	uint64_t client_replies_from_cache; /* retransmissions of applied commands: cached reply, not proposed */
	uint64_t client_retransmits_in_flight; /* copies of commands in flight: dropped, not proposed */
	uint64_t client_not_leader;    /* answered NOT_LEADER */
	uint64_t client_overloaded;    /* answered OVERLOADED (raft window or read queue full) */
	uint64_t client_unavailable;   /* answered UNAVAILABLE (stopping) */
	uint64_t client_replies;       /* replies sent */
	uint64_t proposals;            /* commands proposed */
	uint64_t batches;              /* proposal batches */
	uint64_t batch_full_flushes;   /* batches closed by size (the rest by deadline) */
	uint64_t reads;                /* linearizable reads served */
	uint64_t reads_dropped;        /* reads lost by a step-down (answered NOT_LEADER) */
	uint64_t applied_commands;
	uint64_t apply_decode_errors;  /* committed entries that were not commands (must stay 0) */
	uint64_t pending_lost;         /* replies with no waiting client (other leader's entries) */
	uint64_t ticks_proposed;
	uint64_t expiries_proposed;    /* LEASE_EXPIRE + SESSION_EXPIRE */
	uint64_t peer_rx;
	uint64_t peer_auth_bad;        /* no valid MAC under the sender's pair key (forged, damaged, short,
					* unknown or revoked sender address) */
	uint64_t peer_keys_revoked;    /* members whose pair keys a committed configuration revoked */
	uint64_t peer_auth_replayed;   /* valid MAC, (epoch, counter) already seen or too old */
	uint64_t peer_bad;             /* refused by the raft message decoder */
	uint64_t peer_dropped_cluster; /* another cluster id */
	uint64_t peer_dropped_node;    /* not addressed to us, or from a non-member / wrong address */
	uint64_t peer_tx;
	uint64_t peer_tx_errors;       /* encode failures (must stay 0) */
	uint64_t events_pushed;        /* EVENT datagrams sent (grants and watches) */
	uint64_t events_lane_overflow; /* events an event lane had no room for: sent from the node's lcore */
	uint64_t events_no_address;    /* no known address for the session */
	uint64_t events_deduplicated;  /* the same event again for one session (waiter and watcher) */
	uint64_t leader_stalls;        /* leading, found it had not run for an election timeout */
	uint64_t events_unconfirmed;   /* events held or dropped until a stalled leader is confirmed */
	uint64_t watch_rate_limited;   /* watch events held back by the token bucket */
	uint64_t watch_coalesced;      /* held-back events replaced by a newer one */
	uint64_t watch_full;           /* WATCH refused: table full (FULL) */
	uint64_t watch_events_sent;    /* watch events pushed (at once or from the held FIFO) */
	uint64_t watch_dropped;        /* held watch events discarded (step-down, UNWATCH, session end) */
	uint64_t session_table_full;   /* session address not remembered */
	uint64_t session_address_kept; /* another address with an old seq: not moved */
	uint64_t sessions_pruned;      /* addresses dropped after InstallSnapshot (session gone) */
	uint64_t snapshots_taken;
	uint64_t snapshot_paced_pieces; /* pieces of snapshot files written at snapshot_write_rate */
	uint64_t snapshot_hurried;        /* paced snapshots told to write the rest at once */
	uint64_t snapshot_hurried_pieces; /* pieces of those written without the wait */
	uint64_t snapshots_installed;
	uint64_t snapshot_too_big;     /* snapshot larger than the buffer: not taken */
	uint64_t snapshot_failures;    /* snapshot saves that failed (ENOSPC, EIO) */
	uint64_t snapshot_transfers;   /* leadership handed off: snapshots failing, window filling */
	uint64_t snap_chunk_dropped;   /* InstallSnapshot chunk out of bounds */
	uint64_t wal_full_waits;       /* appends that had to wait for a free write slot */
	uint64_t hardstate_saves;
	uint64_t storage_failures;     /* the disk failed: the node stopped acknowledging */
	uint64_t ticks_dropped;        /* raft ticks missed in a stall, not replayed (node_work) */
	/* Replies by opcode (0: an opcode outside the protocol's) and status,
	 * and the time from a request's arrival to its reply by opcode
	 * (hasp_client_replies_total, hasp_request_duration_seconds). */
	uint64_t replies_by[NODE_OPS][HASP_STATUS_COUNT];
	struct node_hist request_latency[NODE_OPS];
	/* Leader: a proposed batch to its commit; every node: one run of
	 * committed entries through the state machine
	 * (hasp_raft_commit_duration_seconds, hasp_apply_duration_seconds;
	 * node_latency.c). */
	struct node_hist commit_latency;
	struct node_hist apply_latency;
	uint64_t latency_ring_full;    /* batches not timed: the ring was full */
};

/* One client request waiting for its command to commit (by log index). */
struct node_pending {
	uint64_t index;      /* 0: free */
	uint64_t session_id; /* header session (0 for SESSION_OPEN) */
	uint64_t seq;
	uint64_t lease_id;   /* ACQUIRE: the lease asked for (0: own TTL) */
	uint32_t ip;
	uint16_t port;
	uint8_t op;
	uint64_t arrival_ns; /* the request's arrival (request latency) */
	/* The leader's term when the request arrived, and its request digest
	 * (locks_cmd.digest; 0 for SESSION_OPEN): with (session_id, seq) they
	 * tell a copy of this command while it is in flight (dispatch.c,
	 * "Copies in flight"). */
	uint64_t term;
	uint64_t digest;
	/* client_auth = on: the key that seals the reply (the session key, or
	 * for SESSION_OPEN the identity key), kept here because the command
	 * itself may end the session (SESSION_CLOSE). */
	struct auth_key key;
};

/* One command collected into the current batch. */
struct node_batch_item {
	struct node_pending p; /* index filled at propose */
	bool has_client;
	bool marked; /* its (session, seq) slot in n->inflight named it when added */
	uint32_t offset, size; /* encoded command in batch_buf */
};

enum node_read_state {
	NODE_READ_FREE = 0,
	NODE_READ_COLLECTED, /* waits for the batch's READ_INDEX */
	NODE_READ_ASKED,     /* READ_INDEX stepped with ctx */
	NODE_READ_READY,     /* serve once applied >= index */
};

/* One linearizable read (LOCK_READ, CHECK, KV_GET, KV_RANGE). */
struct node_read {
	uint8_t state;
	uint8_t op;
	uint8_t name_len, start_len;
	uint16_t limit;
	uint16_t port;
	uint32_t ip;
	uint64_t ctx;
	uint64_t index;
	uint64_t session_id, seq, token;
	uint64_t owner;                    /* the reader's identity (LOCK_READ holder) */
	uint64_t arrival_ns;               /* the request's arrival (request latency) */
	struct auth_key key;               /* seals the reply (client_auth = on) */
	uint8_t name[HASP_NAME_SIZE_MAX];  /* name, key or prefix */
	uint8_t start[HASP_NAME_SIZE_MAX]; /* KV_RANGE start-after */
};

/* What the node remembers of a session (not replicated): where to push its
 * events and the identity of the last event it sent there (the next one
 * names it as prev). Open addressing on the session id. */
struct node_session {
	uint64_t id; /* 0: free */
	uint64_t last_event_index;
	uint32_t last_event_sub;
	uint64_t seen_seq; /* the highest seq that set ip/port (notify_session_seen) */
	uint32_t ip;
	uint16_t port;
	uint32_t watch_head; /* its watches (node/watch_index.h), or WATCH_NONE */
};

struct node;

/*
 * The node loop's side of dispatch.c and notify.c: all they may ask of it.
 * node_init() fills it once (an ops table, docs/STYLE.md §1). node.c
 * calls dispatch and notify; they reach node.c only through these two
 * callbacks, so the three files form no circle (docs/ARCHITECTURE.md).
 * They keep their own parts of struct node (batches, pending replies and
 * reads; sessions and watches) and read the shared ones (raft, sm, cfg,
 * now_ns, term, role).
 */
struct node_loop {
	/* Sends one datagram from this node's client port; copies it. */
	void (*client_send)(struct node *n, uint32_t ip, uint16_t port, const void *payload,
			    size_t size);
	/* Carries out the update that the raft_step() just made left in n->up:
	 * persist, send, apply, reply (node_update() in node.c). */
	void (*raft_updated)(struct node *n);
};

#define NODE_EXPIRE_IDS_MAX 256u
#define NODE_INFLIGHT_BATCH (1ull << 63) /* n->inflight: a batch position, not a log index */
#define NODE_RANGE_MAX 128u
#define NODE_LATENCY_RING 64u

struct node {
	struct node_config cfg;
	const struct node_member *self;
	struct node_net net;
	struct node_loop loop;     /* for dispatch.c and notify.c */
	struct prng prng;
	struct raft raft;
	struct raft_update up;
	struct locks sm;
	struct storage st;
	bool storage_open;

	uint64_t now_ns;
	uint64_t next_tick_ns;
	uint64_t applied;          /* raft index applied (no-ops and confs included) */
	uint64_t durable_reported; /* last index reported to raft as persisted */
	uint8_t role;
	uint32_t leader_id;
	uint64_t term;
	bool stopping;
	bool failed;               /* storage failed: no more acknowledgements */
	bool removed;              /* raft_removed(), for the log line on a change */
	/* A leader that found it had not run for an election timeout (stopped,
	 * paused, starved) pushes no event until a quorum round begun after
	 * that confirms it still leads (docs/PROTOCOL.md "Events from a
	 * stalled leader"): its READ_INDEX context (0: not asked yet) and
	 * when it asked. */
	bool lead_unconfirmed;
	uint64_t confirm_ctx;
	uint64_t confirm_ns;
	/* When this node last won an election, and whether it has applied
	 * that term's first entry since: from then on a client's command can
	 * commit in the term. lead_ready_ns_last is the time between the two
	 * of its last term as leader (0: it never got there); the log line
	 * "leader ready" marks the moment (perf/failover splits a client's
	 * failover wait with it). */
	uint64_t lead_won_ns;
	bool lead_ready;
	uint64_t lead_ready_ns_last;

	/* Batching: commands encoded back to back in batch_buf. */
	struct node_batch_item *batch;
	uint8_t *batch_buf;
	struct raft_buf *batch_bufs;
	uint32_t batch_count;
	uint32_t batch_used;
	uint64_t batch_open_ns;    /* first command's arrival */
	uint64_t last_propose_ns;
	bool tick_due;             /* first TICK of a term */
	uint64_t expiry_fence;     /* no new expiry round before applied >= this */
	uint64_t expiry_check_ns;  /* next time something can be due */
	uint64_t expiry_checked_applied; /* applied index at that check */

	struct node_pending *pending; /* by index % pending_count */
	uint32_t pending_count;
	/* Where each client command in flight waits, by a hash of its
	 * (session, seq): its log index once proposed, or NODE_INFLIGHT_BATCH
	 * | its position in the batch; 0: nothing. Direct-mapped and lossy: a
	 * later command in the same slot replaces the mark, and a mark is
	 * believed only when the pending slot or batch item it names still
	 * holds that command in this term (dispatch.c, "Copies in flight"). */
	uint64_t *inflight;
	uint32_t inflight_mask;

	struct node_read *reads;
	uint32_t reads_max;
	uint32_t reads_collected;  /* reads waiting for the next READ_INDEX */
	uint32_t reads_ready;      /* reads with a read index, not yet served */
	uint64_t read_ctx;

	struct node_session *sessions; /* power of two */
	uint32_t sessions_mask;

	struct watch_index watches; /* node/watch_index.h */
	double watch_tokens;
	uint64_t watch_refill_ns;
	struct node_event_lanes lanes;
	struct node_watch_lcore watch_by_lcore[1 + NODE_EVENT_LANES_MAX];

	/* Apply scratch. */
	struct locks_event *events;
	uint32_t events_max;
	struct locks_kv_info *range;

	/* Snapshots: two buffers alternate as the one raft may send; one for
	 * receiving InstallSnapshot. */
	uint8_t *snap_buf[2];
	uint64_t snap_size[2];
	uint32_t snap_cur;
	uint64_t snap_buf_size;
	uint8_t *snap_recv;
	bool snapshot_wanted;
	/* Failing snapshot saves (docs/STORAGE.md, "Snapshot save failures"):
	 * consecutive failures, the last error, when to try again (bounded
	 * exponential backoff), when the next log line may go out, and when
	 * the last leadership hand-off was tried. */
	uint32_t snap_fail_streak;
	int snap_fail_error;
	uint64_t snap_retry_ns;
	uint64_t watermark_next_ns; /* no WAL idle watermark before (idle_watermark_ms) */
	uint64_t snap_log_ns;
	uint64_t snap_log_suppressed;
	uint64_t snap_transfer_ns;
	bool snap_report;          /* an installed snapshot to pass back to raft */
	uint64_t snap_report_index;
	/* The snapshot being saved (on a real disk by the writer thread, from
	 * snap_copy: node/snap_writer.h): the state it serializes, its index,
	 * term and membership, and the buffer it fills. */
	struct snap_writer snap_writer;
	bool snap_writer_ready;    /* real disk: snap_writer and snap_copy initialised */
	struct locks snap_copy;    /* the state machine at snap_job_index */
	const struct locks *snap_job_sm;
	struct raft_conf snap_job_conf;
	uint64_t snap_job_index;
	uint64_t snap_job_term;
	uint32_t snap_job_buf;
	bool snap_job_paced;       /* on the writer thread, snapshot_write_rate set */
	uint64_t snap_pace_start_ns; /* the writer thread's: when the job's file began */
	uint64_t snap_pace_pieces;   /* the writer thread's: pieces of the job so far */
	/* Set by the lcore while a paced job runs and the raft log window is
	 * half full: the writer thread writes the rest without waiting, since
	 * the log is compacted only when the file is done, and a full window
	 * refuses commands (docs/STORAGE.md, "Snapshot write rate"). */
	atomic_bool snap_hurry;
	uint64_t snap_hurry_pieces;  /* the writer thread's: pieces of the job written unpaced */
	/* How long each copy stopped the lcore (locks_copy). */
	uint64_t snap_copies;
	uint64_t snap_copy_ns_last;
	uint64_t snap_copy_ns_max;
	uint64_t snap_copy_replies_last; /* reply records the last copy carried */

	/* Raft decode scratch and datagram buffer. */
	struct raft_entry *rx_entries;
	uint32_t rx_entries_max;
	uint8_t tx[HASP_MTU_JUMBO];

	/* Peer authentication (node/peer_auth.h): this node's epoch and
	 * counter, and a replay window per sender, by index in cfg.members
	 * (each window names its sender and resets when the slot changes
	 * hands). */
	struct peer_auth_tx peer_auth_tx;
	struct peer_auth_window peer_auth_rx[NODE_MEMBERS_MAX];
	/* The pair keys of each member, same index (node/peer_keys.h), and
	 * the configuration index they last followed. */
	struct peer_keys peer_keys[NODE_MEMBERS_MAX];
	uint64_t peer_keys_conf_index;

	/* Client identities and session keys (client_auth = on). */
	struct client_auth client_auth;

	/* Peer round trips (control plane: hasp_peer_rtt_seconds), by index
	 * in cfg.members: an empty AppendEntries (heartbeat) starts a probe
	 * when none is out, its response ends it. Followers answer heartbeats
	 * without touching the disk, so this is the network and scheduling
	 * round trip. */
	uint64_t peer_probe_ns[NODE_MEMBERS_MAX];
	uint64_t peer_rtt_ns[NODE_MEMBERS_MAX];
	uint64_t peer_rtt_samples[NODE_MEMBERS_MAX]; /* probes ended (each one a histogram sample) */

	/* Proposed batches waiting for their commit (leader; node_latency.c):
	 * a ring of (last index, proposal time); a full ring skips a sample,
	 * never blocks. */
	struct node_timed {
		uint64_t index, ns;
	} commit_wait[NODE_LATENCY_RING];
	uint32_t commit_wait_head, commit_wait_count;

	struct node_stats stats;
};

/* Opens storage (cfg->data_dir, or `io` when io.ops is set), recovers the
 * newest snapshot and the WAL after it, and sets up raft and the state
 * machine. Blocking. Returns 0, -HASP_ECONFIG, -HASP_ENOMEM, or the storage
 * error (-HASP_ESYS: directory not usable; -HASP_ECORRUPT: WAL or snapshot
 * damaged; -HASP_EIO); `err` names the path or field. */
/* Why this node works but not fully ("snapshot saves failing: ENOSPC, 12
 * in a row", "member 3 lags 5000 entries"), written to buf; NULL when
 * nothing is degraded. Health reports it (docs/CONTROL.md). */
const char *node_degraded(const struct node *n, char *buf, size_t size);

int node_init(struct node *n, const struct node_config *cfg, struct storage_io io,
	      const struct node_net *net, uint64_t now_ns, char *err, size_t err_size)
	__attribute__((warn_unused_result));
/* Sends pushed events through `lanes` from now on (struct node_event_lanes).
 * After node_init(), before the first event. Returns 0 or -HASP_EINVAL
 * (count 0 or above NODE_EVENT_LANES_MAX, no send function). */
int node_set_event_lanes(struct node *n, const struct node_event_lanes *lanes)
	__attribute__((warn_unused_result));
/* The lcore that sends session `session_id`'s events: 0 (the node's own)
 * without event lanes, else 1 + its lane. */
uint32_t node_event_lcore(const struct node *n, uint64_t session_id);
/* Drains in-flight WAL writes and hard-state saves (blocking) and frees
 * everything. */
void node_deinit(struct node *n);

/* A datagram on the client port / the peer port. `payload` is the caller's
 * and only read during the call. */
void node_client_rx(struct node *n, uint64_t now_ns, uint32_t src_ip, uint16_t src_port,
		    const uint8_t *payload, size_t size);
void node_peer_rx(struct node *n, uint64_t now_ns, uint32_t src_ip, uint16_t src_port,
		  const uint8_t *payload, size_t size);

/* The periodic work: raft ticks, storage completions, batch deadlines,
 * expiry, TICK commands, reads, held watch events, snapshots. Returns true
 * when it did something and lowers *deadline_ns to when it must run next. */
bool node_work(struct node *n, uint64_t now_ns, uint64_t *deadline_ns);

/* Stops taking requests (answered UNAVAILABLE from now on) and waits for
 * in-flight WAL writes (blocking). */
void node_stop(struct node *n);

/* The storage ring's fd (readable while completions wait) to wake an idle
 * lcore, or -1 (simulated disk). */
int node_wake_fd(struct node *n);

/* Makes the node's own threads (the snapshot writer, node/snap_writer.h)
 * on a real disk; nothing on the simulated one. Call it after EAL init and
 * before the lcore loop (no thread may exist before EAL init, and the
 * lcore must not allocate a thread's stack). 0 or -HASP_ENOMEM; without
 * it the first snapshot makes the thread. */
int node_start_threads(struct node *n) __attribute__((warn_unused_result));

/* Counters as one JSON object with a trailing newline; returns its length
 * (0 if it does not fit). */
size_t node_stats_json(const struct node *n, char *buf, size_t size);

/* ---- inside the node/ folder ---- */

/* Steps raft with `ev` and carries out its update (node_update() in
 * node.c). For node_admin.c; dispatch.c and notify.c use struct node_loop. */
void node_step(struct node *n, const struct raft_event *ev);

/* Leader, and taking requests (not stopping, storage not failed). */
static inline bool node_is_leader(const struct node *n)
{
	return n->role == RAFT_LEADER && !n->stopping && !n->failed;
}

#endif
