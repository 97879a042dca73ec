/*
 * The node's admin commands, status and metrics (see node_admin.h and
 * docs/CONTROL.md "Commands").
 *
 * Every handler here runs on the node's lcore (control_poll in the work
 * hook), so it may read and step the node directly. Commands whose effect
 * arrives later (a configuration change committing, a transfer finishing,
 * a forced release applying, a snapshot being written) park their request
 * in `deferred` and node_admin_work() completes it when the node's state
 * shows the outcome; the admin thread's timeout covers the rest.
 */
#include "node/node_admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "node/dispatch.h"
#include "dataplane/ipv4.h"
#include "hasp/errors.h"
#include "storage/snapshot.h"

#define NS_PER_MS 1000000ull
#define PUBLISH_INTERVAL_NS (10ull * NS_PER_MS)
#define LIST_LIMIT_DEFAULT 1000u
#define LIST_LIMIT_MAX 100000u

/* ---- helpers ---- */

static bool require_leader(struct node_admin *na, struct control_request *req)
{
	if (node_is_leader(na->n))
		return true;
	control_request_fail(req, -HASP_ENOTLEADER, "not the leader");
	req->leader_id = na->n->leader_id;
	return false;
}

static struct node_admin_deferred *defer(struct node_admin *na, struct control_request *req,
					 uint8_t wait)
{
	for (uint32_t i = 0; i < NODE_ADMIN_DEFERRED_MAX; i++) {
		struct node_admin_deferred *d = &na->deferred[i];
		if (d->req != NULL)
			continue;
		memset(d, 0, sizeof(*d));
		d->req = req;
		d->wait = wait;
		d->deadline_ns = na->n->now_ns + (uint64_t)na->ctl.cfg.timeout_ms * NS_PER_MS;
		return d;
	}
	return NULL;
}

/* Optional key=value argument. */
static const char *opt_arg(const struct control_request *req, const char *key)
{
	size_t n = strlen(key);
	for (uint32_t i = 0; i < req->argc; i++)
		if (strncmp(req->argv[i], key, n) == 0 && req->argv[i][n] == '=')
			return req->argv[i] + n + 1;
	return NULL;
}

/* Every argument must be `key=value` with a key from `keys` (NULL ends
 * the list), each key at most once, the value non-empty: an option the
 * command does not take (sessions.list prefix=...) is refused rather than
 * ignored, so the operator does not read an unfiltered listing as a
 * filtered one. */
static bool opts_check(struct control_request *req, const char *const *keys, const char *usage)
{
	uint32_t seen = 0;
	for (uint32_t i = 0; i < req->argc; i++) {
		const char *a = req->argv[i], *eq = strchr(a, '=');
		uint32_t k = 0;
		for (; eq != NULL && keys[k] != NULL; k++)
			if (strlen(keys[k]) == (size_t)(eq - a) && strncmp(a, keys[k], (size_t)(eq - a)) == 0)
				break;
		if (eq == NULL || keys[k] == NULL || eq[1] == '\0' || (seen & (1u << k)) != 0) {
			control_request_fail(req, -HASP_EINVAL, "%s: %s (usage: %s %s)",
					     eq == NULL || keys[k] == NULL ? "unknown argument" :
					     eq[1] == '\0' ? "empty value" : "given twice", a, req->name, usage);
			return false;
		}
		seen |= 1u << k;
	}
	return true;
}

static bool opt_u64(struct control_request *req, const char *key, uint64_t dflt, uint64_t min,
		    uint64_t max, uint64_t *v)
{
	const char *s = opt_arg(req, key);
	*v = dflt;
	if (s == NULL)
		return true;
	if (!control_parse_u64(s, v) || *v < min || *v > max) {
		control_request_fail(req, -HASP_EINVAL, "%s: want a decimal number in %llu..%llu: %s", key,
				     (unsigned long long)min, (unsigned long long)max, s);
		return false;
	}
	return true;
}

static uint64_t remaining_ms(const struct node *n, uint64_t deadline_ms)
{
	if (deadline_ms == LOCKS_DEADLINE_NONE)
		return 0;
	uint64_t now = locks_log_time(&n->sm, n->term, n->now_ns / NS_PER_MS);
	return deadline_ms > now ? deadline_ms - now : 0;
}

/* ---- membership and leadership ---- */

static const char *reject_text(uint8_t r)
{
	switch (r) {
	case RAFT_NOT_LEADER: return "not the leader";
	case RAFT_TRANSFERRING: return "a leadership transfer is in progress";
	case RAFT_CONF_PENDING: return "another configuration change is not committed yet";
	case RAFT_CONF_INVALID: return "no such member, already a member, or the configuration is full";
	case RAFT_NOT_CAUGHT_UP: return "the learner is not caught up yet: retry";
	default: return "refused";
	}
}

static int reject_code(uint8_t r)
{
	switch (r) {
	case RAFT_NOT_LEADER: return -HASP_ENOTLEADER;
	case RAFT_TRANSFERRING:
	case RAFT_CONF_PENDING: return -HASP_EBUSY;
	case RAFT_CONF_INVALID: return -HASP_EINVAL;
	case RAFT_NOT_CAUGHT_UP: return -HASP_ESTATE;
	default: return -HASP_ESTATE;
	}
}

/* Raft refuses an impossible change with one code (RAFT_CONF_INVALID);
 * the operator is told which rule it broke, read off the configuration
 * the leader holds (docs/CONTROL.md "Commands"). */
