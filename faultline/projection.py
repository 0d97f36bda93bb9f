"""What a run's measured failure rates imply at another cluster size (report --project).

The model is the simplest one that the measured facts support, stated so it can be
argued with (docs/projection.md):

- every component fails as a Poisson process at a constant rate per GPU (GPU
  components) or per host (the rest) *while the job runs*, so a job of G GPUs sees G
  times the per-GPU rate per running day; the rates come from the ``failure_rates``
  view (exposure = GPUs or hosts of each attempt times its running time);
- synchronous training stops on any one failure, so the job's interruption rate L is
  the sum over components; the running time between interruptions is 1 / L;
- after each unexpected interruption the job stands still for the measured mean
  downtime D (gap from the attempt's end to the next attempt's start), and planned stops
  take the measured fraction p of the calendar (:mod:`faultline.uptime`). Per calendar
  day that is ``(1 - p) / (1 / L + D)`` interruptions, which at the measured size is
  exactly the report's unexpected interruptions per day;
- each interruption also costs the measured startup S (next attempt's start to its
  first step) plus, on average, half a checkpoint interval of redone work; each
  checkpoint pauses training for the median save time its lines report (60 s assumed
  when they report none). Effective training time is then
  ``ETTR(tau) = (1 - p) / (1 + L D) * (1 - L (S + tau / 2)) / (1 + cost / tau)``
  (clamped to 0..1) and the Young/Daly first-order optimum interval is
  ``sqrt(2 * cost / L)``.

The functions below are pure; :func:`projection` reads the database once and returns a
plain dict, which the render functions print as a table, Markdown, CSV or JSON.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from typing import Any

import duckdb
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

#: Confidence level of every interval.
LEVEL = 0.95
#: Checkpoint cost (seconds of paused training per checkpoint) when the run's checkpoint
#: lines do not say how long a save took: a synchronous save of a large model's shards
#: to a parallel file system takes about a minute; an assumption, printed as such.
DEFAULT_CHECKPOINT_COST_S = 60.0


class ProjectionError(Exception):
    """Nothing to project from (exit 2 at the CLI)."""


def poisson_interval(k: int, level: float = LEVEL) -> tuple[float, float]:
    """Exact (Garwood) two-sided interval for the mean of a Poisson count ``k``.

    From the chi-square quantiles: low = chi2(a/2; 2k) / 2, high = chi2(1 - a/2;
    2k + 2) / 2. Zero failures give (0, 3.69) at 95%: a finite upper bound, which is
    what "we saw none" honestly says.
    """
    from scipy.stats import chi2

    if k < 0:
        raise ValueError("a count cannot be negative")
    alpha = 1.0 - level
    low = 0.0 if k == 0 else float(chi2.ppf(alpha / 2, 2 * k)) / 2
    high = float(chi2.ppf(1 - alpha / 2, 2 * k + 2)) / 2
    return low, high


@dataclass(frozen=True)
class Ettr:
    """Inputs of the effective-training-time model, in seconds and per second."""

    #: Interruptions per second of running time (L).
    failures_per_s: float
    #: Restart cost paid while the job runs (startup to the first step, S).
    restart_s: float
    checkpoint_cost_s: float
    #: Standstill after each interruption, outside the running time (D).
    down_s: float = 0.0
    #: Fraction of the calendar planned stops take (p).
    planned_fraction: float = 0.0

    def at(self, interval_s: float) -> float:
        """Expected effective training time, per calendar time, with a checkpoint every
        ``interval_s``: the running share of the calendar times the useful share of
        the running time."""
        if interval_s <= 0:
            return 0.0
        running = (1.0 - self.planned_fraction) / (1.0 + self.failures_per_s * self.down_s)
        useful = 1.0 - self.failures_per_s * (self.restart_s + interval_s / 2)
        return min(1.0, max(0.0, running * useful
                            / (1.0 + self.checkpoint_cost_s / interval_s)))

    def optimal_interval_s(self) -> float | None:
        """Young/Daly first-order optimum sqrt(2 C / lam); None when nothing fails or
        checkpoints are free (then any interval is as good, or shorter is better)."""
        if self.failures_per_s <= 0 or self.checkpoint_cost_s <= 0:
            return None
        return math.sqrt(2 * self.checkpoint_cost_s / self.failures_per_s)


def expected_per_day(rate_per_gpu_day: float, gpus: float) -> float:
    """Failures per running day at ``gpus`` GPUs when each fails at
    ``rate_per_gpu_day`` (per running GPU-day)."""
    return rate_per_gpu_day * gpus


def per_calendar_day(per_running_day: float, down_days: float = 0.0,
                     planned_fraction: float = 0.0) -> float:
    """Interruptions per calendar day of a job that is interrupted ``per_running_day``
    times a running day, stands still ``down_days`` after each, and loses
    ``planned_fraction`` of the calendar to planned stops: each cycle is 1 / L running
    plus D down, within the (1 - p) of the calendar left, so (1 - p) / (1 / L + D).
    Monotone in L, so an interval of L maps to an interval of the result."""
    if per_running_day <= 0:
        return 0.0
    return (1.0 - planned_fraction) * per_running_day / (1.0 + per_running_day * down_days)


def project_counts(counts: dict[str, int], gpu_days: float, gpus: float,
                   down_days: float = 0.0, planned_fraction: float = 0.0,
                   level: float = LEVEL) -> dict[str, Any]:
    """Per-component and total expected interruptions per calendar day at ``gpus`` GPUs
    from failure counts over an exposure of ``gpu_days`` running GPU-days, a standstill
    of ``down_days`` after each interruption and ``planned_fraction`` of the calendar
    lost to planned stops (pure: no database). With no downtime information (both 0),
    running days are calendar days.

    Every rate is per GPU-day (a host component's host-days are its GPU-days over
    GPUs per host, so the conversion changes nothing in the projection). A component's
    figure per calendar day is its share of the total per calendar day (so the
    components add up to the total); its interval is that share with the component at
    its bound and the others at their point estimates (so a component that is the
    whole count has the total's interval)."""
    if gpu_days <= 0:
        raise ProjectionError("the run has no exposure (its attempts have no duration)")
    total = sum(counts.values())
    running = expected_per_day(total / gpu_days, gpus)

    def share(mine: float, rest: float) -> float:
        both = mine + rest
        return 0.0 if both <= 0 else \
            per_calendar_day(both, down_days, planned_fraction) * mine / both

    comps = []
    for name, k in counts.items():
        low, high = poisson_interval(k, level)
        own = expected_per_day(k / gpu_days, gpus)
        rest = running - own
        comps.append({
            "component": name, "failures": k,
            "rate_per_1000_gpu_days": 1000 * k / gpu_days,
            "rate_low": 1000 * low / gpu_days, "rate_high": 1000 * high / gpu_days,
            "expected_per_day": share(own, rest),
            "expected_low": share(expected_per_day(low / gpu_days, gpus), rest),
            "expected_high": share(expected_per_day(high / gpu_days, gpus), rest),
            "expected_per_running_day": own,
        })
    low, high = poisson_interval(total, level)
    run_low = expected_per_day(low / gpu_days, gpus)
    run_high = expected_per_day(high / gpu_days, gpus)
    per_day = per_calendar_day(running, down_days, planned_fraction)
    return {"components": comps, "total": {
        "failures": total, "expected_per_day": per_day,
        "expected_low": per_calendar_day(run_low, down_days, planned_fraction),
        "expected_high": per_calendar_day(run_high, down_days, planned_fraction),
        "mtbi_hours": 24 / per_day if per_day > 0 else None,
        "expected_per_running_day": running,
        "expected_per_running_day_low": run_low,
        "expected_per_running_day_high": run_high,
        "mtbi_running_hours": 24 / running if running > 0 else None,
    }}


def _measured_checkpoint_interval(con: duckdb.DuckDBPyConnection, run: str
                                  ) -> tuple[float | None, str]:
    """The run's checkpoint interval: the median gap between consecutive checkpoint
    lines of one job; else twice the mean redone work (a failure lands, on average,
    half-way between checkpoints); else unknown."""
    gap = con.execute("""
        WITH c AS (
            SELECT e.job_id, epoch(e.ts) - epoch(lag(e.ts) OVER (PARTITION BY e.job_id
                                                               ORDER BY e.ts)) AS gap
            FROM events e WHERE e.kind = 'checkpoint' AND e.ts IS NOT NULL
              AND e.job_id IN (SELECT job_id FROM attempts WHERE run = ?))
        SELECT median(gap) FROM c WHERE gap > 0
    """, [run]).fetchone()[0]
    if gap is not None:
        return float(gap), "checkpoint lines"
    lost = con.execute("SELECT avg(lost_seconds) FROM interruptions WHERE run = ? AND "
                       "NOT planned AND lost_seconds IS NOT NULL", [run]).fetchone()[0]
    if lost:
        return 2 * float(lost), "twice the mean lost work"
    return None, "unknown"


def _measured_checkpoint_cost(con: duckdb.DuckDBPyConnection, run: str) -> float | None:
    """Median seconds a checkpoint of the run took to save, where its lines say
    (``checkpoint saved ... seconds=41``, ``saved checkpoint in 41 s``)."""
    cost = con.execute("""
        SELECT median(TRY_CAST(attrs->>'seconds' AS DOUBLE)) FROM events
        WHERE kind = 'checkpoint' AND job_id IN (SELECT job_id FROM attempts WHERE run = ?)
    """, [run]).fetchone()[0]
    return None if cost is None else float(cost)


def projection(con: duckdb.DuckDBPyConnection, gpus: int, run: str | None = None,
               checkpoint_cost_s: float | None = None) -> dict[str, Any]:
    """The run's measured rates and what they imply at ``gpus`` GPUs (the JSON shape of
    INTERFACE.md's ``report --project``, plus a few explanatory fields)."""
    from faultline import uptime
    from faultline.report import ReportError, main_run
    from faultline.runs import RunError, resolve

    if gpus <= 0:
        raise ProjectionError("--project needs a positive number of GPUs")
    try:
        run = main_run(con) if run is None else resolve(con, run)
    except (ReportError, RunError) as exc:
        raise ProjectionError(str(exc)) from exc
    rows = con.execute("""
        SELECT component, category, unit, failures, rate_per_1000, rate_low, rate_high,
               attempt_days, host_days, gpu_days, gpus_per_host, gpus_per_host_from
        FROM failure_rates WHERE run = ?
    """, [run]).fetchall()
    if not rows:
        raise ProjectionError(f"run {run} has no attempts to measure exposure from")
    attempt_days, host_days, gpu_days, gph, gph_from = rows[0][7:]
    if not gpu_days:
        raise ProjectionError(f"run {run}: its attempts have no duration")
    counts = {r[0]: r[3] for r in rows}
    unexpected = sum(counts.values())
    up = uptime.measure(con, run)
    running_days = up.running_s / 86400 or attempt_days
    calendar_days = up.calendar_s / 86400
    down_s = up.down_unexpected_s / unexpected if unexpected else 0.0
    planned = up.planned_fraction
    proj = project_counts(counts, gpu_days, gpus, down_s / 86400, planned)
    for comp, r in zip(proj["components"], rows, strict=True):
        comp.update(category=r[1], unit=r[2], rate_per_1000=r[4],
                    rate_per_1000_low=r[5], rate_per_1000_high=r[6])
    measured_gpus = gpu_days / running_days
    startup = up.startup_s
    ett_row = con.execute("SELECT effective FROM effective_training_time WHERE run = ?",
                          [run]).fetchone()
    ett = ett_row[0] if ett_row else None
    interval, interval_from = _measured_checkpoint_interval(con, run)
    cost_from = "given"
    if checkpoint_cost_s is None:
        checkpoint_cost_s = _measured_checkpoint_cost(con, run)
        cost_from = "checkpoint lines"
    if checkpoint_cost_s is None:
        checkpoint_cost_s, cost_from = DEFAULT_CHECKPOINT_COST_S, "assumed"

    def model(at_gpus: float) -> Ettr:
        return Ettr(unexpected / gpu_days * at_gpus / 86400, startup, checkpoint_cost_s,
                    down_s, planned)

    here, there = model(measured_gpus), model(gpus)
    optimal = there.optimal_interval_s()
    return {
        "run": run,
        "measured": {
            "gpus": measured_gpus, "days": calendar_days, "unexpected": unexpected,
            "unexpected_per_day": unexpected / calendar_days if calendar_days else None,
            "running_days": running_days,
            "unexpected_per_running_day": unexpected / running_days,
            "downtime_per_unexpected_s": down_s,
            "down_unexpected_days": up.down_unexpected_s / 86400,
            "down_planned_days": up.down_planned_s / 86400,
            "down_other_days": up.down_other_s / 86400,
            "planned_fraction": planned,
            "gpu_days": gpu_days, "host_days": host_days, "gpus_per_host": gph,
            "gpus_per_host_from": gph_from,
        },
        "gpus": gpus,
        "components": proj["components"],
        "total": proj["total"],
        "ettr": {
            "measured": ett,
            "projected": there.at(interval) if interval else None,
            "checkpoint_interval_s": interval,
            "optimal_checkpoint_interval_s": optimal,
            "projected_at_optimal": there.at(optimal) if optimal else None,
            "model_at_measured_size": here.at(interval) if interval else None,
            "restart_cost_s": startup + down_s,
            "startup_s": startup,
            "downtime_s": down_s,
            "planned_fraction": planned,
            "checkpoint_cost_s": checkpoint_cost_s,
            "checkpoint_interval_from": interval_from,
            "checkpoint_cost_from": cost_from,
        },
        "level": LEVEL,
        "assumptions": [
            "each component fails at a constant rate per GPU (GPU components) or per "
            "host (the rest) while the job runs: the failures scale with the number of "
            "components",
            "synchronous training stops on any one failure",
            f"after each interruption the job stands still {_dur(down_s)} (measured "
            f"mean downtime), and planned stops take {100 * planned:.1f}% of the "
            "calendar (measured): per calendar day (1 - p) / (1 / L + D)",
            f"each interruption also costs a startup of {_dur(startup)} and half a "
            f"checkpoint interval of redone work; each checkpoint pauses training for "
            f"{checkpoint_cost_s:.0f} s ({cost_from})",
            f"{gph:g} GPUs per host ({gph_from})",
        ],
    }


# --- rendering ------------------------------------------------------------------------

def _num(v: float | None, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"


def summary_lines(data: dict[str, Any]) -> list[str]:
    """The measured figures, the totals and the ETTR model in sentences."""
    m, t, e = data["measured"], data["total"], data["ettr"]
    level = f"{100 * data['level']:.0f}%"
    lines = [
        f"measured: run {data['run']}, {m['unexpected']} unexpected interruptions in "
        f"{m['days']:.2f} days on {m['gpus']:,.0f} GPUs on average "
        f"({_num(m['unexpected_per_day'])} per day; running {m['running_days']:.2f} days, "
        f"{_num(m['unexpected_per_running_day'])} per running day; "
        f"{m['gpu_days']:,.1f} GPU-days)",
        f"projected at {data['gpus']:,} GPUs: {_num(t['expected_per_day'])} interruptions "
        f"per day ({level} interval {_num(t['expected_low'])}-{_num(t['expected_high'])}), "
        f"one every {_dur(None if t['mtbi_hours'] is None else 3600 * t['mtbi_hours'])}; "
        f"{_num(t['expected_per_running_day'])} per running day, one every "
        f"{_dur(None if t['mtbi_running_hours'] is None else 3600 * t['mtbi_running_hours'])}"
        " of running",
        f"effective training time: measured {_pct(e['measured'])}; model "
        f"{_pct(e['model_at_measured_size'])} at the measured size, "
        f"{_pct(e['projected'])} at {data['gpus']:,} GPUs with the checkpoint interval "
        f"of {_dur(e['checkpoint_interval_s'])} ({e['checkpoint_interval_from']}), "
        f"{_pct(e['projected_at_optimal'])} with the Young/Daly optimum of "
        f"{_dur(e['optimal_checkpoint_interval_s'])}",
    ]
    lines += [f"assumes: {a}" for a in data["assumptions"]]
    few = [c["component"] for c in data["components"] if 0 < c["failures"] < 5]
    if few:
        lines.append(f"{len(few)} components were seen fewer than 5 times: their "
                     "intervals span an order of magnitude or more, read them as such")
    return lines


def render_table(data: dict[str, Any], console: Console) -> None:
    """The projection as a terminal table (fits 100 columns)."""
    t = Table(title=f"Failure rates of run {escape(data['run'])}, projected to "
              f"{data['gpus']:,} GPUs", box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("Component", min_width=18)
    t.add_column("n", justify="right", no_wrap=True)
    t.add_column("per 1k GPU-days (95%)", justify="right", no_wrap=True)
    t.add_column("per day at size (95%)", justify="right", no_wrap=True)
    for c in data["components"]:
        t.add_row(escape(c["component"]), str(c["failures"]),
                  f"{c['rate_per_1000_gpu_days']:.2f} ({c['rate_low']:.2f}-"
                  f"{c['rate_high']:.2f})",
                  f"{c['expected_per_day']:.2f} ({c['expected_low']:.2f}-"
                  f"{c['expected_high']:.2f})")
    tot = data["total"]
    t.add_row("Total", str(tot["failures"]), "",
              f"{tot['expected_per_day']:.2f} ({tot['expected_low']:.2f}-"
              f"{tot['expected_high']:.2f})", style="bold")
    console.print(t)
    for line in summary_lines(data):
        console.print(escape(line), highlight=False)


def render_markdown(data: dict[str, Any]) -> str:
    lines = [f"### Run {data['run']} projected to {data['gpus']:,} GPUs", "",
             "| Component | Failures | per 1,000 GPU-days | 95% interval | per day | "
             "95% interval |", "|---|---:|---:|---:|---:|---:|"]
    for c in data["components"]:
        lines.append(f"| {c['component']} | {c['failures']} | "
                     f"{c['rate_per_1000_gpu_days']:.3f} | {c['rate_low']:.3f}-"
                     f"{c['rate_high']:.3f} | {c['expected_per_day']:.3f} | "
                     f"{c['expected_low']:.3f}-{c['expected_high']:.3f} |")
    tot = data["total"]
    lines.append(f"| **Total** | {tot['failures']} | | | {tot['expected_per_day']:.3f} | "
                 f"{tot['expected_low']:.3f}-{tot['expected_high']:.3f} |")
    lines += [""] + [f"- {x}" for x in summary_lines(data)]
    return "\n".join(lines) + "\n"


def render_csv(data: dict[str, Any]) -> str:
    """One row per component and a Total row; the scalar figures are in the JSON."""
    buf = io.StringIO()
    w = csv.writer(buf)
    cols = ["component", "failures", "rate_per_1000_gpu_days", "rate_low", "rate_high",
            "expected_per_day", "expected_low", "expected_high"]
    w.writerow(["run", "gpus", *cols])
    for c in data["components"]:
        w.writerow([data["run"], data["gpus"], *(c[k] for k in cols)])
    tot = data["total"]
    w.writerow([data["run"], data["gpus"], "Total", tot["failures"], "", "", "",
                tot["expected_per_day"], tot["expected_low"], tot["expected_high"]])
    return buf.getvalue()


def render_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, default=str) + "\n"


# --- curves for the HTML report ---------------------------------------------------------

def scale_curve(failures: int, gpu_days: float, down_days: float = 0.0,
                planned_fraction: float = 0.0, smallest: float = 8,
                largest: float = 1_000_000, points: int = 41) -> list[dict[str, float]]:
    """Expected interruptions per calendar day (with the 95% band) at log-spaced cluster
    sizes from ``smallest`` to ``largest`` GPUs, for a job that saw ``failures`` in
    ``gpu_days`` of running and stands still as measured (:func:`per_calendar_day`)."""
    if gpu_days <= 0 or smallest <= 0 or largest <= smallest:
        return []
    low, high = poisson_interval(failures)
    step = (math.log10(largest) - math.log10(smallest)) / (points - 1)
    out = []
    for i in range(points):
        g = 10 ** (math.log10(smallest) + i * step)
        out.append({
            "gpus": g,
            "expected_per_day": per_calendar_day(failures / gpu_days * g, down_days,
                                                 planned_fraction),
            "expected_low": per_calendar_day(low / gpu_days * g, down_days,
                                             planned_fraction),
            "expected_high": per_calendar_day(high / gpu_days * g, down_days,
                                              planned_fraction)})
    return out


def ettr_curve(failures: int, gpu_days: float, restart_s: float, sizes: list[float],
               checkpoint_cost_s: float = DEFAULT_CHECKPOINT_COST_S,
               shortest_s: float = 60, longest_s: float = 86400, points: int = 49,
               down_s: float = 0.0, planned_fraction: float = 0.0
               ) -> list[dict[str, float]]:
    """The ETTR model against the checkpoint interval (log-spaced, ``shortest_s`` to
    ``longest_s``) at each cluster size in ``sizes``; ``restart_s`` is the startup
    paid while running, ``down_s`` the standstill after each interruption."""
    if gpu_days <= 0:
        return []
    step = (math.log10(longest_s) - math.log10(shortest_s)) / (points - 1)
    out = []
    for g in sizes:
        m = Ettr(failures / gpu_days * g / 86400, restart_s, checkpoint_cost_s, down_s,
                 planned_fraction)
        for i in range(points):
            tau = 10 ** (math.log10(shortest_s) + i * step)
            out.append({"gpus": g, "size": f"{g:,.0f} GPUs", "interval_minutes": tau / 60,
                        "ettr": m.at(tau)})
    return out


def html_curves(data: dict[str, Any]) -> dict[str, Any]:
    """The two charts' points from a :func:`projection` result: interruptions per day
    against size, and ETTR against checkpoint interval at the measured size, 1,024,
    16,384 and 100,000 GPUs."""
    m, e = data["measured"], data["ettr"]
    sizes = sorted({round(m["gpus"]), 1024, 16384, 100_000})
    return {
        "scale": scale_curve(m["unexpected"], m["gpu_days"], e["downtime_s"] / 86400,
                             e["planned_fraction"]),
        "ettr": ettr_curve(m["unexpected"], m["gpu_days"], e["startup_s"], sizes,
                           e["checkpoint_cost_s"], down_s=e["downtime_s"],
                           planned_fraction=e["planned_fraction"]),
        "measured": {"gpus": m["gpus"], "per_day": m["unexpected_per_day"],
                     "checkpoint_minutes": (e["checkpoint_interval_s"] or 0) / 60 or None},
    }
