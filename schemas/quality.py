"""The data-quality suites, derived from the table declarations and the taxonomy.

Nothing here names a column rule by hand that :mod:`faultline.schemas.tables` already
states: every non-nullable column gets a not-NULL expectation, every closed vocabulary
(``Column.values``) an in-set one, every ``minimum``/``maximum`` a range one, and every
``key`` a uniqueness one (most needed where ``enforce_key=False``: DuckDB does not
enforce those keys, so this suite is the only guard against duplicate events). The
rules that span tables (line accounting, taxonomy pairs, GPU indexes, breakdown
reconciliation, references between tables) are written once below.

A suite is described as plain data (:class:`Dataset`, :class:`Expect`): the SQL that
prepares a dataframe from DuckDB and the Great Expectations (GX Core 1.x) expectations
that decide whether it passes. SQL only prepares data (projections, joins, per-file or
per-run aggregates); every pass/fail verdict comes from a GX expectation. Keeping the
description free of GX means this module imports quickly (``great_expectations`` takes
seconds to import and is imported only by :func:`build_suite`, called by ``faultline
check``), and tests can inspect the suites without GX. The SQL is built from
identifiers declared in ``schemas/`` only (quoted with
:func:`~faultline.schemas.ddl.quote_ident`), never from input: hence its ``noqa: S608``.

GX Core references:
https://docs.greatexpectations.io/docs/reference/dividing_data_assets_into_batches
(ExpectationSuite and add_expectation),
https://docs.greatexpectations.io/docs/reference/api/expectations/row_conditions/Column_class
and https://docs.greatexpectations.io/docs/core/customize_expectations/expectation_conditions/
(row conditions restrict an expectation to some rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from faultline.schemas.ddl import quote_ident
from faultline.schemas.tables import TABLES, VIEWS, Column, Table, View
from faultline.schemas.taxonomy import Taxonomy, load_taxonomy

if TYPE_CHECKING:  # pragma: no cover - typing only
    import great_expectations as gx

#: Sums of unrounded percentages differ from 100 by float rounding only.
PERCENT_TOLERANCE = 1e-6


@dataclass(frozen=True)
class When:
    """A row condition: the expectation applies to rows where ``column op value``.

    ``op`` is one of ``==``, ``!=``, ``>``."""

    column: str
    op: str
    value: Any = None


@dataclass(frozen=True)
class Expect:
    """One GX expectation: its class in ``great_expectations.expectations``, its
    arguments, and the sentence a person reads when it fails."""

    expectation: str
    kwargs: dict[str, Any]
    description: str
    when: When | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns the expectation looks at, in GX's argument order."""
        kw = self.kwargs
        if "column" in kw:
            return (kw["column"],)
        if "column_list" in kw:
            return tuple(kw["column_list"])
        return tuple(kw[k] for k in ("column_A", "column_B") if k in kw)


@dataclass(frozen=True)
class Dataset:
    """A dataframe to validate: the SQL that prepares it and what it must satisfy.

    ``table`` is the table or view a failure is reported against; ``row_id`` are the
    columns that identify an offending row in the report. ``whole`` datasets are
    validated in one piece because their expectations compare rows with each other
    (uniqueness); the others may be validated chunk by chunk, which keeps memory
    bounded on tables of millions of rows."""

    name: str
    table: str
    sql: str
    expectations: tuple[Expect, ...]
    row_id: tuple[str, ...]
    whole: bool = False


# --- expectations derived from column declarations ------------------------------------


def column_expectations(owner: Table | View, col: Column) -> list[Expect]:
    """What ``tables.py`` says about one column, as expectations."""
    name = f"{owner.name}.{col.name}"
    out: list[Expect] = []
    if not col.nullable:
        out.append(Expect("ExpectColumnValuesToNotBeNull", {"column": col.name},
                          f"{name} is never NULL"))
    if col.values is not None:
        where = f" (see {col.values_source})" if col.values_source else ""
        out.append(Expect("ExpectColumnValuesToBeInSet",
                          {"column": col.name, "value_set": list(col.values)},
                          f"{name} is one of its {len(col.values)} documented values"
                          f"{where}"))
    if col.minimum is not None or col.maximum is not None:
        if col.maximum is None:
            text = f"{name} is at least {col.minimum:g}"
        elif col.minimum is None:
            text = f"{name} is at most {col.maximum:g}"
        else:
            text = f"{name} is between {col.minimum:g} and {col.maximum:g}"
        out.append(Expect("ExpectColumnValuesToBeBetween",
                          {"column": col.name, "min_value": col.minimum,
                           "max_value": col.maximum}, text))
    return out


