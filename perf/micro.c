/*
 * perf_micro: micro-benchmarks of hasp's pure parts, made to be counted in
 * INSTRUCTIONS under valgrind --tool=callgrind (perf/micro_check.py), which
 * is stable on a noisy shared machine where wall-clock numbers are not.
 *
 *   perf_micro <case> <iterations>     (perf_micro list: the cases)
 *
 * Each case sets up outside its measured function, then calls
 * micro_measure_<case>() once; the checker runs callgrind with
 * --toggle-collect=micro_measure_<case> so only that function's inclusive
 * instructions count, and divides by the iterations. Inputs are fixed
 * (fixed seeds, fixed names), so a count changes only when the code does.
 *
 * The locks/ and raft/ sources are compiled into this program without
 * HASP_DEBUG_ASSERTS (as bench_locks is): the O(n) invariant checks would
 * measure the checker, not the core.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "hasp/wire.h"
#include "locks/locks.h"
#include "node/watch_index.h"
#include "perf/raft_group.h"
#include "storage/wal_format.h"

/* The sink keeps the compiler from deleting measured work. */
static volatile uint64_t sink;

#define MEASURE __attribute__((noinline, used))

/* ---- wire codec ---- */

static const char lock_name[] = "svc/payments/ledger-07"; /* 22 bytes, typical */

MEASURE static void micro_measure_wire_encode(uint64_t n)
{
	uint8_t buf[HASP_DATAGRAM_SIZE_MAX];
	struct hasp_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.opcode = HASP_OP_ACQUIRE;
	m.hdr.session_id = 0x1234;
	m.body.acquire.name.data = (const uint8_t *)lock_name;
	m.body.acquire.name.size = sizeof(lock_name) - 1;
	m.body.acquire.ttl_ms = 5000;
	for (uint64_t i = 0; i < n; i++) {
		m.hdr.seq = i + 1;
		sink += (uint64_t)hasp_wire_encode(&m, buf, sizeof(buf));
	}
}

static uint8_t decode_req[HASP_DATAGRAM_SIZE_MAX], decode_rep[HASP_DATAGRAM_SIZE_MAX];
static int decode_req_size, decode_rep_size;

static void setup_wire_decode(void)
{
	struct hasp_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.opcode = HASP_OP_ACQUIRE;
	m.hdr.session_id = 0x1234;
	m.hdr.seq = 9;
	m.body.acquire.name.data = (const uint8_t *)lock_name;
	m.body.acquire.name.size = sizeof(lock_name) - 1;
	m.body.acquire.ttl_ms = 5000;
	decode_req_size = hasp_wire_encode(&m, decode_req, sizeof(decode_req));
	struct hasp_wire_msg r;
	hasp_wire_reply_init(&r, &m.hdr, HASP_STATUS_GRANTED);
	r.body.granted.token = 77;
	r.body.granted.ttl_ms = 5000;
	decode_rep_size = hasp_wire_encode(&r, decode_rep, sizeof(decode_rep));
	if (decode_req_size <= 0 || decode_rep_size <= 0)
		abort();
}

/* One request decoded as a node does and one reply as a client does. */
MEASURE static void micro_measure_wire_decode(uint64_t n)
{
	struct hasp_wire_msg m;

	for (uint64_t i = 0; i < n; i++) {
		sink += (uint64_t)hasp_wire_decode_request(decode_req, (size_t)decode_req_size, &m);
		sink += m.body.acquire.name.size;
		sink += (uint64_t)hasp_wire_decode_reply(decode_rep, (size_t)decode_rep_size, &m);
		sink += m.body.granted.token;
	}
}

/* ---- locks apply ---- */

#define SESSIONS 64u
static struct locks sm;
static struct locks_result res;
static uint64_t apply_index, session_ids[SESSIONS], seqs[SESSIONS];

static const struct locks_reply *apply(struct locks_cmd *cmd)
{
	cmd->term = 1;
	cmd->now_ms = 1000 + apply_index / 1000;
	locks_apply(&sm, ++apply_index, cmd, &res);
	return &res.reply;
}

static char names[SESSIONS][32];

/* The machine of the locks cases (one case runs per process). */
static void machine_init(const struct locks_config *cfg)
{
	if (locks_init(&sm, cfg) != 0)
		abort();
	res.event_count_max = locks_events_max(cfg);
	res.events = calloc(res.event_count_max, sizeof(*res.events));
	if (res.events == NULL)
		abort();
}