static void conf_invalid_fail(const struct node *n, struct control_request *req, uint8_t op, uint32_t id)
{
	const struct raft_conf *conf = &n->raft.conf;
	const struct raft_member *m = NULL;
	uint32_t voters = 0;
	for (uint32_t i = 0; i < conf->count; i++) {
		if (conf->members[i].id == id)
			m = &conf->members[i];
		voters += conf->members[i].role == RAFT_VOTER;
	}
	const char *role = m != NULL && m->role == RAFT_VOTER ? "a voter" : "a learner";
	if (op == RAFT_CONF_ADD_LEARNER && m != NULL)
		control_request_fail(req, -HASP_EEXIST, "node %u is already a member (%s)", id, role);
	else if (op == RAFT_CONF_ADD_LEARNER)
		control_request_fail(req, -HASP_EFULL, "the configuration is full (%u of %u members)",
				     conf->count, n->raft.cfg.peers_max);
	else if (m == NULL)
		control_request_fail(req, -HASP_ENOENT, "node %u is not a member (members list shows them)", id);
	else if (op == RAFT_CONF_PROMOTE)
		control_request_fail(req, -HASP_EEXIST, "node %u is already a voter", id);
	else if (op == RAFT_CONF_REMOVE && voters == 1)
		control_request_fail(req, -HASP_ESTATE, "node %u is the last voter: add and promote another first",
				     id);
	else
		control_request_fail(req, -HASP_EINVAL, "%s", reject_text(RAFT_CONF_INVALID));
}

static bool conf_change(struct node_admin *na, struct control_request *req, uint8_t op, uint32_t id)
{
	struct node *n = na->n;
	struct node_admin_deferred *d = defer(na, req, NODE_ADMIN_WAIT_CONF);
	if (d == NULL) {
		control_request_fail(req, -HASP_EBUSY, "too many admin operations in flight");
		return true;
	}
	struct raft_event ev = { .type = RAFT_EVENT_CONF_CHANGE, .conf = { .op = op, .id = id } };
	node_step(n, &ev);
	if (n->up.reject == RAFT_CONF_INVALID) {
		conf_invalid_fail(n, req, op, id);
		d->req = NULL;
		return true;
	}
	if (n->up.reject != RAFT_OK) {
		control_request_fail(req, reject_code(n->up.reject), "%s", reject_text(n->up.reject));
		if (n->up.reject == RAFT_NOT_LEADER)
			req->leader_id = n->leader_id;
		d->req = NULL;
		return true;
	}
	d->index = n->up.propose_index;
	d->target = id;
	return false;
}

/* Records a member's address in this node's table (any node): a
 * configuration entry carries only ids, so every node must learn where a
 * new member lives before it may lead it. Returns false and fails the
 * request on bad arguments or a conflicting address. */
static bool member_address(struct node_admin *na, struct control_request *req, uint32_t *id_out)
{
	struct node *n = na->n;
	struct node_config *cfg = &n->cfg;
	uint64_t id, peer, client;
	uint32_t ip;
	uint8_t pub[AUTH_PUBLIC_SIZE] = { 0 };
	if ((req->argc != 4 && req->argc != 5) || !control_arg_u64(req, 0, "id", &id) ||
	    !control_arg_u64(req, 2, "peer_port", &peer) || !control_arg_u64(req, 3, "client_port", &client)) {
		if (req->error == 0)
			control_request_fail(req, -HASP_EINVAL,
					     "usage: %s <id> <ip> <peer_port> <client_port> <public_key>", req->name);
		return false;
	}
	/* The new member's public key (docs/SECURITY.md 3.5): needed with
	 * peer_auth = on, as on a member line. */
	bool has_pub = req->argc == 5;
	if (has_pub && auth_public_parse(req->argv[4], pub) != 0) {
		control_request_fail(req, -HASP_EINVAL,
				     "public_key: not 64 hex digits of a usable key (hasp-keygen --public KEYFILE)");
		return false;
	}
	if (cfg->peer_auth && !has_pub) {
		control_request_fail(req, -HASP_EINVAL,
				     "public_key: missing (peer_auth is on: the new member's public key, "
				     "hasp-keygen --public KEYFILE)");
		return false;
	}
	/* As the config file's member lines: ports 1..65535 and distinct; and
	 * an address a peer can have (not 0/8, loopback, multicast or
	 * broadcast). */
	if (id == 0 || id > UINT32_MAX || peer == 0 || peer > 65535 || client == 0 || client > 65535 ||
	    peer == client || ipv4_addr_parse(req->argv[1], &ip) != 0 || (ip >> 24) == 0 ||
	    (ip >> 24) == 127 || (ip >> 24) >= 224) {
		control_request_fail(req, -HASP_EINVAL,
				     "bad id, address or port (id 1..%u, a unicast IPv4 address, two different "
				     "ports 1..65535)", UINT32_MAX);
		return false;
	}
	/* Peers are told apart by address (node/peer_auth.c, dispatch). */
	for (uint32_t i = 0; i < cfg->member_count; i++)
		if (cfg->members[i].ip == ip && cfg->members[i].id != id) {
			control_request_fail(req, -HASP_EEXIST, "%s is node %u's address", req->argv[1],
					     cfg->members[i].id);
			return false;
		}
	for (uint32_t i = 0; has_pub && i < cfg->member_count; i++)
		if (cfg->members[i].id != id && cfg->members[i].has_pub &&
		    memcmp(cfg->members[i].pub, pub, AUTH_PUBLIC_SIZE) == 0) {
			control_request_fail(req, -HASP_EEXIST, "that public key is node %u's", cfg->members[i].id);
			return false;
		}
	if (id == cfg->node_id && has_pub && memcmp(pub, cfg->members[n->self - cfg->members].pub,
						    AUTH_PUBLIC_SIZE) != 0) {
		control_request_fail(req, -HASP_EEXIST, "node %llu is this node, known with another key",
				     (unsigned long long)id);
		return false;
	}
	const struct node_member *m = node_config_member(cfg, (uint32_t)id);
	uint32_t k;
	if (m == NULL) {
		if (cfg->member_count == NODE_MEMBERS_MAX) {
			control_request_fail(req, -HASP_EFULL,
					     "the configuration is full (%u members known; remove one first)",
					     NODE_MEMBERS_MAX);
			return false;
		}
		k = cfg->member_count;
	} else if (m->ip != ip || m->peer_port != peer || m->client_port != client) {
		control_request_fail(req, -HASP_EEXIST, "node %llu is known with another address",
				     (unsigned long long)id);
		return false;
	} else {
		k = (uint32_t)(m - cfg->members);
		/* A member whose keys are in use keeps them: another key for it
		 * is a conflict, as another address is. A revoked one (removed
		 * by a committed configuration) may come back with any key. */
		bool in_use = id == cfg->node_id || n->peer_keys[k].keyed;
		if (cfg->peer_auth && in_use && memcmp(m->pub, pub, AUTH_PUBLIC_SIZE) != 0) {
			control_request_fail(req, -HASP_EEXIST, "node %llu is known with another public key",
					     (unsigned long long)id);
			return false;
		}
		if (in_use || !cfg->peer_auth) {
			*id_out = (uint32_t)id;
			return true;
		}
	}
	struct node_member nm = {
		.id = (uint32_t)id, .ip = ip, .peer_port = (uint16_t)peer, .client_port = (uint16_t)client,
		.has_pub = has_pub,
	};
	memcpy(nm.pub, pub, AUTH_PUBLIC_SIZE);
	if (cfg->peer_auth) {
		struct peer_keys pk = { 0 };
		if (peer_keys_derive(&pk, cfg, &nm) != 0) {
			control_request_fail(req, -HASP_EINVAL, "public_key: not a usable key (a low-order point)");
			return false;
		}
		/* Not seen yet: the configuration that adds it has not committed
		 * (a later one that lists it makes it seen). */
		n->peer_keys[k] = pk;
		peer_keys_revoke(&pk);
	}
	cfg->members[k] = nm;
	if (k == cfg->member_count)
		cfg->member_count++;
	*id_out = (uint32_t)id;
	return true;
}

