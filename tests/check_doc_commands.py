#!/usr/bin/env python3
"""Keeps the hasp and haspctl command lines in the docs true.

Every inline code span and code block line of docs/*.md and README.md that
starts with `hasp` or `haspctl` (after `sudo`, `$`, VAR=value words,
`scripts/cluster exec --` or a path such as build/normal/tools/) is run:

  - a concrete command line with `--dry-run`: it must parse (exit 0), and
    nothing is sent;
  - a synopsis (placeholders <x>, [x], a|b, ...) or a bare reference to a
    command in prose (`haspctl members add`): `<words> --help` must print
    that command's own help, so the words name a real command.

  check_doc_commands.py <source root> <hasp> <haspctl>
"""
import glob
import os
import re
import shlex
import subprocess
import sys

root, progs = sys.argv[1], {"hasp": sys.argv[2], "haspctl": sys.argv[3]}
GLOBAL_VALUED = {"--cluster", "--timeout", "--socket", "--addr", "--nodes", "--config", "--admin-key"}
GLOBAL_FLAGS = {"--json", "--dry-run"}
PLACEHOLDER = re.compile(r"[<>\[\]|]|\.\.\.|\$\(")
ENV = dict(os.environ, HASP_CLUSTER="10.0.0.1:7000", HASP_ADMIN="/nonexistent/admin.sock")
ENV["HASP_NODES"] = "1=/nonexistent/n1.sock,2=/nonexistent/n2.sock"


def spans(path):
    in_block = False
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if line.strip().startswith("```"):
            in_block = not in_block
            continue
        for s in [line] if in_block else re.findall(r"`([^`]+)`", line):
            yield n, s.strip()


def command_of(span):
    """The program and the rest of the line, or None."""
    span = re.sub(r"\s+#\s.*$", "", span)  # a trailing shell comment
    span = re.sub(r"^(\$\s+|sudo\s+|[A-Z_]+=\S*\s+)*", "", span)
    span = re.sub(r"^(sudo\s+)?scripts/cluster\s+exec\s+--\s+", "", span)
    m = re.match(r"^(?:\S*/)?(hasp|haspctl)(?:\s+(.*))?$", span)
    return (m.group(1), m.group(2) or "") if m else None


def run(argv):
    p = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=20)
    return p.returncode, p.stdout, p.stderr


def global_options_end(tokens):
    i = 0
    while i < len(tokens) and tokens[i].startswith("-"):
        i += 2 if tokens[i] in GLOBAL_VALUED else 1
    return min(i, len(tokens))


def names_a_command(prog, tokens):
    """True when the command words in tokens (after global options) get a
    command's own help; returns (ok, words used)."""
    words, i = [], global_options_end(tokens)
    for t in tokens[i:]:
        if t.startswith("-") or PLACEHOLDER.search(t):
            break
        words.append(t)
    if not words:
        return True, words  # the program's synopsis itself
    code, out, _ = run([progs[prog]] + words[:2] + ["--help"])
    first = out.splitlines()[0] if out else ""
    return code == 0 and "<command>" not in first and " ".join(words[:2]) in first, words


failures = checked = 0
files = sorted(glob.glob(os.path.join(root, "docs", "*.md"))) + [os.path.join(root, "README.md")]
for path in files:
    for n, span in spans(path):
        cmd = command_of(span)
        if cmd is None:
            continue
        prog, rest = cmd
        where = f"{os.path.relpath(path, root)}:{n}: {prog} {rest}"
        try:
            tokens = shlex.split(rest)
        except ValueError as e:
            print(f"FAIL {where}: cannot split: {e}")
            failures += 1
            continue
        if not tokens:
            continue
        checked += 1
        if not PLACEHOLDER.search(rest):
            code, out, err = run([progs[prog], "--dry-run"] + tokens)
            if code == 0:
                continue
            ok, words = names_a_command(prog, tokens)
            if ok and words and len(words) == len(tokens) - global_options_end(tokens):
                continue  # a command named in prose
            if len(tokens) == 1 and tokens[0] in GLOBAL_VALUED | GLOBAL_FLAGS:
                continue  # an option named in prose
            print(f"FAIL {where}: --dry-run exit {code}: {(err or out).strip()}")
            failures += 1
            continue
        ok, words = names_a_command(prog, tokens)
        if not ok:
            print(f"FAIL {where}: `{' '.join(words[:2])}` is not a {prog} command")
            failures += 1
print(f"doc_commands: {checked} command lines checked, {failures} wrong")
sys.exit(1 if failures else 0)
