"""The sample cluster written as Slurm and Redfish write it (``faultline.simulate.relayout``):
``slurm-<jobid>.out`` without collector stamps, and the SEL as Redfish LogEntry JSON.
The truth follows every file, and an ingest of each gives the canonical interruptions,
components and culprits (slow)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import duckdb
import pytest

from faultline.pipeline.run import ingest
from faultline.simulate.relayout import LAYOUTS, relayout, simulate_in

SAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "sample"


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("slurmbmc")
    out = {}
    for name in LAYOUTS:
        relayout(SAMPLE, root / name, name)
        out[name] = root / name
    return out


def _truth(out: Path, name: str) -> list[dict]:
    with (out / "truth" / name).open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_truth_follows_every_file_and_signal(written, name):
    out = written[name]
    rows = {r["path"]: r for r in _truth(out, "files.csv")}
    on_disk = {p.relative_to(out / "corpus").as_posix() for p in (out / "corpus").rglob("*")
               if p.is_file()}
    assert set(rows) == on_disk
    for s in _truth(out, "signals.csv"):
        if not (s["path"].endswith((".out", ".jsonl"))):
            continue
        lines = (out / "corpus" / s["path"]).read_text(errors="replace").split("\n")
        assert lines[int(s["line_no"]) - 1].startswith(s["text"][:60]), s
    assert json.loads((out / "truth" / "summary.json").read_text())["layout"] == name


def test_slurm_out_shape(written):
    corpus = written["slurm-out"] / "corpus"
    outs = sorted(corpus.glob("outputs/slurm-*.out"))
    assert len(outs) == 24 and not list(corpus.glob("jobs/*/node*.log*"))
    assert sorted(corpus.glob("jobs/*/train.log"))  # the trainer's own file stays
    lines = outs[0].read_text(errors="replace").splitlines()
    assert all(ln.split(": ", 1)[0].isdigit() for ln in lines)
    assert not any(ln.split(": ", 1)[1][:4].isdigit() and "Z " in ln[:40] for ln in lines)


def test_redfish_shape(written):
    corpus = written["redfish"] / "corpus"
    assert not list(corpus.glob("hosts/*/sel.txt"))
    entries = [json.loads(ln) for p in corpus.glob("hosts/*/sel.jsonl")
               for ln in p.read_text().splitlines()]
    assert entries and all(e["EntryType"] == "SEL" and "Created" in e for e in entries)
    assert {e.get("SensorType") for e in entries} >= {"Power Supply", "Power Unit"}


def test_simulate_in_a_layout(tmp_path):
    result = simulate_in("sample", tmp_path / "out", "redfish")
    assert result.out == tmp_path / "out" and result.interruptions == 26
    rows = _truth(result.out, "files.csv")
    assert result.files == len(rows) and any(r["path"].endswith("sel.jsonl") for r in rows)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no scratch left behind
    with pytest.raises(ValueError, match="known: slurm-out, redfish"):
        simulate_in("sample", tmp_path / "x", "flat")


def _verdicts(db: Path) -> dict[tuple[str, str], tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {(j, t): tuple(rest) for j, t, *rest in con.execute(
            "SELECT job_id, strftime(failed_at, '%Y-%m-%dT%H:%M'), component, planned, "
            "culprit_host, culprit_gpu, culprit_gpu_serial FROM interruptions").fetchall()}


@pytest.mark.slow
def test_slurm_and_redfish_layouts_give_the_canonical_interruptions(written, tmp_path):
    canonical = tmp_path / "canonical.duckdb"
    ingest([SAMPLE / "corpus"], canonical)
    want = _verdicts(canonical)
    assert len(want) == 26
    for name, out in written.items():
        db = tmp_path / f"{name}.duckdb"
        ingest([out / "corpus"], db)
        assert _verdicts(db) == want, name
        with duckdb.connect(str(db), read_only=True) as con:
            shapes = dict(con.execute("SELECT source, list(DISTINCT shape ORDER BY shape) "
                                      "FROM files WHERE source IN ('job', 'sel') "
                                      "AND lines > 0 GROUP BY ALL").fetchall())
            (untimed,), = con.execute("SELECT count(*) FROM events WHERE source IN "
                                      "('job', 'sel') AND ts_quality = 'untimed'").fetchall()
            (hostless,), = con.execute("SELECT count(*) FROM events WHERE source = 'job' "
                                       "AND host IS NULL").fetchall()
        assert shapes == ({"job": ["slurm_out"], "sel": ["sel_elist"]} if name == "slurm-out"
                          else {"job": ["collector"], "sel": ["redfish", "redfish_jsonl"]}), (
            name, shapes)
        assert (untimed, hostless) == (0, 0), name
