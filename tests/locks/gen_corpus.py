#!/usr/bin/env python3
"""Writes the tiny seed corpus of fuzz_locks_cmd (run from tests/locks/).

Single commands exercise the decoder; "story" inputs are frames (u16 length +
command) that build real state: sessions, locks, waiters, leases, KV."""
import struct

VERSION = 2  # locks/cmd_codec.h LOCKS_CMD_VERSION

def cmd(op, mode=0, ttl=0, term=1, now=1000, session=0, seq=0, lease=0, token=0, name=b"", value=b"",
        nonce=0):
    # SESSION_OPEN's client nonce shares bytes 48..55 with the token.
    slot48 = nonce if op == 1 else token
    return struct.pack("<BBBBIQQQQQQHH", VERSION, op, mode, 0, ttl, term, now, session, seq, lease,
                       slot48, len(name), len(value)) + name + value

def frames(*cmds):
    return b"".join(struct.pack("<H", len(c)) + c for c in cmds)

S1 = (1 << 24) | 0   # first session opened
S2 = (2 << 24) | 1   # second session opened
seeds = {
    "session_open": cmd(1, ttl=10000),
    "session_open_nonce": cmd(1, ttl=10000, nonce=0x1122334455667788),
    "version_1": b"\x01" + cmd(1, ttl=10000)[1:],
    "acquire_ttl": cmd(16, ttl=500, session=S1, seq=1, name=b"lock/0000001"),
    "release": cmd(17, session=S1, seq=3, token=2, name=b"lock/0000001"),
    "kv_put": cmd(32, session=S1, seq=4, name=b"cfg/x", value=b"v1"),
    "tick": cmd(64, term=3, now=99999),
    "bad_version": b"\x03" + cmd(64)[1:],
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
    # A retried open (same nonce) meets its live session; after the close
    # the nonce opens a new one.
    "story_open_nonce": frames(
        cmd(1, ttl=10000, nonce=7), cmd(1, ttl=10000, nonce=7),
        cmd(3, session=S1, seq=1),
        cmd(1, ttl=10000, nonce=7)),
    # The holder's session ends; its lock stays and another session releases
    # it by token (the CLI's acquire-then-release across processes).
    "story_session_end_keeps_lock": frames(
        cmd(1, ttl=100), cmd(1, ttl=10000),
        cmd(16, ttl=5000, session=S1, seq=1, name=b"cli"),
        cmd(16, mode=1, ttl=5000, session=S2, seq=1, name=b"cli"),
        cmd(66, session=S1, now=1200),
        cmd(17, session=S2, seq=2, token=3, name=b"cli", now=1200)),
}
for name, data in seeds.items():
    with open("corpus_locks_cmd/" + name, "wb") as f:
        f.write(data)
