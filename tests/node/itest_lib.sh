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
# itest_claim_tag [first]: claims a tag 10..99 for this run's names
# (hct<tag>, its namespace hasp-hct<tag>, DPDK prefixes hct<tag>-n<N>,
# subnet 10.77.<tag+100>) and sets itest_tag. Candidates are tried from
# `first` on (default $$ % 90 + 10; HASP_ITEST_TAG forces it, for
# tests/node/itest_tags.sh); a tag is ours once flock(1) takes its lock
# file without waiting, which is atomic between concurrent runs (a PID
# modulo 90 alone is not: two runs can meet, and subshells share $$). The
# lock lives on an open descriptor of this shell (and of the children that
# inherit it), so it goes away with them however the run ends: no stale
# claim after a kill -9. The lock files stay (empty, in /run/lock):
# unlinking one while another run may be opening it would let two runs
# lock two different files of one name. A tag whose namespace or DPDK
# runtime directory exists is skipped too: a run that does not take the
# lock (an older checkout) or a crashed one may still hold those.
itest_lock_dir=/run/lock
itest_claim_tag() {
	local first=${1:-$(($$ % 90 + 10))} i t fd
	for i in $(seq 0 89); do
		t=$(((first - 10 + i) % 90 + 10))
		exec {fd}>"$itest_lock_dir/hasp-itest-hct$t.lock" || continue
		if flock -n "$fd" &&
			! ip netns list | awk '{print $1}' | grep -qx "hasp-hct$t" &&
			! ls -d /var/run/dpdk/"hct$t"-* >/dev/null 2>&1; then
			itest_tag=$t
			return 0
		fi
		exec {fd}>&-
	done
	echo "FAIL: no free itest tag in 10..99 (every lock held or namespace present)"
	return 1
}
itest_claim_tag "${HASP_ITEST_TAG:-}" || exit 1
tag=$itest_tag
export HASP_NET_NAME="hct$tag"
export HASP_BUILD=$build
export HASP_CLUSTER_DIR=$(mktemp -d /tmp/hasp-itest-node.XXXXXX)
# Clients authenticate as the cluster's "local" identity (scripts/cluster).
export HASP_ID=local HASP_KEY_FILE=$HASP_CLUSTER_DIR/client.key
# The cluster has a namespace of its own, so the subnet cannot meet
# another's; derived from the claimed tag all the same, so that a
# --root-ns run (itest_single.sh) cannot meet another either.
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

# remove_member <leader> <id>: `members remove <id>` on the leader until its
# configuration no longer lists the node (bounded: 50 tries; a leader
# change on a loaded machine moves the next try to the new leader).
remove_member() {
	local _ l=$1
	for _ in $(seq 1 50); do
		"$build/control/haspctl" --socket "$(node_sock "$l")" members remove "$2" >/dev/null 2>&1 || true
		"$build/control/haspctl" --json --socket "$(node_sock "$l")" status |
			python3 -c "import json,sys; ids=[m['id'] for m in json.load(sys.stdin)['result']['members']]; sys.exit(int(sys.argv[1]) in ids)" "$2" &&
			return 0
		sleep 0.2
		l=$("$cluster" leader)
	done
	fail "members remove $2 did not take"
}

# wait_role <n> <role>: until node n's status says role (bounded: 30 s).
wait_role() {
	local _
	for _ in $(seq 1 150); do
		[ "$(node_field "$1" role)" = "$2" ] && return 0
		sleep 0.2
	done
	fail "node $1 says '$(node_field "$1" role)', not $2"
}

# forge_sealed <owner> <to> <src> <from> <term> <rounds>: peer_forge.py's
# three forged messages x rounds, from node src's address to node to,
# naming node `from` as the sender, sealed with node owner's key file
# (tests/node/peer_seal: what a holder of that file can send).
forge_sealed() {
	local pub
	pub=$("$build/tools/hasp-keygen" --public "$HASP_CLUSTER_DIR/n$2.key")
	in_ns python3 "$src/tests/node/peer_forge.py" "$HASP_SUBNET.1$3" "$HASP_SUBNET.1$2" 7777 "$4" "$2" "$5" "$6" \
		"$build/tests/node/peer_seal" "$HASP_CLUSTER_DIR/n$1.key" "$1" "$pub"
}

# wait_counter <n> <key> <min>: until node n's counter reaches min (the
# datagrams are in flight; bounded: 20 s), then prints the counter.
wait_counter() {
	local deadline=$((SECONDS + 20))
	while [ $SECONDS -lt $deadline ] && [ "$(stats "$1" "$2")" -lt "$3" ]; do sleep 0.1; done
	stats "$1" "$2"
}
