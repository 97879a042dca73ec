#!/usr/bin/env python3
"""perf/failover's node-side times without a cluster: the survivors' logs
read for their "leader" and "leader ready" lines, and one round's wait
split into the election, the serving leader's first entry and the
client's part, on synthetic logs."""
import os
import sys
import tempfile
import unittest

import perf_script  # tests/perf/perf_script.py, beside this file

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
S = 1000000000  # ns


def load_failover():
    return perf_script.load(ROOT, "failover")


def stamp(ns):
    """A log line's time as haspd writes it: seconds.microseconds."""
    return "%d.%06d" % (ns // S, ns % S // 1000)


class Split(unittest.TestCase):
    def setUp(self):
        self.m = load_failover()
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def log(self, node, lines):
        os.makedirs(os.path.join(self.dir.name, "n%d" % node), exist_ok=True)
        with open(os.path.join(self.dir.name, "n%d" % node, "log"), "w") as f:
            for ns, text in lines:
                f.write("%s %s\n" % (stamp(ns), text))

    def test_a_churned_election_is_split_at_the_serving_leaders_ready_line(self):
        kill = 100 * S
        # Before the kill: node 1 led (its lines are old, and it is the
        # killed one anyway). Node 2 wins at +300 ms but is deposed before
        # it is ready; node 3 wins term 4 at +900 ms, ready at +950 ms; the
        # client is answered at +1020 ms. Node 2's ready line of term 3,
        # after node 3's win, is not the serving leader's.
        self.log(1, [(kill - 5 * S, "info node: leader node=1 term=2"),
                     (kill - 5 * S + 1000000, "info node: leader ready node=1 term=2 after_ms=1.000")])
        self.log(2, [(kill - 6 * S, "info node: leader ready node=2 term=1 after_ms=0.500"),
                     (kill + 300000000, "info node: leader node=2 term=3"),
                     (kill + 910000000, "info node: leader ready node=2 term=3 after_ms=610.000"),
                     (kill + 2 * S, "info node: leader node=2 term=5")])
        self.log(3, [(kill + 900000000, "info node: leader node=3 term=4"),
                     (kill + 400000000, "warn node: leader did not run for 100 ms"),
                     (kill + 950000000, "info node: leader ready node=3 term=4 after_ms=50.000")])
        lines = self.m.leader_lines(self.dir.name, 1, kill)
        self.assertEqual([(x[1], x[2], x[3]) for x in lines],
                         [("won", 2, 3), ("won", 3, 4), ("ready", 2, 3), ("ready", 3, 4),
                          ("won", 2, 5)])
        t = self.m.node_side(lines, kill, 1020.0)
        self.assertEqual(t["elections"], 2)
        self.assertAlmostEqual(t["election_ms"], 300.0)
        self.assertAlmostEqual(t["serving_leader_ms"], 900.0)
        self.assertAlmostEqual(t["ready_ms"], 50.0)
        self.assertAlmostEqual(t["client_ms"], 70.0)
        # The parts add up to the answer.
        self.assertAlmostEqual(t["serving_leader_ms"] + t["ready_ms"] + t["client_ms"], 1020.0)

    def test_no_ready_line_leaves_the_split_unknown(self):
        kill = 50 * S
        self.log(2, [(kill + 200000000, "info node: leader node=2 term=7")])
        t = self.m.node_side(self.m.leader_lines(self.dir.name, 1, kill), kill, 400.0)
        self.assertAlmostEqual(t["serving_leader_ms"], 200.0)
        self.assertIsNone(t["ready_ms"])
        self.assertIsNone(t["client_ms"])

    def test_no_leader_before_the_answer(self):
        t = self.m.node_side([], 10 * S, 400.0)
        self.assertEqual(t["elections"], 0)
        self.assertIsNone(t["election_ms"])
        self.assertIsNone(t["serving_leader_ms"])
        self.assertIsNone(t["ready_ms"])


if __name__ == "__main__":
    unittest.main()
