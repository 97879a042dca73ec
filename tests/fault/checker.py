#!/usr/bin/env python3
"""Checks the recorded history of a real-cluster fault run (docs/TESTING.md).

A history is a list of records, one JSON object per line, written by the
suite's clients, its fenced resource and its nemesis. Every time stamp `t`
is CLOCK_MONOTONIC in nanoseconds on the one machine that runs the whole
suite, so the records of different processes can be ordered in real time.

Operations follow Jepsen's convention: a client process has at most one
operation outstanding; it writes an `invoke` record, then one completion:
`ok` (it happened), `fail` (it certainly did not happen) or `info` (unknown:
a timeout, a lost reply). Fields:

  t        int   monotonic ns
  proc     str   the process: a client id, "resource" or "nemesis"
  f        str   acquire release renew read write kv_put kv_delete kv_read
                 watch event watch_end nemesis
  type     str   invoke ok fail info (operations); for nemesis: fault heal
  lock     str   the lock (acquire release renew read write watch event)
  key      str   the KV key (kv_*; event for kv changes)
  token    int   the fencing token (acquire ok, release, renew, write, event)
  valid_until int  ns until which the client library said the lock is
                 safe to use (acquire ok, renew ok)
  holder_token int  what a lock read saw (0 or absent: free)
  value    str   kv_put invoke, kv_read ok (null: no such key)
  accepted bool  write records of the resource: did it accept the write
  client   str   write records: which client asked
  late     bool  write records: a deliberate write after a pause
  kind     str   event records: granted released expired handed put delete
                 resync (a gap the client library reported)
  id       str   event records: the event's identity (duplicates share it)
  prefix   bool  watch records: a prefix watch

Each checker returns a list of violations: dicts with the property, a
message and the records that show it. Properties are independent, so a
planted anomaly fails exactly the property it breaks (the self-tests in
test_checker.py show it).
"""
import argparse
import json
import os
import statistics
import sys

PROPERTIES = ("mutual_exclusion", "fencing", "durability", "events", "liveness")


# ---- loading and pairing ----

