"""Replay: a simulated corpus written over time, as a live cluster writes its logs.

``faultline simulate --replay --speed X`` (and :class:`Replay` for a test that drives
it step by step) first simulates the preset into a scratch directory beside ``OUT``,
then writes ``OUT/corpus`` from it on an accelerated clock:

- every plain file's lines are appended in order, each when the clock passes its time
  (the time its line carries; a line that carries none, such as a traceback's
  continuation, goes with the line before it). A file appears with its first line, so
  a job's directory appears when the job starts;
- a gzip file (a rotated ``kern.log.N.gz``, a job log the collector compresses) appears
  whole, byte for byte, when the clock passes its last line: logrotate and collectors
  compress a file once it is closed. Rotated plain files (``kern.log.1``) are written
  during their own period, as a dated rotation scheme would;
- ``slurm/sacct.txt`` is what a cron job's ``sacct --parsable2 > sacct.txt`` shows at
  that moment: every job that has started, a running one as ``RUNNING`` with
  ``End=Unknown``; it is replaced atomically (written aside, then renamed) whenever a
  job starts or ends;
- inventories (``gpus.csv``, ``hosts.csv``) and files without lines are there from the
  start.

At :meth:`Replay.finish` every file holds exactly the bytes ``faultline simulate`` writes
for the same preset and seed, and the truth is copied to ``OUT/truth`` (only then: a
live cluster has none). Nothing here sleeps; the CLI's clock (:func:`run`) is the only
place that waits. Flight Recorder dumps and non-canonical layouts are not replayed.
"""

from __future__ import annotations

import csv
import datetime as dt
import re
import shutil
import tempfile
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from zoneinfo import ZoneInfo

from faultline.simulate.config import load_preset
from faultline.simulate.corpus import SimResult, simulate
from faultline.simulate.slurm import _elapsed

SACCT = "slurm/sacct.txt"
STATIC = ("inventory", "hosts")  # there from the start, whole
_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"),
    start=1)}
# The time each canonical source writes (faultline.simulate.timefmt), tried in order.
_ZONED = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?)(Z|[+-]\d\d:?\d\d)")
_CTLD = re.compile(rb"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?\]")
_DMESG_T = re.compile(rb"^\[\w{3} (\w{3}) +(\d+) (\d\d:\d\d:\d\d) (\d{4})\]")
_TRAINER = re.compile(rb"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d{3} ")
_SEL = re.compile(rb"\| (\d\d)/(\d\d)/(\d{4}) \| (\d\d:\d\d:\d\d) \|")
_RFC3164 = re.compile(rb"^(\w{3}) +(\d+) (\d\d:\d\d:\d\d) ")


@lru_cache(maxsize=1 << 16)
def _local(wall: str, zone: ZoneInfo) -> float:
    """Epoch seconds of a local wall time ``YYYY-MM-DDTHH:MM:SS`` (second resolution
    is enough to order a line; a repeated DST hour takes its first reading)."""
    return dt.datetime.fromisoformat(wall).replace(tzinfo=zone).timestamp()


def line_time(line: bytes, zone: ZoneInfo, start: dt.datetime) -> float | None:
    """When a canonical corpus line was written, or None if it carries no time.
    ``start`` (the preset's local start) gives RFC 3164 syslog its year."""
    if m := _ZONED.match(line):
        text = m.group(1).decode().replace(",", ".")
        off = m.group(2).decode()
        return dt.datetime.fromisoformat(text + ("+00:00" if off == "Z" else off)).timestamp()
    if m := _CTLD.match(line):
        return _local(m.group(1).decode(), zone)
    if m := _DMESG_T.match(line):
        mon = _MONTHS.get(m.group(1).decode())
        if mon:
            return _local(f"{m.group(4).decode()}-{mon:02d}-{int(m.group(2)):02d}T"
                          f"{m.group(3).decode()}", zone)
    if m := _TRAINER.match(line):
        return _local(m.group(1).decode().replace(" ", "T"), zone)
    if m := _SEL.search(line, 0, 40):
        mm, dd, yyyy, hms = (g.decode() for g in m.groups())
        return _local(f"{yyyy}-{mm}-{dd}T{hms}", zone)
    if (m := _RFC3164.match(line)) and (mon := _MONTHS.get(m.group(1).decode())):
        year = start.year + (mon < start.month)  # the corpus spans less than a year
        return _local(f"{year}-{mon:02d}-{int(m.group(2)):02d}T{m.group(3).decode()}", zone)
    return None


@dataclass
class _File:
    """One corpus file as the replay writes it: ``ends[i]`` is the byte offset after
    line i, ``times[i]`` when that line is due (non-decreasing)."""

    rel: str
    source: str
    compressed: bool
    times: list[float] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    written: int = 0  # lines written so far

    @property
    def due(self) -> float:
        """When the next unwritten part is due (gzip: when the whole file is)."""
        if self.written >= len(self.times):
            return float("inf")
        return self.times[-1] if self.compressed else self.times[self.written]


