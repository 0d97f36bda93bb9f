"""``faultline check``: validate a faultline database with Great Expectations.

The suites are described in :mod:`faultline.schemas.quality` (derived from the table
declarations); this module runs them: DuckDB -> pandas dataframes -> GX Core
validation -> plain :class:`Failure` records the CLI prints.

Why pandas dataframes and not GX's SQL datasource: GX's SQL datasource over DuckDB
fails on every metric in current GX releases, so each dataset is read from DuckDB
(only the columns its expectations need) and handed to GX's pandas datasource as a
dataframe asset with a whole-dataframe batch definition
(https://docs.greatexpectations.io/docs/core/connect_to_data/dataframes/). Tables of
millions of rows are read and validated in chunks of :data:`CHUNK_ROWS` rows so memory
stays bounded; column-map expectations add up across chunks (unexpected counts are
summed, the first offending rows kept). Uniqueness cannot be split that way, so those
datasets are narrowed in SQL first (see :func:`faultline.schemas.quality.key_dataset`).

GX is quiet and leaves nothing behind: an ephemeral Data Context keeps everything in
memory (https://docs.greatexpectations.io/docs/core/introduction/gx_overview/),
analytics are off through ``GX_ANALYTICS_ENABLED=False`` set before the import
(https://docs.greatexpectations.io/docs/reference/usage_statistics/; the pinned 1.24.1
ships no analytics sender at all, the variable keeps it that way should one return),
and the "Calculating Metrics" progress bars are off through the context's
``progress_bars`` setting
(https://github.com/great-expectations/great_expectations/pull/3794). Offending rows
come from the SUMMARY result format with ``unexpected_index_column_names``
(https://docs.greatexpectations.io/docs/core/trigger_actions_based_on_results/choose_a_result_format).
``great_expectations`` takes seconds to import, so it is imported here, inside
functions, and never on the ingest or CLI start-up path.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
from rich.console import Console
from rich.text import Text

from faultline.schemas import quality
from faultline.schemas.quality import Dataset

CHUNK_ROWS = 250_000  # rows per dataframe handed to GX: a few hundred MB at most
SAMPLE_ROWS = 5  # offending rows kept per failed expectation

# Nullable integer columns stay integers (Arrow would turn them into floats with NaN).
_PANDAS_TYPES = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(),
                 pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype()}


class CheckError(Exception):
    """The database could not be checked at all (not a faultline database)."""


@dataclass(frozen=True)
class Failure:
    """One failed expectation, with a sample of the rows that broke it."""

    table: str
    dataset: str
    expectation: str  # GX expectation type, e.g. expect_column_values_to_not_be_null
    columns: tuple[str, ...]
    description: str
    unexpected: int  # offending rows
    checked: int  # rows of the dataset (a row condition may exempt some of them)
    rows: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # GX could not evaluate the expectation


@dataclass(frozen=True)
class CheckReport:
    """The outcome of every suite."""

    expectations: int
    datasets: int
    rows: int  # rows validated, over all datasets
    seconds: float
    failures: list[Failure]

    @property
    def ok(self) -> bool:
        return not self.failures


def _plain(value: Any) -> Any:
    """A value GX hands back, as plain Python (NaN/NaT/NA -> None, numpy -> int/float)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalar
        return _plain(value.item())
    return value


def _gx_context() -> Any:
    """A quiet, in-memory GX Data Context."""
    os.environ["GX_ANALYTICS_ENABLED"] = "False"  # read by GX when it is imported
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


def _frames(con: duckdb.DuckDBPyConnection, d: Dataset, chunk_rows: int
            ) -> Iterator[pd.DataFrame]:
    """The dataset's rows as dataframes: one, or chunks of about ``chunk_rows``."""
    rel = con.sql(d.sql)
    if d.whole:
        yield rel.to_arrow_table().to_pandas(types_mapper=_PANDAS_TYPES.get)
        return
    reader = rel.to_arrow_reader(chunk_rows)
    empty = True
    for batch in reader:
        empty = False
        yield batch.to_pandas(types_mapper=_PANDAS_TYPES.get)
    if empty:  # GX still validates an empty table: every column rule holds
        yield reader.schema.empty_table().to_pandas(types_mapper=_PANDAS_TYPES.get)


def _error(result: Any) -> str | None:
    """The message of an exception GX raised while evaluating, if any."""
    info = result.exception_info or {}
    found = [info] if "raised_exception" in info else list(info.values())
    for item in found:
        if isinstance(item, dict) and item.get("raised_exception"):
            return str(item.get("exception_message") or "GX raised an exception")
    return None


