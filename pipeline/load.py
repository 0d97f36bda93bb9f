"""Parquet shards -> the DuckDB file, in one transaction, idempotently.

DuckDB allows one writing process, so the workers write Parquet and this single step
loads it. Files are keyed on their path and content hash: an unchanged file (same path,
same sha256) keeps its rows, a changed one has its rows replaced, a new one is added.
Everything derived from the whole corpus (duplicates, host aliases, GPU serials,
attempts) is recomputed from the stored events, so loading the same shards twice, or
a killed load followed by a fresh one, gives the same tables.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb

from faultline.pipeline import hangs_load, load_incoming
from faultline.pipeline.bundles import SEP
from faultline.pipeline.objstore import stat_uri
from faultline.pipeline.parsers import hosts as hosts_parser
from faultline.pipeline.parsers import sacct
from faultline.pipeline.records import ParsedEvent
from faultline.pipeline.timeutil import TS_MAX_US, TS_MIN_US
from faultline.schemas import arrowrows
from faultline.schemas.ddl import quote_ident
from faultline.schemas.tables import ATTEMPTS, EVENTS, FILE_OFFSETS, FILES, REJECTS
from faultline.schemas.types import LogicalType

_TABLES = (FILES, EVENTS, REJECTS, FILE_OFFSETS)


def _shards(staging: Path, name: str) -> str | None:
    files = sorted((staging / name).glob("*.parquet"))
    return str(staging / name / "*.parquet") if files else None


def load_shards(con: duckdb.DuckDBPyConnection, staging: Path) -> int:
    """Merge the shards under ``staging`` into the database and recompute what derives
    from the whole corpus, inside the caller's transaction. Returns the number of files
    added or replaced."""
    changed = _merge(con, staging)
    _mark_duplicates(con)
    # the new events are inserted last, with the hosts, GPUs and boot anchors decided from
    # stored and incoming rows: an UPDATE of rows inserted in this transaction would send
    # them all to the write-ahead log (pipeline/load_incoming.py)
    every = load_incoming.stage(con, _shards(staging, EVENTS.name))
    _resolve_hosts(con, every)
    every = load_incoming.mapped(con)
    _map_gpus(con, every)
    anchor_boots(con, every)  # neither reads what the other writes (GPUs, times)
    load_incoming.insert(con)
    load_incoming.drop(con)
    _rebuild_attempts(con)
    hangs_load.rebuild(con)
    return changed


def _merge(con: duckdb.DuckDBPyConnection, staging: Path) -> int:
    pattern = _shards(staging, "files")
    con.execute("CREATE OR REPLACE TEMP TABLE changed (path VARCHAR)")
    con.execute("CREATE OR REPLACE TEMP TABLE resumed "
                "(path VARCHAR, restart BIGINT, from_path VARCHAR)")
    if pattern is None:
        con.execute("CREATE OR REPLACE TEMP TABLE new_files AS SELECT * FROM files LIMIT 0")
        return 0
    con.execute("CREATE OR REPLACE TEMP TABLE new_files AS SELECT * FROM read_parquet(?)",
                [pattern])
    resumed = _shards(staging, "resumed")
    if resumed is not None:
        con.execute("INSERT INTO resumed SELECT path, restart, from_path "
                    "FROM read_parquet(?)", [resumed])
    # a rotated file continuing its old name's rows: they are copied to it first
    # (before the old name, changed too, has its rows replaced)
    for t in ("files", "events", "rejects"):
        con.execute(f"INSERT INTO {t} SELECT x.* REPLACE (r.path AS path) "  # noqa: S608
                    f"FROM {t} x JOIN resumed r ON x.path = r.from_path")
    # Paths whose content and parse settings are unchanged keep their rows (a touched
    # file only gets its new mtime); grown files continued from a window keep their
    # rows before it (_append); the rest are replaced. New events are inserted later
    # (load_shards: load_incoming), the other tables' rows here.
    con.execute("""
        INSERT INTO changed SELECT n.path FROM new_files n
        LEFT JOIN files f ON f.path = n.path AND f.sha256 = n.sha256
                          AND f.parsed_with = n.parsed_with
        WHERE f.path IS NULL AND n.path NOT IN (SELECT path FROM resumed)
    """)
    con.execute("""
        UPDATE files SET mtime = n.mtime FROM new_files n
        WHERE files.path = n.path AND files.mtime IS DISTINCT FROM n.mtime
          AND files.path NOT IN (SELECT path FROM changed)
    """)
    # A changed archive is read whole again: members it no longer holds go too.
    con.execute(f"""
        INSERT INTO changed SELECT f.path FROM files f JOIN new_files b
          ON b.source = 'bundle' AND b.path IN (SELECT path FROM changed)
         AND starts_with(f.path, b.path || '{SEP}')
        WHERE f.path NOT IN (SELECT path FROM new_files)
    """)  # noqa: S608 - SEP is a constant
    for t in _TABLES:
        name = quote_ident(t.name)
        con.execute(f"DELETE FROM {name} WHERE path IN (SELECT path FROM changed)")  # noqa: S608
        shard = _shards(staging, t.name)
        if shard is None or t is EVENTS:
            continue
        cols = ", ".join(quote_ident(c) for c in t.column_names)
        # identifiers come from schemas/; the shard path is a parameter
        con.execute(f"INSERT INTO {name} SELECT {cols} FROM read_parquet(?) "  # noqa: S608
                    "WHERE path IN (SELECT path FROM changed)", [shard])
    n_resumed = _append(con, staging)
    return con.execute("SELECT count(*) FROM changed").fetchall()[0][0] + n_resumed


def _append(con: duckdb.DuckDBPyConnection, staging: Path) -> int:
    """Grown files parsed from a window on (:mod:`faultline.pipeline.resume`): their
    stored rows before the window's restart line stay, under the file's new sha256
    (event ids carry its first 20 hex digits), the shards' rows follow them, and the
    ``files`` row takes the whole file's counts, as one read of the whole file gives
    (counted over the stored rows and the shards' new ones, which load_shards inserts
    later)."""
    n = con.execute("SELECT count(*) FROM resumed").fetchall()[0][0]
    if not n:
        return 0
    con.execute("""
        CREATE OR REPLACE TEMP TABLE resumed_sha AS
        SELECT r.path, r.restart, n.sha256 FROM resumed r JOIN new_files n USING (path)
    """)
    for t in ("events", "rejects"):
        con.execute(f"DELETE FROM {t} USING resumed_sha r "  # noqa: S608 (constants)
                    f"WHERE {t}.path = r.path AND {t}.line_no >= r.restart")
    con.execute("""
        UPDATE events SET sha256 = r.sha256,
               event_id = left(r.sha256, 20) || substr(events.event_id, 21)
        FROM resumed_sha r WHERE events.path = r.path
    """)
    con.execute("UPDATE rejects SET sha256 = r.sha256 FROM resumed_sha r "
                "WHERE rejects.path = r.path")
    for t in (REJECTS, FILE_OFFSETS):
        name = quote_ident(t.name)
        shard = _shards(staging, t.name)
        if t is FILE_OFFSETS:
            con.execute(f"DELETE FROM {name} WHERE path IN "  # noqa: S608
                        "(SELECT path FROM resumed)")
        if shard is None:
            continue
        cols = ", ".join(quote_ident(c) for c in t.column_names)
        con.execute(f"INSERT INTO {name} SELECT {cols} FROM read_parquet(?) "  # noqa: S608
                    "WHERE path IN (SELECT path FROM resumed)", [shard])
    con.execute("""
        UPDATE files SET sha256 = n.sha256, lines = n.lines, bytes = n.bytes,
               mtime = n.mtime, problem = n.problem, host = n.host, shape = n.shape,
               host_from = n.host_from
        FROM new_files n WHERE files.path = n.path AND n.path IN (SELECT path FROM resumed)
    """)
    # counts and host_from over the whole file's rows (fileparse: _Rows.add, _host_from)
    con.execute("CREATE OR REPLACE TEMP TABLE resumed_events AS SELECT path, line_no, "
                "line_end, host FROM events WHERE path IN (SELECT path FROM resumed)")
    shard = _shards(staging, EVENTS.name)
    if shard is not None:
        con.execute("INSERT INTO resumed_events SELECT path, line_no, line_end, host "
                    "FROM read_parquet(?) WHERE path IN (SELECT path FROM resumed)",
                    [shard])
    con.execute("""
        UPDATE files SET event_lines = c.ev, reject_lines = c.rj,
               routine_lines = files.lines - c.ev - c.rj,
               host_from = CASE WHEN files.host IS NOT NULL OR c.n_events = 0
                                THEN files.host_from
                                WHEN c.hosted > 0 THEN 'line' ELSE 'none' END
        FROM (
            SELECT r.path,
                   (SELECT count(DISTINCT l) FROM (
                        SELECT unnest(range(line_no, coalesce(line_end, line_no) + 1)) AS l
                        FROM resumed_events e WHERE e.path = r.path)) AS ev,
                   (SELECT count(DISTINCT line_no) FROM rejects j WHERE j.path = r.path) AS rj,
                   (SELECT count(*) FROM resumed_events e WHERE e.path = r.path)
                       AS n_events,
                   (SELECT count(*) FROM resumed_events e WHERE e.path = r.path
                      AND e.host IS NOT NULL AND e.host <> '') AS hosted
            FROM resumed r
        ) c
        WHERE files.path = c.path
    """)
    return n


def resumed_paths(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The files the last :func:`load_shards` on ``con`` continued from a window."""
    found = con.execute("SELECT count(*) FROM duckdb_tables() "
                        "WHERE temporary AND table_name = 'resumed'").fetchall()[0][0]
    if not found:
        return []
    return [p for p, in con.execute("SELECT path FROM resumed ORDER BY path").fetchall()]


