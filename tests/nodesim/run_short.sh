#!/bin/sh
# nodesim_short: a fixed range of seeds of the node simulation (the first
# one twice: the same history, byte for byte), then every seed's history
# through the real-cluster suite's checker (tests/fault/checker.py, in one
# Python process: check_histories.py), which must agree that each property
# holds. A failing run keeps its histories
# and says where.
#
#   run_short.sh <nodesim> <checker.py> <seeds> [nodesim options...]
set -u
exe=$1
checker=$2
seeds=$3
shift 3
dir=$(mktemp -d "${TMPDIR:-/tmp}/nodesim.XXXXXX") || exit 1

if ! "$exe" --seeds "$seeds" --twice --history-dir "$dir" "$@"; then
	echo "nodesim_short: FAIL (histories kept in $dir)"
	exit 1
fi
checked=$(ls "$dir" | grep -c '^seed-.*\.jsonl$')
if [ "$checked" -ne "$seeds" ]; then
	echo "nodesim_short: FAIL: $checked histories for $seeds seeds (kept in $dir)"
	exit 1
fi
if ! python3 "$(dirname "$0")/check_histories.py" "$checker" "$dir"/seed-*.jsonl; then
	echo "nodesim_short: FAIL: checker.py finds a violation (histories kept in $dir)"
	exit 1
fi
echo "nodesim_short: checker.py agrees on all $checked histories"
rm -rf "$dir"