def load(paths):
    """Reads every record of the given files (or *.jsonl files of the given
    directories), sorted by time. A malformed line is an error: a history we
    cannot read proves nothing."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(".jsonl"))
        else:
            files.append(p)
    records = []
    for path in files:
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{lineno}: not JSON: {e}") from None
                if not isinstance(r.get("t"), int) or "proc" not in r or "f" not in r:
                    raise ValueError(f"{path}:{lineno}: a record needs t (int), proc and f")
                records.append(r)
    records.sort(key=lambda r: r["t"])
    return records


class Op:
    """One operation: its invoke record and its completion (None while
    outstanding at the end of the history, which counts as info)."""

    def __init__(self, invoke):
        self.invoke = invoke
        self.done = None

    @property
    def type(self):
        return self.done["type"] if self.done else "info"

    @property
    def start(self):
        return self.invoke["t"]

    @property
    def end(self):
        return self.done["t"] if self.done else None

    def get(self, field, default=None):
        if self.done is not None and field in self.done:
            return self.done[field]
        return self.invoke.get(field, default)

    def records(self):
        return [self.invoke] + ([self.done] if self.done else [])


def pair(records):
    """Pairs each process's invoke with its next completion. A completion
    without an invoke, or two invokes in a row, is a malformed history."""
    ops, open_by_proc = [], {}
    for r in records:
        kind = r.get("type")
        if kind == "invoke":
            if r["proc"] in open_by_proc:
                raise ValueError(f"process {r['proc']} invoked twice without a completion at t={r['t']}")
            op = Op(r)
            open_by_proc[r["proc"]] = op
            ops.append(op)
        elif kind in ("ok", "fail", "info"):
            op = open_by_proc.pop(r["proc"], None)
            if op is None:
                raise ValueError(f"process {r['proc']} completed without an invoke at t={r['t']}")
            if op.invoke["f"] != r["f"]:
                raise ValueError(f"process {r['proc']}: {r['f']} completes {op.invoke['f']}")
            op.done = r
    return ops


def violation(prop, msg, *recs):
    return {"property": prop, "message": msg, "records": [r for r in recs if r is not None]}


def grants(ops):
    """Acknowledged grants per lock: (op, token, ack time)."""
    out = {}
    for op in ops:
        if op.invoke["f"] == "acquire" and op.type == "ok" and op.get("token"):
            out.setdefault(op.invoke["lock"], []).append(op)
    return out


# ---- mutual exclusion in real time ----

def holds(ops):
    """Each acknowledged grant becomes a hold from its acknowledgement to the
    end of the validity the client library reported. A renewal that
    succeeded replaces that end with the validity it reported (a renew may
    shrink the lease as well as grow it); one never answered (info) caps it
    at the validity the library reported after it, as does an unanswered
    acquire by the holder (it re-arms the lease too); one the cluster refused ends the
    hold when the refusal arrives; a hold is cut short when its holder
    starts a release (from then on it no longer acts on the lock)."""
    by_lock = {}
    for lock, gs in grants(ops).items():
        for g in gs:
            by_lock.setdefault(lock, {})
            token = g.get("token")
            h = by_lock[lock].get(token)
            if h is None:
                h = by_lock[lock][token] = {"lock": lock, "token": token, "proc": g.invoke["proc"],
                                            "start": g.end, "end": g.get("valid_until", g.end),
                                            "ack": g.end, "recs": g.records()}
            else:
                # The same grant acknowledged again: the holder acquired
                # it again, which re-arms the lease with that request's
                # TTL (shorter or longer), so the later acknowledgement's
                # validity is the one the holder goes by.
                h["start"] = min(h["start"], g.end)
                if g.end >= h["ack"]:
                    h["ack"] = g.end
                    h["end"] = g.get("valid_until", g.end)
    for op in ops:
        f = op.invoke["f"]
        lock, token = op.invoke.get("lock"), op.invoke.get("token")
        h = by_lock.get(lock, {}).get(token)
        if h is None:
            continue
        if f == "renew" and op.type == "ok" and op.get("valid_until") is not None:
            h["end"] = op.get("valid_until")
        elif f == "renew" and op.type == "fail":
            h["end"] = min(h["end"], op.end)
        elif op.type == "info" and f in ("renew", "acquire") and op.get("valid_until") is not None:
            # Unanswered: the TTL it carried may have been applied, and the
            # library's validity after it is what the hold may last.
            h["end"] = min(h["end"], op.get("valid_until"))
        elif f == "release":
            h["end"] = min(h["end"], op.start)
    return by_lock


def check_mutual_exclusion(ops):
    out = []
    for lock, hs in holds(ops).items():
        ordered = sorted(hs.values(), key=lambda h: h["start"])
        for i, a in enumerate(ordered):
            for b in ordered[i + 1:]:
                if b["start"] >= a["end"]:
                    break
                if b["end"] > b["start"] and a["end"] > a["start"]:
                    out.append(violation(
                        "mutual_exclusion",
                        f"lock {lock}: token {a['token']} ({a['proc']}) held until {a['end']} "
                        f"overlaps token {b['token']} ({b['proc']}) from {b['start']}",
                        *(a["recs"] + b["recs"])))
    return out


# ---- fencing ----

def check_fencing(ops, records):
    out = []
    for lock, gs in grants(ops).items():
        seen = {}
        for g in gs:
            t = g.get("token")
            other = seen.get(t)
            if other is not None and other.invoke["proc"] != g.invoke["proc"]:
                out.append(violation("fencing", f"lock {lock}: token {t} granted to two clients",
                                     other.done, g.done))
            seen.setdefault(t, g)
        # Real-time order: a grant acknowledged before another was asked for
        # has the smaller token.
        by_ack = sorted(gs, key=lambda g: g.end)
        by_invoke = sorted(gs, key=lambda g: g.start)
        j, max_op = 0, None
        for b in by_invoke:
            while j < len(by_ack) and by_ack[j].end < b.start:
                a = by_ack[j]
                if max_op is None or a.get("token") > max_op.get("token"):
                    max_op = a
                j += 1
            if max_op is not None and b.get("token") <= max_op.get("token") and \
                    b.get("token") != max_op.get("token"):
                out.append(violation(
                    "fencing",
                    f"lock {lock}: token {b.get('token')} granted after token "
                    f"{max_op.get('token')} was acknowledged",
                    max_op.done, b.done))
    # The resource: an accepted write never carries a token below one it
    # accepted before, and a deliberate late write is refused once a newer
    # grant was acknowledged.
    highest = {}
    acked = grants(ops)
    for r in records:
        if r["f"] != "write" or r["proc"] != "resource":
            continue
        lock, token = r["lock"], r["token"]
        if r.get("accepted"):
            if token < highest.get(lock, 0):
                out.append(violation("fencing", f"lock {lock}: resource accepted token {token} "
                                     f"after token {highest[lock]}", r))
            highest[lock] = max(highest.get(lock, 0), token)
            if r.get("late"):
                newer = [g for g in acked.get(lock, []) if g.get("token") > token and g.end < r["t"]]
                if newer:
                    out.append(violation("fencing", f"lock {lock}: late write with token {token} "
                                         f"accepted after token {newer[0].get('token')} was granted",
                                         newer[0].done, r))
    return out


# ---- durability ----

def check_durability(ops):
    out = []
    by_lock = holds(ops)
    releases = {}
    for op in ops:
        if op.invoke["f"] == "release" and op.type == "ok":
            releases.setdefault(op.invoke["lock"], []).append(op)
    for op in ops:
        if op.invoke["f"] != "read" or op.type != "ok":
            continue
        lock = op.invoke["lock"]
        seen = op.get("holder_token") or 0
        # A release acknowledged before the read began is never undone.
        for rel in releases.get(lock, []):
            if rel.end < op.start and seen == rel.invoke.get("token"):
                out.append(violation("durability", f"lock {lock}: token {seen} released, then read "
                                     f"as held", rel.done, op.done))
        # A grant acknowledged before the read began, still valid by the
        # client's own (conservative) reckoning when the read completed and
        # not being released, is what the read sees.
        for h in by_lock.get(lock, {}).values():
            if h["start"] < op.start and h["end"] > op.end and seen != h["token"]:
                out.append(violation("durability", f"lock {lock}: token {h['token']} acknowledged and "
                                     f"valid, but the read saw {seen or 'no holder'}",
                                     *(h["recs"] + [op.done])))
    out += check_kv(ops)
    return out


def check_kv(ops):
    """Single-register check per key: a read returns the value of a write
    (put or delete) that began before the read ended and was not certainly
    overwritten before the read began; a failed write is never seen."""
    out = []
    writes = {}
    for op in ops:
        if op.invoke["f"] in ("kv_put", "kv_delete") and op.type != "fail":
            writes.setdefault(op.invoke["key"], []).append(op)
    for op in ops:
        if op.invoke["f"] != "kv_read" or op.type != "ok":
            continue
        key, value = op.invoke["key"], op.get("value")
        cands = [w for w in writes.get(key, []) if w.start < op.end]
        certain = [w for w in cands if w.type == "ok" and w.end < op.start]

        def val(w):
            return w.invoke.get("value") if w.invoke["f"] == "kv_put" else None

        allowed = []
        for w in cands:
            overwritten = w.end is not None and any(q is not w and q.start > w.end for q in certain)
            if not overwritten:
                allowed.append(val(w))
        if not certain:
            allowed.append(None)  # no write certainly happened: the key may be absent
        if value not in allowed:
            out.append(violation("durability", f"key {key}: read {value!r}, allowed {allowed!r}",
                                 *([w.done for w in certain[-1:]] + [op.done])))
    return out


# ---- events ----

def grant_lower_bound(g, ops_on_lock):
    """The earliest instant at which the grant that `g` acknowledged can
    have happened. Normally the acquire's invoke. But a WAIT whose outcome
    the client never learned (it gave up; its CANCEL went unanswered while
    the cluster was down) leaves a queue entry that may be granted to the
    session later, unknown to it; the process's next ACQUIRE of the lock
    is then answered GRANTED with that older grant's token (an ACQUIRE by
    the holder), found by a fault run. Such a grant happened after that
    WAIT began and after any operation began that still saw a smaller
    token (or none) as the lock's holder."""
    token, proc = g.get("token"), g.invoke["proc"]
    orphans = [o.start for o in ops_on_lock if o.invoke["proc"] == proc and o.start < g.start
               and o.invoke["f"] == "acquire" and o.type == "info"]
    if not orphans:
        return g.start
    lo = min(orphans)
    for o in ops_on_lock:
        if o.type != "ok" or o.start >= g.start:
            continue
        seen = o.get("holder_token") if o.invoke["f"] == "read" else o.get("token")
        if seen is not None and seen < token:
            lo = max(lo, o.start)
    return lo


