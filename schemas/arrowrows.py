"""Arrow tables from Python values, built through polars.

The driver hands DuckDB a dozen small tables of Python values per ingest (the paths a
re-run plans, the taxonomy, attempts, interruptions, the rebuild's windows...). pyarrow
builds an array from Python objects only after asking whether they are pandas objects,
and asking imports pandas the first time: 0.2 s of the driver's time before the parse
could start, for a library no ingest uses. polars (imported by the driver anyway)
builds the same arrays without it. Types come from :mod:`faultline.schemas.types`, so
each column is what the schema says it is (timestamps: epoch microseconds, as
everywhere on the Python side). Values that do not fit their type raise, as pyarrow's
constructors do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from faultline.schemas.types import ENGINE_TYPES, LogicalType

if TYPE_CHECKING:
    import pyarrow as pa

    from faultline.schemas.tables import Table


def column(values: Sequence[object], kind: LogicalType) -> pa.Array:
    """``values`` (None for null) as an Arrow array of ``kind``'s Arrow type."""
    import polars as pl

    spec = ENGINE_TYPES[kind]
    if kind is LogicalType.TIMESTAMP:  # epoch microseconds
        series = pl.Series(values, dtype=pl.Int64).cast(spec.polars)
    else:
        series = pl.Series(values, dtype=spec.polars)
    return series.to_arrow().cast(spec.arrow)  # polars' large types to the schema's


def table(columns: Mapping[str, tuple[Sequence[object], LogicalType]]) -> pa.Table:
    """A table of the named columns, each ``(values, kind)``, all of one length."""
    import pyarrow as pa

    return pa.Table.from_arrays([column(v, k) for v, k in columns.values()],
                                names=list(columns))


def rows_table(rows: Sequence[Mapping[str, object]], schema: Table) -> pa.Table:
    """``rows`` (dicts by column name; a missing key is null) as a table of
    ``schema``'s Arrow schema, what ``pa.Table.from_pylist(rows, schema=...)`` gives."""
    import pyarrow as pa

    return pa.Table.from_arrays(
        [column([r.get(c.name) for r in rows], c.type) for c in schema.columns],
        schema=schema.arrow_schema)
