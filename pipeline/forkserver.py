"""A process that has imported Beam's SDK worker once and forks the run's workers.

Beam's multi-process mode starts every worker as a new ``python -m
apache_beam.runners.worker.sdk_worker_main``, which imports Beam (pandas, pyarrow,
grpc, the IO modules...) before it can take work: about 0.65 CPU s a worker, paid on
both cores while the driver waits. This server imports those modules once, early (the
console script starts it before the CLI's own imports, :mod:`faultline.launch`, so that
the server's imports overlap the driver's on the other core), and then forks one worker
per request of the small client Beam runs instead (:mod:`faultline.pipeline.forkclient`).

Fork safety. A forked child has only the thread that forked, so the server must have
no other thread when it forks: a child of a process whose thread pool (OpenBLAS,
rayon, tokio, jemalloc's background threads) was running would wait forever for
threads it does not have. Two native libraries Beam pulls in start threads at import:
numpy's OpenBLAS (its pool) and pyarrow's jemalloc (a background purge thread); the
server runs with ``OPENBLAS_NUM_THREADS=1`` and jemalloc's background thread off
(:data:`THREADLESS`: they only change the server's own process and its forks, whose
work is parsing, not BLAS). polars starts threads as soon as it is loaded (its
out-of-core cleaner; its pool once a parser module builds an expression), so the
server does not import polars or faultline's parsers: each worker imports them after
the fork (about 0.25 CPU s). So that these imports are not paid between the runner's
request and the worker's first bundle, the server forks the run's workers ahead, as
the pipeline's process is asked for: they import while the driver discovers the corpus
and the pipeline is built, then wait on a socket each for the request the server hands
over (``forkloop``: ``_Loop._stand_by``; small x4's first shard came 0.6 s sooner).
Before its first fork the server counts the threads of its process
(``/proc/self/task``) and, if there is more than one, exits without forking: the
clients then start Beam's stock worker (slower, same tables).

The pipeline too. A local multi-worker run's driver does not import Beam at all
(about 1 CPU s, before the parse could start): it asks the server, on the same socket
and with the same checks, for a process that runs the whole pipeline
(:func:`faultline.pipeline.beamrun.run_job`, the FnApiRunner the driver would have run,
with this server's worker command), forked like a worker. The server stays one thread:
it forks that process, then the workers whose clients that process's runner starts.
The driver asks for it as its run starts (:class:`PipelineProcess`), so that it imports
the transforms while the driver discovers the corpus, then sends the job (JSON, over a
pipe that is the process's stdin) and waits for its exit; the outcome comes back in a
JSON file the driver named.

Lifetime. The server reads its stdin, a pipe from the driver: end of file (the
driver stopped it, or died, even by ``kill -9``) makes it kill the workers still
running, remove its directory and exit. A worker dies with the server
(``PR_SET_PDEATHSIG``), and the server kills a worker whose client went away (Beam
kills the client of a worker it gives up on). The socket and the token file live in a
directory of the run's own (``mkdtemp``: mode 0700); a connection must come from this
user (``SO_PEERCRED``) and present the token, or it is closed without a fork.

This module is the driver's side (the handle, the worker command, the pipeline's
process); the server's own process runs :mod:`faultline.pipeline.forkloop`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from faultline.pipeline import forkclient
from faultline.pipeline.workers import LOCAL_RUNNERS, likely

# imported once by the server: everything a worker needs before its first bundle
# except polars and what imports it (see the module doc)
PRELOAD = ("apache_beam.runners.worker.sdk_worker_main", "apache_beam.io.parquetio",
           "pyarrow.parquet")
# the server's environment: native libraries loaded at import start no thread
THREADLESS = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}
FORKED = "forked"  # a line per worker forked, with its pid (tests read it)
PIPELINE = "pipeline"  # the same for the pipeline's process
LOST = -1  # PipelineProcess.run: the server went away before its child ended
READY = "ready"  # created once the imports are done and the threads counted
STOP_WAIT_S = 5.0
HANDSHAKE_TIMEOUT_S = 5.0
MAX_REQUEST = 1 << 22
MAX_STANDBY = 64  # workers forked ahead of their requests (forkloop: _Loop._stand_by)
PR_SET_PDEATHSIG = 1
# Ctrl-C at a terminal sends SIGINT to the whole foreground process group. A worker that
# died of it before the driver had unwound left Beam's runner waiting for that worker's
# bundles for ever (seen: the driver hung with stock and with forked workers alike);
# the driver alone handles Ctrl-C, and its teardown ends the workers (the server kills
# its forks when the driver's pipe closes; Beam's own workers end with their control
# channel). ``sh -c`` runs the worker command: ``trap '' INT`` makes the ignoring
# disposition the exec'd process's from its start (Python keeps an ignored SIGINT).
IGNORE_INT = "trap '' INT; exec "


def supported() -> bool:
    """Linux with fork, ``pidfd_open`` and ``SCM_RIGHTS`` (Python 3.9+, Linux 5.3+)."""
    return sys.platform == "linux" and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")


def threads() -> int:
    """Threads of this process, native ones included (``threading`` sees Python's only)."""
    try:
        return len(os.listdir("/proc/self/task"))  # noqa: PTH208
    except OSError:
        import threading

        return threading.active_count()


def wanted(runner: str, workers: int | None, beam_opts: list[str],
           roots: Iterable[str | os.PathLike[str]] = ()) -> bool:
    """Whether a run with these flags will likely parse on more than one local worker,
    and so on forked ones: a local runner, more than one worker given, or by default
    (:func:`faultline.pipeline.workers.likely`: a first guess from the sizes of the
    files under ``roots``; a server started for a run that then needs one worker costs
    about 0.8 CPU s), and Beam's running mode not chosen by ``--beam-opt`` (the server
    stands in for ``multi_processing``'s worker command only)."""
    if runner not in LOCAL_RUNNERS or not supported():
        return False
    if any(o.lstrip("-").startswith("direct_running_mode") for o in beam_opts):
        return False
    return likely(workers, roots) > 1


class ForkServer:
    """The driver's handle on a running server: its worker command and its stop."""

    def __init__(self, directory: Path, process: subprocess.Popen[bytes],
                 log: IO[bytes]) -> None:
        self.directory = directory
        self.process = process
        self._log = log  # the server's stderr: never the terminal (Beam warns at import)
        self._log_text: str | None = None
        self._forked: list[int] | None = None  # read at stop, before the directory goes
        self._pipelines: list[int] | None = None  # the same
        self._pipeline: PipelineProcess | None = None  # asked for ahead, not yet run

    @classmethod
    def start(cls, preload: tuple[str, ...] = PRELOAD) -> ForkServer | None:
        """A new server (importing ``preload`` in the background), or None where
        forking workers is not supported or the process cannot be started."""
        if not supported():
            return None
        directory = Path(tempfile.mkdtemp(prefix="faultline-fork-"))  # mode 0700
        try:
            fd = os.open(directory / forkclient.TOKEN, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                         0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(16))
            log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop)
            process = subprocess.Popen(
                [sys.executable, "-m", "faultline.pipeline.forkloop", str(directory),
                 *preload],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log,
                env=dict(os.environ, **THREADLESS))
        except OSError:
            shutil.rmtree(directory, ignore_errors=True)
            return None
        return cls(directory, process, log)

    def log(self) -> str:
        """What the server wrote to its stderr (why it did not fork, if it did not)."""
        if self._log_text is not None:
            return self._log_text
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def ready(self, timeout: float) -> bool:
        """Wait until the server has imported and may fork (False: it will not, or
        not within ``timeout`` seconds; its clients then start stock workers)."""
        import time

        deadline = time.monotonic() + timeout
        while not (self.directory / READY).exists():
            if not self.alive() or time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def command(self) -> str:
        """The worker command line for Beam (:func:`worker_command`)."""
        return worker_command(self.directory)

    def ask_pipeline(self, workers: int = 0) -> None:
        """Ask for the pipeline's process now, ahead of its job (module doc: it imports
        the transforms while the driver discovers the corpus), and for ``workers`` of
        its workers to be forked ahead too; nothing if the server cannot be asked yet
        (:meth:`take_pipeline` asks again)."""
        if self._pipeline is None:
            self._pipeline = PipelineProcess.ask(self.directory, workers)

    def take_pipeline(self) -> PipelineProcess | None:
        """The pipeline process asked for ahead, or one asked for now (None: the server
        cannot be asked). Its :meth:`PipelineProcess.run` says whether it was forked."""
        pipeline, self._pipeline = self._pipeline, None
        return pipeline or PipelineProcess.ask(self.directory)

    def forked(self) -> list[int]:
        """The pids of the workers forked so far (all of them, once stopped)."""
        if self._forked is not None:
            return self._forked
        return self._pids(FORKED)

    def pipelines(self) -> list[int]:
        """The pids of the pipeline processes forked so far (all of them, once stopped)."""
        if self._pipelines is not None:
            return self._pipelines
        return self._pids(PIPELINE)

    def _pids(self, name: str) -> list[int]:
        try:
            return [int(n) for n in (self.directory / name).read_text().split()]
        except FileNotFoundError:
            return []

    def stop(self) -> None:
        """End the server (and any worker still running); idempotent."""
        if self._forked is None:
            self._forked, self._pipelines = self.forked(), self.pipelines()
        if self._pipeline is not None:  # asked for, never given a job: it ends
            self._pipeline.close()
            self._pipeline = None
        if not (self.directory / READY).exists():
            # still importing (a run that turned out to need one worker): it has forked
            # nothing, and waiting for its imports to end would only cost time
            self.process.kill()
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)
        if self._log_text is None:
            self._log_text = self.log()
            self._log.close()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def worker_command(directory: Path) -> str:
    """The worker command line for Beam (run by ``sh -c``) of the server in
    ``directory``: the client, without site packages, ignoring SIGINT from its first
    instruction on (:data:`IGNORE_INT`)."""
    return IGNORE_INT + shlex.join([sys.executable, "-I", "-S", forkclient.__file__,
                                    str(directory)])


