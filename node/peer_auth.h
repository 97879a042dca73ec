/*
 * Authenticated framing of raft datagrams between nodes (docs/SECURITY.md,
 * "Peer authentication"; issue 15 attack 7).
 *
 * A sealed datagram is the msg_codec encoding followed by a 32-byte
 * trailer:
 *
 *   | offset   | size | field                                          |
 *   |----------|------|------------------------------------------------|
 *   | 0        | n    | raft message (raft/msg_codec.h, version 1)     |
 *   | n        | 8    | sender epoch, u64 LE (wall-clock ns at start)  |
 *   | n + 8    | 8    | sender counter, u64 LE, 1, 2, ... per epoch    |
 *   | n + 16   | 16   | MAC: keyed BLAKE2b-128 of bytes [0, n + 16)    |
 *
 * The MAC covers the whole message, so cluster id, sender, receiver and
 * term are authenticated; the (epoch, counter) pair is the replay defence:
 * each receiver keeps, per sender, the newest epoch and a 64-counter
 * sliding window (as WireGuard and IPsec do), so a datagram is accepted
 * once, out of order within 64, and never from an older epoch.
 *
 * Pure functions over caller-owned buffers: nothing here allocates, reads
 * a clock or logs (the node calls them on the lcore).
 */
#ifndef HASP_NODE_PEER_AUTH_H
#define HASP_NODE_PEER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"

#define PEER_AUTH_TRAILER_SIZE (8u + 8u + AUTH_MAC_SIZE)
#define PEER_AUTH_WINDOW 64u

/* The sending side: one epoch per process start, one counter for every
 * datagram this node sends to any peer. */
struct peer_auth_tx {
	uint64_t epoch;
	uint64_t counter;
};

/* What a receiver keeps of one sender. */
struct peer_auth_window {
	uint32_t id;     /* sender node id; 0: unused slot */
	uint64_t epoch;  /* newest epoch seen from it */
	uint64_t top;    /* highest counter accepted in that epoch */
	uint64_t bitmap; /* bit i: counter top - i accepted */
};

/* The (epoch, counter) of an authenticated datagram. */
struct peer_auth_tag {
	uint64_t epoch;
	uint64_t counter;
};

/* Appends the trailer to the msg_size bytes of a message in buf (buf_size
 * bytes of room) and counts the datagram in tx. Returns the sealed size,
 * or 0 when the trailer does not fit (nothing counted). */
size_t peer_auth_seal(const struct auth_key *key, struct peer_auth_tx *tx, uint8_t *buf, size_t msg_size,
		      size_t buf_size) __attribute__((warn_unused_result));

/* Checks the trailer of a received datagram of size bytes. Returns the
 * size of the raft message in front of it and fills tag, or -1 when the
 * datagram is shorter than a trailer or its MAC is not the key's (in
 * constant time). Touches nothing else. */
long peer_auth_open(const struct auth_key *key, const uint8_t *buf, size_t size, struct peer_auth_tag *tag);

/* The replay check, for an authenticated datagram of sender id: true (and
 * recorded) the first time (epoch, counter) is seen, false for a replay, a
 * counter 0, a counter older than the window, or an epoch older than the
 * newest seen. A window that held another sender is reset first. */
bool peer_auth_window_accept(struct peer_auth_window *w, uint32_t id, const struct peer_auth_tag *tag)
	__attribute__((warn_unused_result));

#endif
