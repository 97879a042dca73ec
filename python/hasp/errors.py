"""Exceptions raised by the hasp package, one class per libhasp error code.

Every libhasp call that fails raises a subclass of HaspError whose `code`
is the positive HASP_E* number (include/hasp/errors.h) and whose `name` is
its symbol ("EBUSY"). Refusals by the cluster (busy, not the holder, not
found, compare failed, ...) and local errors (bad name, TTL out of range)
and "no answer" (Timeout) each have their own class; see docs/CLIENT.md
"Python" for the table.
"""
from . import _capi


class HaspError(Exception):
    """A libhasp call failed; `code` is HASP_E* (positive), `name` its symbol."""

    code = 0

    def __init__(self, code=None, message=None):
        if code is None:
            code = self.code
        self.code = abs(code)
        self.name = _capi.strerror_name(self.code)
        super().__init__("%s: %s" % (self.name, message or _capi.strerror(self.code)))


class InvalidArgument(HaspError, ValueError):
    """Refused locally, nothing sent: a bad name, TTL, size or argument."""


class ConfigError(HaspError):
    """The client could not be opened: cluster list, identity or key file."""
    code = _capi.ECONFIG


class Timeout(HaspError, TimeoutError):
    """No answer before the deadline, or a wait not granted in time. For a
    mutation the outcome is unknown."""
    code = _capi.ETIMEDOUT


class LockBusy(HaspError):
    """The lock is held by another (non-blocking acquire). `holder_token` is
    the holder's fencing token."""
    code = _capi.EBUSY

    def __init__(self, code=None, message=None, holder_token=0):
        super().__init__(code, message)
        self.holder_token = holder_token


class NotHolder(HaspError):
    """The token is not the current holder's: the lock was lost."""
    code = _capi.ENOTHOLDER


class NotFound(HaspError, LookupError):
    """No such lock, key, lease or watch."""
    code = _capi.ENOENT


class CompareFailed(HaspError):
    """A compare-and-set found another value or revision."""
    code = _capi.ECOMPARE


class SessionExpired(HaspError):
    code = _capi.ESESSION


class LeaseExpired(HaspError):
    code = _capi.ELEASE


class Forbidden(HaspError, PermissionError):
    """The identity may not do this on this name (docs/SECURITY.md)."""
    code = _capi.EFORBIDDEN


class LockLost(HaspError):
    """The lock's validity can no longer be guaranteed."""
    code = _capi.ELOST


class Canceled(HaspError):
    code = _capi.ECANCELED


class ClosedError(HaspError):
    """The client was closed."""
    code = _capi.ESTATE


_BY_CODE = {c.code: c for c in (Timeout, LockBusy, NotHolder, NotFound, CompareFailed,
                                SessionExpired, LeaseExpired, Forbidden, LockLost,
                                Canceled, ConfigError)}
for _c in (_capi.EINVAL, _capi.ENAME, _capi.ERANGE, _capi.ETOOBIG):
    _BY_CODE[_c] = InvalidArgument


def error_for(rc, **extra):
    """The exception for a negative libhasp result."""
    cls = _BY_CODE.get(abs(rc), HaspError)
    return cls(rc, **extra)


def check(rc):
    """Raises the exception for a negative result; returns rc otherwise."""
    if rc < 0:
        raise error_for(rc)
    return rc
