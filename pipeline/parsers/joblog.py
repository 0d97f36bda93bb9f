"""Job logs: torchrun output of one host's ranks (NCCL, PyTorch c10d, elastic, Slurm).

Shape (see ``docs/corpus.md``)::

    2024-07-01T12:00:00.123456Z node0042:2231:2290 [3] NCCL INFO Bootstrap : Using eth0:10.1.2.42<0>
    2024-07-01T12:10:00.523456Z [rank27]:[E701 12:10:00.523 ProcessGroupNCCL.cpp:632] [Rank 27] ...
    [rank3]:   File "/train.py", line 10, in <module>         (no stamp: inherits the time above)

Speed: a real corpus holds about a million of these files, nearly all lines routine. The
lines (with :func:`parse_many`, those of a whole batch of files) become one polars Series
and a single vectorized ``str.contains`` of :data:`CANDIDATE_RE` picks the few lines
worth reading; Python runs on those only. A
candidate without a stamp of its own looks back to the nearest stamped line (each line is
looked at most once per file), so inherited times never cost a pass over every line.

Rules are data: :data:`RULES` is an ordered table of ``(rule_id, kind, pattern)``; the
first rule whose pattern matches a line decides its kind (a traceback is handled apart,
as a block). Lines inside a traceback may also give their own event (the exception line
``RuntimeError: CUDA error: ...`` is both part of the ``traceback`` event and a
``cuda_error``); indented traceback body lines never do.

Job logs never reject a line: anything that is not a signal is routine output.

This module is the parser; what it reads with lives beside it: a line's prefixes in
:mod:`...joblog_lines`, the candidate selection, the rules and their attributes in
:mod:`...joblog_rules`, tracebacks in :mod:`...joblog_traceback` and the vectorized fast
lanes in :mod:`...joblog_lanes`. Their public names stay importable from here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

import numpy as np
import polars as pl

from faultline.pipeline.linebatch import LineBatch
from faultline.pipeline.parsers import joblog_lanes, jobout
from faultline.pipeline.parsers.jobclock import Clock, ForwardClock
from faultline.pipeline.parsers.joblog_lines import (  # noqa: F401 (this module's API)
    MESSAGE_LIMIT,
    NCCL_PREFIX_RE,
    PG_RANK_RE,
    RANK_PREFIX_RE,
    STAMP_RE,
    LineInfo,
    cap,
    line_info,
)
from faultline.pipeline.parsers.joblog_rules import (  # noqa: F401 (this module's API)
    _RULE_CHECKS,
    CANDIDATE_RE,
    CANDIDATE_TRIGGERS,
    RULES,
    Hit,
    _summary_context,
    classify,
)
from faultline.pipeline.parsers.joblog_traceback import (  # noqa: F401 (this module's API)
    FOREIGN_RUN_LIMIT,
    TRACEBACK_MAX_LINES,
    TRACEBACK_OPEN,
    TracebackBlock,
    collect_traceback,
    traceback_event,
)
from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent
from faultline.pipeline.text import split_lines
from faultline.pipeline.timeutil import in_range

# Below this many lines Python's ``re`` beats a polars call (whose fixed cost is ~50 us).
SMALL_FILE_LINES = 64


@functools.lru_cache(maxsize=16)
def _py_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def candidate_indices(lines: list[str], pattern: str) -> list[int]:
    """0-based indices of the lines matching ``pattern``: one vectorized polars pass
    (tiny files, below :data:`SMALL_FILE_LINES`, use the same regex in Python)."""
    if len(lines) < SMALL_FILE_LINES:
        search = _py_regex(pattern).search
        return [i for i, ln in enumerate(lines) if search(ln)]
    mask = pl.Series("line", lines, dtype=pl.String).str.contains(pattern)
    return mask.arg_true().to_list()



def _joblog_split(line: str) -> tuple[str | None, str]:
    info = line_info(line)
    return info.rank_key, info.body


def _labelled_split(line: str) -> tuple[str | None, str]:
    """A labelled file's streams are its tasks' (and their ranks')."""
    info = line_info(line, labelled=True)
    return f"{info.label}/{info.rank_key}", info.body


# --- time ---------------------------------------------------------------------------------


def _collector_stamp(line: str) -> str | None:
    if not line[:1].isdigit():
        return None
    m = STAMP_RE.match(line)
    return m.group(1) if m else None


# --- the parser ----------------------------------------------------------------------------


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse one job log (see the module docstring)."""
    return parse_many([(split_lines(text), ctx)])[0]


def parse_many(files: Sequence[tuple[list[str], ParseContext]],
               columnar: bool = False) -> list[FileParse]:
    """Parse many job logs, given as their lines: the candidate selection runs once,
    vectorized, over the lines of all of them (see :mod:`faultline.pipeline.linebatch`);
    each file's result is what :func:`parse` gives for it alone.

    The lines a fast lane takes (:mod:`...joblog_lanes`: in a collector-stamped file
    with a host of its own) become events as columns; with ``columnar`` they stay
    columns (``FileParse.columns``, what :mod:`faultline.pipeline.fileparse` stores),
    else they join ``FileParse.events`` as the objects the general path would make."""
    batch = LineBatch([lines for lines, _ in files])
    if batch.total < SMALL_FILE_LINES:
        candidates = batch.match_indices(CANDIDATE_RE, SMALL_FILE_LINES)
        return [parse_lines(lines, ctx, cand)
                for (lines, ctx), cand in zip(files, candidates, strict=True)]
    hits = batch.series.str.contains(CANDIDATE_RE).arg_true().to_numpy()
    stamped = [jobout.has_collector_stamps(lines) for lines, _ in files]
    eligible = np.array([s and ctx.host is not None
                         for s, (_, ctx) in zip(stamped, files, strict=True)], dtype=bool)
    utc = np.array([ctx.tz == "UTC" for _, ctx in files], dtype=bool)
    frame = joblog_lanes.lane_frame(batch, hits, _RULE_CHECKS, eligible, utc,
                                    [ctx.tz for _, ctx in files])
    taken = batch.starts[frame["file"].to_numpy()] + frame["row"].to_numpy()
    candidates = batch.split_indices(np.setdiff1d(hits, taken, assume_unique=True))
    out: list[FileParse] = []
    inside: dict[int, set[int]] = {}
    for k, ((lines, ctx), cand) in enumerate(zip(files, candidates, strict=True)):
        if not cand and stamped[k]:  # the lanes took every candidate: nothing to read
            out.append(FileParse(lines=len(lines), shape="collector"))
            continue
        fp, in_traceback = _parse_lines(lines, ctx, cand, stamped[k])
        if in_traceback and eligible[k]:
            inside[k] = in_traceback
        out.append(fp)
    joblog_lanes.attach(frame, inside, out, [ctx for _, ctx in files], columnar)
    return out


def parse_lines(lines: list[str], ctx: ParseContext,
                candidates: Iterable[int] | None = None) -> FileParse:
    """Parse one job log's lines, every line the general (per-line) way;
    ``candidates`` are the 0-based indices of the lines matching :data:`CANDIDATE_RE`
    (computed here when not given).

    A file without collector stamps (Slurm's ``slurm-<jobid>.out``) is timed by the
    stamps its lines carry (:func:`jobout.own_stamp`); lines before the first of them
    take the job's sacct start (``inherited``, ``attrs["ts_from"] = "job_start"``).
    A file without a host of its own gets each line's host from its task label or rank
    (:class:`jobout.Who`)."""
    return _parse_lines(lines, ctx, candidates)[0]


def _parse_lines(lines: list[str], ctx: ParseContext, candidates: Iterable[int] | None,
                 stamped: bool | None = None) -> tuple[FileParse, set[int]]:
    """:func:`parse_lines`, and the lines inside the traceback blocks it found (their
    lane lines, left out of ``candidates`` by :func:`parse_many`, give no event:
    a lane line never opens a traceback, so leaving it out changes no block).

    A clock reads stamps backwards no further than its last query, so a candidate
    left out (a lane's) only makes the next one look a little further back: the
    nearest readable stamp above a line is the same either way."""
    fp = FileParse(lines=len(lines), shape="collector")
    in_traceback: set[int] = set()
    if not lines:
        return fp, in_traceback
    if candidates is None:
        candidates = candidate_indices(lines, CANDIDATE_RE)
    if stamped is None:
        stamped = jobout.has_collector_stamps(lines)
    # a collector's file is one host's: no srun labels are looked for (nor paid for)
    labelled = not stamped and jobout.is_labelled(lines)
    if not stamped:
        fp.shape = "slurm_out" if labelled else "unstamped"
        clock = ForwardClock(lines, ctx, functools.partial(jobout.own_stamp,
                                                           labelled=labelled, ctx=ctx))
    else:
        clock = Clock(lines, ctx, _collector_stamp)
    split = _labelled_split if labelled else _joblog_split
    who = jobout.Who(lines, labelled) if ctx.host is None else None
    start = ctx.job_window[0] if ctx.job_window and in_range(ctx.job_window[0]) else None
    events = fp.events
    for i in candidates:
        if i in in_traceback:
            continue
        info = line_info(lines[i], labelled)
        # info.stamp is what _collector_stamp gives (a STAMP_RE match starts with a digit)
        ts, quality = clock.at(i, own=info.nccl_stamp,
                               stamp=info.stamp if stamped else clock.stamp(lines[i]))
        from_start = ts is None and start is not None
        if from_start:
            ts, quality = start, "inherited"
        host, place = who.place(info.label, info.rank) if who else (None, None)
        if TRACEBACK_OPEN in info.body:
            block = collect_traceback(lines, i, split)
            in_traceback.update(set(block.own) - set(block.exc_lines))
            ev = traceback_event(block, ts, quality, info.rank, ctx.host or host, ctx.job_id)
        else:
            hit = classify(info, ctx)
            if hit is None:
                continue
            if hit.rule_id == "elastic.summary_exitcode":
                _summary_context(lines, i, hit, labelled)
            if place is None and who and hit.rank is not None:
                place = who.ranks.get(hit.rank)
            ev = ParsedEvent(
                line_no=i + 1, kind=hit.kind, message=cap(info.content), ts=ts,
                ts_quality=quality, host=hit.host or ctx.host or host
                or (place.host if place else None),
                device=hit.device or (place.device if place else None),
                job_id=ctx.job_id, rank=hit.rank, attrs=hit.attrs,
            )
        if from_start:
            ev.attrs["ts_from"] = "job_start"
        if place is not None and ev.rank is not None:
            ev.attrs.setdefault("cuda_dev", place.cuda_dev)
            if place.local_rank is not None:
                ev.attrs.setdefault("local_rank", place.local_rank)
        events.append(ev)
    return fp, in_traceback



def parse_line(line: str, ctx: ParseContext | None = None) -> list[ParsedEvent]:
    """The events of a single line read on its own (for table-driven tests)."""
    return parse(line, ctx or ParseContext(path="<line>")).events


def kinds(events: Iterable[ParsedEvent]) -> list[str]:
    return [e.kind for e in events]
