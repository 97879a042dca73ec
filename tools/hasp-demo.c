/*
 * hasp-demo: the GC-pause story of distributed locking, replayed on the real
 * state machine (locks/) with real fencing tokens and the fenced-resource
 * helper (hasp/fence.h). It prints a short narrative and checks itself: it
 * exits 0 only if every step behaved as docs/STATE_MACHINE.md says.
 *
 * The cluster is simulated the way the node drives the state machine: each
 * command carries the proposing leader's term and monotonic clock, the
 * leader asks which leases are due and proposes EXPIRE, and a leader change
 * in the middle shows that a new leader neither shortens nor resets a lease.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hasp/fence.h"
#include "hasp/types.h"
#include "common/version.h"
#include "locks/locks.h"

static struct locks sm;
static struct locks_result res;
static uint64_t log_index, term = 1, leader_ms = 50000;
static int checks, failures;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	printf("[log t=%6llu ms] ", (unsigned long long)locks_log_time(&sm, term, leader_ms));
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void check(int ok, const char *what)
{
	checks++;
	if (!ok) {
		failures++;
		printf("    CHECK FAILED: %s\n", what);
	}
}

static const struct locks_reply *apply(struct locks_cmd *cmd)
{
	cmd->term = term;
	cmd->now_ms = leader_ms;
	locks_apply(&sm, ++log_index, cmd, &res);
	return &res.reply;
}

static uint64_t open_session(void)
{
	struct locks_cmd c = { .op = LOCKS_OP_SESSION_OPEN, .ttl_ms = 600000 };
	const struct locks_reply *r = apply(&c);
	check(r->status == HASP_STATUS_OK, "session opens");
	return r->id;
}

static struct locks_cmd lock_cmd(uint8_t op, uint64_t session, uint64_t seq, const char *name)
{
	struct locks_cmd c = { .op = op, .session_id = session, .seq = seq,
			       .name = (const uint8_t *)name, .name_len = (uint16_t)strlen(name) };
	return c;
}

static const struct locks_event *event(uint8_t type)
{
	for (uint32_t i = 0; i < res.event_count; i++)
		if (res.events[i].type == type)
			return &res.events[i];
	return NULL;
}

static uint32_t event_count(uint8_t type)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < res.event_count; i++)
		n += res.events[i].type == type;
	return n;
}

/* The fenced resource: refuses writes whose token is below the highest seen. */
static int storage_write(struct hasp_fence *fence, const char *who, uint64_t token)
{
	int ok = hasp_fence_admit(fence, token);
	say("  storage %s %s's write with token %llu (highest seen %llu)", ok ? "ACCEPTS" : "REFUSES",
	    who, (unsigned long long)token, (unsigned long long)hasp_fence_highest(fence));
	return ok;
}

static void gc_pause_story(void)
{
	struct hasp_fence storage;
	uint64_t due[4];

	hasp_fence_init(&storage);
	printf("\n== The GC pause (Kleppmann, \"How to do distributed locking\") ==\n");
	uint64_t a = open_session(), b = open_session();
	say("clients A and B open sessions");

	struct locks_cmd acq = lock_cmd(LOCKS_OP_ACQUIRE, a, 1, "billing");
	acq.ttl_ms = 3000;
	const struct locks_reply *r = apply(&acq);
	check(r->status == HASP_STATUS_GRANTED, "A is granted billing");
	uint64_t token_a = r->token, lease_a = r->id;
	say("A acquires \"billing\" with a 3000 ms TTL: %s, fencing token %llu",
	    hasp_status_name(r->status), (unsigned long long)token_a);
	check(storage_write(&storage, "A", token_a), "A's first write is accepted");

	say("A enters a stop-the-world GC pause...");
	leader_ms += 1200;
	struct locks_cmd tick = { .op = LOCKS_OP_TICK };
	apply(&tick);
	say("leader 1 fails; leader 2 is elected (its clock reads a different epoch)");
	term = 2;
	leader_ms = 9000000;
	apply(&tick);
	struct locks_lock_info info;
	check(locks_lock_read(&sm, (const uint8_t *)"billing", 7, &info), "billing still held");
	say("  A's deadline is still log t=%llu: not shortened by the new clock, not reset to a full TTL",
	    (unsigned long long)info.deadline_ms);
	check(info.deadline_ms == locks_log_time(&sm, term, leader_ms) + 1800,
	      "1800 ms remain after the failover");

	leader_ms += 1799;
	check(locks_leases_due(&sm, locks_log_time(&sm, term, leader_ms), due, 4) == 0,
	      "nothing due 1 ms before the deadline");
	leader_ms += 1;
	uint32_t n = locks_leases_due(&sm, locks_log_time(&sm, term, leader_ms), due, 4);
	check(n == 1 && due[0] == lease_a, "the leader finds A's lease due");
	say("leader 2: A's lease is due; it proposes EXPIRE");
	struct locks_cmd exp = { .op = LOCKS_OP_LEASE_EXPIRE, .lease_id = lease_a };
	r = apply(&exp);
	const struct locks_event *ev = event(HASP_EVENT_LOCK_RELEASED);
	check(r->status == HASP_STATUS_OK && r->reason == LOCKS_REASON_NONE && ev != NULL &&
		      ev->cause == LOCKS_CAUSE_EXPIRE && ev->token == token_a,
	      "EXPIRE commits and releases billing");
	say("EXPIRE commits: \"billing\" released (expired), A's token %llu is over",
	    (unsigned long long)token_a);

	leader_ms += 10;
	acq = lock_cmd(LOCKS_OP_ACQUIRE, b, 1, "billing");
	acq.ttl_ms = 3000;
	r = apply(&acq);
	uint64_t token_b = r->token;
	check(r->status == HASP_STATUS_GRANTED && token_b > token_a, "B is granted a larger token");
	say("B acquires \"billing\": %s, fencing token %llu (> %llu)", hasp_status_name(r->status),
	    (unsigned long long)token_b, (unsigned long long)token_a);
	check(storage_write(&storage, "B", token_b), "B's write is accepted");

	leader_ms += 500;
	say("A wakes up, still believing it holds the lock, and writes");
	check(!storage_write(&storage, "A", token_a), "A's late write is refused");
	struct locks_cmd rel = lock_cmd(LOCKS_OP_RELEASE, a, 2, "billing");
	rel.token = token_a;
	r = apply(&rel);
	check(r->status == HASP_STATUS_NOT_HOLDER, "A cannot release B's lock");
	say("A tries to release with token %llu: %s", (unsigned long long)token_a,
	    hasp_status_name(r->status));
	rel = lock_cmd(LOCKS_OP_RELEASE, b, 2, "billing");
	rel.token = token_b;
	r = apply(&rel);
	check(r->status == HASP_STATUS_OK, "B releases");
	say("B releases \"billing\": %s", hasp_status_name(r->status));
}

