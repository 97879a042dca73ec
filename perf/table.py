#!/usr/bin/env python3
"""Prints one markdown table from hasp-bench / peer-driver JSON results.

  perf/table.py [--title T] result.json...

Columns: system, durability, cycles/s (ops/s for non-cycle workloads),
which latency (acquire for lock cycles, notify for bursts, else the
request), its p50/p99/p99.9 in microseconds, CPU seconds of the server processes
per 1000 operations, and errors (timeouts, failed or unfinished
operations, failed sessions, missing notifications, dropped arrivals,
malformed replies, reconnects). A machine line follows the table.
"""
import argparse
import json
import sys


def fmt(v, digits=1):
    return "-" if v is None else ("%.*f" % (digits, v))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--title", default="")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    rows, machine, commit = [], None, None
    for path in args.files:
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError):
            continue
        if "results" not in r:
            continue
        res = r["results"]
        # The latency that matters for the workload: acquire for lock
        # cycles, the last-told time for bursts, else the request itself.
        lats = res.get("latency_us", {})
        kind = next((k for k in ("acquire", "notify", "keepalive", "get", "op") if k in lats), "op")
        lat = lats.get(kind, {})
        name = r.get("system", "?")
        if "scenario" in r:
            name = r["scenario"]["name"]
        rate = res.get("cycles_per_s") if r.get("config", {}).get("workload") == "cycle" else res.get("ops_per_s")
        # Operations that did not end well; retransmits, redirects and
        # re-reads are how the clients cope, not errors.
        errors = sum(res.get("errors", {}).get(k, 0) for k in (
            "timeouts", "failed_ops", "unfinished", "sessions_failed", "notify_missing",
            "arrivals_dropped", "malformed", "reconnects"))
        rows.append((name, r.get("durability", "-"), rate, kind, lat.get("p50"), lat.get("p99"),
                     lat.get("p999"), r.get("cpu", {}).get("cpu_s_per_1000_ops"), errors))
        machine = machine or r.get("machine")
        commit = commit or r.get("commit")
    if args.title:
        print("**%s**\n" % args.title)
    print("| system | durability | cycles/s | latency | p50 us | p99 us | p99.9 us | CPU s / 1000 cycles | errors |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %d |" % (row[0], row[1], fmt(row[2], 0), row[3],
              fmt(row[4]), fmt(row[5]), fmt(row[6]), fmt(row[7], 3), row[8]))
    if machine:
        print("\nmachine: %s CPUs, %s, kernel %s" % (machine.get("nproc"), machine.get("cpu"),
                                                     machine.get("kernel")))
    if commit:
        print("hasp-bench commit: %s" % commit)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
