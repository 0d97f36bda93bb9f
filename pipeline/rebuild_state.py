"""Whether a re-run must rebuild the interruptions at all.

The root causes depend on the stored events (and what derives from them), the
operator's overrides, ``--run``, and the code and data that decide them (classifiers,
their shipped weights, the taxonomy, the schemas, the parse settings' fingerprint,
which holds the parsing code's hash). The last rebuild's fingerprint of all that but
the events is kept in ``rebuild_state``; a re-run that parsed nothing (no file new,
grown or changed: the events are those of the last committed run, whose rebuild ran
in the same transaction) and finds the same fingerprint leaves the interruptions as
they are, which is what rebuilding them would give.
"""

from __future__ import annotations

import functools
import hashlib
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


def fingerprint(con: duckdb.DuckDBPyConnection, parsed_with: str, run: str | None
                ) -> str:
    """What the next rebuild would be decided by, besides the events."""
    (overrides,), = con.execute(
        "SELECT md5(coalesce(string_agg(CAST(o AS VARCHAR), chr(10) "
        "ORDER BY o.interruption_id), '')) FROM overrides o").fetchall()
    return (f"faultline {__version__}+{_code_hash()}; run={run or '-'}; "
            f"overrides={overrides[:16]}; parse: {parsed_with}")


def unchanged(con: duckdb.DuckDBPyConnection, fp: str) -> bool:
    """Whether the stored interruptions were built with ``fp``."""
    return con.execute("SELECT count(*) FROM rebuild_state WHERE fingerprint = ?",
                       [fp]).fetchall()[0][0] == 1


def record(con: duckdb.DuckDBPyConnection, fp: str) -> None:
    con.execute("DELETE FROM rebuild_state")
    con.execute("INSERT INTO rebuild_state VALUES (?)", [fp])
