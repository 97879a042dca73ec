#!/usr/bin/env python3
"""One HTTP GET on a node's Unix admin socket (docs/CONTROL.md "Protocol").

    admin_http.py <socket> <path>

Prints the status code on the first line, then the body as received.
"""
import socket
import sys

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(("GET %s HTTP/1.1\r\nHost: hasp\r\n\r\n" % sys.argv[2]).encode())
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
head, _, body = data.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].split(b" ")[1].decode())
sys.stdout.write(body.decode())
