#!/bin/sh
# Dataplane integration test: two hasp-dp-echo nodes on one Linux bridge,
# the local-cluster topology of docs/OPERATIONS.md ("Running locally") and
# docs/ENVIRONMENT.md ("Local cluster topology").
#   itest_bridge.sh <hasp-dp-echo> <dp_itest>
#
# As root: creates a bridge with an address on a free 10.199.N.0/24, starts
# two nodes on their own taps with their own MACs (02:77:00:00:0A:NN and
# 02:77:00:00:0B:NN, never the taps' MACs: docs/ENVIRONMENT.md, "The MAC trap"),
# attaches the taps after the nodes are ready (as an operator would), then
# checks ping and UDP echo from the host to each node and a node-to-node
# datagram through the bridge (node A resolves B by ARP, B replies to A).
# Removes the bridge, processes, taps and DPDK runtime dirs on exit.
set -eu
echo_bin=$1 itest=$2

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: needs root (creates a bridge and taps, assigns addresses)"
	exit 77
fi

tag=$(($$ % 100000))
br="hasp-br$tag"
tmp=$(mktemp -d /tmp/hasp-itest.XXXXXX)
pid_a="" pid_b=""

cleanup() {
	status=$?
	for pid in $pid_a $pid_b; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in $pid_a $pid_b; do
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$pid" 2>/dev/null || true
	done
	if [ $status -ne 0 ]; then
		for n in a b; do
			[ -f "$tmp/$n.err" ] && { echo "--- node $n stderr:"; cat "$tmp/$n.err"; }
		done
	fi
	ip link del "$br" 2>/dev/null || true
	ip link del "hasp-xa$tag" 2>/dev/null || true
	ip link del "hasp-xb$tag" 2>/dev/null || true
	rm -rf "/var/run/dpdk/hasp-br$tag-a" "/var/run/dpdk/hasp-br$tag-b" "$tmp"
	exit $status
}
trap cleanup EXIT
trap 'exit 1' INT TERM

net=""
for i in $(seq 0 199); do
	n=$(( (tag + i) % 200 + 20 ))
	if ! ip -4 route show | grep -q "^10\.199\.$n\." && ! ip -4 addr show | grep -q "inet 10\.199\.$n\."; then
		net=$n
		break
	fi
done
[ -n "$net" ] || { echo "FAIL: no free 10.199.N.0/24"; exit 1; }
host_ip="10.199.$net.1" ip_a="10.199.$net.2" ip_b="10.199.$net.3"
mac_a="02:77:00:00:0a:$(printf %02x $((net % 256)))"
mac_b="02:77:00:00:0b:$(printf %02x $((net % 256)))"
echo "itest: bridge=$br subnet=10.199.$net.0/24 A=$ip_a/$mac_a B=$ip_b/$mac_b"

ip link add "$br" type bridge
sysctl -qw "net.ipv6.conf.$br.disable_ipv6=1" 2>/dev/null || true
ip addr add "$host_ip/24" dev "$br"
ip link set "$br" up

start_node() { # name ip mac hello
	"$echo_bin" -l 0 --no-huge -m 64 --no-pci --file-prefix "hasp-br$tag-$1" --no-telemetry \
		--vdev="net_tap0,iface=hasp-x$1$tag" -- --ip "$2/24" --mac "$3" --udp-port 7 \
		--idle hybrid --stats-file "$tmp/$1.json" --hello "$4" \
		> "$tmp/$1.out" 2> "$tmp/$1.err" &
}
start_node a "$ip_a" "$mac_a" "$ip_b:7"
pid_a=$!
start_node b "$ip_b" "$mac_b" "$host_ip:7799"
pid_b=$!

for n in a b; do
	for _ in $(seq 1 100); do
		grep -q "ready" "$tmp/$n.err" 2>/dev/null && break
		sleep 0.1
	done
	grep -q "ready" "$tmp/$n.err" || { echo "FAIL: node $n not ready in 10 s"; exit 1; }
	sysctl -qw "net.ipv6.conf.hasp-x$n$tag.disable_ipv6=1" 2>/dev/null || true
	ip link set "hasp-x$n$tag" master "$br"
	ip link set "hasp-x$n$tag" up
done

"$itest" ping "$ip_a" 3
"$itest" ping "$ip_b" 3
"$itest" udp "$ip_a" 7 100
"$itest" udp "$ip_b" 7 100
"$itest" peer "$pid_a" "$tmp/a.json" "$pid_b" "$tmp/b.json"

for n in a b; do
	eval pid=\$pid_$n
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ $rc -eq 0 ] || { echo "FAIL: node $n exited with $rc"; exit 1; }
	"$itest" final "$tmp/$n.json"
done
pid_a="" pid_b=""
echo "itest: PASS (bridge)"
