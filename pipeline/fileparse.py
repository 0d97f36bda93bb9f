"""One file's bytes to its ``files``, ``events`` and ``rejects`` rows.

This is the unit of work the Beam transforms distribute: pure (bytes and settings in,
Arrow tables out), so it is tested without a runner and behaves the same on every one.
Reading the bytes is the caller's job.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import PurePosixPath

import pyarrow as pa

from faultline.pipeline.parsers import (
    hosts,
    inventory,
    joblog,
    kernel,
    sacct,
    sel,
    slurmctld,
    trainer,
)
from faultline.pipeline.records import FileParse, ParseContext, Reject
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.sniff import sniff
from faultline.pipeline.text import decode, split_lines
from faultline.schemas.tables import EVENTS, FILES, REJECTS

PARSERS = {
    "kernel": kernel.parse,
    "sel": sel.parse,
    "inventory": inventory.parse,
    "job": joblog.parse,
    "trainer": trainer.parse,
    "sacct": sacct.parse,
    "slurmctld": slurmctld.parse,
    "hosts": hosts.parse,
}
SNIFF_BYTES = 1 << 16
_RFC3164_HEAD = re.compile(r"^(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d{1,2}) ",
                           re.M)
_MONTHS = {m: i + 1 for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"))}


@dataclass
class ParsedFile:
    """What one file contributes: one ``files`` row and its events and rejects."""

    files: pa.Table
    events: pa.Table
    rejects: pa.Table


def context_from_path(path: str, tz: str) -> ParseContext:
    """Host and job id from the corpus layout: hosts/<host>/..., jobs/<id>/<host>.log."""
    parts = PurePosixPath(path).parts
    host = job_id = None
    if "jobs" in parts[:-1]:
        i = len(parts) - 1 - parts[::-1].index("jobs")
        if i + 1 < len(parts) - 1:
            job_id = parts[i + 1]
            stem = parts[-1].split(".")[0]
            if not stem.startswith("train"):
                host = stem
    elif "hosts" in parts[:-1]:
        i = len(parts) - 1 - parts[::-1].index("hosts")
        if i + 1 < len(parts) - 1:
            host = parts[i + 1]
    return ParseContext(path=path, host=host, job_id=job_id, tz=tz)


def gunzip(data: bytes) -> tuple[bytes, str | None]:
    """Decompress gzip data; a corrupt or truncated stream keeps what was readable."""
    try:
        return gzip.decompress(data), None
    except (OSError, EOFError, zlib.error):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out = d.decompress(data)
        except zlib.error:
            return b"", "corrupt gzip"
        return out, "truncated gzip"


def syslog_year(text: str, settings: IngestSettings, mtime: float | None) -> int | None:
    """The year of a file's first RFC 3164 line: --year, else the corpus window from the
    job records, else the file's modification time (a log's last write is its end)."""
    if settings.year is not None:
        return settings.year
    m = _RFC3164_HEAD.search(text[:SNIFF_BYTES])
    if not m:
        return None
    month, day = _MONTHS[m.group(1)], int(m.group(2))
    if settings.window is not None:
        return choose_year(month, day, *settings.window)
    if mtime is not None:
        end = dt.datetime.fromtimestamp(mtime, dt.UTC)
        return end.year if (month, day) <= (end.month, end.day) else end.year - 1
    return None


def choose_year(month: int, day: int, start_us: int, end_us: int) -> int:
    """The year that puts month/day inside (or nearest to) the corpus window."""
    start = dt.datetime.fromtimestamp(start_us / 1e6, dt.UTC)
    end = dt.datetime.fromtimestamp(end_us / 1e6, dt.UTC)
    best, best_gap = start.year, None
    for year in range(start.year - 1, end.year + 2):
        try:
            t = dt.datetime(year, month, min(day, 28 if month == 2 else day), tzinfo=dt.UTC)
        except ValueError:
            continue
        gap = max((start - t).total_seconds(), (t - end).total_seconds(), 0)
        if best_gap is None or gap < best_gap:
            best, best_gap = year, gap
    return best


def parse_file(path: str, data: bytes, settings: IngestSettings,
               mtime: float | None = None) -> ParsedFile:
    """Parse one file's bytes as stored (gzip or not) into Arrow tables."""
    sha = hashlib.sha256(data).hexdigest()
    compressed = data[:2] == b"\x1f\x8b"
    problem = None
    raw = data
    if compressed:
        raw, problem = gunzip(data)
    text = decode(raw)
    head = split_lines(text[:SNIFF_BYTES])
    source = sniff(head, path)
    ctx = context_from_path(path, settings.tz)
    if source == "kernel":
        ctx = ParseContext(path, ctx.host, ctx.job_id, ctx.tz,
                           syslog_year(text, settings, mtime))
    if source in PARSERS:
        fp = PARSERS[source](text, ctx)
    else:
        lines = split_lines(text)
        fp = FileParse(lines=len(lines), rejects=[
            Reject.of(i, "unrecognized file format", ln) for i, ln in enumerate(lines, 1)])
    _flag_clock_backwards(fp)
    files = {
        "path": path, "sha256": sha, "source": source, "lines": fp.lines,
        "routine_lines": fp.routine_lines, "event_lines": fp.event_lines,
        "reject_lines": fp.reject_lines, "duplicate_of": None, "bytes": len(data),
        "compressed": compressed, "host": ctx.host, "shape": fp.shape,
        "problem": problem,
    }
    return ParsedFile(
        files=pa.Table.from_pylist([files], schema=FILES.arrow_schema),
        events=_events_table(fp, path, sha, source),
        rejects=pa.Table.from_pydict({
            "path": [path] * len(fp.rejects),
            "line_no": [r.line_no for r in fp.rejects],
            "reason": [r.reason for r in fp.rejects],
            "raw": [r.raw for r in fp.rejects],
            "sha256": [sha] * len(fp.rejects),
        }, schema=REJECTS.arrow_schema),
    )


