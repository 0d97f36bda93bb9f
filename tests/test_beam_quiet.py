"""Beam's own output stays off the terminal: what ``ingest`` prints is faultline's."""

from __future__ import annotations

import subprocess
import sys

CHATTER = ("apitools not found", "Logging handler created", "WARNING:", "INFO:",
           "Traceback")


def test_multi_process_ingest_prints_only_faultlines_lines(repo_root, tmp_path):
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    done = subprocess.run(
        [sys.executable, "-m", "faultline", "ingest", str(corpus), "--db",
         str(tmp_path / "x.duckdb"), "--workers", "2"],
        capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ingested ")
    for word in CHATTER:
        assert word not in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.duckdb"]  # log went too
