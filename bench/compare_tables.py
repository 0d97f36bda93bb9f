"""Do two faultline databases built from the same corpus hold the same tables?

    python bench/compare_tables.py BEFORE.duckdb AFTER.duckdb [--show 5]

A speed change must not change an answer: this compares every table
:mod:`faultline.schemas.tables` defines, row for row (each table's rows sorted as
text), between a database the old code wrote and one the new code wrote from the same
files. ``files.parsed_with`` is left out: it holds a hash of the parsing code, which
differs by design whenever the code does (the very thing being compared). Prints one
line per table and the first differing rows; exit 0 when all tables are equal, 1 when
any differs, 2 when a database cannot be opened.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb

from faultline.schemas.tables import TABLES

# Columns whose value depends on the code's own bytes, not on the corpus.
CODE_DEPENDENT = {"files": ("parsed_with",),
                  # hashes of the code that parsed and decided (pipeline/ingest_state.py)
                  "ingest_state": ("inputs", "parsed_with", "rebuild")}


def table_rows(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    """Every row of ``table`` as text, sorted (the code-dependent columns left out)."""
    cols = [c for c, in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "ORDER BY ordinal_position", [table]).fetchall()
        if c not in CODE_DEPENDENT.get(table, ())]
    if not cols:
        return []
    select = ", ".join(f'"{c}"' for c in cols)
    # names from the schema module and the database's own catalog, never from input
    query = f'SELECT {select} FROM "{table}"'  # noqa: S608
    return sorted(map(str, con.execute(query).fetchall()))


def snapshot(db: Path) -> dict[str, list[str]]:
    """``{table: sorted rows}`` for every table of the schema."""
    with duckdb.connect(str(db), read_only=True) as con:
        return {t.name: table_rows(con, t.name) for t in TABLES}


def differences(a: dict[str, list[str]], b: dict[str, list[str]]
                ) -> dict[str, tuple[list[str], list[str]]]:
    """Per differing table: (rows only in ``a``, rows only in ``b``), as multisets."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for name in sorted(set(a) | set(b)):
        ra, rb = a.get(name, []), b.get(name, [])
        if ra == rb:
            continue
        only_a, only_b = _minus(ra, rb), _minus(rb, ra)
        out[name] = (only_a, only_b)
    return out


def _minus(xs: list[str], ys: list[str]) -> list[str]:
    """Multiset difference of two sorted lists."""
    out, j = [], 0
    for x in xs:
        while j < len(ys) and ys[j] < x:
            j += 1
        if j < len(ys) and ys[j] == x:
            j += 1
        else:
            out.append(x)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--show", type=int, default=5, help="differing rows shown per table")
    args = ap.parse_args(argv)
    try:
        a, b = snapshot(args.before), snapshot(args.after)
    except (duckdb.Error, OSError) as exc:
        print(f"cannot read: {exc}", file=sys.stderr)
        return 2
    diff = differences(a, b)
    for name in sorted(a):
        mark = "DIFFERS" if name in diff else "same"
        print(f"{name}: {len(a[name])} / {len(b.get(name, []))} rows, {mark}")
    for name, (only_a, only_b) in diff.items():
        for row in only_a[:args.show]:
            print(f"  {name} only in before: {row[:300]}")
        for row in only_b[:args.show]:
            print(f"  {name} only in after:  {row[:300]}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
