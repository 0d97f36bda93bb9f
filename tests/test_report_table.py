"""``faultline report`` in an 80-column terminal: nothing cut, every category whole."""

from __future__ import annotations

import re

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.cli import app

runner = CliRunner()


@pytest.mark.parametrize("compare", [[], ["--compare", "llama3"]])
def test_table_at_80_columns_cuts_no_name_or_number(ingested_sample, compare):
    result = runner.invoke(app, ["report", "--db", str(ingested_sample), *compare],
                           env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    with duckdb.connect(str(ingested_sample), read_only=True) as con:
        categories = {c for c, in con.execute("SELECT DISTINCT category FROM breakdown")
                      .fetchall()}
    assert {"Unplanned Maintenance", "Planned Maintenance"} <= categories
    words = set(re.findall(r"[\w/+.-]+", out))
    for category in categories:  # wrapped at a word break at worst, never cut
        assert set(category.split()) <= words, category
    if compare:
        header = next(line for line in out.splitlines() if "Component" in line)
        assert header.split()[-4:] == ["Llama", "3", "printed", "recomp."]
        assert re.search(r"\b148\s+30\.1\s+35\.3\s*$", out, re.M)  # Faulty GPU, whole


@pytest.mark.parametrize("name", ["sweep[lr=3e-4]", "train[/x]", "[bold]llm"])
@pytest.mark.parametrize("project", [[], ["--project", "16384"]])
def test_a_run_name_holding_brackets_is_printed_as_it_is(ingested_sample, tmp_path, name,
                                                         project):
    """A run is named after its jobs (sacct's JobName, anyone's text): ``[lr=3e-4]``
    was read as a style and dropped (the report named another run, exit 0), ``[/x]``
    ended in a MarkupError."""
    db = tmp_path / "renamed.duckdb"
    db.write_bytes(ingested_sample.read_bytes())
    with duckdb.connect(str(db)) as con:
        run = con.execute("SELECT run FROM interruptions GROUP BY run "
                          "ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
        for table in ("attempts", "interruptions"):
            con.execute(f"UPDATE {table} SET run = ? WHERE run = ?", [name, run])
    result = runner.invoke(app, ["report", "--db", str(db), "--run", name, *project],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"run {name}" in result.output.replace("\n", " ")
