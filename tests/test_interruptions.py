"""Root causes: per-interruption accuracy against the simulator's truth on corpora the
rules were not tuned on (other seeds, other mixes), real peer lines through the rules,
report/explain output, and operator overrides."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.classifiers import signals
from faultline.cli import app

runner = CliRunner()


def _simulate(out: Path, preset: str, seed: int) -> Path:
    r = runner.invoke(app, ["simulate", "--preset", preset, "--out", str(out), "--seed",
                            str(seed)])
    assert r.exit_code == 0, r.output
    return out


def _ingest(corpus: Path, db: Path, *extra: str) -> str:
    r = runner.invoke(app, ["ingest", str(corpus), "--db", str(db), *extra])
    assert r.exit_code == 0, r.output
    return r.output


def score(root: Path, db: Path) -> dict:
    """Per-interruption comparison with the truth, and the confusion matrix. The
    truth's culprit host is where the fault was: the hardware suspect, or for a
    software fault the host where it surfaced."""
    with (root / "truth" / "interruptions.csv").open(newline="") as f:
        truth = list(csv.DictReader(f))
    with duckdb.connect(str(db), read_only=True) as con:
        got = con.execute("""
            SELECT job_id, epoch(failed_at), component, planned,
                   coalesce(culprit_host, surfaced_host)
            FROM interruptions WHERE run LIKE '%llama3-405b' ORDER BY failed_at
        """).fetchall()
    assert len(got) == len(truth)
    confusion: Counter = Counter()
    right = hosts = hosts_right = planned_right = 0
    for t, g in zip(truth, got, strict=True):
        assert t["job_id"] == g[0]
        confusion[(t["component"], g[2])] += 1
        right += t["component"] == g[2]
        planned_right += (t["planned"] == "True") == g[3]
        if t["culprit_host"]:
            hosts += 1
            hosts_right += t["culprit_host"] == g[4]
    return {"n": len(truth), "component": right / len(truth),
            "host": hosts_right / max(hosts, 1), "planned_exact": planned_right == len(truth),
            "confusion": confusion}


def print_confusion(name: str, s: dict) -> str:
    lines = [f"{name}: {s['n']} interruptions, component accuracy {s['component']:.3f}, "
             f"culprit host accuracy {s['host']:.3f}"]
    for (truth, got), n in sorted(s["confusion"].items()):
        mark = "" if truth == got else "   <-- wrong"
        lines.append(f"  {truth:32} -> {got:32} {n:4}{mark}")
    text = "\n".join(lines)
    print(text)
    return text


@pytest.mark.slow
@pytest.mark.parametrize(("preset", "seed", "tz"), [
    ("uniform", 11, "UTC"),
    ("skewed", 12, "Europe/Berlin"),
    ("small", 13, "America/Los_Angeles"),
])
def test_root_cause_accuracy_on_unseen_corpora(preset, seed, tz, tmp_path):
    out = _simulate(tmp_path / preset, preset, seed)
    db = tmp_path / "x.duckdb"
    _ingest(out / "corpus", db, "--tz", tz)
    s = score(out, db)
    text = print_confusion(f"{preset} seed {seed}", s)
    assert s["component"] >= 0.98, text
    assert s["host"] >= 0.98, text
    assert s["planned_exact"], text


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory, repo_root) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("s") / "sample"
    shutil.copytree(repo_root / "fixtures" / "sample", root)
    db = root / "db.duckdb"
    _ingest(root / "corpus", db)
    return root, db


def test_sample_corpus_is_classified(sample_db):
    root, db = sample_db
    s = score(root, db)
    text = print_confusion("sample", s)
    assert s["component"] >= 0.95 and s["planned_exact"], text


def test_breakdown_counts_match_the_truth(sample_db):
    root, db = sample_db
    truth = json.loads((root / "truth" / "summary.json").read_text())
    r = runner.invoke(app, ["report", "--db", str(db), "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    got = {row["component"]: row["interruptions"] for row in data["rows"]
           if row["interruptions"]}
    assert sum(got.values()) == truth["interruptions"]
    assert data["planned"] == truth["planned"]
    assert abs(sum(row["percent"] or 0 for row in data["rows"]) - 100) < 1e-9
    assert data["effective_training_time"] == pytest.approx(
        truth["effective_training_time"], abs=0.01)


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
def test_report_formats_and_published_comparison(sample_db, fmt):
    _root, db = sample_db
    r = runner.invoke(app, ["report", "--db", str(db), "--format", fmt,
                            "--compare", "llama3"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "Faulty GPU" in r.output
    assert "148" in r.output
    if fmt in ("table", "markdown"):
        assert "35.3" in r.output and "94.9" in r.output and "30.1" in r.output
    if fmt == "json":
        pub = json.loads(r.output)["published"]
        assert pub["printed_percent_sum"] == 94.9 and pub["unexpected"] == 419


def test_explain_shows_the_evidence_chain(sample_db):
    _root, db = sample_db
    with duckdb.connect(str(db), read_only=True) as con:
        iid = con.execute("SELECT interruption_id FROM interruptions WHERE component = "
                          "'GPU HBM3 Memory' ORDER BY failed_at LIMIT 1").fetchall()[0][0]
    r = runner.invoke(app, ["explain", "--db", str(db), iid], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert "GPU HBM3 Memory" in r.output and "root" in r.output
    assert "Xid" in r.output and "kern" in r.output and "symptoms:" in r.output
    assert runner.invoke(app, ["explain", "--db", str(db), "i-nope"]).exit_code == 2


def test_overrides_win_and_survive_reingest(sample_db, tmp_path):
    root, db = sample_db
    with duckdb.connect(str(db), read_only=True) as con:
        iid = con.execute("SELECT interruption_id FROM interruptions WHERE component = "
                          "'SSD' LIMIT 1").fetchall()[0][0]
    ov = tmp_path / "overrides.csv"
    ov.write_text(f"interruption_id,component,note\n{iid},Power Supply,RMA found PSU\n")
    for _ in range(2):
        _ingest(root / "corpus", db, "--overrides", str(ov))
        with duckdb.connect(str(db), read_only=True) as con:
            comp, rule = con.execute("SELECT component, rule_id FROM interruptions WHERE "
                                     "interruption_id = ?", [iid]).fetchall()[0]
        assert (comp, rule) == ("Power Supply", "override")
    _ingest(root / "corpus", db)  # stored in the database: kept without the file
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT component FROM interruptions WHERE interruption_id = ?",
                           [iid]).fetchall()[0][0] == "Power Supply"
    r = runner.invoke(app, ["overrides", "remove", "--db", str(db), iid])
    assert r.exit_code == 0, r.output
    with duckdb.connect(str(db), read_only=True) as con:  # the classifiers decide again
        assert con.execute("SELECT component FROM interruptions WHERE interruption_id = ?",
                           [iid]).fetchall()[0][0] == "SSD"


def test_interruption_ids_are_deterministic(sample_db, tmp_path):
    root, db = sample_db
    with duckdb.connect(str(db), read_only=True) as con:
        before = con.execute("SELECT * FROM interruptions ORDER BY 1").fetchall()
    _ingest(root / "corpus", db)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT * FROM interruptions ORDER BY 1").fetchall() == before


# Real lines from other projects (../shared/peer-data) through the same rules.
@pytest.mark.shared
@pytest.mark.parametrize(("path_like", "kind", "xid", "component"), [
    ("%dmesg-with-xid-119.log", "xid", 119, "GPU System Processor"),
    ("%memory/testdata/dmesg.decode.iso.log", "xid", 13, "Software Bug"),
    ("%memory/testdata/dmesg.decode.iso.log", "xid", 43, "Software Bug"),
    ("%memory/testdata/dmesg.decode.iso.log", "oom_kill", None, "Software Bug"),
    ("%nccl/testdata/dmesg.decode.iso.log", "segfault", None, "Software Bug"),
    ("%1dev_6flap_syslog", "ib_link_down", None, "Network Switch/Cable"),
    ("%pstore/testdata/7530486857247/dmesg.txt", "kernel_panic", None, "Host Maintenance"),
])
def test_real_peer_lines_get_their_component(shared_dir, tmp_path_factory, path_like, kind,
                                             xid, component):
    db = tmp_path_factory.getbasetemp() / "peer-rules.duckdb"
    if not db.exists():
        _ingest(shared_dir / "peer-data", db)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT kind, message, xid, attrs FROM events WHERE path LIKE ? "
                           "AND kind = ? AND (? IS NULL OR xid = ?)",
                           [path_like, kind, xid, xid]).fetchall()
    assert rows, (path_like, kind)
    for k, message, x, attrs in rows:
        rule = signals.rule_for(k, message, x, attrs)
        assert rule is not None and rule.component == component, (message, rule)


def test_every_rule_is_reachable_and_names_a_known_component():
    from faultline.schemas.event_kinds import EVENT_KINDS
    from faultline.schemas.taxonomy import load_taxonomy

    names = set(load_taxonomy().component_names)
    for rule in signals.RULES:
        assert rule.kind in EVENT_KINDS, rule
        assert rule.component in names, rule
        assert 1 <= rule.tier <= 7 and 0 < rule.confidence <= 1
    for code, entry in load_taxonomy().xids.items():
        rule = signals.xid_rule(code, "", {})
        assert (rule is None) == (entry.role not in ("root", "app")), code


@pytest.mark.parametrize(("xid", "message", "attrs", "component"), [
    (48, "An uncorrectable double bit error (DBE) has been detected on GPU in the "
         "framebuffer at partition 3, subpartition 0.", {"unit": "framebuffer"},
     "GPU HBM3 Memory"),
    (48, "An uncorrectable ECC error has been detected on GPU in GSP-RISCV", {},
     "GPU SRAM Memory"),
    (140, "... DRAM:1, LTC:0, MMU:0, PCIE:0", {"dram": 1, "ltc": 0}, "GPU HBM3 Memory"),
    (140, "... DRAM:0, LTC:1, MMU:0, PCIE:0", {"dram": 0, "ltc": 1}, "GPU SRAM Memory"),
    (95, "Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No", {}, "GPU SRAM Memory"),
    (79, "GPU has fallen off the bus.", {}, "Faulty GPU"),
])
def test_xid_rules_follow_nvidias_catalog(xid, message, attrs, component):
    assert signals.xid_rule(xid, message, attrs).component == component


@pytest.mark.parametrize(("kind", "message", "component"), [
    ("checksum_mismatch", "ERROR parameter checksum mismatch between data-parallel "
     "replicas: rank 213 (node gpu-026, device 5) differs from its replicas",
     "Silent Data Corruption"),
    # a state_dict shape mismatch is a software bug, whatever a parser calls it
    ("checksum_mismatch", "RuntimeError: Error(s) in loading state_dict for Transformer: "
     "size mismatch for tok_embeddings.weight", None),
    ("ib_link_down", "ib6: lost carrier", "Network Switch/Cable"),
    ("node_not_responding", "error: Nodes node0042 not responding", "Host Maintenance"),
    ("nccl_async_error", "NET/IB : Got async event : local catastrophic error", "NIC"),
])
def test_signal_rules(kind, message, component):
    rule = signals.rule_for(kind, message, None, None)
    assert (rule.component if rule else None) == component


@pytest.mark.parametrize(("text", "gpu"), [
    ("xid74 on gpu 4, drain for swap", 4),
    ("GPU3 hot, TIM repaste", 3),
    ("node hung, power cycled", None),
    ("gpu 1 and gpu 5 flaky", None),  # two GPUs named: no single culprit
])
def test_the_gpu_a_drain_reason_names(text, gpu):
    from faultline.classifiers.interruptions import _gpu_named_in

    assert _gpu_named_in(text) == gpu
