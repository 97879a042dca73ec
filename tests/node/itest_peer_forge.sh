#!/bin/bash
# Forged raft datagrams against a running 3-node cluster (issue 15, attack
# 7; docs/SECURITY.md). From the host, a raw socket sends raft messages
# whose source is a member's address and whose term is the current term
# + 1, without the cluster key: to the leader as if from a follower
# (higher-term reply, forced vote), and to a follower as if from the leader
# (heartbeat with a huge commit). The cluster must keep its leader and
# term, keep serving, apply nothing of it, and count the drops
# (peer_auth_bad).
# Then an attacker that holds the third member's key pair (docs/SECURITY.md
# 3.5: per-node keys) forges the same messages to the leader as the
# follower: sealed under the third member's own pair key with the leader,
# from the follower's address (dropped at the MAC, peer_auth_bad) and from
# the third member's own address (valid MAC, but it may not speak as
# another member: peer_dropped_node).
#   itest_peer_forge.sh <build dir> <source dir> [--set KEY=VALUE]
# (`--set peer_auth=off` shows the attack working: the test then fails.)
set -eu
build=$1 src=$2
shift 2
. "$src/tests/node/itest_lib.sh"

line=$("$cluster" up -n 3 "$@" | tail -1)
export "${line?}"
echo "itest: $line"
"$hasp" kv put itest/forge before >/dev/null
l=$("$cluster" leader)
f=$((l % 3 + 1))
term=$(stats "$l" term)
elections=0
for i in 1 2 3; do elections=$((elections + $(stats "$i" raft_elections))); done
bad_l=$(stats "$l" peer_auth_bad)
bad_f=$(stats "$f" peer_auth_bad)
echo "itest: leader=$l follower=$f term=$term"

# The forged term is far ahead: a forgery that took effect moves a node's
# term there at once, while elections that a loaded machine may run on
# its own (slow heartbeats) only add one or two. So the check below does
# not depend on timing.
rounds=30
forged=$((term + 1000))
in_ns python3 "$src/tests/node/peer_forge.py" "$HASP_SUBNET.1$f" "$HASP_SUBNET.1$l" 7777 "$f" "$l" $forged $rounds
in_ns python3 "$src/tests/node/peer_forge.py" "$HASP_SUBNET.1$l" "$HASP_SUBNET.1$f" 7777 "$l" "$f" $forged $rounds

# The drops are counted (poll with a bound: the datagrams are in flight).
want_l=$((bad_l + 3 * rounds)) want_f=$((bad_f + 3 * rounds))
deadline=$((SECONDS + 20))
while [ $SECONDS -lt $deadline ]; do
	[ "$(stats "$l" peer_auth_bad)" -ge $want_l ] && [ "$(stats "$f" peer_auth_bad)" -ge $want_f ] && break
	sleep 0.1
done
got_l=$(stats "$l" peer_auth_bad) got_f=$(stats "$f" peer_auth_bad)
echo "itest: peer_auth_bad leader $bad_l -> $got_l, follower $bad_f -> $got_f"
fails=0
[ "$got_l" -ge $want_l ] || { echo "FAIL: leader counted $((got_l - bad_l)) of $((3 * rounds)) forged datagrams"; fails=$((fails + 1)); }
[ "$got_f" -ge $want_f ] || { echo "FAIL: follower counted $((got_f - bad_f)) of $((3 * rounds)) forged datagrams"; fails=$((fails + 1)); }

# A member's key pair does not make it another member.
if [ -f "$HASP_CLUSTER_DIR/n1.key" ]; then
	t=$((6 - l - f))
	bad_l=$(stats "$l" peer_auth_bad)
	node_l=$(stats "$l" peer_dropped_node)
	forge_sealed "$t" "$l" "$f" "$f" $forged $rounds
	forge_sealed "$t" "$l" "$t" "$f" $forged $rounds
	got_bad=$(( $(wait_counter "$l" peer_auth_bad $((bad_l + 3 * rounds))) - bad_l ))
	got_node=$(( $(wait_counter "$l" peer_dropped_node $((node_l + 3 * rounds))) - node_l ))
	echo "itest: node $t's key as node $f: leader peer_auth_bad +$got_bad, peer_dropped_node +$got_node"
	[ $got_bad -ge $((3 * rounds)) ] ||
		{ echo "FAIL: leader counted $got_bad of $((3 * rounds)) sealed by node $t from node $f's address"; fails=$((fails + 1)); }
	[ $got_node -ge $((3 * rounds)) ] ||
		{ echo "FAIL: leader counted $got_node of $((3 * rounds)) from node $t naming node $f"; fails=$((fails + 1)); }
fi

# Still serving, and no node took the forged term.
"$hasp" kv put itest/forge after >/dev/null || { echo "FAIL: no service after the forgeries"; fails=$((fails + 1)); }
[ "$("$hasp" kv get itest/forge)" = after ] || { echo "FAIL: kv read"; fails=$((fails + 1)); }
after=0
for i in 1 2 3; do
	t=$(stats "$i" term)
	[ "$t" -lt "$forged" ] || { echo "FAIL: node $i term $term -> $t (forged $forged)"; fails=$((fails + 1)); }
	after=$((after + $(stats "$i" raft_elections)))
done
echo "itest: terms stayed below the forged $forged; elections $elections -> $after (load may cause some)"
[ $fails -eq 0 ] && echo "itest: PASS (forged raft datagrams)" || echo "itest: $fails FAILED"
[ $fails -eq 0 ]