WAKE_S = 0.2  # how often the driver's wait for its pipeline's process wakes (await_line)


def await_line(sock: socket.socket, replies: IO[bytes]) -> bytes:
    """``replies.readline()`` (``replies`` reads ``sock``), waking every
    :data:`WAKE_S` seconds until there is something to read, so that a Ctrl-C is
    raised here within that time.

    The kernel hands a SIGINT to any thread of the driver that does not block it, and
    polars' and tokio's threads do not; Python runs its handler, and raises
    ``KeyboardInterrupt``, in the main thread only when that thread runs Python again.
    Blocked in ``recv``, the main thread waited for the pipeline to end: a Ctrl-C in
    the middle of small x4's parse took 1.7-2.2 s to end the run, and on a large corpus
    it would have taken the rest of its parse. The server closes the connection after
    its last line, so a line already buffered in ``replies`` is never waited for."""
    while not select.select([sock], [], [], WAKE_S)[0]:
        pass
    return replies.readline()


class PipelineProcess:
    """The driver's side of a pipeline process: asked of the server before its job is
    known, so that it imports the transforms while the driver discovers the corpus
    (not the parsers and polars: only its workers parse); it reads its job from its
    stdin, a pipe from the driver, and ends without running anything if the pipe
    closes empty."""

    def __init__(self, sock: socket.socket, replies: IO[bytes], job_pipe: int) -> None:
        self._sock, self._replies, self._job_pipe = sock, replies, job_pipe

    @classmethod
    def ask(cls, directory: Path, workers: int = 0) -> PipelineProcess | None:
        """Ask the server in ``directory`` for the process, and for ``workers`` workers
        forked ahead of the runner's requests (they wait for them: their imports are
        done by then)."""
        read, write = os.pipe()
        try:
            sent = forkclient.send(str(directory), {"kind": "pipeline", "workers": workers},
                                   (read, 1, 2))
        finally:
            os.close(read)
        if sent is None:
            os.close(write)
            return None
        return cls(*sent, write)

    def run(self, job: dict[str, Any], result: Path, log: Path) -> int | None:
        """Give the process its job (:func:`faultline.pipeline.beamrun.run_job`'s, its
        stderr appended to ``log``) and wait for it: its exit code (the outcome is in
        ``result``), :data:`LOST` if the server went away first, or None if the server
        would not fork it. Interrupted (Ctrl-C), the connection closes and the server
        kills the process."""
        try:
            if forkclient.confirmed(self._sock, self._replies) is None:
                return None
            payload = json.dumps({"job": job, "result": str(result), "log": str(log)})
            with contextlib.suppress(BrokenPipeError), os.fdopen(self._job_pipe, "wb") as f:
                self._job_pipe = -1  # the file closes it
                f.write(payload.encode())
            try:
                line = await_line(self._sock, self._replies)
            except OSError:
                line = b""
            return int(line.split()[1]) if line.startswith(b"exit ") else LOST
        finally:
            self.close()

    def close(self) -> None:
        """Let go of it: a process not given its job ends (idempotent)."""
        if self._job_pipe >= 0:
            os.close(self._job_pipe)
            self._job_pipe = -1
        self._replies.close()
        self._sock.close()
