#!/usr/bin/env python3
"""Instruction-count regression check of hasp's pure parts (perf-smoke).

Runs each case of perf_micro under valgrind --tool=callgrind with
--toggle-collect=micro_measure_<case>, so only the measured function's
inclusive instructions (Ir) count, divides by the iterations and compares
with the baseline (perf/baselines/micro.json). Instruction counts do not
depend on the machine's load, so this can gate CI where wall-clock timing
cannot (docs/STYLE.md §9: timing never gates a test).

  micro_check.py --exe build/perf/perf_micro --baseline perf/baselines/micro.json
                 [--valgrind valgrind] [--build-id ID] [--update] [--cases a,b]

Exit status: 0 every case within tolerance (or better), 1 a case regressed
past its tolerance, 2 usage or a run failed, 77 (meson's SKIP) when the
baseline was recorded for another build (compiler, build type, assertions):
counts from another compiler are not comparable, and a skipped test is
never counted as passed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# Iterations per case: enough that per-iteration setup noise is far below
# the tolerance, small enough that all cases run in well under a minute
# under valgrind on this machine.
ITERATIONS = {
    "wire_encode": 20000,
    "wire_decode": 20000,
    "locks_apply": 5000,
    "session_open_quota": 2000,
    "raft_commit": 4096,
    "wal_encode": 20000,
    "crc32c_4k": 2000,
    "watch_match_one": 20000,
    "watch_match_10k": 20,
    "watch_scan_100k": 2,
}


def count_ir(valgrind, exe, case, iterations):
    with tempfile.TemporaryDirectory(prefix="hasp-micro-") as tmp:
        out = os.path.join(tmp, "callgrind.out")
        cmd = [valgrind, "--tool=callgrind", "--callgrind-out-file=" + out,
               "--toggle-collect=micro_measure_" + case, exe, case, str(iterations)]
        run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, timeout=300)
        if run.returncode != 0:
            sys.stderr.write(run.stderr[-2000:])
            raise RuntimeError("%s failed with %d" % (" ".join(cmd), run.returncode))
        with open(out) as f:
            for line in f:
                m = re.match(r"^(?:summary|totals):\s+(\d+)", line)
                if m:
                    return int(m.group(1))
    raise RuntimeError("no totals line in callgrind output for " + case)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--valgrind", default="valgrind")
    ap.add_argument("--build-id", default="", help="compiler, build type, assertions")
    ap.add_argument("--update", action="store_true", help="write the baseline from this run")
    ap.add_argument("--cases", default="")
    ap.add_argument("--json", default="", help="also write this run's results here")
    args = ap.parse_args()

    baseline = {}
    if os.path.exists(args.baseline):
        with open(args.baseline) as f:
            baseline = json.load(f)
    if not args.update and baseline.get("build_id") and args.build_id and \
            baseline["build_id"] != args.build_id:
        print("micro_check: baseline is for build %r, this is %r: not comparable, skipped"
              % (baseline["build_id"], args.build_id))
        return 77
    tolerance_default = float(baseline.get("tolerance", 0.03))
    cases = [c for c in (args.cases.split(",") if args.cases else ITERATIONS)]
    results = {}
    worst = 0
    print("%-12s %12s %12s %8s %6s" % ("case", "Ir/op", "baseline", "ratio", "tol"))
    for case in cases:
        iterations = ITERATIONS[case]
        try:
            ir = count_ir(args.valgrind, args.exe, case, iterations)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print("micro_check: %s" % e, file=sys.stderr)
            return 2
        per_op = ir / iterations
        results[case] = {"ir_per_op": round(per_op, 2), "iterations": iterations}
        base = baseline.get("cases", {}).get(case, {})
        tol = float(base.get("tolerance", tolerance_default))
        if "ir_per_op" in base and not args.update:
            ratio = per_op / base["ir_per_op"]
            verdict = ""
            if ratio > 1 + tol:
                verdict = "  REGRESSED"
                worst = 1
            elif ratio < 1 - tol:
                verdict = "  improved (update the baseline: perf/run --update-micro)"
            print("%-12s %12.1f %12.1f %8.3f %5.0f%%%s"
                  % (case, per_op, base["ir_per_op"], ratio, tol * 100, verdict))
        else:
            print("%-12s %12.1f %12s %8s %5.0f%%" % (case, per_op, "-", "-", tol * 100))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"build_id": args.build_id, "cases": results}, f, indent=1)
    if args.update:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True).stdout.strip()
        out = {
            "what": "instructions (callgrind Ir) per operation of perf/micro.c cases",
            "command": "perf/run micro --update-micro",
            "commit": commit or "unknown",
            "build_id": args.build_id,
            "machine": {"nproc": os.cpu_count(), "kernel": os.uname().release},
            "tolerance": tolerance_default,
            "cases": results,
        }
        with open(args.baseline, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
            f.write("\n")
        print("micro_check: wrote %s" % args.baseline)
        return 0
    if worst:
        print("micro_check: instruction count regressed past tolerance")
    return worst


if __name__ == "__main__":
    sys.exit(main())
