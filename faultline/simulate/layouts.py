"""The same simulated cluster written in other corpus layouts (``simulate --layout``).

Real corpora are not laid out the way ``../shared/CORPUS.md`` draws them: hosts keep
``/var/log`` trees, a central rsyslog server holds every host in one file, a shipper
exports the journal as JSON. A layout changes only *where* each file goes and *how*
each host's kernel log is written; the cluster, the timeline and every incident stay
the same, so an ingest of any layout must give the canonical verdicts (the slow test
in ``tests/test_layouts.py``).

A :class:`Layout` is data plus two small functions:

- ``kernel_shape(canonical_shape)``: the shape a host's kernel log is written in
  (``rfc3339``, ``rfc3164``, ``dmesg_t``, plain ``dmesg`` (seconds since boot),
  ``journal_json`` (``journalctl -o json``)).
- ``route(rel, source, host)``: the path (relative to the corpus) a canonical file
  goes to. Files routed to the same path are appended in the order they are written
  (rotated kernel logs oldest first, then host after host), and the truth
  (``truth/files.csv``, ``truth/signals.csv``) follows the routed paths and line
  numbers exactly.

To add a layout, add an entry to :data:`LAYOUTS` (h-slurmbmc's ``slurm-out`` and
``redfish`` follow the same mechanism: a ``route`` for the files, and a renderer choice
where the lines themselves change).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any


def _same_shape(shape: str) -> str:
    return shape


def _same_path(rel: str, _source: str, _host: str | None) -> str:
    return rel


@dataclass(frozen=True)
class Layout:
    """How one corpus layout differs from the canonical one."""

    name: str
    description: str
    kernel_shape: Callable[[str], str] = _same_shape
    route: Callable[[str, str, str | None], str] = _same_path
    # after every file is written: the CorpusOutput, to rewrite files (e.g. interleave a
    # central syslog's hosts by time) through its ``replace`` so the truth follows
    finish: Callable[[Any], None] | None = None


def _name(rel: str) -> str:
    return PurePosixPath(rel).name


# -- varlog: <host>/var/log/{kern.log*,dmesg,...} ------------------------------------------

def _varlog_shape(shape: str) -> str:
    # dmesg -T hosts become the most common pasted shape: plain dmesg, seconds since boot
    return "dmesg" if shape == "dmesg_t" else shape


def _varlog_route(rel: str, source: str, host: str | None) -> str:
    if host is None or not rel.startswith("hosts/"):
        return rel
    name = _name(rel)
    if name == "dmesg.txt":
        name = "dmesg"
    return f"{host}/var/log/{name}"


# -- central-syslog: one file holding every host, BMC/inventory per host elsewhere ------------

def _central_shape(shape: str) -> str:
    # a central server writes every line with its host: dmesg -T hosts arrive as syslog
    return "rfc3164" if shape == "dmesg_t" else shape


def _central_route(rel: str, source: str, host: str | None) -> str:
    if host is None or not rel.startswith("hosts/"):
        return rel
    if source == "kernel":
        return "syslog/messages"
    return f"inventory/{host}/{_name(rel)}"


_RFC3339_HEAD = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?[+-]\d\d:\d\d) ")
_RFC3164_HEAD = re.compile(rb"^([A-Z][a-z]{2}) ([ \d]\d) (\d\d):(\d\d):(\d\d) ")
_MONTHS = {m.encode(): i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}


def _interleave_central(o: Any) -> None:
    """A central server writes lines as they arrive: the hosts' runs (appended host
    after host) are merged by time, each run keeping its order (dirt lines without a
    time stay after the line before them)."""
    rel = "syslog/messages"
    if rel not in o.written:
        return
    data = (o.corpus / rel).read_bytes()
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    starts = [*o.runs[rel], len(lines)]
    keyed: list[tuple[float, int, int]] = []
    for r in range(len(starts) - 1):
        year = o.start.year if o.start is not None else 2000
        last_month, key = 0, float("-inf")
        for i in range(starts[r], starts[r + 1]):
            got = _line_time(lines[i], year, last_month, o.zone)
            if got is not None:
                key, year, last_month = got
            keyed.append((key, r, i))
    keyed.sort()
    renumber = [0] * len(lines)
    for new, (_k, _r, i) in enumerate(keyed, 1):
        renumber[i] = new
    o.replace(rel, b"\n".join(lines[i] for _k, _r, i in keyed) + b"\n", renumber)


def _line_time(line: bytes, year: int, last_month: int, zone: Any
               ) -> tuple[float, int, int] | None:
    """(epoch seconds, year, month) of a line the simulator wrote in rfc3339 or rfc3164
    (whose year follows the run: a month that goes back starts the next year)."""
    m = _RFC3339_HEAD.match(line)
    if m:
        return dt.datetime.fromisoformat(m.group(1).decode()).timestamp(), year, last_month
    m = _RFC3164_HEAD.match(line)
    if not m:
        return None
    month = _MONTHS[m.group(1)]
    if last_month and month < last_month - 5:
        year += 1
    t = dt.datetime(year, month, int(m.group(2)), int(m.group(3)), int(m.group(4)),
                    int(m.group(5)), tzinfo=zone)
    return t.timestamp(), year, month


# -- rsyslog-tree: a central server's per-host files -------------------------------------------

def _rsyslog_shape(shape: str) -> str:
    # the dmesg -T hosts' forwarder leaves out the host field: the path says it
    return "rfc3164_nohost" if shape == "dmesg_t" else shape


def _rsyslog_route(rel: str, source: str, host: str | None) -> str:
    if host is None or not rel.startswith("hosts/"):
        return rel
    if source == "kernel":
        name = _name(rel)
        return f"rsyslog/{host}/{'kern.log' if name == 'dmesg.txt' else name}"
    return f"inventory/{host}/{_name(rel)}"


# -- journal-json: journalctl -o json per host -------------------------------------------------

def _journal_shape(_shape: str) -> str:
    return "journal_json"


def _journal_route(rel: str, source: str, host: str | None) -> str:
    if host is None or not rel.startswith("hosts/"):
        return rel
    if source == "kernel":
        return f"journal/{host}.json"
    return f"inventory/{host}/{_name(rel)}"


LAYOUTS: dict[str, Layout] = {
    layout.name: layout for layout in (
        Layout("canonical", "the layout of CORPUS.md: hosts/<host>/..., jobs/<id>/..."),
        Layout("varlog", "per-host /var/log trees: <host>/var/log/{kern.log*,dmesg,sel.txt,"
               "gpus.csv}; dmesg -T hosts write plain dmesg (seconds since boot)",
               _varlog_shape, _varlog_route),
        Layout("central-syslog", "every host's kernel log in one central syslog/messages, "
               "interleaved by time (host from the line); SEL and inventory under "
               "inventory/<host>/", _central_shape, _central_route, _interleave_central),
        Layout("rsyslog-tree", "a central rsyslog tree: rsyslog/<host>/kern.log* (the host "
               "from the path, a host the job records know; the dmesg -T hosts' lines carry "
               "no host field); SEL and inventory under inventory/<host>/",
               _rsyslog_shape, _rsyslog_route),
        Layout("journal-json", "journalctl -o json per host in journal/<host>.json; SEL and "
               "inventory under inventory/<host>/", _journal_shape, _journal_route),
    )
}


def get_layout(name: str) -> Layout:
    """The layout called ``name``; ValueError naming the known ones otherwise."""
    try:
        return LAYOUTS[name]
    except KeyError:
        raise ValueError(f"unknown layout {name!r}; known: {', '.join(LAYOUTS)}") from None
