# Sourced: sets $py to a Python 3 that can import pytest (Debian's
# python3-pytest, scripts/install-deps), trying `python3` on PATH first and
# then the system's; fails the test when there is none.
py=
for cand in python3 /usr/bin/python3; do
	if command -v "$cand" >/dev/null && "$cand" -c 'import pytest' 2>/dev/null; then
		py=$(command -v "$cand")
		break
	fi
done
[ -n "$py" ] || { echo "FAIL: no python3 with pytest (scripts/install-deps installs python3-pytest)"; exit 1; }
# Nothing written into the source tree: no bytecode, no pytest cache.
export PYTHONDONTWRITEBYTECODE=1
pytest_args="-p no:cacheprovider -v"
