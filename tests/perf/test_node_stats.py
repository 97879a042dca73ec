#!/usr/bin/env python3
"""perf/node_stats.read_node_stats: a node's counters read after SIGUSR1,
against a stand-in node (a child process that writes its stats file the
way haspd does, into a temporary file renamed into place, on SIGUSR1)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "perf"))
from node_stats import read_node_stats  # noqa: E402

# Writes {"signals": k} on its k-th SIGUSR1 when told to answer, else
# nothing; prints "ready" once its handler is in place.
STAND_IN = r"""
import json, os, signal, sys, time
path, answer = sys.argv[1], sys.argv[2] == "answer"
count = 0
def on_usr1(sig, frame):
    global count
    count += 1
    if answer:
        with open(path + ".tmp", "w") as f:
            json.dump({"signals": count}, f)
        os.rename(path + ".tmp", path)
signal.signal(signal.SIGUSR1, on_usr1)
print("ready", flush=True)
time.sleep(60)
"""


class ReadNodeStats(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hasp-node-stats-")
        os.mkdir(os.path.join(self.dir, "n1"))
        self.children = []

    def tearDown(self):
        for c in self.children:
            c.kill()
            c.wait()
            c.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def stand_in(self, mode):
        c = subprocess.Popen([sys.executable, "-c", STAND_IN, os.path.join(self.dir, "n1", "stats.json"),
                              mode], stdout=subprocess.PIPE, text=True)
        self.children.append(c)
        self.assertEqual(c.stdout.readline().strip(), "ready")
        with open(os.path.join(self.dir, "n1", "pid"), "w") as f:
            f.write("%d\n" % c.pid)

    def test_each_read_is_written_for_it(self):
        self.stand_in("answer")
        # A stale file from before is not what the read returns.
        with open(os.path.join(self.dir, "n1", "stats.json"), "w") as f:
            json.dump({"signals": 0}, f)
        self.assertEqual(read_node_stats(self.dir, 1), {"signals": 1})
        self.assertEqual(read_node_stats(self.dir, 1), {"signals": 2})

    def test_a_node_that_writes_nothing_is_an_error(self):
        self.stand_in("silent")
        t0 = time.monotonic()
        with self.assertRaisesRegex(RuntimeError, "wrote no stats file"):
            read_node_stats(self.dir, 1, timeout_s=0.5)
        self.assertGreaterEqual(time.monotonic() - t0, 0.5)

    def test_no_pid_file_is_an_error(self):
        with self.assertRaisesRegex(RuntimeError, "no pid file"):
            read_node_stats(self.dir, 1)


if __name__ == "__main__":
    unittest.main()
