"""Running the parse step: the Beam pipeline on the local runner (in-process, or on
worker processes forked from :mod:`faultline.pipeline.forkserver`) or on any runner
``--runner`` / ``--beam-opt`` name, and the Dask graph of :mod:`faultline.pipeline.dask_run`.

Everything here is about Beam's options, processes and output; what to parse and what
becomes of the shards is :mod:`faultline.pipeline.run`'s. Both parse functions write
Parquet shards under ``staging.uri`` and nothing else, report progress from the shard
names, keep Beam's own logging off the terminal (``beam.log`` in the staging dir, its
tail shown when the pipeline fails) and turn a Ctrl-C that Beam wrapped back into
``KeyboardInterrupt``.

On a local multi-worker run with a fork server the driver does not import Beam (about
1 CPU s of imports on the parse's critical path): it writes the listing, hands the
rest of the pipeline's inputs to the server as JSON (:class:`Job`) and waits while a
process forked from the server, which has Beam imported, runs :func:`run_job`, the
pipeline the driver would have run, on workers forked from the same server
(:class:`faultline.pipeline.forkserver.PipelineProcess`). Where the server
cannot (not running, would not fork), the driver runs :func:`run_job` itself, with
the same options and the same tables. Beam is imported here only by the functions
that run it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faultline.pipeline import forkclient, forkserver, reaper
from faultline.pipeline.batching import BATCH_SIZE, even_size, spread
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.staging import Staging
from faultline.pipeline.workers import LOCAL_RUNNERS

if TYPE_CHECKING:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

Listing = list[str | list[str] | dict]  # paths, [path, reason] and grown-file entries


class ParseFailed(Exception):
    """The parse step could not run (a Dask cluster that fails or cannot be reached,
    the fork server gone mid-parse): the message says why, for the user."""


class PipelineFailed(RuntimeError):
    """The pipeline, run in the fork server's process, raised: its message, as the
    driver's own run would have raised it (Beam's ``RuntimeError`` naming the step)."""


RESULT = "pipeline-result.json"  # the pipeline process's outcome, in the staging dir


@dataclass(frozen=True)
class Job:
    """Everything :func:`run_job` needs, and nothing of the driver's memory: JSON
    both ways (:meth:`to_json`, :meth:`from_json`), so it reaches the fork server's
    pipeline process without a pickle."""

    listing: str  # the paths file (staging.write_listing)
    settings: IngestSettings
    shards: str  # staging.uri
    runner: str
    workers: int
    beam_opts: tuple[str, ...]
    batch_size: int

    def to_json(self) -> dict[str, Any]:
        return {"listing": self.listing, "settings": self.settings.to_json(),
                "shards": self.shards, "runner": self.runner, "workers": self.workers,
                "beam_opts": list(self.beam_opts), "batch_size": self.batch_size}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        return cls(data["listing"], IngestSettings.from_json(data["settings"]),
                   data["shards"], data["runner"], int(data["workers"]),
                   tuple(data["beam_opts"]), int(data["batch_size"]))


def beam_flags(beam_opts: list[str]) -> list[str]:
    """``--beam-opt`` values as Beam's command-line flags (the leading ``--`` optional)."""
    return [o if o.startswith("--") else f"--{o}" for o in beam_opts]


MULTI_PROCESSING = "--direct_running_mode=multi_processing"


