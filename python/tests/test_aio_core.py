"""The asyncio face on libhasp's asynchronous core, against a real cluster:
every call with a hasp_client_*_async form runs on the loop's thread, none
in an executor thread; without those forms it falls back to the executor."""
import asyncio
import concurrent.futures
import select
import threading
from collections import deque

import pytest

import hasp
from hasp import _capi, aio
from conftest import DEADLINE, eventually

pytestmark = pytest.mark.skipif(not _capi.HAS_ASYNC, reason="libhasp has no asynchronous core")


class NoExecutor(concurrent.futures.ThreadPoolExecutor):
    """A default executor that refuses every job: a call that runs in an
    executor thread fails the test."""

    def __init__(self):
        super().__init__(max_workers=1)
        self.jobs = []

    def submit(self, fn, *args, **kw):
        self.jobs.append(fn)
        raise AssertionError("a job in the loop's default executor: %r" % (fn,))


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    def __init__(self):
        super().__init__(max_workers=4)
        self.jobs = []

    def submit(self, fn, *args, **kw):
        self.jobs.append(fn)
        return super().submit(fn, *args, **kw)


async def next_event(w, timeout=DEADLINE):
    """The next event but RESYNCs; `timeout`: a liveness bound only."""
    while True:
        ev = await w.get(timeout=timeout)
        assert ev is not None, "no event within the liveness bound"
        if ev.type != "RESYNC":
            return ev


async def every_call(a, b, name):
    """Each call of the asyncio face once, with the events it causes."""
    await a.connect()
    assert a.sync.session_id != 0
    w = await a.watch(name + "/", prefix=True)
    assert (w.name, w.prefix) == (name + "/", True)
    assert (await b.get(name + "/k")) is None
    r1 = await b.put(name + "/k", b"v1")
    ev = await next_event(w)
    assert (ev.type, ev.name, ev.value, ev.revision) == ("KV_PUT", name + "/k", b"v1", r1)
    assert (await a.get(name + "/k")).revision == r1
    r2 = await b.cas(name + "/k", b"v2", expected_revision=r1)
    with pytest.raises(hasp.CompareFailed):
        await a.cas(name + "/k", b"late", expected_revision=r1)
    ev = await next_event(w)
    assert (ev.type, ev.value, ev.revision) == ("KV_PUT", b"v2", r2)
    assert [(kv.key, kv.value) for kv in await a.range(name + "/")] == [(name + "/k", b"v2")]
    assert await b.delete(name + "/k") and not await b.delete(name + "/k")
    assert (await next_event(w)).type == "KV_DELETED"
    assert await a.read_lock(name + "/l") is None
    async with b.lock(name + "/l", ttl=30.0) as held:
        info = await a.read_lock(name + "/l")
        assert info.token == held.token and not info.ours
        ev = await next_event(w)
        assert (ev.type, ev.name, ev.revision) == ("LOCK_GRANTED", name + "/l", held.token)
    ev = await next_event(w)
    assert (ev.type, ev.name) == ("LOCK_RELEASED", name + "/l")
    assert await a.read_lock(name + "/l") is None
    await a.watch_progress()  # answered (nothing missed: at most a RESYNC)
    await w.close()
    assert w.sync not in a.sync._watches
    with pytest.raises(hasp.ClosedError):
        await w.get(timeout=0)
    with pytest.raises(hasp.InvalidArgument):
        await a.put("has space", b"x")  # refused locally: nothing started


