"""Operators' overrides, driven through the CLI as an operator would: stored in the
database with who, when and the note; kept across every later plain ingest until
removed; shown by explain and report; an unknown id is kept and warned about; an
unknown component is exit 2 naming the known ones; a CSV file stays accepted."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.classifiers.overrides import who
from faultline.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "250"}


@pytest.fixture
def db(ingested_sample, tmp_path) -> Path:
    copy = tmp_path / "db.duckdb"
    shutil.copy(ingested_sample, copy)
    return copy


@pytest.fixture(scope="module")
def corpus(repo_root) -> str:
    return str(repo_root / "fixtures" / "sample" / "corpus")


def one(db: Path, sql: str, *params) -> tuple:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, list(params)).fetchall()[0]


def an_ssd(db: Path) -> str:
    return one(db, "SELECT interruption_id FROM interruptions WHERE component = 'SSD' "
               "ORDER BY 1 LIMIT 1")[0]


def cli(*args: str, code: int = 0):
    r = runner.invoke(app, list(args), env=WIDE)
    assert r.exit_code == code, r.output
    return r


def test_add_applies_at_once_and_survives_every_plain_reingest(db, corpus):
    iid = an_ssd(db)
    texts = one(db, "SELECT count(*) FROM text_predictions")
    r = cli("overrides", "add", "--db", str(db), iid, "Power Supply", "--note",
            "RMA 4711: PSU failed")
    assert "applied" in r.output
    assert one(db, "SELECT count(*) FROM text_predictions") == texts  # none dropped
    row = ("Power Supply", "Host", "override", 1.0)
    sql = ("SELECT component, category, rule_id, confidence FROM interruptions "
           "WHERE interruption_id = ?")
    assert one(db, sql, iid) == row
    for _ in range(2):
        cli("ingest", corpus, "--db", str(db))
        assert one(db, sql, iid) == row
    stored = one(db, "SELECT component, note, created_by, origin, created_at "
                 "FROM overrides WHERE interruption_id = ?", iid)
    assert stored[:4] == ("Power Supply", "RMA 4711: PSU failed", who(), "cli")
    assert stored[4] is not None


def test_list_shows_note_author_and_csv_reads_back(db, corpus, tmp_path):
    iid = an_ssd(db)
    cli("overrides", "add", "--db", str(db), iid, "power supply", "--note", "PSU swap")
    r = cli("overrides", "list", "--db", str(db))
    assert iid in r.output and "Power Supply" in r.output and "PSU swap" in r.output
    assert who() in r.output and "applied" in r.output
    r = cli("overrides", "list", "--db", str(db), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(r.output)))
    assert [(x["interruption_id"], x["component"], x["note"]) for x in rows] == [
        (iid, "Power Supply", "PSU swap")]
    # the listing is a valid overrides file: a fresh database takes it
    exported = tmp_path / "exported.csv"
    exported.write_text(r.output)
    fresh = tmp_path / "fresh.duckdb"
    cli("ingest", corpus, "--db", str(fresh), "--overrides", str(exported))
    assert one(fresh, "SELECT component, rule_id FROM interruptions "
               "WHERE interruption_id = ?", iid) == ("Power Supply", "override")


def test_remove_lets_the_classifiers_decide_again(db):
    iid = an_ssd(db)
    cli("overrides", "add", "--db", str(db), iid, "CPU")
    r = cli("overrides", "remove", "--db", str(db), iid)
    assert "removed" in r.output
    assert one(db, "SELECT component, rule_id <> 'override' FROM interruptions WHERE "
               "interruption_id = ?", iid) == ("SSD", True)
    assert one(db, "SELECT count(*) FROM overrides") == (0,)
    cli("overrides", "remove", "--db", str(db), iid, code=2)  # nothing left to remove


def test_csv_file_is_imported_and_kept_without_the_file(db, corpus, tmp_path):
    iid = an_ssd(db)
    ov = tmp_path / "overrides.csv"
    ov.write_text(f"interruption_id,component,note\n{iid},Power Supply,RMA found PSU\n")
    cli("ingest", corpus, "--db", str(db), "--overrides", str(ov))
    first = one(db, "SELECT note, created_at, origin FROM overrides "
                "WHERE interruption_id = ?", iid)
    assert first[0] == "RMA found PSU" and first[2] == str(ov.resolve())
    cli("ingest", corpus, "--db", str(db), "--overrides", str(ov))  # same file again
    assert one(db, "SELECT note, created_at, origin FROM overrides "
               "WHERE interruption_id = ?", iid) == first  # unchanged, time included
    ov.unlink()
    cli("ingest", corpus, "--db", str(db))
    assert one(db, "SELECT component FROM interruptions WHERE interruption_id = ?",
               iid) == ("Power Supply",)


def test_explain_and_report_show_the_override(db):
    iid = an_ssd(db)
    cli("overrides", "add", "--db", str(db), iid, "Power Supply", "--note",
        "RMA 4711: PSU failed")
    r = cli("explain", "--db", str(db), iid)
    assert f"override by {who()}" in r.output and "RMA 4711: PSU failed" in r.output
    assert "decided by override" in r.output
    for args in ((), ("--format", "markdown")):
        r = cli("report", "--db", str(db), *args)
        assert f"override {iid}: Power Supply (by {who()}," in r.output
        assert "RMA 4711: PSU failed" in r.output
    data = json.loads(cli("report", "--db", str(db), "--format", "json").output)
    assert [(o["interruption_id"], o["note"]) for o in data["overrides"]] == [
        (iid, "RMA 4711: PSU failed")]


def test_unknown_id_is_kept_and_warned_about(db, corpus):
    r = cli("overrides", "add", "--db", str(db), "i-000000000000", "CPU")
    assert "warning" in r.output and "no interruption i-000000000000" in r.output
    r = cli("ingest", corpus, "--db", str(db))
    assert "1 overrides name no interruption" in r.output and "i-000000000000" in r.output
    r = cli("overrides", "list", "--db", str(db))
    assert "no such interruption" in r.output
    r = cli("explain", "--db", str(db), "i-000000000000", code=2)
    assert "an override is stored for it" in r.output
    assert one(db, "SELECT count(*) FROM overrides") == (1,)


def test_unknown_component_is_exit_2_naming_the_known_ones(db, corpus, tmp_path):
    iid = an_ssd(db)
    r = cli("overrides", "add", "--db", str(db), iid, "Power Suply", code=2)
    assert "unknown component 'Power Suply' (did you mean 'Power Supply'?)" in r.output
    assert "known components: Faulty GPU, " in r.output
    ov = tmp_path / "bad.csv"
    ov.write_text(f"interruption_id,component,note\n{iid},PSU,x\n")
    r = cli("ingest", corpus, "--db", str(db), "--overrides", str(ov), code=2)
    assert "bad.csv:2: unknown component 'PSU'" in r.output
    assert one(db, "SELECT count(*) FROM overrides") == (0,)


def test_overrides_on_a_missing_database_is_exit_2(tmp_path):
    for args in (["add", "i-1", "CPU"], ["list"], ["remove", "i-1"]):
        r = cli("overrides", args[0], "--db", str(tmp_path / "none.duckdb"), *args[1:],
                code=2)
        assert "no such database" in r.output


def test_html_report_lists_the_overrides_escaped(db, tmp_path):
    iid = an_ssd(db)
    note = "PSU <script>alert(1)</script> & fan"
    cli("overrides", "add", "--db", str(db), iid, "Power Supply", "--note", note)
    out = tmp_path / "report.html"
    cli("report", "--db", str(db), "--html", str(out))
    page = out.read_text(encoding="utf-8")
    section = page[page.index('<section id="overrides">'):]
    section = section[:section.index("</section>")]
    assert iid in section and "Power Supply" in section and who() in section
    assert "PSU &lt;script&gt;alert(1)&lt;/script&gt; &amp; fan" in section
    assert "<script>alert" not in page
