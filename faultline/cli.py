"""The ``faultline`` command line: a thin typer layer over the library.

Commands, flags and exit codes are fixed by ``../shared/INTERFACE.md``:
0 success, 1 the run finished but found problems, 2 bad usage or unreadable input.
Each command parses its flags, calls one library function and renders the result;
no work happens here.
"""

from __future__ import annotations

import logging
from enum import StrEnum
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfoNotFoundError

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from faultline import __version__
from faultline import db as fdb

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2

app = typer.Typer(
    name="faultline",
    help="Root causes of GPU training-run interruptions, from a cluster's own logs.\n\n"
    "Ingest kernel, NCCL/PyTorch, Slurm, BMC and trainer logs into DuckDB; group each "
    "cascade into one interruption; classify its root cause; report the Llama 3 "
    "Table 5 breakdown for your cluster.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
)
err = Console(stderr=True, soft_wrap=True)


class OutputFormat(StrEnum):
    table = "table"
    markdown = "markdown"
    csv = "csv"
    json = "json"


class Published(StrEnum):
    llama3 = "llama3"


def _progress() -> Progress:
    """A progress bar on stderr (hidden when stderr is not a terminal)."""
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True,
                    disable=not err.is_terminal)


def _open_read(db: Path):
    """Open an existing database read-only, or exit 2 saying why."""
    import duckdb

    if not db.is_file():
        err.print(f"[bold red]faultline:[/] {db}: no such database (run faultline ingest)")
        raise typer.Exit(EXIT_USAGE)
    try:
        return fdb.connect(db, read_only=True)
    except duckdb.Error as exc:
        err.print(f"[bold red]faultline:[/] {db}: {exc}")
        raise typer.Exit(EXIT_USAGE) from exc


def _version(value: bool) -> None:
    if value:
        typer.echo(f"faultline {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True,
                     help="Print the version and exit."),
    ] = False,
) -> None:
    """faultline: root causes of training interruptions."""


DbOption = Annotated[
    Path, typer.Option("--db", help="DuckDB file to write or read.", dir_okay=False)
]


def _zone_option(value: str | None) -> str | None:
    """``--tz``: any case of a zone's name, ``utc``/``Z``; a typo names close matches."""
    from faultline.pipeline.tzinfer import UnknownZone, normalize_zone

    if value is None:
        return None
    try:
        return normalize_zone(value)
    except UnknownZone as exc:
        raise typer.BadParameter(str(exc)) from exc


