"""``faultline report --html``: one self-contained page with the run's charts.

Why altair (Vega-Lite) and not matplotlib: altair is already installed (great-expectations
depends on it), its charts are declarative specs that are easy to test as data, and in the
browser they keep tooltips (which interruption, which host) that a static image loses.
The only addition is vl-convert-python, one wheel without dependencies, which provides
the Vega JavaScript bundle altair itself inlines for offline HTML
(https://altair-viz.github.io/user_guide/saving_charts.html, "inline=True"); it makes
the file ~1 MB but viewable with no network. Vega draws into SVG (vega-embed's
``renderer: "svg"``, https://vega.github.io/vega-embed/interfaces/EmbedOptions.html),
so labels and titles are text in the DOM, searchable and testable with a headless
browser.

Layout: ``data`` reads the database (parameterized SQL, plain dicts), ``charts`` builds
the altair specs, ``page`` fills the jinja2 template with autoescaping.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from faultline import __version__
from faultline.html_report import charts, data, page


def render_html(con: duckdb.DuckDBPyConnection, run: str | None = None) -> str:
    """The HTML page for ``run`` (default: the run with the most interruptions).

    Raises ``faultline.report.ReportError`` when the database has nothing to report."""
    d = data.gather(con, run)
    return page.render(d, charts.all_charts(d), version=__version__)


def write_html(con: duckdb.DuckDBPyConnection, run: str | None, path: Path) -> Path:
    """Write the page to ``path``, creating missing parent directories (a report path
    like ``reports/2025-01/run.html`` should not need a separate mkdir), and return the
    resolved path. The page is rendered before anything is created, so a database with
    nothing to report leaves no file or directory behind."""
    text = render_html(con, run)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path.resolve()
