"""``faultline ingest --runner dask`` on a real dask.distributed cluster on loopback: a
``dask scheduler`` and two ``dask worker`` processes (tests/dask_cluster.py).

The tables are those of the in-process run; a worker SIGKILLed while its tasks run
costs nothing (Dask reruns them on the other worker, or the run fails with a clear
message and a re-run completes), Ctrl-C is exit 130 and cancels the cluster's tasks,
and a scheduler that is not there is one line and exit 2 within seconds."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from dask_cluster import BIN, dask_cluster, free_port
from snapshot import snapshot
from typer.testing import CliRunner

from faultline.cli import app
from faultline.pipeline import dask_run
from faultline.pipeline.dask_run import DELAY_ENV
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.transforms import batch_key

pytestmark = pytest.mark.slow
FAULTLINE = str(Path(sys.executable).parent / "faultline")
RUN_TIMEOUT_S = 120
TASK_DELAY_S = 1.0  # each batch of the slow cluster sleeps this long before parsing


@pytest.fixture(scope="module")
def sample(repo_root: Path) -> Path:
    return repo_root / "fixtures" / "sample" / "corpus"


@pytest.fixture(scope="module")
def baseline(sample: Path, tmp_path_factory) -> dict[str, list[str]]:
    """Every table of the in-process run."""
    db = tmp_path_factory.mktemp("local") / "local.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(sample), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return snapshot(db)


def ingest(corpus: Path, db: Path, address: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([FAULTLINE, "ingest", str(corpus), "--db", str(db),
                             "--runner", "dask", "--dask-address", address, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"ingest did not finish in {RUN_TIMEOUT_S} s: {out}{err}")
    return proc.returncode, out, err


def accounted(db: Path) -> None:
    """Line accounting holds on every file: lines = routine + event + reject lines."""
    with duckdb.connect(str(db), read_only=True) as con:
        bad = con.execute("SELECT path FROM files WHERE lines <> routine_lines + "
                          "event_lines + reject_lines").fetchall()
    assert not bad


def test_two_workers_give_the_tables_of_the_in_process_run(sample, baseline, tmp_path):
    with dask_cluster(tmp_path / "cluster") as cluster:
        db = tmp_path / "dask.duckdb"
        rc, out, err = finish(ingest(sample, db, cluster.address))
        assert rc == 0, out + err
        assert snapshot(db) == baseline
        accounted(db)
        with contextlib.closing(cluster.client()) as c:
            done = c.run(lambda dask_worker: dask_worker.state.executed_count)
        assert len(done) == 2 and all(done.values()), f"both workers took part: {done}"
        rc, out, err = finish(ingest(sample, db, cluster.address))
        assert rc == 0, out + err
        assert "(0 new or changed)" in out
        assert snapshot(db) == baseline


def test_unreachable_scheduler_is_one_line_and_exit_2(sample, tmp_path):
    t0 = time.monotonic()
    address = f"tcp://127.0.0.1:{free_port()}"
    rc, out, err = finish(ingest(sample, tmp_path / "x.duckdb", address,
                                 "--beam-opt", "dask_connection_timeout=2"))
    assert rc == 2
    assert time.monotonic() - t0 < 30
    assert "Traceback" not in out + err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"cannot reach the Dask scheduler at {address}" in lines[0]
    assert not (tmp_path / "x.duckdb").exists()


def test_runner_dask_without_an_address_is_bad_usage(sample, tmp_path):
    result = CliRunner().invoke(app, ["ingest", str(sample), "--db",
                                      str(tmp_path / "x.duckdb"), "--runner", "dask"])
    assert result.exit_code == 2
    assert "--dask-address" in result.output


@pytest.fixture(scope="module")
def slow_cluster(tmp_path_factory):
    """Two workers whose every batch sleeps TASK_DELAY_S before it is parsed."""
    with dask_cluster(tmp_path_factory.mktemp("slow"),
                      env={DELAY_ENV: str(TASK_DELAY_S)}) as cluster:
        yield cluster


def wait_until_processing(cluster, name: str | None = None) -> str:
    """The address of a worker (the one named ``name``, if given) once it runs a task."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    with contextlib.closing(cluster.client()) as c:
        while time.monotonic() < deadline:
            names = {a: w["name"] for a, w in c.scheduler_info()["workers"].items()}
            for addr, keys in c.processing().items():
                if keys and (name is None or names.get(addr) == name):
                    return addr
            time.sleep(0.1)
    pytest.fail("no task started on the cluster")


def test_ctrl_c_is_exit_130_and_cancels_the_tasks(sample, slow_cluster, tmp_path):
    db = tmp_path / "c.duckdb"
    proc = ingest(sample, db, slow_cluster.address)
    wait_until_processing(slow_cluster)
    proc.send_signal(signal.SIGINT)
    rc, out, err = finish(proc)
    assert rc == 130, out + err
    assert "Traceback" not in err and "interrupted" in err
    assert not db.exists()
    deadline = time.monotonic() + 30
    with contextlib.closing(slow_cluster.client()) as c:
        while any(c.processing().values()):
            assert time.monotonic() < deadline, "the cancelled run's tasks went on"
            time.sleep(0.2)


