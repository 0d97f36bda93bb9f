"""``components`` and ``xid_catalog`` are written from the taxonomy as one Arrow table
each (faultline/db.py): the rows equal those parameter binding writes, row for row and
type for type, and writing them again changes nothing."""

from __future__ import annotations

import duckdb

from faultline import db as fdb
from faultline.schemas import ddl
from faultline.schemas.tables import COMPONENTS, XID_CATALOG
from faultline.schemas.taxonomy import load_taxonomy


def _rows(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple]:
    return con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()


def test_taxonomy_tables_equal_what_parameter_binding_writes(tmp_path):
    con = fdb.connect(tmp_path / "x.duckdb")  # writes them on open
    fdb.load_taxonomy_tables(con, load_taxonomy())  # and again: still the same rows
    got = {t: _rows(con, t) for t in ("components", "xid_catalog")}
    ref = duckdb.connect()
    ddl.create_all(ref)
    tax = load_taxonomy()
    comp = [(c.component, c.category, c.kind, c.published_interruptions,
             c.published_percent, c.sort_order, tax.version) for c in tax.components]
    xids = [(x.xid, x.name, x.description or None, x.resolution or None,
             x.investigatory or None, x.role, x.component, x.signal_family or None,
             ";".join(x.follows) or None, ";".join(x.applies_to) or None, x.confidence,
             x.source, x.notes or None, tax.version)
            for x in sorted(tax.xids.values(), key=lambda e: e.xid)]
    for table, rows in ((COMPONENTS, comp), (XID_CATALOG, xids)):
        marks = ", ".join("?" for _ in table.columns)
        ref.executemany(f"INSERT INTO {table.name} VALUES ({marks})", rows)
    want = {t: _rows(ref, t) for t in ("components", "xid_catalog")}
    assert len(got["components"]) == len(tax.components) and len(got["xid_catalog"]) > 100
    assert got == want
    assert [tuple(map(type, r)) for r in got["xid_catalog"]] == [
        tuple(map(type, r)) for r in want["xid_catalog"]]
