"""Flight Recorder dumps: the parser (pickle and JSON) and every verdict of the analysis."""

from __future__ import annotations

import json
import pickle

import pytest

from faultline.classifiers.hangs import RankDump, analyse
from faultline.pipeline.parsers import flight_recorder as fr
from faultline.pipeline.records import ParseContext


def entry(rank: int, seq: int, state: str, op: str = "all_reduce", pg: str = "0",
          desc: str = "default_pg", sizes: list | None = None, dtype: str = "Float",
          p2p: int = 0, is_p2p: bool = False, record: int = 0) -> dict:
    """One entry with PyTorch's field names (FlightRecorder.hpp)."""
    return {"record_id": record, "pg_id": int(pg), "process_group": (pg, desc),
            "collective_seq_id": seq, "p2p_seq_id": p2p, "op_id": seq,
            "profiling_name": f"nccl:{op}",
            "time_created_ns": 1_700_000_000_000_000_000 + seq * 1000 + rank,
            "duration_ms": None, "input_sizes": sizes or [[1024, 1024]],
            "input_dtypes": [dtype], "output_sizes": sizes or [[1024, 1024]],
            "output_dtypes": [dtype], "state": state, "time_discovered_started_ns": None,
            "time_discovered_completed_ns": None, "retired": state == "completed",
            "timeout_ms": 600000, "is_p2p": is_p2p, "frames": []}


def dump(entries: list[dict], groups: dict[str, tuple[str, list[int]]]) -> dict:
    done = {}
    for e in entries:
        g = str(e["pg_id"])
        done.setdefault(g, {"last_enqueued_collective": 0, "last_started_collective": 0,
                            "last_completed_collective": 0})
        done[g]["last_enqueued_collective"] = max(done[g]["last_enqueued_collective"],
                                                  e["collective_seq_id"])
        if e["state"] == "completed":
            done[g]["last_completed_collective"] = max(
                done[g]["last_completed_collective"], e["collective_seq_id"])
    return {"version": "2.4", "nccl_version": "2.21.5",
            "pg_config": {n: {"name": n, "desc": d, "ranks": str(r)}
                          for n, (d, r) in groups.items()},
            "pg_status": done, "entries": entries}


def summaries(raws: dict[int, dict], fmt: str = "pickle") -> list[RankDump]:
    out = []
    for rank, raw in raws.items():
        data = pickle.dumps(raw, protocol=2) if fmt == "pickle" else json.dumps(raw).encode()
        path = f"/c/jobs/77/nccl_trace_rank_{rank}"
        parsed = fr.parse(data, ParseContext(path=path, job_id="77"))
        assert parsed.lines == 1 and not parsed.rejects and len(parsed.events) == 1
        out.append(RankDump(rank, path, parsed.events[0].attrs))
    return out


G4 = {"0": ("default_pg", [0, 1, 2, 3])}


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_never_entered_names_the_rank_that_did_not_enqueue(fmt: str) -> None:
    raws = {r: dump([entry(r, s, "completed") for s in range(1, 6)]
                    + ([] if r == 2 else [entry(r, 6, "started")]), G4) for r in range(4)}
    [h] = analyse("77", summaries(raws, fmt))
    assert (h.verdict, h.collective_seq_id, h.culprit_ranks, h.missing_ranks) == (
        "never_entered", 6, [2], [0, 1, 2, 3])
    assert h.op == "all_reduce" and h.ranks == [0, 1, 2, 3] and h.pg_desc == "default_pg"
    assert h.evidence_path.endswith("nccl_trace_rank_2")


def test_not_completed_blames_the_least_advanced_rank() -> None:
    raws = {r: dump([entry(r, 1, "completed"), entry(r, 2, "scheduled" if r == 3 else "started")],
                    G4) for r in range(4)}
    [h] = analyse("77", summaries(raws))
    assert (h.verdict, h.collective_seq_id, h.culprit_ranks) == ("not_completed", 2, [3])


def test_not_completed_in_one_state_names_no_culprit() -> None:
    raws = {r: dump([entry(r, 1, "completed"), entry(r, 2, "started")], G4) for r in range(4)}
    [h] = analyse("77", summaries(raws))
    assert (h.verdict, h.culprit_ranks, h.missing_ranks) == ("not_completed", [], [0, 1, 2, 3])


