#!/bin/bash
# The hostile-client suite against a real 3-node cluster with client
# authentication (security issue 15, attacks 1-6 and 8-10; 11: a
# replay below a session's sequence floor; 12: a replayed request from
# another address, which must not move the session's events;
# docs/SECURITY.md section 5): tests/node/hostile_client.py, a client
# written from docs/PROTOCOL.md, tries each attack as a second identity
# and checks that it is refused and changes nothing.
#   itest_hostile.sh <build dir> <source dir>
set -eu
build=$1 src=$2
shift 2
. "$src/tests/node/itest_lib.sh"

line=$("$cluster" up -n 3 | tail -1)
export "${line?}"
echo "itest: $line"
# Two more identities: an intruder allowed everything with a quota of 4
# sessions, and one that may only acquire under jobs/. Nodes read the
# identities file at start: restart them on it.
keygen=$build/tools/hasp-keygen
"$keygen" --identity intruder --identities "$HASP_CLUSTER_DIR/identities" --allow all: --sessions 4 \
	"$HASP_CLUSTER_DIR/intruder.key"
"$keygen" --identity narrow --identities "$HASP_CLUSTER_DIR/identities" --allow acquire:jobs/ \
	"$HASP_CLUSTER_DIR/narrow.key"
for i in 1 2 3; do "$cluster" stop "$i" >/dev/null; done
for i in 1 2 3; do "$cluster" start "$i" >/dev/null; done
deadline=$((SECONDS + 60))
until "$cluster" leader >/dev/null 2>&1; do
	[ $SECONDS -lt $deadline ] || { echo "itest: no leader after the restart" >&2; exit 1; }
	sleep 0.5
done
in_ns python3 "$src/tests/node/hostile_client.py" "${HASP_CLUSTER}" \
	local "$HASP_CLUSTER_DIR/client.key" intruder "$HASP_CLUSTER_DIR/intruder.key" \
	narrow "$HASP_CLUSTER_DIR/narrow.key"
echo "itest: every attack was refused"
