#!/bin/bash
# One haspd on a TAP, over real UDP through DPDK: acquire, check, renew,
# release, expiry, wait-queue handoff by a pushed event, KV (libhasp), then
# a corpus of malformed datagrams that is dropped or refused and counted
# while the node keeps serving correct clients.
#   itest_single.sh <build dir> <source dir> <itest_client>
set -eu
build=$1 src=$2 client=$3
. "$src/tests/node/itest_lib.sh"

line=$("$cluster" up -n 1 | tail -1)
export "${line?}"
echo "itest: $line"
"$client" single "$HASP_CLUSTER"
# Refused by the decoder (client_bad) or, with client authentication, dropped
# unauthenticated before it (client_auth_*): counted either way.
dropped() { echo $(( $(stats 1 client_bad) + $(stats 1 client_auth_version) + $(stats 1 client_auth_unknown) )); }
bad_before=$(dropped)
"$client" malformed "$subnet.11" 7000
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
answered=$(python3 - "$subnet.11" <<'PY'
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
echo "itest: PASS (single node)"
