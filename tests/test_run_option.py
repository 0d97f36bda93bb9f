"""``--run`` as a user types it: a typo is exit 2 with the known runs listed and costs
no run its rows; a valid run rebuilds only its own; ``report --run`` takes the job name
alone when it is unambiguous; ingest's summary and report say whose interruptions
they count. The corpus is the bundled sample plus three small runs of other users
(two share a job name), in a sacct file written here."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.cli import app

runner = CliRunner()

# sacct -P output (the sample's own format): three runs of two attempts each, the first
# attempt of each ending while its run went on.
EXTRA_SACCT = """\
JobID|JobName|User|Partition|State|Start|End|Elapsed|NNodes|NodeList|ExitCode|Reason|AdminComment
1300001|sft-70b|lchen|train|FAILED|2024-12-30T01:00:00|2024-12-30T02:00:00|01:00:00|2|node[0020-0021]|1:0|None|
1300002|sft-70b|lchen|train|COMPLETED|2024-12-30T02:10:00|2024-12-30T03:00:00|00:50:00|2|node[0020-0021]|0:0|None|
1300003|sft-70b|bwong|train|FAILED|2024-12-30T01:00:00|2024-12-30T01:30:00|00:30:00|1|node0022|1:0|None|
1300004|sft-70b|bwong|train|COMPLETED|2024-12-30T01:40:00|2024-12-30T03:00:00|01:20:00|1|node0022|0:0|None|
1300005|pretrain-8b|ppatel|train|NODE_FAIL|2024-12-30T04:00:00|2024-12-30T05:00:00|01:00:00|1|node0023|1:0|None|
1300006|pretrain-8b|ppatel|train|COMPLETED|2024-12-30T05:10:00|2024-12-30T06:00:00|00:50:00|1|node0023|0:0|None|
"""
MAIN = "trainer/llama3-405b"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, repo_root) -> list[str]:
    extra = tmp_path_factory.mktemp("extra")
    (extra / "sacct.txt").write_text(EXTRA_SACCT)
    return [str(repo_root / "fixtures" / "sample" / "corpus"), str(extra)]


@pytest.fixture(scope="module")
def ingested(tmp_path_factory, corpus) -> Path:
    db = tmp_path_factory.mktemp("runs") / "db.duckdb"
    r = runner.invoke(app, ["ingest", *corpus, "--db", str(db)])
    assert r.exit_code == 0, r.output
    return db


@pytest.fixture
def db(ingested, tmp_path) -> Path:
    copy = tmp_path / "db.duckdb"
    shutil.copy(ingested, copy)
    return copy


def per_run(db: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT run, interruption_id, component, rule_id "
                           "FROM interruptions ORDER BY 1, 2").fetchall()
        ev = con.execute("SELECT count(*) FROM interruption_evidence").fetchall()[0][0]
        # the text models' stored answers: one run's rebuild must not drop the others'
        tp = con.execute("SELECT * FROM text_predictions ORDER BY ALL").fetchall()
    out: dict[str, list[tuple]] = {"_evidence": [(ev,)], "_texts": tp}
    for r in rows:
        out.setdefault(r[0], []).append(r)
    return out


def test_the_corpus_has_several_runs(ingested):
    runs = per_run(ingested)
    assert {"lchen/sft-70b", "bwong/sft-70b", "ppatel/pretrain-8b", MAIN} <= set(runs)
    assert len(runs[MAIN]) > 3


def test_ingest_run_typo_is_exit_2_listing_runs_and_destroys_nothing(db, corpus):
    before = per_run(db)
    r = runner.invoke(app, ["ingest", *corpus, "--db", str(db), "--run", "llama3-450b"])
    assert r.exit_code == 2, r.output
    assert "no run named 'llama3-450b'" in r.output
    for name in (MAIN, "lchen/sft-70b", "ppatel/pretrain-8b"):
        assert name in r.output
    assert per_run(db) == before


def test_ingest_valid_run_keeps_the_other_runs_rows(db, corpus):
    before = per_run(db)
    r = runner.invoke(app, ["ingest", *corpus, "--db", str(db), "--run", "pretrain-8b"])
    assert r.exit_code == 0, r.output
    after = per_run(db)
    assert after == before  # same corpus: the run's own rows are rebuilt equal
    total = sum(len(v) for k, v in after.items() if not k.startswith("_"))
    assert (f"interruptions: 1 rebuilt for run ppatel/pretrain-8b only, other runs kept; "
            f"{total} in all runs") in r.output


def test_ingest_run_rebuilds_only_that_run(db, corpus):
    """The other runs' rows are not touched, not just rebuilt equal: an override
    written into one of them directly (bypassing the rebuild) stays as it is."""
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE interruptions SET rule_id = 'marker' WHERE run = ?", [MAIN])
    r = runner.invoke(app, ["ingest", *corpus, "--db", str(db), "--run", "lchen/sft-70b"])
    assert r.exit_code == 0, r.output
    runs = per_run(db)
    assert {row[3] for row in runs[MAIN]} == {"marker"}
    assert [row[3] for row in runs["lchen/sft-70b"]] == ["none"]
    r = runner.invoke(app, ["ingest", *corpus, "--db", str(db)])  # all runs again
    assert r.exit_code == 0, r.output
    assert "marker" not in {row[3] for row in per_run(db)[MAIN]}


def test_ingest_ambiguous_job_name_is_exit_2_naming_both(db, corpus):
    before = per_run(db)
    r = runner.invoke(app, ["ingest", *corpus, "--db", str(db), "--run", "sft-70b"])
    assert r.exit_code == 2, r.output
    assert "job name of 2 runs" in r.output
    assert "lchen/sft-70b" in r.output and "bwong/sft-70b" in r.output
    assert per_run(db) == before


def test_report_run_accepts_the_job_name_alone(db):
    r = runner.invoke(app, ["report", "--db", str(db), "--run", "llama3-405b",
                            "--format", "csv"])
    assert r.exit_code == 0, r.output
    rows = [line.split(",") for line in r.output.splitlines()[1:]]
    assert rows and {row[0] for row in rows} == {MAIN}
    assert sum(int(row[3]) for row in rows) == len(per_run(db)[MAIN])


def test_report_run_ambiguous_or_unknown_lists_the_runs(db):
    r = runner.invoke(app, ["report", "--db", str(db), "--run", "sft-70b"])
    assert r.exit_code == 2
    assert "lchen/sft-70b" in r.output and "bwong/sft-70b" in r.output
    r = runner.invoke(app, ["report", "--db", str(db), "--run", "nope"])
    assert r.exit_code == 2
    assert "no run named 'nope'; known runs:" in r.output and MAIN in r.output


def test_summary_and_report_say_whose_interruptions_they_count(db, corpus):
    runs = per_run(db)
    total = sum(len(v) for k, v in runs.items() if not k.startswith("_"))
    r = runner.invoke(app, ["ingest", *corpus, "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert f"{total} interruptions, " in r.output
    assert f"interruptions: {total} in all runs ({len(runs[MAIN])} in {MAIN}, " in r.output
    r = runner.invoke(app, ["report", "--db", str(db)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert (f"run {MAIN} only: {len(runs[MAIN])} of the database's {total} "
            "interruptions; other runs: 1 in ") in r.output
    r = runner.invoke(app, ["report", "--db", str(db), "--format", "json"])
    assert r.exit_code == 0
    data = json.loads(r.output)
    assert data["total"] == len(runs[MAIN])
    assert sum(x["interruptions"] for x in data["runs"]) == total


def test_a_single_run_database_adds_no_runs_line(ingested_sample, tmp_path, repo_root):
    db = tmp_path / "one.duckdb"
    shutil.copy(ingested_sample, db)
    r = runner.invoke(app, ["ingest", str(repo_root / "fixtures/sample/corpus"),
                            "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert not re.search(r"^interruptions: ", r.output, re.M)


def test_report_of_a_run_without_interruptions_says_so(db):
    r = runner.invoke(app, ["report", "--db", str(db), "--run", "eval-10"],
                      env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert ("0 unexpected + 0 planned = 0 interruptions (every attempt of run "
            "lchen/eval-10 ended without interrupting it)") in r.output
