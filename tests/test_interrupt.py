"""Ctrl-C during ``faultline ingest``: exit 130, one line, nothing written, no .lock.

Driven as a user would: ``faultline ingest`` runs in a subprocess and gets a real
SIGINT while it is inside a phase. ``FAULTLINE_TEST_PAUSE_AT=<phase>`` makes the CLI
say ``paused at <phase>`` on stderr and sleep as that phase starts (the load and
root-cause phases are inside the database transaction), so the signal lands there and
not a moment before or after.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from faultline.ingest_cli import INTERRUPTED, PAUSE_ENV
from faultline.pipeline.run import PHASES

LINE = f"faultline ingest: {INTERRUPTED}"


def _interrupted_ingest(corpus: list[Path], db: Path, phase: str) -> tuple[int, str]:
    """Run ingest, wait until it pauses at ``phase``, send SIGINT; (exit code, stderr)."""
    env = dict(os.environ, **{PAUSE_ENV: phase})
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultline", "ingest", *map(str, corpus), "--db", str(db)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    first = proc.stderr.readline()
    assert first.strip() == f"faultline: paused at {phase}", first
    proc.send_signal(signal.SIGINT)
    try:
        rest = proc.stderr.read()  # until the process closes it
        code = proc.wait(timeout=120)
    finally:
        proc.kill()
    return code, rest


def _snapshot(db: Path) -> tuple:
    with duckdb.connect(str(db), read_only=True) as con:
        return tuple(con.execute(q).fetchall() for q in (
            "SELECT path, sha256, lines, reject_lines FROM files ORDER BY path",
            "SELECT count(*), count(DISTINCT event_id) FROM events",
            "SELECT interruption_id, component FROM interruptions ORDER BY 1",
            "SELECT count(*) FROM attempts"))


@pytest.fixture(scope="module")
def corpora(repo_root):
    hosts = repo_root / "fixtures" / "sample" / "corpus" / "hosts"
    return hosts / "node0001", hosts / "node0002"


@pytest.mark.parametrize("phase", PHASES)
def test_ctrl_c_on_a_new_database_leaves_nothing(phase, corpora, tmp_path):
    db = tmp_path / "new.duckdb"
    code, err = _interrupted_ingest([corpora[0]], db, phase)
    assert code == 130, err
    assert err.strip().splitlines() == [LINE]  # one line, no traceback
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no db, .wal, .lock, staging


@pytest.mark.parametrize("phase", ["parse", "load", "root causes"])
def test_ctrl_c_leaves_an_existing_database_as_it_was(phase, corpora, tmp_path):
    from typer.testing import CliRunner

    from faultline.cli import app

    db = tmp_path / "x.duckdb"
    first = CliRunner().invoke(app, ["ingest", str(corpora[0]), "--db", str(db)])
    assert first.exit_code == 0, first.output
    before = _snapshot(db)
    code, err = _interrupted_ingest(list(corpora), db, phase)  # node0002 is new work
    assert code == 130, err
    assert err.strip().splitlines() == [LINE]
    assert _snapshot(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.duckdb"]
    # and the next run finishes the work
    again = CliRunner().invoke(app, ["ingest", *map(str, corpora), "--db", str(db)])
    assert again.exit_code == 0, again.output
    assert len(_snapshot(db)[0]) > len(before[0])


def test_ctrl_c_in_simulate_is_one_line_and_130(tmp_path):
    out = tmp_path / "sim"
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultline", "simulate", "--preset", "small", "--out",
         str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not any(out.rglob("*.log")) and time.monotonic() < deadline:
            time.sleep(0.05)  # until it is writing files
        assert proc.poll() is None, "simulate finished before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        err = proc.stderr.read() if proc.stderr else ""
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
    assert code == 130, err
    assert err.strip().splitlines() == [
        "faultline simulate: interrupted; the corpus under --out is incomplete; run again "
        "to write it"]


def test_a_ctrl_c_during_a_duckdb_query_is_told_from_other_errors(tmp_path):
    """DuckDB's client interrupts a query on SIGINT and raises
    ``RuntimeError("Query interrupted")``, swallowing the ``KeyboardInterrupt``
    (duckdb 2.0.1); the CLI tells it from other errors."""
    import threading

    from faultline import ctrl_c

    con = duckdb.connect(str(tmp_path / "q.duckdb"))
    con.execute("SET threads = 1")
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(BaseException) as got:  # whatever the client raises
            con.execute("SELECT count(DISTINCT md5(range::VARCHAR)) "
                        "FROM range(2000000000)").fetchall()
    finally:
        timer.cancel()
        con.close()
    assert isinstance(got.value, KeyboardInterrupt) or ctrl_c.query_interrupted(got.value)
    assert not ctrl_c.query_interrupted(RuntimeError("Query failed"))
    assert not ctrl_c.query_interrupted(ValueError("Query interrupted"))
    # a KeyboardInterrupt raised in Python a query called, as DuckDB reports it
    assert ctrl_c.query_interrupted(duckdb.InvalidInputException(
        "Python Object \"t\" of type \"Table\" registered as 'memo_rows' failed: "
        "KeyboardInterrupt: "))
    assert not ctrl_c.query_interrupted(duckdb.InvalidInputException("registered as 'x' failed"))


@pytest.mark.parametrize("command", [["ingest", "CORPUS", "--db", "DB"], ["report", "--db", "DB"]])
def test_an_interrupted_query_is_one_line_and_130(command, monkeypatch, tmp_path, repo_root):
    """Ctrl-C during ingest's load used to end in a traceback and exit 1: the query
    it interrupted raised ``RuntimeError("Query interrupted")``. Now it is Ctrl-C, for
    ingest (its own line: nothing was written) and for every other command."""
    from typer.testing import CliRunner

    import faultline.db as fdb
    from faultline import cli, report
    from faultline.pipeline import run

    def interrupted(*_args, **_kwargs):
        raise RuntimeError("Query interrupted")

    monkeypatch.setattr(run, "ingest", interrupted)
    monkeypatch.setattr(report, "breakdown", interrupted)
    db = tmp_path / "x.duckdb"
    if command[0] == "report":  # a faultline database to report on
        fdb.connect(db).close()
    args = [str(repo_root / "fixtures" / "sample" / "corpus") if a == "CORPUS"
            else str(db) if a == "DB" else a for a in command]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 130, result.output
    assert "Traceback" not in result.output
    assert f"faultline {command[0]}: interrupted" in result.output