static void handoff_story(void)
{
	printf("\n== The wait queue (ZooKeeper's herd effect, avoided) ==\n");
	uint64_t c = open_session(), d = open_session(), e = open_session();
	struct locks_cmd acq = lock_cmd(LOCKS_OP_ACQUIRE, c, 1, "report");
	acq.ttl_ms = 5000;
	const struct locks_reply *r = apply(&acq);
	uint64_t token_c = r->token;
	check(r->status == HASP_STATUS_GRANTED, "C holds report");
	say("C acquires \"report\": token %llu", (unsigned long long)token_c);
	acq = lock_cmd(LOCKS_OP_ACQUIRE, d, 1, "report");
	acq.mode = HASP_ACQUIRE_WAIT;
	acq.ttl_ms = 5000;
	r = apply(&acq);
	check(r->status == HASP_STATUS_QUEUED && r->position == 1, "D queues first");
	say("D asks in wait mode: %s, position %u", hasp_status_name(r->status), r->position);
	struct locks_reply d_reply = *r;
	struct locks_cmd d_cmd = acq;
	acq.session_id = e;
	r = apply(&acq);
	check(r->status == HASP_STATUS_QUEUED && r->position == 2, "E queues second");
	say("E asks in wait mode: %s, position %u", hasp_status_name(r->status), r->position);

	leader_ms += 100;
	struct locks_cmd rel = lock_cmd(LOCKS_OP_RELEASE, c, 2, "report");
	rel.token = token_c;
	r = apply(&rel);
	const struct locks_event *g = event(HASP_EVENT_LOCK_GRANTED);
	check(r->status == HASP_STATUS_OK && event_count(HASP_EVENT_LOCK_GRANTED) == 1 && g != NULL &&
		      g->session_id == d && g->token > token_c,
	      "one grant, to D, in the release itself");
	say("C releases: in the same command the lock goes to D with token %llu;", 
	    (unsigned long long)(g != NULL ? g->token : 0));
	say("  exactly %u GRANTED event: E is not woken (no herd) and waits at position 1",
	    event_count(HASP_EVENT_LOCK_GRANTED));
	struct locks_lock_info info;
	check(locks_lock_read(&sm, (const uint8_t *)"report", 6, &info) && info.holder_session_id == d &&
		      info.waiter_count == 1,
	      "D holds report, E still waits");

	uint64_t rev = sm.revision;
	r = apply(&d_cmd);
	check(res.duplicate && memcmp(r, &d_reply, sizeof(*r)) == 0 && sm.revision == rev,
	      "a retried request gets its original reply");
	say("D's client retries its old request (UDP): the identical reply (%s, position %u), nothing changes",
	    hasp_status_name(r->status), r->position);
}

int main(int argc, char **argv)
{
	struct locks_config cfg;

	if (version_requested(argc, argv, "hasp-demo"))
		return 0;
	if (help_requested(argc, argv)) {
		printf("usage: hasp-demo\n"
		       "Replays the GC-pause story on the real lock state machine with fencing\n"
		       "tokens and checks itself: exit 0 when every step behaved as\n"
		       "docs/STATE_MACHINE.md says, 1 otherwise. It takes no arguments.\n");
		return 0;
	}
	if (argc > 1) {
		fprintf(stderr, "hasp-demo: unexpected argument %.40s (hasp-demo --help)\n", argv[1]);
		return 2;
	}

	locks_config_default(&cfg);
	if (locks_init(&sm, &cfg) != 0) {
		fprintf(stderr, "hasp-demo: locks_init failed\n");
		return 1;
	}
	res.event_count_max = locks_events_max(&cfg);
	res.events = calloc(res.event_count_max, sizeof(*res.events));
	if (res.events == NULL)
		return 1;
	printf("hasp-demo: the lock state machine with real fencing tokens (no network yet)\n");
	gc_pause_story();
	handoff_story();
	check(locks_invariants_ok(&sm), "state machine invariants hold");
	printf("\n%d checks, %d failed: %s\n", checks, failures, failures == 0 ? "PASS" : "FAIL");
	locks_deinit(&sm);
	free(res.events);
	return failures == 0 ? 0 : 1;
}
