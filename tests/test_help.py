"""Help a user reads: metavars, not Python types; whole sentences; every preset named."""

from __future__ import annotations

import inspect
import re

import pytest
from typer.testing import CliRunner

from faultline.cli import _preset_names, _unwrap, app

runner = CliRunner()
COMMANDS = ("ingest", "report", "explain", "check", "simulate", "demo")
TYPE_PLACEHOLDER = re.compile(r"<(bool|str|int|float|file|dir|path|list\[[^\]]*\])[^>]*>", re.I)


def plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _help(*argv: str, columns: int = 80) -> str:
    result = runner.invoke(app, [*argv, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return plain(result.output)


@pytest.mark.parametrize("argv", [(), *((c,) for c in COMMANDS)])
def test_no_python_type_placeholders(argv):
    text = _help(*argv)
    assert not TYPE_PLACEHOLDER.search(text), TYPE_PLACEHOLDER.search(text)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_paragraph_of_a_command_help_is_one_line_when_there_is_room(command):
    text = _help(command, columns=400)
    info, = [i for i in app.registered_commands
             if (i.name or i.callback.__name__.replace("_", "-")) == command]
    doc = inspect.getdoc(info.callback)
    for paragraph in _unwrap(doc).split("\n\n"):
        assert any(line.strip() == paragraph for line in text.splitlines()), paragraph


def test_simulate_help_lists_every_preset():
    names = _preset_names()
    assert {"sample", "small", "medium", "llama3"} <= set(names)
    text = " ".join(_help("simulate", columns=400).split())
    for name in names:
        assert re.search(rf"\b{name}\b", text), name


def test_ingest_help_says_it_builds_interruptions():
    assert "interruptions" in _help("ingest").split("Options")[0]


def test_flags_show_their_metavars():
    text = _help("ingest", columns=200)
    for flag, metavar in (("--db", "PATH"), ("--year", "YYYY"), ("--workers", "N"),
                          ("--beam-opt", "KEY=VALUE")):
        assert re.search(rf"{flag}\s+{re.escape(metavar)}\b", text), flag
