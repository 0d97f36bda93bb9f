"""Which rank hung a collective: the cross-rank reading of Flight Recorder dumps.

Per job and process group, the ranks' entries are aligned by ``collective_seq_id`` (p2p
ops by ``p2p_seq_id``) and the first op that not every member completed is the hang:

- ``mismatch``: the ranks that recorded it disagree on op, input sizes or dtypes (a
  diverged program: software). The culprits are the ranks outside the majority.
- ``never_entered``: some members have no entry for it (they never enqueued it: the
  CPU side, a stuck or diverged process). Those are the culprits.
- ``not_completed``: every member enqueued it, some never started or finished it (the
  GPU, NVLink or network side). The culprits are the least advanced ranks (``scheduled``
  behind ``started``, ``started`` behind ``completed``); all in one state: none named.
- ``incomplete_dumps``: members without a dump; nothing is guessed for them, no culprit.

Input is the ``flight_recorder_dump`` events' attrs (:func:`faultline.pipeline.parsers.
flight_recorder.summary`), so this is pure and runs on the tails of the ring buffers.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from faultline.pipeline.parsers.flight_recorder import p2p_peer

_ORDER = {"scheduled": 0, "started": 1, "completed": 2}
# compact entry layout (flight_recorder.Entry.compact)
SEQ, P2P_SEQ, IS_P2P, OP, STATE, IN_SIZES, IN_DTYPES, OUT_SIZES, OUT_DTYPES, CREATED = range(10)


@dataclass(frozen=True, slots=True)
class RankDump:
    """One rank's dump as the analysis reads it."""

    rank: int
    path: str
    summary: dict


@dataclass(slots=True)
class Hang:
    """A ``collective_hangs`` row before hosts and GPUs are attached."""

    job_id: str
    pg_id: int | None
    pg_name: str
    pg_desc: str
    is_p2p: bool
    collective_seq_id: int
    op: str | None
    sizes: dict[str, list]
    dtypes: dict[str, list]
    ranks: list[int]
    missing_ranks: list[int]
    verdict: str
    culprit_ranks: list[int]
    evidence_path: str | None
    dumps: int


def analyse(job_id: str, dumps: Iterable[RankDump]) -> list[Hang]:
    """Every hung group of one job, by group name then collective before p2p."""
    by_rank: dict[int, RankDump] = {}
    for d in sorted(dumps, key=lambda d: (d.rank, d.path)):
        by_rank.setdefault(d.rank, d)  # a rank dumped twice: the first path
    names = sorted({g for d in by_rank.values() for g in d.summary.get("groups", {})})
    out = []
    for name in names:
        groups = {r: d.summary["groups"][name] for r, d in by_rank.items()
                  if name in d.summary.get("groups", {})}
        members = next((m for g in groups.values() if (m := _members(g))), sorted(groups))
        first = next(iter(groups.values()))
        for is_p2p in (False, True):
            hang = _group_hang(job_id, name, first, members, groups, by_rank, is_p2p)
            if hang is not None:
                out.append(hang)
    return out


def _group_hang(job_id: str, name: str, first: dict, members: list[int],
                groups: dict[int, dict], by_rank: dict[int, RankDump], is_p2p: bool
                ) -> Hang | None:
    key, tail = (P2P_SEQ, "p2p_tail") if is_p2p else (SEQ, "tail")
    present = [r for r in members if r in by_rank]
    absent = [r for r in members if r not in by_rank]
    entries: dict[int, dict[int, list]] = {
        r: {e[key]: e for e in groups[r][tail]} if r in groups else {} for r in present}
    # the first op some present member has not completed
    open_seqs = [s for r in present for s, e in entries[r].items() if e[STATE] != "completed"]
    if not is_p2p:
        done = [_last_done(groups.get(r), entries[r]) for r in present]
        ahead = [s for r in present for s in entries[r] if s > min(done, default=0)]
        if ahead:
            open_seqs.append(min(done) + 1)
    if not open_seqs:
        if absent and not is_p2p and present:
            seq = min(_last_done(groups.get(r), entries[r]) for r in present) + 1
            return _row(job_id, name, first, members, seq, {}, absent, "incomplete_dumps",
                        [], by_rank, False, len(present))
        return None
    seq = min(open_seqs)
    at = {r: entries[r][seq] for r in present if seq in entries[r]}
    if is_p2p:  # only the pair takes part: the peers named by the unfinished ends
        waiting = [r for r, e in at.items() if e[STATE] != "completed"]
        peers = {p for r in waiting if (p := _peer(at[r][OP], r, members)) is not None}
        involved = sorted(set(waiting) | peers)
    else:
        involved = members
    if absent and any(r in absent for r in involved):
        return _row(job_id, name, first, members, seq, at, [r for r in involved if r in absent],
                    "incomplete_dumps", [], by_rank, is_p2p, len(present))
    # no entry for it and never enqueued that far (an entry may have left the ring
    # buffer of a rank that went on: pg_status says how far each rank enqueued)
    never = [r for r in involved if r in by_rank and seq not in entries.get(r, {})
             and (_last_p2p(groups.get(r)) if is_p2p
                  else _last_enqueued(groups.get(r), entries.get(r, {}))) < seq]
    odd = _minority(at, is_p2p)
    unfinished = [r for r in involved if r in at and at[r][STATE] != "completed"]
    if odd:
        verdict, culprits = "mismatch", odd
    elif never:
        verdict, culprits = "never_entered", never
    elif unfinished:
        low = min(_ORDER[at[r][STATE]] for r in involved if r in at)
        high = max(_ORDER[at[r][STATE]] for r in involved if r in at)
        verdict = "not_completed"
        culprits = [r for r in involved if r in at and _ORDER[at[r][STATE]] == low] \
            if low < high else []
    else:
        return None
    missing = sorted(set(never) | set(unfinished))
    return _row(job_id, name, first, members, seq, at, missing, verdict, sorted(culprits),
                by_rank, is_p2p, len(present))


