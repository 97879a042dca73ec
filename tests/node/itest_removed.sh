#!/bin/bash
# A node removed while it is down (issue 11 item 6), on a real 3-node
# cluster, as root: it never received the removal, so when it starts again
# it campaigns with its old configuration; the members ignore its vote
# requests (unit test: test_removed_server_is_ignored_and_knows_it_once_told;
# leader and term are not compared here, a loaded machine may elect anew)
# and tell it it was removed, and it
# then says so: status role `removed`, health unhealthy, the log line, and
# it stops campaigning.
#   itest_removed.sh <build dir> <source dir>
set -eu
build=$1 src=$2
shift 2
. "$src/tests/node/itest_lib.sh"

ctl="$build/control/haspctl"

line=$("$cluster" up -n 3 | tail -1)
export "${line?}"
echo "itest: $line"
"$hasp" kv put itest/removed/before v >/dev/null
l=$("$cluster" leader)
r=$((l % 3 + 1))
echo "itest: leader=$l, removing node $r while it is down"

"$cluster" stop "$r"
remove_member "$l" "$r"
"$hasp" kv put itest/removed/after v >/dev/null

# Before the fix it campaigned forever at ever higher terms: role
# candidate (or follower between timeouts), never `removed`.
"$cluster" start "$r"
wait_role "$r" removed
[ "$(stats "$r" raft_removal_notices)" -ge 1 ] || fail "node $r counted no removal notice"
grep -q "removed from the configuration node=$r .*told by a member" "$HASP_CLUSTER_DIR/n$r/log" ||
	fail "no log line on node $r"
rc=0; "$ctl" --socket "$(node_sock "$r")" health >/dev/null || rc=$?
[ $rc -ne 0 ] || fail "a removed node's health says healthy"

# It stops campaigning: its election count stays put over many timeouts
# (counted, not timed: the check holds however slow the machine is).
e1=$(stats "$r" raft_elections)
"$hasp" kv put itest/removed/later v >/dev/null
sleep 3
e2=$(stats "$r" raft_elections)
[ "$e1" = "$e2" ] || fail "node $r still campaigns ($e1 -> $e2 elections)"
echo "itest: PASS (a node removed while down learns it and says so)"