@app.command()
def ingest(
    corpus: Annotated[list[Path], typer.Argument(help="Corpus directories or files.")],
    db: DbOption,
    tz: Annotated[str | None, typer.Option(
        callback=_zone_option,
        help="Zone of times that carry none: an IANA name (America/Los_Angeles) or UTC. "
        "Default: inferred from the times that carry a zone (RFC 3339 offsets, UTC "
        "collector stamps against local ones, job starts); UTC when none do; ingest "
        "stops and names the candidates when the corpus is ambiguous.")]
    = None,
    year: Annotated[int | None, typer.Option(help="Year for syslog lines without one "
                                             "(default: inferred from the corpus).")]
    = None,
    run: Annotated[str | None, typer.Option(help="Rebuild this run's interruptions "
                                            "only, keeping every other run's (its name or "
                                            "job name; default: every run).")] = None,
    overrides: Annotated[Path | None, typer.Option(
        help="CSV interruption_id,component,note: operator corrections, stored in the "
        "database and kept across later ingests (see faultline overrides).",
        dir_okay=False)] = None,
    runner: Annotated[str, typer.Option(help="Beam runner name.")] = "DirectRunner",
    workers: Annotated[int, typer.Option(min=1, help="Worker processes "
                                         "(Beam multi-process mode when > 1).")] = 1,
    beam_opt: Annotated[list[str] | None, typer.Option(
        "--beam-opt", help="KEY=VALUE passed to Beam's PipelineOptions (repeatable).")]
    = None,
    shards: Annotated[str | None, typer.Option(
        help="Where workers write Parquet shards: a path or Beam filesystem URI every "
        "worker can reach (default: next to --db). See docs/scale-out.md.")] = None,
    rules: Annotated[list[Path] | None, typer.Option(
        "--rules", help="A site's kernel message rules (TOML, repeatable), tried before "
        "the built-in ones; see docs/rules.md and 'faultline rules check'.",
        dir_okay=False)] = None,
    host_from_path: Annotated[str | None, typer.Option(
        help="Regex with a (?P<host>...) group that finds a file's host in its path, "
        "for layouts faultline does not know (tried before the layout and known hosts).")]
    = None,
    json_fields: Annotated[str | None, typer.Option(
        help="Field names of JSON-lines logs, e.g. message=log,time=ts,host=node "
        "(keys: message, time, host, program); the common names are known without it.")]
    = None,
) -> None:
    """Read a corpus of logs into the files, events, rejects and attempts tables.

    Idempotent: re-running on the same files changes nothing; new files are added and
    a changed file replaces its rows."""
    if overrides is not None and not overrides.is_file():
        err.print(f"[bold red]faultline ingest:[/] {overrides}: no such file")
        raise typer.Exit(EXIT_USAGE)
    from faultline.pipeline.hostpath import compile_pattern
    from faultline.pipeline.settings import parse_json_fields

    try:
        fields = parse_json_fields(json_fields)
        if host_from_path:
            compile_pattern(host_from_path)
    except ValueError as exc:
        err.print(f"[bold red]faultline ingest:[/] {exc}")
        raise typer.Exit(EXIT_USAGE) from exc
    site_rules = _site_rules(rules or [])
    _ingest(corpus, db, tz=tz, year=year, run=run, overrides=overrides, runner=runner,
            workers=workers, beam_opts=beam_opt or [], shards=shards, rules=site_rules,
            host_from_path=host_from_path, json_fields=fields)

def _site_rules(paths: list[Path]) -> tuple[str, ...]:
    """Validate ``--rules`` files before any work; a malformed one is bad usage (2)."""
    from faultline.pipeline.parsers.kernel_rules import RuleError, read_rule_files

    try:
        read_rule_files(paths)
    except RuleError as exc:
        err.print(f"[bold red]faultline ingest:[/] {escape(str(exc))}")
        raise typer.Exit(EXIT_USAGE) from exc
    return tuple(str(p) for p in paths)


rules_app = typer.Typer(help="Kernel message rules: the built-in ones and a site's own.",
                        no_args_is_help=True)
app.add_typer(rules_app, name="rules")


@rules_app.command("check")
def rules_check(
    files: Annotated[list[Path] | None, typer.Argument(
        help="Site rules files (TOML); none: the built-in rules.", dir_okay=False,
        metavar="FILE")] = None,
) -> None:
    """Validate rules files and run every example they carry; exit 1 if one fails, 2 if
    a file cannot be read or is malformed (the message names the entry)."""
    from faultline.pipeline.parsers.kernel_rules import RuleError
    from faultline.pipeline.parsers.kernel_rules_check import check_files

    try:
        report = check_files(files or [])
    except RuleError as exc:
        err.print(f"[bold red]faultline rules check:[/] {escape(str(exc))}")
        raise typer.Exit(EXIT_USAGE) from exc
    for problem in report.problems:
        err.print(f"[red]FAIL[/] {escape(problem)}")
    what = ", ".join(map(str, files)) if files else "built-in rules"
    typer.echo(f"{what}: {report.rules} rules, {report.examples} examples, "
               f"{report.not_examples} not-examples: "
               + ("ok" if report.ok else f"{len(report.problems)} problems"))
    raise typer.Exit(EXIT_OK if report.ok else EXIT_PROBLEMS)


