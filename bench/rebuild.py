"""The root-cause phase alone: ``interruptions.rebuild`` on an existing database.

    python bench/rebuild.py DB [--repeat 3] [--statements]

Each repeat runs the rebuild inside a transaction that is rolled back, so ``DB`` is
never changed (use a copy anyway: DuckDB may checkpoint its WAL on open). Prints CPU
(``time.process_time``: DuckDB's worker threads are in this process, so their time
counts) and wall seconds per repeat and the best of them. The ingest's own figure for
the phase also includes the commit, which this does not.

``--explain REGEX`` (with ``--statements``) prints DuckDB's ``EXPLAIN ANALYZE`` of
the statements the expression matches (``--explain 'symptom'``).

``--statements`` wraps the connection once more and prints every SQL statement of one
rebuild with its CPU and wall time (execute plus fetch), heaviest first, so the next
change knows where the phase spends its time. The Python between the statements is
the remainder: total minus the statements' sum.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

from faultline.classifiers import interruptions


class _Timed:
    """A connection that records each statement's time (execute and the fetches that
    follow it). Only what ``rebuild`` calls is forwarded; the rest falls through."""

    def __init__(self, con: duckdb.DuckDBPyConnection, explain: str | None = None) -> None:
        self._con = con
        self._explain = re.compile(explain) if explain else None
        self.times: list[tuple[str, float, float]] = []
        self._last: int | None = None

    def _add(self, sql: str, cpu: float, wall: float) -> None:
        self.times.append((sql, cpu, wall))
        self._last = len(self.times) - 1

    def _more(self, cpu: float, wall: float) -> None:
        if self._last is not None:
            sql, c, w = self.times[self._last]
            self.times[self._last] = (sql, c + cpu, w + wall)

    def execute(self, sql: str, *args: Any) -> _Timed:
        if self._explain and self._explain.search(sql):
            # EXPLAIN ANALYZE runs the statement: an INSERT is not run a second time
            plan = self._con.execute("EXPLAIN ANALYZE " + sql, *args).fetchall()
            print(f"===== {_short(sql)}\n{plan[0][1]}")
            if not sql.lstrip().upper().startswith("SELECT"):
                return self
        c0, w0 = time.process_time(), time.perf_counter()
        self._con.execute(sql, *args)
        self._add(sql, time.process_time() - c0, time.perf_counter() - w0)
        return self

    def executemany(self, sql: str, *args: Any) -> _Timed:
        c0, w0 = time.process_time(), time.perf_counter()
        self._con.executemany(sql, *args)
        self._add(sql, time.process_time() - c0, time.perf_counter() - w0)
        return self

    def _fetch(self, name: str, *args: Any) -> Any:
        c0, w0 = time.process_time(), time.perf_counter()
        out = getattr(self._con, name)(*args)
        self._more(time.process_time() - c0, time.perf_counter() - w0)
        return out

    def fetchall(self) -> Any:
        return self._fetch("fetchall")

    def fetchone(self) -> Any:
        return self._fetch("fetchone")

    def fetchmany(self, n: int = 1) -> Any:
        return self._fetch("fetchmany", n)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def _once(con: Any) -> tuple[float, float]:
    con.execute("BEGIN TRANSACTION")
    c0, w0 = time.process_time(), time.perf_counter()
    try:
        interruptions.rebuild(con)
        return time.process_time() - c0, time.perf_counter() - w0
    finally:
        con.execute("ROLLBACK")


def _short(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()[:110]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("db", type=Path)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--statements", action="store_true",
                   help="time each SQL statement of one more rebuild")
    p.add_argument("--explain", metavar="REGEX",
                   help="with --statements: EXPLAIN ANALYZE the statements it matches")
    args = p.parse_args(argv)
    con = duckdb.connect(str(args.db))
    runs = [_once(con) for _ in range(args.repeat)]
    for i, (cpu, wall) in enumerate(runs):
        print(f"rebuild {i + 1}: cpu {cpu:.3f} s  wall {wall:.3f} s")
    if runs:
        print(f"best: cpu {min(r[0] for r in runs):.3f} s  "
              f"wall {min(r[1] for r in runs):.3f} s")
    if args.statements:
        timed = _Timed(con, args.explain)
        cpu, wall = _once(timed)
        agg: dict[str, list[float]] = {}
        for sql, c, w in timed.times:
            a = agg.setdefault(_short(sql), [0.0, 0.0, 0])
            a[0] += c
            a[1] += w
            a[2] += 1
        print(f"\none rebuild: cpu {cpu:.3f} s wall {wall:.3f} s; statements "
              f"cpu {sum(a[0] for a in agg.values()):.3f} s "
              f"wall {sum(a[1] for a in agg.values()):.3f} s")
        for sql, (c, w, n) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
            print(f"{c:7.3f} {w:7.3f} x{n:<5} {sql}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
