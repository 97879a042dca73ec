#!/usr/bin/env python3
"""Identity rotation without a restart, against a real cluster
(docs/SECURITY.md 4.10): a client of identity `svc` holds a lock while the
operator rotates svc's key and removes identity `gone`, and the nodes
reload the identities file (node 1 on SIGHUP, the others with
`identities.reload`). Before that, a bad file is refused whole.

  rotate_identity.py CLUSTER_ADDRS CLUSTER_DIR KEYGEN HASPCTL

Exit status: the number of failed checks (0: all held).
"""
import json
import os
import signal
import struct
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_client import (ACQUIRE, GRANTED, KEEPALIVE, LOCK_READ, OK, RELEASE,  # noqa: E402
                            Session, encode, load_key, name8, seal)

results = []  # (check, held)


class PatientSession(Session):
    """Waits longer for the replies that must come: a loaded 2-core
    machine has elections, and a refusal is judged by no reply at all."""

    def exchange(self, datagram, key, deadline=20.0):
        return super().exchange(datagram, key, deadline)


def check(name, ok, detail=""):
    results.append((name, ok))
    print("rotate: %s: %s %s" % ("ok" if ok else "FAILED", name, detail), flush=True)


def main():
    addrs = []
    for a in sys.argv[1].split(","):
        host, port = a.rsplit(":", 1)
        addrs.append((host, int(port)))
    d, keygen, haspctl = sys.argv[2], sys.argv[3], sys.argv[4]
    idfile = os.path.join(d, "identities")
    sock = [os.path.join(d, f"n{i}", "data", "admin.sock") for i in (1, 2, 3)]

    def ctl(i, *args):
        r = subprocess.run([haspctl, "--socket", sock[i], "--json", *args], capture_output=True,
                           text=True, timeout=30)
        return r.returncode, json.loads(r.stdout) if r.stdout.strip() else {}

    def stats(i):
        """The counters of node i+1, from its SIGUSR1 stats file ({} if none came)."""
        f = os.path.join(d, f"n{i + 1}", "stats.json")
        if os.path.exists(f):
            os.unlink(f)
        os.kill(int(open(os.path.join(d, f"n{i + 1}", "pid")).read()), signal.SIGUSR1)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                return json.load(open(f))
            except (OSError, ValueError):
                time.sleep(0.05)
        return {}

    def reloads(i):
        """(ok, failed) identity reloads of node i+1."""
        st = stats(i)
        return st.get("identities_reloaded"), st.get("identities_reload_failed")

    def reload_all(expect_ok):
        """Node 1 by SIGHUP, nodes 2 and 3 by the admin command."""
        before = reloads(0)
        os.kill(int(open(os.path.join(d, "n1", "pid")).read()), signal.SIGHUP)
        replies = [ctl(i, "raw", "identities.reload") for i in (1, 2)]
        end = time.monotonic() + 20
        want = (before[0] + 1, before[1]) if expect_ok else (before[0], before[1] + 1)
        while reloads(0) != want and time.monotonic() < end:
            time.sleep(0.2)
        return replies, reloads(0) == want

    def replace(text_lines, extra=None):
        """Writes the identities file anew (0600, renamed over the old)."""
        tmp = idfile + ".new"
        if os.path.exists(tmp):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, "".join(text_lines).encode())
        os.close(fd)
        if extra is not None:
            subprocess.run([keygen, "--identity", extra[0], "--identities", tmp, "--allow", "all:",
                            extra[1]], check=True)
        os.rename(tmp, idfile)

    # svc and gone join without a restart.
    original = open(idfile).read().splitlines(keepends=True)
    for name in ("svc", "gone"):
        subprocess.run([keygen, "--identity", name, "--identities", idfile, "--allow", "all:",
                        os.path.join(d, f"{name}1.key")], check=True)
    replies, sighup = reload_all(True)
    check("svc and gone added by reload (SIGHUP on node 1, the command on 2 and 3)",
          sighup and all(rc == 0 and r["result"]["identities"] == 3 for rc, r in replies),
          f"replies={replies}")
    k1, kg = load_key(os.path.join(d, "svc1.key")), load_key(os.path.join(d, "gone1.key"))
    s1 = PatientSession(addrs, "svc", k1, ttl=60000)
    g = PatientSession(addrs, "gone", kg, ttl=60000)
    check("svc and gone open sessions", s1.open_status == OK and g.open_status == OK,
          f"{s1.open_status} {g.open_status}")
    lock = b"rotate/job"
    st, rep = s1.call(ACQUIRE, struct.pack("<QIB", 0, 60000, 0) + name8(lock))
    check("svc holds the lock", st == GRANTED, f"status={st}")
    token = struct.unpack_from("<Q", rep, 44)[0] if rep else 0

    # A bad file is refused whole: the old set stays.
    with_bad = open(idfile).read().splitlines(keepends=True) + ["broken zz allow=all:\n"]
    replace(with_bad)
    replies, sighup = reload_all(False)
    check("a bad file is refused whole, with the line named",
          sighup and all(rc == 1 and r.get("error") == "ECONFIG" and ":%d:" % len(with_bad) in
                         r.get("message", "") for rc, r in replies), f"replies={replies}")
    st, _ = s1.call(KEEPALIVE, b"")
    st2, _ = g.call(KEEPALIVE, b"")
    check("after the refused file every session still works", st == OK and st2 == OK, f"{st} {st2}")

    # Rotate svc to a new key, remove gone.
    replace(original, ("svc", os.path.join(d, "svc2.key")))
    replies, sighup = reload_all(True)
    check("rotation reloaded on every node",
          sighup and all(rc == 0 and r["result"]["identities"] == 2 for rc, r in replies),
          f"replies={replies}")
    k2 = load_key(os.path.join(d, "svc2.key"))
    st, _ = s1.exchange(seal(s1.skey, encode(KEEPALIVE, s1.id, s1.seq + 1, b"")), s1.skey, deadline=2.0)
    check("the session of the old key is not served", st is None, f"status={st}")
    st, _ = g.exchange(seal(g.skey, encode(KEEPALIVE, g.id, g.seq + 1, b"")), g.skey, deadline=2.0)
    check("the session of the removed identity is not served", st is None, f"status={st}")
    old = Session(addrs, "svc", k1)
    gone = Session(addrs, "gone", kg)
    check("opens under the old key or the removed identity get no reply",
          old.open_status is None and gone.open_status is None,
          f"{old.open_status} {gone.open_status}")
    s2 = PatientSession(addrs, "svc", k2)
    check("svc opens a session with its new key", s2.open_status == OK, f"{s2.open_status}")
    st, rep = s2.call(LOCK_READ, name8(lock))
    holder, seen = struct.unpack_from("<QQ", rep, 44) if rep else (0, 0)
    check("the lock survived the rotation, held by the old session",
          st == OK and holder == s1.id and seen == token, f"holder={holder} token={seen}")
    st, _ = s2.call(RELEASE, struct.pack("<Q", token) + name8(lock))
    check("the new key's session releases it (same identity)", st == OK, f"status={st}")
    st, _ = s2.call(ACQUIRE, struct.pack("<QIB", 0, 60000, 0) + name8(lock))
    check("and takes it again", st == GRANTED, f"status={st}")
    # Every reload ran on a node's lcore, where nothing may allocate.
    for i in range(3):
        forbidden = stats(i).get("alloc_forbidden")
        check("no allocation on the lcore of node %d" % (i + 1), forbidden == 0, f"{forbidden}")
    return sum(1 for _, ok in results if not ok)


if __name__ == "__main__":
    sys.exit(main())
