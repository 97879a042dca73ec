#!/usr/bin/env python3
"""Runs tests/fault/checker.py's check() on each history file separately,
in one Python process (one start-up instead of one per seed).

  check_histories.py <checker.py> <history>...

Prints each failing history's violations and exits 1 if any failed, 2 if
one could not be read."""
import importlib.util
import json
import sys


def main(argv):
    spec = importlib.util.spec_from_file_location("checker", argv[1])
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    failed = 0
    for path in argv[2:]:
        try:
            verdicts, _ = checker.check(checker.load([path]))
        except ValueError as e:
            print(f"{path}: malformed history: {e}")
            return 2
        for prop in checker.PROPERTIES:
            for v in verdicts[prop]:
                failed += 1
                print(f"{path}: {prop}: {v['message']}")
                for r in v["records"]:
                    print(f"    {json.dumps(r, sort_keys=True)}")
    print(f"check_histories: {len(argv) - 2} histories, {failed} violations")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
