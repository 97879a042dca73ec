#!/usr/bin/env python3
"""A hostile client against a real cluster with client_auth = on (security
issue 15; docs/SECURITY.md section 5). Written from docs/PROTOCOL.md only
(wire v2, "Authentication"), with the standard library's keyed BLAKE2b.

  hostile_client.py CLUSTER_ADDRS VICTIM_ID VICTIM_KEY INTRUDER_ID INTRUDER_KEY
                    NARROW_ID NARROW_KEY

VICTIM and INTRUDER are identities allowed everything; INTRUDER has a
session quota of 4 (sessions=4); NARROW may only acquire under jobs/.
Each attack prints one line; the exit status is the number of attacks that
were not refused (0: every attack failed, as it must).
"""
import hashlib
import os
import socket
import struct
import sys
import time

OPEN, KEEPALIVE, CLOSE = 1, 2, 3
ACQUIRE, RELEASE, RENEW, CHECK, LOCK_READ = 16, 17, 18, 19, 20
WATCH, EVENT, KV_PUT, KV_GET, KV_RANGE = 24, 26, 32, 33, 36
OK, GRANTED, NOT_HOLDER, NOT_LEADER, NOT_FOUND, FULL, BAD_REQUEST, FORBIDDEN = 0, 1, 4, 5, 6, 10, 11, 19
SEQ_FLOOR = 0x0002  # header flag: no lower seq of this session is sent again
HDR = struct.Struct("<IBBHQQHH16s")
MAGIC = 0x50534148


def mac(key, data):
    return hashlib.blake2b(data, digest_size=16, key=key).digest()


def seal(key, datagram):
    tag = mac(key, datagram[:28] + bytes(16) + datagram[44:])
    return datagram[:28] + tag + datagram[44:]


def encode(op, session, seq, body, version=2, flags=0):
    return HDR.pack(MAGIC, version, op, flags, session, seq, len(body), 0, bytes(16)) + body


def name8(name):
    return struct.pack("<B", len(name)) + name


def load_key(path):
    return bytes.fromhex(open(path).read().strip())


