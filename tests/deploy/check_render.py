#!/usr/bin/env python3
"""deploy/render/panels.py against a stand-in for Prometheus's HTTP API
(docs/RUNBOOK.md, "The dashboard on a live cluster"): every expression of
the dashboard is asked for through /api/v1/query_range over the run's
window with a 1 s step, the PNG is written with one panel per dashboard
panel, and a query Prometheus refuses makes the render fail.

  check_render.py <panels.py> <dashboard.json>
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

START, END = 1000, 1060
asked = []
refuse = {"on": False}


class Api(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path != "/api/v1/query_range":
            self.send_error(404)
            return
        asked.append((q["query"][0], q["start"][0], q["end"][0], q["step"][0]))
        if refuse["on"]:
            body = {"status": "error", "errorType": "bad_data", "error": "parse error"}
            code = 400
        else:
            vals = [[START + i, str(i % 7)] for i in range(0, END - START + 1, 5)]
            vals.append([END, "NaN"])  # Prometheus's NaN (no rate yet) is skipped
            body = {"status": "success", "data": {"resultType": "matrix", "result": [
                {"metric": {"instance": "10.0.0.1:7071", "opcode": "ACQUIRE"}, "values": vals}]}}
            code = 200
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        check(sys.argv[1], sys.argv[2], tmp)


def check(panels_py, dash, tmp):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d" % srv.server_address[1]
    with open(dash, encoding="utf-8") as f:
        d = json.load(f)
    want = [t["expr"].replace("$instance", ".*") for p in d["panels"] if p.get("type") != "row"
            for t in p.get("targets", []) if t.get("expr")]
    png = os.path.join(tmp, "dash.png")
    r = subprocess.run([sys.executable, panels_py, "render", dash, url, str(START), str(END), png],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("render exited %d: %s%s" % (r.returncode, r.stdout, r.stderr))
    if sorted(a[0] for a in asked) != sorted(want):
        fail("asked for %d expressions, the dashboard has %d" % (len(asked), len(want)))
    if any(a[1:] != (str(START), str(END), "1") for a in asked):
        fail("a query was not over [start, end] with a 1 s step: %r" % (asked[0],))
    npanels = sum(1 for p in d["panels"] if p.get("type") != "row")
    if "%d of %d panels have data" % (npanels, npanels) not in r.stdout:
        fail("not every panel drawn: %s" % r.stdout)
    with open(png, "rb") as f:
        head = f.read(8)
    if head != b"\x89PNG\r\n\x1a\n" or os.path.getsize(png) < 10000:
        fail("no PNG written")
    print("render: %d expressions asked, %d panels drawn" % (len(asked), npanels))

    refuse["on"] = True
    os.unlink(png)
    r = subprocess.run([sys.executable, panels_py, "render", dash, url, str(START), str(END), png],
                       capture_output=True, text=True, timeout=120)
    if r.returncode == 0:
        fail("a refused query did not fail the render")
    print("render: a refused query fails the render (exit %d)" % r.returncode)
    srv.shutdown()
    print("PASS")


if __name__ == "__main__":
    main()
