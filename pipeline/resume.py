"""Re-runs that read only what is new: a grown log file parsed from where the last run
stopped, with the same rows a full read of the final file gives.

A plain (uncompressed, not archived) kernel log of a self-timed line shape (``rfc3339``,
``iso``, ``rfc3164``) or a collector-stamped job log with its host in the path gets a
``file_offsets`` row: the byte offset just after its last complete line (``read_to``;
a trailing line without newline is parsed, but read again next time) and the SHA-256
of the bytes before it. A re-run that finds such a file larger than ``read_to`` plans
a :class:`Resume` (driver, :func:`plan`), and the worker (:func:`prepare`) checks the
prefix hash and parses only the lines from a *window* near the old end onwards.

Why the rows equal a full read's (``docs/reruns.md`` says the same for users):

- Stored rows are kept only for lines before a *restart* line ``R``: every stored
  event whose last line lies within :data:`HORIZON` lines of the old end (or whose
  span reaches ``R``) starts at or after ``R``, and so do its rows. An event ending
  earlier was closed by lines the file already had: a traceback stops at a foreign
  run of ``FOREIGN_RUN_LIMIT`` lines or at its next own line, a kernel report stops
  absorbing at the first line that does not continue it; neither looks further
  ahead than :data:`HORIZON` lines.
- The parser starts at a window line ``W <= R`` (:data:`BACK` lines before ``R``,
  before any stored event that spans into them, and for a job log at a stamped
  line): what the parsers look back for (the stamp a line inherits, torchrun's
  failure summary five lines up) lies inside it. Events and rejects before ``R`` that
  the window parse finds again are dropped.
- File-wide state is re-derived, not carried: the source is sniffed from the head as
  a full read does; a job log's clock is the window's first stamp; a kernel log's
  rfc3164 year is computed for the window's first line from the months of every line
  before it (one vectorized pass, the same rule as :mod:`...parsers.kernel`); the
  largest time before ``R`` (the clock-backwards flag) comes from the stored events.
- Only tails of one shape are resumed: every window and new line of a kernel log is
  of the file's shape (or blank; a last line without newline may also be of no shape
  at all: a line still being written), so the shape the file's head decided, the boot
  segments and the inherited times are those of a full read; a job log must have
  collector stamps and a host from its path (no per-rank host map from the whole
  file) and its window must start at a stamped line.

Anything else (a gzip file, an archive member, a changed prefix, a shorter file, a
cut line, a tail of another shape) is read whole again, as before.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl

from faultline.pipeline.parsers import joblog, jobout, kernel_shapes
from faultline.pipeline.text import decode, split_lines
from faultline.pipeline.timeutil import in_range, parse_iso

# source -> the stored shapes a re-run can continue
RESUMABLE: dict[str, frozenset[str]] = {
    "kernel": frozenset({"rfc3339", "iso", "rfc3164"}),
    "job": frozenset({"collector"}),
}
# Lines after an event's last line that a parser may look at to decide where it ends
# (joblog.FOREIGN_RUN_LIMIT, plus the line that ends it and some slack).
HORIZON = joblog.FOREIGN_RUN_LIMIT + 8
# Lines before the restart line that the window adds (the parsers look back at most
# five: torchrun's failure summary).
BACK = 8
# Lines a job log's window may go further back to start at a stamped line.
STAMP_SEARCH = 4096


@dataclass(frozen=True)
class Resume:
    """What the driver knows of a grown file from the database (one listing entry)."""

    read_to: int  # bytes [0, read_to) were read up to their last line end
    prefix_sha256: str
    lines: int  # complete lines in [0, read_to)
    restart: int  # 1-based: stored rows of lines >= restart are replaced
    window: int  # 1-based line the parse starts at (<= restart)
    source: str
    shape: str
    prior_max_ts: int | None  # largest non-inherited event time before ``restart``
    # a rotated file (kern.log.1) continuing the rows stored for its old name (kern.log)
    from_path: str | None = None

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, d: dict) -> Resume:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def offsets(data: bytes) -> tuple[int, str, str]:
    """``(read_to, sha256 of data[:read_to], sha256 of data)`` in one pass."""
    read_to = data.rfind(b"\n") + 1
    h = hashlib.sha256(memoryview(data)[:read_to])
    prefix = h.hexdigest()
    h.update(memoryview(data)[read_to:])
    return read_to, prefix, h.hexdigest()


def keeps_offset(source: str, shape: str | None, compressed: bool, path: str,
                 problem: str | None, host: str | None) -> bool:
    """Whether a parsed file gets a ``file_offsets`` row (a re-run may continue it)."""
    from faultline.pipeline.bundles import SEP

    if compressed or problem is not None or SEP in path or shape is None:
        return False
    if shape not in RESUMABLE.get(source, ()):
        return False
    return source != "job" or host is not None


def _shape_re(shape: str) -> str:
    """A line of ``shape``, or a blank one, as one polars/Rust pattern."""
    for name, head, _tail, check in kernel_shapes.SHAPES:
        if name == shape:
            body = re.sub(r"\(\?P<\w+>", "(?:", head + check)
            return rf"(?:{body})|^[ \t\f\v]*$"
    raise ValueError(shape)


@dataclass(frozen=True)
class Tail:
    """A grown file's window, ready for its parser (``lines`` start at ``first``)."""

    first: int  # 1-based line number of lines[0]
    lines: list[str]
    year: int | None  # rfc3164: the year of the window's first rfc3164 line
    total_lines: int  # lines of the whole file (a last partial line counts)


