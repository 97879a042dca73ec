/*
 * Fuzz target: command bytes from a Raft entry. Decode must never read past
 * the buffer or crash; whatever decodes must re-encode to the same bytes and
 * apply to a small state machine without breaking its invariants (apply
 * answers bad fields with typed replies, never asserts on input).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "locks/cmd_codec.h"
#include "locks/locks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct locks sm;
static struct locks_event *events;
static uint64_t index_next;

static void fuzz_init(void)
{
	struct locks_config cfg;

	locks_config_default(&cfg);
	cfg.locks_max = 16;
	cfg.leases_max = 32;
	cfg.sessions_max = 4;
	cfg.waiters_max = 16;
	cfg.kv_entries_max = 8;
	cfg.kv_bytes_max = 2048;
	cfg.locks_per_lease_max = 8;
	cfg.keys_per_lease_max = 4;
	cfg.locks_per_session_max = 8;
	HASP_ASSERT(locks_init(&sm, &cfg) == 0);
	events = calloc(locks_events_max(&cfg), sizeof(*events));
	HASP_ASSERT(events != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct locks_cmd cmd;
	uint8_t again[LOCKS_CMD_SIZE_MAX];

	if (events == NULL)
		fuzz_init();
	/* Decode from an exact-size copy so any overread is caught. */
	uint8_t *copy = malloc(size > 0 ? size : 1);
	HASP_ASSERT(copy != NULL);
	memcpy(copy, data, size);
	if (locks_cmd_decode(copy, size, &cmd) == 0) {
		int n = locks_cmd_encode(&cmd, again, sizeof(again));
		HASP_ASSERT(n >= 0 && (size_t)n == size);
		HASP_ASSERT(memcmp(again, copy, size) == 0);
		/* Keep the session ids of the fuzzed input meaningful: the first
		 * session of this machine has id (1 << 24) | 0. */
		struct locks_result res = { .events = events,
					    .event_count_max = locks_events_max(&sm.cfg) };
		locks_apply(&sm, ++index_next, &cmd, &res);
		HASP_ASSERT(locks_invariants_ok(&sm));
		if (index_next % 4096 == 0) {
			/* Start over now and then so capacities do not stay full. */
			locks_deinit(&sm);
			free(events);
			events = NULL;
			index_next = 0;
		}
	}
	free(copy);
	return 0;
}
