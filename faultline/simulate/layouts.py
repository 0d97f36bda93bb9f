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

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath


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
        Layout("central-syslog", "every host's kernel log in one central syslog/messages "
               "(host from the line); SEL and inventory under inventory/<host>/",
               _central_shape, _central_route),
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
