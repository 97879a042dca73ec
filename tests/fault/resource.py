#!/usr/bin/env python3
"""The fault suite's fenced resource (docs/TESTING.md).

A storage service that the suite's clients write to while they believe
they hold a lock. It enforces fencing exactly as a real resource should
(Kleppmann; hasp_fence_admit() in include/hasp/fence.h): a write carrying
token t for lock L is accepted iff t >= the highest token it has accepted
for L. Every decision is logged as a history record (checker.py) with a
CLOCK_MONOTONIC time stamp, the same clock the clients use.

It listens on a Unix datagram socket (no network: nothing to partition by
accident). A request is one JSON object
    {"lock": L, "token": t, "client": id, "late": bool}
and the reply is {"accepted": bool, "highest": h}. A malformed request is
answered {"error": "..."} and changes nothing.

    resource.py <socket-path> <history-file>    (runs until SIGTERM/SIGINT)
"""
import json
import os
import signal
import socket
import sys
import time


def decide(highest, req):
    """The fence: returns (accepted, new highest)."""
    lock, token = req["lock"], req["token"]
    h = highest.get(lock, 0)
    if token >= h and token > 0:
        highest[lock] = token
        return True, token
    return False, h


def parse(data):
    req = json.loads(data)
    if not isinstance(req, dict) or not isinstance(req.get("lock"), str) or \
            not isinstance(req.get("token"), int) or isinstance(req.get("token"), bool) or \
            not isinstance(req.get("client"), str):
        raise ValueError("need lock (str), token (int), client (str)")
    return req


def serve(path, history):
    if os.path.exists(path):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    sock.settimeout(0.2)
    highest = {}
    with open(history, "a", buffering=1) as log:
        print("resource: ready", flush=True)
        while not stop:
            try:
                data, peer = sock.recvfrom(4096)
            except socket.timeout:
                continue
            except InterruptedError:
                continue
            try:
                req = parse(data)
            except (ValueError, json.JSONDecodeError) as e:
                reply = {"error": str(e)}
            else:
                accepted, h = decide(highest, req)
                log.write(json.dumps({"t": time.monotonic_ns(), "proc": "resource", "f": "write",
                                      "lock": req["lock"], "token": req["token"],
                                      "client": req["client"], "late": bool(req.get("late")),
                                      "accepted": accepted}) + "\n")
                reply = {"accepted": accepted, "highest": h}
            if peer:
                try:
                    sock.sendto(json.dumps(reply).encode(), peer)
                except OSError:
                    pass  # the client went away; its decision is logged
    sock.close()
    os.unlink(path)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(sys.argv[1], sys.argv[2]))