def beam_options(runner: str, workers: int, beam_opts: list[str],
                 worker_command: str | None = None) -> tuple[object, PipelineOptions]:
    """The runner to use and Beam's options, from faultline's flags.

    ``worker_command`` (a fork server's client, :mod:`faultline.pipeline.forkserver`)
    replaces Beam's stock worker command in multi-process mode: the FnApiRunner is
    given it as its default environment, and ``direct_running_mode`` is left unset,
    since ``multi_processing`` would replace that environment with the stock command
    (``FnApiRunner.run_pipeline``); ``direct_num_workers`` still sets the worker count."""
    from apache_beam.options.pipeline_options import PipelineOptions

    flags = beam_flags(beam_opts)
    if workers > 1:
        flags += [f"--direct_num_workers={workers}", "--default_sdk_harness_log_level=ERROR"]
        if os.name == "posix" and worker_command is None:
            # --beam-opt direct_running_mode=multi_processing asks for what follows:
            # Beam's stock workers; left in, the runner would start them with its own
            # command, which a terminal's Ctrl-C kills mid-bundle (the run then hung)
            flags = [f for f in flags if f != MULTI_PROCESSING]
        if worker_command is None and os.name == "posix":  # Beam's stock worker, but
            # deaf to Ctrl-C as the fork server's are (forkserver.IGNORE_INT)
            worker_command = forkserver.IGNORE_INT + shlex.join(
                [sys.executable, *forkclient.STOCK_WORKER])
        elif worker_command is None:
            flags.append("--direct_running_mode=multi_processing")
    options = PipelineOptions(flags)
    if runner in LOCAL_RUNNERS:
        # The FnApiRunner is what DirectRunner runs batch pipelines on once it has
        # given up on Prism; naming it skips the Prism download attempt. Like
        # DirectRunner, hand it the options so multi-process workers see them too.
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle
        from apache_beam.transforms.environments import SubprocessSDKEnvironment

        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        info = fn_runner.ExtendedProvisionInfo(
            beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
        environment = (SubprocessSDKEnvironment.from_command_string(worker_command)
                       if workers > 1 and worker_command else None)
        return fn_runner.FnApiRunner(default_environment=environment,
                                     provision_info=info), options
    return runner, options


def parse(paths: Listing, staging: Staging, settings: IngestSettings, runner: str,
           workers: int, beam_opts: list[str], batch_size: int,
           progress: Callable[[int, int], None] | None,
           fork_server: forkserver.ForkServer | None = None) -> None:
    """The Beam pipeline: paths -> Parquet shards under ``staging.uri``; run by a
    process of ``fork_server``'s when it can (module doc), else here."""
    listing = staging.write_listing(spread(list(paths)))
    size = even_size(len(paths), batch_size, workers)
    job = Job(listing, settings, staging.uri, runner, workers, tuple(beam_opts), size)
    done = _progress_from_shards(staging.local, len(paths), progress)
    try:
        # a server still importing is waited for (its clients would wait too); one that
        # will not fork exits, and the driver runs the pipeline itself
        if (fork_server is not None and forkserver.wanted(runner, workers, beam_opts)
                and fork_server.ready(forkclient.CONNECT_TIMEOUT_S)
                and _run_on_server(job, staging, fork_server)):
            return
        with _worker_command(runner, workers, beam_opts, fork_server) as command, \
                _beam_output_to(staging.local / BEAM_LOG), reaper.workers_end_on_ctrl_c():
            run_job(job, command, staging.local)
    except Exception as exc:
        if is_interrupt(exc):  # Ctrl-C inside a transform: Beam re-raises it wrapped
            raise KeyboardInterrupt from exc
        raise
    finally:
        done.set()


def run_job(job: Job, worker_command: str | None, scratch: Path) -> None:
    """Build and run the pipeline (the driver's, or the fork server's process's), its
    temporary directory in ``scratch``, the run's local staging directory.

    Beam's pipeline makes a temporary directory as it is built and removes it as its
    run ends; in a process that never gets there (the pipeline's process, killed on
    a Ctrl-C; an ingest killed by SIGKILL) it stayed in /tmp, one a run. In the
    staging directory it goes with the run's other leftovers: the driver removes them,
    or the next ingest on the database does."""
    import apache_beam as beam

    with _quiet_parallelism_warning():
        run_runner, options = beam_options(job.runner, job.workers, list(job.beam_opts),
                                           worker_command)
        with _temporary_files_in(scratch):
            pipeline = beam.Pipeline(runner=run_runner, options=options)
        with pipeline as p:
            build_pipeline(p, job.listing, job.settings, job.shards, job.batch_size)


@contextlib.contextmanager
def _temporary_files_in(directory: Path) -> Iterator[None]:
    """:mod:`tempfile`'s default directory is ``directory`` for the block (Beam names
    no option for its pipeline's own)."""
    import tempfile

    before = tempfile.tempdir
    tempfile.tempdir = str(directory)
    try:
        yield
    finally:
        tempfile.tempdir = before


def _run_on_server(job: Job, staging: Staging, server: forkserver.ForkServer) -> bool:
    """Run ``job`` in a process forked from ``server`` (its stderr is ``beam.log``, as
    the driver's would be): True once it succeeded, False if the server would not fork
    it (the driver then runs it itself); the pipeline's error if it failed, and
    :class:`ParseFailed` if the process or its server ended without an outcome."""
    result = staging.local / RESULT
    result.unlink(missing_ok=True)
    with _beam_output_to(staging.local / BEAM_LOG):
        pipeline = server.take_pipeline()
        code = None if pipeline is None else pipeline.run(job.to_json(), result,
                                                          staging.local / BEAM_LOG)
        if code is None:
            return False
        try:
            outcome = json.loads(result.read_text())
        except (OSError, ValueError):
            outcome = None
        finally:
            result.unlink(missing_ok=True)
        if outcome is None:
            why = ("its fork server ended" if code == forkserver.LOST
                   else f"it ended with exit code {code}")
            raise ParseFailed(f"the parse's pipeline process stopped before it finished "
                              f"({why}); nothing was written")
        if outcome.get("interrupt"):
            raise KeyboardInterrupt
        if not outcome.get("ok"):
            raise PipelineFailed(outcome.get("error") or "the pipeline failed")
    return True


@contextlib.contextmanager
def _worker_command(runner: str, workers: int, beam_opts: list[str],
                    given: forkserver.ForkServer | None) -> Iterator[str | None]:
    """The fork server's worker command for a multi-process run (``given``'s if it is
    still running, else a server started here and stopped after the pipeline), or None:
    one worker, another runner, or no server to be had (Beam's stock workers)."""
    if not forkserver.wanted(runner, workers, beam_opts):
        yield None
        return
    if given is not None and given.alive():
        yield given.command()
        return
    own = forkserver.ForkServer.start()
    if own is None:
        yield None
        return
    with own:
        yield own.command()


class _NoParallelismWarning(logging.Filter):
    """Drops the FnApiRunner's warning that ``direct_num_workers`` > 1 wants
    ``direct_running_mode=multi_processing``: with a fork server's environment the
    workers are separate processes all the same."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "direct_running_mode" not in record.getMessage()


@contextlib.contextmanager
def _quiet_parallelism_warning() -> Iterator[None]:
    logger = logging.getLogger("apache_beam.runners.portability.fn_api_runner.fn_runner")
    quiet = _NoParallelismWarning()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def parse_on_dask(paths: Listing, staging: Staging, settings: IngestSettings,
                   flags: list[str], batch_size: int, workers: int,
                   progress: Callable[[int, int], None] | None) -> None:
    """:func:`parse` on a Dask cluster (:func:`faultline.pipeline.dask_run.run`)."""
    from faultline.pipeline import dask_run

    staging.local.mkdir(parents=True, exist_ok=True)
    done = _progress_from_shards(staging.local, len(paths), progress)
    try:
        with _beam_output_to(staging.local / BEAM_LOG):
            dask_run.run(paths, settings, staging.uri, flags, batch_size, workers)
    except dask_run.DaskUnavailable as exc:
        raise ParseFailed(str(exc)) from exc
    except Exception as exc:
        if is_interrupt(exc):
            raise KeyboardInterrupt from exc
        raise ParseFailed(f"the Dask run failed: {dask_run.describe(exc)}") from exc
    finally:
        done.set()


BEAM_LOG = "beam.log"
BEAM_LOG_TAIL = 40  # lines of it shown when the pipeline fails


@contextlib.contextmanager
def _beam_output_to(log: Path) -> Iterator[None]:
    """Keep Beam's own output off the terminal while the pipeline runs.

    Beam logs what a user has no use for (worker processes announce "Logging handler
    created", warn "apitools not found" at import, and log every failed bundle with a
    traceback before the runner raises it). Worker processes inherit file descriptor
    2, so it is pointed at ``log`` for the pipeline's duration, and ``sys.stderr``
    (faultline's progress bar and messages) at a copy of the terminal. If the pipeline
    fails for another reason than Ctrl-C, the log's last lines are shown after all."""
    sys.stderr.flush()
    terminal = os.dup(2)
    previous = sys.stderr
    with log.open("ab") as sink:
        os.dup2(sink.fileno(), 2)
        sys.stderr = os.fdopen(os.dup(terminal), "w", buffering=1,
                               encoding=previous.encoding or "utf-8", errors="replace")
        failed = False
        try:
            yield
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            failed = not is_interrupt(exc)
            raise
        finally:
            sys.stderr.flush()
            sys.stderr = previous
            os.dup2(terminal, 2)
            os.close(terminal)
            if failed:
                tail = log.read_text(errors="replace").splitlines()[-BEAM_LOG_TAIL:]
                if tail:
                    print("\n".join(tail), file=sys.stderr)


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C that Beam wrapped: the in-process runner re-raises
    an exception from a transform as ``RuntimeError("KeyboardInterrupt [while running
    'Step']")``, chained to the original when it can."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt) or str(e).startswith("KeyboardInterrupt"):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def build_pipeline(p: beam.Pipeline, listing: str, settings: IngestSettings, shards: str,
                   batch_size: int = BATCH_SIZE) -> beam.PCollection[str]:
    """The whole ingest graph: a listing of paths in, Parquet shard paths out. Nothing
    in it refers to the driver's memory or files except through ``listing`` and
    ``shards``, which is what lets a cluster runner execute it."""
    from faultline.pipeline.transforms import ParseCorpus

    return p | "ParseCorpus" >> ParseCorpus(listing, settings, shards, batch_size)


def _progress_from_shards(staging: Path, total: int, progress: Callable[[int, int], None] | None
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