def unchanged_paths(con: duckdb.DuckDBPyConnection, paths: list[str], parsed_with: str,
                    trusted: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """The paths a re-run need not read again: same size and mtime as when stored, and
    parsed with the same code and settings. Costs one ``stat`` per known path, except
    for the paths in ``trusted`` directories, which the caller knows to be stored and
    unchanged (pipeline/ingest_state.py: sealed directories)."""
    same = {p for p in paths if p.rpartition("/")[0] in trusted} if trusted else set()
    query = "SELECT path, bytes, mtime FROM files WHERE parsed_with = ? AND mtime IS NOT NULL"
    if trusted:
        con.register("trusted_dirs",
                     arrowrows.table({"d": (sorted(trusted), LogicalType.STRING)}))
        query += (" AND regexp_extract(path, '^(.*)/', 1) NOT IN "
                  "(SELECT d FROM trusted_dirs)")
    try:
        known = {p: (b, m) for p, b, m in con.execute(query, [parsed_with]).fetchall()}
    finally:
        if trusted:
            con.unregister("trusted_dirs")
    if not known:
        return same
    for path in paths:
        seen = known.get(path)
        if seen is None:
            continue
        try:
            if "://" in path:  # an object store: its size and last-modified time
                now = stat_uri(path)
            else:
                st = os.stat(path)  # noqa: PTH116 (a million paths: no Path objects)
                now = (st.st_size, st.st_mtime)
        except OSError:  # BeamIOError too
            continue  # let the parse step record why
        if now == seen:
            same.add(path)
    return same


def _mark_duplicates(con: duckdb.DuckDBPyConnection) -> None:
    """A file with the same bytes as another: the first path keeps the events, the
    others count their lines as routine and point at it (``duplicate_of``). Files of
    no bytes are left out: empty files share nothing, and a file that could not be
    read (vanished, permission denied) is recorded with no bytes though it had some."""
    con.execute("""
        CREATE OR REPLACE TEMP TABLE originals AS
        SELECT sha256, min(path) AS original FROM files WHERE bytes > 0 GROUP BY sha256
        HAVING count(*) > 1
    """)
    con.execute("""
        UPDATE files SET duplicate_of = o.original, routine_lines = files.lines,
               event_lines = 0, reject_lines = 0
        FROM originals o
        WHERE files.sha256 = o.sha256 AND files.path <> o.original
          AND files.duplicate_of IS DISTINCT FROM o.original
    """)
    for t in ("events", "rejects"):
        con.execute(f"DELETE FROM {t} WHERE path IN "  # noqa: S608
                    "(SELECT path FROM files WHERE duplicate_of IS NOT NULL)")


def _event_objects(con: duckdb.DuckDBPyConnection, kinds: tuple[str, ...],
                   every: str = "events") -> list[ParsedEvent]:
    """The events of ``kinds`` in ``every`` (the table, or a view of stored and
    incoming rows: load_incoming) as parsed events, in file and line order."""
    marks = ", ".join("?" for _ in kinds)
    rows = con.execute(
        f"SELECT kind, message, host, line_no, attrs FROM {every} WHERE kind IN ({marks}) "  # noqa: S608
        "ORDER BY path, line_no", list(kinds)).fetchall()
    return [ParsedEvent(line_no, kind, message, host=host,
                        attrs=json.loads(attrs) if attrs else {})
            for kind, message, host, line_no, attrs in rows]


def _bootstrap_objects(con: duckdb.DuckDBPyConnection, every: str = "events"
                       ) -> list[ParsedEvent]:
    """The ``nccl_bootstrap`` events the resolver reads, one per distinct (host,
    address), in the order of each pair's first line (host, line, path). There is one
    per rank and attempt (7.6 M on ``llama3``), and a pair seen before changes no
    name: the resolver keeps the first host a name is given, and a host resolves to
    the same name once its first line is read. Grouping (a hash aggregate) instead of
    ordering every line (a sort that spills) took llama3's host resolution from 20 s
    to well under a second, with the same names. ``every`` as for _event_objects."""
    rows = con.execute(f"""
        SELECT host, address, first.line_no FROM (
            SELECT host, attrs->>'address' AS address,
                   min({{'line_no': line_no, 'path': path}}) AS first
            FROM {every} WHERE kind = 'nccl_bootstrap' AND host IS NOT NULL AND host <> ''
            GROUP BY ALL
        )
        ORDER BY host, first.line_no, first.path, address NULLS FIRST
    """).fetchall()  # noqa: S608 (every: a table or view name of ours)
    return [ParsedEvent(line_no, "nccl_bootstrap", "", host=host,
                        attrs={} if address is None else {"address": address})
            for host, address, line_no in rows]


def _resolve_hosts(con: duckdb.DuckDBPyConnection, every: str = "events") -> None:
    """Every host name (FQDN, alias, address) to its canonical name, decided from the
    events in ``every`` (stored plus incoming in load_shards) and the files: the map is
    left in the temp table ``host_map`` (for load_incoming to apply as it inserts) and
    applied to the rows stored in ``events``."""
    resolver = hosts_parser.build_resolver(
        _event_objects(con, ("host_alias",), every) + _bootstrap_objects(con, every))
    known = [r[0] for r in con.execute(
        f"SELECT DISTINCT host FROM {every} WHERE host IS NOT NULL").fetchall()]  # noqa: S608
    known += [r[0] for r in con.execute(
        "SELECT DISTINCT host FROM files WHERE host IS NOT NULL").fetchall()]
    for name in known:  # names as the layout and the lines give them are canonical...
        if name not in resolver and "." not in name:  # ...unless an alias says otherwise
            resolver.add(name, name)
    mapping = [(name, resolver.resolve(name)) for name in sorted(set(known))]
    mapping = [(a, b) for a, b in mapping if b and b != a]
    con.execute("CREATE OR REPLACE TEMP TABLE host_map (alias VARCHAR, host VARCHAR)")
    if not mapping:
        return
    con.executemany("INSERT INTO host_map VALUES (?, ?)", mapping)
    con.execute("UPDATE events SET host = m.host FROM host_map m WHERE events.host = m.alias")


def anchor_boots(con: duckdb.DuckDBPyConnection, every: str = "events") -> None:
    """Wall times for kernel lines that carry only the time since boot (plain dmesg,
    /dev/kmsg) and whose file had no anchor of its own (``attrs.boot_seq`` says which
    boot of the file they belong to), from the rest of the corpus:

    - ``same_record``: the same kernel record, with the same microsecond uptime and
      kind on the same host, appears in a timed file (syslog ``kernel: [secs]``, journal
      JSON with ``__MONOTONIC_TIMESTAMP``): boot = its time minus its uptime (median);
    - ``same_message``: two or more kernel messages of the boot (not boot banners), each
      found once in the boot and once among the host's timed lines (``dmesg -T``, a
      syslog without ``[secs]``), agree on the boot within 2 s: boot = their median;
    - ``slurmctld``: a boot of the file that starts in it (a ``boot`` event within 120 s
      of uptime 0) paired with Slurm's ``unexpectedly rebooted boot_time=`` for that
      host, only when the host's boots in the file and Slurm's boot times are equally
      many (paired in order): an unknown boot in between would shift the pairing, so
      an unequal count leaves the lines untimed rather than wrong.

    Anchored lines become ``boot_relative``. Recomputed from the stored rows on every
    load (lines anchored before are reset first), so a re-run changes nothing and a new
    file that brings an anchor takes effect. A corpus without such lines (no plain
    dmesg) skips it all: every step below reads only them (0.01 CPU s to find out
    instead of 0.12 for the steps on small x4's 340k events).

    The anchors are decided from the events in ``every`` (stored plus incoming, hosts
    resolved, in load_shards) and left in the temp table ``boot_anchor``;
    load_incoming applies them to the incoming rows as it inserts them (the reset
    included), the stored rows are updated here.
    """
    con.execute("CREATE OR REPLACE TEMP TABLE boot_anchor "
                "(path VARCHAR, seg INTEGER, boot_us BIGINT)")
    if not con.execute(f"""
        SELECT EXISTS (SELECT 1 FROM {every}
                       WHERE source = 'kernel' AND attrs->>'boot_seq' IS NOT NULL)
    """).fetchall()[0][0]:  # noqa: S608 (every: a table or view name of ours)
        return
    con.execute("""
        UPDATE events SET ts = NULL, ts_quality = 'untimed'
        WHERE source = 'kernel' AND attrs->>'boot_seq' IS NOT NULL AND ts IS NOT NULL
    """)
    con.execute(f"""
        INSERT INTO boot_anchor
        WITH un AS (
            SELECT path, host, kind, message, CAST(attrs->>'boot_seq' AS INTEGER) AS seg,
                   CAST(attrs->>'uptime_us' AS BIGINT) AS up
            FROM {every}
            WHERE source = 'kernel' AND attrs->>'boot_seq' IS NOT NULL AND host IS NOT NULL
        ), timed AS (
            SELECT host, kind, CAST(attrs->>'uptime_us' AS BIGINT) AS up, epoch_us(ts) AS ts
            FROM {every}
            WHERE source = 'kernel' AND ts IS NOT NULL AND attrs->>'boot_seq' IS NULL
              AND attrs->>'uptime_us' IS NOT NULL AND ts_quality <> 'inherited'
        ), same_record AS (
            SELECT un.path, un.seg, CAST(median(timed.ts - timed.up) AS BIGINT) AS boot_us
            FROM un JOIN timed USING (host, kind, up)
            GROUP BY ALL
        ), msg_timed AS (  -- a host's timed kernel messages that occur once
            SELECT host, kind, message, any_value(epoch_us(ts)) AS ts
            FROM {every}
            WHERE source = 'kernel' AND ts IS NOT NULL AND attrs->>'boot_seq' IS NULL
              AND ts_quality <> 'inherited' AND host IS NOT NULL AND kind <> 'boot'
            GROUP BY ALL HAVING count(*) = 1
        ), msg_un AS (
            SELECT path, seg, host, kind, message, any_value(up) AS up
            FROM un WHERE kind <> 'boot'
            GROUP BY ALL HAVING count(*) = 1
        ), same_message AS (  -- two or more such messages agree on the boot
            SELECT u.path, u.seg, CAST(median(m.ts - u.up) AS BIGINT) AS boot_us
            FROM msg_un u JOIN msg_timed m USING (host, kind, message)
            GROUP BY ALL
            HAVING count(*) >= 2 AND max(m.ts - u.up) - min(m.ts - u.up) <= 2000000
        ), starts AS (  -- boots that start inside the file, in order
            SELECT path, host, seg,
                   row_number() OVER (PARTITION BY path ORDER BY seg) AS n,
                   count(*) OVER (PARTITION BY path) AS k
            FROM (SELECT DISTINCT path, host, seg FROM un
                  WHERE kind = 'boot' AND up < 120000000)
        ), slurm AS (
            SELECT host, CAST(attrs->>'boot_time' AS BIGINT) * 1000000 AS boot_us,
                   row_number() OVER (PARTITION BY host
                                      ORDER BY CAST(attrs->>'boot_time' AS BIGINT)) AS n,
                   count(*) OVER (PARTITION BY host) AS k
            FROM (SELECT DISTINCT host, attrs FROM {every}
                  WHERE kind = 'node_reboot' AND attrs->>'boot_time' IS NOT NULL
                    AND host IS NOT NULL)
        ), from_slurm AS (
            SELECT s.path, s.seg, sl.boot_us
            FROM starts s JOIN slurm sl ON sl.host = s.host AND sl.n = s.n AND sl.k = s.k
        )
        SELECT path, seg, boot_us FROM same_record
        UNION ALL
        SELECT path, seg, boot_us FROM same_message
        WHERE (path, seg) NOT IN (SELECT (path, seg) FROM same_record)
        UNION ALL
        SELECT path, seg, boot_us FROM from_slurm
        WHERE (path, seg) NOT IN (SELECT (path, seg) FROM same_record)
          AND (path, seg) NOT IN (SELECT (path, seg) FROM same_message)
    """)  # noqa: S608 (every: a table or view name of ours)
    con.execute(f"""
        UPDATE events SET ts = TIMESTAMPTZ '1970-01-01 00:00:00+00' + to_microseconds(
                              a.boot_us + CAST(events.attrs->>'uptime_us' AS BIGINT)),
                          ts_quality = 'boot_relative'
        FROM boot_anchor a
        WHERE events.path = a.path AND events.source = 'kernel'
          AND events.attrs->>'boot_seq' IS NOT NULL
          AND CAST(events.attrs->>'boot_seq' AS INTEGER) = a.seg
          AND a.boot_us + CAST(events.attrs->>'uptime_us' AS BIGINT) >= {TS_MIN_US}
          AND a.boot_us + CAST(events.attrs->>'uptime_us' AS BIGINT) < {TS_MAX_US}
    """)  # noqa: S608 (constants: the plausible range of timeutil.in_range)


def _map_gpus(con: duckdb.DuckDBPyConnection, every: str = "events") -> None:
    """PCI address on a host -> GPU index and serial, from that host's inventory lines
    in ``every`` (stored plus incoming, hosts resolved, in load_shards): left in the
    temp table ``gpu_inv`` (for load_incoming) and applied to the stored rows."""
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE gpu_inv AS
        SELECT host, attrs->>'pci' AS pci, max(CAST(attrs->>'index' AS INTEGER)) AS idx,
               max(attrs->>'serial') AS serial
        FROM {every} WHERE kind = 'gpu_inventory' GROUP BY ALL
    """)  # noqa: S608 (every: a table or view name of ours)
    con.execute("""
        UPDATE events SET gpu_index = inv.idx, gpu_serial = inv.serial
        FROM gpu_inv inv
        WHERE events.host = inv.host AND events.device = inv.pci
          AND events.kind <> 'gpu_inventory'
          AND (events.gpu_index IS DISTINCT FROM inv.idx
               OR events.gpu_serial IS DISTINCT FROM inv.serial)
    """)


def _rebuild_attempts(con: duckdb.DuckDBPyConnection) -> None:
    """Attempts from every sacct dump; a job seen in several dumps (they overlap in
    real collections) counts once, as its most complete record says."""
    best: dict[tuple[str, object], ParsedEvent] = {}
    for e in _event_objects(con, ("job_record",)):
        key = (str(e.attrs.get("job_id")), e.attrs.get("start"))
        old = best.get(key)
        if old is None or (old.attrs.get("end") is None and e.attrs.get("end") is not None):
            best[key] = e
    rows = sacct.attempts(best.values())
    con.execute("DELETE FROM attempts")
    if not rows:
        return
    table = arrowrows.rows_table(rows, ATTEMPTS)
    con.register("new_attempts", table)
    con.execute("INSERT INTO attempts SELECT * FROM new_attempts")
    con.unregister("new_attempts")


