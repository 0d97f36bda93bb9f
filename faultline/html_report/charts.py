"""The report's charts, as altair (Vega-Lite) specifications built from ``data.gather``.

Each function takes plain rows and returns a top-level chart; the page turns them into
JSON and Vega renders them in the browser. One colour per Table 5 category, the same in
every chart, so a reader learns it once. Times are on UTC scales
(https://vega.github.io/vega-lite/docs/scale.html#type: "utc" scales show UTC whatever
the viewer's zone), the same zone as the rest of faultline.
"""

from __future__ import annotations

from typing import Any

import altair as alt

from faultline.schemas.taxonomy import load_taxonomy

# Every chart is as wide as its card ("container": https://vega.github.io/vega-lite/docs/size.html#specifying-responsive-width-and-height),
# so none runs out of it on a narrow window; the page's CSS sizes the cards.
# Tableau 10, the Vega default categorical scheme, pinned per category so the colours do
# not shift when a run lacks a category.
_PALETTE = ("#e45756", "#4c78a8", "#f58518", "#b279a2", "#54a24b", "#9d755d", "#bab0ac",
            "#eeca3b", "#72b7b2", "#ff9da6")


def categories() -> list[str]:
    """Table 5 categories in the published table's order, then the extra ones."""
    return list(dict.fromkeys(c.category for c in load_taxonomy().components))


def _category_color(legend_columns: int = 4) -> alt.Color:
    """Colour by category; ``legend_columns=0`` for no legend (the axis already names
    the categories), 2 for half-width charts."""
    cats = categories()
    return alt.Color("category:N", title="Category",
                     scale=alt.Scale(domain=cats, range=list(_PALETTE[:len(cats)])),
                     legend=(alt.Legend(orient="bottom", columns=legend_columns)
                             if legend_columns else None))


def _count_axis(title: str) -> alt.Axis:
    """Counts are whole numbers: no 0.5 ticks."""
    return alt.Axis(title=title, tickMinStep=1, format="d")


def _style(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    return (chart.configure_axis(labelFontSize=12, titleFontSize=13, labelLimit=260)
            .configure_legend(labelFontSize=12, titleFontSize=12, labelLimit=260)
            .configure_title(fontSize=16, subtitleFontSize=12, anchor="start",
                             subtitleColor="#555")
            .configure_view(stroke=None))


def _ranked_bars(shown: list[dict], key: str, tooltip: list, legend_columns: int,
                 step: int, title: str, subtitle: str) -> alt.TopLevelMixin:
    """Horizontal bars in the given order, each labelled with its count."""
    base = alt.Chart(alt.Data(values=shown)).encode(
        y=alt.Y(f"{key}:N", sort=[r[key] for r in shown], title=None),
        x=alt.X("interruptions:Q", axis=_count_axis("Interruptions")),
    )
    bars = base.mark_bar().encode(color=_category_color(legend_columns=legend_columns),
                                  tooltip=tooltip)
    labels = base.mark_text(align="left", dx=3, fontSize=11).encode(text="interruptions:Q")
    return _style((bars + labels).properties(
        width="container", height=alt.Step(step),
        title=alt.Title(title, subtitle=subtitle)))


def by_component(rows: list[dict]) -> alt.TopLevelMixin:
    """Horizontal bars, largest first; zero rows are left to the table."""
    shown = sorted((r for r in rows if r["interruptions"]),
                   key=lambda r: -r["interruptions"])  # stable: ties keep Table 5 order
    return _ranked_bars(
        shown, "component",
        [alt.Tooltip("component:N", title="Component"),
         alt.Tooltip("category:N", title="Category"),
         alt.Tooltip("interruptions:Q", title="Interruptions"),
         alt.Tooltip("percent:Q", title="% of unexpected", format=".1f")],
        legend_columns=2, step=18, title="Interruptions by component",
        subtitle="Root cause of each interruption (Table 5 components)")


def by_category(rows: list[dict]) -> alt.TopLevelMixin:
    """One bar per category; the share is of unexpected interruptions, as in Table 5."""
    totals: dict[str, dict[str, Any]] = {}
    for r in rows:
        t = totals.setdefault(r["category"], {"category": r["category"],
                                              "interruptions": 0, "percent": None})
        t["interruptions"] += r["interruptions"]
        if r["percent"] is not None:
            t["percent"] = (t["percent"] or 0.0) + r["percent"]
    shown = sorted((t for t in totals.values() if t["interruptions"]),
                   key=lambda t: -t["interruptions"])
    return _ranked_bars(
        shown, "category",
        [alt.Tooltip("category:N", title="Category"),
         alt.Tooltip("interruptions:Q", title="Interruptions"),
         alt.Tooltip("percent:Q", title="% of unexpected", format=".1f")],
        legend_columns=0, step=26, title="Interruptions by category",
        subtitle="Planned maintenance is counted but not in the shares")


def per_day(rows: list[dict], days: list[str] | None = None) -> alt.TopLevelMixin:
    """Stacked bars per UTC day. Days are ordinal so a viewer's zone cannot move them;
    the axis holds every day of the run (``days``), a day without interruptions shows
    its total, 0."""
    days = days or sorted({r["day"] for r in rows})
    totals: dict[str, int] = dict.fromkeys(days, 0)
    for r in rows:
        totals[r["day"]] = totals.get(r["day"], 0) + r["interruptions"]
    x_days = alt.X("day:O", title="Day (UTC)", scale=alt.Scale(domain=sorted(totals)),
                   axis=alt.Axis(labelAngle=-45))
    bars = alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        x=x_days,
        y=alt.Y("sum(interruptions):Q", axis=_count_axis("Interruptions")),
        color=_category_color(),
        order=alt.Order("category:N"),
        tooltip=[alt.Tooltip("day:O", title="Day"), alt.Tooltip("category:N"),
                 alt.Tooltip("interruptions:Q", title="Interruptions")])
    labels = alt.Chart(alt.Data(values=[{"day": d, "total": n} for d, n in
                                        sorted(totals.items())])).mark_text(
        dy=-6, fontSize=11).encode(x=x_days, y="total:Q", text="total:Q")
    return _style((bars + labels).properties(
        width="container", height=260,
        title=alt.Title("Interruptions per day",
                        subtitle="Unexpected and planned, coloured by root-cause category")))


