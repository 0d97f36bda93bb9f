"""End-to-end ingest: the Beam pipeline into DuckDB, checked against ground truth,
re-run for idempotency, and run again in Beam's multi-process mode."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.cli import app
from faultline.pipeline.run import ingest

TABLES = ("files", "events", "rejects", "attempts")


def _ingest_cli(corpus: Path, db: Path, *extra: str) -> str:
    result = CliRunner().invoke(app, ["ingest", str(corpus), "--db", str(db), *extra])
    assert result.exit_code == 0, result.output
    return result.output


def _dump(db: Path) -> dict[str, list[str]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {t: sorted(map(str, con.execute(f"SELECT * FROM {t}").fetchall()))
                for t in TABLES}


def _truth(root: Path, name: str) -> list[dict]:
    with (root / "truth" / name).open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def sample(tmp_path_factory, repo_root) -> Path:
    """A private copy of the bundled sample (paths in the tables are absolute)."""
    dest = tmp_path_factory.mktemp("sample") / "sample"
    shutil.copytree(repo_root / "fixtures" / "sample", dest)
    return dest


@pytest.fixture(scope="module")
def sample_db(sample, tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("db") / "sample.duckdb"
    out = _ingest_cli(sample / "corpus", db)
    assert out.startswith("ingested 492 files")
    return db


def test_line_accounting_matches_the_truth_exactly(sample, sample_db):
    truth = {r["path"]: int(r["lines"]) for r in _truth(sample, "files.csv")}
    corpus = str(sample / "corpus") + "/"
    with duckdb.connect(str(sample_db), read_only=True) as con:
        rows = con.execute("SELECT path, lines, routine_lines, event_lines, reject_lines "
                           "FROM files").fetchall()
        assert {p.removeprefix(corpus): n for p, n, *_ in rows} == truth
        for path, lines, routine, event, reject in rows:
            assert lines == routine + event + reject, path
        # rejects rows and events' line ranges agree with the per-file counts
        bad = con.execute("""
            SELECT f.path FROM files f
            LEFT JOIN (SELECT path, count(DISTINCT line_no) n FROM rejects GROUP BY path) r
                   ON r.path = f.path
            WHERE coalesce(r.n, 0) <> f.reject_lines
        """).fetchall()
        assert bad == []


def _missing_signals(root: Path, db: Path) -> list:
    corpus = str(root / "corpus") + "/"
    with duckdb.connect(str(db), read_only=True) as con:
        spans = con.execute("SELECT path, line_no, line_end, kind FROM events").fetchall()
    by_path: dict[str, list[tuple[int, int, str]]] = {}
    for path, a, b, kind in spans:
        by_path.setdefault(path.removeprefix(corpus), []).append((a, b, kind))
    missing = []
    for s in _truth(root, "signals.csv"):
        line = int(s["line_no"])
        kinds = {k for a, b, k in by_path.get(s["path"], []) if a <= line <= b}
        if s["kind"] not in kinds:
            missing.append((s["path"], line, s["kind"], kinds))
    return missing


def test_every_truth_signal_is_found_as_its_event(sample, sample_db):
    assert _missing_signals(sample, sample_db) == []


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["small", "skewed"])
def test_other_presets_local_time_and_no_hosts_csv(preset, tmp_path):
    """small writes local time across a DST change; skewed has no hosts.csv."""
    out = tmp_path / preset
    r = CliRunner().invoke(app, ["simulate", "--preset", preset, "--out", str(out),
                                 "--seed", "3"])
    assert r.exit_code == 0, r.output
    tz = {"small": "America/Los_Angeles", "skewed": "Europe/Berlin"}[preset]
    db = tmp_path / "x.duckdb"
    _ingest_cli(out / "corpus", db, "--tz", tz)
    assert _missing_signals(out, db) == []
    truth = {r["path"]: int(r["lines"]) for r in _truth(out, "files.csv")}
    corpus = str(out / "corpus") + "/"
    with duckdb.connect(str(db), read_only=True) as con:
        got = dict(con.execute("SELECT path, lines FROM files").fetchall())
        unmapped = con.execute("SELECT count(*) FROM events WHERE kind = 'xid' AND "
                               "gpu_serial IS NULL").fetchone()[0]
    assert {p.removeprefix(corpus): n for p, n in got.items()} == truth
    assert unmapped == 0


def test_xids_get_their_gpu_from_the_inventory(sample_db):
    with duckdb.connect(str(sample_db), read_only=True) as con:
        unmapped = con.execute("SELECT count(*) FROM events WHERE kind = 'xid' AND "
                               "gpu_serial IS NULL").fetchone()[0]
        mapped = con.execute("SELECT count(*) FROM events WHERE kind = 'xid' AND "
                             "gpu_index BETWEEN 0 AND 7").fetchone()[0]
    assert unmapped == 0 and mapped > 0


def test_times_are_utc_and_timed_where_the_file_allows(sample_db):
    with duckdb.connect(str(sample_db), read_only=True) as con:
        q = dict(con.execute("SELECT ts_quality, count(*) FROM events WHERE kind NOT IN "
                             "('gpu_inventory', 'host_alias') GROUP BY 1").fetchall())
        assert q.get("untimed", 0) == 0  # inventories and aliases carry no time
        lo, hi = con.execute("SELECT min(ts), max(ts) FROM events").fetchone()
    assert lo.year == 2024 and hi.year == 2025  # the sample crosses New Year


def test_attempts_follow_the_runs(sample, sample_db):
    truth = _truth(sample, "interruptions.csv")
    with duckdb.connect(str(sample_db), read_only=True) as con:
        runs = dict(con.execute("SELECT run, count(*) FROM attempts GROUP BY run").fetchall())
    assert runs["trainer/llama3-405b"] == len(truth) + 1


def test_reingest_changes_nothing(sample, sample_db):
    before = _dump(sample_db)
    out = _ingest_cli(sample / "corpus", sample_db)
    assert "(0 new or changed)" in out
    assert _dump(sample_db) == before


def test_changed_file_replaces_its_rows(sample, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(sample / "corpus", corpus)
    db = tmp_path / "t.duckdb"
    ingest([corpus], db)
    kern = next(corpus.glob("hosts/*/kern.log"))
    with kern.open("a") as f:
        f.write("2025-01-02T06:00:00+00:00 node0000 kernel: NVRM: Xid (PCI:0000:18:00): 79, "
                "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
    summary = ingest([corpus], db)
    assert summary.new_files == 1
    with duckdb.connect(str(db), read_only=True) as con:
        n = con.execute("SELECT count(*) FROM events WHERE path = ? AND kind = 'xid' "
                        "AND xid = 79 AND ts = TIMESTAMPTZ '2025-01-02 06:00:00+00'",
                        [str(kern)]).fetchone()[0]
        files = con.execute("SELECT count(*) FROM files").fetchone()[0]
    assert n == 1 and files == 492


def test_duplicate_files_are_recorded_once(tmp_path, sample):
    corpus = tmp_path / "corpus"
    shutil.copytree(sample / "corpus" / "hosts" / "node0002", corpus / "a")
    shutil.copytree(sample / "corpus" / "hosts" / "node0002", corpus / "b")
    db = tmp_path / "d.duckdb"
    ingest([corpus], db)
    with duckdb.connect(str(db), read_only=True) as con:
        dups = con.execute("SELECT path, duplicate_of, routine_lines = lines FROM files "
                           "WHERE duplicate_of IS NOT NULL").fetchall()
        paths_with_events = {r[0] for r in con.execute(
            "SELECT DISTINCT path FROM events").fetchall()}
    assert dups and all(d[2] for d in dups)
    assert all(d[1].startswith(str(corpus / "a")) for d in dups)
    assert not any(p.startswith(str(corpus / "b")) for p in paths_with_events)


@pytest.mark.slow
def test_multiprocess_mode_gives_the_same_tables(sample, sample_db, tmp_path):
    db = tmp_path / "mp.duckdb"
    _ingest_cli(sample / "corpus", db, "--workers", "2")
    assert _dump(db) == _dump(sample_db)


def test_bad_usage_exits_2(tmp_path):
    r = CliRunner().invoke(app, ["ingest", str(tmp_path / "nope"), "--db",
                                 str(tmp_path / "x.duckdb")])
    assert r.exit_code == 2 and "no such file" in r.output
    r = CliRunner().invoke(app, ["ingest", str(tmp_path), "--db", str(tmp_path / "x.db"),
                                 "--tz", "Mars/Olympus"])
    assert r.exit_code == 2


def test_a_second_ingest_on_the_same_database_fails_clearly(tmp_path, sample):
    from faultline.pipeline.run import IngestError, exclusive

    db = tmp_path / "l.duckdb"
    with exclusive(db), pytest.raises(IngestError, match="another faultline ingest"):
        ingest([sample / "corpus" / "slurm"], db)


def test_a_database_of_another_schema_is_refused_clearly(tmp_path, sample):
    """An older faultline's database is not written into: that would fail half-way."""
    corpus = sample / "corpus" / "slurm"
    db = tmp_path / "old.duckdb"
    _ingest_cli(corpus, db)
    with duckdb.connect(str(db)) as con:
        con.execute("ALTER TABLE files DROP COLUMN parsed_with")
    r = CliRunner().invoke(app, ["ingest", str(corpus), "--db", str(db)])
    assert r.exit_code == 2
    assert "written by another faultline version" in r.output
    assert "parsed_with" in r.output
