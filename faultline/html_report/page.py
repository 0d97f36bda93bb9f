"""One HTML file: the numbers, the tables and the charts, with Vega's JavaScript inlined.

Everything from the logs (host names, components, ids) reaches the page through jinja2
with autoescaping on (https://jinja.palletsprojects.com/en/stable/api/, "Autoescaping").
The chart specifications go in as JSON inside ``<script type="application/json">``
through jinja2's ``tojson`` filter, which escapes ``<``, ``>``, ``&`` and ``'`` as
``\\u003c``-style escapes that JSON reads back as the same characters
(https://github.com/pallets/jinja/issues/1882), so a host named
``</script><script>...`` stays data. Vega puts text into the SVG through the DOM, not
as markup.

The Vega, Vega-Lite and vega-embed bundle comes from vl-convert
(``vl_convert.javascript_bundle``, the call behind altair's ``save(..., inline=True)``,
https://altair-viz.github.io/user_guide/saving_charts.html), once per page, so the
file opens offline and without any CDN.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import altair as alt
import jinja2
import vl_convert
from markupsafe import Markup

# A <script> element's text ends at "</script" and "<!--" changes how it is parsed
# (https://html.spec.whatwg.org/multipage/scripting.html#restrictions-for-contents-of-script-elements).
_UNSAFE_IN_SCRIPT = re.compile(r"</script|<!--", re.IGNORECASE)


def vega_bundle() -> Markup:
    """Vega, Vega-Lite (the version altair writes) and vega-embed as one script."""
    vl_version = "_".join(alt.SCHEMA_VERSION.split(".")[:2])  # "v6.4.1" -> "v6_4"
    js = vl_convert.javascript_bundle(vl_version=vl_version)
    if _UNSAFE_IN_SCRIPT.search(js):
        raise RuntimeError("the Vega bundle cannot be inlined in a <script> element")
    return Markup(js)  # noqa: S704 - trusted library code, checked above


def environment() -> jinja2.Environment:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    return env


def _num(value: float | int | None, digits: int = 1) -> str:
    """Numbers for tables: '' for missing, thousands separators."""
    if value is None:
        return ""
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def render(data: dict[str, Any], charts: dict[str, alt.TopLevelMixin],
           version: str) -> str:
    """The page for ``data`` with ``charts`` (slot name -> chart)."""
    template = environment().from_string(
        resources.files(__package__).joinpath("page.html.j2").read_text(encoding="utf-8"))
    specs = {name: chart.to_dict() for name, chart in charts.items()}
    return template.render(d=data, s=data["summary"], p=data["summary"]["published"],
                           specs=specs, vega=vega_bundle(), version=version)
