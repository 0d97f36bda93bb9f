"""``faultline watch`` after a replay equals a batch ingest of the final corpus.

A small preset is replayed step by step (:class:`faultline.simulate.replay.Replay`, no
sleeps) with watch cycles in between: the library's cycle function, and real
``faultline watch`` processes stopped with SIGINT between cycles and inside one. Then
the database is compared with a batch ingest of the corpus the replay left, table by
table, and what watch printed with the batch's interruptions: each one once, revisions
ending at the batch verdict.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from faultline.ingest_cli import PAUSE_ENV
from faultline.pipeline.run import ingest
from faultline.simulate import simulate
from faultline.simulate.replay import Replay, line_time
from faultline.watch import Watcher, changes, render_jsonl, render_text

TZ = "America/Los_Angeles"
PRESET = f"""
description = "watch test: 8 hosts, 2.5 days, rotated and gzip files, DST eve"
hosts = 8
spare_hosts = 2
start = "2024-10-30T08:00:00"
days = 2.5
tz = "{TZ}"
host_pattern = "gpu-{{i:03d}}"
fqdn_suffix = ".hpc.internal"
nic = "roce"
mix = "table5"
unexpected = 7
planned = 1
step_seconds = 60
checkpoint_every_steps = 30
kernel_routine_per_host_day = 100
nccl_info_lines_per_rank = 3
other_jobs = 6
kernel_shapes = {{ rfc3339 = 0.5, rfc3164 = 0.3, dmesg_t = 0.2 }}
gzip_rotated = true
rotate_days = 1
gzip_job_fraction = 0.3
"""
# What "equals" means: every row of the tables a user reads, in a fixed order.
TABLES = {
    "files": "SELECT path, sha256, source, lines, routine_lines, event_lines, reject_lines, "
             "duplicate_of FROM files ORDER BY path",
    "events": "SELECT * EXCLUDE (attrs), attrs::VARCHAR FROM events ORDER BY event_id",
    "rejects": "SELECT path, line_no, reason, raw FROM rejects ORDER BY path, line_no",
    "attempts": "SELECT * FROM attempts ORDER BY run, started_at, job_id",
    "interruptions": "SELECT * FROM interruptions ORDER BY interruption_id",
    "evidence": "SELECT * FROM interruption_evidence ORDER BY ALL",
}


def _tables(db: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {name: con.execute(q).fetchall() for name, q in TABLES.items()}


def _watch_proc(corpus: Path, db: Path, pause: str | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop(PAUSE_ENV, None)
    if pause:
        env[PAUSE_ENV] = pause
    return subprocess.Popen(
        [sys.executable, "-m", "faultline", "watch", str(corpus), "--db", str(db),
         "--interval", "0.2", "--format", "jsonl", "--tz", TZ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _until(proc: subprocess.Popen, prefix: str) -> list[str]:
    """stderr lines up to and including the first that starts with ``prefix``."""
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        if line.startswith(prefix):
            return seen
    raise AssertionError(f"no {prefix!r} on stderr: {seen}")


def _stop(proc: subprocess.Popen) -> tuple[int, list[str], list[str]]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out.splitlines(), err.strip().splitlines()


@pytest.fixture(scope="module")
def preset(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("preset") / "replay-watch.toml"  # the name seeds it
    path.write_text(PRESET, encoding="utf-8")
    return str(path)


def test_replay_ends_with_the_bytes_of_a_batch_simulation(preset, tmp_path):
    rp = Replay(preset, tmp_path / "live")
    moments = rp.moments()
    sizes = []
    for t in moments[:: max(1, len(moments) // 6)]:
        rp.advance(t)
        sizes.append(sum(p.stat().st_size for p in (tmp_path / "live" / "corpus").rglob("*")
                         if p.is_file()))
        assert not (tmp_path / "live" / "truth").exists()  # a live cluster has no truth
    rp.finish()
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]  # the corpus grew
    simulate(preset, tmp_path / "batch")
    live = {p.relative_to(tmp_path / "live"): p.read_bytes()
            for p in (tmp_path / "live").rglob("*") if p.is_file()}
    batch = {p.relative_to(tmp_path / "batch"): p.read_bytes()
             for p in (tmp_path / "batch").rglob("*") if p.is_file()}
    assert live.keys() == batch.keys()
    assert [k for k in live if live[k] != batch[k]] == []
    assert not list(tmp_path.glob(".replay-*"))  # the scratch copy is gone


def test_replay_writes_sacct_as_a_live_dump(preset, tmp_path):
    rp = Replay(preset, tmp_path / "live")
    sacct = tmp_path / "live" / "corpus" / "slurm" / "sacct.txt"
    jobs = rp._sacct
    rp.advance(min(s for s, _e in jobs.times if s is not None) - 1)
    assert sacct.read_text().count("\n") == 1  # the header: no job has started yet
    first_end = min(e for _s, e in jobs.times if e is not None)
    rp.advance(first_end - 1)
    text = sacct.read_text()
    assert "RUNNING" in text and "|Unknown|" in text
    assert not any(k[1] for k in rp.end_records)  # no end shown before it happened
    rp.advance(first_end)
    assert rp.end_records  # the first end record is out, and when is known
    rp.close()


@pytest.mark.parametrize(("line", "expected"), [
    (b"2024-10-30T09:00:00.500000-07:00 gpu-001 kernel: x", 1730304000.5),
    (b"2024-10-30T16:00:00.500000Z [rank3] x", 1730304000.5),
    (b"[2024-10-30T09:00:00.123] sched: Allocate", 1730304000.0),
    (b"[Wed Oct 30 09:00:00 2024] NVRM: Xid", 1730304000.0),
    (b"2024-10-30 09:00:00,004 INFO step=1", 1730304000.0),
    (b"   4 | 10/30/2024 | 09:00:00 | Power Supply", 1730304000.0),
    (b"Oct 30 09:00:00 gpu-001 kernel: x", 1730304000.0),
    (b"  File \"train.py\", line 3, in <module>", None),
])
def test_line_time_reads_each_canonical_shape(line, expected):
    import datetime as dt
    from zoneinfo import ZoneInfo

    assert line_time(line, ZoneInfo(TZ), dt.datetime(2024, 10, 30, 8)) == expected


def test_watch_after_a_replay_equals_batch(preset, tmp_path):
    live, db = tmp_path / "live", tmp_path / "watch.duckdb"
    printed: list[dict[str, Any]] = []
    watcher = Watcher([live / "corpus"], db, printed.append, tz=TZ)
    rp = Replay(preset, live)
    # a cycle at every change of the job records (a start or an end): interruptions
    # are printed as soon as they exist, and late evidence comes as revisions
    steps = [rp.moments()[0], *rp._sacct.changes()]
    rp.advance(steps[0])
    assert watcher.cycle().status in ("ok", "waiting")
    from_procs: list[str] = []
    for i, t in enumerate(steps[1:], start=1):
        if t <= rp.now:
            continue  # the process below was given these steps at once
        rp.advance(steps[i + 6] if i == 12 else t)
        if i == 10:  # Ctrl-C inside a cycle (its load phase): the database is as it was
            before = _tables(db)
            proc = _watch_proc(live / "corpus", db, pause="load")
            _until(proc, "faultline: paused at load")
            code, out, err = _stop(proc)
            assert code == 130 and out == [], err
            assert err[-1].startswith("faultline watch: stopped;"), err
            assert _tables(db) == before
            assert not db.with_name(db.name + ".lock").exists()
        if i == 12:  # a real watch process on several steps' news: a cycle, then Ctrl-C
            proc = _watch_proc(live / "corpus", db)
            _until(proc, "faultline watch: cycle")
            code, out, err = _stop(proc)
            assert code == 130, err
            assert err[-1].startswith("faultline watch: stopped;"), err
            from_procs += out
            printed += [json.loads(line) for line in out]
            continue
        res = watcher.cycle()
        assert res.status == "ok", res.message
    rp.finish()
    assert watcher.cycle().status == "ok"
    assert watcher.cycle().records == []  # nothing new: nothing printed

    batch = tmp_path / "batch.duckdb"
    ingest([live / "corpus"], batch, tz=TZ, workers=1)
    got, want = _tables(db), _tables(batch)
    for name in TABLES:
        assert got[name] == want[name], name
    assert want["interruptions"], "the preset must interrupt"

    procs = [json.loads(line) for line in from_procs]  # every stdout line is JSON
    assert procs, "the watch process printed what its cycle decided"
    records = printed  # in the order printed (the process's lines at their place)
    firsts = [r["interruption_id"] for r in records if r["kind"] == "interruption"]
    with duckdb.connect(str(batch), read_only=True) as con:
        final = {iid: (comp, host, gpu) for iid, comp, host, gpu in con.execute(
            "SELECT interruption_id, component, culprit_host, culprit_gpu "
            "FROM interruptions").fetchall()}
    assert sorted(firsts) == sorted(final)  # each printed once
    verdict = {}
    for r in records:  # in print order: the last word on each is the batch verdict
        if r["kind"] == "revision":
            assert r["interruption_id"] in verdict  # a revision follows its first print
            assert (r["was"]["component"], r["was"]["culprit_host"],
                    r["was"]["culprit_gpu"]) == verdict[r["interruption_id"]]
        verdict[r["interruption_id"]] = (r["component"], r["culprit_host"], r["culprit_gpu"])
    assert verdict == final
    assert any(r["kind"] == "revision" for r in records)  # this seed has a late verdict
    for r in records:
        assert r["explain"] == f"faultline explain --db {db.resolve()} {r['interruption_id']}"


def _rec(iid: str, comp: str, host: str | None = "gpu-001", gpu: int | None = 3) -> dict:
    return {"interruption_id": iid, "run": "u/r", "job_id": "7", "component": comp,
            "culprit_host": host, "culprit_gpu": gpu, "failed_at": "2024-10-30T16:00:00Z",
            "surfaced_host": None, "surfaced_gpu": None, "root_line": "NVRM: Xid 79",
            "root_path": "/c/hosts/gpu-001/kern.log", "root_line_no": 4, "rule_id": "x"}


def test_changes_prints_new_ones_and_revisions_never_duplicates():
    db = Path("/d.duckdb")
    now = {"a": _rec("a", "Faulty GPU"), "b": _rec("b", "GPU HBM3 Memory")}
    first = changes({}, now, db)
    assert [(r["kind"], r["interruption_id"]) for r in first] == [("interruption", "a"),
                                                                    ("interruption", "b")]
    printed = {r["interruption_id"]: {k: r[k] for k in ("component", "culprit_host",
                                                        "culprit_gpu", "failed_at")}
               for r in first}
    assert changes(printed, now, db) == []
    now["b"] = _rec("b", "Network Switch/Cable", host="gpu-002", gpu=None)
    del now["a"]
    rev = changes(printed, now, db)
    assert [(r["kind"], r["interruption_id"], r["component"]) for r in rev] == [
        ("revision", "a", "withdrawn"), ("revision", "b", "Network Switch/Cable")]
    text = render_text(rev[1])
    assert text.startswith("revised: b (u/r job 7, failed 2024-10-30T16:00:00Z): was GPU "
                           "HBM3 Memory on gpu-001 GPU 3, now Network Switch/Cable on gpu-002")
    assert json.loads(render_jsonl(rev[1]))["was"]["component"] == "GPU HBM3 Memory"


def test_text_names_time_run_component_culprit_root_and_explain():
    rec = {"kind": "interruption", **_rec("i-1", "Faulty GPU"),
           "explain": "faultline explain --db /d.duckdb i-1"}
    lines = render_text(rec).splitlines()
    assert lines[0] == "2024-10-30T16:00:00Z  u/r job 7  Faulty GPU  gpu-001 GPU 3"
    assert lines[1] == "  root: NVRM: Xid 79  (/c/hosts/gpu-001/kern.log:4)"
    assert lines[2] == "  faultline explain --db /d.duckdb i-1"


def test_bad_corpus_or_db_exit_2_like_ingest(tmp_path, repo_root):
    from typer.testing import CliRunner

    from faultline.cli import app

    res = CliRunner().invoke(app, ["watch", str(tmp_path / "nope"), "--db",
                                   str(tmp_path / "x.duckdb"), "--cycles", "1"])
    assert res.exit_code == 2
    assert "no such file or directory" in res.output
    assert "watching" not in res.output  # refused before the banner: one line
    bad = tmp_path / "bad.duckdb"
    bad.write_text("not a database")
    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    res = CliRunner().invoke(app, ["watch", str(corpus), "--db", str(bad), "--cycles", "1"])
    assert res.exit_code == 2, res.output
    assert "faultline watch:" in res.output and bad.read_text() == "not a database"


def test_another_process_holding_the_lock_is_waited_for(tmp_path, repo_root):
    from faultline.pipeline.run import exclusive

    corpus = repo_root / "fixtures" / "sample" / "corpus" / "hosts" / "node0001"
    db = tmp_path / "w.duckdb"
    watcher = Watcher([corpus], db, lambda _r: None)
    with exclusive(db.resolve()):
        res = watcher.cycle()
    assert res.status == "busy" and "another faultline ingest" in res.message
    assert watcher.cycle().status == "ok"  # the next cycle does the work


def test_simulate_replay_command_writes_the_batch_corpus(preset, tmp_path):
    from typer.testing import CliRunner

    from faultline.cli import app

    res = CliRunner().invoke(app, ["simulate", "--preset", preset, "--out",
                                   str(tmp_path / "live"), "--replay", "--speed", "1e6"])
    assert res.exit_code == 0, res.output
    simulate(preset, tmp_path / "batch")
    for path in (tmp_path / "batch").rglob("*"):
        if path.is_file():
            twin = tmp_path / "live" / path.relative_to(tmp_path / "batch")
            assert twin.read_bytes() == path.read_bytes(), path
    res = CliRunner().invoke(app, ["simulate", "--preset", preset, "--out",
                                   str(tmp_path / "x"), "--replay", "--layout", "varlog"])
    assert res.exit_code == 2 and "--replay writes the canonical layout" in res.output


def test_watch_once_prints_each_interruption_then_nothing_again(tmp_path, repo_root):
    from typer.testing import CliRunner

    from faultline.cli import app

    corpus = repo_root / "fixtures" / "sample" / "corpus"
    db = tmp_path / "w.duckdb"
    res = CliRunner().invoke(app, ["watch", str(corpus), "--db", str(db), "--cycles", "1",
                                   "--interval", "0"])
    assert res.exit_code == 0, res.output
    with duckdb.connect(str(db), read_only=True) as con:
        ids = [i for i, in con.execute("SELECT interruption_id FROM interruptions").fetchall()]
    explains = [ln for ln in res.stdout.splitlines() if ln.startswith("  faultline explain")]
    assert sorted(e.rsplit(" ", 1)[1] for e in explains) == sorted(ids) and len(ids) == 26
    again = CliRunner().invoke(app, ["watch", str(corpus), "--db", str(db), "--cycles", "2",
                                     "--interval", "0", "--format", "jsonl"])
    assert again.exit_code == 0 and again.stdout == ""  # a restart prints nothing twice

    filled = tmp_path / "ingested.duckdb"  # a database faultline ingest filled
    ingest([corpus], filled, workers=1)
    seen: list[dict] = []
    assert Watcher([corpus], filled, seen.append).cycle().status == "ok"
    assert seen == []  # what was there before the watch is known, not news
