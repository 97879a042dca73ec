/*
 * The Raft consensus core of hasp: a pure step function.
 *
 * The node's loop feeds raft one event at a time (a tick, a received
 * message, a proposal, a report that a write became durable, ...) with
 * raft_step(), and raft fills a caller-owned struct raft_update (etcd's
 * Ready) with everything the loop must do, in this order:
 *
 *   1. persist: hard state (term, vote) and a received snapshot durably,
 *      before any message of this update leaves; log entries may be written
 *      asynchronously (report completion with RAFT_EVENT_PERSISTED);
 *   2. send: the messages;
 *   3. apply: the committed entries, in index order;
 *   4. reply: proposal indexes, ready reads and refusals to the clients.
 *
 * raft never does I/O, never reads a clock (time is ticks), never allocates
 * after raft_init() (every buffer is sized from struct raft_config) and takes
 * its randomness from a caller-owned struct prng. Entries carry opaque bytes:
 * raft does not know about locks.
 *
 * Ownership: everything an update points at (entries, messages, snapshot
 * chunks) lives inside struct raft and stays valid until the next
 * raft_step(); the loop copies what it keeps (the WAL write buffer, the
 * encoded datagram). Event inputs are owned by the caller and copied by raft
 * where it keeps them, except the snapshot bytes of RAFT_EVENT_SNAPSHOT, which
 * the caller keeps valid until it passes another snapshot or deinits.
 *
 * References are to Ongaro's thesis, "Consensus: Bridging Theory and
 * Practice" (2014), by section.
 */
#ifndef HASP_RAFT_RAFT_H
#define HASP_RAFT_RAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/prng.h"

/* Members of one configuration (voters plus learners). A compile-time bound
 * so that a configuration fits in one message and in fixed arrays. */
#define RAFT_CONF_MEMBERS_MAX 9u

/* IPv4 (20) + UDP (8) headers: an encoded message must fit mtu - this. */
#define RAFT_DATAGRAM_OVERHEAD 28u

enum raft_role {
	RAFT_FOLLOWER = 0,
	RAFT_PRE_CANDIDATE = 1,
	RAFT_CANDIDATE = 2,
	RAFT_LEADER = 3,
};

enum raft_entry_type {
	RAFT_ENTRY_COMMAND = 1, /* opaque client bytes for the state machine */
	RAFT_ENTRY_NOOP = 2,    /* a new leader's first entry (§3.6.2, §6.4) */
	RAFT_ENTRY_CONF = 3,    /* a membership configuration (§4.1) */
};

/* A view of one log entry. `data` points into raft (or into a received
 * datagram for decoded messages). */
struct raft_entry {
	uint64_t term;
	uint64_t index;
	const uint8_t *data;
	uint32_t size;
	uint8_t type;
};

enum raft_member_role {
	RAFT_VOTER = 1,
	RAFT_LEARNER = 2,
};

struct raft_member {
	uint32_t id;
	uint8_t role;
};

/* A configuration: the members sorted by nothing in particular, ids unique
 * and non-zero. */
struct raft_conf {
	uint32_t count;
	struct raft_member members[RAFT_CONF_MEMBERS_MAX];
};

enum raft_msg_type {
	RAFT_MSG_VOTE = 1,           /* RequestVote (§3.4) */
	RAFT_MSG_VOTE_RESP = 2,
	RAFT_MSG_PRE_VOTE = 3,       /* PreVote (§9.6) */
	RAFT_MSG_PRE_VOTE_RESP = 4,
	RAFT_MSG_APPEND = 5,         /* AppendEntries, also the heartbeat (§3.5) */
	RAFT_MSG_APPEND_RESP = 6,
	RAFT_MSG_SNAPSHOT = 7,       /* InstallSnapshot, one chunk (§5.3) */
	RAFT_MSG_SNAPSHOT_RESP = 8,
	RAFT_MSG_TIMEOUT_NOW = 9,    /* leadership transfer (§3.10) */
	RAFT_MSG_TYPE_COUNT
};

/* A decoded (or to-be-encoded) message. Which fields mean something depends
 * on `type`; docs/RAFT.md has one table per type. */
struct raft_msg {
	uint8_t type;
	uint64_t cluster_id;
	uint32_t from;
	uint32_t to;
	uint64_t term;