def check_events(ops, records, slack_ns):
    out = []
    acked = grants(ops)
    on_lock = {}
    for op in ops:
        if "lock" in op.invoke:
            on_lock.setdefault(op.invoke["lock"], []).append(op)
    watches, events, ends = {}, {}, {}
    for op in ops:
        if op.invoke["f"] == "watch" and op.type == "ok":
            watches.setdefault(op.invoke["proc"], []).append(op)
    for r in records:
        if r["f"] == "event":
            events.setdefault(r["proc"], []).append(r)
        elif r["f"] == "watch_end":
            ends[r["proc"]] = r["t"]
    for proc, evs in events.items():
        ids = {}
        for e in evs:
            if e.get("kind") == "resync":
                continue
            if e["id"] in ids:
                out.append(violation("events", f"{proc}: event {e['id']} delivered twice", ids[e["id"]], e))
            ids.setdefault(e["id"], e)
    for proc, ws in watches.items():
        end = ends.get(proc)
        if end is None:
            continue  # the watcher did not finish: nothing can be required of it
        evs = events.get(proc, [])
        gaps = [e["t"] for e in evs if e.get("kind") == "resync"]
        told = {(e.get("lock"), e.get("token")) for e in evs if e.get("kind") in ("granted", "handed")}
        for w in ws:
            name, prefix = w.invoke["lock"], bool(w.invoke.get("prefix"))
            for lock, gs in acked.items():
                if not (lock.startswith(name) if prefix else lock == name):
                    continue
                first = {}
                for g in gs:
                    first.setdefault(g.get("token"), g)
                for g in gs:
                    if first[g.get("token")] is not g:
                        continue  # the holder acquiring again: the same grant, re-armed, no new event
                    if g.end <= w.end or g.end > end - slack_ns:
                        continue
                    if (lock, g.get("token")) in told:
                        continue
                    # A gap reported after the grant may have happened
                    # covers it: the client was told it missed events.
                    lo = grant_lower_bound(g, on_lock.get(lock, []))
                    if any(gap >= lo for gap in gaps):
                        continue
                    out.append(violation("events", f"{proc}: grant of {lock} token {g.get('token')} "
                                         f"never delivered and no gap reported", g.done))
    return out


