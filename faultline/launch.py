"""The console script's entry: ``faultline ingest``'s fork server starts before the
CLI's own imports.

On a multi-worker ingest the fork server's import of Beam (about 1.2 s on this
project's 2-core machine) is the longest step ahead of the parse
(:mod:`faultline.pipeline.forkserver`). Started by the ``ingest`` command, it came
after the CLI's imports (typer, rich, DuckDB, polars: about 0.35 s); started here, from
a look at the argument list, it begins that much sooner (small x4: at 0.16 s instead
of 0.39-0.59 s). The look is conservative: ``ingest`` and the options the command
takes (:data:`INGEST_OPTIONS`, kept equal to the command's by
``tests/test_launch.py``); anything else (a short option, an unknown one, a
``--workers`` that is not a number) leaves the decision to the command, as before.
The command decides again on its parsed options with the same
:func:`~faultline.pipeline.forkserver.wanted`: it takes the server started here if it
wants one (:func:`take_server`) and stops it otherwise; one never taken (``--help``, a
usage error) is stopped at exit.
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from faultline.pipeline.forkserver import ForkServer

# every option of ``faultline ingest``; each takes a value
INGEST_OPTIONS = frozenset({
    "--db", "--tz", "--year", "--run", "--overrides", "--runner", "--dask-address",
    "--workers", "--beam-opt", "--shards", "--rules", "--host-from-path", "--json-fields",
})
DEFAULT_RUNNER = "DirectRunner"  # ingest's --runner default (the CLI takes it from here)

_started: list[ForkServer] = []  # the server started here, until the command takes it
# the decision made here, keyed by what it was made from (:func:`decided`)
_decision: dict[tuple[tuple[str, ...], str, int | None, tuple[str, ...]], bool] = {}


def ingest_args(argv: Sequence[str]) -> tuple[list[str], str, int | None, list[str]] | None:
    """``(corpus, runner, workers, beam_opts)`` of ``faultline ingest ...`` read from
    ``argv`` (``sys.argv[1:]``), or None when it is not that command or holds anything
    this reading is not sure of."""
    if not argv or argv[0] != "ingest":
        return None
    corpus: list[str] = []
    runner, workers, beam_opts = DEFAULT_RUNNER, None, []
    rest = iter(argv[1:])
    for arg in rest:
        if arg == "--":
            corpus.extend(rest)
            break
        if not arg.startswith("-") or arg == "-":
            corpus.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name not in INGEST_OPTIONS:
            return None  # --help, a short option, a typo: the command will say
        if not eq:
            value = next(rest, None)
            if value is None:
                return None
        if name == "--runner":
            runner = value
        elif name == "--workers":
            try:
                workers = int(value)
            except ValueError:
                return None
        elif name == "--beam-opt":
            beam_opts.append(value)
    return corpus, runner, workers, beam_opts


def decided(corpus: Sequence[str], runner: str, workers: int | None,
            beam_opts: Sequence[str]) -> bool | None:
    """Whether a server was wanted, as decided here for these very options (the
    command, having parsed them, asks before deciding itself: the decision walks the
    corpus's directories, 0.05 s on small x4's 12k files); None if not decided here."""
    return _decision.get((tuple(corpus), runner, workers, tuple(beam_opts)))


def take_server() -> ForkServer | None:
    """The fork server started for this command, now the caller's to stop; or None."""
    return _started.pop() if _started else None


def _stop_untaken() -> None:
    while _started:
        _started.pop().stop()


# the commands that parse a corpus in this process or in its fork server's
PARSING_COMMANDS = frozenset({"ingest", "watch", "demo"})


def main() -> None:
    """Console-script entry point: the allocator's setting and the early server for
    the commands that parse, then the CLI."""
    if sys.argv[1:2] and sys.argv[1] in PARSING_COMMANDS:
        from faultline.pipeline import malloc

        malloc.keep_freed_memory()
    args = ingest_args(sys.argv[1:])
    if args is not None:
        from faultline.pipeline import forkserver

        corpus, runner, workers, beam_opts = args
        wanted = bool(corpus) and forkserver.wanted(runner, workers, beam_opts, corpus)
        _decision[(tuple(corpus), runner, workers, tuple(beam_opts))] = wanted
        if wanted:
            server = forkserver.ForkServer.start()
            if server is not None:
                _started.append(server)
                atexit.register(_stop_untaken)
    from faultline.cli import main as cli_main

    cli_main()
