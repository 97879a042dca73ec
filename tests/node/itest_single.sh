#!/bin/bash
# One haspd on its port (net_af_packet on a veth, or net_tap: HASP_PORT),
# over real UDP through DPDK: acquire, check, renew, release, expiry,
# wait-queue handoff by a pushed event, KV (libhasp), then
# a corpus of malformed datagrams that is dropped or refused and counted
# while the node keeps serving correct clients. The cluster lives in its own
# network namespace: none of its interfaces is in the root namespace, and
# haspd and `scripts/cluster exec`'s commands run inside it; `up --root-ns`
# still gives the old layout on request.
#   itest_single.sh <build dir> <source dir> <itest_client>
set -eu
build=$1 src=$2 client=$3
. "$src/tests/node/itest_lib.sh"

line=$("$cluster" up -n 1 | tail -1)
export "${line?}"
echo "itest: $line"
# The port kind asked for (the meson entries pin HASP_PORT) is the one run.
case ${HASP_PORT:-af_packet} in
af_packet) driver=net_af_packet ;;
*) driver=net_tap ;;
esac
grep -q -- "--vdev=$driver" "$HASP_CLUSTER_DIR/n1.conf" || { echo "FAIL: node 1 is not on $driver"; exit 1; }
echo "itest: node 1 on $driver"
ns=$("$cluster" netns)
[ "$ns" = "hasp-$HASP_NET_NAME" ] || { echo "FAIL: cluster namespace '$ns'"; exit 1; }
in_root=$(ip -o link show | awk -F': ' '{print $2}' | grep -E "^${HASP_NET_NAME}[^0-9]" || true)
[ -z "$in_root" ] || { echo "FAIL: in the root namespace: $in_root"; exit 1; }
in_ns ip link show "${HASP_NET_NAME}n1" >/dev/null || { echo "FAIL: no bridge port in $ns"; exit 1; }
in_ns ip link show "${HASP_NET_NAME}br0" >/dev/null || { echo "FAIL: no bridge in $ns"; exit 1; }
echo "itest: bridge and bridge port in namespace $ns, none in the root namespace"
# haspd runs in the namespace; `scripts/cluster exec` runs its command
# there, in place (the caller's $! is the command's own PID).
node_net=$(readlink "/proc/$(cat "$HASP_CLUSTER_DIR/n1/pid")/ns/net")
[ "$node_net" != "$(readlink /proc/self/ns/net)" ] || { echo "FAIL: haspd runs in the root namespace"; exit 1; }
"$cluster" exec -- sleep 60 &
probe=$!
helpers+=($probe)
for _ in $(seq 1 100); do [ "$(cat "/proc/$probe/comm" 2>/dev/null)" = sleep ] && break; sleep 0.1; done
[ "$(cat "/proc/$probe/comm")" = sleep ] || { echo "FAIL: exec did not exec its command in place"; exit 1; }
[ "$(readlink "/proc/$probe/ns/net")" = "$node_net" ] || { echo "FAIL: exec ran outside the namespace"; exit 1; }
kill "$probe"
in_ns "$client" single "$HASP_CLUSTER"
# Refused by the decoder (client_bad) or, with client authentication, dropped
# unauthenticated before it (client_auth_*): counted either way.
dropped() { echo $(( $(stats 1 client_bad) + $(stats 1 client_auth_version) + $(stats 1 client_auth_unknown) )); }
bad_before=$(dropped)
in_ns "$client" malformed "$subnet.11" 7000
bad_after=$(dropped)
echo "itest: dropped or refused $bad_before -> $bad_after"
[ "$bad_after" -ge $((bad_before + 10)) ] || { echo "FAIL: malformed datagrams not counted"; exit 1; }
# A datagram over 1472 bytes arrives as IP fragments: dropped and counted
# by the dataplane, never answered (docs/PROTOCOL.md "Transport"; the
# correctness issue's item 16).
dpstat() {
	local f="$HASP_CLUSTER_DIR/n1/stats.json"
	rm -f "$f"
	kill -USR1 "$(cat "$HASP_CLUSTER_DIR/n1/pid")"
	for _ in $(seq 1 50); do [ -s "$f" ] && break; sleep 0.05; done
	python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['dp'][sys.argv[2]])" "$f" "$1"
}
frag_before=$(dpstat rx_ip_fragment)
answered=$(in_ns python3 - "$subnet.11" <<'PY'
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1.0)
body = bytes(1600 - 44)
hdr = struct.pack("<IBBHQQHH16s", 0x50534148, 2, 33, 0, 1 << 24, 1, len(body), 0, bytes(16))
s.sendto(hdr + body, (sys.argv[1], 7000))
try:
    s.recv(2048)
    print(1)