def _events_rules(tax: Taxonomy) -> list[Expect]:
    return [
        Expect("ExpectColumnValuesToNotBeNull", {"column": "ts"},
               "events.ts is set unless ts_quality is 'untimed'",
               When("ts_quality", "!=", "untimed")),
        Expect("ExpectColumnValuesToBeNull", {"column": "ts"},
               "events.ts is NULL when ts_quality is 'untimed'",
               When("ts_quality", "==", "untimed")),
        Expect("ExpectColumnPairValuesAToBeGreaterThanB",
               {"column_A": "line_end", "column_B": "line_no", "or_equal": True},
               "events.line_end is not before line_no"),
    ]


def _attempts_rules(tax: Taxonomy) -> list[Expect]:
    return [Expect("ExpectColumnPairValuesAToBeGreaterThanB",
                   {"column_A": "ended_at", "column_B": "started_at", "or_equal": True,
                    "ignore_row_if": "either_value_is_missing"},
                   "attempts.ended_at is not before started_at")]


def _taxonomy_rules(table: str, tax: Taxonomy) -> list[Expect]:
    """``component`` and ``category`` of ``table`` are a pair of the shipped taxonomy."""
    return [
        Expect("ExpectColumnValuesToBeInSet",
               {"column": "component", "value_set": list(tax.component_names)},
               f"{table}.component is a taxonomy component (v{tax.version})"),
        Expect("ExpectColumnValuesToBeInSet",
               {"column": "category",
                "value_set": sorted({c.category for c in tax.components})},
               f"{table}.category is a taxonomy category"),
        Expect("ExpectColumnPairValuesToBeInSet",
               {"column_A": "component", "column_B": "category",
                "value_pairs_set": [[c.component, c.category] for c in tax.components]},
               f"{table}.category is the taxonomy's category of its component"),
    ]


def _interruptions_rules(tax: Taxonomy) -> list[Expect]:
    return [*_taxonomy_rules("interruptions", tax), Expect(
        "ExpectColumnPairValuesToBeInSet",
        {"column_A": "component", "column_B": "planned",
         "value_pairs_set": [[c.component, c.kind == "planned"] for c in tax.components]},
        "interruptions.planned is true exactly for Planned Maintenance")]


#: Row-level rules a column declaration cannot state (several columns, the taxonomy).
SEMANTIC_RULES: dict[str, Callable[[Taxonomy], list[Expect]]] = {
    "events": _events_rules,
    "attempts": _attempts_rules,
    "interruptions": _interruptions_rules,
    "components": lambda tax: _taxonomy_rules("components", tax),
}


def _when_columns(expects: list[Expect]) -> set[str]:
    return {e.when.column for e in expects if e.when is not None}


def _row_id(owner: Table | View) -> tuple[str, ...]:
    """The key, plus where the row was read from (path, line) when the table says."""
    extra = tuple(c for c in ("path", "line_no") if c in owner.column_names
                  and c not in owner.key)
    return (*owner.key, *extra)


def table_dataset(owner: Table | View, tax: Taxonomy) -> Dataset:
    """Every column rule of one table or view, over only the columns they need."""
    expects = [e for col in owner.columns for e in column_expectations(owner, col)]
    expects += SEMANTIC_RULES.get(owner.name, lambda _tax: [])(tax)
    needed = {c for e in expects for c in e.columns} | _when_columns(expects)
    row_id = _row_id(owner)
    cols = tuple(c for c in owner.column_names if c in needed or c in row_id)
    sql = (f"SELECT {', '.join(quote_ident(c) for c in cols)} "  # noqa: S608
           f"FROM {quote_ident(owner.name)}")
    return Dataset(owner.name, owner.name, sql, tuple(expects), row_id)