	/* VOTE, PRE_VOTE: the candidate's last log entry; `transfer` marks a
	 * campaign started by TimeoutNow (ignores leader stickiness). */
	uint64_t last_index;
	uint64_t last_term;
	bool transfer;
	/* *_RESP: refused (vote not granted, append mismatch, snapshot chunk
	 * out of order). */
	bool reject;
	/* *VOTE_RESP (with reject): the sender's committed configuration, the
	 * entry at `index`, does not list the candidate: it was removed. */
	bool not_member;

	/* APPEND: prev_index/prev_term, the entries, the leader's commit and
	 * the read sequence the reply must echo (ReadIndex, §6.4).
	 * APPEND_RESP: `index` is the follower's matching durable index on
	 * success, the rejected prev_index on reject, with the hint
	 * (hint_index, hint_term) for fast back-off. */
	uint64_t prev_index;
	uint64_t prev_term;
	uint64_t commit;
	uint64_t read_seq;
	uint64_t index;
	uint64_t hint_index;
	uint64_t hint_term;
	const struct raft_entry *entries;
	uint32_t entry_count;

	/* SNAPSHOT: one chunk [offset, offset + chunk_size) of snap_size bytes
	 * of the snapshot at (snap_index, snap_term) with configuration
	 * snap_conf; `done` on the last chunk.
	 * SNAPSHOT_RESP: snap_index and the next offset wanted (`offset`);
	 * `done` once installed. */
	uint64_t snap_index;
	uint64_t snap_term;
	uint64_t snap_size;
	uint64_t offset;
	const uint8_t *chunk;
	uint32_t chunk_size;
	bool done;
	struct raft_conf snap_conf;
};

struct raft_config {
	uint64_t cluster_id;
	uint32_t id;                  /* this node, non-zero */
	uint32_t peers_max;           /* members of any configuration, <= RAFT_CONF_MEMBERS_MAX */
	uint32_t election_ticks;      /* timeout is random in [election_ticks, 2 * election_ticks) */
	uint32_t heartbeat_ticks;     /* < election_ticks */
	uint32_t inflight_max;        /* AppendEntries in flight per follower */
	uint32_t inflight_bytes_max;  /* their encoded bytes per follower */
	uint32_t entry_bytes_max;     /* payload of one entry */
	uint32_t log_window;          /* entries held in memory */
	uint32_t mtu;                 /* datagram MTU: 1500 default, 9000 jumbo */
	uint32_t snapshot_threshold;  /* applied entries past the snapshot before asking for one */
	uint32_t snapshot_trailing;   /* entries kept after compaction for slow followers */
	uint32_t snapshot_chunk_max;  /* bytes per InstallSnapshot chunk, 0: as many as fit */
	uint32_t reads_max;           /* pending ReadIndex requests */
	bool pre_vote;                /* §9.6 */
	bool check_quorum;            /* leader steps down without a majority (§6.2) */
	/* Trace events (docs/STYLE.md §8): one line of text per protocol event, for the
	 * node's debug log and the trace tests. NULL: off. */
	void (*trace)(void *trace_arg, const char *line);
	void *trace_arg;
};

/* Fills `cfg` with the defaults (MTU 1500, 3 in flight, ...) for `id`. */
void raft_config_default(struct raft_config *cfg, uint64_t cluster_id, uint32_t id);

enum raft_event_type {
	RAFT_EVENT_TICK = 1,
	RAFT_EVENT_RECEIVE = 2,     /* a decoded message */
	RAFT_EVENT_PROPOSE = 3,     /* a batch of commands, one entry each */
	RAFT_EVENT_PERSISTED = 4,   /* the log through (index, term) is durable */
	RAFT_EVENT_SNAPSHOT = 5,    /* the loop took (or installed) a snapshot */
	RAFT_EVENT_READ_INDEX = 6,  /* linearizable read barrier (§6.4) */
	RAFT_EVENT_TRANSFER = 7,    /* leadership transfer to `target` (§3.10) */
	RAFT_EVENT_CONF_CHANGE = 8, /* one server at a time (§4.1) */
};

