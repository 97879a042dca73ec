# Shared by the node integration tests: a private cluster (own bridge,
# taps, DPDK prefixes, subnet and directory) through scripts/cluster, torn
# down on exit whatever happens. Source it after setting `build` and `src`.
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: needs root (creates a bridge and taps)"
	exit 77
fi
tag=$(($$ % 90 + 10))
export HASP_NET_NAME="hct$tag"
export HASP_BUILD=$build
export HASP_CLUSTER_DIR=$(mktemp -d /tmp/hasp-itest-node.XXXXXX)
# Clients authenticate as the cluster's "local" identity (scripts/cluster).
export HASP_ID=local HASP_KEY_FILE=$HASP_CLUSTER_DIR/client.key
subnet=""
for i in $(seq 0 99); do
	n=$(( (tag + i) % 100 + 100 ))
	if ! ip -4 addr show | grep -q "inet 10\.77\.$n\."; then subnet="10.77.$n"; break; fi
done
[ -n "$subnet" ] || { echo "FAIL: no free 10.77.N.0/24"; exit 1; }
export HASP_SUBNET=$subnet
cluster="$src/scripts/cluster"
hasp="$build/tools/hasp"
helpers=()

itest_cleanup() {
	status=$?
	for p in "${helpers[@]+"${helpers[@]}"}"; do kill -KILL "$p" 2>/dev/null || true; done
	if [ $status -ne 0 ]; then
		for log in "$HASP_CLUSTER_DIR"/n*/log; do
			[ -f "$log" ] && { echo "--- $log (tail)"; tail -n 15 "$log"; }
		done
	fi
	"$cluster" down >/dev/null 2>&1 || true
	rm -rf "$HASP_CLUSTER_DIR"
	exit $status
}
trap itest_cleanup EXIT
trap 'exit 1' INT TERM

# stats <n> <key>: a counter of node n (from its SIGUSR1 stats file).
stats() {
	local f="$HASP_CLUSTER_DIR/n$1/stats.json"
	rm -f "$f"
	kill -USR1 "$(cat "$HASP_CLUSTER_DIR/n$1/pid")"
	for _ in $(seq 1 50); do [ -s "$f" ] && break; sleep 0.05; done
	python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$f" "$2"
}
