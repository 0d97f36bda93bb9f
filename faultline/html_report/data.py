"""What the HTML report shows, read from the database as plain dicts.

Kept apart from the charts and the page so the numbers can be tested without a browser
or a chart library, and so every query stays parameterized in one place (the run name
comes from the command line). Times leave here as ISO 8601 strings in UTC: they go into
JSON for the charts and into HTML tables as text.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import duckdb

from faultline import report as rep

HOUR = 3600.0


def gather(con: duckdb.DuckDBPyConnection, run: str | None = None) -> dict[str, Any]:
    """Everything one page needs for ``run`` (default: the run with most interruptions).

    Raises ``report.ReportError`` when there is nothing to report, like the terminal
    report does."""
    summary = rep.breakdown(con, run=run, compare="llama3")
    run = summary["run"]
    interruptions = _interruptions(con, run)
    ett = _effective_training_time(con, run)
    period = _period(con, run)
    return {
        "run": run,
        "summary": summary,
        "interruptions": interruptions,
        "period": period,
        "days": days_between(*period) if period else [],
        "per_day": _per_day_by_category(con, run),
        "ett": ett,
        "cumulative": cumulative_hours(ett, interruptions),
        "culprit_hosts": _culprit_hosts(con, run),
        "culprit_gpus": _culprit_gpus(con, run),
        "comparison": comparison(summary),
        "overrides": [{**o, "at": rep._when(o["created_at"])}
                      for o in summary.get("overrides", [])],
        "projection": _projection(con, run),
    }


def _projection(con: duckdb.DuckDBPyConnection, run: str) -> dict[str, Any] | None:
    """The run's rates projected to 100,000 GPUs and the curves of the two projection
    charts; None for a run without exposure to measure rates from."""
    from faultline import projection as pj

    try:
        proj = pj.projection(con, 100_000, run=run)
    except pj.ProjectionError:
        return None
    return {**proj, "curves": pj.html_curves(proj)}


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict]:
    rows = con.execute(sql, params).fetchall()
    cols = [d[0] for d in con.description]
    return [{c: _plain(v) for c, v in zip(cols, r, strict=True)} for r in rows]


def _plain(value: Any) -> Any:
    """JSON-ready values: timestamps as UTC ISO strings ('Z'), so Vega reads them as
    UTC whatever the viewer's zone."""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


def _interruptions(con: duckdb.DuckDBPyConnection, run: str) -> list[dict]:
    return _rows(con, """
        SELECT interruption_id, failed_at AT TIME ZONE 'UTC' AS failed_at, planned,
               component, category, job_id, culprit_host, culprit_gpu,
               culprit_gpu_serial, surfaced_host,
               coalesce(lost_seconds, 0) / 3600.0 AS lost_hours,
               coalesce(downtime_seconds, 0) / 3600.0 AS downtime_hours,
               (coalesce(lost_seconds, 0) + coalesce(downtime_seconds, 0)) / 3600.0
                   AS total_hours
        FROM interruptions WHERE run = ? ORDER BY failed_at, interruption_id
    """, [run])


def _period(con: duckdb.DuckDBPyConnection, run: str) -> tuple[str, str] | None:
    """The run's whole period in UTC: its first attempt's start to its last attempt's
    end (or its interruptions' span, where attempts lack times). The time axes span
    it, so a quiet day shows as a day with no interruptions, not as a missing one."""
    (lo, hi), = con.execute("""
        SELECT least(min(a.started_at), min(i.failed_at)) AT TIME ZONE 'UTC',
               greatest(max(a.ended_at), max(a.started_at), max(i.failed_at))
                   AT TIME ZONE 'UTC'
        FROM (SELECT ? AS run) r
        LEFT JOIN attempts a ON a.run = r.run
        LEFT JOIN interruptions i ON i.run = r.run
    """, [run]).fetchall()
    if lo is None or hi is None:
        return None
    return _plain(lo), _plain(hi)


def days_between(start: str, end: str) -> list[str]:
    """Every UTC day from ``start``'s to ``end``'s, as ``YYYY-MM-DD``."""
    first, last = _parse(start).date(), _parse(end).date()
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


def _per_day_by_category(con: duckdb.DuckDBPyConnection, run: str) -> list[dict]:
    # Same day expression as the failures_per_day view, split by category for the
    # stacked chart (the view only splits planned from unexpected).
    return _rows(con, """
        SELECT strftime(failed_at AT TIME ZONE 'UTC', '%Y-%m-%d') AS day, category,
               count(*) AS interruptions
        FROM interruptions WHERE run = ? GROUP BY 1, 2 ORDER BY 1, 2
    """, [run])


