#!/bin/bash
# /metrics of live nodes as Prometheus sees it (docs/CONTROL.md "Metrics"):
# three haspd nodes serve clients; every node's /metrics (fetched over its
# Unix admin socket) passes `promtool check metrics`; the latency
# histograms, the replies by opcode and status, process_*, the storage
# gauges and hasp_build_info carry what happened; every metric the Grafana
# dashboard and the Prometheus rules in deploy/ name is one the nodes
# export; and hasp_leader_changes_total survives a restart.
#   itest_metrics.sh <build dir> <source dir>
set -eu
build=$1 src=$2
. "$src/tests/node/itest_lib.sh"
command -v promtool >/dev/null || { echo "FAIL: promtool missing (scripts/install-deps)"; exit 1; }

line=$("$cluster" up -n 3 | tail -1)
export "${line?}"
echo "itest: $line"
out=$HASP_CLUSTER_DIR/scrapes
mkdir -p "$out"

# scrape <n>: node n's /metrics into $out/n<n>.txt (HTTP 200 required).
scrape() {
	python3 "$src/tests/control/admin_http.py" "$HASP_CLUSTER_DIR/n$1/data/admin.sock" /metrics > "$out/raw"
	[ "$(head -1 "$out/raw")" = 200 ] || { echo "scrape of node $1: HTTP $(head -1 "$out/raw")"; return 1; }
	tail -n +2 "$out/raw" > "$out/n$1.txt"
}
# value <n> <series, exactly as exposed>: its value in node n's last scrape.
value() {
	awk -v s="$2" '$1 == s { print $2; found = 1 } END { if (!found) print "missing" }' "$out/n$1.txt"
}
# at_least <n> <series> <min>
at_least() {
	local v
	v=$(value "$1" "$2")
	awk -v v="$v" -v m="$3" 'BEGIN { exit !(v != "missing" && v + 0 >= m + 0) }' ||
		{ echo "FAIL: node $1: $2 = $v, want >= $3"; exit 1; }
}
# total_at_least <series> <min>: summed over the three nodes (which node
# led when is up to the elections of a loaded machine); each node must
# export the series.
total_at_least() {
	local t=0 v n
	for n in 1 2 3; do
		v=$(value $n "$1")
		[ "$v" != missing ] || { echo "FAIL: node $n does not export $1"; exit 1; }
		t=$(awk -v a="$t" -v b="$v" 'BEGIN { print a + b }')
	done
	awk -v t="$t" -v m="$2" 'BEGIN { exit !(t + 0 >= m + 0) }' ||
		{ echo "FAIL: $1 = $t over the nodes, want >= $2"; exit 1; }
}

echo "itest: leader $("$cluster" leader)"
# Some traffic: grants, a BUSY, KV writes and reads, a missing key.
in_ns "$build/tools/hasp" acquire itest/m --ttl 30000 >/dev/null
rc=0; in_ns "$build/tools/hasp" acquire itest/m --ttl 30000 >/dev/null 2>&1 || rc=$?
[ "$rc" -ne 0 ] || { echo "FAIL: a held lock was granted twice"; exit 1; }
for i in 1 2 3 4 5; do in_ns "$build/tools/hasp" kv put "itest/k$i" "v$i" >/dev/null; done
[ "$(in_ns "$build/tools/hasp" kv get itest/k3)" = v3 ] || { echo "FAIL: kv get"; exit 1; }
rc=0; in_ns "$build/tools/hasp" kv get itest/none >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { echo "FAIL: kv get of a missing key: exit $rc"; exit 1; }
# Heartbeats: the leader times one round trip per peer per heartbeat.
sleep 1

for n in 1 2 3; do
	scrape "$n"
	promtool check metrics < "$out/n$n.txt" > "$out/promtool.n$n" 2>&1 ||
		{ echo "FAIL: promtool check metrics on node $n:"; cat "$out/promtool.n$n"; exit 1; }
done
echo "itest: promtool check metrics: clean on nodes 1, 2, 3"

# Replies by opcode and status appear with their first reply: sum those
# over the nodes that have them.
replies() {
	cat "$out"/n[123].txt | awk -v s="hasp_client_replies_total{$1}" '$1 == s { t += $2 } END { print t + 0 }'
}
for want in 'opcode="ACQUIRE",status="GRANTED" 1' 'opcode="ACQUIRE",status="BUSY" 1' \
	    'opcode="KV_PUT",status="OK" 5' 'opcode="KV_GET",status="NOT_FOUND" 1'; do
	set -- $want
	[ "$(replies "$1")" -ge "$2" ] || { echo "FAIL: hasp_client_replies_total{$1} = $(replies "$1"), want >= $2"; exit 1; }
