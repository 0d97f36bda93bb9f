"""Start-up stays light: what ``--help``, ``report`` and ``explain`` import.

Not a timed test (timings on a shared machine flap; ``bench/startup.py`` measures them
into bench/RESULTS.md). What is measured here is the cause of a slow start: which heavy
libraries a command imports. Each runs in a fresh interpreter, so nothing imported by
another test counts.
"""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

# Seconds of import each (measured with python -X importtime): none is needed to print
# help or to read a finished database.
HEAVY = ("apache_beam", "sklearn", "spacy", "thinc", "great_expectations", "polars",
         "pyarrow", "scipy", "altair", "vl_convert", "jinja2")

# main() ends the process itself (cli._exit, after the atexit handlers): what was
# imported is printed by one of them, the exit status is the process's
_RUN = """
import atexit, sys
from faultline.cli import main
atexit.register(lambda: print(
    "HEAVY", *sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr))
sys.argv = ["faultline", *sys.argv[1:]]
main()
"""


def _heavy_after(*args: str) -> tuple[int, list[str]]:
    proc = subprocess.run([sys.executable, "-c", _RUN.format(heavy=HEAVY), *args],
                          capture_output=True, text=True, check=False)
    last = proc.stderr.strip().splitlines()[-1].split()
    assert last[0] == "HEAVY", proc.stderr
    return proc.returncode, last[1:]


def test_importing_the_cli_imports_no_heavy_library():
    """Nor DuckDB (0.1 s): help needs no database; the commands that open one import it."""
    code = ("import sys, faultline.cli\n"
            f"print(*sorted(m for m in {(*HEAVY, 'duckdb')!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == []


@pytest.mark.parametrize("args", [("--help",), ("ingest", "--help"), ("report", "--help"),
                                  ("--version",)])
def test_help_imports_no_heavy_library(args):
    assert _heavy_after(*args) == (0, [])


def test_report_and_explain_import_no_heavy_library(ingested_sample):
    assert _heavy_after("report", "--db", str(ingested_sample)) == (0, [])
    assert _heavy_after("report", "--db", str(ingested_sample), "--format", "json") == (0, [])
    with duckdb.connect(str(ingested_sample), read_only=True) as con:
        iid = con.execute("SELECT interruption_id FROM interruptions "
                          "ORDER BY interruption_id LIMIT 1").fetchone()[0]
    assert _heavy_after("explain", iid, "--db", str(ingested_sample)) == (0, [])


def test_the_check_is_not_vacuous(ingested_sample):
    """``check`` does need Great Expectations: the probe sees it when it is imported."""
    code, heavy = _heavy_after("check", "--db", str(ingested_sample))
    assert "great_expectations" in heavy, (code, heavy)
