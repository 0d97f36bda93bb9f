"""A process that has imported Beam's SDK worker once and forks the run's workers.

Beam's multi-process mode starts every worker as a new ``python -m
apache_beam.runners.worker.sdk_worker_main``, which imports Beam (pandas, pyarrow,
grpc, the IO modules...) before it can take work: about 0.65 CPU s a worker, paid on
both cores while the driver waits. This server imports those modules once, early (the
``ingest`` command starts it before its own imports, so the server's imports overlap
the driver's discovery on the other core), and then forks one worker per request of
the small client Beam runs instead (:mod:`faultline.pipeline.forkclient`).

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
the fork (about 0.25 CPU s). Before its first fork the server counts the threads of
its process (``/proc/self/task``) and, if there is more than one, exits without
forking: the clients then start Beam's stock worker (slower, same tables).

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
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import struct
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
                [sys.executable, "-m", "faultline.pipeline.forkserver", str(directory),
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

    def ask_pipeline(self) -> None:
        """Ask for the pipeline's process now, ahead of its job (module doc: it imports
        the transforms while the driver discovers the corpus); nothing if the server
        cannot be asked yet (:meth:`take_pipeline` asks again)."""
        if self._pipeline is None:
            self._pipeline = PipelineProcess.ask(self.directory)

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


class PipelineProcess:
    """The driver's side of a pipeline process: asked of the server before its job is
    known, so that it imports the transforms (polars, the parsers: about 0.3 CPU s)
    while the driver discovers the corpus; it reads its job from its stdin, a pipe from
    the driver, and ends without running anything if the pipe closes empty."""

    def __init__(self, sock: socket.socket, replies: IO[bytes], job_pipe: int) -> None:
        self._sock, self._replies, self._job_pipe = sock, replies, job_pipe

    @classmethod
    def ask(cls, directory: Path) -> PipelineProcess | None:
        read, write = os.pipe()
        try:
            sent = forkclient.send(str(directory), {"kind": "pipeline"}, (read, 1, 2))
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
                line = self._replies.readline()
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


# --- the server process -------------------------------------------------------------


def serve(directory: Path, preload: tuple[str, ...] = PRELOAD) -> int:
    """Bind, import ``preload``, then fork workers until stdin ends (module doc)."""
    import importlib

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    token = (directory / forkclient.TOKEN).read_text().strip()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(directory / forkclient.SOCKET))
    listener.listen(64)  # clients that come before the imports end wait in the backlog
    try:
        for name in preload:
            importlib.import_module(name)
        import ctypes  # noqa: F401 (the children's prctl: imported before any fork)

        n = threads()
        if n != 1:
            print(f"faultline fork server: {n} threads after importing, not forking",
                  file=sys.stderr)
            return 1
        import gc

        # the imported modules' objects are the workers' too: out of the collector's
        # reach, a worker's collections neither walk them nor copy their pages
        gc.freeze()
        (directory / READY).touch()
        _Loop(listener, token, directory).run()
        return 0
    finally:
        listener.close()
        shutil.rmtree(directory, ignore_errors=True)


class _Loop:
    """The server's one thread: the driver's pipe, new clients, and each worker's
    client connection and pidfd, in one selector."""

    def __init__(self, listener: socket.socket, token: str, directory: Path) -> None:
        import selectors

        self.listener, self.token, self.directory = listener, token, directory
        self.selector = selectors.DefaultSelector()
        self.selector.register(0, selectors.EVENT_READ, ("driver",))
        self.selector.register(listener, selectors.EVENT_READ, ("accept",))
        self.workers: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, conn)

    def run(self) -> None:
        try:
            while True:
                for key, _events in self.selector.select():
                    kind = key.data[0]
                    if kind == "driver":
                        if not os.read(0, 4096):
                            return
                    elif kind == "accept":
                        self._accept()
                    elif kind == "exited":
                        self._reap(key.fd)
                    elif kind == "client":  # a client only ever closes: it went away
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(key.data[1], signal.SIGKILL)
                        self.selector.unregister(key.fileobj)
        finally:
            for pidfd, (pid, _conn) in list(self.workers.items()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self._reap(pidfd)

    def _accept(self) -> None:
        conn, _addr = self.listener.accept()
        fds: list[int] = []
        try:
            conn.settimeout(HANDSHAKE_TIMEOUT_S)
            request, fds = self._request(conn)
        except (OSError, ValueError) as exc:
            print(f"faultline fork server: refused a connection: {exc}", file=sys.stderr)
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        self._fork(conn, request, fds)

    def _request(self, conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
        """The client's request and its stdio, checked: this user, this run's token."""
        _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        data, fds, _flags, _addr = socket.recv_fds(conn, MAX_REQUEST, 3)
        try:
            if uid != os.getuid():
                raise ValueError(f"from uid {uid}")
            if len(fds) != 3 or len(data) < 4:
                raise ValueError("no stdio attached")
            (size,) = struct.unpack(">I", data[:4])
            body = data[4:]
            while len(body) < size:
                more = conn.recv(size - len(body))
                if not more:
                    raise ValueError("cut short")
                body += more
            request = json.loads(body)
            if not hmac.compare_digest(str(request.get("token", "")), self.token):
                raise ValueError("not this run's token")
        except (OSError, ValueError):
            for fd in fds:
                os.close(fd)
            raise
        return request, fds

    def _fork(self, conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        import selectors

        sys.stdout.flush()
        sys.stderr.flush()
        server = os.getpid()
        pipeline = request.get("kind") == "pipeline"
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                self._close_inherited(conn)
                code = (_be_pipeline(server, self.directory, request, fds) if pipeline
                        else _be_worker(server, request, fds))
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        with (self.directory / (PIPELINE if pipeline else FORKED)).open("a") as f:
            f.write(f"{pid}\n")
        pidfd = os.pidfd_open(pid)
        self.workers[pidfd] = (pid, conn)
        self.selector.register(pidfd, selectors.EVENT_READ, ("exited",))
        conn.settimeout(None)
        try:
            conn.sendall(f"pid {pid}\n".encode())
        except OSError:
            os.kill(pid, signal.SIGKILL)  # reaped when its pidfd turns readable
            return
        self.selector.register(conn, selectors.EVENT_READ, ("client", pid))

    def _close_inherited(self, conn: socket.socket) -> None:
        """In a new worker: the server's sockets, pidfds and selector are not its own."""
        for _pidfd, (_pid, other) in self.workers.items():
            other.close()
        for pidfd in self.workers:
            os.close(pidfd)
        self.selector.close()
        self.listener.close()
        conn.close()

    def _reap(self, pidfd: int) -> None:
        """A worker ended: tell its client how (if it is still there), forget it."""
        pid, conn = self.workers.pop(pidfd)
        _pid, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(pidfd)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(conn)
        os.close(pidfd)
        with contextlib.suppress(OSError):
            conn.sendall(f"exit {code if code >= 0 else 128 - code}\n".encode())
        conn.close()


