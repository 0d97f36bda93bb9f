"""One worker or every core: where does Beam's multi-process mode start to pay?

    python bench/workers.py [--scales 1 2 4] [--workdir DIR] [--repeat 2]

For the bundled sample and the ``small`` preset stretched k times in time (the corpora
of ``bench/scale.py``), ingests into a fresh database with ``--workers 1`` and
``--workers 2`` (best of ``--repeat`` runs each, alternating), and prints the corpus size as
:func:`faultline.pipeline.workers.corpus_weight` counts it, the whole command's
seconds, the parse phase's, and the command's CPU seconds (user + system, its worker
processes and fork server included: on a shared machine the wall times swing with the
other jobs' load, the CPU time much less). The crossover is interpolated linearly
between the largest corpus on which one worker wins and the smallest on which two win
(wall time); it is what :data:`faultline.pipeline.workers.PARALLEL_BYTES` is set from,
with the CPU seconds saying what the second process costs.

A directory of the workdir named ``small-xK`` that already holds a corpus (or a symlink
to one) is used as it is: nothing is written into it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scale import generate  # bench/ is the script's directory

from faultline.fixtures import fixtures_dir
from faultline.pipeline.discover import discover
from faultline.pipeline.workers import corpus_weight


def _ingest(corpus: Path, db: Path, workers: int) -> tuple[float, float, float]:
    """(whole command seconds, parse phase seconds, CPU seconds) of one ingest into a
    new database."""
    for p in db.parent.glob(db.name + "*"):
        p.unlink()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "faultline", "ingest", str(corpus), "--db",
                           str(db), "--workers", str(workers)], capture_output=True,
                          text=True, check=True)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    parse = re.search(r"\bparse ([0-9.]+) s", proc.stdout)
    return seconds, float(parse[1]) if parse else float("nan"), cpu


def measure(name: str, corpus: Path, workdir: Path, repeat: int) -> dict:
    """Best of ``repeat`` for 1 and 2 workers, the runs alternating (1, 2, 1, 2...) so
    that both see the same load from whatever else runs on the machine."""
    paths = list(discover([corpus]))
    row: dict = {"corpus": name, "files": len(paths), "bytes": corpus_weight(paths),
                 "load_before": round(os.getloadavg()[0], 2)}
    runs: dict[int, list[tuple[float, float, float]]] = {1: [], 2: []}
    for _ in range(repeat):
        for workers in (1, 2):
            runs[workers].append(_ingest(corpus, workdir / f"w{workers}.duckdb", workers))
    for workers, got in runs.items():
        best = min(got)
        row[f"w{workers}_s"], row[f"w{workers}_parse_s"] = round(best[0], 2), best[1]
        row[f"w{workers}_cpu_s"] = round(min(r[2] for r in got), 2)
        row[f"w{workers}_runs_s"] = [round(r[0], 2) for r in got]
    return row


def crossover(rows: list[dict]) -> float | None:
    """Corpus weight at which two workers start to win (linear between neighbours)."""
    rows = sorted(rows, key=lambda r: r["bytes"])
    for a, b in itertools.pairwise(rows):
        da, db = a["w2_s"] - a["w1_s"], b["w2_s"] - b["w1_s"]
        if da > 0 >= db:
            return a["bytes"] + (b["bytes"] - a["bytes"]) * da / (da - db)
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--workdir", type=Path,
                    default=Path(tempfile.gettempdir()) / "faultline-workers")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = [measure("sample", fixtures_dir() / "sample" / "corpus", args.workdir,
                    args.repeat)]
    for k in args.scales:
        out = generate("small", k, args.workdir)
        rows.append(measure(f"small x{k}", out / "corpus", args.workdir, args.repeat))
    print("| corpus | files | weight (MB) | 1 worker | parse | CPU | 2 workers | parse | CPU "
          "| load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['corpus']} | {r['files']:,} | {r['bytes'] / 1e6:.1f} | {r['w1_s']} s "
              f"| {r['w1_parse_s']} s | {r['w1_cpu_s']} s | {r['w2_s']} s "
              f"| {r['w2_parse_s']} s | {r['w2_cpu_s']} s | {r['load_before']} |")
    x = crossover(rows)
    print(f"\ncrossover: {x / 1e6:.0f} MB" if x else "\ncrossover: not within these sizes")
    json.dump({"rows": rows, "crossover_bytes": x}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
