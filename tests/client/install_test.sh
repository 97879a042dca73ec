#!/bin/sh
# libhasp as an application sees it (issue: a library that installs like
# one): `meson install` into a staging directory, then
#   - the shared library has the soname libhasp.so.1 and exports only the
#     public hasp_* API;
#   - the installed headers compile on their own (no internal header);
#   - examples/lock-fence builds with `pkg-config --cflags --libs hasp`
#     alone, against the shared and against the static library, and runs:
#     with no node answering it exits 3 after its deadline ("no answer");
#   - every program has a man page (help2man) whose command list shows one
#     command a line, and hasp and haspctl have
#     bash completion that completes their commands and options.
#   install_test.sh <build dir> <source dir>
set -eu
build=$1 src=$2
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

meson install -C "$build" --destdir "$stage" --no-rebuild --quiet >/dev/null ||
	fail "meson install"
pc=$(find "$stage" -name hasp.pc | head -1)
[ -n "$pc" ] || fail "no hasp.pc installed"
export PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_SYSROOT_DIR=$stage
cflags=$(pkg-config --cflags hasp) || fail "pkg-config --cflags hasp"
libs=$(pkg-config --libs hasp) || fail "pkg-config --libs hasp"
echo "install: pkg-config hasp: $cflags $libs"
modversion=$(pkg-config --modversion hasp) || fail "pkg-config --modversion hasp"
[ "$modversion" = 1.7.0 ] || fail "hasp.pc says version $modversion, not libhasp's 1.7.0"

so=$(find "$stage" -name 'libhasp.so.1' | head -1)
[ -n "$so" ] || fail "no libhasp.so.1"
soname=$(objdump -p "$so" | awk '/SONAME/ {print $2}')
[ "$soname" = libhasp.so.1 ] || fail "soname is '$soname'"
extra=$(nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' |
	grep -v -E '^(hasp_client_|hasp_strerror|hasp_status_name$|hasp_status_error$|hasp_error_status$|hasp_fence_|HASP_1(\.[0-9]+)?$)' || true)
[ -z "$extra" ] || fail "libhasp.so exports internal symbols: $extra"
# The 1.2 additions carry their own version node (client/libhasp.map).
for sym in hasp_client_group_new hasp_client_group_process hasp_client_open_in_group; do
	nm -D --defined-only "$so" | grep -q " $sym@@HASP_1.2$" ||
		fail "$sym is not exported as $sym@@HASP_1.2"
done
nm -D --defined-only "$so" | grep -q " hasp_client_session_keepalive_async@@HASP_1.3$" ||
	fail "hasp_client_session_keepalive_async is not exported as its 1.3 version"
for sym in hasp_client_watch_progress hasp_client_watch_progress_async; do
	nm -D --defined-only "$so" | grep -q " $sym@@HASP_1.4$" ||
		fail "$sym is not exported as $sym@@HASP_1.4"
done
nm -D --defined-only "$so" | grep -q " hasp_client_group_set_window@@HASP_1.5$" ||
	fail "hasp_client_group_set_window is not exported as its 1.5 version"
for sym in hasp_client_group_new_io hasp_client_group_input; do
	nm -D --defined-only "$so" | grep -q " $sym@@HASP_1.6$" ||
		fail "$sym is not exported as $sym@@HASP_1.6"
done
nm -D --defined-only "$so" | grep -q " hasp_client_close_async@@HASP_1.7$" ||
	fail "hasp_client_close_async is not exported as its 1.7 version"
[ -n "$(find "$stage" -name libhasp.a)" ] || fail "no static libhasp.a"

for h in client.h errors.h fence.h types.h; do
	printf '#include <hasp/%s>\nint main(void) { return 0; }\n' "$h" > "$stage/h.c"
	# shellcheck disable=SC2086
	cc -std=c11 -Wall -Wextra -Werror $cflags -c "$stage/h.c" -o "$stage/h.o" ||
		fail "installed <hasp/$h> does not compile on its own"
done

# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror "$src/examples/lock-fence/lock-fence.c" $cflags $libs \
	-o "$stage/lock-fence" || fail "the example does not build with pkg-config"
libdir=$(dirname "$so")
rc=0
# An address where nothing listens: the call must end at its deadline.
LD_LIBRARY_PATH=$libdir HASP_CLUSTER=127.0.0.1:9 "$stage/lock-fence" example/lock 1000 \
	> "$stage/out" 2>&1 || rc=$?
