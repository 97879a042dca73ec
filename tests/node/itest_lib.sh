# Shared by the node integration tests: a private cluster (own network
# namespace, bridge, taps, DPDK prefixes and directory) through
# scripts/cluster, torn down on exit whatever happens, and checked to have
# left nothing behind. Source it after setting `build` and `src`. Clients
# run inside the cluster's namespace: `in_ns <command...>`, and "$hasp" is
# the CLI there; haspctl on a node's Unix socket works from anywhere.
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: needs root (creates a network namespace, a bridge and taps)"
	exit 77
fi
tag=$(($$ % 90 + 10))
export HASP_NET_NAME="hct$tag"
export HASP_BUILD=$build
export HASP_CLUSTER_DIR=$(mktemp -d /tmp/hasp-itest-node.XXXXXX)
# Clients authenticate as the cluster's "local" identity (scripts/cluster).
export HASP_ID=local HASP_KEY_FILE=$HASP_CLUSTER_DIR/client.key
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

# leftovers: what of this test's own (by its name) is still on the machine
# after `scripts/cluster down`: interfaces in the root namespace, its
# network namespace, nft tables named after it, DPDK runtime directories.
leftovers() {
	local n=$HASP_NET_NAME
	ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^${n}[^0-9]" | sed 's/^/interface /' || true
	ip netns list | awk '{print $1}' | grep -x "hasp-$n" | sed 's/^/netns /' || true
	if command -v nft >/dev/null; then
		nft list tables | grep -E " ${n}([^0-9]|$)" | sed 's/^/nft /' || true
	fi
	ls -d /var/run/dpdk/"$n"-* 2>/dev/null | sed 's/^/dpdk runtime dir /' || true
}

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
	local left
	left=$(leftovers)
	if [ -n "$left" ]; then
		echo "FAIL: left behind after scripts/cluster down:"
		echo "$left"
		status=1
	fi
	exit $status
}
trap itest_cleanup EXIT
trap 'exit 1' INT TERM

# stats <n> <key>: a counter of node n (from its SIGUSR1 stats file).
fail() { echo "FAIL: $*"; exit 1; }
# node_sock <n>: node n's Unix admin socket (a file: works from anywhere).
node_sock() { echo "$HASP_CLUSTER_DIR/n$1/data/admin.sock"; }
# node_field <n> <key>: a value of `haspctl --json status` of node n.
node_field() {
	"$build/control/haspctl" --json --socket "$(node_sock "$1")" status |
		python3 -c "import json,sys; print(json.load(sys.stdin)['result'][sys.argv[1]])" "$2"
}
stats() {
	local f="$HASP_CLUSTER_DIR/n$1/stats.json"
	rm -f "$f"
	kill -USR1 "$(cat "$HASP_CLUSTER_DIR/n$1/pid")"
	for _ in $(seq 1 50); do [ -s "$f" ] && break; sleep 0.05; done
	python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$f" "$2"
}
