#!/bin/bash
# A paced snapshot hurries once the raft log window is half full (node.c
# node_snapshot_should_hurry; docs/STORAGE.md "Snapshot write rate"): one
# real node whose snapshot files are written at 1 MB/s, a state of 1,500
# sessions (about 3 MB with their cached replies, so a paced file takes
# about 3 s), and a closed-loop load that fills half the 4,096-entry log
# window long before that. (With 8,192 entries the load had to bring
# 3,584 commands during one paced write; on a host stealing a third of
# the CPUs it did not in two runs of three: 0 hurried of 39 and of 37.
# With 4,096, 36-40 of 44 hurried in four runs there, and half the
# window still holds 2,048 commands for the hurried rest.) The writer must then write the rest at once,
# so that the log is compacted before the window fills: snapshots are
# hurried and finish, and no command is refused OVERLOADED. Before the
# change every such snapshot took its 3 s while the window filled, and
# the node answered OVERLOADED.
#   itest_snapshot_hurry.sh <build dir> <source dir>
set -eu
build=$1 src=$2
. "$src/tests/node/itest_lib.sh"

line=$("$cluster" up -n 1 --set log_window=4096 --set snapshot_threshold=512 \
	--set snapshot_trailing=16 --set snapshot_write_rate=1 --set session_window=32 \
	--set identity_sessions_max=8192 | tail -1)
export "${line?}"
echo "itest: $line"
bench="$build/tools/hasp-bench"

# 1,500 sessions that stay open for the whole test: an open loop at 100
# cycles a second over them (their keepalives at a third of the TTL).
in_ns "$bench" --json --clients 1500 --rate 100 --count 100000 --duration 40 \
	--keys 4096 --prefix hold > "$HASP_CLUSTER_DIR/sessions.json" 2>&1 &
helpers+=($!)
sessions() {
	python3 "$src/tests/control/admin_http.py" "$(node_sock 1)" /metrics |
		awk '$1 == "hasp_sessions" { print $2 }'
}
for _ in $(seq 1 300); do
	[ "$(sessions)" -ge 1500 ] 2>/dev/null && break
	sleep 0.1
done
sessions=$(sessions)
[ "$sessions" -ge 1500 ] || fail "only $sessions sessions open"
echo "itest: $sessions sessions open"

# The load: 20,000 lock cycles (40,000 commands, five times the window).
in_ns "$bench" --json --clients 16 --keys 4096 --count 20000 --duration 60 --prefix load \
	> "$HASP_CLUSTER_DIR/load.json" || fail "the load exited $?"
field() { python3 -c "import json,sys; print($1)" < "$HASP_CLUSTER_DIR/load.json"; }
[ "$(field "json.load(sys.stdin)['results']['cycles']")" -eq 20000 ] ||
	fail "the load did not finish its cycles: $(cat "$HASP_CLUSTER_DIR/load.json")"

taken=$(stats 1 snapshots_taken)
hurried=$(stats 1 snapshot_hurried)
hurried_pieces=$(stats 1 snapshot_hurried_pieces)
overloaded=$(stats 1 client_overloaded)
echo "itest: $taken snapshots taken, $hurried hurried ($hurried_pieces pieces unpaced)," \
	"$overloaded commands refused OVERLOADED"
[ "$taken" -ge 2 ] || fail "$taken snapshots taken"
[ "$hurried" -ge 1 ] && [ "$hurried_pieces" -ge 1 ] ||
	fail "no snapshot hurried ($hurried, $hurried_pieces pieces)"
[ "$overloaded" -eq 0 ] || fail "$overloaded commands refused OVERLOADED while a snapshot was written"
# The snapshots' copies carried only the cached replies written since the
# copy before (docs/STORAGE.md "Snapshots off the lcore"): a few thousand
# commands' worth, not the 1,500 sessions' whole windows of 32.
replies=$(stats 1 snapshot_copy_replies_last)
echo "itest: the last copy carried $replies reply records ($sessions sessions x 32 in all)"
[ "$replies" -lt $((sessions * 32)) ] ||
	fail "the last copy carried $replies reply records: every session's window"
echo "itest: PASS"
