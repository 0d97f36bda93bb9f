"""What a re-run with nothing new may skip, and how it knows (``ingest_state``).

Two things are kept from the last run, in one row:

- ``inputs``: a digest of the options (``--tz``, ``--year``, site rules, path and JSON
  field options, faultline's version and parser code) and of every path it found
  (and every path it passed over, with the reason). A re-run that finds the same
  digest, and every file stored with the same size and mtime under the parse
  settings that run decided (``parsed_with``), has nothing to parse; the zone
  inference and the job-record pre-pass, which read the same unchanged files, would
  decide what they decided then, so they are not run again (their note is kept).
- ``rebuild``: what the root causes were last built from besides the events: the code
  and data that decide them (classifiers, their shipped weights, the taxonomy, the
  schemas), the operator's overrides, ``--run`` and the parse settings. A re-run that
  parsed nothing (the events are those of the last committed run, whose rebuild ran
  in the same transaction) and finds the same leaves the interruptions as they are,
  which is what rebuilding them would give.

Skewed clocks (``skewed_clocks``): the hosts whose clock ``ingest`` warns about, kept
by each run that rebuilt the root causes. They are read from every job-log event
(``host_clock_offsets``: 0.45-0.6 s on ``llama3``'s 17M events, an eighth of a re-run
with nothing new), and a run that parsed nothing and skipped the rebuild has the same
events and attempts, so it warns from the rows kept.

Sealed directories (``sealed_dirs``): a ``jobs/<id>/`` directory of a job that
ended, by sacct, more than :data:`SEAL_AFTER_US` before the newest job record is
taken to be written no more. A re-run with the same inputs stats such a directory
(one call) instead of each of its files, and takes its files as unchanged while the
directory's mtime is (no file added, removed or renamed in it). The limit, stated in
``docs/reruns.md`` and in the summary (``N files of finished jobs not re-checked``):
a file appended in such a directory is noticed by the next run that has anything new
(any new, removed or changed path makes the inputs differ, and then every file is
stat-ed), not by a re-run with nothing else new. Every other file is stat-ed on
every run, and a file rewritten with the same size and mtime is taken as unchanged,
as every re-run always has (``tests/test_reruns.py``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

import duckdb

from faultline import __version__


@functools.cache
def _code_hash() -> str:
    """A hash of the sources and data files of the classifiers and schemas packages
    and of :mod:`faultline.runs` (the weights and taxonomy files included)."""
    import faultline.classifiers as classifiers
    import faultline.runs as runs
    import faultline.schemas as schemas

    h = hashlib.sha256()
    for pkg in (classifiers, schemas):
        root = Path(pkg.__file__).parent
        for path in sorted(p for p in root.rglob("*") if p.is_file()
                           and "__pycache__" not in p.parts):
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
    h.update(Path(runs.__file__).read_bytes())
    return h.hexdigest()[:16]


def inputs(options: tuple, paths: list[str], skipped: list[tuple[str, str]]) -> str:
    """The digest of a run's options and of the paths it found and passed over."""
    from faultline.pipeline.settings import _code_hash as parser_hash

    h = hashlib.sha256(repr((__version__, parser_hash(), options)).encode())
    for p in paths:
        h.update(p.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    h.update(b"\1")
    for p, why in sorted(skipped):
        h.update(f"{p}\0{why}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def options(corpus: list[Path | str], tz: str | None, year: int | None, rules: tuple[str, ...],
             host_from_path: str | None, json_fields: tuple[tuple[str, str], ...]
             ) -> tuple:
    """The options a run's parse settings derive from, site rules by their content
    (a rules file that cannot be read gives a key no run stored: IngestSettings then
    says what is wrong with it)."""
    texts = []
    for r in rules:
        try:
            texts.append(hashlib.sha256(Path(r).read_bytes()).hexdigest())
        except OSError:
            texts.append(f"unreadable {r}")
    roots = tuple(c if isinstance(c, str) else str(c.resolve()) for c in corpus)  # URIs as given
    return (roots, tz, year, tuple(texts), host_from_path, json_fields)


def stored_count(con: duckdb.DuckDBPyConnection, run: str | None) -> int:
    """The interruptions stored (of ``run``): those a rebuild with nothing new builds."""
    if run is None:
        return con.execute("SELECT count(*) FROM interruptions").fetchall()[0][0]
    return con.execute("SELECT count(*) FROM interruptions WHERE run = ?",
                       [run]).fetchall()[0][0]


def stored(con: duckdb.DuckDBPyConnection, key: str
           ) -> tuple[str, str, str | None] | None:
    """``(parsed_with, zone_note, zone_warning)`` of the last run if it had these
    inputs, else None."""
    rows = con.execute("SELECT parsed_with, zone_note, zone_warning FROM ingest_state "
                       "WHERE inputs = ?", [key]).fetchall()
    return rows[0] if rows else None


def rebuild_fingerprint(con: duckdb.DuckDBPyConnection, parsed_with: str,
                        run: str | None) -> str:
    """What the next rebuild would be decided by, besides the events."""
    (overrides,), = con.execute(
        "SELECT md5(coalesce(string_agg(CAST(o AS VARCHAR), chr(10) "
        "ORDER BY o.interruption_id), '')) FROM overrides o").fetchall()
    return (f"faultline {__version__}+{_code_hash()}; run={run or '-'}; "
            f"overrides={overrides[:16]}; parse: {parsed_with}")


def rebuild_unchanged(con: duckdb.DuckDBPyConnection, fp: str) -> bool:
    """Whether the stored interruptions were built with ``fp``."""
    return con.execute("SELECT count(*) FROM ingest_state WHERE rebuild = ?",
                       [fp]).fetchall()[0][0] == 1


def record(con: duckdb.DuckDBPyConnection, key: str, parsed_with: str, zone_note: str,
           zone_warning: str | None, rebuild: str) -> None:
    con.execute("DELETE FROM ingest_state")
    con.execute("INSERT INTO ingest_state VALUES (?, ?, ?, ?, ?)",
                [key, parsed_with, zone_note, zone_warning, rebuild])


# A host whose job logs start this much earlier or later than the other hosts' (median
# over at least SKEW_MIN_JOBS jobs) has a clock of its own; its events may fall outside
# the windows their interruptions are built from. Start-up varies by seconds.
SKEW_WARN_S = 300
SKEW_MIN_JOBS = 3


def keep_skewed_clocks(con: duckdb.DuckDBPyConnection) -> None:
    """Replace ``skewed_clocks`` with the hosts ``host_clock_offsets`` finds skewed now
    (after a rebuild: the events and attempts are final)."""
    con.execute("DELETE FROM skewed_clocks")
    con.execute("INSERT INTO skewed_clocks SELECT host, skew_seconds, jobs "
                "FROM host_clock_offsets WHERE abs(skew_seconds) > ? AND jobs >= ?",
                [SKEW_WARN_S, SKEW_MIN_JOBS])


def skewed_clocks(con: duckdb.DuckDBPyConnection) -> list[tuple[str, float, int]]:
    """``(host, skew_seconds, jobs)`` of the hosts to warn about, the most skewed first."""
    return con.execute("SELECT host, skew_seconds, jobs FROM skewed_clocks "
                       "ORDER BY abs(skew_seconds) DESC, host").fetchall()


SEAL_AFTER_US = 24 * 3600 * 1_000_000
_JOB_DIR = re.compile(r"^(.*/jobs/([^/]+))/[^/]+$")


def sealable(paths: list[str], jobs: dict[str, tuple[int, int]],
             window: tuple[int, int] | None) -> list[str]:
    """The ``jobs/<id>/`` directories (of ``paths``) of jobs that ended more than
    :data:`SEAL_AFTER_US` before the newest job record."""
    if window is None:
        return []
    found: set[str] = set()
    seen: set[str] = set()  # directories decided: a file's name (not empty) changes nothing
    for p in paths:
        head, _, name = p.rpartition("/")
        if name:
            if head in seen:
                continue
            seen.add(head)
        m = _JOB_DIR.match(p)
        if m is None or m.group(1) in found:
            continue
        span = jobs.get(m.group(2))
        if span is not None and span[1] + SEAL_AFTER_US < window[1]:
            found.add(m.group(1))
    return sorted(found)


def dir_mtimes(dirs: list[str]) -> list[tuple[str, float]]:
    out = []
    for d in dirs:
        try:
            out.append((d, os.stat(d).st_mtime))  # noqa: PTH116
        except OSError:
            continue
    return out


def seal(con: duckdb.DuckDBPyConnection, dirs: list[tuple[str, float]]) -> None:
    con.execute("DELETE FROM sealed_dirs")
    if dirs:
        con.executemany("INSERT INTO sealed_dirs VALUES (?, ?)", dirs)


def still_sealed(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The sealed directories whose mtime is what it was."""
    then = dict(con.execute("SELECT path, mtime FROM sealed_dirs").fetchall())
    return {d for d, m in dir_mtimes(list(then)) if m == then[d]}
