#!/bin/bash
# The port's own counters (docs/OPERATIONS.md "Port counters") on a real
# node behind net_af_packet or net_tap (HASP_PORT): every hasp_port_*_total
# series is in /metrics and under "port" in the SIGUSR1 stats; rx_packets
# rises with requests; frames the kernel dropped because the node did not
# drain its port (the node stopped with SIGSTOP while 3,000 datagrams
# arrive, more than af_packet's 512-frame ring or the tap's 1,000-frame
# queue) show in rx_missed, which had no counter at all.
#   itest_port_counters.sh <build dir> <source dir>
set -eu
build=$1 src=$2
. "$src/tests/node/itest_lib.sh"

line=$("$cluster" up -n 1 | tail -1)
export "${line?}"
echo "itest: $line"
out=$HASP_CLUSTER_DIR/metrics.txt
names="rx_packets tx_packets rx_missed rx_errors rx_nombuf tx_errors"

# scrape: node 1's /metrics into $out (HTTP 200 required).
scrape() {
	python3 "$src/tests/control/admin_http.py" "$(node_sock 1)" /metrics > "$out.raw"
	[ "$(head -1 "$out.raw")" = 200 ] || fail "/metrics answered $(head -1 "$out.raw")"
	tail -n +2 "$out.raw" > "$out"
}
# port <name>: hasp_port_<name>_total in a fresh scrape ("missing" if absent).
port() {
	scrape
	awk -v s="hasp_port_$1_total" '$1 == s { print $2; found = 1 } END { if (!found) print "missing" }' "$out"
}
# wait_above <name> <value>: until the counter exceeds value (it is read
# every second; bounded: 20 s), then prints it.
wait_above() {
	local deadline=$((SECONDS + 20)) v
	v=$(port "$1")
	while [ $SECONDS -lt $deadline ] && { [ "$v" = missing ] || [ "$v" -le "$2" ]; }; do
		sleep 0.2
		v=$(port "$1")
	done
	echo "$v"
}

for n in $names; do
	v=$(port "$n")
	[ "$v" != missing ] || fail "hasp_port_${n}_total is not in /metrics"
	grep -q "^# TYPE hasp_port_${n}_total counter" "$out" || fail "hasp_port_${n}_total is not a counter"
done
echo "itest: every hasp_port_*_total series exported"

rx0=$(port rx_packets)
for i in $(seq 1 20); do
	"$hasp" acquire "itest/port$i" --ttl 60s >/dev/null || fail "acquire itest/port$i"
done
rx1=$(wait_above rx_packets "$((rx0 + 19))")
[ "$rx1" -ge $((rx0 + 20)) ] || fail "rx_packets went from $rx0 to $rx1 over 20 requests"
[ "$(port tx_packets)" -gt 0 ] || fail "tx_packets stayed 0 after 20 replies"
echo "itest: rx_packets $rx0 -> $rx1 over 20 requests"

# A real miss: the node stopped, 3,000 datagrams to its client port (the
# neighbour entry is there from the requests above), then resumed.
missed0=$(port rx_missed)
pid=$(cat "$HASP_CLUSTER_DIR/n1/pid")
kill -STOP "$pid"
in_ns timeout 30 python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3000):
    s.sendto(b"x" * 64, (sys.argv[1], 7000))
' "$HASP_SUBNET.11" || true
kill -CONT "$pid"
missed1=$(wait_above rx_missed "$missed0")
[ "$missed1" -gt "$missed0" ] || fail "rx_missed stayed $missed0 after 3000 datagrams to a stopped node"
echo "itest: rx_missed $missed0 -> $missed1 after 3000 datagrams to a stopped node"

# The same counters under "port" in the SIGUSR1 stats file.
stats 1 port > /dev/null || fail "no \"port\" object in the stats file"
python3 -c '
import json, sys
port = json.load(open(sys.argv[1]))["port"]
missing = [n for n in sys.argv[3].split() if n not in port]
if missing:
    sys.exit("stats file: port has no " + " ".join(missing))
if port["rx_missed"] < int(sys.argv[2]):
    sys.exit("stats file: port.rx_missed %d, /metrics said %s" % (port["rx_missed"], sys.argv[2]))
' "$HASP_CLUSTER_DIR/n1/stats.json" "$missed1" "$names" || fail "stats file"
echo "itest_port_counters: PASS"
