#!/usr/bin/env bash
# itest_lib.sh's tag claim (docs/TESTING.md): two runs that start from the
# same candidate (forced by HASP_ITEST_TAG; subshells of one shell also
# share $$) get different names and subnets while both live, each removes
# its namespace on exit, and a finished run's tag is free again.
#   itest_tags.sh <build dir> <source dir>
set -euo pipefail
build=$1
src=$2
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: needs root (creates network namespaces)"
	exit 77
fi
export HASP_ITEST_TAG=42
sync=$(mktemp -d /tmp/hasp-itest-tags.XXXXXX)
runs=()
finish() {
	for p in "${runs[@]+"${runs[@]}"}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$sync"
}
trap finish EXIT
fail() { echo "FAIL: $*"; exit 1; }

# run <name>: a test run in a subshell: the lib claims its tag, the run
# creates its namespace (as `scripts/cluster up` would), says which, and
# holds both until $sync/go exists (bounded: 30 s); the lib's exit trap
# then tears down and checks for leftovers.
run() {
	(
		. "$src/tests/node/itest_lib.sh"
		ip netns add "hasp-$HASP_NET_NAME"
		echo "$HASP_NET_NAME $HASP_SUBNET" > "$sync/$1.tmp"
		mv "$sync/$1.tmp" "$sync/$1"
		for _ in $(seq 1 300); do [ -e "$sync/go" ] && break; sleep 0.1; done
	) > "$sync/$1.log" 2>&1
}
# started <name>: until the run has said its names (bounded: 30 s).
started() {
	for _ in $(seq 1 300); do [ -s "$sync/$1" ] && return 0; sleep 0.1; done
	cat "$sync/$1.log"
	fail "run $1 did not start"
}

run a & runs+=($!)
started a
run b & runs+=($!)
started b
read -r name_a subnet_a < "$sync/a"
read -r name_b subnet_b < "$sync/b"
echo "run a: $name_a $subnet_a; run b: $name_b $subnet_b"
[ "$name_a" = hct42 ] || fail "run a got $name_a, not the forced first candidate hct42"
[ "$name_a" != "$name_b" ] || fail "both runs got $name_a"
[ "$subnet_a" != "$subnet_b" ] || fail "both runs got subnet $subnet_a"

touch "$sync/go"
for p in "${runs[@]}"; do wait "$p" || { cat "$sync"/*.log; fail "a run failed"; }; done
runs=()
for n in "$name_a" "$name_b"; do
	! ip netns list | awk '{print $1}' | grep -qx "hasp-$n" || fail "namespace hasp-$n left behind"
done

# Both have ended: their locks went with them, so the first candidate is
# free again.
rm -f "$sync/go" "$sync/c"
touch "$sync/go"
run c
read -r name_c _ < "$sync/c"
[ "$name_c" = hct42 ] || fail "after both runs ended, a new run got $name_c, not hct42"
! ip netns list | awk '{print $1}' | grep -qx "hasp-$name_c" || fail "namespace hasp-$name_c left behind"
echo "PASS"
