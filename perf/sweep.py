#!/usr/bin/env python3
"""The open-loop sweep of perf/peers/run: latency against throughput.

  perf/sweep.py [--title T] [--plot OUT.png] SWEEP_DIR

SWEEP_DIR holds one JSON result per system and offered rate, named
<system>-r<percent>.json (percent of that system's closed-loop capacity in
the same run). Prints one markdown table (system, offered %, offered
cycles/s, achieved cycles/s, acquire p50/p99 in microseconds, errors) and,
with --plot, draws acquire p50 and p99 against achieved cycles/s, one line
per system, log-scale latency (gnuplot, as perf/plot).
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile


def load(src):
    rows = {}
    for path in sorted(glob.glob(os.path.join(src, "*.json"))):
        m = re.match(r"(.+)-r(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        try:
            r = json.load(open(path))
        except ValueError:
            continue
        res = r.get("results", {})
        lat = res.get("latency_us", {}).get("acquire", {})
        errors = sum(res.get("errors", r.get("errors", {})).get(k, 0) for k in (
            "timeouts", "failed_ops", "unfinished", "sessions_failed", "arrivals_dropped", "reconnects"))
        rows.setdefault(m.group(1), []).append(
            (int(m.group(2)), r.get("config", {}).get("rate", 0), res.get("cycles_per_s", 0),
             lat.get("p50", 0), lat.get("p99", 0), errors))
    for v in rows.values():
        v.sort()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--title", default="")
    ap.add_argument("--plot")
    ap.add_argument("src")
    a = ap.parse_args()
    rows = load(a.src)
    if not rows:
        sys.exit("perf/sweep.py: no sweep results in " + a.src)
    if a.title:
        print("**%s**\n" % a.title)
    print("| system | offered % | offered cycles/s | achieved cycles/s | acquire p50 us | acquire p99 us | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, pts in sorted(rows.items()):
        for pct, rate, got, p50, p99, err in pts:
            print("| %s | %d | %.0f | %.0f | %.1f | %.1f | %d |" % (name, pct, rate, got, p50, p99, err))
    if not a.plot:
        return 0
    tmp = tempfile.mkdtemp(prefix="hasp-sweep.")
    plots = []
    for i, (name, pts) in enumerate(sorted(rows.items())):
        dat = os.path.join(tmp, "%d.dat" % i)
        with open(dat, "w") as f:
            for _, _, got, p50, p99, _ in pts:
                f.write("%f %f %f\n" % (got, max(p50, 1), max(p99, 1)))
        plots.append("'%s' using 1:2 with linespoints lc %d pt 7 title '%s p50'" % (dat, i + 1, name))
        plots.append("'%s' using 1:3 with linespoints lc %d dt 2 pt 6 title '%s p99'" % (dat, i + 1, name))
    script = """set terminal pngcairo size 900,500 font ",9" noenhanced
set output '%s'
set title 'open loop: acquire latency against throughput'
set xlabel 'achieved lock cycles per second'
set ylabel 'acquire latency, microseconds (log)'
set logscale y
set logscale x
set key outside right
set grid
plot %s
""" % (a.plot, ", ".join(plots))
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    finally:
        subprocess.run(["rm", "-rf", tmp])
    return 0


if __name__ == "__main__":
    sys.exit(main())