static bool cmd_members_address(struct control_request *req, void *arg)
{
	struct node_admin *na = arg;
	uint32_t id;
	if (member_address(na, req, &id)) {
		json_object_begin(&req->out);
		json_kv_u64(&req->out, "id", id);
		json_kv_str(&req->out, "ip", req->argv[1]);
		json_object_end(&req->out);
	}
	return true;
}

static bool cmd_members_add(struct control_request *req, void *arg)
{
	struct node_admin *na = arg;
	uint32_t id;
	if (!require_leader(na, req) || !member_address(na, req, &id))
		return true;
	return conf_change(na, req, RAFT_CONF_ADD_LEARNER, id);
}

static bool cmd_members_one(struct control_request *req, void *arg, uint8_t op)
{
	struct node_admin *na = arg;
	uint64_t id;
	if (!require_leader(na, req))
		return true;
	if (req->argc != 1 || !control_arg_u64(req, 0, "id", &id) || id == 0 || id > UINT32_MAX) {
		if (req->error == 0)
			control_request_fail(req, -HASP_EINVAL, "usage: %s <id>", req->name);
		return true;
	}
	return conf_change(na, req, op, (uint32_t)id);
}

static bool cmd_members_promote(struct control_request *req, void *arg)
{
	return cmd_members_one(req, arg, RAFT_CONF_PROMOTE);
}

static bool cmd_members_remove(struct control_request *req, void *arg)
{
	return cmd_members_one(req, arg, RAFT_CONF_REMOVE);
}

static bool cmd_leader_transfer(struct control_request *req, void *arg)
{
	struct node_admin *na = arg;
	struct node *n = na->n;
	uint64_t id;
	if (!require_leader(na, req))
		return true;
	if (req->argc != 1 || !control_arg_u64(req, 0, "id", &id) || id == 0 || id > UINT32_MAX) {
		if (req->error == 0)
			control_request_fail(req, -HASP_EINVAL, "usage: %s <id> (a voter's node id, 1..%u)",
					     req->name, UINT32_MAX);
		return true;
	}
	if (id == n->cfg.node_id) {
		json_object_begin(&req->out);
		json_kv_u64(&req->out, "leader_id", id);
		json_object_end(&req->out);
		return true;
	}
	struct node_admin_deferred *d = defer(na, req, NODE_ADMIN_WAIT_TRANSFER);
	if (d == NULL) {
		control_request_fail(req, -HASP_EBUSY, "too many admin operations in flight");
		return true;
	}
	struct raft_event ev = { .type = RAFT_EVENT_TRANSFER, .transfer = { .target = (uint32_t)id } };
	node_step(n, &ev);
	if (n->up.reject != RAFT_OK) {
		control_request_fail(req, reject_code(n->up.reject), "%s", reject_text(n->up.reject));
		d->req = NULL;
		return true;
	}
	d->target = (uint32_t)id;
	d->index = n->term; /* done once `id` leads in a later term */
	return false;
}

/* ---- locks ---- */

static void lock_json(struct json_writer *w, const struct node *n, const uint8_t *name, uint32_t len,
		      const struct locks_lock_info *li)
{
	json_object_begin(w);
	json_key(w, "name");
	json_string_n(w, (const char *)name, len);
	json_kv_u64(w, "holder", li->holder_session_id);
	json_kv_u64(w, "token", li->token);
	json_kv_u64(w, "lease", li->private_lease ? 0 : li->lease_id);
	json_kv_u64(w, "ttl_ms", li->ttl_ms);
	json_kv_u64(w, "remaining_ms", remaining_ms(n, li->deadline_ms));
	json_kv_u64(w, "waiters", li->waiter_count);
	json_object_end(w);
}

/*
 * Listings page through the state machine with its cursor API
 * (locks_*_next: slot order, not sorted by name); `after` is the cursor to
 * start at and `next` the one to continue from. O(capacity) on the lcore
 * for an operator command: acceptable, and it allocates nothing.
 *
 * A list_next_fn finds the next record at or after *cursor that the listing
 * shows, writes it to `w` (or only reports that it exists when `w` is
 * NULL), and moves *cursor past it; false when none is left.
 */
typedef bool list_next_fn(struct node_admin *na, uint32_t *cursor, struct json_writer *w,
			  const char *prefix);

/* Room kept free in the reply for what follows the records. */
#define LIST_TAIL_ROOM 96u