[ $rc -eq 3 ] || { cat "$stage/out"; fail "lock-fence exited $rc, expected 3 (no answer)"; }
LD_LIBRARY_PATH=$libdir ldd "$stage/lock-fence" | grep -q "libhasp.so.1 => $libdir" || fail "not linked to the installed libhasp.so.1"

# The static library, as `pkg-config --static` describes it.
slibs=$(pkg-config --static --libs hasp)
# shellcheck disable=SC2086
cc -std=c11 "$src/examples/lock-fence/lock-fence.c" $cflags -Wl,-Bstatic $slibs -Wl,-Bdynamic \
	-o "$stage/lock-fence-static" 2>"$stage/err" || { cat "$stage/err"; fail "static build"; }
if ldd "$stage/lock-fence-static" | grep -q libhasp; then fail "static build links libhasp.so"; fi
rc=0
HASP_CLUSTER=127.0.0.1:9 "$stage/lock-fence-static" example/lock 1000 >/dev/null 2>&1 || rc=$?
[ $rc -eq 3 ] || fail "static lock-fence exited $rc, expected 3"
echo "install: PASS (shared and static, $(echo "$libs" | wc -w) link words)"

# Man pages: one per installed program, rendered from its --help.
for prog in $(find "$stage" -path '*/bin/*' -type f -exec basename {} \; | sort); do
	page=$(find "$stage" -path "*/man/man1/$prog.1" | head -1)
	[ -n "$page" ] || fail "no man page for $prog"
	grep -q "^\.TH \"*$(echo "$prog" | tr '[:lower:]' '[:upper:]')" "$page" || fail "$page is not $prog's man page"
	grep -q -- "usage" "$page" || fail "$page holds no usage"
done
[ -n "$(find "$stage" -path '*/man/man1/hasp.1')" ] || fail "no man page for hasp"
[ -n "$(find "$stage" -path '*/man/man1/haspctl.1')" ] || fail "no man page for haspctl"
# The command lists, rendered, one command a line (help2man once joined
# hasp's and haspctl's indented lists into one paragraph).
for spec in "hasp:kv delete" "hasp:lease keepalive" "haspctl:members list" "haspctl:log level"; do
	prog=${spec%%:*} cmd=${spec#*:}
	page=$(find "$stage" -path "*/man/man1/$prog.1" | head -1)
	MANWIDTH=80 man -l "$page" 2>/dev/null | col -bx > "$stage/man.txt" ||
		fail "man -l $prog.1 does not render"
	grep -qx " *$cmd" "$stage/man.txt" ||
		{ cat "$stage/man.txt"; fail "$prog.1: \"$cmd\" is not on a line of its own"; }
done

# Bash completion: the installed files complete commands and options.
comp=$(find "$stage" -path '*/bash-completion/completions/hasp' | head -1)
[ -n "$comp" ] || fail "no bash completion for hasp"
ctlcomp=$(dirname "$comp")/haspctl
[ -f "$ctlcomp" ] || fail "no bash completion for haspctl"
complete_words() { # <file> <function> <words...>: what completes the last word
	file=$1 fn=$2
	shift 2
	bash -c '. "$1"; fn=$2; shift 2; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); "$fn"; echo "${COMPREPLY[*]}"' \
		_ "$file" "$fn" "$@"
}
[ "$(complete_words "$comp" _hasp hasp kv "")" = "put get delete cas range" ] ||
	fail "hasp kv <TAB>: '$(complete_words "$comp" _hasp hasp kv "")'"
[ "$(complete_words "$comp" _hasp hasp run job --c)" = "--conflict-exit-code" ] ||
	fail "hasp run job --c<TAB>: '$(complete_words "$comp" _hasp hasp run job --c)'"
[ "$(complete_words "$comp" _hasp hasp --cluster x:1 ac)" = "acquire" ] || fail "hasp --cluster x:1 ac<TAB>"
[ "$(complete_words "$ctlcomp" _haspctl haspctl members "")" = "list add promote remove" ] ||
	fail "haspctl members <TAB>: '$(complete_words "$ctlcomp" _haspctl haspctl members "")'"
[ "$(complete_words "$ctlcomp" _haspctl haspctl --json locks release "")" = "--force --help" ] ||
	fail "haspctl locks release <TAB>"
echo "install: man pages and bash completion PASS"