# ---- liveness ----

def liveness(ops, records, bound_ns):
    """For each heal of the nemesis, the time to the first acknowledged grant
    after it. A heal followed by no grant within the bound, while the history
    still runs past the bound, is a violation."""
    heals = [r for r in records if r["f"] == "nemesis" and r.get("type") == "heal"]
    acks = sorted(op.end for op in ops
                  if op.invoke["f"] == "acquire" and op.type == "ok")
    last_t = records[-1]["t"] if records else 0
    figures, out = [], []
    for h in heals:
        after = [t for t in acks if t >= h["t"]]
        if after and after[0] - h["t"] <= bound_ns:
            figures.append({"heal": h.get("name", "heal"), "ns": after[0] - h["t"]})
        elif last_t - h["t"] > bound_ns:
            out.append(violation("liveness", f"no grant within {bound_ns / 1e9:.1f} s of heal "
                                 f"{h.get('name', '')} at t={h['t']}", h))
    return out, figures


def summarize(figures):
    by_name = {}
    for f in figures:
        by_name.setdefault(f["heal"], []).append(f["ns"] / 1e6)
    return {name: {"count": len(v), "min_ms": round(min(v), 1), "p50_ms": round(statistics.median(v), 1),
                   "max_ms": round(max(v), 1)} for name, v in sorted(by_name.items())}


def check(records, slack_ns=2_000_000_000, liveness_bound_ns=30_000_000_000):
    """Every property over one history: {property: [violations]}, figures."""
    ops = pair(records)
    live, figures = liveness(ops, records, liveness_bound_ns)
    return {
        "mutual_exclusion": check_mutual_exclusion(ops),
        "fencing": check_fencing(ops, records),
        "durability": check_durability(ops),
        "events": check_events(ops, records, slack_ns),
        "liveness": live,
    }, summarize(figures)


def main(argv=None):
    ap = argparse.ArgumentParser(description="check a hasp fault-run history")
    ap.add_argument("paths", nargs="+", help="history files or directories of *.jsonl")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--liveness-bound", type=float, default=30.0, help="seconds (default 30)")
    args = ap.parse_args(argv)
    try:
        records = load(args.paths)
        verdicts, figures = check(records, liveness_bound_ns=int(args.liveness_bound * 1e9))
    except ValueError as e:
        print(f"checker: malformed history: {e}", file=sys.stderr)
        return 2
    failed = any(verdicts.values())
    if args.json:
        print(json.dumps({"ok": not failed, "records": len(records),
                          "verdicts": {p: ("ok" if not v else "FAIL") for p, v in verdicts.items()},
                          "violations": [x for v in verdicts.values() for x in v],
                          "liveness": figures}))
    else:
        print(f"checker: {len(records)} records")
        for p in PROPERTIES:
            v = verdicts[p]
            print(f"  {p:17s} {'ok' if not v else 'FAIL'}")
            for x in v[:5]:
                print(f"    {x['message']}")
                for r in x["records"]:
                    print(f"      {json.dumps(r, sort_keys=True)}")
            if len(v) > 5:
                print(f"    ... {len(v) - 5} more")
        for name, s in figures.items():
            print(f"  liveness {name}: heal to first grant p50 {s['p50_ms']} ms, "
                  f"max {s['max_ms']} ms ({s['count']} heals)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
