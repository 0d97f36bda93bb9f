"""The fork server's own process: its loop and the processes it forks.

What it is for, and why it is built so, is :mod:`faultline.pipeline.forkserver`'s
docstring; this module is what runs in the process that
:meth:`~faultline.pipeline.forkserver.ForkServer.start` starts (``python -m
faultline.pipeline.forkloop DIR [MODULE...]``): bind, import, then fork Beam's workers
and the pipeline's process on request until the driver's pipe closes.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import shutil
import signal
import socket
import struct
import sys
from pathlib import Path
from typing import Any

from faultline.pipeline import forkclient, malloc
from faultline.pipeline.forkserver import (
    FORKED,
    HANDSHAKE_TIMEOUT_S,
    MAX_REQUEST,
    MAX_STANDBY,
    PIPELINE,
    PR_SET_PDEATHSIG,
    PRELOAD,
    READY,
    threads,
    worker_command,
)
from faultline.pipeline.workers import POLARS_THREADS, polars_threads


def serve(directory: Path, preload: tuple[str, ...] = PRELOAD) -> int:
    """Bind, import ``preload``, then fork workers until stdin ends (module doc)."""
    import importlib

    malloc.keep_freed_memory()  # before the imports: the forks inherit it (its doc)
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
        # workers forked ahead of their request (_stand_by): pidfd -> (pid, their socket)
        self.idle: dict[int, tuple[int, socket.socket]] = {}
        self.polars_threads: str | None = None  # each worker's share (_share_cores)
        self.groups: set[int] = set()  # pipeline processes, each leading its group (_kill)

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
                    elif kind == "idle":  # a worker standing by ended before its request
                        self._reap_idle(key.fd)
                    elif kind == "client":  # a client only ever closes: it went away
                        self._kill(key.data[1])
                        self.selector.unregister(key.fileobj)
        finally:
            for pidfd, (pid, _conn) in list(self.workers.items()):
                self._kill(pid)
                self._reap(pidfd)
            for pidfd, (pid, _sock) in list(self.idle.items()):
                self._kill(pid)
                self._reap_idle(pidfd)

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
        pipeline = request.get("kind") == "pipeline"
        if pipeline:
            self._share_cores(request)
        elif self.polars_threads is not None:  # the runner's worker: its share too
            request["env"].setdefault(POLARS_THREADS, self.polars_threads)
        handed = None if pipeline else self._hand_over(request, fds)
        if handed is None:
            sys.stdout.flush()
            sys.stderr.flush()
            server = os.getpid()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    if pipeline:
                        os.setpgid(0, 0)  # its own group (_kill); set on both sides of the fork
                    self._close_inherited(conn)
                    code = (_be_pipeline(server, self.directory, request, fds) if pipeline
                            else _be_worker(server, request, fds))
                finally:
                    os._exit(code)
            if pipeline:
                with contextlib.suppress(OSError):  # it may have run (or ended) already
                    os.setpgid(pid, pid)
                self.groups.add(pid)
            pidfd = os.pidfd_open(pid)
        else:
            pid, pidfd = handed
        for fd in fds:
            os.close(fd)
        self._track(conn, pid, pidfd, PIPELINE if pipeline else FORKED)
        if pipeline:  # its runner will ask for workers: fork them now (_stand_by)
            self._stand_by(min(int(request.get("workers") or 0), MAX_STANDBY))

    def _share_cores(self, request: dict[str, Any]) -> None:
        """Give each of the run's workers its share of the cores for polars' pool
        (:func:`~faultline.pipeline.workers.polars_threads`), unless the driver's
        environment names a size. Polars reads it once, as it is imported: the server
        (which never imports polars) sets it in its own environment before it forks
        workers ahead, which import polars as they wait; the runner's workers' requests
        carry the driver's environment, which gets it added (:meth:`_fork`)."""
        workers = int(request.get("workers") or 0)
        if workers < 1 or POLARS_THREADS in request.get("env", {}):
            return
        self.polars_threads = os.environ[POLARS_THREADS] = str(polars_threads(workers))

    def _track(self, conn: socket.socket, pid: int, pidfd: int, name: str) -> None:
        """A child now serving ``conn``'s client: recorded, reaped when it exits, its pid
        sent to the client (killed if the client is gone already)."""
        import selectors

        with (self.directory / name).open("a") as f:
            f.write(f"{pid}\n")
        self.workers[pidfd] = (pid, conn)
        self.selector.register(pidfd, selectors.EVENT_READ, ("exited",))
        conn.settimeout(None)
        try:
            conn.sendall(f"pid {pid}\n".encode())
        except OSError:
            self._kill(pid)  # reaped when its pidfd turns readable
            return
        self.selector.register(conn, selectors.EVENT_READ, ("client", pid))

    def _stand_by(self, n: int) -> None:
        """Fork ``n`` workers ahead of their requests. A fresh fork imports polars and
        the parsers before its first bundle (about 0.3 CPU s, which the server cannot
        do for it: module doc of forkserver); forked as the pipeline's process starts,
        a worker does that while the driver still discovers the corpus and the pipeline
        is built, and then waits for its request on a socket of its own
        (:func:`_await_request`). One not needed is killed with the server."""
        import selectors

        sys.stdout.flush()
        sys.stderr.flush()
        server = os.getpid()
        for _ in range(n):
            mine, its = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    mine.close()
                    self._close_inherited(None)
                    code = _await_request(server, its)
                finally:
                    os._exit(code)
            its.close()
            pidfd = os.pidfd_open(pid)
            self.idle[pidfd] = (pid, mine)
            self.selector.register(pidfd, selectors.EVENT_READ, ("idle",))

    def _hand_over(self, request: dict[str, Any], fds: list[int]) -> tuple[int, int] | None:
        """Give a worker's request to one standing by: its (pid, pidfd), or None when
        none is left (or the one tried had died: the caller forks)."""
        body = json.dumps(request).encode()
        while self.idle:
            pidfd, (pid, sock) = self.idle.popitem()
            self.selector.unregister(pidfd)
            try:
                socket.send_fds(sock, [struct.pack(">I", len(body))], fds)
                sock.sendall(body)
            except OSError:  # it ended: reaped here, the next one tried
                self._kill(pid)
                os.waitpid(pid, 0)
                os.close(pidfd)
                continue
            finally:
                sock.close()
            return pid, pidfd
        return None

    def _close_inherited(self, conn: socket.socket | None) -> None:
        """In a new child: the server's sockets, pidfds and selector are not its own."""
        for children in (self.workers, self.idle):
            for pidfd, (_pid, other) in children.items():
                other.close()
                os.close(pidfd)
        self.selector.close()
        self.listener.close()
        if conn is not None:
            conn.close()

    def _kill(self, pid: int) -> None:
        """SIGKILL a child; a pipeline process with its whole group. Its runner starts
        the worker commands (``sh -c`` the fork client); killed alone (its driver's
        Ctrl-C) while it started them, a client that then found the server gone became
        Beam's stock worker and lived on, orphaned, holding the driver's stdout open
        (seen: a Ctrl-C 2.25 s into small x4; the process that read the driver's output
        waited for ever). In its group, they end with it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if pid in self.groups:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)

    def _reap(self, pidfd: int) -> None:
        """A worker ended: tell its client how (if it is still there), forget it. What
        is left of an ended pipeline process's group goes with it (:meth:`_kill`)."""
        pid, conn = self.workers.pop(pidfd)
        _pid, status = os.waitpid(pid, 0)
        if pid in self.groups:
            self._kill(pid)
            self.groups.discard(pid)
        code = os.waitstatus_to_exitcode(status)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(pidfd)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(conn)
        os.close(pidfd)
        with contextlib.suppress(OSError):
            conn.sendall(f"exit {code if code >= 0 else 128 - code}\n".encode())
        conn.close()

    def _reap_idle(self, pidfd: int) -> None:
        """A worker standing by ended (killed, or the server stops): forget it."""
        pid, sock = self.idle.pop(pidfd)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(pidfd)
        os.waitpid(pid, 0)
        os.close(pidfd)
        sock.close()


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
    # the transforms before the job comes (module doc); not the parsers, which only
    # its workers import (transforms.parse_parts)
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
    try:  # beam.log is in the run's staging directory (beamrun.run_job: the scratch)
        beamrun.run_job(beamrun.Job.from_json(given["job"]), worker_command(directory),
                        Path(given["log"]).parent)
        outcome: dict[str, Any] = {"ok": True}
    except BaseException as exc:  # the driver raises it; the traceback goes to beam.log
        traceback.print_exc()
        outcome = {"ok": False, "error": str(exc), "interrupt": beamrun.is_interrupt(exc)}
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    Path(given["result"]).write_text(json.dumps(outcome))
    return 0 if outcome["ok"] else 1


def _await_request(server: int, sock: socket.socket) -> int:
    """A worker standing by (:meth:`_Loop._stand_by`): die with the server, import what
    a worker imports after its fork, then wait for the request the server hands over
    (the client's frame, its stdio attached) and serve it as a fresh fork would. Exit
    0 if the server let go of it unused."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server:
        return 1
    from faultline.pipeline import fileparse, transforms  # noqa: F401 (polars, the parsers)

    fds: list[int] = []
    with sock:
        try:
            header, fds, _flags, _addr = socket.recv_fds(sock, 4, 3)
            size = struct.unpack(">I", header)[0] if len(header) == 4 else -1
            body = b""
            while 0 <= len(body) < size and (more := sock.recv(size - len(body))):
                body += more
        except OSError:
            size, body = -1, b""
    if len(fds) != 3 or len(body) != size:  # nothing, or not all of it: not needed
        for fd in fds:
            os.close(fd)
        return 0
    return _be_worker(server, json.loads(body), fds)


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
    code = serve(Path(sys.argv[1]), tuple(sys.argv[2:]) or PRELOAD)
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter teardown: the driver waits for this exit (ForkServer.stop), and
    # finalizing Beam's thousands of modules was most of that wait (65 -> 17 ms)
    os._exit(code)
