#!/usr/bin/env python3
"""The fault runner's tag claim (tests/fault/run claim_tag): two runs
that start from the same candidate (their PID plus seed modulo 50 met)
get different tags while both hold theirs, and a tag is free again once
its holder closes it. Run as root (the lock files live in /run/lock); the
locks are flock(2)s, one per open file, so two descriptors of one process
stand for two runs."""
import importlib.machinery
import importlib.util
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def load_runner():
    loader = importlib.machinery.SourceFileLoader("fault_run", os.path.join(HERE, "run"))
    spec = importlib.util.spec_from_loader("fault_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class TagClaim(unittest.TestCase):
    def test_two_runs_from_one_candidate_get_two_tags(self):
        run = load_runner()
        first = 17
        a, fd_a = run.claim_tag(first)
        try:
            b, fd_b = run.claim_tag(first)
            try:
                self.assertNotEqual(a, b)
                self.assertTrue(0 <= a < run.TAGS and 0 <= b < run.TAGS)
            finally:
                os.close(fd_b)
        finally:
            os.close(fd_a)
        # Both closed: the candidate is free again (unless a real fault
        # run holds it right now, which then holds it for a while).
        c, fd_c = run.claim_tag(a)
        os.close(fd_c)
        self.assertTrue(0 <= c < run.TAGS)


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: needs root (/run/lock)")
        sys.exit(77)
    unittest.main()
