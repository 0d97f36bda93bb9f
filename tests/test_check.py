"""``faultline check``: the data-quality suites pass on sound databases and catch each
kind of damage, naming the expectation that broke, with exit 1."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline import db as fdb
from faultline.check import run_checks
from faultline.cli import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, app
from faultline.schemas import quality
from faultline.schemas.tables import TABLES, VIEWS
from faultline.schemas.taxonomy import load_taxonomy

runner = CliRunner()


def _ingest(corpus: Path, db: Path, *extra: str) -> Path:
    result = runner.invoke(app, ["ingest", str(corpus), "--db", str(db), *extra])
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory, repo_root) -> Path:
    """The bundled sample corpus, ingested (read in place: nothing writes to it)."""
    db = tmp_path_factory.mktemp("sample") / "sample.duckdb"
    return _ingest(repo_root / "fixtures" / "sample" / "corpus", db)


@pytest.fixture(scope="module")
def other_db(tmp_path_factory) -> Path:
    """Another simulated cluster: the small preset (DST change, RoCE, other host names)
    with another seed."""
    out = tmp_path_factory.mktemp("small3")
    result = runner.invoke(app, ["simulate", "--preset", "small", "--seed", "3",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    return _ingest(out / "corpus", out / "small.duckdb", "--tz", "America/Los_Angeles")


def _check(db: Path):
    return runner.invoke(app, ["check", "--db", str(db)])


def test_check_passes_on_the_sample_and_writes_nothing(sample_db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _check(sample_db)
    assert result.exit_code == EXIT_OK, result.output
    n = quality.expectation_count(quality.datasets())
    assert f"faultline check: {n} expectations" in result.output
    assert "all passed" in result.output
    assert list(tmp_path.iterdir()) == []  # no gx/ folder, no analytics files


def test_check_passes_on_another_simulated_cluster(other_db):
    result = _check(other_db)
    assert result.exit_code == EXIT_OK, result.output


FIRST_EXACT = "(SELECT min(event_id) FROM events WHERE ts_quality = 'exact')"
FIRST_UNEXPECTED = "(SELECT min(interruption_id) FROM interruptions WHERE NOT planned)"

# name: (statements that damage a copy of the sample database, failures it must cause)
CORRUPTIONS: dict[str, tuple[list[str], list[str]]] = {
    "event time missing": (
        [f"UPDATE events SET ts = NULL WHERE event_id = {FIRST_EXACT}"],
        ["events: expect_column_values_to_not_be_null(ts)"]),
    "ts_quality outside its vocabulary": (
        [f"UPDATE events SET ts_quality = 'guessed' WHERE event_id = {FIRST_EXACT}"],
        ["events: expect_column_values_to_be_in_set(ts_quality)"]),
    "duplicated event row": (
        ["INSERT INTO events SELECT * FROM events "
         "WHERE event_id = (SELECT min(event_id) FROM events)"],
        ["events: expect_column_values_to_be_unique(event_id)"]),
    "GPU 9 on an 8-GPU host": (
        ["UPDATE events SET gpu_index = 9 WHERE event_id = "
         "(SELECT min(event_id) FROM events WHERE gpu_index IS NOT NULL)"],
        ["events: expect_column_pair_values_a_to_be_greater_than_b"
         "(inventory_max_index, gpu)"]),
    "culprit GPU beyond the inventory": (
        ["UPDATE interruptions SET culprit_gpu = 8 WHERE interruption_id = "
         "(SELECT min(interruption_id) FROM interruptions WHERE culprit_gpu IS NOT NULL)"],
        ["interruptions: expect_column_pair_values_a_to_be_greater_than_b"
         "(inventory_max_index, gpu)"]),
    "file lines off by one": (
        ["UPDATE files SET lines = lines + 1 WHERE path = (SELECT min(path) FROM files)"],
        ["files: expect_column_pair_values_to_be_equal(lines, accounted_lines)"]),
    "reject lost": (
        ["DELETE FROM rejects"],
        ["files: expect_column_pair_values_to_be_equal(reject_lines, rejected_lines)"]),
    "unknown component": (
        ["UPDATE interruptions SET component = 'Flux Capacitor' "
         f"WHERE interruption_id = {FIRST_UNEXPECTED}"],
        ["interruptions: expect_column_values_to_be_in_set(component)",
         # the breakdown view has no row for it, so it no longer adds up
         "breakdown: expect_column_pair_values_to_be_equal"
         "(interruptions, breakdown_interruptions)"]),
    "component and category disagree": (
        ["UPDATE interruptions SET category = CASE WHEN category = 'Host' THEN 'GPU' "
         f"ELSE 'Host' END WHERE interruption_id = {FIRST_UNEXPECTED}"],
        ["interruptions: expect_column_pair_values_to_be_in_set(component, category)"]),
    "unexpected interruption marked planned": (
        [f"UPDATE interruptions SET planned = true WHERE interruption_id = "
         f"{FIRST_UNEXPECTED}"],
        # its component's row still counts in the percentages, its run's unexpected
        # total no longer does: they add up to more than 100
        ["breakdown: expect_column_values_to_be_between(percent_sum)",
         "interruptions: expect_column_pair_values_to_be_in_set(component, planned)"]),
    "evidence names a missing event": (
        ["UPDATE interruption_evidence SET event_id = 'no-such-event' WHERE rowid = "
         "(SELECT min(rowid) FROM interruption_evidence)"],
        ["interruption_evidence: expect_column_values_to_be_in_set(in_events)"]),
    "interruption of a run that has no attempts": (
        [f"UPDATE interruptions SET run = 'ghost/run' WHERE interruption_id = "
         f"{FIRST_UNEXPECTED}"],
        ["interruptions: expect_column_values_to_be_in_set(in_attempts)"]),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_each_corruption_is_caught(name, sample_db, tmp_path):
    statements, expected = CORRUPTIONS[name]
    damaged = tmp_path / "damaged.duckdb"
    shutil.copy(sample_db, damaged)
    with duckdb.connect(str(damaged)) as con:
        for sql in statements:
            con.execute(sql)
    result = _check(damaged)
    assert result.exit_code == EXIT_PROBLEMS, result.output
    failed = [line.removeprefix("FAILED ").split("  ")[0]
              for line in result.output.splitlines() if line.startswith("FAILED ")]
    for want in expected:
        assert want in failed, (want, result.output)
    assert "all passed" not in result.output


def test_chunked_validation_adds_up_to_the_whole(sample_db, tmp_path):
    """Large tables are validated in chunks: the counts must not depend on the size."""
    damaged = tmp_path / "damaged.duckdb"
    shutil.copy(sample_db, damaged)
    with duckdb.connect(str(damaged)) as con:
        con.execute("UPDATE events SET ts = NULL WHERE ts_quality = 'exact' "
                    "AND line_no % 97 = 0")
        broken = con.execute("SELECT count(*) FROM events WHERE ts IS NULL "
                             "AND ts_quality <> 'untimed'").fetchall()[0][0]
    events = tuple(d for d in quality.datasets() if d.name == "events")
    with fdb.connect(damaged, read_only=True) as con:
        whole = run_checks(con, suites=events)
        chunked = run_checks(con, suites=events, chunk_rows=1000)
    assert broken > 5
    for report in (whole, chunked):
        (failure,) = report.failures
        assert failure.expectation == "expect_column_values_to_not_be_null"
        assert failure.unexpected == broken
        assert len(failure.rows) == 5 and all(r["ts"] is None for r in failure.rows)
    assert whole.rows == chunked.rows


def test_a_database_without_faultline_tables_is_bad_usage(tmp_path):
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    result = _check(empty)
    assert result.exit_code == EXIT_USAGE
    assert "not a faultline database" in result.output


def test_suites_derive_from_the_table_declarations():
    """Every nullability, vocabulary, range and key in tables.py has its expectation."""
    by_name = {d.name: d for d in quality.datasets(load_taxonomy())}
    for owner in (*TABLES, *VIEWS):
        d = by_name[owner.name]
        have = {(e.expectation, e.columns) for e in d.expectations if e.when is None}
        for c in owner.columns:
            assert (("ExpectColumnValuesToNotBeNull", (c.name,)) in have) != c.nullable
            if c.values:
                (vocab,) = [e.kwargs["value_set"] for e in d.expectations
                            if e.expectation == "ExpectColumnValuesToBeInSet"
                            and e.columns == (c.name,)]
                assert vocab == list(c.values)
            if c.minimum is not None or c.maximum is not None:
                (rng,) = [e.kwargs for e in d.expectations
                          if e.expectation == "ExpectColumnValuesToBeBetween"
                          and e.columns == (c.name,)]
                assert (rng["min_value"], rng["max_value"]) == (c.minimum, c.maximum)
        if owner.key:
            (unique,) = by_name[f"{owner.name} key"].expectations
            assert unique.columns == owner.key
    events_key = by_name["events key"]
    assert events_key.whole and "HAVING count(*) > 1" in events_key.sql


def test_gx_is_never_imported_by_ingest_or_cli_start_up():
    code = ("import sys, faultline.cli, faultline.pipeline.run, faultline.check, "
            "faultline.schemas.quality; "
            "print(sorted(m for m in sys.modules if m.startswith('great_expectations')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
