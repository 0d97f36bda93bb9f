"""The Flight Recorder tier: a ``collective_hangs`` verdict as root-cause evidence.

When only NCCL watchdog timeouts explain a stop, the straggler guess
(:func:`faultline.classifiers.culprits.straggler`) reads which ranks never reported a
timeout. A Flight Recorder verdict is better evidence of the same thing, so it ranks
above that guess (and below every signal that names a component itself):

- ``never_entered`` / ``mismatch``: the culprit rank never issued the collective, or
  issued another one: the CPU side, a stuck or diverged process. With nothing
  hardware-specific on the culprit's host in the window this is a **Software Bug**
  (PyTorch's own account of Meta's fleet: most watchdog timeouts are CPU side); with
  such a signal there it stays an NCCL Watchdog Timeout with the culprit named.
- ``not_completed``: the culprit entered and never finished (GPU, NVLink or network
  side): NCCL Watchdog Timeouts, with the culprit rank's host and GPU.
- ``incomplete_dumps`` names no culprit and changes nothing.

When a hardware signal already decided the root, the verdict corroborates it (same
host) or contradicts it (another host), and the confidence moves accordingly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import duckdb

from faultline.classifiers import signals
from faultline.classifiers.culprits import is_hardware

# verdict -> (rule id, component when the tier decides, signal family, confidence); data
RULES: dict[str, tuple[str, str, str, float]] = {
    "mismatch": ("fr.mismatch", "Software Bug", "Flight Recorder mismatch", 0.85),
    "never_entered": ("fr.never_entered", "Software Bug", "Flight Recorder CPU-side hang",
                      0.8),
    "not_completed": ("fr.not_completed", "NCCL Watchdog Timeouts",
                      "Flight Recorder GPU/network-side hang", 0.75),
}
_PRIORITY = {"mismatch": 0, "never_entered": 1, "not_completed": 2}
# the rule ids of the watchdog-only decisions this tier replaces
WATCHDOG_RULES = ("nccl.watchdog_straggler", "nccl.watchdog_only")


@dataclass(frozen=True, slots=True)
class Verdict:
    """The hang that speaks for a job: its first culprit-naming row."""

    verdict: str
    culprit_ranks: list[int]
    culprit_host: str | None
    culprit_gpu: int | None
    words: str
    event_id: str | None  # the culprit's dump event
    ts_us: int | None = None  # its time (the last entry the dump recorded)


# a dump is written at the collective timeout: within this of the attempt's end
DUMP_AFTER_FAIL_S = 1800


def for_attempt(hangs: dict[str, Verdict], job_id: str, started_us: int, failed_us: int
                ) -> Verdict | None:
    """The job's verdict when its dumps belong to this attempt: a requeued job keeps its
    id, so a dump recorded outside the attempt's run time speaks for another attempt."""
    v = hangs.get(job_id)
    if v is None or v.ts_us is None:
        return v
    return v if started_us <= v.ts_us <= failed_us + DUMP_AFTER_FAIL_S * 1_000_000 else None


def load(con: duckdb.DuckDBPyConnection) -> dict[str, Verdict]:
    """job_id -> the verdict that names its culprit (:func:`ranked`)."""
    rows = con.execute("""
        SELECT h.job_id, h.verdict, h.culprit_ranks, h.missing_ranks, h.ranks,
               h.culprit_host, h.culprit_gpu,
               h.pg_id, h.pg_name, h.pg_desc, h.op, h.collective_seq_id, h.is_p2p,
               h.sizes, h.dtypes,
               (SELECT min(e.event_id) FROM events e WHERE e.path = h.evidence_path
                  AND e.kind = 'flight_recorder_dump') AS event_id,
               (SELECT max(epoch_us(e.ts)) FROM events e WHERE e.path = h.evidence_path
                  AND e.kind = 'flight_recorder_dump') AS ts_us
        FROM collective_hangs h ORDER BY h.job_id, h.is_p2p, h.pg_name""").fetchall()
    by_job: dict[str, list[tuple]] = {}
    for row in rows:
        by_job.setdefault(row[0], []).append(row)
    out = {}
    for job, job_rows in by_job.items():
        best = ranked(job_rows)
        if best is None:
            continue
        (_job, verdict, ranks, _missing, _members, host, gpu, pg_id, pg_name, desc, op, seq,
         is_p2p, sizes, dtypes, eid, ts_us) = best
        out[job] = Verdict(verdict, list(ranks), host, gpu,
                           words(verdict, pg_id if pg_id is not None else pg_name, desc,
                                 op, seq, list(ranks), host, gpu, is_p2p,
                                 mismatch_detail(op, sizes, dtypes, list(ranks))
                                 if verdict == "mismatch" else None), eid, ts_us)
    return out


