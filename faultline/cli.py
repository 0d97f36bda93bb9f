"""The ``faultline`` command line: a thin typer layer over the library.

Commands, flags and exit codes are fixed by ``../shared/INTERFACE.md``:
0 success, 1 the run finished but found problems, 2 bad usage or unreadable input.
Each command parses its flags, calls one library function and renders the result;
no work happens here.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperArgument, TyperCommand, TyperGroup

from faultline.console import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, err, fail, progress
from faultline.ctrl_c import exit_130_on_ctrl_c
from faultline.launch import DEFAULT_RUNNER  # the early server reads --runner the same way


def _unwrap(doc: str | None) -> str | None:
    """A docstring as help text: its paragraphs, each on one line. Rich help keeps a
    docstring's single line breaks, which then fall mid-sentence in the terminal."""
    if not doc:
        return doc
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def _type_label(param: Any, ctx: Any = None) -> str | None:
    """What help shows after a flag: its metavar (``--db PATH``), the choices of a
    choice, nothing for an on/off flag or an argument (its name says it). Typer would
    show Python types instead (``<bool>``, ``<list[Path]>``)."""
    if isinstance(param, TyperArgument) or getattr(param, "is_flag", False):
        return None
    if param.metavar:
        return param.metavar
    desc = getattr(param, "type_descriptor", None)
    if desc is not None and desc.is_choice:
        return "|".join(str(getattr(c, "value", c)) for c in desc.choices or ())
    return (param.name or "value").upper()


def _plain_params(params: list[Any]) -> list[Any]:
    for param in params:
        param.display_type_rich = functools.partial(_type_label, param)  # type: ignore[method-assign]
    return params


class _Command(TyperCommand):
    """A command whose help shows metavars, not Python types, and one-line paragraphs."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_params(super().get_params(ctx))


class _Group(TyperGroup):
    """The ``faultline`` group: its commands' help as :class:`_Command` gives it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name, command in self.commands.items():
            if type(command) is TyperCommand:
                command.__class__ = _Command  # same object, help rendered as above
            command.help = _unwrap(command.help)
            if command.callback is not None:
                command.callback = exit_130_on_ctrl_c(name, command.callback)

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_params(super().get_params(ctx))


app = typer.Typer(
    cls=_Group,
    name="faultline",
    help="Root causes of GPU training-run interruptions, from a cluster's own logs.\n\n"
    "Ingest kernel, NCCL/PyTorch, Slurm, BMC and trainer logs into DuckDB; group each "
    "cascade into one interruption; classify its root cause; report the Llama 3 "
    "Table 5 breakdown for your cluster.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
)


class OutputFormat(StrEnum):
    table = "table"
    markdown = "markdown"
    csv = "csv"
    json = "json"


class Published(StrEnum):
    llama3 = "llama3"


def _open_read(db: Path):
    """Open an existing database read-only, or exit 2 saying why."""
    import duckdb

    from faultline import db as fdb  # DuckDB: imported by the commands that open one

    if not db.is_file():
        fail("", f"{db}: no such database (run faultline ingest)")
        raise typer.Exit(EXIT_USAGE)
    try:
        con = fdb.connect(db, read_only=True)
    except duckdb.Error as exc:
        fail("", fdb.open_error(db, exc))
        raise typer.Exit(EXIT_USAGE) from exc
    missing = fdb.missing_tables(con)
    if missing:  # a DuckDB file, but not one faultline wrote: say so, not a SQL error
        con.close()
        fail("", f"{db}: not a faultline database (no {', '.join(missing)} "
                 f"table{'s' if len(missing) > 1 else ''}; faultline ingest writes one)")
        raise typer.Exit(EXIT_USAGE)
    return con


