"""Re-runs that read only what is new: nothing new, appended files, truncated files.

    python bench/reruns.py [--preset small] [--scale 16] [--workdir DIR] [--workers 2]
                           [--files-at 950658]

On the corpus bench/scale.py generates (``small`` stretched ``--scale`` times, kept in
DIR), after one clean ingest (not timed):

1. the ``faultline ingest`` command with nothing new, three times (wall seconds,
   Python start-up included), and ingest's own seconds and phases;
2. appends: 20 lines added to every host's ``kern.log`` (its own last lines again)
   and to every log of the newest job, then a timed re-run (the continued files are
   counted: ``IngestSummary.resumed``) and one with nothing new after it;
3. the appended files truncated back to their old size: a timed re-run that reads
   them whole (and restores the database to the corpus as generated).

The per-file figures of (1) are extrapolated linearly to ``--files-at`` files (the
llama3 preset's 950,658): an upper bound, fixed costs included. Prints JSON and a
Markdown table (pasted into bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scale import generate  # bench/scale.py, beside this script

from faultline.pipeline.run import ingest

APPEND_LINES = 20


def _cli(corpus: Path, db: Path, workers: int) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "faultline", "ingest", str(corpus),
                           "--db", str(db), "--workers", str(workers)],
                          capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, proc.stdout.splitlines()[0]


def _run(corpus: Path, db: Path, workers: int) -> dict:
    s = ingest([corpus], db, workers=workers)
    return {"s": round(s.seconds, 2), "phases": {k: round(v, 2) for k, v in s.phases.items()},
            "new_files": s.new_files, "resumed": len(s.resumed), "unchecked": s.unchecked,
            "rebuild_skipped": s.rebuild_skipped}


def _grown_targets(corpus: Path) -> list[Path]:
    kern = sorted(corpus.glob("hosts/*/kern.log"))
    newest = max((corpus / "jobs").iterdir(), key=lambda d: int(d.name))
    return kern + sorted(p for p in newest.iterdir() if p.suffix == ".log")


def measure(preset: str, k: int, workdir: Path, workers: int, files_at: int) -> dict:
    out = generate(preset, k, workdir)
    corpus, db = out / "corpus", out / "reruns.duckdb"
    for p in out.glob("reruns.duckdb*"):
        p.unlink()
    files = sum(1 for _ in corpus.rglob("*") if _.is_file())
    _run(corpus, db, workers)  # the clean ingest
    walls = [_cli(corpus, db, workers)[0] for _ in range(3)]
    noop = [_run(corpus, db, workers) for _ in range(3)]
    noop_s = statistics.median(r["s"] for r in noop)
    targets = _grown_targets(corpus)
    sizes = {p: p.stat().st_size for p in targets}
    for p in targets:
        tail = p.read_bytes().splitlines(keepends=True)[-APPEND_LINES:]
        with p.open("ab") as f:
            f.writelines(tail)
    appended = _run(corpus, db, workers)
    after = _run(corpus, db, workers)
    for p, n in sizes.items():
        os.truncate(p, n)
    truncated = _run(corpus, db, workers)
    return {"preset": preset, "scale": k, "files": files, "noop_cli_s": walls,
            "noop": noop, "noop_s": noop_s, "us_per_file": round(noop_s / files * 1e6, 1),
            "noop_extrapolated_s": round(noop_s / files * files_at, 1),
            "cli_startup_s": round(statistics.median(walls) - noop_s, 2),
            "grown_files": len(targets), "appended": appended, "after_append": after,
            "truncated": truncated, "files_at": files_at}


def table(r: dict) -> str:
    wall = statistics.median(r["noop_cli_s"])
    return "\n".join([
        "| case | files read (continued) | ingest | command (wall) |",
        "|---|---:|---:|---:|",
        f"| nothing new ({r['files']:,} files; {r['noop'][0]['unchecked']:,} in sealed "
        f"directories) | 0 | {r['noop_s']} s | {wall:.1f} s |",
        f"| {APPEND_LINES} lines appended to {r['grown_files']} logs | "
        f"{r['appended']['new_files']} ({r['appended']['resumed']}) "
        f"| {r['appended']['s']} s | |",
        f"| nothing new after the appends | 0 | {r['after_append']['s']} s | |",
        f"| the same logs truncated back | {r['truncated']['new_files']} (0) "
        f"| {r['truncated']['s']} s | |",
        f"| nothing new, extrapolated to {r['files_at']:,} files "
        f"({r['us_per_file']} µs per file) | | {r['noop_extrapolated_s']} s "
        f"| {r['noop_extrapolated_s'] + r['cli_startup_s']:.1f} s |",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--scale", type=int, default=16)
    ap.add_argument("--workdir", type=Path,
                    default=Path(tempfile.gettempdir()) / "faultline-scale")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--files-at", type=int, default=950_658)
    args = ap.parse_args()
    r = measure(args.preset, args.scale, args.workdir, args.workers, args.files_at)
    print(json.dumps(r))
    print(table(r))


if __name__ == "__main__":
    main()