async def lease_and_token_calls(a, b, name):
    """Leases, check_token and a held lock's renew, check and release."""
    lease = await a.grant_lease(30.0)
    assert lease != 0
    rev = await a.put(name + "/k", b"on lease", lease_id=lease)
    kv = await b.get(name + "/k")
    assert (kv.revision, kv.lease_id) == (rev, lease)
    on_lease = await a.lock(name + "/l", lease_id=lease, blocking=False)
    assert isinstance(on_lease, hasp.AsyncLock) and on_lease.lease_id == lease
    assert (await b.read_lock(name + "/l")).lease_id == lease
    assert await b.check_token(name + "/l", on_lease.token) and await on_lease.check()
    await a.revoke_lease(lease)  # the lock and the key end with it
    assert await b.get(name + "/k") is None
    assert await b.read_lock(name + "/l") is None
    assert not await b.check_token(name + "/l", on_lease.token)
    await on_lease.release()  # no longer held: nothing to release, no error

    # renew: the validity counts from the renew's send with the new TTL.
    held = await b.lock(name + "/r", ttl=5.0, renew=False)
    before = held.valid_until_ns()
    assert before > 0 and held.ttl == 5.0
    await held.renew(ttl=60.0)
    assert held.ttl == 60.0
    # send(renew) + 60 s - drift (5 ms + 1 %) > send(acquire) + 5 s + 50 s
    assert held.valid_until_ns() > before + 50 * 10**9
    # The cluster's view: at most 5 s were left before the renew; more now
    # (unless 55 s passed, far beyond the liveness bounds).
    info = await a.read_lock(name + "/r")
    assert info.token == held.token and info.ttl_remaining > 5.0
    assert await a.check_token(name + "/r", held.token) and await held.check()
    await held.release()
    assert not await a.check_token(name + "/r", held.token)  # released
    with pytest.raises(hasp.NotHolder):
        await held.renew()
    async with b.lock(name + "/r", ttl=30.0) as again:
        assert again.token > held.token
        assert not await a.check_token(name + "/r", held.token)  # an old token
        assert await a.check_token(name + "/r", again.token)
    with pytest.raises(hasp.InvalidArgument):
        await a.grant_lease(0)  # refused locally: nothing started


async def try_lock_session_and_stats(a, b, name):
    """try_lock, session_id and stats of the asyncio face, as the blocking
    client's: a lock or None, never a wait in the lock's queue."""
    await a.connect()
    await b.connect()
    assert a.session_id == a.sync.session_id != 0
    assert b.session_id not in (0, a.session_id)
    before = a.stats()
    assert set(before) == set(a.sync.stats()) == set(_capi.STATS_FIELDS)

    held = await b.try_lock(name, ttl=30.0)
    assert isinstance(held, hasp.AsyncLock) and held.token > 0 and held.safe()
    # The cluster names the holder by its session: b's, as b reports it.
    info = await a.read_lock(name)
    assert (info.token, info.holder_session_id) == (held.token, b.session_id)
    assert await a.try_lock(name, ttl=30.0) is None  # busy: another client holds it
    # TRY mode: nothing of a's is left in the lock's queue.
    info = await b.read_lock(name)
    assert (info.token, info.waiters, info.ours) == (held.token, 0, True)
    with pytest.raises(hasp.InvalidArgument):
        await a.try_lock(name, ttl=30.0, timeout=1.0)  # as Client.try_lock: no wait
    await held.release()

    mine = await a.try_lock(name, ttl=30.0)  # free again: a later grant
    assert isinstance(mine, hasp.AsyncLock) and mine.token > held.token
    info = await b.read_lock(name)
    assert (info.token, info.holder_session_id) == (mine.token, a.session_id)
    # Another task of the same client holds it: busy too (the local mutex).
    assert await asyncio.ensure_future(a.try_lock(name, ttl=30.0)) is None
    assert await b.try_lock(name, ttl=30.0) is None
    async with mine:
        pass
    async with b.lock(name, ttl=30.0, blocking=False) as last:
        assert last.token > mine.token

    after = a.stats()
    # a's requests since `before`: a lock read, 2 TRYs (one busy, one
    # granted; the refused one and the local one sent nothing), a release.
    assert after["tx_requests"] >= before["tx_requests"] + 4
    assert after["rx_replies"] >= before["rx_replies"] + 4
    assert all(after[k] >= before[k] for k in before)


def test_try_lock_session_id_and_stats_on_the_core(cluster, name):
    executor = NoExecutor()
    run_with_executor(cluster, name, executor, try_lock_session_and_stats)
    assert executor.jobs == []


def test_try_lock_session_id_and_stats_fall_back_to_the_executor(cluster, name, monkeypatch):
    monkeypatch.setattr(_capi, "ASYNC", set())
    executor = CountingExecutor()
    run_with_executor(cluster, name, executor, try_lock_session_and_stats)
    # 2 connects, 3 read_locks, 3 releases (acquisition stays on the core).
    assert len(executor.jobs) >= 8


def test_session_id_is_zero_until_the_session_opens(cluster, name):
    async def main():
        a = hasp.AsyncClient(cluster, deadline=DEADLINE, keepalive=False)
        try:
            assert a.session_id == 0  # no request yet: no session
            lock = await a.try_lock(name, ttl=30.0)  # opens it
            assert a.session_id != 0
            assert (await a.read_lock(name)).holder_session_id == a.session_id
            await lock.release()
        finally:
            await a.close()
    asyncio.run(main())


