#!/usr/bin/env python3
# Writes the seed corpus of fuzz_node_rx: records of (kind u8, size u16le,
# bytes), kind even = client port, odd = raft port. Run from this directory.
import os, struct

def req(op, seq, body, session=0, version=1, flags=0):
    return struct.pack('<IBBHQQHH16s', 0x50534148, version, op, flags, session, seq, len(body), 0,
                       b'\0' * 16) + body

def rec(kind, b):
    return struct.pack('<BH', kind, len(b)) + b

S = 2 << 24  # the first session id a fresh state machine hands out
name = b'fz/a'
seeds = {
    'open_acquire_release': rec(0, req(1, 1, struct.pack('<QI', 7, 10000)))
        + rec(0, req(16, 1, struct.pack('<QIBB', 0, 1000, 0, len(name)) + name, S))
        + rec(0, req(17, 2, struct.pack('<QB', 3, len(name)) + name, S)),
    'reads': rec(0, req(20, 1, bytes([len(name)]) + name, S))
        + rec(0, req(19, 2, struct.pack('<QB', 3, len(name)) + name, S))
        + rec(0, req(36, 3, struct.pack('<HBB', 0, 3, 0) + b'fz/', S)),
    'kv_watch': rec(0, req(24, 1, bytes([1, 3]) + b'fz/', S))
        + rec(0, req(32, 2, struct.pack('<QBH', 0, 4, 2) + b'fz/k' + b'v1', S))
        + rec(0, req(34, 3, bytes([4]) + b'fz/k', S)),
    'wait_queue': rec(0, req(1, 1, struct.pack('<QI', 8, 10000)))
        + rec(0, req(16, 1, struct.pack('<QIBB', 0, 50, 1, len(name)) + name, S + 1)),
    'garbage': rec(0, b'\xab' * 40) + rec(1, b'\x01\x05' + b'\0' * 30) + rec(0, req(99, 1, b'')),
    'raft_append_resp': rec(1, struct.pack('<BBHQIIQ', 1, 6, 0, 42, 2, 1, 1) + b'\0' * 32),
    # kind 3: the fuzzer seals the bytes with node 2's pair key first, so
    # these reach the raft decoder and raft (kind 1 stops at the MAC).
    'raft_sealed': rec(3, struct.pack('<BBHQIIQ', 1, 6, 0, 42, 2, 1, 1) + b'\0' * 32)
        + rec(3, struct.pack('<BBHQIIQ', 1, 1, 0, 42, 2, 1, 1) + struct.pack('<QQ', 0, 0))
        + rec(3, struct.pack('<BBHQIIQ', 1, 3, 0, 42, 2, 1, 1) + b'\0' * 34)
        + rec(3, b'\x01\x05' + b'\0' * 30),
}
for n, data in seeds.items():
    with open(os.path.join('corpus_node_rx', n), 'wb') as f:
        f.write(data)
