"""The one module that calls libhasp (include/hasp/client.h) through ctypes.

Everything above this module sees one convention: a call returns 0 on
success (the outcome in its out-structures) or a negative -HASP_E* code.
libhasp.so.1 returns exactly that. libhasp.so.0 returned the reply's status
(>= 0) when a node answered; `_rc()` maps those statuses to the same codes
(OK and GRANTED to 0, BUSY to -HASP_EBUSY, ...), so the rest of the package
does not know which library it runs on.

The library is found, in order: $HASP_LIBRARY (a path), then the system's
libhasp (ldconfig), newest ABI first. Structures the library fills or reads
are allocated with spare room at their end, so that a field appended by a
later minor version is written into memory we own.
"""
import ctypes
import ctypes.util
import os

NAME_BUF = 129
VALUE_MAX = 1024
_SPARE = 256  # bytes after every structure handed to the library

# include/hasp/errors.h (stable numbers; 31.. arrived with libhasp.so.1).
EINVAL, ENOMEM, ECORRUPT, ETOOBIG, EVERSION, EOPCODE = 1, 2, 5, 7, 9, 10
ERANGE, ENAME, EFULL, ENOENT, EBUSY, EAGAIN, ETIMEDOUT = 11, 12, 15, 16, 18, 19, 20
ENOTLEADER, ECONFIG, ESYS, ESTATE, ENOTHOLDER = 21, 24, 26, 28, 29
ECOMPARE, ESESSION, ELEASE, EFORBIDDEN, EREFUSED, ECANCELED, ELOST = 31, 32, 33, 34, 35, 36, 37

_NEW_MESSAGES = {  # codes a libhasp.so.0 has no string for
    ECOMPARE: "compare failed: the key is not as expected",
    ESESSION: "session expired",
    ELEASE: "lease expired or unknown",
    EFORBIDDEN: "forbidden for this identity",
    EREFUSED: "request refused by the cluster as malformed",
    ECANCELED: "canceled",
    ELOST: "lock lost: its validity can no longer be guaranteed",
}

# include/hasp/types.h: reply status -> error, as hasp_status_error() does.
_STATUS_OK, _STATUS_GRANTED = 0, 1
_STATUS_ERROR = {
    2: EAGAIN, 3: EBUSY, 4: ENOTHOLDER, 5: ENOTLEADER, 6: ENOENT, 7: ECOMPARE,
    8: ESESSION, 9: ELEASE, 10: EFULL, 11: EREFUSED, 12: EVERSION, 13: EOPCODE,
    14: ENAME, 15: ERANGE, 16: ETOOBIG, 17: EAGAIN, 18: EAGAIN, 19: EFORBIDDEN,
}

EVENT_TYPES = {1: "LOCK_RELEASED", 2: "LOCK_GRANTED", 3: "KV_PUT", 4: "KV_DELETED", 5: "RESYNC"}

u8, u32, u64, size_t = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t
c_bool, c_char_p, c_void_p, c_int = ctypes.c_bool, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int


class Event(ctypes.Structure):
    _fields_ = [("type", u8), ("revision", u64), ("seq", u64), ("sub", u32),
                ("name", ctypes.c_char * NAME_BUF), ("value_size", size_t),
                ("value", u8 * VALUE_MAX)]


EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.POINTER(Event), c_void_p)


class Config(ctypes.Structure):
    _fields_ = [("cluster", c_char_p), ("request_timeout_ms", u32), ("backoff_ms", u32),
                ("backoff_max_ms", u32), ("deadline_ms", u32), ("session_ttl_ms", u32),
                ("drift_margin_ms", u32), ("drift_ppm", u32), ("wait_recheck_ms", u32),
                ("event_fn", c_void_p), ("event_arg", c_void_p), ("nonce_seed", u64),
                ("identity", c_char_p), ("key_file", c_char_p),
                # Since libhasp.so.1's lock loss (read as 0 from an older one:
                # hasp_client_config_default leaves them in our spare room).
                ("lock_lost_fn", c_void_p), ("lock_lost_arg", c_void_p),
                ("lock_lost_margin_ms", u32)]


class Lock(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * NAME_BUF), ("token", u64), ("lease_id", u64),
                ("ttl_ms", u32), ("valid_until_ns", u64)]


class AcquireOpts(ctypes.Structure):
    _fields_ = [("ttl_ms", u32), ("lease_id", u64), ("wait", c_bool), ("wait_timeout_ms", u32),
                ("auto_renew", c_bool)]  # ignored by a libhasp without lock loss


class LockInfo(ctypes.Structure):
    _fields_ = [("holder_session_id", u64), ("token", u64), ("lease_id", u64),
                ("ttl_remaining_ms", u32), ("waiter_count", u32), ("ours", c_bool)]


class LeaseOut(ctypes.Structure):
    _fields_ = [("lease_id", u64), ("ttl_ms", u32), ("valid_until_ns", u64)]


