"""Re-runs: incremental ingest of new files only, re-parsing when the settings change,
a run killed with SIGKILL at any point, and two runs racing for one database.

Each case ends by comparing every table with one clean run over the same files."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from snapshot import snapshot

from faultline.pipeline.run import ingest


def _split_corpus(repo_root: Path, dest: Path) -> tuple[Path, Path]:
    """The sample corpus at ``dest/corpus`` with half its hosts held back in
    ``dest/later`` (moved in by the test to make an incremental run)."""
    corpus = dest / "corpus"
    shutil.copytree(repo_root / "fixtures" / "sample" / "corpus", corpus)
    later = dest / "later"
    hosts = sorted((corpus / "hosts").iterdir())
    for h in hosts[len(hosts) // 2:]:
        shutil.move(h, later / h.name)
    return corpus, later


def _move_back(corpus: Path, later: Path) -> int:
    moved = 0
    for h in sorted(later.iterdir()):
        moved += sum(1 for p in h.rglob("*") if p.is_file())
        shutil.move(h, corpus / "hosts" / h.name)
    return moved


@pytest.fixture(scope="module")
def full(repo_root, tmp_path_factory) -> tuple[Path, Path, Path, int]:
    """(corpus, clean db, incremental db, files added by the second run).

    The incremental db saw half the hosts, then all of them; the clean db saw all of
    them once. Both read the same files at the same paths."""
    root = tmp_path_factory.mktemp("rerun")
    corpus, later = _split_corpus(repo_root, root)
    inc = root / "incremental.duckdb"
    first = ingest([corpus], inc)
    added = _move_back(corpus, later)
    second = ingest([corpus], inc)
    assert second.new_files == added > 0
    assert second.files == first.files + added
    clean = root / "clean.duckdb"
    ingest([corpus], clean)
    return corpus, clean, inc, added


def test_incremental_ingest_equals_one_clean_run(full):
    _, clean, inc, _ = full
    assert snapshot(inc) == snapshot(clean)


def test_a_rerun_does_not_read_stored_files_again(full, tmp_path):
    """A stored file whose size and mtime are unchanged is skipped: garbage written
    over it with the same size and mtime is never seen (that is what makes re-runs
    cheap; a real change moves the mtime)."""
    corpus, clean, _, _ = full
    db = tmp_path / "copy.duckdb"
    shutil.copy(clean, db)
    kern = next(corpus.glob("hosts/*/kern.log"))
    st = kern.stat()
    original = kern.read_bytes()
    try:
        kern.write_bytes(b"x" * st.st_size)
        os.utime(kern, ns=(st.st_atime_ns, st.st_mtime_ns))
        summary = ingest([corpus], db)
    finally:
        kern.write_bytes(original)
        os.utime(kern, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert summary.new_files == 0
    assert snapshot(db) == snapshot(clean)


def test_a_touched_file_is_read_again_and_changes_nothing(full, tmp_path):
    corpus, clean, _, _ = full
    db = tmp_path / "copy.duckdb"
    shutil.copy(clean, db)
    kern = next(corpus.glob("hosts/*/kern.log"))
    st = kern.stat()
    try:
        os.utime(kern, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
        summary = ingest([corpus], db)
    finally:
        os.utime(kern, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert summary.new_files == 0
    before, after = snapshot(clean), snapshot(db)
    assert {t: rows for t, rows in after.items() if t != "files"} == {
        t: rows for t, rows in before.items() if t != "files"}
    with duckdb.connect(str(db), read_only=True) as con:
        (mtime,), = con.execute("SELECT mtime FROM files WHERE path = ?",
                                [str(kern)]).fetchall()
    assert mtime == pytest.approx(st.st_mtime + 5)


@pytest.mark.slow
def test_a_new_zone_reparses_every_file(full, tmp_path):
    """Rows depend on --tz: changing it must not keep rows parsed under the old one."""
    corpus, clean, _, _ = full
    db = tmp_path / "copy.duckdb"
    shutil.copy(clean, db)
    summary = ingest([corpus], db, tz="America/New_York")
    assert summary.new_files == summary.files
    fresh = tmp_path / "fresh.duckdb"
    ingest([corpus], fresh, tz="America/New_York")
    assert snapshot(db) == snapshot(fresh)


# --- killed runs ----------------------------------------------------------------------

# Kill points inside the transaction are reached exactly: the child process wraps the
# step, and SIGKILLs itself right after it (before COMMIT). Nothing in faultline knows.
_SELF_KILL = """
import os, signal, sys
import faultline.classifiers.interruptions as interruptions
import faultline.pipeline.run as run

def after(module, name):
    real = getattr(module, name)
    def step(*args, **kwargs):
        out = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    setattr(module, name, step)