def _window_start(data: bytes, read_to: int, lines: int, window: int) -> int | None:
    """Byte offset of 1-based line ``window``, walking back from ``read_to`` (the
    start of line ``lines + 1``); None if the file has fewer lines than stored."""
    pos = read_to
    for _ in range(lines + 1 - window):
        if pos == 0:
            return None
        pos = data.rfind(b"\n", 0, pos - 1) + 1
    return pos


def tail(data: bytes, r: Resume, year: int | None, zone: ZoneInfo) -> Tail | None:
    """The window of a grown file, or None when it must be read whole: its prefix
    changed, it is not larger, or its window or new lines are not of its shape.
    ``year`` is the year a full read gives the file's first rfc3164 line."""
    from faultline.pipeline.inflate import cap_lines

    if len(data) < r.read_to or data[:2] == b"\x1f\x8b":
        return None
    if hashlib.sha256(memoryview(data)[:r.read_to]).hexdigest() != r.prefix_sha256:
        return None
    start = _window_start(data, r.read_to, r.lines, r.window)
    if start is None:
        return None
    first = r.window
    if r.source == "job":  # the window starts at a stamped line: the clock's state
        for _ in range(STAMP_SEARCH):
            nl = data.find(b"\n", start)
            if _stamp_ok(decode(data[start:nl if nl >= 0 else len(data)]), zone):
                break
            if start == 0:
                return None
            start, first = data.rfind(b"\n", 0, start - 1) + 1, first - 1
        else:
            return None
    body, cut = cap_lines(data[start:])
    if cut:  # a line over the limit: the file gets a problem, read whole
        return None
    lines = split_lines(decode(body))
    t_year = None
    if r.source == "kernel":
        col = pl.Series(lines, dtype=pl.String)
        ok = col.str.contains(_shape_re(r.shape))
        if not body.endswith(b"\n") and len(lines) > 1:
            # a line still being written: read like any line (a reject, or an event
            # timed from the lines above) unless it has another shape of its own
            ok[-1] = ok[-1] or not col[-1:].str.contains(kernel_shapes.SHAPE_PATTERN)[0]
        if not ok.all():
            return None
        if r.shape == "rfc3164":
            if year is None:
                return None
            t_year = _year_at(data[:start], lines, year)
    return Tail(first, lines, t_year, first - 1 + len(lines))


def _stamp_ok(line: str, zone: ZoneInfo) -> bool:
    """Whether a job log line carries a collector stamp its clock reads."""
    if not jobout.COLLECTOR_RE.match(line):
        return False
    text = joblog.STAMP_RE.match(line)
    got = parse_iso(text.group(1), zone) if text else None
    return got is not None and in_range(got[0])


_MON_RE = re.compile(kernel_shapes._RFC3164_MON)


def _year_at(before: bytes, window: list[str], year: int) -> int | None:
    """The year a full read gives the window's first rfc3164 line: ``year`` (that of
    the file's first rfc3164 line) moved by every rollover of the months up to it, as
    :mod:`...parsers.kernel` counts them (a month back by six or more is the next
    year, forward by six or more the previous). None: the window has none."""
    first = next((MONTHS[m.group(1)] for ln in window if (m := _MON_RE.search(ln))), None)
    if first is None:
        return year
    months = (pl.Series(split_lines(decode(before)), dtype=pl.String)
              .str.extract(kernel_shapes._RFC3164_MON, 1)
              .replace_strict(MONTHS, default=0, return_dtype=pl.Int32)
              .to_numpy())
    nums = np.append(months[months > 0], first).astype(np.int32)
    d = np.diff(nums, prepend=nums[:1])
    return year + int(np.sum(d <= -6) - np.sum(d >= 6))


MONTHS = kernel_shapes.MONTHS


def shift(events: list, rejects: list, first: int, restart: int
          ) -> tuple[list, list]:
    """The window parse's events and rejects at their line numbers in the file, those
    before ``restart`` dropped (the stored rows keep them)."""
    from dataclasses import replace

    d = first - 1
    evs = []
    for e in events:
        if e.line_no + d < restart:
            continue
        e.line_no += d
        e.line_end = (e.line_end or 0) + d
        evs.append(e)
    rjs = [replace(x, line_no=x.line_no + d) for x in rejects if x.line_no + d >= restart]
    return evs, rjs


def shift_columns(columns: pl.DataFrame | None, first: int, restart: int
                  ) -> pl.DataFrame | None:
    """:func:`shift` of the events a parse kept as columns (``FileParse.columns``: one
    line each, so ``line_end`` is ``line_no``); None when none is left."""
    if columns is None:
        return None
    out = columns.with_columns(pl.col("line_no") + (first - 1)).filter(
        pl.col("line_no") >= restart)
    return out if out.height else None
