"""The Beam worker command when a fork server runs: ask it for a worker, relay its exit.

Beam's multi-process mode runs its worker command through ``sh -c`` once per worker
(``SubprocessSdkWorker.run``) with the worker's settings in the environment
(CONTROL_API_SERVICE_DESCRIPTOR, LOGGING_API_SERVICE_DESCRIPTOR, PIPELINE_OPTIONS,
WORKER_ID), waits for it and fails the run on a non-zero exit. This script stands in
for ``python -m apache_beam.runners.worker.sdk_worker_main``: it sends its environment,
working directory and stdio to the fork server of :mod:`faultline.pipeline.forkserver`,
which forks a worker that already has Beam imported, and exits as that worker exits.

It is run by path with ``python -I -S`` and imports the standard library only, so it
starts in milliseconds: the point of the server is not to import Beam per worker. If
the server cannot be reached or does not answer, it becomes Beam's stock worker
(``exec``), so a run without a server is slower, never different.

Protocol (one connection per worker, on the server's Unix socket): the client sends one
frame, a 4-byte big-endian length and a JSON object ``{"token", "env", "cwd"}``, with
its file descriptors 0, 1, 2 attached (``SCM_RIGHTS``); the server answers
``pid <n>\\n`` once forked and ``exit <code>\\n`` when the worker has ended. The token
is read from a file only this user can read, next to the socket. The driver asks the
same way for the process that runs the whole pipeline (:func:`request` with
``{"kind": "pipeline", ...}``: :mod:`faultline.pipeline.beamrun`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys
from typing import BinaryIO

STOCK_WORKER = ("-m", "apache_beam.runners.worker.sdk_worker_main")
SOCKET, TOKEN = "sock", "token"  # names inside the server's directory
CONNECT_TIMEOUT_S = 60.0  # the server may still be importing Beam: waiting beats a cold start


def stock_worker() -> None:
    """Become Beam's own worker process (the same command Beam would have run)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *STOCK_WORKER])  # noqa: S606 (no shell wanted)


def ask(directory: str) -> tuple[socket.socket, BinaryIO] | None:
    """The connection and its replies, with the request for a worker sent and the fork
    confirmed (its pid read), or None when there is no server to ask."""
    asked = request(directory)
    if asked is None:
        return None
    sock, replies, pid = asked
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: _forward(pid, signum))
    # SIGINT is not forwarded: the command runs this client with it ignored, as its
    # worker (forkserver.IGNORE_INT: Ctrl-C is the driver's to handle)
    return sock, replies


def request(directory: str, extra: dict | None = None
            ) -> tuple[socket.socket, BinaryIO, int] | None:
    """Ask the server in ``directory`` for a fork with this process's environment,
    working directory and stdio (and ``extra`` fields: what kind of fork): the
    connection, its replies and the child's pid once forked, or None when there is no
    server, or it would not fork."""
    sent = send(directory, extra)
    if sent is None:
        return None
    sock, replies = sent
    pid = confirmed(sock, replies)
    return None if pid is None else (sock, replies, pid)


def send(directory: str, extra: dict | None = None, fds: tuple[int, int, int] = (0, 1, 2)
         ) -> tuple[socket.socket, BinaryIO] | None:
    """Send the request (``fds`` as the child's stdin, stdout and stderr) without
    waiting for the fork (:func:`confirmed`: a server still importing answers once it
    is done); None when there is no server to ask."""
    try:
        with open(os.path.join(directory, TOKEN)) as f:  # noqa: PTH118, PTH123 (stdlib only, fast)
            token = f.read().strip()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.connect(os.path.join(directory, SOCKET))  # noqa: PTH118
        body = json.dumps({**(extra or {}), "token": token, "env": dict(os.environ),
                           "cwd": os.getcwd()}).encode()  # noqa: PTH109
        socket.send_fds(sock, [struct.pack(">I", len(body)) + body], list(fds))
    except OSError:
        sock.close()
        return None
    return sock, sock.makefile("rb")  # one reader: "exit" may come right after "pid"


def confirmed(sock: socket.socket, replies: BinaryIO) -> int | None:
    """The pid of the child :func:`send` asked for, once forked; None (the connection
    closed) if the server would not fork it or went away."""
    try:
        reply = replies.readline()
    except OSError:
        reply = b""
    if not reply.startswith(b"pid "):
        sock.close()
        return None
    sock.settimeout(None)  # the child runs as long as the pipeline needs
    return int(reply.split()[1])


def _forward(pid: int, signum: int) -> None:
    """A signal to this stand-in goes to the worker it stands for."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def main(argv: list[str]) -> int:
    asked = ask(argv[1]) if len(argv) > 1 else None
    if asked is None:
        stock_worker()
        return 1  # not reached: exec replaced this process
    sock, replies = asked
    with sock, replies:  # a forwarded signal does not interrupt the wait (PEP 475)
        try:
            line = replies.readline()
        except OSError:
            line = b""
    if not line.startswith(b"exit "):
        return 1  # the server went away; it took the worker with it
    return int(line.split()[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
