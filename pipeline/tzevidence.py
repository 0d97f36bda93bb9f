"""Evidence of the corpus's zone, read before the pipeline, and the zone decision.

:func:`decide_zone` runs on the driver, like the pre-pass
(:mod:`faultline.pipeline.prepass`): it reads a spread sample of the files (the heads
and tails of kernel logs, the heads of job logs, every sacct dump), pairs instants seen
both in UTC and in local time, and lets :func:`faultline.pipeline.tzinfer.infer_zone`
name the zone. The text-to-observation
functions are pure; only :func:`gather` reads files.

What pairs an instant (shapes as in ``docs/corpus.md``):

- an RFC 3339 stamp with a numeric offset (``2024-11-04T07:13:25.661407-08:00 host
  kernel: ...``, rsyslog / journalctl ``short-iso``; ``dmesg --time-format iso``, with
  or without ``--decode``): the host's own offset;
- a collector's UTC stamp in front of the process's local one, in one line
  (``2024-11-01T16:22:35.716505Z W1101 09:22:35.716505 ...`` glog,
  ``...Z [2024-11-01 09:22:35] host:pid:tid [0] NCCL WARN ...``, ``...Z 2024-11-01
  09:22:35,716 INFO ...`` Python logging);
- a job's sacct ``Start`` (local) against the first collector-stamped line of its job
  log (UTC), seconds later.

A ``...Z`` stamp alone says nothing of the local zone (collectors write UTC wherever
they run); a ``+00:00`` offset does (the host's clock is on UTC).
"""

from __future__ import annotations

import datetime as dt
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

from faultline.pipeline.fileparse import path_job_ids
from faultline.pipeline.fileread import read_bytes
from faultline.pipeline.inflate import gunzip
from faultline.pipeline.parsers import sacct
from faultline.pipeline.records import ParseContext
from faultline.pipeline.sniff import path_hints
from faultline.pipeline.text import decode, head_lines, split_lines, tail_lines
from faultline.pipeline.timeutil import in_range, parse_iso
from faultline.pipeline.tzinfer import (
    KIND_WORDS,
    Observation,
    ZoneFit,
    agreement,
    infer_zone,
    normalize_zone,
)
from faultline.pipeline.tzstamps import (
    LOCAL_AFTER_Z,
    Z_STAMP,
    maybe_paired,
    offset_one,
    offsets_many,
)

CHUNK = 32 * 1024  # bytes read from the head (and tail) of a sampled file
MAX_FILES = 600  # kernel files, and jobs, sampled per corpus (spread over all of them)
HOSTS_PER_JOB = 3  # job logs read per sampled job
LINES_PER_CHUNK = 40  # lines of a chunk looked at
WARN_SHARE = 0.1  # a --tz disagreeing with this share of the evidence is warned about
ZONELESS_HINTS = ("sacct", "slurmctld", "sel", "trainer")

_RFC3339_HEAD = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
_US = 1_000_000
_UTC = ZoneInfo("UTC")


def offsets_in(lines: Iterable[str]) -> list[Observation]:
    """RFC 3339 stamps with a numeric offset: each is the writer's offset at its instant
    (line by line; :func:`~faultline.pipeline.tzstamps.offsets_many` reads many chunks
    at once, as :func:`gather` does)."""
    days: dict[str, int | None] = {}
    offsets: dict[str, int | None] = {}
    return [o for line in lines if (o := offset_one(line, days, offsets)) is not None]


def paired_in(lines: Iterable[str], group: str | None = None) -> list[Observation]:
    """Lines that carry a collector's UTC stamp and the writer's local stamp (``group``:
    the job they belong to, which votes as one)."""
    out = []
    for line in lines:
        m = Z_STAMP.match(line)
        if not m:
            continue
        local = LOCAL_AFTER_Z.match(line, m.end())
        if not local:
            continue
        utc = parse_iso(m.group(1), _UTC)
        if utc is None or not in_range(utc[0]):
            continue
        wall = _wall_us(local, utc[0])
        if wall is not None:
            out.append(Observation(utc[0], (wall - utc[0]) / _US, "line", group))
    return out


def _wall_us(m: re.Match[str], utc_us: int) -> int | None:
    """A local stamp's wall time as if it were UTC (epoch us); a glog stamp without a
    year takes the year that puts it nearest the UTC instant. (Read with a ``Z``: what
    ``parse_iso`` gives a zone-less time in UTC, by its arithmetic, not a datetime's.)"""
    text = m.group(4) or m.group(5)
    if text:
        got = parse_iso(text + "Z", _UTC)
        return got[0] if got else None
    year = dt.datetime.fromtimestamp(utc_us / _US, dt.UTC).year
    best = None
    for y in (year - 1, year, year + 1):
        got = parse_iso(f"{y}-{m.group(1)}-{m.group(2)} {m.group(3)}Z", _UTC)
        if got and (best is None or abs(got[0] - utc_us) < abs(best - utc_us)):
            best = got[0]
    return best


def first_collector_stamp(lines: Iterable[str]) -> int | None:
    """The first ``...Z`` stamp of a job log (epoch us), where its output begins."""
    for line in lines:
        m = Z_STAMP.match(line)
        if m and (got := parse_iso(m.group(1), _UTC)) and in_range(got[0]):
            return got[0]
    return None


