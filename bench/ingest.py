"""Ingest speed against the floor: how close is faultline to just reading the bytes?

    python bench/ingest.py [--preset medium] [--stretch K] [--seed 0] [--workdir DIR]
                           [--workers N] [--repeat R] [--no-floor | --streamed-floor]

1. generates the preset's corpus with the simulator (skipped if DIR already has it);
   ``--stretch K`` stretches the preset K times in time first, as bench/scale.py does
   (``--preset small --stretch 4``: the 1.5M-line, 12k-file case of issue 14);
2. the floor (unless ``--no-floor``): read every file's bytes (gunzip included) on
   both cores, concatenate, one polars ``read_csv`` of all lines, one ``str.contains``
   with the union of the patterns that select event lines; ``--streamed-floor`` does
   it in tasks of a few thousand files, for a corpus whose text does not fit in memory
   (llama3's 25 GB, see :func:`floor`);
3. ``faultline ingest`` end to end (parse, normalize, write DuckDB) into a fresh
   database, best of ``--repeat`` runs: with faultline's default workers (one
   in-process worker below 200 MB to read, every core above it) unless ``--workers``
   is given;
4. prints lines, files, seconds, lines/s, files/s, peak memory and the ratio against
   the faster of two floor runs: for the whole command (which also builds the
   interruptions and classifies their root causes) and for its ingest part alone
   (parse, normalize, write DuckDB: the time ``ingest`` reports before classifying),
   and the CPU seconds (user + system, worker processes included) of every floor and
   ingest run with their ratio: on a machine shared with other jobs the wall times
   swing with their load, the CPU time much less;
5. parse throughput per source (``files.source``): the files of each source parsed
   in-process by ``parse_batch`` in batches of 256 as a Beam worker parses them
   (bytes read beforehand, so this is parse alone), as lines/s and MB/s.

The two runs go one after the other on the same corpus, so the page cache treats them
alike (the floor runs second as well, to show the warm-cache spread).
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import polars as pl

from faultline.pipeline.discover import discover
from faultline.pipeline.parsers import joblog, kernel_messages, slurmctld, trainer
from faultline.pipeline.workers import resolve as resolve_workers

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


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its children waited for so
    far: the time a run costs whatever else the machine is doing (this shared 2-core
    machine's wall times swing by half with the other sessions' load)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


LAST_CPU: dict[str, float] = {}  # CPU seconds of the last floor() and run_ingest() call


def _count(blob: bytes) -> tuple[int, int]:
    """(lines, selected lines) of ``blob``: one polars ``read_csv`` of its lines and
    one ``str.contains`` of the union of the selecting patterns."""
    df = pl.read_csv(blob, has_header=False, separator="\x01", quote_char=None,
                     new_columns=["line"], schema_overrides={"line": pl.String},
                     truncate_ragged_lines=True, encoding="utf8-lossy")
    return df.height, int(df["line"].str.contains(SELECT).sum())


def _read_and_count(paths: list[str]) -> tuple[int, int]:
    return _count(_read(paths))


STREAM_FILES = 4096  # about the files per task of the streamed floor


def floor(paths: list[str], streamed: bool = False) -> tuple[float, int, int]:
    """(seconds, lines, selected lines) of the plain polars scan.

    Whole (the default): every file read on two processes, one scan of all lines in
    this one. ``streamed``: each task reads about :data:`STREAM_FILES` files and scans their
    lines itself, so memory holds a few tasks' text, not the corpus (``llama3``'s
    25 GB): the same reads and the same regex over the same lines, both cores busy
    for the scan too (the whole floor's scan runs on polars' threads here), plus the
    start of two spawned processes (their imports, a fraction of a second)."""
    c0 = cpu_seconds()
    t0 = time.perf_counter()
    # strided: the big files spread over every chunk
    n = max(16, len(paths) // STREAM_FILES) if streamed else 16
    chunks = [paths[i::n] for i in range(n)]
    if streamed:
        # spawned: a fork of this process, whose polars pool may be running, can hang
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            counts = list(pool.map(_read_and_count, chunks))
        lines, selected = sum(c[0] for c in counts), sum(c[1] for c in counts)
    else:
        with ProcessPoolExecutor(2) as pool:
            blob = b"".join(pool.map(_read, chunks))
        lines, selected = _count(blob)
    seconds = time.perf_counter() - t0
    LAST_CPU["floor"] = cpu_seconds() - c0
    return seconds, lines, selected


# the console script's main() ends the process itself (cli._exit, after the atexit
# handlers): the peaks are printed by one of them
_WRAPPED = """
import atexit, resource, sys
from faultline.launch import main  # what the console script runs

def peaks():
    # VmHWM: ru_maxrss survives exec and would report the benchmark's own peak
    with open("/proc/self/status") as f:
        own = int(next(ln for ln in f if ln.startswith("VmHWM")).split()[1]) / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # an upper bound
    print(f"PEAK {own:.0f} {kids:.0f}")

