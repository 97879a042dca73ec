"""The blocking client: locks with fencing tokens, watches, KV.

A thin layer over libhasp through hasp._capi: the protocol, retries, leader
finding and the lease-validity arithmetic are libhasp's (one implementation);
this module adds Python's shapes (context managers, iterators, exceptions),
a per-name mutex between the threads of one client, and, only on a libhasp
without lock loss (libhasp.so.0), a renewer thread per lock and a monitor
of the validity deadlines (docs/CLIENT.md "The lock-loss contract").
"""
import ctypes
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Optional

from . import _capi
from .errors import ClosedError, ConfigError, HaspError, InvalidArgument, LockBusy, NotHolder, \
    Timeout, check

_byref = ctypes.byref


def _ms(seconds, what, allow_zero=True):
    """Seconds (float) -> whole milliseconds for libhasp, refused if negative."""
    if seconds is None:
        return 0
    ms = int(round(float(seconds) * 1000))
    if ms < 0 or (ms == 0 and not allow_zero) or ms > 0xFFFFFFFF:
        raise InvalidArgument(_capi.ERANGE, "%s out of range: %r s" % (what, seconds))
    return ms


def _bytes(text, what):
    if isinstance(text, bytes):
        return text
    if not isinstance(text, str):
        raise InvalidArgument(_capi.EINVAL, "%s must be str or bytes" % what)
    return text.encode()


@dataclass(frozen=True)
class Event:
    """A pushed change. `type` is LOCK_RELEASED, LOCK_GRANTED, KV_PUT,
    KV_DELETED or RESYNC (events may have been lost: re-read what you
    watch). For lock events `revision` is the fencing token."""
    type: str
    name: str
    revision: int
    value: Optional[bytes]
    seq: int
    sub: int


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes
    revision: int
    lease_id: int = 0


@dataclass(frozen=True)
class LockInfo:
    token: int
    holder_session_id: int
    lease_id: int
    ttl_remaining: float
    waiters: int
    ours: bool


def _key_value(key, v):
    """A KeyValue from a struct hasp_kv_value."""
    return KeyValue(key, bytes(v.value[:v.value_size]), v.revision, v.lease_id)


def _lock_info(info):
    """A LockInfo from a struct hasp_lock_info."""
    return LockInfo(info.token, info.holder_session_id, info.lease_id,
                    info.ttl_remaining_ms / 1000.0, info.waiter_count, bool(info.ours))


class _RangeCollector:
    """A hasp_client_range_fn that gathers the entries of a range. An
    exception in it stops the walk (ctypes would print and drop it) and
    is raised by result(). Keep it until libhasp is done with `fn`."""

    def __init__(self):
        self.out = []
        self.error = None
        self.fn = _capi.RANGE_FN(self._each)

    def _each(self, entry, _arg):
        try:
            e = entry.contents
            self.out.append(KeyValue(e.key.decode(), bytes(e.value[:e.value_size]), e.revision))
            return 0
        except BaseException as exc:  # raised again by result()
            self.error = exc
            return 1

    def result(self, rc):
        if self.error is not None:
            raise self.error
        check(rc)
        return self.out