class KvValue(ctypes.Structure):
    _fields_ = [("revision", u64), ("lease_id", u64), ("value_size", size_t),
                ("value", u8 * VALUE_MAX)]


class KvCas(ctypes.Structure):
    _fields_ = [("compare_value", c_bool), ("expected_revision", u64),
                ("expected_value", c_void_p), ("expected_value_size", size_t),
                ("value", c_void_p), ("value_size", size_t), ("lease_id", u64)]


class KvEntry(ctypes.Structure):
    _fields_ = [("key", c_char_p), ("value", ctypes.POINTER(u8)), ("value_size", size_t),
                ("revision", u64)]


RANGE_FN = ctypes.CFUNCTYPE(c_int, ctypes.POINTER(KvEntry), c_void_p)


STATS_FIELDS = (  # struct hasp_client_stats, in order
    "tx_requests", "tx_retransmits", "rx_replies", "rx_duplicates", "rx_late", "rx_stray",
    "rx_malformed", "rx_auth_bad", "rx_unknown_source", "redirects", "timeouts",
    "session_opens", "events", "events_dropped", "events_gaps", "wait_rechecks",
    "wait_cancels", "wait_grants_released",
    "lock_renews", "lock_checks", "locks_lost", "locks_unwatched")  # 0 before lock loss


class Stats(ctypes.Structure):
    _fields_ = [(n, u64) for n in STATS_FIELDS]


class LockLoss(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * NAME_BUF), ("token", u64), ("lease_id", u64),
                ("valid_until_ns", u64), ("reason", c_int)]


LOST_FN = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(LockLoss), c_void_p)


class Fence(ctypes.Structure):
    _fields_ = [("highest_token", u64)]


class Result(ctypes.Structure):  # struct hasp_result (libhasp.so.1's asynchronous core)
    _fields_ = [("id", u64), ("op", u8), ("rc", c_int), ("lock", Lock), ("info", LockInfo),
                ("lease", LeaseOut), ("revision", u64), ("value", KvValue)]


DONE_FN = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(Result), c_void_p)


def new(cls):
    """A zeroed `cls` with spare room after it (see the module comment)."""
    buf = (u8 * (ctypes.sizeof(cls) + _SPARE))()
    return cls.from_buffer(buf)


def _load():
    path = os.environ.get("HASP_LIBRARY")
    candidates = [path] if path else []
    found = ctypes.util.find_library("hasp")
    candidates += ["libhasp.so.1"] + ([found] if found else []) + ["libhasp.so.0"]
    errors = []
    for name in candidates:
        try:
            return ctypes.CDLL(name, use_errno=True)
        except OSError as e:
            errors.append(str(e))
    raise ImportError("libhasp not found (install it with `meson install`, or set "
                      "HASP_LIBRARY to libhasp.so): " + "; ".join(errors))


lib = _load()
# libhasp.so.1 returns 0 or -HASP_E* everywhere; it exports hasp_status_error.
RETURNS_ERRORS = hasattr(lib, "hasp_status_error")

_P = ctypes.POINTER
_protos = {
    "hasp_client_config_default": (None, [c_void_p]),
    "hasp_client_open": (c_int, [_P(c_void_p), c_void_p]),
    "hasp_client_close": (None, [c_void_p]),
    "hasp_client_set_deadline": (c_int, [c_void_p, u32]),
    "hasp_client_connect": (c_int, [c_void_p]),
    "hasp_client_session_id": (u64, [c_void_p]),
    "hasp_client_stats_get": (None, [c_void_p, c_void_p]),
    "hasp_client_acquire": (c_int, [c_void_p, c_char_p, c_void_p, c_void_p]),
    "hasp_client_release": (c_int, [c_void_p, c_char_p, u64]),
    "hasp_client_renew": (c_int, [c_void_p, c_char_p, u64, u32, c_void_p]),
    "hasp_client_check": (c_int, [c_void_p, c_char_p, u64]),
    "hasp_client_lock_read": (c_int, [c_void_p, c_char_p, c_void_p]),
    "hasp_client_lock_valid_until": (u64, [c_void_p, c_void_p]),
    "hasp_client_lock_safe": (c_bool, [c_void_p, c_void_p, u32]),
    "hasp_client_lease_grant": (c_int, [c_void_p, u32, c_void_p]),
    "hasp_client_lease_keepalive": (c_int, [c_void_p, u64, c_void_p]),
    "hasp_client_lease_revoke": (c_int, [c_void_p, u64]),
    "hasp_client_keepalive_start": (c_int, [c_void_p]),
    "hasp_client_keepalive_stop": (None, [c_void_p]),
    "hasp_client_watch": (c_int, [c_void_p, c_char_p, c_bool]),
    "hasp_client_unwatch": (c_int, [c_void_p, c_char_p, c_bool]),
    "hasp_client_next_event": (c_int, [c_void_p, c_void_p, u32]),
    "hasp_client_kv_put": (c_int, [c_void_p, c_char_p, c_void_p, size_t, u64, _P(u64)]),
    "hasp_client_kv_get": (c_int, [c_void_p, c_char_p, c_void_p]),
    "hasp_client_kv_delete": (c_int, [c_void_p, c_char_p, _P(u64)]),
    "hasp_client_kv_cas": (c_int, [c_void_p, c_char_p, c_void_p, _P(u64)]),
    "hasp_client_kv_range": (c_int, [c_void_p, c_char_p, u32, RANGE_FN, c_void_p]),
    "hasp_strerror": (c_char_p, [c_int]),
    "hasp_strerror_name": (c_char_p, [c_int]),
    "hasp_fence_admit": (c_bool, [c_void_p, u64]),
}
# libhasp 1.4: a missed last event told on demand (docs/CLIENT.md "The last
# event").
HAS_WATCH_PROGRESS = hasattr(lib, "hasp_client_watch_progress")
if HAS_WATCH_PROGRESS:
    _protos["hasp_client_watch_progress"] = (c_int, [c_void_p])
