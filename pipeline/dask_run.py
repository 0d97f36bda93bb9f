"""The ingest pipeline on a Dask cluster, through Beam's DaskRunner.

``faultline ingest --runner dask --dask-address tcp://HOST:PORT`` runs the parse step on
a ``dask.distributed`` cluster the user started (``dask scheduler``, ``dask worker``),
through Beam's own runner (``apache_beam.runners.dask.dask_runner``, Beam 2.77). That
runner translates a pipeline into a Dask bag, and it does not run everything the
local graph (:func:`faultline.pipeline.beamrun.build_pipeline`) uses (Beam 2.77, read in
``apache_beam/runners/dask/``):

- ``beam.io.Read`` becomes a no-op, so ``ReadFromText`` (the listing file) gives the
  next step no input at all: the listing is read on the driver and the batches go into
  the graph with ``beam.Create`` instead;
- ``Reshuffle`` is a no-op, so the work is spread by the bag's partitions: one
  partition per batch (``--dask_npartitions``), sized so every worker gets several;
- a DoFn's ``finish_bundle`` output is dropped (the runner collects the outputs before
  calling it), which loses ``BatchElements``' last batch of every bundle: the driver
  batches the paths itself;
- a partition's outputs are collected in a list that the task's arguments carry, so
  parsing and writing are one DoFn (:class:`ParseAndWrite`) whose only output is the
  shard paths: no Arrow table travels between tasks or stays behind in that list.

Metrics, side inputs, combiners and windowing are not used by the pipeline. The shard
location (``--shards``) must be writable by every worker and readable by the driver,
as on any cluster runner (on loopback, the default next to the database is).

A lost worker's tasks are rerun by Dask on the others; shard names derive from the
batch's content, so a rerun overwrites what the lost one may have half written.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Iterator, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.transforms import ParseFiles, WriteShards, batch_key, spread

RUNNER_NAMES = ("dask", "DaskRunner")
CONNECT_TIMEOUT_S = 5  # connecting to the scheduler and waiting for a first worker
TASKS_PER_WORKER = 4  # batches per worker: a slow or lost one holds up only a quarter
# Test hook, read on the workers: each batch sleeps this long before it is parsed, so
# a test can kill a worker while its tasks run (tests/test_dask.py). Unset: no delay.
DELAY_ENV = "FAULTLINE_TEST_TASK_DELAY"


class DaskUnavailable(Exception):
    """The Dask extra is not installed, or the scheduler cannot be used (exit 2)."""


def is_dask(runner: str) -> bool:
    return runner in RUNNER_NAMES


def address_flags(address: str | None, beam_opts: Sequence[str]) -> list[str]:
    """Beam's Dask options for ``--dask-address``; an error when neither it nor a
    ``--beam-opt dask_client_address``/``dask_scheduler_file`` names a scheduler (the
    runner would otherwise start a cluster of its own in this process)."""
    given = any(o.lstrip("-").startswith(("dask_client_address", "dask_scheduler_file"))
                for o in beam_opts)
    if address is None and not given:
        raise DaskUnavailable("--runner dask needs --dask-address tcp://HOST:PORT, the "
                              "address of a scheduler you started (dask scheduler)")
    return [] if address is None else [f"--dask_client_address={address}"]


def check_scheduler(options: PipelineOptions) -> int:
    """Ask the scheduler the options name how many workers it has, waiting for a first
    one, all within a bounded time (``--dask_connection_timeout``, default
    :data:`CONNECT_TIMEOUT_S`); the number of workers. A bad address, a scheduler that
    does not answer or one without workers is one clear error instead of a hang.

    The probe speaks Dask's wire protocol directly (one ``identity`` call on one
    connection): a ``Client`` that fails to connect keeps its event loop and takes twice
    the timeout more to give up when it is garbage-collected."""
    try:
        from apache_beam.runners.dask.dask_runner import DaskOptions
        from distributed.comm import connect, parse_address
        from distributed.core import send_recv
    except ImportError as exc:
        raise DaskUnavailable("--runner dask needs the Dask extra: pip install "
                              "'faultline[dask]' (with -c constraints.txt)") from exc
    opts = options.view_as(DaskOptions).get_all_options(drop_default=True,
                                                        current_only=True)
    address = opts.get("address") or _from_scheduler_file(opts.get("scheduler_file"))
    timeout = opts["timeout"] if isinstance(opts.get("timeout"), int) else CONNECT_TIMEOUT_S
    try:
        parse_address(address, strict=True)
    except ValueError as exc:
        raise DaskUnavailable(f"{address}: not a Dask scheduler address (give "
                              f"tcp://HOST:PORT): {_first_line(exc)}") from exc

    async def probe() -> int:
        deadline = time.monotonic() + timeout
        comm = await connect(address, timeout=timeout)
        try:
            while True:
                info = await asyncio.wait_for(send_recv(comm, op="identity"),
                                              max(0.1, deadline - time.monotonic()))
                workers = info.get("n_workers", len(info.get("workers", {})))
                if workers or time.monotonic() >= deadline:
                    return int(workers)
                await asyncio.sleep(0.2)
        finally:
            comm.abort()

    try:
        workers = asyncio.run(probe())
    except Exception as exc:  # OSError, TimeoutError, a peer that is not a scheduler...
        raise DaskUnavailable(f"cannot reach the Dask scheduler at {address} within "
                              f"{timeout} s: {_first_line(exc)}") from exc
    if not workers:
        raise DaskUnavailable(f"the Dask scheduler at {address} has no workers (none "
                              f"connected within {timeout} s): start dask worker {address}")
    return workers


def _from_scheduler_file(path: str | None) -> str:
    """The address a ``dask scheduler --scheduler-file`` wrote."""
    try:
        with open(str(path), encoding="utf-8") as f:  # noqa: PTH123
            return str(json.load(f)["address"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DaskUnavailable(f"{path}: cannot read a scheduler address from it: "
                              f"{_first_line(exc)}") from exc


def describe(exc: BaseException) -> str:
    """A failed run in one line: Dask's ``KilledWorker`` (a task whose workers died
    too often) says which task and how to go on; anything else, its first line."""
    name = type(exc).__name__
    if name == "KilledWorker":
        return ("a task was lost with every worker that ran it (KilledWorker: "
                f"{_first_line(exc)}); nothing was written; start workers and run again")
    return f"{name}: {_first_line(exc)}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def batches(paths: Sequence[str | list[str]], batch_size: int, workers: int
            ) -> list[list[str | list[str]]]:
    """The listing cut into batches in order, at most ``batch_size`` paths each and at
    least :data:`TASKS_PER_WORKER` batches per worker when there are paths enough."""
    size = max(1, min(batch_size, math.ceil(len(paths) / (TASKS_PER_WORKER * workers))))
    return [list(paths[i:i + size]) for i in range(0, len(paths), size)]


class ParseAndWrite(beam.DoFn):
    """A batch of paths -> its shards written, their paths out (ParseFiles, then
    WriteShards, in one task). ``fs_flags`` are Beam's options for the filesystems
    (``--s3_endpoint_url``...): a Dask worker has no pipeline options of its own."""

    def __init__(self, settings: IngestSettings, staging: str,
                 fs_flags: Sequence[str] = ()) -> None:
        self.parse = ParseFiles(settings)
        self.write = WriteShards(staging)
        self.fs_flags = tuple(fs_flags)

    def setup(self) -> None:
        if self.fs_flags:
            FileSystems.set_options(PipelineOptions(list(self.fs_flags)))

    def process(self, batch: list[str | list[str]]) -> Iterator[str]:
        delay = os.environ.get(DELAY_ENV)
        if delay:
            time.sleep(float(delay))
        for item in self.parse.process(batch):
            yield from self.write.process(item)


def build_dask_pipeline(p: beam.Pipeline, work: list[list[str | list[str]]],
                        settings: IngestSettings, shards: str,
                        fs_flags: Sequence[str] = ()) -> beam.PCollection[str]:
    """The ingest graph the DaskRunner can run: the batches in, shard paths out."""
    return (p
            | "Batches" >> beam.Create(work, reshuffle=False)
            | "ParseAndWrite" >> beam.ParDo(ParseAndWrite(settings, shards, fs_flags)))


def run(paths: Sequence[str | list[str]], settings: IngestSettings, shards: str,
        flags: Sequence[str], batch_size: int, workers: int) -> None:
    """Parse ``paths`` into shards under ``shards`` on the cluster ``flags`` name
    (checked with :func:`check_scheduler`, which counted its ``workers``).

    The client the runner opens is closed when the run ends, and a run stopped by
    Ctrl-C or an error cancels its tasks on the cluster, so nothing runs on after it."""
    from apache_beam.runners.dask.dask_runner import DaskRunner

    work = batches(spread(list(paths)), batch_size, workers)
    if not work:
        return
    flags = [*flags, f"--dask_npartitions={len(work)}"]
    options = PipelineOptions(list(flags))
    p = beam.Pipeline(runner=DaskRunner(), options=options)
    build_dask_pipeline(p, work, settings, shards, flags)
    result = p.run()
    finished = False
    try:
        result.wait_until_finish()
        finished = True
    finally:
        if not finished:
            result.client.cancel(result.futures, force=True)
        result.client.close()
    missing = missing_batches(work, shards)
    if missing:
        raise DaskUnavailable(
            f"the workers finished but the shards of {missing} of {len(work)} batches are "
            f"not under {shards}: the workers must write where the driver reads (give "
            "--shards a shared filesystem path or an object-store URI)")


def missing_batches(work: list[list[str | list[str]]], shards: str) -> int:
    """Batches without a ``files`` shard under ``shards``: a worker on another machine
    wrote them to its own disk. Loading what is there would be a wrong answer."""
    pattern = FileSystems.join(shards, "files", "*.parquet")
    found = {m.path.rsplit("/", 1)[-1].split("-n", 1)[0]
             for m in FileSystems.match([pattern])[0].metadata_list}
    return sum(1 for batch in work if batch_key(batch) not in found)
