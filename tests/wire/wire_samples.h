/*
 * One valid message of every request body and every reply body of wire
 * protocol v1, shared by the codec unit test and the fuzz corpus generator
 * (tests/wire/gen_wire_corpus.c), so the corpus and the round-trip test
 * cover the same shapes.
 */
#ifndef HASP_TESTS_WIRE_SAMPLES_H
#define HASP_TESTS_WIRE_SAMPLES_H

#include <stddef.h>
#include <string.h>

#include "hasp/wire.h"

#define WIRE_SAMPLES_MAX 64

struct wire_sample {
	const char *label; /* file name in the corpus */
	struct hasp_wire_msg msg;
};

static inline struct hasp_wire_bytes wire_str(const char *s)
{
	struct hasp_wire_bytes b = { (const uint8_t *)s, strlen(s) };
	return b;
}

static inline struct wire_sample *wire_sample_add(struct wire_sample *s, size_t *count,
						  const char *label, uint8_t opcode,
						  uint16_t flags, uint16_t status)
{
	struct wire_sample *x = &s[(*count)++];

	memset(x, 0, sizeof(*x));
	x->label = label;
	x->msg.hdr.opcode = opcode;
	x->msg.hdr.flags = flags;
	x->msg.hdr.status = status;
	x->msg.hdr.session_id = opcode == HASP_OP_SESSION_OPEN && flags == 0 ? 0 : 0x1122334455667788ull;
	x->msg.hdr.seq = 42 + *count;
	return x;
}

