"""The driver's half of :mod:`faultline.pipeline.resume`: which of the files a re-run
must read are grown files it may continue, and from which line.

Reads the database only; what it plans, the worker verifies (the prefix hash) and may
still turn down (a tail of another shape), reading the file whole instead.
"""

from __future__ import annotations

import os

import duckdb
import pyarrow as pa

from faultline.pipeline.resume import BACK, HORIZON, Resume


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
    con.register("plan_paths", pa.table({"path": pa.array(paths, pa.string()),
                                         "old": pa.array(rotated, pa.string())}))
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
    out = {}
    for path, stored, size, lines, source, shape, read_to, prefix in rows:
        try:
            now = sizes[path] if sizes is not None else os.stat(path).st_size  # noqa: PTH116
        except (OSError, KeyError):
            continue
        if now <= size and stored == path:  # not grown: truncated, replaced or touched
            continue
        if now < read_to:  # a rotated file shorter than what its old name held
            continue
        n = lines - (1 if size > read_to else 0)  # complete lines before read_to
        restart = _restart(con, stored, n)
        out[path] = Resume(read_to=read_to, prefix_sha256=prefix, lines=n,
                           restart=restart, window=_window(con, stored, restart),
                           source=source, shape=shape,
                           prior_max_ts=_prior_max(con, stored, restart),
                           from_path=None if stored == path else stored)
    return out


def _min_start(con: duckdb.DuckDBPyConnection, path: str, end_from: int, before: int
               ) -> int | None:
    """The first line of the stored events of ``path`` that end at or after line
    ``end_from`` and start before line ``before``."""
    (m,), = con.execute("SELECT min(line_no) FROM events WHERE path = ? AND line_end >= ? "
                        "AND line_no < ?", [path, end_from, before]).fetchall()
    return m


def _restart(con: duckdb.DuckDBPyConnection, path: str, n: int) -> int:
    """The line from which the stored rows are replaced: the old end (line n + 1, a
    trailing partial line is read again), or the start of the first stored event
    ending within HORIZON lines of it, then of any event spanning into that line."""
    r = n + 1
    m = _min_start(con, path, max(1, n + 1 - HORIZON), r + 1)
    r = min(r, m) if m is not None else r
    while (m := _min_start(con, path, r, r)) is not None:
        r = m
    return r


def _window(con: duckdb.DuckDBPyConnection, path: str, restart: int) -> int:
    """BACK lines before ``restart``, and before any stored event spanning into them."""
    w = max(1, restart - BACK)
    while (m := _min_start(con, path, w, w)) is not None:
        w = m
    return w


def _prior_max(con: duckdb.DuckDBPyConnection, path: str, restart: int) -> int | None:
    """The largest time of an event before ``restart`` that the clock-backwards check
    counts (timed at parse time, not inherited)."""
    (m,), = con.execute("""
        SELECT max(epoch_us(ts)) FROM events
        WHERE path = ? AND line_no < ? AND ts IS NOT NULL AND ts_quality <> 'inherited'
          AND attrs->>'boot_seq' IS NULL
    """, [path, restart]).fetchall()
    return m
