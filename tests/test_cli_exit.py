"""``faultline``'s exit (``cli._exit``): the process ends as ``sys.exit`` would end it,
less the interpreter's teardown. What the teardown would have done that a user can see
still happens: the exit status, a message given as the code, ``atexit`` handlers (a
temporary directory's cleanup among them), a non-daemon thread's last work, and output
still buffered for a pipe; and an executor left open (its idle worker threads are not
daemons) does not keep the process from ending."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_SCRIPT = textwrap.dedent("""
    import atexit, json, sys, tempfile, threading, time
    from pathlib import Path
    from faultline.cli import _exit
    out = Path(sys.argv[1])
    atexit.register(lambda: (out / "atexit").touch())
    kept = tempfile.TemporaryDirectory(dir=out)  # cleaned up at exit (weakref.finalize)
    (out / "tempdir").write_text(kept.name)
    def late():
        time.sleep(0.3)
        (out / "thread").touch()
    threading.Thread(target=late).start()
    import concurrent.futures
    pool = concurrent.futures.ThreadPoolExecutor(2)  # left open, as an interrupted run does
    pool.submit(time.sleep, 0.01)
    print("x" * 100_000)  # more than a pipe's buffer: still buffered at the exit
    _exit(json.loads(sys.argv[2]))  # the code as sys.exit would get it
""")


@pytest.mark.parametrize(("code", "status", "stderr"), [
    ("null", 0, ""), ("0", 0, ""), ("2", 2, ""), ("130", 130, ""),
    ('"faultline: no such database"', 1, "faultline: no such database\n"),
])
def test_the_exit_does_what_the_teardown_would_have(code, status, stderr, tmp_path):
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path), code],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == status, done.stderr
    assert done.stderr == stderr
    assert done.stdout == "x" * 100_000 + "\n"
    assert (tmp_path / "atexit").exists()
    assert (tmp_path / "thread").exists()
    assert not Path((tmp_path / "tempdir").read_text()).exists()


def test_the_console_script_exits_with_the_commands_status(tmp_path):
    """A usage error is 2 (INTERFACE.md), through ``main`` and its fast exit."""
    done = subprocess.run([sys.executable, "-m", "faultline", "report", "--db",
                           str(tmp_path / "none.duckdb"), "--no-such-option"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "no-such-option" in done.stderr
