/*
 * Fuzz target: drives one raft node (id 1 of a 3-voter cluster) with a
 * script decoded from the fuzz bytes: ticks, proposals, durability reports,
 * reads, transfers, configuration changes, snapshots, and messages decoded
 * by the strict codec from the bytes themselves. Any assertion (including
 * raft_invariants_ok after each step) or sanitizer report is a bug: bad
 * input must be counted and dropped, never trusted.
 *
 * Script: repeated [op u8][argument bytes]; op & 7 selects the event, op's
 * high bit forces a decoded message's cluster id and addressee to ours
 * (the fuzzer could not guess them otherwise).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/prng.h"
#include "raft/msg_codec.h"
#include "raft/raft.h"

#define FUZZ_CLUSTER 0xf00df00dull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct raft r;
	struct prng prng;
	struct raft_config cfg;
	struct raft_persisted_state ps;
	struct raft_update up;
	struct raft_entry entries[64];
	struct byte_reader rd;
	static uint8_t snap_image[512];

	raft_config_default(&cfg, FUZZ_CLUSTER, 1);
	cfg.log_window = 64;
	cfg.snapshot_threshold = 8;
	cfg.snapshot_trailing = 4;
	cfg.entry_bytes_max = 100;
	cfg.mtu = 600;
	cfg.reads_max = 4;
	cfg.inflight_max = 2;
	prng_seed(&prng, 1);
	if (raft_init(&r, &cfg, &prng) != 0)
		abort();
	memset(&ps, 0, sizeof(ps));
	ps.snap_conf.count = 3;
	for (uint32_t i = 0; i < 3; i++) {
		ps.snap_conf.members[i].id = i + 1;
		ps.snap_conf.members[i].role = RAFT_VOTER;
	}
	if (raft_restore(&r, &ps) != 0)
		abort();

	byte_reader_init(&rd, data, size);
	for (int steps = 0; steps < 512 && rd.left > 0; steps++) {
		uint8_t op = byte_reader_u8(&rd);
		struct raft_event ev;
		struct raft_msg m;
		struct raft_buf buf;
		memset(&ev, 0, sizeof(ev));
		switch (op & 7) {
		case 0:
			ev.type = RAFT_EVENT_TICK;
			break;
		case 1: {
			uint16_t len = byte_reader_u16(&rd);
			if (len > rd.left)
				len = (uint16_t)rd.left;
			const uint8_t *bytes = byte_reader_take(&rd, len);
			/* Copy to an exact-size buffer so ASan sees any overread. */
			uint8_t *copy = malloc(len > 0 ? len : 1);
			if (len > 0)
				memcpy(copy, bytes, len);
			int rc = msg_codec_decode(&m, entries, 64, copy, len);
			if (rc == 0) {
				if (op & 0x80) {
					m.cluster_id = FUZZ_CLUSTER;
					m.to = 1;
					m.from = 2 + (m.from & 1);
				}
				ev.type = RAFT_EVENT_RECEIVE;
				ev.msg = &m;
				raft_step(&r, &ev, &up);
			}
			free(copy);
			continue;
		}
		case 2: {
			uint8_t len = byte_reader_u8(&rd);
			if (len > rd.left)
				len = (uint8_t)rd.left;
			buf.data = byte_reader_take(&rd, len);
			buf.size = len;
			ev.type = RAFT_EVENT_PROPOSE;
			ev.propose.bufs = &buf;
			ev.propose.count = 1;
			break;
		}
		case 3:
			ev.type = RAFT_EVENT_PERSISTED;
			ev.persisted.index = raft_last_index(&r) - (op >> 3 & 3);
			ev.persisted.term = raft_term_at(&r, ev.persisted.index);
			break;
		case 4:
			ev.type = RAFT_EVENT_READ_INDEX;
			ev.read.ctx = op;
			break;
		case 5:
			ev.type = RAFT_EVENT_TRANSFER;
			ev.transfer.target = op >> 3 & 3;
			break;
		case 6:
			ev.type = RAFT_EVENT_CONF_CHANGE;
			ev.conf.op = op >> 3 & 3;
			ev.conf.id = 1 + (op >> 5 & 3);
			break;
		default:
			ev.type = RAFT_EVENT_SNAPSHOT;
			ev.snapshot.index = r.applied;
			ev.snapshot.data = snap_image;
			ev.snapshot.size = 1 + (op >> 3);
			break;
		}
		raft_step(&r, &ev, &up);
		/* What the update says must be encodable within the MTU. */
		for (uint32_t i = 0; i < up.msg_count; i++) {
			uint8_t out[600];
			int n = msg_codec_encode(&up.msgs[i], out, sizeof(out));
			if (n <= 0 || (uint32_t)n > cfg.mtu - RAFT_DATAGRAM_OVERHEAD)
				abort();
		}
	}
	raft_deinit(&r);
	return 0;
}
