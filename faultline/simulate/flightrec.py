"""Flight Recorder dumps for the simulator's watchdog hangs, and their truth.

For an attempt that ended in NCCL watchdog timeouts, every rank of the job writes the
dump PyTorch writes on a timeout (``TORCH_NCCL_DUMP_ON_TIMEOUT``): a pickle (protocol 2,
plain dicts, lists and tuples, as ``NCCLTraceBuffer::dump`` builds it from generic
lists) with PyTorch's field names (``torch/csrc/distributed/c10d/FlightRecorder.hpp``
and ``.cpp``, version 2.4), at
``jobs/<job>/<host>/nccl_trace_rank_<rank>``. The scenario decides the entries:

- a straggler (NCCL Watchdog Timeouts): the straggler rank never enqueued the hung
  all_reduce (``never_entered``, the CPU side);
- a dead GPU (Faulty GPU, HBM, SRAM, GSP): its rank enqueued it and it never started
  (``not_completed``; the others started it and wait);
- anything else: every rank started it and none finished (``not_completed``, no culprit).

The simulator has no diverged-program incident, so ``mismatch`` is covered by the unit
tests only (``tests/test_flight_recorder.py``).

Nothing here imports :mod:`pickle`: :func:`pickle_bytes` writes the opcodes itself.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

from faultline.simulate.model import COLLECTIVE_TIMEOUT_S, Attempt

GPU_DEAD = {"Faulty GPU", "GPU HBM3 Memory", "GPU SRAM Memory", "GPU System Processor"}
ENTRIES = 24  # ring buffer entries per rank (the hang is the last collective)


def pickle_bytes(obj: object) -> bytes:
    """Protocol-2 pickle of plain data, written opcode by opcode."""
    out = bytearray(b"\x80\x02")
    _emit(obj, out)
    out += b"."
    return bytes(out)


def _emit(v: object, out: bytearray) -> None:
    if v is None:
        out += b"N"
    elif v is True:
        out += b"\x88"
    elif v is False:
        out += b"\x89"
    elif isinstance(v, int):
        if 0 <= v < 256:
            out += b"K" + bytes([v])
        elif -(2**31) <= v < 2**31:
            out += b"J" + struct.pack("<i", v)
        else:
            raw = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
            out += b"\x8a" + bytes([len(raw)]) + raw
    elif isinstance(v, float):
        out += b"G" + struct.pack(">d", v)
    elif isinstance(v, str):
        raw = v.encode("utf-8")
        out += b"X" + struct.pack("<I", len(raw)) + raw
    elif isinstance(v, list):
        out += b"]("
        for x in v:
            _emit(x, out)
        out += b"e"
    elif isinstance(v, tuple):
        out += b"("
        for x in v:
            _emit(x, out)
        out += b"t"
    elif isinstance(v, dict):
        out += b"}("
        for k, x in v.items():
            _emit(k, out)
            _emit(x, out)
        out += b"u"
    else:
        raise TypeError(f"no pickle of {type(v).__name__} here")


def scenario(attempt: Attempt) -> tuple[str, int | None]:
    """(expected verdict, culprit rank) of a watchdog-ended attempt."""
    inc = attempt.incident
    assert inc is not None
    if inc.straggler_rank is not None:
        return "never_entered", inc.straggler_rank
    if inc.component in GPU_DEAD and inc.culprit_rank is not None:
        return "not_completed", inc.culprit_rank
    return "not_completed", None


def dump_of(attempt: Attempt, rank: int, seed: int) -> dict:
    """One rank's dump for a watchdog-ended attempt."""
    inc = attempt.incident
    assert inc is not None
    verdict, culprit = scenario(attempt)
    rng = random.Random(f"{seed}:fr:{attempt.job_id}:{attempt.attempt}:{rank}")
    hung = 400_000 + inc.index * 997  # the SeqNum the watchdog lines name (jobs.py)
    t_hang = inc.t_fault
    entries = []
    for k in range(ENTRIES):
        seq = hung - ENTRIES + 1 + k
        last = seq == hung
        if last and verdict == "never_entered" and rank == culprit:
            break
        state = "completed"
        if last:
            state = "scheduled" if rank == culprit and verdict == "not_completed" else "started"
        created = int((t_hang - (ENTRIES - 1 - k) * 0.35 + rng.uniform(0, 0.01)) * 1e9)
        entries.append({
            "record_id": k, "pg_id": 0, "process_group": ("0", "default_pg"),
            "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
            "profiling_name": "nccl:all_reduce", "time_created_ns": created,
            "duration_ms": None if state != "completed" else round(rng.uniform(1, 3), 3),
            "input_sizes": [[262144]], "input_dtypes": ["Float"],
            "output_sizes": [[262144]], "output_dtypes": ["Float"],
            "state": state,
            "time_discovered_started_ns": None if state == "scheduled" else created + 50_000,
            "time_discovered_completed_ns": created + 2_000_000 if state == "completed"
            else None,
            "retired": state == "completed",
            "timeout_ms": int(COLLECTIVE_TIMEOUT_S * 1000), "is_p2p": False, "frames": [],
        })
    last = entries[-1]["collective_seq_id"]
    done = [e["collective_seq_id"] for e in entries if e["state"] == "completed"]
    return {
        "version": "2.4", "nccl_version": "2.21.5",
        "pg_config": {"0": {"name": "0", "desc": "default_pg",
                            "ranks": str(list(range(attempt.ranks)))}},
        "pg_status": {"0": {"last_enqueued_collective": last,
                            "last_started_collective": max(
                                e["collective_seq_id"] for e in entries
                                if e["state"] != "scheduled"),
                            "last_completed_collective": max(done)}},
        "entries": entries,
    }


