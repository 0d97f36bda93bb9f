"""The fork server of Beam's workers (``pipeline/forkserver.py``, ``forkloop.py``): it forks only
with one thread, its workers write the tables stock workers write, its clients fall back to
stock workers when it cannot serve them, it forks for no one else, and nothing of it
outlives the run: after success, a failing transform, Ctrl-C, or ``kill -9`` of the
driver."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import apache_beam as beam
import duckdb
import pytest
from procs import children, wait_gone

from faultline.ingest_cli import PAUSE_ENV
from faultline.pipeline import forkclient, forkserver
from faultline.pipeline import workers as workers_module
from faultline.pipeline.beamrun import beam_options
from faultline.pipeline.run import ingest

pytestmark = pytest.mark.skipif(not forkserver.supported(), reason="Linux fork server")

READY_S = 120  # importing Beam on a loaded 2-core machine


def _transforms() -> tuple:
    """The test pipeline's functions, made here: Beam pickles functions of a module by
    reference, and a worker cannot import the test module; these it gets by value."""

    def record_pid(x: int, out: str) -> int:
        (Path(out) / str(os.getpid())).touch()
        return x

    def fail_on_seven(x: int) -> int:
        if x == 7:
            raise ValueError("a transform that fails")
        return x

    return record_pid, fail_on_seven


def _worker_pids(command: str | None, out: Path, *steps: object) -> set[int]:
    """Run a small two-worker pipeline with ``command`` as the worker command; the pids
    of the processes that ran its elements."""
    out.mkdir(exist_ok=True)
    runner, options = beam_options("FnApiRunner", 2, [], command)
    with beam.Pipeline(runner=runner, options=options) as p:
        pc = p | beam.Create(list(range(32))) | beam.Reshuffle()
        for step in steps:
            pc = pc | step
        _ = pc | beam.Map(_transforms()[0], str(out))
    return {int(f.name) for f in out.iterdir()}


@pytest.fixture
def server():
    s = forkserver.ForkServer.start()
    assert s is not None
    yield s
    s.stop()


def test_the_server_forks_with_one_thread(server):
    assert server.ready(READY_S), server.log()
    assert len(os.listdir(f"/proc/{server.process.pid}/task")) == 1


def test_a_server_whose_imports_start_threads_does_not_fork(tmp_path):
    """The guard is real: polars starts threads when a parser module is imported, and
    such a server exits instead of forking; its clients start stock workers."""
    s = forkserver.ForkServer.start(
        preload=("faultline.pipeline.parsers.kernel_messages",))
    assert s is not None
    with s:
        assert not s.ready(READY_S)
        assert s.process.wait(READY_S) == 1
        assert "threads after importing, not forking" in s.log()
        assert _worker_pids(s.command(), tmp_path / "pids")
        assert s.forked() == []


def test_workers_are_forked_and_write_the_tables_of_one_worker(server, repo_root, tmp_path):
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    dumps = []
    for workers, given in ((1, None), (2, server)):
        db = tmp_path / f"w{workers}.duckdb"
        ingest([corpus], db, workers=workers, fork_server=given)
        with duckdb.connect(str(db), read_only=True) as con:
            dumps.append({t: sorted(map(str, con.execute(f"SELECT * FROM {t}").fetchall()))
                          for t in ("files", "events", "rejects", "interruptions")})
    assert dumps[0]["events"]
    assert dumps[1] == dumps[0]
    assert len(server.forked()) == 2  # both workers forked, not stock ones
    assert not server.alive()  # the run stopped it after the parse


def _standing_by(server: forkserver.ForkServer, n: int) -> list[int]:
    """The server's children that are not pipeline processes, once there are ``n``
    (the workers it forked ahead of their requests)."""
    deadline = time.monotonic() + READY_S
    while True:
        ahead = sorted(set(children(server.process.pid)) - set(server.pipelines()))
        if len(ahead) >= n or time.monotonic() > deadline:
            return ahead
        time.sleep(0.02)


def test_workers_forked_ahead_are_the_ones_the_runner_gets(server, repo_root, tmp_path):
    """Asked for a pipeline of two workers, the server forks two workers that import
    the parsers while the driver discovers; the runner's two requests get those."""
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    ingest([corpus], tmp_path / "one.duckdb", workers=1)
    assert server.ready(READY_S)
    server.ask_pipeline(2)
    ahead = _standing_by(server, 2)
    assert len(ahead) == 2
    ingest([corpus], tmp_path / "two.duckdb", workers=2, fork_server=server)
    assert sorted(server.forked()) == ahead
    with duckdb.connect(str(tmp_path / "one.duckdb"), read_only=True) as one, \
            duckdb.connect(str(tmp_path / "two.duckdb"), read_only=True) as two:
        for t in ("files", "events", "rejects", "interruptions"):
            q = f"SELECT * FROM {t}"
            assert sorted(map(str, two.execute(q).fetchall())) == sorted(
                map(str, one.execute(q).fetchall())), t


