"""Flight Recorder dumps for the simulator's watchdog hangs, and their truth.

For an attempt that ended in NCCL watchdog timeouts, every rank of the job writes the
dump PyTorch writes on a timeout (``TORCH_NCCL_DUMP_ON_TIMEOUT``) at
``jobs/<job>/<host>/nccl_trace_rank_<rank>``: a pickle (protocol 2, plain dicts, lists
and tuples, as ``NCCLTraceBuffer::dump`` builds it from generic lists). Field names
and value shapes are PyTorch's, format 2.4
(``torch/csrc/distributed/c10d/FlightRecorder.hpp`` at 00f0e2f66801 for the keys and
the version; ``FlightRecorderDetail.hpp`` ``getCollectiveTrace``/``getPgConfig``/
``getPgStatus`` for the shapes: ``process_group`` is ``(name, desc)``, ``pg_config``
is keyed by group name with ``ranks`` as the string ``"[0, 1]"``, ``pg_status`` is
keyed by the rank's own ``pg_id`` as a string, ``duration_ms`` is only present when
measured, ``time_discovered_*_ns`` are None until discovered, ``frames`` are
``{name, filename, line}``; p2p ops are named ``nccl:send 0->1`` / ``nccl:recv 1<-0``
with the ranks *within the group*, from ``ProcessGroupNCCL::send``/``recv``). Sources
(pytorch/pytorch, BSD-3-Clause):
https://github.com/pytorch/pytorch/blob/00f0e2f66801e216038f15f885bcdd4f3d955233/torch/csrc/distributed/c10d/FlightRecorder.hpp
and
https://github.com/pytorch/pytorch/blob/1189309e9a32f36e2206db87786a2ced64db4205/torch/csrc/distributed/c10d/FlightRecorderDetail.hpp
(newer versions add ``thread_name``/``thread_id`` per entry, which the reader ignores,
and write ``comm_lib_version`` for ``nccl_version``, which it reads too).

Every rank has three process groups, created in the same order everywhere (so its
local ``pg_id`` is 0, 1, 2): ``default_pg`` (all ranks), its host's
``TENSOR_MODEL_PARALLEL_GROUP`` (8 ranks over NVLink) and a two-stage
``PIPELINE_MODEL_PARALLEL_GROUP`` (rank r and r + N/2, send/recv only). Each training
step records a TP all-gather, the PP send or recv, a TP reduce-scatter and the
default group's gradient all_reduce; the hang is in the last step, and it spreads:
the ranks not stuck go on to the step's next ops and wait in those of a group with a
stuck member (:func:`last_step`). The scenario (:func:`scenario`, from the incident)
decides which op hangs first and how:

========== ============================ ======================= =====================
scenario   incident                     hung op                 verdict, culprit
========== ============================ ======================= =====================
cpu_stall  NCCL Watchdog Timeouts       default_pg all_reduce   never_entered, rank
mismatch_* NCCL Watchdog Timeouts       default_pg all_reduce   mismatch: op, sizes
                                                                or dtypes differ
p2p        NCCL Watchdog Timeouts       PP recv never posted    never_entered (p2p)
straggler  thermal straggler            default_pg all_reduce   never_entered, rank
nvlink     Xid 74 (NVLink)              TP reduce-scatter       not_completed, rank
gpu_dead   GPU died (Xid 79, 46, ...)   default_pg all_reduce   not_completed, rank
watchdog   anything else                default_pg all_reduce   not_completed, none
========== ============================ ======================= =====================

The watchdog-only incidents take the software scenarios in turn (cpu_stall, then the
three mismatches, then p2p). The dead GPU's dumps are written in the JSON variant
(``nccl_trace_rank_<r>.json``, :func:`json_bytes`), so a corpus holds both. Nothing
here imports :mod:`pickle`: :func:`pickle_bytes` writes the opcodes itself.
"""

from __future__ import annotations

import json
import random
import struct
from dataclasses import dataclass
from pathlib import Path

from faultline.simulate.model import COLLECTIVE_TIMEOUT_S, Attempt

GPU_DEAD = {"Faulty GPU", "GPU HBM3 Memory", "GPU SRAM Memory", "GPU System Processor"}
STEPS = 6  # training steps per ring buffer (4 entries each; the hang is in the last)
SOFTWARE = ("cpu_stall", "mismatch_op", "mismatch_sizes", "mismatch_dtypes", "p2p")
SCENARIOS = (*SOFTWARE, "straggler", "nvlink", "gpu_dead", "watchdog")
TP, PP = "TENSOR_MODEL_PARALLEL_GROUP", "PIPELINE_MODEL_PARALLEL_GROUP"
# op index within a step: 0 TP all-gather, 1 PP send/recv, 2 TP reduce-scatter,
# 3 default_pg all_reduce
AG, P2P, RS, AR = range(4)
OP_GROUP = (1, 2, 1, 0)  # the group (index in groups_of) of each op of a step
# (profiling name, input sizes, dtype): what a diverged rank issued instead
MISMATCH = {"mismatch_op": ("nccl:broadcast", [[262144]], "Float"),
            "mismatch_sizes": ("nccl:all_reduce", [[131072]], "Float"),
            "mismatch_dtypes": ("nccl:all_reduce", [[262144]], "BFloat16")}
