"""Columns the schema gives a storage compression are stored with it (schemas/ddl.py):
DuckDB's own analysis of long unique text is most of the load's insert and commit."""

from __future__ import annotations

import pytest

from faultline import db
from faultline.schemas import TABLES, ddl
from faultline.schemas.tables import EVENTS

CASES = [  # (column of events, compression it is stored with)
    ("message", "ZSTD"),
    ("attrs", "ZSTD"),
    ("event_id", "ZSTD"),
]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """The compression of each events column, after real rows are checkpointed."""
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
    con.execute("CHECKPOINT")
    got = dict(con.execute("""
        SELECT column_name, any_value(compression) FROM pragma_storage_info('events')
        WHERE segment_type <> 'VALIDITY' GROUP BY ALL""").fetchall())
    con.close()
    return got


@pytest.mark.parametrize(("column", "compression"), CASES)
def test_column_is_stored_with_its_compression(stored, column, compression):
    assert stored[column] == compression


def test_a_column_without_one_is_left_to_duckdb(stored):
    assert stored["kind"] != "ZSTD"


def test_ddl_names_exactly_the_columns_that_have_one():
    for t in TABLES:
        sql = ddl.create_table_sql(t)
        for c in t.columns:
            line = next(ln for ln in sql.splitlines() if ln.strip().startswith(f'"{c.name}"'))
            assert ("USING COMPRESSION" in line) == (c.compression is not None), (t.name, c)
    assert {c.name for c in EVENTS.columns if c.compression} == {n for n, _ in CASES}
