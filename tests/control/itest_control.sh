#!/bin/bash
# haspctl against a real 3-node cluster (scripts/cluster, as root):
#   - status --cluster, health, help, log levels, metrics, /metrics and
#     /health over HTTP on the admin socket (format checked, named metrics
#     present);
#   - a fourth node joins as a learner, is promoted to voter, is removed;
#   - leadership is transferred to a chosen voter;
#   - a forced release is observed by the old holder: its check fails and
#     its release is refused;
#   - no allocation on the lcores while all of that ran;
#   - lock, lease and session listings;
#   - snapshot save, then restore into a new cluster: same locks, same
#     tokens, same KV, and the next token is larger.
#   itest_control.sh <build dir> <source dir>
set -eu
build=$1 src=$2
. "$src/tests/node/itest_lib.sh"
ctl="$build/control/haspctl"
# haspctl snapshot restore runs hasp-snapshot (tools/), which in the build
# tree is not beside haspctl.
export HASP_SNAPSHOT="$build/tools/hasp-snapshot"
work=$(mktemp -d /tmp/hasp-itest-ctl.XXXXXX)
# set +e first: under errexit `(exit $st)` would end the trap before the
# cluster is torn down.
trap 'st=$?; set +e; rm -rf "$work"; (exit $st); itest_cleanup' EXIT

fail() { echo "FAIL: $*"; exit 1; }
sock() { echo "$HASP_CLUSTER_DIR/n$1/data/admin.sock"; }
nodes() { local l="" i; for i in "$@"; do l="$l${l:+,}$i=$(sock "$i")"; done; echo "$l"; }
# retry <tries> <command...>: for commands that may meet a leader change.
retry() {
	local n=$1 i rc=0
	shift
	for i in $(seq 1 "$n"); do
		rc=0
		"$@" && return 0 || rc=$?
		sleep 0.5
	done
	return $rc
}
# field <socket> <key>: one field of the node's status.
field() {
	"$ctl" --socket "$1" --json status |
		python3 -c "import json,sys; print(json.load(sys.stdin)['result'][sys.argv[1]])" "$2"
}
# http <socket> <path>: status line and body of one GET on the admin socket.
http() { python3 "$src/tests/control/admin_http.py" "$1" "$2"; }

line=$("$cluster" up -n 3 | tail -1)
export "${line?}"
N3=$(nodes 1 2 3)
"$cluster" leader >/dev/null

# ---- status, health, introspection ----
cluster_ok() { "$ctl" --nodes "$N3" status --cluster > "$work/status"; }
retry 20 cluster_ok || { cat "$work/status"; fail "status --cluster"; }
grep -c ' ok$' "$work/status" | grep -qx 3 || { cat "$work/status"; fail "not every node ok"; }
grep -q ' leader ' "$work/status" || fail "no leader row"
retry 10 sh -c "'$ctl' --socket '$(sock 1)' health | grep -qx healthy" || fail "health"
"$ctl" --socket "$(sock 2)" help | grep -q 'locks.release_force' || fail "help lists the node commands"
"$ctl" --socket "$(sock 2)" log level node debug | grep -q 'level: debug' || fail "log level"
"$ctl" --socket "$(sock 2)" log level node info >/dev/null
"$ctl" --socket "$(sock 3)" metrics | grep -q '^hasp_term ' || fail "metrics (human)"
health_200() { [ "$(http "$(sock 1)" /health | head -1)" = 200 ]; }
retry 10 health_200 || { http "$(sock 1)" /health; fail "GET /health"; }
http "$(sock 1)" /metrics > "$work/metrics"
[ "$(head -1 "$work/metrics")" = 200 ] || fail "GET /metrics"
python3 - "$work/metrics" <<'PY' || fail "/metrics format or content"
import re, sys
lines = open(sys.argv[1]).read().split("\n")[1:]
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? (\S+)$')
types, seen = {}, set()
for l in lines:
    if not l:
        continue
    if l.startswith("# HELP "):
        continue
    if l.startswith("# TYPE "):
        _, _, name, t = l.split(" ")
        assert name not in types, "TYPE twice " + name
        types[name] = t
        continue
    m = sample.match(l)
    assert m, "bad sample line: " + l
    float(m.group(5).replace("+Inf", "inf"))
    seen.add(m.group(1))
