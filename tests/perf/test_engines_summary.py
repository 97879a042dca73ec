#!/usr/bin/env python3
"""perf/engines' summary without a cluster: the pairs' ratios, their
geometric mean and 95 % interval, and the verdict it draws (closed loop
by the rate, higher is better; open loop by the op p99, lower is
better), on synthetic rows."""
import json
import math
import os
import sys
import tempfile
import unittest

import perf_script  # tests/perf/perf_script.py, beside this file

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")


def load_engines():
    return perf_script.load(ROOT, "engines")


def rows(pairs, clients=16):
    """Rows of perf/engines for (wire rate, libhasp rate, wire p99, libhasp p99) pairs."""
    out = []
    for rnd, (wr, lr, wp, lp) in enumerate(pairs, 1):
        for engine, rate, p99 in (("wire", wr, wp), ("libhasp", lr, lp)):
            out.append({"engine": engine, "clients": clients, "round": rnd, "cycles_per_s": rate,
                        "p50_us": 1000.0, "p99_us": p99, "client_us_per_cycle": 10.0,
                        "node_cpu_s_per_1000": 0.1})
    return out


class Summary(unittest.TestCase):
    def setUp(self):
        self.m = load_engines()

    def test_equal_ratios_give_a_point_interval_and_a_verdict(self):
        s = self.m.summarize(rows([(1000, 1100, 10, 10)] * 4), 16)
        self.assertEqual(s["pairs"], 4)
        self.assertAlmostEqual(s["geomean"], 1.1)
        self.assertAlmostEqual(s["ci95"][0], 1.1)
        self.assertEqual(self.m.verdict(s, False), "libhasp at least as fast")
        s = self.m.summarize(rows([(1000, 800, 10, 10)] * 4), 16)
        self.assertEqual(self.m.verdict(s, False), "libhasp slower")

    def test_spread_ratios_hold_one_in_their_interval(self):
        s = self.m.summarize(rows([(1000, 900, 10, 10), (1000, 1100, 10, 10),
                                   (1000, 950, 10, 10), (1000, 1050, 10, 10)]), 16)
        ratios = [0.9, 1.1, 0.95, 1.05]
        self.assertAlmostEqual(s["geomean"], math.exp(sum(map(math.log, ratios)) / 4))
        self.assertLess(s["ci95"][0], 1.0)
        self.assertGreater(s["ci95"][1], 1.0)
        # t(3) = 3.182: the half-width of the log interval.
        logs = [math.log(x) for x in ratios]
        mean = sum(logs) / 4
        sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
        self.assertAlmostEqual(math.log(s["ci95"][1]) - mean, 3.182 * sd / 2)
        self.assertEqual(s["libhasp_won"], 2)
        self.assertEqual(self.m.verdict(s, False), "not distinguishable")

    def test_open_loop_judges_by_the_p99(self):
        # Same rate (the offered one), libhasp's p99 half the wire engine's.
        s = self.m.summarize(rows([(3000, 3000, 20, 10)] * 3), 16)
        self.assertEqual(self.m.verdict(s, True), "libhasp at least as fast")
        s = self.m.summarize(rows([(3000, 3000, 10, 20)] * 3), 16)
        self.assertEqual(self.m.verdict(s, True), "libhasp slower")

    def test_an_unpaired_run_is_left_out(self):
        r = rows([(1000, 1000, 10, 10)] * 2)
        r.append({"engine": "wire", "clients": 16, "round": 3, "cycles_per_s": 1.0, "p50_us": 1.0,
                  "p99_us": 1.0, "client_us_per_cycle": 1.0, "node_cpu_s_per_1000": 1.0})
        s = self.m.summarize(r, 16)
        self.assertEqual(s["pairs"], 2)
        self.assertIsNone(self.m.summarize(r, 64))

    def test_a_base_build_is_compared_with_libhasp(self):
        # --base-build: a third run per round; libhasp / base beside libhasp / wire.
        r = rows([(1000, 1100, 10, 8)] * 3)
        for rnd in range(1, 4):
            r.append({"engine": "base", "clients": 16, "round": rnd, "cycles_per_s": 1000.0,
                      "p50_us": 1000.0, "p99_us": 10.0, "client_us_per_cycle": 12.0,
                      "node_cpu_s_per_1000": 0.1})
        s = self.m.summarize(r, 16, ("wire", "libhasp", "base"))
        self.assertEqual(s["pairs"], 3)
        self.assertAlmostEqual(s["geomean"], 1.1)
        self.assertAlmostEqual(s["vs_base"]["cycles_per_s"]["geomean"], 1.1)
        self.assertAlmostEqual(s["vs_base"]["p99_us"]["geomean"], 0.8)
        self.assertAlmostEqual(s["client_us_per_cycle"]["base"], 12.0)
        # Without a base build there is no such comparison.
        self.assertIsNone(self.m.summarize(rows([(1000, 1100, 10, 8)] * 3), 16)["vs_base"])

    def test_pooled_sittings_keep_their_rounds_apart(self):
        # Two sittings whose round numbers overlap: each round pairs
        # within its own sitting, and every round counts once.
        first = rows([(1000, 900, 10, 10), (1000, 1100, 10, 10)])
        second = rows([(2000, 2000, 10, 10), (500, 600, 10, 10), (1000, 1000, 10, 10)])
        second += rows([(100, 90, 10, 10)], clients=64)
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, r in enumerate((first, second)):
                paths.append(os.path.join(d, "s%d.json" % i))
                with open(paths[-1], "w") as f:
                    json.dump({"rows": r}, f)
            pooled = self.m.pool(paths)
        self.assertEqual(sorted(pooled), [16, 64])
        want = [0.9, 1.1, 1.0, 1.2, 1.0]
        self.assertEqual(sorted(pooled[16]["ratios"]), sorted(want))
        self.assertAlmostEqual(pooled[16]["geomean"], math.exp(sum(map(math.log, want)) / 5))
        self.assertEqual(pooled[64]["ratios"], [0.9])
        self.assertIsNone(pooled[64]["ci95"])  # one pair: no interval

    def test_steal_is_the_stolen_share_of_the_machine_s_time(self):
        self.assertAlmostEqual(self.m.steal_share((1000, 10), (2000, 260)), 0.25)
        self.assertEqual(self.m.steal_share((1000, 10), (1000, 10)), 0.0)  # no time passed
        total, steal = self.m.cpu_times()  # this machine's, read for real
        self.assertGreater(total, 0)
        self.assertTrue(0 <= steal <= total)
        row = rows([(1000, 1000, 10, 10)])[0]
        row.update(tag="t", retransmits=0, client_user_us_per_cycle=5.0, load=[1.0, 1.0], steal=0.5)
        self.assertTrue(self.m.fmt_row(1, row).endswith(" 50.0"))


if __name__ == "__main__":
    unittest.main()
