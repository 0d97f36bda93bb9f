"""Where the driver's memory and CPU go in the load and root-cause phases.

Two modes:

- ``ingest ROOT... --db X [--keep DIR] [--workers N]``: one ingest with the resident
  memory (VmRSS) of the driver and of every Beam worker sampled every 0.2 s, the peak
  printed per phase (``on_phase``); ``--keep`` hard-links the Parquet shards into DIR
  before the load (staging deletes them after it), for ``replay``.
- ``replay DIR --db X``: the load and the rebuild alone, on kept shards, into a fresh
  database, in one transaction as ingest runs them: the CPU time (process_time: every
  thread of the process) and the peak RSS of each step of ``load_shards`` and of the
  rebuild. No parsing, so an experiment on the load costs seconds, not minutes.

DuckDB's memory is not visible to tracemalloc: RSS is the measure. Shards for a
llama3-sized replay can be written from a database llama3 was ingested into (COPY
each of files, events, rejects, file_offsets TO DIR/<table> (FORMAT parquet)).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import psutil


class Sampler:
    """VmRSS of this process and of its children, every ``every`` seconds, labelled
    with the step running then; :meth:`peaks` is the largest per label."""

    def __init__(self, every: float = 0.2) -> None:
        self.label = "start"
        self.samples: list[tuple[str, int, int]] = []  # label, driver, largest child
        self._every, self._stop = every, threading.Event()
        self._me = psutil.Process()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            kids = []
            for c in self._me.children(recursive=True):
                try:
                    kids.append(c.memory_info().rss)
                except psutil.Error:  # a worker that just ended
                    continue
            self.samples.append((self.label, self._me.memory_info().rss, max(kids, default=0)))
            self._stop.wait(self._every)

    def peaks(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for label, own, kid in self.samples:
            a, b = out.get(label, (0, 0))
            out[label] = (max(a, own), max(b, kid))
        return out


def _mib(n: int) -> str:
    return f"{n / 2**20:6.0f} MiB"


def _fresh(db: Path) -> None:
    for p in db.parent.glob(db.name + "*"):
        if p.is_file():
            p.unlink()


def ingest(roots: list[str], db: Path, keep: Path | None, workers: int) -> None:
    from faultline.pipeline import run as prun

    _fresh(db)
    load = prun.load_shards

    def keeping(con: duckdb.DuckDBPyConnection, staging: Path) -> int:
        if keep is not None:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(staging, keep, copy_function=os.link)
        return load(con, staging)

    prun.load_shards = keeping
    with Sampler() as s:
        summary = prun.ingest(roots, db, workers=workers,
                              on_phase=lambda name: setattr(s, "label", name))
    print(summary.line())
    for label, (own, kid) in s.peaks().items():
        print(f"{label:12s} driver {_mib(own)}  largest worker {_mib(kid)}")


def _timed(mod: object, name: str, s: Sampler, steps: dict[str, list[float]],
           label: str | None = None) -> None:
    f: Callable = getattr(mod, name)
    label = label or name

    def g(*a: object, **k: object) -> object:
        before, s.label = s.label, label
        c = time.process_time()
        try:
            return f(*a, **k)
        finally:
            steps.setdefault(label, [0.0])[0] += time.process_time() - c
            s.label = before

    setattr(mod, name, g)


def replay(shards: Path, db: Path) -> None:
    from faultline import db as fdb
    from faultline.classifiers import interruptions
    from faultline.pipeline import hangs_load
    from faultline.pipeline import load as fload

    _fresh(db)
    steps: dict[str, list[float]] = {}
    with Sampler(0.1) as s:
        for name in ("_merge", "_mark_duplicates", "_resolve_hosts", "anchor_boots",
                     "_map_gpus", "_rebuild_attempts"):
            _timed(fload, name, s, steps)
        _timed(hangs_load, "rebuild", s, steps, "hangs_load.rebuild")
        _timed(interruptions, "rebuild", s, steps, "interruptions.rebuild")
        for name in ("_resolver", "_classify_texts", "_progress", "_symptoms_and_history"):
            _timed(interruptions, name, s, steps)
        con = fdb.connect(db)
        c0 = time.process_time()
        with fdb.transaction(con):
            s.label = "load"
            fload.load_shards(con, shards)
            c1 = time.process_time()
            s.label = "root causes"
            interruptions.rebuild(con)
            s.label = "commit"
        c2 = time.process_time()
        con.close()
    print(f"load {c1 - c0:.2f} s CPU, root causes {c2 - c1:.2f} s CPU (with the commit)")
    for name, (cpu,) in steps.items():
        print(f"  {name:20s} {cpu:6.2f} s CPU")
    for label, (own, _kid) in s.peaks().items():
        print(f"  peak {label:20s} {_mib(own)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    a = sub.add_parser("ingest")
    a.add_argument("roots", nargs="+")
    a.add_argument("--db", type=Path, required=True)
    a.add_argument("--keep", type=Path)
    a.add_argument("--workers", type=int, default=2)
    b = sub.add_parser("replay")
    b.add_argument("shards", type=Path)
    b.add_argument("--db", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.mode == "ingest":
        ingest(args.roots, args.db, args.keep, args.workers)
    else:
        replay(args.shards, args.db)
    return 0


if __name__ == "__main__":
    sys.exit(main())
