"""``faultline ingest`` on a terminal: one progress bar per phase, each ending at 100%.

Run as a user would, with stderr on a pseudo-terminal (rich draws bars only there).
The last frame rich draws is what stays on the screen: it must name the four phases
(discover, parse, load, root causes) and show each at 100%, the parse bar with every
file counted (it used to stop at the last shard it had seen, e.g. 3028/3108).
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios

from faultline.pipeline.run import PHASES

ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


def _on_a_terminal(argv: list[str], columns: int = 100) -> tuple[int, str, str]:
    """Run ``argv`` with stderr on a pty; (exit code, stdout, the screen's last frame)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave, env=dict(os.environ, TERM="xterm", COLUMNS=str(columns)))
    os.close(slave)
    raw = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        raw += chunk
    os.close(master)
    out = proc.stdout.read().decode() if proc.stdout else ""
    code = proc.wait(timeout=300)
    text = ANSI.sub("", raw.decode(errors="replace")).replace("\r", "\n")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return code, out, "\n".join(lines[-len(PHASES):])


def test_one_bar_per_phase_each_ending_at_100(repo_root, tmp_path):
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    files = sum(1 for p in corpus.rglob("*") if p.is_file())
    code, out, screen = _on_a_terminal(
        [sys.executable, "-m", "faultline", "ingest", str(corpus), "--db",
         str(tmp_path / "x.duckdb")])
    assert code == 0, screen
    assert out.startswith(f"ingested {files} files")
    rows = screen.splitlines()
    assert [r.split(":")[0].strip(" ⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏") for r in rows] == list(PHASES), screen
    assert all("100%" in r for r in rows), screen
    assert f"{files}/{files} files" in rows[1], screen
