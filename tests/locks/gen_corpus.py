#!/usr/bin/env python3
"""Writes the tiny seed corpus of fuzz_locks_cmd (run from tests/locks/).

Single commands exercise the decoder; "story" inputs are frames (u16 length +
command) that build real state: sessions, locks, waiters, leases, KV."""
import struct

def cmd(op, mode=0, ttl=0, term=1, now=1000, session=0, seq=0, lease=0, token=0, name=b"", value=b""):
    return struct.pack("<BBBBIQQQQQQHH", 1, op, mode, 0, ttl, term, now, session, seq, lease,
                       token, len(name), len(value)) + name + value

def frames(*cmds):
    return b"".join(struct.pack("<H", len(c)) + c for c in cmds)

S1 = (1 << 24) | 0   # first session opened
S2 = (2 << 24) | 1   # second session opened
seeds = {
    "session_open": cmd(1, ttl=10000),
    "acquire_ttl": cmd(16, ttl=500, session=S1, seq=1, name=b"lock/0000001"),
    "release": cmd(17, session=S1, seq=3, token=2, name=b"lock/0000001"),
    "kv_put": cmd(32, session=S1, seq=4, name=b"cfg/x", value=b"v1"),
    "tick": cmd(64, term=3, now=99999),
    "bad_version": b"\x02" + cmd(64)[1:],
    "truncated": cmd(16, ttl=500, session=S1, seq=1, name=b"abc")[:40],
    "story_handoff": frames(
        cmd(1, ttl=10000), cmd(1, ttl=10000),
        cmd(16, ttl=100, session=S1, seq=1, name=b"a"),
        cmd(16, mode=1, ttl=100, session=S2, seq=1, name=b"a"),
        cmd(65, lease=(3 << 24) | 0, now=1100),
        cmd(17, session=S2, seq=2, token=5, name=b"a")),
    "story_lease": frames(
        cmd(1, ttl=10000),
        cmd(8, ttl=200, session=S1, seq=1),
        cmd(16, session=S1, seq=2, lease=(2 << 24) | 0, name=b"x"),
        cmd(32, session=S1, seq=3, lease=(2 << 24) | 0, name=b"k", value=b"v"),
        cmd(16, session=S1, seq=2, lease=(2 << 24) | 0, name=b"x"),
        cmd(10, session=S1, seq=4, lease=(2 << 24) | 0)),
}
for name, data in seeds.items():
    with open("corpus_locks_cmd/" + name, "wb") as f:
        f.write(data)
