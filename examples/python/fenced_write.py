"""Write to a resource under a hasp lock, fenced by the lock's token.

    HASP_CLUSTER=10.77.0.11:7000 HASP_ID=local HASP_KEY_FILE=client.key \
        python3 fenced_write.py jobs/nightly "report 42"
"""
import sys

import hasp


class Storage:
    """The guarded resource. It remembers the highest token it admitted and
    refuses older ones, so a holder that paused past its lease (GC, a
    stopped VM) cannot overwrite the work of the next holder."""

    def __init__(self):
        self.fence = hasp.Fence()
        self.rows = []

    def write(self, row, token):
        if not self.fence.admit(token):
            raise PermissionError("stale fencing token %d" % token)
        self.rows.append((token, row))


def main(name, row):
    storage = Storage()
    with hasp.Client() as client:                # $HASP_CLUSTER, $HASP_ID, $HASP_KEY_FILE
        with client.lock(name, ttl=5.0, timeout=30) as lease:
            if not lease.safe(work=1.0):         # ours for at least 1 s more?
                sys.exit("lock %s about to expire: not writing" % name)
            storage.write(row, lease.token)      # the resource checks the token
            old = lease.token
        with client.lock(name, ttl=5.0, timeout=30) as lease:
            storage.write(row + " (again)", lease.token)
        try:
            storage.write("late write", old)     # what a paused old holder would do
        except PermissionError as e:
            print("refused:", e)
    for token, text in storage.rows:
        print("token %d wrote %r" % (token, text))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