class Client:
    """A connection to a hasp cluster (one libhasp client, one session).

    cluster: "ip:port,ip:port,..." or $HASP_CLUSTER. identity/key_file:
    given, or libhasp reads $HASP_ID and $HASP_KEY_FILE. deadline bounds
    each request (seconds). on_lock_lost(lock) is the default lock-lost
    callback of the locks this client takes. Safe to share between threads.
    """

    def __init__(self, cluster: Optional[str] = None, identity: Optional[str] = None,
                 key_file: Optional[str] = None, *, deadline: float = 5.0,
                 session_ttl: float = 10.0, drift_margin: Optional[float] = None,
                 drift_ppm: Optional[int] = None, keepalive: bool = True,
                 on_lock_lost: Optional[Callable[["Lock"], None]] = None,
                 lost_margin: float = 0.1):
        cluster = cluster or os.environ.get("HASP_CLUSTER")
        if not cluster:
            raise ConfigError(message="no cluster: pass cluster= or set HASP_CLUSTER")
        self._cfg = _capi.new(_capi.Config)
        _capi.call("client_config_default", _byref(self._cfg))
        self._keep = [_bytes(cluster, "cluster")]
        self._cfg.cluster = self._keep[0]
        if identity is not None:
            self._keep.append(_bytes(identity, "identity"))
            self._cfg.identity = self._keep[-1]
        if key_file is not None:
            self._keep.append(os.fsencode(key_file))
            self._cfg.key_file = self._keep[-1]
        self._cfg.deadline_ms = _ms(deadline, "deadline", allow_zero=False)
        self._cfg.session_ttl_ms = _ms(session_ttl, "session_ttl", allow_zero=False)
        if drift_margin is not None:
            self._cfg.drift_margin_ms = _ms(drift_margin, "drift_margin")
        if drift_ppm is not None:
            if not 0 <= int(drift_ppm) <= 1_000_000:
                raise InvalidArgument(_capi.ERANGE, "drift_ppm out of range: %r" % drift_ppm)
            self._cfg.drift_ppm = int(drift_ppm)
        # libhasp with lock loss (its default margin is not 0) watches and
        # renews held locks itself; an older one leaves it to _watchdog and
        # the renewer threads below.
        self._lib_loss = self._cfg.lock_lost_margin_ms != 0
        self.lost_margin = float(lost_margin)
        if self._lib_loss:
            self._lost_fn = _capi.LOST_FN(self._on_lib_lost)
            self._cfg.lock_lost_fn = ctypes.cast(self._lost_fn, ctypes.c_void_p)
            self._cfg.lock_lost_margin_ms = _ms(lost_margin, "lost_margin")
        self._h = ctypes.c_void_p()
        check(_capi.call("client_open", _byref(self._h), _byref(self._cfg)))
        self.on_lock_lost = on_lock_lost
        self._mu = threading.Lock()
        self._closed = False
        self._locks = set()
        self._monitor = None
        self._wake = threading.Condition(self._mu)
        self._pump = threading.Lock()  # one thread reads events for all watches
        self._watches = []
        # Called after a pump handed events to the watches: the asyncio
        # face wakes its tasks when another thread pumped.
        self._event_listeners = []
        # Threads of one process share the client's session, and the cluster
        # grants a lock to a session (a second ACQUIRE by the holder session
        # is a re-grant): so threads take a local mutex per name first, as
        # Curator's InterProcessMutex does across a JVM's threads.
        self._local = {}  # name -> [threading.Lock, users, holder Lock or None]
        # name -> functions called (on the releasing thread) each time the
        # name's local mutex is released: the asyncio tasks waiting for it.
        self._local_wakers = {}
        if keepalive:
            try:
                check(_capi.call("client_keepalive_start", self._h))
            except HaspError:
                _capi.call("client_close", self._h)
                raise

    # ---- lifecycle ----

    def _handle(self):
        if self._closed:
            raise ClosedError(message="the client is closed")
        return self._h

    def connect(self):
        """Opens the session now (otherwise the first request does)."""
        check(_capi.call("client_connect", self._handle()))

    @property
    def session_id(self) -> int:
        return _capi.call("client_session_id", self._handle())

    def stats(self) -> dict:
        """libhasp's counters of this client (struct hasp_client_stats)."""
        out = _capi.new(_capi.Stats)
        _capi.call("client_stats_get", self._handle(), _byref(out))
        return {n: getattr(out, n) for n in _capi.STATS_FIELDS}

    def close(self):
        """Releases the locks taken through this client that are still held
        (best effort), stops its threads and ends the session."""
        with self._mu:
            if self._closed:
                return
            locks = list(self._locks)
        for lock in locks:
            try:
                Lock.release(lock)  # blocking also for an AsyncLock
            except HaspError:
                pass
        for w in list(self._watches):
            w.close()
        with self._mu:
            self._closed = True
            self._wake.notify_all()
        if self._monitor is not None:
            self._monitor.join()
        _capi.call("client_keepalive_stop", self._h)
        _capi.call("client_close", self._h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- locks ----

    def lock(self, name: str, ttl: float = 10.0, *, blocking: bool = True,
             timeout: Optional[float] = None, renew: bool = True,
             lease_id: int = 0,
             on_lost: Optional[Callable[["Lock"], None]] = None) -> "Lock":
        """Acquires `name` and returns the held Lock (a context manager that
        releases it on exit).

        blocking=False: TRY mode, raises LockBusy (holder_token set) when
        held. blocking=True: joins the FIFO queue; `timeout` (seconds, None:
        no limit) bounds the wait, then Timeout is raised and the queue entry
        is cancelled. ttl: the lock's own TTL; with renew=True it is renewed
        every ttl/3 while it is held (Redisson's watchdog: libhasp's
        auto_renew, or a thread of this package on an older libhasp), else it
        expires after ttl. lease_id: put the lock on a lease instead (no ttl,
        no renewal). on_lost(lock) (default: the client's on_lock_lost) is
        called once when the lock's validity comes within the client's
        lost_margin of its end or the cluster says it is no longer held
        (libhasp's lock-loss callback, on its keepalive thread);
        lock.safe() is False from then on.
        """
        return self._acquire_blocking(Lock, name, ttl, blocking=blocking, timeout=timeout,
                                      renew=renew, lease_id=lease_id, on_lost=on_lost)

    def _acquire_blocking(self, cls, name, ttl, blocking=True, timeout=None, renew=True,
                          lease_id=0, on_lost=None):
        """lock(), the held lock an instance of `cls` (the asyncio face's
        AsyncLock when it runs this in an executor thread)."""
        h = self._handle()
        key = _bytes(name, "name")
        opts, renew = self._acquire_opts(ttl, blocking, timeout, lease_id, renew)
        opts.auto_renew = renew and self._lib_loss
        start = time.monotonic()
        local = self._local_enter(key, blocking, timeout)
        if blocking and timeout is not None:
            left = max(0.001, timeout - (time.monotonic() - start))
            opts.wait_timeout_ms = max(1, _ms(left, "timeout"))
        raw = _capi.new(_capi.Lock)
        try:
            rc = _capi.call("client_acquire", h, key, _byref(opts), _byref(raw))
            if rc == -_capi.EBUSY:
                raise LockBusy(rc, holder_token=raw.token)
            check(rc)
        except BaseException:
            self._local_exit(key)
            raise
        return self._register(raw, renew, on_lost, local, cls)

    def _local_enter(self, key, blocking, timeout):
        with self._mu:
            local = self._local.setdefault(key, [threading.Lock(), 0, None])
            local[1] += 1
        ok = local[0].acquire(blocking, -1 if timeout is None or not blocking else timeout)
        if not ok:
            holder = local[2]
            self._local_exit(key, locked=False)
            if not blocking:
                raise LockBusy(_capi.EBUSY, holder_token=holder.token if holder else 0)
            raise Timeout(_capi.ETIMEDOUT, "held by another thread of this client")
        return local

    def _local_exit(self, key, holder=None, locked=True):
        """Drops one user of the name's local mutex (and releases the mutex
        when `locked`); with `holder`, only if that Lock still owns it."""
        with self._mu:
            local = self._local[key]
            if holder is not None:
                if local[2] is not holder:
                    return
                local[2] = None
            local[1] -= 1
            if local[1] == 0:
                del self._local[key]
        if locked:
            local[0].release()
            with self._mu:
                wakers = list(self._local_wakers.get(key, ()))
            for wake in wakers:
                wake()

    def _local_waker(self, key, wake, add):
        """Adds (add=True) or removes `wake`, called at each release of
        the name's local mutex until removed."""
        with self._mu:
            wakers = self._local_wakers.setdefault(key, set())
            if add:
                wakers.add(wake)
            else:
                wakers.discard(wake)
                if not wakers:
                    del self._local_wakers[key]

    @staticmethod
    def _acquire_opts(ttl, blocking, timeout, lease_id, renew):
        opts = _capi.new(_capi.AcquireOpts)
        if lease_id:
            opts.lease_id = int(lease_id)
            renew = False
        else:
            opts.ttl_ms = _ms(ttl, "ttl", allow_zero=False)
        opts.wait = bool(blocking)
        if blocking and timeout is not None:
            # 0 means "no limit" to libhasp: a zero timeout waits 1 ms.
            opts.wait_timeout_ms = max(1, _ms(timeout, "timeout"))
        elif not blocking and timeout is not None:
            raise InvalidArgument(_capi.EINVAL, "timeout needs blocking=True")
        return opts, renew

    def _register(self, raw, renew, on_lost, local, cls=None):
        """A granted lock (a `cls`, default Lock): owns the name's local
        mutex `local`; without libhasp's lock loss, watched by the monitor
        and renewed by its own thread when `renew`."""
        lock = (cls or Lock)(self, raw, on_lost=on_lost or self.on_lock_lost)
        with self._mu:
            local[2] = lock
            self._locks.add(lock)
            if self._monitor is None and not self._lib_loss:
                self._monitor = threading.Thread(target=self._watchdog, name="hasp-monitor",
                                                 daemon=True)
                self._monitor.start()
            self._wake.notify_all()
        if renew and not self._lib_loss:
            lock._start_renewer()
        return lock

    def _on_lib_lost(self, _client, loss, _arg):
        """libhasp's lock_lost_fn, on its keepalive thread."""
        lo = loss.contents
        with self._mu:
            hit = [l for l in self._locks if l.token == lo.token and l.name.encode() == lo.name]
        for lock in hit:
            lock._mark_lost(_capi.strerror_name(lo.reason))

    def try_lock(self, name: str, ttl: float = 10.0, **kw) -> Optional["Lock"]:
        """lock(blocking=False), None instead of LockBusy."""
        try:
            return self.lock(name, ttl, blocking=False, **kw)
        except LockBusy:
            return None

    def read_lock(self, name: str) -> Optional[LockInfo]:
        """The lock's holder, or None when it is free."""
        info = _capi.new(_capi.LockInfo)
        rc = _capi.call("client_lock_read", self._handle(), _bytes(name, "name"), _byref(info))
        if rc == -_capi.ENOENT:
            return None
        check(rc)
        return _lock_info(info)

    def check_token(self, name: str, token: int) -> bool:
        """Asks the cluster whether `token` holds `name` now (Chubby's
        sequencer check)."""
        rc = _capi.call("client_check", self._handle(), _bytes(name, "name"), int(token))
        if rc == -_capi.ENOTHOLDER:
            return False
        check(rc)
        return True

    def _forget(self, lock):
        with self._mu:
            self._locks.discard(lock)
        self._local_exit(lock.name.encode(), lock)

    def _watchdog(self):
        """Marks locks lost when their validity comes within their margin of
        its end. No I/O here: the renewers do the renewing."""
        while True:
            with self._mu:
                if self._closed:
                    return
                locks = list(self._locks)
                tick = min(0.05, max(0.002, self.lost_margin / 4))
            for lock in locks:
                if not lock._lost and not lock._safe_raw(self.lost_margin):
                    lock._mark_lost("ETIMEDOUT")
            with self._mu:
                if not self._closed:
                    self._wake.wait(tick)

    # ---- leases ----

    def grant_lease(self, ttl: float) -> int:
        """A lease kept alive by this client's keepalive thread; returns its id."""
        out = _capi.new(_capi.LeaseOut)
        check(_capi.call("client_lease_grant", self._handle(), _ms(ttl, "ttl", False),
                         _byref(out)))
        return out.lease_id

    def revoke_lease(self, lease_id: int):
        check(_capi.call("client_lease_revoke", self._handle(), int(lease_id)))

    # ---- KV ----

    def put(self, key: str, value: bytes, *, lease_id: int = 0) -> int:
        """Stores value (bytes or str) and returns the new revision."""
        v = _bytes(value, "value")
        rev = ctypes.c_uint64()
        check(_capi.call("client_kv_put", self._handle(), _bytes(key, "key"), v, len(v),
                         int(lease_id), _byref(rev)))
        return rev.value

    def get(self, key: str) -> Optional[KeyValue]:
        """The key's value and revision, or None when it does not exist."""
        out = _capi.new(_capi.KvValue)
        rc = _capi.call("client_kv_get", self._handle(), _bytes(key, "key"), _byref(out))
        if rc == -_capi.ENOENT:
            return None
        check(rc)
        return _key_value(key, out)

    def delete(self, key: str) -> bool:
        """True when the key existed."""
        rev = ctypes.c_uint64()
        rc = _capi.call("client_kv_delete", self._handle(), _bytes(key, "key"), _byref(rev))
        if rc == -_capi.ENOENT:
            return False
        check(rc)
        return True

    def cas(self, key: str, value: bytes, *, expected_revision: Optional[int] = None,
            expected_value: Optional[bytes] = None, lease_id: int = 0) -> int:
        """Stores value only if the key is still at expected_revision (0: must
        not exist) or holds expected_value; returns the new revision, raises
        CompareFailed otherwise."""
        cas, keep = self._cas_request(value, expected_revision, expected_value, lease_id)
        rev = ctypes.c_uint64()
        check(_capi.call("client_kv_cas", self._handle(), _bytes(key, "key"), _byref(cas),
                         _byref(rev)))
        del keep  # the buffers cas points into lived until here
        return rev.value

    @staticmethod
    def _cas_request(value, expected_revision, expected_value, lease_id):
        """A struct hasp_kv_cas, and the buffers it points into (keep them
        until the call returns: libhasp copies them then)."""
        if (expected_revision is None) == (expected_value is None):
            raise InvalidArgument(_capi.EINVAL,
                                  "give exactly one of expected_revision, expected_value")
        v = _bytes(value, "value")
        cas = _capi.new(_capi.KvCas)
        keep = [v]
        cas.value = ctypes.cast(ctypes.c_char_p(v), ctypes.c_void_p)
        cas.value_size = len(v)
        cas.lease_id = int(lease_id)
        if expected_value is not None:
            ev = _bytes(expected_value, "expected_value")
            keep.append(ev)
            cas.compare_value = True
            cas.expected_value = ctypes.cast(ctypes.c_char_p(ev), ctypes.c_void_p)
            cas.expected_value_size = len(ev)
        else:
            cas.expected_revision = int(expected_revision)
        return cas, keep

    def range(self, prefix: str = "", limit: int = 0):
        """The keys starting with prefix, in key order (at most limit; 0: all)."""
        each = _RangeCollector()
        rc = _capi.call("client_kv_range", self._handle(), _bytes(prefix, "prefix"),
                        int(limit), each.fn, None)
        return each.result(rc)

    # ---- watches ----

    def watch_progress(self):
        """Asks the leader now which event it sent this client last. Events
        are not acknowledged, and the last of a burst, lost on the way,
        shows in no later event: a missed one comes to every watch as a
        RESYNC event, queued before this returns (etcd's RequestProgress;
        docs/CLIENT.md "The last event"). The keepalive asks the same on
        its own, once per keepalive interval. Needs libhasp 1.4."""
        if not _capi.HAS_WATCH_PROGRESS:
            raise NotImplementedError("the loaded libhasp is older than 1.4")
        check(_capi.call("client_watch_progress", self._handle()))

    def watch(self, name: str, *, prefix: bool = False) -> "Watch":
        """Watches a lock or key (or every name under a prefix); iterate the
        result for Events. Close it (or use `with`) to unwatch."""
        key = _bytes(name, "name")
        w = self._watch_add(name, prefix)
        try:
            check(_capi.call("client_watch", self._handle(), key, bool(prefix)))
        except BaseException:
            w._detach()
            raise
        return w

    def _watch_add(self, name, prefix):
        """A Watch, in the list the events are handed to before the WATCH
        is sent: an event may overtake its OK."""
        w = Watch(self, name, prefix)
        with self._mu:
            self._watches.append(w)
        return w

    def _pump_events(self, timeout_ms):
        """Reads the client's events for up to timeout_ms and hands each to
        the watches it concerns (RESYNC to all)."""
        ev = _capi.new(_capi.Event)
        rc = _capi.call("client_next_event", self._handle(), _byref(ev), timeout_ms)
        handed = rc == 0
        while rc == 0:
            name = ev.name.decode(errors="replace")
            kind = _capi.EVENT_TYPES.get(ev.type, str(ev.type))
            value = bytes(ev.value[:ev.value_size]) if kind == "KV_PUT" else None
            event = Event(kind, name, ev.revision, value, ev.seq, ev.sub)
            with self._mu:
                for w in self._watches:
                    if kind == "RESYNC" or w._matches(name):
                        w._queue.append(event)
            rc = _capi.call("client_next_event", self._h, _byref(ev), 0)
        if handed:
            for tell in list(self._event_listeners):
                tell()
        if rc != -_capi.ETIMEDOUT:
            check(rc)


class Lock:
    """A held lock: `token` is its fencing token, to pass to every resource
    it guards. Use it as a context manager to release it on exit."""

    def __init__(self, client, raw, on_lost):
        self._client = client
        self._raw = raw
        self._mu = threading.Lock()
        self.name = raw.name.decode()
        self.token = raw.token
        self.lease_id = raw.lease_id
        self._on_lost = on_lost
        self._lost = False
        self.lost_reason = None
        self._released = False
        self._stop = threading.Event()
        self._renewer = None

    def __repr__(self):
        return "<hasp.Lock %s token=%d%s>" % (self.name, self.token,
                                             " lost" if self._lost else "")

    @property
    def ttl(self) -> float:
        return self._raw.ttl_ms / 1000.0

    @property
    def lost(self) -> bool:
        """True once the lock-lost callback fired (or would have);
        lost_reason says why: ETIMEDOUT (validity ran out without a renew),
        ENOTHOLDER (the cluster says another holds it), ELEASE (its lease
        ended)."""
        return self._lost

    def valid_until_ns(self) -> int:
        """The conservative CLOCK_MONOTONIC instant (ns, as time.monotonic_ns()
        reads it) until which the lock is ours; 0 when unknown or lost."""
        if self._lost or self._released:
            return 0
        with self._mu:
            return _capi.call("client_lock_valid_until", self._client._h, _byref(self._raw))

    def remaining(self) -> float:
        """Seconds of guaranteed validity left (0.0 when none)."""
        return max(0, self.valid_until_ns() - time.monotonic_ns()) / 1e9

    def _safe_raw(self, work):
        with self._mu:
            return bool(_capi.call("client_lock_safe", self._client._h, _byref(self._raw),
                                   _ms(work, "work")))

    def safe(self, work: float = 0.0) -> bool:
        """True when the lock is still ours `work` seconds from now (libhasp's
        conservative deadline, drift margin included): act on the guarded
        resource only then, and still pass `token` with the act."""
        if self._lost or self._released or self._client._closed:
            return False
        return self._safe_raw(work)

    def renew(self, ttl: Optional[float] = None):
        """Renews the lock's own TTL now (ttl None: the current one).
        Raises NotHolder when the lock was lost."""
        tmp = _capi.new(_capi.Lock)
        with self._mu:
            ctypes.memmove(_byref(tmp), _byref(self._raw), ctypes.sizeof(_capi.Lock))
        rc = _capi.call("client_renew", self._client._handle(), self.name.encode(),
                        self.token, _ms(ttl, "ttl"), _byref(tmp))
        if rc == -_capi.ENOTHOLDER:
            self._mark_lost("ENOTHOLDER")
        check(rc)
        with self._mu:
            ctypes.memmove(_byref(self._raw), _byref(tmp), ctypes.sizeof(_capi.Lock))

    def check(self) -> bool:
        """Asks the cluster whether this token still holds the lock."""
        return self._client.check_token(self.name, self.token)

    def release(self):
        """Releases the lock (once). A lock already lost is not released (it
        is no longer ours); NotHolder is not raised for it."""
        if not self._release_begin():
            return
        try:
            if not self._lost:
                # On the cluster first: another thread of this client must not
                # reach the cluster while our session still holds the lock.
                _release_rc(_capi.call("client_release", self._client._handle(),
                                       self.name.encode(), self.token))
        finally:
            self._client._forget(self)

    def _release_begin(self):
        """Marks the lock released and stops its renewer; False when it
        already was. The caller releases it on the cluster unless lost, then
        calls _client._forget."""
        if self._released:
            return False
        self._released = True
        self._stop.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join()
        return True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.release()
        except HaspError:
            if exc_type is None:
                raise

    def _mark_lost(self, reason):
        with self._mu:
            if self._lost or self._released:
                return
            self._lost = True
            self.lost_reason = reason
        self._stop.set()
        if self._on_lost is not None:
            self._on_lost(self)

    def _start_renewer(self):
        self._renewer = threading.Thread(target=self._renew_loop, daemon=True,
                                         name="hasp-renew " + self.name)
        self._renewer.start()

    def _renew_loop(self):
        period = max(0.005, self.ttl / 3)
        delay = period
        while not self._stop.wait(delay):
            try:
                Lock.renew(self)  # blocking also for an AsyncLock
                delay = period
            except NotHolder:
                return
            except HaspError:
                # No answer: retry soon; the monitor declares the lock lost
                # if the validity runs out meanwhile.
                delay = max(0.005, min(period, self.remaining() / 4))


def _release_rc(rc):
    """A release's result: NotHolder is not raised (the lock was lost)."""
    if rc != -_capi.ENOTHOLDER:
        check(rc)


class Watch:
    """Events for one watched name or prefix. Iterating blocks for the next
    event; get(timeout) returns None when none came in time."""

    def __init__(self, client, name, prefix):
        self._client = client
        self.name = name
        self.prefix = prefix
        self._queue = deque()
        self._closed = False

    def _matches(self, name):
        return name.startswith(self.name) if self.prefix else name == self.name

    def get(self, timeout: Optional[float] = None) -> Optional[Event]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._closed:
            if self._queue:
                return self._queue.popleft()
            left = 0.1 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return None
            step = int(min(left, 0.1) * 1000)
            if self._client._pump.acquire(timeout=min(left, 0.1)):
                try:
                    if not self._queue:
                        self._client._pump_events(step)
                finally:
                    self._client._pump.release()
        raise ClosedError(message="the watch is closed")

    def __iter__(self):
        return self

    def __next__(self) -> Event:
        try:
            return self.get()
        except ClosedError:
            raise StopIteration

    def close(self):
        if self._detach():
            _unwatch_rc(_capi.call("client_unwatch", self._client._h, self.name.encode(),
                                   self.prefix))

    def _detach(self):
        """Closes the watch locally; True when it is to be unwatched on an
        open client."""
        if self._closed:
            return False
        self._closed = True
        c = self._client
        with c._mu:
            if self in c._watches:
                c._watches.remove(self)
        return not c._closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _unwatch_rc(rc):
    if rc not in (0, -_capi.ENOENT):
        check(rc)


class Fence:
    """A fenced resource's guard (include/hasp/fence.h, hasp_fence_admit):
    admits an operation whose token is at least the highest admitted so
    far. Thread-safe."""

    def __init__(self):
        self._f = _capi.new(_capi.Fence)

    def admit(self, token: int) -> bool:
        return bool(_capi.call("fence_admit", _byref(self._f), int(token)))

    @property
    def highest(self) -> int:
        return self._f.highest_token
