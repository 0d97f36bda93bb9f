"""The CLI's commands, flags, help and exit codes (INTERFACE.md)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from faultline import __version__
from faultline.cli import EXIT_USAGE, app

runner = CliRunner()
COMMANDS = ("ingest", "report", "explain", "check", "simulate", "demo")


def plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_help_lists_every_command():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for cmd in COMMANDS:
        assert cmd in plain(result.output)


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"faultline {__version__}"


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ("ingest", ["--db", "--tz", "--year", "--run", "--overrides", "--runner",
                    "--workers", "--beam-opt"]),
        ("report", ["--db", "--format", "--compare", "--html"]),
        ("explain", ["--db"]),
        ("check", ["--db"]),
        ("simulate", ["--preset", "--out", "--seed"]),
    ],
)
def test_each_command_has_its_interface_flags(command, flags):
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = plain(result.output)
    for flag in flags:
        assert flag in text, (command, flag)


@pytest.mark.parametrize("argv", [["report", "--db", "missing.duckdb"],
                                  ["explain", "--db", "missing.duckdb", "i-0"],
                                  ["check", "--db", "missing.duckdb"]])
def test_reading_a_missing_database_is_bad_usage(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, argv)
    assert result.exit_code == EXIT_USAGE
    assert "no such database" in plain(result.output)
    assert list(tmp_path.iterdir()) == []  # nothing created


@pytest.mark.parametrize("name", ["x[/b].duckdb", "[bold]x.duckdb", "x[red].duckdb"])
@pytest.mark.parametrize("command", ["report", "check"])
def test_a_path_holding_markup_is_printed_as_it_is(command, name, tmp_path, monkeypatch):
    """Messages name paths as plain text: ``[/b]`` in a --db path ended in rich's
    MarkupError (a traceback, exit 1), ``[bold]`` was swallowed as a style."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [command, "--db", name])
    assert result.exit_code == EXIT_USAGE
    assert f"{name}: no such database" in plain(result.output)


def test_bad_usage_exits_2():
    assert runner.invoke(app, ["report"]).exit_code == EXIT_USAGE  # --db missing
    assert runner.invoke(app, ["report", "--db", "x", "--format", "xml"]).exit_code == 2
    assert runner.invoke(app, ["nosuchcommand"]).exit_code == EXIT_USAGE


def test_demo_ingests_the_bundled_sample_and_prints_the_breakdown(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["demo"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = plain(result.output)
    assert "ingested 492 files" in out and "26 interruptions" in out
    assert "Faulty GPU" in out and "Planned Maintenance" in out
    assert (tmp_path / "faultline-demo.duckdb").is_file()
