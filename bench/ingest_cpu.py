"""CPU time of whole ``faultline ingest`` commands, best of N, for comparing two builds.

::

    python bench/ingest_cpu.py CORPUS [--faultline PATH ...] [--runs 3] [--workers N]

Each run is a fresh database under a temporary directory; the figure is the CPU time
(user + system) of the command and every process it started (Beam's workers included:
``getrusage(RUSAGE_CHILDREN)`` around one waited-for child), best of ``--runs``, and
the wall time of that run. CPU rather than wall time: on a machine shared with other
jobs, wall times swing with their load; CPU time swings far less. The phases are the
command's own summary line (wall seconds).
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one_run(faultline: str, corpus: list[str], workers: int | None) -> tuple[float, float, str]:
    """(CPU s incl. children, wall s, the summary's phases) of one fresh ingest."""
    with tempfile.TemporaryDirectory(prefix="ingest-cpu-") as tmp:
        cmd = [faultline, "ingest", *corpus, "--db", str(Path(tmp) / "x.duckdb")]
        if workers is not None:
            cmd += ["--workers", str(workers)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    m = re.search(r"\((discover [^;)]*)", out)
    return cpu, wall, m.group(1) if m else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="+")
    parser.add_argument("--faultline", action="append",
                        help="a faultline executable (repeat to compare builds; "
                             "default: the one beside this Python)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args(argv)
    builds = args.faultline or [str(Path(sys.executable).with_name("faultline"))]
    results: dict[str, list[tuple[float, float, str]]] = {b: [] for b in builds}
    for _ in range(args.runs):  # interleaved: a change in the machine's load hits all
        for b in builds:
            results[b].append(one_run(b, args.corpus, args.workers))
    for b, runs in results.items():
        cpu, wall, phases = min(runs)
        print(f"{b}: best CPU {cpu:.2f} s (wall {wall:.2f} s; {phases}); all CPU "
              + ", ".join(f"{r[0]:.2f}" for r in runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
