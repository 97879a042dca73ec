#!/usr/bin/env python3
"""Retransmissions answered from the leader's reply cache (docs/PROTOCOL.md,
"Exactly once"), against a real cluster with client_auth = on.

  retransmit_client.py CLUSTER_ADDRS ID KEY HASPCTL CLUSTER_DIR

A byte-identical copy of an applied ACQUIRE, and of an applied SESSION_OPEN,
must get the reply the first copy got, byte for byte, without a Raft entry:
the leader's hasp_commit_index stays where it was while
hasp_client_replies_from_cache_total rises. The same seq with another body
is not a retransmission: it is still proposed and refused BAD_REQUEST.
Two byte-identical copies of a new ACQUIRE sent back to back while both
followers are stopped (SIGSTOP, by the PIDs in the cluster directory) are
one log entry and one reply: the first cannot commit before the followers
run again, so the second arrives while the first is in flight whatever the
timing, and hasp_client_retransmits_in_flight_total rises.
What is measured is the leader's state, not time; the cluster runs with a
long time_tick_ms so that no TICK commits in between, and a measurement
across a leader change (another term) is taken again.
Exit status: 0 when every check held.
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_client import (ACQUIRE, BAD_REQUEST, EVENT, GRANTED, LOCK_READ, OK, Session,  # noqa: E402
                            encode, load_key, name8, parse_addrs, seal)

ATTEMPTS = 5  # measurements taken again after a leader change, at most
REQUESTS = "hasp_requests_total{lcore=0}"  # published with the commit index
CACHED = "hasp_client_replies_from_cache_total"
IN_FLIGHT = "hasp_client_retransmits_in_flight_total"


def metrics(haspctl, cluster_dir, node):
    """Node's series from `haspctl stats` (labels as haspctl prints them,
    unquoted)."""
    sock = os.path.join(cluster_dir, f"n{node}", "data", "admin.sock")
    text = subprocess.run([haspctl, "--socket", sock, "stats"], check=True,
                          capture_output=True, text=True, timeout=20).stdout
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and not line.startswith("#"):
            values[parts[0].replace('"', "")] = float(parts[1])
    return values


def replies_to(sess, seq, wait):
    """Yields the replies (bytes) to `seq` as they arrive, for `wait`
    seconds at most."""
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            rep = sess.sock.recvfrom(2048)[0]
        except socket.timeout:
            continue
        if len(rep) >= 44 and struct.unpack_from("<Q", rep, 16)[0] == seq and rep[5] != EVENT:
            yield rep


def send_once(sess, datagram, wait=3.0, rounds=4):
    """Sends `datagram` to the session's leader until its reply comes (the
    same bytes each time); returns (the reply's bytes or None, copies sent)."""
    seq = struct.unpack_from("<Q", datagram, 16)[0]
    sess.drain()
    for sent in range(1, rounds + 1):
        sess.sock.sendto(datagram, sess.target)
        rep = next(replies_to(sess, seq, wait), None)
        if rep is not None:
            return rep, sent
    return None, rounds


def settled(haspctl, cluster_dir, node, requests_min=0):
    """Node's metrics once they count `requests_min` client datagrams,
    nothing proposed is left uncommitted or unapplied, and two readings in
    a row (the node publishes every 10 ms) saw the same datagrams and
    commit index: a late copy of an earlier request is counted before, not
    during, a measurement. Bounded: 400 readings."""
    last = None
    for _ in range(400):
        m = metrics(haspctl, cluster_dir, node)
        quiet = (m.get(REQUESTS, 0) >= requests_min and m.get("hasp_proposals_pending") == 0 and
                 m.get("hasp_applied_index") == m.get("hasp_commit_index"))
        key = (m.get(REQUESTS), m.get("hasp_commit_index"))
        if quiet and key == last:
            return m
        last = key if quiet else None
        time.sleep(0.05)
    raise SystemExit(f"retransmit: node {node} did not settle")


def measured(sess, act, haspctl, cluster_dir):
    """(result, leader metrics before, after) for act(leader node, attempt)
    -> (result, datagrams sent), taken again when the term changed in
    between (a leader change commits its own entry)."""
    for attempt in range(ATTEMPTS):
        node = int(sess.target[0].rsplit(".", 1)[1]) - 10
        before = settled(haspctl, cluster_dir, node)
        result, sent = act(node, attempt)
        after = settled(haspctl, cluster_dir, node, before[REQUESTS] + sent)
        if before.get("hasp_is_leader") == 1 and after.get("hasp_term") == before.get("hasp_term"):
            return result, before, after
        sess.call(LOCK_READ, name8(b"retransmit/probe"))  # follows NOT_LEADER to the new leader
    raise SystemExit("retransmit: the leader kept changing")


def resend(sess, datagram):
    """An act for measured(): one retransmission of `datagram`."""
    return lambda node, attempt: send_once(sess, datagram)


def status(rep):
    """The status of a reply (None: no reply)."""
    return None if rep is None else struct.unpack_from("<H", rep, 26)[0]


failures = 0


def check(name, ok, detail):
    global failures
    print(f"retransmit: {'ok' if ok else 'FAIL'}: {name}: {detail}", flush=True)
    failures += 0 if ok else 1


def answered_from_cache(sess, what, datagram, first_reply, haspctl, cluster_dir):
    """Checks that a copy of `datagram`, whose first copy got `first_reply`,
    gets that reply again from the leader's cache without a log entry."""
    again, before, after = measured(sess, resend(sess, datagram), haspctl, cluster_dir)
    check(f"retransmitted {what} gets the first reply", again == first_reply,
          f"status={status(again)} same_bytes={again == first_reply}")
    check(f"retransmitted {what} adds no log entry",
          after["hasp_commit_index"] == before["hasp_commit_index"],
          f"commit {before['hasp_commit_index']:.0f} -> {after['hasp_commit_index']:.0f}")
    check(f"retransmitted {what} counted", after.get(CACHED, 0) > before.get(CACHED, 0),
          f"{CACHED} {before.get(CACHED)} -> {after.get(CACHED)}")


def copies_in_flight(sess, haspctl, cluster_dir):
    """An act for measured(): two copies of a new ACQUIRE, sent back to
    back while both followers are stopped; returns (the replies, 2). The
    leader proposes the first at once and cannot commit it until the
    followers run again, and they are resumed only after the leader
    counted both datagrams: so the second arrives while the first is in
    flight, however the machine schedules. (A stop longer than an election
    timeout on a loaded machine may depose the leader: measured() then
    tries again, with a new seq.)"""
    def act(node, attempt):
        sess.seq += 1
        name = b"retransmit/in-flight-%d" % attempt
        datagram = seal(sess.skey, encode(ACQUIRE, sess.id, sess.seq,
                                          struct.pack("<QIB", 0, 60000, 0) + name8(name)))
        requests = metrics(haspctl, cluster_dir, node).get(REQUESTS, 0)
        pids = [int(open(os.path.join(cluster_dir, f"n{i}", "pid")).read())
                for i in (1, 2, 3) if i != node]
        sess.drain()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            sess.sock.sendto(datagram, sess.target)
            sess.sock.sendto(datagram, sess.target)
            end = time.monotonic() + 5.0
            while (metrics(haspctl, cluster_dir, node).get(REQUESTS, 0) < requests + 2 and
                   time.monotonic() < end):
                time.sleep(0.01)
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        return list(replies_to(sess, sess.seq, 3.0)), 2
    return act


def main():
    addrs = parse_addrs(sys.argv[1])
    identity, key = sys.argv[2], load_key(sys.argv[3])
    haspctl, cluster_dir = sys.argv[4], sys.argv[5]

    s = Session(addrs, identity, key, ttl=60000)
    assert s.open_status == OK, s.open_status
    lock = b"retransmit/lock"
    s.seq += 1
    acquire_seq = s.seq
    first = seal(s.skey, encode(ACQUIRE, s.id, acquire_seq, struct.pack("<QIB", 0, 60000, 0) + name8(lock)))
    st, rep = s.exchange(first, s.skey)
    assert st == GRANTED, st

    # 1. A byte-identical ACQUIRE: the cached reply, no entry.
    answered_from_cache(s, "ACQUIRE", first, rep, haspctl, cluster_dir)
    # 2. A byte-identical SESSION_OPEN (same nonce): the open's reply, no entry.
    answered_from_cache(s, "SESSION_OPEN", s.open_datagram, s.open_reply, haspctl, cluster_dir)

    # 3. The same seq with another body is no retransmission: proposed as
    # before, and the state machine refuses it (request_mismatch).
    other = seal(s.skey, encode(ACQUIRE, s.id, acquire_seq, struct.pack("<QIB", 0, 60000, 0) + name8(b"retransmit/other")))
    again, before, after = measured(s, resend(s, other), haspctl, cluster_dir)
    check("same seq, other body refused", status(again) == BAD_REQUEST,
          f"status={status(again)}")
    check("same seq, other body still proposed",
          after["hasp_commit_index"] > before["hasp_commit_index"] and
          after.get(CACHED, 0) == before.get(CACHED, 0),
          f"commit {before['hasp_commit_index']:.0f} -> {after['hasp_commit_index']:.0f}, "
          f"{CACHED} {before.get(CACHED)} -> {after.get(CACHED)}")

    # 4. A copy of a command in flight: dropped, one entry, one reply.
    act = copies_in_flight(s, haspctl, cluster_dir)
    got, before, after = measured(s, act, haspctl, cluster_dir)
    check("two copies in flight get one reply", len(got) == 1 and status(got[0]) == GRANTED,
          f"replies={len(got)} status={[status(r) for r in got]}")
    check("two copies in flight are one log entry",
          after["hasp_commit_index"] == before["hasp_commit_index"] + 1,
          f"commit {before['hasp_commit_index']:.0f} -> {after['hasp_commit_index']:.0f}")
    check("the copy in flight counted", after.get(IN_FLIGHT, 0) == before.get(IN_FLIGHT, 0) + 1,
          f"{IN_FLIGHT} {before.get(IN_FLIGHT)} -> {after.get(IN_FLIGHT)}")

    # Nothing of it moved the lock: the session holds it with its token.
    st, info = s.call(LOCK_READ, name8(lock))
    check("the lock is held once, by its token", st == OK and info[52:60] == rep[44:52],
          f"lock_read={st}")
    return failures


if __name__ == "__main__":
    sys.exit(main())