def _become_client(server: int, request: dict[str, Any], fds: list[int]) -> bool:
    """In a fresh fork: die with the server, take the client's stdio, working
    directory and environment, leave Ctrl-C to the driver. False if the server died
    already."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server:  # the server died before the line above
        return False
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's (IGNORE_INT)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    return True


def _be_pipeline(server: int, directory: Path, request: dict[str, Any],
                 fds: list[int]) -> int:
    """Import the transforms, read the job from stdin (:class:`PipelineProcess`) and
    run the driver's pipeline in this fresh fork, its workers forked by the server;
    write the outcome (``{"ok"}``, or the error's message and whether it was a Ctrl-C
    Beam wrapped) to the file the driver named. Exit 0 (also: no job came), or 1."""
    import logging
    import traceback

    if not _become_client(server, request, fds):
        return 1
    # the transforms (polars, the parsers) before the job comes: module doc
    from faultline.pipeline import beamrun, transforms  # noqa: F401

    chunks = []
    while chunk := os.read(0, 1 << 20):
        chunks.append(chunk)
    if not chunks:
        return 0  # the driver needed no pipeline (one worker, nothing new, Ctrl-C)
    given = json.loads(b"".join(chunks))
    sys.stderr.flush()
    for target, path, flags in ((0, os.devnull, os.O_RDONLY),
                                (2, given["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)):
        fd = os.open(path, flags, 0o644)
        os.dup2(fd, target)
        os.close(fd)
    try:
        beamrun.run_job(beamrun.Job.from_json(given["job"]), worker_command(directory))
        outcome: dict[str, Any] = {"ok": True}
    except BaseException as exc:  # the driver raises it; the traceback goes to beam.log
        traceback.print_exc()
        outcome = {"ok": False, "error": str(exc), "interrupt": beamrun.is_interrupt(exc)}
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    Path(given["result"]).write_text(json.dumps(outcome))
    return 0 if outcome["ok"] else 1


def _be_worker(server: int, request: dict[str, Any], fds: list[int]) -> int:
    """Turn this fresh fork into Beam's SDK worker with the client's environment and
    stdio; its exit code (``python -m sdk_worker_main``'s: 0, or 1 on an exception)."""
    import logging
    import traceback

    if not _become_client(server, request, fds):
        return 1
    from apache_beam.runners.worker import sdk_worker_main

    sys.argv = [sdk_worker_main.__file__]
    code = 0
    try:
        sdk_worker_main.main(sys.argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # what python -m prints before its exit 1
        traceback.print_exc()
        code = 1
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    sys.exit(serve(Path(sys.argv[1]), tuple(sys.argv[2:]) or PRELOAD))
