"""`faultline report --html`: the page's numbers, tables, chart data and escaping, then the
page as headless Chromium draws it (DOM and screenshot)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline import db as fdb
from faultline.cli import EXIT_USAGE, app
from faultline.html_report import browser, data, render_html, write_html
from faultline.report import ReportError

runner = CliRunner()
CHARTS = ("component", "category", "per_day", "time_lost", "effective", "culprits",
          "llama3", "scale", "ettr")
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def sample_db(ingested_sample) -> Path:
    return ingested_sample


@pytest.fixture(scope="module")
def con(sample_db):
    with fdb.connect(sample_db, read_only=True) as c:  # the CLI's configuration
        yield c


@pytest.fixture(scope="module")
def page(con, tmp_path_factory) -> Path:
    return write_html(con, None, tmp_path_factory.mktemp("page") / "report.html")


@pytest.fixture(scope="module")
def html(page) -> str:
    return page.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def truth(con) -> dict:
    """The numbers the page must show, computed here from the interruptions table."""
    rows = con.execute("SELECT planned, component, culprit_host, lost_seconds, "
                       "downtime_seconds FROM interruptions").fetchall()
    ett = con.execute("SELECT effective FROM effective_training_time").fetchall()
    per_component: dict[str, int] = {}
    for _, comp, *_rest in rows:
        per_component[comp] = per_component.get(comp, 0) + 1
    return {"total": len(rows), "planned": sum(1 for r in rows if r[0]),
            "unexpected": sum(1 for r in rows if not r[0]), "components": per_component,
            "hosts": {r[2] for r in rows if r[2]}, "ett": ett[0][0],
            "lost_hours": sum(r[3] or 0 for r in rows) / 3600}


class _Page(HTMLParser):
    """Tables (as lists of cell texts), element texts by id, and <script> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.by_id: dict[str, str] = {}
        self.scripts: list[tuple[dict, str]] = []
        self.fetches: list[tuple[str, dict]] = []  # elements that would load a URL
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._id: str | None = None
        self._script: dict | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if {"src", "href"} & a.keys() or (tag == "link" and a.get("rel")):
            self.fetches.append((tag, a))
        if tag == "table":
            self._table = a.get("id", f"table{len(self.tables)}")
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table:
            self._cell = []
        elif tag == "script":
            self._script = a
        if "id" in a and tag == "div":
            self._id, self.by_id[a["id"]] = a["id"], ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "div":
            self._id = None

    def handle_data(self, text):
        if self._script is not None:
            self.scripts.append((self._script, text))
            self._script = None
        if self._cell is not None:
            self._cell.append(text)
        if self._id:
            self.by_id[self._id] += text


def parse(text: str) -> _Page:
    p = _Page()
    p.feed(text)
    return p


def specs(text: str) -> dict[str, dict]:
    return {a["data-target"].removeprefix("chart-"): json.loads(body)
            for a, body in parse(text).scripts if a.get("class") == "vega-spec"}


def values(spec: dict) -> list[dict]:
    """The inline data of a (possibly layered) chart spec."""
    if "data" in spec:
        return spec["data"]["values"]
    return next(values(layer) for layer in spec["layer"] if "data" in layer)


# --- the page without a browser ----------------------------------------------------

def test_page_is_one_self_contained_file(html, page):
    assert html.startswith("<!DOCTYPE html>")
    # Nothing is fetched: no element with src or href (scripts, styles, images, frames).
    # The parser, like a browser, does not read the inlined JavaScript as markup.
    assert parse(html).fetches == []
    assert "vegaEmbed" in html and "window.vegaEmbed" in html  # the library is inlined
    assert 500_000 < page.stat().st_size < 3_000_000


def test_headline_numbers_are_the_databases(html, truth):
    cards = parse(html).by_id
    assert cards["unexpected"].strip() == str(truth["unexpected"])
    assert cards["planned"].strip() == str(truth["planned"])
    assert cards["total"].strip() == str(truth["total"])
    assert cards["ett"].strip() == f"{100 * truth['ett']:.1f}%"
    assert cards["lost"].strip() == f"{truth['lost_hours']:.1f} h"


