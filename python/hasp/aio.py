"""asyncio over libhasp: `async with client.lock(...)`.

Every call that libhasp has an asynchronous form of (hasp_client_*_async)
runs on libhasp's asynchronous core: the client's file descriptor is
registered with the event loop (add_reader), hasp_client_process() runs
when it is readable or when hasp_client_timeout_ms() says so, and the
completion callback resolves an asyncio future, on the loop's thread. That
is acquire (lock, try_lock), release, connect, KV (get, put, cas, delete,
range), read_lock, watch and unwatch; watch events are read on the loop
too. So are
grant_lease, revoke_lease, check_token and a held lock's renew, check and
release (AsyncLock). A task cancelled
while it waits for a lock cancels the wait on the cluster
(hasp_client_cancel); a grant that came first is released. A call whose
asynchronous form the loaded libhasp lacks (libhasp.so.0 has none; 1.0
lacks connect, watch, unwatch and kv_range: _capi.ASYNC) runs in the loop's
default executor instead, as does the end of close() (hasp_client_close),
so the loop never blocks. The protocol and the validity arithmetic stay
libhasp's.

Nothing polls: a task waiting for a watch event or for the name's local
mutex sleeps on a future that the loop (libhasp's fd turned readable, also
for an event another thread read off the socket) or the releasing thread
resolves. Only on libhasp 1.0, whose fd does not turn readable for events
another thread buffered, a waiting task looks again every _EVENT_POLL_1_0.
"""
import asyncio
import ctypes
import functools
import time
from typing import Optional

from . import _capi
from .client import Client, Event, Lock, _bytes, _key_value, _lock_info, _ms, \
    _RangeCollector, _release_rc, _unwatch_rc
from .errors import ClosedError, HaspError, LockBusy, Timeout, check

# libhasp 1.0 only (no hasp_client_watch_async): how often a task waiting
# for a watch event looks at libhasp's event buffer without being woken.
# There an event another thread of this client read from the socket (its
# keepalive, a blocking call) is buffered without making the loop's fd
# readable; libhasp 1.1 makes it readable (docs/CLIENT.md "The
# asynchronous loop"), and the task sleeps until the loop wakes it.
_EVENT_POLL_1_0 = 0.1


async def _run(fn, *args, **kw):
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, *args, **kw))


def _core_or(call, blocking):
    """The method runs on the core when the loaded libhasp has `call`'s
    asynchronous form, else blocking(client.sync, ...) in the executor."""
    def wrap(method):
        @functools.wraps(method)
        async def run(self, *args, **kw):
            if not self._core(call):
                return await _run(blocking, self.sync, *args, **kw)
            return await method(self, *args, **kw)
        return run
    return wrap


def _unless_absent(r, convert):
    """convert(r) for an answer, None for -HASP_ENOENT."""
    if r.rc == -_capi.ENOENT:
        return None
    check(r.rc)
    return convert(r)


def _consume(fut):
    """Retrieves a future's outcome nobody awaits any more."""
    if not fut.cancelled():
        fut.exception()


def _resolve(fut):
    if not fut.done():
        fut.set_result(None)


