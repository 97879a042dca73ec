"""A local cluster node's counters, as perf/ scripts read them: SIGUSR1
makes haspd write its stats file, which scripts/cluster places at
DIR/nN/stats.json and which the node replaces whole (a rename), so a file
that exists after the signal is complete."""
import json
import os
import signal
import time


def read_node_stats(cluster_dir, n, timeout_s=5.0):
    """Node n's counters, by name, written for this call: the old file is
    removed, the node signalled, its new file read. RuntimeError when the
    node has no pid file or writes nothing within timeout_s."""
    node_dir = os.path.join(cluster_dir, "n%d" % n)
    path = os.path.join(node_dir, "stats.json")
    try:
        with open(os.path.join(node_dir, "pid")) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        raise RuntimeError("node %d has no pid file in %s" % (n, cluster_dir))
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            pass
    raise RuntimeError("node %d wrote no stats file in %.0f s" % (n, timeout_s))
