"""Opening a faultline DuckDB file: schema and taxonomy in place, nothing else.

DuckDB allows one writing process per file, so every command that writes goes through
:func:`connect` once and keeps that connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import duckdb

from faultline.schemas import ddl
from faultline.schemas.tables import COMPONENTS, XID_CATALOG
from faultline.schemas.taxonomy import Taxonomy, load_taxonomy

# DuckDB spills to disk beyond this, so memory does not grow with the data. 512 MB
# keeps ingest's peak flat from 1x to 16x a corpus (bench/RESULTS.md) at no cost in
# time; with 2 GB the load step's peak grew with the data it merged.
MEMORY_LIMIT = "512MB"


def connect(path: str | Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) a faultline database with its schema and taxonomy."""
    con = duckdb.connect(str(path), read_only=read_only,
                         config={"memory_limit": MEMORY_LIMIT,
                                 "preserve_insertion_order": False})
    con.execute("SET enable_progress_bar = false")  # ours is on stderr; theirs in stdout
    if not read_only:
        ddl.create_all(con)
        load_taxonomy_tables(con, load_taxonomy())
    return con


def open_error(path: str | Path, exc: duckdb.Error) -> str:
    """Why DuckDB could not open ``path``, in one line of faultline's words (DuckDB's
    own message names its error class and may run over several lines)."""
    text = str(exc)
    if "not a valid DuckDB database" in text:
        return f"{path}: not a DuckDB database (faultline writes and reads DuckDB files)"
    if "Could not set lock" in text or "Conflicting lock" in text:
        return f"{path}: in use by another process; wait for it to finish"
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return f"{path}: cannot open the database: {first.split(': ', 1)[-1]}"


# Tables every faultline database has; a DuckDB file without them is someone else's.
KEY_TABLES = ("files", "events", "interruptions")


def missing_tables(con: duckdb.DuckDBPyConnection,
                   needed: tuple[str, ...] = KEY_TABLES) -> list[str]:
    """The faultline tables a database lacks: all of them for a DuckDB file that
    faultline did not write, none for one it did."""
    have = {t for t, in con.execute(
        "SELECT table_name FROM information_schema.tables").fetchall()}
    return [t for t in needed if t not in have]


def load_taxonomy_tables(con: duckdb.DuckDBPyConnection, tax: Taxonomy) -> None:
    """Replace the ``components`` and ``xid_catalog`` tables with the shipped taxonomy.

    Replaced whole in one transaction, so re-running leaves them byte-for-byte equal.
    """
    comp_rows = [
        (c.component, c.category, c.kind, c.published_interruptions, c.published_percent,
         c.sort_order, tax.version)
        for c in tax.components
    ]
    xid_rows = [
        (x.xid, x.name, x.description or None, x.resolution or None,
         x.investigatory or None, x.role, x.component, x.signal_family or None,
         ";".join(x.follows) or None, ";".join(x.applies_to) or None, x.confidence,
         x.source, x.notes or None, tax.version)
        for x in sorted(tax.xids.values(), key=lambda e: e.xid)
    ]
    from faultline.schemas import arrowrows  # here: a read-only open never needs it

    with transaction(con):
        for table, rows in ((COMPONENTS, comp_rows), (XID_CATALOG, xid_rows)):
            # Identifiers come from schemas/, never from input; values travel as one
            # Arrow table (executemany took 0.12 s for these 194 rows on every open).
            name = ddl.quote_ident(table.name)
            cols = table.column_names
            data = arrowrows.rows_table([dict(zip(cols, r, strict=True)) for r in rows], table)
            con.execute(f"DELETE FROM {name}")  # noqa: S608
            con.register("_taxonomy_rows", data)
            try:
                con.execute(f"INSERT INTO {name} SELECT * FROM _taxonomy_rows")  # noqa: S608
            finally:
                con.unregister("_taxonomy_rows")


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """One DuckDB transaction: committed when the block ends, rolled back on any error.

    A process killed inside the block leaves nothing behind either: DuckDB only applies
    a transaction's write-ahead log once its commit record is written, so the next
    connection sees the database as it was before the block.
    """
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
