"""A host whose clock disagrees with the cluster's is named after ingest.

The host's own clock stamps its job-log lines and the Slurm controller's stamps sacct's
start times; every host of a job starts within seconds of the others, so a host whose
lines begin two hours later than everyone else's runs two hours ahead."""

from __future__ import annotations

import datetime as dt
import gzip
import re
import shutil

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.cli import app

ISO = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z", re.M)
AHEAD = dt.timedelta(hours=2)


def _shift(data: bytes) -> bytes:
    def later(m: re.Match[bytes]) -> bytes:
        t = dt.datetime.fromisoformat(m[1].decode()) + AHEAD
        return t.isoformat(timespec="microseconds").encode() + b"Z"
    return ISO.sub(later, data)


@pytest.fixture(scope="module")
def skewed_db(repo_root, tmp_path_factory):
    root = tmp_path_factory.mktemp("skew")
    corpus = root / "corpus"
    shutil.copytree(repo_root / "fixtures" / "sample" / "corpus", corpus)
    shifted = 0
    for log in corpus.glob("jobs/*/node0005.log*"):
        raw = log.read_bytes()
        gz = raw[:2] == b"\x1f\x8b"
        text = gzip.decompress(raw) if gz else raw
        out = _shift(text)
        assert out != text
        log.write_bytes(gzip.compress(out, mtime=0) if gz else out)
        shifted += 1
    assert shifted >= 3
    db = root / "skew.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(corpus), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db, result.output


def test_the_host_with_its_own_clock_is_named(skewed_db):
    _db, output = skewed_db
    warnings = [ln for ln in output.splitlines() if "clock runs" in ln]
    assert len(warnings) == 1, output
    assert "node0005's clock runs 2.0 h ahead of the other hosts'" in warnings[0]


def test_the_view_measures_the_offset(skewed_db):
    db, _ = skewed_db
    with duckdb.connect(str(db), read_only=True) as con:
        rows = dict(con.execute("SELECT host, skew_seconds FROM host_clock_offsets"
                                ).fetchall())
    assert rows["node0005"] == pytest.approx(AHEAD.total_seconds(), abs=60)
    assert all(abs(s) < 60 for h, s in rows.items() if h != "node0005")


def test_agreeing_clocks_give_no_warning(ingested_sample):
    with duckdb.connect(str(ingested_sample), read_only=True) as con:
        skews = [s for (s,) in con.execute(
            "SELECT skew_seconds FROM host_clock_offsets").fetchall()]
    assert len(skews) >= 16 and max(abs(s) for s in skews) < 60


def test_a_rerun_with_nothing_new_warns_from_the_kept_rows(skewed_db, monkeypatch):
    """The warning is kept with the rebuild (``skewed_clocks``): a re-run that parses
    nothing and skips the rebuild says it again without reading the view, which on
    ``llama3`` scans 17M events (pipeline/ingest_state.py)."""
    db, first = skewed_db
    with duckdb.connect(str(db), read_only=True) as con:
        kept = con.execute("SELECT host, jobs FROM skewed_clocks").fetchall()
    assert [h for h, _ in kept] == ["node0005"] and kept[0][1] >= 3
    real = duckdb.DuckDBPyConnection.execute
    views: list[str] = []

    def execute(self, sql, *args):
        if "FROM host_clock_offsets" in sql:
            views.append(sql)
        return real(self, sql, *args)

    monkeypatch.setattr(duckdb.DuckDBPyConnection, "execute", execute)
    corpus = db.parent / "corpus"
    again = CliRunner().invoke(app, ["ingest", str(corpus), "--db", str(db)])
    assert again.exit_code == 0, again.output
    assert "(0 new or changed)" in again.output
    assert not views
    said = [ln for ln in again.output.splitlines() if "clock runs" in ln]
    assert said == [ln for ln in first.splitlines() if "clock runs" in ln]