def test_on_lock_lost_set_on_the_async_client_fires_for_its_locks(cluster, name):
    """The client's default lock-lost callback, set through the asyncio
    face after opening, fires for a lock taken later whose validity runs
    out (no renewal); stats counts the loss."""
    async def main():
        async with hasp.AsyncClient(cluster, deadline=DEADLINE) as a:
            lost = []
            assert a.on_lock_lost is None and a.lost_margin == a.sync.lost_margin == 0.1
            a.on_lock_lost = lost.append
            assert a.sync.on_lock_lost == lost.append
            lock = await a.try_lock(name, ttl=1.0, renew=False)
            end = asyncio.get_running_loop().time() + DEADLINE  # a liveness bound
            while not lost and asyncio.get_running_loop().time() < end:
                await asyncio.sleep(0.02)
            assert lost == [lock] and lock.lost and lock.lost_reason == "ETIMEDOUT"
            if a.sync._lib_loss:  # libhasp's own lock-loss watch fired it
                assert a.stats()["locks_lost"] == 1
            await lock.release()  # lost: nothing to release, no error
    asyncio.run(main())


def run_with_executor(cluster, name, executor, scenario=every_call):
    async def main():
        loop = asyncio.get_running_loop()
        a = hasp.AsyncClient(cluster, deadline=DEADLINE)
        b = hasp.AsyncClient(cluster, deadline=DEADLINE)
        loop.set_default_executor(executor)
        try:
            await scenario(a, b, name)
        finally:
            # close() ends in hasp_client_close, which has no asynchronous
            # form: it takes an executor thread.
            loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=2))
            await a.close()
            await b.close()
    asyncio.run(main())


def test_every_async_form_runs_on_the_core(cluster, name):
    """No job reaches the executor (NoExecutor would raise into the call)."""
    assert {"connect", "watch", "unwatch", "kv_range", "kv_get", "kv_put", "kv_cas",
            "kv_delete", "lock_read", "release", "check", "renew", "lease_grant",
            "lease_revoke", "watch_progress"} <= _capi.ASYNC
    executor = NoExecutor()
    run_with_executor(cluster, name, executor)
    assert executor.jobs == []


def test_leases_tokens_and_renew_run_on_the_core(cluster, name):
    assert {"lease_grant", "lease_revoke", "check", "renew"} <= _capi.ASYNC
    executor = NoExecutor()
    run_with_executor(cluster, name, executor, lease_and_token_calls)
    assert executor.jobs == []


def test_leases_tokens_and_renew_fall_back_to_the_executor(cluster, name, monkeypatch):
    monkeypatch.setattr(_capi, "ASYNC", set())
    executor = CountingExecutor()
    run_with_executor(cluster, name, executor, lease_and_token_calls)
    # grant, revoke, 5 check_tokens, 3 checks, 2 renews, 3 puts/gets,
    # 3 read_locks, 3 releases: one job each.
    assert len(executor.jobs) >= 20


def timers(loop):
    """The loop's pending timers (BaseEventLoop's heap): none while only a
    file descriptor or another thread can wake the loop."""
    return [h for h in loop._scheduled if not h.cancelled()]


def test_an_event_another_call_read_wakes_the_waiting_task(cluster, name):
    """No poll: a task waiting for an event sleeps without a timer, and an
    event that another call of the client read off the socket (here a
    blocking call made while the loop is held up, so it cannot be the
    loop) wakes it through libhasp's fd."""
    assert not hasattr(aio, "_EVENT_POLL")

    async def main():
        loop = asyncio.get_running_loop()
        # The keepalive thread keeps the session: libhasp asks the loop
        # for no timer (hasp_client_timeout_ms -1 with nothing in flight).
        a = hasp.AsyncClient(cluster, deadline=DEADLINE)
        writer = hasp.Client(cluster, deadline=DEADLINE)
        try:
            w = await a.watch(name + "/", prefix=True)
            for i in range(2):
                task = asyncio.ensure_future(next_event(w, timeout=None))
                while not a._event_waiters:
                    await asyncio.sleep(0)
                assert timers(loop) == [], "a task waiting for an event set a timer"
                before = a.sync.stats()["events"]
                # The loop's thread is busy here: the event is read off the
                # socket by blocking calls (or the keepalive thread).
                writer.put(name + "/k", b"v%d" % i)
                assert eventually(lambda: a.sync.read_lock(name + "/none") is None
                                  and a.sync.stats()["events"] > before)
                assert a.sync._watches[0]._queue == deque()  # not handed over yet
                # libhasp's fd says an event waits in its buffer: the loop
                # wakes at once, not at the next keepalive.
                assert select.select([a._fd], [], [], 0)[0] == [a._fd]
                ev = await asyncio.wait_for(task, DEADLINE)  # a liveness bound
                assert (ev.type, ev.name, ev.value) == ("KV_PUT", name + "/k", b"v%d" % i)
            await w.close()
        finally:
            writer.close()
            await a.close()
    asyncio.run(main())


