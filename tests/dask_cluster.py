"""A real dask.distributed cluster on loopback for the tests: one ``dask scheduler`` and
``dask worker`` processes started with the venv's own binaries, stopped (and killed if
they do not stop) when the ``with`` block ends, failed or not."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

BIN = Path(sys.executable).parent
START_TIMEOUT_S = 60  # a loaded 2-core machine takes a few seconds per process


def free_port() -> int:
    """A loopback port nothing listens on (bound and released: no one else took it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    address: str
    scheduler: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)

    def client(self):
        import distributed

        return distributed.Client(self.address, timeout=20, set_as_default=False)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextlib.contextmanager
def dask_cluster(tmp: Path, workers: int = 2, env: dict[str, str] | None = None
                 ) -> Iterator[Cluster]:
    """Scheduler on a free loopback port, then ``workers`` workers of one process and
    one thread each (no nanny: a worker killed stays dead), all registered."""
    tmp.mkdir(parents=True, exist_ok=True)
    scheduler_file = tmp / "scheduler.json"
    port = free_port()
    logs = (tmp / "scheduler.log").open("wb")
    procs: list[subprocess.Popen] = []
    worker_env = {**os.environ, **(env or {})}
    try:
        sched = subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
             "--no-dashboard", "--scheduler-file", str(scheduler_file)],
            stdout=logs, stderr=subprocess.STDOUT, cwd=tmp)
        procs.append(sched)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not scheduler_file.exists() or not scheduler_file.read_text().strip():
            assert sched.poll() is None, (tmp / "scheduler.log").read_text()
            assert time.monotonic() < deadline, "dask scheduler did not start"
            time.sleep(0.2)
        address = json.loads(scheduler_file.read_text())["address"]
        cluster = Cluster(address, sched)
        for i in range(workers):
            out = (tmp / f"worker{i}.log").open("wb")
            w = subprocess.Popen(
                [str(BIN / "dask"), "worker", address, "--nworkers", "1", "--nthreads", "1",
                 "--no-nanny", "--no-dashboard", "--local-directory", str(tmp / f"w{i}"),
                 "--name", f"w{i}"],
                stdout=out, stderr=subprocess.STDOUT, cwd=tmp, env=worker_env)
            procs.append(w)
            cluster.workers.append(w)
        with contextlib.closing(cluster.client()) as c:
            c.wait_for_workers(workers, timeout=START_TIMEOUT_S)
        yield cluster
    finally:
        for p in reversed(procs):
            _stop(p)
        logs.close()