static void list_page(struct control_request *req, struct node_admin *na, const char *key,
		      list_next_fn *next, bool with_prefix)
{
	static const char *const keys_prefix[] = { "prefix", "after", "limit", NULL };
	static const char *const keys[] = { "after", "limit", NULL };
	uint64_t after, limit, count = 0;
	if (!opts_check(req, with_prefix ? keys_prefix : keys,
			with_prefix ? "[prefix=P] [after=CURSOR] [limit=N]" : "[after=CURSOR] [limit=N]") ||
	    !opt_u64(req, "after", 0, 0, UINT32_MAX, &after) ||
	    !opt_u64(req, "limit", LIST_LIMIT_DEFAULT, 1, LIST_LIMIT_MAX, &limit))
		return;
	const char *prefix = with_prefix ? opt_arg(req, "prefix") : NULL;
	struct json_writer *w = &req->out;
	uint32_t cursor = (uint32_t)after;
	uint32_t resume = 0;
	bool more = false;
	json_object_begin(w);
	json_kv_u64(w, "applied_index", na->n->applied);
	json_key(w, key);
	json_array_begin(w);
	/* Records stop short of the reply buffer's end: a record that does
	 * not fit is taken back and the page ends there, truncated, so a large
	 * limit pages instead of failing ETOOBIG. */
	size_t size = w->size;
	if (size < LIST_TAIL_ROOM * 2)
		return; /* cannot happen: replies are at least 4 KiB; seal fails it */
	w->size -= LIST_TAIL_ROOM;
	for (;;) {
		uint32_t at = cursor;
		if (count == limit) {
			more = next(na, &cursor, NULL, prefix);
			resume = at;
			break;
		}
		struct json_writer saved = *w;
		if (!next(na, &cursor, w, prefix))
			break;
		if (w->overflow) {
			*w = saved;
			more = true;
			resume = at;
			break;
		}
		count++;
	}
	w->size = size;
	json_array_end(w);
	json_kv_bool(w, "truncated", more);
	if (more)
		json_kv_u64(w, "next", resume);
	json_object_end(w);
}

static bool list_next_lock(struct node_admin *na, uint32_t *cursor, struct json_writer *w,
			   const char *prefix)
{
	/* No prefix lists every lock. NULL must not reach memcmp even with a
	 * zero length: its nonnull attribute lets the optimizer drop the NULL
	 * test above it (the -O3 build crashed on `locks.list` without one). */
	if (prefix == NULL)
		prefix = "";
	size_t plen = strlen(prefix);
	const uint8_t *name;
	uint32_t name_len;
	struct locks_lock_info li;

	while (locks_lock_next(&na->n->sm, cursor, &name, &name_len, &li)) {
		if (plen > name_len || memcmp(name, prefix, plen) != 0)
			continue;
		if (w != NULL)
			lock_json(w, na->n, name, name_len, &li);
		return true;
	}
	return false;
}

static bool cmd_locks_list(struct control_request *req, void *arg)
{
	list_page(req, arg, "locks", list_next_lock, true);
	return true;
}

static bool cmd_locks_show(struct control_request *req, void *arg)
{
	struct node_admin *na = arg;
	struct locks_lock_info li;
	if (req->argc != 1) {
		control_request_fail(req, -HASP_EINVAL, "usage: locks.show <name>");
		return true;
	}
	const uint8_t *name = (const uint8_t *)req->argv[0];
	uint32_t len = (uint32_t)strlen(req->argv[0]);
	if (!locks_name_valid(name, len)) {
		control_request_fail(req, -HASP_ENAME, "invalid lock name");
		return true;
	}
	if (!locks_lock_read(&na->n->sm, name, len, &li)) {
		control_request_fail(req, -HASP_ENOENT, "lock %s is not held", req->argv[0]);
		return true;
	}
	lock_json(&req->out, na->n, name, len, &li);
	return true;
}

static bool cmd_locks_release_force(struct control_request *req, void *arg)
{
	struct node_admin *na = arg;
	struct node *n = na->n;
	struct locks_lock_info li;
	if (!require_leader(na, req))
		return true;
	const uint8_t *name = (const uint8_t *)(req->argc == 1 ? req->argv[0] : "");
	uint32_t len = (uint32_t)strlen((const char *)name);
	if (req->argc != 1 || !locks_name_valid(name, len)) {
		control_request_fail(req, -HASP_EINVAL, "usage: locks.release_force <name>");
		return true;
	}
	if (!locks_lock_read(&n->sm, name, len, &li)) {
		control_request_fail(req, -HASP_ENOENT, "lock %s is not held", req->argv[0]);
		return true;
	}
	struct node_admin_deferred *d = defer(na, req, NODE_ADMIN_WAIT_FORCE);
	if (d == NULL) {
		control_request_fail(req, -HASP_EBUSY, "too many admin operations in flight");
		return true;
	}
	d->token = li.token;
	d->target = (uint32_t)li.holder_session_id;
	d->before = li.holder_session_id;
	memcpy(d->name, name, len);
	d->name_len = (uint8_t)len;
	/* Through Raft like any command: every replica releases it at the
	 * same index, and the old token is stale from there on. */
	struct locks_cmd cmd = { .op = LOCKS_OP_FORCE_RELEASE, .name = d->name, .name_len = (uint16_t)len };
	dispatch_add_leader_cmd(n, &cmd);
	return false;
}

/* ---- client identities ---- */

int node_admin_identities_reload(struct node_admin *na, char *err, size_t err_size)
{
	struct node *n = na->n;

	if (!n->cfg.client_auth) {
		snprintf(err, err_size, "client_auth = off: this node has no identities");
		return -HASP_ENOTSUP;
	}
	int rc = client_auth_load(&n->client_auth, n->cfg.client_identities_file,
				  n->cfg.identity_sessions_max, err, err_size);
	if (rc != 0) {
		n->stats.identities_reload_failed++;
		return rc;
	}
	n->stats.identities_reloaded++;
	return (int)n->client_auth.id_count;
}

static bool cmd_identities_reload(struct control_request *req, void *arg)
{
	char err[CONTROL_MESSAGE_SIZE];
	int rc = node_admin_identities_reload(arg, err, sizeof(err));

	if (rc < 0) {
		control_request_fail(req, rc, "%s (the identities in use are unchanged)", err);
		return true;
	}
	json_object_begin(&req->out);
	json_key(&req->out, "identities");
	json_u64(&req->out, (uint64_t)rc);
	json_object_end(&req->out);
	return true;
}

