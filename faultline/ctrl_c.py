"""Ctrl-C in every command: one line on stderr and exit 130 (``../shared/INTERFACE.md``),
never click's "Aborted!" nor the traceback of the DuckDB query it interrupted.

:class:`faultline.cli`'s command group wraps each command's callback in
:func:`exit_130_on_ctrl_c` (saying what a command leaves behind, where it is not
nothing: :data:`INTERRUPTED_LEAVES`); ``ingest`` says itself that nothing was written
(:mod:`faultline.ingest_cli`, with :func:`is_ctrl_c`). Nothing here imports DuckDB.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer

from faultline.console import EXIT_INTERRUPTED, fail

# What Ctrl-C leaves behind, where it is not "nothing" (see exit_130_on_ctrl_c).
INTERRUPTED_LEAVES = {
    "simulate": "interrupted; the corpus under --out is incomplete; run again to write it",
    "demo": "interrupted; run faultline demo again to finish",
    "watch": "stopped; the database holds every finished cycle (the one under way was "
             "rolled back)",
}


def query_interrupted(exc: BaseException) -> bool:
    """A Ctrl-C that came during a DuckDB query: DuckDB's Python client interrupts the
    query and raises ``RuntimeError("Query interrupted")`` in place of the
    ``KeyboardInterrupt`` (duckdb 2.0.1; ``InterruptException`` is its own error for
    an interrupt from ``con.interrupt()``). Seen as exit 1 and a traceback when Ctrl-C
    came during ingest's load. Told by type, module and text, so the CLI's import needs
    no DuckDB."""
    if isinstance(exc, RuntimeError) and str(exc) == "Query interrupted":
        return True
    # DuckDB's own errors: its interrupt, and a KeyboardInterrupt raised in the Python
    # a query called (seen: "Python Object ... registered as 'memo_rows' failed:
    # KeyboardInterrupt", a Ctrl-C as the root causes registered an Arrow table)
    return type(exc).__module__.lstrip("_") == "duckdb" and (
        type(exc).__name__ == "InterruptException" or "KeyboardInterrupt" in str(exc))


def is_ctrl_c(exc: BaseException) -> bool:
    """``KeyboardInterrupt``, or the error of a DuckDB query a Ctrl-C interrupted."""
    return isinstance(exc, KeyboardInterrupt) or query_interrupted(exc)


def exit_130_on_ctrl_c(name: str, callback: Callable[..., Any]) -> Callable[..., Any]:
    """Every command: Ctrl-C is one line and exit 130, not click's "Aborted!" and 1,
    nor the traceback of the DuckDB query it interrupted (:func:`query_interrupted`).
    (``ingest`` says it itself: it knows that nothing was written.)"""

    def interrupted() -> typer.Exit:
        fail(name, INTERRUPTED_LEAVES.get(name, "interrupted"))
        return typer.Exit(EXIT_INTERRUPTED)

    @functools.wraps(callback)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except BaseException as exc:
            if is_ctrl_c(exc):
                raise interrupted() from None
            raise

    return guarded
