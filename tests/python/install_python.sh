#!/bin/bash
# `pip install ./python` offline into a fresh venv, then import it
# (python/tests/test_install.py). No cluster needed.
#   install_python.sh <build dir> <source dir>
set -eu
build=$1 src=$2
. "$src/tests/python/find_python.sh"
export HASP_LIBRARY=$build/client/libhasp.so
# shellcheck disable=SC2086
exec "$py" -m pytest $pytest_args --noconftest "$src/python/tests/test_install.py"