def _effective_training_time(con: duckdb.DuckDBPyConnection, run: str) -> dict | None:
    rows = _rows(con, """
        SELECT first_step AT TIME ZONE 'UTC' AS first_step,
               last_step AT TIME ZONE 'UTC' AS last_step, wall_seconds,
               downtime_seconds, lost_seconds, effective, days
        FROM effective_training_time WHERE run = ?
    """, [run])
    return rows[0] if rows else None


def _culprit_hosts(con: duckdb.DuckDBPyConnection, run: str, top: int = 15) -> list[dict]:
    """Hosts named as hardware suspect most often, one row per host and category
    (stacked bars); ``host_total`` orders them. A host where a software fault surfaced
    is no candidate for replacement and is not listed."""
    return _rows(con, """
        WITH per AS (
            SELECT culprit_host AS host, category, count(*) AS interruptions,
                   string_agg(DISTINCT component, ', ' ORDER BY component) AS components
            FROM interruptions WHERE run = ? AND culprit_host IS NOT NULL
              AND category IN ('GPU', 'Host', 'Network')  -- hardware suspects only
            GROUP BY 1, 2
        ), tot AS (
            SELECT host, sum(interruptions) AS host_total FROM per GROUP BY host
            ORDER BY host_total DESC, host LIMIT ?
        )
        SELECT per.*, tot.host_total FROM per JOIN tot USING (host)
        ORDER BY host_total DESC, host, category
    """, [run, top])


def _culprit_gpus(con: duckdb.DuckDBPyConnection, run: str, top: int = 10) -> list[dict]:
    """GPUs named as culprit, by board serial where known (a GPU moved to another slot
    or host stays the same GPU), else by host and index."""
    return _rows(con, """
        SELECT max(culprit_host) AS host, max(culprit_gpu) AS gpu,
               culprit_gpu_serial AS serial, count(*) AS interruptions,
               string_agg(DISTINCT component, ', ' ORDER BY component) AS components
        FROM interruptions
        WHERE run = ? AND culprit_gpu IS NOT NULL
          AND category IN ('GPU', 'Host', 'Network')  -- hardware suspects only
        GROUP BY culprit_gpu_serial,
                 CASE WHEN culprit_gpu_serial IS NULL THEN culprit_host END,
                 CASE WHEN culprit_gpu_serial IS NULL THEN culprit_gpu END
        ORDER BY interruptions DESC, host, gpu LIMIT ?
    """, [run, top])


def cumulative_hours(ett: dict | None, interruptions: list[dict]) -> list[dict]:
    """Productive and lost hours since the run's first step, as bands to stack by hand.

    Lost time (downtime plus redone work) is booked at the moment of each interruption,
    so the lost band steps up there (two points at the same elapsed time, in ``seq``
    and row order); productive is the rest of the elapsed wall time. The last point is
    the run's last step, where productive / elapsed is the view's effective training time.
    Interruptions outside the steps' span are booked at its ends. Each row carries its
    band's ``low`` and ``high`` so the chart needs no stacking (Vega-Lite stacks by x,
    which would add the two points of a step on top of each other)."""
    if not ett or ett.get("first_step") is None or not ett.get("wall_seconds"):
        return []
    start = _parse(ett["first_step"])
    wall_h = ett["wall_seconds"] / HOUR
    points = [(0.0, 0.0)]
    lost = 0.0
    for i in interruptions:
        elapsed = min(max((_parse(i["failed_at"]) - start).total_seconds() / HOUR, 0.0),
                      wall_h)
        points.append((elapsed, lost))
        lost += i["total_hours"]
        points.append((elapsed, lost))
    points.append((wall_h, (ett["downtime_seconds"] + ett["lost_seconds"]) / HOUR))
    out = []
    for seq, (elapsed, lost_h) in enumerate(points):
        productive = max(elapsed - lost_h, 0.0)
        out.append({"seq": seq, "elapsed_hours": elapsed, "kind": "productive",
                    "low": 0.0, "high": productive, "hours": productive})
        out.append({"seq": seq, "elapsed_hours": elapsed, "kind": "lost",
                    "low": productive, "high": elapsed, "hours": elapsed - productive})
    return out


def _parse(ts: str) -> datetime:
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ")


def comparison(summary: dict[str, Any]) -> list[dict]:
    """This run's share of each Table 5 component beside Llama 3's, per component.

    Llama 3's share is recomputed from its counts (the printed percentages do not add
    up; both are in the table below the chart)."""
    ours = {r["component"]: r for r in summary["rows"]}
    out = []
    for p in summary["published"]["rows"]:
        mine = ours.get(p["component"], {})
        out.append({
            "component": p["component"], "category": p["category"],
            "interruptions": mine.get("interruptions", 0),
            "percent": mine.get("percent") or 0.0,
            "llama3_interruptions": p["interruptions"],
            "llama3_percent_printed": p["percent_printed"],
            "llama3_percent_recomputed": p["percent_recomputed"],
        })
    return out