def test_mismatch_blames_the_rank_outside_the_majority() -> None:
    raws = {r: dump([entry(r, 1, "completed"),
                     entry(r, 2, "started", op="all_gather" if r == 1 else "all_reduce")], G4)
            for r in range(4)}
    [h] = analyse("77", summaries(raws))
    assert (h.verdict, h.culprit_ranks, h.op) == ("mismatch", [1], "all_gather | all_reduce")
    raws = {r: dump([entry(r, 1, "started", sizes=[[8]] if r == 0 else [[16]])], G4)
            for r in range(4)}
    assert analyse("77", summaries(raws))[0].culprit_ranks == [0]


def test_incomplete_dumps_are_reported_not_guessed() -> None:
    raws = {r: dump([entry(r, 1, "completed"), entry(r, 2, "started")], G4) for r in (0, 1, 3)}
    [h] = analyse("77", summaries(raws))
    assert (h.verdict, h.missing_ranks, h.culprit_ranks, h.dumps) == (
        "incomplete_dumps", [2], [], 3)


def test_no_hang_when_every_member_completed_everything() -> None:
    raws = {r: dump([entry(r, s, "completed") for s in (1, 2)], G4) for r in range(4)}
    assert analyse("77", summaries(raws)) == []


def test_multiple_hung_groups_each_get_a_row() -> None:
    groups = {"0": ("default_pg", [0, 1, 2, 3]), "5": ("EXPERT_MODEL_PARALLEL_GROUP", [0, 1]),
              "6": ("EXPERT_MODEL_PARALLEL_GROUP", [2, 3])}
    raws = {}
    for r in range(4):
        es = [entry(r, 1, "completed"), entry(r, 2, "started")]
        ep = "5" if r < 2 else "6"
        es += [entry(r, 20536, "completed", op="all_to_all", pg=ep,
                     desc="EXPERT_MODEL_PARALLEL_GROUP")]
        if r not in (1, 3):
            es.append(entry(r, 20537, "started", op="all_to_all", pg=ep,
                            desc="EXPERT_MODEL_PARALLEL_GROUP"))
        raws[r] = dump(es, groups)
    hangs = {h.pg_name: h for h in analyse("77", summaries(raws))}
    assert hangs["5"].verdict == "never_entered" and hangs["5"].culprit_ranks == [1]
    assert hangs["6"].verdict == "never_entered" and hangs["6"].culprit_ranks == [3]
    assert hangs["5"].collective_seq_id == 20537 and hangs["5"].op == "all_to_all"
    assert hangs["0"].verdict == "not_completed"


def test_p2p_aligned_by_p2p_seq_id_names_the_peer_that_never_posted() -> None:
    groups = {"0": ("default_pg", [0, 1])}
    r0 = [entry(0, 3, "completed"), entry(0, 3, "started", op="send 0->1", p2p=7, is_p2p=True)]
    r1 = [entry(1, 3, "completed")]
    [h] = analyse("77", summaries({0: dump(r0, groups), 1: dump(r1, groups)}))
    assert (h.is_p2p, h.collective_seq_id, h.verdict, h.culprit_ranks) == (
        True, 7, "never_entered", [1])


def test_p2p_in_a_subgroup_is_read_with_the_ranks_within_the_group() -> None:
    # ProcessGroupNCCL names p2p ops with group ranks: in PP group [1, 3], rank 1 sends
    # "send 0->1" to rank 3; rank 3 never posted its recv
    groups = {"0": ("default_pg", [0, 1, 2, 3]), "5": ("PIPELINE_MODEL_PARALLEL_GROUP", [1, 3])}
    raws = {}
    for r in range(4):
        es = [entry(r, 1, "completed")]
        if r in (1, 3):
            es.append(entry(r, 1, "completed", op="send 0->1" if r == 1 else "recv 1<-0",
                            pg="5", desc="PIPELINE_MODEL_PARALLEL_GROUP", p2p=1, is_p2p=True))
        if r == 1:
            es.append(entry(r, 1, "started", op="send 0->1", pg="5",
                            desc="PIPELINE_MODEL_PARALLEL_GROUP", p2p=2, is_p2p=True))
        raws[r] = dump(es, {n: g for n, g in groups.items() if r in g[1]})
    [h] = analyse("77", summaries(raws))
    assert (h.pg_name, h.is_p2p, h.collective_seq_id, h.verdict, h.culprit_ranks,
            h.missing_ranks, h.ranks) == ("5", True, 2, "never_entered", [3], [1, 3], [1, 3])