static void setup_locks(void)
{
	struct locks_config cfg;

	locks_config_default(&cfg);
	machine_init(&cfg);
	for (uint32_t s = 0; s < SESSIONS; s++) {
		struct locks_cmd c = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 3600000 };
		session_ids[s] = apply(&c)->id;
		snprintf(names[s], sizeof(names[s]), "svc/lock-%02u", s);
	}
}

/* One uncontended cycle per iteration: ACQUIRE (own TTL) then RELEASE,
 * round robin over 64 sessions and names, each with the session's floor
 * as libhasp sends it (every lower reply dropped: one slot cleared). */
MEASURE static void micro_measure_locks_apply(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint32_t s = (uint32_t)(i % SESSIONS);
		struct locks_cmd a = { .op = LOCKS_OP_ACQUIRE, .session_id = session_ids[s],
				       .seq = ++seqs[s], .flags = LOCKS_CMD_SEQ_FLOOR };
		a.name = (const uint8_t *)names[s];
		a.name_len = (uint16_t)strlen(names[s]);
		a.ttl_ms = 10000;
		const struct locks_reply *r = apply(&a);
		if (r->status != HASP_STATUS_GRANTED)
			abort();
		struct locks_cmd rel = { .op = LOCKS_OP_RELEASE, .session_id = session_ids[s],
					 .seq = ++seqs[s], .flags = LOCKS_CMD_SEQ_FLOOR };
		rel.name = a.name;
		rel.name_len = a.name_len;
		rel.token = r->token;
		if (apply(&rel)->status != HASP_STATUS_OK)
			abort();
	}
}

/* A session table of 131,072 slots holding 100,000 sessions of one owner
 * with a quota, as an identity of the 100,000-session state would: an
 * open (its quota checked) and a close per iteration. */
static void setup_sessions(void)
{
	struct locks_config cfg;

	locks_config_default(&cfg);
	cfg.sessions_max = 131072;
	cfg.session_window = 1;
	machine_init(&cfg);
	for (uint32_t s = 0; s < 100000; s++) {
		struct locks_cmd c = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 3600000, .owner = 1,
				       .owner_sessions_max = 131072 };
		if (apply(&c)->status != HASP_STATUS_OK)
			abort();
	}
}

MEASURE static void micro_measure_session_open_quota(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		struct locks_cmd c = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 3600000, .owner = 1,
				       .owner_sessions_max = 131072 };
		const struct locks_reply *r = apply(&c);
		if (r->status != HASP_STATUS_OK)
			abort();
		struct locks_cmd close = { .op = LOCKS_OP_SESSION_CLOSE, .session_id = r->id, .seq = 1 };
		if (apply(&close)->status != HASP_STATUS_OK)
			abort();
	}
}

/* ---- raft core in simulation ---- */

static void setup_raft(void)
{
	raft_group_init(1);
}

/* One 32-byte command per iteration, proposed in batches of 16 and carried
 * to commit and apply on all three nodes (codec included). */
MEASURE static void micro_measure_raft_commit(uint64_t n)
{
	static uint8_t payload[32];
	struct raft_buf bufs[16];
	struct raft_event ev = { .type = RAFT_EVENT_PROPOSE };

	for (uint32_t i = 0; i < 16; i++) {
		bufs[i].data = payload;
		bufs[i].size = sizeof(payload);
	}
	ev.propose.bufs = bufs;
	for (uint64_t done = 0; done < n; done += 16) {
		ev.propose.count = (uint32_t)(n - done < 16 ? n - done : 16);
		raft_group_step(0, &ev);
		raft_group_drain();
	}
	struct raft_event tick = { .type = RAFT_EVENT_TICK };
	raft_group_step(0, &tick);
	raft_group_drain();
	sink += raft_group_stats.applied[0];
}

/* ---- WAL record and crc32c ---- */

MEASURE static void micro_measure_wal_encode(uint64_t n)
{
	static uint8_t payload[64], buf[256];
	struct wal_record_header h = { .payload_size = sizeof(payload), .term = 3, .type = 1 };

	for (uint64_t i = 0; i < n; i++) {
		h.index = i + 1;
		payload[0] = (uint8_t)i;
		wal_record_encode(buf, &h, payload);
		sink += buf[8];
	}
}

static uint8_t block[4096];

MEASURE static void micro_measure_crc32c_4k(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		block[0] = (uint8_t)i;
		sink += crc32c(block, sizeof(block));
	}
}

/* ---- watch fan-out (node/watch_index.c) ---- */