def test_a_worker_killed_mid_run_loses_nothing(sample, baseline, slow_cluster, tmp_path):
    db = tmp_path / "k.duckdb"
    proc = ingest(sample, db, slow_cluster.address)
    wait_until_processing(slow_cluster, "w1")  # a task of w1 is running: kill it there
    victim = slow_cluster.workers[1]
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(10)
    rc, out, err = finish(proc)
    print(f"first run after the kill: exit {rc}: {out}{err}")
    if rc != 0:  # allowed: one clear line, then a re-run on the remaining worker
        assert "Traceback" not in err and "the Dask run failed" in err, err
        rc, out, err = finish(ingest(sample, db, slow_cluster.address))
    assert rc == 0, out + err
    assert snapshot(db) == baseline
    accounted(db)
    rc, out, err = finish(ingest(sample, db, slow_cluster.address))
    assert rc == 0 and "(0 new or changed)" in out, out + err
    assert snapshot(db) == baseline


def _section(doc: str, title: str) -> str:
    return doc.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_docs_dask_commands_use_flags_that_exist(repo_root: Path):
    """docs/scale-out.md's Dask and object-store commands: every flag they give
    ``dask scheduler``, ``dask worker`` and ``faultline ingest`` is one those commands
    take (the fixture above runs the same dask commands, with the same flags)."""
    doc = (repo_root / "docs" / "scale-out.md").read_text()
    blocks = [b.split("```", 1)[0] for sec in ("Dask", "Corpora in object stores")
              for b in _section(doc, sec).split("```sh\n")[1:]]
    commands = [c.replace("\\\n", " ") for c in blocks]
    lines = [ln.split("#", 1)[0].strip() for c in commands for ln in c.splitlines()]
    seen = set()
    for prog, help_cmd in ((("dask", "scheduler"), [str(BIN / "dask"), "scheduler"]),
                           (("dask", "worker"), [str(BIN / "dask"), "worker"]),
                           (("faultline", "ingest"), [FAULTLINE, "ingest"])):
        used = {f.split("=", 1)[0] for ln in lines if ln.split()[:2] == list(prog)
                for f in ln.split() if f.startswith("--")}
        assert used, f"no {' '.join(prog)} command in the docs"
        helptext = subprocess.run([*help_cmd, "--help"], capture_output=True, text=True,
                                  env={**os.environ, "COLUMNS": "200"}).stdout
        missing = {f for f in used if f not in helptext}
        assert not missing, f"{' '.join(prog)} takes no {missing}"
        seen |= used
    assert {"--runner", "--dask-address", "--nworkers", "--nthreads"} <= seen


@pytest.mark.parametrize(("n", "batch_size", "workers", "sizes"), [
    (0, 256, 2, []),
    (1, 256, 2, [1]),
    (10, 256, 2, [2, 2, 2, 2, 2]),  # 4 per worker wanted: ceil(10 / 8) = 2 a batch
    (492, 256, 2, [62] * 7 + [58]),
    (5000, 256, 1, [256] * 19 + [136]),  # batch_size caps a batch
    (7, 3, 4, [1] * 7),
])
def test_batches_cover_the_listing_in_order(n, batch_size, workers, sizes):
    paths = [f"/c/f{i}" for i in range(n)]
    got = dask_run.batches(paths, batch_size, workers)
    assert [len(b) for b in got] == sizes
    assert [p for b in got for p in b] == paths


def test_address_flags():
    assert dask_run.address_flags("tcp://h:1", []) == ["--dask_client_address=tcp://h:1"]
    assert dask_run.address_flags(None, ["--dask_scheduler_file=/s.json"]) == []
    with pytest.raises(dask_run.DaskUnavailable, match="--dask-address"):
        dask_run.address_flags(None, ["--s3_region_name=x"])


def test_batches_whose_shards_are_elsewhere_are_counted(tmp_path):
    """A worker on another machine writing to its own disk: the driver finds no shard
    for that batch, and says so instead of loading a part of the corpus."""
    work = [["/c/a", "/c/b"], ["/c/c"], [["/c/d", "socket"]]]
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / f"{batch_key(work[1])}-n1.parquet").write_bytes(b"")
    assert dask_run.missing_batches(work, str(tmp_path)) == 2


def test_parse_and_write_pickles(tmp_path):
    settings = IngestSettings(tz="UTC")
    fn = dask_run.ParseAndWrite(settings, str(tmp_path), ["--s3_region_name=x"])
    back = pickle.loads(pickle.dumps(fn))
    assert back.fs_flags == ("--s3_region_name=x",) and back.write.staging == str(tmp_path)
    assert back.parse.settings == settings


def test_workers_with_runner_dask_is_bad_usage(sample, tmp_path):
    result = CliRunner().invoke(app, ["ingest", str(sample), "--db", str(tmp_path / "x.db"),
                                      "--runner", "dask", "--dask-address", "tcp://h:1",
                                      "--workers", "2"])
    assert result.exit_code == 2 and "--workers" in result.output