for name in ["hasp_has_leader", "hasp_leader_changes_total", "hasp_term", "hasp_commit_index",
             "hasp_applied_index", "hasp_proposals_committed_total", "hasp_proposals_pending",
             "hasp_proposals_failed_total", "hasp_wal_fsync_duration_seconds", "hasp_batch_size",
             "hasp_peer_rtt_seconds", "hasp_locks_held", "hasp_leases", "hasp_waiters",
             "hasp_watchers", "hasp_sessions", "hasp_expirations_total",
             "hasp_notifications_sent_total", "hasp_notifications_rate_limited_total",
             "hasp_packets_dropped_total"]:
    assert name in types, "missing " + name
for h in [n for n, t in types.items() if t == "histogram"]:
    assert h + "_bucket" in seen and h + "_sum" in seen and h + "_count" in seen, h
assert any(l.startswith("hasp_has_leader 1") for l in lines), "has_leader is not 1"
assert any(l.startswith("hasp_dp_rx_frames_total ") and float(l.split()[1]) > 0 for l in lines), \
    "no dataplane frames counted"
PY
echo "itest: status, health, metrics ok"

# ---- a fourth node: learner, then voter, then removed ----
sed -e "s/^node_id = 1/node_id = 4/" -e "s/$subnet\.11\//$subnet.14\//" -e 's/00:01$/00:04/' \
	-e 's/^\(admin_addr = .*\):7071$/\1:7074/' \
	-e "s#/n1/#/n4/#g" -e "s/-n1 /-n4 /" -e "s/n1\$/n4/" \
	-e "s/iface=${HASP_NET_NAME}\([np]\)1\([,[:space:]]\|\$\)/iface=${HASP_NET_NAME}\14\2/" \
	"$HASP_CLUSTER_DIR/n1.conf" > "$HASP_CLUSTER_DIR/n4.conf"
# Its own port (the tap hct..n4, or the veth end hct..p4 on af_packet), not
# node 1's: scripts/cluster start makes node 4's veth pair.
grep -q -- "iface=${HASP_NET_NAME}[np]4" "$HASP_CLUSTER_DIR/n4.conf" || fail "n4.conf: not on node 4's port"
# Its own key pair (docs/SECURITY.md 3.5), handed out by members add.
"$build/tools/hasp-keygen" "$HASP_CLUSTER_DIR/n4.key"
pub4=$("$build/tools/hasp-keygen" --public "$HASP_CLUSTER_DIR/n4.key")
sed -i "s#^node_key_file = .*#node_key_file = $HASP_CLUSTER_DIR/n4.key#" "$HASP_CLUSTER_DIR/n4.conf"
printf 'member = 4,%s.14,7001,7000,%s\njoin = 1\n' "$subnet" "$pub4" >> "$HASP_CLUSTER_DIR/n4.conf"
"$cluster" start 4 >/dev/null
N4=$(nodes 1 2 3 4)
# Each step is checked by its outcome, so a leader change in the middle
# (the command may still commit) only costs a retry.
member_role() { "$ctl" --nodes "$N4" raw members.list | awk -v id=4 '$1 == id { print $2 }'; }
add4() {
	"$ctl" --nodes "$N4" members add 4 "$subnet.14" 7001 7000 "$pub4" >/dev/null || true
	[ -n "$(member_role)" ]
}
retry 10 add4 || fail "members add"
for _ in $(seq 1 100); do
	[ "$(field "$(sock 4)" applied_index 2>/dev/null || echo 0)" -gt 0 ] && break
	sleep 0.2
done
[ "$(field "$(sock 4)" applied_index)" -gt 0 ] || fail "the learner did not catch up"
# It says what it is (it once said follower).
for _ in $(seq 1 50); do [ "$(field "$(sock 4)" role)" = learner ] && break; sleep 0.1; done
[ "$(field "$(sock 4)" role)" = learner ] || fail "node 4's status says $(field "$(sock 4)" role), not learner"
promote4() {
	"$ctl" --nodes "$N4" members promote 4 >/dev/null || true
	[ "$(member_role)" = voter ]
}
retry 20 promote4 || fail "members promote"
remove4() {
	"$ctl" --nodes "$N4" members remove 4 >/dev/null || true
	[ -z "$(member_role)" ]
}
retry 10 remove4 || fail "members remove"
"$cluster" stop 4 >/dev/null
echo "itest: node 4 added as learner, promoted, removed"