done
total_at_least 'hasp_request_duration_seconds_count{opcode="KV_PUT"}' 5
total_at_least 'hasp_request_duration_seconds_bucket{opcode="KV_PUT",le="+Inf"}' 5
total_at_least 'hasp_raft_commit_duration_seconds_count' 5
total_at_least 'hasp_wal_fsync_duration_seconds_count' 1
# Every node has a round-trip histogram per peer; the leaders filled some.
peers=0
for n in 1 2 3; do
	for p in 1 2 3; do
		[ "$p" = "$n" ] && continue
		c=$(value $n "hasp_peer_rtt_seconds_count{peer=\"$p\"}")
		[ "$c" != missing ] || { echo "FAIL: node $n has no round-trip histogram for peer $p"; exit 1; }
		peers=$((peers + c))
	done
done
[ "$peers" -ge 2 ] || { echo "FAIL: $peers peer round trips timed"; exit 1; }
for n in 1 2 3; do
	at_least $n 'hasp_apply_duration_seconds_count' 5
	at_least $n 'process_cpu_seconds_total' 0.001
	at_least $n 'process_resident_memory_bytes' 1048576
	at_least $n 'process_open_fds' 3
	at_least $n 'hasp_storage_capacity_bytes' 1
	at_least $n 'hasp_leader_changes_total' 1
	start=$(value $n process_start_time_seconds)
	awk -v s="$start" -v now="$(date +%s)" 'BEGIN { exit !(s != "missing" && now - 86400 < s && s <= now + 1) }' ||
		{ echo "FAIL: node $n: process_start_time_seconds $start is not a recent Unix time"; exit 1; }
done
commit=$(git -C "$src" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
version=$(sed -n "s/^ *version: '\([^']*\)'.*/\1/p" "$src/meson.build" | head -1)
[ "$(value 1 "hasp_build_info{version=\"$version\",commit=\"$commit\"}")" = 1 ] ||
	{ echo "FAIL: hasp_build_info: $(grep '^hasp_build_info' "$out/n1.txt"), want version $version commit $commit"; exit 1; }
echo "itest: latency histograms, replies by opcode and status, process_*, storage, build info ($commit)"

python3 "$src/tests/deploy/check_monitoring.py" "$src/deploy/grafana/hasp-dashboard.json" \
	"$src/deploy/prometheus/hasp-rules.yml" "$out"/n[123].txt ||
	{ echo "FAIL: the dashboard or the rules name metrics the nodes do not export"; exit 1; }

# Leader changes survive a restart: once node $follower has seen two
# leaders (a transfer makes sure of it), restart it; its count must go on
# from there (before the fix it restarted at 0 and showed 1).
leader=$("$cluster" leader)
follower=$(( leader % 3 + 1 ))
other=$(( follower % 3 + 1 ))
"$build/control/haspctl" --socket "$HASP_CLUSTER_DIR/n$leader/data/admin.sock" leader transfer "$other" >/dev/null || true
changes() { value $follower hasp_leader_changes_total; }
for _ in $(seq 1 200); do
	scrape "$follower"
	[ "$(changes)" != missing ] && [ "$(changes)" -ge 2 ] && break
	sleep 0.1
done
before=$(changes)
[ "$before" -ge 2 ] || { echo "FAIL: node $follower: hasp_leader_changes_total $before after a transfer, want >= 2"; exit 1; }
"$cluster" stop "$follower"
"$cluster" start "$follower" >/dev/null
for _ in $(seq 1 300); do
	scrape "$follower" 2>/dev/null && [ "$(value $follower hasp_has_leader)" = 1 ] && break
	sleep 0.1
done
[ "$(value $follower hasp_has_leader)" = 1 ] || { echo "FAIL: restarted node $follower found no leader"; exit 1; }
after=$(changes)
[ "$after" -ge "$before" ] ||
	{ echo "FAIL: restarted node $follower: hasp_leader_changes_total $after, was $before before the restart"; exit 1; }
echo "itest: node $follower: hasp_leader_changes_total $before before a restart, $after after"
echo "itest: PASS (metrics)"
