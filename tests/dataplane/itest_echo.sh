#!/bin/sh
# Dataplane integration test: hasp-dp-echo on a real virtual port.
#   itest_echo.sh <hasp-dp-echo> <dp_itest> tap|tap2|af_packet
#
# tap:       net_tap; the PMD offloads (in software) IPv4/UDP checksums.
# tap2:      net_tap with two lcores (-l 0-1), so two queues of one tap:
#            worker launch, per-lcore counters summed, ARP shared between
#            lcores, and dp_stop() reaching a sleeping worker.
# af_packet: net_af_packet on one end of a veth pair; no offload, so the
#            dataplane's own software checksums are checked both ways.
#
# As root: starts hasp-dp-echo on a port with a unique name, gives the
# kernel side an address on a private 10.199.N.0/24 used by nothing else,
# then pings it, checks UDP echoes of every size up to 1472 bytes, has the
# node initiate a datagram (ARP resolution of the kernel side), sends a
# corpus of malformed frames through a raw AF_PACKET socket and checks each
# drop counter, and finally checks that the lcore never allocated. Traffic
# goes only to the tap this script created. Everything it made (process,
# tap, DPDK runtime dir, temp files) is removed on exit, even on failure.
# Exits 77 (skip) only when not root.
set -eu
echo_bin=$1 itest=$2 kind=${3:-tap}

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: needs root (creates a net_tap, assigns addresses, raw sockets)"
	exit 77
fi

tag=$$
lcores=0
case $kind in
tap|tap2)
	iface="hasp-it$((tag % 100000))" # the tap; the kernel side too
	kside=$iface
	[ "$kind" = tap2 ] && lcores=0-1 ;;
af_packet)
	iface="hasp-ia$((tag % 100000))" # the DPDK end of the veth
	kside="hasp-ib$((tag % 100000))" ;;
*)
	echo "FAIL: unknown port kind $kind"; exit 1 ;;
esac
prefix="hasp-itest-$tag"
tmp=$(mktemp -d /tmp/hasp-itest.XXXXXX)
stats="$tmp/stats.json"
echo_pid=""

cleanup() {
	status=$?
	if [ -n "$echo_pid" ] && kill -0 "$echo_pid" 2>/dev/null; then
		kill -TERM "$echo_pid" 2>/dev/null || true
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$echo_pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$echo_pid" 2>/dev/null || true
	fi
	if [ $status -ne 0 ] && [ -f "$tmp/echo.err" ]; then
		echo "--- hasp-dp-echo stderr:"; cat "$tmp/echo.err"
		echo "--- hasp-dp-echo stdout:"; cat "$tmp/echo.out" 2>/dev/null || true
	fi
	ip link del "$iface" 2>/dev/null || true # the tap goes with the process; the veth not
	rm -rf "/var/run/dpdk/$prefix" "$tmp"
	exit $status
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A /24 in 10.199.0.0/16 that no interface or route on this host uses.
net=""
for i in $(seq 0 199); do
	n=$(( (tag + i) % 200 + 20 ))
	if ! ip -4 route show | grep -q "^10\.199\.$n\." && ! ip -4 addr show | grep -q "inet 10\.199\.$n\."; then
		net=$n
		break
	fi
done
[ -n "$net" ] || { echo "FAIL: no free 10.199.N.0/24"; exit 1; }
kernel_ip="10.199.$net.1"
node_ip="10.199.$net.2"
node_mac="02:77:00:00:00:$(printf %02x $((net % 256)))"
port=7

echo "itest: kind=$kind iface=$iface subnet=10.199.$net.0/24 node=$node_ip/$node_mac"
if [ "$kind" = af_packet ]; then
	ip link add "$iface" type veth peer name "$kside"
	sysctl -qw "net.ipv6.conf.$iface.disable_ipv6=1" 2>/dev/null || true
	ip link set "$iface" up
	vdev="net_af_packet0,iface=$iface"
	# A kernel socket's frames through a veth keep unfinished UDP checksums
	# unless TX offload is off on the sending end (docs/ENVIRONMENT.md).
	ethtool -K "$kside" tx off >/dev/null 2>&1 || \
		{ echo "FAIL: ethtool -K $kside tx off (is ethtool installed?)"; exit 1; }
else
	vdev="net_tap0,iface=$iface"
fi
"$echo_bin" -l $lcores --no-huge -m 64 --no-pci --file-prefix "$prefix" --no-telemetry \
	--vdev="$vdev" -- --ip "$node_ip/24" --mac "$node_mac" \
	--udp-port $port --idle hybrid --stats-file "$stats" --hello "$kernel_ip:7799" \
	> "$tmp/echo.out" 2> "$tmp/echo.err" &
echo_pid=$!

# The tap exists only after EAL init and port start.
for _ in $(seq 1 100); do
	grep -q "ready" "$tmp/echo.err" 2>/dev/null && break
	kill -0 "$echo_pid" 2>/dev/null || { echo "FAIL: hasp-dp-echo exited early"; exit 1; }
	sleep 0.1
done
grep -q "ready" "$tmp/echo.err" || { echo "FAIL: hasp-dp-echo not ready in 10 s"; exit 1; }

# No IPv6 chatter on the test link; then address and up.
sysctl -qw "net.ipv6.conf.$kside.disable_ipv6=1" 2>/dev/null || true
ip addr add "$kernel_ip/24" dev "$kside"
ip link set "$kside" up

"$itest" ping "$node_ip" 5
"$itest" udp "$node_ip" $port 300
"$itest" hello "$kernel_ip" 7799 "$echo_pid"
"$itest" raw "$kside" "$node_mac" "$node_ip" "$kernel_ip" $port "$echo_pid" "$stats" "$kind"

kill -TERM "$echo_pid"
rc=0
wait "$echo_pid" || rc=$?
echo_pid=""
[ $rc -eq 0 ] || { echo "FAIL: hasp-dp-echo exited with $rc"; exit 1; }
"$itest" final "$stats"
echo "itest: PASS ($kind)"
