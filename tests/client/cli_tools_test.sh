#!/bin/sh
# Every program answers --version with the meson project version and
# --help with its usage (exit 0); the load tools print help for --help
# anywhere on the line and send nothing then; on a terminal a run prints a
# progress line a second, and not when stdout is a pipe.
#   cli_tools_test.sh <project version> <hasp-load> <hasp-bench> <program>...
# (the programs: every installed one this build has)
set -eu
version=$1 load=$2 bench=$3
shift 3
tmp=$(mktemp -d)
listener=
cleanup() {
	[ -n "$listener" ] && kill "$listener" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

for prog in "$load" "$bench" "$@"; do
	name=$(basename "$prog")
	out=$(timeout 10 "$prog" --version) || fail "$name --version exited $?"
	[ "$out" = "$name $version" ] || fail "$name --version printed '$out', want '$name $version'"
	timeout 10 "$prog" --help > "$tmp/help" || fail "$name --help exited $?"
	grep -q "usage" "$tmp/help" || fail "$name --help printed no usage"
done
echo "cli_tools: --version and --help on every program"

# A UDP port that counts what arrives (where a cluster would be).
cat > "$tmp/listen.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
open(sys.argv[1] + ".port", "w").write(str(s.getsockname()[1]))
s.settimeout(0.2)
n = 0
for _ in range(600):  # at most 120 s
    try:
        s.recv(2048)
        n += 1
        open(sys.argv[1], "w").write(str(n))
    except socket.timeout:
        pass
PY
echo 0 > "$tmp/count"
python3 "$tmp/listen.py" "$tmp/count" &
listener=$!
for _ in $(seq 100); do [ -s "$tmp/count.port" ] && break; sleep 0.1; done
port=$(cat "$tmp/count.port") || fail "the UDP listener did not start"
cluster=127.0.0.1:$port

# --help anywhere: exit 0, usage on stdout, not one datagram sent.
for args in "--help" "--cluster $cluster --help" "--cluster $cluster --threads --help" \
	"--cluster $cluster --seconds 5 -h"; do
	# shellcheck disable=SC2086
	timeout 10 "$load" $args > "$tmp/out" || fail "hasp-load $args exited $?"
	grep -q "usage: hasp-load" "$tmp/out" || fail "hasp-load $args printed no usage"
done
for args in "--help" "--cluster $cluster --duration 5 --help" "--cluster $cluster --ttl --help" \
	"--cluster $cluster --bogus -h"; do
	# shellcheck disable=SC2086
	timeout 10 "$bench" $args > "$tmp/out" || fail "hasp-bench $args exited $?"
	grep -q "usage: hasp-bench" "$tmp/out" || fail "hasp-bench $args printed no usage"
done
sleep 0.5
[ "$(cat "$tmp/count")" = 0 ] || fail "--help sent $(cat "$tmp/count") datagrams"

# The listener does count: a real run sends (nobody answers: it fails).
# The cluster named by host name: "localhost" is resolved (common/resolve.h).
timeout 60 "$load" --cluster "localhost:$port" --threads 1 --seconds 1 > "$tmp/piped" 2>&1 || true
sleep 0.5
[ "$(cat "$tmp/count")" -gt 0 ] || fail "a run sent nothing: the listener counts nothing: $(cat "$tmp/piped")"
# A host name that does not exist: usage error, nothing sent.
for tool in "$load --seconds 1" "$bench --duration 1"; do
	echo 0 > "$tmp/count"
	rc=0
	# shellcheck disable=SC2086
	timeout 10 $tool --cluster no-such-host.invalid:$port > "$tmp/out" 2>&1 || rc=$?
	[ $rc -eq 2 ] || fail "$tool with an unknown host exited $rc, want 2: $(cat "$tmp/out")"
	grep -q 'cannot resolve the host name "no-such-host.invalid"' "$tmp/out" ||
		fail "$tool: no reason for the unknown host: $(cat "$tmp/out")"
done
# hasp-bench by host name reaches the listener too.
echo 0 > "$tmp/count"
timeout 60 "$bench" --cluster "localhost:$port" --clients 1 --duration 1 > "$tmp/out" 2>&1 || true
sleep 0.5
[ "$(cat "$tmp/count")" -gt 0 ] || fail "hasp-bench --cluster localhost sent nothing: $(cat "$tmp/out")"
# Piped: the summary line only, no progress lines.
if grep -q "ops/s=" "$tmp/piped"; then fail "progress lines on a pipe: $(cat "$tmp/piped")"; fi
grep -q "^hasp-load: threads=1" "$tmp/piped" || fail "no summary: $(cat "$tmp/piped")"
echo "cli_tools: --help anywhere sends nothing; a run does"

# On a terminal (script(1) gives it one): progress lines.
timeout 60 script -qec "$load --cluster $cluster --threads 1 --seconds 3" /dev/null \
	> "$tmp/tty" 2>&1 || true
grep -q "^hasp-load: 1s ops/s=[0-9]* p99_us<=[0-9]* errors=[0-9]*" "$tmp/tty" ||
	fail "hasp-load on a terminal printed no progress: $(cat "$tmp/tty")"
timeout 60 script -qec "$bench --cluster $cluster --clients 1 --duration 2" /dev/null \
	> "$tmp/tty" 2>&1 || true
grep -q "^hasp-bench: 1s ops/s=[0-9]* p99_us=[0-9]* errors=[0-9]*" "$tmp/tty" ||
	fail "hasp-bench on a terminal printed no progress: $(cat "$tmp/tty")"
timeout 60 "$bench" --cluster "$cluster" --clients 1 --duration 2 > "$tmp/piped" 2>&1 || true
if grep -q "ops/s=" "$tmp/piped"; then fail "hasp-bench progress on a pipe"; fi
echo "cli_tools: progress lines on a terminal only"
echo "cli_tools: PASS"
