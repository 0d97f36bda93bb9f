"""The driver's half of :mod:`faultline.pipeline.resume`: which of the files a re-run
must read are grown files it may continue, and from which line.

Reads the database only; what it plans, the worker verifies (the prefix hash) and may
still turn down (a tail of another shape), reading the file whole instead.
"""

from __future__ import annotations

import os

import duckdb

from faultline.pipeline.resume import BACK, HORIZON, Resume
from faultline.schemas import arrowrows
from faultline.schemas.types import LogicalType


def plan(con: duckdb.DuckDBPyConnection, paths: list[str], fingerprint: str,
         sizes: dict[str, int] | None = None) -> dict[str, Resume]:
    """``{path: Resume}`` for the paths (to be read this run) stored with a
    ``file_offsets`` row, parsed with ``fingerprint``, and larger now than then
    (``sizes``: the current sizes, else each candidate is stat-ed); and for a new
    ``<name>.1`` whose ``<name>`` is stored so: a rotation, continued from the rows of
    the old name if the worker finds them at its start (the prefix hash)."""
    if not paths:
        return {}
    # each path, and the name a rotated new path had before (kern.log.1: kern.log)
    rotated = [p[:-2] if p.endswith(".1") else None for p in paths]
    con.register("plan_paths", arrowrows.table({"path": (paths, LogicalType.STRING),
                                                "old": (rotated, LogicalType.STRING)}))
    try:
        rows = con.execute("""
            SELECT p.path, f.path, f.bytes, f.lines, f.source, f.shape, o.read_to,
                   o.prefix_sha256
            FROM plan_paths p
            JOIN files f ON f.path = p.path
                OR (f.path = p.old AND p.path NOT IN (SELECT path FROM files))
            JOIN file_offsets o ON o.path = f.path
            WHERE f.parsed_with = ? AND f.problem IS NULL AND f.duplicate_of IS NULL
              AND NOT f.compressed
              AND NOT EXISTS (SELECT 1 FROM files d WHERE d.duplicate_of = f.path)
        """, [fingerprint]).fetchall()
    finally:
        con.unregister("plan_paths")
    grown = []
    for path, stored, size, lines, source, shape, read_to, prefix in rows:
        try:
            now = sizes[path] if sizes is not None else os.stat(path).st_size  # noqa: PTH116
        except (OSError, KeyError):
            continue
        if now <= size and stored == path:  # not grown: truncated, replaced or touched
            continue
        if now < read_to:  # a rotated file shorter than what its old name held
            continue
        grown.append((path, stored, size, lines, source, shape, read_to, prefix))
    events = _events(con, sorted({g[1] for g in grown}))
    out = {}
    for path, stored, size, lines, source, shape, read_to, prefix in grown:
        n = lines - (1 if size > read_to else 0)  # complete lines before read_to
        evs = events.get(stored, [])
        restart = _restart(evs, n)
        out[path] = Resume(read_to=read_to, prefix_sha256=prefix, lines=n,
                           restart=restart, window=_window(evs, restart),
                           source=source, shape=shape,
                           prior_max_ts=max((t for ln, _e, t in evs
                                             if ln < restart and t is not None),
                                            default=None),
                           from_path=None if stored == path else stored)
    return out


Spans = list[tuple[int, int, int | None]]  # (line_no, line_end, ts the flag counts)


def _events(con: duckdb.DuckDBPyConnection, paths: list[str]) -> dict[str, Spans]:
    """The stored events of ``paths`` (one query): their lines, and their time where
    the clock-backwards check counts it (timed at parse time, not inherited)."""
    if not paths:
        return {}
    con.register("plan_events", arrowrows.table({"path": (paths, LogicalType.STRING)}))
    try:
        rows = con.execute("""
            SELECT e.path, e.line_no, e.line_end,
                   CASE WHEN e.ts IS NOT NULL AND e.ts_quality <> 'inherited'
                             AND e.attrs->>'boot_seq' IS NULL THEN epoch_us(e.ts) END
            FROM events e JOIN plan_events p USING (path)
        """).fetchall()
    finally:
        con.unregister("plan_events")
    out: dict[str, Spans] = {}
    for path, line_no, line_end, ts in rows:
        out.setdefault(path, []).append((line_no, line_end, ts))
    return out


def _min_start(evs: Spans, end_from: int, before: int) -> int | None:
    """The first line of the events that end at or after line ``end_from`` and start
    before line ``before``."""
    return min((ln for ln, end, _t in evs if end >= end_from and ln < before), default=None)


def _restart(evs: Spans, n: int) -> int:
    """The line from which the stored rows are replaced: the old end (line n + 1, a
    trailing partial line is read again), or the start of the first stored event
    ending within HORIZON lines of it, then of any event spanning into that line."""
    r = n + 1
    m = _min_start(evs, max(1, n + 1 - HORIZON), r + 1)
    r = min(r, m) if m is not None else r
    while (m := _min_start(evs, r, r)) is not None:
        r = m
    return r


def _window(evs: Spans, restart: int) -> int:
    """BACK lines before ``restart``, and before any stored event spanning into them."""
    w = max(1, restart - BACK)
    while (m := _min_start(evs, w, w)) is not None:
        w = m
    return w
