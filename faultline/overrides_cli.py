"""``faultline overrides add|list|remove``: operators' corrections, kept in the database.

Adding or removing an override rebuilds that interruption's run at once, so ``report``
and ``explain`` show the correction without another ingest; every later ingest applies
it again (:mod:`faultline.classifiers.overrides`). Exit codes as everywhere: 2 for bad
usage (no database, unknown component, no such override).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from faultline.console import EXIT_USAGE, err, fail

app = typer.Typer(
    name="overrides",
    help="Operators' corrections of root causes, stored in the database: they win over "
    "the classifiers and are kept across every later ingest until removed.",
    no_args_is_help=True,
)
DbOption = Annotated[
    Path, typer.Option("--db", help="The faultline database.", dir_okay=False)
]


class ListFormat(StrEnum):
    table = "table"
    csv = "csv"


def _fail(cmd: str, msg: str) -> typer.Exit:
    fail(f"overrides {cmd}", msg)
    return typer.Exit(EXIT_USAGE)


def _need_db(cmd: str, db: Path) -> None:
    if not db.is_file():
        raise _fail(cmd, f"{db}: no such database (run faultline ingest first)")


def _run_of(con, interruption_id: str) -> str | None:
    rows = con.execute("SELECT run FROM interruptions WHERE interruption_id = ?",
                       [interruption_id]).fetchall()
    return rows[0][0] if rows else None


def _write(cmd: str, db: Path, change) -> object:
    """Run ``change(con)`` and rebuild the run it touched, in one transaction, while
    holding the ingest lock (an ingest and an override never interleave)."""
    import duckdb

    from faultline import db as fdb
    from faultline.classifiers import interruptions
    from faultline.pipeline.run import IngestError, exclusive

    try:
        with exclusive(db.resolve()):
            con = fdb.connect(db)
            try:
                with fdb.transaction(con):
                    result, run = change(con)
                    if run is not None:
                        interruptions.rebuild(con, run=run)
                return result
            finally:
                con.close()
    except (IngestError, duckdb.Error, ValueError) as exc:
        raise _fail(cmd, str(exc)) from exc


@app.command("add")
def add(
    db: DbOption,
    interruption_id: Annotated[str, typer.Argument(help="The interruption to correct.")],
    component: Annotated[str, typer.Argument(help="Its real root cause: a Table 5 "
                                             "component, Planned Maintenance or "
                                             "Unattributed.")],
    note: Annotated[str, typer.Option(help="Why (RMA ticket, what was found).")] = "",
) -> None:
    """Set an interruption's root cause; replaces an earlier override of the same id."""
    from faultline.classifiers import overrides as ov

    _need_db("add", db)
    try:
        comp = ov.check_component(component)
    except ov.OverrideError as exc:
        raise _fail("add", str(exc)) from exc

    def change(con):
        ov.put(con, [ov.Override(interruption_id, comp, note.strip())])
        return _run_of(con, interruption_id), _run_of(con, interruption_id)

    run = _write("add", db, change)
    if run is None:
        err.print(f"[yellow]warning:[/] no interruption {escape(interruption_id)} in "
                  f"{escape(str(db))}: the override is kept and applies if a later "
                  "ingest builds that interruption (check the id: faultline explain --db "
                  "DB ID)")
        typer.echo(f"override stored for {interruption_id}: {comp} (not applied yet)")
    else:
        typer.echo(f"override stored and applied: {interruption_id} (run {run}) -> {comp}")


@app.command("remove")
def remove(
    db: DbOption,
    interruption_id: Annotated[str, typer.Argument(help="The interruption whose "
                                                   "override to remove.")],
) -> None:
    """Remove an override: the classifiers decide that interruption again."""
    from faultline.classifiers import overrides as ov

    _need_db("remove", db)

    def change(con):
        return ov.remove(con, interruption_id), _run_of(con, interruption_id)

    if not _write("remove", db, change):
        raise _fail("remove", f"no override for {interruption_id} (faultline overrides "
                    f"list --db {db} shows them)")
    typer.echo(f"override removed: {interruption_id}; the classifiers decide it again")


@app.command("list")
def list_(
    db: DbOption,
    format: Annotated[ListFormat, typer.Option(
        "--format", help="table, or csv (readable back by ingest --overrides).")]
    = ListFormat.table,
) -> None:
    """List the stored overrides, with who added them, when, and whether their
    interruption exists."""
    import duckdb

    from faultline import db as fdb
    from faultline.classifiers import overrides as ov

    _need_db("list", db)
    try:
        with fdb.connect(db, read_only=True) as con:
            if "overrides" not in {r[0] for r in con.execute("SHOW TABLES").fetchall()}:
                rows, unknown = [], set()
            else:
                rows, unknown = ov.stored(con), set(ov.unknown_ids(con))
    except duckdb.Error as exc:
        raise _fail("list", f"{db}: {exc}") from exc
    if format is ListFormat.csv:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow([*ov.CSV_COLUMNS, "created_at", "created_by", "origin"])
        for o in rows:
            w.writerow([o.interruption_id, o.component, o.note,
                        o.created_at.astimezone(dt.UTC).isoformat() if o.created_at
                        else "", o.created_by,
                        o.origin])
        typer.echo(buf.getvalue(), nl=False)
        return
    if not rows:
        typer.echo("no overrides (add one: faultline overrides add --db DB ID COMPONENT "
                   "--note TEXT)")
        return
    t = Table(box=None, header_style="bold")
    t.add_column("interruption", no_wrap=True, min_width=14)  # ids are never cut
    for name in ("component", "note", "by", "at (UTC)", "status"):
        t.add_column(name, overflow="fold")
    for o in rows:
        t.add_row(o.interruption_id, o.component, o.note or "-", o.created_by,
                  f"{o.created_at.astimezone(dt.UTC):%Y-%m-%d %H:%M}" if o.created_at
                  else "-",
                  "[yellow]no such interruption[/]" if o.interruption_id in unknown
                  else "applied")
    Console().print(t)
    if unknown:
        err.print(f"[yellow]warning:[/] {len(unknown)} overrides name no interruption in "
                  "this database: " + escape(", ".join(sorted(unknown))))