def ranked(rows: list[tuple]) -> tuple | None:
    """The row of one job's ``collective_hangs`` that speaks for it, or None.

    A hang spreads: the ranks waiting in one group's op never enter the next op of
    another group, so that group's row says they ``never_entered`` it. A rank that
    entered some op and never finished it is *waiting* (every missing rank of a
    not_completed or mismatch row; the missing ranks of a never_entered row that are
    not its culprits), and a never_entered row whose first culprit is waiting is set
    aside: it is where the hang spread, not where it began. Among the rest: mismatch,
    then never_entered, then not_completed; then the fewest culprits and the smallest
    group (the most specific statement); then collectives before p2p. Rows are
    (job, verdict, culprit_ranks, missing_ranks, ranks, ...) as :func:`load` reads them.
    """
    waiting: set[int] = set()
    for _job, verdict, culprits, missing, *_rest in rows:
        if verdict == "never_entered":
            waiting |= set(missing) - set(culprits)
        elif verdict in ("not_completed", "mismatch"):
            waiting |= set(missing)
    best: tuple[tuple, tuple] | None = None
    for row in rows:
        _job, verdict, culprits, _missing, members = row[:5]
        if verdict not in _PRIORITY or not culprits:
            continue
        aside = verdict == "never_entered" and culprits[0] in waiting
        key = (aside, _PRIORITY[verdict], len(culprits), len(members), row[12], row[8])
        if best is None or key < best[0]:
            best = (key, row)
    return best[1] if best else None


def words(verdict: str, pg: object, desc: str, op: str | None, seq: int,
          ranks: list[int], host: str | None, gpu: int | None, p2p: bool = False,
          detail: str | None = None) -> str:
    """``PG 74 EXPERT_MODEL_PARALLEL_GROUP all_to_all #20536: ranks 12 never entered;
    rank 12 = node0013 GPU 4``; a p2p op says ``p2p #N`` (its ``p2p_seq_id``), a
    mismatch says what differs (:func:`mismatch_detail`)."""
    what = {"never_entered": "never entered", "not_completed": "entered but never completed",
            "mismatch": f"disagree on {detail or 'op, sizes or dtypes'}"}[verdict]
    number = f"p2p #{seq}" if p2p else f"#{seq}"
    text = f"PG {pg} {desc} {op or '?'} {number}: ranks {', '.join(map(str, ranks))} {what}"
    if host:
        text += f"; rank {ranks[0]} = {host}" + (f" GPU {gpu}" if gpu is not None else "")
    return text


def mismatch_detail(op: str | None, sizes: str | None, dtypes: str | None,
                    culprits: list[int]) -> str | None:
    """What a diverged rank issued differently: ``op (all_reduce | broadcast)``,
    ``sizes ([[131072]] vs [[262144]])`` or ``dtypes (["BFloat16"] vs ["Float"])``, the
    culprit's first, from the row's per-rank ``sizes``/``dtypes`` (JSON text)."""
    if op and " | " in op:
        return f"op ({op})"
    for name, raw in (("sizes", sizes), ("dtypes", dtypes)):
        try:
            per_rank = json.loads(raw or "{}")
        except ValueError:
            continue
        if not isinstance(per_rank, dict) or not culprits:
            continue
        mine = per_rank.get(str(culprits[0]))
        others = [v for r, v in per_rank.items() if int(r) not in culprits] \
            if all(r.lstrip("-").isdigit() for r in per_rank) else []
        if mine is not None and others and any(v != mine for v in others):
            return f"{name} ({json.dumps(mine)} vs {json.dumps(others[0])})"
    return None


def apply(d: Any, v: Verdict | None, cands: Iterable[Any]) -> None:
    """Let the verdict decide a watchdog-only ``Decision`` ``d``, or corroborate /
    contradict the root another signal chose (``d`` is changed in place)."""
    if v is None:
        return
    rule_id, component, family, conf = RULES[v.verdict]
    if d.rule_id in WATCHDOG_RULES:
        hardware_there = any(_hardware(c) and c.host == v.culprit_host for c in cands)
        if component == "Software Bug" and hardware_there:
            component = "NCCL Watchdog Timeouts"
        d.component, d.family, d.rule_id, d.confidence = component, family, rule_id, conf
        d.culprit_host, d.culprit_gpu = v.culprit_host, v.culprit_gpu
        d.surfaced_host, d.surfaced_gpu = v.culprit_host, v.culprit_gpu
        if v.event_id:
            d.evidence[v.event_id] = "root"
        return
    if not is_hardware(d.component) or v.culprit_host is None:
        return
    agrees = d.culprit_host == v.culprit_host
    if v.event_id:
        d.evidence.setdefault(v.event_id, "corroborating" if agrees else "contradicting")
    d.confidence = min(1.0, d.confidence + 0.05) if agrees else d.confidence * 0.8


def _hardware(c: Any) -> bool:
    rule = signals.rule_for(c.kind, c.message, c.xid, None)
    return rule is not None and rule.tier <= signals.HOST
