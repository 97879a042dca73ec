/*
 * Fuzz target for the bytes the state machine takes from outside: Raft entry
 * commands and snapshots.
 *
 * 1. The whole input as one command: decode never reads past the buffer
 *    (it gets an exact-size copy) and whatever decodes re-encodes to the
 *    same bytes.
 * 2. The input as a sequence of frames (u16 length, then command bytes):
 *    every frame that decodes is applied, in order, to a fresh small machine
 *    whose invariants must hold after each apply (bad fields are typed
 *    replies, never assertions). Session ids are (n << 24) | slot, so the
 *    fuzzer can reach real sessions, locks and waiters; the seed corpus
 *    also retries opens by nonce and releases a lock whose session ended.
 *    A duplicate (cached reply, or a retried open) changes nothing: no
 *    revision move, no events.
 * 3. The machine's snapshot restores to a byte-identical snapshot, and the
 *    raw input offered as a snapshot is refused cleanly or restores a
 *    machine that passes its invariants.
 * Each input starts from scratch, so every crash replays from its file.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/bytes.h"
#include "locks/cmd_codec.h"
#include "locks/locks.h"
#include "locks/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_config(struct locks_config *cfg)
{
	locks_config_default(cfg);
	cfg->locks_max = 16;
	cfg->leases_max = 32;
	cfg->sessions_max = 4;
	cfg->waiters_max = 16;
	cfg->kv_entries_max = 8;
	cfg->kv_bytes_max = 2048;
	cfg->lock_name_bytes_max = 256;
	cfg->locks_per_lease_max = 8;
	cfg->keys_per_lease_max = 4;
	cfg->locks_per_session_max = 8;
	cfg->session_window = 4;
}

/* Decodes from an exact-size copy; on success checks the re-encoding. */
static int decode_exact(const uint8_t *data, size_t size, struct locks_cmd *cmd, uint8_t *copy)
{
	uint8_t again[LOCKS_CMD_SIZE_MAX];

	memcpy(copy, data, size);
	int rc = locks_cmd_decode(copy, size, cmd);
	if (rc == 0 && copy[0] == LOCKS_CMD_VERSION) {
		int n = locks_cmd_encode(cmd, again, sizeof(again));
		HASP_ASSERT(n >= 0 && (size_t)n == size);
		HASP_ASSERT(memcmp(again, copy, size) == 0);
	} else if (rc == 0) {
		/* An older entry re-encodes in the current version, to the
		 * same command. */
		struct locks_cmd back;
		int n = locks_cmd_encode(cmd, again, sizeof(again));
		HASP_ASSERT(n > 0 && locks_cmd_decode(again, (size_t)n, &back) == 0);
		HASP_ASSERT(back.op == cmd->op && back.seq == cmd->seq && back.token == cmd->token &&
			    back.name_len == cmd->name_len && back.value_len == cmd->value_len);
	}
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct locks_config cfg;
	struct locks sm, other;
	struct locks_cmd cmd;
	uint8_t *copy = malloc(size > 0 ? size : 1);

	HASP_ASSERT(copy != NULL);
	(void)decode_exact(data, size, &cmd, copy);

	fuzz_config(&cfg);
	HASP_ASSERT(locks_init(&sm, &cfg) == 0);
	HASP_ASSERT(locks_init(&other, &cfg) == 0);
	struct locks_event *events = malloc(sizeof(*events) * locks_events_max(&cfg));
	HASP_ASSERT(events != NULL);
	uint64_t index = 0;
	size_t pos = 0;
	while (size - pos >= 2) {
		size_t len = get_u16le(data + pos);
		pos += 2;
		if (len > size - pos)
			break;
		if (decode_exact(data + pos, len, &cmd, copy) == 0) {
			struct locks_result res = { .events = events,
						    .event_count_max = locks_events_max(&cfg) };
			uint64_t revision = sm.revision;
			locks_apply(&sm, ++index, &cmd, &res);
			HASP_ASSERT(res.event_count <= locks_events_max(&cfg));
			if (res.duplicate) {
				HASP_ASSERT(sm.revision == revision);
				HASP_ASSERT(res.event_count == 0);
			}
			HASP_ASSERT(locks_invariants_ok(&sm));
		}
		pos += len;
	}

	size_t snap_size = locks_snapshot_size(&sm), written, written2;
	uint8_t *snap = malloc(snap_size), *snap2 = malloc(snap_size);
	HASP_ASSERT(snap != NULL && snap2 != NULL);
	HASP_ASSERT(locks_snapshot_write(&sm, snap, snap_size, &written) == 0);
	HASP_ASSERT(locks_snapshot_restore(&other, snap, written) == 0);
	HASP_ASSERT(locks_snapshot_write(&other, snap2, snap_size, &written2) == 0);
	HASP_ASSERT(written == written2 && memcmp(snap, snap2, written) == 0);

	memcpy(copy, data, size);
	if (locks_snapshot_restore(&other, copy, size) == 0)
		HASP_ASSERT(locks_invariants_ok(&other));

	free(snap2);
	free(snap);
	free(events);
	locks_deinit(&other);
	locks_deinit(&sm);
	free(copy);
	return 0;
}