def _row(job_id: str, name: str, first: dict, members: list[int], seq: int,
         at: dict[int, list], missing: list[int], verdict: str, culprits: list[int],
         by_rank: dict[int, RankDump], is_p2p: bool, dumps: int) -> Hang:
    ops = sorted({e[OP] for e in at.values()})[:4]  # a p2p op names its pair: a few
    evidence = by_rank[culprits[0]].path if culprits and culprits[0] in by_rank else (
        by_rank[min(by_rank)].path if by_rank else None)
    return Hang(job_id=job_id, pg_id=first.get("pg_id"), pg_name=name,
                pg_desc=first.get("desc") or "", is_p2p=is_p2p, collective_seq_id=seq,
                op=" | ".join(ops) or None,
                sizes={str(r): e[IN_SIZES] for r, e in sorted(at.items())},
                dtypes={str(r): e[IN_DTYPES] for r, e in sorted(at.items())},
                ranks=list(members), missing_ranks=sorted(missing), verdict=verdict,
                culprit_ranks=culprits, evidence_path=evidence, dumps=dumps)


def _peer(op: str, rank: int, members: list[int]) -> int | None:
    """The global rank at the other end of a p2p op: PyTorch names it with the ranks
    within the group (``ProcessGroupNCCL::send``: ``nccl:send <rank_>-><dst>``), so a
    pipeline group [3, 11] writes ``send 0->1`` on rank 3."""
    if rank not in members:
        return p2p_peer(op, rank)
    local = p2p_peer(op, members.index(rank))
    return members[local] if local is not None and 0 <= local < len(members) else None


def _members(group: dict) -> list[int]:
    """A group's member ranks from one rank's summary (a JSON list as text)."""
    ranks = group.get("ranks") or "[]"
    out = json.loads(ranks) if isinstance(ranks, str) else ranks
    return [int(r) for r in out if isinstance(r, int)] if isinstance(out, list) else []


def _last_done(group: dict | None, entries: dict[int, list]) -> int:
    """The rank's last completed collective: pg_status, else its entries."""
    if group and group.get("last_completed") is not None:
        return int(group["last_completed"])
    done = [s for s, e in entries.items() if e[STATE] == "completed"]
    return max(done, default=0)


def _last_enqueued(group: dict | None, entries: dict[int, list]) -> int:
    """The rank's last enqueued collective: pg_status, else its entries; -1 for a rank
    whose dump does not have the group at all."""
    if group is None:
        return -1
    if group.get("last_enqueued") is not None:
        return int(group["last_enqueued"])
    return max(entries, default=0)


def _last_p2p(group: dict | None) -> int:
    tail = (group or {}).get("p2p_tail") or []
    return max((e[P2P_SEQ] for e in tail), default=0)


def _minority(at: dict[int, list], is_p2p: bool) -> list[int]:
    """Ranks whose (op, sizes, dtypes) differ from the most common one's."""
    if len(at) < 2 or is_p2p:  # a send and its recv differ by design
        return []
    sig = {r: repr((e[OP], e[IN_SIZES], e[IN_DTYPES])) for r, e in at.items()}
    counts = Counter(sig.values())
    if len(counts) == 1:
        return []
    top, n = counts.most_common(1)[0]
    if list(counts.values()).count(n) > 1:  # no majority: every rank is suspect
        return sorted(at)
    return sorted(r for r, s in sig.items() if s != top)
