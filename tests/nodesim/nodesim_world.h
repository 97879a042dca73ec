/*
 * Inside nodesim: the world (nodesim_world.c) and the clients
 * (nodesim_clients.c) that live in it.
 */
#ifndef HASP_TESTS_NODESIM_NODESIM_WORLD_H
#define HASP_TESTS_NODESIM_NODESIM_WORLD_H

#include "client/client_impl.h"
#include "common/prng.h"
#include "node/node.h"
#include "storage/simdisk.h"
#include "tests/nodesim/nodesim.h"

/* One datagram in flight. */
struct dgram {
	uint64_t at_ns;  /* delivery */
	uint64_t order;  /* ties broken by send order: deterministic */
	struct dgram *next; /* a client's inbox */
	uint32_t src_ip, dst_ip;
	uint16_t src_port, dst_port;
	uint32_t size;
	uint8_t data[];
};

struct world;

struct world_node {
	struct world *w;
	uint32_t index;
	bool up;
	uint64_t wake_ns;
	struct node_config cfg;
	struct simdisk *disk;
	struct node node;
};

/* A client process of the workload (nodesim_clients.c). */
struct sim_client {
	struct world *w;
	uint32_t index;
	char proc[12]; /* "c" and a u32, or "w0" */
	struct hasp_client *c;
	struct client_io io;
	struct dgram *inbox_head, *inbox_tail;
	uint64_t wake_ns;         /* libhasp wants a hasp_client_process */
	uint64_t act_ns;          /* the workload's next step (when idle) */
	uint64_t paused_until_ns; /* a GC pause: nothing runs */
	/* The one operation outstanding (Jepsen's process). */
	bool busy;
	const char *op_f;
	uint32_t op_lock;
	uint64_t op_token;
	uint64_t op_invoke_ns;
	/* The lock it holds as libhasp reported it. */
	bool holding;
	uint32_t held_lock;
	struct hasp_lock held;
	/* The watcher: its WATCHes sent, the event gaps libhasp reported. */
	bool watching;
	uint64_t gaps;
	/* A lock left to expire (overstay) is not asked for before then. */
	uint64_t shunned_until_ns[NODESIM_LOCKS];
};

struct world {
	struct prng prng;
	struct nodesim_result *res;
	struct nodesim_history *hist;
	struct nodesim_check *check;
	bool verbose;
	uint64_t now_ns;
	uint32_t node_count, client_count; /* clients: the workers and the watcher */
	uint32_t watcher;                  /* its index (the last), UINT32_MAX: none */
	struct world_node nodes[NODESIM_NODES_MAX];
	struct sim_client clients[NODESIM_CLIENTS_MAX];
	/* Partition group per endpoint (nodes, then clients): datagrams
	 * pass only inside a group. */
	uint8_t group[NODESIM_NODES_MAX + NODESIM_CLIENTS_MAX];
	uint32_t drop_ppm, dup_ppm, delay_max_ns;
	struct dgram **heap;
	uint32_t heap_count, heap_size;
	uint64_t next_order;
	uint64_t next_nemesis_ns;
	const char *fault; /* the fault in force, NULL: healed */
	uint64_t resource_highest[NODESIM_LOCKS]; /* the fenced resource */
	bool workload_on;
	bool shrink; /* nodesim_options.shrink */
};

uint32_t world_node_ip(uint32_t i);
uint32_t world_client_ip(uint32_t k);
uint32_t world_rand(struct world *w, uint32_t n);
bool world_chance(struct world *w, uint32_t per_million);
int world_init(struct world *w, const struct nodesim_options *opt, struct nodesim_result *res)
	__attribute__((warn_unused_result));
void world_deinit(struct world *w);
void world_send(struct world *w, uint32_t src_ip, uint16_t src_port, uint32_t dst_ip,
		uint16_t dst_port, const void *data, size_t size);
/* One event step; nemesis faults start only before nemesis_until_ns.
 * -1: a node did not restart. */
int world_step(struct world *w, uint64_t nemesis_until_ns) __attribute__((warn_unused_result));
int world_leader(const struct world *w);
/* A blocking libhasp call of client `sc` (its client_io wait): the network
 * and the nodes run, the other clients do not (they could not: this one is
 * inside its loop), until `until_ns` or a datagram for `sc`. */
void world_run_nodes_until(struct world *w, uint64_t until_ns, const struct sim_client *sc);

/* nodesim_clients.c */
int world_clients_open(struct world *w, uint64_t seed) __attribute__((warn_unused_result));
void world_clients_close(struct world *w);
void world_client_deliver(struct world *w, uint32_t k, struct dgram *d);
uint64_t world_clients_next(const struct world *w);
void world_clients_run(struct world *w);
/* The watcher's last record (checker.py asks delivery only before it). */
void world_watcher_end(struct world *w);
/* Operations still outstanding. */
uint32_t world_clients_busy(const struct world *w);

#endif