def time_lost(interruptions: list[dict], period: tuple[str, str] | None = None
              ) -> alt.TopLevelMixin:
    """One bar per interruption at its time: downtime plus work redone. The time axis
    spans the run's whole ``period``, not only the interruptions'."""
    scale = (alt.Scale(type="utc", domain=list(period), padding=8) if period
             else alt.Scale(type="utc", padding=8))  # padding: room for the end bars
    chart = alt.Chart(alt.Data(values=interruptions)).mark_bar(width=5).encode(
        x=alt.X("failed_at:T", title="Time of the interruption (UTC)", scale=scale,
                axis=alt.Axis(format="%b %d %H:%M", labelAngle=-30)),
        y=alt.Y("total_hours:Q", title="Hours lost (downtime + redone work)"),
        color=_category_color(),
        tooltip=[alt.Tooltip("interruption_id:N", title="Interruption"),
                 alt.Tooltip("failed_at:N", title="Failed at (UTC)"),
                 alt.Tooltip("component:N", title="Component"),
                 alt.Tooltip("culprit_host:N", title="Culprit host"),
                 alt.Tooltip("downtime_hours:Q", title="Downtime (h)", format=".2f"),
                 alt.Tooltip("lost_hours:Q", title="Redone work (h)", format=".2f")],
    )
    return _style(chart.properties(
        width="container", height=260,
        title=alt.Title("Time lost per interruption",
                        subtitle="Downtime until the next attempt's first step, plus work "
                        "redone since the last checkpoint")))