class AsyncClient:
    """The asyncio face of Client (same arguments)."""

    def __init__(self, *args, **kw):
        self.sync = Client(*args, **kw)
        self._loop = None
        self._fd = -1
        self._timer = None
        self._closing = False
        # request number -> (future of its struct hasp_result, what the
        # operation uses until it completes: a range's callback)
        self._pending = {}
        self._next = 0
        self._done_fn = _capi.DONE_FN(self._done) if _capi.HAS_ASYNC else None
        self._event_waiters = set()  # futures of tasks waiting for a watch event
        self._background = set()  # tasks that finish what a cancelled task began
        self._pumping = False  # in _pump_events (on the loop's thread)
        self.sync._event_listeners.append(self._events_pumped)

    async def close(self):
        """Releases the locks still held through this client and unwatches
        (on the core), then ends the session (in the executor)."""
        if self._closing:
            return
        sync = self.sync
        if not sync._closed:
            for lock in list(sync._locks):
                try:
                    await self._release(lock)
                except HaspError:
                    pass
            for w in list(sync._watches):
                try:
                    await AsyncWatch(self, w).close()
                except HaspError:
                    pass
        self._closing = True
        if self._loop is not None:
            self._loop.remove_reader(self._fd)
            if self._timer is not None:
                self._timer.cancel()
            self._loop = None
        # hasp_client_close ends the operations in progress without their
        # callbacks: their tasks get ClosedError. What they use (a range's
        # callback) is kept until the library is gone.
        pending, self._pending = self._pending, {}
        for fut, _ in pending.values():
            if not fut.done():
                fut.set_exception(ClosedError(message="the client is closed"))
                fut.add_done_callback(_consume)
        self._wake_events()
        await _run(sync.close)
        pending.clear()

    # ---- the asynchronous core, driven by this loop ----

    def _driver(self):
        loop = asyncio.get_running_loop()
        if self._closing:
            raise ClosedError(message="the client is closed")
        if self._loop is None:
            self._fd = check(_capi.call("client_fd", self.sync._handle()))
            loop.add_reader(self._fd, self._drive)
            self._loop = loop
        return loop

    def _drive(self):
        """hasp_client_process() now, and again when libhasp's next deadline
        comes (a retransmission, a recheck, a wait's end); then the events
        it read go to the watches."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._loop is None or self.sync._closed:
            return
        check(_capi.call("client_process", self.sync._h, None))
        ms = _capi.call("client_timeout_ms", self.sync._h)
        if ms >= 0:
            self._timer = self._loop.call_later(ms / 1000.0, self._drive)
        if self._event_waiters:
            self._pump_events()

    def _pump_events(self):
        """Hands the events libhasp buffered to the watches, without
        waiting, and wakes the tasks waiting for one."""
        sync = self.sync
        if sync._watches and not sync._closed and sync._pump.acquire(blocking=False):
            self._pumping = True
            try:
                sync._pump_events(0)
            finally:
                self._pumping = False
                sync._pump.release()
        self._wake_events()

    def _events_pumped(self):
        """Client._pump_events handed events to the watches. A blocking
        Watch.get did (on any thread, holding the pump this loop then
        skips): the tasks waiting here are woken on the loop. The loop's
        own pump (_pumping) wakes them itself."""
        loop = self._loop
        if loop is None or self._pumping:
            return
        try:
            loop.call_soon_threadsafe(self._wake_events)
        except RuntimeError:  # the loop is closed
            pass

    def _wake_events(self):
        waiters, self._event_waiters = self._event_waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def _done(self, _client, res, arg):
        """The completion callback, inside hasp_client_process (loop thread)."""
        entry = self._pending.pop(arg or 0, None)
        if entry is None:
            return
        out = _capi.new(_capi.Result)
        ctypes.memmove(ctypes.byref(out), res, ctypes.sizeof(_capi.Result))
        if not entry[0].done():
            entry[0].set_result(out)

    def _core(self, call):
        """True when `call` runs on the core (else: the executor)."""
        return call in _capi.ASYNC

    def _start(self, call, *args, keep=None):
        """Starts hasp_client_<call>_async; returns the future of its
        result (a copy of struct hasp_result) and the operation's id.
        `keep` lives until the operation completes or the client closes."""
        h = self.sync._handle()
        loop = self._driver()
        self._next += 1
        n = self._next
        fut = loop.create_future()
        op = ctypes.c_uint64()
        self._pending[n] = (fut, keep)
        try:
            rc = _capi.call("client_%s_async" % call, h, *args, self._done_fn, n,
                            ctypes.byref(op))
            if rc < 0:
                check(rc)
        except BaseException:
            del self._pending[n]
            raise
        self._drive()
        return fut, op.value

    async def _op(self, call, *args, keep=None, cancel=False, then=None):
        """Runs hasp_client_<call>_async and returns its result. A task
        cancelled meanwhile raises CancelledError at once; with `cancel`
        the operation is stopped (hasp_client_cancel: a read, whose
        outcome nobody needs), else it completes unseen and `then(result)`
        runs on its result."""
        fut, op = self._start(call, *args, keep=keep)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            if cancel and not fut.done() and not self.sync._closed:
                _capi.call("client_cancel", self.sync._h, op)
                self._drive()
            if then is not None:
                fut.add_done_callback(lambda f: f.cancelled() or f.exception() or then(f.result()))
            fut.add_done_callback(_consume)
            raise

    def _in_background(self, coro):
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_consume)

    async def _local_enter(self, key, blocking, timeout):
        """The name's local mutex (see Client.lock): tasks and threads of
        this client take turns. A task that finds it taken sleeps until a
        release (by a task or a thread: Client._local_exit) wakes it, then
        tries again."""
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        sync = self.sync
        while True:
            fut = loop.create_future()

            def wake(fut=fut):  # on the releasing thread
                try:
                    loop.call_soon_threadsafe(_resolve, fut)
                except RuntimeError:  # the loop is closed
                    pass
            # Registered before the try: a release after the failed try
            # still wakes this task.
            sync._local_waker(key, wake, True)
            try:
                try:
                    return sync._local_enter(key, False, None)
                except LockBusy:
                    if not blocking:
                        raise
                left = None if end is None else end - loop.time()
                if left is not None and left <= 0:
                    raise Timeout(_capi.ETIMEDOUT, "held by another task of this client")
                try:
                    await asyncio.wait_for(fut, left)
                except asyncio.TimeoutError:
                    raise Timeout(_capi.ETIMEDOUT, "held by another task of this client")
            finally:
                sync._local_waker(key, wake, False)

    async def _acquire(self, name, ttl, blocking=True, timeout=None, renew=True, lease_id=0,
                       on_lost=None) -> "AsyncLock":
        sync = self.sync
        h = sync._handle()
        key = _bytes(name, "name")
        opts, renew = sync._acquire_opts(ttl, blocking, timeout, lease_id, renew)
        opts.auto_renew = renew and sync._lib_loss
        self._driver()
        start = time.monotonic()
        local = await self._local_enter(key, blocking, timeout)
        try:
            if blocking and timeout is not None:
                left = max(0.001, timeout - (time.monotonic() - start))
                opts.wait_timeout_ms = max(1, int(left * 1000))
            fut, op = self._start("acquire", key, ctypes.byref(opts))
        except BaseException:
            sync._local_exit(key)
            raise
        try:
            r = await asyncio.shield(fut)
        except asyncio.CancelledError:
            # Cancel on the cluster; the op completes with -HASP_ECANCELED,
            # or 0 when the grant came first: then release it.
            if not fut.done() and not sync._closed:
                _capi.call("client_cancel", h, op)
                self._drive()

            def finish(f):
                if f.cancelled() or f.exception() is not None:
                    sync._local_exit(key)
                elif f.result().rc == 0:
                    lock = self._adopt(sync._register(_lock_of(f.result()), False, None, local,
                                                      AsyncLock))
                    self._in_background(self._release(lock))
                else:
                    sync._local_exit(key)
            fut.add_done_callback(finish)
            raise
        if r.rc != 0:
            sync._local_exit(key)
            if r.rc == -_capi.EBUSY:
                raise LockBusy(r.rc, holder_token=r.lock.token)
            check(r.rc)
        return self._adopt(sync._register(_lock_of(r), renew, on_lost, local, AsyncLock))

    def _adopt(self, lock):
        lock._aio = self
        return lock

    async def _release(self, lock):
        """Lock.release on the core. A cancelled task does not stop it (a
        lock left held would be renewed on)."""
        if not self._core("release") or lock._renewer is not None:
            return await _run(Lock.release, lock)
        if not lock._release_begin():
            return
        try:
            if not lock._lost:
                r = await self._op("release", lock.name.encode(), lock.token)
                _release_rc(r.rc)
        finally:
            self.sync._forget(lock)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    def lock(self, name: str, ttl: float = 10.0, **kw) -> "_LockRequest":
        """`async with client.lock(name, ttl) as lock:` or `await
        client.lock(...)`; the arguments of Client.lock."""
        return _LockRequest(self, name, ttl, kw)

    async def try_lock(self, name: str, ttl: float = 10.0, **kw) -> Optional["AsyncLock"]:
        """Client.try_lock: lock(blocking=False), the AsyncLock or None
        when another client (or task or thread of this one) holds it;
        never waits in the lock's queue."""
        try:
            return await self.lock(name, ttl, blocking=False, **kw)
        except LockBusy:
            return None

    # ---- local state: no I/O, nothing to await (libhasp's mutex, taken
    # for the copy, is never held across a wait) ----

    @property
    def session_id(self) -> int:
        """Client.session_id: the session's id, 0 while none is open."""
        return self.sync.session_id

    def stats(self) -> dict:
        """Client.stats: libhasp's counters of this client."""
        return self.sync.stats()

    @property
    def on_lock_lost(self):
        """Client.on_lock_lost: the default lock-lost callback of the
        locks taken from now on."""
        return self.sync.on_lock_lost

    @on_lock_lost.setter
    def on_lock_lost(self, fn):
        self.sync.on_lock_lost = fn

    @property
    def lost_margin(self) -> float:
        """Client.lost_margin (seconds)."""
        return self.sync.lost_margin

    @_core_or("connect", Client.connect)
    async def connect(self):
        """Opens the session now (otherwise the first request does)."""
        check((await self._op("connect", cancel=True)).rc)

    @_core_or("kv_get", Client.get)
    async def get(self, key):
        r = await self._op("kv_get", _bytes(key, "key"), cancel=True)
        return _unless_absent(r, lambda r: _key_value(key, r.value))

    @_core_or("kv_put", Client.put)
    async def put(self, key, value, *, lease_id=0):
        v = _bytes(value, "value")
        r = await self._op("kv_put", _bytes(key, "key"), v, len(v), int(lease_id))
        check(r.rc)
        return r.revision

    @_core_or("kv_cas", Client.cas)
    async def cas(self, key, value, *, expected_revision=None, expected_value=None, lease_id=0):
        cas, keep = Client._cas_request(value, expected_revision, expected_value, lease_id)
        r = await self._op("kv_cas", _bytes(key, "key"), ctypes.byref(cas), keep=keep)
        check(r.rc)
        return r.revision

    @_core_or("kv_delete", Client.delete)
    async def delete(self, key):
        r = await self._op("kv_delete", _bytes(key, "key"))
        return _unless_absent(r, lambda r: True) or False

    @_core_or("kv_range", Client.range)
    async def range(self, prefix: str = "", limit: int = 0):
        """Client.range: the entries come page by page on the loop's thread."""
        each = _RangeCollector()
        # The callback lives until the walk ends (done callback) or the
        # client closes: libhasp calls it from hasp_client_process only.
        r = await self._op("kv_range", _bytes(prefix, "prefix"), int(limit), each.fn, None,
                           keep=each, cancel=True)
        return each.result(r.rc)

    @_core_or("lock_read", Client.read_lock)
    async def read_lock(self, name):
        r = await self._op("lock_read", _bytes(name, "name"), cancel=True)
        return _unless_absent(r, lambda r: _lock_info(r.info))

    @_core_or("check", Client.check_token)
    async def check_token(self, name, token) -> bool:
        """Client.check_token: whether `token` holds `name` now."""
        r = await self._op("check", _bytes(name, "name"), int(token), cancel=True)
        if r.rc == -_capi.ENOTHOLDER:
            return False
        check(r.rc)
        return True

    @_core_or("lease_grant", Client.grant_lease)
    async def grant_lease(self, ttl: float) -> int:
        """Client.grant_lease: a lease kept alive by this client (its
        keepalive thread, or this loop with keepalive=False); its id."""
        r = await self._op("lease_grant", _ms(ttl, "ttl", False))
        check(r.rc)
        return r.lease.lease_id

    @_core_or("watch_progress", Client.watch_progress)
    async def watch_progress(self):
        """Client.watch_progress: a missed last event becomes a RESYNC."""
        check((await self._op("watch_progress")).rc)

    @_core_or("lease_revoke", Client.revoke_lease)
    async def revoke_lease(self, lease_id: int):
        """Client.revoke_lease: the locks and keys on it end with it."""
        check((await self._op("lease_revoke", int(lease_id))).rc)

    async def _renew(self, lock, ttl):
        """Lock.renew on the core: the lock's TTL and validity deadline
        come from the renew's send time and the TTL the node answered."""
        if not self._core("renew"):
            return await _run(Lock.renew, lock, ttl)
        r = await self._op("renew", lock.name.encode(), lock.token, _ms(ttl, "ttl"))
        if r.rc == -_capi.ENOTHOLDER:
            lock._mark_lost("ENOTHOLDER")
        check(r.rc)
        with lock._mu:
            lock._raw.ttl_ms = r.lock.ttl_ms
            lock._raw.valid_until_ns = r.lock.valid_until_ns

    async def watch(self, name: str, *, prefix: bool = False) -> "AsyncWatch":
        if not self._core("watch"):
            return AsyncWatch(self, await _run(self.sync.watch, name, prefix=prefix))
        key = _bytes(name, "name")
        w = self.sync._watch_add(name, prefix)

        def unwanted(r):  # the task was cancelled: undo a watch that took
            if w._detach() and r.rc == 0:
                self._in_background(self._unwatch(w))
        try:
            r = await self._op("watch", key, bool(prefix), then=unwanted)
            check(r.rc)
        except asyncio.CancelledError:
            raise
        except BaseException:
            w._detach()
            raise
        return AsyncWatch(self, w)

    async def _unwatch(self, w):
        r = await self._op("unwatch", w.name.encode(), w.prefix)
        _unwatch_rc(r.rc)


