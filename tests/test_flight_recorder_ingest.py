"""End to end: dumps anywhere in a corpus are recognized by content, counted as one line
each, and ``collective_hangs`` names the culprit rank, its host and the evidence."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import duckdb
from test_flight_recorder import dump, entry
from typer.testing import CliRunner

from faultline.cli import app

# the sample corpus's own wording (fixtures/sample/corpus, simulator output)
WATCHDOG = ("2024-12-29T22:55:57.807971Z [rank{r}]:[E1229 22:55:57.807971000 "
            "ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=6, OpType=ALLREDUCE, NumelIn=262144, "
            "NumelOut=262144, Timeout(ms)=600000) ran for 600053 milliseconds before timing out.")


def test_dumps_in_a_corpus_give_collective_hangs(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    groups = {"0": ("default_pg", [8, 9, 10, 11])}
    for r, host in ((8, "node0001"), (9, "node0001"), (10, "node0002"), (11, "node0002")):
        d = corpus / "jobs" / "555" / host
        d.mkdir(parents=True, exist_ok=True)
        es = [entry(r, s, "completed") for s in range(1, 6)]
        if r != 10:
            es.append(entry(r, 6, "started"))
        data = pickle.dumps(dump(es, groups), protocol=2)
        name = f"nccl_trace_rank_{r}"
        if r == 11:  # compressed, and under a name that says nothing but the rank
            (d / f"fr_dump_{r}.gz").write_bytes(gzip.compress(data))
        else:
            (d / name).write_bytes(data)
        if host == "node0001":
            (corpus / "jobs" / "555" / f"{host}.log").open("a").write(
                WATCHDOG.format(r=r) + "\n")
    # rank 10 writes nothing but NCCL's init line: it alone places the rank (cudaDev 2)
    (corpus / "jobs" / "555" / "node0002.log").write_text(
        "2024-12-29T06:00:48.491438Z node0002:148373:148433 [2] NCCL INFO comm "
        "0xf51482982377 rank 10 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0\n")
    db = tmp_path / "f.duckdb"
    res = CliRunner().invoke(app, ["ingest", str(corpus), "--db", str(db)])
    assert res.exit_code == 0, res.output
    con = duckdb.connect(str(db), read_only=True)
    files = con.execute("SELECT source, lines, event_lines, reject_lines, problem FROM files "
                        "WHERE path LIKE '%/node000_/%'").fetchall()
    assert sorted(files) == [("flight_recorder", 1, 1, 0, None)] * 4, files
    [row] = con.execute("SELECT job_id, pg_id, pg_desc, collective_seq_id, op, ranks, "
                        "missing_ranks, verdict, culprit_ranks, culprit_host, evidence_path, "
                        "culprit_gpu "
                        "FROM collective_hangs").fetchall()
    assert row[:9] == ("555", 0, "default_pg", 6, "all_reduce", [8, 9, 10, 11],
                       [8, 9, 10, 11], "never_entered", [10])
    assert row[9] == "node0002" and row[10].endswith("node0002/nccl_trace_rank_10")
    assert row[11] == 2
    con.close()
    # the data-quality suites hold on the new table (its list columns included)
    res = CliRunner().invoke(app, ["check", "--db", str(db)])
    assert res.exit_code == 0, res.output
    # re-running changes nothing
    res = CliRunner().invoke(app, ["ingest", str(corpus), "--db", str(db)])
    assert res.exit_code == 0, res.output
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM collective_hangs").fetchone() == (1,)


def test_byte_identical_dumps_of_two_ranks_both_count(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus" / "jobs" / "556"
    corpus.mkdir(parents=True)
    groups = {"0": ("default_pg", [0, 1, 2])}
    same = pickle.dumps(dump([{**entry(0, 1, "started"), "time_created_ns": 5}], groups))
    (corpus / "nccl_trace_rank_0").write_bytes(same)
    (corpus / "nccl_trace_rank_1").write_bytes(same)  # same bytes: a duplicate file
    (corpus / "nccl_trace_rank_2").write_bytes(pickle.dumps(dump([], groups)))
    db = tmp_path / "f.duckdb"
    res = CliRunner().invoke(app, ["ingest", str(tmp_path / "corpus"), "--db", str(db)])
    assert res.exit_code == 0, res.output
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT verdict, culprit_ranks, dumps FROM collective_hangs"
                       ).fetchall() == [("never_entered", [2], 3)]
