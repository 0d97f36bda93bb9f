"""Re-runs over files that grew, were rotated, truncated or replaced: each case ends
with the tables equal to one clean ingest of the final files, and a further re-run
that reads nothing and changes nothing.

The comparison is every table of the schema (tests/snapshot.py), nothing ignored: a
grown file's stored rows get the final file's sha256 (event ids included), and its
counts, offsets and mtime are the whole file's; ``ingest_state`` and ``sealed_dirs``
hold what the last run saw, the same final files for both databases. (Fields that do
differ legitimately elsewhere: ``files.mtime`` after a touch, in test_reruns.py, and
the digest of absolute paths in ``ingest_state.inputs`` for a copy at another root.)
"""

from __future__ import annotations

import gzip
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from snapshot import snapshot

from faultline.classifiers import overrides as ov
from faultline.pipeline.run import ingest

HOSTS = ("node0000", "node0001")  # rfc3164 and rfc3339 kernel logs
JOB = "1214274"


@pytest.fixture(scope="module")
def originals(repo_root) -> dict[str, bytes]:
    src = repo_root / "fixtures" / "sample" / "corpus"
    out = {f"hosts/{h}/kern.log": (src / "hosts" / h / "kern.log").read_bytes()
           for h in HOSTS}
    out[f"jobs/{JOB}/node0005.log"] = (src / "jobs" / JOB / "node0005.log").read_bytes()
    return out


def _corpus(repo_root: Path, dest: Path) -> Path:
    """A small corpus from the sample: job records, two hosts (their kern.log only),
    one job's logs."""
    src = repo_root / "fixtures" / "sample" / "corpus"
    c = dest / "corpus"
    (c / "slurm").mkdir(parents=True)
    # the job records up to this job's: its log may still grow (it ended less than a
    # day before the newest record; ingest_state.sealable), older jobs' may not
    head, *rows = (src / "slurm" / "sacct.txt").read_text().splitlines(keepends=True)
    (c / "slurm" / "sacct.txt").write_text(head + "".join(
        r for r in rows if r.split("|")[0].split(".")[0] <= JOB))
    shutil.copy(src / "hosts.csv", c / "hosts.csv")
    for h in HOSTS:
        (c / "hosts" / h).mkdir(parents=True)
        shutil.copy(src / "hosts" / h / "kern.log", c / "hosts" / h / "kern.log")
    shutil.copytree(src / "jobs" / JOB, c / "jobs" / JOB)
    return c


def _part(data: bytes, frac: float, mid_line: bool = False) -> bytes:
    """The first ``frac`` of ``data`` at a line end (``mid_line``: 9 bytes into the
    next line, a line still being written)."""
    cut = data.rfind(b"\n", 0, int(len(data) * frac)) + 1
    return data[:cut + (9 if mid_line else 0)]


