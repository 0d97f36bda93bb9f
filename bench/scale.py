"""Scaling curve: ingest time and peak memory at 1x, 4x and 16x a corpus, and re-runs.

    python bench/scale.py [--preset small] [--scales 1 4 16] [--workdir DIR] [--workers 2]

For each scale k, the preset is stretched k times in time (days, interruptions and other
users' jobs times k; same cluster), the corpus generated with the simulator (kept in
DIR between runs), then:

1. the floor: a plain polars scan of the same bytes (see bench/ingest.py);
2. a clean ``faultline ingest`` into a fresh database: seconds, per-phase seconds and
   peak RSS of the driver and of the largest Beam worker (VmHWM);
3. a re-run with nothing new (every file skipped by size, mtime and parse settings);
4. an incremental run: a fresh database first ingests the corpus without its newest
   eighth of job directories, then the whole corpus: the timed second run reads only
   the new files.

Time should grow no faster than the corpus and peak memory should stay flat: each
worker holds one batch of files, and DuckDB is capped at 2 GB and spills beyond it.
Prints one JSON row per scale and a Markdown table (pasted into bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from ingest import floor, run_ingest  # bench/ingest.py, beside this script

from faultline.pipeline.discover import discover
from faultline.simulate.config import preset_path

STRETCH = ("days", "unexpected", "planned", "other_jobs")


def stretched_preset(preset: str, k: int, out: Path) -> Path:
    """The preset with time-proportional counts multiplied by ``k``, as a TOML file."""
    text = preset_path(preset).read_text(encoding="utf-8")
    values = tomllib.loads(text)
    for key in STRETCH:
        if key in values:
            text = re.sub(rf"(?m)^{key} = \d+", f"{key} = {values[key] * k}", text)
    path = out / f"{preset}-x{k}.toml"
    path.write_text(text, encoding="utf-8")
    assert tomllib.loads(text)["days"] == values["days"] * k
    return path


def generate(preset: str, k: int, workdir: Path) -> Path:
    out = workdir / f"{preset}-x{k}"
    if not (out / "truth" / "summary.json").exists():
        toml = stretched_preset(preset, k, workdir)
        subprocess.run([sys.executable, "-m", "faultline", "simulate", "--preset", str(toml),
                        "--out", str(out), "--seed", "0"], check=True)
    return out


def _phases(summary: str) -> dict[str, float]:
    """The phase times of an ingest summary line (the zone note may follow them)."""
    return {k: float(v) for k, v in re.findall(
        r"\b(discover|parse|load|root causes) (\d+(?:\.\d+)?) s\b", summary)}


def _ingest(roots: list[Path], db: Path, workers: int) -> dict:
    seconds, (driver, worker), summary = run_ingest(roots, db, workers, fresh=False)
    return {"s": round(seconds, 1), "driver_mib": driver, "worker_mib": worker,
            "phases": _phases(summary), "summary": summary}


def measure(preset: str, k: int, workdir: Path, workers: int) -> dict:
    out = generate(preset, k, workdir)
    corpus = out / "corpus"
    truth = json.loads((out / "truth" / "summary.json").read_text())
    paths = list(discover([corpus]))
    floor_s, lines, _ = floor(paths)
    for p in out.glob("*.duckdb*"):
        p.unlink()
    clean = _ingest([corpus], out / "clean.duckdb", workers)
    rerun = _ingest([corpus], out / "clean.duckdb", workers)
    jobs = sorted((corpus / "jobs").iterdir())
    held = set(jobs[len(jobs) - max(1, len(jobs) // 8):])
    first = [p for p in corpus.iterdir() if p.name != "jobs"] + [j for j in jobs
                                                                 if j not in held]
    _ingest(first, out / "incremental.duckdb", workers)
    new_files = sum(1 for j in held for p in j.rglob("*") if p.is_file())
    inc = _ingest([corpus], out / "incremental.duckdb", workers)
    assert f"({new_files} new or changed)" in inc["summary"], (new_files, inc["summary"])
    assert lines == truth["lines"]
    return {"scale": k, "files": len(paths), "lines": lines,
            "bytes": sum(Path(p).stat().st_size for p in paths),
            "interruptions": truth.get("interruptions"), "floor_s": round(floor_s, 1),
            "ingest_s": clean["s"], "ratio": round(clean["s"] / floor_s, 2),
            "phases": clean["phases"], "driver_peak_mib": clean["driver_mib"],
            "worker_peak_mib": clean["worker_mib"], "rerun_s": rerun["s"],
            "rerun_phases": rerun["phases"], "incremental_new_files": new_files,
            "incremental_s": inc["s"], "incremental_phases": inc["phases"],
            "summary": clean["summary"]}


def table(rows: list[dict]) -> str:
    base = rows[0]
    out = ["| scale | files | lines | floor | ingest | ratio | s per M lines | vs 1x "
           "| driver peak | worker peak | re-run | incremental (new files) |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        per_m = r["ingest_s"] / (r["lines"] / 1e6)
        growth = (r["ingest_s"] / base["ingest_s"]) / (r["lines"] / base["lines"])
        out.append(
            f"| {r['scale']}x | {r['files']:,} | {r['lines']:,} | {r['floor_s']} s "
            f"| {r['ingest_s']} s | {r['ratio']} | {per_m:.1f} s | {growth:.2f} "
            f"| {r['driver_peak_mib']} MiB | {r['worker_peak_mib']} MiB | {r['rerun_s']} s "
            f"| {r['incremental_s']} s ({r['incremental_new_files']:,}) |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--workdir", type=Path,
                    default=Path(tempfile.gettempdir()) / "faultline-scale")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in args.scales:
        t0 = time.perf_counter()
        rows.append(measure(args.preset, k, args.workdir, args.workers))
        print(json.dumps(rows[-1]), flush=True)
        print(f"# scale {k}x measured in {time.perf_counter() - t0:.0f} s", flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
