#!/usr/bin/env python3
"""Writes the tiny seed corpus of fuzz_locks_cmd (run from tests/locks/)."""
import struct

def cmd(op, mode=0, ttl=0, term=1, now=1000, session=0, seq=0, lease=0, token=0, name=b"", value=b""):
    return struct.pack("<BBBBIQQQQQQHH", 1, op, mode, 0, ttl, term, now, session, seq, lease,
                       token, len(name), len(value)) + name + value

S = (1 << 24) | 0
seeds = {
    "session_open": cmd(1, ttl=10000),
    "acquire_ttl": cmd(16, ttl=500, session=S, seq=1, name=b"lock/0000001"),
    "acquire_wait": cmd(16, mode=1, ttl=500, session=S, seq=2, name=b"a"),
    "release": cmd(17, session=S, seq=3, token=2, name=b"lock/0000001"),
    "kv_put": cmd(32, session=S, seq=4, name=b"cfg/x", value=b"v1"),
    "lease_expire": cmd(65, lease=(2 << 24) | 0, term=2, now=5),
    "tick": cmd(64, term=3, now=99999),
    "bad_version": b"\x02" + cmd(64)[1:],
    "truncated": cmd(16, ttl=500, session=S, seq=1, name=b"abc")[:40],
}
for name, data in seeds.items():
    with open("corpus_locks_cmd/" + name, "wb") as f:
        f.write(data)