def test_a_dead_worker_standing_by_is_skipped_and_the_rest_forked(server, tmp_path):
    """One of the two forked ahead is killed before the requests come: one request
    gets the other, the next a fresh fork; the pipeline runs on both."""
    assert server.ready(READY_S)
    server.ask_pipeline(2)
    ahead = _standing_by(server, 2)
    os.kill(ahead[0], signal.SIGKILL)
    assert wait_gone([ahead[0]])
    assert _worker_pids(server.command(), tmp_path / "pids")
    forked = server.forked()
    assert len(forked) == 2 and ahead[1] in forked and ahead[0] not in forked


def _pool_recorder():
    """A step recording, per worker process, the size of its polars pool and the
    ``POLARS_MAX_THREADS`` it runs with (made here: pickled by value, as above)."""

    def record_pool(x: int, out: str) -> int:
        import polars as pl

        env = os.environ.get("POLARS_MAX_THREADS")
        (Path(out) / f"pool-{os.getpid()}").write_text(f"{pl.thread_pool_size()} {env}")
        return x

    return record_pool


@pytest.mark.parametrize("driver_env", [None, "2"])
def test_each_worker_gets_its_share_of_the_cores_for_polars(tmp_path, monkeypatch, driver_env):
    """Two workers on this machine's cores: polars' pool of each is the cores shared
    out (one each on two cores, where each had two: oversubscribed), in the worker
    forked ahead and in the one forked on request alike; a size the driver's
    environment names is left as it is."""
    if driver_env is not None:  # before the server starts, as a driver's would be
        monkeypatch.setenv("POLARS_MAX_THREADS", driver_env)
    server = forkserver.ForkServer.start()
    assert server is not None
    with server:
        assert server.ready(READY_S)
        server.ask_pipeline(2)
        ahead = _standing_by(server, 2)
        os.kill(ahead[0], signal.SIGKILL)  # so that one request gets a fresh fork
        assert wait_gone([ahead[0]])
        out = tmp_path / "pools"
        out.mkdir()
        _worker_pids(server.command(), tmp_path / "pids",
                     beam.Map(_pool_recorder(), str(out)))
    seen = {f.name: f.read_text() for f in out.iterdir()}
    assert f"pool-{ahead[1]}" in seen and len(seen) == 2, seen
    want = driver_env or str(workers_module.polars_threads(2))
    assert set(seen.values()) == {f"{want} {want}"}


def test_the_cores_are_shared_out_among_the_workers():
    share = workers_module.polars_threads
    assert [share(w, 2) for w in (1, 2, 3)] == [2, 1, 1]
    assert [share(w, 64) for w in (1, 2, 3, 64, 100)] == [64, 32, 21, 1, 1]
    assert share(0, 8) == 8


def test_the_pipeline_process_leads_a_group_of_its_own(server):
    """The pipeline's process is killed with its group (``_Loop._kill``): the worker
    commands its runner started end with it. Killed alone by a Ctrl-C while it started
    them, a client that then found the server gone became Beam's stock worker and lived
    on, orphaned, holding the driver's stdout open."""
    assert server.ready(READY_S)
    server.ask_pipeline(0)
    deadline = time.monotonic() + READY_S
    while not server.pipelines() and time.monotonic() < deadline:
        time.sleep(0.02)
    (pid,) = server.pipelines()
    while os.getpgid(pid) != pid and time.monotonic() < deadline:  # set on both sides
        time.sleep(0.02)
    assert os.getpgid(pid) == pid != os.getpgid(server.process.pid)


def test_workers_standing_by_unused_end_with_the_server(server):
    assert server.ready(READY_S)
    server.ask_pipeline(3)
    ahead = _standing_by(server, 3)
    assert len(ahead) == 3
    server.stop()
    assert wait_gone(ahead)
    assert server.forked() == []


def _kill(s: forkserver.ForkServer) -> None:
    s.process.kill()  # leaves its socket file behind: connections are refused
    s.process.wait()


def _no_socket(s: forkserver.ForkServer) -> None:
    s.stop()
    s.directory.mkdir()
    (s.directory / forkclient.TOKEN).write_text("token")


def _other_token(s: forkserver.ForkServer) -> None:
    (s.directory / forkclient.TOKEN).write_text("not the server's token")