# the hangs whose dumps are written in the JSON variant (the others: pickle)
JSON_SCENARIOS = frozenset({"gpu_dead"})
TRUTH_FIELDS = ["job_id", "interruption", "scenario", "verdict", "pg_name", "pg_desc",
                "is_p2p", "culprit_ranks", "culprit_host", "culprit_gpu", "component"]
FRAMES = {"all_reduce": 2_696, "all_gather_into_tensor": 3_730,
          "reduce_scatter_tensor": 4_139, "broadcast": 2_630, "send": 2_221, "recv": 2_270}


@dataclass(frozen=True)
class Hang:
    """One hang as the world caused it: where, and who."""

    scenario: str
    verdict: str
    culprit: int | None  # global rank
    op: int  # AG, P2P, RS or AR of the last step


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


def json_bytes(dump: dict) -> bytes:
    """The same dump as ``dump_json`` writes it (``FlightRecorderDetail.hpp``): no
    ``frames``, ``pg_status`` values as strings, undiscovered times as 0, no
    ``entries`` key when there are none."""
    entries = [{k: (0 if v is None and k.startswith("time_discovered") else v)
                for k, v in e.items() if k != "frames"} for e in dump["entries"]]
    out = {"version": dump["version"], "nccl_version": dump["nccl_version"],
           "pg_config": dump["pg_config"],
           "pg_status": {g: {k: str(v) for k, v in st.items()}
                         for g, st in dump["pg_status"].items()}}
    if entries:
        out["entries"] = entries
    return json.dumps(out).encode()


def scenario(attempt: Attempt, software_turn: int = 0) -> Hang:
    """The hang of a watchdog-ended attempt; ``software_turn`` picks the software
    scenario of a watchdog-only incident (:data:`SOFTWARE`, in turn)."""
    inc = attempt.incident
    assert inc is not None
    if inc.component == "NCCL Watchdog Timeouts" and inc.culprit_rank is not None:
        name = SOFTWARE[software_turn % len(SOFTWARE)]
        if name == "p2p":
            return Hang(name, "never_entered", inc.culprit_rank, P2P)
        verdict = "never_entered" if name == "cpu_stall" else "mismatch"
        return Hang(name, verdict, inc.culprit_rank, AR)
    if inc.straggler_rank is not None:
        return Hang("straggler", "never_entered", inc.straggler_rank, AR)
    if inc.component in GPU_DEAD and inc.culprit_rank is not None:
        if inc.variant == "xid74":
            return Hang("nvlink", "not_completed", inc.culprit_rank, RS)
        return Hang("gpu_dead", "not_completed", inc.culprit_rank, AR)
    return Hang("watchdog", "not_completed", None, AR)