except socket.timeout:
    print(0)
PY
)
frag_after=$(dpstat rx_ip_fragment)
echo "itest: 1600-byte datagram: answered=$answered, fragments $frag_before -> $frag_after"
[ "$answered" = 0 ] || { echo "FAIL: an oversized datagram was answered"; exit 1; }
[ "$frag_after" -ge $((frag_before + 2)) ] || { echo "FAIL: its fragments were not counted"; exit 1; }
# Still serving correct clients.
"$hasp" kv put itest/after ok >/dev/null
[ "$("$hasp" kv get itest/after)" = ok ] || { echo "FAIL: node stopped serving"; exit 1; }
# KV CAS through the CLI against the real node: the value is compared,
# a missing key is not created, a failed CAS changes nothing.
rc=0; "$hasp" kv cas itest/cas new --expect old >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { echo "FAIL: cas --expect on a missing key: exit $rc, want 1"; exit 1; }
rc=0; "$hasp" kv get itest/cas >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { echo "FAIL: cas --expect created a missing key (kv get exit $rc)"; exit 1; }
"$hasp" kv put itest/cas v1 >/dev/null
rc=0; out=$("$hasp" --json kv cas itest/cas v2 --expect wrong) || rc=$?
[ "$rc" -eq 1 ] || { echo "FAIL: cas --expect wrong: exit $rc, want 1"; exit 1; }
case $out in *'"status":"COMPARE_FAILED"'*'"exists":true'*) ;; *) echo "FAIL: cas reply: $out"; exit 1 ;; esac
[ "$("$hasp" kv get itest/cas)" = v1 ] || { echo "FAIL: a failed cas changed the value"; exit 1; }
"$hasp" kv cas itest/cas v2 --expect v1 >/dev/null
[ "$("$hasp" kv get itest/cas)" = v2 ] || { echo "FAIL: cas --expect v1 did not write v2"; exit 1; }
# A clean stop: SIGTERM, exit 0.
"$cluster" stop 1
grep -q "haspd: stopped node=1 exit=0" "$HASP_CLUSTER_DIR/n1/log" || { echo "FAIL: unclean stop"; exit 1; }
# --root-ns, on request only: the bridge and port in the root namespace, no
# namespace, a client on the host reaches the node; the teardown's
# leftover check sees what `down` might leave.
"$cluster" down >/dev/null
# In the root namespace the /24 must be one nobody else uses there.
HASP_SUBNET=""
for i in $(seq 0 99); do
	n=$(( (tag + i) % 100 + 100 ))
	if ! ip -4 addr show | grep -q "inet 10\.77\.$n\."; then HASP_SUBNET="10.77.$n"; break; fi
done
[ -n "$HASP_SUBNET" ] || { echo "FAIL: no free 10.77.N.0/24 in the root namespace"; exit 1; }
line=$("$cluster" up -n 1 --root-ns | tail -1)
export "${line?}"
[ -z "$("$cluster" netns)" ] || { echo "FAIL: --root-ns made a namespace"; exit 1; }
ip link show "${HASP_NET_NAME}br0" >/dev/null || { echo "FAIL: --root-ns: no bridge in the root namespace"; exit 1; }
if ip netns list | awk '{print $1}' | grep -qx "hasp-$HASP_NET_NAME"; then
	echo "FAIL: --root-ns made hasp-$HASP_NET_NAME"; exit 1
fi
"$build/tools/hasp" --timeout 10000 kv put itest/root-ns ok >/dev/null ||
	{ echo "FAIL: a host client does not reach a --root-ns node"; exit 1; }
"$cluster" down >/dev/null
echo "itest: --root-ns: bridge and port in the root namespace, reached from the host"
echo "itest: PASS (single node)"