atexit.register(peaks)
sys.argv = ["faultline", *sys.argv[1:]]
main()
"""


def run_ingest(corpus: Path | list[Path], db: Path, workers: int | None, fresh: bool = True
               ) -> tuple[float, tuple[int, int], str]:
    """(seconds, (driver, largest worker) peak RSS in MiB, summary line) of one ingest
    (into a new database unless ``fresh`` is False; faultline's default workers when
    ``workers`` is None)."""
    if fresh:
        for p in db.parent.glob(db.name + "*"):
            p.unlink()
    roots = [str(c) for c in (corpus if isinstance(corpus, list) else [corpus])]
    given = [] if workers is None else ["--workers", str(workers)]
    c0 = cpu_seconds()
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _WRAPPED, "ingest", *roots,
                           "--db", str(db), *given],
                          capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - t0
    LAST_CPU["ingest"] = cpu_seconds() - c0  # the ingest and the Beam workers it reaped
    lines = proc.stdout.strip().splitlines()
    own, kids = (int(x) for x in lines[-1].split()[1:])
    # the summary line; a corpus of several runs prints a line about them after it
    summary = next(ln for ln in reversed(lines) if ln.startswith("ingested "))
    return seconds, (own, kids), summary


BATCH = 256  # files per parse_batch call here (ingest: transforms.BATCH_SIZE, in parts)


def per_source(db: Path, corpus: Path) -> dict[str, dict[str, float]]:
    """Parse throughput per ``files.source``: each source's files (as ``db`` sniffed
    them) parsed in-process by ``parse_batch`` in batches of :data:`BATCH`, with the
    settings ``ingest`` would use; bytes are read before the clock starts."""
    import duckdb

    from faultline.pipeline.fileparse import parse_batch
    from faultline.pipeline.fileread import read_bytes
    from faultline.pipeline.prepass import corpus_facts
    from faultline.pipeline.settings import IngestSettings
    from faultline.pipeline.tzevidence import decide_zone

    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT source, path, lines FROM files WHERE bytes > 0 "
                           "ORDER BY path").fetchall()
    paths = [p for _s, p, _n in rows]
    zone = decide_zone(paths, None)
    facts = corpus_facts(paths, zone.zone)
    settings = IngestSettings(tz=zone.zone, tz_how=zone.how, window=facts.window,
                              job_windows=facts.jobs, known_hosts=facts.hosts)
    by_source: dict[str, list[tuple[str, int]]] = {}
    for source, path, n in rows:
        by_source.setdefault(source, []).append((path, n))
    out = {}
    for source, files in sorted(by_source.items()):
        seconds = cpu = 0.0
        size = 0
        for i in range(0, len(files), BATCH):
            items = []
            for path, _n in files[i:i + BATCH]:
                data, mtime, _problem = read_bytes(path)
                size += len(data)
                items.append((path, data, mtime))
            t0, c0 = time.perf_counter(), time.process_time()  # every thread's CPU
            parse_batch(items, settings)
            seconds += time.perf_counter() - t0
            cpu += time.process_time() - c0
        lines = sum(n for _p, n in files)
        out[source] = {"files": len(files), "lines": lines, "mb": round(size / 1e6, 1),
                       "s": round(seconds, 2), "cpu_s": round(cpu, 2),
                       "lines_per_cpu_s": round(lines / cpu) if cpu else None,
                       "lines_per_s": round(lines / seconds) if seconds else None,
                       "mb_per_s": round(size / 1e6 / seconds, 1) if seconds else None}
    return out


def per_source_table(stats: dict[str, dict[str, float]]) -> str:
    """The per-source figures as a Markdown table (pasted into bench/RESULTS.md)."""
    out = ["| source | files | lines | MB as stored | parse | lines/s | MB/s | CPU "
           "| lines per CPU s |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for source, r in sorted(stats.items(), key=lambda kv: -kv[1]["lines"]):
        out.append(f"| {source} | {r['files']:,} | {r['lines']:,} | {r['mb']} | {r['s']} s "
                   f"| {r['lines_per_s'] or 0:,} | {r['mb_per_s']} | {r['cpu_s']} s "
                   f"| {r['lines_per_cpu_s'] or 0:,} |")
    return "\n".join(out)


def generate(preset: str, seed: int, stretch: int, workdir: Path) -> Path:
    """The corpus's output directory (corpus/ and truth/), generated if missing."""
    if stretch != 1:
        from scale import generate as stretched  # bench/scale.py, beside this script

        if seed != 0:
            raise SystemExit("--stretch generates with seed 0 (as bench/scale.py does)")
        return stretched(preset, stretch, workdir)
    out = workdir / f"{preset}-{seed}"
    if not (out / "truth" / "summary.json").exists():
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "faultline", "simulate", "--preset",
                        preset, "--out", str(out), "--seed", str(seed)], check=True)
        print(f"generated {preset} in {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="medium")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path,
                    default=Path(tempfile.gettempdir()) / "faultline-bench")
    ap.add_argument("--stretch", type=int, default=1,
                    help="the preset stretched this many times in time (bench/scale.py)")
    ap.add_argument("--workers", type=int, default=None,
                    help="passed to ingest; default: faultline's own default")
    ap.add_argument("--repeat", type=int, default=1, help="ingest runs; the best counts")
    ap.add_argument("--no-per-source", action="store_true",
                    help="skip the per-source parse throughput")
    ap.add_argument("--no-floor", action="store_true",
                    help="skip the floor; no ratio then, only times, CPU and memory")
    ap.add_argument("--streamed-floor", action="store_true",
                    help=f"the floor read and scanned in tasks of about {STREAM_FILES} "
                         "files, in bounded memory (llama3's)")
    ap.add_argument("--per-source-only", action="store_true",
                    help="only the per-source throughput, on the database a run left")
    args = ap.parse_args()
    if args.per_source_only:
        out = generate(args.preset, args.seed, args.stretch, args.workdir)
        stats = per_source(out / "bench.duckdb", out / "corpus")
        print(json.dumps({"per_source": stats, "load_avg": os.getloadavg()}))
        print(per_source_table(stats))
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    out = generate(args.preset, args.seed, args.stretch, args.workdir)
    corpus = out / "corpus"
    truth = json.loads((out / "truth" / "summary.json").read_text())
    paths = list(discover([corpus]))
    workers = args.workers if args.workers is not None else resolve_workers(
        None, "DirectRunner", paths)
    if args.no_floor:
        floor_s = selected = float("nan")
        lines, floor_cpu = truth["lines"], [float("nan")]
    else:
        floor_s, lines, selected = floor(paths, args.streamed_floor)
        floor_cpu = [LAST_CPU["floor"]]
    runs, ingest_cpu = [], []
    for _ in range(max(1, args.repeat)):
        runs.append(run_ingest(corpus, out / "bench.duckdb", args.workers))
        ingest_cpu.append(LAST_CPU["ingest"])
    ingest_s, (driver_mib, worker_mib), summary = min(runs, key=lambda r: r[0])
    floor2_s = float("nan")
    if not args.no_floor:
        floor2_s, _, _ = floor(paths, args.streamed_floor)
        floor_cpu.append(LAST_CPU["floor"])
    assert lines == truth["lines"], (lines, truth["lines"])
    n = len(paths)
    # the summary's phases: discover + parse + load is ingest without the root causes
    core_s = round(sum(float(re.search(rf"{k} ([0-9.]+) s", summary)[1])
                       for k in ("discover", "parse", "load")), 1)
    best_floor = min(floor_s, floor2_s)
    row = {
        "preset": args.preset, "stretch": args.stretch, "files": n,
        "bytes": sum(Path(p).stat().st_size for p in paths), "lines": lines,
        "selected_by_floor": selected,
        "floor": "streamed" if args.streamed_floor else "whole",
        "floor_s": round(floor_s, 1), "floor_again_s": round(floor2_s, 1),
        "ingest_s": round(ingest_s, 1), "ingest_runs_s": [round(r[0], 1) for r in runs],
        "ratio": round(ingest_s / best_floor, 2),
        "floor_cpu_s": [round(c, 1) for c in floor_cpu],
        "ingest_cpu_s": [round(c, 1) for c in ingest_cpu],
        "cpu_ratio": round(min(ingest_cpu) / min(floor_cpu), 2),
        "ingest_without_root_causes_s": core_s,
        "ratio_without_root_causes": round(core_s / best_floor, 2),
        "ingest_lines_per_s": round(lines / ingest_s), "ingest_files_per_s": round(n / ingest_s),
        "floor_lines_per_s": None if args.no_floor else round(lines / best_floor),
        "driver_peak_rss_mib": driver_mib, "worker_peak_rss_mib": worker_mib,
        "workers": workers, "workers_given": args.workers is not None,
        "cpus": os.cpu_count(), "load_avg": [round(x, 1) for x in os.getloadavg()],
        "ingest": summary,
    }
    if args.no_floor:  # no floor measured: no ratio against it
        for k in ("selected_by_floor", "floor_s", "floor_again_s", "ratio", "floor_cpu_s",
                  "cpu_ratio", "ratio_without_root_causes", "floor_lines_per_s"):
            row[k] = None
    if not args.no_per_source:
        row["per_source"] = per_source(out / "bench.duckdb", corpus)
    print(json.dumps(row, indent=2))
    if "per_source" in row:
        print(per_source_table(row["per_source"]))


if __name__ == "__main__":
    main()
