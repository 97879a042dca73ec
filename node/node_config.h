/*
 * haspd's configuration: a file of `key = value` lines plus command-line
 * flags that override it (`--key value` or `--key=value`, dashes or
 * underscores), then the EAL arguments after `--` (which replace the
 * file's `eal` line). docs/OPERATIONS.md has the reference of every key.
 *
 * node_config_load() never exits: on an invalid or missing field it
 * returns -HASP_ECONFIG with a one-line message naming the field in `err`,
 * and haspd exits 2. Nothing here touches the network or the disk except
 * reading the file; the data directory is checked when storage opens it.
 */
#ifndef HASP_NODE_NODE_CONFIG_H
#define HASP_NODE_NODE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "dataplane/idle.h"
#include "locks/locks.h"

#define NODE_MEMBERS_MAX 7u      /* raft peers_max */
#define NODE_PATH_SIZE 256u
#define NODE_EAL_ARGS_MAX 64u
#define NODE_EAL_TEXT_SIZE 1024u

struct node_member {
	uint32_t id;
	uint32_t ip;          /* host order */
	uint16_t peer_port;   /* raft messages */
	uint16_t client_port; /* client requests */
	/* Its X25519 public key (docs/SECURITY.md 3.5): the member line's
	 * fifth field, or `members add`'s. Required with peer_auth = on. */
	uint8_t pub[AUTH_PUBLIC_SIZE];
	bool has_pub;
};

struct node_config {
	uint32_t node_id;
	uint64_t cluster_id;
	struct node_member members[NODE_MEMBERS_MAX];
	uint32_t member_count;

	/* This node's interface (the dataplane). */
	uint32_t ip;
	uint8_t prefix_len;
	uint8_t mac[6];
	uint32_t gateway;
	enum idle_mode idle;
	uint32_t idle_spin;  /* empty polls before an idle wait; 0: dataplane default */
	char port_name[64]; /* empty: the only port */

	char data_dir[NODE_PATH_SIZE];
	char stats_file[NODE_PATH_SIZE]; /* empty: counters go to stderr */
	/* Control plane (docs/CONTROL.md): the admin Unix socket (empty:
	 * <data_dir>/admin.sock) and an optional TCP management address. */
	char admin_socket[NODE_PATH_SIZE];
	char admin_addr[64];
	/* The admin key (docs/SECURITY.md 4.8): with it, privileged admin
	 * commands are served over admin_addr to requests sealed under it;
	 * without, only on the Unix socket. Read by node_config_load(). */
	char admin_key_file[NODE_PATH_SIZE];
	struct auth_key admin_key;
	bool admin_key_loaded;
	/* Join an existing cluster: start with an empty configuration and
	 * wait for the leader's `members add` (instead of bootstrapping every
	 * member line as an initial voter). */
	bool join;
	/* 1: an existing, empty data_dir may bootstrap a new cluster's voter
	 * (otherwise only a directory haspd creates itself, or join = 1). */
	bool bootstrap;

	/* Peer authentication (docs/SECURITY.md 3): on unless the operator
	 * writes `peer_auth = off`. This node's X25519 secret key is read
	 * from node_key_file by node_config_load() (owner-only file, never
	 * logged) and its public key computed; tests may fill node_key and
	 * node_pub and set node_key_loaded. Each member line carries that
	 * member's public key; the MAC keys of a pair are derived from them
	 * at start (node/peer_keys.h). */
	bool peer_auth;
	char node_key_file[NODE_PATH_SIZE];
	struct auth_key node_key;
	uint8_t node_pub[AUTH_PUBLIC_SIZE];
	bool node_key_loaded;

	/* Client authentication (docs/SECURITY.md section 4): on unless the
	 * operator writes `client_auth = off` (wire v1, no identities). The
	 * identities file is read by node_init(). Session TTLs are clamped to
	 * session_ttl_max_ms; an identity without sessions= may hold
	 * identity_sessions_max sessions at once. */
	bool client_auth;
	char client_identities_file[NODE_PATH_SIZE];
	uint32_t session_ttl_max_ms;
	uint32_t identity_sessions_max;

	/* EAL arguments: the file's `eal` line, split on spaces, or the
	 * arguments after `--`. eal_argv[0] is the program name. */
	char eal_text[NODE_EAL_TEXT_SIZE];
	char *eal_argv[NODE_EAL_ARGS_MAX + 1];
	int eal_argc;

	/* Batching: a batch closes at batch_max commands or batch_delay_us
	 * after its first command, whichever comes first. */
	uint32_t batch_max;
	uint32_t batch_delay_us;

	/* Time: raft ticks every tick_ms; the leader proposes a TICK when it
	 * proposed nothing for time_tick_ms (the idle interval I of
	 * docs/STATE_MACHINE.md). */
	uint32_t tick_ms;
	uint32_t election_ticks;
	uint32_t heartbeat_ticks;
	uint32_t time_tick_ms;

	/* Raft log and snapshots. */
	uint32_t log_window;
	uint32_t snapshot_threshold;
	uint32_t snapshot_trailing;
	uint32_t snapshots_kept;
	uint32_t snapshot_write_rate; /* MB/s (10^6 bytes) a snapshot file is written at; 0: at once */

	/* Watches and pushed events. */
	uint32_t watches_max;
	uint32_t watches_per_session_max; /* one session cannot take the whole table */
	uint32_t watch_rate;  /* events per second (token bucket refill) */
	uint32_t watch_burst; /* bucket size */

	/* WAL. */
	uint64_t segment_size;
	uint32_t wal_writes_inflight; /* group-commit writes in flight at once */
	uint32_t idle_watermark_ms;   /* at most one WAL idle watermark per this many ms; 0: every idle */
	uint32_t wal_sync;            /* enum wal_sync_mode */
	uint32_t segment_fill;        /* enum wal_segment_fill */

	/* State machine capacities. */
	struct locks_config locks;
};

/* Defaults for everything that has one (identity, members, addresses and
 * the data dir have none). */
void node_config_default(struct node_config *cfg);

/* Parses argv (argv[0] is the program): `--config FILE` first if given,
 * then the other flags over it, then `-- EAL...`. Returns 0, 1 when --help
 * was asked (usage printed into err), or -HASP_ECONFIG with a message that
 * names the field in err. */
int node_config_load(struct node_config *cfg, int argc, char **argv, char *err, size_t err_size)
	__attribute__((warn_unused_result));

/* Applies one `key = value` setting (file line or flag). */
int node_config_set(struct node_config *cfg, const char *key, const char *value, char *err,
		    size_t err_size) __attribute__((warn_unused_result));

/* Checks the whole configuration (required fields, members, ports,
 * capacities). 0 or -HASP_ECONFIG with the field named in err. */
int node_config_check(const struct node_config *cfg, char *err, size_t err_size)
	__attribute__((warn_unused_result));

/* This node's entry in the member list (checked to exist). */
const struct node_member *node_config_self(const struct node_config *cfg);
const struct node_member *node_config_member(const struct node_config *cfg, uint32_t id);
/* The member whose address is ip (addresses are distinct), or NULL. */
const struct node_member *node_config_member_by_ip(const struct node_config *cfg, uint32_t ip);

#endif
