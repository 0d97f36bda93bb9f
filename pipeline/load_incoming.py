"""The shards' new events, read where they lie and inserted once, with their final
hosts, GPU serials and boot-anchored times (pipeline/load.py: ``load_shards``).

Host aliases, GPU inventories and boot anchors are decided from the whole corpus,
stored and incoming rows alike, and used to be applied by UPDATEs after the insert.
DuckDB writes a large insert's row groups to the database file as it goes (optimistic
writes); an UPDATE of those rows in the same transaction drops them and the commit
writes the rows to the write-ahead log instead: 119 MiB and +0.12 CPU s on small-x4,
951 MiB and ~+1.2 s (commit and close) on medium. So the incoming rows are read from
the Parquet shards as views: the host resolution, the inventory and the anchors read
the stored rows plus these views, the stored rows are updated as before (a new file
can change their answer), and the incoming rows are then inserted with theirs.

The views hold no data: each query that reads them reads the shards again (+0.05 CPU s
on small-x4, +0.4 on medium, against the commit's savings), where staging the rows in
a table first cost +0.18 s on small-x4.
"""

from __future__ import annotations

import duckdb

from faultline.pipeline.timeutil import TS_MAX_US, TS_MIN_US
from faultline.schemas.ddl import quote_ident
from faultline.schemas.tables import EVENTS

_COLS = ", ".join(quote_ident(c) for c in EVENTS.column_names)
# anchor_boots' terms (pipeline/load.py), on an incoming row ``e`` and its anchor ``a``
_BOOT_RELATIVE = "(e.source = 'kernel' AND e.attrs->>'boot_seq' IS NOT NULL)"
_BOOT_US = "(a.boot_us + CAST(e.attrs->>'uptime_us' AS BIGINT))"
_ANCHORED = (f"({_BOOT_RELATIVE} AND a.path IS NOT NULL "
             f"AND {_BOOT_US} >= {TS_MIN_US} AND {_BOOT_US} < {TS_MAX_US})")
_ANCHOR_TS = f"(TIMESTAMPTZ '1970-01-01 00:00:00+00' + to_microseconds({_BOOT_US}))"


def _literal(text: str) -> str:
    """A SQL string literal: a view cannot take a parameter, so the shard pattern (a
    path under our own staging directory) is quoted into its text."""
    return "'" + text.replace("'", "''") + "'"


def stage(con: duckdb.DuckDBPyConnection, pattern: str | None) -> str:
    """Views of the events ``load_shards`` will insert (``incoming_raw``: the rows of
    changed and continued files that are not duplicates, as parsed) and of every event
    the load ends with (``every_raw``: stored plus incoming). Run after ``_merge`` and
    ``_mark_duplicates``, which decide the paths and delete the stored rows that go.
    Returns the name of the latter, for the host resolution to read."""
    con.execute("""
        CREATE OR REPLACE TEMP TABLE incoming_paths AS
        SELECT path FROM (SELECT path FROM changed UNION SELECT path FROM resumed)
        WHERE path NOT IN (SELECT path FROM files WHERE duplicate_of IS NOT NULL)
    """)
    if pattern is None:
        source = f"SELECT {_COLS} FROM events WHERE false"  # noqa: S608 (constants)
    else:
        source = f"SELECT {_COLS} FROM read_parquet({_literal(pattern)})"  # noqa: S608
        # Each shard row belongs to a parsed file (fileparse: _Rows.add writes a file's
        # row with its events), so when every parsed file is incoming (a first ingest)
        # no row is left out and the views skip the filter: a semi-join on the path in
        # every scan, 0.15 CPU s of each on medium.
        if _some_parsed_stay(con):
            source += " WHERE path IN (SELECT path FROM incoming_paths)"
    con.execute(f"CREATE OR REPLACE TEMP VIEW incoming_raw AS {source}")
    con.execute(f"CREATE OR REPLACE TEMP VIEW every_raw AS "  # noqa: S608 (constants)
                f"SELECT {_COLS} FROM events UNION ALL SELECT {_COLS} FROM incoming_raw")
    return "every_raw"


def mapped(con: duckdb.DuckDBPyConnection) -> str:
    """Views of the incoming rows with their hosts resolved (``incoming_events``,
    through the ``host_map`` the resolution wrote: one pass, as the UPDATE it replaces
    did) and of every event with final hosts (``every_mapped``: the stored rows are
    updated by then). Returns the latter's name, for the GPU inventory to read."""
    con.execute("""
        CREATE OR REPLACE TEMP VIEW incoming_events AS
        SELECT e.* REPLACE (coalesce(m.host, e.host) AS host)
        FROM incoming_raw e LEFT JOIN host_map m ON e.host = m.alias
    """)
    con.execute(f"CREATE OR REPLACE TEMP VIEW every_mapped AS "  # noqa: S608 (constants)
                f"SELECT {_COLS} FROM events UNION ALL "
                f"SELECT {_COLS} FROM incoming_events")
    return "every_mapped"


def insert(con: duckdb.DuckDBPyConnection) -> None:
    """Insert the incoming rows with their final values, as the UPDATEs they replace
    left stored rows:

    - hosts resolved (``incoming_events``);
    - where the host's inventory names their PCI address, its GPU index and serial
      (``gpu_inv``, from ``_map_gpus``; an inventory line keeps its own);
    - kernel lines timed only since boot (``attrs.boot_seq``): reset to untimed, then
      timed from their boot's anchor when there is one and the time is plausible
      (``boot_anchor``, from ``anchor_boots``). Its rows are one per file and boot:
      a file's lines share their host, so its boots pair with one host's anchors; the
      ``min`` only keeps a row from being inserted twice should that ever change.
    """
    con.execute(f"""
        INSERT INTO events SELECT {_COLS} FROM (
            SELECT e.* REPLACE (
                       CASE WHEN inv.host IS NULL THEN e.gpu_index ELSE inv.idx END
                           AS gpu_index,
                       CASE WHEN inv.host IS NULL THEN e.gpu_serial ELSE inv.serial END
                           AS gpu_serial,
                       CASE WHEN {_ANCHORED} THEN {_ANCHOR_TS}
                            WHEN {_BOOT_RELATIVE} THEN NULL ELSE e.ts END AS ts,
                       CASE WHEN {_ANCHORED} THEN 'boot_relative'
                            WHEN {_BOOT_RELATIVE} AND e.ts IS NOT NULL THEN 'untimed'
                            ELSE e.ts_quality END AS ts_quality)
            FROM incoming_events e
            LEFT JOIN gpu_inv inv ON e.host = inv.host AND e.device = inv.pci
                                 AND e.kind <> 'gpu_inventory'
            LEFT JOIN (SELECT path, seg, min(boot_us) AS boot_us
                       FROM boot_anchor GROUP BY ALL) a
                   ON {_BOOT_RELATIVE} AND e.path = a.path
                  AND CAST(e.attrs->>'boot_seq' AS INTEGER) = a.seg
        )
    """)  # noqa: S608 (constants)


def drop(con: duckdb.DuckDBPyConnection) -> None:
    """The views read the shards, which staging deletes after the load: drop them."""
    for view in ("every_mapped", "incoming_events", "every_raw", "incoming_raw"):
        con.execute(f"DROP VIEW IF EXISTS {view}")


def _some_parsed_stay(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a file parsed this time keeps its stored rows (unchanged, a duplicate):
    its shard rows are then not to be inserted."""
    return con.execute("""
        SELECT EXISTS (SELECT 1 FROM new_files
                       WHERE path NOT IN (SELECT path FROM incoming_paths))
    """).fetchall()[0][0]
