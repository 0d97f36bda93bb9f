"""The evidence the rebuild writes: one row per (interruption, event); every symptom of
a window there, under the role :func:`decide` gave it when it gave one; and a run
rebuilt alone (``--run``) gets exactly the rows a full rebuild gives it, while the other
runs' rows are still in the table (the symptoms are told apart from this rebuild's
decided rows only). The corpus is the bundled sample plus test_run_option's three
small runs of other users."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from test_run_option import EXTRA_SACCT, MAIN
from typer.testing import CliRunner

from faultline.classifiers import interruptions
from faultline.cli import app

RUNS = (MAIN, "lchen/sft-70b", "bwong/sft-70b", "ppatel/pretrain-8b")


@pytest.fixture(scope="module")
def ingested(tmp_path_factory, repo_root) -> Path:
    extra = tmp_path_factory.mktemp("extra")
    (extra / "sacct.txt").write_text(EXTRA_SACCT)
    db = tmp_path_factory.mktemp("evidence") / "db.duckdb"
    r = CliRunner().invoke(app, ["ingest", str(repo_root / "fixtures" / "sample" / "corpus"),
                                 str(extra), "--db", str(db)])
    assert r.exit_code == 0, r.output
    return db


def _evidence(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute("SELECT interruption_id, event_id, role FROM interruption_evidence "
                       "ORDER BY ALL").fetchall()


def test_each_pair_once_and_every_window_symptom_there(ingested: Path) -> None:
    with duckdb.connect(str(ingested), read_only=True) as con:
        pairs = con.execute("SELECT count(*), count(DISTINCT (interruption_id, event_id)) "
                            "FROM interruption_evidence").fetchone()
        kinds = ", ".join(f"'{k}'" for k in interruptions.SYMPTOMS)
        # the window as the interruptions table states it, not the rebuild's temp table
        missing = con.execute(f"""
            SELECT i.interruption_id, e.event_id FROM interruptions i JOIN events e
              ON e.job_id = i.job_id AND e.kind IN ({kinds})
             AND e.ts BETWEEN i.failed_at - INTERVAL {interruptions.BEFORE_S} SECOND
                          AND i.failed_at + INTERVAL {interruptions.AFTER_S} SECOND
            EXCEPT SELECT interruption_id, event_id FROM interruption_evidence
        """).fetchall()
        roles = dict(con.execute("SELECT role, count(*) FROM interruption_evidence "
                                 "GROUP BY role").fetchall())
    assert pairs[0] == pairs[1] > 0
    assert missing == []
    assert roles.get("symptom", 0) > 0 and roles.get("root", 0) > 0


@pytest.mark.parametrize("run", RUNS)
def test_a_run_rebuilt_alone_gets_the_rows_of_a_full_rebuild(ingested: Path, tmp_path: Path,
                                                             run: str) -> None:
    db = tmp_path / "db.duckdb"
    shutil.copy(ingested, db)
    with duckdb.connect(str(db)) as con:
        full = _evidence(con)
        assert interruptions.build(con, run=run) >= 1
        assert _evidence(con) == full
