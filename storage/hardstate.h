/*
 * Raft hard state (current term, voted-for) kept in two checksummed slots of
 * the file `hardstate`, written alternately with a sequence number; loading
 * picks the slot with the highest sequence. A save is one write with its
 * own fdatasync (like a WAL write) into the slot not holding the newest
 * durable state; the 48-byte record lies in the slot's first 512-byte
 * sector, which disks write atomically (as PostgreSQL assumes for
 * pg_control), so a crash leaves either the old or the new record. A slot
 * that fails its checks is damage and refuses the open.
 *
 * Slot format (one 4 KiB block each; slot 0 at offset 0, slot 1 at 4096):
 * | off | size | field                                  |
 * |-----|------|----------------------------------------|
 * |   0 |    8 | magic 0x3154535048534148 ("HASHPST1")  |
 * |   8 |    2 | version (1)                            |
 * |  10 |    6 | reserved, zero                         |
 * |  16 |    8 | sequence number (1, 2, ...)            |
 * |  24 |    8 | term                                   |
 * |  32 |    8 | voted for (node id, 0 = none)          |
 * |  40 |    4 | reserved, zero                         |
 * |  44 |    4 | CRC32C of bytes 0..43                  |
 *
 * Asynchronous like the WAL: hardstate_save() queues, the node's poll loop
 * reaps, and hardstate_durable_seq() tells when a save is durable. The node
 * acknowledges a vote or an append in a new term only once the save it made
 * for it is durable (Raft §5.1, Figure 2: "updated on stable storage before
 * responding to RPCs"). One save is in flight at a time; later saves
 * coalesce (the newest wins) and go out when it completes, always into the
 * slot that does not hold the newest durable state.
 */
#ifndef HASP_STORAGE_HARDSTATE_H
#define HASP_STORAGE_HARDSTATE_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/io.h"

#define HARDSTATE_FILE "hardstate"
#define HARDSTATE_MAGIC 0x3154535048534148ull
#define HARDSTATE_VERSION 1u
#define HARDSTATE_SLOT_SIZE 4096u

/* Top byte of user_data of hard-state ops (storage_poll dispatches on it). */
#define HARDSTATE_USER_DATA_OWNER 0x48ull

struct hard_state {
	uint64_t term;
	uint64_t vote; /* node id voted for in term, 0 for none */
};

struct hardstate {
	struct storage_io io;
	int fd;
	bool direct;
	bool failed;
	int fail_code;
	uint8_t *buf;           /* one aligned slot image being written */
	struct hard_state durable;
	uint64_t durable_seq;   /* sequence number on disk (0: never saved) */
	uint32_t durable_slot;  /* slot holding durable_seq */
	uint64_t saved_seq;     /* last sequence number handed out */
	bool inflight;
	uint64_t inflight_seq;
	struct hard_state inflight_state;
	uint16_t attempt;
	uint8_t ops_pending;
	bool write_done;
	bool need_start;        /* the in-flight save must be (re)submitted */
	bool pending;           /* a newer save waits for the in-flight one */
	uint64_t pending_seq;
	struct hard_state pending_state;
	uint64_t invalid_slots; /* slots found invalid at load (refused) */
	bool created;           /* the file was missing or short at open */
};

/* Opens (creating) the file and loads the newest slot into *loaded ({0, 0}
 * for a new node). Blocking. Returns 0, -HASP_ENOMEM, -HASP_EIO, or
 * -HASP_ECORRUPT when a slot is invalid: a slot's record lies in one sector,
 * so a crash cannot tear it, and an invalid slot may have held the newest
 * vote, which must not be forgotten. */
int hardstate_open(struct hardstate *h, struct storage_io io, struct hard_state *loaded)
	__attribute__((warn_unused_result));
void hardstate_close(struct hardstate *h);

/* Queues a save and returns its sequence number (> 0), or the failure code
 * (negative) once failed. The term never goes down (asserted). */
int64_t hardstate_save(struct hardstate *h, const struct hard_state *hs);

/* The highest sequence number known durable, and its state. */
static inline uint64_t hardstate_durable_seq(const struct hardstate *h) { return h->durable_seq; }
static inline struct hard_state hardstate_durable(const struct hardstate *h) { return h->durable; }

/* Handles one completion whose user_data has HARDSTATE_USER_DATA_OWNER. */
void hardstate_io_done(struct hardstate *h, const struct storage_cqe *cqe);

/* True while a save is in flight or queued. */
static inline bool hardstate_busy(const struct hardstate *h) { return h->inflight || h->pending; }

/* Encodes/decodes one slot (exposed for tests and hasp-waldump). decode
 * returns 0, -HASP_EMAGIC, -HASP_ECORRUPT or -HASP_EVERSION. */
void hardstate_slot_encode(uint8_t *slot, uint64_t seq, const struct hard_state *hs);
int hardstate_slot_decode(const uint8_t *slot, uint64_t *seq, struct hard_state *hs)
	__attribute__((warn_unused_result));

#endif
