"""The simulator: ground truth agrees with the files, presets keep their mix, output is
deterministic per seed, memory stays bounded, and the corpus is as dirty as real ones."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from faultline.cli import app
from faultline.pipeline.text import count_lines
from faultline.schemas.taxonomy import PLANNED, load_taxonomy
from faultline.simulate.cluster import build_cluster
from faultline.simulate.config import load_preset, preset_names
from faultline.simulate.slurm import compress_hosts
from faultline.simulate.timeline import build_timeline, component_counts


def _generate(out: Path, preset: str = "sample", seed: int = 0) -> Path:
    result = CliRunner().invoke(app, ["simulate", "--preset", preset, "--out", str(out),
                                      "--seed", str(seed)])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    return _generate(tmp_path_factory.mktemp("sim") / "sample")


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def _truth(out: Path, name: str) -> list[dict]:
    with (out / "truth" / name).open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_files_truth_lists_every_file_with_exact_lines_and_bytes(sample):
    rows = {r["path"]: r for r in _truth(sample, "files.csv")}
    on_disk = {str(p.relative_to(sample / "corpus")) for p in
               (sample / "corpus").rglob("*") if p.is_file()}
    assert set(rows) == on_disk
    for rel, r in rows.items():
        path = sample / "corpus" / rel
        assert int(r["bytes"]) == path.stat().st_size, rel
        assert int(r["lines"]) == count_lines(_read(path)), rel


def test_truth_stays_outside_the_corpus(sample):
    assert not list((sample / "corpus").rglob("*.csv.truth"))
    assert not (sample / "corpus" / "truth").exists()
    assert (sample / "truth" / "interruptions.csv").is_file()


def test_every_signal_is_where_the_truth_says(sample):
    cache: dict[str, list[str]] = {}
    for s in _truth(sample, "signals.csv"):
        if s["path"] not in cache:
            text = _read(sample / "corpus" / s["path"]).decode("utf-8", "replace")
            cache[s["path"]] = text.replace("\r\n", "\n").split("\n")
        line = cache[s["path"]][int(s["line_no"]) - 1]
        assert s["text"][:120] in line, (s["path"], s["line_no"])
        if s["xid"]:
            assert f"): {s['xid']}, " in line


def test_every_interruption_has_a_root_signal_in_the_corpus(sample):
    roots = Counter(s["interruption"] for s in _truth(sample, "signals.csv")
                    if s["role"] == "root")
    for inc in _truth(sample, "interruptions.csv"):
        assert roots[inc["interruption"]] >= 1, inc


def test_root_signals_sit_on_the_culprit_host(sample):
    truth = {r["interruption"]: r for r in _truth(sample, "interruptions.csv")}
    for s in _truth(sample, "signals.csv"):
        if s["role"] == "root" and s["interruption"] and s["host"]:
            culprit = truth[s["interruption"]]["culprit_host"]
            if culprit:
                assert s["host"] == culprit, s


def test_sample_has_every_component_and_fits_in_5_mb(sample):
    summary = json.loads((sample / "truth" / "summary.json").read_text())
    names = {c.component for c in load_taxonomy().table5}
    assert names <= set(summary["by_component"])
    assert summary["planned"] >= 1
    assert summary["bytes"] < 5_000_000
    assert 0.90 <= summary["effective_training_time"] <= 0.95


def test_corpus_has_real_world_dirt(sample):
    corpus = sample / "corpus"
    files = [p for p in corpus.rglob("*") if p.is_file()]
    blobs = {p: _read(p) for p in files}
    assert any(p.suffix == ".gz" for p in files)
    assert any(b"\r\n" in b for b in blobs.values())
    assert any(b"\x00" in b for b in blobs.values())
    bad = 0
    for b in blobs.values():
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            bad += 1
    assert bad >= 1
    assert any(b and not b.endswith(b"\n") for b in blobs.values())  # truncated line
    shapes = {"rfc3339": rb"^\d{4}-\d\d-\d\dT", "rfc3164": rb"^[A-Z][a-z]{2} [ \d]\d ",
              "dmesg_t": rb"^\[[A-Z][a-z]{2} "}
    import re
    kernel = [b for p, b in blobs.items() if p.name.startswith(("kern.log", "dmesg"))]
    for shape, rx in shapes.items():
        assert any(re.search(rx, b, re.M) for b in kernel), shape
    # RFC 3164 lines run from December into January in one file: the year rolls over
    assert any(re.search(rb"^Dec 31 .*\n(?:.*\n)*?Jan  1 ", b, re.M) for b in kernel)


def test_slurm_records_look_like_a_real_cluster(sample):
    sacct = (sample / "corpus" / "slurm" / "sacct.txt").read_text()
    rows = [r.split("|") for r in sacct.splitlines()[1:]]
    assert any(len(r) < 13 for r in rows), "a free-text field with an embedded newline"
    rows = [r for r in rows if len(r) == 13]
    ids = [r[0] for r in rows if "." not in r[0]]
    assert any("_" in i for i in ids), "array job ids"
    run_ids = [r[0] for r in rows if r[1] == "llama3-405b"]
    assert len(run_ids) > len(set(run_ids)), "a requeued job keeps its JobID"
    assert any(r[0].endswith(".batch") for r in rows)
    assert any(r[4].startswith("CANCELLED by 0") for r in rows)
    assert any(r[1] != "llama3-405b" and r[4] == "FAILED" for r in rows)
    ctld = (sample / "corpus" / "slurm" / "slurmctld.log").read_text()
    assert "reason set to:" in ctld and "Created reservation=" in ctld
    assert "not responding, setting DOWN" in ctld


def test_job_logs_carry_the_cascade(sample):
    text = "".join(_read(p).decode("utf-8", "replace")
                   for p in (sample / "corpus" / "jobs").rglob("*.log*"))
    assert "Watchdog caught collective operation timeout" in text
    assert "NCCL INFO Bootstrap : Using" in text
    assert "Got completion from peer" in text
    assert "DUE TO NODE FAILURE" in text


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, sample):
    def digest(root: Path) -> str:
        h = hashlib.sha256()
        for p in sorted(root.rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(root)).encode())
                h.update(p.read_bytes())
        return h.hexdigest()

    again = _generate(tmp_path / "again")
    other = _generate(tmp_path / "other", seed=1)
    assert digest(again / "corpus") == digest(sample / "corpus")
    assert digest(again / "truth") != ""
    assert digest(other / "corpus") != digest(sample / "corpus")


def test_llama3_mix_is_exactly_table5():
    p = load_preset("llama3")
    counts = Counter(component_counts(p, random.Random(0)))
    expected = {c.component: c.published_interruptions for c in load_taxonomy().table5}
    assert dict(counts) == expected
    assert sum(counts.values()) == 419


@pytest.mark.slow
def test_llama3_timeline_matches_the_paper():
    p = load_preset("llama3")
    cluster = build_cluster(p, 0)
    tl = build_timeline(p, cluster, 0, p.start.timestamp())
    counts = Counter(i.component for i in tl.incidents)
    assert counts[PLANNED] == 47
    assert len(tl.incidents) == 466
    unexpected = sum(not i.planned for i in tl.incidents)
    assert unexpected / p.days == pytest.approx(7.76, abs=0.01)
    assert len(cluster.run_hosts) == 2048


@pytest.mark.parametrize("name", ["small", "medium", "uniform", "skewed"])
def test_scaled_presets_keep_their_mix(name):
    p = load_preset(name)
    counts = Counter(component_counts(p, random.Random(0)))
    assert sum(counts.values()) == p.unexpected
    if p.mix == "table5":
        top = counts.most_common(1)[0][0]
        assert top == "Faulty GPU"
    if p.mix == "uniform":
        assert max(counts.values()) - min(counts.values()) <= 1


def test_every_preset_loads():
    assert {"sample", "small", "medium", "llama3", "uniform", "skewed"} <= set(
        preset_names())
    for name in preset_names():
        load_preset(name)


def test_unknown_preset_is_bad_usage(tmp_path):
    result = CliRunner().invoke(app, ["simulate", "--preset", "nope", "--out",
                                      str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "unknown preset" in result.output


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["node0001"], "node0001"),
        (["node0001", "node0002", "node0003"], "node[0001-0003]"),
        (["node0001", "node0003", "node0004"], "node[0001,0003-0004]"),
        (["gpu-9", "gpu-10"], "gpu-[9-10]"),
        (["login"], "login"),
    ],
)
def test_compress_hosts(names, expected):
    assert compress_hosts(names) == expected


@pytest.mark.slow
def test_memory_stays_bounded_on_a_scaled_preset(tmp_path):
    """Peak RSS of generating `small` (8x sample's hosts) stays well under budget."""
    # VmHWM, not ru_maxrss: the latter survives exec and would report pytest's own peak
    code = ("import re, sys; from pathlib import Path; "
            "from faultline.simulate import simulate; "
            "simulate(sys.argv[1], Path(sys.argv[2]), 0); "
            "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])")
    peaks = {}
    for preset in ("sample", "small"):
        out = subprocess.run([sys.executable, "-c", code, preset, str(tmp_path / preset)],
                             capture_output=True, text=True, check=True)
        peaks[preset] = int(out.stdout.strip()) / 1024  # MiB
    assert peaks["small"] < 600, peaks
    assert peaks["small"] < 2.5 * peaks["sample"], peaks


def test_committed_sample_is_what_the_simulator_writes(sample, repo_root):
    """fixtures/sample is `faultline simulate --preset sample --seed 0`, byte for byte:
    regenerate it whenever the simulator changes."""
    committed = repo_root / "fixtures" / "sample"
    for sub in ("corpus", "truth"):
        fresh = {str(p.relative_to(sample / sub)): p.read_bytes()
                 for p in (sample / sub).rglob("*") if p.is_file()}
        have = {str(p.relative_to(committed / sub)): p.read_bytes()
                for p in (committed / sub).rglob("*") if p.is_file()}
        assert set(have) == set(fresh), sub
        assert have == fresh, sub