def _flag_clock_backwards(fp: FileParse) -> None:
    """A clock that goes backwards by more than a second is kept and flagged."""
    last = None
    for e in sorted(fp.events, key=lambda e: e.line_no):
        if e.ts is None or e.ts_quality == "inherited":
            continue
        if last is not None and e.ts < last - 1_000_000:
            e.attrs["clock_backwards_us"] = last - e.ts
        last = e.ts if last is None else max(last, e.ts)


def event_id(sha: str, line_no: int, ordinal: int) -> str:
    """Deterministic: the file's content hash, the line and the event's place on it."""
    return f"{sha[:20]}:{line_no}:{ordinal}"


def _events_table(fp: FileParse, path: str, sha: str, source: str) -> pa.Table:
    cols: dict[str, list] = {c: [] for c in EVENTS.column_names}
    ordinal: dict[int, int] = {}
    for e in fp.events:
        n = ordinal.get(e.line_no, 0)
        ordinal[e.line_no] = n + 1
        cols["event_id"].append(event_id(sha, e.line_no, n))
        cols["ts"].append(e.ts)
        cols["ts_quality"].append(e.ts_quality)
        cols["host"].append(e.host)
        cols["source"].append(source)
        cols["kind"].append(e.kind)
        cols["xid"].append(e.xid)
        cols["gpu_index"].append(None)
        cols["gpu_serial"].append(None)
        cols["device"].append(e.device)
        cols["job_id"].append(e.job_id)
        cols["message"].append(e.message)
        cols["path"].append(path)
        cols["line_no"].append(e.line_no)
        cols["line_end"].append(e.line_end)
        cols["sha256"].append(sha)
        cols["rank"].append(e.rank)
        cols["attrs"].append(json.dumps(e.attrs, sort_keys=True, default=str)
                             if e.attrs else None)
    return pa.Table.from_pydict(cols, schema=EVENTS.arrow_schema)
