#!/usr/bin/env python3
"""perf/perf_build.ensure_build: the build a perf/ script runs from a fresh
clone. The tree's default build is made with scripts/build when it lacks a
program the script needs, and only then; a --build that lacks one is an
error, never silently replaced. Run against a fake tree whose scripts/build
records its calls and makes (or fails to make) the program."""
import os
import stat
import sys
import tempfile
import unittest

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "perf"))
from perf_build import ensure_build  # noqa: E402

FAKE_BUILD = """#!/bin/sh
# scripts/build of a fake tree: logs the flavour, makes tools/hasp-bench
# unless MAKE_NOTHING is set.
echo "$1" >> "$(dirname "$0")/../calls"
[ -n "$MAKE_NOTHING" ] && exit 0
mkdir -p "$(dirname "$0")/../build/$1/tools"
printf '#!/bin/sh\\n' > "$(dirname "$0")/../build/$1/tools/hasp-bench"
chmod +x "$(dirname "$0")/../build/$1/tools/hasp-bench"
"""


class EnsureBuild(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="hasp-perf-build-")
        self.root = self.tmp.name
        os.makedirs(os.path.join(self.root, "scripts"))
        path = os.path.join(self.root, "scripts", "build")
        with open(path, "w") as f:
            f.write(FAKE_BUILD)
        os.chmod(path, stat.S_IRWXU)
        os.environ.pop("MAKE_NOTHING", None)

    def tearDown(self):
        os.environ.pop("MAKE_NOTHING", None)
        self.tmp.cleanup()

    def calls(self):
        try:
            with open(os.path.join(self.root, "calls")) as f:
                return f.read().split()
        except FileNotFoundError:
            return []

    def test_a_fresh_clone_gets_its_build_made(self):
        build = ensure_build(self.root, "", "perf", ["tools/hasp-bench"], "test")
        self.assertEqual(build, os.path.join(self.root, "build", "perf"))
        self.assertTrue(os.access(os.path.join(build, "tools", "hasp-bench"), os.X_OK))
        self.assertEqual(self.calls(), ["perf"])

    def test_a_complete_build_is_not_made_again(self):
        ensure_build(self.root, "", "perf", ["tools/hasp-bench"], "test")
        ensure_build(self.root, "", "perf", ["tools/hasp-bench"], "test")
        self.assertEqual(self.calls(), ["perf"])

    def test_a_build_without_the_program_is_made_again(self):
        os.makedirs(os.path.join(self.root, "build", "normal"))
        ensure_build(self.root, "", "normal", ["tools/hasp-bench"], "test")
        self.assertEqual(self.calls(), ["normal"])

    def test_a_named_build_lacking_a_program_is_an_error(self):
        named = os.path.join(self.root, "elsewhere")
        os.makedirs(named)
        with self.assertRaises(SystemExit):
            ensure_build(self.root, named, "perf", ["tools/hasp-bench"], "test")
        self.assertEqual(self.calls(), [])

    def test_a_build_that_makes_nothing_is_an_error(self):
        os.environ["MAKE_NOTHING"] = "1"
        with self.assertRaises(SystemExit):
            ensure_build(self.root, "", "perf", ["tools/hasp-bench"], "test")
        self.assertEqual(self.calls(), ["perf"])

    def test_every_perf_script_with_a_build_option_uses_it(self):
        # The scripts the README names that take --build: none may tell a
        # fresh clone to build first instead of building.
        for name in ("engines", "flood_p99", "snapshot_stall", "cost.py"):
            with open(os.path.join(ROOT, "perf", name)) as f:
                text = f.read()
            self.assertTrue("ensure_build(ROOT, args.build" in text or "ensure_build(ROOT, a.build" in text,
                            "perf/%s does not build" % name)
            self.assertFalse("first\" %" in text, "perf/%s asks for a build first" % name)


if __name__ == "__main__":
    unittest.main()
