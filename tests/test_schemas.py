"""Every table's DDL is generated from schemas/ and matches INTERFACE.md."""

from __future__ import annotations

import datetime as dt
import re

import duckdb
import pyarrow as pa
import pytest

from faultline import db
from faultline.schemas import TABLES, VIEWS, ddl, table
from faultline.schemas.taxonomy import load_taxonomy


@pytest.fixture()
def con(tmp_path):
    c = db.connect(tmp_path / "t.duckdb")
    yield c
    c.close()


def test_every_table_and_view_is_created_with_its_columns(con):
    for t in (*TABLES, *VIEWS):
        got = [r[0] for r in con.execute(f'DESCRIBE "{t.name}"').fetchall()]
        assert got == t.column_names, t.name


def test_duckdb_types_and_nullability_follow_the_schema(con):
    for t in TABLES:
        rows = con.execute(f'DESCRIBE "{t.name}"').fetchall()
        for (name, typ, null, *_), col in zip(rows, t.columns, strict=True):
            assert name == col.name
            assert typ.split("(")[0] == col.duckdb_type.replace("TIMESTAMPTZ",
                                                                 "TIMESTAMP WITH TIME ZONE")
            assert (null == "YES") == col.nullable, (t.name, name)


def test_ddl_is_idempotent(tmp_path):
    path = tmp_path / "t.duckdb"
    for _ in range(2):
        db.connect(path).close()
    with duckdb.connect(str(path)) as c:
        assert c.execute("SELECT count(*) FROM components").fetchone()[0] == 20


def _column_heads(shared_dir, name: str) -> list[str]:
    text = (shared_dir / "INTERFACE.md").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| `{name}`"))
    cols = line.rsplit("|", 2)[-2].strip()
    return re.findall(r"(?:^|, )`(\w+)`", re.sub(r"\([^)]*\)", "", cols))


@pytest.mark.shared
def test_interface_column_heads_all_exist(shared_dir):
    by_name = {t.name: t for t in (*TABLES, *VIEWS)}
    for name in ("files", "events", "rejects", "attempts", "interruptions",
                 "interruption_evidence", "breakdown"):
        heads = _column_heads(shared_dir, name)
        assert heads, name
        assert set(heads) <= set(by_name[name].column_names), (name, heads)


def test_arrow_schemas_round_trip_through_duckdb(con):
    """A row built from the Arrow schema loads into the DDL-created table unchanged."""
    t = table("events")
    row = {c.name: None for c in t.columns}
    row.update(event_id="e1", ts=dt.datetime(2024, 7, 1, 12, tzinfo=dt.UTC),
               ts_quality="exact", source="kernel", kind="xid", xid=79, message="m",
               path="/p", line_no=3, line_end=3, sha256="00", attrs='{"pid": 1}')
    batch = pa.Table.from_pylist([row], schema=t.arrow_schema)
    con.register("batch", batch)
    con.execute("INSERT INTO events SELECT * FROM batch")
    got = con.execute("SELECT xid, ts, attrs->>'pid' FROM events").fetchone()
    assert got[0] == 79 and got[1].year == 2024 and got[2] == "1"


def test_row_types_name_every_column():
    for t in TABLES:
        assert list(t.row_type._fields) == t.column_names
        assert t.row_type.__name__.endswith("Row")


def test_polars_schema_matches_arrow():
    import polars as pl

    for t in TABLES:
        empty = pl.from_arrow(t.arrow_schema.empty_table())
        assert dict(empty.schema) == t.polars_schema, t.name


def _interruption(i: int, run: str, component: str, planned: bool = False):
    tax = load_taxonomy()
    return (f"i{i}", run, str(i), dt.datetime(2024, 7, 1, tzinfo=dt.UTC), planned,
            component, tax.category_of(component), None, None, None, None, None, "test",
            1.0, 0.0, 0.0, tax.version)


def test_breakdown_view_counts_and_percent_of_unexpected(con):
    rows = ([_interruption(i, "r1", "Faulty GPU") for i in range(3)]
            + [_interruption(3, "r1", "SSD")]
            + [_interruption(4, "r1", "Planned Maintenance", planned=True)]
            + [_interruption(5, "r2", "CPU")])
    cols = ", ".join(table("interruptions").column_names[:17])  # extensions after them stay NULL
    con.executemany(f"INSERT INTO interruptions ({cols}) VALUES ({', '.join('?' * 17)})",
                    rows)
    got = {(r, c): (n, p) for r, c, n, p in con.execute(
        "SELECT run, component, interruptions, percent FROM breakdown").fetchall()}
    assert got[("r1", "Faulty GPU")] == (3, 75.0)
    assert got[("r1", "SSD")] == (1, 25.0)
    assert got[("r1", "Planned Maintenance")] == (1, None)
    assert got[("r1", "CPU")] == (0, 0.0)
    assert got[("r2", "CPU")] == (1, 100.0)
    # every taxonomy row, for every run
    assert len(got) == 2 * len(load_taxonomy().components)
    total = con.execute("SELECT run, sum(percent) FROM breakdown GROUP BY run "
                        "ORDER BY run").fetchall()
    assert total == [("r1", 100.0), ("r2", 100.0)]


def test_identifiers_are_quoted():
    assert ddl.quote_ident('user') == '"user"'
    assert ddl.quote_ident('a"b') == '"a""b"'