def job_starts(text: str, path: str) -> tuple[dict[str, int], list[int]]:
    """First start of each job in a sacct dump, its local wall time read as UTC; and
    every start and end time (the span the dump's zone-less times cover)."""
    fp = sacct.parse(text, ParseContext(path=path, tz="UTC"))
    starts: dict[str, int] = {}
    times: list[int] = []
    for e in fp.events:
        start, job = e.attrs.get("start"), e.job_id
        if e.kind != "job_record":
            continue
        times += [v for k in ("start", "end") if isinstance(v := e.attrs.get(k), int)]
        if isinstance(start, int) and job:
            starts[job] = min(start, starts.get(job, start))
    return starts, times


@dataclass
class Evidence:
    """Observations gathered from a corpus, and whether it has zone-less times at all."""

    observations: list[Observation]
    zoneless: bool  # files whose times carry no zone (sacct, syslog, dmesg -T, ...)
    # first and last sacct Start/End (local wall time read as UTC): the span zone-less
    # times cover, which the zone must read unambiguously
    window: tuple[int, int] | None = None


def _spread(items: list, n: int) -> list:
    """At most ``n`` of ``items``, evenly spaced (the first and the last included)."""
    if len(items) <= n:
        return items
    step = (len(items) - 1) / (n - 1)
    return [items[round(i * step)] for i in range(n)]


