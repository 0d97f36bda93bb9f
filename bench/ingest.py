"""Ingest speed against the floor: how close is faultline to just reading the bytes?

    python bench/ingest.py [--preset medium] [--seed 0] [--workdir DIR] [--keep]

1. generates the preset's corpus with the simulator (skipped if DIR already has it);
2. the floor: read every file's bytes (gunzip included) on both cores, concatenate,
   one polars ``read_csv`` of all lines, one ``str.contains`` with the union of the
   patterns that select event lines;
3. ``faultline ingest`` end to end (parse, normalize, write DuckDB), in Beam's
   multi-process mode on both cores, into a fresh database;
4. prints lines, files, seconds, lines/s, files/s, peak memory and the ratio against
   the faster of two floor runs: for the whole command (which also builds the
   interruptions and classifies their root causes) and for its ingest part alone
   (parse, normalize, write DuckDB: the time ``ingest`` reports before classifying).

The two runs go one after the other on the same corpus, so the page cache treats them
alike (the floor runs second as well, to show the warm-cache spread).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import polars as pl

from faultline.pipeline.discover import discover
from faultline.pipeline.parsers import joblog, kernel_messages, slurmctld, trainer

SELECT = "|".join(f"(?:{p})" for p in (kernel_messages.SELECT_PATTERN, joblog.CANDIDATE_RE,
                                        trainer.CANDIDATE_RE, slurmctld.LINE_RE.pattern))


def _read(paths: list[str]) -> bytes:
    out = []
    for p in paths:
        with open(p, "rb") as f:  # noqa: PTH123
            data = f.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        if data and not data.endswith(b"\n"):
            data += b"\n"
        out.append(data)
    return b"".join(out)


def floor(paths: list[str]) -> tuple[float, int, int]:
    """(seconds, lines, selected lines) of the plain polars scan."""
    t0 = time.perf_counter()
    chunks = [paths[i::16] for i in range(16)]
    with ProcessPoolExecutor(2) as pool:
        blob = b"".join(pool.map(_read, chunks))
    df = pl.read_csv(blob, has_header=False, separator="\x01", quote_char=None,
                     new_columns=["line"], schema_overrides={"line": pl.String},
                     truncate_ragged_lines=True, encoding="utf8-lossy")
    selected = int(df["line"].str.contains(SELECT).sum())
    return time.perf_counter() - t0, df.height, selected


_WRAPPED = """
import resource, sys
from faultline.cli import main
sys.argv = ["faultline", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
# VmHWM: ru_maxrss survives exec and would report the benchmark's own peak
with open("/proc/self/status") as f:
    own = int(next(ln for ln in f if ln.startswith("VmHWM")).split()[1]) / 1024
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # an upper bound
print(f"PEAK {own:.0f} {kids:.0f}")
sys.exit(code)
"""


def run_ingest(corpus: Path | list[Path], db: Path, workers: int, fresh: bool = True
               ) -> tuple[float, tuple[int, int], str]:
    """(seconds, (driver, largest worker) peak RSS in MiB, summary line) of one ingest
    (into a new database unless ``fresh`` is False)."""
    if fresh:
        for p in db.parent.glob(db.name + "*"):
            p.unlink()
    roots = [str(c) for c in (corpus if isinstance(corpus, list) else [corpus])]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _WRAPPED, "ingest", *roots,
                           "--db", str(db), "--workers", str(workers)],
                          capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - t0
    lines = proc.stdout.strip().splitlines()
    own, kids = (int(x) for x in lines[-1].split()[1:])
    return seconds, (own, kids), lines[-2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="medium")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path,
                    default=Path(tempfile.gettempdir()) / "faultline-bench")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    out = args.workdir / f"{args.preset}-{args.seed}"
    corpus = out / "corpus"
    if not (out / "truth" / "summary.json").exists():
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "faultline", "simulate", "--preset",
                        args.preset, "--out", str(out), "--seed", str(args.seed)],
                       check=True)
        print(f"generated {args.preset} in {time.perf_counter() - t0:.0f} s", flush=True)
    truth = json.loads((out / "truth" / "summary.json").read_text())
    paths = list(discover([corpus]))
    floor_s, lines, selected = floor(paths)
    ingest_s, (driver_mib, worker_mib), summary = run_ingest(corpus, out / "bench.duckdb",
                                                              args.workers)
    floor2_s, _, _ = floor(paths)
    assert lines == truth["lines"], (lines, truth["lines"])
    n = len(paths)
    # the summary's phases: discover + parse + load is ingest without the root causes
    core_s = round(sum(float(re.search(rf"{k} ([0-9.]+) s", summary)[1])
                       for k in ("discover", "parse", "load")), 1)
    best_floor = min(floor_s, floor2_s)
    row = {
        "preset": args.preset, "files": n, "lines": lines, "selected_by_floor": selected,
        "floor_s": round(floor_s, 1), "floor_again_s": round(floor2_s, 1),
        "ingest_s": round(ingest_s, 1), "ratio": round(ingest_s / best_floor, 2),
        "ingest_without_root_causes_s": core_s,
        "ratio_without_root_causes": round(core_s / best_floor, 2),
        "ingest_lines_per_s": round(lines / ingest_s), "ingest_files_per_s": round(n / ingest_s),
        "floor_lines_per_s": round(lines / min(floor_s, floor2_s)),
        "driver_peak_rss_mib": driver_mib, "worker_peak_rss_mib": worker_mib,
        "workers": args.workers, "cpus": os.cpu_count(), "ingest": summary,
    }
    print(json.dumps(row, indent=2))


if __name__ == "__main__":
    main()
