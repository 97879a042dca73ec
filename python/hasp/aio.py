"""asyncio over libhasp: `async with client.lock(...)`.

Lock acquisition runs on libhasp's asynchronous core when the library has
one (libhasp.so.1): the client's file descriptor is registered with the
event loop (add_reader), hasp_client_process() runs when it is readable or
when hasp_client_timeout_ms() says so, and the completion callback resolves
an asyncio future. A task cancelled while it waits cancels the wait on the
cluster (hasp_client_cancel); a grant that came first is released. Other
calls (and, on libhasp.so.0, acquisition too) run in the loop's default
executor, so the loop never blocks. The protocol and the validity
arithmetic stay libhasp's.
"""
import asyncio
import ctypes
import functools
import time
from typing import Optional

from . import _capi
from .client import Client, Event, Lock, _bytes
from .errors import LockBusy, Timeout, check


async def _run(fn, *args, **kw):
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, *args, **kw))


class AsyncClient:
    """The asyncio face of Client (same arguments)."""

    def __init__(self, *args, **kw):
        self.sync = Client(*args, **kw)
        self._loop = None
        self._fd = -1
        self._timer = None
        self._pending = {}  # request number -> future of (rc, struct hasp_lock)
        self._next = 0
        self._done_fn = _capi.DONE_FN(self._done) if _capi.HAS_ASYNC else None

    async def close(self):
        if self._loop is not None:
            self._loop.remove_reader(self._fd)
            if self._timer is not None:
                self._timer.cancel()
            self._loop = None
        await _run(self.sync.close)

    # ---- the asynchronous core, driven by this loop ----

    def _driver(self):
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._fd = check(_capi.call("client_fd", self.sync._handle()))
            loop.add_reader(self._fd, self._drive)
            self._loop = loop
        return loop

    def _drive(self):
        """hasp_client_process() now, and again when libhasp's next deadline
        comes (a retransmission, a recheck, a wait's end)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._loop is None or self.sync._closed:
            return
        check(_capi.call("client_process", self.sync._h, None))
        ms = _capi.call("client_timeout_ms", self.sync._h)
        if ms >= 0:
            self._timer = self._loop.call_later(ms / 1000.0, self._drive)

    def _done(self, _client, res, arg):
        """The completion callback, inside hasp_client_process (loop thread)."""
        fut = self._pending.pop(arg or 0, None)
        if fut is None:
            return
        r = res.contents
        raw = _capi.new(_capi.Lock)
        ctypes.memmove(ctypes.byref(raw), ctypes.byref(r.lock), ctypes.sizeof(_capi.Lock))
        fut.set_result((r.rc, raw))

    async def _local_enter(self, key, blocking, timeout):
        """The name's local mutex (see Client.lock): tasks and threads of
        this client take turns; a task polls it, backing off to 50 ms."""
        end = None if timeout is None else time.monotonic() + timeout
        delay = 0.005
        while True:
            try:
                return self.sync._local_enter(key, False, None)
            except LockBusy:
                if not blocking:
                    raise
                if end is not None and time.monotonic() >= end:
                    raise Timeout(_capi.ETIMEDOUT, "held by another task of this client")
            await asyncio.sleep(delay)
            delay = min(0.05, delay * 2)

    async def _acquire(self, name, ttl, blocking=True, timeout=None, renew=True, lease_id=0,
                       on_lost=None) -> Lock:
        sync = self.sync
        h = sync._handle()
        key = _bytes(name, "name")
        opts, renew = sync._acquire_opts(ttl, blocking, timeout, lease_id, renew)
        opts.auto_renew = renew and sync._lib_loss
        loop = self._driver()
        start = time.monotonic()
        local = await self._local_enter(key, blocking, timeout)
        op = ctypes.c_uint64()
        try:
            if blocking and timeout is not None:
                left = max(0.001, timeout - (time.monotonic() - start))
                opts.wait_timeout_ms = max(1, int(left * 1000))
            self._next += 1
            n = self._next
            fut = loop.create_future()
            self._pending[n] = fut
            rc = _capi.call("client_acquire_async", h, key, ctypes.byref(opts), self._done_fn,
                            n, ctypes.byref(op))
            if rc < 0:
                del self._pending[n]
                check(rc)
            self._drive()
        except BaseException:
            sync._local_exit(key)
            raise
        try:
            rc, raw = await asyncio.shield(fut)
        except asyncio.CancelledError:
            # Cancel on the cluster; the op completes with -HASP_ECANCELED,
            # or 0 when the grant came first: then release it.
            _capi.call("client_cancel", h, op.value)
            self._drive()

            def finish(f):
                rc, raw = f.result()
                if rc == 0:
                    lock = sync._register(raw, False, None, local)
                    loop.run_in_executor(None, lock.release)
                else:
                    sync._local_exit(key)
            fut.add_done_callback(finish)
            raise
        if rc != 0:
            sync._local_exit(key)
            if rc == -_capi.EBUSY:
                raise LockBusy(rc, holder_token=raw.token)
            check(rc)
        return sync._register(raw, renew, on_lost, local)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    def lock(self, name: str, ttl: float = 10.0, **kw) -> "_LockRequest":
        """`async with client.lock(name, ttl) as lock:` or `await
        client.lock(...)`; the arguments of Client.lock."""
        return _LockRequest(self, name, ttl, kw)

    async def get(self, key):
        return await _run(self.sync.get, key)

    async def put(self, key, value, **kw):
        return await _run(self.sync.put, key, value, **kw)

    async def cas(self, key, value, **kw):
        return await _run(self.sync.cas, key, value, **kw)

    async def delete(self, key):
        return await _run(self.sync.delete, key)

    async def read_lock(self, name):
        return await _run(self.sync.read_lock, name)

    async def watch(self, name: str, *, prefix: bool = False) -> "AsyncWatch":
        return AsyncWatch(await _run(self.sync.watch, name, prefix=prefix))


class _LockRequest:
    def __init__(self, client, name, ttl, kw):
        self._client = client
        self._args = (client.sync.lock, name, ttl)
        self._kw = kw
        self._lock = None

    async def _acquire(self) -> Lock:
        if _capi.HAS_ASYNC:
            return await self._client._acquire(*self._args[1:], **self._kw)
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, functools.partial(*self._args, **self._kw))
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            def drop(f):
                if not f.cancelled() and f.exception() is None:
                    loop.run_in_executor(None, f.result().release)
            fut.add_done_callback(drop)
            raise

    def __await__(self):
        return self._acquire().__await__()

    async def __aenter__(self) -> Lock:
        self._lock = await self._acquire()
        return self._lock

    async def __aexit__(self, exc_type, exc, tb):
        try:
            await _run(self._lock.release)
        except Exception:
            if exc_type is None:
                raise


class AsyncWatch:
    """`async for event in await client.watch(name)`."""

    def __init__(self, watch):
        self.sync = watch

    def __aiter__(self):
        return self

    async def __anext__(self) -> Event:
        while True:
            try:
                ev = await _run(self.sync.get, 0.25)
            except Exception:
                if self.sync._closed:
                    raise StopAsyncIteration
                raise
            if ev is not None:
                return ev

    async def get(self, timeout: Optional[float] = None):
        return await _run(self.sync.get, timeout)

    async def close(self):
        await _run(self.sync.close)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()