enum raft_conf_op {
	RAFT_CONF_ADD_LEARNER = 1,
	RAFT_CONF_PROMOTE = 2, /* learner to voter, once caught up (§4.2.1) */
	RAFT_CONF_REMOVE = 3,  /* voter or learner, the leader included (§4.2.2) */
};

/* One command of a proposal batch: `size` bytes, 1..entry_bytes_max. */
struct raft_buf {
	const void *data;
	uint32_t size;
};

struct raft_event {
	uint8_t type;
	union {
		const struct raft_msg *msg;  /* RECEIVE */
		struct {
			const struct raft_buf *bufs;
			uint32_t count;
		} propose;
		struct {
			uint64_t index;
			uint64_t term;
		} persisted;
		struct {
			uint64_t index;   /* <= applied; the state at this index */
			const void *data; /* kept valid by the caller (see top) */
			uint64_t size;
		} snapshot;
		struct {
			uint64_t ctx;     /* the caller's tag, returned with the index */
		} read;
		struct {
			uint32_t target;
		} transfer;
		struct {
			uint8_t op;
			uint32_t id;
		} conf;
	};
};

/* Refusals are data, not errors (docs/STYLE.md §4). */
enum raft_reject {
	RAFT_OK = 0,
	RAFT_NOT_LEADER = 1,       /* up->leader_id says who is, 0 if unknown */
	RAFT_FULL = 2,             /* log window or read queue full: retry later */
	RAFT_TOO_BIG = 3,          /* a command is empty or above entry_bytes_max */
	RAFT_TRANSFERRING = 4,     /* leadership transfer in progress */
	RAFT_CONF_PENDING = 5,     /* a configuration change is not committed yet */
	RAFT_CONF_INVALID = 6,     /* no such member, already a member, or full */
	RAFT_NOT_CAUGHT_UP = 7,    /* learner too far behind to promote */
	RAFT_SNAPSHOT_INVALID = 8, /* snapshot index not applied or already covered */
};

/* A read that may be served once the state machine applied `index`. */
struct raft_read {
	uint64_t ctx;
	uint64_t index;
};

/* What the loop must do after one step; see the order at the top. */
struct raft_update {
	/* 1. persist */
	bool hard_state_changed;   /* write (term, vote) durably before sending */
	uint64_t term;
	uint32_t vote;
	/* Entries to write: drop every logged entry with index >=
	 * entries[0].index, then append these. Report RAFT_EVENT_PERSISTED with
	 * the last one's (index, term) once durable. */
	const struct raft_entry *entries;
	uint32_t entry_count;
	/* A received snapshot chunk to store at `snap_chunk_offset` of the
	 * snapshot being received (before sending). */
	const uint8_t *snap_chunk;
	uint32_t snap_chunk_size;
	uint64_t snap_chunk_offset;
	/* The received snapshot is complete: restore the state machine from it,
	 * make it durable, drop logged entries <= snap_index (all of them when
	 * snap_log_reset), all before sending; then pass its bytes back with
	 * RAFT_EVENT_SNAPSHOT so that this node can send it when leader. */
	bool snap_install;
	bool snap_log_reset;
	uint64_t snap_index;
	uint64_t snap_term;
	uint64_t snap_size;
	struct raft_conf snap_conf;

	/* 2. send */
	const struct raft_msg *msgs;
	uint32_t msg_count;

	/* 3. apply (committed, in order; CONF and NOOP entries included so
	 * the state machine can count indexes) */
	const struct raft_entry *apply;
	uint32_t apply_count;
	/* The applied index passed the threshold: take a snapshot at any
	 * applied index and report it with RAFT_EVENT_SNAPSHOT. */
	bool snapshot_wanted;

	/* 4. reply */
	uint8_t reject;             /* enum raft_reject for this step's request */
	uint64_t propose_index;     /* PROPOSE/CONF_CHANGE: first index given */
	uint32_t propose_count;
	const struct raft_read *reads; /* reads now safe at their index */
	uint32_t read_count;
	uint32_t reads_dropped;     /* pending reads lost by stepping down */

	/* State after the step. */
	bool role_changed;
	uint8_t role;
	uint32_t leader_id;
	uint64_t commit;
};