def key_dataset(owner: Table | View) -> Dataset:
    """Rows whose key occurs more than once, for a GX uniqueness expectation.

    Uniqueness compares every row with every other, so it cannot be validated chunk by
    chunk, and a whole key column of a table of millions of rows does not belong in
    memory. SQL therefore narrows the table to the rows whose key is repeated (a
    GROUP BY ... HAVING count(*) > 1): empty on a sound database, and the GX
    expectation over it fails, naming the duplicates, exactly when the key is not
    unique."""
    key = owner.key
    q = [quote_ident(k) for k in key]
    on = " AND ".join(f"t.{k} IS NOT DISTINCT FROM d.{k}" for k in q)
    name = quote_ident(owner.name)
    sql = (f"SELECT {', '.join('t.' + k for k in q)} FROM {name} t JOIN "  # noqa: S608
           f"(SELECT {', '.join(q)} FROM {name} GROUP BY ALL HAVING count(*) > 1) d "
           f"ON {on}")
    text = f"{owner.name} has one row per {', '.join(key)}"
    if len(key) == 1:
        exp = Expect("ExpectColumnValuesToBeUnique", {"column": key[0]}, text)
    else:
        exp = Expect("ExpectCompoundColumnsToBeUnique", {"column_list": list(key)}, text)
    return Dataset(f"{owner.name} key", owner.name, sql, (exp,), key, whole=True)


# --- rules across tables ---------------------------------------------------------------

_ACCOUNTING_SQL = """
WITH spans AS (
    SELECT path, line_no, line_end,
           max(line_end) OVER (PARTITION BY path ORDER BY line_no, line_end
                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM events
),
covered AS (  -- lines of the union of the events' line_no..line_end ranges
    SELECT path, sum(greatest(0, line_end - greatest(line_no - 1, coalesce(reach, 0))))
               AS covered_lines,
           count(*) AS events, max(line_end) AS last_event_line
    FROM spans GROUP BY path
),
rejected AS (
    SELECT path, count(DISTINCT line_no) AS rejected_lines, count(*) AS rejects,
           max(line_no) AS last_reject_line
    FROM rejects GROUP BY path
)
SELECT f.path, f.lines, f.routine_lines + f.event_lines + f.reject_lines AS accounted_lines,
       f.event_lines, CAST(coalesce(c.covered_lines, 0) AS BIGINT) AS covered_lines,
       f.reject_lines, coalesce(r.rejected_lines, 0) AS rejected_lines,
       coalesce(c.events, 0) + coalesce(r.rejects, 0) AS rows_read,
       greatest(c.last_event_line, r.last_reject_line) AS last_line_read,
       f.duplicate_of IS NOT NULL AS is_duplicate
FROM files f LEFT JOIN covered c USING (path) LEFT JOIN rejected r USING (path)
"""


def accounting_dataset() -> Dataset:
    """Per file: its lines add up, and match the events and rejects stored for it.

    What the pipeline guarantees (``pipeline/records.py`` ``FileParse``, written by
    ``pipeline/fileparse.py``): ``event_lines`` is the number of lines covered by the
    union of the file's events' ``line_no..line_end``, ``reject_lines`` the number of
    distinct rejected lines, and ``routine_lines`` the rest; ``pipeline/load.py`` gives
    a duplicate file ``event_lines = reject_lines = 0`` and deletes its events and
    rejects."""
    e = [
        Expect("ExpectColumnPairValuesToBeEqual",
               {"column_A": "lines", "column_B": "accounted_lines"},
               "files.lines = routine_lines + event_lines + reject_lines"),
        Expect("ExpectColumnPairValuesToBeEqual",
               {"column_A": "event_lines", "column_B": "covered_lines"},
               "files.event_lines = lines covered by the file's events "
               "(union of line_no..line_end)"),
        Expect("ExpectColumnPairValuesToBeEqual",
               {"column_A": "reject_lines", "column_B": "rejected_lines"},
               "files.reject_lines = distinct lines of the file in rejects"),
        Expect("ExpectColumnPairValuesAToBeGreaterThanB",
               {"column_A": "lines", "column_B": "last_line_read", "or_equal": True,
                "ignore_row_if": "either_value_is_missing"},
               "events and rejects lie within their file's lines"),
        Expect("ExpectColumnValuesToBeBetween",
               {"column": "rows_read", "min_value": 0, "max_value": 0},
               "a duplicate file (duplicate_of set) has no events or rejects",
               When("is_duplicate", "==", True)),
    ]
    return Dataset("files line accounting", "files", _ACCOUNTING_SQL, tuple(e), ("path",))