def test_an_event_a_blocking_watch_handed_over_wakes_the_waiting_task(cluster, name):
    """A blocking Watch.get of the same client pumps the events out of
    libhasp's buffer for every watch while the loop's own pump finds the
    pump taken and libhasp's fd has nothing left to say: the blocking
    pump wakes the task waiting on the asyncio watch."""
    async def main():
        loop = asyncio.get_running_loop()
        a = hasp.AsyncClient(cluster, deadline=DEADLINE)
        writer = hasp.Client(cluster, deadline=DEADLINE)
        try:
            aw = await a.watch(name)
            tw = a.sync.watch(name)  # blocking, used on the loop's thread
            task = asyncio.ensure_future(next_event(aw, timeout=None))
            while not a._event_waiters:
                await asyncio.sleep(0)
            assert timers(loop) == []
            # As if a thread were in tw.get: it holds the pump.
            assert a.sync._pump.acquire(blocking=False)
            before = a.sync.stats()["events"]
            writer.put(name, b"x")
            assert eventually(lambda: a.sync.read_lock(name + "/none") is None
                              and a.sync.stats()["events"] > before)
            while select.select([a._fd], [], [], 0)[0]:  # the loop looks, pumps nothing
                await asyncio.sleep(0)
            while not a._event_waiters:  # and the task, woken, waits again
                await asyncio.sleep(0)
            assert not aw.sync._queue and not task.done()
            a.sync._pump.release()
            ev = tw.get(timeout=DEADLINE)  # the blocking pump; a liveness bound
            while ev is not None and ev.type == "RESYNC":
                ev = tw.get(timeout=DEADLINE)
            assert (ev.type, ev.value) == ("KV_PUT", b"x")
            assert aw.sync._queue  # handed over to the asyncio watch too
            await asyncio.sleep(0)  # the wake-up it scheduled runs first
            assert not a._event_waiters, "the task still waits for an event it was handed"
            ev = await asyncio.wait_for(task, DEADLINE)  # a liveness bound
            assert (ev.type, ev.value) == ("KV_PUT", b"x")
            tw.close()
            await aw.close()
        finally:
            writer.close()
            await a.close()
    asyncio.run(main())


def test_a_task_waiting_for_the_local_mutex_is_woken_by_the_release(cluster, name):
    """Tasks and threads of one client take turns on a name's local mutex:
    a waiting task sleeps without a timer until the holder (a task, then a
    thread) releases it."""
    async def main():
        loop = asyncio.get_running_loop()
        async with hasp.AsyncClient(cluster, deadline=DEADLINE) as a:
            first = await a.lock(name, ttl=30.0)
            second = asyncio.ensure_future(a.lock(name, ttl=30.0))
            while not a.sync._local_wakers.get(name.encode()):
                await asyncio.sleep(0)
            assert timers(loop) == [], "a task waiting for the local mutex set a timer"
            with pytest.raises(hasp.LockBusy):
                await a.lock(name, ttl=30.0, blocking=False)
            with pytest.raises(hasp.Timeout):
                await a.lock(name, ttl=30.0, timeout=0.01)
            await first.release()
            held = await asyncio.wait_for(second, DEADLINE)  # a liveness bound
            assert held.token > first.token
            await held.release()
            # A thread of the same client holds it, then releases it.
            by_thread = await loop.run_in_executor(None, a.sync.lock, name, 30.0)
            third = asyncio.ensure_future(a.lock(name, ttl=30.0))
            while not a.sync._local_wakers.get(name.encode()):
                await asyncio.sleep(0)
            assert timers(loop) == []
            await loop.run_in_executor(None, by_thread.release)
            held = await asyncio.wait_for(third, DEADLINE)
            assert held.token > by_thread.token
            await held.release()
            assert a.sync._local_wakers == {} and a.sync._local == {}
    asyncio.run(main())