/* ---- leases and sessions ---- */

/* Shared leases only: a lock's own TTL shows with its lock. */
static bool list_next_lease(struct node_admin *na, uint32_t *cursor, struct json_writer *w,
			    const char *prefix)
{
	uint64_t id;
	struct locks_lease_info li;
	(void)prefix;

	while (locks_lease_next(&na->n->sm, cursor, &id, &li)) {
		if (li.private_lease)
			continue;
		if (w != NULL) {
			json_object_begin(w);
			json_kv_u64(w, "id", id);
			json_kv_u64(w, "ttl_ms", li.ttl_ms);
			json_kv_u64(w, "remaining_ms", remaining_ms(na->n, li.deadline_ms));
			json_kv_u64(w, "locks", li.lock_count);
			json_kv_u64(w, "waiters", li.waiter_count);
			json_kv_u64(w, "keys", li.key_count);
			json_object_end(w);
		}
		return true;
	}
	return false;
}

static bool cmd_leases_list(struct control_request *req, void *arg)
{
	list_page(req, arg, "leases", list_next_lease, false);
	return true;
}

static bool list_next_session(struct node_admin *na, uint32_t *cursor, struct json_writer *w,
			      const char *prefix)
{
	uint64_t id;
	struct locks_session_info si;
	(void)prefix;

	if (!locks_session_next(&na->n->sm, cursor, &id, &si))
		return false;
	if (w != NULL) {
		json_object_begin(w);
		json_kv_u64(w, "id", id);
		json_kv_u64(w, "ttl_ms", si.ttl_ms);
		json_kv_u64(w, "remaining_ms", remaining_ms(na->n, si.deadline_ms));
		json_kv_u64(w, "locks", si.lock_count);
		json_kv_u64(w, "waiting", si.waiter_count);
		json_kv_u64(w, "seq_max", si.seq_max);
		json_object_end(w);
	}
	return true;
}

static bool cmd_sessions_list(struct control_request *req, void *arg)
{
	list_page(req, arg, "sessions", list_next_session, false);
	return true;
}

/* ---- snapshots ---- */

static bool cmd_snapshot_save(struct control_request *req, void *arg)
{
	struct node_admin *na = arg;
	struct node *n = na->n;
	if (req->argc != 0) {
		control_request_fail(req, -HASP_EINVAL, "usage: snapshot.save (no arguments)");
		return true;
	}
	if (n->failed) {
		control_request_fail(req, -HASP_EIO, "storage failed");
		return true;
	}
	struct node_admin_deferred *d = defer(na, req, NODE_ADMIN_WAIT_SNAPSHOT);
	if (d == NULL) {
		control_request_fail(req, -HASP_EBUSY, "too many admin operations in flight");
		return true;
	}
	/* The node takes it in its next work iteration, like one raft asked
	 * for: state machine bytes at the applied index, temp file, fsync,
	 * rename, directory fsync (storage/snapshot.h). */
	d->before = n->stats.snapshots_taken;
	n->snapshot_wanted = true;
	n->snap_retry_ns = 0; /* asked for now: no backoff */
	return false;
}

/* ---- deferred completion ---- */

static void complete(struct node_admin_deferred *d)
{
	control_request_done(d->req);
	d->req = NULL;
}

static void deferred_check(struct node_admin *na)
{
	struct node *n = na->n;
	for (uint32_t i = 0; i < NODE_ADMIN_DEFERRED_MAX; i++) {
		struct node_admin_deferred *d = &na->deferred[i];
		struct control_request *req = d->req;
		if (req == NULL)
			continue;
		switch (d->wait) {
		case NODE_ADMIN_WAIT_CONF:
			if (n->applied >= d->index) {
				json_object_begin(&req->out);
				json_kv_u64(&req->out, "id", d->target);
				json_kv_u64(&req->out, "index", d->index);
				json_kv_str(&req->out, "op", req->name);
				json_object_end(&req->out);
				complete(d);
			} else if (n->role != RAFT_LEADER) {
				control_request_fail(req, -HASP_ENOTLEADER,
						     "leadership changed before the change committed; it may still "
						     "commit (see members list)");
				req->leader_id = n->leader_id;
				complete(d);
			}
			break;
		case NODE_ADMIN_WAIT_TRANSFER:
			if (n->leader_id == d->target && n->role != RAFT_LEADER && n->term > d->index) {
				json_object_begin(&req->out);
				json_kv_u64(&req->out, "leader_id", d->target);
				json_kv_u64(&req->out, "term", n->term);
				json_object_end(&req->out);
				complete(d);
			}
			break;
		case NODE_ADMIN_WAIT_FORCE: {
			struct locks_lock_info li;
			bool held = locks_lock_read(&n->sm, d->name, d->name_len, &li);
			if (!held || li.token != d->token) {
				json_object_begin(&req->out);
				json_key(&req->out, "name");
				json_string_n(&req->out, (const char *)d->name, d->name_len);
				json_kv_u64(&req->out, "released_token", d->token);
				json_kv_u64(&req->out, "holder", d->before);
				json_kv_bool(&req->out, "handed_off", held);
				json_object_end(&req->out);
				complete(d);
			} else if (n->role != RAFT_LEADER) {
				control_request_fail(req, -HASP_ENOTLEADER,
						     "leadership changed before the release applied; it may still "
						     "apply (see locks show)");
				req->leader_id = n->leader_id;
				complete(d);
			}
			break;
		}
		case NODE_ADMIN_WAIT_SNAPSHOT:
			if (n->stats.snapshots_taken != d->before) {
				uint64_t index = n->raft.log.snap_index, term = n->raft.log.snap_term;
				char name[64];
				snapshot_name(name, sizeof(name), index, term);
				snprintf(req->attach_path, sizeof(req->attach_path), "%s/%s", n->cfg.data_dir, name);
				json_object_begin(&req->out);
				json_kv_u64(&req->out, "index", index);
				json_kv_u64(&req->out, "term", term);
				json_kv_str(&req->out, "path", req->attach_path);
				json_object_end(&req->out);
				complete(d);
			} else if (n->stats.snapshot_too_big != 0 && !n->snapshot_wanted) {
				control_request_fail(req, -HASP_ETOOBIG, "snapshot larger than the buffer");
				complete(d);
			} else if (n->snap_fail_streak > 0 && n->snap_retry_ns > n->now_ns) {
				control_request_fail(req, n->snap_fail_error, "snapshot save failed: %s",
						     hasp_strerror(n->snap_fail_error));
				complete(d);
			}
			break;
		default:
			HASP_UNREACHABLE();
		}
		/* Past the admin's timeout nobody reads the reply: free the slot. */
		if (d->req != NULL && n->now_ns > d->deadline_ns) {
			control_request_fail(req, -HASP_ETIMEDOUT, "timed out");
			complete(d);
		}
	}
}