def chosen(attempts: list[Attempt], limit: int) -> list[Attempt]:
    """Up to ``limit`` watchdog-ended attempts, one of each scenario first (a dump per
    rank is a file per rank: every hang of a corpus would be tens of thousands). A
    requeued job's attempts share a job id: only its first may get dumps (the dumps of
    one job id are read as one attempt)."""
    seen: set[str] = set()
    pool = []
    for a in attempts:
        if a.incident is not None and a.incident.end_mode == "watchdog" \
                and a.job_id not in seen:
            pool.append(a)
        seen.add(a.job_id)
    first: dict[tuple[str, bool], Attempt] = {}
    for a in pool:
        verdict, culprit = scenario(a)
        first.setdefault((verdict, culprit is None), a)
    order = [("never_entered", False), ("not_completed", False), ("not_completed", True)]
    picked = [first[k] for k in order if k in first][:limit]
    picked += [a for a in pool if a not in picked][:max(0, limit - len(picked))]
    return sorted(picked, key=lambda a: a.start)


def write_dumps(corpus: Path, attempts: list[Attempt], seed: int, limit: int
                ) -> tuple[list[str], list[dict]]:
    """Write the dumps of up to ``limit`` watchdog hangs (:func:`chosen`); returns
    (paths relative to the corpus, truth rows)."""
    paths, truth = [], []
    for a in chosen(attempts, limit):
        inc = a.incident
        assert inc is not None
        for r in range(a.ranks):
            rel = f"jobs/{a.job_id}/{a.hosts[r // 8]}/nccl_trace_rank_{r}"
            path = corpus / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(pickle_bytes(dump_of(a, r, seed)))
            paths.append(rel)
        verdict, culprit = scenario(a)
        truth.append({"job_id": a.job_id, "interruption": inc.index, "verdict": verdict,
                      "culprit_rank": "" if culprit is None else culprit,
                      "culprit_host": "" if culprit is None else a.hosts[culprit // 8],
                      "culprit_gpu": "" if culprit is None else culprit % 8})
    return paths, truth
