/* Names of the state machine's reply reasons (locks/locks.h), as counters
 * and logs print them: the enum's names in lower case. */
#include "locks/locks.h"

const char *locks_reason_name(uint32_t reason)
{
	static const char *const names[LOCKS_REASON_COUNT] = {
		[LOCKS_REASON_NONE] = "none",
		[LOCKS_REASON_SEQ_TOO_OLD] = "seq_too_old",
		[LOCKS_REASON_SEQ_INVALID] = "seq_invalid",
		[LOCKS_REASON_NO_LOCK] = "no_lock",
		[LOCKS_REASON_TOKEN_MISMATCH] = "token_mismatch",
		[LOCKS_REASON_SELF_HELD] = "self_held",
		[LOCKS_REASON_ALREADY_QUEUED] = "already_queued",
		[LOCKS_REASON_PRIVATE_LEASE] = "private_lease",
		[LOCKS_REASON_NOT_DUE] = "not_due",
		[LOCKS_REASON_LOCKS_FULL] = "locks_full",
		[LOCKS_REASON_LEASES_FULL] = "leases_full",
		[LOCKS_REASON_SESSIONS_FULL] = "sessions_full",
		[LOCKS_REASON_WAITERS_FULL] = "waiters_full",
		[LOCKS_REASON_NAMES_FULL] = "names_full",
		[LOCKS_REASON_KV_FULL] = "kv_full",
		[LOCKS_REASON_KV_BYTES_FULL] = "kv_bytes_full",
		[LOCKS_REASON_LEASE_ITEMS_FULL] = "lease_items_full",
		[LOCKS_REASON_SESSION_LOCKS_FULL] = "session_locks_full",
		[LOCKS_REASON_BAD_FIELDS] = "bad_fields",
		[LOCKS_REASON_STALE_TERM] = "stale_term",
		[LOCKS_REASON_QUEUED_OTHER_LEASE] = "queued_other_lease",
		[LOCKS_REASON_KV_MISSING] = "kv_missing",
		[LOCKS_REASON_KV_MISMATCH] = "kv_mismatch",
		[LOCKS_REASON_NOT_OWNER] = "not_owner",
		[LOCKS_REASON_REQUEST_MISMATCH] = "request_mismatch",
		[LOCKS_REASON_SEQ_JUMP] = "seq_jump",
		[LOCKS_REASON_NONCE_IN_USE] = "nonce_in_use",
		[LOCKS_REASON_OWNER_SESSIONS_FULL] = "owner_sessions_full",
	};

	return reason < LOCKS_REASON_COUNT && names[reason] != NULL ? names[reason] : "unknown";
}
