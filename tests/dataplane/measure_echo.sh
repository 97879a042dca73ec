#!/bin/sh
# Measures one hasp-dp-echo on a net_tap (not a test: timing never gates a
# test; numbers go to docs/DATAPLANE.md). As root:
#   measure_echo.sh <build-dir> poll|hybrid|sleep [lcores]
# Prints UDP echo RTT back to back (the lcore stays awake), RTT with a
# 20 ms gap (the lcore is asleep when each request arrives), and the idle
# CPU of the process over 5 s from /proc/<pid>/stat (utime + stime), and the
# echo rate with 32 datagrams in flight for 3 s.
set -eu
build=$1 mode=$2 lcores=${3:-0}
iface="hasp-me$(($$ % 100000))" prefix="hasp-me$$"
"$build/dataplane/hasp-dp-echo" -l "$lcores" --no-huge -m 64 --no-pci --file-prefix "$prefix" \
	--no-telemetry --vdev="net_tap0,iface=$iface" -- --ip 10.199.250.2/24 \
	--mac 02:77:00:00:00:fa --idle "$mode" > /dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "/var/run/dpdk/$prefix"' EXIT
sleep 2
sysctl -qw "net.ipv6.conf.$iface.disable_ipv6=1"
ip addr add 10.199.250.1/24 dev "$iface"
ip link set "$iface" up
"$build/tests/dataplane/dp_itest" udp 10.199.250.2 7 3000
"$build/tests/dataplane/dp_itest" udp 10.199.250.2 7 300 20000
"$build/tests/dataplane/dp_itest" rate 10.199.250.2 7 3 32
sleep 1
hz=$(getconf CLK_TCK)
t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
sleep 5
t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
echo "mode=$mode lcores=$lcores idle_cpu=$(( (t1 - t0) * 10000 / (5 * hz) / 100 )).$(( (t1 - t0) * 10000 / (5 * hz) % 100 ))%"