/* Fills `s` (WIRE_SAMPLES_MAX entries) and returns how many. */
static inline size_t wire_samples(struct wire_sample *s)
{
	static const uint8_t value[] = { 0, 1, 2, 0xff, ' ', 'v' };
	/* Two packed KV_RANGE entries: rev 7 "a"="x", rev 9 "b/c"="" */
	static const uint8_t entries[] = {
		7, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 'a', 'x',
		9, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 'b', '/', 'c',
	};
	const uint16_t R = HASP_WIRE_F_REPLY;
	size_t n = 0;
	struct wire_sample *x;

	/* Requests. */
	x = wire_sample_add(s, &n, "req_session_open", HASP_OP_SESSION_OPEN, 0, 0);
	x->msg.body.session_open.client_nonce = 0xdeadbeefcafef00dull;
	x->msg.body.session_open.ttl_ms = 10000;
	wire_sample_add(s, &n, "req_session_keepalive", HASP_OP_SESSION_KEEPALIVE, 0, 0);
	wire_sample_add(s, &n, "req_session_close", HASP_OP_SESSION_CLOSE, 0, 0);
	wire_sample_add(s, &n, "req_watch_count", HASP_OP_WATCH_COUNT, 0, 0);
	wire_sample_add(s, &n, "req_watch_status", HASP_OP_WATCH_STATUS, 0, 0);
	x = wire_sample_add(s, &n, "req_lease_grant", HASP_OP_LEASE_GRANT, 0, 0);
	x->msg.body.lease_grant.ttl_ms = 5000;
	x = wire_sample_add(s, &n, "req_lease_keepalive", HASP_OP_LEASE_KEEPALIVE, 0, 0);
	x->msg.body.lease_keepalive.lease_id = 77;
	x = wire_sample_add(s, &n, "req_lease_revoke", HASP_OP_LEASE_REVOKE, 0, 0);
	x->msg.body.lease_revoke.lease_id = 78;
	x = wire_sample_add(s, &n, "req_acquire_ttl", HASP_OP_ACQUIRE, 0, 0);
	x->msg.body.acquire.name = wire_str("jobs/leader");
	x->msg.body.acquire.ttl_ms = 3000;
	x->msg.body.acquire.mode = HASP_ACQUIRE_TRY;
	x = wire_sample_add(s, &n, "req_acquire_lease", HASP_OP_ACQUIRE, 0, 0);
	x->msg.body.acquire.name = wire_str("q");
	x->msg.body.acquire.lease_id = 77;
	x->msg.body.acquire.mode = HASP_ACQUIRE_WAIT;
	x = wire_sample_add(s, &n, "req_release", HASP_OP_RELEASE, 0, 0);
	x->msg.body.release.name = wire_str("jobs/leader");
	x->msg.body.release.token = 1001;
	x = wire_sample_add(s, &n, "req_renew", HASP_OP_RENEW, 0, 0);
	x->msg.body.renew.name = wire_str("jobs/leader");
	x->msg.body.renew.token = 1001;
	x->msg.body.renew.ttl_ms = 86400000;
	x = wire_sample_add(s, &n, "req_check", HASP_OP_CHECK, 0, 0);
	x->msg.body.check.name = wire_str("~!");
	x->msg.body.check.token = 5;
	x = wire_sample_add(s, &n, "req_lock_read", HASP_OP_LOCK_READ, 0, 0);
	x->msg.body.lock_read.name = wire_str("jobs/leader");
	x = wire_sample_add(s, &n, "req_cancel", HASP_OP_CANCEL, 0, 0);
	x->msg.body.cancel.name = wire_str("jobs/leader");
	x = wire_sample_add(s, &n, "req_watch_prefix", HASP_OP_WATCH, 0, 0);
	x->msg.body.watch.name = wire_str("svc/");
	x->msg.body.watch.flags = HASP_WIRE_WATCH_PREFIX;
	x = wire_sample_add(s, &n, "req_unwatch", HASP_OP_UNWATCH, 0, 0);
	x->msg.body.unwatch.name = wire_str("svc/a");
	x = wire_sample_add(s, &n, "req_kv_put", HASP_OP_KV_PUT, 0, 0);
	x->msg.body.kv_put.key = wire_str("cfg/x");
	x->msg.body.kv_put.value = (struct hasp_wire_bytes){ value, sizeof(value) };
	x->msg.body.kv_put.lease_id = 77;
	x = wire_sample_add(s, &n, "req_kv_get", HASP_OP_KV_GET, 0, 0);
	x->msg.body.kv_get.name = wire_str("cfg/x");
	x = wire_sample_add(s, &n, "req_kv_delete", HASP_OP_KV_DELETE, 0, 0);
	x->msg.body.kv_delete.name = wire_str("cfg/x");
	x = wire_sample_add(s, &n, "req_kv_cas_rev", HASP_OP_KV_CAS, 0, 0);
	x->msg.body.kv_cas.key = wire_str("cfg/x");
	x->msg.body.kv_cas.expected_revision = 12;
	x->msg.body.kv_cas.value = wire_str("new");
	x = wire_sample_add(s, &n, "req_kv_cas_value", HASP_OP_KV_CAS, 0, 0);
	x->msg.body.kv_cas.key = wire_str("cfg/x");
	x->msg.body.kv_cas.flags = HASP_WIRE_CAS_VALUE;
	x->msg.body.kv_cas.expected_value = wire_str("old");
	x->msg.body.kv_cas.value = wire_str("new");
	x->msg.body.kv_cas.lease_id = 3;
	x = wire_sample_add(s, &n, "req_kv_range", HASP_OP_KV_RANGE, 0, 0);
	x->msg.body.kv_range.prefix = wire_str("cfg/");
	x->msg.body.kv_range.start_after = wire_str("cfg/a");
	x->msg.body.kv_range.limit = 10;

	/* Replies by status. */
	x = wire_sample_add(s, &n, "rep_granted", HASP_OP_ACQUIRE, R, HASP_STATUS_GRANTED);
	x->msg.body.granted.token = 1001;
	x->msg.body.granted.lease_id = 0;
	x->msg.body.granted.ttl_ms = 3000;
	x = wire_sample_add(s, &n, "rep_renew_granted", HASP_OP_RENEW, R, HASP_STATUS_GRANTED);
	x->msg.body.granted.token = 1001;
	x->msg.body.granted.lease_id = 77;
	x->msg.body.granted.ttl_ms = 4;
	x = wire_sample_add(s, &n, "rep_queued", HASP_OP_ACQUIRE, R, HASP_STATUS_QUEUED);
	x->msg.body.queued.position = 3;
	x = wire_sample_add(s, &n, "rep_busy", HASP_OP_ACQUIRE, R, HASP_STATUS_BUSY);
	x->msg.body.busy.holder_token = 999;
	wire_sample_add(s, &n, "rep_not_holder", HASP_OP_RELEASE, R, HASP_STATUS_NOT_HOLDER);
	x = wire_sample_add(s, &n, "rep_not_leader", HASP_OP_ACQUIRE, R, HASP_STATUS_NOT_LEADER);
	x->msg.body.not_leader.known = 1;
	x->msg.body.not_leader.leader_id = 2;
	memcpy(x->msg.body.not_leader.ipv4, (uint8_t[4]){ 10, 77, 0, 12 }, 4);
	x->msg.body.not_leader.port = 7700;
	wire_sample_add(s, &n, "rep_not_leader_unknown", HASP_OP_KV_GET, R,
			HASP_STATUS_NOT_LEADER);
	x = wire_sample_add(s, &n, "rep_bad_version", 200, R, HASP_STATUS_BAD_VERSION);
	x->msg.body.bad_version.version_min = 1;
	x->msg.body.bad_version.version_max = 1;
	wire_sample_add(s, &n, "rep_bad_opcode", 99, R, HASP_STATUS_BAD_OPCODE);
	wire_sample_add(s, &n, "rep_compare_failed", HASP_OP_KV_CAS, R,
			HASP_STATUS_COMPARE_FAILED);
	wire_sample_add(s, &n, "rep_overloaded", HASP_OP_KV_PUT, R, HASP_STATUS_OVERLOADED);

	/* OK replies by opcode. */
	x = wire_sample_add(s, &n, "rep_session_opened", HASP_OP_SESSION_OPEN, R, HASP_STATUS_OK);
	x->msg.hdr.session_id = 0;
	x->msg.body.session_opened.session_id = 0x1122334455667788ull;
	x->msg.body.session_opened.ttl_ms = 10000;
	x = wire_sample_add(s, &n, "rep_session_alive", HASP_OP_SESSION_KEEPALIVE, R,
			    HASP_STATUS_OK);
	x->msg.body.session_alive.ttl_ms = 10000;
	wire_sample_add(s, &n, "rep_session_closed", HASP_OP_SESSION_CLOSE, R, HASP_STATUS_OK);
	x = wire_sample_add(s, &n, "rep_watch_count", HASP_OP_WATCH_COUNT, R, HASP_STATUS_OK);
	x->msg.body.watch_count.count = 3;
	x = wire_sample_add(s, &n, "rep_watch_status", HASP_OP_WATCH_STATUS, R, HASP_STATUS_OK);
	x->msg.body.watch_status = (struct hasp_wire_watch_status){ .count = 2, .last_event_sub = 1,
								    .last_event_index = 0x0102030405060708ull };
	x = wire_sample_add(s, &n, "rep_lease_granted", HASP_OP_LEASE_GRANT, R, HASP_STATUS_OK);
	x->msg.body.lease_ok.lease_id = 77;
	x->msg.body.lease_ok.ttl_ms = 5000;
	x = wire_sample_add(s, &n, "rep_lease_alive", HASP_OP_LEASE_KEEPALIVE, R, HASP_STATUS_OK);
	x->msg.body.lease_ok.lease_id = 77;
	x->msg.body.lease_ok.ttl_ms = 5000;
	wire_sample_add(s, &n, "rep_lease_revoked", HASP_OP_LEASE_REVOKE, R, HASP_STATUS_OK);
	wire_sample_add(s, &n, "rep_released", HASP_OP_RELEASE, R, HASP_STATUS_OK);
	wire_sample_add(s, &n, "rep_checked", HASP_OP_CHECK, R, HASP_STATUS_OK);
	x = wire_sample_add(s, &n, "rep_lock_info", HASP_OP_LOCK_READ, R, HASP_STATUS_OK);
	x->msg.body.lock_info.holder_session_id = 5;
	x->msg.body.lock_info.token = 1001;
	x->msg.body.lock_info.lease_id = 77;
	x->msg.body.lock_info.ttl_remaining_ms = 1234;
	x->msg.body.lock_info.waiter_count = 2;
	wire_sample_add(s, &n, "rep_watching", HASP_OP_WATCH, R, HASP_STATUS_OK);
	wire_sample_add(s, &n, "rep_unwatched", HASP_OP_UNWATCH, R, HASP_STATUS_OK);
	x = wire_sample_add(s, &n, "rep_kv_put", HASP_OP_KV_PUT, R, HASP_STATUS_OK);
	x->msg.body.kv_revision.revision = 13;
	x = wire_sample_add(s, &n, "rep_kv_deleted", HASP_OP_KV_DELETE, R, HASP_STATUS_OK);
	x->msg.body.kv_revision.revision = 14;
	x = wire_sample_add(s, &n, "rep_kv_cas", HASP_OP_KV_CAS, R, HASP_STATUS_OK);
	x->msg.body.kv_revision.revision = 15;
	x = wire_sample_add(s, &n, "rep_kv_value", HASP_OP_KV_GET, R, HASP_STATUS_OK);
	x->msg.body.kv_value.value = (struct hasp_wire_bytes){ value, sizeof(value) };
	x->msg.body.kv_value.revision = 13;
	x->msg.body.kv_value.lease_id = 77;
	x = wire_sample_add(s, &n, "rep_kv_range", HASP_OP_KV_RANGE, R, HASP_STATUS_OK);
	x->msg.body.kv_entries.entries = (struct hasp_wire_bytes){ entries, sizeof(entries) };
	x->msg.body.kv_entries.entry_count = 2;
	x->msg.body.kv_entries.flags = HASP_WIRE_RANGE_MORE;
	x = wire_sample_add(s, &n, "evt_lock_released", HASP_OP_EVENT, R, HASP_STATUS_OK);
	x->msg.body.event.type = HASP_EVENT_LOCK_RELEASED;
	x->msg.body.event.name = wire_str("jobs/leader");
	x->msg.body.event.revision = 1001;
	x = wire_sample_add(s, &n, "evt_lock_granted", HASP_OP_EVENT, R, HASP_STATUS_OK);
	x->msg.body.event.type = HASP_EVENT_LOCK_GRANTED;
	x->msg.body.event.name = wire_str("q");
	x->msg.body.event.revision = 1002;
	x->msg.body.event.lease_id = 0;
	x->msg.body.event.ttl_ms = 6000; /* a waiter's own TTL */
	x = wire_sample_add(s, &n, "evt_kv_put", HASP_OP_EVENT, R, HASP_STATUS_OK);
	x->msg.body.event.type = HASP_EVENT_KV_PUT;
	x->msg.body.event.name = wire_str("cfg/x");
	x->msg.body.event.value = (struct hasp_wire_bytes){ value, sizeof(value) };
	x->msg.body.event.revision = 13;
	x = wire_sample_add(s, &n, "evt_kv_deleted", HASP_OP_EVENT, R, HASP_STATUS_OK);
	x->msg.body.event.type = HASP_EVENT_KV_DELETED;
	x->msg.body.event.name = wire_str("cfg/x");
	x->msg.body.event.revision = 14;
	return n;
}

#endif
