"""The build a perf/ script runs: the one named with --build, or else the
tree's own build/<flavour>, made with scripts/build when it is missing or
lacks a program the script needs (so that every command the README names
works from a fresh clone, as perf/run and perf/peers/run do)."""
import os
import subprocess
import sys


def ensure_build(root, build_arg, flavour, programs, who):
    """The absolute build directory holding every path of `programs`
    (relative to it). A --build that lacks one is an error; the default
    build/<flavour> is (re)built with scripts/build first, once."""
    if build_arg:
        build = os.path.abspath(build_arg)
        missing = [p for p in programs if not os.access(os.path.join(build, p), os.X_OK)]
        if missing:
            sys.exit("%s: no %s in %s (build it, or leave --build out to use build/%s)" %
                     (who, ", ".join(missing), build, flavour))
        return build
    build = os.path.join(root, "build", flavour)
    if any(not os.access(os.path.join(build, p), os.X_OK) for p in programs):
        print("%s: building build/%s (scripts/build %s)" % (who, flavour, flavour), file=sys.stderr, flush=True)
        subprocess.run([os.path.join(root, "scripts", "build"), flavour], check=True,
                       stdout=subprocess.DEVNULL)
        missing = [p for p in programs if not os.access(os.path.join(build, p), os.X_OK)]
        if missing:
            sys.exit("%s: scripts/build %s made no %s" % (who, flavour, ", ".join(missing)))
    return build
