"""Fixed costs a user pays before any data: start-up of the commands, a first ingest.

    python bench/startup.py [--workdir DIR] [--repeat 5]

1. ``faultline demo`` in ``DIR`` (the demo database: the bundled sample, ingested);
2. wall time, best of ``--repeat``, of ``faultline --help``, ``faultline report --db``
   and ``faultline explain <first interruption> --db`` on it, each a new process;
3. a first ingest of the sample into a fresh database in an empty directory, with the
   phases of its summary line (``root causes`` is where the text models used to be
   fitted).

Targets (issue 14): ``--help`` under 0.3 s, ``report`` and ``explain`` under 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from faultline.fixtures import fixtures_dir

CLI = [sys.executable, "-m", "faultline"]


def wall(args: list[str], cwd: Path, repeat: int) -> float:
    """Best wall-clock seconds of ``repeat`` runs (a new interpreter each)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(args, cwd=cwd, check=True, capture_output=True)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path,
                    default=Path(tempfile.gettempdir()) / "faultline-startup")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    subprocess.run([*CLI, "demo"], cwd=args.workdir, check=True, capture_output=True)
    db = args.workdir / "faultline-demo.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        iid = con.execute("SELECT interruption_id FROM interruptions "
                          "ORDER BY interruption_id LIMIT 1").fetchone()[0]
    # the installed entry point, as a user runs it (python -m adds nothing measurable)
    exe = [str(Path(sys.executable).with_name("faultline"))]
    times = {"help": wall([*exe, "--help"], args.workdir, args.repeat),
             "report": wall([*exe, "report", "--db", str(db)], args.workdir, args.repeat),
             "explain": wall([*exe, "explain", iid, "--db", str(db)], args.workdir,
                             args.repeat)}
    fresh = args.workdir / "first-run"
    fresh.mkdir()
    t0 = time.perf_counter()
    proc = subprocess.run([*exe, "ingest", str(fixtures_dir() / "sample" / "corpus"),
                           "--db", str(fresh / "x.duckdb")], cwd=fresh, check=True,
                          capture_output=True, text=True)
    first = time.perf_counter() - t0
    summary = next(ln for ln in proc.stdout.splitlines() if ln.startswith("ingested"))
    print(f"| command | wall (best of {args.repeat}) |")
    print("|---|---:|")
    for name, s in times.items():
        print(f"| {name} | {s:.2f} s |")
    print(f"| first ingest of the sample | {first:.2f} s |")
    print(f"\n{summary}")
    json.dump({"best_of": args.repeat, **{k: round(v, 3) for k, v in times.items()},
               "first_ingest_s": round(first, 2), "summary": summary}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
