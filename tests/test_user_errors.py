"""What a user reads when the input is wrong: one line, the right exit code, nothing
left behind (INTERFACE.md: 2 bad usage or unreadable input named on the command line).
"""

from __future__ import annotations

import re
import shutil

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.cli import EXIT_USAGE, app
from faultline.pipeline.fileparse import UNKNOWN_REJECT_SAMPLE

runner = CliRunner()


def plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


@pytest.fixture
def node(repo_root):
    return repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"



def _one_line_exit_2(command: list[str], node, db, says: str):
    """Run ``command`` on ``--db db`` through the CLI: exit 2 and one line saying ``says``."""
    argv = [str(node) if a == "CORPUS" else a for a in command] + ["--db", str(db)]
    if command == ["explain"]:
        argv.append("some-id")
    result = runner.invoke(app, argv)
    assert result.exit_code == EXIT_USAGE, result.output
    lines = plain(result.output).strip().splitlines()
    assert len(lines) == 1 and says in lines[0], result.output
    return result

@pytest.mark.parametrize("command", [["ingest", "CORPUS"], ["report"], ["explain"],
                                     ["check"]])
def test_a_db_that_is_not_duckdb_is_one_line_exit_2(command, node, tmp_path):
    db = tmp_path / "notes.txt"
    db.write_text("my notes, not a database\n")
    result = _one_line_exit_2(command, node, db, "not a DuckDB database")
    assert "IO Error" not in result.output and "Traceback" not in result.output
    assert db.read_text() == "my notes, not a database\n"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no .lock


def test_no_lock_file_after_success_or_failure(node, tmp_path):
    db = tmp_path / "x.duckdb"
    ok = runner.invoke(app, ["ingest", str(node), "--db", str(db)])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["ingest", str(tmp_path / "missing"), "--db", str(db)])
    assert bad.exit_code == EXIT_USAGE
    for cmd in (["report"], ["check"]):
        runner.invoke(app, [*cmd, "--db", str(db)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.duckdb"]


def test_an_empty_directory_is_nothing_recognized(tmp_path):
    (tmp_path / "empty").mkdir()
    db = tmp_path / "x.duckdb"
    result = runner.invoke(app, ["ingest", str(tmp_path / "empty"), "--db", str(db)])
    assert result.exit_code == EXIT_USAGE
    assert plain(result.output).strip() == (
        f"faultline ingest: no cluster logs recognized under {tmp_path / 'empty'}: no files")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # no database written


def test_a_corpus_of_no_logs_writes_nothing(tmp_path):
    """Like ``faultline ingest /usr/share/doc``: prose, a changelog, a binary."""
    docs = tmp_path / "doc"
    (docs / "pkg").mkdir(parents=True)
    (docs / "pkg" / "README").write_text("".join(
        f"This package provides feature {i} for the users of the library.\n"
        for i in range(300)))
    (docs / "pkg" / "changelog").write_text("".join(
        f"pkg (1.{i}) unstable; urgency=medium\n\n  * Fix bug #{i}.\n\n" for i in range(200)))
    (docs / "pkg" / "logo.png").write_bytes(bytes(range(256)) * 40)
    files = sum(1 for p in docs.rglob("*") if p.is_file())
    db = tmp_path / "x.duckdb"
    result = runner.invoke(app, ["ingest", str(docs), "--db", str(db)])
    assert result.exit_code == EXIT_USAGE, result.output
    assert plain(result.output).strip() == (
        f"faultline ingest: no cluster logs recognized under {docs}: {files} files, "
        "all unknown")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc"]


def test_an_unknown_file_beside_logs_keeps_a_bounded_reject_sample(node, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(node, corpus / "hosts" / "node0001")
    junk = corpus / "README.txt"
    junk.write_text("".join(f"prose line {i}\n" for i in range(1000)))
    db = tmp_path / "x.duckdb"
    result = runner.invoke(app, ["ingest", str(corpus), "--db", str(db)])
    assert result.exit_code == 0, result.output
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute("SELECT source, lines, routine_lines, event_lines, reject_lines "
                          "FROM files WHERE path = ?", [str(junk)]).fetchall()
        sample = con.execute("SELECT count(*), max(line_no), count(DISTINCT reason) "
                             "FROM rejects WHERE path = ?", [str(junk)]).fetchall()
    assert row == [("unknown", 1000, 0, 0, 1000)]
    assert sample == [(UNKNOWN_REJECT_SAMPLE, UNKNOWN_REJECT_SAMPLE, 1)]
    # and the quality suites accept the sample (reject_lines >= rejects rows there)
    check = runner.invoke(app, ["check", "--db", str(db)])
    assert check.exit_code == 0, check.output


@pytest.mark.parametrize("command", [["ingest", "CORPUS"], ["report"], ["explain"],
                                     ["check"]])
def test_a_duckdb_file_of_someone_else_is_one_line_exit_2(command, node, tmp_path):
    db = tmp_path / "theirs.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE sales AS SELECT 1 AS amount")
    result = _one_line_exit_2(command, node, db, "not a faultline database")
    assert "Catalog Error" not in result.output
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT table_name FROM information_schema.tables").fetchall() \
            == [("sales",)]  # nothing added to it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.duckdb"]


@pytest.mark.parametrize(("flag", "suggests"), [
    ("direct_num_workrs=2", "direct_num_workers"),
    ("--s3_endpoint=http://127.0.0.1:1", "s3_endpoint_url"),
    ("no_such_option_at_all", ""),
])
def test_a_beam_opt_typo_is_refused_before_anything_is_written(node, tmp_path, flag, suggests):
    """Beam only logs "Discarding unparseable args" and runs with other settings than
    asked for; faultline refuses the flag, names the close ones and writes nothing."""
    db = tmp_path / "t.duckdb"
    result = _one_line_exit_2(["ingest", "CORPUS", "--beam-opt", flag], node, db,
                              "no Beam pipeline option is called")
    assert suggests in plain(result.output)
    assert not db.exists()


def test_known_beam_opts_pass_the_check():
    from faultline.pipeline import beamopts

    beamopts.check(["--direct_num_workers=1", "--s3_endpoint_url=http://x", "--num_workers=3",
                    "--flink_master=localhost:8081", "--runner=DirectRunner"])
    assert beamopts.unknown(["--direct_num_workrs=2", "positional"]) == ["--direct_num_workrs=2"]