# The asynchronous core (libhasp.so.1): one pollable fd, a next deadline,
# completions through a callback (docs/CLIENT.md "Python and asyncio").
HAS_ASYNC = hasattr(lib, "hasp_client_acquire_async")
if HAS_ASYNC:
    _protos.update({
        "hasp_client_fd": (c_int, [c_void_p]),
        "hasp_client_timeout_ms": (c_int, [c_void_p]),
        "hasp_client_process": (c_int, [c_void_p, _P(u32)]),
        "hasp_client_cancel": (c_int, [c_void_p, u64]),
        "hasp_client_cancel_wait": (c_int, [c_void_p, c_char_p]),
        "hasp_client_acquire_async": (c_int, [c_void_p, c_char_p, c_void_p, DONE_FN, c_void_p,
                                              _P(u64)]),
    })
# Each call's asynchronous form, when the loaded library has it (libhasp
# 1.0 has all but connect, watch, unwatch and kv_range, which 1.1 added):
# the asyncio face runs a call on the core when its name is in ASYNC, and in
# an executor thread otherwise. The arguments before (fn, arg, id).
_ASYNC_ARGS = {
    "release": [c_char_p, u64],
    "renew": [c_char_p, u64, u32],
    "check": [c_char_p, u64],
    "lock_read": [c_char_p],
    "lease_grant": [u32],
    "lease_keepalive": [u64],
    "lease_revoke": [u64],
    "connect": [],
    "watch": [c_char_p, c_bool],
    "unwatch": [c_char_p, c_bool],
    "kv_range": [c_char_p, u32, RANGE_FN, c_void_p],
    "kv_put": [c_char_p, c_void_p, size_t, u64],
    "kv_get": [c_char_p],
    "kv_delete": [c_char_p],
    "kv_cas": [c_char_p, c_void_p],
    "watch_progress": [],
}
ASYNC = {n for n in _ASYNC_ARGS if HAS_ASYNC and hasattr(lib, "hasp_client_%s_async" % n)}
for _name in ASYNC:
    _protos["hasp_client_%s_async" % _name] = (
        c_int, [c_void_p] + _ASYNC_ARGS[_name] + [DONE_FN, c_void_p, _P(u64)])
for _name, (_res, _args) in _protos.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args

# The calls whose int result follows the return convention (module comment).
_CONVENTION = {n for n, (r, _) in _protos.items()
               if r is c_int and n.startswith("hasp_client_")} - {
                   "hasp_client_fd", "hasp_client_timeout_ms"}


def _rc(rc):
    """libhasp.so.0's result -> libhasp.so.1's: 0 or -HASP_E*."""
    if RETURNS_ERRORS or rc < 0:
        return rc
    if rc in (_STATUS_OK, _STATUS_GRANTED):
        return 0
    return -_STATUS_ERROR.get(rc, ECORRUPT)


def call(name, *args):
    """Calls hasp_<name>; the result in the one convention above."""
    rc = getattr(lib, "hasp_" + name)(*args)
    return _rc(rc) if "hasp_" + name in _CONVENTION else rc


def strerror(code):
    """The message of -HASP_E* or HASP_E*."""
    code = abs(code)
    msg = lib.hasp_strerror(-code)
    text = msg.decode() if msg else ""
    if code in _NEW_MESSAGES and (not text or "unknown" in text):
        return _NEW_MESSAGES[code]
    return text or "error %d" % code


def strerror_name(code):
    """The symbolic name ("ETIMEDOUT") of -HASP_E* or HASP_E*."""
    name = lib.hasp_strerror_name(-abs(code)).decode()
    if name == "EUNKNOWN":
        known = {v: k for k, v in globals().items() if k.startswith("E") and isinstance(v, int)}
        name = known.get(abs(code), name)
    return name