def test_breakdown_table_has_every_component_with_its_count(html, truth):
    table = parse(html).tables["breakdown"]
    counts = {row[0]: int(row[2]) for row in table[1:] if row and row[2]}
    for comp, n in truth["components"].items():
        assert counts[comp] == n, comp
    assert counts["Unexpected"] == truth["unexpected"]
    assert counts["All interruptions"] == truth["total"]
    faulty = next(r for r in table if r[0] == "Faulty GPU")
    assert faulty[4:] == ["148", "30.1", "35.3"]  # Llama 3: count, printed, recomputed


def test_every_chart_is_there_with_the_databases_numbers(html, truth):
    charts = specs(html)
    assert set(charts) == set(CHARTS)
    by_component = {r["component"]: r["interruptions"] for r in values(charts["component"])}
    assert by_component == truth["components"]
    assert sum(r["interruptions"] for r in values(charts["per_day"])) == truth["total"]
    assert len(values(charts["time_lost"])) == truth["total"]
    assert {r["host"] for r in values(charts["culprits"])} <= truth["hosts"]
    llama = {r["component"]: r for r in values(charts["llama3"])
             if r["source"].startswith("Llama 3")}
    assert llama["Faulty GPU"]["interruptions"] == 148
    assert llama["Faulty GPU"]["percent"] == pytest.approx(100 * 148 / 419)
    assert f"{100 * truth['ett']:.1f}%" in json.dumps(charts["effective"]["title"])


def test_cumulative_hours_end_at_the_effective_training_time(con):
    d = data.gather(con)
    last = d["cumulative"][-2:]
    productive = next(p for p in last if p["kind"] == "productive")
    assert productive["hours"] / productive["elapsed_hours"] == pytest.approx(
        d["ett"]["effective"])
    for p in d["cumulative"]:
        assert p["low"] <= p["high"] <= p["elapsed_hours"] + 1e-9


@pytest.fixture(scope="module")
def hostile_db(sample_db, tmp_path_factory) -> Path:
    """The sample with a host name, a component and a run name that are markup."""
    db = tmp_path_factory.mktemp("hostile") / "hostile.duckdb"
    shutil.copy(sample_db, db)
    with duckdb.connect(str(db)) as c:
        c.execute("UPDATE interruptions SET culprit_host = ? WHERE culprit_host = "
                  "(SELECT culprit_host FROM interruptions WHERE culprit_gpu IS NOT NULL "
                  "ORDER BY failed_at LIMIT 1)", [HOSTILE])
        c.execute("INSERT INTO components SELECT ?, ?, 'table5', NULL, NULL, 99, "
                  "taxonomy_version FROM components LIMIT 1", [HOSTILE, "</td>&amp;"])
        c.execute("UPDATE interruptions SET component = ?, category = '</td>&amp;' "
                  "WHERE interruption_id = (SELECT min(interruption_id) FROM interruptions "
                  "WHERE NOT planned)", [HOSTILE])
        c.execute("UPDATE interruptions SET run = ?", ["</title>" + HOSTILE])
        c.execute("UPDATE attempts SET run = ?", ["</title>" + HOSTILE])
    return db


def test_names_from_the_logs_are_escaped(hostile_db, tmp_path):
    with duckdb.connect(str(hostile_db), read_only=True) as c:
        text = render_html(c)
    assert HOSTILE not in text and "</title><script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text  # shown, as text
    p = parse(text)
    # Exactly our scripts: the Vega bundle, one JSON spec per chart, the loader.
    assert len(p.scripts) == 1 + len(CHARTS) + 1
    assert HOSTILE in {r["culprit_host"] for r in values(specs(text)["time_lost"])}
    breakdown = p.tables["breakdown"]
    assert any(row[:2] == [HOSTILE, "</td>&amp;"] for row in breakdown)
    assert HOSTILE in {row[0] for row in p.tables["culprit-gpus"]}


def test_nothing_to_report_raises(tmp_path):
    with fdb.connect(tmp_path / "empty.duckdb") as c, pytest.raises(ReportError):
        render_html(c)


