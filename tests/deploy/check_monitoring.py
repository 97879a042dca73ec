#!/usr/bin/env python3
"""Checks the monitoring files in deploy/ against what a node exports.

    check_monitoring.py <dashboard.json> <rules.yml> [<metrics.txt>...]

The dashboard must be valid JSON with panels, each with a PromQL target;
every metric an expression of the dashboard or of the rules names must be
one the node exports: without metrics files, a name of the form hasp_* or
process_*; with them (the text of live nodes' /metrics), a series name in
one of them (histograms as their _bucket, _sum and _count series). A rules
expression may also name a recording rule of the same file. Exit 1 and one
line per problem otherwise.
"""
import json
import re
import sys

import yaml

KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
            "group_right", "bool", "offset", "inf", "nan"}
IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr):
    """The metric names an expression reads (functions, keywords, labels,
    strings and durations left out)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)             # strings
    e = re.sub(r"\{[^}]*\}", " ", e)                         # label matchers
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)                        # ranges
    names = set()
    for m in IDENT.finditer(e):
        word = m.group(0)
        rest = e[m.end():].lstrip()
        if rest.startswith("("):
            continue                                          # a function
        if word.lower() in KEYWORDS or re.fullmatch(r"[0-9.e]+", word):
            continue
        names.add(word)
    return names


def dashboard_exprs(path, problems):
    try:
        with open(path) as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        problems.append(f"{path}: not valid JSON: {e}")
        return []
    panels = dash.get("panels")
    if not isinstance(panels, list) or not panels:
        problems.append(f"{path}: no panels")
        return []
    exprs, ids = [], set()
    for p in panels:
        title = p.get("title", "?")
        if p.get("id") in ids:
            problems.append(f"{path}: panel '{title}': id {p.get('id')} used twice")
        ids.add(p.get("id"))
        if "gridPos" not in p:
            problems.append(f"{path}: panel '{title}': no gridPos")
        targets = [t.get("expr", "") for t in p.get("targets", [])]
        if not targets or not all(targets):
            problems.append(f"{path}: panel '{title}': a target without an expression")
        exprs += [(f"panel '{title}'", t) for t in targets if t]
    return exprs


def rules_exprs(path, problems):
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        problems.append(f"{path}: not valid YAML: {e}")
        return [], set()
    exprs, records = [], set()
    for g in doc.get("groups", []):
        for r in g.get("rules", []):
            if "record" in r:
                records.add(r["record"])
            exprs.append((f"rule '{r.get('record') or r.get('alert')}'", r["expr"]))
    return exprs, records


def exported_names(paths):
    names = set()
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                names.add(IDENT.match(line).group(0))
    return names


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    problems = []
    dash = dashboard_exprs(argv[1], problems)
    rules, records = rules_exprs(argv[2], problems)
    live = exported_names(argv[3:]) if len(argv) > 3 else None
    checked = 0
    for source, where, exprs in (("dashboard", argv[1], dash), ("rules", argv[2], rules)):
        for what, expr in exprs:
            for name in sorted(metric_names(expr)):
                checked += 1
                if source == "rules" and name in records:
                    continue
                if live is None:
                    ok = re.match(r"(hasp|process)_", name) is not None
                else:
                    ok = name in live
                if not ok:
                    problems.append(f"{where}: {what}: '{name}' is not a metric the node exports")
    for p in problems:
        print(p)
    if checked == 0:
        print("no metric names found in any expression")
        return 1
    print(f"check_monitoring: {len(dash)} dashboard and {len(rules)} rule expressions, "
          f"{checked} metric references, {len(problems)} problems"
          + (f" (against {len(live)} exported series names)" if live is not None else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