/* 100,000 watches: 10,000 sessions with a shared lock, a shared prefix and
 * eight names of their own (as tests/node/test_watch_index.c). */
enum { WATCH_SESSIONS = 10000, WATCH_PER = 10 };
static struct watch_index watches;

static void setup_watches(void)
{
	if (watch_index_init(&watches, WATCH_SESSIONS * WATCH_PER, 99) != 0)
		exit(1);
	for (uint32_t s = 0; s < WATCH_SESSIONS; s++) {
		uint32_t head = WATCH_NONE;
		char name[32];
		if (watch_index_add(&watches, &head, s + 1, (const uint8_t *)"lock/hot", 8, false) == WATCH_NONE ||
		    watch_index_add(&watches, &head, s + 1, (const uint8_t *)"jobs/", 5, true) == WATCH_NONE)
			exit(1);
		for (uint32_t k = 0; k < WATCH_PER - 2; k++) {
			int len = snprintf(name, sizeof(name), "own/%u/%u", s, k);
			if (watch_index_add(&watches, &head, s + 1, (const uint8_t *)name, (uint8_t)len,
					    k == 0) == WATCH_NONE)
				exit(1);
		}
	}
}

static void watch_visit(void *arg, struct watch_index *x, uint32_t i)
{
	(void)arg;
	sink += x->w[i].session_id;
}

/* An event on a name one watch matches, among 100,000. */
MEASURE static void micro_measure_watch_match_one(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		watch_index_match(&watches, (const uint8_t *)"own/7/3", 7, watch_visit, NULL);
}

/* An event on the lock 10,000 of the 100,000 watch (per event). */
MEASURE static void micro_measure_watch_match_10k(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		watch_index_match(&watches, (const uint8_t *)"lock/hot", 8, watch_visit, NULL);
}

/* What one event cost before the index: notify.c scanned every watch and
 * compared its name (kept here as the reference the index is measured
 * against). */
MEASURE static void micro_measure_watch_scan_100k(uint64_t n)
{
	static const uint8_t name[] = "own/7/3";
	for (uint64_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < watches.capacity; k++) {
			const struct watch *w = &watches.w[k];
			uint8_t len = sizeof(name) - 1;
			bool match = w->prefix ? len >= w->name_len && memcmp(name, w->name, w->name_len) == 0
					       : len == w->name_len && memcmp(name, w->name, len) == 0;
			if (w->session_id != 0 && match)
				sink += w->session_id;
		}
}

struct micro_case {
	const char *name;
	void (*setup)(void);
	void (*measure)(uint64_t n);
};

static const struct micro_case cases[] = {
	{ "wire_encode", NULL, micro_measure_wire_encode },
	{ "wire_decode", setup_wire_decode, micro_measure_wire_decode },
	{ "locks_apply", setup_locks, micro_measure_locks_apply },
	{ "session_open_quota", setup_sessions, micro_measure_session_open_quota },
	{ "raft_commit", setup_raft, micro_measure_raft_commit },
	{ "wal_encode", NULL, micro_measure_wal_encode },
	{ "crc32c_4k", NULL, micro_measure_crc32c_4k },
	{ "watch_match_one", setup_watches, micro_measure_watch_match_one },
	{ "watch_match_10k", setup_watches, micro_measure_watch_match_10k },
	{ "watch_scan_100k", setup_watches, micro_measure_watch_scan_100k },
};

int main(int argc, char **argv)
{
	size_t count = sizeof(cases) / sizeof(cases[0]);

	if (argc == 2 && strcmp(argv[1], "list") == 0) {
		for (size_t i = 0; i < count; i++)
			printf("%s\n", cases[i].name);
		printf("crc32c_path %s\n", crc32c_hw_available() ? "hw" : "sw");
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: perf_micro <case> <iterations> | perf_micro list\n");
		return 2;
	}
	uint64_t n = strtoull(argv[2], NULL, 10);
	for (size_t i = 0; i < count; i++) {
		if (strcmp(argv[1], cases[i].name) != 0)
			continue;
		for (uint32_t b = 0; b < sizeof(block); b++)
			block[b] = (uint8_t)(b * 31u);
		if (cases[i].setup != NULL)
			cases[i].setup();
		cases[i].measure(n);
		printf("%s %llu done\n", cases[i].name, (unsigned long long)n);
		return 0;
	}
	fprintf(stderr, "perf_micro: unknown case %s\n", argv[1]);
	return 2;
}
