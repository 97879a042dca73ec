#!/bin/bash
# `hasp run` on a real node (docs/CLIENT.md "hasp run"):
#   - it blocks while the lock is held (like flock(1)) and runs the command
#     once the holder's TTL ends;
#   - --try and --timeout give up on a held lock with --conflict-exit-code,
#     without running the command;
#   - signals other than HUP/INT/TERM (USR1, USR2, ALRM, PIPE, QUIT) do not
#     kill it while it holds the lock: the command runs on, the lock stays
#     held with the same token; SIGTERM is passed to the command, and the
#     lock is released once the command ended.
# And hasp-load on a terminal prints progress lines with real traffic.
#   itest_cli.sh <build dir> <source dir>
set -eu
build=$1 src=$2
. "$src/tests/node/itest_lib.sh"

line=$("$cluster" up -n 1 | tail -1)
export "${line?}"
echo "itest: $line"
tmp=$HASP_CLUSTER_DIR
fail() { echo "FAIL: $*"; exit 1; }

# Blocks, then runs: the holder's lock lives 2 s and nobody releases it.
"$hasp" acquire itest/run --ttl 2s >/dev/null || fail "acquire"
rc=0
out=$("$hasp" run itest/run -- sh -c 'echo ran') || rc=$?
[ $rc -eq 0 ] && [ "$out" = ran ] || fail "run did not wait for the lock: exit $rc, output '$out'"
echo "itest: run waited for the holder's TTL, then ran"

# A held lock with --try or --timeout: the conflict code, the command not run.
"$hasp" acquire itest/run --ttl 60s >/dev/null || fail "acquire"
rc=0
out=$("$hasp" run itest/run --try --conflict-exit-code 75 -- sh -c 'echo ran') || rc=$?
[ $rc -eq 75 ] && [ -z "$out" ] || fail "run --try on a held lock: exit $rc, output '$out'"
rc=0
out=$("$hasp" --timeout 300ms run itest/run --conflict-exit-code 75 -- sh -c 'echo ran') || rc=$?
[ $rc -eq 75 ] && [ -z "$out" ] || fail "run --timeout on a held lock: exit $rc, output '$out'"
echo "itest: --try and --timeout give up with the conflict exit code"

# Signals while the lock is held. The command writes hasp's pid (its
# parent) and waits; it ends on SIGTERM, which hasp passes on.
rm -f "$tmp/hasp.pid"
"$hasp" run itest/sig --ttl 1s -- sh -c "echo \$PPID > $tmp/hasp.pid; exec sleep 60" &
runner=$!
helpers+=($runner)
for _ in $(seq 1 500); do [ -s "$tmp/hasp.pid" ] && break; sleep 0.02; done
[ -s "$tmp/hasp.pid" ] || fail "the command of hasp run did not start"
pid=$(cat "$tmp/hasp.pid")
grep -q hasp "/proc/$pid/cmdline" || fail "pid $pid is not hasp"
token=$("$hasp" --json read itest/sig | sed -n 's/.*"token":\([0-9]*\).*/\1/p')
[ -n "$token" ] || fail "itest/sig is not held"
for sig in USR1 USR2 ALRM PIPE QUIT; do
	kill -s "$sig" "$pid"
done
# Longer than the lock's TTL: the lock lives only if hasp keeps renewing.
sleep 2
kill -0 "$pid" 2>/dev/null || fail "a signal other than HUP/INT/TERM killed hasp run"
now=$("$hasp" --json read itest/sig | sed -n 's/.*"token":\([0-9]*\).*/\1/p')
[ "$now" = "$token" ] || fail "the lock changed hands after the signals: token '$now', was $token"
echo "itest: USR1 USR2 ALRM PIPE QUIT did not end hasp run; the lock stayed held (token $token)"
kill -s TERM "$pid"
rc=0
wait "$runner" || rc=$?
[ $rc -eq 143 ] || fail "hasp run after SIGTERM exited $rc, want 143 (the command's SIGTERM)"
rc=0
"$hasp" read itest/sig >/dev/null 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "the lock is still held after hasp run ended (read exit $rc)"
echo "itest: SIGTERM reached the command; the lock was released"

# hasp-load on a terminal (script(1)): a progress line a second, with
# operations completed.
in_ns script -qec "$build/tools/hasp-load --cluster $HASP_CLUSTER --threads 1 --seconds 3" /dev/null \
	> "$tmp/load.out" 2>&1 || fail "hasp-load: $(cat "$tmp/load.out")"
grep -q "^hasp-load: 1s ops/s=[1-9][0-9]* p99_us<=[0-9]* errors=0" "$tmp/load.out" ||
	fail "no progress line with operations: $(cat "$tmp/load.out")"
echo "itest: hasp-load progress: $(grep -m1 '1s ops/s' "$tmp/load.out")"
echo "itest: PASS"
