"""The pre-pass: the few corpus-wide facts a parser needs before it can read a line right.

It runs on the driver before the parse: one read of the job records (sacct, slurmctld,
hosts.csv, inside archives too) and of the heads of a sample of job logs. What it finds
travels to the workers in :class:`~faultline.pipeline.settings.IngestSettings`; the zone
of zone-less times is decided beside it (:mod:`faultline.pipeline.tzevidence`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from faultline.pipeline import bundles, hostpath
from faultline.pipeline.fileread import read_bytes
from faultline.pipeline.inflate import gunzip
from faultline.pipeline.parsers import hosts, joblog, sacct, slurmctld
from faultline.pipeline.records import ParseContext
from faultline.pipeline.sniff import path_hint, path_hints
from faultline.pipeline.text import decode

_RECORDS = {"sacct": sacct.parse, "slurmctld": slurmctld.parse, "hosts": hosts.parse}
# Job logs whose NCCL lines are read for host names: enough to meet every host of a
# large job (each log names its own host), few enough to cost a fraction of a second.
NCCL_HOST_FILES = 512
NCCL_HEAD_BYTES = 1 << 15


@dataclass(frozen=True)
class CorpusFacts:
    """What the pre-pass learns from the whole corpus before any file is parsed."""

    window: tuple[int, int] | None  # first and last time in the job records
    jobs: dict[str, tuple[int, int]]  # job id -> (start, end) from sacct
    hosts: frozenset[str]  # host names sacct, hosts.csv and NCCL lines know


def prepass(paths: list[str], tz: str
            ) -> tuple[tuple[int, int] | None, dict[str, tuple[int, int]]]:
    """The corpus window and each job's (start, end) (see :func:`corpus_facts`)."""
    facts = corpus_facts(paths, tz)
    return facts.window, facts.jobs


def corpus_facts(paths: list[str], tz: str,
                 hints: Sequence[str | None] | None = None) -> CorpusFacts:
    """One read of the job records (sacct, slurmctld, hosts.csv, inside archives too):
    the corpus window (the year of syslog lines), each job's (start, end) (a requeued
    job: its first start, last end; a running one ends at the window's end: what job
    logs without a collector stamp are timed by), and the host names they and the
    NCCL lines of a sample of job logs know (a path component naming one gives a file
    its host, :mod:`faultline.pipeline.hostpath`). ``hints``: the paths'
    :func:`~faultline.pipeline.sniff.path_hint`, when the caller has them already."""
    hints = path_hints(paths) if hints is None else hints
    lo = hi = None
    jobs: dict[str, list[int | None]] = {}
    node_lists: list[str] = []
    names: list[str] = []
    for outer, outer_hint in zip(paths, hints, strict=True):
        if outer_hint not in _RECORDS and not outer.lower().endswith(bundles.SUFFIXES):
            continue  # neither job records nor, by its name, an archive that may hold some
        try:
            whole, _, _ = read_bytes(outer)
        except OSError:  # vanished or unreadable since discovery: the parse says so
            continue
        for path, data in bundles.with_members(outer, whole):
            hint = path_hint(path) or ""
            parser = _RECORDS.get(hint)
            if parser is None:
                continue
            if data[:2] == b"\x1f\x8b":
                data, _ = gunzip(data)
            fp = parser(decode(data), ParseContext(path=path, tz=tz))
            if hint == "hosts":
                names += [e.host for e in fp.events if e.host]
                continue
            node_lists += [n for e in fp.events if isinstance(n := e.attrs.get("nodelist"), str)]
            times = [e.ts for e in fp.events if e.ts is not None]
            times += [v for e in fp.events for k in ("start", "end")
                      if isinstance(v := e.attrs.get(k), int)]
            if times:
                lo = min(times) if lo is None else min(lo, *times)
                hi = max(times) if hi is None else max(hi, *times)
            for e in fp.events:
                start, end = e.attrs.get("start"), e.attrs.get("end")
                if e.kind != "job_record" or not e.job_id or not isinstance(start, int):
                    continue
                cur = jobs.setdefault(str(e.job_id), [start, end])
                cur[0] = min(cur[0], start)
                if cur[1] is not None:
                    cur[1] = None if end is None else max(cur[1], end)
    names += _nccl_hosts([p for p, h in zip(paths, hints, strict=True) if h == "job"])
    return CorpusFacts((lo, hi) if lo is not None else None,
                       {j: (s, e if e is not None else max(s, hi or s))
                        for j, (s, e) in jobs.items()},
                       hostpath.known_hosts(node_lists, names))


def _nccl_hosts(logs: list[str]) -> list[str]:
    """Host names NCCL's lines give (``node0042:2231:2290 [3] NCCL INFO ...``), from the
    heads of up to :data:`NCCL_HOST_FILES` of the job logs ``logs`` (the corpus's, in
    its order), spread over them: a cluster without sacct or hosts.csv still has known
    hosts for the path to name."""
    step = max(1, len(logs) // NCCL_HOST_FILES)
    lines: list[str] = []
    for path in logs[::step][:NCCL_HOST_FILES]:
        try:
            data, _, _ = read_bytes(path, NCCL_HEAD_BYTES)
        except OSError:
            continue
        if data[:2] == b"\x1f\x8b":
            data, _ = gunzip(data, NCCL_HEAD_BYTES)
        lines += [line for line in decode(data).splitlines() if "NCCL INFO" in line]
    return sorted(h for h in nccl_prefix_hosts(lines) if not h[0].isdigit())


def nccl_prefix_hosts(lines: list[str]) -> set[str]:
    """The host of each line's NCCL prefix: ``NCCL_PREFIX_RE.search(line, 0, 400)``'s
    first group, for the lines it matches. One vectorized pass (polars, Rust's regex)
    over the lines both engines read alike: ASCII without ``\\x1f`` (the one ASCII
    character Python's ``\\s`` matches and Rust's does not, that ``str.splitlines``
    leaves in a line); Python's search for the others. A sample of job logs has some
    20,000 such lines: a third of the pre-pass one by one."""
    rx = joblog.NCCL_PREFIX_RE
    alike: list[str] = []
    found: set[str] = set()
    for line in lines:
        if line.isascii() and "\x1f" not in line:
            alike.append(line)
        elif m := rx.search(line, 0, 400):
            found.add(m.group(1))
    if alike:
        hosts = pl.Series(alike, dtype=pl.String).str.slice(0, 400).str.extract(rx.pattern, 1)
        found.update(hosts.drop_nulls().unique().to_list())
    return found