{patch}
from faultline.cli import main
sys.argv = ["faultline", *sys.argv[1:]]
main()
"""
HOLD_IN_LOAD = """
import time
_load = run.load_shards
def _slow_load(*args, **kwargs):
    time.sleep(10)
    return _load(*args, **kwargs)
run.load_shards = _slow_load
"""
KILL_AFTER = {"building": "import faultline.pipeline.beamrun as beamrun\n"
                          "after(beamrun, 'build_pipeline')",  # in-process (one worker)
              "loading": "after(run, 'load_shards')",
              "classifying": "after(interruptions, 'rebuild')"}


def _start(corpus: Path, db: Path, patch: str = "", temp: Path | None = None,
           ) -> subprocess.Popen:
    """The ingest in a child process (``_SELF_KILL``), with ``temp`` as its TMPDIR."""
    code = _SELF_KILL.format(patch=patch)
    env = os.environ if temp is None else {**os.environ, "TMPDIR": str(temp)}
    return subprocess.Popen([sys.executable, "-c", code, "ingest", str(corpus),
                             "--db", str(db)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _left_in(temp: Path, timeout: float = 10.0) -> list[str]:
    """What stays in ``temp`` (a fork server sees its driver die and removes its own
    directory in its own time: waited for)."""
    deadline = time.monotonic() + timeout
    while (left := sorted(p.name for p in temp.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _wait_for(cond, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            pytest.fail(f"ingest ended before the kill point: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("kill point never reached")
        time.sleep(0.02)


def _parsed_files(staging: Path) -> int:
    """Files parsed so far, from the shard names (``<key>-n<rows>.parquet``)."""
    try:
        return sum(int(p.name.rsplit("-n", 1)[1].split(".")[0])
                   for p in (staging / "files").iterdir())
    except FileNotFoundError:
        return 0


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["building", "parsing", "loading", "classifying"])
def test_a_killed_run_leaves_the_last_state_and_the_next_run_completes(
        full, tmp_path, repo_root, phase):
    """SIGKILL once Beam's pipeline is built, while the workers parse, after the
    shards are loaded, or after the interruptions are rebuilt (both inside the
    transaction, before COMMIT): the database is as the previous run left it, nothing
    is left in the temporary directory (Beam's pipeline directory of a killed parse
    was), and running again gives the tables of one clean run."""
    clean_corpus, clean, _, _ = full
    corpus, later = _split_corpus(repo_root, tmp_path)
    db = tmp_path / "killed.duckdb"
    ingest([corpus], db)
    before = snapshot(db)
    _move_back(corpus, later)
    staging = db.with_name(db.name + ".staging")
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = _start(corpus, db, KILL_AFTER.get(phase, ""), temp)
    if phase == "parsing":
        _wait_for(lambda: _parsed_files(staging) > 0, proc)
        proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=300) == -signal.SIGKILL, proc.communicate()
    assert staging.exists(), "the run finished before it was killed"
    assert _left_in(temp) == []
    assert snapshot(db) == before
    ingest([corpus], db)
    assert not staging.exists()
    # the clean run read the same files under another root: compare path-free content
    assert _content(db, corpus) == _content(clean, clean_corpus)


def _content(db: Path, corpus: Path) -> dict[str, list[str]]:
    """The snapshot with the corpus root and mtimes taken out (copies differ in both),
    and ``ingest_state.inputs``, a digest of the absolute paths read."""
    root = str(corpus)
    with duckdb.connect(str(db), read_only=True) as con:
        mtimes = {str(m) for (m,) in con.execute("SELECT mtime FROM files").fetchall()}
    out = {}
    for table, rows in snapshot(db).items():
        fixed = []
        for row in rows:
            if table == "ingest_state":
                row = re.sub(r"^\('[0-9a-f]{64}'", "('<inputs>'", row)
            row = row.replace(root, "<corpus>")
            for m in mtimes:
                row = row.replace(m, "<mtime>")
            fixed.append(row)
        out[table] = sorted(fixed)
    return out


@pytest.mark.slow
def test_a_second_ingest_waits_for_nothing_and_fails_clearly(full, tmp_path):
    """Two ingests on one database: the second exits 2 at once, naming the first; the
    first finishes undisturbed."""
    corpus, clean, _, _ = full
    db = tmp_path / "race.duckdb"
    staging = db.with_name(db.name + ".staging")
    # The first holds the lock for 10 s in its load step, so the second surely starts
    # while it runs (an ingest of the sample alone can finish before a second process
    # has imported faultline).
    first = _start(corpus, db, HOLD_IN_LOAD)
    _wait_for(staging.exists, first)
    second = subprocess.run([sys.executable, "-m", "faultline", "ingest", str(corpus),
                             "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert second.returncode == 2
    assert "another faultline ingest is writing" in second.stderr
    out, errs = first.communicate(timeout=300)
    assert first.returncode == 0, errs
    assert out.startswith("ingested 492 files")
    assert snapshot(db) == snapshot(clean)
