#!/bin/sh
# Runs one fuzz target over its checked-in corpus.
#   fuzz_run.sh <target> <corpus-dir> <seconds>
# A libFuzzer build explores for <seconds> into a scratch corpus seeded from
# the checked-in one (new inputs never land in the source tree); a replay
# build (no libFuzzer) replays every corpus file once.
# The target runs with a TMPDIR of its own, which must be empty when it
# ends: a target that leaves its temporary files behind fails.
set -eu
target=$1 corpus=$2 seconds=$3
tmp=$(mktemp -d)
scratch=$(mktemp -d)
trap 'rm -rf "$tmp" "$scratch"' EXIT
exec_rc=0
if "$target" -help=1 2>&1 | grep -q 'max_total_time'; then
	TMPDIR=$tmp "$target" -max_total_time="$seconds" -seed=1 -print_final_stats=1 \
		-artifact_prefix="$scratch/" "$scratch" "$corpus" || exec_rc=$?
	for crash in "$scratch"/crash-* "$scratch"/leak-* "$scratch"/timeout-*; do
		[ -e "$crash" ] || continue
		echo "fuzz: $target failed on $crash; bytes:"; od -A x -t x1z "$crash" | head -40
	done
else
	TMPDIR=$tmp "$target" "$corpus" || exec_rc=$?
fi
if [ -n "$(ls -A "$tmp")" ]; then
	echo "fuzz: $target left temporary files behind:"; ls -la "$tmp"
	exit 1
fi
# libFuzzer exits 77 on a crash (its -error_exitcode), which meson would
# count as a skip: any failure is exit 1 here.
[ $exec_rc -eq 0 ] || exit 1
exit 0