class Session:
    """One authenticated session, leader found by NOT_LEADER hints."""

    def __init__(self, addrs, identity, key, ttl=30000):
        self.addrs = addrs
        self.identity = identity.encode()
        self.key = key
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(0.3)
        self.target = addrs[0]
        self.id = 0
        self.seq = 0
        self.skey = None
        self.events = []
        self.nonce = int.from_bytes(os.urandom(8), "little") | 1
        body = struct.pack("<QI", self.nonce, ttl) + name8(self.identity)
        # Kept for retransmissions of the open (same nonce, same bytes).
        self.open_datagram = seal(key, encode(OPEN, 0, 1, body))
        self.open_status, rep = self.exchange(self.open_datagram, key)
        self.open_reply = rep
        if self.open_status == OK:
            self.id = struct.unpack_from("<Q", rep, 44)[0]
            self.skey = hashlib.blake2b(b"hasp session v2" + struct.pack("<QQ", self.id, self.nonce),
                                        digest_size=32, key=key).digest()

    def exchange(self, datagram, key, deadline=6.0):
        """Sends until a verified reply comes (status, bytes), or (None, None)."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            self.sock.sendto(datagram, self.target)
            try:
                while True:
                    rep, src = self.sock.recvfrom(2048)
                    if len(rep) < 44 or rep[28:44] != mac(key, rep[:28] + bytes(16) + rep[44:]):
                        continue
                    _, _, op, _, sid, seq, _, status, _ = HDR.unpack_from(rep)
                    if op == EVENT:
                        self.events.append(rep)
                        continue
                    if seq != HDR.unpack_from(datagram)[5]:
                        continue
                    if status == NOT_LEADER and rep[54] == 1:
                        self.target = (socket.inet_ntoa(rep[48:52]), struct.unpack_from("<H", rep, 52)[0])
                        break
                    if status == NOT_LEADER:
                        self.target = self.addrs[(self.addrs.index(self.target) + 1) % len(self.addrs)] \
                            if self.target in self.addrs else self.addrs[0]
                        break
                    return status, rep
            except socket.timeout:
                continue
        return None, None

    def call(self, op, body):
        self.seq += 1
        return self.exchange(seal(self.skey, encode(op, self.id, self.seq, body)), self.skey)

    def drain(self):
        """Drops the datagrams already here (late answers to retransmissions)."""
        self.sock.setblocking(False)
        try:
            while True:
                self.sock.recvfrom(2048)
        except BlockingIOError:
            pass
        finally:
            self.sock.settimeout(0.3)

    def raw(self, datagram, wait=0.5):
        """Sends a datagram as is; returns every datagram that came back."""
        for addr in self.addrs:
            self.sock.sendto(datagram, addr)
        return self.listen(wait)

    def listen(self, wait):
        """Every datagram that comes within `wait` seconds."""
        got = []
        end = time.monotonic() + wait
        while time.monotonic() < end:
            try:
                got.append(self.sock.recvfrom(2048)[0])
            except socket.timeout:
                pass
        return got


def parse_addrs(arg):
    """CLUSTER_ADDRS ("ip:port,ip:port,...") as (host, port) pairs."""
    addrs = []
    for a in arg.split(","):
        host, port = a.rsplit(":", 1)
        addrs.append((host, int(port)))
    return addrs


failures = 0


def verdict(name, refused, detail):
    global failures
    print(f"hostile: {'refused' if refused else 'NOT REFUSED'}: {name}: {detail}", flush=True)
    failures += 0 if refused else 1


def main():
    addrs = parse_addrs(sys.argv[1])
    victim_id, victim_key = sys.argv[2], load_key(sys.argv[3])
    intruder_id, intruder_key = sys.argv[4], load_key(sys.argv[5])
    narrow_id, narrow_key = sys.argv[6], load_key(sys.argv[7])

    a = Session(addrs, victim_id, victim_key)
    b = Session(addrs, intruder_id, intruder_key)
    assert a.open_status == OK and b.open_status == OK, (a.open_status, b.open_status)
    lock = b"hostile/lock"
    st, rep = a.call(ACQUIRE, struct.pack("<QIB", 0, 30000, 0) + name8(lock))
    assert st == GRANTED, st
    token = struct.unpack_from("<Q", rep, 44)[0]

    def holder_view(s):
        st, rep = s.call(LOCK_READ, name8(lock))
        assert st == OK, st
        return struct.unpack_from("<QQ", rep, 44)  # holder session, token

    # 1. Token-only release and renew by another identity.
    holder, seen_token = holder_view(b)
    verdict("holder hidden from another identity", holder == 0 and seen_token == token,
            f"holder={holder} token={seen_token}")
    st, _ = b.call(RELEASE, struct.pack("<Q", token) + name8(lock))
    st2, _ = b.call(RENEW, struct.pack("<QI", token, 10) + name8(lock))
    verdict("release and renew by token from another identity",
            st == NOT_HOLDER and st2 == NOT_HOLDER and holder_view(a) == (a.id, token),
            f"release={st} renew={st2}")

    # 2. Session hijack: close the victim's session with its id, signed with
    # the intruder's key, and unsigned.
    forged = encode(CLOSE, a.id, a.seq + 1, b"")
    got = b.raw(seal(b.skey, forged)) + b.raw(forged)
    st, _ = a.call(KEEPALIVE, b"")
    verdict("session close with a stolen id", not got and st == OK, f"replies={len(got)} keepalive={st}")

    # 3. Event hijack: a request with the victim's id from the intruder's
    # address, then an event for the victim must reach the victim only.
    st, _ = a.call(WATCH, struct.pack("<B", 0) + name8(b"hostile/w"))
    assert st == OK, st
    got = b.raw(seal(b.skey, encode(KEEPALIVE, a.id, a.seq + 1, b"")))
    b.events.clear()
    a.events.clear()
    st, _ = a.call(KV_PUT, struct.pack("<QBH", 0, 9, 1) + b"hostile/w" + b"x")
    assert st == OK, st
    end = time.monotonic() + 3
    while not a.events and time.monotonic() < end:
        a.exchange(seal(a.skey, encode(KEEPALIVE, a.id, a.seq + 1, b"")), a.skey, deadline=0.3)
    stolen = []
    try:
        b.sock.settimeout(0.3)
        stolen = [b.sock.recvfrom(2048)[0]]
    except socket.timeout:
        pass
    verdict("event redirection", bool(a.events) and not stolen and not got,
            f"victim events={len(a.events)} intruder got={len(stolen) + len(got)}")

    # 4. Sequence poisoning with seq 2^63 under the victim's id.
    got = b.raw(seal(b.skey, encode(KEEPALIVE, a.id, 1 << 63, b"")))
    st, _ = a.call(KEEPALIVE, b"")
    verdict("sequence poisoning", not got and st == OK, f"replies={len(got)} next={st}")

    # 5. Reply-cache poisoning: the intruder uses the victim's next seq for
    # a put; the victim's real put at that seq must apply.
    key = b"hostile/cfg"
    got = b.raw(seal(b.skey, encode(KV_PUT, a.id, a.seq + 1, struct.pack("<QBH", 0, len(key), 4) + key + b"evil")))
    st, _ = a.call(KV_PUT, struct.pack("<QBH", 0, len(key), 4) + key + b"good")
    st2, rep = a.call(KV_GET, name8(key))
    value = rep[44 + 18:] if rep else b""
    verdict("reply-cache poisoning", not got and st == OK and st2 == OK and value.endswith(b"good"),
            f"replies={len(got)} put={st} value={value!r}")

    # 6. Live-session enumeration: WATCH for the victim's id and for ids
    # that do not exist, untagged and tagged with the intruder's key.
    probes = [encode(WATCH, sid, 1, struct.pack("<B", 0) + name8(b"x")) for sid in (a.id, a.id + 1, 12345)]
    got = []
    for p in probes:
        got += b.raw(p, wait=0.2) + b.raw(seal(b.skey, p), wait=0.2)
    verdict("live-session enumeration", not got, f"replies={len(got)}")

    # 8. Session-table exhaustion: the intruder's quota is 4 sessions (it
    # holds at least one); the victim still opens.
    opened = [Session(addrs, intruder_id, intruder_key).open_status for _ in range(5)]
    c = Session(addrs, victim_id, victim_key)
    verdict("session flood by one identity", opened.count(OK) <= 3 and opened[-1] == FULL and
            set(opened) <= {OK, FULL} and c.open_status == OK, f"opens={opened} victim={c.open_status}")

    # 9 and 10. Unauthenticated garbage and spoofable reads get no reply
    # (nothing proposed, nothing reflected).
    got = b.raw(encode(KV_RANGE, 0, 1, struct.pack("<HBB", 0, 0, 0)))
    got += b.raw(encode(ACQUIRE, 777 << 24, 1, struct.pack("<QIB", 0, 1000, 0) + name8(b"g")))
    got += b.raw(encode(OPEN, 0, 1, struct.pack("<QI", 5, 1000), version=1))
    verdict("unauthenticated requests", not got, f"replies={len(got)}")

    # Wrong key: an open of the victim's identity under another key.
    d = Session(addrs, victim_id, intruder_key)
    verdict("open with a wrong key", d.open_status is None, f"status={d.open_status}")

    # Cross-prefix: NARROW may acquire under jobs/ only.
    n = Session(addrs, narrow_id, narrow_key)
    st, _ = n.call(ACQUIRE, struct.pack("<QIB", 0, 5000, 0) + name8(b"other/x"))
    st2, _ = n.call(ACQUIRE, struct.pack("<QIB", 0, 5000, 0) + name8(b"jobs/x"))
    st3, _ = n.call(KV_GET, name8(b"jobs/x"))
    verdict("access outside the identity's prefixes", st == FORBIDDEN and st2 == GRANTED and st3 == FORBIDDEN,
            f"other/x={st} jobs/x={st2} kv jobs/x={st3}")

    # 11. Replay of a request below its session's floor (PROTOCOL.md,
    # "Exactly once"): the node dropped the request's cached reply when the
    # session said it sends no lower number again, so a replay must be
    # refused, not applied a second time (it would take a released lock).
    f = Session(addrs, victim_id, victim_key)
    floor_lock = b"hostile/floor"

    def floored(op, body):
        f.seq += 1
        datagram = seal(f.skey, encode(op, f.id, f.seq, body, flags=SEQ_FLOOR))
        return (datagram,) + f.exchange(datagram, f.skey)

    first, st, rep = floored(ACQUIRE, struct.pack("<QIB", 0, 30000, 0) + name8(floor_lock))
    assert st == GRANTED, st
    floor_token = struct.unpack_from("<Q", rep, 44)[0]
    st_again, rep_again = f.exchange(first, f.skey)  # still inside: the cached reply
    _, st, _ = floored(RELEASE, struct.pack("<Q", floor_token) + name8(floor_lock))
    assert st == OK, st
    # Answers to retransmitted copies of the first request came before the
    # release's: drop them, so that only the replay's own answer counts.
    f.drain()
    st_replay, _ = f.exchange(first, f.skey)
    st_read, _ = f.call(LOCK_READ, name8(floor_lock))
    verdict("replay below the session's floor",
            st_again == GRANTED and rep_again[44:52] == rep[44:52] and
            st_replay == BAD_REQUEST and st_read == NOT_FOUND,
            f"retry={st_again} replay={st_replay} lock_read={st_read}")

    # 12. Event redirection by replay: a request of the victim's, validly
    # tagged, captured and sent again from the intruder's address, must not
    # move where the victim's events go (PROTOCOL.md: only a new seq does).
    st, _ = a.call(WATCH, struct.pack("<B", 0) + name8(b"hostile/r"))
    assert st == OK, st
    a.seq += 1
    captured = seal(a.skey, encode(KEEPALIVE, a.id, a.seq, b""))
    st, _ = a.exchange(captured, a.skey)
    assert st == OK, st
    b.drain()
    a.drain()
    replies = b.raw(captured)
    # The event comes from the intruder's put, so that the victim sends
    # nothing (no new seq) between the replay and the event.
    st, _ = b.call(KV_PUT, struct.pack("<QBH", 0, 9, 1) + b"hostile/r" + b"x")
    assert st == OK, st
    is_event = lambda d: len(d) >= HDR.size and HDR.unpack_from(d)[2] == EVENT  # noqa: E731
    told = [d for d in a.listen(1.0) if is_event(d)]
    stolen = [d for d in replies + b.events + b.listen(0.3) if is_event(d)]
    verdict("event redirection by a replayed request", bool(told) and not stolen,
            f"victim events={len(told)} intruder events={len(stolen)}")

    # The victim's lock survived all of it.
    verdict("victim still holds its lock", holder_view(a) == (a.id, token), "")
    st, _ = a.call(RELEASE, struct.pack("<Q", token) + name8(lock))
    verdict("victim releases its own lock", st == OK, f"release={st}")
    return failures


if __name__ == "__main__":
    sys.exit(main())
