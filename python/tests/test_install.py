"""The package installs with pip, offline, into a fresh virtual environment
(Debian's setuptools and wheel through --system-site-packages), and the
installed copy imports and reaches libhasp."""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_pip_install_into_a_venv():
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "src")
        # A copy: pip's in-tree build writes build/ and *.egg-info next to it.
        shutil.copytree(os.path.join(ROOT, "python"), src,
                        ignore=shutil.ignore_patterns("__pycache__", "tests"))
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                       check=True)
        py = os.path.join(venv, "bin", "python")
        r = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-build-isolation",
                            "--no-cache-dir", src], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        probe = ("import hasp, os; print(hasp.__file__); f = hasp.Fence(); "
                 "print(f.admit(7), f.admit(6), hasp.__version__)")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        r = subprocess.run([py, "-c", probe], capture_output=True, text=True, cwd=tmp, env=env)
        assert r.returncode == 0, r.stderr
        where, admitted = r.stdout.splitlines()
        assert where.startswith(venv + os.sep)
        assert admitted == "True False 0.1.0"
    finally:
        shutil.rmtree(tmp)