def effective_time(points: list[dict], effective: float | None) -> alt.TopLevelMixin:
    """Productive and lost hours as two bands under the elapsed wall time.

    No ``order`` encoding on the areas: with one, Vega-Lite 6.4 drew one area per point
    (nothing visible; seen by rendering with vl-convert). Vega sorts an area's points by
    x with JavaScript's stable sort (ES2019), so the two points of a step keep the order
    ``data.cumulative_hours`` gives them. Tooltips sit on transparent points: on an area
    they would show one datum for the whole shape
    (https://github.com/vega/vega-tooltip/issues/1)."""
    colors = alt.Scale(domain=["productive", "lost"], range=["#54a24b", "#e45756"])
    labels = "datum.label == 'lost' ? 'lost (downtime + redone work)' : datum.label"
    base = alt.Chart(alt.Data(values=points)).encode(
        x=alt.X("elapsed_hours:Q", title="Hours since the run's first training step",
                scale=alt.Scale(nice=False)),
        color=alt.Color("kind:N", title="Time", scale=colors,
                        legend=alt.Legend(orient="bottom", labelExpr=labels)),
    )
    bands = base.mark_area(opacity=0.85).encode(
        y=alt.Y("low:Q", title="Cumulative hours"), y2="high:Q")
    hover = base.mark_circle(opacity=0, size=60).encode(
        y="high:Q",
        tooltip=[alt.Tooltip("elapsed_hours:Q", title="Elapsed (h)", format=".1f"),
                 alt.Tooltip("kind:N", title="Time"),
                 alt.Tooltip("hours:Q", title="Cumulative hours", format=".1f")])
    share = "n/a" if effective is None else f"{100 * effective:.1f}%"
    return _style((bands + hover).properties(
        width="container", height=260,
        title=alt.Title(f"Effective training time: {share}",
                        subtitle="Lost time is booked when each interruption happens")))


def culprit_hosts(rows: list[dict]) -> alt.TopLevelMixin:
    """Hosts most often named as the culprit, stacked by category (``rows`` come
    ordered, most blamed first)."""
    chart = alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        y=alt.Y("host:N", sort=list(dict.fromkeys(r["host"] for r in rows)), title=None),
        x=alt.X("sum(interruptions):Q", axis=_count_axis("Interruptions blamed on the host")),
        color=_category_color(legend_columns=2),
        tooltip=[alt.Tooltip("host:N", title="Host"), alt.Tooltip("category:N"),
                 alt.Tooltip("interruptions:Q", title="Interruptions"),
                 alt.Tooltip("components:N", title="Components")])
    return _style(chart.properties(
        width="container", height=alt.Step(18),
        title=alt.Title("Top culprit hosts",
                        subtitle="Hosts named as the root cause's location")))


def versus_llama3(rows: list[dict], published_total: int) -> alt.TopLevelMixin:
    """This run's share per component beside Llama 3's, grouped bars."""
    this, meta = "This run", "Llama 3 (Table 5, recomputed)"
    values: list[dict[str, Any]] = []
    for r in rows:
        values.append({"component": r["component"], "source": this,
                       "percent": r["percent"], "interruptions": r["interruptions"]})
        values.append({"component": r["component"], "source": meta,
                       "percent": r["llama3_percent_recomputed"],
                       "interruptions": r["llama3_interruptions"]})
    order = [r["component"] for r in rows]
    chart = alt.Chart(alt.Data(values=values)).mark_bar().encode(
        y=alt.Y("component:N", sort=order, title=None),
        yOffset=alt.YOffset("source:N", sort=[this, meta]),
        x=alt.X("percent:Q", title="% of unexpected interruptions"),
        color=alt.Color("source:N", title=None, sort=[this, meta],
                        scale=alt.Scale(domain=[this, meta], range=["#4c78a8", "#bab0ac"]),
                        legend=alt.Legend(orient="bottom")),
        tooltip=[alt.Tooltip("component:N", title="Component"),
                 alt.Tooltip("source:N", title="Source"),
                 alt.Tooltip("interruptions:Q", title="Interruptions"),
                 alt.Tooltip("percent:Q", title="%", format=".1f")])
    return _style(chart.properties(
        width="container", height=alt.Step(11),
        title=alt.Title("This run compared with Llama 3",
                        subtitle="Share of unexpected interruptions per component; "
                        "Llama 3 percentages recomputed from its counts "
                        f"({published_total} unexpected)")))


