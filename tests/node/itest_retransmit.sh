#!/bin/bash
# Retransmissions answered from the leader's reply cache, against a real
# 3-node cluster with client authentication (docs/PROTOCOL.md "Exactly
# once"): tests/node/retransmit_client.py sends byte-identical copies of an
# applied ACQUIRE and SESSION_OPEN and checks that each gets the first
# reply without a Raft entry (the leader's hasp_commit_index stays,
# hasp_client_replies_from_cache_total rises), and that the same seq with
# another body is still proposed and refused; and that two copies of a new
# ACQUIRE sent while both followers are stopped (SIGSTOP) are one entry and
# one reply (hasp_client_retransmits_in_flight_total rises). time_tick_ms
# is long so that no leader TICK commits in between.
#   itest_retransmit.sh <build dir> <source dir>
set -eu
build=$1 src=$2
shift 2
. "$src/tests/node/itest_lib.sh"

line=$("$cluster" up -n 3 --set time_tick_ms=60000 | tail -1)
export "${line?}"
echo "itest: $line"
in_ns python3 "$src/tests/node/retransmit_client.py" "${HASP_CLUSTER}" \
	local "$HASP_CLUSTER_DIR/client.key" "$build/control/haspctl" "$HASP_CLUSTER_DIR"
echo "itest: retransmissions answered from the cache"
