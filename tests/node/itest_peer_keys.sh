#!/bin/bash
# Per-node keys handed out and revoked by membership, on real haspd
# processes (issue 15, Peers; docs/SECURITY.md 3.5), as root:
#  1. `scripts/cluster join 4`: a new node with a key pair of its own is
#     added by `haspctl members add ... <public key>` and replicates.
#  2. `haspctl members remove` of a follower: once the removal commits,
#     the others revoke its pair keys (peer_keys_revoked); the removed
#     process, started again with its own keys, gets its datagrams dropped
#     and counted (peer_auth_bad) and only learns it was removed; a forgery
#     sealed with its key file, from its own address or another member's,
#     changes nothing. The cluster keeps serving.
#   itest_peer_keys.sh <build dir> <source dir>
set -eu
build=$1 src=$2
. "$src/tests/node/itest_lib.sh"

# 1. A new member, its own keys, through members add.
export "$("$cluster" up -n 3 | tail -1)"
"$hasp" kv put itest/keys/before v >/dev/null
"$cluster" join 4
grep -q "^member = 4,.*,[0-9a-f]\{64\}$" "$HASP_CLUSTER_DIR/n1.conf" &&
	fail "node 1's config lists node 4: the key must come from members add"
"$hasp" kv put itest/keys/joined v >/dev/null
l=$("$cluster" leader)
want=$(stats "$l" applied)
caught=0
for _ in $(seq 1 150); do
	[ "$(stats 4 applied)" -ge "$want" ] && { caught=1; break; }
	sleep 0.2
done
[ $caught -eq 1 ] || fail "node 4 applied $(stats 4 applied), the leader $want"
[ "$(stats 4 peer_auth_bad)" -eq 0 ] || fail "node 4 dropped $(stats 4 peer_auth_bad) datagrams of its peers"
echo "itest: node 4 joined with its own key pair and applied up to $want"
# A voter once caught up (ESTATE until then: retried, bounded).
promoted=0
for _ in $(seq 1 60); do
	l=$("$cluster" leader)
	out=$("$build/control/haspctl" --socket "$(node_sock "$l")" members promote 4 2>&1) && { promoted=1; break; }
	sleep 0.5
done
[ $promoted -eq 1 ] || fail "members promote 4: $out"
echo "itest: node 4 promoted to voter"

# 2. Remove a follower (not 4): its keys are revoked on the rest. It is
# stopped first, so that it cannot have seen its removal: started again
# it campaigns with its own keys from its own address (as a removed
# machine could at any time), and does so whatever the timing.
l=$("$cluster" leader)
r=$((l % 3 + 1))
echo "itest: leader=$l, removing node $r"
"$cluster" stop "$r"
declare -A bad
remove_member "$l" "$r"
term=$(stats "$l" term)
revoked=0
for _ in $(seq 1 150); do
	revoked=1
	for i in 1 2 3 4; do
		[ "$i" = "$r" ] || [ "$(stats "$i" peer_keys_revoked)" -ge 1 ] || revoked=0
	done
	[ $revoked -eq 1 ] && break
	sleep 0.2
done
[ $revoked -eq 1 ] || fail "not every member revoked node $r's keys"
for i in 1 2 3 4; do [ "$i" = "$r" ] || bad[$i]=$(stats "$i" peer_auth_bad); done
"$hasp" kv put itest/keys/removed v >/dev/null

# The removed process, with its own keys: every datagram it sends is
# dropped and counted; only the news of its removal reaches it.
"$cluster" start "$r"
wait_role "$r" removed
rose=0
for i in "${!bad[@]}"; do
	[ "$(stats "$i" peer_auth_bad)" -gt "${bad[$i]}" ] && rose=$((rose + 1))
done
[ $rose -ge 1 ] || fail "no member counted node $r's datagrams as bad"
echo "itest: node $r (removed, its own keys) dropped by $rose members, and it knows it was removed"

# A forgery with node r's key file: from its own address and from a
# member's, to a follower, at a term far ahead (a heartbeat with a huge
# commit, a higher-term reply, a forced vote).
f=""
for i in "${!bad[@]}"; do [ "$i" = "$l" ] || { f=$i; break; }; done
forged=$((term + 1000)) rounds=20
before=$(stats "$f" peer_auth_bad)
forge_sealed "$r" "$f" "$r" "$r" $forged $rounds
forge_sealed "$r" "$f" "$l" "$l" $forged $rounds
want=$((before + 6 * rounds))
got=$(wait_counter "$f" peer_auth_bad $want)
echo "itest: node $f peer_auth_bad $before -> $got (forged with node $r's key: $((6 * rounds)))"
[ "$got" -ge $want ] || fail "node $f counted $((got - before)) of $((6 * rounds)) forged datagrams"

"$hasp" kv put itest/keys/after v >/dev/null || fail "no service after the removal"
[ "$("$hasp" kv get itest/keys/after)" = v ] || fail "kv read"
for i in "${!bad[@]}"; do
	t=$(stats "$i" term)
	[ "$t" -lt "$forged" ] || fail "node $i term $t reached the forged $forged"
done
echo "itest: PASS (per-node keys: added by members add, revoked by members remove)"
