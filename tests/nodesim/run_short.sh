#!/bin/sh
# nodesim_short: a fixed range of seeds of the node simulation (the first
# one twice: the same history, byte for byte), then every seed's history
# through the real-cluster suite's checker (tests/fault/checker.py), which
# must agree that each property holds. A failing run keeps its histories
# and says where.
#
#   run_short.sh <nodesim> <checker.py> <seeds>
set -u
exe=$1
checker=$2
seeds=$3
dir=$(mktemp -d "${TMPDIR:-/tmp}/nodesim.XXXXXX") || exit 1

if ! "$exe" --seeds "$seeds" --twice --history-dir "$dir"; then
	echo "nodesim_short: FAIL (histories kept in $dir)"
	exit 1
fi
checked=0
for f in "$dir"/seed-*.jsonl; do
	if ! out=$(python3 "$checker" "$f" 2>&1); then
		echo "$out"
		echo "nodesim_short: FAIL: checker.py refuses $f (histories kept in $dir)"
		exit 1
	fi
	checked=$((checked + 1))
done
if [ "$checked" -ne "$seeds" ]; then
	echo "nodesim_short: FAIL: $checked histories for $seeds seeds (kept in $dir)"
	exit 1
fi
echo "nodesim_short: checker.py agrees on all $checked histories"
rm -rf "$dir"
