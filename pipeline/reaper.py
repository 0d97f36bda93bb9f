"""Ending Beam's workers after a Ctrl-C, for the pipeline the driver runs itself.

Beam's local runner tears its workers down by closing each one's control channel
(``GrpcWorkerHandler.close``) and then joining the thread that waits for the worker's
process (``SubprocessSdkWorkerHandler.stop_worker``). A worker that had not yet
connected when the driver's ``KeyboardInterrupt`` unwound is never sent the end of
that channel: it connects afterwards, waits for instructions that never come, and the
driver's join waits for it for ever (apache-beam 2.77; seen in CI as a Ctrl-C under
load that did not end the run with Beam's stock workers, whose imports take seconds on
a busy machine). Workers ignore SIGINT (``forkserver.IGNORE_INT``) so that the driver
alone handles it; this module makes the driver end them once it has: a Ctrl-C starts
a thread that, after the runner's own teardown has had :data:`GRACE_S` seconds, sends
SIGTERM to every worker process still a child of the driver, until the run is over.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

GRACE_S = 2.0  # for the runner's teardown to end the workers that did connect
EVERY_S = 0.25  # then, how often the children are looked at again
# what a worker's command line holds: Beam's stock worker, a fork server's client
WORKER_MARKS = (b"sdk_worker_main", b"forkclient")


def worker_children(parent: int) -> list[int]:
    """The child processes of ``parent`` whose command line is a worker's."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{parent}/task")  # noqa: PTH208
    except OSError:
        return []
    for task in tasks:
        try:
            kids = Path(f"/proc/{parent}/task/{task}/children").read_text().split()
        except OSError:  # the thread ended
            continue
        for kid in kids:
            try:
                command = Path(f"/proc/{kid}/cmdline").read_bytes()
            except OSError:  # the child ended
                continue
            if any(mark in command for mark in WORKER_MARKS):
                found.append(int(kid))
    return found


def _end_workers(parent: int, over: threading.Event, grace: float) -> None:
    if over.wait(grace):
        return
    while not over.is_set():
        for pid in worker_children(parent):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        over.wait(EVERY_S)


@contextlib.contextmanager
def workers_end_on_ctrl_c(grace: float = GRACE_S) -> Iterator[None]:
    """While the block runs, a Ctrl-C raises ``KeyboardInterrupt`` as Python's own
    handler does and also starts the thread that ends the workers left (module doc).
    Does nothing where SIGINT is not Python's default (ignored, as in a fork server's
    pipeline process, or taken over by a caller), off the main thread, or where
    ``/proc`` cannot tell a process's children."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
            or not Path("/proc/self/task").is_dir()):
        yield
        return
    over = threading.Event()
    parent = os.getpid()

    def on_int(signum: int, frame: object) -> None:
        threading.Thread(target=_end_workers, args=(parent, over, grace),
                         name="faultline-end-workers", daemon=True).start()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_int)
    try:
        yield
    finally:
        over.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