def by_scale(points: list[dict], measured: dict | None) -> alt.TopLevelMixin:
    """Expected interruptions per calendar day against cluster size, both axes log,
    with the 95% band; the run's own size and rate as a point (on the line: the model
    gives back the measured rate at the measured size)."""
    x = alt.X("gpus:Q", title="GPUs (log scale)", scale=alt.Scale(type="log", nice=False),
              axis=alt.Axis(format="~s"))
    y_scale = alt.Scale(type="log")
    base = alt.Chart(alt.Data(values=points)).encode(x=x)
    band = base.mark_area(opacity=0.25, color="#4c78a8").encode(
        y=alt.Y("expected_low:Q", title="Interruptions per day (log scale)", scale=y_scale),
        y2="expected_high:Q")
    line = base.mark_line(color="#4c78a8").encode(
        y=alt.Y("expected_per_day:Q", scale=y_scale),
        tooltip=[alt.Tooltip("gpus:Q", title="GPUs", format=",.0f"),
                 alt.Tooltip("expected_per_day:Q", title="Per day", format=".3g"),
                 alt.Tooltip("expected_low:Q", title="95% low", format=".3g"),
                 alt.Tooltip("expected_high:Q", title="95% high", format=".3g")])
    layers = band + line
    if measured and measured.get("per_day"):
        dot = alt.Chart(alt.Data(values=[{"gpus": measured["gpus"],
                                          "per_day": measured["per_day"]}])).mark_point(
            filled=True, size=70, color="#e45756").encode(
            x="gpus:Q", y=alt.Y("per_day:Q", scale=y_scale),
            tooltip=[alt.Tooltip("gpus:Q", title="Measured GPUs", format=",.0f"),
                     alt.Tooltip("per_day:Q", title="Measured per day", format=".3g")])
        layers = layers + dot
    return _style(layers.properties(
        width="container", height=260,
        title=alt.Title("Expected interruptions per day by cluster size",
                        subtitle="Per calendar day: the run's rate times the GPUs, with "
                        "its measured downtime and planned stops; 95% band; dot: as "
                        "measured")))


def ettr_by_interval(points: list[dict], measured: dict | None) -> alt.TopLevelMixin:
    """The ETTR model against the checkpoint interval, one line per cluster size."""
    sizes = list(dict.fromkeys(p["size"] for p in points))
    chart = alt.Chart(alt.Data(values=points)).mark_line().encode(
        x=alt.X("interval_minutes:Q", title="Checkpoint interval, minutes (log scale)",
                scale=alt.Scale(type="log", nice=False)),
        y=alt.Y("ettr:Q", title="Effective training time", scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%")),
        color=alt.Color("size:N", title="Cluster size", sort=sizes,
                        legend=alt.Legend(orient="bottom")),
        tooltip=[alt.Tooltip("size:N", title="Size"),
                 alt.Tooltip("interval_minutes:Q", title="Interval (min)", format=".1f"),
                 alt.Tooltip("ettr:Q", title="ETTR", format=".1%")])
    layers = chart
    if measured and measured.get("checkpoint_minutes"):
        rule = alt.Chart(alt.Data(values=[{"m": measured["checkpoint_minutes"]}])).mark_rule(
            strokeDash=[4, 3], color="#555").encode(x="m:Q")
        layers = layers + rule
    return _style(layers.properties(
        width="container", height=260,
        title=alt.Title("Effective training time by checkpoint interval",
                        subtitle="Model of docs/projection.md; dashed: the run's interval")))


def all_charts(data: dict[str, Any]) -> dict[str, alt.TopLevelMixin]:
    """Every chart of the page by its slot name in the template."""
    rows = data["summary"]["rows"]
    ett = data["ett"] or {}
    curves = (data.get("projection") or {}).get("curves", {})
    return {
        "component": by_component(rows),
        "category": by_category(rows),
        "per_day": per_day(data["per_day"], data.get("days")),
        "time_lost": time_lost(data["interruptions"], data.get("period")),
        "effective": effective_time(data["cumulative"], ett.get("effective")),
        "culprits": culprit_hosts(data["culprit_hosts"]),
        "llama3": versus_llama3(data["comparison"],
                                data["summary"]["published"]["unexpected"]),
        "scale": by_scale(curves.get("scale", []), curves.get("measured")),
        "ettr": ettr_by_interval(curves.get("ettr", []), curves.get("measured")),
    }
