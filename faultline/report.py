"""The breakdown table, as data first and text second (explain: :mod:`faultline.explain`).

``breakdown()`` reads the database and returns a plain dict; the render
functions turn those into a rich table, Markdown, CSV or JSON. The published Llama 3
table is shown beside a cluster's own as printed, with the percentages recomputed from
its counts: the printed table does not add up, and the report says so.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import duckdb
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from faultline.schemas.taxonomy import load_taxonomy


class ReportError(Exception):
    """Nothing to report (exit 2 at the CLI)."""


def main_run(con: duckdb.DuckDBPyConnection) -> str:
    """The run to report by default: the one with the most interruptions."""
    rows = con.execute("SELECT run, count(*) FROM interruptions GROUP BY run "
                       "ORDER BY 2 DESC, 1 LIMIT 1").fetchall()
    if not rows:
        raise ReportError("no interruptions in this database (ingest a corpus first)")
    return rows[0][0]


def breakdown(con: duckdb.DuckDBPyConnection, run: str | None = None,
              compare: str | None = None) -> dict[str, Any]:
    """One run's breakdown. ``run`` is a stored run name or, when unambiguous, a job
    name; the result also says how many interruptions the other runs have, so its
    count is never mistaken for the database's (which ingest's summary gives)."""
    from faultline.runs import RunError, interruption_counts, resolve

    if run is None:
        run = main_run(con)
    else:
        try:
            run = resolve(con, run)
        except RunError as exc:
            raise ReportError(str(exc)) from exc
    rows = con.execute("""
        SELECT component, category, interruptions, percent FROM breakdown
        WHERE run = ? ORDER BY sort_order
    """, [run]).fetchall()
    ett = con.execute("SELECT * FROM effective_training_time WHERE run = ?", [run]
                      ).fetchall()
    cols = [d[0] for d in con.description] if ett else []
    totals = dict(zip(cols, ett[0], strict=True)) if ett else {}
    planned = next((r[2] for r in rows if r[0] == "Planned Maintenance"), 0)
    unexpected = sum(r[2] for r in rows if r[0] != "Planned Maintenance")
    out: dict[str, Any] = {
        "run": run,
        "rows": [{"component": c, "category": k, "interruptions": n, "percent": p}
                 for c, k, n, p in rows],
        "unexpected": unexpected, "planned": planned, "total": unexpected + planned,
        "effective_training_time": totals.get("effective"),
        "failures_per_day": totals.get("failures_per_day"),
        "days": totals.get("days"),
        "downtime_hours": (totals.get("downtime_seconds") or 0) / 3600,
        "lost_hours": (totals.get("lost_seconds") or 0) / 3600,
    }
    out["runs"] = [{"run": r, "interruptions": n} for r, n in interruption_counts(con)]
    out["overrides"] = run_overrides(con, run)
    if compare:
        out["published"] = published(compare)
    return out


def run_overrides(con: duckdb.DuckDBPyConnection, run: str) -> list[dict[str, Any]]:
    """The operators' overrides applied to ``run``'s interruptions (an older database
    without the ``overrides`` table has none)."""
    if "overrides" not in {r[0] for r in con.execute("SHOW TABLES").fetchall()}:
        return []
    rows = con.execute("""
        SELECT o.interruption_id, o.component, o.note, o.created_by, o.created_at
        FROM overrides o JOIN interruptions i USING (interruption_id)
        WHERE i.run = ? ORDER BY o.created_at, o.interruption_id
    """, [run]).fetchall()
    return [dict(zip(("interruption_id", "component", "note", "created_by", "created_at"),
                     r, strict=True)) for r in rows]


def _scope_line(data: dict[str, Any]) -> str | None:
    """Which of the database's interruptions the table counts, when there are others."""
    others = [r for r in data.get("runs", []) if r["run"] != data["run"]]
    if not others:
        return None
    total = sum(r["interruptions"] for r in data["runs"])
    listed = ", ".join(f"{r['interruptions']} in {r['run']}" for r in others[:5])
    more = f" and {len(others) - 5} more runs" if len(others) > 5 else ""
    return (f"run {data['run']} only: {data['total']} of the database's {total} "
            f"interruptions; other runs: {listed}{more} (report --run NAME)")


def _override_lines(data: dict[str, Any]) -> list[str]:
    return [f"override {o['interruption_id']}: {o['component']} (by {o['created_by']}, "
            f"{_when(o['created_at'])}){': ' + o['note'] if o['note'] else ''}"
            for o in data.get("overrides", [])]


def _when(ts: Any) -> str:
    """A stored time as UTC minutes."""
    import datetime as dt

    if ts is None:
        return "-"
    return f"{ts.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"


def published(name: str) -> dict[str, Any]:
    """Meta's Table 5 as printed, with the percentages recomputed from its counts."""
    if name != "llama3":
        raise ReportError(f"no published table named {name!r}")
    tax = load_taxonomy()
    meta = tax.meta["table5"]
    total = meta["unexpected_total"]
    rows = [{"component": c.component, "category": c.category,
             "interruptions": c.published_interruptions,
             "percent_printed": c.published_percent,
             "percent_recomputed": 100.0 * c.published_interruptions / total}
            for c in tax.table5]
    gpu = sum(r["interruptions"] for r in rows if r["category"] == "GPU")
    return {
        "source": tax.table5_source, "rows": rows, "unexpected": total,
        "planned": meta["planned_total"], "failures_per_day": meta["failures_per_day"],
        "printed_percent_sum": round(sum(r["percent_printed"] for r in rows), 1),
        "notes": [
            f"148 of {total} is {100 * 148 / total:.1f}%, but Faulty GPU is printed as "
            "30.1%.",
            f"The printed percentages sum to "
            f"{sum(r['percent_printed'] for r in rows):.1f}%, not 100%.",
            f"GPU rows: printed share {meta['gpu_share_printed']}%, counts give {gpu} of "
            f"{total} = {100 * gpu / total:.1f}%.",
        ],
    }


