#!/bin/sh
# The folders are layers (docs/ARCHITECTURE.md "Layers"); this check keeps
# them. A file may include only the headers of its own folder and of the
# folders below it, and a folder's meson.build may link only the libraries
# of those folders:
#
#   folder      may include                     may link (besides system libraries)
#   common/     common, hasp                    -
#   raft/       common, hasp                    common
#   locks/      common, hasp                    common
#   storage/    common, hasp                    common, liburing
#   dataplane/  common, hasp (and DPDK)         common, DPDK
#   control/    common, hasp                    common (not storage/, not node/)
#   client/     common, hasp                    common
#   tools/      anything but node/              anything but the node
#   node/       everything (the composition)
#
# `hasp` is include/hasp/, the public headers (wire format, errors): the
# floor every layer stands on. System and DPDK headers (<...>) are not
# project folders and are not checked here (tests/check_seam.sh keeps I/O,
# clocks and malloc out of raft/ and locks/).
#
# Inside node/, dispatch.c and notify.c reach the node loop only through
# struct node_loop (node/node.h): they must not call node_step(),
# node_update() or node_send(), and notify.c must not include dispatch.h,
# so that node.c, dispatch.c and notify.c form no circle.
#
#   check_layers.sh <source-root>
set -u
root=$1
status=0

# Project folders that an include can name.
project='common|hasp|raft|locks|storage|dataplane|control|client|node|tools|perf|tests'

# check_includes <folder> <allowed folders, |-separated>
check_includes() {
	dir=$1
	allowed=$2
	[ -d "$root/$dir" ] || return 0
	hits=$(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($project)/" \
		"$root/$dir" --include='*.c' --include='*.h' |
		grep -vE "#[[:space:]]*include[[:space:]]*[<\"]($allowed)/" || true)
	up=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"\.\./' \
		"$root/$dir" --include='*.c' --include='*.h' || true)
	if [ -n "$hits$up" ]; then
		echo "layer violation: $dir/ may include only $allowed (docs/ARCHITECTURE.md):"
		[ -n "$hits" ] && echo "$hits"
		[ -n "$up" ] && echo "$up"
		status=1
	fi
}

# check_links <folder> <forbidden meson dependency names, |-separated>
check_links() {
	dir=$1
	forbidden=$2
	[ -f "$root/$dir/meson.build" ] || return 0
	hits=$(grep -nE "dependencies:.*\b($forbidden)\b" "$root/$dir/meson.build" || true)
	if [ -n "$hits" ]; then
		echo "layer violation: $dir/meson.build links a layer above it:"
		echo "$hits"
		status=1
	fi
}

check_includes common 'common|hasp'
check_includes raft 'common|hasp|raft'
check_includes locks 'common|hasp|locks'
check_includes storage 'common|hasp|storage'
check_includes dataplane 'common|hasp|dataplane'
check_includes control 'common|hasp|control'
check_includes client 'common|hasp|client'
check_includes tools 'common|hasp|raft|locks|storage|dataplane|control|client|tools'

above_cores='raft_dep|locks_dep|storage_dep|liburing_dep|dpdk_dep|dataplane_[a-z_]*dep|control_dep|haspctl_dep|client_dep|node_[a-z_]*dep|auth_dep|sodium_dep'
check_links raft "$above_cores"
check_links locks "$above_cores"
check_links storage 'raft_dep|locks_dep|dpdk_dep|dataplane_[a-z_]*dep|control_dep|haspctl_dep|client_dep|node_[a-z_]*dep'
check_links dataplane 'raft_dep|locks_dep|storage_dep|liburing_dep|control_dep|haspctl_dep|client_dep|node_[a-z_]*dep'
check_links control 'raft_dep|locks_dep|storage_dep|liburing_dep|dpdk_dep|dataplane_[a-z_]*dep|client_dep|node_[a-z_]*dep'
check_links client 'raft_dep|locks_dep|storage_dep|liburing_dep|dpdk_dep|dataplane_[a-z_]*dep|control_dep|haspctl_dep|node_[a-z_]*dep'
check_links tools 'node_[a-z_]*dep'

# No circle inside node/: the loop calls dispatch and notify, not back.
if [ -d "$root/node" ]; then
	hits=$(grep -nE '\bnode_(step|update|send)[[:space:]]*\(' \
		"$root/node/dispatch.c" "$root/node/notify.c" || true)
	hits2=$(grep -nE '#[[:space:]]*include[[:space:]]*"node/dispatch\.h"' "$root/node/notify.c" || true)
	if [ -n "$hits$hits2" ]; then
		echo "circle: dispatch.c and notify.c reach node.c only through struct node_loop:"
		[ -n "$hits" ] && echo "$hits"
		[ -n "$hits2" ] && echo "$hits2"
		status=1
	fi
fi

[ $status -eq 0 ] && echo "layers ok: every folder includes and links only the layers below it"
exit $status