def _version(value: bool) -> None:
    if value:
        import faultline

        typer.echo(f"faultline {faultline.__version__}")
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
    Path, typer.Option("--db", help="DuckDB file to write or read.", dir_okay=False,
                       metavar="PATH")
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
    corpus: Annotated[list[str], typer.Argument(
        help="Corpus directories or files, or URIs of a Beam filesystem (s3://bucket/logs, "
        "gs://...; options such as s3_endpoint_url through --beam-opt).",
        metavar="CORPUS...")],
    db: DbOption,
    tz: Annotated[str | None, typer.Option(
        callback=_zone_option,
        help="Zone of times that carry none: an IANA name (America/Los_Angeles) or UTC. "
        "Default: inferred from the times that carry a zone (RFC 3339 offsets, UTC "
        "collector stamps against local ones, job starts); UTC when none do; ingest "
        "stops and names the candidates when the corpus is ambiguous.")]
    = None,
    year: Annotated[int | None, typer.Option(metavar="YYYY",
                                             help="Year for syslog lines without one "
                                             "(default: inferred from the corpus).")]
    = None,
    run: Annotated[str | None, typer.Option(help="Rebuild this run's interruptions "
                                            "only, keeping every other run's (its name or "
                                            "job name; default: every run).")] = None,
    overrides: Annotated[Path | None, typer.Option(
        help="CSV interruption_id,component,note: operator corrections, stored in the "
        "database and kept across later ingests (see faultline overrides).",
        dir_okay=False)] = None,
    runner: Annotated[str, typer.Option(help="Beam runner name (dask: on a Dask "
                                        "cluster, see --dask-address).")] = DEFAULT_RUNNER,
    dask_address: Annotated[str | None, typer.Option(
        metavar="tcp://HOST:PORT", help="The scheduler of the Dask cluster --runner dask "
        "parses on (started with dask scheduler; see docs/scale-out.md).")] = None,
    workers: Annotated[int | None, typer.Option(
        min=1, metavar="N", help="Worker processes (Beam multi-process mode when > 1; "
        "default: 1 below about 200 MB to read, every core above).")] = None,
    beam_opt: Annotated[list[str] | None, typer.Option(
        "--beam-opt", metavar="KEY=VALUE",
        help="Passed to Beam's PipelineOptions (repeatable).")]
    = None,
    shards: Annotated[str | None, typer.Option(
        metavar="PATH|URI",
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
    """Read a corpus of logs into the files, events, rejects and attempts tables, then
    build the interruptions and their root causes (interruptions, breakdown).

    Idempotent: re-running on the same files changes nothing; new files are added and
    a changed file replaces its rows."""
    # first: the server imports Beam's worker while this process imports the rest and
    # discovers the corpus (pipeline/forkserver.py); stopped if one worker will do. It
    # runs the pipeline too, so this process never imports Beam (pipeline/beamrun.py).
    # faultline.launch starts it before the CLI's imports when it can: taken here.
    from faultline.launch import decided, take_server
    from faultline.pipeline import forkserver

    wanted = decided(corpus, runner, workers, beam_opt or [])
    if wanted is None:
        wanted = forkserver.wanted(runner, workers, beam_opt or [], corpus)
    server = take_server()
    if server is not None and not wanted:
        server.stop()
        server = None
    if server is None and wanted:
        server = forkserver.ForkServer.start()
    with server or contextlib.nullcontext():
        _ingest_command(corpus, db, tz, year, run, overrides, runner, dask_address, workers,
                        beam_opt, shards, rules, host_from_path, json_fields, server)


def _ingest_command(corpus: list[str], db: Path, tz: str | None, year: int | None,
                    run: str | None, overrides: Path | None, runner: str,
                    dask_address: str | None, workers: int | None,
                    beam_opt: list[str] | None, shards: str | None,
                    rules: list[Path] | None, host_from_path: str | None,
                    json_fields: str | None, server: Any) -> None:
    """The body of ``ingest`` (checks, then :func:`faultline.ingest_cli.run`) once its
    fork server runs."""
    from faultline import ingest_cli

    if overrides is not None and not overrides.is_file():
        fail("ingest", f"{overrides}: no such file")
        raise typer.Exit(EXIT_USAGE)
    fields = _source_options("ingest", json_fields, host_from_path)
    site_rules = _site_rules(rules or [])
    roots: list[Path | str] = [c if "://" in c else Path(c) for c in corpus]
    ingest_cli.run(roots, db, tz=tz, year=year, run=run, overrides=overrides, runner=runner,
                   dask_address=dask_address, workers=workers, beam_opts=beam_opt or [],
                   shards=shards, rules=site_rules, host_from_path=host_from_path,
                   json_fields=fields, fork_server=server)

def _source_options(command: str, json_fields: str | None,
                    host_from_path: str | None) -> tuple[tuple[str, str], ...]:
    """Validate ``--json-fields`` and ``--host-from-path`` before any work (ingest and
    watch take both); a bad one is bad usage (2). Returns the parsed JSON fields."""
    from faultline.pipeline.hostpath import compile_pattern
    from faultline.pipeline.settings import parse_json_fields

    try:
        fields = parse_json_fields(json_fields)
        if host_from_path:
            compile_pattern(host_from_path)
    except ValueError as exc:
        fail(command, str(exc))
        raise typer.Exit(EXIT_USAGE) from exc
    return fields


def _site_rules(paths: list[Path]) -> tuple[str, ...]:
    """Validate ``--rules`` files before any work; a malformed one is bad usage (2)."""
    from faultline.pipeline.parsers.kernel_rules import RuleError, read_rule_files

    try:
        read_rule_files(paths)
    except RuleError as exc:
        fail("ingest", str(exc))
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
        fail("rules check", str(exc))
        raise typer.Exit(EXIT_USAGE) from exc
    for problem in report.problems:
        err.print(f"[red]FAIL[/] {escape(problem)}")
    what = ", ".join(map(str, files)) if files else "built-in rules"
    typer.echo(f"{what}: {report.rules} rules, {report.examples} examples, "
               f"{report.not_examples} not-examples: "
               + ("ok" if report.ok else f"{len(report.problems)} problems"))
    raise typer.Exit(EXIT_OK if report.ok else EXIT_PROBLEMS)


@app.command()
def report(
    db: DbOption,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")]
    = OutputFormat.table,
    compare: Annotated[Published | None, typer.Option(
        help="Show the published table beside yours.")] = None,
    html: Annotated[Path | None, typer.Option(
        metavar="FILE", help="Also write a self-contained HTML report with charts to this file "
        "(missing parent directories are created).", dir_okay=False)] = None,
    run: Annotated[str | None, typer.Option(help="Run to report, by name or job name "
                                            "(default: the one with the most "
                                            "interruptions).")] = None,
    project: Annotated[int | None, typer.Option(
        metavar="GPUS", min=1, help="Instead of the breakdown, print each component's "
        "failure rate with its 95% interval and what it implies at GPUS GPUs: "
        "interruptions per day, time between them, effective training time and the "
        "Young/Daly checkpoint interval (docs/projection.md).")] = None,
) -> None:
    """Print the root-cause breakdown (Table 5 for your cluster); with --html, also
    write the charts page (its path is printed on stderr, so stdout stays the report)."""
    from faultline import report as rep

    con = _open_read(db)
    try:
        if project is not None:
            _report_projection(con, project, run, format)
            if html is None:
                return
        data = rep.breakdown(con, run=run, compare=compare.value if compare else None)
        if html is not None:
            from faultline.html_report import write_html

            written = write_html(con, data["run"], html)
            err.print(f"wrote HTML report: {escape(str(written))}")
    except rep.ReportError as exc:
        fail("report", str(exc))
        raise typer.Exit(EXIT_USAGE) from exc
    except OSError as exc:  # --html names a directory, or one that cannot be created
        fail("report", f"--html {html}: {exc}")
        raise typer.Exit(EXIT_USAGE) from exc
    finally:
        con.close()
    if project is not None:
        return
    _render(rep, data, format)


def _report_projection(con: Any, gpus: int, run: str | None, format: OutputFormat) -> None:
    """``report --project GPUS``: the measured rates projected to GPUS GPUs."""
    from faultline import projection as pj

    try:
        data = pj.projection(con, gpus, run=run)
    except pj.ProjectionError as exc:
        fail("report", str(exc))
        raise typer.Exit(EXIT_USAGE) from exc
    _render(pj, data, format)


def _render(module: Any, data: dict[str, Any], format: OutputFormat) -> None:
    """Print ``data`` with ``module``'s renderer for ``format`` (report and projection
    have the same four: render_table, render_markdown, render_csv, render_json)."""
    if format is OutputFormat.table:
        module.render_table(data, Console())
    else:
        typer.echo(getattr(module, f"render_{format.value}")(data), nl=False)


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
        fail("explain", str(exc))
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
        fail("check", f"{db}: not a faultline database? {exc}")
        raise typer.Exit(EXIT_USAGE) from exc
    finally:
        con.close()
    chk.render(result, Console())
    raise typer.Exit(EXIT_OK if result.ok else EXIT_PROBLEMS)


def _preset_names() -> list[str]:
    """The bundled simulator presets (their TOML files), without importing the
    simulator: help is rendered on every start."""
    from faultline.fixtures import fixtures_dir

    return sorted(p.stem for p in (fixtures_dir() / "presets").glob("*.toml"))


@app.command()
def simulate(
    preset: Annotated[str, typer.Option(
        metavar="NAME", help=f"Preset: {', '.join(_preset_names())}, or a preset's TOML "
        "file.")],
    out: Annotated[Path, typer.Option(help="Directory to write the corpus to.",
                                      file_okay=False, metavar="DIR")],
    seed: Annotated[int, typer.Option(metavar="N",
                                      help="Random seed (same seed, same bytes).")] = 0,
    layout: Annotated[str, typer.Option(
        metavar="LAYOUT",
        help="Corpus layout: canonical (CORPUS.md), varlog (per-host /var/log trees, plain "
             "dmesg), central-syslog (one syslog for every host), rsyslog-tree (per-host "
             "files of a central server), journal-json (journalctl -o json per host), "
             "slurm-out (slurm-<jobid>.out), redfish (Redfish LogEntry JSON).")]
    = "canonical",
    flight_recorder: Annotated[int, typer.Option(
        metavar="N", min=0,
        help="Also write PyTorch Flight Recorder dumps (one per rank) for N watchdog "
             "hangs, one of each scenario first (--preset hangs has all 9), truth in "
             "OUT/truth/hangs.csv (canonical layout).")] = 0,
    replay: Annotated[bool, typer.Option(
        "--replay", help="Write the corpus over time as a live cluster would (lines "
        "appended in time order on an accelerated clock, sacct.txt refreshed), the truth "
        "at the end: for faultline watch (canonical layout; docs/watch.md).")] = False,
    speed: Annotated[float, typer.Option(
        metavar="X", min=0.001, help="With --replay: simulated seconds per wall second.")]
    = 600.0,
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
        fail("simulate", msg)
        raise typer.Exit(EXIT_USAGE) from exc
    with progress() as bar:
        tasks: dict[str, object] = {}

        def step(what: str, i: int, n: int) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(f"writing {what}", total=n, detail="")
            bar.update(tasks[what], completed=i + 1)

        if replay:
            if layout != "canonical" or flight_recorder:
                fail("simulate", "--replay writes the canonical layout, without Flight "
                              "Recorder dumps")
                raise typer.Exit(EXIT_USAGE)
            from faultline.simulate.replay import run as run_replay

            err.print(f"faultline simulate: replaying {preset} at {speed:g}x into "
                      f"{escape(str(out))}/corpus (Ctrl-C stops)")
            result = run_replay(preset, out, speed, seed=seed, progress=step)
        elif layout in RELAYOUTS:  # a pass over the canonical corpus (simulate.relayout)
            result = simulate_in(preset, out, layout, seed=seed, progress=step)
        else:
            result = run_simulation(preset, out, seed=seed, progress=step, layout=layout,
                                    flight_recorder=flight_recorder)
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
    from faultline import ingest_cli
    from faultline import report as rep
    from faultline.fixtures import fixtures_dir
    from faultline.html_report import write_html

    corpus = fixtures_dir() / "sample" / "corpus"
    db = Path.cwd() / "faultline-demo.duckdb"
    typer.echo("faultline demo: ingesting the bundled sample corpus into "
               "./faultline-demo.duckdb")
    ingest_cli.run([corpus], db)
    from faultline import db as fdb

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


def _add_watch() -> None:
    """``faultline watch`` lives in its own module (faultline/watch_cli.py)."""
    from faultline.watch_cli import watch

    app.command()(watch)


_add_watch()


class _QuietBeamImports(logging.Filter):
    """Beam warns on import about Google Cloud clients faultline never uses."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("apitools not found")


def main() -> None:
    """Console-script entry point. Exits without the interpreter's teardown
    (:func:`_exit`)."""
    logging.getLogger().addFilter(_QuietBeamImports())
    try:
        app()
    except SystemExit as exc:
        _exit(exc.code)
    _exit(0)


def _exit(code: object) -> None:
    """End the process as ``sys.exit(code)`` would, less the interpreter's teardown.

    Tearing down the modules a command imported (DuckDB, polars, pyarrow, typer, rich)
    took 0.12-0.15 s of every command's wall time on this project's 2-core machine,
    after its work was done: half of ``report``'s. What the teardown would do that
    matters is done here first: the ``atexit`` handlers run (logging's flush, temporary
    files' cleanup), threads that are not daemons are joined (after the threading exit
    hooks, as at finalization), and the standard streams are flushed. Every command has
    closed its DuckDB connections by then."""
    import atexit
    import sys
    import threading

    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): printed, exit status 1
        print(code, file=sys.stderr)
        code = 1
    # what the interpreter's finalization does first, in its order: the threading
    # module's exit hooks (an executor left open by an interrupted run tells its idle
    # workers to end; joining them without that hung Ctrl-C of a multi_processing
    # parse), then the join of every non-daemon thread, then the atexit handlers
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code & 0xFF)
