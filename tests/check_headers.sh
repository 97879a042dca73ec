#!/bin/sh
# Every header compiles on its own (docs/STYLE.md §3): each is included first and
# alone in a translation unit.
#   check_headers.sh <source-root> <cc command...>
# (the compiler may be a wrapper plus the compiler: "ccache gcc")
set -u
root=$1
shift
extra=""
if pkg-config --exists libdpdk 2>/dev/null; then
	extra="$(pkg-config --cflags libdpdk) -DALLOW_EXPERIMENTAL_API"
fi
failed=0 count=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for h in $(cd "$root" && find include common locks raft storage client dataplane control node tools -name '*.h' 2>/dev/null | sort); do
	count=$((count + 1))
	printf '#include "%s"\n' "$h" > "$tmp/one.c"
	# shellcheck disable=SC2086
	if ! "$@" -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -fsyntax-only \
		-I"$root" -I"$root/include" $extra "$tmp/one.c" 2> "$tmp/err"; then
		echo "header does not compile on its own: $h"
		cat "$tmp/err"
		failed=$((failed + 1))
	fi
done
echo "headers: $count checked, $failed failed"
[ $count -gt 0 ] && [ $failed -eq 0 ]