class AsyncLock(Lock):
    """A lock held through an AsyncClient: Lock's token, name, ttl,
    lease_id, safe(), valid_until_ns(), remaining() and lost, with renew,
    check and release as coroutines (on libhasp's core). `async with` it
    to release it on exit."""

    _aio = None  # the AsyncClient, set as the lock is registered

    async def renew(self, ttl: Optional[float] = None):
        """Renews the lock's own TTL now (ttl None: the current one);
        NotHolder when the lock was lost."""
        await self._aio._renew(self, ttl)

    async def check(self) -> bool:
        """Asks the cluster whether this token still holds the lock."""
        return await self._aio.check_token(self.name, self.token)

    async def release(self):
        """Releases the lock (once); a lost lock is not released and
        raises nothing."""
        await self._aio._release(self)

    def __enter__(self):
        raise TypeError("an AsyncLock is released with `async with` or `await lock.release()`")

    async def __aenter__(self):
        return self

    async def __aexit__(self, exc_type, exc, tb):
        try:
            await self.release()
        except HaspError:
            if exc_type is None:
                raise


def _lock_of(r):
    """A struct hasp_lock of our own (with spare room) from a result."""
    raw = _capi.new(_capi.Lock)
    ctypes.memmove(ctypes.byref(raw), ctypes.byref(r.lock), ctypes.sizeof(_capi.Lock))
    return raw


