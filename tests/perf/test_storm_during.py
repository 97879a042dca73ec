#!/usr/bin/env python3
"""perf/storm_during's sorting without a cluster: the storm's windows from
its latency log, the other clients' acquires placed inside or outside them
by their start, nearest-rank percentiles and the p99 ratios to alone, on
synthetic logs."""
import os
import sys
import tempfile
import unittest

import perf_script  # tests/perf/perf_script.py, beside this file

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
MS = 1000000


class StormDuring(unittest.TestCase):
    def setUp(self):
        self.m = perf_script.load(ROOT, "storm_during")

    def test_a_window_ends_at_the_later_of_last_grant_and_last_told(self):
        storm = [("op", 0, 3000 * MS),
                 ("grant_last", 1000 * MS, 1200 * MS), ("notify", 1000 * MS, 1100 * MS),
                 ("notify", 5000 * MS, 1000 * MS), ("grant_last", 5000 * MS, 1300 * MS),
                 ("acquire", 9000 * MS, 5 * MS)]
        self.assertEqual(self.m.storm_windows(storm),
                         [(1000 * MS, 2200 * MS), (5000 * MS, 6300 * MS)])

    def test_a_burst_window_runs_from_the_release_to_the_last_watcher_told(self):
        # --watchers: a burst round's notify sample starts at its release.
        burst = [("op", 0, 200 * MS), ("notify", 100 * MS, 95 * MS),
                 ("op", 1000 * MS, 200 * MS), ("notify", 1100 * MS, 120 * MS)]
        self.assertEqual(self.m.storm_windows(burst),
                         [(100 * MS, 195 * MS), (1100 * MS, 1220 * MS)])

    def test_the_load_is_the_storm_or_a_burst_to_the_watchers(self):
        class Args:
            watchers, locks = 0, 5000
        storm = self.m.load_args(Args, 60)
        self.assertEqual(storm[:4], ["--workload", "storm", "--locks", "5000"])
        Args.watchers = 10000
        burst = self.m.load_args(Args, 60)
        self.assertEqual(burst[:5], ["--workload", "burst", "--watchers", "--waiters", "10000"])
        self.assertIn("--duration", burst)
        self.assertEqual(burst[burst.index("--duration") + 1], "60")
        # What each delivered, from hasp-bench's results.
        storm_res = {"ops": 3, "storm": {"granted": 15000, "told": 15000, "coalesced": 2, "resynced": 0},
                     "errors": {"storm_waiters_missing": 0, "storm_watchers_missing": 1, "notify_missing": 0}}
        self.assertEqual(self.m.load_outcome(storm_res, 0)["watchers_missing"], 1)
        burst_res = {"ops": 40, "storm": {"granted": 0, "told": 0, "coalesced": 0, "resynced": 0},
                     "errors": {"storm_waiters_missing": 0, "storm_watchers_missing": 0, "notify_missing": 7}}
        self.assertEqual(self.m.load_outcome(burst_res, 10000), {"rounds": 40, "notify_missing": 7})

    def test_acquires_are_placed_by_their_start(self):
        windows = [(1000 * MS, 2000 * MS)]
        during = [("acquire", 999 * MS, 2 * MS),    # starts before, ends inside: outside
                  ("acquire", 1000 * MS, 3 * MS),   # the window's first instant: inside
                  ("acquire", 2000 * MS, 4 * MS),   # its last: inside
                  ("acquire", 2001 * MS, 5 * MS),
                  ("release", 1500 * MS, 6 * MS)]   # not an acquire
        ins, outs = self.m.split_acquires(during, windows)
        self.assertEqual(ins, [3000.0, 4000.0])
        self.assertEqual(outs, [2000.0, 5000.0])

    def test_nearest_rank_percentiles(self):
        values = list(range(1, 101))
        self.assertEqual(self.m.percentile(values, 50), 50)
        self.assertEqual(self.m.percentile(values, 99), 99)
        self.assertEqual(self.m.percentile([7.0], 99), 7.0)
        self.assertIsNone(self.m.percentile([], 99))

    def test_ratios_are_to_the_alone_p99_and_windows_are_counted_when_covered(self):
        alone = [("acquire", i * MS, 100000) for i in range(100)]             # 100 us each
        during = [("acquire", i * MS, 200000) for i in range(0, 1000, 10)]    # 200 us outside
        during += [("acquire", i * MS, 300000) for i in range(1000, 2000, 5)]   # 300 us, half inside
        during += [("acquire", 3000 * MS, 200000)]
        storm = [("notify", 1000 * MS, 500 * MS), ("grant_last", 1000 * MS, 400 * MS),
                 ("notify", 2900 * MS, 1000 * MS)]                            # ends after the run
        s = self.m.summarize_pair(alone, during, storm)
        self.assertEqual(s["alone"]["p99_us"], 100.0)
        self.assertEqual(s["in_windows"]["count"], 102)  # 1000..1500 ms, and 3000 ms
        self.assertEqual(s["outside_windows"]["count"], 199)
        self.assertEqual(s["in_windows"]["p99_us"], 300.0)
        self.assertEqual(s["outside_windows"]["p99_us"], 300.0)  # the 1501..1999 ms ones
        self.assertAlmostEqual(s["in_windows"]["p99_ratio"], 3.0)
        self.assertEqual(s["windows"], 2)
        self.assertEqual(s["windows_covered"], 1)
        self.assertEqual(s["window_ms"], [500.0])

    def test_the_log_is_read_as_written(self):
        with tempfile.NamedTemporaryFile("w", suffix=".lat", delete=False) as f:
            f.write("acquire 12 34\nnotify 100 2000\n")
        try:
            self.assertEqual(self.m.read_log(f.name), [("acquire", 12, 34), ("notify", 100, 2000)])
        finally:
            os.unlink(f.name)

    def test_histogram_quantile_counts_only_what_came_between(self):
        def text(counts):
            # Two label sets whose buckets add up; the sum and count lines
            # are not buckets.
            out = []
            for op in ("acquire", "release"):
                for le, c in zip(('0.0001', '0.001', '0.01', '+Inf'), counts[op]):
                    out.append('hasp_x_seconds_bucket{op="%s",le="%s"} %d' % (op, le, c))
                out.append('hasp_x_seconds_count{op="%s"} %d' % (op, counts[op][-1]))
            out.append('hasp_x_seconds_other_bucket{le="+Inf"} 7')
            return "\n".join(out) + "\n"
        before = text({"acquire": [90, 100, 100, 100], "release": [0, 0, 0, 0]})
        # Between: 100 samples, 98 under 100 us, 1 under 1 ms, 1 under 10 ms.
        after = text({"acquire": [140, 150, 150, 150], "release": [48, 49, 50, 50]})
        q = self.m.histogram_quantile
        self.assertEqual(q(before, after, "hasp_x_seconds", 0.98), 100.0)
        self.assertEqual(q(before, after, "hasp_x_seconds", 0.99), 1000.0)
        self.assertEqual(q(before, after, "hasp_x_seconds", 1.0), 10000.0)
        # Nothing counted between, or no such histogram: no quantile.
        self.assertIsNone(q(after, after, "hasp_x_seconds", 0.99))
        self.assertIsNone(q(before, after, "hasp_y_seconds", 0.99))

    def test_cpu_intervals_count_inside_a_window_by_their_midpoint(self):
        # (ns, machine busy ticks, machine ticks, node ticks, its main
        # thread's ticks); 100 ticks a second per CPU, two CPUs: 200
        # machine ticks a second.
        samples = [(0, 0, 0, 0, 0),
                   (1000 * MS, 100, 200, 60, 50),     # midpoint 500 ms: outside
                   (2000 * MS, 290, 400, 160, 130),   # midpoint 1500 ms: inside
                   (3000 * MS, 480, 600, 260, 200),   # midpoint 2500 ms: inside
                   (4000 * MS, 520, 800, 280, 215)]   # midpoint 3500 ms: outside
        split = self.m.cpu_split(samples, [(1200 * MS, 2600 * MS)], hz=100)
        inw, out = split["in_windows"], split["outside_windows"]
        self.assertEqual(inw["seconds"], 2.0)
        self.assertAlmostEqual(inw["machine_busy"], 380 / 400)
        self.assertAlmostEqual(inw["node_cores"], 2.0 / 2.0)
        self.assertAlmostEqual(inw["lcore0_cores"], 1.5 / 2.0)
        self.assertAlmostEqual(inw["rest_cores"], 1.8 / 2.0)
        self.assertEqual(out["seconds"], 2.0)
        self.assertAlmostEqual(out["machine_busy"], 140 / 400)
        self.assertAlmostEqual(out["node_cores"], 0.8 / 2.0)
        self.assertAlmostEqual(out["lcore0_cores"], 0.65 / 2.0)
        self.assertAlmostEqual(out["rest_cores"], 0.6 / 2.0)
        # No windows: everything is outside; one sample: no interval at all.
        alone = self.m.cpu_split(samples, [], hz=100)
        self.assertIsNone(alone["in_windows"])
        self.assertAlmostEqual(alone["outside_windows"]["machine_busy"], 520 / 800)
        self.assertEqual(self.m.cpu_split(samples[:1], [], hz=100),
                         {"in_windows": None, "outside_windows": None})
        line = self.m.fmt_cpu(dict(split, alone=alone["outside_windows"]))
        self.assertIn("in_windows 95 % busy (node 1.00, its lcore 0 0.75, rest 0.90 cores)", line)

    def test_the_machine_and_process_ticks_are_read(self):
        busy, total = self.m.machine_ticks()
        self.assertGreaterEqual(total, busy)
        self.assertGreater(total, 0)
        self.assertIsNotNone(self.m.process_ticks(os.getpid()))
        self.assertIsNotNone(self.m.process_ticks(os.getpid(), os.getpid()))
        self.assertIsNone(self.m.process_ticks(0x7ffffff0))


if __name__ == "__main__":
    unittest.main()