@pytest.mark.parametrize("break_it", [_kill, _no_socket, _other_token])
def test_clients_fall_back_to_stock_workers(server, break_it, tmp_path):
    assert server.ready(READY_S)
    break_it(server)
    pids = _worker_pids(server.command(), tmp_path / "pids")
    assert pids and not pids & set(server.forked())
    assert server.forked() == []


def _request(token: str, fds: bool = True, body: bytes | None = None) -> bytes:
    return body if body is not None else json.dumps(
        {"token": token, "env": {}, "cwd": "/"}).encode()


@pytest.mark.parametrize(("token", "fds", "body"), [
    ("not this run's", True, None),  # another run's client
    (None, False, None),  # the right token, but no stdio attached
    (None, True, b"{not json"),
])
def test_a_connection_not_from_this_run_gets_no_worker(server, token, fds, body, tmp_path):
    assert server.ready(READY_S)
    real = (server.directory / forkclient.TOKEN).read_text()
    body = _request(token or real, fds, body)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
        c.settimeout(30)
        c.connect(str(server.directory / forkclient.SOCKET))
        frame = [struct.pack(">I", len(body)) + body]
        if fds:
            socket.send_fds(c, frame, [0, 1, 2])
        else:
            c.sendall(frame[0])
        assert c.recv(100) == b""  # closed, no "pid"
    assert server.forked() == [] and server.alive()
    pids = _worker_pids(server.command(), tmp_path / "pids")  # this run's clients still are
    assert pids and pids <= set(server.forked())


def test_nothing_outlives_a_failing_transform(server, tmp_path):
    assert server.ready(READY_S)
    with pytest.raises(Exception, match="a transform that fails"):
        _worker_pids(server.command(), tmp_path / "pids", beam.Map(_transforms()[1]))
    forked = server.forked()
    assert forked
    server.stop()
    assert server.process.returncode == 0
    assert wait_gone(forked)
    assert not server.directory.exists()


DRIVER = """
import sys, time
from faultline.pipeline import forkserver
s = forkserver.ForkServer.start()
assert s.ready(120)
print(s.process.pid, s.directory, flush=True)
time.sleep(600)
"""


def test_the_server_exits_when_its_driver_is_killed():
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert driver.stdout is not None
        pid, directory = driver.stdout.readline().split()
        driver.kill()
        driver.wait()
        assert wait_gone([int(pid)])
        assert not Path(directory).exists()
    finally:
        driver.kill()


def test_ctrl_c_leaves_no_server(repo_root, tmp_path):
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultline", "ingest", str(corpus), "--db",
         str(tmp_path / "x.duckdb"), "--workers", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, **{PAUSE_ENV: "discover"}))
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().strip() == "faultline: paused at discover"
        servers = children(proc.pid)
        assert servers  # started before the driver's imports
        proc.send_signal(signal.SIGINT)
        proc.stderr.read()
        assert proc.wait(timeout=120) == 130
        assert wait_gone(servers)
    finally:
        proc.kill()
    assert not list(tmp_path.iterdir())