def _ingest(corpus: list[Path], db: Path, **kw) -> None:
    """Ingest with a progress bar and print the summary line."""
    from faultline.pipeline.run import IngestError
    from faultline.pipeline.run import ingest as run_ingest

    try:
        with _progress() as bar:
            task = bar.add_task("parsing files", total=None)
            summary = run_ingest(
                corpus, db, **kw,
                progress=lambda done, total: bar.update(task, completed=done, total=total))
    except (IngestError, ZoneInfoNotFoundError, ValueError) as exc:
        err.print(f"[bold red]faultline ingest:[/] {exc}")
        raise typer.Exit(EXIT_USAGE) from exc
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
                  + ", ".join(summary.overrides_unknown[:10])
                  + (" ..." if len(summary.overrides_unknown) > 10 else ""))
    if summary.problems:
        err.print(f"[yellow]warning:[/] {summary.problems} files could not be read whole "
                  "or were not followed; files.problem says why for each")
    for host, skew, jobs in summary.skewed_clocks:
        err.print(f"[yellow]warning:[/] {host}'s clock runs {abs(skew) / 3600:.1f} h "
                  f"{'ahead of' if skew > 0 else 'behind'} the other hosts' (its job logs "
                  f"against Slurm's start times, {jobs} jobs): its events may fall outside "
                  "their interruptions; see the host_clock_offsets view")


@app.command()
def report(
    db: DbOption,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")]
    = OutputFormat.table,
    compare: Annotated[Published | None, typer.Option(
        help="Show the published table beside yours.")] = None,
    html: Annotated[Path | None, typer.Option(
        help="Also write a self-contained HTML report with charts to this file "
        "(missing parent directories are created).", dir_okay=False)] = None,
    run: Annotated[str | None, typer.Option(help="Run to report, by name or job name "
                                            "(default: the one with the most "
                                            "interruptions).")] = None,
) -> None:
    """Print the root-cause breakdown (Table 5 for your cluster); with --html, also
    write the charts page (its path is printed on stderr, so stdout stays the report)."""
    from faultline import report as rep

    con = _open_read(db)
    try:
        data = rep.breakdown(con, run=run, compare=compare.value if compare else None)
        if html is not None:
            from faultline.html_report import write_html

            written = write_html(con, data["run"], html)
            err.print(f"wrote HTML report: {written}")
    except rep.ReportError as exc:
        err.print(f"[bold red]faultline report:[/] {exc}")
        raise typer.Exit(EXIT_USAGE) from exc
    except OSError as exc:  # --html names a directory, or one that cannot be created
        err.print(f"[bold red]faultline report:[/] --html {html}: {exc}")
        raise typer.Exit(EXIT_USAGE) from exc
    finally:
        con.close()
    if format is OutputFormat.table:
        rep.render_table(data, Console())
    else:
        render = {OutputFormat.markdown: rep.render_markdown, OutputFormat.csv:
                  rep.render_csv, OutputFormat.json: rep.render_json}[format]
        typer.echo(render(data), nl=False)


@app.command()
def explain(
    db: DbOption,
    interruption_id: Annotated[str, typer.Argument(help="An interruption_id.")],
) -> None:
    """Show the evidence chain behind one interruption's root cause."""
    from faultline import explain as ex
    from faultline.report import ReportError

    con = _open_read(db)
    try:
        data = ex.explain(con, interruption_id)
    except ReportError as exc:
        err.print(f"[bold red]faultline explain:[/] {exc}")
        raise typer.Exit(EXIT_USAGE) from exc
    finally:
        con.close()
    ex.render_explain(data, Console())


@app.command()
def check(db: DbOption) -> None:
    """Run the data-quality suites; exit 1 on any failed expectation."""
    from faultline import check as chk

    con = _open_read(db)
    try:
        result = chk.run_checks(con)
    except chk.CheckError as exc:
        err.print(f"[bold red]faultline check:[/] {escape(str(db))}: not a faultline "
                  f"database? {escape(str(exc))}")
        raise typer.Exit(EXIT_USAGE) from exc
    finally:
        con.close()
    chk.render(result, Console())
    raise typer.Exit(EXIT_OK if result.ok else EXIT_PROBLEMS)