# --- the command line --------------------------------------------------------------

def test_report_html_writes_the_page_and_still_prints_the_report(sample_db, tmp_path):
    out = tmp_path / "new" / "dir" / "report.html"  # parents are created
    result = runner.invoke(app, ["report", "--db", str(sample_db), "--format", "csv",
                                 "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert out.is_file() and specs(out.read_text(encoding="utf-8")).keys() == set(CHARTS)
    assert f"wrote HTML report: {out.resolve()}" in result.stderr
    assert result.stdout.startswith("run,component,category,interruptions,percent")


def test_report_html_with_nothing_to_report_writes_nothing(tmp_path):
    with fdb.connect(tmp_path / "empty.duckdb"):
        pass
    out = tmp_path / "sub" / "report.html"
    result = runner.invoke(app, ["report", "--db", str(tmp_path / "empty.duckdb"),
                                 "--html", str(out)])
    assert result.exit_code == EXIT_USAGE
    assert "no interruptions" in result.output
    assert not (tmp_path / "sub").exists()


# --- in a browser ------------------------------------------------------------------

@pytest.fixture(scope="module")
def chromium() -> str:
    """Headless Chromium (.ci/run installs it); its absence fails CI, skips elsewhere."""
    exe = browser.chromium()
    if exe is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is not installed (.ci/run installs it)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return exe


def _svgs(dom: str) -> list[str]:
    return re.findall(r'<svg\b[^>]*class="marks".*?</svg>', dom, flags=re.S)


def test_chromium_draws_every_chart_with_its_text(chromium, page, truth):
    dom = browser.dump_dom(page)
    assert re.search(rf'<body[^>]*data-charts-drawn="{len(CHARTS)}"', dom)
    svgs = _svgs(dom)
    assert len(svgs) >= len(CHARTS)
    text = " ".join(re.sub(r"<[^>]+>", " ", s) for s in svgs)  # the SVG's text nodes
    for title in ("Interruptions by component", "Interruptions per day",
                  "Time lost per interruption", "Top culprit hosts",
                  "This run compared with Llama 3",
                  f"Effective training time: {100 * truth['ett']:.1f}%"):
        assert title in text
    component = next(s for s in svgs if "Interruptions by component" in s)
    assert "Faulty GPU" in component
    # The bar label beside Faulty GPU is its count.
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", component)
    assert str(truth["components"]["Faulty GPU"]) in labels
    assert re.search(rf'id="total">{truth["total"]}<', dom)


def test_hostile_names_stay_text_in_the_browser(chromium, hostile_db, tmp_path):
    with duckdb.connect(str(hostile_db), read_only=True) as c:
        page = write_html(c, None, tmp_path / "hostile.html")
    dom = browser.dump_dom(page)
    assert re.search(rf'data-charts-drawn="{len(CHARTS)}"', dom)
    assert "<script>alert(1)" not in dom
    host_axis = next(s for s in _svgs(dom) if "Top culprit hosts" in s)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in host_axis  # an axis label


def test_screenshot_is_a_drawn_page(chromium, page, tmp_path):
    from PIL import Image  # Pillow comes with apache-beam

    png = browser.screenshot(page, tmp_path / "shot.png", height=1400)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(io.BytesIO(png.read_bytes())) as im:
        assert im.size == (browser.WIDTH, 1400)
        colors = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 200  # text and bars, not one flat colour
    # No single colour covers nearly everything (a blank or error page would).
    assert max(n for n, _ in colors) < 0.9 * browser.WIDTH * 1400


# --- at 800 px: charts inside their cards; whole-period axes; whole counts -----------

NARROW = 800


def test_charts_stay_inside_their_cards_at_800_px(chromium, page):
    dom = browser.dump_dom(page, width=NARROW)
    body = re.search(r"<body[^>]*data-charts-drawn[^>]*>", dom).group(0)
    assert f'data-charts-drawn="{len(CHARTS)}"' in body, body
    assert 'data-charts-overflowing=""' in body, body  # ids of charts that stick out
    widths = [int(w) for w in re.findall(r'<svg[^>]*class="marks"[^>]*width="(\d+)"', dom)]
    assert len(widths) >= len(CHARTS) and max(widths) <= NARROW - 2 * 24 - 2 * 20


def test_per_day_axis_has_every_day_of_the_run(con, html):
    d = data.gather(con)
    (first, last), = con.execute(
        "SELECT min(started_at) AT TIME ZONE 'UTC', max(ended_at) AT TIME ZONE 'UTC' "
        "FROM attempts WHERE run = ?", [d["run"]]).fetchall()
    n_days = (last.date() - first.date()).days + 1
    spec = specs(html)["per_day"]
    domain = spec["layer"][0]["encoding"]["x"]["scale"]["domain"]
    assert len(domain) == n_days and domain[0] == first.date().isoformat()
    assert domain == sorted(domain) and len(set(domain)) == n_days
    totals = {r["day"]: r["total"] for r in spec["layer"][1]["data"]["values"]}
    assert set(totals) == set(domain)  # a quiet day has its 0
    busy = {r["day"] for r in values(spec)}
    assert all(totals[day] == 0 for day in set(domain) - busy)
    lost = specs(html)["time_lost"]["encoding"]["x"]["scale"]["domain"]
    assert lost[0] <= min(i["failed_at"] for i in d["interruptions"]) <= lost[1]
    assert lost[0][:10] == first.date().isoformat() and lost[1][:10] == last.date().isoformat()


def test_count_axes_are_whole_numbers(chromium, page):
    dom = browser.dump_dom(page, width=NARROW)
    for title in ("Interruptions by component", "Interruptions per day",
                  "Top culprit hosts"):
        svg = next(s for s in _svgs(dom) if title in s)
        ticks = re.findall(r'<g class="mark-text role-axis-label"[^>]*>(.*?)</g>', svg, re.S)
        labels = [t for g in ticks for t in re.findall(r"<text[^>]*>([^<]*)</text>", g)]
        numbers = [x for x in labels if re.fullmatch(r"[\d.,]+", x)]
        assert numbers and all(re.fullmatch(r"\d+", x) for x in numbers), (title, numbers)


def test_projection_charts_carry_the_runs_rate(html, con):
    """The size chart's line is the run's rate times the GPUs, inside its band, and the
    ETTR curves are the model's at each size (docs/projection.md)."""
    from faultline import projection as pj

    proj = pj.projection(con, 100_000)
    charts = specs(html)
    scale = values(charts["scale"])
    per_gpu_day = proj["measured"]["unexpected"] / proj["measured"]["gpu_days"]
    e = proj["ettr"]
    for p in scale:  # per calendar day: (1 - p) / (1 / L + D), L = rate * GPUs
        lam = per_gpu_day * p["gpus"]
        assert p["expected_per_day"] == pytest.approx(
            (1 - e["planned_fraction"]) / (1 / lam + e["downtime_s"] / 86400))
        assert p["expected_low"] < p["expected_per_day"] < p["expected_high"]
    # The measured dot lies on the line: at the measured size the model gives it back.
    m = proj["measured"]
    assert pj.per_calendar_day(per_gpu_day * m["gpus"], e["downtime_s"] / 86400,
                               e["planned_fraction"]) == pytest.approx(
        m["unexpected_per_day"], rel=1e-9)
    assert scale[0]["gpus"] == pytest.approx(8) and scale[-1]["gpus"] == pytest.approx(1e6)
    curves = values(charts["ettr"])
    assert {p["size"] for p in curves} >= {"1,024 GPUs", "100,000 GPUs"}
    assert all(0 <= p["ettr"] <= 1 for p in curves)
    m = pj.Ettr(per_gpu_day * 1024 / 86400, e["startup_s"], e["checkpoint_cost_s"],
                e["downtime_s"], e["planned_fraction"])
    for p in (p for p in curves if p["size"] == "1,024 GPUs"):
        assert p["ettr"] == pytest.approx(m.at(60 * p["interval_minutes"]))
