"""Files' bytes to their ``files``, ``events`` and ``rejects`` rows.

:func:`parse_batch` is the unit of work the Beam transforms distribute: pure (bytes and
settings in, Arrow tables out), so it is tested without a runner and behaves the same on
every one. Reading the bytes is the caller's job.

Speed: a real corpus is about a million small files, so nothing is paid per file that
can be paid per batch. The files of the high-volume sources (job, trainer, kernel) are
parsed together by their parser's ``parse_many`` (one vectorized pass per batch, see
:mod:`faultline.pipeline.linebatch`), the rows of all files are gathered column by column
and each Arrow table is built once per batch; the events a parser already gives as
columns (``FileParse.columns``: job-log lanes, ``train_step``) join it as columns
(:mod:`faultline.pipeline.eventcols`). :func:`parse_file` is a batch of one: the
rows of a file never depend on the other files of its batch (``tests/test_fileparse.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import gc
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

import numpy as np
import pyarrow as pa

from faultline.pipeline import bundles, eventcols, hostpath, resume
from faultline.pipeline.inflate import MAX_LINE_BYTES, cap_lines, gunzip
from faultline.pipeline.linebatch import FileLines
from faultline.pipeline.parsers import (
    flight_recorder,
    hosts,
    inventory,
    joblog,
    nvbugreport,
    nvsmi,
    redfish,
    sacct,
    slurm_nodes,
    slurmctld,
    slurmd,
    structured,
    trainer,
)
from faultline.pipeline.records import FileParse, ParseContext, Reject
from faultline.pipeline.settings import IngestSettings
from faultline.pipeline.sniff import SLURM_OUT_RE, sniff
from faultline.pipeline.text import decode, split_lines
from faultline.pipeline.timeutil import choose_year
from faultline.schemas.tables import EVENTS, FILE_OFFSETS, FILES, REJECTS

BATCH_PARSERS = {
    "kernel": structured.parse_many,  # plain kernel logs, and journal / JSON lines
    "job": functools.partial(joblog.parse_many, columnar=True),  # lane events as columns
    "trainer": functools.partial(trainer.parse_many, columnar=True),  # train_step too
}
PARSERS = {
    "kernel": structured.parse,
    "sel": redfish.parse_any,  # ipmitool / ipmi-sel text, or Redfish LogEntry JSON
    "inventory": inventory.parse,
    "job": joblog.parse,
    "trainer": trainer.parse,
    "sacct": sacct.parse,
    "slurmctld": slurmctld.parse,
    "slurmd": slurmd.parse,
    "slurm_nodes": slurm_nodes.parse,  # sinfo -R / sinfo -o / scontrol show node
    "hosts": hosts.parse,
    "nvidia_smi": nvsmi.parse,
    "nvidia_bug_report": nvbugreport.parse,
}
SNIFF_BYTES = 1 << 16
# Lines of a file of no known source kept in ``rejects`` (see unknown_file).
UNKNOWN_REJECT_SAMPLE = 20
# Lines parsed together by one parse_many call: enough to pay polars' fixed cost once
# for hundreds of small files, few enough to bound a batch's memory (a batch's part is
# at most 64 MB as stored: transforms.MAX_PARSE_BYTES). CPU per llama3 job log, 8,192
# of them in batches of 1,024: 153 us at 1 << 15, 148 at 1 << 16, 138-141 at 1 << 17,
# 141 at 1 << 18.
MAX_BATCH_LINES = 1 << 17
# Sources whose batch parser takes a large file as its text (split in polars: see
# faultline.pipeline.linebatch), and the characters of a typical line of them.
TEXT_SOURCES = frozenset({"kernel"})
_CHARS_PER_LINE = 100
# An RFC 3164 line's head: the month and day of its stamp. Looked for at the text's start
# (``_RFC3164_FIRST.match``), then after a newline: a pattern that opens with a literal
# lets ``re`` skip from newline to newline, where ``^`` with ``re.M`` has it try every
# character (0.094 -> 0.021 CPU s on small x4's 600 kernel logs); the same first match.
_RFC3164_MONTH_DAY = r"\[?(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) *(\d{1,2}) "
_RFC3164_FIRST = re.compile(_RFC3164_MONTH_DAY)
_RFC3164_LATER = re.compile("\n" + _RFC3164_MONTH_DAY)
_MONTHS = {m: i + 1 for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"))}


@dataclass
class ParsedFile:
    """What one file contributes: one ``files`` row and its events and rejects."""

    files: pa.Table
    events: pa.Table
    rejects: pa.Table
    # where a re-run may continue each file (resume.py), and the files this batch
    # continued: (path, restart line) whose stored rows before that line stay
    file_offsets: pa.Table | None = None
    resumed: pa.Table | None = None


@functools.lru_cache(maxsize=4096)
def _dir_parts(directory: str) -> tuple[str, ...]:
    return PurePosixPath(directory).parts


def context_from_path(path: str, tz: str, settings: IngestSettings | None = None
                      ) -> ParseContext:
    """Host and job id from the corpus layout (hosts/<host>/..., jobs/<id>/<host>.log,
    <host>/var/log/...), a known host named by the path, or the user's pattern; see
    :mod:`faultline.pipeline.hostpath`."""
    host, job_id, host_from = _path_facts(path, settings)
    return ParseContext(path=path, host=host, job_id=job_id, tz=tz, host_from=host_from,
                        json_fields=settings.json_fields if settings is not None else ())


def _path_facts(path: str, settings: IngestSettings | None
                ) -> tuple[str | None, str | None, str]:
    """``(host, job_id, host_from)`` of :func:`context_from_path`."""
    head, sep, name = path.rpartition("/")
    if name and name != ".":  # the directory's parts, then the name (as PurePosixPath)
        parts = (*_dir_parts(path[:len(head) + len(sep)]), name)
    else:
        parts = PurePosixPath(path).parts
    if settings is None:
        host, job_id, host_from = hostpath.resolve(path, parts)
    else:
        host, job_id, host_from = hostpath.resolve(path, parts, settings.known_hosts,
                                                   settings.host_from_path)
    if name.startswith("slurm-") and (m := SLURM_OUT_RE.search(name)):
        job_id = job_id or m.group(1)  # slurm-<jobid>.out, anywhere: one file for all
        host, host_from = None, "none"  # its hosts (each line's host is its rank's: joblog)
    return host, job_id, host_from


def path_job_id(path: str) -> str | None:
    """The job id :func:`context_from_path` gives ``path`` (neither known hosts nor a
    ``--host-from-path`` pattern change it), without building the context: the zone
    decision groups every job log of the corpus by job (100k paths: 0.4 s as contexts).
    A job id of the ``jobs/<id>/`` layout depends only on the directory, so it is
    worked out once per directory (:func:`_dir_job`)."""
    head, sep, name = path.rpartition("/")
    if not name or name in (".", "jobs"):  # the name takes part in the layout: as it does
        return _path_facts(path, None)[1]
    job_id = _dir_job(path[:len(head) + len(sep)])
    if name.startswith("slurm-") and (m := SLURM_OUT_RE.search(name)):
        job_id = job_id or m.group(1)
    return job_id


def path_job_ids(paths: Iterable[str]) -> list[str | None]:
    """:func:`path_job_id` of each path, worked out once per directory: it depends on
    the directory alone for any file name but an empty one, ``.``, ``jobs`` and
    ``slurm-*`` (the zone decision's 932k job logs of llama3: 1.5 s one call a path)."""
    by_dir: dict[str, str | None] = {}
    out: list[str | None] = []
    for path in paths:
        head, _, name = path.rpartition("/")
        if not name or name in (".", "jobs") or name.startswith("slurm-"):
            out.append(path_job_id(path))
        elif head in by_dir:
            out.append(by_dir[head])
        else:
            out.append(by_dir.setdefault(head, path_job_id(path)))
    return out


@functools.lru_cache(maxsize=4096)
def _dir_job(directory: str) -> str | None:
    """The job id :func:`hostpath.layout_host` reads from the parts of a path in
    ``directory`` whose file name is not ``jobs``: the component after the last
    ``jobs`` directory, if another directory follows it."""
    return hostpath.layout_host((*_dir_parts(directory), "file"))[1]


def _source_context(path: str, source: str, text: str, settings: IngestSettings,
                    mtime: float | None) -> ParseContext:
    """A sniffed file's context: :func:`context_from_path`'s, with the syslog year and
    the site's rules for a kernel log or bug report, and the job's window for a job log
    of a job sacct knows. Built once (``dataclasses.replace`` of a frozen context cost
    more than the rest of it, once per file)."""
    host, job_id, host_from = _path_facts(path, settings)
    year, rules, window = None, (), None
    if source in ("kernel", "nvidia_bug_report"):
        year, rules = syslog_year(text, settings, mtime), settings.rule_texts
    elif source == "job" and job_id is not None and settings.job_windows:
        window = settings.job_windows.get(job_id)
        if window is not None:
            year = settings.year
    return ParseContext(path=path, host=host, job_id=job_id, tz=settings.tz, year=year,
                        rules=rules, job_window=window, host_from=host_from,
                        json_fields=settings.json_fields)


def syslog_year(text: str, settings: IngestSettings, mtime: float | None) -> int | None:
    """The year of a file's first RFC 3164 line: --year, else the corpus window from the
    job records, else the file's modification time (a log's last write is its end)."""
    if settings.year is not None:
        return settings.year
    m = (_RFC3164_FIRST.match(text, 0, SNIFF_BYTES)
         or _RFC3164_LATER.search(text, 0, SNIFF_BYTES))
    if not m:
        return None
    month, day = _MONTHS[m.group(1)], int(m.group(2))
    if settings.window is not None:
        return choose_year(month, day, *settings.window)
    if mtime is not None:
        end = dt.datetime.fromtimestamp(mtime, dt.UTC)
        return end.year if (month, day) <= (end.month, end.day) else end.year - 1
    return None


def parse_file(path: str, data: bytes, settings: IngestSettings,
               mtime: float | None = None) -> ParsedFile:
    """Parse one file's bytes as stored (gzip or not) into Arrow tables."""
    return parse_batch([(path, data, mtime)], settings)


BatchItem = (tuple[str, bytes, float | None] | tuple[str, bytes, float | None, str | None]
             | tuple[str, bytes, float | None, None, dict])


def parse_batch(items: Iterable[BatchItem], settings: IngestSettings) -> ParsedFile:
    """Parse a batch of files, each ``(path, bytes as stored, mtime)``, into one Arrow
    table per output table; the rows are exactly those :func:`parse_file` gives for
    each file alone.

    An optional fourth item overrides the file's ``problem`` (an unreadable file is
    given as empty bytes and its reason). Files of the high-volume sources (kernel,
    job, trainer) are parsed together, source by source, by the parser's
    ``parse_many``: each vectorized pass runs once over the lines of all of them, up to
    :data:`MAX_BATCH_LINES` lines at a time. ``items`` may be an iterator: files are
    read as the batch goes, and each one's bytes and lines let go once parsed, so a
    batch of large files does not stay in memory at once.

    Runs with the cyclic garbage collector paused (:func:`_collector_paused`).
    """
    with _collector_paused():
        return _parse_batch(items, settings)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for one batch.

    A batch allocates hundreds of thousands of small containers (events, their attrs,
    column lists) that form no reference cycles: reference counting frees them all.
    The cyclic collector still runs every 700 allocations and rescans the young ones,
    and now and then everything alive in the worker: about a tenth of the parse's CPU
    time on the ``small`` preset (bench/RESULTS.md). Paused for the batch only, and
    restored to what it was (a collection then finds any cycle as usual)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _parse_batch(items: Iterable[BatchItem], settings: IngestSettings) -> ParsedFile:
    """The body of :func:`parse_batch`."""
    files: list[_File] = []
    results: list[FileParse | None] = []
    items = _with_members(items)
    pending: dict[str, list[int]] = {}  # per batched source: files read, not parsed yet
    pending_lines: dict[str, int] = {}

    def flush(source: str) -> None:
        chunk = pending.pop(source)
        pending_lines.pop(source)
        many = BATCH_PARSERS[source]([(files[j].lines or [], files[j].ctx) for j in chunk])
        for j, fp in zip(chunk, many, strict=True):
            results[j] = fp
            files[j].lines = None

    for item in items:
        f = _prepare_tail(item, settings) if len(item) > 4 else None
        f = f or _prepare(item[:3] if len(item) > 4 else item, settings)
        files.append(f)
        results.append(None)
        if f.source in BATCH_PARSERS:
            pending.setdefault(f.source, []).append(len(files) - 1)
            pending_lines[f.source] = pending_lines.get(f.source, 0) + _line_weight(f.lines)
            if pending_lines[f.source] >= MAX_BATCH_LINES:
                flush(f.source)
            continue
        if f.source == "bundle":  # its members follow as files of their own
            results[-1] = FileParse(lines=0, shape=f.shape)
        elif f.source == "flight_recorder":  # binary: one line, its event or reject
            results[-1] = flight_recorder.parse(f.data or b"", f.ctx)
            f.data = None
        elif f.source in PARSERS:
            results[-1] = PARSERS[f.source](f.text, f.ctx)
        else:
            results[-1] = unknown_file(f.text)
        f.text = ""
    for source in list(pending):
        flush(source)
    rows = _Rows(settings.fingerprint)
    checked: list[tuple[FileParse, int | None]] = []
    for f, fp in zip(files, results, strict=True):
        assert fp is not None
        last = None
        if f.resume is not None:  # a grown file's window: rows of its new lines only
            r = f.resume
            fp.events, fp.rejects = resume.shift(fp.events, fp.rejects, f.first, r.restart)
            fp.columns = resume.shift_columns(fp.columns, f.first, r.restart)
            fp.lines, fp.shape, last = f.total_lines, r.shape, r.prior_max_ts
        checked.append((fp, last))
    # a clock that goes backwards by more than a second is kept and flagged (``last``:
    # the largest time before a grown file's window)
    eventcols.flag_clock_backwards(checked)
    for f, fp in zip(files, results, strict=True):
        assert fp is not None
        rows.add(f, fp)
    return rows.tables()


def _line_weight(lines: FileLines | None) -> int:
    """A pending file's share of :data:`MAX_BATCH_LINES`: its lines, or for a text not
    split yet, an estimate from its length (counting would cost a pass over it)."""
    if isinstance(lines, str):
        return len(lines) // _CHARS_PER_LINE + 1
    return len(lines or ())


def unknown_file(text: str) -> FileParse:
    """A file of no known source: every line is rejected, one reason for all, and only
    the first :data:`UNKNOWN_REJECT_SAMPLE` go to ``rejects`` (``files.reject_lines``
    counts them all). A directory of documentation or binaries given by mistake would
    otherwise copy every one of its lines into the database."""
    lines = split_lines(text)
    sample = [Reject.of(i, "unrecognized file format", ln)
              for i, ln in enumerate(lines[:UNKNOWN_REJECT_SAMPLE], 1)]
    return FileParse(lines=len(lines), rejects=sample,
                     unsampled_rejects=len(lines) - len(sample))


@dataclass(slots=True)
class _File:
    """One file of a batch, read and sniffed, before its parser runs."""

    path: str
    sha: str
    nbytes: int
    mtime: float | None
    compressed: bool
    problem: str | None
    source: str
    ctx: ParseContext
    text: str  # for the per-file parsers ("" once parsed, or for a batched source)
    # for the batched parsers, its lines, or its text for a source of TEXT_SOURCES
    # (None once parsed, or for the other parsers)
    lines: FileLines | None
    shape: str | None = None  # an archive's kind (zip, tar)
    data: bytes | None = None  # a binary dump's bytes (flight_recorder), never decoded
    read_to: int = 0  # bytes up to the last line end, and their sha256 (file_offsets)
    prefix_sha: str | None = None
    resume: resume.Resume | None = None  # a grown file parsed from a window on
    first: int = 1  # 1-based line number of lines[0] (a window's first line)
    total_lines: int = 0  # a window's file's lines


def _with_members(items: Iterable[BatchItem]) -> Iterator[BatchItem]:
    """Every item, and after an archive its members (:mod:`faultline.pipeline.bundles`)
    followed by the archive itself with what went wrong reading it."""
    for item in items:
        if (len(item) > 3 and item[3] is not None) or not bundles.archive_kind(
                item[0], item[1]):
            yield item
            continue
        problems: list[str] = []
        yield from bundles.expand(item[0], item[1], problems)
        yield item[0], item[1], item[2], "; ".join(problems) or None


def _prepare_tail(item: BatchItem, settings: IngestSettings) -> _File | None:
    """A grown file's window (:mod:`faultline.pipeline.resume`), or None when it
    must be read whole. Its source, host and year are decided as :func:`_prepare`
    decides them for the whole file."""
    path, data, mtime = item[0], item[1], item[2]
    r = resume.Resume.from_json(item[4])
    if len(data) < r.read_to or data[:2] == b"\x1f\x8b":
        return None
    head = decode(data[:4 * SNIFF_BYTES + 4])
    if len(data) <= SNIFF_BYTES:
        head_lines = split_lines(head)
    elif len(head) > SNIFF_BYTES:
        head_lines = split_lines(head[:SNIFF_BYTES])
    else:  # many multi-byte characters: the head's lines are not known cheaply
        return None
    if sniff(head_lines, path) != r.source:
        return None
    ctx = _source_context(path, r.source, head, settings, mtime)  # kernel or job
    t = resume.tail(data, r, ctx.year, ctx.zone)
    if t is None:
        return None
    if t.year is not None:
        ctx = dataclasses.replace(ctx, year=t.year)
    read_to, prefix, sha = resume.offsets(data)
    return _File(path, sha, len(data), mtime, False, None, r.source, ctx, "", t.lines,
                 read_to=read_to, prefix_sha=prefix, resume=r, first=t.first,
                 total_lines=t.total_lines)


def _prepare(item: BatchItem, settings: IngestSettings) -> _File:
    path, data, mtime = item[0], item[1], item[2]
    compressed = data[:2] == b"\x1f\x8b"
    read_to, prefix = 0, None
    if compressed:
        sha = hashlib.sha256(data).hexdigest()
    else:  # one pass hashes the whole file and the part up to its last line end
        read_to, prefix, sha = resume.offsets(data)
    problem = None
    kind = bundles.archive_kind(path, data) if len(item) < 4 or item[3] is None else None
    if kind is not None:  # read member by member by _with_members, never as text
        return _File(path, sha, len(data), mtime, compressed, item[3] if len(item) > 3
                     else None, "bundle", context_from_path(path, settings.tz), "", None,
                     kind)
    raw = data
    if compressed:
        raw, problem = gunzip(data)
    if flight_recorder.looks_like_dump(raw):  # binary: never cut into lines or decoded
        return _File(path, sha, len(data), mtime, compressed, item[3] if len(item) > 3
                     else problem, "flight_recorder",
                     _dump_context(context_from_path(path, settings.tz, settings)), "", None,
                     None, raw)
    raw, cut = cap_lines(raw)
    if cut:
        problem = "; ".join(filter(None, (
            problem, f"{cut} line{'s' if cut > 1 else ''} over {MAX_LINE_BYTES} bytes cut")))
    if len(item) > 3:
        problem = item[3]
    text = decode(raw)
    del raw
    lines = None
    if len(text) <= SNIFF_BYTES:  # the head is the whole file: split it once
        head = lines = split_lines(text)
    else:
        head = split_lines(text[:SNIFF_BYTES])
    source = sniff(head, path)
    ctx = _source_context(path, source, text, settings, mtime)
    if source in BATCH_PARSERS:  # these parsers read lines: keep one copy of the text
        if lines is None and source not in TEXT_SOURCES:
            lines = split_lines(text)
        return _File(path, sha, len(data), mtime, compressed, problem, source, ctx, "",
                     lines if lines is not None else text,
                     read_to=read_to, prefix_sha=prefix)
    return _File(path, sha, len(data), mtime, compressed, problem, source, ctx, text, None)


def _dump_context(ctx: ParseContext) -> ParseContext:
    host = flight_recorder.dump_host(ctx)
    return ctx if host == ctx.host else dataclasses.replace(
        ctx, host=host, host_from=ctx.host_from if host else "none")


def event_id(sha: str, line_no: int, ordinal: int) -> str:
    """Deterministic: the file's content hash, the line and the event's place on it."""
    return f"{sha[:20]}:{line_no}:{ordinal}"


# json.dumps(attrs, sort_keys=True, default=str) without building an encoder per call:
# CPython's C encoder, made once (checked against json.dumps; the Python one otherwise).
_JSON_ENCODER = json.JSONEncoder(sort_keys=True, default=str)


def _c_encoder() -> Callable[[object, int], list[str]] | None:
    try:
        enc = json.encoder.c_make_encoder(None, str, json.encoder.encode_basestring_ascii,
                                          None, ": ", ", ", True, False, True)
        probe = {"b": [1.5, None, True], "a": "é\n", "c": {"y": float("nan"), "x": 2}}
        if "".join(enc(probe, 0)) != json.dumps(probe, sort_keys=True, default=str):
            return None
    except (TypeError, AttributeError):  # no C accelerator, or another signature
        return None
    return enc


_C_ENCODE = _c_encoder()


def attrs_json(attrs: dict) -> str | None:
    """An event's attrs as stored: ``json.dumps(attrs, sort_keys=True, default=str)``."""
    if not attrs:
        return None
    if _C_ENCODE is not None:
        return "".join(_C_ENCODE(attrs, 0))
    return _JSON_ENCODER.encode(attrs)


def _host_from(f: _File, fp: FileParse) -> str:
    """``files.host_from``: how the path gave the host, else ``line`` when the file's
    events name their hosts, else ``none``."""
    columns = fp.columns if fp.columns is not None and fp.columns.height else None
    if f.ctx.host is not None or not (fp.events or columns is not None):
        return f.ctx.host_from
    if any(e.host for e in fp.events) or (
            columns is not None and columns["host"].null_count() < columns.height):
        return "line"
    return "none"


class _Rows:
    """The rows of a batch's three tables, column by column; Arrow tables built once."""

    def __init__(self, parsed_with: str) -> None:
        self.parsed_with = parsed_with
        self.files: dict[str, list] = {c: [] for c in FILES.column_names}
        self.events: dict[str, list] = {c: [] for c in EVENTS.column_names}
        self.rejects: dict[str, list] = {c: [] for c in REJECTS.column_names}
        self.offsets: dict[str, list] = {c: [] for c in FILE_OFFSETS.column_names}
        self.resumed: dict[str, list] = {"path": [], "restart": [], "from_path": []}
        self.event_file: list[int] = []  # per events row: its file's place in the batch
        self.lanes = eventcols.LaneParts()  # events kept as columns (FileParse.columns)

    def add(self, f: _File, fp: FileParse) -> None:
        event_lines, reject_lines = fp.event_lines, fp.reject_lines
        row = {
            "path": f.path, "sha256": f.sha, "source": f.source, "lines": fp.lines,
            "routine_lines": fp.lines - event_lines - reject_lines,
            "event_lines": event_lines, "reject_lines": reject_lines,
            "duplicate_of": None, "bytes": f.nbytes,
            "compressed": f.compressed, "host": f.ctx.host, "shape": fp.shape,
            "host_from": _host_from(f, fp),
            "problem": f.problem, "mtime": f.mtime, "parsed_with": self.parsed_with,
        }
        for c, values in self.files.items():
            values.append(row[c])
        if f.prefix_sha is not None and f.read_to and resume.keeps_offset(
                f.source, fp.shape, f.compressed, f.path, f.problem, f.ctx.host):
            self.offsets["path"].append(f.path)
            self.offsets["read_to"].append(f.read_to)
            self.offsets["prefix_sha256"].append(f.prefix_sha)
        if f.resume is not None:
            self.resumed["path"].append(f.path)
            self.resumed["restart"].append(f.resume.restart)
            self.resumed["from_path"].append(f.resume.from_path)
        if fp.events:
            self._add_events(f, fp)
        if fp.columns is not None and fp.columns.height:
            self.lanes.add(len(self.files["path"]) - 1, fp, f.path, f.sha, f.source)
        if fp.rejects:
            r = self.rejects
            n = len(fp.rejects)
            r["path"].extend([f.path] * n)
            r["line_no"].extend([x.line_no for x in fp.rejects])
            r["reason"].extend([x.reason for x in fp.rejects])
            r["raw"].extend([x.raw for x in fp.rejects])
            r["sha256"].extend([f.sha] * n)

    def _add_events(self, f: _File, fp: FileParse) -> None:
        c = self.events
        events = fp.events
        n = len(events)
        prefix = f.sha[:20]
        ordinal: dict[int, int] = {}
        if fp.shared_lines and fp.columns is not None and fp.columns.height:
            # a column event is its line's first
            taken = fp.columns["line_no"].to_numpy()
            lines = np.fromiter({e.line_no for e in events}, dtype=np.int64)
            at = np.minimum(np.searchsorted(taken, lines), len(taken) - 1)
            ordinal = dict.fromkeys(lines[taken[at] == lines].tolist(), 1)
        ids = []
        for e in events:
            k = ordinal.get(e.line_no, 0)
            ordinal[e.line_no] = k + 1
            ids.append(f"{prefix}:{e.line_no}:{k}")  # event_id(sha, line_no, k)
        c["event_id"].extend(ids)
        c["ts"].extend([e.ts for e in events])
        c["ts_quality"].extend([e.ts_quality for e in events])
        c["host"].extend([e.host for e in events])
        c["source"].extend([f.source] * n)
        c["kind"].extend([e.kind for e in events])
        c["xid"].extend([e.xid for e in events])
        c["gpu_index"].extend([None] * n)
        c["gpu_serial"].extend([None] * n)
        c["device"].extend([e.device for e in events])
        c["job_id"].extend([e.job_id for e in events])
        c["message"].extend([e.message for e in events])
        c["path"].extend([f.path] * n)
        c["line_no"].extend([e.line_no for e in events])
        c["line_end"].extend([e.line_end for e in events])
        c["sha256"].extend([f.sha] * n)
        c["rank"].extend([e.rank for e in events])
        c["attrs"].extend([attrs_json(e.attrs) for e in events])
        self.event_file.extend([len(self.files["path"]) - 1] * n)

    def tables(self) -> ParsedFile:
        events = pa.Table.from_pydict(self.events, schema=EVENTS.arrow_schema)
        if self.lanes.files:
            events = self.lanes.merge(events, self.event_file, len(self.files["path"]))
        return ParsedFile(
            files=pa.Table.from_pydict(self.files, schema=FILES.arrow_schema),
            events=events,
            rejects=pa.Table.from_pydict(self.rejects, schema=REJECTS.arrow_schema),
            file_offsets=pa.Table.from_pydict(self.offsets,
                                              schema=FILE_OFFSETS.arrow_schema),
            resumed=pa.Table.from_pydict(self.resumed, schema=RESUMED_SCHEMA),
        )


# Staging only (never a database table): the files a batch continued from a window.
RESUMED_SCHEMA = pa.schema([pa.field("path", pa.string(), nullable=False),
                            pa.field("restart", pa.int64(), nullable=False),
                            pa.field("from_path", pa.string())])
