"""``nvidia-smi -q`` output: the GPU's own memory-health counters, per board.

What an operator collects from a broken node: the per-GPU report NVIDIA documents in
"NVIDIA GPU memory error management" (https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/)
and the driver prints as indented ``Name : value`` lines under one ``GPU <bus id>``
header per board, with sections (``Remapped Rows``, ``Retired Pages``, ``ECC Errors`` >
``Volatile``...) given by indentation. Layout as in leptonai/gpud's captures
(``pkg/nvidia-query/testdata/nvidia-smi-query.535.154.05.out.1.valid``, Apache-2.0) and
its row-remapping component (https://github.com/leptonai/gpud/pull/80).

Events (one per GPU and finding, over the lines of its section; everything else is
routine): each board's identity as ``gpu_inventory`` (index = the board's order in the
report, which is nvidia-smi's index order), and strong HBM/SRAM evidence:
``gpu_row_remap_failure`` (a row could not be remapped: the board is out of spare rows),
``gpu_row_remap_pending`` (remaps waiting for a GPU reset), ``gpu_ecc_uncorrectable``
(volatile uncorrectable DRAM or SRAM errors since the driver loaded) and
``gpu_retired_pages`` (double-bit retired pages or a pending page blacklist: the
pre-Ampere form of the same evidence). A report is a snapshot: its events carry the
report's ``Timestamp`` (zone-less, so in ``--tz``) or, without one, no time.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from faultline.pipeline.pci import normalize_pci
from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent
from faultline.pipeline.text import split_lines

MARKER = "==============NVSMI LOG=============="
_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_FIELD = re.compile(r"^( *)([^:]*?)\s*(?::\s*(.*?))?\s*$")
_NUMBER = re.compile(r"^\d+$")


def looks_like_nvsmi(lines: list[str]) -> bool:
    """The report's banner, or its ``Attached GPUs`` line followed by a GPU block."""
    head = [ln.strip() for ln in lines[:12]]
    return MARKER in head or (any(h.startswith("Attached GPUs") for h in head)
                              and any(_GPU.match(h) for h in head))


@dataclass
class _Board:
    """One ``GPU <bus id>`` block: its fields by section path, and their lines."""

    pci: str
    line_no: int
    fields: dict[tuple[str, ...], tuple[str, int]] = field(default_factory=dict)
    end: int = 0

    def get(self, *path: str) -> str | None:
        hit = self.fields.get(tuple(p.lower() for p in path))
        return hit[0] if hit else None

    def lines_of(self, *prefix: str) -> tuple[int, int]:
        key = tuple(p.lower() for p in prefix)
        nos = [n for k, (_v, n) in self.fields.items() if k[:len(key)] == key]
        return (min(nos), max(nos)) if nos else (self.line_no, self.line_no)


def _timestamp(value: str, ctx: ParseContext) -> int | None:
    try:  # "Mon Jul  8 08:11:21 2024", the C locale's ctime() form
        t = dt.datetime.strptime(" ".join(value.split()), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None
    return round(t.replace(tzinfo=ctx.zone).timestamp() * 1_000_000)


def _count(value: str | None) -> int:
    return int(value) if value and _NUMBER.match(value) else 0


def _boards(lines: list[str], first_line: int) -> tuple[list[_Board], dict[str, str]]:
    """The GPU blocks, and the report's top-level fields (Timestamp, Driver Version)."""
    boards: list[_Board] = []
    top: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (indent, section name) of the open sections
    for i, line in enumerate(lines, first_line):
        if not line.strip():
            continue
        m = _GPU.match(line)
        if m:
            boards.append(_Board(normalize_pci(m.group(1)) or m.group(1).lower(), i))
            stack = []
            continue
        f = _FIELD.match(line)
        if f is None:
            continue
        indent, name, value = len(f.group(1)), f.group(2).lower(), f.group(3)
        if not boards:
            if value is not None:
                top[name] = value
            continue
        board = boards[-1]
        board.end = i
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if value is None:  # a section header: its fields follow, indented deeper
            stack.append((indent, name))
            continue
        board.fields[(*(s for _i, s in stack), name)] = (value, i)
    return boards, top


def findings(board: _Board) -> list[tuple[str, str, tuple[int, int], dict]]:
    """What one board's counters say is wrong: (kind, what, lines, attrs)."""
    out = []
    unc = _count(board.get("remapped rows", "uncorrectable error"))
    failed = (board.get("remapped rows", "remapping failure occurred") or "").lower() == "yes"
    pending = (board.get("remapped rows", "pending") or "").lower() == "yes"
    rows = board.lines_of("remapped rows")
    if failed:
        out.append(("gpu_row_remap_failure", "row remapping failure occurred", rows,
                    {"uncorrectable_rows": unc, "pending": pending}))
    elif pending:
        out.append(("gpu_row_remap_pending", "row remapping pending (needs a GPU reset)",
                    rows, {"uncorrectable_rows": unc}))
    dram = _count(board.get("ecc errors", "volatile", "dram uncorrectable")) or _count(
        board.get("ecc errors", "volatile", "double bit", "device memory"))
    sram = _count(board.get("ecc errors", "volatile", "sram uncorrectable"))
    if dram or sram:
        what = " and ".join(n for n, c in (("DRAM", dram), ("SRAM", sram)) if c)
        out.append(("gpu_ecc_uncorrectable", f"volatile uncorrectable {what} ECC errors",
                    board.lines_of("ecc errors", "volatile"), {"dram": dram, "sram": sram}))
    dbe = _count(board.get("retired pages", "double bit ecc"))
    blacklist = "yes" in ((board.get("retired pages", "pending page blacklist") or "")
                          + (board.get("retired pages", "pending") or "")).lower()
    if dbe or blacklist:
        out.append(("gpu_retired_pages", "double-bit ECC pages retired" if dbe
                    else "page retirement pending", board.lines_of("retired pages"),
                    {"dbe_pages": dbe, "pending": blacklist}))
    return out


def parse(text: str, ctx: ParseContext, first_line: int = 1) -> FileParse:
    """Parse an ``nvidia-smi -q`` report (``first_line``: where it starts, when it is a
    section of a larger file such as an nvidia-bug-report)."""
    lines = split_lines(text)
    boards, top = _boards(lines, first_line)
    ts = _timestamp(top.get("timestamp", ""), ctx)
    quality = "assumed_tz" if ts is not None else "untimed"
    events: list[ParsedEvent] = []
    for index, b in enumerate(boards):
        serial = b.get("serial number")
        uuid = b.get("gpu uuid")
        events.append(ParsedEvent(
            b.line_no, "gpu_inventory", f"GPU {b.pci} index {index}", ts=ts,
            ts_quality=quality, host=ctx.host, device=b.pci,
            attrs={"index": index, "pci": b.pci, "uuid": None if uuid in (None, "N/A")
                   else uuid, "serial": None if serial in (None, "N/A") else serial}))
        for kind, what, (lo, hi), attrs in findings(b):
            events.append(ParsedEvent(
                lo, kind, f"nvidia-smi: GPU {b.pci}: {what}: "
                + "; ".join(ln.strip() for ln in lines[lo - first_line:hi - first_line + 1]),
                ts=ts, ts_quality=quality, host=ctx.host, line_end=hi, device=b.pci,
                attrs={**attrs, "index": index}))
    return FileParse(len(lines), events=events, shape="nvidia-smi-q")
