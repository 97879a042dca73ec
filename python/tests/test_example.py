"""The documented example runs against the cluster, as printed in the docs."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "python", "fenced_write.py")


def test_docs_show_the_example_verbatim():
    doc = open(os.path.join(ROOT, "docs", "CLIENT.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    assert open(EXAMPLE).read() in blocks


def test_example_fences_the_stale_token(cluster, name):
    out = subprocess.run([sys.executable, EXAMPLE, name, "report"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("refused: stale fencing token ")
    t1 = int(lines[1].split()[1])
    t2 = int(lines[2].split()[1])
    assert lines[1].endswith("'report'") and lines[2].endswith("'report (again)'")
    assert t2 > t1 and len(lines) == 3
