"""A run's calendar split into running time and the downtime after each kind of stop.

The projection (docs/projection.md) needs three measured facts besides the failure
counts: how long the job ran (the exposure its failures happened in), how long it stood
still after each unexpected interruption, and how much of the calendar planned stops
took. They come from one partition of the calendar, so that they add up to it exactly:

- the calendar is the span ``report`` divides by for its per-day figure (first to last
  training step of the run, the ``effective_training_time`` view; the attempts' first
  start to last end when the run logged no steps);
- running time is the part of it covered by attempts (their union, each clipped to the
  span; an attempt still running counts up to the last event in the database, as in the
  ``failure_rates`` view);
- every uncovered stretch is a gap that follows the latest-ending attempt before it, and
  counts as downtime of the interruption that ended that attempt (unexpected or planned;
  ``other`` when that attempt ended without one, e.g. it completed).

So ``running + down_unexpected + down_planned + down_other == calendar`` by
construction, which is what makes the projection give back the report's per-day figure
at the measured size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import duckdb


@dataclass(frozen=True)
class Attempt:
    """One attempt on the time axis (epoch seconds) and how it ended."""

    start: float
    end: float
    #: "unexpected", "planned" or None (no interruption: completed, or the last one).
    ended_by: str | None
    #: First training step inside the attempt, if it logged one.
    first_step: float | None = None


@dataclass(frozen=True)
class Uptime:
    """The partition of a run's calendar, in seconds."""

    calendar_s: float
    running_s: float
    down_unexpected_s: float
    down_planned_s: float
    down_other_s: float
    #: Mean seconds from an attempt's start to its first step, over the attempts that
    #: follow an unexpected interruption (restart cost paid while the job runs).
    startup_s: float

    @property
    def planned_fraction(self) -> float:
        """Fraction of the calendar the job did not run for reasons other than an
        unexpected interruption (planned stops, and the rare gap after none)."""
        if self.calendar_s <= 0:
            return 0.0
        return (self.down_planned_s + self.down_other_s) / self.calendar_s


def partition(span: tuple[float, float], attempts: Iterable[Attempt]) -> Uptime:
    """Split ``span`` (start, end) into running time and gaps by what ended the attempt
    before each gap (pure). ``attempts`` in any order; overlapping attempts count once."""
    lo, hi = span
    hi = max(hi, lo)
    ordered = sorted(attempts, key=lambda a: (a.start, a.end))
    running = down_u = down_p = down_o = 0.0
    cover, last = lo, None  # covered up to ``cover`` by attempt ``last``
    startups: list[float] = []
    previous_end_kind: str | None = None
    for a in ordered:
        s = min(max(a.start, lo), hi)
        e = min(max(a.end, s), hi)
        if s > cover:
            gap = s - cover
            kind = last.ended_by if last is not None else None
            if kind == "unexpected":
                down_u += gap
            elif kind == "planned":
                down_p += gap
            else:
                down_o += gap
        if previous_end_kind == "unexpected" and a.first_step is not None:
            startups.append(max(a.first_step - a.start, 0.0))
        running += max(e - max(s, cover), 0.0)
        if e >= cover:
            cover, last = e, a
        previous_end_kind = a.ended_by
    down_o += hi - cover
    return Uptime(calendar_s=hi - lo, running_s=running, down_unexpected_s=down_u,
                  down_planned_s=down_p, down_other_s=down_o,
                  startup_s=sum(startups) / len(startups) if startups else 0.0)


def measure(con: duckdb.DuckDBPyConnection, run: str) -> Uptime:
    """The partition of ``run``'s calendar from its attempts and interruptions."""
    span = con.execute("SELECT epoch(first_step), epoch(last_step) FROM "
                       "effective_training_time WHERE run = ?", [run]).fetchone()
    rows = con.execute("""
        WITH last_seen AS (SELECT max(ts) AS ts FROM events),
        a AS (
            SELECT a.job_id, a.started_at,
                   coalesce(a.ended_at, l.ts, a.started_at) AS ended, a.ended_at
            FROM attempts a CROSS JOIN last_seen l WHERE a.run = ?),
        steps AS (
            SELECT a.job_id, a.started_at, min(e.ts) AS first_step
            FROM a JOIN events e ON e.kind = 'train_step' AND e.job_id = a.job_id
             AND e.ts BETWEEN a.started_at AND a.ended
            GROUP BY 1, 2)
        SELECT epoch(a.started_at), epoch(greatest(a.ended, a.started_at)),
               CASE WHEN i.planned THEN 'planned' WHEN NOT i.planned THEN 'unexpected'
               END, epoch(s.first_step)
        FROM a LEFT JOIN interruptions i
          ON i.run = ? AND i.job_id = a.job_id AND i.failed_at = a.ended_at
        LEFT JOIN steps s ON s.job_id = a.job_id AND s.started_at = a.started_at
        ORDER BY a.started_at, a.job_id
    """, [run, run]).fetchall()
    attempts = [Attempt(float(r[0]), float(r[1]), r[2],
                        None if r[3] is None else float(r[3])) for r in rows]
    if span is None or span[0] is None:
        if not attempts:
            return partition((0.0, 0.0), [])
        span = (min(a.start for a in attempts), max(a.end for a in attempts))
    return partition((float(span[0]), float(span[1])), attempts)
