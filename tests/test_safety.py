"""Nothing unsafe: no code runs from what faultline reads, nothing is written outside the
database's own files, and user input reaches SQL only as parameters.

The source scan is an allow-nothing list over every module faultline installs; ruff's
S608 (SQL built from strings) guards the SQL in CI as well (pyproject.toml)."""

from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import REPO_ROOT
from typer.testing import CliRunner

from faultline.cli import app
from faultline.pipeline.run import exclusive
from faultline.pipeline.staging import Staging
from faultline.pipeline.transforms import WriteShards

PACKAGE_DIRS = ("faultline", "pipeline", "classifiers", "schemas")
UNSAFE_MODULES = {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "joblib"}
UNSAFE_CALLS = {"eval", "exec", "compile", "__import__"}
UNSAFE_ATTRS = {("yaml", "load"), ("yaml", "unsafe_load"), ("torch", "load"),
                ("os", "system"), ("os", "popen")}


def _sources() -> list[Path]:
    files = [p for d in PACKAGE_DIRS for p in (REPO_ROOT / d).rglob("*.py")]
    assert len(files) > 40  # the scan really sees the package
    return files


def _violations(path: Path, root: Path = REPO_ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where} imports {a.name}" for a in node.names
                      if a.name.split(".")[0] in UNSAFE_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in UNSAFE_MODULES:
                found.append(f"{where} imports from {node.module}")
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in UNSAFE_CALLS:
                found.append(f"{where} calls {f.id}()")
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                if (f.value.id, f.attr) in UNSAFE_ATTRS:
                    found.append(f"{where} calls {f.value.id}.{f.attr}()")
                if f.attr == "load" and f.value.id in ("np", "numpy") and not any(
                        k.arg == "allow_pickle" and isinstance(k.value, ast.Constant)
                        and k.value.value is False for k in node.keywords):
                    found.append(f"{where} calls np.load without allow_pickle=False")
            for k in node.keywords:
                if k.arg == "shell" and not (isinstance(k.value, ast.Constant)
                                             and k.value.value is False):
                    found.append(f"{where} runs a shell")
    return found


def test_no_code_is_loaded_or_run_from_data():
    problems = [v for p in _sources() for v in _violations(p)]
    assert problems == []


def test_the_scan_catches_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import pickle\nimport numpy as np\nimport yaml\nimport subprocess\n"
                   "eval('1')\nnp.load('x.npy')\nyaml.load(s)\n"
                   "subprocess.run('ls', shell=True)\nfrom marshal import loads\n")
    found = _violations(bad, tmp_path)
    assert sorted(f.split(" ", 1)[0] for f in found) == [
        f"bad.py:{n}" for n in (1, 5, 6, 7, 8, 9)], found


@pytest.mark.parametrize("hostile", [
    "/corpus/../../../../etc/cron.d/x", "/corpus/host\n/../../x.log",
    "/corpus/a/" + "b" * 300 + ".log", "gs://elsewhere/../../x"])
def test_corpus_paths_never_name_a_shard(tmp_path, hostile):
    """Shard names come from a hash of the batch, not from the paths in it."""
    staging = tmp_path / "db.duckdb.staging"
    table = pa.table({"path": [hostile]})
    written = list(WriteShards(str(staging)).process(("0" * 24, "files", table)))
    assert len(written) == 1
    assert Path(written[0]).resolve().is_relative_to(staging.resolve())
    assert [p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file()
            ] == ["files/000000000000000000000000-n1.parquet"]


def test_everything_ingest_writes_sits_beside_the_database(tmp_path, repo_root):
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    out = tmp_path / "out"
    out.mkdir()
    result = CliRunner().invoke(app, ["ingest", str(corpus), "--db", str(out / "x.duckdb")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["x.duckdb"]  # no .lock left
    assert Staging.for_db(out / "x.duckdb").local.parent == out
    with exclusive(out / "x.duckdb"):
        assert (out / "x.duckdb.lock").exists()


@pytest.mark.parametrize("argv", [
    ["report", "--run", "x' OR 1=1 --"],
    ["report", "--run", "'; DROP TABLE events; --"],
    ["explain", "x' OR '1'='1"],
])
def test_user_input_reaches_sql_as_parameters(tmp_path, repo_root, argv):
    """A hostile run name or id is just a name that does not exist (exit 2), and the
    tables are still there afterwards."""
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    db = tmp_path / "x.duckdb"
    assert CliRunner().invoke(app, ["ingest", str(corpus), "--db", str(db)]).exit_code == 0
    cmd, *rest = argv
    result = CliRunner().invoke(app, [cmd, "--db", str(db), *rest])
    assert result.exit_code == 2
    assert "no run named" in result.output or "no interruption" in result.output
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM events").fetchall()[0][0] > 0
