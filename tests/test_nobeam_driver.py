"""A local multi-worker ingest runs its pipeline in a process forked from the fork
server (``pipeline/beamrun.py``, ``pipeline/forkserver.py``): the driver never imports
Beam, the tables are the in-process run's, what the pipeline raises reaches the user,
and nothing of it outlives the run (a failing transform, the server or the driver
killed mid-parse). Where the server will not fork, the driver runs the pipeline."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest
from procs import children, wait_gone

from faultline.pipeline import beamrun, forkserver
from faultline.pipeline.batching import BATCH_SIZE
from faultline.pipeline.run import ingest
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.staging import Staging

pytestmark = pytest.mark.skipif(not forkserver.supported(), reason="Linux fork server")

READY_S = 120
TABLES = ("files", "events", "rejects", "file_offsets", "attempts", "interruptions")

# the CLI, and at its exit whether Beam was ever imported in this (the driver's) process
WRAPPER = textwrap.dedent("""
    import atexit, os, sys
    atexit.register(lambda: os.write(2, f"BEAM {'apache_beam' in sys.modules}\\n".encode()))
    from faultline.cli import main
    sys.argv = ["faultline", *sys.argv[1:]]
    main()
""")


def _dump(db: Path) -> dict[str, list[str]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {t: sorted(map(str, con.execute(f"SELECT * FROM {t}").fetchall()))
                for t in TABLES}


def _rules_file(tmp_path: Path) -> str:
    path = tmp_path / "site.toml"
    path.write_text(textwrap.dedent("""
        [[rule]]
        id = "site.gpu_health"
        kind = "gpu_lost"
        literal = "gpucheck: GPU "
        pattern = 'gpucheck: GPU (?P<pci>[0-9a-f:.]+) failed: (?P<reason>.+)'
        source = "https://wiki.example.org/gpucheck"

        [[rule.example]]
        line = "gpucheck: GPU 0000:3b:00.0 failed: no response"
        device = "0000:3b:00.0"
        attrs = { reason = "no response" }
    """))
    return str(path)


@pytest.mark.parametrize("kwargs", [
    {},
    {"tz": "America/Los_Angeles", "tz_how": "inferred", "year": 2024},
    {"window": (1, 2**60), "job_windows": {"1214221": (5, 9), "7": (0, 0)},
     "known_hosts": frozenset({"node0001", "gpu-045"})},
    {"host_from_path": r"/(?P<host>node\d+)/", "json_fields": (("host", "node"),
                                                               ("message", "log"))},
    {"rules": "site"},
])
def test_settings_round_trip_through_json(kwargs, tmp_path):
    if kwargs.get("rules") == "site":
        kwargs = {"rules": (_rules_file(tmp_path),)}
    settings = IngestSettings(**kwargs)
    back = IngestSettings.from_json(json.loads(json.dumps(settings.to_json())))
    assert back == settings
    assert back.fingerprint == settings.fingerprint
    assert back.rule_texts == settings.rule_texts
    job = beamrun.Job("/x/paths.jsonl", settings, "/x", "DirectRunner", 2, ("a=b",), 64)
    assert beamrun.Job.from_json(json.loads(json.dumps(job.to_json()))) == job


def test_a_multi_worker_ingest_whose_driver_never_imports_beam(repo_root, tmp_path):
    corpus = repo_root / "fixtures" / "sample" / "corpus"
    ingest([corpus], tmp_path / "one.duckdb", workers=1)
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPER)
    done = subprocess.run(
        [sys.executable, str(wrapper), "ingest", str(corpus), "--db",
         str(tmp_path / "two.duckdb"), "--workers", "2"],
        capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "BEAM False", done.stderr
    assert _dump(tmp_path / "two.duckdb") == _dump(tmp_path / "one.duckdb")


def test_the_pipeline_runs_in_the_servers_process_and_workers(repo_root, tmp_path):
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    ingest([corpus], tmp_path / "one.duckdb", workers=1)
    server = forkserver.ForkServer.start()
    assert server is not None
    with server:
        ingest([corpus], tmp_path / "two.duckdb", workers=2, fork_server=server)
    assert len(server.pipelines()) == 1
    assert len(server.forked()) == 2  # its runner's workers: forked, not stock ones
    assert _dump(tmp_path / "two.duckdb") == _dump(tmp_path / "one.duckdb")


def test_a_server_that_will_not_fork_leaves_the_pipeline_to_the_driver(repo_root, tmp_path):
    """Polars' threads make the server refuse to fork (tests/test_forkserver.py): the
    driver runs the pipeline itself, with stock workers, and writes the same tables."""
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    ingest([corpus], tmp_path / "one.duckdb", workers=1)
    server = forkserver.ForkServer.start(
        preload=("faultline.pipeline.parsers.kernel_messages",))
    assert server is not None
    with server:
        ingest([corpus], tmp_path / "two.duckdb", workers=2, fork_server=server)
        assert "threads after importing, not forking" in server.log()
    assert server.pipelines() == [] and server.forked() == []
    assert _dump(tmp_path / "two.duckdb") == _dump(tmp_path / "one.duckdb")


def _failing_parse(repo_root: Path, tmp_path: Path, server: forkserver.ForkServer | None,
                   name: str) -> Staging:
    """A parse whose shards cannot be written: ``files`` under the staging directory is
    a file, so the first shard of the files table fails in the pipeline."""
    staging = Staging.for_db(tmp_path / f"{name}.duckdb", None)
    staging.local.mkdir(parents=True)
    (staging.local / "files").write_text("in the way")
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    paths = sorted(str(p) for p in corpus.iterdir())
    beamrun.parse(paths, staging, IngestSettings(), "DirectRunner", 2, [], BATCH_SIZE,
                  None, server)
    return staging


def test_a_failing_transforms_message_reaches_the_user(repo_root, tmp_path, capfd):
    server = forkserver.ForkServer.start()
    assert server is not None
    with server:
        with pytest.raises(beamrun.PipelineFailed) as remote:
            _failing_parse(repo_root, tmp_path, server, "remote")
        pipelines, workers = server.pipelines(), server.forked()
    assert "File exists" in str(remote.value)
    assert "while running 'ParseCorpus/Write'" in str(remote.value)
    assert "File exists" in capfd.readouterr().err  # beam.log's tail, as a local run shows
    assert pipelines and workers
    assert wait_gone(pipelines + workers)
    with pytest.raises(RuntimeError) as local:  # the driver's own run (its own server)
        _failing_parse(repo_root, tmp_path, None, "local")
    assert type(local.value) is not beamrun.PipelineFailed
    assert (_last_line(local.value).replace("local.duckdb", "remote.duckdb")
            == _last_line(remote.value))


def _last_line(exc: BaseException) -> str:
    """The failing transform's own error (Beam's message ends with it)."""
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return lines[-1] if lines else ""


@pytest.mark.parametrize("victim", ["server", "driver"])
def test_a_kill_mid_parse_ends_everything(victim, repo_root, tmp_path):
    """``kill -9`` of the fork server mid-parse: the driver says the parse's process
    stopped (exit 2) and writes nothing; of the driver: the server, its pipeline
    process and the workers end with it."""
    corpus = repo_root / "fixtures" / "sample" / "corpus"
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultline", "ingest", str(corpus), "--db",
         str(tmp_path / "x.duckdb"), "--workers", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        forks: list[int] = []
        clients: list[int] = []
        server = 0
        while not clients and time.monotonic() < deadline and proc.poll() is None:
            servers = children(proc.pid)
            server = servers[0] if servers else 0
            forks = children(server) if server else []  # the pipeline's, the workers
            # mid-parse: the pipeline's runner has started its workers' clients (the
            # workers forked ahead of them are the server's children from the start)
            clients = [c for f in forks for c in children(f)]
            time.sleep(0.01)
        assert clients, "no pipeline process with worker clients seen mid-parse"
        os.kill(server if victim == "server" else proc.pid, signal.SIGKILL)
        assert proc.stderr is not None
        err = proc.stderr.read()
        code = proc.wait(timeout=120)
        assert wait_gone([server, *forks])
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    if victim == "server":
        assert code == 2, err
        assert "pipeline process stopped before it finished" in err, err
        assert "Traceback (most recent call last)" not in err.split("faultline ingest:")[-1]
        assert not (tmp_path / "x.duckdb").exists()
    else:
        assert code == -signal.SIGKILL