/* Counters (docs/STYLE.md §8): bad or stray input is counted, never asserted. */
struct raft_counters {
	uint64_t msg_received;
	uint64_t msg_dropped_cluster;   /* another cluster id */
	uint64_t msg_dropped_to;        /* addressed to another node */
	uint64_t msg_dropped_nonmember; /* from a node outside the configuration */
	uint64_t removal_notices_sent;  /* not_member replies to removed candidates */
	uint64_t removal_notices;       /* not_member replies that proved our removal */
	uint64_t msg_dropped_stale;     /* from an older term */
	uint64_t msg_dropped_invalid;   /* inconsistent fields */
	uint64_t msg_sent;
	uint64_t msg_dropped_full;      /* update message slots exhausted */
	uint64_t elections;
	uint64_t pre_votes;
	uint64_t leader_elected;
	uint64_t check_quorum_step_downs;
	uint64_t append_rejected;       /* mismatches we replied to */
	uint64_t append_retransmits;    /* go-back-N after a stalled pipeline */
	uint64_t follower_log_lost;     /* a follower no longer held entries it acked */
	uint64_t proposals;
	uint64_t proposals_rejected;
	uint64_t snapshots_sent;
	uint64_t snapshots_installed;
	uint64_t transfers;
	uint64_t conf_changes;
};

/* Replication progress of one member, as the leader sees it (§3.5). */
enum raft_progress_state {
	RAFT_PROBE = 0,
	RAFT_REPLICATE = 1,
	RAFT_SNAPSHOTTING = 2,
};

struct raft_progress {
	uint32_t id;                  /* 0: unused slot */
	uint8_t role;                 /* enum raft_member_role */
	uint8_t state;                /* enum raft_progress_state */
	bool probe_sent;              /* PROBE: one append out, wait */
	bool recent_active;           /* heard from since the last quorum check */
	bool vote_responded;
	bool vote_granted;
	uint64_t match;
	uint64_t next;
	uint64_t read_acked;          /* highest read_seq echoed */
	/* In-flight appends (REPLICATE): a ring of each message's last index
	 * and encoded size. */
	uint64_t *inflight_last;
	uint32_t *inflight_size;
	uint32_t inflight_head;
	uint32_t inflight_count;
	uint64_t inflight_bytes;
	uint32_t stall_ticks;         /* ticks without an ack while in flight */
	uint32_t silent_ticks;        /* leader ticks since this member last answered */
	/* SNAPSHOTTING: the snapshot being sent and the next offset. */
	uint64_t snap_index;
	uint64_t snap_offset;
	uint32_t snap_ticks;
};

/* The in-memory log: a window of log_window consecutive entries ending at
 * `last`, after the snapshot (snap_index, snap_term). */
struct raft_log {
	struct raft_entry *slots;     /* log_window, by index % log_window */
	uint8_t *data;                /* log_window * entry_bytes_max */
	uint32_t window;
	uint32_t entry_bytes_max;
	uint64_t first;               /* first index held; first > last: empty */
	uint64_t last;
	uint64_t snap_index;
	uint64_t snap_term;
};

struct raft_pending_read {
	uint64_t ctx;
	uint64_t index;
	uint64_t seq;
};

struct raft {
	struct raft_config cfg;
	struct prng *prng;
	struct raft_counters counters;

	/* Persistent state (§3.3): term and vote, the log. */
	uint64_t term;
	uint32_t vote;
	struct raft_log log;

	/* Volatile state. */
	uint8_t role;
	uint32_t leader_id;
	uint64_t commit;
	uint64_t applied;
	uint64_t persisted;           /* local log durable through here */
	uint32_t election_elapsed;
	uint32_t election_timeout;    /* randomized */
	uint32_t heartbeat_elapsed;

	/* Follower: highest index known to match the leader in this term, the
	 * last read_seq seen, and whether an ack waits for durability. */
	uint64_t verified;
	uint64_t leader_read_seq;
	bool ack_pending;

	/* Membership: the latest configuration in the log (§4.1) and the one
	 * in the snapshot. */
	struct raft_conf conf;
	uint64_t conf_index;
	struct raft_conf snap_conf;
	/* This server was a member of a configuration it held (restored or
	 * appended): tells "removed" from "joining, configuration not yet
	 * known" (raft_removed). */
	bool was_member;
	/* A member of a newer committed configuration told us (a not_member
	 * vote reply) that it was the entry at this index, and that it does
	 * not list us: removed while cut off. Volatile; cleared in effect by
	 * holding a configuration at or past it (raft_removed). */
	uint64_t removal_notice_index;

