"""Columns the schema gives a storage compression are stored with it (schemas/ddl.py):
DuckDB's own analysis of long unique text is most of the load's insert and commit."""

from __future__ import annotations

import pytest

from faultline import db
from faultline.schemas import TABLES, ddl

CASES = [  # (table, column, compression it is stored with)
    ("events", "message", "ZSTD"),
    ("events", "attrs", "ZSTD"),
    ("events", "event_id", "ZSTD"),
    ("interruption_evidence", "event_id", "ZSTD"),
]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """The compression of each column of events and interruption_evidence, after real
    rows are checkpointed."""
    path = tmp_path_factory.mktemp("c") / "c.duckdb"
    con = db.connect(path)
    con.execute("""
        INSERT INTO events (event_id, ts_quality, source, kind, message, path, line_no,
                            line_end, sha256, attrs)
        SELECT 'e' || i, 'exact', 'kernel', 'xid',
               'NVRM: Xid (PCI:0000:1b:00): 79, pid=' || i
               || ', GPU has fallen off the bus.',
               '/logs/kern.log', i, i, 'ab', '{"xid": 79, "pid": ' || i || '}'
        FROM range(1, 5000) t(i)
    """)
    con.execute("""
        INSERT INTO interruption_evidence
        SELECT 'llama3-405b:1274608:1717200000000000', 'e' || i, 'symptom'
        FROM range(1, 5000) t(i)
    """)
    con.execute("CHECKPOINT")
    got = {}
    for table in ("events", "interruption_evidence"):
        got |= {(table, column): compression for column, compression in con.execute("""
            SELECT column_name, any_value(compression) FROM pragma_storage_info(?)
            WHERE segment_type <> 'VALIDITY' GROUP BY ALL""", [table]).fetchall()}
    con.close()
    return got


@pytest.mark.parametrize(("table", "column", "compression"), CASES)
def test_column_is_stored_with_its_compression(stored, table, column, compression):
    assert stored[table, column] == compression


def test_a_column_without_one_is_left_to_duckdb(stored):
    assert stored["events", "kind"] != "ZSTD"
    assert stored["interruption_evidence", "interruption_id"] != "ZSTD"


def test_ddl_names_exactly_the_columns_that_have_one():
    for t in TABLES:
        sql = ddl.create_table_sql(t)
        for c in t.columns:
            line = next(ln for ln in sql.splitlines() if ln.strip().startswith(f'"{c.name}"'))
            assert ("USING COMPRESSION" in line) == (c.compression is not None), (t.name, c)
    assert {(t.name, c.name) for t in TABLES for c in t.columns if c.compression} == {
        (t, c) for t, c, _ in CASES}
