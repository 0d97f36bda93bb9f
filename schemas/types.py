"""Logical column types and their spelling in every engine faultline talks to.

A table is declared once (see :mod:`faultline.schemas.tables`) with these logical types;
DuckDB DDL, Arrow/Parquet schemas, polars dtypes and the Python types of Beam rows are
all looked up here, so adding an engine means adding one column to this mapping.

Timestamps are always UTC. In Beam rows and Python records they travel as integer
microseconds since the epoch (portable across runners and coders, no tz surprises);
Arrow and DuckDB see them as ``timestamp[us, UTC]`` / ``TIMESTAMPTZ``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import polars as pl
import pyarrow as pa


class LogicalType(StrEnum):
    """The small set of column types faultline's tables use."""

    STRING = "string"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT64 = "float64"
    BOOL = "bool"
    TIMESTAMP = "timestamp"
    JSON = "json"
    INT_LIST = "int_list"


@dataclass(frozen=True)
class EngineTypes:
    """How one logical type is spelled in each engine."""

    duckdb: str
    arrow: pa.DataType
    polars: pl.DataType
    python: type


ENGINE_TYPES: dict[LogicalType, EngineTypes] = {
    LogicalType.STRING: EngineTypes("VARCHAR", pa.string(), pl.String(), str),
    LogicalType.INT32: EngineTypes("INTEGER", pa.int32(), pl.Int32(), int),
    LogicalType.INT64: EngineTypes("BIGINT", pa.int64(), pl.Int64(), int),
    LogicalType.FLOAT64: EngineTypes("DOUBLE", pa.float64(), pl.Float64(), float),
    LogicalType.BOOL: EngineTypes("BOOLEAN", pa.bool_(), pl.Boolean(), bool),
    # Python side: epoch microseconds (see module docstring).
    LogicalType.TIMESTAMP: EngineTypes(
        "TIMESTAMPTZ", pa.timestamp("us", tz="UTC"), pl.Datetime("us", "UTC"), int
    ),
    # JSON objects are stored as text in Arrow/Parquet and typed JSON in DuckDB.
    LogicalType.JSON: EngineTypes("JSON", pa.string(), pl.String(), str),
    # a list of ranks (collective_hangs): INTEGER[] as INTERFACE.md fixes it
    LogicalType.INT_LIST: EngineTypes("INTEGER[]", pa.list_(pa.int32()), pl.List(pl.Int32()),
                                      list),
}
