#!/bin/bash
# One haspd with two dataplane lcores (-l 0-1, two queues on its tap):
# lcore 0 runs the node, lcore 1 receives on queue 1 and hands datagrams to
# lcore 0 through its rte_ring (docs/OPERATIONS.md, "More lcores").
#   - the kernel spreads flows over the tap's queues by hash, so many client
#     source ports (hasp-load threads, many CLI processes) reach both lcores:
#     the RX lcore must have forwarded datagrams (rx_forwarded > 0) and lcore
#     0 handled them (fwd_handled);
#   - acquire, renew, release, expiry, wait-queue handoff by a pushed event
#     and KV work (itest_client single);
#   - events leave from lcore 1 (its event lane): a release storm's waiters
#     and watchers are all told (sealed events: client auth is on), lcore 1
#     sent them (post_handled, hasp_watch_events_total{lcore="1"}), none
#     was dropped or sent by lcore 0 instead (post_ring_full, post_no_msg,
#     events_lane_overflow);
#   - no lcore allocated (alloc_forbidden = 0) and the node stops cleanly.
#   itest_lcores.sh <build dir> <source dir> <itest_client>
set -eu
build=$1 src=$2 client=$3
. "$src/tests/node/itest_lib.sh"
export HASP_LCORES=2

# dp <n> <key>: a dataplane counter (summed over lcores) of node n.
dp() {
	stats "$1" dp | python3 -c "import ast,sys; print(ast.literal_eval(sys.stdin.read())[sys.argv[1]])" "$2"
}

# The storm's 300 sessions are one identity's: raise its bound (default 64).
line=$("$cluster" up -n 1 --set identity_sessions_max=1024 | tail -1)
export "${line?}"
echo "itest: $line"
grep -q -- "-l 0-1" "$HASP_CLUSTER_DIR/n1.conf" || { echo "FAIL: not started on two lcores"; exit 1; }
in_ns "$client" single "$HASP_CLUSTER"

# Many source ports: one CLI process each, then load from several threads.
for i in $(seq 1 16); do "$hasp" kv put "itest/lc$i" "v$i" >/dev/null; done
for i in $(seq 1 16); do
	[ "$("$hasp" kv get "itest/lc$i")" = "v$i" ] || { echo "FAIL: kv itest/lc$i"; exit 1; }
done
in_ns "$build/tools/hasp-load" --cluster "$HASP_CLUSTER" --threads 4 --seconds 2
fwd=$(dp 1 rx_forwarded)
handled=$(dp 1 fwd_handled)
full=$(dp 1 rx_ring_full)
wakes=$(dp 1 fwd_wakes)
echo "itest: rx_forwarded=$fwd fwd_handled=$handled rx_ring_full=$full fwd_wakes=$wakes"
[ "$fwd" -gt 0 ] || { echo "FAIL: the RX lcore forwarded nothing"; exit 1; }
[ "$handled" -gt 0 ] && [ "$handled" -le "$fwd" ] || { echo "FAIL: fwd_handled $handled vs $fwd"; exit 1; }
# Frames reached lcore 0's own queue as well (the rest of rx_udp).
udp=$(dp 1 rx_udp)
[ "$udp" -gt "$fwd" ] || { echo "FAIL: lcore 0 received no datagram itself ($udp vs $fwd)"; exit 1; }
# A release storm (tools/bench_libhasp_storm.c): 100 locks, each held, waited for
# and watched; every grant and watch event goes out through lcore 1.
out="$HASP_CLUSTER_DIR/storm.json"
in_ns "$build/tools/hasp-bench" --json --workload storm --locks 100 --window-ms 100 --ttl 60000 \
	--session-ttl 60000 --count 2 --duration 60 --engine libhasp > "$out" ||
	{ echo "FAIL: storm exited $? ($(cat "$out"))"; exit 1; }
storm() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($1)" "$out"; }
[ "$(storm "j['results']['storm']['granted']")" = 200 ] || { echo "FAIL: storm grants: $(cat "$out")"; exit 1; }
[ "$(storm "j['results']['storm']['told']")" = 200 ] || { echo "FAIL: storm watchers: $(cat "$out")"; exit 1; }
posted=$(dp 1 post_queued)
sent=$(dp 1 post_handled)
lost=$(( $(dp 1 post_ring_full) + $(dp 1 post_no_msg) + $(stats 1 events_lane_overflow) ))
echo "itest: post_queued=$posted post_handled=$sent lost=$lost"
[ "$sent" -ge 400 ] && [ "$sent" -le "$posted" ] || { echo "FAIL: lcore 1 sent $sent of $posted events"; exit 1; }
# 1,001 events in all: fewer than one ring holds, so none may overflow.
[ "$lost" -eq 0 ] || { echo "FAIL: $lost events not posted to lcore 1"; exit 1; }
metric() { # metric <series>: its value in node 1's `haspctl metrics`
	"$build/control/haspctl" --socket "$(node_sock 1)" metrics | awk -v s="$1" '$1 == s { print $2 }'
}
w1=$(metric 'hasp_watch_events_total{lcore=1,outcome=sent}')
w0=$(metric 'hasp_watch_events_total{lcore=0,outcome=sent}')
echo "itest: watch events sent by lcore 0: $w0, by lcore 1: $w1"
[ "${w1:-0}" -ge 200 ] && [ "$w0" = 0 ] || { echo "FAIL: watch events by lcore: $w0 / $w1"; exit 1; }
af=$(stats 1 alloc_forbidden)
[ "$af" -eq 0 ] || { echo "FAIL: lcores allocated ($af)"; exit 1; }
# Still serving after the load; then a clean stop.
"$hasp" kv put itest/after ok >/dev/null
[ "$("$hasp" kv get itest/after)" = ok ] || { echo "FAIL: node stopped serving"; exit 1; }
"$cluster" stop 1
grep -q "haspd: stopped node=1 exit=0" "$HASP_CLUSTER_DIR/n1/log" || { echo "FAIL: unclean stop"; exit 1; }
echo "itest: PASS (two lcores)"
