"""``faultline watch`` on the command line: flags, output and the test hook.

The loop and what it prints are :mod:`faultline.watch`; this module only parses flags
the way ``faultline ingest`` does and writes the records (see docs/watch.md).
"""

from __future__ import annotations

import os
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfoNotFoundError

import typer
from rich.markup import escape

from faultline.cli import DbOption, _site_rules, _source_options, _zone_option
from faultline.console import EXIT_USAGE, err, fail
from faultline.ingest_cli import PAUSE_ENV, plain_error


class WatchFormat(StrEnum):
    text = "text"
    jsonl = "jsonl"


def watch(
    corpus: Annotated[list[Path], typer.Argument(help="Corpus directories or files.")],
    db: DbOption,
    interval: Annotated[float, typer.Option(
        min=0.0, metavar="S", help="Seconds from one cycle's start to the next.")] = 5.0,
    format: Annotated[WatchFormat, typer.Option(
        "--format", help="text for a terminal; jsonl: one JSON object per line "
        "(kind: interruption or revision) and nothing else on stdout.")]
    = WatchFormat.text,
    tz: Annotated[str | None, typer.Option(
        callback=_zone_option, help="Zone of times that carry none (as for ingest).")]
    = None,
    year: Annotated[int | None, typer.Option(metavar="YYYY",
                                             help="Year for syslog lines without one.")]
    = None,
    run: Annotated[str | None, typer.Option(help="Rebuild this run's interruptions "
                                            "only (as for ingest).")] = None,
    rules: Annotated[list[Path] | None, typer.Option(
        "--rules", help="A site's kernel message rules (TOML, repeatable).",
        dir_okay=False)] = None,
    host_from_path: Annotated[str | None, typer.Option(
        help="Regex with a (?P<host>...) group that finds a file's host in its path.")]
    = None,
    json_fields: Annotated[str | None, typer.Option(
        help="Field names of JSON-lines logs (as for ingest).")] = None,
    cycles: Annotated[int | None, typer.Option(
        min=1, metavar="N", help="Stop after N cycles (default: until Ctrl-C).")] = None,
) -> None:
    """Keep ingesting what is new and print each new interruption once it is decided
    (its attempt ended and its run went on): time, run, component, culprit host/GPU,
    the root line and the explain command. A later log that changes a verdict prints a
    revision. Ctrl-C stops it (exit 130); the database keeps every finished cycle.
    See docs/watch.md."""
    import sys

    from faultline.classifiers.weights import WeightsError
    from faultline.pipeline.run import IngestError
    from faultline.watch import Watcher, render_jsonl, render_text

    fields = _source_options("watch", json_fields, host_from_path)
    site_rules = _site_rules(rules or [])
    render = render_jsonl if format is WatchFormat.jsonl else render_text

    def emit(rec: dict[str, Any]) -> None:
        sys.stdout.write(render(rec) + "\n")
        sys.stdout.flush()  # a pager or a hook reads each line as it comes

    def status(text: str) -> None:
        err.print(f"faultline watch: {escape(text)}")

    pause = os.environ.get(PAUSE_ENV)

    def on_phase(name: str) -> None:  # the test hook of ingest (tests/test_watch.py)
        if pause == name:
            os.write(2, f"faultline: paused at {name}\n".encode())
            time.sleep(600)

    watcher = Watcher(corpus, db, emit, tz=tz, year=year, run=run, rules=site_rules,
                      host_from_path=host_from_path, json_fields=fields,
                      on_phase=on_phase if pause else None)
    missing = [c for c in corpus if "://" not in str(c) and not Path(c).exists()]
    if missing:  # before the banner: a typo is one line, not a watch that never starts
        fail("watch", f"{missing[0]}: no such file or directory")
        raise typer.Exit(EXIT_USAGE)
    status(f"watching {', '.join(map(str, corpus))} every {interval:g} s into {db} "
           "(Ctrl-C stops)")
    try:
        watcher.run(interval, status, cycles)
    except (IngestError, ZoneInfoNotFoundError, ValueError, WeightsError) as exc:
        fail("watch", plain_error(exc))
        raise typer.Exit(EXIT_USAGE) from exc
