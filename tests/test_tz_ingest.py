"""End to end: a corpus written in local time (the ``small`` preset: America/Los_Angeles
across the November DST change), ingested without ``--tz``, gives the interruptions
the right zone gives, records the inferred zone, and raises no clock warnings."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.cli import app

ZONE = "America/Los_Angeles"


def _run(*args: str) -> str:
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def _interruptions(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT component, culprit_host, failed_at FROM interruptions "
                           "ORDER BY failed_at, component, culprit_host").fetchall()


@pytest.mark.slow
def test_small_without_tz_equals_the_run_with_the_right_zone(tmp_path):
    out = tmp_path / "small"
    said = _run("simulate", "--preset", "small", "--out", str(out))
    assert f"times without a zone are in {ZONE}" in said
    given, inferred = tmp_path / "given.duckdb", tmp_path / "inferred.duckdb"
    _run("ingest", str(out / "corpus"), "--db", str(given), "--tz", ZONE)
    summary = _run("ingest", str(out / "corpus"), "--db", str(inferred))
    assert f"zone {ZONE} inferred from " in summary and "job starts" in summary
    assert "clock runs" not in summary  # host_clock_offsets agrees after inference
    want = _interruptions(given)
    assert len(want) > 40 and _interruptions(inferred) == want
    with duckdb.connect(str(inferred), read_only=True) as con:
        parsed_with = {r[0] for r in con.execute("SELECT DISTINCT parsed_with FROM files")
                       .fetchall()}
        skewed = con.execute("SELECT count(*) FROM host_clock_offsets "
                             "WHERE abs(skew_seconds) > 300").fetchone()[0]
    assert len(parsed_with) == 1 and f"tz={ZONE} (inferred)" in parsed_with.pop()
    assert skewed == 0
    # Re-running infers the same zone: nothing is parsed again.
    again = _run("ingest", str(out / "corpus"), "--db", str(inferred))
    assert "(0 new or changed)" in again
