#!/bin/bash
# The Python package (python/) against a real one-node cluster in its own
# network namespace (tests/node/itest_lib.sh): pytest runs inside the
# namespace with HASP_CLUSTER, HASP_ID, HASP_KEY_FILE set by the cluster
# and HASP_LIBRARY pointing at this build's libhasp.so.
#   itest_python.sh <build dir> <source dir>
set -eu
build=$1 src=$2
. "$src/tests/python/find_python.sh"
. "$src/tests/node/itest_lib.sh"

line=$("$cluster" up -n 1 | tail -1)
export "${line?}"
echo "itest: $line, $($py --version)"
export HASP_LIBRARY=$build/client/libhasp.so PYTHONPATH=$src/python
# shellcheck disable=SC2086
in_ns "$py" -m pytest $pytest_args "$src/python/tests" --ignore="$src/python/tests/test_install.py"
