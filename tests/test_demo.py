"""``faultline demo`` as a new user meets it: a plain (non-editable) install of the
wheel, run from an empty directory, on a terminal.

The wheel is built from the checkout and installed without dependencies into a scratch
virtual environment whose dependencies come from the developer environment through a
``.pth`` line (a full dependency install is what tests/test_dockerfile.py does). Paths
added that way are not site directories, so the developer environment's editable
finder stays inactive and ``faultline`` really comes from the wheel: the test checks.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from conftest import REPO_ROOT

DEMO_BUDGET_S = 60  # the "well under a minute" is a requirement, not a benchmark


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp / "dist"), str(REPO_ROOT)], check=True, capture_output=True)
    wheel = next((tmp / "dist").glob("faultline-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "dev_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True)
    return venv


def _run_on_a_terminal(argv: list[str], cwd: Path, timeout: float
                       ) -> tuple[int, str, str, float]:
    """Run with stderr on a pseudo-terminal (where the progress bar goes)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    env.pop("VIRTUAL_ENV", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=follower,
                            env=env, text=True)
    os.close(follower)
    tty = bytearray()
    while True:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            tty += chunk
        elif proc.poll() is not None:
            break
        if time.perf_counter() - t0 > timeout:
            proc.kill()
            pytest.fail(f"demo took longer than {timeout} s")
    out = proc.stdout.read()
    code = proc.wait()
    os.close(leader)
    return code, out, tty.decode("utf-8", "replace"), time.perf_counter() - t0


@pytest.mark.slow
def test_demo_after_a_plain_install_from_an_empty_directory(wheel_venv, tmp_path):
    where = subprocess.run([str(wheel_venv / "bin" / "python"), "-c",
                            "import faultline.fixtures as f; print(f.__file__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path)
    assert where.stdout.startswith(str(wheel_venv))  # the wheel's copy, not the checkout
    code, out, tty, seconds = _run_on_a_terminal([str(wheel_venv / "bin" / "faultline"),
                                                  "demo"], tmp_path, DEMO_BUDGET_S)
    assert code == 0, out + tty
    assert seconds < DEMO_BUDGET_S
    # a progress bar per phase on the terminal, the parse bar with a count of files
    for label in ("discover:", "parse: reading files", "load:", "root causes:"):
        assert label in tty, tty[-2000:]
    assert re.search(r"\d+/\d+ files", tty), tty[-2000:]
    # the breakdown, with the published table beside it
    assert "Root causes of interruptions" in out
    for component in ("Faulty GPU", "HBM3", "Software Bug", "Planned Maintenance"):
        assert component in out
    assert re.search(r"\d+ unexpected \+ \d+ planned = \d+ interruptions", out)
    db = tmp_path / "faultline-demo.duckdb"
    assert db.is_file() and str(db) in out
    html = tmp_path / "faultline-demo.html"
    assert f"HTML report: {html}" in out
    page = html.read_text(encoding="utf-8")
    assert "<svg" in page or "vega" in page.lower()
    # nothing is fetched to show it: no external scripts, styles or images
    assert not re.search(r'<(?:script|link|img)\b[^>]*(?:src|href)="(?:https?:)?//', page)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "faultline-demo.duckdb", "faultline-demo.html"]  # no .lock left behind
