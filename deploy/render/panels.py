#!/usr/bin/env python3
"""The panels of hasp's Grafana dashboard, evaluated by a Prometheus server
and drawn with gnuplot into one PNG (deploy/render-dashboard runs it).

  panels.py list <dashboard.json>
      print one line per panel: type, title, its PromQL expressions
      (the dashboard's $instance variable replaced by ".*"); exit 1 when
      a panel has no expression.
  panels.py render <dashboard.json> <prometheus url> <start> <end> <out.png>
      query_range every expression over [start, end] (Unix seconds, 1 s
      step), write the series and a gnuplot script into a temp dir and run
      gnuplot. Exit 1 when Prometheus refuses a query or no panel has data.
"""
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

COLS = 4


def panels(path):
    with open(path, encoding="utf-8") as f:
        dash = json.load(f)
    out = []
    for p in dash.get("panels", []):
        if p.get("type") == "row":
            continue
        exprs = []
        for t in p.get("targets", []):
            e = t.get("expr", "")
            if e:
                exprs.append((e.replace("$instance", ".*"), t.get("legendFormat", "")))
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
        out.append({"type": p.get("type", ""), "title": p.get("title", ""), "exprs": exprs, "unit": unit})
    return out


def query_range(url, expr, start, end):
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": "1"})
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/api/v1/query_range?" + q, timeout=30) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:  # Prometheus says why in a JSON body
        try:
            body = json.load(e)
        except ValueError:
            body = {"error": "HTTP %d" % e.code}
    if body.get("status") != "success":
        raise RuntimeError("%s: %s" % (expr, body.get("error", "refused")))
    return body["data"]["result"]


def legend(metric, fmt):
    if fmt:
        s = fmt
        for k, v in metric.items():
            s = s.replace("{{" + k + "}}", v).replace("{{ " + k + " }}", v)
        return s
    labels = {k: v for k, v in metric.items() if k not in ("__name__", "job")}
    if not labels:
        return metric.get("__name__", "value")
    return ",".join("%s=%s" % (k, v) for k, v in sorted(labels.items()))


def gp_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


SCALE = {"s": ("ms", 1e3), "percentunit": ("%", 100.0), "bytes": ("MiB", 1.0 / (1 << 20))}


def render(dash, url, start, end, png):
    with tempfile.TemporaryDirectory(prefix="hasp-render-") as tmp:
        return render_in(dash, url, start, end, png, tmp)


def render_in(dash, url, start, end, png, tmp):
    ps = panels(dash)
    start, end = int(start), int(end)
    rows = (len(ps) + COLS - 1) // COLS
    gp = [
        "set terminal pngcairo size %d,%d font 'sans,8' noenhanced" % (COLS * 420, rows * 260 + 40),
        "set output %s" % gp_str(png),
        "set multiplot layout %d,%d title %s" % (rows, COLS, gp_str(
            "hasp dashboard (deploy/grafana/hasp-dashboard.json), 3-node cluster under hasp-load, x: seconds")),
        "set key top left font 'sans,6' opaque",
        "set grid",
        "set xrange [0:%d]" % int(end - start),
    ]
    with_data = 0
    for i, p in enumerate(ps):
        unit, mult = SCALE.get(p["unit"], (p["unit"] if p["unit"] != "short" else "", 1.0))
        plots = []
        for j, (expr, fmt) in enumerate(p["exprs"]):
            for k, s in enumerate(query_range(url, expr, start, end)):
                fn = os.path.join(tmp, "p%d_%d_%d.dat" % (i, j, k))
                with open(fn, "w", encoding="utf-8") as f:
                    for t, v in s["values"]:
                        try:
                            fv = float(v)
                        except ValueError:
                            continue
                        if fv != fv or fv in (float("inf"), float("-inf")):
                            continue
                        f.write("%.3f %.9g\n" % (float(t) - start, fv * mult))
                if os.path.getsize(fn) == 0:
                    continue
                name = legend(s["metric"], fmt)
                if len(p["exprs"]) > 1 and not fmt:
                    name = "q%d %s" % (j + 1, name)
                plots.append("%s using 1:2 with lines lw 1.5 title %s" % (gp_str(fn), gp_str(name[:48])))
        title = p["title"] + (" [%s]" % unit if unit else "")
        gp.append("set title %s" % gp_str(title))
        if plots:
            with_data += 1
            gp.append("set key on")
            gp.append("plot " + ", ".join(plots))
        else:
            gp.append("set key off")
            gp.append("set label 1 'no data in this run' at graph 0.5,0.5 center")
            gp.append("plot [0:1] [0:1] NaN notitle")
            gp.append("unset label 1")
    gp.append("unset multiplot")
    script = os.path.join(tmp, "dashboard.gp")
    with open(script, "w", encoding="utf-8") as f:
        f.write("\n".join(gp) + "\n")
    subprocess.run(["gnuplot", script], check=True)
    print("render: %d of %d panels have data; %s" % (with_data, len(ps), png))
    return 0 if with_data else 1


def main(argv):
    if len(argv) == 3 and argv[1] == "list":
        bad = 0
        for p in panels(argv[2]):
            print("%s\t%s\t%s" % (p["type"], p["title"], " ;; ".join(e for e, _ in p["exprs"])))
            if not p["exprs"]:
                print("panels: panel %r has no expression" % p["title"], file=sys.stderr)
                bad = 1
        return bad
    if len(argv) == 7 and argv[1] == "render":
        try:
            return render(*argv[2:])
        except (RuntimeError, OSError) as e:
            print("render: %s" % e, file=sys.stderr)
            return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