/* ---- status and metrics ---- */

static void publish(struct node_admin *na)
{
	struct node *n = na->n;
	uint64_t role = n->role;
	if (raft_removed(&n->raft))
		role = CONTROL_ROLE_REMOVED;
	else if (n->role == RAFT_FOLLOWER && raft_self_role(&n->raft) == RAFT_LEARNER)
		role = CONTROL_ROLE_LEARNER;
	struct control_status st = {
		.published_ns = n->now_ns, .role = role, .term = n->term, .leader_id = n->leader_id,
		.commit_index = n->raft.commit, .applied_index = n->applied,
		.last_index = raft_last_index(&n->raft), .snapshot_index = n->raft.log.snap_index,
		.storage_failed = n->failed,
	};
	/* Can commit: a leader has a quorum within the election timeout
	 * (check_quorum steps it down otherwise); a follower heard its leader
	 * within it. */
	if (n->role == RAFT_LEADER)
		st.can_commit = !n->failed && !n->stopping;
	else
		st.can_commit = n->leader_id != 0 && n->raft.election_elapsed < n->raft.cfg.election_ticks;
	const struct raft_conf *conf = &n->raft.conf;
	for (uint32_t i = 0; i < conf->count && i < CONTROL_MEMBERS_MAX; i++) {
		struct control_member *m = &st.members[st.member_count++];
		const struct node_member *nm = node_config_member(&n->cfg, conf->members[i].id);
		m->id = conf->members[i].id;
		m->role = conf->members[i].role;
		if (nm != NULL) {
			m->ip = nm->ip;
			m->peer_port = nm->peer_port;
			m->client_port = nm->client_port;
			if (n->role == RAFT_LEADER && m->id != n->cfg.node_id) {
				m->rtt_ns = n->peer_rtt_ns[nm - n->cfg.members];
			}
		}
		if (n->role == RAFT_LEADER) {
			for (uint32_t p = 0; p < n->raft.cfg.peers_max; p++) {
				const struct raft_progress *pr = &n->raft.progress[p];
				if (pr->id != m->id)
					continue;
				m->match_index = m->id == n->cfg.node_id ? raft_last_index(&n->raft) : pr->match;
				m->active = pr->recent_active || m->id == n->cfg.node_id;
			}
		}
	}
	(void)node_degraded(n, st.degraded, sizeof(st.degraded));
	control_status_publish(&na->ctl, &st);

	struct locks_counts lc;
	locks_counts_get(&n->sm, &lc);
	uint64_t last = raft_last_index(&n->raft);
	struct control_node_state ns = {
		.has_leader = n->leader_id != 0, .is_leader = n->role == RAFT_LEADER,
		.storage_failed = n->failed, .term = n->term, .commit_index = n->raft.commit,
		.applied_index = n->applied,
		.proposals_pending = n->role == RAFT_LEADER && last > n->raft.commit ? last - n->raft.commit : 0,
		.locks_held = lc.locks, .leases = lc.leases, .waiters = lc.waiters,
		.watchers = n->watches.count, .sessions = lc.sessions,
	};
	node_metrics_sync(&na->nm, &ns, n->leader_id);
	node_metrics_replies(&na->nm, n);

	struct node_metrics *m = &na->nm;
	const struct node_stats *s = &n->stats;
	metric_set(m->proposals_committed, (int64_t)s->applied_commands);
	metric_set(m->proposals_failed, (int64_t)(s->client_overloaded + s->client_not_leader + s->reads_dropped));
	metric_set(m->expirations, (int64_t)s->expiries_proposed);
	metric_set(m->notifications_sent, (int64_t)s->events_pushed);
	metric_set(m->notifications_rate_limited, (int64_t)(s->watch_rate_limited + s->watch_coalesced));
	metric_set(m->snapshots, (int64_t)(s->snapshots_taken + s->snapshots_installed));
	metric_set(m->snapshot_failures, (int64_t)s->snapshot_failures);
	metric_set(m->snapshot_failing, (int64_t)n->snap_fail_streak);
	metric_set(m->snapshot_last_error, n->snap_fail_streak > 0 ? -(int64_t)n->snap_fail_error : 0);
	metric_set(m->snapshot_copy_last, (int64_t)n->snap_copy_ns_last);
	metric_set(m->snapshot_copy_max, (int64_t)n->snap_copy_ns_max);
	metric_set(m->snapshot_copy_replies_last, (int64_t)n->snap_copy_replies_last);
	metric_set(m->leader_ready_last, (int64_t)n->lead_ready_ns_last);
	metric_set(m->requests[0], (int64_t)s->client_rx);
	/* Per lcore that sends the watch's events: lcore 0 without event
	 * lanes, lcores 1.. with them (struct node_watch_lcore). */
	for (uint32_t l = 0; l < m->lcore_count; l++)
		for (uint32_t o = 0; o < NODE_WATCH_OUTCOMES; o++)
			metric_set(m->watch_events[l][o], (int64_t)n->watch_by_lcore[l].count[o]);
	metric_set(m->watch_capacity, (int64_t)n->watches.capacity);
	metric_set(m->watch_bytes_per_watch, (int64_t)watch_index_bytes_per_watch(&n->watches));

	/* Drops by reason: node counters plus the dataplane's. */
	const struct dp_stats *d = &na->dp;
	const uint64_t *bad = s->client_bad_reason;
	uint64_t by[NODE_DROP_COUNT] = { 0 };
	by[NODE_DROP_BAD_CHECKSUM] = bad[HASP_ECORRUPT] + d->rx_bad_ipv4_csum + d->rx_bad_udp_csum +
					d->rx_bad_icmp_csum;
	by[NODE_DROP_BAD_VERSION] = bad[HASP_EVERSION];
	by[NODE_DROP_UNKNOWN_CLUSTER] = bad[HASP_ECLUSTER] + s->peer_dropped_cluster;
	by[NODE_DROP_MALFORMED] = s->client_bad - bad[HASP_ECORRUPT] - bad[HASP_EVERSION] -
				     bad[HASP_ECLUSTER] + s->peer_bad + d->rx_truncated + d->rx_bad_ipv4_version +
				     d->rx_bad_ipv4_ihl + d->rx_bad_ipv4_len + d->rx_bad_udp_len + d->rx_arp_unsupported;
	by[NODE_DROP_NOT_FOR_US] = s->peer_dropped_node + d->rx_not_for_us + d->rx_ip_not_for_us +
				      d->rx_ip_bad_src;
	by[NODE_DROP_UNKNOWN_PORT] = d->rx_unknown_port;
	by[NODE_DROP_STALE] = n->raft.counters.msg_dropped_stale;
	by[NODE_DROP_NO_BUFFER] = d->tx_no_mbuf + d->tx_ring_full + d->tx_arp_dropped;
	by[NODE_DROP_UNSUPPORTED] = d->rx_ip_options + d->rx_ip_fragment + d->rx_ip_unknown_proto +
				       d->rx_unknown_ethertype + d->rx_multiseg;
	for (uint32_t r = 0; r < NODE_DROP_COUNT; r++)
		node_metrics_dropped_set(m, 0, r, by[r]);
}

