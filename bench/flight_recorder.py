"""Flight Recorder at scale: 2,048 ranks x 10k entries per rank.

``python bench/flight_recorder.py [--ranks 2048] [--entries 10000] [--parse-sample 8]``

Each rank's dump is a PyTorch-shaped dict (field names of FlightRecorder.hpp) with a
ring buffer of ``--entries`` entries over 3 process groups; rank ``ranks // 2 + 5``
never enters the last collective of the default group. The script measures (1) reading
one dump with the safe pickle reader and the JSON reader (bytes, seconds, the summary
kept per rank), on ``--parse-sample`` ranks, and (2) the cross-rank analysis over the
summaries of all ranks (each rank's summary built by the same code from its dump), with
peak memory of the summaries and the analysis (tracemalloc; the process's max
RSS). The result is printed as JSON.
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from faultline.classifiers.hangs import RankDump, analyse
from faultline.pipeline.parsers import flight_recorder as fr
from faultline.pipeline.records import ParseContext

GROUPS = {"0": "default_pg", "1": "TENSOR_MODEL_PARALLEL_GROUP", "2": "DATA_PARALLEL_GROUP"}


def raw_dump(rank: int, ranks: int, entries: int, culprit: int) -> dict:
    out, status = [], {}
    per = entries // len(GROUPS)
    for g, desc in GROUPS.items():
        last = 20_000 + per
        for k in range(per):
            seq = 20_000 + k + 1
            if g == "0" and rank == culprit and seq == last:
                break
            state = "completed" if not (g == "0" and seq == last) else "started"
            out.append({"record_id": len(out), "pg_id": int(g), "process_group": (g, desc),
                        "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
                        "profiling_name": "nccl:all_reduce",
                        "time_created_ns": 1_733_000_000_000_000_000 + seq * 1_000_000 + rank,
                        "duration_ms": 1.5, "input_sizes": [[4096, 1024]],
                        "input_dtypes": ["BFloat16"], "output_sizes": [[4096, 1024]],
                        "output_dtypes": ["BFloat16"], "state": state,
                        "time_discovered_started_ns": None,
                        "time_discovered_completed_ns": None, "retired": state == "completed",
                        "timeout_ms": 600_000, "is_p2p": False, "frames": []})
        status[g] = {"last_enqueued_collective": out[-1]["collective_seq_id"],
                     "last_started_collective": out[-1]["collective_seq_id"],
                     "last_completed_collective": last - 1}
    return {"version": "2.4", "nccl_version": "2.21.5",
            "pg_config": {g: {"name": g, "desc": d, "ranks": str(list(range(ranks)))}
                          for g, d in GROUPS.items()},
            "pg_status": status, "entries": out}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2048)
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--parse-sample", type=int, default=8)
    a = ap.parse_args()
    culprit = a.ranks // 2 + 5
    t_pickle = t_json = 0.0
    size_p = size_j = 0
    for r in range(a.parse_sample):
        raw = raw_dump(r, a.ranks, a.entries, culprit)
        data, text = pickle.dumps(raw, protocol=2), json.dumps(raw).encode()
        size_p, size_j = len(data), len(text)
        ctx = ParseContext(path=f"/c/jobs/1/node{r // 8:04d}/nccl_trace_rank_{r}", job_id="1")
        t0 = time.perf_counter()
        fp = fr.parse(data, ctx)
        t_pickle += time.perf_counter() - t0
        t0 = time.perf_counter()
        fr.parse(text, ctx)
        t_json += time.perf_counter() - t0
        assert fp.events and not fp.rejects
    summary_bytes = len(json.dumps(fp.events[0].attrs))
    # every rank's summary is what the reader makes of its dump; ranks other than the
    # culprit differ only in their rank, so two dumps are read and the rest copied
    t0 = time.perf_counter()
    shapes = {}
    for r in (0, culprit):
        d = fr.read_dump(json.dumps(raw_dump(r, a.ranks, a.entries, culprit)).encode(),
                         f"nccl_trace_rank_{r}")
        shapes[r] = json.dumps(fr.summary(d))
    tracemalloc.start()
    dumps = []
    for r in range(a.ranks):
        s = json.loads(shapes[culprit if r == culprit else 0])
        s["rank"] = r
        dumps.append(RankDump(r, f"nccl_trace_rank_{r}", s))
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    hangs = analyse("1", dumps)
    t_analyse = time.perf_counter() - t0
    _cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    [h] = [h for h in hangs if h.pg_name == "0"]
    assert (h.verdict, h.culprit_ranks) == ("never_entered", [culprit]), h
    result = {
        "ranks": a.ranks, "entries_per_rank": a.entries, "pickle_bytes_per_rank": size_p,
        "json_bytes_per_rank": size_j,
        "safe_pickle_read_s_per_rank": round(t_pickle / a.parse_sample, 3),
        "json_read_s_per_rank": round(t_json / a.parse_sample, 3),
        "summary_bytes_per_rank": summary_bytes,
        "summaries_built_s": round(t_build, 1), "analyse_s": round(t_analyse, 3),
        "peak_traced_mb": round(peak / 2**20, 1),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "verdict": h.verdict, "culprit_ranks": h.culprit_ranks,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
