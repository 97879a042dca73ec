#!/usr/bin/env python3
"""Floods a hasp node with well-formed wire v2 requests that carry random
session ids and tags (they never verify), for the bad-MAC flood measurement
of docs/SECURITY.md. Bounded in time and count.

  flood_badmac.py ADDR:PORT SECONDS MAX_DATAGRAMS
"""
import os
import socket
import struct
import sys
import time

host, port = sys.argv[1].rsplit(":", 1)
seconds, limit = float(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
body = struct.pack("<QIB", 0, 5000, 0) + bytes([8]) + b"flood/xx"
pool = [struct.pack("<IBBHQQHH16s", 0x50534148, 2, 16, 0, int.from_bytes(os.urandom(8), "little"), 1,
                    len(body), 0, os.urandom(16)) + body for _ in range(256)]
end = time.monotonic() + seconds
sent = 0
while sent < limit and time.monotonic() < end:
    for p in pool:
        s.sendto(p, (host, int(port)))
    sent += len(pool)
print(f"flood: {sent} datagrams in {seconds:.0f} s or less")
