"""Naming a run on the command line: ``ingest --run`` and ``report --run``.

A run's stored name is ``user/job name`` (or the job name alone when sacct gives no
user). People type the job name they submitted, so a name that matches no run exactly
but is the job name of exactly one run means that run; a name that fits several, or
none, is an error that lists what the database has (exit 2 at the CLI): a typo must
never be taken for a run with no interruptions, nor cost another run its rows.
"""

from __future__ import annotations

import duckdb

MAX_LISTED = 20  # runs named in an error; the rest are counted


class RunError(ValueError):
    """A --run that names no run, or more than one (exit 2)."""


def known_runs(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int, int]]:
    """(run, attempts, interruptions) for every run, most interruptions first."""
    return con.execute("""
        SELECT a.run, count(*) AS attempts,
               coalesce(any_value(i.n), 0) AS interruptions
        FROM attempts a
        LEFT JOIN (SELECT run, count(*) AS n FROM interruptions GROUP BY run) i USING (run)
        GROUP BY a.run ORDER BY interruptions DESC, attempts DESC, a.run
    """).fetchall()


def _listing(runs: list[tuple[str, int, int]]) -> str:
    shown = [f"{r} ({_n(n, 'interruption')}, {_n(a, 'attempt')})"
             for r, a, n in runs[:MAX_LISTED]]
    more = len(runs) - MAX_LISTED
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def resolve(con: duckdb.DuckDBPyConnection, name: str) -> str:
    """The stored run ``name`` means: itself, or the one run whose job name it is."""
    runs = known_runs(con)
    names = [r for r, _a, _n in runs]
    if name in names:
        return name
    if not runs:
        raise RunError(f"no run named {name!r}: the database has no runs (no sacct or "
                       "slurmctld job records were ingested)")
    fits = [r for r in runs if r[0].rsplit("/", 1)[-1] == name]
    if len(fits) == 1:
        return fits[0][0]
    if fits:
        raise RunError(f"{name!r} is the job name of {len(fits)} runs; name one: "
                       + _listing(fits))
    raise RunError(f"no run named {name!r}; known runs: " + _listing(runs))


def interruption_counts(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int]]:
    """(run, interruptions) for the runs that have any, most first."""
    return con.execute("SELECT run, count(*) FROM interruptions GROUP BY run "
                       "ORDER BY 2 DESC, 1").fetchall()