def _fmt(v: float | None, spec: str = ".1f") -> str:
    return "" if v is None else format(v, spec)


def render_table(data: dict[str, Any], console: Console) -> None:
    """The breakdown as a terminal table; fits 80 columns with the comparison."""
    pub = {r["component"]: r for r in data.get("published", {}).get("rows", [])}
    t = Table(title=f"Root causes of interruptions - run {escape(data['run'])}",
              box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("Component", min_width=18)
    # With the comparison, a category wraps at word breaks instead of being cut:
    # "Unplanned Maintenance" is the longest and "Maintenance" its longest word.
    t.add_column("Category", min_width=len("Maintenance"),
                 max_width=len("Maintenance") if pub else None, style="dim")
    t.add_column("Count", justify="right", no_wrap=True, min_width=5)
    t.add_column("%", justify="right", no_wrap=True, min_width=5)
    if pub:
        for col in ("Llama 3", "printed", "recomp."):
            t.add_column(col, justify="right", style="dim", no_wrap=True, min_width=len(col))
        t.caption = ("Llama 3: Table 5's count; printed: its % as printed; recomp.: its % "
                     "recomputed from the counts")
    for r in data["rows"]:
        cells = [escape(r["component"]), escape(r["category"]), str(r["interruptions"]),
                 _fmt(r["percent"])]
        if pub:
            p = pub.get(r["component"])
            cells += ([str(p["interruptions"]), _fmt(p["percent_printed"]),
                       _fmt(p["percent_recomputed"])] if p else ["", "", ""])
        t.add_row(*cells)
    console.print(t)
    console.print(escape(_totals_line(data)))
    if (scope := _scope_line(data)) is not None:
        console.print(escape(scope))
    for line in _override_lines(data):
        console.print(f"[cyan]{escape(line)}[/]")
    for note in data.get("published", {}).get("notes", []):
        console.print(f"[yellow]note:[/] {escape(note)}")


def _totals_line(data: dict[str, Any]) -> str:
    parts = [f"{data['unexpected']} unexpected + {data['planned']} planned = "
             f"{data['total']} interruptions"
             + ("" if data["rows"] else f" (every attempt of run {data['run']} ended "
                "without interrupting it)")]
    if data.get("failures_per_day") is not None:
        parts.append(f"{data['failures_per_day']:.2f} unexpected per day over "
                     f"{data['days']:.1f} days")
    if data.get("effective_training_time") is not None:
        parts.append(f"effective training time {100 * data['effective_training_time']:.1f}%")
    parts.append(f"downtime {data['downtime_hours']:.1f} h, lost work "
                 f"{data['lost_hours']:.1f} h")
    if "published" in data:
        p = data["published"]
        parts.append(f"published: {p['unexpected']} + {p['planned']}, "
                     f"{p['failures_per_day']} per day")
    return "; ".join(parts)


def render_markdown(data: dict[str, Any]) -> str:
    pub = {r["component"]: r for r in data.get("published", {}).get("rows", [])}
    head = "| Component | Category | Interruptions | % |"
    sep = "|---|---|---:|---:|"
    if pub:
        head += " Llama 3 | % printed | % recomputed |"
        sep += "---:|---:|---:|"
    lines = [f"### Run {data['run']}", "", head, sep]
    for r in data["rows"]:
        line = (f"| {r['component']} | {r['category']} | {r['interruptions']} | "
                f"{_fmt(r['percent'])} |")
        if pub:
            p = pub.get(r["component"])
            line += (f" {p['interruptions']} | {_fmt(p['percent_printed'])} | "
                     f"{_fmt(p['percent_recomputed'])} |" if p else " | | |")
        lines.append(line)
    lines += ["", _totals_line(data)]
    if (scope := _scope_line(data)) is not None:
        lines += ["", scope]
    if data.get("overrides"):
        lines += ["", "Operator overrides:", ""] + [f"- {x}" for x in _override_lines(data)]
    lines += [f"- {n}" for n in data.get("published", {}).get("notes", [])]
    return "\n".join(lines) + "\n"


def render_csv(data: dict[str, Any]) -> str:
    pub = {r["component"]: r for r in data.get("published", {}).get("rows", [])}
    buf = io.StringIO()
    w = csv.writer(buf)
    header = ["run", "component", "category", "interruptions", "percent"]
    if pub:
        header += ["published_interruptions", "published_percent_printed",
                   "published_percent_recomputed"]
    w.writerow(header)
    for r in data["rows"]:
        row = [data["run"], r["component"], r["category"], r["interruptions"],
               "" if r["percent"] is None else r["percent"]]
        if pub:
            p = pub.get(r["component"]) or {}
            row += [p.get("interruptions", ""), p.get("percent_printed", ""),
                    p.get("percent_recomputed", "")]
        w.writerow(row)
    return buf.getvalue()


def render_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, default=str) + "\n"