/* Batch sizes and WAL durability latency from the node's own counters,
 * sampled every work iteration (one flush per iteration in practice). */
static void sample(struct node_admin *na)
{
	struct node *n = na->n;
	uint64_t batches = n->stats.batches - na->seen_batches;
	uint64_t props = n->stats.proposals - na->seen_proposals;
	for (uint64_t i = 0; i < batches && i < 64; i++)
		node_metrics_batch(&na->nm, props / batches);
	na->seen_batches = n->stats.batches;
	na->seen_proposals = n->stats.proposals;

	uint64_t durable = wal_durable_index(&n->st.wal), last = wal_last_index(&n->st.wal);
	if (na->probe_index != 0 && durable >= na->probe_index) {
		node_metrics_fsync(&na->nm, n->now_ns - na->probe_start_ns);
		na->probe_index = 0;
	}
	if (na->probe_index == 0 && last > durable) {
		na->probe_index = last;
		na->probe_start_ns = n->now_ns;
	}

	/* Peer round trips: one probe per peer is out at a time and this
	 * runs every work round, so each new sample is seen here. */
	for (uint32_t i = 0; i < n->cfg.member_count; i++) {
		uint64_t id = n->cfg.members[i].id;
		if (na->seen_rtt_member[i] != id) {
			na->seen_rtt_member[i] = id;
			na->seen_rtt_samples[i] = n->peer_rtt_samples[i];
		}
		if (n->peer_rtt_samples[i] == na->seen_rtt_samples[i] || id == n->cfg.node_id)
			continue;
		na->seen_rtt_samples[i] = n->peer_rtt_samples[i];
		struct metric *rtt = node_metrics_peer(&na->nm, (uint32_t)id);
		if (rtt != NULL)
			metric_observe(rtt, n->peer_rtt_ns[i]);
	}
}

bool node_admin_work(struct node_admin *na, uint64_t now_ns, const struct dp_stats *dps,
		     uint64_t *deadline_ns)
{
	bool did = control_poll(&na->ctl, 4) > 0;
	deferred_check(na);
	sample(na);
	if (now_ns >= na->next_publish_ns) {
		if (dps != NULL)
			na->dp = *dps;
		publish(na);
		na->next_publish_ns = now_ns + PUBLISH_INTERVAL_NS;
	}
	/* No deadline for publishing: raft's tick wakes the lcore often
	 * enough, and a queued request wakes it through control_wake_fd(). */
	for (uint32_t i = 0; i < NODE_ADMIN_DEFERRED_MAX; i++)
		if (na->deferred[i].req != NULL && now_ns + NS_PER_MS < *deadline_ns)
			*deadline_ns = now_ns + NS_PER_MS; /* poll the outcome */
	return did;
}

/* ---- life cycle ---- */

/* hasp_dp_<field>_total; promtool reads "_us" as an abbreviated unit
 * (microseconds), so the two "not_for_us" counters are exported as
 * "other_mac" and "other_ip" (docs/CONTROL.md). */
static const char *dp_metric_name(char *name, size_t size, const char *field)
{
	if (strcmp(field, "rx_not_for_us") == 0)
		field = "rx_other_mac";
	else if (strcmp(field, "rx_ip_not_for_us") == 0)
		field = "rx_other_ip";
	snprintf(name, size, "hasp_dp_%s_total", field);
	return name;
}