def _hosts_of(logs: list[str], n: int) -> list[str]:
    """:data:`HOSTS_PER_JOB` of one job's logs, a different choice for the ``n``-th job:
    one host whose clock is off is outvoted in its hour, and no host is always read."""
    k = min(HOSTS_PER_JOB, len(logs))
    return sorted({logs[(n + j * len(logs) // k) % len(logs)] for j in range(k)})


def _head(path: str, n: int) -> bytes:
    """The first ``n`` bytes of a file (local, or through Beam's filesystems)."""
    if "://" in path:
        return read_bytes(path, n)[0]
    with Path(path).open("rb") as f:
        return f.read(n)


def _gunzip_head(data: bytes, n: int) -> bytes:
    """The first ``n`` bytes of the gzip stream ``data`` decompresses to, as
    :func:`~faultline.pipeline.inflate.gunzip` ``(data, n)`` gives them, without
    decompressing what lies beyond them (that call inflates its whole first input piece,
    up to 1 MB out, for the 40 lines used here). A stream whose first member ends
    sooner with more after it, or that is corrupt within those bytes, is left to
    ``gunzip`` itself. (A stream corrupt only past them keeps them here, where ``gunzip``
    drops the whole 64 KB input piece the corruption is in: sound lines, never others.)"""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, n)
    except zlib.error:
        return gunzip(data, n)[0]
    if len(out) < n and d.eof and d.unused_data:
        return gunzip(data, n)[0]
    return out


def _chunks(path: str, tail: bool) -> list[list[str]]:
    """Lines of a file's head (and, for a plain local file, its tail)."""
    try:
        data = _head(path, CHUNK * (8 if path.endswith(".gz") else 1))
        out = []
        if data[:2] == b"\x1f\x8b":
            data = _gunzip_head(data, CHUNK)
        out.append(head_lines(data, LINES_PER_CHUNK))
        if tail and "://" not in path and not path.endswith(".gz"):
            with Path(path).open("rb") as f:
                size = f.seek(0, 2)
                if size > 2 * CHUNK:
                    f.seek(size - CHUNK)
                    out.append(tail_lines(f.read(CHUNK), LINES_PER_CHUNK))
        return out
    except OSError:  # vanished or unreadable since discovery: the parse says so
        return []


def gather(paths: list[str], hints: Sequence[str | None] | None = None) -> Evidence:
    """Observations from a spread sample of ``paths`` (see the module docstring);
    ``hints``: their :func:`~faultline.pipeline.sniff.path_hint`, when the caller has
    them already."""
    obs: list[Observation] = []
    zoneless = False
    starts: dict[str, int] = {}
    span: tuple[int, int] | None = None  # first and last sacct Start/End
    kernel: list[str] = []
    hints = path_hints(paths) if hints is None else hints
    jobs = _job_logs(paths, hints)  # job id -> its job logs (one per host)
    for path, hint in zip(paths, hints, strict=True):
        if hint in ZONELESS_HINTS:
            zoneless = True
        if hint == "sacct":
            for lines in _chunks_whole(path):
                found, times = job_starts("\n".join(lines), path)
                for job, t in found.items():
                    starts[job] = min(t, starts.get(job, t))
                if times:
                    lo, hi = min(times), max(times)
                    span = (lo, hi) if span is None else (min(span[0], lo), max(span[1], hi))
        elif hint == "kernel":
            kernel.append(path)
    chunks = [c for path in _spread(sorted(kernel), MAX_FILES) for c in _chunks(path, True)]
    for lines, found in zip(chunks, offsets_many(chunks), strict=True):
        obs += found
        if lines and not found and not any(_RFC3339_HEAD.match(ln) for ln in lines):
            zoneless = True  # RFC 3164 syslog, dmesg -T
    ordered = sorted(jobs, key=lambda j: (starts.get(j, 0), j))
    logs = [(job, c) for n, job in enumerate(_spread(ordered, MAX_FILES))
            for path in _hosts_of(sorted(jobs[job]), n) for c in _chunks(path, tail=False)]
    for (job, lines), pairing in zip(logs, maybe_paired([c for _, c in logs]), strict=True):
        obs += paired_in(pairing, group=job)
        first = first_collector_stamp(lines)
        if first is not None and job in starts:
            obs.append(Observation(first, (starts[job] - first) / _US,
                                   "job start", group=job))
    return Evidence(obs, zoneless, span)


def _job_logs(paths: list[str], hints: Sequence[str | None]) -> dict[str, list[str]]:
    """The job logs of ``paths`` (hint ``job``, but a trainer's ``train*`` log) by
    their job (:func:`path_job_ids`)."""
    logs = [p for p, h in zip(paths, hints, strict=True)
            if h == "job" and not p.rpartition("/")[2].startswith("train")]
    jobs: dict[str, list[str]] = {}
    for path, job in zip(logs, path_job_ids(logs), strict=True):
        if job:
            jobs.setdefault(job, []).append(path)
    return jobs


def _chunks_whole(path: str) -> list[list[str]]:
    """A sacct dump's lines, whole (it is small, and every job's start counts)."""
    try:
        data, _, _ = read_bytes(path)
    except OSError:
        return []
    if data[:2] == b"\x1f\x8b":
        data, _ = gunzip(data)
    return [split_lines(decode(data))]


def per_kind(obs: list[Observation], window: tuple[int, int] | None
             ) -> list[tuple[str, str]]:
    """(kind, zone) for each kind of evidence that names a zone on its own: when the
    kinds disagree, which zone each source is in (sacct's Start is the controller's
    clock, RFC 3339 offsets the hosts' syslog)."""
    out = []
    for kind in KIND_WORDS:
        fit = infer_zone([o for o in obs if o.kind == kind], window)
        if fit.status == "inferred" and fit.zone is not None:
            out.append((kind, fit.zone))
    return out


@dataclass(frozen=True)
class ZoneDecision:
    """The zone ingest reads zone-less times in, and what to tell the user."""

    zone: str
    how: str  # "given", "inferred", "assumed": recorded in files.parsed_with
    note: str  # for the summary line: "zone America/Los_Angeles inferred from ..."
    warning: str | None = None  # --tz given against the evidence
    error: str | None = None  # undecidable: exit 2 before writing anything
    fit: ZoneFit | None = None


def decide_zone(paths: list[str], tz: str | None,
                window: tuple[int, int] | None = None,
                hints: Sequence[str | None] | None = None) -> ZoneDecision:
    """``--tz`` when given (warning when the evidence says otherwise), else the zone the
    evidence names, else UTC when there is no evidence; an error when the evidence
    is ambiguous or contradicts itself and the corpus has zone-less times (``hints``:
    as :func:`gather` takes them)."""
    if tz is not None:
        zone = normalize_zone(tz)
        ev = gather(paths, hints)
        fit = infer_zone(ev.observations, window or ev.window)
        bad, total = agreement(ev.observations, zone)
        warning = None
        if total and bad > WARN_SHARE * total and fit.status == "inferred" \
                and fit.zone is not None and fit.zone != zone:
            warning = (f"--tz {zone} disagrees with {bad} of {total} hours of evidence "
                       f"({fit.evidence_words()}), which point to {fit.zone}")
        return ZoneDecision(zone, "given", f"zone {zone} (--tz)", warning, fit=fit)
    ev = gather(paths, hints)
    fit = infer_zone(ev.observations, window or ev.window)
    if fit.status == "inferred" and fit.zone is not None:
        also = f"; {len(fit.candidates) - 1} other zone names read it alike" \
            if len(fit.candidates) > 1 else ""
        return ZoneDecision(fit.zone, "inferred", f"zone {fit.zone} inferred from "
                            f"{fit.evidence_words()}{also}", fit=fit)
    if fit.status == "none" or not ev.zoneless:
        return ZoneDecision("UTC", "assumed", "zone-less times read as UTC (assumed: "
                            "no time in the corpus carries a zone to check against)"
                            if fit.status == "none" else "zone UTC (assumed: no times "
                            "without a zone)", fit=fit)
    if fit.status == "ambiguous":
        why = (f"times without a zone could be in any of {', '.join(fit.readings)}, "
               f"which differ within the corpus's period (offsets seen: "
               f"{fit.offsets_words()}, from {fit.evidence_words()})")
    else:
        why = (f"no single zone fits the offsets seen ({fit.offsets_words()}, from "
               f"{fit.evidence_words()}): hosts in several zones, or clocks off"
               + "".join(f"; {KIND_WORDS[k]} alone point to {z}"
                         for k, z in per_kind(ev.observations, window or ev.window)))
    return ZoneDecision("UTC", "assumed", "", error=f"{why}; pass --tz ZONE", fit=fit)


