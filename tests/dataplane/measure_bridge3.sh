#!/bin/sh
# Measures three hasp-dp-echo nodes sharing the machine's cores on one bridge
# (the local-cluster topology; not a test). As root:
#   measure_bridge3.sh <build-dir> [idle-mode]
# Each node floats over cores 0-1 (--lcores '0@(0-1)'). Prints UDP echo RTT
# from the host to each node, then each node's idle CPU over 5 s.
set -eu
build=$1 mode=${2:-hybrid}
tag=$(($$ % 10000))
br="hasp-b3$tag"
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	ip link del "$br" 2>/dev/null || true
	for n in 1 2 3; do rm -rf "/var/run/dpdk/hasp-b3$tag-$n"; done
}
trap cleanup EXIT
ip link add "$br" type bridge
sysctl -qw "net.ipv6.conf.$br.disable_ipv6=1"
ip addr add 10.199.254.1/24 dev "$br"
ip link set "$br" up
for n in 1 2 3; do
	"$build/dataplane/hasp-dp-echo" --lcores '0@(0-1)' --no-huge -m 64 --no-pci \
		--file-prefix "hasp-b3$tag-$n" --no-telemetry --vdev="net_tap0,iface=hasp-b3$tag-$n" \
		-- --ip "10.199.254.1$n/24" --mac "02:77:00:00:00:1$n" --idle "$mode" \
		> /dev/null 2>&1 &
	pids="$pids $!"
done
sleep 3
for n in 1 2 3; do
	sysctl -qw "net.ipv6.conf.hasp-b3$tag-$n.disable_ipv6=1"
	ip link set "hasp-b3$tag-$n" master "$br"
	ip link set "hasp-b3$tag-$n" up
done
sleep 1
for n in 1 2 3; do
	"$build/tests/dataplane/dp_itest" udp "10.199.254.1$n" 7 2000
done
hz=$(getconf CLK_TCK)
before=""
for p in $pids; do before="$before $(awk '{print $14 + $15}' "/proc/$p/stat")"; done
sleep 5
i=0
for p in $pids; do
	i=$((i + 1))
	t0=$(echo $before | cut -d' ' -f$i)
	t1=$(awk '{print $14 + $15}' "/proc/$p/stat")
	echo "node$i mode=$mode idle_cpu=$(( (t1 - t0) * 10000 / (5 * hz) / 100 )).$(( (t1 - t0) * 10000 / (5 * hz) % 100 ))%"
done