def test_without_the_async_forms_calls_fall_back_to_the_executor(cluster, name, monkeypatch):
    """A libhasp without hasp_client_*_async forms (libhasp 1.0 lacks
    connect, watch, unwatch and kv_range): the same calls work, each in an
    executor thread. This is also what the test above would see if a call
    left the core."""
    monkeypatch.setattr(_capi, "ASYNC", set())
    executor = CountingExecutor()
    run_with_executor(cluster, name, executor)
    # connect, watch, 2 gets, put, 2 cas, range, 2 deletes, 3 read_locks,
    # release, unwatch: one job each (acquisition stays on the core).
    assert len(executor.jobs) >= 16


class ThreadRecordingCollector(aio._RangeCollector):
    threads = set()

    def _each(self, entry, arg):
        self.threads.add(threading.get_ident())
        return super()._each(entry, arg)


def test_range_across_many_datagrams_on_the_core(cluster, name, monkeypatch):
    """Entries of ~1 KiB: one per datagram, so the walk takes a page per
    entry, each delivered by hasp_client_process on the loop's thread."""
    keys = ["%s/%02d" % (name, i) for i in range(6)]
    values = [bytes([65 + i]) * 1000 for i in range(6)]
    monkeypatch.setattr(aio, "_RangeCollector", ThreadRecordingCollector)

    async def main():
        asyncio.get_running_loop().set_default_executor(NoExecutor())
        # No keepalive thread: the loop's requests are the only ones.
        c = hasp.AsyncClient(cluster, deadline=DEADLINE, keepalive=False)
        try:
            for k, v in zip(keys, values):
                await c.put(k, v)
            before = c.sync.stats()["tx_requests"]
            got = await c.range(name + "/")
            pages = c.sync.stats()["tx_requests"] - before
            assert [(kv.key, kv.value) for kv in got] == list(zip(keys, values))
            assert pages >= len(keys), "one datagram per entry: %d requests" % pages
            assert [kv.key for kv in await c.range(name + "/", limit=4)] == keys[:4]
            assert await c.range(name + "/none/") == []
            assert ThreadRecordingCollector.threads == {threading.get_ident()}
        finally:
            asyncio.get_running_loop().set_default_executor(
                concurrent.futures.ThreadPoolExecutor(max_workers=1))
            await c.close()
    asyncio.run(main())


def test_cancelled_calls_on_the_core(cluster, name):
    """A task cancelled in a call raises CancelledError; the client goes on
    (a cancelled read is stopped on the core, a cancelled watch undone)."""
    async def main():
        async with hasp.AsyncClient(cluster, deadline=DEADLINE) as c:
            for call in (c.range(name + "/"), c.get(name), c.connect(),
                         c.watch(name, prefix=True)):
                task = asyncio.ensure_future(call)
                await asyncio.sleep(0)  # started: its request is in flight
                if task.cancel():  # (a connect may have found the session open)
                    with pytest.raises(asyncio.CancelledError):
                        await task
            await c.put(name + "/k", b"x")
            assert (await c.get(name + "/k")).value == b"x"
            # Every operation ends (the cancelled reads with ECANCELED, the
            # watch with its OK, then undone by an unwatch): nothing left.
            end = asyncio.get_running_loop().time() + DEADLINE  # a liveness bound
            while (c._pending or c._background) and asyncio.get_running_loop().time() < end:
                await asyncio.sleep(0.01)
            assert c._pending == {} and not c._background
            assert c.sync._watches == []
    asyncio.run(main())


def test_close_ends_calls_in_progress(cluster, name):
    """close() fails the calls still on the core with ClosedError; libhasp
    ends them without their callbacks (a range's callback, freed after the
    library's client, is never called again)."""
    async def main():
        c = hasp.AsyncClient(cluster, deadline=DEADLINE)
        task = asyncio.ensure_future(c.range(name + "/"))
        await asyncio.sleep(0)  # started: the session opens first
        assert c._pending
        await c.close()
        with pytest.raises(hasp.ClosedError):
            await task
        assert c._pending == {}
        with pytest.raises(hasp.ClosedError):
            await c.get(name)
    asyncio.run(main())
