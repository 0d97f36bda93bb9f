"""Beam on Dask against the local runners: 1 vs 2 Dask workers, and the per-task cost.

    python bench/on_dask.py [--workdir DIR] [--repeat 2] [--tasks 8 64] [--scale K]

Simulates the ``small`` preset into ``--workdir`` (once; ``--scale K``: stretched K
times in time, as bench/scale.py does), starts a real Dask cluster on
loopback (``dask scheduler`` and ``dask worker --nworkers 1 --nthreads 1`` processes, as
tests/test_dask.py does), and ingests the corpus into a fresh database with:

- the in-process runner (``--workers 1``) and Beam's multi-process mode (``--workers 2``);
- ``--runner dask`` on the cluster with one worker, then with a second worker added.

Each is the best of ``--repeat`` runs (alternating, so every variant sees the same
load), as whole-command seconds and the parse phase the summary line reports. Then the
per-task overhead: a trivial pipeline (``beam.Create`` of N numbers in N partitions, a
``ParDo`` that returns its input) on the two-worker cluster, whose time over N tasks,
less the time of a 1-task run, is the cost of one task. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from dask_cluster import BIN, dask_cluster  # the tests' loopback cluster


def _ingest(corpus: Path, db: Path, *flags: str) -> tuple[float, float, dict]:
    """(whole command seconds, parse phase seconds, every phase) of one ingest into a
    new database."""
    for p in db.parent.glob(db.name + "*"):  # the database, its WAL, a killed run's shards
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    t0 = time.perf_counter()
    proc = subprocess.run([str(BIN / "faultline"), "ingest", str(corpus), "--db", str(db),
                           *flags], capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - t0
    phases = dict(re.findall(r"\b(discover|parse|load|root causes) ([0-9.]+) s", proc.stdout))
    return round(seconds, 2), float(phases.get("parse", "nan")), {
        k: float(v) for k, v in phases.items()}


def _best(corpus: Path, workdir: Path, variants: dict[str, list[str]], repeat: int
          ) -> dict[str, dict[str, float]]:
    runs: dict[str, list[tuple[float, float, dict]]] = {k: [] for k in variants}
    for _ in range(repeat):
        for name, flags in variants.items():
            runs[name].append(_ingest(corpus, workdir / f"{name}.duckdb", *flags))
    best = {k: min(v, key=lambda r: r[0]) for k, v in runs.items()}
    return {k: {"wall_s": b[0], "parse_s": b[1], "phases": b[2],
                "load": round(os.getloadavg()[0], 2)} for k, b in best.items()}


def _trivial(address: str, tasks: int) -> float:
    """Seconds of a Create(N) -> ParDo(identity) pipeline in N partitions on Dask."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.dask.dask_runner import DaskRunner

    opts = PipelineOptions([f"--dask_client_address={address}",
                            f"--dask_npartitions={tasks}"])
    t0 = time.perf_counter()
    p = beam.Pipeline(runner=DaskRunner(), options=opts)
    _ = p | beam.Create(list(range(tasks)), reshuffle=False) | beam.Map(int)
    result = p.run()
    try:
        result.wait_until_finish()
    finally:
        result.client.close()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path,
                    default=Path(tempfile.gettempdir()) / "faultline-bench-dask")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--tasks", type=int, nargs="+", default=[8, 64])
    ap.add_argument("--scale", type=int, default=1)
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus = args.workdir / "small"
    if args.scale > 1:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from scale import generate

        corpus = generate("small", args.scale, args.workdir)
    elif not corpus.exists():
        subprocess.run([str(BIN / "faultline"), "simulate", "--preset", "small", "--out",
                        str(corpus)], check=True, capture_output=True)
    corpus = corpus / "corpus"  # simulate writes the logs there, the truth beside them
    files = [f for f in corpus.rglob("*") if f.is_file()]
    out: dict = {"corpus": corpus.parent.name, "files": len(files),
                 "mb": round(sum(f.stat().st_size for f in files) / 1e6, 1),
                 "load_before": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
    out.update(_best(corpus, args.workdir, {"in_process": ["--workers", "1"],
                                            "multi_process_2": ["--workers", "2"]},
                     args.repeat))
    with dask_cluster(args.workdir / "cluster1", workers=1) as one:
        out.update(_best(corpus, args.workdir, {
            "dask_1_worker": ["--runner", "dask", "--dask-address", one.address]},
            args.repeat))
    with dask_cluster(args.workdir / "cluster2", workers=2) as two:
        out.update(_best(corpus, args.workdir, {
            "dask_2_workers": ["--runner", "dask", "--dask-address", two.address]},
            args.repeat))
        with Path(os.devnull).open("w") as null, contextlib.redirect_stderr(null):
            base = min(_trivial(two.address, 1) for _ in range(args.repeat))
            per = {}
            for n in args.tasks:
                t = min(_trivial(two.address, n) for _ in range(args.repeat))
                per[n] = {"seconds": round(t, 3),
                          "ms_per_task": round(1000 * (t - base) / (n - 1), 1)}
        out["trivial_1_task_s"] = round(base, 3)
        out["trivial"] = per
    out["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
