#!/bin/sh
# perf/peers/run's exit status, without any peer server: a malformed --set
# is refused before anything starts (2), and a system asked for but not
# measured makes the run exit 1 (it used to print the error and exit 0, so
# a wrapper could not tell a failed comparison from a complete one).
#   test_peers_run_status.sh <source-root>
set -u
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name expected actual
	if [ "$2" != "$3" ]; then
		echo "FAIL: $1: exit $3, expected $2"
		cat "$tmp/err"
		fail=1
	else
		echo "ok: $1"
	fi
}

rc=0
"$root/perf/peers/run" --set segment_fill --no-install --no-build >"$tmp/out" 2>"$tmp/err" || rc=$?
check "--set without =" 2 "$rc"
grep -q "takes key=value" "$tmp/err" || { echo "FAIL: no reason for the refused --set"; fail=1; }

if [ "$(id -u)" -ne 0 ]; then
	echo "skip: the rest needs root (peers/run makes a network namespace)"
	[ $fail -eq 0 ] && exit 77
	exit 1
fi
mkdir -p "$tmp/build"
rc=0
HASP_NET_NAME=tprs "$root/perf/peers/run" --systems nosuch --no-install --no-build --no-plots \
	--no-sweep --build "$tmp/build" --out "$tmp/res" >"$tmp/out" 2>"$tmp/err" || rc=$?
check "a system not measured" 1 "$rc"
grep -q "not measured: nosuch" "$tmp/err" || { echo "FAIL: the system not measured is not named"; cat "$tmp/err"; fail=1; }
if ip netns list | grep -q "hasp-tprs-peers"; then
	echo "FAIL: the peers' namespace was left behind"
	fail=1
fi
exit $fail
