#!/bin/bash
# perf/failover end to end on a real 3-node cluster (its own network
# namespace, client authentication on, as scripts/cluster makes it): the
# client runs as the cluster's client identity inside the namespace, every
# round is answered, and each answer is split into the election, the
# serving leader's "leader ready" and the client's part. No timing is
# asserted (the benchmark's numbers are docs/PERFORMANCE.md's), only that
# the parts are there and add up.
#   itest_failover.sh <build dir> <source dir>
set -eu
build=$1 src=$2
. "$src/tests/node/itest_lib.sh"

json=$HASP_CLUSTER_DIR/failover.json
"$src/perf/failover" --rounds 2 --build "$build" --json "$json" ||
	{ echo "FAIL: perf/failover exit $?"; exit 1; }
python3 - "$json" <<'PY'
import json
import sys

d = json.load(open(sys.argv[1]))
s = d["summary"]
assert s["rounds"] == 2 and s["failed"] == 0, s
ok = [r for r in d["rounds"] if not r.get("missed")]
assert ok, "no round was a failover: %s" % d["rounds"]
for r in ok:
    for key in ("answer_ms", "election_ms", "serving_leader_ms", "ready_ms", "client_ms"):
        assert r[key] is not None, (key, r)
    assert 0 < r["election_ms"] <= r["serving_leader_ms"] <= r["answer_ms"], r
    assert r["ready_ms"] >= 0 and r["client_ms"] >= -0.01, r
    total = r["serving_leader_ms"] + r["ready_ms"] + r["client_ms"]
    assert abs(total - r["answer_ms"]) < 0.01, (total, r)
print("itest: %d failover rounds, answer %s ms" % (len(ok), [round(r["answer_ms"], 1) for r in ok]))
PY
