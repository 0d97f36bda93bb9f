"""Re-runs that read only what is new: nothing new, appended files, truncated files.

    python bench/reruns.py [--preset small] [--scales 1 16] [--workdir DIR] [--workers 2]
                           [--files-at 950658]

On each corpus bench/scale.py generates (``small`` stretched ``--scales`` times, kept
in DIR), after one clean ingest with ``--workers`` (not timed; the re-runs use the
default, which is one in-process worker for a few files):

1. the ``faultline ingest`` command with nothing new, three times (wall seconds,
   Python start-up included), and ingest's own seconds and phases five times (the
   fastest is reported: on a shared machine the others measure the neighbours);
2. appends: 20 lines added to every host's ``kern.log`` (its own last lines again)
   and to every log of the newest job, then a timed re-run (the continued files are
   counted: ``IngestSummary.resumed``) and one with nothing new after it;
3. the appended files truncated back to their old size: a timed re-run that reads
   them whole (and restores the database to the corpus as generated).

The no-op figures of the smallest and largest scale give a fixed cost and a cost per
file, extrapolated to ``--files-at`` files (the llama3 preset's 950,658; the lead
measures llama3 itself). Prints JSON and a Markdown table (pasted into
bench/RESULTS.md).
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
NOOP_RUNS = 5


def _cli(corpus: Path, db: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "faultline", "ingest", str(corpus),
                           "--db", str(db)],
                          capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, proc.stdout.splitlines()[0]


def _run(corpus: Path, db: Path, workers: int | None = None) -> dict:
    s = ingest([corpus], db, workers=workers)
    return {"s": round(s.seconds, 2), "phases": {k: round(v, 2) for k, v in s.phases.items()},
            "new_files": s.new_files, "resumed": len(s.resumed), "unchecked": s.unchecked,
            "rebuild_skipped": s.rebuild_skipped}


def _grown_targets(corpus: Path) -> list[Path]:
    kern = sorted(corpus.glob("hosts/*/kern.log"))
    newest = max((corpus / "jobs").iterdir(), key=lambda d: int(d.name))
    return kern + sorted(p for p in newest.iterdir() if p.suffix == ".log")


def measure(preset: str, k: int, workdir: Path, workers: int) -> dict:
    out = generate(preset, k, workdir)
    corpus, db = out / "corpus", out / "reruns.duckdb"
    for p in out.glob("reruns.duckdb*"):
        p.unlink()
    files = sum(1 for _ in corpus.rglob("*") if _.is_file())
    _run(corpus, db, workers)  # the clean ingest
    walls = [_cli(corpus, db)[0] for _ in range(3)]
    noop = [_run(corpus, db) for _ in range(NOOP_RUNS)]
    noop_s = min(r["s"] for r in noop)  # the least disturbed: 2 cores, shared
    targets = _grown_targets(corpus)
    sizes = {p: p.stat().st_size for p in targets}
    for p in targets:
        tail = p.read_bytes().splitlines(keepends=True)[-APPEND_LINES:]
        with p.open("ab") as f:
            f.writelines(tail)
    appended = _run(corpus, db)
    after = _run(corpus, db)
    for p, n in sizes.items():
        os.truncate(p, n)
    truncated = _run(corpus, db)
    return {"preset": preset, "scale": k, "files": files, "noop_cli_s": walls,
            "noop": noop, "noop_s": noop_s,
            "cli_startup_s": round(statistics.median(walls) - noop_s, 2),
            "grown_files": len(targets), "appended": appended, "after_append": after,
            "truncated": truncated}


def table(rows: list[dict], files_at: int) -> str:
    out = ["| scale | case | files read (continued) | ingest | command (wall) |",
           "|---|---|---:|---:|---:|"]
    for r in rows:
        wall = statistics.median(r["noop_cli_s"])
        out += [
            f"| {r['scale']}x | nothing new ({r['files']:,} files, "
            f"{r['noop'][0]['unchecked']:,} in sealed directories) | 0 | {r['noop_s']} s "
            f"| {wall:.1f} s |",
            f"| {r['scale']}x | {APPEND_LINES} lines appended to {r['grown_files']} logs | "
            f"{r['appended']['new_files']} ({r['appended']['resumed']}) "
            f"| {r['appended']['s']} s | |",
            f"| {r['scale']}x | nothing new after the appends | 0 "
            f"| {r['after_append']['s']} s | |",
            f"| {r['scale']}x | the same logs truncated back | "
            f"{r['truncated']['new_files']} (0) | {r['truncated']['s']} s | |"]
    lo, hi = rows[0], rows[-1]
    if hi["files"] > lo["files"]:
        per_file = (hi["noop_s"] - lo["noop_s"]) / (hi["files"] - lo["files"])
        fixed = lo["noop_s"] - per_file * lo["files"]
        at = fixed + per_file * files_at
        start = statistics.median(r["cli_startup_s"] for r in rows)
        out.append(f"| {files_at:,} files (fit) | nothing new: {fixed:.2f} s + "
                   f"{per_file * 1e6:.1f} µs per file | 0 | {at:.1f} s "
                   f"| {at + start:.1f} s |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--workdir", type=Path,
                    default=Path(tempfile.gettempdir()) / "faultline-scale")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--files-at", type=int, default=950_658)
    args = ap.parse_args()
    rows = []
    for k in args.scales:
        rows.append(measure(args.preset, k, args.workdir, args.workers))
        print(json.dumps(rows[-1]), flush=True)
    print(table(rows, args.files_at))


if __name__ == "__main__":
    main()