def _bump(path: Path) -> None:
    """A later mtime, as a write a second later would leave."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


Step = Callable[[Path, dict[str, bytes]], None]


def _set(rel: str, frac: float, mid_line: bool = False) -> Step:
    def step(c: Path, orig: dict[str, bytes]) -> None:
        (c / rel).write_bytes(_part(orig[rel], frac, mid_line))
        _bump(c / rel)
    return step


def _rotate(rel: str, gz: bool = False) -> Step:
    """logrotate: (``gz``: name.1 -> name.2.gz,) name -> name.1, a new empty name."""
    def step(c: Path, orig: dict[str, bytes]) -> None:
        p = c / rel
        one = p.with_name(p.name + ".1")
        if gz:
            two = p.with_name(p.name + ".2.gz")
            two.write_bytes(gzip.compress(one.read_bytes(), mtime=0))
            one.unlink()
        p.rename(one)
        p.write_bytes(b"")
    return step


def _append_rest(rel: str, start: float, end: float) -> Step:
    """Lines [start, end) of the original appended to what the file holds now."""
    def step(c: Path, orig: dict[str, bytes]) -> None:
        data = orig[rel]
        a = data.rfind(b"\n", 0, int(len(data) * start)) + 1
        b = data.rfind(b"\n", 0, int(len(data) * end)) + 1
        with (c / rel).open("ab") as f:
            f.write(data[a:b])
        _bump(c / rel)
    return step


def _copytruncate(rel: str, then: str) -> Step:
    """logrotate's copytruncate (name copied to name.1, name emptied), then the
    writer fills the file again, past its old size, with the content of ``then``: a
    re-run finds it grown, but not with the bytes it read (the prefix hash)."""
    def step(c: Path, orig: dict[str, bytes]) -> None:
        p = c / rel
        shutil.copy2(p, p.with_name(p.name + ".1"))
        with p.open("r+b") as f:
            f.truncate(0)
        assert len(orig[then]) > p.with_name(p.name + ".1").stat().st_size
        with p.open("ab") as f:
            f.write(orig[then])
        _bump(p)
    return step


def _swap_first_lines(rel: str) -> Step:
    """Other content of the same size: the first two lines swapped."""
    def step(c: Path, orig: dict[str, bytes]) -> None:
        p = c / rel
        lines = p.read_bytes().splitlines(keepends=True)
        lines[0], lines[1] = lines[1], lines[0]
        p.write_bytes(b"".join(lines))
        _bump(p)
    return step


K0, K1 = (f"hosts/{h}/kern.log" for h in HOSTS)
J = f"jobs/{JOB}/node0005.log"

# name -> (the files' first state, the steps, each followed by an incremental ingest;
# which steps must continue a grown file rather than read it whole)
CASES: dict[str, tuple[list[Step], list[Step], list[set[str]]]] = {
    # appends, some stopping inside a line (read, and read again once complete)
    "grown": ([_set(K0, .3), _set(K1, .3), _set(J, .3)],
              [_set(K0, .5, mid_line=True), _set(K1, .6), _set(J, .5, mid_line=True),
               _set(K0, .8), _set(K1, .9, mid_line=True), _set(J, .9),
               _set(K0, 1), _set(K1, 1), _set(J, 1)],
              [{K0}, {K1}, {J}, {K0}, {K1}, {J}, {K0}, {K1}, {J}]),
    # kern.log -> kern.log.1: a new path that starts with what was read as kern.log,
    # so it continues kern.log's rows; the new kern.log is read whole once (it was
    # empty), then continued
    "rotated": ([_set(K0, .4)],
                [_append_rest(K0, .4, .6), _rotate(K0), _append_rest(K0, .6, .8),
                 _append_rest(K0, .8, 1)],
                [{K0}, {K0 + ".1"}, set(), {K0}]),
    # then kern.log.1 -> kern.log.2.gz (new, gzip: read whole) and kern.log ->
    # kern.log.1 (a stored path with other bytes now: read whole)
    "rotated_gz": ([_set(K1, .3)],
                   [_rotate(K1), _append_rest(K1, .3, .5), _rotate(K1, gz=True),
                    _append_rest(K1, .5, .8), _append_rest(K1, .8, 1)],
                   [{K1 + ".1"}, set(), set(), set(), {K1}]),
    # shorter than read: read whole; then continued
    "truncated": ([_set(K0, .8)], [_set(K0, .3), _append_rest(K0, .3, .6)],
                  [set(), {K0}]),
    # copied away (the copy continues the rows read), emptied, written again past its
    # old size: the prefix hash differs, read whole
    "copytruncate": ([_set(K1, .5)],
                     [_copytruncate(K1, then=K0)],
                     [{K1 + ".1"}]),
    # the same size, other bytes, a later mtime: read whole
    "replaced_same_size": ([], [_swap_first_lines(K0), _swap_first_lines(J)],
                           [set(), set()]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_changed_file_gives_the_tables_of_a_clean_ingest(case, repo_root, tmp_path,
                                                          originals):
    first, steps, continued = CASES[case]
    c = _corpus(repo_root, tmp_path)
    for step in first:
        step(c, originals)
    db = tmp_path / "inc.duckdb"
    ingest([c], db)
    for step, expect in zip(steps, continued, strict=True):
        step(c, originals)
        summary = ingest([c], db)
        got = {str(Path(p).relative_to(c)) for p in summary.resumed}
        assert got == expect, (case, step, got)
    clean = tmp_path / "clean.duckdb"
    ingest([c], clean)
    assert snapshot(db) == snapshot(clean)
    again = ingest([c], db)
    assert again.new_files == 0 and not again.resumed
    assert snapshot(db) == snapshot(clean)


# --- re-runs with nothing new ----------------------------------------------------------


def _root_causes(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT interruption_id, component FROM interruptions "
                           "ORDER BY interruption_id").fetchall()


def test_a_rerun_with_nothing_new_keeps_the_interruptions_unless_their_inputs_change(
        repo_root, tmp_path, originals):
    """Nothing parsed and the same fingerprint: the rebuild is skipped (and the
    tables are as a rebuild leaves them). An override stored between runs (as
    ``faultline override`` does), another ``--run``, or a grown file rebuild."""
    c = _corpus(repo_root, tmp_path)
    db = tmp_path / "db.duckdb"
    first = ingest([c], db)
    assert not first.rebuild_skipped and first.interruptions > 0
    before = snapshot(db)
    again = ingest([c], db)
    assert again.rebuild_skipped and again.new_files == 0
    assert (again.interruptions, again.rebuilt) == (first.interruptions, first.rebuilt)
    assert snapshot(db) == before
    # an override written outside ingest changes a root cause: the next run rebuilds
    iid, component = _root_causes(db)[0]
    other = next(n for n in ov.known_components() if n != component)
    with duckdb.connect(str(db)) as con:
        ov.put(con, [ov.Override(iid, other, "test", None, "test", "cli")])
    overridden = ingest([c], db)
    assert not overridden.rebuild_skipped
    assert dict(_root_causes(db))[iid] == other
    assert ingest([c], db).rebuild_skipped
    # another --run: rebuilt (that run's rows only), then a plain run rebuilds all
    with duckdb.connect(str(db), read_only=True) as con:
        (run,), = con.execute("SELECT min(run) FROM interruptions").fetchall()
    assert not ingest([c], db, run=run).rebuild_skipped
    assert ingest([c], db, run=run).rebuild_skipped
    assert not ingest([c], db).rebuild_skipped
    # a grown file: parsed, so rebuilt
    with (c / K0).open("ab") as f:
        f.write(originals[K0].splitlines(keepends=True)[0])
    grown = ingest([c], db)
    assert grown.resumed and not grown.rebuild_skipped
    assert "1 grown files read from where the last run stopped" in grown.line()


def test_a_finished_jobs_directory_is_checked_by_one_stat_on_a_rerun_with_nothing_new(
        repo_root, tmp_path, originals):
    """The stated limit of sealed directories (docs/reruns.md): a re-run with nothing
    new takes the files of a finished job's unchanged directory as unchanged, and
    says how many; an append there is noticed by the next run with anything new."""
    c = _corpus(repo_root, tmp_path)
    old_job = "1214009"  # ended days before the corpus's newest job record
    shutil.copytree(repo_root / "fixtures" / "sample" / "corpus" / "jobs" / old_job,
                    c / "jobs" / old_job)
    db = tmp_path / "db.duckdb"
    ingest([c], db)
    with duckdb.connect(str(db), read_only=True) as con:
        sealed = {Path(p).name for p, in con.execute(
            "SELECT path FROM sealed_dirs").fetchall()}
    assert old_job in sealed and JOB not in sealed
    n_old = sum(1 for _ in (c / "jobs" / old_job).iterdir())
    log = next(p for p in sorted((c / "jobs" / old_job).iterdir()) if p.suffix == ".log")
    with log.open("ab") as f:  # a late write into a finished job's log...
        f.write(log.read_bytes().splitlines(keepends=True)[-1])
    _bump(log)
    quick = ingest([c], db)  # ...is not seen by a re-run with nothing else new
    assert quick.new_files == 0 and quick.unchecked == n_old
    assert f"{n_old} files of finished jobs not re-checked" in quick.line()
    with (c / K0).open("ab") as f:  # anything new: every file is checked again
        f.write(originals[K0].splitlines(keepends=True)[0])
    _bump(c / K0)
    full = ingest([c], db)
    assert full.unchecked == 0 and full.new_files == 2
    clean = tmp_path / "clean.duckdb"
    ingest([c], clean)
    assert snapshot(db) == snapshot(clean)
    # a file added to a sealed directory changes its mtime: it is checked again
    (c / "jobs" / old_job / "extra.log").write_bytes(log.read_bytes()[:200])
    assert ingest([c], db).new_files == 1