# ---- leader transfer ----
leader=$(field "$(sock 1)" leader_id)
target=$(( leader % 3 + 1 ))
retry 5 "$ctl" --nodes "$N3" leader transfer "$target" >/dev/null || fail "leader transfer"
for _ in $(seq 1 50); do [ "$(field "$(sock "$target")" role)" = leader ] && break; sleep 0.1; done
[ "$(field "$(sock "$target")" role)" = leader ] || fail "node $target does not lead after the transfer"
echo "itest: leadership moved from $leader to $target"

# ---- forced release, observed by the old holder ----
out=$("$hasp" acquire itest/force --ttl 600000)
token=$(echo "$out" | sed -n 's/.*token=\([0-9]*\).*/\1/p')
[ -n "$token" ] || fail "acquire: $out"
"$hasp" check itest/force "$token" >/dev/null || fail "check before the forced release"
"$ctl" --nodes "$N3" locks show itest/force | grep -q "^token: $token\$" || fail "locks show"
"$ctl" --nodes "$N3" locks list --prefix itest/ | grep -q '^itest/force ' || fail "locks list"
"$ctl" --nodes "$N3" sessions list >/dev/null || fail "sessions list"
"$ctl" --nodes "$N3" leases list >/dev/null || fail "leases list"
# A leader change in the middle leaves the outcome open (the command may
# still commit): retry until it is released by us or found released.
force() {
	"$ctl" --nodes "$N3" locks release --force itest/force > "$work/force" 2>&1
	grep -q "released_token: $token\|lock itest/force is not held" "$work/force"
}
retry 10 force || { cat "$work/force"; fail "locks release --force"; }
rc=0; "$hasp" check itest/force "$token" >/dev/null 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "the old holder's check still passes"
rc=0; "$hasp" release itest/force "$token" >/dev/null 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "the old holder's release was accepted"
echo "itest: forced release: old token $token stale (check and release refused)"

# The admin path never allocates on the lcore (docs/STYLE.md §6): every command
# above ran there through the request slots.
for i in 1 2 3; do
	f=$(stats "$i" alloc_forbidden)
	[ "$f" = 0 ] || fail "node $i: $f allocations on the lcore"
done

# ---- snapshot save, restore into a new cluster ----
a=$("$hasp" acquire itest/keep-a --ttl 600000 | sed -n 's/.*token=\([0-9]*\).*/\1/p')
b=$("$hasp" acquire itest/keep-b --ttl 600000 | sed -n 's/.*token=\([0-9]*\).*/\1/p')
"$hasp" kv put itest/cfg restored-value >/dev/null
retry 5 "$ctl" --socket "$(sock 1)" snapshot save "$work/backup.snap" >/dev/null || fail "snapshot save"
"$cluster" down >/dev/null
line=$("$cluster" up -n 3 | tail -1)
export "${line?}"
for i in 1 2 3; do
	"$cluster" stop "$i" >/dev/null
	rm -rf "$HASP_CLUSTER_DIR/n$i/data"
	"$ctl" snapshot restore "$work/backup.snap" "$HASP_CLUSTER_DIR/n$i/data" --members 1,2,3 >/dev/null ||
		fail "snapshot restore into node $i"
done
for i in 1 2 3; do "$cluster" start "$i" >/dev/null; done
"$cluster" leader 30 >/dev/null || fail "the restored cluster elects no leader"
"$hasp" read itest/keep-a | grep -q "token=$a " || fail "itest/keep-a not restored with token $a"
"$hasp" read itest/keep-b | grep -q "token=$b " || fail "itest/keep-b not restored with token $b"
[ "$("$hasp" kv get itest/cfg)" = restored-value ] || fail "KV not restored"
next=$("$hasp" acquire itest/after --ttl 10000 | sed -n 's/.*token=\([0-9]*\).*/\1/p')
[ "$next" -gt "$b" ] || fail "token $next after the restore is not above $b"
echo "itest: restored cluster holds itest/keep-a=$a itest/keep-b=$b; next token $next"
echo "itest: ok"
