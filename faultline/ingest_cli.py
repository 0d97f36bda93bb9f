"""``faultline ingest`` at the console: a progress bar per phase while it runs, then
the summary line and the warnings a run can end with (stderr), its errors as one line
and exit 2, Ctrl-C as exit 130 with nothing written. ``faultline watch`` reads its
errors the same way (:func:`plain_error`). The work itself is
:func:`faultline.pipeline.run.ingest`, imported only when a command runs it.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from pathlib import Path
from zoneinfo import ZoneInfoNotFoundError

import typer
from rich.markup import escape
from rich.progress import Progress, TaskID

from faultline.console import EXIT_INTERRUPTED, EXIT_USAGE, err, fail, progress
from faultline.ctrl_c import is_ctrl_c

# Ctrl-C during an ingest: its transaction is rolled back
INTERRUPTED = "interrupted; nothing was written; run again to finish"
# Test hook: the ingest pauses (sleeps) as the named phase starts, so a test can send
# SIGINT inside that phase (tests/test_interrupt.py). Unset, it changes nothing.
PAUSE_ENV = "FAULTLINE_TEST_PAUSE_AT"
PHASE_LABELS = {"discover": "discover: finding files", "parse": "parse: reading files",
                "load": "load: writing DuckDB", "root causes": "root causes: deciding"}


def phase_bars(bar: Progress) -> tuple[Callable[[str], None], Callable[[int, int], None],
                                        Callable[[], None]]:
    """Callbacks that keep one bar per ingest phase: a phase's bar is completed (100%)
    when the next phase starts, and the last one when ``finish`` is called."""
    tasks: dict[str, TaskID] = {}
    pause = os.environ.get(PAUSE_ENV)

    def finish() -> None:
        for task in tasks.values():
            t = bar.tasks[task]
            total = t.total or 1
            bar.update(task, total=total, completed=total)

    def on_phase(name: str) -> None:
        finish()
        tasks[name] = bar.add_task(PHASE_LABELS.get(name, name), total=None, detail="")
        if pause == name:
            os.write(2, f"faultline: paused at {name}\n".encode())  # past rich's buffers
            time.sleep(600)

    def on_progress(done: int, total: int) -> None:
        task = tasks.get("parse")
        if task is not None:
            bar.update(task, completed=done, total=max(total, 1),
                       detail=f"{done}/{total} files")

    return on_phase, on_progress, finish


def run(corpus: list[Path | str], db: Path, **kw) -> None:
    """Ingest with one progress bar per phase and print the summary line."""
    try:
        from faultline.classifiers.weights import WeightsError
        from faultline.pipeline.run import IngestError
        from faultline.pipeline.run import ingest as run_ingest

        # the imported modules' objects live as long as the process: no collection
        # need walk them (0.2-0.35 CPU s of a first ingest's collections, measured)
        gc.freeze()
        with progress(transient=False) as bar:
            on_phase, on_progress, finish = phase_bars(bar)
            summary = run_ingest(corpus, db, **kw, progress=on_progress, on_phase=on_phase)
            finish()
    except (IngestError, ZoneInfoNotFoundError, ValueError, WeightsError) as exc:
        # WeightsError: the shipped text-model weights are missing or stale (unreadable
        # input of faultline's own); nothing is written, the message says how to rebuild
        fail("ingest", plain_error(exc))
        raise typer.Exit(EXIT_USAGE) from exc
    except BaseException as exc:  # checked after the errors above: a Ctrl-C during a
        if is_ctrl_c(exc):  # query is a RuntimeError, and so is a WeightsError
            fail("ingest", INTERRUPTED)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        raise
    typer.echo(summary.line())
    if summary.zone_warning:
        err.print(f"[yellow]warning:[/] {escape(summary.zone_warning)}")
    if (runs_line := summary.runs_line()) is not None:
        typer.echo(runs_line)
    if summary.overrides_changed:
        err.print(f"{summary.overrides_changed} overrides added or changed from the file; "
                  "they are kept until faultline overrides remove")
    if summary.overrides_unknown:
        err.print(f"[yellow]warning:[/] {len(summary.overrides_unknown)} overrides name no "
                  "interruption (kept; see faultline overrides list): "
                  + escape(", ".join(summary.overrides_unknown[:10]))
                  + (" ..." if len(summary.overrides_unknown) > 10 else ""))
    if summary.problems:
        err.print(f"[yellow]warning:[/] {summary.problems} files could not be read whole "
                  "or were not followed; files.problem says why for each")
    for host, skew, jobs in summary.skewed_clocks:
        err.print(f"[yellow]warning:[/] {escape(host)}'s clock runs {abs(skew) / 3600:.1f} h "
                  f"{'ahead of' if skew > 0 else 'behind'} the other hosts' (its job logs "
                  f"against Slurm's start times, {jobs} jobs): its events may fall outside "
                  "their interruptions; see the host_clock_offsets view")


def plain_error(exc: BaseException) -> str:
    """An error's message without library wording: pydantic's "Value error, " prefix
    and "For further information visit ..." trailer, its "1 validation error for X"
    header; what is left is the sentence faultline wrote."""
    lines = [ln.strip() for ln in str(exc).splitlines()
             if ln.strip() and not ln.strip().startswith("For further information")]
    return " ".join(ln.removeprefix("Value error, ") for ln in lines)
