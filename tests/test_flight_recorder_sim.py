"""End to end on the simulator's hang scenarios: the dumps it writes read as PyTorch's
format, and collective_hangs and the root causes name the truth's culprits."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from faultline.cli import app
from faultline.pipeline.parsers import flight_recorder as fr
from faultline.simulate.corpus import simulate
from faultline.simulate.flightrec import pickle_bytes


def test_simulated_pickle_is_read_back_exactly() -> None:
    obj = {"a": [[1, 2**40, -3]], "b": ("0", "default_pg"), "c": 1.5, "d": None,
           "e": True, "f": "é" * 300, "g": -(2**70)}
    from faultline.pipeline.safepickle import loads
    assert loads(pickle_bytes(obj)) == obj


def test_simulated_hangs_match_the_truth(tmp_path: Path) -> None:
    simulate("small", tmp_path / "sim", flight_recorder=3)
    truth = list(csv.DictReader((tmp_path / "sim/truth/hangs.csv").open()))
    assert {t["verdict"] for t in truth} == {"never_entered", "not_completed"}
    some = next((tmp_path / "sim/corpus/jobs").glob("*/*/nccl_trace_rank_0"))
    dump = fr.read_dump(some.read_bytes(), str(some))
    assert dump.version == "2.4" and dump.entries[0].input_sizes == [[262144]]
    db = tmp_path / "f.duckdb"
    res = CliRunner().invoke(app, ["ingest", str(tmp_path / "sim/corpus"), "--db", str(db)])
    assert res.exit_code == 0, res.output
    con = duckdb.connect(str(db), read_only=True)
    got = {r[0]: r[1:] for r in con.execute(
        "SELECT job_id, verdict, culprit_ranks, culprit_host, culprit_gpu FROM collective_hangs "
        "WHERE NOT is_p2p").fetchall()}
    for t in truth:
        ranks = [int(t["culprit_rank"])] if t["culprit_rank"] else []
        gpu = int(t["culprit_gpu"]) if t["culprit_gpu"] else None
        assert got[t["job_id"]] == (t["verdict"], ranks, t["culprit_host"] or None, gpu), t
    files = con.execute("SELECT count(*), sum(lines), sum(event_lines) FROM files "
                        "WHERE source = 'flight_recorder'").fetchone()
    assert files[0] == files[1] == files[2] > 0
    inter = {r[0]: r[1:] for r in con.execute(
        "SELECT job_id, component, rule_id, coalesce(culprit_host, surfaced_host), "
        "interruption_id FROM interruptions").fetchall()}
    to_explain = None
    for t in truth:
        comp, rule, host, iid = inter[t["job_id"]]
        # a CPU-side hang with nothing on the host: software, where it surfaced
        if t["verdict"] == "never_entered":
            assert (comp, rule, host) == ("Software Bug", "fr.never_entered",
                                          t["culprit_host"])
            to_explain = (iid, t)
        elif t["culprit_host"]:  # a dead GPU: its Xid decides, the verdict corroborates
            assert host == t["culprit_host"]
            assert con.execute("""
                SELECT count(*) FROM interruption_evidence x JOIN events e USING (event_id)
                WHERE e.kind = 'flight_recorder_dump' AND x.role = 'corroborating'
                  AND e.job_id = ?""", [t["job_id"]]).fetchone() == (1,)
    con.close()
    assert to_explain is not None
    iid, t = to_explain
    shown = CliRunner().invoke(app, ["explain", "--db", str(db), iid])
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.output.split())
    assert ("Flight Recorder: PG 0 default_pg all_reduce #" in said
            and f"ranks {t['culprit_rank']} never entered; rank "
            f"{t['culprit_rank']} = {t['culprit_host']} GPU {t['culprit_gpu']}" in said), said
