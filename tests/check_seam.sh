#!/bin/sh
# The pure cores never touch the network, the disk, the clock or malloc.
# This check keeps that seam from rotting silently (docs/ARCHITECTURE.md).
#   check_seam.sh <source-root>
set -u
root=$1
status=0
for dir in raft locks; do
	[ -d "$root/$dir" ] || continue
	hits=$(grep -rnE '<rte_|<liburing\.h>|<sys/socket\.h>|<sys/uio\.h>|<fcntl\.h>|<unistd\.h>|<time\.h>|<pthread\.h>|clock_gettime|clock_monotonic|common/clock\.h|common/log\.h|[^_]malloc\(|[^_]calloc\(|[^_]realloc\(|[^_]free\(|\bfopen\(|\bprintf\(|\brand\(|\bsrand\(|\btime\(' \
		"$root/$dir" --include='*.c' --include='*.h' || true)
	if [ -n "$hits" ]; then
		echo "seam violation in $dir/ (pure core must not do I/O, read clocks or allocate):"
		echo "$hits"
		status=1
	fi
done
[ $status -eq 0 ] && echo "seam ok: raft/ and locks/ are pure"
exit $status
