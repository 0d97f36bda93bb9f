"""Operators' corrections of root causes, kept in the ``overrides`` table.

An override is data the operator owns, not something an ingest derives: it lives in
the database (who, when, why) and every later rebuild of the interruptions applies it,
until ``faultline overrides remove`` takes it out. An overrides CSV given to
``ingest --overrides`` is imported into the same table, so a file and the command are
two ways of writing the same rows. An override may name an interruption that does not
exist (a typo, or a run not ingested yet): it is kept, and every ingest warns about it.
"""

from __future__ import annotations

import csv
import datetime as dt
import difflib
import getpass
import os
from dataclasses import dataclass
from pathlib import Path

import duckdb

from faultline.schemas.taxonomy import load_taxonomy

CSV_COLUMNS = ("interruption_id", "component", "note")


class OverrideError(ValueError):
    """An override that cannot be stored: unknown component, unreadable file (exit 2)."""


@dataclass(frozen=True)
class Override:
    interruption_id: str
    component: str
    note: str
    created_at: dt.datetime | None = None
    created_by: str = ""
    origin: str = "cli"


def who() -> str:
    """The login name to record as the override's author."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers): say so, do not fail
        return os.environ.get("USER") or "unknown"


def known_components() -> list[str]:
    """Components an override may name, in the taxonomy's order."""
    return list(load_taxonomy().component_names)


def check_component(component: str) -> str:
    """The component as the taxonomy spells it; case and spacing are forgiven."""
    names = known_components()
    if component in names:
        return component
    folded = {" ".join(n.lower().split()): n for n in names}
    found = folded.get(" ".join(component.lower().split()))
    if found:
        return found
    close = difflib.get_close_matches(component.lower(), list(folded), n=1, cutoff=0.6)
    hint = f" (did you mean {folded[close[0]]!r}?)" if close else ""
    raise OverrideError(f"unknown component {component!r}{hint}; known components: "
                        + ", ".join(names))


def read_csv(path: Path) -> list[Override]:
    """The rows of an overrides file (``interruption_id,component,note``), checked."""
    out: list[Override] = []
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            missing = [c for c in CSV_COLUMNS[:2] if c not in (reader.fieldnames or [])]
            if missing:
                raise OverrideError(f"{path}: no column {', '.join(missing)} (the header "
                                    "must be interruption_id,component,note)")
            for n, row in enumerate(reader, start=2):
                iid = (row.get("interruption_id") or "").strip()
                if not iid:
                    raise OverrideError(f"{path}:{n}: empty interruption_id")
                try:
                    comp = check_component((row.get("component") or "").strip())
                except OverrideError as exc:
                    raise OverrideError(f"{path}:{n}: {exc}") from exc
                out.append(Override(iid, comp, (row.get("note") or "").strip(),
                                    origin=str(path.resolve())))
    except (OSError, UnicodeDecodeError) as exc:
        raise OverrideError(f"{path}: cannot read the overrides file: {exc}") from exc
    return out


def put(con: duckdb.DuckDBPyConnection, rows: list[Override], by: str | None = None,
        now: dt.datetime | None = None) -> int:
    """Add or change overrides; a row equal to the stored one is left as it is (so
    re-ingesting with the same file changes nothing, not even ``created_at``).
    Returns how many rows were added or changed."""
    by = by or who()
    now = now or dt.datetime.now(dt.UTC)
    stored = {r[0]: (r[1], r[2]) for r in con.execute(
        "SELECT interruption_id, component, note FROM overrides").fetchall()}
    changed = 0
    for o in rows:
        if stored.get(o.interruption_id) == (o.component, o.note):
            continue
        con.execute("DELETE FROM overrides WHERE interruption_id = ?", [o.interruption_id])
        con.execute("INSERT INTO overrides VALUES (?, ?, ?, ?, ?, ?)",
                    [o.interruption_id, o.component, o.note, now, by, o.origin])
        stored[o.interruption_id] = (o.component, o.note)
        changed += 1
    return changed


def remove(con: duckdb.DuckDBPyConnection, interruption_id: str) -> bool:
    """Take one override out; False when there was none for that id."""
    found = con.execute("SELECT count(*) FROM overrides WHERE interruption_id = ?",
                        [interruption_id]).fetchall()[0][0]
    con.execute("DELETE FROM overrides WHERE interruption_id = ?", [interruption_id])
    return bool(found)


def stored(con: duckdb.DuckDBPyConnection) -> list[Override]:
    """Every stored override, oldest first."""
    return [Override(*r) for r in con.execute(
        "SELECT interruption_id, component, note, created_at, created_by, origin "
        "FROM overrides ORDER BY created_at, interruption_id").fetchall()]


def unknown_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Overrides whose interruption is not in the database (typo, or not ingested)."""
    return [r[0] for r in con.execute(
        "SELECT o.interruption_id FROM overrides o LEFT JOIN interruptions i "
        "USING (interruption_id) WHERE i.interruption_id IS NULL ORDER BY 1").fetchall()]


def by_id(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, str]]:
    """interruption_id -> (component, note), for the rebuild to apply."""
    return {r[0]: (r[1], r[2]) for r in con.execute(
        "SELECT interruption_id, component, note FROM overrides").fetchall()}
