"""asyncio over the blocking client: `async with client.lock(...)`.

Each libhasp call runs in the event loop's default executor (a thread), so
the loop never blocks; the protocol and the validity arithmetic stay
libhasp's. A task cancelled while it waits for a lock does not leave a
grant behind: the wait finishes in its thread (bounded by `timeout`) and a
grant that arrives after the cancellation is released at once.
"""
import asyncio
import functools
from typing import Optional

from .client import Client, Event, Lock


async def _run(fn, *args, **kw):
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, *args, **kw))


class AsyncClient:
    """The asyncio face of Client (same arguments)."""

    def __init__(self, *args, **kw):
        self.sync = Client(*args, **kw)

    async def close(self):
        await _run(self.sync.close)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    def lock(self, name: str, ttl: float = 10.0, **kw) -> "_LockRequest":
        """`async with client.lock(name, ttl) as lock:` or `await
        client.lock(...)`; the arguments of Client.lock."""
        return _LockRequest(self.sync, name, ttl, kw)

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
        self._args = (client.lock, name, ttl)
        self._kw = kw
        self._lock = None

    async def _acquire(self) -> Lock:
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
