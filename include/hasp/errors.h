/*
 * Error codes of the hasp edges and the client library.
 *
 * Edge functions return 0 or a negative code, -HASP_E*. One X-macro table
 * gives each code its name and message; hasp_strerror() reads it. The pure
 * cores (raft/, locks/) do not return errors: a refusal there is data (a
 * status in the result).
 *
 * Codes are stable once released: append new ones at the end of a group.
 */
#ifndef HASP_ERRORS_H
#define HASP_ERRORS_H

#define HASP_ERROR_TABLE(X)                                                   \
	X(EINVAL, 1, "invalid argument")                                      \
	X(ENOMEM, 2, "out of memory")                                         \
	X(EIO, 3, "I/O error")                                                \
	X(ENOSPC, 4, "no space left on device")                               \
	X(ECORRUPT, 5, "data is corrupt (checksum or structure)")             \
	X(ETRUNCATED, 6, "input is truncated")                                \
	X(ETOOBIG, 7, "input is larger than the limit")                       \
	X(EMAGIC, 8, "bad magic number")                                      \
	X(EVERSION, 9, "unsupported version")                                 \
	X(EOPCODE, 10, "unknown opcode")                                      \
	X(ERANGE, 11, "value out of range")                                   \
	X(ENAME, 12, "invalid name")                                          \
	X(EFLAGS, 13, "unknown flags set")                                    \
	X(ELENGTH, 14, "length field disagrees with the data")                \
	X(EFULL, 15, "capacity exhausted")                                    \
	X(ENOENT, 16, "not found")                                            \
	X(EEXIST, 17, "already exists")                                       \
	X(EBUSY, 18, "busy")                                                  \
	X(EAGAIN, 19, "try again")                                            \
	X(ETIMEDOUT, 20, "timed out")                                         \
	X(ENOTLEADER, 21, "not the leader")                                   \
	X(ECLUSTER, 22, "message for another cluster")                        \
	X(ENOTMEMBER, 23, "sender is not a member")                           \
	X(ECONFIG, 24, "invalid configuration")                               \
	X(ESHUTDOWN, 25, "shutting down")                                     \
	X(ESYS, 26, "system call failed (see errno in the log)")              \
	X(ENOTSUP, 27, "not supported")                                       \
	X(ESTATE, 28, "operation not allowed in this state")                  \
	X(ENOTHOLDER, 29, "not the holder of the lock")                       \
	X(ESTALE, 30, "fencing token is stale")                               \
	X(ECOMPARE, 31, "compare failed: the key is not as expected")         \
	X(ESESSION, 32, "session expired")                                    \
	X(ELEASE, 33, "lease expired or unknown")                             \
	X(EFORBIDDEN, 34, "forbidden for this identity")                      \
	X(EREFUSED, 35, "request refused by the cluster as malformed")        \
	X(ECANCELED, 36, "canceled")                                          \
	X(ELOST, 37, "lock lost: its validity can no longer be guaranteed")   \
	X(EPERM, 38, "not permitted without a valid credential")

enum hasp_error {
#define HASP_ERROR_ENUM(name, value, msg) HASP_##name = value,
	HASP_ERROR_TABLE(HASP_ERROR_ENUM)
#undef HASP_ERROR_ENUM
};

/* The message of a code, given as 0, HASP_E* or -HASP_E*. Never NULL. */
const char *hasp_strerror(int code);

/* The symbolic name ("EIO") of a code, given as HASP_E* or -HASP_E*. */
const char *hasp_strerror_name(int code);

#endif
