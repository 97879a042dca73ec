"""Locks against a real cluster: exclusion, fencing, expiry, renewal."""
import threading
import time

import pytest

import hasp
from conftest import DEADLINE, eventually


def test_try_lock_is_exclusive_and_reports_the_holder(client, other, name):
    with client.lock(name, ttl=30.0, blocking=False) as held:
        assert held.token > 0 and held.safe()
        with pytest.raises(hasp.LockBusy) as busy:
            other.lock(name, ttl=30.0, blocking=False)
        assert busy.value.holder_token == held.token
        assert other.try_lock(name) is None
        info = other.read_lock(name)
        assert info.token == held.token and not info.ours
        assert client.read_lock(name).ours
    # Released on exit: the other client gets it, with a higher token.
    with other.lock(name, ttl=30.0, blocking=False) as next_:
        assert next_.token > held.token
    assert client.read_lock(name) is None


def test_wait_times_out_then_is_granted_after_release(client, other, name):
    held = client.lock(name, ttl=30.0)
    with pytest.raises(hasp.Timeout):
        other.lock(name, ttl=30.0, timeout=0.3)
    # The timed-out waiter left no queue entry that could be granted later.
    assert client.read_lock(name).waiters == 0
    got = []
    t = threading.Thread(target=lambda: got.append(other.lock(name, ttl=30.0, timeout=60)))
    t.start()
    assert eventually(lambda: client.read_lock(name).waiters == 1)
    held.release()
    t.join()
    assert got and got[0].token > held.token and got[0].check()
    got[0].release()


def test_mutual_exclusion_between_two_clients(client, other, name):
    """Four threads on two clients take the lock 40 times in all; no two
    are ever inside at once, and tokens only grow."""
    inside = []
    overlaps = []
    tokens = []
    errors = []
    guard = threading.Lock()

    def worker(c):
        for _ in range(10):
            try:
                lk = c.lock(name, ttl=30.0, timeout=120)
            except hasp.HaspError as e:
                errors.append((e, c.stats()))
                return
            with lk:
                with guard:
                    if inside:
                        overlaps.append((inside[:], lk.token))
                    inside.append(lk.token)
                    tokens.append(lk.token)
                threading.Event().wait(0.002)
                with guard:
                    inside.remove(lk.token)

    threads = [threading.Thread(target=worker, args=(c,)) for c in (client, other) * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert overlaps == []
    assert len(tokens) == 40 and tokens == sorted(tokens) and len(set(tokens)) == 40


def test_expiry_makes_safe_false_and_fences_the_late_writer(client, other, name):
    lost = []
    resource = hasp.Fence()
    a = client.lock(name, ttl=1.0, blocking=False, renew=False, on_lost=lost.append)
    assert resource.admit(a.token)
    # No renewal: the validity runs out, the callback fires once.
    assert eventually(lambda: not a.safe())
    assert eventually(lambda: lost == [a])
    assert a.lost and a.lost_reason == "ETIMEDOUT" and a.remaining() == 0.0
    if client._lib_loss:  # libhasp's own lock-loss watch fired it
        assert client.stats()["locks_lost"] == 1
    # The cluster frees it too; another client takes it with a newer token.
    b = other.lock(name, ttl=30.0, timeout=60)
    assert b.token > a.token
    assert resource.admit(b.token)
    # The paused first holder's late write is refused by the resource.
    assert not resource.admit(a.token)
    assert resource.highest == b.token
    assert not a.check() and b.check()
    a.release()  # lost: nothing to release, no error
    b.release()
    assert lost == [a]


def test_renewer_keeps_the_lock_past_its_ttl(client, other, name):
    lost = []
    with client.lock(name, ttl=3.0, on_lost=lost.append) as lk:
        first = lk.valid_until_ns()
        # Past the first grant's validity, the lock is still ours: renewed.
        assert eventually(lambda: time.monotonic_ns() > first + 100_000_000)
        assert lk.valid_until_ns() > first
        assert lk.check() and lk.safe()
        assert other.try_lock(name) is None
        if client._lib_loss:  # renewed by libhasp's auto_renew, not by Python
            assert client.stats()["lock_renews"] >= 1
    assert lost == []


def test_renew_refused_marks_the_lock_lost(client, other, name):
    lost = []
    lk = client.lock(name, ttl=30.0, renew=False, on_lost=lost.append)
    # Someone force-frees it: release with the token from another client.
    other._handle()
    assert hasp._capi.call("client_release", other._h, name.encode(), lk.token) == 0
    with pytest.raises(hasp.NotHolder):
        lk.renew()
    assert lost == [lk] and lk.lost_reason == "ENOTHOLDER" and not lk.safe()
    lk.release()


def test_local_refusals_send_nothing(client):
    with pytest.raises(hasp.InvalidArgument):
        client.lock("has space", ttl=1.0)
    with pytest.raises(hasp.InvalidArgument):
        client.lock("py/ttl", ttl=0.001)
    with pytest.raises(hasp.InvalidArgument):
        client.put("py/big", b"x" * 1025)


def test_threads_of_one_client_exclude_each_other(client, name):
    """The cluster grants a lock to a session; the package adds the local
    mutex so that two threads sharing a client do not both get it."""
    held = client.lock(name, ttl=30.0)
    with pytest.raises(hasp.LockBusy) as busy:
        client.lock(name, ttl=30.0, blocking=False)
    assert busy.value.holder_token == held.token
    with pytest.raises(hasp.Timeout):
        client.lock(name, ttl=30.0, timeout=0.2)
    held.release()
    again = client.lock(name, ttl=30.0, blocking=False)
    assert again.token > held.token
    again.release()


def test_lock_on_a_lease_is_lost_with_the_lease(client, other, name):
    lost = []
    lease = client.grant_lease(3.0)
    lk = client.lock(name, lease_id=lease, blocking=False, on_lost=lost.append)
    assert lk.lease_id == lease and lk.check()
    other.revoke_lease(lease)  # e.g. an operator revokes it: its locks go
    assert other.read_lock(name) is None
    if client._lib_loss:  # the keepalive finds the lease gone: a loss
        assert eventually(lambda: lost == [lk])
        assert lk.lost_reason == "ELEASE" and not lk.safe()
    lk.release()


def test_a_waiter_keeps_its_session_past_its_ttl(cluster, name):
    """Only a committed command renews a session on the cluster. libhasp
    counted any answer, so a waiter whose re-reads (LOCK_READ every
    500 ms while queued) came more often than a third of its session TTL
    sent no keepalive, lost its session on the cluster, and with it its
    place in the queue (ESESSION after about one TTL)."""
    holder = hasp.Client(cluster, deadline=DEADLINE)
    waiter = hasp.Client(cluster, deadline=DEADLINE, session_ttl=3.0)
    try:
        held = holder.lock(name, ttl=60.0, blocking=False)
        waiter.connect()
        session = waiter.session_id
        got = {}

        def wait():
            try:
                got["lock"] = waiter.lock(name, ttl=30.0, timeout=60)
            except hasp.HaspError as e:
                got["error"] = e
        t = threading.Thread(target=wait)
        t.start()
        time.sleep(10.0)  # over three session TTLs, re-reading all along
        held.release()
        t.join(60)
        assert "error" not in got, got
        assert got["lock"].token > held.token
        assert waiter.session_id == session
        assert waiter.stats()["wait_rechecks"] >= 2
        got["lock"].release()
    finally:
        waiter.close()
        holder.close()