int node_admin_init(struct node_admin *na, struct node *n, const char *unix_path, const char *tcp_addr)
{
	memset(na, 0, sizeof(*na));
	na->n = n;
	/* Series: ~100 dataplane counters, ~20 latency histograms, the
	 * replies by opcode and status as they appear, peers. */
	struct control_config cfg = { .node_id = n->cfg.node_id, .metrics_max = 1024 };
	const struct node_member *self = node_config_self(&n->cfg);
	snprintf(cfg.unix_path, sizeof(cfg.unix_path), "%s", unix_path);
	snprintf(cfg.tcp_addr, sizeof(cfg.tcp_addr), "%s", tcp_addr);
	if (n->cfg.admin_key_loaded) {
		cfg.admin_key = n->cfg.admin_key;
		cfg.admin_key_set = true;
	}
	snprintf(cfg.node_address, sizeof(cfg.node_address), "%u.%u.%u.%u:%u", self->ip >> 24,
		 (self->ip >> 16) & 255, (self->ip >> 8) & 255, self->ip & 255, self->client_port);
	int rc = control_init(&na->ctl, &cfg);
	auth_key_wipe(&cfg.admin_key); /* control keeps its own copy */
	if (rc != 0)
		return rc;
	/* The node's lcore and one per event lane (haspd sets the lanes
	 * before this). */
	_Static_assert(1 + NODE_EVENT_LANES_MAX <= NODE_METRICS_LCORES_MAX, "a metrics row per lane");
	rc = node_metrics_register(&na->nm, &na->ctl, 1 + n->lanes.count);
	if (rc == 0)
		rc = node_metrics_register_node(&na->nm, n);
	if (rc == 0 && n->cfg.data_dir[0] != '\0')
		rc = process_metrics_watch_dir(&na->ctl.process, control_metrics(&na->ctl), n->cfg.data_dir);
	const struct control_command cmds[] = {
		{ "members.add", "<id> <ip> <peer_port> <client_port> <public_key>", "add a learner (leader)",
		  CONTROL_ON_LCORE, cmd_members_add, na },
		{ "members.address", "<id> <ip> <peer_port> <client_port> <public_key>",
		  "record a member's address on this node (any node)", CONTROL_ON_LCORE, cmd_members_address, na },
		{ "members.promote", "<id>", "promote a caught-up learner to voter (leader)", CONTROL_ON_LCORE,
		  cmd_members_promote, na },
		{ "members.remove", "<id>", "remove a voter or learner (leader)", CONTROL_ON_LCORE,
		  cmd_members_remove, na },
		{ "leader.transfer", "<id>", "hand leadership to a voter (leader)", CONTROL_ON_LCORE,
		  cmd_leader_transfer, na },
		{ "locks.list", "[prefix=P] [after=CURSOR] [limit=N]", "held locks", CONTROL_ON_LCORE,
		  cmd_locks_list, na },
		{ "locks.show", "<name>", "one lock: holder, token, lease, remaining TTL, waiters",
		  CONTROL_ON_LCORE, cmd_locks_show, na },
		{ "locks.release_force", "<name>", "release a lock through Raft, whoever holds it (leader)",
		  CONTROL_ON_LCORE, cmd_locks_release_force, na },
		{ "leases.list", "[after=CURSOR] [limit=N]", "shared leases", CONTROL_ON_LCORE,
		  cmd_leases_list, na },
		{ "sessions.list", "[after=CURSOR] [limit=N]", "client sessions", CONTROL_ON_LCORE,
		  cmd_sessions_list, na },
		{ "snapshot.save", "", "take a snapshot now and stream it", CONTROL_ON_LCORE,
		  cmd_snapshot_save, na },
		{ "identities.reload", "", "read client_identities_file again (all or nothing)",
		  CONTROL_ON_LCORE, cmd_identities_reload, na },
	};
	for (size_t i = 0; rc == 0 && i < sizeof(cmds) / sizeof(cmds[0]); i++)
		rc = control_register(&na->ctl, &cmds[i]);
	/* Every dataplane counter too (the sum over lcores, refreshed every
	 * 10 ms), under its docs/DATAPLANE.md name: hasp_dp_<name>_total
	 * (dp_metric_name: two names renamed for Prometheus' unit check). */
	char dp_name[METRICS_NAME_SIZE];
#define NODE_ADMIN_DP(field, outcome, help)                                                   \
	if (rc == 0 && metrics_counter_ref(control_metrics(&na->ctl),                        \
					   dp_metric_name(dp_name, sizeof(dp_name), #field),          \
					   "Dataplane: " help ".", NULL, 0, &na->dp.field) == NULL)  \
		rc = -HASP_EFULL;
	DP_STATS_TABLE(NODE_ADMIN_DP)
#undef NODE_ADMIN_DP
	/* The port's own counters (struct dp_port_stats, docs/OPERATIONS.md
	 * "Port counters"): hasp_port_<name>_total. */
#define NODE_ADMIN_PORT(name, eth_field, help)                                                \
	if (rc == 0 && metrics_counter_ref(control_metrics(&na->ctl), "hasp_port_" #name "_total", \
					   "Port: " help ".", NULL, 0, &na->port.name) == NULL)      \
		rc = -HASP_EFULL;
	DP_PORT_STATS_TABLE(NODE_ADMIN_PORT)
#undef NODE_ADMIN_PORT
	static const struct metrics_label reload_ok[] = { { "result", "ok" } };
	static const struct metrics_label reload_failed[] = { { "result", "failed" } };
	static const char reload_help[] =
		"Client identities file reloads (SIGHUP, identities.reload); failed: refused whole.";
	if (rc == 0 && (metrics_counter_ref(control_metrics(&na->ctl), "hasp_identities_reloads_total",
					    reload_help, reload_ok, 1,
					    &n->stats.identities_reloaded) == NULL ||
			metrics_counter_ref(control_metrics(&na->ctl), "hasp_identities_reloads_total",
					    reload_help, reload_failed, 1,
					    &n->stats.identities_reload_failed) == NULL))
		rc = -HASP_EFULL;
	for (uint32_t i = 0; rc == 0 && i < n->cfg.member_count; i++)
		if (n->cfg.members[i].id != n->cfg.node_id &&
		    node_metrics_peer(&na->nm, n->cfg.members[i].id) == NULL)
			rc = -HASP_EFULL;
	if (rc != 0)
		control_deinit(&na->ctl);
	return rc;
}

int node_admin_start(struct node_admin *na)
{
	return control_start(&na->ctl);
}

void node_admin_stop(struct node_admin *na)
{
	control_stop(&na->ctl);
}

int node_admin_wake_fd(const struct node_admin *na)
{
	return control_wake_fd(&na->ctl);
}

void node_admin_deinit(struct node_admin *na)
{
	control_deinit(&na->ctl);
}
