"""Cause or consequence: which of an interruption's events may name its root.

A failing job leaves two kinds of lines. Some were written *before* it stopped and say
why (a GPU fell off the bus, a node stopped answering, a kernel hung). Others are the
stop itself: when Slurm kills the job, the driver tears down its GPU contexts on every
host and prints an application Xid (43 "GPU stopped processing", 45 "preemptive
cleanup", 13 or 31 for work cut off mid-flight), NCCL peers report vanished ranks,
tracebacks unwind. Ranking every line by how specific it is would let such a
teardown Xid (tier 3, software) outrank the node that stopped answering (tier 5)
seconds before. Three facts separate the two (``docs/root_causes.md``, section 2a):

* **attempt end**: ``failed_at``, the attempt's end as Slurm recorded it;
* **time order**: software, scheduler, transport and watchdog signals written after
  the end describe the teardown: they are consequences *when something before the end
  explains the stop*. Hardware and host signals are not: a device does not fail
  because a process was killed, and their clocks (BMCs) drift, so they keep the
  clock-skew allowance;
* **host spread**: an application Xid on many of the job's hosts within seconds is
  the job dying everywhere at once, not its cause, whenever it was written.

The functions are pure (candidates in, event ids out), so each rule is tested on small
event sets (``tests/test_cause_consequence.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Protocol

from faultline.classifiers import signals
from faultline.schemas.taxonomy import load_taxonomy

# Xids an application (or its teardown) causes: graphics engine exception (13), MMU
# fault (31), channel stopped (43), preemptive cleanup (45); with every other code
# NVIDIA's catalog gives role "app" (schemas/taxonomy/xid_catalog.csv), see app_xids().
APP_XIDS = frozenset({13, 31, 43, 45})


@cache
def app_xids() -> frozenset[int]:
    """:data:`APP_XIDS` and the catalog's other application-side codes."""
    return APP_XIDS | {x for x, e in load_taxonomy().xids.items() if e.role == "app"}
FAULT_XIDS = frozenset({13, 31})  # the job's kernels faulted (43/45: channels torn down)
LEAD_S = 1.0  # a crash's first host leads the others' teardown by more than this
END_GRACE_S = 1.0  # sacct's End has whole seconds: the same second is still "before"
SPREAD_S = 30.0  # one teardown reaches every host within seconds
SPREAD_HOSTS = 3  # hosts that make a spread on a large job...
SPREAD_SHARE = 0.5  # ...or this share of a small job's hosts (at least two)
# tiers whose signals describe what the job's processes or its peers saw
LATE_TIERS = frozenset({signals.SOFTWARE, signals.SCHEDULER, signals.TRANSPORT,
                        signals.WATCHDOG})


class Timed(Protocol):
    """What the rules need of an event (``interruptions.Candidate`` has it)."""

    event_id: str
    ts: float
    host: str | None
    kind: str
    xid: int | None


def spread_threshold(job_hosts: int) -> int:
    """Distinct hosts an application Xid must reach to be the job dying: 3 on a job
    of six hosts or more, half the hosts (but at least two) on a smaller one."""
    if job_hosts <= 0:
        return SPREAD_HOSTS
    return max(2, min(SPREAD_HOSTS, math.ceil(SPREAD_SHARE * job_hosts)))


def job_dying(cands: Iterable[Timed], job_hosts: int,
              failed: float | None = None) -> set[str]:
    """Event ids of application Xids that belong to a burst over many hosts: within
    :data:`SPREAD_S` of each other on at least :func:`spread_threshold` hosts.

    The burst's *leader* is not the job dying but what killed it: a fault Xid (13, 31:
    an exception or MMU fault of the job's own kernels) written before the end, at
    least :data:`LEAD_S` ahead of every other host's, is where the crash began (the
    others' 43s and 45s are their processes being torn down after it). Teardown by a
    kill reaches every host within the same second and has no leader."""
    codes = app_xids()
    app = sorted((c for c in cands if c.kind == "xid" and c.xid in codes and c.host),
                 key=lambda c: (c.ts, c.event_id))
    need = spread_threshold(job_hosts)
    out: set[str] = set()
    lo = 0
    bursts: list[list[Timed]] = []
    for hi, c in enumerate(app):  # sliding window over time
        while app[lo].ts < c.ts - SPREAD_S:
            lo += 1
        burst = app[lo:hi + 1]
        if len({b.host for b in burst}) >= need:
            new = [b for b in burst if b.event_id not in out]
            out.update(b.event_id for b in new)
            if bursts and new and new[0].ts - bursts[-1][-1].ts <= SPREAD_S:
                bursts[-1].extend(new)
            elif new:
                bursts.append(new)
    for burst in bursts:
        lead = burst[0]
        others = [b.ts for b in burst if b.host != lead.host]
        if (lead.xid in FAULT_XIDS and others and min(others) - lead.ts >= LEAD_S
                and (failed is None or not after_end(lead.ts, failed))):
            out -= {b.event_id for b in burst if b.host == lead.host and b.ts < min(others)}
    return out


def after_end(ts: float, failed: float) -> bool:
    """Written after the attempt ended (beyond sacct's one-second resolution)."""
    return ts > failed + END_GRACE_S


def explained_before(ranked: Sequence[tuple[int, float, Timed]], failed: float,
                     accounted: bool, exclude: set[str]) -> bool:
    """Whether something explains the stop without the teardown: a signal that names a
    component written up to the end (not one of ``exclude``; even an NCCL transport
    error says a peer vanished before the job was killed), or ``accounted``: NCCL
    watchdog timeouts (a hang) or a drain reason a person or a health check wrote for
    one of the job's hosts."""
    return accounted or any(not after_end(ts, failed) and c.event_id not in exclude
                            for _tier, ts, c in ranked)


def consequences(ranked: Sequence[tuple[int, float, Timed]], failed: float,
                 accounted: bool, job_hosts: int) -> tuple[set[str], set[str]]:
    """(the job dying, the teardown): event ids that may not be the root while
    anything else explains the stop. ``ranked`` holds (tier, ts, event) of the events
    with a rule; ``accounted`` as in :func:`explained_before`."""
    dying = job_dying((c for _t, _ts, c in ranked), job_hosts, failed)
    if not explained_before(ranked, failed, accounted, dying):
        return dying, set()
    late = {c.event_id for tier, ts, c in ranked
            if tier in LATE_TIERS and after_end(ts, failed)} - dying
    return dying, late
