/*
 * Client identities and authentication on the node (docs/SECURITY.md
 * section 4, docs/PROTOCOL.md "Authentication").
 *
 * Identities come from the file named by `client_identities_file`, the
 * same file on every member (like Redis's aclfile): one identity per line,
 *
 *   NAME KEY [allow=PERM:PREFIX ...] [sessions=N] [release=identity|session]
 *
 * NAME 1..32 bytes of 0x21..0x7e; KEY 64 hex digits (the client's key
 * file holds the same key); PERM one of read, acquire, watch, kv_read,
 * kv_write, all; PREFIX 0..128 name bytes (empty: every name). Rules only
 * allow: a request on name N needs a rule of its permission whose prefix
 * starts N (a prefix request: starts the requested prefix); no rule, no
 * access. sessions: the identity's session quota (default
 * identity_sessions_max). release=identity (the default) lets any session
 * of the identity release and renew its locks (a CLI that releases in one
 * process what another took); release=session binds them to the holding
 * session. The file must be owned by haspd's user with mode 0600 or 0400:
 * it holds keys. Lines starting with '#' and blank lines are skipped.
 *
 * Session keys are derived from the replicated session (owner and nonce)
 * when the node first needs them and cached by session slot.
 */
#ifndef HASP_NODE_CLIENT_AUTH_H
#define HASP_NODE_CLIENT_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "hasp/wire.h"
#include "locks/locks.h"

#define CLIENT_IDENTITIES_MAX 256u
#define CLIENT_RULES_MAX 16u

enum client_perm {
	CLIENT_PERM_READ = 1u << 0,     /* LOCK_READ, CHECK */
	CLIENT_PERM_ACQUIRE = 1u << 1,  /* ACQUIRE, RELEASE, RENEW, CANCEL */
	CLIENT_PERM_WATCH = 1u << 2,    /* WATCH, UNWATCH */
	CLIENT_PERM_KV_READ = 1u << 3,  /* KV_GET, KV_RANGE */
	CLIENT_PERM_KV_WRITE = 1u << 4, /* KV_PUT, KV_DELETE, KV_CAS */
	CLIENT_PERM_ALL = 0x1fu,
};

struct client_rule {
	uint8_t perms;
	uint8_t prefix_len;
	uint8_t prefix[HASP_NAME_SIZE_MAX];
};

struct client_identity {
	uint8_t name[HASP_IDENTITY_SIZE_MAX];
	uint8_t name_len;
	bool release_identity; /* LOCKS_CMD_OWNER_RELEASE on its sessions */
	uint32_t sessions_max;
	uint32_t rule_count;
	uint64_t owner;        /* hasp_owner_id(name) */
	struct auth_key key;
	struct client_rule rules[CLIENT_RULES_MAX];
};

struct client_session_key {
	uint64_t session_id; /* 0: empty */
	uint32_t identity;   /* index into ids */
	struct auth_key key;
};

struct client_auth {
	struct client_identity *ids;
	uint32_t id_count;
	struct client_session_key *keys; /* by session slot, sessions_max of them */
	uint32_t slots;
	/* Preallocated for client_auth_load, so that a reload on the node's
	 * lcore allocates nothing: the file's text and the identities being
	 * read (both wiped after each load: they hold keys). */
	char *text;
	struct client_identity *next;
};

/* Allocates the tables for `sessions_max` session slots. 0 or -HASP_ENOMEM. */
int client_auth_init(struct client_auth *a, uint32_t sessions_max)
	__attribute__((warn_unused_result));
void client_auth_deinit(struct client_auth *a);

/* Reads the identities file (format above) into `a`, replacing what was
 * there only when the whole file is valid: a file with one bad line
 * changes nothing. `default_sessions` is the quota of identities without
 * sessions=. Returns 0 or -HASP_ECONFIG with a message in err that names
 * the file and line and never contains a key. Allocates nothing (a live
 * reload runs on the node's lcore: SIGHUP, `identities.reload`). After a
 * load every cached session key is forgotten: the sessions of an identity
 * that is gone, or whose key changed, are not served from then on (their
 * next datagram is dropped as unknown or bad), the others derive theirs
 * again on their next datagram. */
int client_auth_load(struct client_auth *a, const char *path, uint32_t default_sessions, char *err,
		     size_t err_size) __attribute__((warn_unused_result));

/* The identity called name[0..size), or NULL. */
const struct client_identity *client_auth_identity(const struct client_auth *a, const uint8_t *name,
						   size_t size);

/* The session key of live session `session_id` (derived from its owner
 * and nonce in `sm`, cached); NULL when the session is unknown or its
 * identity is not (or no longer) in the file. Sets *who to its identity. */
const struct auth_key *client_auth_session_key(struct client_auth *a, const struct locks *sm,
					       uint64_t session_id,
					       const struct client_identity **who);

/* True when `id` may send request `m` (its opcode on its name or prefix). */
bool client_auth_allows(const struct client_identity *id, const struct hasp_wire_msg *m);

#endif