@app.command()
def simulate(
    preset: Annotated[str, typer.Option(help="Preset name (sample, small, medium, "
                                        "llama3).")],
    out: Annotated[Path, typer.Option(help="Directory to write the corpus to.",
                                      file_okay=False)],
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same bytes).")] = 0,
    layout: Annotated[str, typer.Option(
        help="Corpus layout: canonical (CORPUS.md), varlog (per-host /var/log trees, plain "
             "dmesg), central-syslog (one syslog for every host), rsyslog-tree (per-host "
             "files of a central server), journal-json (journalctl -o json per host), "
             "slurm-out (slurm-<jobid>.out), redfish (Redfish LogEntry JSON).")]
    = "canonical",
) -> None:
    """Write a simulated cluster's logs to OUT/corpus, with ground truth in OUT/truth."""
    from faultline.simulate import simulate as run_simulation
    from faultline.simulate.config import load_preset
    from faultline.simulate.layouts import LAYOUTS, get_layout
    from faultline.simulate.relayout import LAYOUTS as RELAYOUTS
    from faultline.simulate.relayout import simulate_in

    try:
        zone = load_preset(preset).tz
        if layout not in RELAYOUTS and layout not in LAYOUTS:
            get_layout(f"{layout}")  # raises, naming the layouts of both mechanisms
    except ValueError as exc:
        msg = str(exc)
        if layout not in LAYOUTS and layout not in RELAYOUTS:
            msg = f"unknown layout {layout!r}; known: {', '.join([*LAYOUTS, *RELAYOUTS])}"
        err.print(f"[bold red]faultline simulate:[/] {msg}")
        raise typer.Exit(EXIT_USAGE) from exc
    with _progress() as bar:
        tasks: dict[str, object] = {}

        def step(what: str, i: int, n: int) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(f"writing {what}", total=n)
            bar.update(tasks[what], completed=i + 1)

        if layout in RELAYOUTS:  # a pass over the canonical corpus (simulate.relayout)
            result = simulate_in(preset, out, layout, seed=seed, progress=step)
        else:
            result = run_simulation(preset, out, seed=seed, progress=step, layout=layout)
    typer.echo(f"simulated {preset} (seed {seed}): {result.files} files, {result.lines} "
               f"lines, {result.bytes / 1e6:.1f} MB, {result.interruptions} interruptions "
               f"({result.planned} planned), effective training time "
               f"{100 * result.effective_training_time:.1f}%, {result.seconds:.1f} s -> "
               f"{out}/corpus (truth in {out}/truth); times without a zone are in "
               f"{zone} (ingest infers it, or pass --tz {zone})")


@app.command()
def demo() -> None:
    """Ingest the bundled sample corpus into ./faultline-demo.duckdb, print the
    breakdown beside the published Llama 3 table and write ./faultline-demo.html."""
    from faultline import report as rep
    from faultline.fixtures import fixtures_dir
    from faultline.html_report import write_html

    corpus = fixtures_dir() / "sample" / "corpus"
    db = Path.cwd() / "faultline-demo.duckdb"
    typer.echo("faultline demo: ingesting the bundled sample corpus into "
               "./faultline-demo.duckdb")
    _ingest([corpus], db)
    with fdb.connect(db, read_only=True) as con:
        data = rep.breakdown(con, compare="llama3")
        html = write_html(con, None, Path.cwd() / "faultline-demo.html")
    rep.render_table(data, Console())
    typer.echo(f"database: {db} (try: faultline explain --db {db.name} <interruption_id>)")
    typer.echo(f"HTML report: {html} (open it in a browser)")


def _add_overrides_app() -> None:
    """``faultline overrides add|list|remove`` lives in its own module."""
    from faultline.overrides_cli import app as overrides_app

    app.add_typer(overrides_app, name="overrides")


_add_overrides_app()


class _QuietBeamImports(logging.Filter):
    """Beam warns on import about Google Cloud clients faultline never uses."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("apitools not found")


def main() -> None:
    """Console-script entry point."""
    logging.getLogger().addFilter(_QuietBeamImports())
    app()