class _LockRequest:
    def __init__(self, client, name, ttl, kw):
        self._client = client
        self._args = (name, ttl)
        self._kw = kw
        self._lock = None

    async def _acquire(self) -> AsyncLock:
        c = self._client
        if _capi.HAS_ASYNC:
            return await c._acquire(*self._args, **self._kw)
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, functools.partial(
            c.sync._acquire_blocking, AsyncLock, *self._args, **self._kw))
        try:
            return c._adopt(await asyncio.shield(fut))
        except asyncio.CancelledError:
            def drop(f):
                if not f.cancelled() and f.exception() is None:
                    loop.run_in_executor(None, Lock.release, f.result())
            fut.add_done_callback(drop)
            raise

    def __await__(self):
        return self._acquire().__await__()

    async def __aenter__(self) -> AsyncLock:
        self._lock = await self._acquire()
        return self._lock

    async def __aexit__(self, exc_type, exc, tb):
        try:
            await self._client._release(self._lock)
        except Exception:
            if exc_type is None:
                raise


class AsyncWatch:
    """`async for event in await client.watch(name)`."""

    def __init__(self, client, watch):
        self._client = client
        self.sync = watch

    @property
    def name(self) -> str:
        """Watch.name: the watched name or prefix."""
        return self.sync.name

    @property
    def prefix(self) -> bool:
        """Watch.prefix: True for every name under `name`."""
        return self.sync.prefix

    def __aiter__(self):
        return self

    async def __anext__(self) -> Event:
        if not _capi.HAS_ASYNC:
            while True:
                try:
                    ev = await _run(self.sync.get, 0.25)
                except Exception:
                    if self.sync._closed:
                        raise StopAsyncIteration
                    raise
                if ev is not None:
                    return ev
        try:
            return await self.get()
        except ClosedError:
            raise StopAsyncIteration

    async def get(self, timeout: Optional[float] = None):
        """The next event, or None when none came within `timeout` seconds
        (None: wait without limit). Read on the loop: the events that
        hasp_client_process reads wake the waiting task."""
        if not _capi.HAS_ASYNC:
            return await _run(self.sync.get, timeout)
        c = self._client
        loop = c._driver()
        end = None if timeout is None else loop.time() + timeout
        # libhasp 1.1 wakes the loop for every event it buffers; 1.0 not
        # for those another thread read (see _EVENT_POLL_1_0).
        poll = None if c._core("watch") else _EVENT_POLL_1_0
        while True:
            if self.sync._closed:
                raise ClosedError(message="the watch is closed")
            c._pump_events()
            if self.sync._queue:
                return self.sync._queue.popleft()
            step = None if end is None else end - loop.time()
            if step is not None and step <= 0:
                return None
            if poll is not None:
                step = poll if step is None else min(poll, step)
            fut = loop.create_future()
            c._event_waiters.add(fut)
            try:
                await asyncio.wait_for(fut, step)  # None: until woken
            except asyncio.TimeoutError:
                pass
            finally:
                c._event_waiters.discard(fut)

    async def close(self):
        c = self._client
        if not c._core("unwatch"):
            await _run(self.sync.close)
        elif self.sync._detach():
            await c._unwatch(self.sync)
        c._wake_events()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()