def _sdk_workers(sid: int) -> list[int]:
    """Beam's workers in session ``sid`` once both are running: a forked one stands
    behind its client (``forkclient``), a stock one runs ``sdk_worker_main``."""
    found = [p for p in _session(sid)
             if b"forkclient" in _cmdline(p) or b"sdk_worker_main" in _cmdline(p)]
    return found if len(found) >= 2 else []


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _session(sid: int) -> list[int]:
    """The pids still in session ``sid`` (zombies not counted: they are gone)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":  # state, ppid, pgrp, session
                out.append(int(entry))
    return out


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler for the test: a shell that starts pytest in the
    background hands it SIGINT ignored, and Python then keeps ignoring it."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_another_thread_takes_ends_the_wait_for_the_pipeline(python_sigint):
    """The kernel may hand a Ctrl-C to any of the driver's threads (polars' and tokio's
    do not block SIGINT); Python raises it in the main thread once that thread runs
    again. The driver's wait for its pipeline's process wakes for it: it used to stay
    in ``recv`` until the pipeline ended (here: the reply 5 s later)."""
    ours, server_end = socket.socketpair()
    replies = ours.makefile("rb")

    def another_thread() -> None:
        time.sleep(0.2)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # handled on this thread
        time.sleep(5)
        with contextlib.suppress(OSError):
            server_end.sendall(b"exit 0\n")

    threading.Thread(target=another_thread, daemon=True).start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            forkserver.await_line(ours, replies)
        assert time.monotonic() - start < 0.2 + 3 * forkserver.WAKE_S + 1
    finally:
        replies.close()
        ours.close()


@pytest.mark.parametrize("beam_opts", [
    [],  # forked workers
    ["--beam-opt", "direct_running_mode=multi_processing"],  # Beam's stock workers
])
def test_ctrl_c_at_a_terminal_mid_parse_ends_the_run(repo_root, tmp_path, beam_opts):
    """A terminal's Ctrl-C signals the whole process group: driver, fork server, clients
    and workers at once. Workers that died of it before the driver unwound used to
    leave Beam's runner waiting for their bundles for ever (the driver hung, with stock
    and forked workers alike); now only the driver takes it: exit 130, nothing left
    running, nothing written, nothing left in the temporary directory (the forked
    pipeline process, killed, left Beam's there). Stock workers asked for by
    ``--beam-opt`` too."""
    corpus = repo_root / "fixtures" / "sample" / "corpus"
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultline", "ingest", str(corpus), "--db",
         str(tmp_path / "x.duckdb"), "--workers", "2", *beam_opts],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TMPDIR": str(temp)},
        start_new_session=True,  # its own process group, as a terminal's job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        # workers stand by before the pipeline starts: its temporary directory tells
        # (in the staging directory with a forked pipeline, else in TMPDIR)
        while not (workers and list(tmp_path.rglob("beam-pipeline-temp*"))) \
                and time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError):  # a process may end while it is read
                workers = _sdk_workers(proc.pid)
            time.sleep(0.01)
        assert workers, "no forked worker seen while the sample was parsed"
        assert list(tmp_path.rglob("beam-pipeline-temp*")), "no pipeline seen running"
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        assert wait_gone(workers)
        deadline = time.monotonic() + 20
        while _session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _session(proc.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert list(tmp_path.iterdir()) == [temp]
    assert not list(temp.iterdir())


# Beam's stock worker, but slow to connect: it sleeps before its imports, as one does on a
# loaded machine; its command line holds "sdk_worker_main" from the start
_LATE_WORKER = ("import runpy, time; time.sleep({delay}); "
                "runpy.run_module('apache_beam.runners.worker.sdk_worker_main', "
                "run_name='__main__')")
_LATE_DRIVER = """
import sys
from faultline.pipeline import forkclient
forkclient.STOCK_WORKER = ("-c", {worker!r})
from faultline.launch import main
sys.argv = ["faultline", *sys.argv[1:]]
main()
"""


def test_ctrl_c_before_the_workers_connect_ends_the_run(repo_root, tmp_path):
    """A Ctrl-C that lands before Beam's workers have connected: the runner's teardown
    closes only the control channels that are open, then waits for each worker's
    process, and a worker that connects afterwards is never told to end (the driver
    hung for ever, CI saw it under load). The driver ends its workers itself once its
    own teardown has had its grace (``pipeline/reaper.py``): exit 130, nothing left."""
    worker = _LATE_WORKER.format(delay=8)
    proc = subprocess.Popen(
        [sys.executable, "-c", _LATE_DRIVER.format(worker=worker), "ingest",
         str(repo_root / "fixtures" / "sample" / "corpus"), "--db", str(tmp_path / "x.duckdb"),
         "--workers", "2", "--beam-opt", "direct_running_mode=multi_processing"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while not workers and time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError):
                workers = _sdk_workers(proc.pid)
            time.sleep(0.01)
        assert workers, "no stock worker seen"
        os.killpg(proc.pid, signal.SIGINT)  # they are asleep: none has connected
        start = time.monotonic()
        assert proc.wait(timeout=30) == 130
        # not by the workers' own end: they would have connected 8 s on, and then waited
        assert time.monotonic() - start < 8
        assert wait_gone(workers)
        assert _session(proc.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("runner", "workers", "beam_opts", "expected"), [
    ("DirectRunner", 2, [], True),
    ("FnApiRunner", 4, [], True),
    ("DirectRunner", 1, [], False),  # in-process: no worker to fork
    ("DirectRunner", 2, ["direct_running_mode=multi_threading"], False),  # Beam's choice
    ("DirectRunner", 2, ["--direct_running_mode=multi_processing"], False),
    ("DataflowRunner", 2, [], False),
    ("dask", None, [], False),
])
def test_which_runs_want_a_fork_server(runner, workers, beam_opts, expected):
    assert forkserver.wanted(runner, workers, beam_opts) is expected


def test_by_default_a_small_corpus_starts_no_server(repo_root, monkeypatch):
    """The sample is one worker's: ingest does not start a server for it (one that
    would be stopped unused costs about 0.8 CPU s); a corpus past the threshold does."""
    sample = repo_root / "fixtures" / "sample" / "corpus"
    monkeypatch.setattr(workers_module, "cpus", lambda: 2)
    assert not forkserver.wanted("DirectRunner", None, [], [sample])
    monkeypatch.setattr(workers_module, "PARALLEL_BYTES", 1_000_000)
    assert forkserver.wanted("DirectRunner", None, [], [sample])
