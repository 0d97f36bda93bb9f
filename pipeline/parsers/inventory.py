"""GPU inventory (``nvidia-smi --query-gpu=... --format=csv``) to events.

::

    index, pci.bus_id, uuid, serial
    0, 00000000:18:00.0, GPU-1f0a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8, 1650123456789

Columns are found by the header (any order, extra columns allowed, spaces after
commas, unit suffixes such as ``memory.total [MiB]`` ignored); ``pci.bus_id`` is
required, the others may be missing. A file without a header (``--format=csv,noheader``)
is read in the order ``index, pci.bus_id, uuid, serial`` when its rows look like that.
Each row gives one ``gpu_inventory`` event (untimed; ``device`` is the normalized PCI
address; attrs ``index``, ``pci``, ``uuid``, ``serial``; ``[N/A]`` becomes None).
:func:`gpu_map` turns the events into the lookup that ties Xid lines to GPUs.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable

from faultline.pipeline.pci import normalize_pci
from faultline.pipeline.records import INT32_MAX, FileParse, ParseContext, ParsedEvent, Reject
from faultline.pipeline.text import split_lines

# Header names (nvidia-smi --query-gpu and --query-compute-apps spellings) -> field.
COLUMN_ALIASES: dict[str, str] = {
    "index": "index",
    "gpu_index": "index",
    "pci.bus_id": "pci",
    "gpu_bus_id": "pci",
    "bus_id": "pci",
    "pci.bus": "pci",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
    "serial": "serial",
    "gpu_serial": "serial",
}
DEFAULT_ORDER = ("index", "pci", "uuid", "serial")
_NA = frozenset({"", "n/a", "[n/a]", "[not supported]", "not supported", "none"})
_UNIT = re.compile(r"\s*\[[^\]]*\]$")


def _value(raw: str) -> str | None:
    raw = raw.strip()
    return None if raw.lower() in _NA else raw


def read_header(cells: list[str]) -> dict[str, int] | None:
    """Field -> column position, or None when ``cells`` is not an inventory header."""
    cols: dict[str, int] = {}
    for pos, cell in enumerate(cells):
        name = COLUMN_ALIASES.get(_UNIT.sub("", cell.strip().lower()))
        if name is not None and name not in cols:
            cols[name] = pos
    return cols if "pci" in cols else None


def parse_row(
    cells: list[str], cols: dict[str, int], line_no: int, ctx: ParseContext, raw: str
) -> ParsedEvent | Reject:
    """One data row, read with the header's column positions."""
    if len(cells) <= max(cols.values()):
        return Reject.of(line_no, "short inventory row", raw)
    got = {name: _value(cells[pos]) for name, pos in cols.items()}
    pci = normalize_pci(got.get("pci"))
    index = got.get("index")
    # isdecimal, not isdigit ("²" is a digit int() cannot read); the index goes to the
    # 32-bit gpu_index column
    if pci is None or (index is not None and not (index.isdecimal()
                                                  and int(index) <= INT32_MAX)):
        return Reject.of(line_no, "bad inventory row", raw)
    attrs = {
        "index": int(index) if index is not None else None,
        "pci": pci,
        "uuid": got.get("uuid"),
        "serial": got.get("serial"),
    }
    return ParsedEvent(
        line_no=line_no,
        kind="gpu_inventory",
        message=raw.strip(),
        host=ctx.host,
        device=pci,
        job_id=ctx.job_id,
        attrs=attrs,
    )


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse an nvidia-smi CSV inventory."""
    lines = split_lines(text)
    out = FileParse(len(lines), shape="nvidia_smi_csv")
    cols: dict[str, int] | None = None
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            cells = next(csv.reader([line], skipinitialspace=True))
        except csv.Error:
            out.rejects.append(Reject.of(line_no, "bad inventory row", line))
            continue
        header = read_header(cells)
        if header is not None:  # a header row is routine (a concatenated dump repeats it)
            cols = header
            continue
        if cols is None:
            cols = dict(zip(DEFAULT_ORDER, range(len(DEFAULT_ORDER)), strict=True))
        got = parse_row(cells, cols, line_no, ctx, line)
        (out.events if isinstance(got, ParsedEvent) else out.rejects).append(got)
    return out


def gpu_map(events: Iterable[ParsedEvent]) -> dict[str, tuple[int | None, str | None, str | None]]:
    """``{normalized_pci: (index, serial, uuid)}`` from gpu_inventory events.

    A later row for the same address wins (a re-run of nvidia-smi after a swap).
    """
    out: dict[str, tuple[int | None, str | None, str | None]] = {}
    for e in events:
        if e.kind != "gpu_inventory" or not e.device:
            continue
        out[e.device] = (e.attrs.get("index"), e.attrs.get("serial"), e.attrs.get("uuid"))
    return out
