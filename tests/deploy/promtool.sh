#!/bin/sh
# Runs promtool (Debian package prometheus, scripts/install-deps); a missing
# promtool fails the test instead of skipping it.
command -v promtool >/dev/null 2>&1 || {
	echo "FAIL: promtool is not installed (scripts/install-deps installs package prometheus)"
	exit 1
}
exec promtool "$@"
