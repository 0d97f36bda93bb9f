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
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a type is first asked for: start-up stays light
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
    """How one logical type is spelled in each engine.

    The Arrow and polars types are named (factory and arguments) and built on first
    access, so that importing the schema (every command does) imports neither pyarrow
    nor polars: ``faultline --help``, ``report`` and ``explain`` need neither.
    """

    duckdb: str
    arrow_factory: tuple  # pyarrow function name, then its arguments (a tuple: a nested type)
    polars_factory: tuple  # polars class name, then its arguments (likewise)
    python: type

    @property
    def arrow(self) -> pa.DataType:
        import pyarrow as pa

        return _build(pa, self.arrow_factory)

    @property
    def polars(self) -> pl.DataType:
        import polars as pl

        return _build(pl, self.polars_factory)


def _build(module: object, spec: tuple) -> object:
    """``module.name(*args)``, a tuple argument being a type built the same way
    (``("list_", ("int32",))`` is ``pa.list_(pa.int32())``)."""
    name, *args = spec
    return getattr(module, name)(*(_build(module, a) if isinstance(a, tuple) else a
                                    for a in args))


ENGINE_TYPES: dict[LogicalType, EngineTypes] = {
    LogicalType.STRING: EngineTypes("VARCHAR", ("string",), ("String",), str),
    LogicalType.INT32: EngineTypes("INTEGER", ("int32",), ("Int32",), int),
    LogicalType.INT64: EngineTypes("BIGINT", ("int64",), ("Int64",), int),
    LogicalType.FLOAT64: EngineTypes("DOUBLE", ("float64",), ("Float64",), float),
    LogicalType.BOOL: EngineTypes("BOOLEAN", ("bool_",), ("Boolean",), bool),
    # Python side: epoch microseconds (see module docstring).
    LogicalType.TIMESTAMP: EngineTypes(
        "TIMESTAMPTZ", ("timestamp", "us", "UTC"), ("Datetime", "us", "UTC"), int
    ),
    # JSON objects are stored as text in Arrow/Parquet and typed JSON in DuckDB.
    LogicalType.JSON: EngineTypes("JSON", ("string",), ("String",), str),
    # a list of ranks (collective_hangs): INTEGER[] as INTERFACE.md fixes it
    LogicalType.INT_LIST: EngineTypes("INTEGER[]", ("list_", ("int32",)),
                                      ("List", ("Int32",)), list),
}