_RECONCILIATION_SQL = """
WITH i AS (
    SELECT run, count(*) AS interruptions, count(*) FILTER (WHERE NOT planned) AS unexpected
    FROM interruptions GROUP BY run
),
b AS (
    SELECT run, sum(interruptions) AS breakdown_interruptions, sum(percent) AS percent_sum
    FROM breakdown GROUP BY run
)
SELECT run, coalesce(i.interruptions, 0) AS interruptions,
       CAST(coalesce(b.breakdown_interruptions, 0) AS BIGINT) AS breakdown_interruptions,
       coalesce(i.unexpected, 0) AS unexpected, b.percent_sum
FROM i FULL JOIN b USING (run)
"""


def reconciliation_dataset() -> Dataset:
    """Per run: the breakdown view accounts for every interruption, and its
    percentages (of unexpected interruptions) add up to 100."""
    e = [
        Expect("ExpectColumnPairValuesToBeEqual",
               {"column_A": "interruptions", "column_B": "breakdown_interruptions"},
               "per run, the breakdown's interruptions add up to the run's interruptions"),
        Expect("ExpectColumnValuesToBeBetween",
               {"column": "percent_sum", "min_value": 100 - PERCENT_TOLERANCE,
                "max_value": 100 + PERCENT_TOLERANCE},
               "per run with unexpected interruptions, breakdown percents sum to 100",
               When("unexpected", ">", 0)),
        Expect("ExpectColumnValuesToBeNull", {"column": "percent_sum"},
               "a run without unexpected interruptions has no percentages",
               When("unexpected", "==", 0)),
    ]
    return Dataset("breakdown reconciliation", "breakdown", _RECONCILIATION_SQL, tuple(e),
                   ("run",))


def planned_percent_dataset() -> Dataset:
    """Planned Maintenance rows of the breakdown carry no percent (it is a share of
    unexpected interruptions only)."""
    sql = ("SELECT b.run, b.component, b.percent FROM breakdown b "
           "JOIN components c USING (component) WHERE c.kind = 'planned'")
    e = Expect("ExpectColumnValuesToBeNull", {"column": "percent"},
               "breakdown.percent is NULL for Planned Maintenance")
    return Dataset("breakdown planned rows", "breakdown", sql, (e,), ("run", "component"))


_INVENTORY_CTE = """
WITH inv AS (
    SELECT host, max(TRY_CAST(attrs->>'index' AS INTEGER)) AS max_index
    FROM events WHERE kind = 'gpu_inventory' GROUP BY host
)
"""


def gpu_dataset(table: str, host: str, gpu: str, row_id: tuple[str, ...]) -> Dataset:
    """GPU indexes a table names are within the host's inventory (0..its largest
    index; a host without an inventory dump is held to the largest index of any host,
    and nothing is checked where there is no inventory at all)."""
    ids = ", ".join(f"r.{quote_ident(c)}" for c in row_id if c not in (host, gpu))
    pick = f"{ids}, " if ids else ""
    sql = (f"{_INVENTORY_CTE}SELECT {pick}r.{quote_ident(host)} AS host, "  # noqa: S608
           f"r.{quote_ident(gpu)} AS gpu, count(*) AS n_rows, "
           "coalesce(inv.max_index, (SELECT max(max_index) FROM inv)) AS inventory_max_index "
           f"FROM {quote_ident(table)} r LEFT JOIN inv ON inv.host = r.{quote_ident(host)} "
           f"WHERE r.{quote_ident(gpu)} IS NOT NULL GROUP BY ALL")
    e = Expect("ExpectColumnPairValuesAToBeGreaterThanB",
               {"column_A": "inventory_max_index", "column_B": "gpu", "or_equal": True,
                "ignore_row_if": "either_value_is_missing"},
               f"{table}.{gpu} is a GPU index in {table}.{host}'s inventory")
    rid = (*(c for c in row_id if c not in (host, gpu)), "host", "gpu")
    return Dataset(f"{table} {gpu} in inventory", table, sql, (e,), rid)


@dataclass(frozen=True)
class Reference:
    """``child.columns`` name a row of ``parent`` (matched on ``parent_columns``)."""

    child: str
    columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]
    description: str


