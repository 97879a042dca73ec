# Shared by the node integration tests: a private cluster (own network
# namespace, bridge, taps, DPDK prefixes and directory) through
# scripts/cluster, torn down on exit whatever happens. Source it after
# setting `build` and `src`. Clients run inside the cluster's namespace:
# `in_ns <command...>`, and "$hasp" is the CLI there; haspctl on a node's
# Unix socket works from anywhere.
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: needs root (creates a network namespace, a bridge and taps)"
	exit 77
fi
tag=$(($$ % 90 + 10))
export HASP_NET_NAME="hct$tag"
export HASP_BUILD=$build
export HASP_CLUSTER_DIR=$(mktemp -d /tmp/hasp-itest-node.XXXXXX)
# The cluster has a namespace of its own, so the subnet cannot meet
# another's; the tag only keeps names apart.
subnet="10.77.$((tag + 100))"
export HASP_SUBNET=$subnet
cluster="$src/scripts/cluster"
helpers=()

# in_ns <command...>: run it inside the cluster's network namespace.
in_ns() { "$cluster" exec -- "$@"; }
hasp_in_ns() { in_ns "$build/tools/hasp" "$@"; }
hasp=hasp_in_ns

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
