"""The breakdown table and the evidence chain, as data first and text second.

``breakdown()`` and ``explain()`` read the database and return plain dicts; the render
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
    run = run or main_run(con)
    rows = con.execute("""
        SELECT component, category, interruptions, percent FROM breakdown
        WHERE run = ? ORDER BY sort_order
    """, [run]).fetchall()
    if not rows:
        raise ReportError(f"no run named {run!r}")
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
    if compare:
        out["published"] = published(compare)
    return out


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
    t = Table(title=f"Root causes of interruptions - run {data['run']}",
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
        cells = [r["component"], r["category"], str(r["interruptions"]),
                 _fmt(r["percent"])]
        if pub:
            p = pub.get(r["component"])
            cells += ([str(p["interruptions"]), _fmt(p["percent_printed"]),
                       _fmt(p["percent_recomputed"])] if p else ["", "", ""])
        t.add_row(*cells)
    console.print(t)
    console.print(_totals_line(data))
    for note in data.get("published", {}).get("notes", []):
        console.print(f"[yellow]note:[/] {note}")


def _totals_line(data: dict[str, Any]) -> str:
    parts = [f"{data['unexpected']} unexpected + {data['planned']} planned = "
             f"{data['total']} interruptions"]
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


# --- explain -----------------------------------------------------------------------

def explain(con: duckdb.DuckDBPyConnection, interruption_id: str) -> dict[str, Any]:
    rows = con.execute("SELECT * FROM interruptions WHERE interruption_id = ?",
                       [interruption_id]).fetchall()
    if not rows:
        raise ReportError(f"no interruption {interruption_id!r}")
    cols = [d[0] for d in con.description]
    head = dict(zip(cols, rows[0], strict=True))
    ev = con.execute("""
        SELECT x.role, e.ts, e.host, e.kind, e.xid, e.gpu_index, e.message, e.path,
               e.line_no, e.event_id
        FROM interruption_evidence x JOIN events e USING (event_id)
        WHERE x.interruption_id = ? AND x.role <> 'symptom'
        ORDER BY CASE x.role WHEN 'root' THEN 0 WHEN 'corroborating' THEN 1
                 WHEN 'contradicting' THEN 2 ELSE 3 END, e.ts
    """, [interruption_id]).fetchall()
    evidence = [dict(zip(("role", "ts", "host", "kind", "xid", "gpu_index", "message",
                          "path", "line_no", "event_id"), r, strict=True)) for r in ev]
    symptoms = con.execute("""
        SELECT e.host, e.kind, count(*) FROM interruption_evidence x
        JOIN events e USING (event_id)
        WHERE x.interruption_id = ? AND x.role = 'symptom'
        GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2
    """, [interruption_id]).fetchall()
    return {"interruption": head, "evidence": evidence,
            "symptoms": [{"host": h, "kind": k, "count": n} for h, k, n in symptoms]}


def render_explain(data: dict[str, Any], console: Console) -> None:
    i = data["interruption"]
    console.print(f"[bold]{i['interruption_id']}[/]  run {i['run']}  job {i['job_id']}  "
                  f"failed at {i['failed_at']}")
    kind = "planned" if i["planned"] else "unexpected"
    console.print(f"root cause: [bold]{i['component']}[/] ({i['category']}, {kind}); "
                  f"signal family {i['signal_family'] or '-'}; decided by "
                  f"{i['rule_id']} with confidence {i['confidence']:.2f}")
    culprit = i["culprit_host"] or "-"
    if i["culprit_gpu"] is not None:
        culprit += f" GPU {i['culprit_gpu']}"
    if i["culprit_gpu_serial"]:
        culprit += f" (serial {i['culprit_gpu_serial']})"
    console.print(f"culprit: {culprit}; lost work {_fmt(i['lost_seconds'], '.0f')} s; "
                  f"downtime {_fmt(i['downtime_seconds'], '.0f')} s")
    for e in data["evidence"]:
        console.print(f"  [{_ROLE_STYLE.get(e['role'], '')}]{e['role']:<13}[/] {e['ts']} "
                      f"{e['host'] or '-'} {e['kind']}: {e['message'][:160]}")
        console.print(f"  {'':13} [dim]{e['path']}:{e['line_no']}[/]")
    if data["symptoms"]:
        by_host: dict[str, int] = {}
        for s in data["symptoms"]:
            by_host[s["host"] or "-"] = by_host.get(s["host"] or "-", 0) + s["count"]
        total = sum(by_host.values())
        top = sorted(by_host.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
        console.print(f"symptoms: {total} events on {len(by_host)} hosts; most on "
                      + ", ".join(f"{h} ({n})" for h, n in top))


_ROLE_STYLE = {"root": "bold red", "corroborating": "green", "contradicting": "yellow",
               "history": "dim"}