REFERENCES: tuple[Reference, ...] = (
    Reference("events", ("path",), "files", ("path",),
              "every event's path is a file in files"),
    Reference("rejects", ("path",), "files", ("path",),
              "every reject's path is a file in files"),
    Reference("files", ("duplicate_of",), "files", ("path",),
              "files.duplicate_of names a file in files"),
    Reference("interruptions", ("run", "job_id"), "attempts", ("run", "job_id"),
              "every interruption's run and job_id are an attempt in attempts"),
    Reference("interruptions", ("root_event_id",), "events", ("event_id",),
              "interruptions.root_event_id names an event in events"),
    Reference("interruption_evidence", ("interruption_id",), "interruptions",
              ("interruption_id",),
              "interruption_evidence.interruption_id names an interruption"),
    Reference("interruption_evidence", ("event_id",), "events", ("event_id",),
              "interruption_evidence.event_id names an event in events"),
)


def reference_dataset(ref: Reference) -> Dataset:
    """The distinct values a child table refers by, each with whether the parent has
    them (SQL's EXISTS keeps this a semi-join: the parent is never read into memory);
    GX then expects every one to be found."""
    found = f"in_{ref.parent}"
    c = [quote_ident(x) for x in ref.columns]
    p = [quote_ident(x) for x in ref.parent_columns]
    match = " AND ".join(f"p.{pc} = c.{cc}" for pc, cc in zip(p, c, strict=True))
    sql = (f"SELECT {', '.join('c.' + x for x in c)}, EXISTS (SELECT 1 FROM "  # noqa: S608
           f"{quote_ident(ref.parent)} p WHERE {match}) AS {quote_ident(found)} "
           f"FROM (SELECT DISTINCT {', '.join(c)} FROM {quote_ident(ref.child)} "
           f"WHERE {' AND '.join(x + ' IS NOT NULL' for x in c)}) c")
    e = Expect("ExpectColumnValuesToBeInSet", {"column": found, "value_set": [True]},
               ref.description)
    name = f"{ref.child}.{'/'.join(ref.columns)} -> {ref.parent}"
    return Dataset(name, ref.child, sql, (e,), ref.columns)


# --- the suites ------------------------------------------------------------------------


def datasets(tax: Taxonomy | None = None) -> tuple[Dataset, ...]:
    """Every dataset ``faultline check`` validates, in report order."""
    tax = tax or load_taxonomy()
    out: list[Dataset] = []
    for owner in (*TABLES, *VIEWS):
        out.append(table_dataset(owner, tax))
        if owner.key:
            out.append(key_dataset(owner))
    out.append(accounting_dataset())
    out.append(gpu_dataset("events", "host", "gpu_index", ("event_id",)))
    out.append(gpu_dataset("interruptions", "culprit_host", "culprit_gpu",
                           ("interruption_id",)))
    out.append(gpu_dataset("interruptions", "surfaced_host", "surfaced_gpu",
                           ("interruption_id",)))
    out.append(reconciliation_dataset())
    out.append(planned_percent_dataset())
    out.extend(reference_dataset(r) for r in REFERENCES)
    return tuple(out)


def expectation_count(ds: tuple[Dataset, ...]) -> int:
    return sum(len(d.expectations) for d in ds)


def _condition(when: When) -> Any:
    """A GX Core row condition (``great_expectations.expectations.row_conditions``)."""
    from great_expectations.expectations.row_conditions import Column as GXColumn

    col = GXColumn(when.column)
    ops = {"==": col.__eq__, "!=": col.__ne__, ">": col.__gt__}
    return ops[when.op](when.value)


def gx_expectations(d: Dataset) -> Iterator[gx.expectations.Expectation]:
    """The dataset's expectations as GX objects; ``meta["index"]`` maps results back."""
    import great_expectations as gx

    for i, e in enumerate(d.expectations):
        cls = getattr(gx.expectations, e.expectation)
        extra: dict[str, Any] = {}
        if e.when is not None:
            extra["row_condition"] = _condition(e.when)
        yield cls(**e.kwargs, **extra, description=e.description, meta={"index": i})


def build_suite(d: Dataset) -> gx.ExpectationSuite:
    """The GX ExpectationSuite of one dataset (imports GX: call only from check)."""
    import great_expectations as gx

    return gx.ExpectationSuite(name=d.name, expectations=list(gx_expectations(d)))