def _index(path: Path, source: str, zone: ZoneInfo, start: dt.datetime,
           t0: float) -> tuple[list[float], list[int]]:
    """Per line of a plain file: when it is due and where it ends."""
    data = path.read_bytes()
    times: list[float] = []
    ends: list[int] = []
    pos, prev = 0, None
    untimed_head = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        t = None if source in STATIC else line_time(data[pos:min(end, pos + 80)], zone, start)
        if t is None:
            if prev is None:
                untimed_head += 1
            t = prev
        else:
            t = t if prev is None else max(t, prev)  # a file is written in order
            if untimed_head:  # lines before the first timed one go with it
                times[:untimed_head] = [t] * untimed_head
                untimed_head = 0
            prev = t
        times.append(t0 if t is None else t)
        ends.append(end)
        pos = end
    if untimed_head:
        times[:] = [t0] * len(times)
    return times, ends


class Replay:
    """A corpus under ``out/corpus`` that grows as :meth:`advance` moves the clock.

    Deterministic: the same preset, seed and sequence of ``advance`` times write the
    same bytes. :meth:`moments` lists the times at which something new is written;
    :meth:`finish` writes the rest and the truth, and removes the scratch copy."""

    def __init__(self, preset: str, out: Path, seed: int = 0,
                 progress: Callable[[str, int, int], None] | None = None) -> None:
        p = load_preset(preset)
        self.zone = ZoneInfo(p.tz)
        self.out = out
        self.corpus = out / "corpus"
        out.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = tempfile.TemporaryDirectory(dir=out.parent, prefix=".replay-")
        self.src = Path(self._tmp.name)
        self.result: SimResult = simulate(preset, self.src, seed=seed, progress=progress)
        self.start = p.start.replace(tzinfo=self.zone).timestamp()
        self.files: list[_File] = []
        with (self.src / "truth" / "files.csv").open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        for r in rows:
            if r["source"] == "flight_recorder":
                raise ValueError("replay does not write Flight Recorder dumps")
            self.files.append(_File(r["path"], r["source"], r["compressed"] == "1"))
        for f in self.files:
            path = self.src / "corpus" / f.rel
            if f.compressed:
                f.times, f.ends = [self._gz_due(f)], [path.stat().st_size]
            elif f.rel == SACCT:
                f.times, f.ends = [self.start], [0]  # rewritten whole: see _sacct
            else:
                f.times, f.ends = _index(path, f.source, self.zone, p.start, self.start)
        self._sacct = _SacctRows((self.src / "corpus" / SACCT).read_bytes(), self.zone)
        self._sacct.scratch = out
        self.now = float("-inf")
        self.end_records: dict[tuple[str, float], float] = {}  # (job, start) -> when
        self.start_records: dict[tuple[str, float], float] = {}
        self.corpus.mkdir(parents=True, exist_ok=True)

    def _gz_due(self, f: _File) -> float:
        """A gzip file is due at its last line's time (read from its plain twin's
        content: the simulator wrote the same lines, compressed)."""
        import gzip

        data = gzip.decompress((self.src / "corpus" / f.rel).read_bytes())
        last = self.start
        for line in data.splitlines()[-50:]:
            t = line_time(line[:80], self.zone, dt.datetime.fromtimestamp(self.start,
                                                                           self.zone))
            if t is not None:
                last = max(last, t)
        return last

    def moments(self) -> list[float]:
        """Every time at which :meth:`advance` writes something new, ascending."""
        ts = {self.start}
        for f in self.files:
            if f.rel == SACCT:
                continue
            ts.update(f.times[-1:] if f.compressed else f.times)
        ts.update(self._sacct.changes())
        return sorted(ts)

    @property
    def done(self) -> bool:
        return all(f.written >= len(f.times) for f in self.files if f.rel != SACCT) \
            and self.now >= max(self._sacct.changes(), default=self.start)

    def advance(self, t: float) -> int:
        """Write everything due by ``t`` (epoch seconds); returns the lines written."""
        if t < self.now:
            raise ValueError("the replay clock only moves forward")
        first = self.now == float("-inf")
        self.now = t
        lines = 0
        for f in self.files:
            if f.rel == SACCT:
                continue
            if first and (f.source in STATIC or not f.times):
                self._touch(f)
            if f.due > t:
                continue
            if f.compressed:
                self._copy_whole(f)
                lines += 1
                continue
            upto = bisect_right(f.times, t, lo=f.written)
            lines += upto - f.written
            self._append(f, upto)
        if self._sacct.update(t, self.corpus / SACCT, wall=time.time(),
                              ends=self.end_records, starts=self.start_records):
            lines += 1
        return lines

    def _touch(self, f: _File) -> None:
        path = self.corpus / f.rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if f.source in STATIC:
            shutil.copyfile(self.src / "corpus" / f.rel, path)
            f.written = len(f.times)
        else:
            path.touch()

    def _copy_whole(self, f: _File) -> None:
        path = self.corpus / f.rel
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.src / "corpus" / f.rel, path)
        f.written = len(f.times)

    def _append(self, f: _File, upto: int) -> None:
        if upto <= f.written:
            return
        lo = f.ends[f.written - 1] if f.written else 0
        hi = f.ends[upto - 1]
        with (self.src / "corpus" / f.rel).open("rb") as src:
            src.seek(lo)
            chunk = src.read(hi - lo)
        path = self.corpus / f.rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as dst:
            dst.write(chunk)  # one write: a reader sees whole lines but for a race
        f.written = upto

    def finish(self) -> SimResult:
        """Write the rest, then the truth; the corpus now equals a batch simulation's."""
        self.advance(max(self.now, self.moments()[-1]))
        shutil.copyfile(self.src / "corpus" / SACCT, self.corpus / SACCT)
        shutil.copytree(self.src / "truth", self.out / "truth", dirs_exist_ok=True)
        self.close()
        return SimResult(self.out, self.result.files, self.result.lines, self.result.bytes,
                         self.result.interruptions, self.result.planned,
                         self.result.seconds, self.result.effective_training_time)

    def close(self) -> None:
        """Remove the scratch copy (the corpus written so far stays)."""
        self._tmp.cleanup()

    def __enter__(self) -> Replay:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class _SacctRows:
    """The final sacct dump, and what it showed at an earlier moment."""

    START, END, STATE, ELAPSED, EXIT, REASON, COMMENT = 5, 6, 4, 7, 10, 11, 12

    def __init__(self, data: bytes, zone: ZoneInfo) -> None:
        lines = data.decode("utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        self.header = lines[0]
        width = self.header.count("|") + 1
        self.rows: list[list[str]] = []
        buf = ""
        for ln in lines[1:]:  # a field with a newline in it continues on the next line
            buf = ln if not buf else buf + "\n" + ln
            if buf.count("|") + 1 >= width:
                self.rows.append(buf.split("|"))
                buf = ""
        self.zone = zone
        self.times = [(self._t(r[self.START]), self._t(r[self.END])) for r in self.rows]
        self.shown: str | None = None
        self.scratch = Path(tempfile.gettempdir())  # set by Replay: beside the corpus

    def _t(self, s: str) -> float | None:
        return None if s in ("Unknown", "None", "") else _local(s, self.zone)

    def changes(self) -> list[float]:
        return sorted({t for pair in self.times for t in pair if t is not None})

    def at(self, t: float) -> str:
        out = [self.header]
        for r, (start, end) in zip(self.rows, self.times, strict=True):
            if start is None or start > t:
                continue
            if end is None or end > t:
                r = list(r)
                r[self.STATE], r[self.END] = "RUNNING", "Unknown"
                r[self.ELAPSED] = _elapsed(t - start)
                r[self.EXIT] = "0:0"
                r[self.COMMENT] = ""  # an admin comments once the job has ended
            out.append("|".join(r))
        return "\n".join(out) + "\n"

    def update(self, t: float, path: Path, wall: float,
               ends: dict[tuple[str, float], float],
               starts: dict[tuple[str, float], float]) -> bool:
        """Rewrite ``path`` if the dump at ``t`` differs from the one shown; note when
        each job's start and end record first appeared (wall clock)."""
        key = self._key(t)
        if key == self.shown:
            return False
        for r, (start, end) in zip(self.rows, self.times, strict=True):
            if "." in r[0] or start is None:
                continue
            if start <= t:
                starts.setdefault((r[0], start), wall)
            if end is not None and end <= t:
                ends.setdefault((r[0], start), wall)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.scratch / f".{path.name}.tmp"  # outside the corpus: never discovered
        tmp.write_text(self.at(t), encoding="utf-8")
        tmp.replace(path)  # a reader sees the old dump or the new one, whole
        self.shown = key
        return True

    def _key(self, t: float) -> str:
        """What changes the dump: how many starts and ends lie at or before ``t``."""
        started = sum(1 for s, _e in self.times if s is not None and s <= t)
        ended = sum(1 for _s, e in self.times if e is not None and e <= t)
        return f"{started}/{ended}"


def run(preset: str, out: Path, speed: float, seed: int = 0, tick: float = 0.5,
        progress: Callable[[str, int, int], None] | None = None,
        on_step: Callable[[Replay], None] | None = None) -> SimResult:
    """``faultline simulate --replay``: replay at ``speed`` simulated seconds per wall
    second, starting at the corpus's first moment; ``tick`` wall seconds per step."""
    if speed <= 0:
        raise ValueError("--speed must be positive")
    rp = Replay(preset, out, seed=seed, progress=progress)
    try:
        moments = rp.moments()
        t0, last = moments[0], moments[-1]
        w0 = time.monotonic()
        while True:
            sim = t0 + (time.monotonic() - w0) * speed
            rp.advance(min(sim, last))
            if on_step is not None:
                on_step(rp)
            if sim >= last:
                break
            # skip quiet stretches: sleep until the next moment is due, at most a tick
            nxt = moments[min(bisect_right(moments, sim), len(moments) - 1)]
            time.sleep(max(0.01, min(tick, (nxt - sim) / speed)))
        return rp.finish()
    finally:
        rp.close()
