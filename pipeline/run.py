"""``faultline ingest``: the only place that touches options, the filesystem and DuckDB.

    discover files -> paths list -> Beam: ParseCorpus -> Parquet shards -> DuckDB

Runs on the local DirectRunner by default (in-process; ``--workers N`` for Beam's
multi-process mode) and on any other runner through ``--runner`` / ``--beam-opt``,
which pass through to Beam's PipelineOptions untouched. The default never tries
Beam's Prism runner, which recent releases download from the internet at run time.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import apache_beam as beam
import duckdb
from apache_beam.options.pipeline_options import PipelineOptions

from faultline import db as fdb
from faultline.pipeline.discover import discover
from faultline.pipeline.fileparse import gunzip
from faultline.pipeline.load import load_shards
from faultline.pipeline.parsers import sacct, slurmctld
from faultline.pipeline.records import ParseContext
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.sniff import path_hint
from faultline.pipeline.text import decode
from faultline.pipeline.transforms import ParseCorpus, read_bytes


class IngestError(Exception):
    """Bad usage or unreadable input named on the command line (exit 2)."""


@dataclass
class IngestSummary:
    files: int
    lines: int
    events: int
    rejects: int
    interruptions: int
    seconds: float
    new_files: int

    def line(self) -> str:
        return (f"ingested {self.files} files ({self.new_files} new or changed), "
                f"{self.lines} lines, {self.events} events, {self.interruptions} "
                f"interruptions, {self.rejects} rejects in {self.seconds:.1f} s")


def beam_options(runner: str, workers: int, beam_opts: list[str]) -> tuple[object, PipelineOptions]:
    """The runner to use and Beam's options, from faultline's flags."""
    flags = [o if o.startswith("--") else f"--{o}" for o in beam_opts]
    if workers > 1:
        flags += ["--direct_running_mode=multi_processing", f"--direct_num_workers={workers}",
                  "--default_sdk_harness_log_level=ERROR"]
    options = PipelineOptions(flags)
    if runner in ("DirectRunner", "direct", "FnApiRunner"):
        # The FnApiRunner is what DirectRunner runs batch pipelines on once it has
        # given up on Prism; naming it skips the Prism download attempt. Like
        # DirectRunner, hand it the options so multi-process workers see them too.
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        info = fn_runner.ExtendedProvisionInfo(
            beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
        return fn_runner.FnApiRunner(provision_info=info), options
    return runner, options


@contextlib.contextmanager
def exclusive(db: Path) -> Iterator[None]:
    """One ingest per database at a time: a second one fails with a clear message."""
    lock_path = db.with_name(db.name + ".lock")
    with lock_path.open("w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise IngestError(f"another faultline ingest is writing {db}; wait for it to "
                              "finish") from exc
        yield


def corpus_window(paths: list[str], tz: str) -> tuple[int, int] | None:
    """First and last time in the job records (sacct, slurmctld): syslog lines without
    a year are placed in this window."""
    lo = hi = None
    for path in paths:
        hint = path_hint(path)
        parser = {"sacct": sacct.parse, "slurmctld": slurmctld.parse}.get(hint or "")
        if parser is None:
            continue
        try:
            data, _ = read_bytes(path)
        except OSError:  # vanished or unreadable since discovery: the parse says so
            continue
        if data[:2] == b"\x1f\x8b":
            data, _ = gunzip(data)
        fp = parser(decode(data), ParseContext(path=path, tz=tz))
        times = [e.ts for e in fp.events if e.ts is not None]
        times += [v for e in fp.events for k in ("start", "end")
                  if isinstance(v := e.attrs.get(k), int)]
        if times:
            lo = min(times) if lo is None else min(lo, *times)
            hi = max(times) if hi is None else max(hi, *times)
    return (lo, hi) if lo is not None else None


def ingest(corpus: list[Path], db: Path, *, tz: str = "UTC", year: int | None = None,
           runner: str = "DirectRunner", workers: int = 1, beam_opts: list[str] | None = None,
           batch_size: int = 256, progress: Callable[[int, int], None] | None = None
           ) -> IngestSummary:
    t0 = time.perf_counter()
    for root in corpus:
        if not root.exists():
            raise IngestError(f"{root}: no such file or directory")
    db = db.resolve()
    staging = db.with_name(db.name + ".staging")
    with exclusive(db):
        paths = list(discover(corpus, exclude=[staging, db]))
        settings = IngestSettings(tz=tz, year=year,
                                  window=None if year else corpus_window(paths, tz))
        if staging.exists():
            shutil.rmtree(staging)  # a killed run's leftovers: never loaded
        staging.mkdir(parents=True)
        listing = staging / "paths.jsonl"
        with listing.open("w", encoding="utf-8") as f:
            for p in paths:
                f.write(json.dumps(p) + "\n")
        run_runner, options = beam_options(runner, workers, beam_opts or [])
        done = _watch(staging, len(paths), progress)
        try:
            with beam.Pipeline(runner=run_runner, options=options) as p:
                _ = (p
                     | "ReadPaths" >> beam.io.ReadFromText(str(listing))
                     | "Decode" >> beam.Map(json.loads)
                     | "ParseCorpus" >> ParseCorpus(settings, str(staging), batch_size))
        finally:
            done.set()
        con = fdb.connect(db)
        try:
            load_shards(con, staging)
            summary = _summary(con, time.perf_counter() - t0)
            summary.new_files = _count_changed(con)
        finally:
            con.close()
        shutil.rmtree(staging)
    return summary


def _count_changed(con) -> int:
    try:
        return con.execute("SELECT count(*) FROM changed").fetchone()[0]
    except duckdb.CatalogException:  # no shards were loaded: no temp table
        return 0


def _summary(con, seconds: float) -> IngestSummary:
    files, lines = con.execute("SELECT count(*), coalesce(sum(lines), 0) FROM files"
                               ).fetchone()
    events = con.execute("SELECT count(*) FROM events").fetchone()[0]
    rejects = con.execute("SELECT count(*) FROM rejects").fetchone()[0]
    interruptions = con.execute("SELECT count(*) FROM interruptions").fetchone()[0]
    return IngestSummary(files, int(lines), events, rejects, interruptions, seconds, 0)


def _watch(staging: Path, total: int, progress: Callable[[int, int], None] | None
           ) -> threading.Event:
    """Report files parsed so far from the shard names (``...-n<rows>.parquet``)."""
    stop = threading.Event()
    if progress is None:
        return stop

    def loop() -> None:
        while not stop.wait(0.5):
            done = 0
            with contextlib.suppress(FileNotFoundError):
                for shard in (staging / "files").iterdir():
                    done += int(shard.name.rsplit("-n", 1)[1].split(".")[0])
            progress(done, total)

    threading.Thread(target=loop, daemon=True).start()
    return stop