def groups_of(rank: int, n: int) -> list[tuple[str, str, list[int]]]:
    """(name, desc, member ranks) of the rank's groups, in creation order (pg_id 0..2).
    Group names are global (PyTorch numbers groups as they are created: the default
    group "0", then every TP group, then every PP group); pg_id is the rank's own."""
    host = rank // 8
    half = n // 2
    pp = [rank % half, rank % half + half]
    return [("0", "default_pg", list(range(n))),
            (str(1 + host), TP, list(range(host * 8, host * 8 + 8))),
            (str(1 + n // 8 + rank % half), PP, pp)]


def _ops(rank: int, n: int, hang: Hang) -> list[tuple[int, str, list, str, list]]:
    """The ops of one training step as (group index, profiling name, input sizes,
    dtype, output sizes) for this rank. In the PP pair stage 0 sends and stage 1
    receives, except in the culprit's pair, where the culprit is the receiver (a
    stage-0 culprit waits for its gradients); p2p names use ranks within the group."""
    pair = groups_of(rank, n)[2][2]
    me = pair.index(rank)
    receiver = pair.index(hang.culprit) if hang.culprit in pair else 1
    p2p = f"nccl:recv {me}<-{1 - me}" if me == receiver else f"nccl:send {me}->{1 - me}"
    return [(1, "nccl:_allgather_base", [[2048, 8192]], "BFloat16", [[16384, 8192]]),
            (2, p2p, [[1, 4096, 8192]], "BFloat16", [[1, 4096, 8192]]),
            (1, "nccl:_reduce_scatter_base", [[16384, 8192]], "BFloat16", [[2048, 8192]]),
            (0, "nccl:all_reduce", [[262144]], "Float", [[262144]])]


def _state(rank: int, n: int, hang: Hang) -> str | None:
    """This rank's state of the hung op; None when it never enqueued it."""
    c = hang.culprit
    if hang.op == RS:  # only the culprit's TP group hangs; the other hosts finish it
        if c is None or rank // 8 != c // 8:
            return "completed"
        return "scheduled" if rank == c else "started"
    if hang.op == P2P:  # only the culprit's PP pair hangs
        if c is None or rank not in groups_of(c, n)[2][2]:
            return "completed"
        return None if rank == c else "started"
    if rank == c and hang.verdict == "never_entered":
        return None
    if rank == c and hang.verdict == "not_completed":
        return "scheduled"
    return "started"


def last_step(n: int, hang: Hang) -> list[list[str | None]]:
    """Every rank's states of the last step's ops (None: not enqueued, nor anything
    after). The hung op is as :func:`_state` says; after it the ranks that are not
    stuck go on, op by op: an op of a group with a member stuck earlier is entered and
    waits (``started``: the hang spreads, as it does), the others complete."""
    states: list[list[str | None]] = [[None] * len(OP_GROUP) for _ in range(n)]
    stuck: set[int] = set()
    for k, gi in enumerate(OP_GROUP):
        blocked = {groups_of(m, n)[gi][0] for m in stuck}
        now = set()
        for r in range(n):
            if r in stuck:
                continue
            if k < hang.op:
                st: str | None = "completed"
            elif k == hang.op:
                st = _state(r, n, hang)
            else:
                st = "started" if groups_of(r, n)[gi][0] in blocked else "completed"
            states[r][k] = st
            if st != "completed":
                now.add(r)
        stuck |= now
    return states


def dump_of(attempt: Attempt, rank: int, seed: int, hang: Hang,
            last: list[str | None] | None = None) -> dict:
    """One rank's dump for a watchdog-ended attempt: every op of the first steps
    completed, and the last step as ``last`` (this rank's row of :func:`last_step`)
    says: up to the op it is stuck in, or the one it never enqueued."""
    inc = attempt.incident
    assert inc is not None
    n = attempt.ranks
    rng = random.Random(f"{seed}:fr:{attempt.job_id}:{attempt.attempt}:{rank}")
    groups = groups_of(rank, n)
    ops = _ops(rank, n, hang)
    last = last if last is not None else last_step(n, hang)[rank]
    ar_last = 400_000 + inc.index * 997  # the SeqNum the watchdog lines name (jobs.py)
    coll = [ar_last - STEPS, 2 * (ar_last - STEPS), 0]  # per group: last collective seq
    p2p = [0, 0, ar_last - STEPS]  # per group: last p2p seq (p2p only in the PP group)
    op_id = [coll[0], coll[1], p2p[2]]
    status = [[c, c, c] for c in coll]  # last enqueued, started, completed collective
    record = 4 * (ar_last - STEPS)
    entries: list[dict] = []
    for step in range(STEPS):
        for k, (gi, name, sizes, dtype, out_sizes) in enumerate(ops):
            got = last[k] if step == STEPS - 1 else "completed"
            if got is None:
                break
            state = got
            if step == STEPS - 1 and k == hang.op and hang.scenario in MISMATCH \
                    and rank == hang.culprit:
                name, sizes, dtype = MISMATCH[hang.scenario]
                out_sizes = sizes
            is_p2p = gi == 2
            if is_p2p:
                p2p[gi] += 1
            else:
                coll[gi] += 1
                status[gi][0] = coll[gi]
                if state != "scheduled":
                    status[gi][1] = coll[gi]
                if state == "completed":
                    status[gi][2] = coll[gi]
            op_id[gi] += 1
            t = inc.t_fault - (STEPS - 1 - step) * 20.0 + k * 0.4 + rng.uniform(0, 0.01)
            entries.append(_entry(record + len(entries), gi, groups[gi], coll[gi],
                                  p2p[gi], op_id[gi], name, sizes, dtype, out_sizes,
                                  state, int(t * 1e9), is_p2p, rng))
            if state != "completed":
                break
    return {
        "version": "2.4", "nccl_version": "2.21.5",
        "pg_config": {name: {"name": name, "desc": desc, "ranks": str(members)}
                      for name, desc, members in groups},
        "pg_status": {str(i): {"last_enqueued_collective": s[0],
                               "last_started_collective": s[1],
                               "last_completed_collective": s[2]}
                      for i, s in enumerate(status)},
        "entries": entries,
    }


def _entry(record: int, pg_id: int, group: tuple[str, str, list[int]], seq: int,
           p2p_seq: int, op_id: int, name: str, sizes: list, dtype: str, out_sizes: list,
           state: str, created: int, is_p2p: bool, rng: random.Random) -> dict:
    """One entry, keys in ``getCollectiveTrace``'s order."""
    e: dict = {
        "frames": _frames(name), "record_id": record, "pg_id": pg_id,
        "process_group": (group[0], group[1]), "collective_seq_id": seq,
        "p2p_seq_id": p2p_seq, "op_id": op_id, "profiling_name": name,
        "time_created_ns": created,
    }
    if state == "completed":
        e["duration_ms"] = round(rng.uniform(1, 30), 3)
    e.update({
        "input_sizes": sizes, "input_dtypes": [dtype], "output_sizes": out_sizes,
        "output_dtypes": [dtype], "state": state,
        "time_discovered_started_ns": None if state == "scheduled" else created + 50_000,
        "time_discovered_completed_ns": created + 2_000_000 if state == "completed"
        else None,
        "retired": state == "completed",
        "timeout_ms": int(COLLECTIVE_TIMEOUT_S * 1000), "is_p2p": is_p2p,
    })
    return e


def _frames(name: str) -> list[dict]:
    """The Python frames of the call (``{name, filename, line}``, innermost first)."""
    op = name.removeprefix("nccl:").split(" ")[0].lstrip("_")
    api = {"allgather_base": "all_gather_into_tensor",
           "reduce_scatter_base": "reduce_scatter_tensor"}.get(op, op)
    return [{"name": api, "filename": "torch/distributed/distributed_c10d.py",
             "line": FRAMES.get(api, 2_000)},
            {"name": "wrapper", "filename": "torch/distributed/c10d_logger.py", "line": 83},
            {"name": "train_step", "filename": "/workspace/train.py", "line": 412}]


def chosen(attempts: list[Attempt], limit: int) -> list[tuple[Attempt, Hang]]:
    """Up to ``limit`` watchdog-ended attempts with their hangs, one of each scenario
    first (a dump per rank is a file per rank: every hang of a corpus would be tens
    of thousands). A requeued job's attempts share a job id: only its first may get
    dumps (the dumps of one job id are read as one attempt)."""
    seen: set[str] = set()
    pool: list[tuple[Attempt, Hang]] = []
    turn = 0
    for a in attempts:
        if a.incident is not None and a.incident.end_mode == "watchdog" \
                and a.job_id not in seen:
            hang = scenario(a, turn)
            turn += hang.scenario in SOFTWARE
            pool.append((a, hang))
        seen.add(a.job_id)
    first: dict[str, tuple[Attempt, Hang]] = {}
    for a, hang in pool:
        first.setdefault(hang.scenario, (a, hang))
    picked = [first[s] for s in SCENARIOS if s in first][:limit]
    picked += [p for p in pool if p not in picked][:max(0, limit - len(picked))]
    return sorted(picked, key=lambda p: p[0].start)


def write_dumps(corpus: Path, attempts: list[Attempt], seed: int, limit: int
                ) -> tuple[list[str], list[dict]]:
    """Write the dumps of up to ``limit`` watchdog hangs (:func:`chosen`); returns
    (paths relative to the corpus, truth rows)."""
    paths, truth = [], []
    for a, hang in chosen(attempts, limit):
        inc = a.incident
        assert inc is not None
        as_json = hang.scenario in JSON_SCENARIOS
        last = last_step(a.ranks, hang)
        for r in range(a.ranks):
            rel = f"jobs/{a.job_id}/{a.hosts[r // 8]}/nccl_trace_rank_{r}" + (
                ".json" if as_json else "")
            path = corpus / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            raw = dump_of(a, r, seed, hang, last[r])
            path.write_bytes(json_bytes(raw) if as_json else pickle_bytes(raw))
            paths.append(rel)
        truth.append(truth_row(a, hang))
    return paths, truth


def truth_row(a: Attempt, hang: Hang) -> dict:
    """What ``collective_hangs`` and the root cause should say of this hang: the hung
    group and op, the verdict, the culprit, and the component the interruption gets
    (a software hang on a host with nothing hardware-specific is a Software Bug)."""
    inc = a.incident
    assert inc is not None
    c = hang.culprit
    gi = {AR: 0, RS: 1, P2P: 2}.get(hang.op, 0)
    name, desc, _members = groups_of(c if c is not None else 0, a.ranks)[gi]
    return {"job_id": a.job_id, "interruption": inc.index, "scenario": hang.scenario,
            "verdict": hang.verdict, "pg_name": name, "pg_desc": desc,
            "is_p2p": hang.op == P2P,
            "culprit_ranks": "" if c is None else str(c),
            "culprit_host": "" if c is None else a.hosts[c // 8],
            "culprit_gpu": "" if c is None else c % 8,
            "component": "Software Bug" if hang.scenario in SOFTWARE else inc.component}
