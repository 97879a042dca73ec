#!/bin/sh
# perf/run's comparison (no cluster): a result within tolerance passes, a
# throughput drop or a latency rise past tolerance exits 1, a missing
# metric counts as a regression, a missing result exits 2, and a run
# during which the hypervisor stole CPU, or a baseline of another CPU or
# hasp-bench engine, is flagged.
#   test_perf_run.sh <source-root>
set -u
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/base" "$tmp/res"
result() { # cycles_per_s acquire_p99 -> file
	printf '{"results":{"cycles_per_s":%s,"ops_per_s":%s,"latency_us":{"acquire":{"p99":%s}}}}\n' "$1" "$1" "$2" > "$3"
}
run() {
	python3 "$root/perf/run" test --compare "$tmp/res" --baselines "$tmp/base" \
		--scenarios "$root/tests/perf/data" > "$tmp/out" 2>&1
	echo $?
}
fail=0
check() { # name expected actual
	if [ "$2" != "$3" ]; then
		echo "FAIL: $1: exit $3, expected $2"
		cat "$tmp/out"
		fail=1
	else
		echo "ok: $1"
	fi
}
result 1000 500 "$tmp/base/cycle_x.json"

result 800 900 "$tmp/res/cycle_x.json"       # -20 % throughput, +80 % p99: inside
check within_tolerance 0 "$(run)"
grep -q 'cycles_per_s .* 0.800 .* ok' "$tmp/out" || { echo "FAIL: ratio line"; cat "$tmp/out"; fail=1; }

result 650 500 "$tmp/res/cycle_x.json"       # -35 % throughput
check throughput_regression 1 "$(run)"
grep -q 'REGRESSED' "$tmp/out" || { echo "FAIL: no REGRESSED verdict"; fail=1; }

result 1000 1100 "$tmp/res/cycle_x.json"     # p99 x2.2
check latency_regression 1 "$(run)"

result 5000 100 "$tmp/res/cycle_x.json"      # much better: never a failure
check improvement 0 "$(run)"

# A run during which the host stole CPU is flagged, its verdict unchanged.
printf '{"results":{"cycles_per_s":900,"ops_per_s":900,"latency_us":{"acquire":{"p99":500}}},"cpu":{"host_steal":0.3}}\n' \
	> "$tmp/res/cycle_x.json"
check stolen_run_flagged 0 "$(run)"
grep -q 'stole 30 % of the CPU during this run' "$tmp/out" || { echo "FAIL: no steal note"; cat "$tmp/out"; fail=1; }
result 900 500 "$tmp/res/cycle_x.json"
run > /dev/null
! grep -q 'stole' "$tmp/out" || { echo "FAIL: a steal note without steal"; cat "$tmp/out"; fail=1; }

# A baseline of another CPU or another hasp-bench engine is named; the
# same machine and engine say nothing.
printf '{"results":{"cycles_per_s":1000,"ops_per_s":1000,"latency_us":{"acquire":{"p99":500}}},"machine":{"cpu":"AMD EPYC","nproc":2},"config":{"engine":"wire"}}\n' \
	> "$tmp/base/cycle_x.json"
printf '{"results":{"cycles_per_s":900,"ops_per_s":900,"latency_us":{"acquire":{"p99":500}}},"machine":{"cpu":"Intel Xeon","nproc":2},"config":{"engine":"libhasp"}}\n' \
	> "$tmp/res/cycle_x.json"
check other_machine_flagged 0 "$(run)"
grep -q 'another CPU (AMD EPYC; this run: Intel Xeon)' "$tmp/out" || { echo "FAIL: no CPU note"; cat "$tmp/out"; fail=1; }
grep -q "the baseline ran hasp-bench's wire engine, this run its libhasp engine" "$tmp/out" ||
	{ echo "FAIL: no engine note"; cat "$tmp/out"; fail=1; }
! grep -q 'CPU count' "$tmp/out" || { echo "FAIL: a CPU count note for the same count"; cat "$tmp/out"; fail=1; }
printf '{"results":{"cycles_per_s":900,"ops_per_s":900,"latency_us":{"acquire":{"p99":500}}},"machine":{"cpu":"AMD EPYC","nproc":2},"config":{"engine":"wire"}}\n' \
	> "$tmp/res/cycle_x.json"
run > /dev/null
! grep -q 'note:' "$tmp/out" || { echo "FAIL: a note for the same machine and engine"; cat "$tmp/out"; fail=1; }
result 1000 500 "$tmp/base/cycle_x.json"

printf '{"results":{"cycles_per_s":1000,"latency_us":{}}}\n' > "$tmp/res/cycle_x.json"
check missing_metric 1 "$(run)"

rm -f "$tmp/res/cycle_x.json"
check missing_result 2 "$(run)"
exit $fail