class _Tally:
    """One dataset's expectation results, added up over its chunks."""

    def __init__(self, d: Dataset, sample_rows: int) -> None:
        self.d, self.sample_rows = d, sample_rows
        n = len(d.expectations)
        self.success = [True] * n
        self.unexpected = [0] * n
        self.rows_of: list[list[dict[str, Any]]] = [[] for _ in range(n)]
        self.rows = 0  # rows of the dataset, over all chunks
        self.errors: list[str | None] = [None] * n

    def add(self, validation: Any) -> None:
        for r in validation.results:
            i = int(r.expectation_config.meta["index"])
            res = r.result or {}
            self.success[i] = self.success[i] and bool(r.success)
            self.unexpected[i] += int(res.get("unexpected_count") or 0)
            self.errors[i] = self.errors[i] or _error(r)
            room = self.sample_rows - len(self.rows_of[i])
            if not r.success and room > 0:
                sample = res.get("partial_unexpected_index_list") or [
                    {"value": v} for v in res.get("partial_unexpected_list") or []]
                self.rows_of[i] += [{k: _plain(v) for k, v in row.items()}
                                 for row in sample[:room]]

    def failures(self) -> list[Failure]:
        out = []
        for i, e in enumerate(self.d.expectations):
            if self.success[i]:
                continue
            out.append(Failure(self.d.table, self.d.name, _snake(e.expectation), e.columns,
                               e.description, self.unexpected[i], self.rows,
                               self.rows_of[i], self.errors[i]))
        return out


def _snake(class_name: str) -> str:
    """GX's expectation type for a class name (ExpectColumnX -> expect_column_x)."""
    return "".join("_" + c.lower() if c.isupper() else c for c in class_name).lstrip("_")


def run_checks(con: duckdb.DuckDBPyConnection, *, sample_rows: int = SAMPLE_ROWS,
               chunk_rows: int = CHUNK_ROWS,
               suites: tuple[Dataset, ...] | None = None) -> CheckReport:
    """Validate every dataset of :func:`faultline.schemas.quality.datasets`.

    Each chunk is validated first with GX's BOOLEAN_ONLY result format, about twice
    as fast as SUMMARY (GX's per-expectation bookkeeping dominates on small tables);
    only a chunk that fails is validated again with SUMMARY, for its counts and
    offending rows, so a sound database pays for pass/fail only."""
    start = time.perf_counter()
    suites = quality.datasets() if suites is None else suites
    context = _gx_context()
    batches = (context.data_sources.add_pandas("faultline").add_dataframe_asset("tables")
               .add_batch_definition_whole_dataframe("all rows"))
    quick = {"result_format": "BOOLEAN_ONLY"}
    failures: list[Failure] = []
    rows = 0
    for d in suites:
        suite = context.suites.add(quality.build_suite(d))
        tally = _Tally(d, sample_rows)
        detail = {"result_format": "SUMMARY", "partial_unexpected_count": sample_rows,
                  "unexpected_index_column_names": list(d.row_id),
                  "return_unexpected_index_query": False}
        try:
            for frame in _frames(con, d, chunk_rows):
                tally.rows += len(frame)
                batch = batches.get_batch(batch_parameters={"dataframe": frame})
                result = batch.validate(suite, result_format=quick)
                if not result.success:
                    tally.add(batch.validate(suite, result_format=detail))
        except duckdb.Error as exc:
            raise CheckError(f"{d.name}: {exc}") from exc
        rows += tally.rows
        failures += tally.failures()
    return CheckReport(quality.expectation_count(suites), len(suites), rows,
                       time.perf_counter() - start, failures)


def summary_line(report: CheckReport) -> str:
    """One line: how many expectations, how many failed, how long it took."""
    verdict = ("all passed" if report.ok
               else f"{len(report.failures)} failed")
    return (f"faultline check: {report.expectations} expectations on {report.datasets} "
            f"datasets ({report.rows:,} rows): {verdict} in {report.seconds:.1f} s")


def render(report: CheckReport, console: Console) -> None:
    """The summary line, then each failed expectation with its offending rows.

    Lines are printed unwrapped (``soft_wrap``) so paths and ids stay greppable."""
    style = "bold green" if report.ok else "bold red"
    console.print(Text(summary_line(report), style=style), soft_wrap=True)
    for f in report.failures:
        head = Text("FAILED ", style="bold red")
        head.append(f"{f.table}: {f.expectation}({', '.join(f.columns)})", style="bold")
        head.append(f"  {f.unexpected:,} of {f.checked:,} rows")
        console.print(head, soft_wrap=True)
        console.print(Text(f"  {f.description}  (dataset: {f.dataset})"), soft_wrap=True)
        if f.error:
            console.print(Text(f"  error: {f.error}", style="red"), soft_wrap=True)
        for row in f.rows:
            line = "  ".join(f"{k}={v!r}" for k, v in row.items())
            console.print(Text(f"    {line}", style="dim"), soft_wrap=True)