	/* Leader. */
	struct raft_progress *progress; /* peers_max slots */
	uint64_t term_start;          /* index of this term's no-op */
	uint32_t transfer_target;
	uint32_t transfer_elapsed;
	uint64_t read_seq;
	struct raft_pending_read *reads; /* ring of reads_max */
	uint32_t reads_head;
	uint32_t reads_count;

	/* Snapshot: what we can send (bytes owned by the caller), and what we
	 * are receiving. */
	const uint8_t *snap_data;
	uint64_t snap_data_size;
	uint64_t snap_data_index;
	uint64_t recv_snap_index;
	uint64_t recv_snap_term;
	uint64_t recv_snap_offset;

	/* Scratch for the update (sized at init). */
	struct raft_msg *msgs;
	uint32_t msgs_max;
	struct raft_entry *up_entries;
	struct raft_read *up_reads;
	uint64_t dirty_from;          /* lowest index written this step */
	struct raft_update *up;       /* during a step */
	uint64_t step_term;
	uint32_t step_vote;
	uint8_t step_role;
	uint32_t step_leader;
};

/* Allocates every buffer from `cfg` (the only allocation raft ever does) and
 * starts as a follower at term 0 with an empty log and an empty
 * configuration. `prng` is owned by the caller and must outlive `r`.
 * Returns 0, -HASP_ECONFIG for an inconsistent config, -HASP_ENOMEM. */
int raft_init(struct raft *r, const struct raft_config *cfg, struct prng *prng)
	__attribute__((warn_unused_result));
void raft_deinit(struct raft *r);

/* What survived on disk, given to raft_restore() once after raft_init() and
 * before the first step. A new cluster bootstraps with snap_index 0 and the
 * initial voters in snap_conf; a node joining an existing cluster starts
 * with an empty snap_conf and learns everything from the leader. */
struct raft_persisted_state {
	uint64_t term;
	uint32_t vote;
	uint64_t snap_index;
	uint64_t snap_term;
	struct raft_conf snap_conf;
	const void *snap_data;        /* kept valid by the caller, may be NULL */
	uint64_t snap_size;
	const struct raft_entry *entries; /* consecutive from snap_index + 1 */
	uint32_t entry_count;
};

/* Loads the durable state (entries are copied). Returns 0, or -HASP_EINVAL
 * when entries are not consecutive after the snapshot or do not fit the
 * window, -HASP_ECONFIG for a bad configuration. */
int raft_restore(struct raft *r, const struct raft_persisted_state *ps)
	__attribute__((warn_unused_result));

/* Processes one event and fills `up` (cleared first). Never fails: refusals
 * are up->reject, bad messages are dropped and counted. */
void raft_step(struct raft *r, const struct raft_event *ev, struct raft_update *up);

/* The O(window) consistency check run after every step in debug builds. */
bool raft_invariants_ok(const struct raft *r);
/* Source line of the check that last failed (diagnostics only). */
extern int raft_invariant_line;

/* Term of the entry at `index`, 0 if not known (compacted or beyond last). */
uint64_t raft_term_at(const struct raft *r, uint64_t index);
uint64_t raft_last_index(const struct raft *r);
/* The entry at index (a view valid until the next step), NULL if not held. */
const struct raft_entry *raft_entry_at(const struct raft *r, uint64_t index);

const char *raft_role_name(uint8_t role);
/* This server knows it was removed: it was a member, and the latest
 * configuration, committed, no longer lists it. It never campaigns again
 * (unless added back), and the others ignore its vote requests. A server
 * removed while cut off never receives the removal (the leader stops
 * replicating to it when it appends it); it learns it from the members it
 * asks for votes: each answers a not_member reply naming its committed
 * configuration entry, and a reply newer than our own configuration is
 * proof (configurations form one chain of committed entries). */
bool raft_removed(const struct raft *r);
/* This server's role in the latest configuration: RAFT_VOTER,
 * RAFT_LEARNER, or 0 when it is not listed. */
uint8_t raft_self_role(const struct raft *r);

#endif
