"""``faultline watch``'s latency: from an attempt's end record to its printed root cause.

    python bench/watch.py [--preset watch2048] [--speed 60] [--interval 5] [--workdir DIR]

A preset is replayed (:class:`faultline.simulate.replay.Replay`) into ``DIR/live`` on
an accelerated clock (``--speed`` simulated seconds per wall second) while a real
``faultline watch --interval S --format jsonl`` process reads it. The replay notes the
wall time at which each job's end record first appeared in ``slurm/sacct.txt``, and
when the run's next attempt's record did (an interruption exists from then on:
watch prints it on its next cycle); the watch's stdout lines are time-stamped as they
arrive. Printed: per interruption both latencies, their median and max, and the watch's
cycle times (its status lines on stderr). The watch starts on the replay's first
moment (its first cycle reads the corpus as it stands); the clock starts after it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from faultline.simulate.replay import Replay

CYCLE = re.compile(r"cycle (\d+): (\d+) files new or changed, .* ([\d.]+) s$")


def _reader(stream, sink: list, stamp: bool) -> threading.Thread:
    def loop() -> None:
        for line in stream:
            sink.append((time.time(), line.rstrip("\n")) if stamp else line.rstrip("\n"))

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


def _wait_for(lines: list[str], pattern: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(pattern in ln for ln in lines):
            return
        time.sleep(0.2)
    raise SystemExit(f"watch never said {pattern!r}: {lines[-5:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="watch2048")
    ap.add_argument("--speed", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="faultline-watch-bench-"))
    shutil.rmtree(work / "live", ignore_errors=True)
    for leftover in work.glob("watch.duckdb*"):
        leftover.unlink()
    t0 = time.perf_counter()
    rp = Replay(args.preset, work / "live", seed=args.seed)
    print(f"simulated {args.preset}: {rp.result.files} files, {rp.result.lines} lines, "
          f"{rp.result.interruptions} interruptions in {time.perf_counter() - t0:.1f} s",
          flush=True)
    moments = rp.moments()
    # from a minute before the first job: the quiet hours before it only cost wall time
    first = max(moments[0], min(s for s, _e in rp._sacct.times if s is not None) - 60)
    last = moments[-1]
    rp.advance(first)
    db = work / "watch.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultline", "watch", str(work / "live" / "corpus"),
         "--db", str(db), "--interval", str(args.interval), "--format", "jsonl",
         "--tz", str(rp.zone)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[tuple[float, str]] = []
    err: list[str] = []
    _reader(proc.stdout, out, True)
    _reader(proc.stderr, err, False)
    try:
        replay_wall = _drive(rp, err, first, last, args)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)
        (work / "watch.stderr").write_text("\n".join(err) + "\n")
    _results(rp, out, err, first, last, replay_wall, args)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


def _drive(rp: Replay, err: list[str], first: float, last: float,
           args: argparse.Namespace) -> float:
    """Start the clock once watch's first cycle is done; replay; let watch catch up."""
    _wait_for(err, "cycle 1:", 1800)
    first_cycle = next(ln for ln in err if "cycle 1:" in ln)
    print(f"first cycle (the corpus as it stood): {first_cycle}", flush=True)
    w0 = time.monotonic()
    while rp.now < last:  # the accelerated clock
        rp.advance(min(last, first + (time.monotonic() - w0) * args.speed))
        time.sleep(0.2)
    replay_wall = time.monotonic() - w0
    rp.finish()
    # the final files may equal the last moment's (then no cycle says anything): give
    # watch two intervals and its slowest cycle, then stop it
    slowest = max((float(m.group(3)) for ln in err if (m := CYCLE.search(ln))), default=0)
    time.sleep(2 * args.interval + slowest)
    return replay_wall


def _results(rp: Replay, out: list[tuple[float, str]], err: list[str], first: float,
             last: float, replay_wall: float, args: argparse.Namespace) -> None:
    """The latency table and its summary, on stdout (Markdown for bench/RESULTS.md)."""

    # (job, start) -> end time, in the run's order; the next attempt's start record
    rows = [(r[0], s, e) for r, (s, e) in zip(rp._sacct.rows, rp._sacct.times, strict=True)
            if "." not in r[0] and r[1] == "llama3-405b" and s is not None]
    rows.sort(key=lambda x: x[1])
    printed = {}
    for when, line in out:
        rec = json.loads(line)
        if rec["kind"] == "interruption":
            printed[(rec["job_id"], rec["failed_at"][:19])] = (when, rec)
    lat_end, lat_next = [], []
    print("\n| job | failed (sim) | component | from end record | from next attempt's record |")
    print("|---|---|---|---:|---:|")
    for (job, start, end), nxt in itertools.pairwise(rows):
        if end is None:
            continue
        key = (job, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(end)))
        hit = printed.get(key)
        ended = rp.end_records.get((job, start))
        began = rp.start_records.get((nxt[0], nxt[1]))
        if hit is None or ended is None or began is None:
            print(f"| {job} | {key[1]} | NOT PRINTED | | |")
            continue
        when, rec = hit
        lat_end.append(when - ended)
        lat_next.append(when - began)
        print(f"| {job} | {key[1]} | {rec['component']} | {when - ended:.1f} s | "
              f"{when - began:.1f} s |")
    cycles = [float(m.group(3)) for ln in err if (m := CYCLE.search(ln))]
    print()
    if lat_end:
        print(f"latency from the end record: median {statistics.median(lat_end):.1f} s, "
              f"max {max(lat_end):.1f} s; from the next attempt's record: median "
              f"{statistics.median(lat_next):.1f} s, max {max(lat_next):.1f} s "
              f"({len(lat_end)} of {len(rows) - 1} interruptions printed)")
    print(f"cycles: {len(cycles)}, the first {cycles[0]:.1f} s; later ones median "
          f"{statistics.median(cycles[1:]):.1f} s, max {max(cycles[1:]):.1f} s; "
          f"--interval {args.interval:g}, replay {replay_wall:.0f} s wall at "
          f"{args.speed:g}x ({(last - first) / 3600:.1f} h simulated)")


if __name__ == "__main__":
    main()
