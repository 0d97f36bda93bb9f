"""End to end on the simulator's hang scenarios (``--preset hangs``): the dumps it
writes read as PyTorch's format, and ``collective_hangs``, the root causes and
``explain`` say what the truth (``truth/hangs.csv``) says, scenario by scenario."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.classifiers import fr_tier
from faultline.cli import app
from faultline.pipeline.parsers import flight_recorder as fr
from faultline.simulate import flightrec
from faultline.simulate.corpus import simulate
from faultline.simulate.flightrec import pickle_bytes


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("hangs")
    simulate("hangs", out / "sim", flight_recorder=len(flightrec.SCENARIOS))
    truth = list(csv.DictReader((out / "sim/truth/hangs.csv").open()))
    db = out / "f.duckdb"
    res = CliRunner().invoke(app, ["ingest", str(out / "sim/corpus"), "--db", str(db)])
    assert res.exit_code == 0, res.output
    return db, truth


def test_simulated_pickle_is_read_back_exactly() -> None:
    obj = {"a": [[1, 2**40, -3]], "b": ("0", "default_pg"), "c": 1.5, "d": None,
           "e": True, "f": "é" * 300, "g": -(2**70)}
    from faultline.pipeline.safepickle import loads
    assert loads(pickle_bytes(obj)) == obj


def test_every_scenario_is_simulated_with_pytorchs_shapes(
        ingested: tuple[Path, list[dict]]) -> None:
    db, truth = ingested
    assert sorted(t["scenario"] for t in truth) == sorted(flightrec.SCENARIOS)
    assert {t["verdict"] for t in truth} == {"never_entered", "not_completed", "mismatch"}
    corpus = db.parent / "sim/corpus"
    p2p = next(t for t in truth if t["scenario"] == "p2p")
    rank = int(p2p["culprit_ranks"])
    path = corpus / "jobs" / p2p["job_id"] / p2p["culprit_host"] / f"nccl_trace_rank_{rank}"
    dump = fr.read_dump(path.read_bytes(), str(path))
    assert dump.version == "2.4" and dump.rank == rank
    # three groups per rank, named globally, with their members as PyTorch's string
    descs = sorted(g.desc for g in dump.groups.values())
    assert descs == ["PIPELINE_MODEL_PARALLEL_GROUP", "TENSOR_MODEL_PARALLEL_GROUP",
                     "default_pg"]
    pp = next(g for g in dump.groups.values() if g.desc == "PIPELINE_MODEL_PARALLEL_GROUP")
    assert rank in pp.ranks and len(pp.ranks) == 2 and pp.pg_id == 2
    sends = [e for e in dump.entries if e.is_p2p]
    # p2p names carry the ranks within the group; collective_seq_id stays put
    assert sends and all(e.op.startswith(("send ", "recv ")) for e in sends)
    assert {e.collective_seq_id for e in sends} == {0}
    assert len({e.p2p_seq_id for e in sends}) == len(sends)
    # the dead GPU's hang is written as dump_json writes it; the others as pickles
    dead = next(t for t in truth if t["scenario"] == "gpu_dead")
    kinds = {fr.looks_like_dump(p.read_bytes())
             for p in (corpus / "jobs" / dead["job_id"]).glob("*/nccl_trace_rank_*")}
    assert kinds == {"json"}
    assert fr.looks_like_dump(path.read_bytes()) == "pickle"


def test_collective_hangs_equal_the_truth(ingested: tuple[Path, list[dict]]) -> None:
    db, truth = ingested
    with duckdb.connect(str(db), read_only=True) as con:
        check_hangs(con, truth)


def check_hangs(con: duckdb.DuckDBPyConnection, truth: list[dict]) -> None:
    """Each scenario's ``collective_hangs`` row, and the job's verdict, against its
    truth row."""
    verdicts = fr_tier.load(con)
    for t in truth:
        rows = con.execute("""
            SELECT pg_name, pg_desc, is_p2p, verdict, culprit_ranks, culprit_host,
                   culprit_gpu FROM collective_hangs WHERE job_id = ?
            ORDER BY pg_name""", [t["job_id"]]).fetchall()
        culprits = [int(t["culprit_ranks"])] if t["culprit_ranks"] else []
        host = t["culprit_host"] or None
        gpu = int(t["culprit_gpu"]) if t["culprit_gpu"] else None
        want = (t["pg_name"], t["pg_desc"], t["is_p2p"] == "True", t["verdict"], culprits,
                host, gpu)
        assert want in rows, (t, rows)
        if t["scenario"] in ("nvlink", "p2p"):
            # the hang spreads: the stuck ranks never enter the next ops of the other
            # groups, whose rows say so; the job's verdict is where it began
            assert len(rows) > 1, rows
        else:  # every other group finished its ops
            assert rows == [want], (t, rows)
        v = verdicts.get(t["job_id"])
        if culprits:
            assert v is not None and (v.verdict, v.culprit_ranks, v.culprit_host,
                                      v.culprit_gpu) == (t["verdict"], culprits, host, gpu), t
        else:
            assert v is None, t
    files = con.execute("SELECT count(*), sum(lines), sum(event_lines) FROM files "
                        "WHERE source = 'flight_recorder'").fetchone()
    assert files[0] == files[1] == files[2] == 32 * len(truth)


def test_root_causes_follow_the_verdicts(ingested: tuple[Path, list[dict]]) -> None:
    db, truth = ingested
    with duckdb.connect(str(db), read_only=True) as con:
        check_roots(con, truth, db.parent / "sim/truth/interruptions.csv")


def check_roots(con: duckdb.DuckDBPyConnection, truth: list[dict], world_csv: Path
                ) -> None:
    """Each scenario's interruption: its component, culprit and the dump's role."""
    world = {r["job_id"]: r["component"] for r in csv.DictReader(
        world_csv.open())}
    for t in truth:
        comp, rule, host, gpu, iid = con.execute("""
            SELECT component, rule_id, coalesce(culprit_host, surfaced_host),
                   coalesce(culprit_gpu, surfaced_gpu), interruption_id
            FROM interruptions WHERE job_id = ?""", [t["job_id"]]).fetchone()
        assert comp == t["component"], t
        fr_role = con.execute("""
            SELECT list(DISTINCT x.role) FROM interruption_evidence x
            JOIN events e USING (event_id)
            WHERE x.interruption_id = ? AND e.kind = 'flight_recorder_dump'""",
                              [iid]).fetchone()[0]
        if world[t["job_id"]] == "NCCL Watchdog Timeouts":
            # only timeouts in the logs: the dumps name the culprit, a software hang
            # on a host with nothing hardware-specific is a Software Bug
            assert (comp, rule) == ("Software Bug", f"fr.{t['verdict']}"), t
            assert (host, gpu) == (t["culprit_host"], int(t["culprit_gpu"])), t
            assert fr_role == ["root"], t
        elif t["culprit_host"]:
            # a hardware signal decided (Xid, BMC thermal); the verdict on the same
            # host corroborates it: a CPU-side straggler and a GPU that never ran it
            assert host == t["culprit_host"] and fr_role == ["corroborating"], t
        else:  # no culprit named (everyone waited): the verdict adds nothing
            assert not fr_role, t


def test_explain_says_each_verdict_in_words(ingested: tuple[Path, list[dict]]) -> None:
    db, truth = ingested
    expect = {
        "cpu_stall": "PG 0 default_pg all_reduce #{seq}: ranks {r} never entered",
        "straggler": "PG 0 default_pg all_reduce #{seq}: ranks {r} never entered",
        "mismatch_op": "PG 0 default_pg all_reduce | broadcast #{seq}: ranks {r} disagree "
                       "on op (all_reduce | broadcast)",
        "mismatch_sizes": "PG 0 default_pg all_reduce #{seq}: ranks {r} disagree on sizes "
                          "([[131072]] vs [[262144]])",
        "mismatch_dtypes": "PG 0 default_pg all_reduce #{seq}: ranks {r} disagree on "
                           'dtypes (["BFloat16"] vs ["Float"])',
        # the peer's end: p2p ops name the ranks within the group (the pair)
        "p2p": "PG 2 PIPELINE_MODEL_PARALLEL_GROUP send {peer}->{me} p2p #{seq}: ranks {r} "
               "never entered",
        "nvlink": "PG 1 TENSOR_MODEL_PARALLEL_GROUP _reduce_scatter_base #{seq}: ranks {r} "
                  "entered but never completed",
        "gpu_dead": "PG 0 default_pg all_reduce #{seq}: ranks {r} entered but never "
                    "completed",
        "watchdog": "PG 0 default_pg all_reduce #{seq}: every member entered, none "
                    "finished",
    }
    with duckdb.connect(str(db), read_only=True) as con:
        found = {t["job_id"]: con.execute("""
            SELECT i.interruption_id, h.collective_seq_id FROM interruptions i
            JOIN collective_hangs h USING (job_id)
            WHERE i.job_id = ? AND h.pg_name = ? AND h.is_p2p = ?""",
            [t["job_id"], t["pg_name"], t["is_p2p"] == "True"]).fetchone() for t in truth}
    for t in truth:
        iid, seq = found[t["job_id"]]
        shown = CliRunner().invoke(app, ["explain", "--db", str(db), iid])
        assert shown.exit_code == 0, shown.output
        said = " ".join(shown.output.split())
        r = t["culprit_ranks"]
        me = int(r) // 16 if r else 0  # the PP pair is (r, r + 16) of 32 ranks
        text = expect[t["scenario"]].format(seq=seq, r=r, me=me, peer=1 - me)
        if r:
            text += f"; rank {r} = {t['culprit_host']} GPU {t['culprit_gpu']}"
        assert f"Flight Recorder: {text}" in said, (t["scenario"], text, said)


def test_a_missing_dump_is_reported_not_guessed(ingested: tuple[Path, list[dict]],
                                                tmp_path: Path) -> None:
    db, truth = ingested
    stall = next(t for t in truth if t["scenario"] == "cpu_stall")
    corpus = tmp_path / "corpus"
    shutil.copytree(db.parent / "sim/corpus", corpus)
    rank = int(stall["culprit_ranks"])
    (corpus / "jobs" / stall["job_id"] / stall["culprit_host"]
     / f"nccl_trace_rank_{rank}").unlink()
    res = CliRunner().invoke(app, ["ingest", str(corpus), "--db", str(tmp_path / "f.db")])
    assert res.exit_code == 0, res.output
    with duckdb.connect(str(tmp_path / "f.db"), read_only=True) as con:
        # each of the rank's three groups says its dump is missing, none names a culprit
        assert sorted(con.execute("""
            SELECT pg_desc, verdict, missing_ranks, culprit_ranks, dumps
            FROM collective_hangs WHERE job_id = ?""", [stall["job_id"]]).fetchall()) == [
            ("PIPELINE_MODEL_PARALLEL_GROUP", "incomplete_dumps", [rank], [], 1),
            ("TENSOR_MODEL_PARALLEL_GROUP", "incomplete_dumps", [rank], [], 7),
            ("default_pg", "incomplete_dumps", [rank], [], 31)]
        # no verdict: the watchdog timeouts alone decide, as without dumps
        assert con.execute("SELECT component, rule_id FROM interruptions WHERE job_id = ?",
                           [stall["job_id"]]).fetchone() == (
            "NCCL Watchdog Timeouts", "nccl.watchdog_straggler")