def test_p2p_posted_on_both_ends_blames_the_end_that_never_started() -> None:
    groups = {"0": ("default_pg", [0, 1])}
    r0 = [entry(0, 0, "started", op="send 0->1", p2p=9, is_p2p=True)]
    r1 = [entry(1, 0, "scheduled", op="recv 1<-0", p2p=9, is_p2p=True)]
    [h] = analyse("77", summaries({0: dump(r0, groups), 1: dump(r1, groups)}))
    assert (h.is_p2p, h.verdict, h.culprit_ranks, h.missing_ranks, h.op) == (
        True, "not_completed", [1], [0, 1], "recv 1<-0 | send 0->1")


def test_p2p_peer_without_a_dump_is_incomplete_not_guessed() -> None:
    groups = {"0": ("default_pg", [0, 1, 2])}
    raws = {0: dump([entry(0, 0, "started", op="send 0->2", p2p=4, is_p2p=True)], groups),
            1: dump([], groups)}
    hangs = analyse("77", summaries(raws))
    p2p = [h for h in hangs if h.is_p2p]
    assert [(h.verdict, h.missing_ranks, h.culprit_ranks) for h in p2p] == [
        ("incomplete_dumps", [2], [])]


def test_mismatched_dtypes_and_no_majority() -> None:
    raws = {r: dump([entry(r, 1, "completed"),
                     entry(r, 2, "started", dtype="BFloat16" if r == 3 else "Float")], G4)
            for r in range(4)}
    [h] = analyse("77", summaries(raws))
    assert (h.verdict, h.culprit_ranks) == ("mismatch", [3])
    assert h.dtypes["3"] == ["BFloat16"] and h.dtypes["0"] == ["Float"]
    # two ranks, two different ops: no majority, both are suspects
    g2 = {"0": ("default_pg", [0, 1])}
    raws = {r: dump([entry(r, 1, "started", op="all_reduce" if r else "broadcast")], g2)
            for r in range(2)}
    [h] = analyse("77", summaries(raws))
    assert (h.verdict, h.culprit_ranks) == ("mismatch", [0, 1])


def test_rank_comes_from_the_file_name() -> None:
    assert fr.rank_from_path("/x/nccl_trace_rank_12") == 12
    assert fr.rank_from_path("/x/fr_dump_12") == 12
    assert fr.rank_from_path("/x/trace_rank_3.pkl") == 3
    assert fr.rank_from_path("/x/notes.txt") is None


def test_unreadable_dumps_are_one_rejected_line_with_the_reason() -> None:
    class Evil:
        def __reduce__(self):
            return (print, ("ran",))
    data = pickle.dumps({"version": "2.4", "pg_config": {}, "entries": [Evil()]}, protocol=2)
    out = fr.parse(data, ParseContext(path="/c/nccl_trace_rank_0"))
    assert out.lines == 1 and not out.events
    assert "refused global __builtin__.print" in out.rejects[0].reason
    raw = dump([entry(0, 1, "completed")], G4) | {"version": "1.0"}
    out = fr.parse(json.dumps(raw).encode(), ParseContext(path="/c/nccl_trace_rank_0"))
    assert "version 1.0" in out.rejects[0].reason
    assert fr.looks_like_dump(b"plain text\n") is None
    assert fr.looks_like_dump(pickle.dumps(raw, protocol=2)) == "pickle"


def test_json_dump_without_entries_and_with_string_status_is_read() -> None:
    # dump_json writes pg_status values as strings and no "entries" when there are none
    raw = {"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                                 "ranks": "[0, 1]"}},
           "pg_status": {"0": {"last_enqueued_collective": "7",
                               "last_started_collective": "7",
                               "last_completed_collective": "7"}}}
    data = json.dumps(raw).encode()
    assert fr.looks_like_dump(data) == "json"
    out = fr.parse(data, ParseContext(path="/c/nccl_trace_rank_1"))
    g = out.events[0].attrs["groups"]["0"]
    assert (g["last_completed"], g["ranks"], g["tail"]) == (7, "[0, 1]", [])


def test_entries_that_left_the_ring_buffer_are_not_taken_for_never_entered() -> None:
    # rank 3 has no group "0" at all; the others' buffers no longer hold seq 1..3
    raws = {r: dump([entry(r, s, "completed") for s in (4, 5)], G4) for r in range(3)}
    raws[3] = dump([], {"0": ("default_pg", [0, 1, 2, 3])})
    [h] = analyse("77", summaries(raws))
    assert (h.verdict, h.culprit_ranks) == ("never_entered", [3])
    assert h.collective_seq_id == 1
