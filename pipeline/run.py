"""``faultline ingest``: the only place that touches options, the filesystem and DuckDB.

    discover files -> paths list -> Beam: ParseCorpus -> Parquet shards -> DuckDB

Runs on the local DirectRunner by default (in-process for a small corpus, Beam's
multi-process mode on every core for a large one: :mod:`faultline.pipeline.workers`;
``--workers N`` to choose; the worker processes are forked from a server that has
imported Beam already, :mod:`faultline.pipeline.forkserver`) and on any other runner
through ``--runner`` / ``--beam-opt``, which pass through to Beam's PipelineOptions
untouched. The default never tries Beam's Prism runner, which recent releases
download from the internet at run time.
``--runner dask`` runs the parse step on a Dask cluster through a graph of its own
(:mod:`faultline.pipeline.dask_run`: Beam's DaskRunner cannot run ``ReadFromText``).
How the parse step is run on each is :mod:`faultline.pipeline.beamrun`'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import duckdb

from faultline import db as fdb
from faultline import runs
from faultline.pipeline import (
    beamopts,
    beamrun,
    forkserver,
    ingest_state,
    resume_plan,
)
from faultline.pipeline.batching import BATCH_SIZE
from faultline.pipeline.beamrun import Listing
from faultline.pipeline.discover import discover, discover_uri
from faultline.pipeline.load import load_shards, resumed_paths, unchanged_paths
from faultline.pipeline.prepass import corpus_facts
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.sniff import path_hints
from faultline.pipeline.staging import Staging
from faultline.pipeline.tzevidence import decide_zone
from faultline.pipeline.workers import LOCAL_RUNNERS, PARALLEL_BYTES, corpus_weight, cpus
from faultline.pipeline.workers import resolve as resolve_workers
from faultline.schemas.ddl import SchemaMismatch


class IngestError(Exception):
    """Bad usage or unreadable input named on the command line (exit 2)."""


class DatabaseBusy(IngestError):
    """Another faultline process holds the database's lock (``faultline watch`` waits
    for the next cycle instead of stopping)."""


@dataclass
class IngestSummary:
    files: int
    lines: int
    events: int
    rejects: int
    interruptions: int
    seconds: float
    new_files: int
    # where the time went: discovering, parsing (Beam), loading, root causes
    phases: dict[str, float] = field(default_factory=dict)
    problems: int = 0  # files with files.problem set (unreadable, cut, not followed...)
    # (host, seconds ahead of the cluster, jobs compared) for clocks that disagree
    skewed_clocks: list[tuple[str, float, int]] = field(default_factory=list)
    zone_note: str = ""  # which zone zone-less times were read in, and why
    zone_warning: str | None = None  # --tz given against the corpus's evidence
    # (run, interruptions) over every run in the database: ``interruptions`` is their sum
    by_run: list[tuple[str, int]] = field(default_factory=list)
    rebuilt_run: str | None = None  # the run --run named (stored name), if any
    rebuilt: int = 0  # interruptions built by this ingest (all of them without --run)
    overrides_changed: int = 0  # rows the --overrides file added or changed
    overrides_unknown: list[str] = field(default_factory=list)  # ids of no interruption
    # grown files parsed from where the last run stopped (pipeline/resume.py); the
    # other new or changed files were read whole
    resumed: list[str] = field(default_factory=list)
    # nothing was parsed and nothing that decides root causes changed: the stored
    # interruptions were kept (pipeline/ingest_state.py)
    rebuild_skipped: bool = False
    # files of finished jobs' unchanged directories taken as unchanged without a stat
    # (a re-run with nothing new: pipeline/ingest_state.py, sealed directories)
    unchecked: int = 0

    def line(self) -> str:
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in self.phases.items())
        # the zone goes last, inside the parentheses: the counts keep their places
        unchecked = (f"{self.unchecked} files of finished jobs not re-checked"
                     if self.unchecked else "")
        grown = (f"{len(self.resumed)} grown files read from where the last run stopped"
                 if self.resumed else "")
        phases = "; ".join(p for p in (phases, grown, unchecked, self.zone_note) if p)
        return (f"ingested {self.files} files ({self.new_files} new or changed), "
                f"{self.lines} lines, {self.events} events, {self.interruptions} "
                f"interruptions, {self.rejects} rejects in {self.seconds:.1f} s"
                + (f" ({phases})" if phases else ""))

    def runs_line(self) -> str | None:
        """Which runs the interruption count covers (report shows one run at a time),
        or None when there is only one run and nothing to tell apart."""
        if self.rebuilt_run is None and len(self.by_run) <= 1:
            return None
        runs = ", ".join(f"{n} in {r}" for r, n in self.by_run[:10])
        if len(self.by_run) > 10:
            runs += f", {sum(n for _r, n in self.by_run[10:])} in {len(self.by_run) - 10} more"
        head = (f"interruptions: {self.rebuilt} rebuilt for run {self.rebuilt_run} only, "
                f"other runs kept; {self.interruptions} in all runs"
                if self.rebuilt_run is not None
                else f"interruptions: {self.interruptions} in all runs")
        return f"{head} ({runs or 'none'}); faultline report shows one run (--run NAME)"


@contextlib.contextmanager
def exclusive(db: Path) -> Iterator[None]:
    """One ingest per database at a time: a second one fails with a clear message.

    The lock file (``<db>.lock``) is removed when the run ends, failed or not. A run
    that opened the file just before the holder removed it would hold a lock on a
    file no longer at that path, so after locking it checks that the path is still
    the file it locked, and tries again if not."""
    lock_path = db.with_name(db.name + ".lock")
    while True:
        f = lock_path.open("a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            f.close()
            raise DatabaseBusy(f"another faultline ingest is writing {db}; wait for it to "
                              "finish") from exc
        try:
            same = os.stat(lock_path).st_ino == os.fstat(f.fileno()).st_ino  # noqa: PTH116
        except FileNotFoundError:
            same = False
        if same:
            break
        f.close()
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock_path.unlink()
        f.close()


PHASES = ("discover", "parse", "load", "root causes")


class NothingRecognized(IngestError):
    """The corpus named on the command line holds no file of any known log source."""


def ingest(corpus: Sequence[Path | str], db: Path, *, tz: str | None = None,
           year: int | None = None, run: str | None = None, overrides: Path | None = None,
           runner: str = "DirectRunner", workers: int | None = None,
           beam_opts: list[str] | None = None, dask_address: str | None = None,
           shards: str | None = None, batch_size: int = BATCH_SIZE,
           progress: Callable[[int, int], None] | None = None,
           rules: tuple[str, ...] = (),
           on_phase: Callable[[str], None] | None = None,
           host_from_path: str | None = None,
           json_fields: tuple[tuple[str, str], ...] = (),
           fork_server: forkserver.ForkServer | None = None) -> IngestSummary:
    """Read new and changed files into ``db``, then rebuild the interruptions.

    Files already stored with the same size, mtime and parse settings are not read
    again. The Beam pipeline writes Parquet shards only (under ``shards``, default next
    to ``db``; see :mod:`faultline.pipeline.staging`); the shards are loaded and the
    interruptions rebuilt in one DuckDB transaction, so a run killed at any point
    leaves the database as the last complete run left it (the next run redoes the
    work), and two runs on one database never interleave (:func:`exclusive`).
    ``tz`` None: the zone of zone-less times is inferred from the corpus, and an
    ambiguous corpus stops before anything is written (:mod:`...tzevidence`).

    ``on_phase`` is called with each name of :data:`PHASES` as that phase starts (the
    load and root-cause phases inside the transaction); ``progress(done, total)``
    counts files parsed, and is called with ``(total, total)`` once parsing ends.
    A run that fails or is interrupted (``KeyboardInterrupt``) on a database that did
    not exist before removes the file it created, so nothing is left behind. A corpus
    in which no file is of a known source raises :class:`NothingRecognized` before
    anything is loaded.

    A corpus root may be a URI of a Beam filesystem (``s3://bucket/logs``, ``gs://``...),
    listed and read through ``FileSystems`` with the options in ``beam_opts``
    (``s3_endpoint_url=...``). ``runner`` ``dask`` parses on the Dask cluster whose
    scheduler ``dask_address`` names (:mod:`faultline.pipeline.dask_run`); it is
    reached, or the run fails, before any file is read.

    ``fork_server`` (started by the caller as early as it can, so that it imports while
    discovery runs) forks the workers of a multi-process parse; the run stops it once
    the parse is done or turned out to need one worker. Without it a multi-process
    parse starts its own (:mod:`faultline.pipeline.forkserver`).
    """
    from faultline.classifiers import interruptions  # the classifiers load models: lazily
    from faultline.classifiers import overrides as ov

    t0 = time.perf_counter()
    phase = on_phase or (lambda _name: None)
    flags = beamrun.beam_flags(beam_opts or [])
    if any(isinstance(root, str) and "://" in root for root in corpus):
        from apache_beam.io.filesystems import FileSystems
        from apache_beam.options.pipeline_options import PipelineOptions

        FileSystems.set_options(PipelineOptions(flags))  # the driver lists and reads too
    corpus = [root if isinstance(root, str) and "://" in root else Path(root)
              for root in corpus]
    for root in corpus:
        if not _exists(root):
            raise IngestError(f"{root}: no such file or directory")
    dask_workers = 0
    if runner not in LOCAL_RUNNERS and _dask_run().is_dask(runner):
        from apache_beam.options.pipeline_options import PipelineOptions

        from faultline.pipeline import dask_run

        if workers is not None:
            raise IngestError("--workers is for the local runner; on Dask, start as many "
                              "dask worker processes as you want")
        try:
            flags += dask_run.address_flags(dask_address, flags)
            dask_workers = dask_run.check_scheduler(PipelineOptions(flags))
        except dask_run.DaskUnavailable as exc:
            raise IngestError(str(exc)) from exc
    elif dask_address is not None:
        raise IngestError("--dask-address is for --runner dask")
    try:
        beamopts.check(beamrun.beam_flags(beam_opts or []))
    except ValueError as exc:
        raise IngestError(str(exc)) from exc
    corrections = ov.read_csv(overrides) if overrides is not None else []  # fail fast
    db = db.resolve()
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IngestError(f"{db.parent}: cannot create the database's directory: "
                          f"{exc.strerror or exc}") from exc
    staging = Staging.for_db(db, shards)
    if fork_server is not None:  # the pipeline's process imports while discovery runs
        fork_server.ask_pipeline(workers or cpus())
    phases: dict[str, float] = {}
    with exclusive(db), _created_only_on_success(db):
        phase("discover")
        skipped: list[tuple[str, str]] = []
        paths = list(discover(corpus, exclude=[staging.local, db], skipped=skipped))
        if not paths and not skipped:
            raise NothingRecognized(_nothing_message(corpus, 0))
        key = ingest_state.inputs(ingest_state.options(
            corpus, tz, year, rules, host_from_path, json_fields), paths, skipped)
        con = _open(db) if db.exists() else None  # a re-run: perhaps nothing is new
        try:
            last = ingest_state.stored(con, key) if con is not None else None
            trusted = ingest_state.still_sealed(con) if last and con else set()
            todo = _todo(con, paths, skipped, last[0], trusted) if last and con else None
            settings, sealed = None, None
            if todo == []:  # same inputs, every file unchanged: decided as last time
                parsed_with, zone_note, zone_warning = last
                unchecked = sum(1 for p in paths if p.rpartition("/")[0] in trusted)
            else:
                hints = path_hints(paths)  # each path's, once, for both
                zone = decide_zone(paths, tz, hints=hints)  # tz None: inferred
                if zone.error:
                    raise IngestError(zone.error)
                facts = corpus_facts(paths, zone.zone, hints)
                try:
                    settings = IngestSettings(
                        tz=zone.zone, tz_how=zone.how, year=year,
                        window=None if year else facts.window, job_windows=facts.jobs,
                        rules=rules, known_hosts=facts.hosts,
                        host_from_path=host_from_path, json_fields=json_fields)
                except ValueError as exc:
                    raise IngestError(str(exc)) from exc
                con = con or _open(db)
                parsed_with, zone_note, zone_warning = (settings.fingerprint, zone.note,
                                                        zone.warning)
                # before their files are checked: a file added since changes the mtime
                sealed = ingest_state.dir_mtimes(
                    ingest_state.sealable(paths, facts.jobs, facts.window))
                todo = _todo(con, paths, skipped, parsed_with)
                unchecked = 0
            staging.clear()
            phases["discover"] = time.perf_counter() - t0
            phase("parse")
            # weighed once for both decisions it makes: the workers and DuckDB's threads
            weight = corpus_weight(paths, limit=WEIGHED_UP_TO) if todo else 0
            if todo:
                assert settings is not None
                if dask_workers:
                    try:
                        beamrun.parse_on_dask(todo, staging, settings, flags, batch_size,
                                              dask_workers, progress)
                    except beamrun.ParseFailed as exc:
                        raise IngestError(str(exc)) from exc
                else:
                    n_workers = resolve_workers(workers, runner, todo,
                                                weight if _reads_all(todo, paths) else None)
                    if n_workers <= 1 and fork_server is not None:
                        fork_server.stop()  # its imports would only take the other core
                    try:
                        beamrun.parse(todo, staging, settings, runner, n_workers,
                                      beam_opts or [], batch_size, progress, fork_server)
                    except beamrun.ParseFailed as exc:  # the fork server's process ended
                        raise IngestError(str(exc)) from exc
                    finally:
                        # its workers end before the staging directory is cleared: after
                        # a Ctrl-C they were still writing shards into it
                        if fork_server is not None:
                            fork_server.stop()
                staging.fetch()
                _require_recognized(con, staging.local, paths, todo, corpus,
                                    len(paths) + len(skipped))
            if fork_server is not None:
                fork_server.stop()  # before the load, where the driver's memory peaks
            if progress is not None:
                progress(len(todo), len(todo))
            phases["parse"] = time.perf_counter() - t0 - sum(phases.values())
            parsed_any = bool(todo)
            if parsed_any:
                _duckdb_settings(con, weight)  # settings, not data: before the transaction
            _drop_listing(paths, todo)
            with fdb.transaction(con):
                phase("load")
                changed = load_shards(con, staging.local) if parsed_any else 0
                grown = resumed_paths(con) if parsed_any else []
                phases["load"] = time.perf_counter() - t0 - sum(phases.values())
                phase("root causes")
                n_overrides = ov.put(con, corrections)
                stored_run = runs.resolve(con, run) if run is not None else None
                decided_by = ingest_state.rebuild_fingerprint(con, parsed_with, stored_run)
                skipped_rebuild = not parsed_any and ingest_state.rebuild_unchanged(
                    con, decided_by)
                if skipped_rebuild:  # nothing new: the stored rows are what it would build
                    n = ingest_state.stored_count(con, stored_run)
                else:
                    n = interruptions.rebuild(con, run=stored_run)
                    ingest_state.keep_skewed_clocks(con)
                ingest_state.record(con, key, parsed_with, zone_note, zone_warning,
                                    decided_by)
                if sealed is not None:
                    ingest_state.seal(con, sealed)
            phases["root causes"] = time.perf_counter() - t0 - sum(phases.values())
            summary = _summary(con, time.perf_counter() - t0)
            summary.new_files, summary.rebuilt, summary.rebuilt_run = changed, n, stored_run
            summary.overrides_changed = n_overrides
            summary.resumed = grown
            summary.rebuild_skipped = skipped_rebuild
            summary.unchecked = unchecked
            summary.overrides_unknown = ov.unknown_ids(con)
            summary.phases = phases
            summary.zone_note, summary.zone_warning = zone_note, zone_warning
        finally:
            if con is not None:
                con.close()
            staging.clear()
    return summary


def _drop_listing(paths: list[str], todo: Listing | None) -> None:
    """Empty the corpus listing once the files are parsed: the load and the rebuild,
    where the driver's memory peaks, need none of it, and on ``llama3`` it is 950k
    path strings (about 100 MB of the driver's heap, returned before DuckDB and the
    rebuild take theirs). A listing this large also pays for a full collection (the
    Beam pipeline's object cycles go too); a small one would only pay its 0.1 s, the
    walk over every object the imports made, for a few MB."""
    large = len(paths) >= COLLECT_AFTER_PATHS
    paths.clear()
    if isinstance(todo, list):
        todo.clear()
    if large:
        gc.collect()


COLLECT_AFTER_PATHS = 100_000  # listings at least this long are collected after the parse


# Below this many bytes of corpus (corpus_weight) the load and the root causes run on
# one DuckDB thread (see _duckdb_settings).
ONE_DUCKDB_THREAD_BYTES = 400_000_000
# memory DuckDB's block allocator may keep for the load and root causes (_duckdb_settings)
BLOCK_ALLOCATOR = "1GB"
# the corpus is weighed up to the larger of the two thresholds it is compared with
WEIGHED_UP_TO = max(ONE_DUCKDB_THREAD_BYTES, PARALLEL_BYTES)


def _reads_all(todo: Listing, paths: list[str]) -> bool:
    """Whether this run reads every file of the corpus (a first ingest): the corpus's
    weight is then the parse's too, and is not summed twice (a ``stat`` per file,
    0.05 s on small x4's 12k files, on the driver before the parse)."""
    return sum(not isinstance(t, list) for t in todo) == len(paths)


def _duckdb_settings(con: duckdb.DuckDBPyConnection, weight: int) -> None:
    """DuckDB's settings for the load and root causes: one thread for a small corpus,
    and for every corpus a block allocator that keeps the memory it hands out.

    With two threads, DuckDB's parallel insert of the events shards writes its row
    groups to the file during the insert, and the checkpoint at ``close`` then rewrites
    them. Measured on small x4's shards (200 MB, 340 k events; CPU s, best of 3): the
    merge alone 0.95 + commit 0.02 + close 0.51 on two threads, 0.79 + 0.19 + 0.05 on
    one; whole ingests: commit + close 0.6-1.0 CPU s on two threads (leaving up to 15 MB
    of free blocks in a 59 MB file, depending on how the threads were scheduled), 0.4
    on one (43 MB), the whole command 0.5-1 CPU s cheaper and no slower in wall time.
    The tables are the same (row order aside, which no table promises;
    ``tests/test_duckdb_threads.py``). Above the threshold the second thread's share
    of the load's queries is left as it was (not measured here). ``weight`` is the
    whole corpus's (:func:`~faultline.pipeline.workers.corpus_weight`), stored files
    included: the root causes are rebuilt over all of them.

    DuckDB's block allocator keeps the buffers it hands out (:data:`BLOCK_ALLOCATOR`):
    by default the insert's buffers went back to the system and were faulted in again.
    The load of llama3's kept shards, in a process with the driver's allocator
    settings (:mod:`~faultline.pipeline.malloc`), two runs each, alternating: 3.9 M
    page faults and 14.1-14.8 s of system CPU without it, 2.8 M and 10.6-11.8 s with
    1 GB; the load's time moved less than this machine's spread (31.5-35.3 s against
    33.8-34.8); peak memory 45-75 MB more (bench/RESULTS.md, session 18)."""
    con.execute(f"SET block_allocator_memory = '{BLOCK_ALLOCATOR}'")
    if weight < ONE_DUCKDB_THREAD_BYTES:
        con.execute("SET threads = 1")


def _open(db: Path) -> duckdb.DuckDBPyConnection:
    """The database, created if new; exit 2 for one that is not faultline's."""
    try:
        _refuse_foreign(db)
        return fdb.connect(db)
    except SchemaMismatch as exc:
        raise IngestError(f"{db}: {exc}") from exc
    except duckdb.Error as exc:  # not a DuckDB file, locked by another program...
        raise IngestError(fdb.open_error(db, exc)) from exc


def _refuse_foreign(db: Path) -> None:
    """An existing DuckDB database with tables of its own but none of faultline's is
    someone else's: ingest does not add its tables to it."""
    if not db.exists():
        return
    with duckdb.connect(str(db), read_only=True) as con:
        tables = con.execute("SELECT count(*) FROM information_schema.tables").fetchall()
        missing = fdb.missing_tables(con)
    if tables[0][0] and len(missing) == len(fdb.KEY_TABLES):
        raise IngestError(f"{db}: not a faultline database (a DuckDB database with other "
                          "tables); give --db a new file or one faultline wrote")


def _nothing_message(corpus: Sequence[Path | str], files: int) -> str:
    where = ", ".join(str(c) for c in corpus)
    if not files:
        return f"no cluster logs recognized under {where}: no files"
    return (f"no cluster logs recognized under {where}: {files} "
            f"file{'s' if files != 1 else ''}, all unknown")


def _require_recognized(con: duckdb.DuckDBPyConnection, staging: Path, paths: list[str],
                        todo: Listing, corpus: Sequence[Path | str], files: int) -> None:
    """Stop before loading when not one file of this run is of a known source: the
    files just parsed (their shards) and the unchanged ones stored by an earlier run."""
    pattern = staging / "files" / "*.parquet"
    if any((staging / "files").glob("*.parquet")):
        (new,), = con.execute("SELECT count(*) FROM read_parquet(?) WHERE source <> 'unknown'",
                              [str(pattern)]).fetchall()
        if new:
            return
    parsed = {p if isinstance(p, str) else p["path"] if isinstance(p, dict) else p[0]
              for p in todo}
    stored = {p for p, in con.execute("SELECT path FROM files WHERE source <> 'unknown'")
              .fetchall()}
    if any(p in stored for p in paths if p not in parsed):
        return
    raise NothingRecognized(_nothing_message(corpus, files))


@contextlib.contextmanager
def _created_only_on_success(db: Path) -> Iterator[None]:
    """A database this run creates is removed again if the run does not finish (an
    error, Ctrl-C): a failed first ingest leaves no file behind to mistake for a
    result. An existing database is left to its transaction (nothing committed)."""
    existed = db.exists()
    try:
        yield
    except BaseException:
        if not existed:
            for leftover in (db, db.with_name(db.name + ".wal")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()
        raise


# paths to read, [path, reason] for paths not to, {"path", "resume"} for grown files


def _todo(con: duckdb.DuckDBPyConnection, paths: list[str], skipped: list[tuple[str, str]],
          fingerprint: str, trusted: set[str] | frozenset[str] = frozenset()) -> Listing:
    """What this run must parse: files not stored yet or changed since (by size, mtime
    and parse settings), and the paths discovery passed over that are not yet recorded
    with that reason (each becomes a ``files`` row saying why it was not read)."""
    unchanged = unchanged_paths(con, paths, fingerprint, trusted)
    recorded = set(con.execute("SELECT path, problem FROM files WHERE bytes = 0 "
                               "AND parsed_with = ?", [fingerprint]).fetchall())
    read = [p for p in paths if p not in unchanged]
    grown = resume_plan.plan(con, read, fingerprint)  # parsed from where they stopped
    return [{"path": p, "resume": grown[p].to_json()} if p in grown else p
            for p in read] + [
        [p, why] for p, why in sorted(skipped) if (p, why) not in recorded]


def _dask_run() -> ModuleType:
    """:mod:`faultline.pipeline.dask_run`, imported only for a runner that is not local
    (it imports Beam, which the driver of a local run does not: ``beamrun``)."""
    from faultline.pipeline import dask_run

    return dask_run


def _exists(root: Path | str) -> bool:
    """A local path that exists, or a URI with at least one object at or under it."""
    if isinstance(root, Path):
        return root.exists()
    from apache_beam.io.filesystem import BeamIOError

    try:
        return bool(discover_uri(root))
    except (BeamIOError, ValueError) as exc:
        raise IngestError(f"{root}: cannot list it: {str(exc).splitlines()[0]}") from exc


def _summary(con, seconds: float) -> IngestSummary:
    (files, lines, events, rejects, problems), = con.execute("""
        SELECT (SELECT count(*) FROM files), (SELECT coalesce(sum(lines), 0) FROM files),
               (SELECT count(*) FROM events), (SELECT count(*) FROM rejects),
               (SELECT count(*) FROM files WHERE problem IS NOT NULL)
    """).fetchall()
    skewed = ingest_state.skewed_clocks(con)
    by_run = runs.interruption_counts(con)
    return IngestSummary(files, int(lines), events, rejects, sum(n for _r, n in by_run),
                         seconds, 0, problems=problems, skewed_clocks=skewed, by_run=by_run)
