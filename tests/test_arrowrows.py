"""schemas/arrowrows.py builds what pyarrow's own constructors build from the same
Python values, for every column type of the schema (and raises where they raise)."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from faultline.schemas import arrowrows
from faultline.schemas.tables import TABLES
from faultline.schemas.types import ENGINE_TYPES, LogicalType

VALUES = {
    LogicalType.STRING: ["a", None, "", "ünï\u2028"],
    LogicalType.INT32: [1, None, -(2**31), 2**31 - 1],
    LogicalType.INT64: [1, None, -(2**63), 2**63 - 1],
    LogicalType.FLOAT64: [1.5, None, 2, -0.0],
    LogicalType.BOOL: [True, None, False, True],
    LogicalType.TIMESTAMP: [1_730_700_000_123_456, None, 0, -1],
    LogicalType.JSON: ['{"a": 1}', None, "{}", "[]"],
    LogicalType.INT_LIST: [[1, 2], None, [], [-1]],
}


@pytest.mark.parametrize("kind", list(LogicalType))
def test_a_column_is_what_pyarrow_builds(kind: LogicalType) -> None:
    got = arrowrows.column(VALUES[kind], kind)
    assert got.type == ENGINE_TYPES[kind].arrow
    assert got.equals(pa.array(VALUES[kind], ENGINE_TYPES[kind].arrow))


@pytest.mark.parametrize("kind, bad", [
    (LogicalType.STRING, 1), (LogicalType.INT32, "1"), (LogicalType.INT32, 2**31),
    (LogicalType.BOOL, 1), (LogicalType.TIMESTAMP, "2024-01-01"),
])
def test_a_value_of_another_type_raises(kind: LogicalType, bad: object) -> None:
    with pytest.raises((TypeError, ValueError, OverflowError, pa.ArrowInvalid)):
        arrowrows.column(["ok" if kind is LogicalType.STRING else None, bad], kind)


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_rows_of_every_table_are_from_pylist(table) -> None:
    rows = [{c.name: VALUES[c.type][i] for c in table.columns} for i in range(4)]
    rows[1] = {}  # a row without keys: all null, as from_pylist reads it
    expected = pa.Table.from_pylist(
        rows, schema=pa.schema([f.with_nullable(True) for f in table.arrow_schema]))
    got = arrowrows.rows_table(rows, table)
    assert got.schema == table.arrow_schema
    assert got.to_pylist() == expected.to_pylist()


def test_building_tables_does_not_import_pandas() -> None:
    """The reason the module exists: pyarrow's constructors import pandas."""
    code = ("import sys; from faultline.schemas import arrowrows; "
            "from faultline.schemas.tables import INTERRUPTIONS; "
            "from faultline.schemas.types import LogicalType; "
            "arrowrows.rows_table([{'interruption_id': 'x'}], INTERRUPTIONS); "
            "arrowrows.table({'a': (['x'], LogicalType.STRING)}); "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
