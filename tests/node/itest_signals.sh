#!/bin/bash
# Signals during start-up (correctness issue, item 8): SIGUSR1 (the stats
# request scripts/cluster itself sends) arriving while haspd starts must not
# kill it, and `scripts/cluster start` must wait for this process's own
# "ready" line, not an earlier run's in the same log.
#   itest_signals.sh <build dir> <source dir>
set -eu
build=$1 src=$2
. "$src/tests/node/itest_lib.sh"

"$cluster" up -n 1 >/dev/null
"$cluster" stop 1 >/dev/null
old_ready=$(grep -c "haspd: ready node=1" "$HASP_CLUSTER_DIR/n1/log")
[ "$old_ready" -ge 1 ] || { echo "FAIL: no ready line from the first run"; exit 1; }

# Fire SIGUSR1 at whatever process the pid file names, from the moment the
# new one is launched until it is ready (bounded: 10 s).
rm -f "$HASP_CLUSTER_DIR/n1/pid"
(
	for _ in $(seq 1 1000); do
		if [ -f "$HASP_CLUSTER_DIR/n1/pid" ]; then
			kill -USR1 "$(cat "$HASP_CLUSTER_DIR/n1/pid")" 2>/dev/null || true
			[ "$(grep -c "haspd: ready node=1" "$HASP_CLUSTER_DIR/n1/log")" -gt "$old_ready" ] && break
		fi
		sleep 0.01
	done
) &
helpers+=($!)
"$cluster" start 1 >/dev/null || { echo "FAIL: node 1 did not survive SIGUSR1 during start-up"; exit 1; }
wait "${helpers[@]}"
helpers=()
pid=$(cat "$HASP_CLUSTER_DIR/n1/pid")
kill -0 "$pid" || { echo "FAIL: haspd died after start"; exit 1; }
grep -q "haspd: ready node=1 pid=$pid " "$HASP_CLUSTER_DIR/n1/log" ||
	{ echo "FAIL: start returned without this process's ready line"; exit 1; }
# The stats requested during start-up are served once it runs.
[ "$(stats 1 client_rx)" -ge 0 ] || { echo "FAIL: no stats after start"; exit 1; }
echo "itest: PASS (signals during start-up; start waits for its own ready)"
